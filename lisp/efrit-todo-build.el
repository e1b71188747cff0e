;;; efrit-todo-build.el --- Build and load efrit-todo's dynamic module -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The efrit-todo developers

;; Author: The efrit-todo developers
;; Maintainer: The efrit-todo developers
;; Version: 0.1.0
;; Keywords: tools, convenience
;; URL: https://github.com/efrit-todo/efrit-todo

;; This file is not part of GNU Emacs.

;; This program is free software; you can redistribute it and/or modify
;; it under the terms of the GNU General Public License as published by
;; the Free Software Foundation, either version 3 of the License, or
;; (at your option) any later version.

;; This program is distributed in the hope that it will be useful,
;; but WITHOUT ANY WARRANTY; without even the implied warranty of
;; MERCHANTABILITY or FITNESS FOR A PARTICULAR PURPOSE.  See the
;; GNU General Public License for more details.

;; You should have received a copy of the GNU General Public License
;; along with this program.  If not, see <https://www.gnu.org/licenses/>.

;;; Commentary:

;; efrit-todo's lists live in a Rust dynamic module, efrit-todo-module.so
;; beside this file, built from the crate whose Cargo.toml is in the
;; directory above.  efrit-todo.el calls `efrit-todo-build--ensure' when
;; it loads: a module that is there is loaded; a missing one is built,
;; after asking (`efrit-todo-module-auto-build'), and only where the
;; source is.  Loading never fails for want of the module: the question
;; comes once at most, never in batch Emacs, a starting daemon or while
;; a file is byte-compiled (the adapters' modes ask when turned on),
;; and a module not built leaves one warning that says how to get it.
;;
;; cargo runs as an asynchronous process writing to *efrit-todo-build*,
;; so Emacs stays usable for the minute or more a first build takes.
;; The echo area shows cargo's own count of crates built and the time
;; so far, whenever it is not showing something else.  When cargo ends,
;; the module is copied beside this file and loaded: no restart.  Until
;; then each module function is a stand-in that signals
;; `efrit-todo-error' saying that the build is running and where to
;; watch it.  `efrit-todo-build-cancel', C-c C-k in the build buffer,
;; or killing that buffer stops the build; `efrit-todo-build-wait'
;; waits for it, for batch scripts.

;;; Code:

(require 'seq)
(require 'subr-x)

;;;; Errors

;; The module defines these when it loads (define_errors! in
;; src/ffi/errors.rs), and redefines them the same way: they are defined
;; here first so that efrit-todo can signal them, and callers catch
;; them, before the module is loaded.  Keep the two in step.
(define-error 'efrit-todo-error "efrit-todo error")
(define-error 'efrit-todo-invalid-input "Invalid efrit-todo input" 'efrit-todo-error)
(define-error 'efrit-todo-storage-error "efrit-todo storage error" 'efrit-todo-error)
(define-error 'efrit-todo-internal-error "efrit-todo internal error (please report it)"
  'efrit-todo-error)

(defun efrit-todo-build--command-error (show data context caller)
  "Have SHOW, a `command-error-function', show an efrit-todo error as a sentence.
An error of efrit-todo that reaches the command loop would be shown
with the name of the internal function that signalled it before it,
and its message in quotes with backslashes; it is shown as its
condition's message and the text, as an `error' is.  DATA, CONTEXT
and CALLER are as SHOW takes them."
  (if (and (consp data)
           (memq 'efrit-todo-error (get (car data) 'error-conditions))
           (stringp (cadr data)))
      (funcall show (list 'error (format "%s: %s" (get (car data) 'error-message) (cadr data)))
               context nil)
    (funcall show data context caller)))

