;;; efrit-todo-module-test.el --- ERT tests of loading, building and guarding the module -*- lexical-binding: t; -*-

;;; Commentary:

;; How efrit-todo.el finds, builds and checks its dynamic module, and that
;; a panic in Rust reaches Lisp as an error.  The build tests run child
;; Emacsen on a copy of the package, so this Emacs is not disturbed.

;;; Code:

(require 'ert)
(require 'efrit-todo)

(defconst efrit-todo-module-test--root
  (expand-file-name ".." efrit-todo--directory)
  "The checkout under test.")

(defun efrit-todo-module-test--child (directory form &rest environment)
  "Run FORM in a child Emacs with DIRECTORY/lisp first in `load-path'.
ENVIRONMENT strings are added to the child's environment.  Return
the exit code and output as a cons."
  (with-temp-buffer
    (let* ((process-environment (append environment process-environment))
           (code (call-process (expand-file-name invocation-name invocation-directory)
                               nil t nil "-Q" "--batch"
                               "-L" (expand-file-name "lisp" directory)
                               "--eval" (prin1-to-string form))))
      (cons code (buffer-string)))))

(defun efrit-todo-module-test--copy (files)
  "Copy FILES of the checkout into a new temporary directory; return it."
  (let ((dir (make-temp-file "efrit-todo-module-test" t)))
    (dolist (file files)
      (let ((from (expand-file-name file efrit-todo-module-test--root))
            (to (expand-file-name file dir)))
        (make-directory (file-name-directory to) t)
        (if (file-directory-p from)
            (copy-directory from to nil t t)
          (copy-file from to))))
    dir))

(ert-deftest efrit-todo-module-test-version-mismatch-is-refused ()
  "A module whose version differs from the Lisp code is refused clearly."
  (let ((efrit-todo-version "0.0.0-test"))
    (let ((err (should-error (efrit-todo--load-module))))
      (should (string-match-p "module is version .* but the Lisp code is 0\\.0\\.0-test"
                              (cadr err)))
      (should (string-match-p "efrit-todo-build-module" (cadr err)))))
  (should (equal (efrit-todo--module-version) efrit-todo-version)))

(ert-deftest efrit-todo-module-test-module-is-not-named-like-the-lisp-file ()
  "Emacs tries .so before .el, so the module must not be efrit-todo.so."
  (should (equal (file-name-base (efrit-todo-build-module-file)) "efrit-todo-module"))
  (should (equal (locate-library "efrit-todo")
                 (expand-file-name "efrit-todo.el" efrit-todo--directory))))

(ert-deftest efrit-todo-module-test-missing-module-in-batch-says-how-to-build ()
  "Without the module and nobody to ask, `require' warns what to run and goes on.
A call that needs the module says the same."
  (let* ((dir (efrit-todo-module-test--copy
               '("lisp/efrit-todo.el" "lisp/efrit-todo-build.el" "lisp/efrit-todo-compat.el" "Cargo.toml")))
         (result (efrit-todo-module-test--child
                  dir '(progn
                         (require 'efrit-todo)
                         (condition-case err
                             (progn (efrit-todo-list) (kill-emacs 0))
                           (efrit-todo-error (princ (cadr err)) (kill-emacs 3)))))))
    (unwind-protect
        (progn
          (should (equal (car result) 3))
          (should (string-match-p "Warning (efrit-todo): its module efrit-todo-module\\.so is not built.*run .make."
                                  (cdr result)))
          (should (string-match-p "the module is not loaded; M-x efrit-todo-build-module builds it; a batch script builds it first with (require 'efrit-todo-build) (efrit-todo-build-module t)"
                                  (cdr result))))
      (delete-directory dir t))))

(defun efrit-todo-module-test--cargo-runs-p ()
  "Return non-nil if cargo can be run here.
With HOME a fresh directory, rustup's cargo finds no toolchain."
  (and (executable-find "cargo")
       (eql 0 (ignore-errors (call-process "cargo" nil nil nil "--version")))))

(ert-deftest efrit-todo-module-test-missing-module-is-built-on-load ()
  "With `efrit-todo-module-auto-build' t, `require' builds the module with cargo."
  (skip-unless (efrit-todo-module-test--cargo-runs-p))
  (let* ((dir (efrit-todo-module-test--copy
               '("lisp/efrit-todo.el" "lisp/efrit-todo-build.el" "lisp/efrit-todo-compat.el"
                 "Cargo.toml" "Cargo.lock" "src")))
         (result (efrit-todo-module-test--child
                  dir '(progn
                         (setq efrit-todo-module-auto-build t)
                         (require 'efrit-todo)
                         (princ (efrit-todo-write "[{\"content\": \"Built\", \"status\": \"pending\"}]")))
                  ;; Share the compiled dependencies so the build takes seconds.
                  (concat "CARGO_TARGET_DIR="
                          (expand-file-name "target" efrit-todo-module-test--root)))))
    (unwind-protect
        (progn
          (should (equal (car result) 0))
          (should (file-exists-p (expand-file-name "lisp/efrit-todo-module.so" dir)))
          (should (string-match-p "t1 \\[pending\\] Built" (cdr result))))
      (delete-directory dir t))))

(ert-deftest efrit-todo-module-test-panic-becomes-a-lisp-error ()
  "A panic in Rust is signalled with its message and Emacs keeps working."
  (let ((err (should-error (efrit-todo--module-panic-for-test "deliberate test panic"))))
    (should (eq (car err) 'efrit-todo-internal-error))
    (should (string-match-p "deliberate test panic" (format "%S" (cdr err)))))
  (let ((efrit-todo-current-session "after-panic"))
    (should (string-prefix-p "[TODO list updated"
                             (efrit-todo-write '(:todos [(:content "Still alive" :status "pending")]))))
    (should (equal (plist-get (car (efrit-todo-list)) :content) "Still alive"))
    (efrit-todo-reset)))

(provide 'efrit-todo-module-test)
;;; efrit-todo-module-test.el ends here
