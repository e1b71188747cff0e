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
      (dolist (during (list (plist-get value :write) (plist-get value :compat)))
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

(defconst efrit-todo-build-test--no-offer-form
  '(let* ((asked nil)
          (result (cl-letf (((symbol-function 'y-or-n-p)
                             (lambda (prompt) (push prompt asked) t)))
                    (let ((noninteractive nil))
                      (efrit-todo-build-test-child--try (lambda () (require 'efrit-todo)))))))
     (list :asked asked :result result
           :started efrit-todo-build--process))
  "Require efrit-todo as an interactive user; report what happened.")

(ert-deftest efrit-todo-build-test-no-offer-without-the-source ()
  "Without efrit-todo's Cargo.toml above lisp/, no offer: what to do instead."
  (dolist (toml '(nil "[package]\nname = \"another-crate\"\nversion = \"1.0.0\"\n"))
    (efrit-todo-build-test--with-tree (dir toml)
      (let ((value (car (efrit-todo-build-test--run dir efrit-todo-build-test--no-offer-form))))
        (should (null (plist-get value :asked)))
        (should (null (plist-get value :started)))
        (let ((result (plist-get value :result)))
          (should (eq (nth 1 result) 'efrit-todo-error))
          (should (string-match-p "efrit-todo-module\\.so is missing" (nth 2 result)))
          (should (string-match-p "git clone https://" (nth 2 result)))
          (should (string-match-p "run .make. in it" (nth 2 result))))))))

(ert-deftest efrit-todo-build-test-no-offer-without-cargo ()
  "Without cargo, no offer either: the message says to install Rust."
  (efrit-todo-build-test--with-tree (dir t)
    (let ((value (car (efrit-todo-build-test--run
                       dir `(progn (setq efrit-todo-build-cargo-program
                                         ,(expand-file-name "no-such-cargo" dir))
                                   ,efrit-todo-build-test--no-offer-form)))))
      (should (null (plist-get value :asked)))
      (should (string-match-p "cargo, which builds it, is not found.*rustup\\.rs"
                              (nth 2 (plist-get value :result)))))))

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