(add-function :around command-error-function #'efrit-todo-build--command-error)

;;;; Options

(defgroup efrit-todo-build nil
  "Building efrit-todo's dynamic module with cargo."
  :group 'efrit-todo
  :prefix "efrit-todo-build-")

(defcustom efrit-todo-module-auto-build 'ask
  "What to do when the dynamic module is missing at load time.
`ask' asks before building it with cargo (and refuses in batch
mode), t builds it without asking, nil only reports the problem.
The build runs in the background; see `efrit-todo-build-module'.
It is offered only where efrit-todo's source is, in the directory
above the Lisp files."
  :type '(choice (const :tag "Ask first" ask)
                 (const :tag "Build without asking" t)
                 (const :tag "Never build" nil))
  :group 'efrit-todo-build)

(defcustom efrit-todo-build-cargo-program "cargo"
  "The cargo program that builds the module: a command name or a file name.
A command name is looked up in the variable `exec-path'; a bare \"cargo\" that
is not there is also looked for in ~/.cargo/bin, where rustup puts it."
  :type 'string
  :group 'efrit-todo-build)

;;;; State

(defconst efrit-todo-build-source-url "https://github.com/efrit-todo/efrit-todo"
  "Where efrit-todo's source, which the module is built from, can be had.")

(defconst efrit-todo-build-buffer-name "*efrit-todo-build*"
  "Name of the buffer that shows cargo's output.")

(defconst efrit-todo-build--file
  (or load-file-name buffer-file-name (expand-file-name "efrit-todo-build.el"))
  "This file, as it was loaded.")

(defconst efrit-todo-build--directory (file-name-directory efrit-todo-build--file)
  "Directory of the Lisp files, where the module lives.")

(defvar efrit-todo-build-loaded-hook nil
  "Hook run after a build has loaded the module into this Emacs.")

(defvar efrit-todo-build--process nil
  "The cargo process of the last build, or nil.")

(defvar efrit-todo-build--state nil
  "Where the last build stands.
nil (none started), `running', `cancelling', `done', `failed' or
`cancelled'.")

(defvar efrit-todo-build--started nil
  "The `float-time' at which the last build started.")

(defvar efrit-todo-build--progress nil
  "Cargo's count of the build, (DONE . TOTAL), or nil before the first.")

(defvar efrit-todo-build--compiled 0
  "How many \"Compiling\" lines the running build has printed.
The count shown when cargo prints no progress bar (an old cargo).")

(defvar efrit-todo-build--artifact nil
  "The shared object cargo said it built, or nil.")

(defvar efrit-todo-build--expected-file nil
  "Where the shared object is when cargo does not say: in the target directory.")

(defvar efrit-todo-build--version nil
  "The version the module must have, as efrit-todo.el gave it, or nil.")

(defvar efrit-todo-build--failure nil
  "Why the last build failed, as a sentence, or nil.")

(defvar efrit-todo-build--asked nil
  "Non-nil once this Emacs has asked whether to build the module.
It asks at most once: an answer of no stands until the user runs
\\[efrit-todo-build-module].")

(defvar efrit-todo-build--warned nil
  "Non-nil once the warning that the module is missing has been shown.
A build started clears it: its failure is worth a warning of its own.")

(defvar efrit-todo-build--timer nil
  "The timer that shows the running build's progress.")

(defvar efrit-todo-build--message nil
  "The build's message shown last, which the next progress replaces.")

(defvar efrit-todo-build--other-message nil
  "Another message in the echo area and when it was first seen, or nil.")

;;;; Where things are

(defun efrit-todo-build-module-file ()
  "Return the file name the module is loaded from."
  (expand-file-name (concat "efrit-todo-module" module-file-suffix)
                    efrit-todo-build--directory))

(defun efrit-todo-build--crate-p (directory)
  "Return non-nil if DIRECTORY has efrit-todo's Cargo.toml.
Another crate's Cargo.toml does not count: a lisp/ directory copied
into some Rust project must not build that project."
  (let ((toml (expand-file-name "Cargo.toml" directory)))
    (and (file-readable-p toml)
         (with-temp-buffer
           (insert-file-contents toml)
           (re-search-forward "^name *= *\"efrit-todo\"" nil t)))))

(defun efrit-todo-build-crate-directory ()
  "Return the directory holding efrit-todo's Cargo.toml, or nil.
It is the directory above the Lisp files; where those are symbolic
links (as package managers such as straight.el make), the directory
above the files they point to."
  (seq-find #'efrit-todo-build--crate-p
            (delete-dups
             (mapcar (lambda (file)
                       (file-name-directory
                        (directory-file-name (file-name-directory file))))
                     (list efrit-todo-build--file
                           (file-truename efrit-todo-build--file))))))

(defun efrit-todo-build--cargo ()
  "Return the cargo program to run, or nil when there is none."
  (or (executable-find efrit-todo-build-cargo-program)
      (and (equal efrit-todo-build-cargo-program "cargo")
           (let ((file (expand-file-name "~/.cargo/bin/cargo")))
             (and (file-executable-p file) file)))))

(defun efrit-todo-build--target-directory (crate)
  "Return cargo's target directory for CRATE.
`CARGO_TARGET_DIR', relative to CRATE, where cargo runs, or
CRATE/target."
  (let ((dir (getenv "CARGO_TARGET_DIR")))
    (file-name-as-directory
     (expand-file-name (if (and dir (not (string-empty-p dir))) dir "target") crate))))

(defun efrit-todo-build--library-name ()
  "Return the name cargo gives the shared object on this system."
  (pcase system-type
    ('darwin "libefrit_todo.dylib")
    ((or 'windows-nt 'ms-dos 'cygwin) "efrit_todo.dll")
    (_ "libefrit_todo.so")))

;;;; Before the module is loaded

(defun efrit-todo-build-module-loaded-p ()
  "Return non-nil when the module is loaded into this Emacs."
  (and (fboundp 'efrit-todo--module-version)
       (not (eq (symbol-function 'efrit-todo--module-version)
                'efrit-todo-build--not-loaded))))

(defun efrit-todo-build-running-p ()
  "Return non-nil while a module build is running."
  (and (memq efrit-todo-build--state '(running cancelling)) t))

(defun efrit-todo-build--signal (format-string &rest args)
  "Signal `efrit-todo-error' with a message from FORMAT-STRING and ARGS."
  (signal 'efrit-todo-error (list (apply #'format-message format-string args))))

(defun efrit-todo-build--progress-text ()
  "Return how far the running build is, e.g. \"23/56 crates, 41 s\"."
  (let ((seconds (format "%d s" (round (- (float-time) (or efrit-todo-build--started
                                                             (float-time)))))))
    (cond ((and efrit-todo-build--progress
                (> (cdr efrit-todo-build--progress) 1)
                (= (car efrit-todo-build--progress) (1- (cdr efrit-todo-build--progress))))
           ;; efrit-todo's own crate comes last and takes half the
           ;; build: a count that stands still would look stuck.
           (format "last crate, compiling and linking the module, %s" seconds))
          (efrit-todo-build--progress
           (format "%d/%d crates, %s" (car efrit-todo-build--progress)
                   (cdr efrit-todo-build--progress) seconds))
          ((> efrit-todo-build--compiled 0)
           (format "%d crates compiled, %s" efrit-todo-build--compiled seconds))
          (t seconds))))

(defun efrit-todo-build--status-text ()
  "Return why the module cannot be used now, as a sentence."
  (pcase efrit-todo-build--state
    ((or 'running 'cancelling)
     ;; Waiting blocks Emacs: advice for a batch script only.
     (format-message "the module is still being built (%s so far); watch the buffer %s, %s"
                     (efrit-todo-build--progress-text) efrit-todo-build-buffer-name
                     (if noninteractive
                         "or wait with (efrit-todo-build-wait)"
                       "and use efrit-todo once it is loaded (no restart needed)")))
    ('failed
     (format-message "the module is not loaded: its build failed (%s); see the buffer %s, then M-x efrit-todo-build-module"
                     efrit-todo-build--failure efrit-todo-build-buffer-name))
    ('cancelled
     "the module is not loaded: its build was cancelled; M-x efrit-todo-build-module builds it")
    (_ (or (efrit-todo-build--problem)
           (concat "the module is not loaded; M-x efrit-todo-build-module builds it"
                   (efrit-todo-build--batch-advice))))))

(defun efrit-todo-build--not-loaded (&rest _)
  "Stand in for a module function: signal that the module is not loaded yet."
  (signal 'efrit-todo-error (list (efrit-todo-build--status-text))))

(defun efrit-todo-build--install-stand-ins (&rest _)
  "Make every module function not yet defined signal why it is missing.
The Lisp code calls the module's functions, named
efrit-todo--module-NAME, directly; while it is not loaded, a call
then says that the build is running rather than void-function.
Run again after each file loads, as later files name more of them."
  (unless (efrit-todo-build-module-loaded-p)
    (mapatoms (lambda (symbol)
                (when (and (not (fboundp symbol))
                           (string-prefix-p "efrit-todo--module-" (symbol-name symbol)))
                  (fset symbol #'efrit-todo-build--not-loaded))))
    (add-hook 'after-load-functions #'efrit-todo-build--install-stand-ins)))

(defun efrit-todo-build--remove-stand-ins ()
  "Undefine the stand-ins the module did not replace."
  (remove-hook 'after-load-functions #'efrit-todo-build--install-stand-ins)
  (mapatoms (lambda (symbol)
              (when (eq (symbol-function symbol) 'efrit-todo-build--not-loaded)
                (fmakunbound symbol)))))

;;;; The build buffer

(defvar efrit-todo-build-mode-map
  (let ((map (make-sparse-keymap)))
    (define-key map (kbd "C-c C-k") #'efrit-todo-build-cancel)
    (define-key map "g" #'efrit-todo-build-module)
    map)
  "Keymap of the module build buffer.")

(declare-function compilation-mode "compile" (&optional name-of-mode))
(defvar compilation-error-regexp-alist)
(defvar json-object-type)
(defvar json-array-type)
(declare-function json-read-from-string "json" (string))

(define-derived-mode efrit-todo-build-mode compilation-mode "Cargo"
  "Major mode of *efrit-todo-build*, which shows cargo building the module.
\\<efrit-todo-build-mode-map>\\[efrit-todo-build-cancel] stops the build; \
\\[efrit-todo-build-module] starts it again.  Compiler messages lead to
their source line, as in `compilation-mode'."
  ;; rustc points at a problem with "  --> src/file.rs:LINE:COLUMN".
  (setq-local compilation-error-regexp-alist
              '(("^ *--> \\([^ \n:][^\n:]*\\):\\([0-9]+\\):\\([0-9]+\\)$" 1 2 3))))

(defun efrit-todo-build--insert (text)
  "Append TEXT to the build buffer; windows at its end stay at its end."
  (when-let* ((buffer (get-buffer efrit-todo-build-buffer-name)))
    (with-current-buffer buffer
      (let* ((inhibit-read-only t)
             (end (point-max))
             (windows (seq-filter (lambda (window) (= (window-point window) end))
                                  (get-buffer-window-list buffer nil t)))
             (follow (= (point) end)))
        (save-excursion
          (goto-char end)
          (insert text))
        (when follow (goto-char (point-max)))
        (dolist (window windows)
          (set-window-point window (point-max)))))))

(defun efrit-todo-build--free-echo-area-p ()
  "Return non-nil when the echo area may show the build's progress.
Not over a minibuffer or a prompt, nor over another message until it
has been there for 5 seconds: the build must not hide what the user
is reading or typing."
  (let ((current (current-message)))
    (and (not noninteractive)
         (not (active-minibuffer-window))
         (not cursor-in-echo-area)
         (or (null current)
             (equal current efrit-todo-build--message)
             (if (equal current (car efrit-todo-build--other-message))
                 (>= (- (float-time) (cdr efrit-todo-build--other-message)) 5)
               (setq efrit-todo-build--other-message (cons current (float-time)))
               nil)))))

(defun efrit-todo-build--show-progress ()
  "Show the running build's progress in its buffer's mode line and the echo area."
  (let ((text (efrit-todo-build--progress-text)))
    (when-let* ((buffer (get-buffer efrit-todo-build-buffer-name)))
      (with-current-buffer buffer
        (setq mode-line-process (concat ":" text))
        (force-mode-line-update)))
    (when (efrit-todo-build--free-echo-area-p)
      ;; Not logged: *Messages* gets the start and the end of the build.
      (let ((message-log-max nil))
        (setq efrit-todo-build--message
              (message "Efrit-todo: building the module, %s (see %s)"
                       text efrit-todo-build-buffer-name))))))

;;;; Reading cargo

(defun efrit-todo-build--artifact-file (line)
  "Return the shared object that LINE, one of cargo's JSON messages, names.
nil unless LINE reports efrit-todo's library."
  (when (and (string-match-p "\"reason\":\"compiler-artifact\"" line)
             (string-match-p "\"name\":\"efrit_todo\"" line))
    (let ((message (condition-case nil
                       (json-parse-string line :object-type 'alist :array-type 'list)
                     ;; An Emacs built without libjansson.
                     (json-unavailable
                      (require 'json)
                      (let ((json-object-type 'alist) (json-array-type 'list))
                        (ignore-errors (json-read-from-string line))))
                     (error nil))))
      (seq-find (lambda (file) (string-match-p "\\.\\(?:so\\|dylib\\|dll\\)\\'" file))
                (alist-get 'filenames message)))))

(defun efrit-todo-build--line (line transient)
  "Take in LINE of cargo's output; TRANSIENT when it ended with a carriage return.
cargo ends its progress bar with a carriage return so that the next
line overwrites it: that is read for the count, never shown.  JSON
messages are read for the file built."
  (cond
   ((string-match "\\`[ \t]*Building \\[[^]\n]*\\] \\([0-9]+\\)/\\([0-9]+\\)" line)
    (setq efrit-todo-build--progress (cons (string-to-number (match-string 1 line))
                                           (string-to-number (match-string 2 line)))))
   (transient nil)
   ((string-prefix-p "{" line)
    (when-let* ((file (efrit-todo-build--artifact-file line)))
      (setq efrit-todo-build--artifact file)))
   (t
    (when (string-match-p "\\`[ \t]*Compiling " line)
      (setq efrit-todo-build--compiled (1+ efrit-todo-build--compiled)))
    (when noninteractive
      (message "%s" line))
    (efrit-todo-build--insert (concat line "\n")))))

(defun efrit-todo-build--filter (process output)
  "Split OUTPUT of PROCESS into lines for `efrit-todo-build--line'."
  (let ((text (concat (process-get process 'efrit-todo-build-pending) output))
        (start 0))
    ;; The LF of a CR LF whose CR ended the last output.
    (when (and (process-get process 'efrit-todo-build-cr)
               (string-prefix-p "\n" text))
      (setq start 1))
    (while (string-match "\r\n\\|\r\\|\n" text start)
      (let ((line (substring text start (match-beginning 0)))
            (transient (equal (match-string 0 text) "\r")))
        (setq start (match-end 0))
        (efrit-todo-build--line line transient)))
    (process-put process 'efrit-todo-build-cr (string-suffix-p "\r" text))
    (process-put process 'efrit-todo-build-pending (substring text start))))

;;;; The end of a build

(defun efrit-todo-build--stop-timer ()
  "Stop showing progress."
  (when (timerp efrit-todo-build--timer)
    (cancel-timer efrit-todo-build--timer))
  (setq efrit-todo-build--timer nil))

(defun efrit-todo-build--copy (from to)
  "Copy the shared object FROM to TO by a rename.
A module already loaded from TO stays mapped in memory: writing into
that file would crash Emacs, replacing it does not."
  (let ((temp (make-temp-name (concat to ".new-"))))
    (unwind-protect
        (progn (copy-file from temp t)
               (rename-file temp to t))
      (when (file-exists-p temp)
        (delete-file temp)))))

(declare-function efrit-todo--module-version "efrit-todo-module" ())

(defun efrit-todo-build--check-version (version)
  "Signal an error unless the loaded module has VERSION (nil: any)."
  (let ((module-version (efrit-todo--module-version)))
    (when (and version (not (equal module-version version)))
      (efrit-todo-build--signal
       "the loaded module is version %s but the Lisp code is %s; run M-x efrit-todo-build-module and restart Emacs"
       module-version version))))

(defun efrit-todo-build--end (state text)
  "Record that the build ended in STATE; tell the user TEXT."
  (setq efrit-todo-build--state state)
  (when-let* ((buffer (get-buffer efrit-todo-build-buffer-name)))
    (with-current-buffer buffer
      (setq mode-line-process (format ":%s" state))
      (force-mode-line-update)))
  (efrit-todo-build--insert (concat "\n" text "\n"))
  (message "%s" text))

(defun efrit-todo-build--fail (reason)
  "End the build as failed for REASON, showing its buffer."
  (setq efrit-todo-build--failure reason)
  (efrit-todo-build--end
   'failed (format-message "Efrit-todo: building the module failed after %d s: %s; see the buffer %s"
                           (round (- (float-time) efrit-todo-build--started))
                           reason efrit-todo-build-buffer-name))
  (when-let* ((buffer (get-buffer efrit-todo-build-buffer-name)))
    (display-buffer buffer))
  (unless (efrit-todo-build-module-loaded-p)
    (efrit-todo-build--warn
     (format-message "its module could not be built (%s), so Efrit and gptel run without efrit-todo for now.  See the buffer %s for why, then M-x efrit-todo-build-module to build it again"
                     reason efrit-todo-build-buffer-name))))

(defun efrit-todo-build--succeed ()
  "Copy the module cargo built beside the Lisp files, and load it."
  (let ((built (or efrit-todo-build--artifact efrit-todo-build--expected-file))
        (target (efrit-todo-build-module-file))
        (was-loaded (efrit-todo-build-module-loaded-p)))
    (unless (file-exists-p built)
      (error "Cargo ended well but %s is not there" built))
    (efrit-todo-build--copy built target)
    (efrit-todo-build--insert (format "\nCopied %s\n    to %s\n" built target))
    (unless was-loaded
      (module-load target)
      (efrit-todo-build--remove-stand-ins))
    (efrit-todo-build--check-version efrit-todo-build--version)
    (efrit-todo-build--end
     'done (if was-loaded
               (format "Efrit-todo: module built in %d s; restart Emacs to use it (a loaded module cannot be replaced)"
                       (round (- (float-time) efrit-todo-build--started)))
             (format "Efrit-todo: module built in %d s and loaded; %s"
                     (round (- (float-time) efrit-todo-build--started))
                     (if (featurep 'efrit-todo)
                         "efrit-todo is ready"
                       "(require 'efrit-todo) loads efrit-todo now"))))
    (unless was-loaded
      (efrit-todo-build--run-loaded-hook))))

(defun efrit-todo-build--run-loaded-hook ()
  "Run `efrit-todo-build-loaded-hook', reporting an error as a warning."
  (condition-case err
      (run-hooks 'efrit-todo-build-loaded-hook)
    (error (display-warning 'efrit-todo
                            (format "after loading the module: %s"
                                    (error-message-string err))))))

(defun efrit-todo-build--sentinel (process _event)
  "End the build when PROCESS, cargo, has ended."
  (when (and (eq process efrit-todo-build--process)
             (memq (process-status process) '(exit signal)))
    (let ((rest (process-get process 'efrit-todo-build-pending)))
      (process-put process 'efrit-todo-build-pending nil)
      (unless (member rest '(nil ""))
        (efrit-todo-build--line rest nil)))
    (efrit-todo-build--stop-timer)
    (cond
     ((or (eq efrit-todo-build--state 'cancelling)
          (not (buffer-live-p (process-buffer process))))
      (efrit-todo-build--end
       'cancelled (format "Efrit-todo: module build cancelled after %d s; M-x efrit-todo-build-module starts it again"
                          (round (- (float-time) efrit-todo-build--started))))
      (unless (efrit-todo-build-module-loaded-p)
        (efrit-todo-build--warn
         "its module build was cancelled, so Efrit and gptel run without efrit-todo for now.  M-x efrit-todo-build-module starts the build again")))
     ((and (eq (process-status process) 'exit) (zerop (process-exit-status process)))
      (condition-case err
          (efrit-todo-build--succeed)
        (error (efrit-todo-build--fail (error-message-string err)))))
     ((eq (process-status process) 'exit)
      (efrit-todo-build--fail (format "cargo exited with code %d" (process-exit-status process))))
     (t
      (efrit-todo-build--fail (format "cargo was killed by signal %d" (process-exit-status process)))))))

;;;; Commands

(defun efrit-todo-build--start (crate cargo)
  "Start CARGO building the module of CRATE; return the process."
  (require 'compile)
  (let* ((buffer (get-buffer-create efrit-todo-build-buffer-name))
         (command (list cargo "build" "--release" "--message-format=json-render-diagnostics"))
         ;; Without a terminal cargo prints no progress bar unless told;
         ;; the bar gives the count of crates built and to build.
         (process-environment (append '("CARGO_TERM_PROGRESS_WHEN=always"
                                        "CARGO_TERM_PROGRESS_WIDTH=100"
                                        "CARGO_TERM_COLOR=never")
                                      process-environment))
         (default-directory crate))
    (with-current-buffer buffer
      (let ((inhibit-read-only t))
        (erase-buffer))
      (efrit-todo-build-mode)
      (setq default-directory crate)
      (efrit-todo-build--insert
       (format "Building efrit-todo's module in %s\n%s\n\n" crate
               (string-join command " "))))
    (setq efrit-todo-build--state 'running
          efrit-todo-build--warned nil
          efrit-todo-build--started (float-time)
          efrit-todo-build--progress nil
          efrit-todo-build--compiled 0
          efrit-todo-build--artifact nil
          efrit-todo-build--failure nil
          efrit-todo-build--message nil
          efrit-todo-build--expected-file
          (expand-file-name (concat "release/" (efrit-todo-build--library-name))
                            (efrit-todo-build--target-directory crate))
          efrit-todo-build--process
          (make-process :name "efrit-todo-build" :buffer buffer :command command
                        :connection-type 'pipe :coding 'utf-8
                        :filter #'efrit-todo-build--filter
                        :sentinel #'efrit-todo-build--sentinel))
    (efrit-todo-build--install-stand-ins)
    (efrit-todo-build--stop-timer)
    (setq efrit-todo-build--timer (run-at-time 1 1 #'efrit-todo-build--show-progress))
    (setq efrit-todo-build--message
          (message (substitute-command-keys
                    "Efrit-todo: building the module with cargo in the background; watch the buffer %s, \\[efrit-todo-build-cancel] stops it")
                   efrit-todo-build-buffer-name))
    efrit-todo-build--process))

;;;###autoload
(defun efrit-todo-build-module (&optional wait)
  "Build efrit-todo's dynamic module with cargo, then load it.
cargo runs in the background, Emacs stays usable, and its output
goes to the buffer *efrit-todo-build*; the echo area shows how many
crates are built.  When cargo ends, the module is copied beside the
Lisp files and loaded.  Until then, efrit-todo's functions signal
`efrit-todo-error' saying that the build is running.  A module that
is already loaded stays in use until Emacs restarts: Emacs cannot
unload a module.  `efrit-todo-build-cancel' stops the build.

With WAIT non-nil, as a batch script wants, return only when the
build has ended: non-nil when the module is loaded, else signal
`efrit-todo-error'.  Otherwise return the cargo process.  While a
build runs, start no other."
  (interactive)
  (unless module-file-suffix
    (efrit-todo-build--signal "this Emacs was built without dynamic module support, which efrit-todo needs"))
  (if (efrit-todo-build-running-p)
      (when (called-interactively-p 'interactive)
        (message "Efrit-todo: the module is already being built (%s); see the buffer %s"
                 (efrit-todo-build--progress-text) efrit-todo-build-buffer-name))
    (let ((crate (or (efrit-todo-build-crate-directory)
                     (efrit-todo-build--signal "%s" (efrit-todo-build--no-source-text))))
          (cargo (or (efrit-todo-build--cargo)
                     (efrit-todo-build--signal "%s" (efrit-todo-build--no-cargo-text)))))
      (efrit-todo-build--start crate cargo)))
  (if wait
      (efrit-todo-build-wait)
    efrit-todo-build--process))

;;;###autoload
(defun efrit-todo-build-cancel ()
  "Stop the running module build.
Return non-nil if there was one to stop."
  (interactive)
  (if (not (efrit-todo-build-running-p))
      (progn (when (called-interactively-p 'interactive)
               (message "Efrit-todo: no module build is running"))
             nil)
    (let ((process efrit-todo-build--process))
      (setq efrit-todo-build--state 'cancelling)
      ;; cargo runs in its own process group, with the rustc processes it
      ;; started: the interrupt stops them all, as C-c in a shell does.
      (when (process-live-p process)
        (interrupt-process process)
        (run-at-time 5 nil (lambda ()
                             (when (process-live-p process)
                               (delete-process process)))))
      t)))

(defun efrit-todo-build-wait (&optional timeout)
  "Wait for the module build to end; return non-nil once the module is loaded.
For batch scripts, which have nothing else to do meanwhile (in an
interactive Emacs, \\[keyboard-quit] stops waiting, not the build).
Signal `efrit-todo-error' when the build fails or is cancelled, when
TIMEOUT seconds pass first, or when no build runs and the module is
not loaded."
  (let ((deadline (and timeout (+ (float-time) timeout))))
    (while (and (efrit-todo-build-running-p)
                (or (null deadline) (< (float-time) deadline)))
      ;; A process that has exited but whose sentinel has not run yet
      ;; has no more output: wait for anything, which runs the sentinel.
      (accept-process-output (and (process-live-p efrit-todo-build--process)
                                  efrit-todo-build--process)
                             0.2))
    (cond ((efrit-todo-build-running-p)
           (efrit-todo-build--signal "the module build is still running after %s s (%s); watch the buffer %s"
                                    timeout (efrit-todo-build--progress-text)
                                    efrit-todo-build-buffer-name))
          ((memq efrit-todo-build--state '(failed cancelled))
           (efrit-todo-build--signal "%s" (efrit-todo-build--status-text)))
          ((efrit-todo-build-module-loaded-p) t)
          (t (efrit-todo-build--signal "%s" (efrit-todo-build--status-text))))))

;;;; At load time

(defun efrit-todo-build--batch-advice ()
  "Return how a batch script gets the module, or \"\" in an interactive Emacs."
  (if noninteractive
      "; a batch script builds it first with (require 'efrit-todo-build) (efrit-todo-build-module t)"
    ""))

(defun efrit-todo-build--no-source-text ()
  "Return what to do when the module is missing and cannot be built here."
  (format-message "the module %s is missing, and efrit-todo's source (Cargo.toml) is not in the directory above %s to build it from.  Get the source (git clone %s), run `make' in it (Rust from https://rustup.rs needed), and put its lisp/ directory in `load-path'; or copy a built efrit-todo-module%s into %s"
                  (file-name-nondirectory (efrit-todo-build-module-file))
                  efrit-todo-build--directory efrit-todo-build-source-url
                  module-file-suffix efrit-todo-build--directory))

(defun efrit-todo-build--no-cargo-text ()
  "Return what to do when the module is missing and cargo is not installed."
  (format-message "the module %s is missing and cargo, which builds it, is not found (`efrit-todo-build-cargo-program' is %s): install Rust from https://rustup.rs, then run `make' in %s or M-x efrit-todo-build-module"
                  (file-name-nondirectory (efrit-todo-build-module-file))
                  efrit-todo-build-cargo-program (efrit-todo-build-crate-directory)))

(defun efrit-todo-build--problem ()
  "Return why the missing module cannot be built here, as a sentence, or nil."
  (cond ((not module-file-suffix)
         "this Emacs was built without dynamic module support, which efrit-todo needs")
        ((not (efrit-todo-build-crate-directory)) (efrit-todo-build--no-source-text))
        ((not (efrit-todo-build--cargo)) (efrit-todo-build--no-cargo-text))))

(defun efrit-todo-build--compiling-p ()
  "Return non-nil while a file is being byte-compiled.
A package install compiles efrit-todo's files, which load this one:
that is no time to ask anything."
  (bound-and-true-p byte-compile-current-file))

(defun efrit-todo-build--daemon-starting-p ()
  "Return non-nil in a daemon with no client frame selected.
Such an Emacs has no terminal to ask on: a question would read from
its standard input."
  (and (daemonp)
       (or (null terminal-frame)
           (eq (frame-terminal (selected-frame)) (frame-terminal terminal-frame)))))

(defun efrit-todo-build--not-built-text ()
  "Return the warning for a module left unbuilt by choice."
  (format-message "its module %s is not built, so Efrit and gptel run without efrit-todo for now.  %sM-x efrit-todo-build-module builds it in the background (Emacs stays usable), or run `make' in %s%s"
                  (file-name-nondirectory (efrit-todo-build-module-file))
                  (if (and (eq efrit-todo-module-auto-build 'ask)
                           (efrit-todo-build--daemon-starting-p))
                      "A daemon cannot ask whether to build it.  "
                    "")
                  (efrit-todo-build-crate-directory)
                  (efrit-todo-build--batch-advice)))

(defun efrit-todo-build--warn (text)
  "Show TEXT as efrit-todo's warning, unless one was shown already."
  (unless efrit-todo-build--warned
    (setq efrit-todo-build--warned t)
    (display-warning 'efrit-todo text)))

(defun efrit-todo-build--may-build-p ()
  "Return non-nil when the missing module may be built now.
Asks, once, where `efrit-todo-module-auto-build' says to ask and
there is someone to ask."
  (pcase efrit-todo-module-auto-build
    ('ask (and (not noninteractive)
               (not (efrit-todo-build--daemon-starting-p))
               (not efrit-todo-build--asked)
               (progn
                 (setq efrit-todo-build--asked t)
                 (y-or-n-p "Efrit-todo needs its module: build it with cargo in the background? "))))
    (setting setting)))

(defun efrit-todo-build-offer ()
  "Build the missing module if the user wants it; else warn how to get it.
Nothing happens while the module is loaded or being built, nor while
a file is byte-compiled (a package install): the adapters' modes
offer it when they are turned on.  A module put beside the Lisp files
since efrit-todo was loaded is loaded.  The question is asked at most
once per Emacs (see `efrit-todo-module-auto-build'), never in batch
Emacs or in a daemon without a client frame; the warning is shown
once.  Never signals: an init file goes on.  Return non-nil when the
module is loaded or being built."
  (cond
   ((or (efrit-todo-build-module-loaded-p) (efrit-todo-build-running-p)) t)
   ((efrit-todo-build--compiling-p) nil)
   ;; Put there since efrit-todo was loaded, as the README's package
   ;; install does: load it now, without a restart.
   ((and module-file-suffix (file-exists-p (efrit-todo-build-module-file)))
    (condition-case err
        (progn (module-load (efrit-todo-build-module-file))
               (efrit-todo-build--remove-stand-ins)
               (efrit-todo-build--check-version efrit-todo-build--version)
               (efrit-todo-build--run-loaded-hook)
               t)
      (error (efrit-todo-build--warn (error-message-string err))
             (efrit-todo-build-module-loaded-p))))
   (t
    (let ((problem (efrit-todo-build--problem)))
      (cond
       (problem (efrit-todo-build--warn problem))
       ((efrit-todo-build--may-build-p)
        ;; A batch Emacs waits: a batch script goes on to call efrit-todo.
        (condition-case err
            (efrit-todo-build-module noninteractive)
          (error (efrit-todo-build--warn (error-message-string err)))))
       (t (efrit-todo-build--warn (efrit-todo-build--not-built-text)))))
    (or (efrit-todo-build-module-loaded-p) (efrit-todo-build-running-p)))))

(defun efrit-todo-build--ensure (version)
  "Load the module and check that it has VERSION; offer to build it when missing.
A build runs in the background, except in batch Emacs, which waits
for it.  A module that is missing and not built leaves stand-ins
that say so when called, and one warning (see
`efrit-todo-build-offer'): loading efrit-todo never fails for want
of its module."
  (setq efrit-todo-build--version version)
  (unless (efrit-todo-build-module-loaded-p)
    (let ((file (efrit-todo-build-module-file)))
      (if (and module-file-suffix (file-exists-p file))
          (progn (module-load file)
                 (efrit-todo-build--remove-stand-ins))
        (efrit-todo-build--install-stand-ins)
        (efrit-todo-build-offer))))
  (when (efrit-todo-build-module-loaded-p)
    (efrit-todo-build--check-version version)))

(defun efrit-todo-build-unload-function ()
  "Stop a running build and its progress when this file is unloaded."
  (efrit-todo-build--stop-timer)
  (when (process-live-p efrit-todo-build--process)
    (set-process-sentinel efrit-todo-build--process #'ignore)
    (delete-process efrit-todo-build--process))
  (efrit-todo-build--remove-stand-ins)
  (remove-function command-error-function #'efrit-todo-build--command-error)
  nil)

(provide 'efrit-todo-build)

;; Local Variables:
;; package-lint-main-file: "efrit-todo.el"
;; End:

;;; efrit-todo-build.el ends here
