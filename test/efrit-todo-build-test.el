;;; efrit-todo-build-test.el --- ERT tests of the module build in the background -*- lexical-binding: t; -*-

;;; Commentary:

;; How efrit-todo-build.el builds and loads a missing module.  Each test
;; runs a child Emacs on a copy of lisp/ without the module, with
;; test/efrit-todo-fake-cargo.sh standing in for cargo: it prints what
;; cargo prints, waits for a gate file when told to, and "builds" by
;; copying the module of this checkout.  So the tests take a second each,
;; decide when the build ends, and leave this Emacs, which has the module
;; loaded, alone.  The build with the real cargo is tested in
;; efrit-todo-module-test.el and, in a terminal, by
;; test/efrit-todo-build-tmux-test.sh.

;;; Code:

(require 'ert)
(require 'cl-lib)

(defconst efrit-todo-build-test--root
  (file-name-directory
   (directory-file-name (file-name-directory (or load-file-name buffer-file-name))))
  "The checkout under test.")

(defconst efrit-todo-build-test--fake-cargo
  (expand-file-name "test/efrit-todo-fake-cargo.sh" efrit-todo-build-test--root)
  "The stand-in for cargo.")

(defconst efrit-todo-build-test--module
  (expand-file-name "lisp/efrit-todo-module.so" efrit-todo-build-test--root)
  "The module the stand-in delivers as built.")

(defconst efrit-todo-build-test--prelude
  '(progn
     (require 'cl-lib)
     (defun efrit-todo-build-test-child--until (predicate seconds)
       "Process output until PREDICATE holds or SECONDS pass; return its value."
       (let ((end (+ (float-time) seconds)))
         (while (and (not (funcall predicate)) (< (float-time) end))
           (accept-process-output nil 0.05))
         (funcall predicate)))
     (defun efrit-todo-build-test-child--try (function)
       "Call FUNCTION; return (:value VALUE) or (:error SYMBOL MESSAGE)."
       (condition-case err
           (list :value (funcall function))
         (error (list :error (car err) (error-message-string err)))))
     (defun efrit-todo-build-test-child--stand-ins ()
       "Return the functions still standing in for the module."
       (let (found)
         (mapatoms (lambda (symbol)
                     (when (eq (symbol-function symbol) 'efrit-todo-build--not-loaded)
                       (push symbol found))))
         found)))
  "Helpers for the forms run in child Emacsen.")

(defun efrit-todo-build-test--tree (&optional cargo-toml)
  "Copy lisp/*.el, without the module, into a new temporary directory.
CARGO-TOML is nil for no Cargo.toml, t for efrit-todo's, or the text
of another one.  Return the directory."
  (let ((dir (file-name-as-directory (make-temp-file "efrit-todo-build-test" t))))
    (make-directory (expand-file-name "lisp" dir))
    (dolist (file (directory-files (expand-file-name "lisp" efrit-todo-build-test--root) t
                                   "\\`efrit-todo.*\\.el\\'"))
      (copy-file file (expand-file-name (concat "lisp/" (file-name-nondirectory file)) dir)))
    (pcase cargo-toml
      ('t (copy-file (expand-file-name "Cargo.toml" efrit-todo-build-test--root)
                     (expand-file-name "Cargo.toml" dir)))
      ((pred stringp) (write-region cargo-toml nil (expand-file-name "Cargo.toml" dir))))
    dir))

(defun efrit-todo-build-test--run (dir form &rest environment)
  "Run FORM in a child Emacs on the copy DIR; return (VALUE . OUTPUT).
The child runs in DIR/lisp, with the stand-in cargo, HOME in DIR, and
ENVIRONMENT strings (\"NAME=VALUE\", or \"NAME\" to unset) added.
VALUE is what FORM returned, read back; OUTPUT the child's output."
  (with-temp-buffer
    (let* ((process-environment
            (append environment
                    (list (concat "HOME=" dir)
                          (concat "FAKE_CARGO_MODULE=" efrit-todo-build-test--module)
                          "CARGO_TARGET_DIR")
                    process-environment))
           (default-directory (expand-file-name "lisp/" dir))
           (program `(progn
                       ,efrit-todo-build-test--prelude
                       (setq efrit-todo-build-cargo-program ,efrit-todo-build-test--fake-cargo)
                       (let ((value ,form))
                         (princ "\nVALUE: ")
                         (prin1 value)
                         (terpri))))
           (code (call-process (expand-file-name invocation-name invocation-directory)
                               nil t nil "-Q" "--batch" "-L" default-directory
                               "--eval" (prin1-to-string program)))
           (output (buffer-string)))
      (unless (and (eql code 0) (string-match "\nVALUE: " output))
        (ert-fail (list "the child Emacs failed" code output)))
      (cons (car (read-from-string output (match-end 0))) output))))

(defmacro efrit-todo-build-test--with-tree (spec &rest body)
  "Bind (DIR CARGO-TOML) of SPEC to a new copy, run BODY, delete the copy."
  (declare (indent 1))
  `(let ((,(car spec) (efrit-todo-build-test--tree ,(cadr spec))))
     (unwind-protect (progn ,@body)
       (delete-directory ,(car spec) t))))

(ert-deftest efrit-todo-build-test-builds-in-the-background-and-loads ()
  "The offer accepted, `require' returns at once; calls meanwhile say so.
When cargo ends, the module is copied from CARGO_TARGET_DIR (relative
to the crate) and loaded into the same Emacs."
  (skip-unless (file-exists-p efrit-todo-build-test--module))
  (efrit-todo-build-test--with-tree (dir t)
    (let* ((gate (expand-file-name "gate" dir))
           (run (efrit-todo-build-test--run
                 dir
                 `(let* ((asked nil)
                         (feature (cl-letf (((symbol-function 'y-or-n-p)
                                             (lambda (prompt) (push prompt asked) t)))
                                    ;; As in an interactive Emacs.
                                    (let ((noninteractive nil))
                                      (require 'efrit-todo))))
                         (running (efrit-todo-build-running-p))
                         (progress (progn (efrit-todo-build-test-child--until
                                           (lambda () (equal efrit-todo-build--progress '(2 . 3)))
                                           20)
                                          efrit-todo-build--progress))
                         (write (efrit-todo-build-test-child--try
                                 (lambda () (efrit-todo-write '(:todos [(:content "A" :status "pending")])))))
                         (compat (efrit-todo-build-test-child--try #'efrit-todo-count))
                         (wait (progn (write-region "" nil ,gate)
                                      (efrit-todo-build-test-child--try
                                       (lambda () (efrit-todo-build-wait 30)))))
                         (after (efrit-todo-build-test-child--try
                                 (lambda () (efrit-todo-write '(:todos [(:content "A" :status "pending")]))))))
                    (list :asked asked :feature feature :running running :progress progress
                          :write write :compat compat :wait wait :after after
                          :stand-ins (efrit-todo-build-test-child--stand-ins)
                          :buffer (with-current-buffer "*efrit-todo-build*"
                                    (buffer-substring-no-properties (point-min) (point-max)))))
                 (concat "FAKE_CARGO_GATE=" gate)
                 "CARGO_TARGET_DIR=tgt"))
           (value (car run)))
      (should (equal (length (plist-get value :asked)) 1))
      (should (string-match-p "build it with cargo" (car (plist-get value :asked))))
      (should (eq (plist-get value :feature) 'efrit-todo))
      (should (eq (plist-get value :running) t))
      (should (equal (plist-get value :progress) '(2 . 3)))
      ;; Efrit's names answer as Efrit's own file would.
      (should (equal (plist-get value :compat) '(:value 0)))
      (dolist (during (list (plist-get value :write)))
        (should (eq (nth 0 during) :error))
        (should (eq (nth 1 during) 'efrit-todo-error))
        (should (string-match-p "still being built (last crate, compiling and linking the module, [0-9]+ s so far)" (nth 2 during)))
        (should (string-match-p "\\*efrit-todo-build\\*" (nth 2 during)))
        (should (string-match-p "(efrit-todo-build-wait)" (nth 2 during))))
      (should (equal (plist-get value :wait) '(:value t)))
      (should (eq (car (plist-get value :after)) :value))
      (should (string-match-p "\\`\\[TODO list updated" (cadr (plist-get value :after))))
      (should (null (plist-get value :stand-ins)))
      (should (file-exists-p (expand-file-name "lisp/efrit-todo-module.so" dir)))
      (should (file-exists-p (expand-file-name "tgt/release/libefrit_todo.so" dir)))
      (let ((buffer (plist-get value :buffer)))
        (should (string-match-p "Compiling efrit-todo v0.1.0" buffer))
        (should (string-match-p "progress: always" buffer))
        (should (string-match-p "Finished" buffer))
        (should (string-match-p "built in [0-9]+ s and loaded" buffer))
        ;; The progress bar and the JSON are read, not shown.
        (should-not (string-match-p "Building \\[" buffer))
        (should-not (string-match-p "\"reason\"" buffer))))))

(ert-deftest efrit-todo-build-test-modes-turn-on-while-it-builds ()
  "The indicator and the adapter modes turn on while the module builds.
An init file turns them on right after `require', before cargo ends:
nothing may signal then.  Once the module loads, with no restart, the
indicator shows a written list and gptel has the todo tools."
  (skip-unless (file-exists-p efrit-todo-build-test--module))
  (efrit-todo-build-test--with-tree (dir t)
    (let* ((gate (expand-file-name "gate" dir))
           (test-dir (expand-file-name "test" efrit-todo-build-test--root))
           (value
            (car (efrit-todo-build-test--run
                  dir
                  `(progn
                     (add-to-list 'load-path ,(expand-file-name "fake-gptel" test-dir) t)
                     (add-to-list 'load-path ,(expand-file-name "fake-efrit/lisp" test-dir) t)
                     (cl-letf (((symbol-function 'y-or-n-p) (lambda (_) t)))
                       (let ((noninteractive nil))
                         (require 'efrit-todo)))
                     (require 'gptel)
                     (let* ((running (efrit-todo-build-running-p))
                            (mode-line (efrit-todo-build-test-child--try
                                        (lambda () (efrit-todo-mode-line-mode 1))))
                            (efrit (efrit-todo-build-test-child--try
                                    (lambda () (efrit-todo-efrit-mode 1))))
                            (gptel (efrit-todo-build-test-child--try
                                    (lambda () (efrit-todo-gptel-mode 1))))
                            (drawn (efrit-todo-build-test-child--try
                                    (lambda () (efrit-todo-ui--mode-line 200))))
                            (show (let ((noninteractive nil))
                                    (efrit-todo-build-test-child--try #'efrit-todo-show)))
                            (modes-during (list efrit-todo-mode-line-mode efrit-todo-efrit-mode
                                                efrit-todo-gptel-mode))
                            (wait (progn (write-region "" nil ,gate)
                                         (efrit-todo-build-test-child--try
                                          (lambda () (efrit-todo-build-wait 30)))))
                            (write (efrit-todo-build-test-child--try
                                    (lambda ()
                                      (efrit-todo-write
                                       '(:todos [(:content "Read the code" :status "in_progress"
                                                  :activeForm "Reading the code")
                                                 (:content "Fix it" :status "pending")]))))))
                       (list :running running :mode-line mode-line :efrit efrit :gptel gptel
                             :drawn drawn :show show :modes-during modes-during :wait wait
                             :write (car write)
                             :modes-after (list efrit-todo-mode-line-mode efrit-todo-efrit-mode
                                                efrit-todo-gptel-mode)
                             :indicator (substring-no-properties
                                         (or (efrit-todo-mode-line-text nil 40) ""))
                             :in-mode-line (and (memq 'efrit-todo-mode-line-format
                                                      (default-value 'mode-line-format))
                                                t)
                             :tool (and (ignore-errors (gptel-get-tool "todo_write")) t))))
                  (concat "FAKE_CARGO_GATE=" gate)))))
      (should (eq (plist-get value :running) t))
      (should (eq (car (plist-get value :mode-line)) :value))
      (should (eq (car (plist-get value :efrit)) :value))
      (should (eq (car (plist-get value :gptel)) :value))
      (should (equal (plist-get value :drawn) '(:value nil)))
      ;; The list asked for during the build: what is going on, no batch advice.
      (should (eq (nth 1 (plist-get value :show)) 'user-error))
      (should (string-match-p "still being built.*no restart needed" (nth 2 (plist-get value :show))))
      (should-not (string-match-p "build-wait" (nth 2 (plist-get value :show))))
      (should (equal (plist-get value :modes-during) '(t t t)))
      (should (equal (plist-get value :wait) '(:value t)))
      (should (eq (plist-get value :write) :value))
      (should (equal (plist-get value :modes-after) '(t t t)))
      (should (equal (plist-get value :indicator) "Todo 0/2 Reading the code"))
      (should (eq (plist-get value :in-mode-line) t))
      (should (eq (plist-get value :tool) t)))))

(ert-deftest efrit-todo-build-test-wait-argument-and-cargos-artifact ()
  "`efrit-todo-build-module' with WAIT returns once the module is loaded.
The module is taken from where cargo's JSON message says it built it."
  (skip-unless (file-exists-p efrit-todo-build-test--module))
  (efrit-todo-build-test--with-tree (dir t)
    (let* ((artifact (expand-file-name "elsewhere/libefrit_todo.so" dir))
           (value (car (efrit-todo-build-test--run
                        dir
                        '(list :built (efrit-todo-build-test-child--try
                                       (lambda () (require 'efrit-todo-build)
                                         (efrit-todo-build-module t)))
                               :artifact efrit-todo-build--artifact
                               :loaded (progn (require 'efrit-todo)
                                              (efrit-todo-build-module-loaded-p))
                               :write (efrit-todo-write '(:todos [(:content "B" :status "pending")])))
                        (concat "FAKE_CARGO_ARTIFACT=" artifact)))))
      (should (equal (plist-get value :built) '(:value t)))
      (should (equal (plist-get value :artifact) artifact))
      (should (eq (plist-get value :loaded) t))
      (should (string-match-p "t1 \\[pending\\] B" (plist-get value :write)))
      (should-not (file-exists-p (expand-file-name "target" dir))))))

(ert-deftest efrit-todo-build-test-batch-require-waits-for-the-build ()
  "In batch Emacs with `efrit-todo-module-auto-build' t, `require' returns built."
  (skip-unless (file-exists-p efrit-todo-build-test--module))
  (efrit-todo-build-test--with-tree (dir t)
    (let ((value (car (efrit-todo-build-test--run
                       dir
                       '(progn (setq efrit-todo-module-auto-build t)
                               (require 'efrit-todo)
                               (list :loaded (efrit-todo-build-module-loaded-p)
                                     :running (efrit-todo-build-running-p)))))))
      (should (equal value '(:loaded t :running nil))))))

(ert-deftest efrit-todo-build-test-cancel-stops-cargo ()
  "`efrit-todo-build-cancel' stops cargo; then calls say the build was cancelled."
  (efrit-todo-build-test--with-tree (dir t)
    (let* ((pidfile (expand-file-name "pid" dir))
           (value (car (efrit-todo-build-test--run
                        dir
                        `(progn
                           (require 'efrit-todo-build)
                           (efrit-todo-build-module)
                           (efrit-todo-build-test-child--until
                            (lambda () efrit-todo-build--progress) 20)
                           (let* ((pid (with-temp-buffer
                                         (insert-file-contents ,pidfile)
                                         (string-to-number (buffer-string))))
                                  (cancel (efrit-todo-build-cancel))
                                  (wait (efrit-todo-build-test-child--try
                                         (lambda () (efrit-todo-build-wait 20)))))
                             (list :cancel cancel :wait wait :state efrit-todo-build--state
                                   :cargo-alive (efrit-todo-build-test-child--until
                                                 (lambda () (not (eql (signal-process pid 0) 0)))
                                                 5)
                                   :call (efrit-todo-build-test-child--try
                                          (lambda () (efrit-todo--module-version)))
                                   :again (efrit-todo-build-cancel))))
                        (concat "FAKE_CARGO_PIDFILE=" pidfile)
                        ;; Never opened: only the cancel ends the build.
                        (concat "FAKE_CARGO_GATE=" (expand-file-name "never" dir))))))
      (should (eq (plist-get value :cancel) t))
      (should (eq (car (plist-get value :wait)) :error))
      (should (string-match-p "build was cancelled" (nth 2 (plist-get value :wait))))
      (should (eq (plist-get value :state) 'cancelled))
      ;; :cargo-alive holds "cargo has gone" within 5 s.
      (should (eq (plist-get value :cargo-alive) t))
      (should (eq (nth 1 (plist-get value :call)) 'efrit-todo-error))
      (should (string-match-p "cancelled; M-x efrit-todo-build-module" (nth 2 (plist-get value :call))))
      (should-not (plist-get value :again))
      (should-not (file-exists-p (expand-file-name "lisp/efrit-todo-module.so" dir))))))

(ert-deftest efrit-todo-build-test-killing-the-buffer-cancels ()
  "Killing *efrit-todo-build* stops the build, as cancelling does."
  (efrit-todo-build-test--with-tree (dir t)
    (let ((value (car (efrit-todo-build-test--run
                       dir
                       '(progn
                          (require 'efrit-todo-build)
                          (efrit-todo-build-module)
                          (efrit-todo-build-test-child--until
                           (lambda () efrit-todo-build--progress) 20)
                          (let ((kill-buffer-query-functions nil))
                            (kill-buffer efrit-todo-build-buffer-name))
                          (efrit-todo-build-test-child--until
                           (lambda () (not (efrit-todo-build-running-p))) 10)
                          (list :state efrit-todo-build--state
                                :process-alive (process-live-p efrit-todo-build--process)))
                       (concat "FAKE_CARGO_GATE=" (expand-file-name "never" dir))))))
      (should (equal value '(:state cancelled :process-alive nil))))))

(ert-deftest efrit-todo-build-test-failure-shows-the-buffer ()
  "When cargo fails, its buffer is shown, a message says so, and calls say why."
  (efrit-todo-build-test--with-tree (dir t)
    (let* ((run (efrit-todo-build-test--run
                 dir
                 '(progn
                    (require 'efrit-todo-build)
                    (list :wait (efrit-todo-build-test-child--try
                                 (lambda () (efrit-todo-build-module t)))
                          :state efrit-todo-build--state
                          :shown (and (get-buffer-window efrit-todo-build-buffer-name t) t)
                          :buffer (with-current-buffer efrit-todo-build-buffer-name
                                    (buffer-substring-no-properties (point-min) (point-max)))
                          ;; rustc's "--> file:line:column" leads to the source.
                          :error-at (with-current-buffer efrit-todo-build-buffer-name
                                      (goto-char (point-min))
                                      (compilation-next-error 1)
                                      (let ((loc (compilation--message->loc
                                                  (get-text-property (point) 'compilation-message))))
                                        (list (caar (compilation--loc->file-struct loc))
                                              (compilation--loc->line loc))))
                          :call (efrit-todo-build-test-child--try
                                 (lambda () (efrit-todo--module-version)))))
                 "FAKE_CARGO_EXIT=101"))
           (value (car run)))
      (should (eq (car (plist-get value :wait)) :error))
      (should (string-match-p "its build failed (cargo exited with code 101); see the buffer \\*efrit-todo-build\\*"
                              (nth 2 (plist-get value :wait))))
      (should (eq (plist-get value :state) 'failed))
      (should (eq (plist-get value :shown) t))
      (should (string-match-p "error\\[E0425\\]" (plist-get value :buffer)))
      (should (equal (plist-get value :error-at) '("src/lib.rs" 3)))
      (should (string-match-p "build failed" (nth 2 (plist-get value :call))))
      (should (string-match-p "Efrit-todo: building the module failed after [0-9]+ s: cargo exited with code 101"
                              (cdr run))))))

;;;; Without the module, the init file goes on

(defun efrit-todo-build-test--efrit-lines ()
  "Return Efrit's set-up lines: EFRIT_DIR's Efrit, else the stand-in."
  (format "(add-to-list 'load-path %S)\n(require 'efrit)\n"
          (expand-file-name "lisp" (or (getenv "EFRIT_DIR")
                                       (expand-file-name "test/fake-efrit"
                                                         efrit-todo-build-test--root)))))

(defun efrit-todo-build-test--init-form (dir answer &rest before)
  "Return a form to load an init file in DIR as a user's Emacs would.
The init file holds BEFORE (forms), the README's Efrit lines with the
copy's lisp/, Efrit's lines after them, and a last line that notes
that the init file ran to its end.  The build question is answered
ANSWER; the form returns what happened."
  (let ((init (expand-file-name "init.el" dir)))
    (with-temp-file init
      (dolist (form before) (prin1 form (current-buffer)) (insert "\n"))
      (insert (format "(add-to-list 'load-path %S)\n(require 'efrit-todo-efrit)\n(efrit-todo-efrit-mode 1)\n"
                      (expand-file-name "lisp" dir))
              (efrit-todo-build-test--efrit-lines)
              "(setq efrit-todo-build-test--end-reached t)\n"))
    `(let ((asked nil) (failure nil))
       (defvar efrit-todo-build-test--end-reached nil)
       (advice-add 'y-or-n-p :around
                   (lambda (ask prompt)
                     (if (string-match-p "Efrit-todo" prompt)
                         (progn (push prompt asked) ,answer)
                       (funcall ask prompt))))
       ;; As an interactive Emacs loads its init file: from source,
       ;; with eager macro-expansion.
       (let ((noninteractive nil))
         (condition-case err
             (load ,init nil t)
           (error (setq failure err))))
       (list :end efrit-todo-build-test--end-reached
             :failure failure
             :asked (length asked)
             :mode (bound-and-true-p efrit-todo-efrit-mode)
             :efrit (featurep 'efrit)
             :warnings (if (get-buffer "*Warnings*")
                           (with-current-buffer "*Warnings*"
                             (buffer-substring-no-properties (point-min) (point-max)))
                         "")
             :messages (with-current-buffer "*Messages*"
                         (buffer-substring-no-properties (point-min) (point-max)))
             :call (efrit-todo-build-test-child--try
                    (lambda () (efrit-todo-write '(:todos [(:content "A" :status "pending")]))))))))

(defun efrit-todo-build-test--check-went-on (value)
  "Check VALUE: the init file ran to its end, with one warning about the module.
Return the warning's text."
  (should (equal (plist-get value :failure) nil))
  (should (eq (plist-get value :end) t))
  (should (eq (plist-get value :efrit) t))
  (should (eq (plist-get value :mode) t))
  (should-not (string-match-p "Eager macro-expansion" (plist-get value :messages)))
  (let ((warnings (plist-get value :warnings)))
    (should (equal (efrit-todo-build-test--count "Warning (efrit-todo)" warnings) 1))
    (should (string-match-p "efrit-todo-build-module\\|git clone" warnings))
    ;; No internal names, no quotes escaped as by `prin1'.
    (should-not (string-match-p "\\\\\"\\|efrit-todo--\\|efrit-todo-build--" warnings))
    ;; Calls say that the module is not loaded, without internal names.
    (let ((call (plist-get value :call)))
      (should (eq (nth 1 call) 'efrit-todo-error))
      (should (string-match-p "module" (nth 2 call))))
    warnings))

(defun efrit-todo-build-test--count (regexp string)
  "Return how many times REGEXP matches in STRING."
  (let ((count 0) (start 0))
    (while (string-match regexp string start)
      (setq count (1+ count) start (match-end 0)))
    count))

(ert-deftest efrit-todo-build-test-declined-build-lets-the-init-file-go-on ()
  "Answering no to the build: the init file runs on; one question, one warning."
  (efrit-todo-build-test--with-tree (dir t)
    (let* ((value (car (efrit-todo-build-test--run
                        dir (efrit-todo-build-test--init-form dir nil))))
           (warnings (efrit-todo-build-test--check-went-on value)))
      (should (equal (plist-get value :asked) 1))
      (should (string-match-p "not built" warnings))
      (should-not (file-exists-p (expand-file-name "lisp/efrit-todo-module.so" dir))))))

(ert-deftest efrit-todo-build-test-no-auto-build-lets-the-init-file-go-on ()
  "`efrit-todo-module-auto-build' nil: no question, one warning, the init file runs on."
  (efrit-todo-build-test--with-tree (dir t)
    (let ((value (car (efrit-todo-build-test--run
                       dir (efrit-todo-build-test--init-form
                            dir t '(setq efrit-todo-module-auto-build nil))))))
      (efrit-todo-build-test--check-went-on value)
      (should (equal (plist-get value :asked) 0)))))

(ert-deftest efrit-todo-build-test-no-cargo-lets-the-init-file-go-on ()
  "No cargo: no question, one warning naming rustup, the init file runs on."
  (efrit-todo-build-test--with-tree (dir t)
    (let* ((value (car (efrit-todo-build-test--run
                        dir (efrit-todo-build-test--init-form
                             dir t `(setq efrit-todo-build-cargo-program
                                          ,(expand-file-name "no-such-cargo" dir))))))
           (warnings (efrit-todo-build-test--check-went-on value)))
      (should (equal (plist-get value :asked) 0))
      (should (string-match-p "rustup\\.rs" warnings)))))

(ert-deftest efrit-todo-build-test-no-source-lets-the-init-file-go-on ()
  "No Cargo.toml to build from: no question, one warning, the init file runs on."
  (efrit-todo-build-test--with-tree (dir nil)
    (let* ((value (car (efrit-todo-build-test--run
                        dir (efrit-todo-build-test--init-form dir t))))
           (warnings (efrit-todo-build-test--check-went-on value)))
      (should (equal (plist-get value :asked) 0))
      (should (string-match-p "git clone" warnings)))))

(ert-deftest efrit-todo-build-test-failed-build-lets-the-init-file-go-on ()
  "A build that fails, and one cancelled, leave the Emacs working, with a warning."
  (dolist (end '(fail cancel))
    (efrit-todo-build-test--with-tree (dir t)
      (let* ((value (car (apply
                          #'efrit-todo-build-test--run
                          dir
                          `(let ((value ,(efrit-todo-build-test--init-form dir t)))
                             ,(if (eq end 'cancel)
                                  '(progn (efrit-todo-build-test-child--until
                                           (lambda () efrit-todo-build--progress) 20)
                                          (efrit-todo-build-cancel))
                                t)
                             (efrit-todo-build-test-child--until
                              (lambda () (not (efrit-todo-build-running-p))) 30)
                             (plist-put value :warnings
                                        (with-current-buffer "*Warnings*"
                                          (buffer-substring-no-properties
                                           (point-min) (point-max))))
                             (plist-put value :call
                                        (efrit-todo-build-test-child--try
                                         (lambda () (efrit-todo-write
                                                     '(:todos [(:content "A" :status "pending")]))))))
                          (if (eq end 'fail)
                              '("FAKE_CARGO_EXIT=101")
                            (list (concat "FAKE_CARGO_GATE=" (expand-file-name "never" dir)))))))
             (warnings (efrit-todo-build-test--check-went-on value)))
        (should (equal (plist-get value :asked) 1))
        (should (string-match-p (if (eq end 'fail) "could not be built" "cancelled") warnings))))))

(ert-deftest efrit-todo-build-test-batch-require-warns ()
  "In batch, `require' asks nothing and signals nothing: a warning says what to do."
  (efrit-todo-build-test--with-tree (dir t)
    (let* ((run (efrit-todo-build-test--run
                 dir
                 '(let ((asked 0))
                    (advice-add 'y-or-n-p :before (lambda (&rest _) (setq asked (1+ asked))))
                    (list :require (efrit-todo-build-test-child--try (lambda () (require 'efrit-todo)))
                          :asked asked
                          :call (efrit-todo-build-test-child--try #'efrit-todo-list)))))
           (value (car run)))
      (should (equal (plist-get value :require) '(:value efrit-todo)))
      (should (equal (plist-get value :asked) 0))
      (should (string-match-p "Warning (efrit-todo): .*(efrit-todo-build-module t)" (cdr run)))
      (should (eq (nth 1 (plist-get value :call)) 'efrit-todo-error)))))

(ert-deftest efrit-todo-build-test-compiling-asks-nothing ()
  "Byte-compiling the adapters without the module asks nothing and succeeds.
The build is offered later, when a mode is turned on."
  (efrit-todo-build-test--with-tree (dir t)
    (let ((value (car (efrit-todo-build-test--run
                       dir
                       `(let ((asked 0))
                          (advice-add 'y-or-n-p :around
                                      (lambda (_ask _prompt) (setq asked (1+ asked)) nil))
                          (let* ((noninteractive nil)
                                 (compiled
                                  (mapcar (lambda (file)
                                            (byte-compile-file (expand-file-name file ,(expand-file-name "lisp" dir))))
                                          '("efrit-todo-build.el" "efrit-todo-shadow.el" "efrit-todo-compat.el"
                                            "efrit-todo.el" "efrit-todo-ui.el" "efrit-todo-efrit.el"
                                            "efrit-todo-gptel.el")))
                                 (asked-compiling asked))
                            (efrit-todo-efrit-mode 1)
                            (efrit-todo-efrit-mode 1)
                            (list :compiled compiled :asked-compiling asked-compiling
                                  :asked-after asked)))))))
      (should (equal (plist-get value :compiled) '(t t t t t t t)))
      (should (equal (plist-get value :asked-compiling) 0))
      (should (equal (plist-get value :asked-after) 1)))))

;;;; Until the module is loaded, Efrit is Efrit

(defconst efrit-todo-build-test--plain-form
  '(progn
     ;; EFRIT_DIR's Efrit, else the stand-in loop.
     (require (if (getenv "EFRIT_DIR") 'efrit-todo-real-efrit 'efrit-todo-fake-efrit))
     (require 'efrit-todo-scenarios)
     (defun efrit-todo-build-test-child--run (name mode)
       "Run scenario NAME with the mode on, or off (MODE `off'); return what was seen."
       (let* ((outcome (apply #'efrit-todo-scenarios-run
                              (append (get name 'efrit-todo-build-test-script) (list mode)))))
         (list :requests (plist-get outcome :requests) :runs (plist-get outcome :runs)
               :stop (plist-get outcome :stop) :do (plist-get outcome :do)
               :agent (plist-get outcome :agent) :last-result (plist-get outcome :last-result))))
     (defun efrit-todo-build-test-child--printed (run)
       "Return RUN printed, with what differs from one run to the next left out.
Printed, as the responses hold hash tables, which `equal' never finds
equal; without Efrit's session ids, made of the time, and durations."
       (replace-regexp-in-string
        "efrit-do-[0-9]\\{14\\}\\(?:-[0-9]+\\)?" "SESSION"
        (replace-regexp-in-string "([0-9]+\\.[0-9]+s)" "(TIME)"
                                  (let ((print-length nil) (print-level nil))
                                    (prin1-to-string run)))))
     (defun efrit-todo-build-test-child--same-as-plain (name)
       "Return nil if scenario NAME runs with the mode on as with it off, else both runs.
Off, on, then off again, compared with the last: Efrit's prompt names
the command before, and the run before each of those two is the
other's, if they are the same."
       ;; One script for every run: its tool_use ids are made once.
       (put name 'efrit-todo-build-test-script (efrit-todo-scenarios-script name))
       (efrit-todo-build-test-child--run name 'off)
       (let ((on (efrit-todo-build-test-child--printed
                  (efrit-todo-build-test-child--run name nil)))
             (off (efrit-todo-build-test-child--printed
                   (efrit-todo-build-test-child--run name 'off))))
         (unless (equal on off)
           (list :on on :off off)))))
  "Helpers for a child that runs Efrit scenarios without the module.")

(ert-deftest efrit-todo-build-test-efrit-is-plain-until-the-module-loads ()
  "Efrit runs as without efrit-todo while the module builds.
With `efrit-todo-efrit-mode' on, every request, tool run and result is
what it is with the mode off.  Once the module loads, efrit-todo
takes over from the next command: a session that was running when
the build ended stays plain to its end."
  (skip-unless (file-exists-p efrit-todo-build-test--module))
  (efrit-todo-build-test--with-tree (dir t)
    (let* ((gate (expand-file-name "gate" dir))
           (value
            (car (efrit-todo-build-test--run
                  dir
                  `(progn
                     (add-to-list 'load-path ,(expand-file-name "test" efrit-todo-build-test--root) t)
                     ,efrit-todo-build-test--plain-form
                     (efrit-todo-efrit-mode 1)
                     (efrit-todo-build-module)
                     (let* ((during (mapcar #'efrit-todo-build-test-child--same-as-plain
                                            '(ids-survive results-survive continuation)))
                            (running (efrit-todo-build-running-p))
                            ;; The build ends while a session runs: Claude's
                            ;; second answer waits for it.
                            (spanning
                             (efrit-todo-scenarios-run
                              "Tidy the project"
                              (list (efrit-todo-scenarios--todos '("Read the code" "in_progress"))
                                    (lambda (_request)
                                      (write-region "" nil ,gate)
                                      (efrit-todo-build-wait 30)
                                      (efrit-todo-scenarios--todos '("Read the code" "completed")))
                                    (efrit-todo-scenarios--tool "session_complete" '(("message" . "tidy"))))))
                            (next (efrit-todo-scenarios-run
                                   "Tidy the project"
                                   (list (efrit-todo-scenarios--todos '("Read the code" "in_progress"))
                                         (efrit-todo-scenarios--tool "session_complete" '(("message" . "tidy")))))))
                       (list :during during :running running
                             :loaded (efrit-todo-build-module-loaded-p)
                             :spanning (mapcar #'car (efrit-todo-scenarios-tool-results spanning))
                             :next (mapcar #'car (efrit-todo-scenarios-tool-results next)))))
                  (concat "FAKE_CARGO_GATE=" gate)))))
      (should (eq (plist-get value :running) t))
      (should (equal (plist-get value :during) '(nil nil nil)))
      (should (eq (plist-get value :loaded) t))
      ;; Efrit's own todo_write answered throughout the session the build ended in.
      ;; efrit-todo's results count done items and name ids; Efrit's do neither.
      (should (= (length (plist-get value :spanning)) 2))
      (dolist (result (plist-get value :spanning))
        (should-not (string-match-p "\\[TODO list updated: [0-9]+/[0-9]+ done\\|\\bt1\\b" result)))
      (should (string-match-p "\\`\\[TODO list updated: 0/1 done" (car (plist-get value :next))))
      (should (string-match-p "\\bt1 \\[in_progress\\] Read the code" (car (plist-get value :next)))))))

(ert-deftest efrit-todo-build-test-efrit-is-plain-after-a-cancelled-build ()
  "After a cancelled build, and with no build at all, Efrit runs as without efrit-todo."
  (efrit-todo-build-test--with-tree (dir t)
    (let ((value
           (car (efrit-todo-build-test--run
                 dir
                 `(progn
                    (add-to-list 'load-path ,(expand-file-name "test" efrit-todo-build-test--root) t)
                    ,efrit-todo-build-test--plain-form
                    (efrit-todo-efrit-mode 1)
                    (let ((unbuilt (mapcar #'efrit-todo-build-test-child--same-as-plain
                                           '(ids-survive results-survive continuation))))
                      (efrit-todo-build-module)
                      (efrit-todo-build-test-child--until (lambda () efrit-todo-build--progress) 20)
                      (efrit-todo-build-cancel)
                      (efrit-todo-build-test-child--until
                       (lambda () (not (efrit-todo-build-running-p))) 20)
                      (list :unbuilt unbuilt
                            :state efrit-todo-build--state
                            :cancelled (mapcar #'efrit-todo-build-test-child--same-as-plain
                                               '(ids-survive results-survive continuation)))))
                 (concat "FAKE_CARGO_GATE=" (expand-file-name "never" dir))))))
      (should (equal (plist-get value :unbuilt) '(nil nil nil)))
      (should (eq (plist-get value :state) 'cancelled))
      (should (equal (plist-get value :cancelled) '(nil nil nil))))))

(ert-deftest efrit-todo-build-test-gptel-is-plain-until-the-module-loads ()
  "While the module builds, gptel runs as without efrit-todo, with the mode on.
A chat whose own todo_write tool (the user's) is offered gets the same
requests and results with `efrit-todo-gptel-mode' on as with it off."
  (efrit-todo-build-test--with-tree (dir t)
    (let ((value
           (car (efrit-todo-build-test--run
                 dir
                 `(progn
                    (add-to-list 'load-path ,(expand-file-name "test" efrit-todo-build-test--root) t)
                    (add-to-list 'load-path ,(expand-file-name "test/fake-gptel" efrit-todo-build-test--root) t)
                    (require 'efrit-todo-gptel-test)
                    (defvar efrit-todo-build-test-child--todo-calls nil)
                    (gptel-make-tool :name "todo_write"
                                     :function (lambda (todos)
                                                 (push todos efrit-todo-build-test-child--todo-calls)
                                                 "stored by the user's own tool")
                                     :description "The user's own todo list."
                                     :args '((:name "todos" :type array :items (:type object)
                                                    :description "The items."))
                                     :category "user" :include t)
                    (efrit-todo-build-module)
                    (let* ((script (list (efrit-todo-gptel-test--todos '("Plan" "in_progress"))
                                         (efrit-todo-gptel-test--tool "echo" '((text . "hi")))
                                         (efrit-todo-gptel-test--text "Done.")))
                           (run (lambda (on)
                                  (efrit-todo-gptel-mode (if on 1 -1))
                                  (let ((requests (efrit-todo-gptel-test-send
                                                   (efrit-todo-gptel-test--chat '("todo_write" "echo"))
                                                   "Plan it" script)))
                                    (mapcar (lambda (request)
                                              (prin1-to-string (efrit-todo-gptel-test--messages request)))
                                            requests))))
                           (on (funcall run t))
                           (off (funcall run nil)))
                      (list :running (efrit-todo-build-running-p)
                            :same (or (equal on off) (list on off))
                            :requests (length on)
                            :calls (length efrit-todo-build-test-child--todo-calls))))
                 (concat "FAKE_CARGO_GATE=" (expand-file-name "never" dir))))))
      (should (eq (plist-get value :running) t))
      (should (eq (plist-get value :same) t))
      (should (equal (plist-get value :requests) 3))
      (should (equal (plist-get value :calls) 2)))))

(ert-deftest efrit-todo-build-test-module-copied-in-later-loads-with-the-mode ()
  "A module copied beside the Lisp files later is loaded by the mode.
So the README's package install (install, then copy the module in)
works without a restart."
  (skip-unless (file-exists-p efrit-todo-build-test--module))
  (efrit-todo-build-test--with-tree (dir nil)
    (let ((value (car (efrit-todo-build-test--run
                       dir
                       `(progn
                          (require 'efrit-todo)
                          (let ((before (efrit-todo-build-module-loaded-p)))
                            (copy-file ,efrit-todo-build-test--module
                                       ,(expand-file-name "lisp/efrit-todo-module.so" dir))
                            (efrit-todo-efrit-mode 1)
                            (list :before before
                                  :after (efrit-todo-build-module-loaded-p)
                                  :stand-ins (efrit-todo-build-test-child--stand-ins)
                                  :write (efrit-todo-build-test-child--try
                                          (lambda () (efrit-todo-write
                                                      '(:todos [(:content "A" :status "pending")])))))))))))
      (should (eq (plist-get value :before) nil))
      (should (eq (plist-get value :after) t))
      (should (null (plist-get value :stand-ins)))
      (should (string-match-p "\\`\\[TODO list updated" (cadr (plist-get value :write)))))))

(defconst efrit-todo-build-test--no-offer-form
  '(let* ((asked nil)
          (result (cl-letf (((symbol-function 'y-or-n-p)
                             (lambda (prompt) (push prompt asked) t)))
                    (let ((noninteractive nil))
                      (efrit-todo-build-test-child--try (lambda () (require 'efrit-todo)))))))
     (list :asked asked :result result
           :started efrit-todo-build--process
           :warnings (if (get-buffer "*Warnings*")
                         (with-current-buffer "*Warnings*"
                           (buffer-substring-no-properties (point-min) (point-max)))
                       "")
           :call (efrit-todo-build-test-child--try #'efrit-todo-list)))
  "Require efrit-todo as an interactive user; report what happened.")

(ert-deftest efrit-todo-build-test-no-offer-without-the-source ()
  "Without efrit-todo's Cargo.toml above lisp/, no offer: a warning says what to do."
  (dolist (toml '(nil "[package]\nname = \"another-crate\"\nversion = \"1.0.0\"\n"))
    (efrit-todo-build-test--with-tree (dir toml)
      (let ((value (car (efrit-todo-build-test--run dir efrit-todo-build-test--no-offer-form))))
        (should (null (plist-get value :asked)))
        (should (null (plist-get value :started)))
        (should (equal (plist-get value :result) '(:value efrit-todo)))
        (dolist (text (list (plist-get value :warnings) (nth 2 (plist-get value :call))))
          (should (string-match-p "efrit-todo-module\\.so is missing" text))
          (should (string-match-p "git clone https://" text))
          (should (string-match-p "run .make. in it" text)))
        (should (eq (nth 1 (plist-get value :call)) 'efrit-todo-error))))))

(ert-deftest efrit-todo-build-test-no-offer-without-cargo ()
  "Without cargo, no offer either: the warning says to install Rust."
  (efrit-todo-build-test--with-tree (dir t)
    (let ((value (car (efrit-todo-build-test--run
                       dir `(progn (setq efrit-todo-build-cargo-program
                                         ,(expand-file-name "no-such-cargo" dir))
                                   ,efrit-todo-build-test--no-offer-form)))))
      (should (null (plist-get value :asked)))
      (should (equal (plist-get value :result) '(:value efrit-todo)))
      (dolist (text (list (plist-get value :warnings) (nth 2 (plist-get value :call))))
        (should (string-match-p "cargo, which builds it, is not found.*rustup\\.rs" text))))))

(ert-deftest efrit-todo-build-test-errors-match-the-modules ()
  "The errors defined before the module loads are the module's own."
  (skip-unless (file-exists-p efrit-todo-build-test--module))
  (efrit-todo-build-test--with-tree (dir nil)
    (let ((value (car (efrit-todo-build-test--run
                       dir
                       `(let ((errors '(efrit-todo-error efrit-todo-invalid-input
                                                         efrit-todo-storage-error
                                                         efrit-todo-internal-error)))
                          (cl-flet ((properties ()
                                      (mapcar (lambda (error)
                                                (list (get error 'error-conditions)
                                                      (get error 'error-message)))
                                              errors)))
                            (require 'efrit-todo-build)
                            (let ((before (properties)))
                              (module-load ,efrit-todo-build-test--module)
                              (list before (properties)))))))))
      (should (equal (car value) (cadr value)))
      (should (equal (car (nth 1 (car value)))
                     '(efrit-todo-invalid-input efrit-todo-error error))))))

(defvar efrit-todo-build--started)
(defvar efrit-todo-build--progress)
(declare-function efrit-todo-build--progress-text "efrit-todo-build" ())
(declare-function efrit-todo-build--command-error "efrit-todo-build" (show data context caller))

;; Alone, not in a child: the count is text, whatever cargo does.
(ert-deftest efrit-todo-build-test-last-crate-says-linking ()
  "While cargo compiles and links the last crate, the progress says so."
  (require 'efrit-todo-build)
  (let ((efrit-todo-build--started (- (float-time) 41))
        (efrit-todo-build--progress '(23 . 56)))
    (should (string-match-p "\\`23/56 crates, 4[12] s\\'" (efrit-todo-build--progress-text)))
    (setq efrit-todo-build--progress '(55 . 56))
    (let ((text (efrit-todo-build--progress-text)))
      (should (string-match-p "linking" text))
      (should-not (string-match-p "55/56" text)))))

;; The command loop's display itself needs an interactive Emacs: the
;; function it calls is checked here, the terminal test sees *Messages*.
(ert-deftest efrit-todo-build-test-errors-reach-the-user-as-sentences ()
  "An efrit-todo error in a command shows its text plainly, with no function name."
  (require 'efrit-todo-build)
  (should (advice-function-member-p #'efrit-todo-build--command-error command-error-function))
  (let ((shown (efrit-todo-build--command-error
                #'list '(efrit-todo-error "The module \"x\" is not loaded") ""
                'efrit-todo--module-sessions)))
    (should (null (nth 2 shown)))
    (should (equal (error-message-string (car shown))
                   "efrit-todo error: The module \"x\" is not loaded")))
  (let ((shown (efrit-todo-build--command-error #'list '(void-function foo) "" 'bar)))
    (should (equal shown '((void-function foo) "" bar)))))

(provide 'efrit-todo-build-test)
;;; efrit-todo-build-test.el ends here
