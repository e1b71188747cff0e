;;; efrit-todo-setup-test.el --- The README's set-up, done in fresh Emacsen in every order -*- lexical-binding: t; -*-

;;; Commentary:

;; Each test starts a fresh `emacs -Q -nw' in a pseudo-terminal, with
;; HOME in a temporary directory, and an init file made of set-up lines
;; as the README gives them (the directory names filled in), in some
;; order with Efrit's own set-up lines:
;;
;;   (add-to-list 'load-path "/path/to/efrit/lisp")
;;   (require 'efrit)
;;
;; which put Efrit's lisp/core, holding Efrit's own efrit-todo.el, at
;; the front of `load-path'.  With EFRIT_DIR set, that is the Efrit
;; checkout there; otherwise test/fake-efrit, a stand-in that does the
;; same with an efrit-todo.el of its own.  Then
;; efrit-todo-setup-probe.el checks, in that Emacs, that the mode is
;; on, that efrit-todo's module-backed functions are the ones in use
;; (also by Efrit's code), that the mode line shows a list written,
;; and that turning the mode off takes the indicator away again.
;;
;; The package tests install into a temporary `package-user-dir':
;; `package-install-file' on lisp/ and on a tar made as an archive
;; would make it (no module in it), and on Emacs 29 and later
;; `package-vc-install' from a git repository of the working tree.
;;
;; The child Emacs is the program EMACS names when it is set and
;; runnable, else this Emacs's own executable.

;;; Code:

(require 'ert)
(require 'seq)
(require 'subr-x)
(require 'package)
(require 'efrit-todo)
(require 'efrit-todo-ui)
(require 'efrit-todo-shadow)
(require 'efrit-todo-efrit)

(defconst efrit-todo-setup-test--top
  (file-name-as-directory
   (expand-file-name ".." (file-name-directory (or load-file-name buffer-file-name))))
  "The top directory of the efrit-todo checkout.")

(defconst efrit-todo-setup-test--lisp
  (expand-file-name "lisp/" efrit-todo-setup-test--top)
  "The checkout's Lisp directory, which the README's `load-path' line names.")

(defconst efrit-todo-setup-test--readme-lisp "/path/to/efrit-todo/lisp"
  "The directory as the README's snippets spell it.")

;;;; The snippets, as the README gives them

(defconst efrit-todo-setup-test--efrit-snippet
  "(add-to-list 'load-path \"/path/to/efrit-todo/lisp\")
(require 'efrit-todo-efrit)
(efrit-todo-efrit-mode 1)
"
  "Efrit users' set-up: works in any order with Efrit's lines.")

(defconst efrit-todo-setup-test--efrit-snippet-short
  "(add-to-list 'load-path \"/path/to/efrit-todo/lisp\")
(require 'efrit-todo)
(efrit-todo-efrit-mode 1)
"
  "The set-up with `efrit-todo' required, as one block before or after Efrit's.
Its require finds Efrit's file when Efrit's lines come between the
`load-path' line and it: nothing of efrit-todo runs before then.")

(defconst efrit-todo-setup-test--gptel-snippet
  "(add-to-list 'load-path \"/path/to/efrit-todo/lisp\")
(require 'efrit-todo-gptel)
(efrit-todo-gptel-mode 1)
"
  "The gptel users' set-up.")

(defconst efrit-todo-setup-test--gptel-snippet-short
  "(add-to-list 'load-path \"/path/to/efrit-todo/lisp\")
(require 'efrit-todo)
(efrit-todo-gptel-mode 1)
"
  "The gptel users' set-up with `efrit-todo' required.")

;;;; Running a fresh Emacs

(defun efrit-todo-setup-test--skip (reason)
  "Skip the test for REASON, saying so: ERT's batch summary does not."
  (message "Skipped: %s" reason)
  (ert-skip reason))

(defun efrit-todo-setup-test--emacs ()
  "Return the Emacs program the children run."
  (let ((named (getenv "EMACS")))
    (or (and named (not (string-empty-p named)) (executable-find named))
        (expand-file-name invocation-name invocation-directory))))

(defun efrit-todo-setup-test--efrit-dir ()
  "Return the Efrit checkout to set up: EFRIT_DIR, else the stand-in."
  (file-name-as-directory
   (or (getenv "EFRIT_DIR")
       (expand-file-name "test/fake-efrit" efrit-todo-setup-test--top))))

(defun efrit-todo-setup-test--efrit-lines ()
  "Return Efrit's set-up lines, as Efrit's README gives them."
  (format "(add-to-list 'load-path %S)\n(require 'efrit)\n"
          (expand-file-name "lisp" (efrit-todo-setup-test--efrit-dir))))

(defun efrit-todo-setup-test--gptel-path ()
  "Return lines that put gptel in `load-path': GPTEL_DIR, else the stand-in.
For gptel installed as a package, startup does this."
  (mapconcat (lambda (dir) (format "(add-to-list 'load-path %S)\n" dir))
             (if-let* ((dir (getenv "GPTEL_DIR")))
                 (append (split-string (or (getenv "GPTEL_LOAD_PATH") "") ":" t) (list dir))
               (list (expand-file-name "test/fake-gptel" efrit-todo-setup-test--top)))
             ""))

(defun efrit-todo-setup-test--fill (snippet &optional lisp)
  "Return SNIPPET with the README's directory replaced by LISP.
LISP defaults to this checkout's Lisp directory."
  (string-replace efrit-todo-setup-test--readme-lisp
                  (directory-file-name (or lisp efrit-todo-setup-test--lisp))
                  snippet))

(defun efrit-todo-setup-test--split (snippet)
  "Return SNIPPET as (LOAD-PATH-LINE . REST)."
  (let ((lines (split-string snippet "\n" t)))
    (cons (concat (car lines) "\n") (concat (string-join (cdr lines) "\n") "\n"))))

(defun efrit-todo-setup-test--watchdog (out)
  "Return a form that reports a failed set-up in file OUT and exits.
An error in the init file leaves Emacs waiting for keys, and so does
a question: once Emacs is idle, or at the latest after 90 s, the form
writes *Messages* and what the echo area shows, and exits with 2."
  `(let ((report (lambda ()
                   (with-temp-file ,out
                     (prin1 (list :failed
                                  (with-current-buffer "*Messages*" (buffer-string))
                                  (current-message)
                                  (and (active-minibuffer-window)
                                       (with-current-buffer
                                           (window-buffer (active-minibuffer-window))
                                         (buffer-string))))
                            (current-buffer)))
                   (kill-emacs 2))))
     (run-with-idle-timer 2 nil report)
     (run-at-time 90 nil report)))

(defun efrit-todo-setup-test--run (init &rest options)
  "Run a fresh `emacs -Q -nw' with INIT as its init file; return the findings.
OPTIONS: :mode the adapter's mode to probe (default the Efrit one),
:mx a command to run as \\[execute-extended-command] does before
probing, :home the HOME
directory (default a new temporary one).  The findings are the plist
of efrit-todo-setup-probe.el; a set-up that fails ends the test with
what Emacs showed."
  (let* ((home (or (plist-get options :home) (make-temp-file "efrit-todo-home-" t)))
         (init-file (expand-file-name "init.el" home))
         (out (expand-file-name "findings.eld" home))
         (process-environment
          (append (list (concat "HOME=" home)
                        "TERM=vt100"
                        (concat "EFRIT_TODO_SETUP_OUT=" out)
                        (concat "EFRIT_TODO_SETUP_MODE"
                                (if-let* ((mode (plist-get options :mode)))
                                    (concat "=" (symbol-name mode)) ""))
                        (concat "EFRIT_TODO_SETUP_MX"
                                (if-let* ((mx (plist-get options :mx))) (concat "=" mx) "")))
                  process-environment))
         (process nil))
    (with-temp-file init-file (insert init))
    (setq process (make-process
                   :name "efrit-todo-setup" :buffer nil :connection-type 'pty :noquery t
                   :command (list (efrit-todo-setup-test--emacs) "-Q" "-nw"
                                  "--eval" (prin1-to-string (efrit-todo-setup-test--watchdog out))
                                  "-l" init-file
                                  "-l" (expand-file-name "test/efrit-todo-setup-probe.el"
                                                         efrit-todo-setup-test--top))))
    ;; Wide enough that the indicator is never what is cut off.
    (set-process-window-size process 30 160)
    (while (process-live-p process)
      (accept-process-output process 0.1))
    (let ((result (and (file-exists-p out)
                       (with-temp-buffer (insert-file-contents out) (read (current-buffer))))))
      (unless (plist-get options :home)
        (delete-directory home t))
      (unless (eq (car result) :findings)
        (ert-fail (list "The set-up failed" :init init :exit (process-exit-status process)
                        :shown (cdr result))))
      (cdr result))))

(defun efrit-todo-setup-test--batch-all (&rest forms)
  "Run FORMS in a fresh batch Emacs; return (EXIT-STATUS OUTPUT MESSAGES).
OUTPUT is what it printed to standard output, MESSAGES its standard
error.  Its HOME is a new, empty directory but for ~/.emacs.d, deleted
afterwards: nothing under the user's HOME is read or written."
  (let ((errors (make-temp-file "efrit-todo-stderr-"))
        (home (make-temp-file "efrit-todo-home-" t)))
    (make-directory (expand-file-name ".emacs.d" home))
    (unwind-protect
        (with-temp-buffer
          (let* ((process-environment (cons (concat "HOME=" home) process-environment))
                 (status (apply #'call-process (efrit-todo-setup-test--emacs) nil
                                (list t errors) nil "-Q" "--batch"
                                (mapcan (lambda (form) (list "--eval" (prin1-to-string form)))
                                        forms))))
            (list status (buffer-string)
                  (with-temp-buffer (insert-file-contents errors) (buffer-string)))))
      (delete-file errors)
      (delete-directory home t))))

(defun efrit-todo-setup-test--batch (&rest forms)
  "Run FORMS in a fresh batch Emacs; return (EXIT-STATUS . OUTPUT).
OUTPUT is what it printed to standard output; its messages (standard
error) are left out, unless it failed.  See `efrit-todo-setup-test--batch-all'."
  (pcase-let ((`(,status ,output ,messages) (apply #'efrit-todo-setup-test--batch-all forms)))
    (cons status (if (eql status 0) output (concat output messages)))))

;;;; What a working set-up shows

(defun efrit-todo-setup-test--in-p (file dir)
  "Return non-nil if FILE is in directory DIR."
  (and (stringp file)
       (file-equal-p (file-name-directory file) (file-name-as-directory dir))))

(defun efrit-todo-setup-test--check (findings &optional lisp)
  "Check FINDINGS of a set-up that must work, from efrit-todo's files in LISP.
LISP defaults to this checkout's Lisp directory."
  (let ((lisp (or lisp efrit-todo-setup-test--lisp)))
    (should (eq (plist-get findings :mode-on) t))
    ;; The module-backed efrit-todo is the one in use, including the
    ;; names Efrit's own efrit-todo.el defines too.
    (should (efrit-todo-setup-test--in-p (plist-get findings :core-file) lisp))
    (should (equal (file-name-base (plist-get findings :compat-file)) "efrit-todo-compat"))
    (should (efrit-todo-setup-test--in-p (plist-get findings :compat-file) lisp))
    (should (string-match-p "\\`\\[TODO list updated" (plist-get findings :write)))
    (should (string-match-p "\\bt1\\b.*Probe the set-up" (plist-get findings :write)))
    ;; The indicator shows the list in the mode line as drawn.
    (should (eq (plist-get findings :indicator) t))
    (should (string-match-p "Todo 0/2" (plist-get findings :mode-line)))
    ;; Turning the mode off takes away the indicator it turned on.
    (should (eq (plist-get findings :off) t))
    (should-not (plist-get findings :indicator-after-off))
    (should-not (string-match-p "Todo 0/2" (plist-get findings :mode-line-after-off)))))

(defun efrit-todo-setup-test--check-efrit (findings &optional lisp)
  "Check FINDINGS of an Efrit set-up that must work, from LISP.
Efrit's own code, reading the list through its variable, sees the
module's items and ids."
  (efrit-todo-setup-test--check findings lisp)
  (should (equal (plist-get findings :efrit-view) '("t1" "t2"))))

(defun efrit-todo-setup-test--orders (snippet)
  "Return (NAME . INIT) for each order of SNIPPET and Efrit's set-up lines."
  (pcase-let ((`(,path-line . ,rest) (efrit-todo-setup-test--split
                                       (efrit-todo-setup-test--fill snippet)))
              (efrit (efrit-todo-setup-test--efrit-lines)))
    `(("efrit-todo, then Efrit" . ,(concat path-line rest efrit))
      ("Efrit, then efrit-todo" . ,(concat efrit path-line rest))
      ;; As in an init file that sets load-path up first, then packages.
      ("efrit-todo's load-path line, Efrit, the rest" . ,(concat path-line efrit rest))
      ;; Efrit's code loaded its own efrit-todo.el before efrit-todo's lines.
      ("Efrit, its efrit-do required, then efrit-todo"
       . ,(concat efrit "(require 'efrit-do)\n" path-line rest)))))

(defmacro efrit-todo-setup-test--each (cases &rest body)
  "Run BODY with `name' and `init' bound for each (NAME . INIT) of CASES.
A failure names the case."
  (declare (indent 1))
  `(dolist (case ,cases)
     (let ((name (car case)) (init (cdr case)))
       (ignore name init)
       (condition-case err
           (progn ,@body)
         (ert-test-failed
          (signal (car err) (list (cons (format "order: %s" (car case)) (cdr err)))))))))

;;;; The tests

(ert-deftest efrit-todo-setup-test-efrit-in-every-order ()
  "The Efrit snippet works before, after and around Efrit's lines.
Also when Efrit's code loaded Efrit's efrit-todo.el first."
  (efrit-todo-setup-test--each (efrit-todo-setup-test--orders efrit-todo-setup-test--efrit-snippet)
    (efrit-todo-setup-test--check-efrit (efrit-todo-setup-test--run init))))

(ert-deftest efrit-todo-setup-test-efrit-require-efrit-todo-as-one-block ()
  "With `(require \\='efrit-todo)', the snippet works before or after Efrit's lines."
  (efrit-todo-setup-test--each
      (seq-take (efrit-todo-setup-test--orders efrit-todo-setup-test--efrit-snippet-short) 2)
    (efrit-todo-setup-test--check-efrit (efrit-todo-setup-test--run init))))

(ert-deftest efrit-todo-setup-test-efrit-mode-by-m-x ()
  "\\[execute-extended-command] works after the `load-path' line and a require.
The command is `efrit-todo-efrit-mode'."
  (efrit-todo-setup-test--each
      `(("require efrit-todo, then Efrit's lines"
         . ,(concat (efrit-todo-setup-test--fill
                     "(add-to-list 'load-path \"/path/to/efrit-todo/lisp\")\n(require 'efrit-todo)\n")
                    (efrit-todo-setup-test--efrit-lines)))
        ("require efrit-todo-efrit, around Efrit's lines"
         . ,(pcase-let ((`(,path-line . ,_) (efrit-todo-setup-test--split
                                              (efrit-todo-setup-test--fill
                                               efrit-todo-setup-test--efrit-snippet))))
              (concat path-line (efrit-todo-setup-test--efrit-lines)
                      "(require 'efrit-todo-efrit)\n"))))
    (efrit-todo-setup-test--check-efrit
     (efrit-todo-setup-test--run init :mx "efrit-todo-efrit-mode"))))

(ert-deftest efrit-todo-setup-test-requiring-loads-neither-efrit-nor-gptel ()
  "Requiring efrit-todo offers both adapters' modes without loading them."
  (let ((result (efrit-todo-setup-test--batch
                 `(add-to-list 'load-path ,efrit-todo-setup-test--lisp)
                 '(require 'efrit-todo)
                 '(princ (list (commandp 'efrit-todo-efrit-mode)
                               (commandp 'efrit-todo-gptel-mode)
                               (autoloadp (symbol-function 'efrit-todo-efrit-mode))
                               (autoloadp (symbol-function 'efrit-todo-gptel-mode))
                               (seq-filter #'featurep
                                           '(efrit-todo-efrit efrit-todo-gptel gptel efrit)))))))
    (should (equal result '(0 . "(t t t t nil)")))))

(ert-deftest efrit-todo-setup-test-gptel ()
  "The gptel snippets work, with gptel loaded before or after them."
  (let ((path (efrit-todo-setup-test--gptel-path))
        (gptel "(require 'gptel)\n"))
    (efrit-todo-setup-test--each
        (mapcan (lambda (snippet)
                  (let ((ours (efrit-todo-setup-test--fill snippet)))
                    (list (cons (concat "gptel, then " ours) (concat path gptel ours))
                          (cons (concat ours ", then gptel") (concat path ours gptel)))))
                (list efrit-todo-setup-test--gptel-snippet
                      efrit-todo-setup-test--gptel-snippet-short))
      (efrit-todo-setup-test--check
       (efrit-todo-setup-test--run init :mode 'efrit-todo-gptel-mode)))))

(ert-deftest efrit-todo-setup-test-gptel-with-efrit-around ()
  "The gptel snippet gets efrit-todo's file also with Efrit's lines between."
  (pcase-let ((`(,path-line . ,rest) (efrit-todo-setup-test--split
                                       (efrit-todo-setup-test--fill
                                        efrit-todo-setup-test--gptel-snippet))))
    (efrit-todo-setup-test--check
     (efrit-todo-setup-test--run (concat (efrit-todo-setup-test--gptel-path) path-line
                                         (efrit-todo-setup-test--efrit-lines) rest)
                                 :mode 'efrit-todo-gptel-mode))))

(ert-deftest efrit-todo-setup-test-indicator-can-be-left-off ()
  "With `efrit-todo-show-mode-line' nil the modes leave the indicator alone."
  (let ((findings (efrit-todo-setup-test--run
                   (concat "(setq efrit-todo-show-mode-line nil)\n"
                           (efrit-todo-setup-test--fill efrit-todo-setup-test--efrit-snippet)))))
    (should (eq (plist-get findings :mode-on) t))
    (should-not (plist-get findings :indicator))
    (should-not (string-match-p "Todo 0/2" (plist-get findings :mode-line)))))

;;;; Without the module

(defun efrit-todo-setup-test--bare-tree ()
  "Copy lisp/*.el and Cargo.toml, as a fresh clone has them, to a new directory.
No module: a clone has none until it is built.  Return the directory."
  (let ((dir (file-name-as-directory (make-temp-file "efrit-todo-clone-" t))))
    (make-directory (expand-file-name "lisp" dir))
    (dolist (file (directory-files efrit-todo-setup-test--lisp t "\\`[^.].*\\.el\\'"))
      (copy-file file (expand-file-name (concat "lisp/" (file-name-nondirectory file)) dir)))
    (copy-file (expand-file-name "Cargo.toml" efrit-todo-setup-test--top) dir)
    dir))

(ert-deftest efrit-todo-setup-test-daemon-without-the-module ()
  "A daemon with the README's set-up, Efrit's after it, and no module goes on.
It cannot ask whether to build the module (a question would read its
standard input): one warning says how to get the module, and the init
file runs to its end."
  (let* ((tree (efrit-todo-setup-test--bare-tree))
         (home (make-temp-file "efrit-todo-home-" t))
         (out (expand-file-name "findings.eld" home))
         (process nil))
    (make-directory (expand-file-name ".emacs.d" home))
    (with-temp-file (expand-file-name ".emacs.d/init.el" home)
      (insert (efrit-todo-setup-test--fill efrit-todo-setup-test--efrit-snippet
                                           (expand-file-name "lisp" tree))
              (efrit-todo-setup-test--efrit-lines)
              (format "%S\n"
                      `(with-temp-file ,out
                         (prin1 (list :end t
                                      :mode (bound-and-true-p efrit-todo-efrit-mode)
                                      :warnings (if (get-buffer "*Warnings*")
                                                    (with-current-buffer "*Warnings*"
                                                      (buffer-substring-no-properties
                                                       (point-min) (point-max)))
                                                  ""))
                                (current-buffer))))
              "(kill-emacs 0)\n"))
    (unwind-protect
        (let ((process-environment (cons (concat "HOME=" home) process-environment)))
          (setq process (make-process
                         :name "efrit-todo-daemon" :buffer (generate-new-buffer " *daemon*")
                         :connection-type 'pipe :noquery t
                         :command (list (efrit-todo-setup-test--emacs)
                                        (format "--fg-daemon=efrit-todo-test-%d-%d"
                                                (emacs-pid) (random 100000)))))
          ;; Standard input at its end, as for a daemon started by systemd.
          (process-send-eof process)
          (let ((end (+ (float-time) 60)))
            (while (and (process-live-p process) (< (float-time) end))
              (accept-process-output process 0.1)))
          (let ((output (with-current-buffer (process-buffer process) (buffer-string)))
                (findings (and (file-exists-p out)
                               (with-temp-buffer (insert-file-contents out)
                                                 (read (current-buffer))))))
            (unless (plist-get findings :end)
              (ert-fail (list "The daemon's init file did not run to its end" :output output)))
            (should (eq (plist-get findings :mode) t))
            (should-not (string-match-p "Eager macro-expansion\\|Error reading from stdin" output))
            (let ((warnings (plist-get findings :warnings)))
              (should (string-match-p "Warning (efrit-todo)" warnings))
              (should-not (string-match-p "Warning (efrit-todo)[^\0]*Warning (efrit-todo)" warnings))
              (should (string-match-p "daemon cannot ask" warnings))
              (should (string-match-p "M-x efrit-todo-build-module" warnings)))))
      (when (process-live-p process) (delete-process process))
      (when process (kill-buffer (process-buffer process)))
      (delete-directory home t)
      (delete-directory tree t))))

;;;; In this Emacs: the pieces the set-ups rely on

(ert-deftest efrit-todo-setup-test-load-path-first ()
  "The package's directory goes just before any other efrit-todo.el, else stays."
  (let* ((other (make-temp-file "efrit-todo-other-" t))
         (plain (make-temp-file "efrit-todo-plain-" t))
         (ours (directory-file-name efrit-todo-shadow--directory)))
    (unwind-protect
        (progn
          (with-temp-file (expand-file-name "efrit-todo.el" other)
            (insert "(provide 'efrit-todo)\n"))
          (let ((load-path (list plain other "/nowhere" ours)))
            (should (efrit-todo-shadow-load-path-first))
            (should (equal load-path (list plain ours other "/nowhere"))))
          (let ((load-path (list plain (file-name-as-directory ours) other)))
            (should-not (efrit-todo-shadow-load-path-first))
            (should (equal load-path (list plain (file-name-as-directory ours) other))))
          (let ((load-path (list plain other)))
            (should (efrit-todo-shadow-load-path-first))
            (should (equal load-path (list plain ours other)))))
      (delete-directory other t)
      (delete-directory plain t))))

(ert-deftest efrit-todo-setup-test-indicator-follows-the-modes ()
  "The adapters' modes turn the indicator on, and off after the last of them.
An indicator the user turned on stays on; `efrit-todo-show-mode-line'
nil leaves it off."
  (let ((was-on efrit-todo-mode-line-mode)
        (efrit-todo--mode-line-holders nil))
    (unwind-protect
        (progn
          (efrit-todo-mode-line-mode -1)
          (efrit-todo-efrit-mode 1)
          (should efrit-todo-mode-line-mode)
          (efrit-todo--hold-mode-line 'another-adapter t)
          (efrit-todo-efrit-mode -1)
          (should efrit-todo-mode-line-mode)
          (efrit-todo--hold-mode-line 'another-adapter nil)
          (should-not efrit-todo-mode-line-mode)
          ;; The user's.
          (efrit-todo-mode-line-mode 1)
          (efrit-todo-efrit-mode 1)
          (efrit-todo-efrit-mode -1)
          (should efrit-todo-mode-line-mode)
          (efrit-todo-mode-line-mode -1)
          (let ((efrit-todo-show-mode-line nil))
            (efrit-todo-efrit-mode 1)
            (should-not efrit-todo-mode-line-mode)
            (efrit-todo-efrit-mode -1)
            (should-not efrit-todo-mode-line-mode)))
      (efrit-todo-efrit-mode -1)
      (efrit-todo-mode-line-mode (if was-on 1 -1)))))

;;;; package.el

(defun efrit-todo-setup-test--package-lines (dir)
  "Return the lines that activate the packages in DIR, as startup does."
  (format "(setq package-user-dir %S)\n(package-initialize)\n" dir))

(defun efrit-todo-setup-test--install (dir &rest forms)
  "Install into `package-user-dir' DIR with FORMS in a batch Emacs.
No package archive is read.  The install must compile every file it
compiles without a failure or an error in *Compile-Log*.  Return the
directory the package went to."
  (pcase-let ((`(,status ,output ,messages)
               (apply #'efrit-todo-setup-test--batch-all
                      `(setq package-user-dir ,dir package-archives nil)
                      '(package-initialize)
                      (append forms
                              '((when (get-buffer "*Compile-Log*")
                                  (with-current-buffer "*Compile-Log*"
                                    (princ (buffer-string)))))))))
    (unless (eql status 0)
      (ert-fail (list "The install failed" :output output :messages messages)))
    (when (string-match-p "[1-9][0-9]* failed\\|\\(?:^\\|: \\)Error:" (concat output messages))
      (ert-fail (list "The install did not compile cleanly" :output output :messages messages)))
    (or (car (file-expand-wildcards (expand-file-name "efrit-todo*" dir)))
        (ert-fail (list "Nothing was installed" :output output)))))

(defun efrit-todo-setup-test--check-package (dir lisp)
  "Check the package installed in DIR, with its Lisp files in LISP.
Its autoloads offer the modes without a require, in every order with
Efrit's lines."
  (let ((package (efrit-todo-setup-test--package-lines dir))
        (efrit (efrit-todo-setup-test--efrit-lines)))
    (efrit-todo-setup-test--each
        `(("package, the mode, then Efrit" . ,(concat package "(efrit-todo-efrit-mode 1)\n" efrit))
          ;; Efrit's lines come after the packages are activated, as in
          ;; an init file, and put Efrit's lisp/core first.
          ("package, Efrit, the mode" . ,(concat package efrit "(efrit-todo-efrit-mode 1)\n"))
          ("package, Efrit, efrit-do, the mode"
           . ,(concat package efrit "(require 'efrit-do)\n(efrit-todo-efrit-mode 1)\n")))
      (efrit-todo-setup-test--check-efrit (efrit-todo-setup-test--run init) lisp))
    ;; After Efrit's set-up, requiring efrit-todo finds the package's.
    (let ((findings (efrit-todo-setup-test--run (concat package efrit "(require 'efrit-todo)\n")
                                                :mx "efrit-todo-efrit-mode")))
      (should (efrit-todo-setup-test--in-p (plist-get findings :library) lisp))
      (efrit-todo-setup-test--check-efrit findings lisp))))

(defun efrit-todo-setup-test--module ()
  "Return the file name of the built module, skipping the test without one."
  (let ((module (expand-file-name (concat "efrit-todo-module" module-file-suffix)
                                  efrit-todo-setup-test--lisp)))
    (unless (file-exists-p module)
      (efrit-todo-setup-test--skip (format "%s is not built; `make build' builds it" module)))
    module))

(defun efrit-todo-setup-test--check-installed (dir lisp)
  "Check the package in DIR, its Lisp files in LISP, before and after a build.
Packages carry no module: the mode's autoload is there, and turning
the mode on reports the missing module, never a void function.  Then
the module is put beside the files, as a build would, and the set-ups
must work."
  (let ((module (efrit-todo-setup-test--module)))
    (should-not (file-exists-p (expand-file-name (file-name-nondirectory module) lisp)))
    (let ((result (efrit-todo-setup-test--batch
                   '(setq efrit-todo-module-auto-build nil)
                   `(setq package-user-dir ,dir)
                   '(package-initialize)
                   '(princ (format "autoload: %s\n" (commandp 'efrit-todo-efrit-mode)))
                   '(condition-case err
                        (progn (efrit-todo-efrit-mode 1)
                               (efrit-todo-write "[{\"content\": \"A\", \"status\": \"pending\"}]")
                               (princ "no error"))
                      (error (princ (format "error: %s" (error-message-string err))))))))
      (should (string-match-p "autoload: t" (cdr result)))
      (should (string-match-p "error: .*module" (cdr result)))
      (should-not (string-match-p "void" (cdr result))))
    (copy-file module (expand-file-name (file-name-nondirectory module) lisp))
    (efrit-todo-setup-test--check-package dir lisp)))

(ert-deftest efrit-todo-setup-test-package-install-file-on-the-directory ()
  "`package-install-file' on lisp/ installs efrit-todo; the modes need no require."
  (efrit-todo-setup-test--module)
  (let* ((dir (make-temp-file "efrit-todo-elpa-" t))
         (installed (efrit-todo-setup-test--install
                     dir `(package-install-file ,efrit-todo-setup-test--lisp))))
    (unwind-protect
        (progn
          ;; Named after the main file, whichever file sorts first.
          (should (string-match-p "/efrit-todo-0\\.1\\.0\\'" installed))
          (efrit-todo-setup-test--check-installed dir installed))
      (delete-directory dir t))))

(defun efrit-todo-setup-test--make-tar (dir)
  "Make in DIR a package tar of lisp/*.el, as an archive would; return its name.
There is no module in it: archives carry no binaries."
  (let* ((desc (with-temp-buffer
                 (insert-file-contents (expand-file-name "efrit-todo.el" efrit-todo-setup-test--lisp))
                 (package-buffer-info)))
         (name (package-desc-full-name desc))
         (staging (file-name-as-directory (expand-file-name name dir))))
    (make-directory staging t)
    (dolist (file (directory-files efrit-todo-setup-test--lisp t "\\`[^.].*\\.el\\'"))
      (copy-file file staging))
    (package-generate-description-file desc (expand-file-name "efrit-todo-pkg.el" staging))
    (let ((default-directory (file-name-as-directory dir)))
      (should (eql 0 (call-process "tar" nil nil nil "-cf" (concat name ".tar") name))))
    (expand-file-name (concat name ".tar") dir)))

(ert-deftest efrit-todo-setup-test-package-install-file-on-a-tar ()
  "A package tar, as an archive makes it, installs; the modes need no require."
  (efrit-todo-setup-test--module)
  (let* ((dir (make-temp-file "efrit-todo-elpa-" t))
         (tar (efrit-todo-setup-test--make-tar (make-temp-file "efrit-todo-tar-" t)))
         (installed (efrit-todo-setup-test--install dir `(package-install-file ,tar))))
    (unwind-protect
        (efrit-todo-setup-test--check-installed dir installed)
      (delete-directory dir t)
      (delete-directory (file-name-directory tar) t))))

(defun efrit-todo-setup-test--snapshot ()
  "Return a new git repository holding the working tree's tracked files."
  (let ((repo (make-temp-file "efrit-todo-repo-" t))
        (default-directory efrit-todo-setup-test--top))
    (dolist (file (split-string (shell-command-to-string "git ls-files -z") "\0" t))
      (when (file-exists-p file)
        (let ((target (expand-file-name file repo)))
          (make-directory (file-name-directory target) t)
          (copy-file file target t))))
    ;; New files of the working tree, not yet tracked, count too.
    (dolist (file (directory-files efrit-todo-setup-test--lisp t "\\`[^.].*\\.el\\'"))
      (copy-file file (expand-file-name (file-name-nondirectory file)
                                        (expand-file-name "lisp" repo))
                 t))
    (let ((default-directory repo))
      (dolist (args '(("init" "-q") ("add" "-A")
                      ("-c" "user.name=efrit-todo" "-c" "user.email=efrit-todo@invalid"
                       "commit" "-q" "-m" "snapshot")))
        (should (eql 0 (apply #'call-process "git" nil nil nil args)))))
    repo))

(ert-deftest efrit-todo-setup-test-package-vc-install ()
  "`package-vc-install' installs efrit-todo from its repository (Emacs 29+).
The module is not in git; once it is built, the mode needs no require."
  (unless (executable-find "git")
    (efrit-todo-setup-test--skip "package-vc-install needs git, which is not installed"))
  (let ((version (cdr (efrit-todo-setup-test--batch '(princ emacs-version)))))
    (when (< (string-to-number version) 29)
      (efrit-todo-setup-test--skip
       (format "package-vc-install is new in Emacs 29, this is %s; to test it: make setup-test EMACS=emacs-29-or-later"
               version))))
  (efrit-todo-setup-test--module)
  (let* ((repo (efrit-todo-setup-test--snapshot))
         (dir (make-temp-file "efrit-todo-elpa-" t))
         (installed (efrit-todo-setup-test--install
                     dir `(package-vc-install '(efrit-todo :url ,repo :lisp-dir "lisp")))))
    (unwind-protect
        (let ((lisp (expand-file-name "lisp/" installed)))
          (should (file-exists-p (expand-file-name "efrit-todo-autoloads.el" lisp)))
          (efrit-todo-setup-test--check-installed dir lisp))
      (delete-directory dir t)
      (delete-directory repo t))))

(provide 'efrit-todo-setup-test)

;;; efrit-todo-setup-test.el ends here
