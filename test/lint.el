;;; lint.el --- Lint the efrit-todo Lisp files in batch -*- lexical-binding: t; -*-

;;; Commentary:

;; Usage, from the top directory:
;;   $EMACS --batch -L lisp/ -l test/lint.el FILE... [--checkdoc-only FILE...]
;; (without -Q, so that Debian's site start-up puts package-lint on the
;; `load-path').
;; Byte-compiles each FILE with warnings as errors (into a temporary
;; directory, so no stale .elc is left beside the sources), runs checkdoc
;; and, when it is installed, package-lint.  Exits non-zero on any problem.
;; Debian's package-lint wrongly calls Emacs 28.1 uninstallable; that
;; one message is ignored.  The files after --checkdoc-only (the tests
;; and benches, which are no package and are byte-compiled by the
;; Makefile with their own load path) get checkdoc alone.

;;; Code:

(require 'bytecomp)
(require 'checkdoc)
;; Before any file is visited: package-lint marks its file-local
;; `package-lint-main-file' safe, which the files other than the main
;; one set, and a file visited before that would lose it.
(require 'package-lint nil t)
(declare-function package-lint-buffer "package-lint" (&optional buffer))

(defvar lint--problems 0 "Problems found so far.")

(defun lint--report (file format-string &rest args)
  "Report a problem in FILE described by FORMAT-STRING and ARGS."
  (setq lint--problems (1+ lint--problems))
  (message "%s: %s" file (apply #'format format-string args)))

(defun lint--byte-compile (file)
  "Byte-compile FILE with warnings as errors into a temporary directory."
  (let* ((dir (make-temp-file "efrit-todo-lint" t))
         (byte-compile-dest-file-function
          (lambda (source) (expand-file-name (concat (file-name-nondirectory source) "c") dir)))
         (byte-compile-error-on-warn t))
    (unwind-protect
        (unless (byte-compile-file file)
          (lint--report file "byte-compilation failed"))
      (delete-directory dir t))))

(defun lint--checkdoc (file)
  "Run checkdoc on FILE."
  (with-current-buffer (find-file-noselect file)
    (let ((checkdoc-create-error-function
           (lambda (text start _end &optional _unfixable)
             (lint--report file "%d: %s" (line-number-at-pos start) text)
             nil))
          (checkdoc-autofix-flag 'never))
      (checkdoc-current-buffer t))))

(defun lint--package-lint (file)
  "Run package-lint on FILE when it is available."
  (when (require 'package-lint nil t)
    (with-current-buffer (find-file-noselect file)
      (dolist (problem (package-lint-buffer))
        (pcase-let ((`(,line ,column ,type ,text) problem))
          (unless (string-match-p "uninstallable in all released Emacs versions" text)
            (lint--report file "%d:%d: package-lint %s: %s" line column type text)))))))

(let ((checkdoc-only nil))
  (dolist (argument command-line-args-left)
    (cond ((equal argument "--checkdoc-only") (setq checkdoc-only t))
          (checkdoc-only (lint--checkdoc argument))
          (t (lint--byte-compile argument)
             (lint--checkdoc argument)
             (lint--package-lint argument)))))
(unless (or (featurep 'package-lint) (member (car command-line-args-left) '(nil "--checkdoc-only")))
  (message "lint: package-lint skipped: not on this Emacs's load-path"))
(setq command-line-args-left nil)
(if (zerop lint--problems)
    (message "lint: no problems")
  (message "lint: %d problem(s)" lint--problems)
  (kill-emacs 1))

;;; lint.el ends here
