;;; efrit-todo-real-efrit.el --- Load a real Efrit for the loop scenarios -*- lexical-binding: t; -*-

;;; Commentary:

;; `make test-efrit' loads this file, then efrit-todo-scenarios.el, to
;; run the scenarios through the efrit-do loop of the Efrit checkout
;; that EFRIT_DIR names.  efrit-todo's lisp/ directory stays first in
;; `load-path', so Efrit's `(require \\='efrit-todo)' gets this package.
;; Only Efrit's network call is replaced, by the scenarios' scripted
;; Claude.

;;; Code:

(let ((root (getenv "EFRIT_DIR")))
  (unless (and root (file-directory-p (expand-file-name "lisp/core" root)))
    (error "EFRIT_DIR does not name an Efrit checkout: %S" root))
  (require 'efrit-todo)
  (dolist (dir '("lisp" "lisp/core" "lisp/interfaces" "lisp/tools" "lisp/support"))
    (add-to-list 'load-path (expand-file-name dir root) t)))

(defvar efrit-do-async-show-progress-buffer)

;; Required by name at run time: the byte-compiler has no Efrit to load.
(dolist (feature '(efrit-do efrit-executor efrit-remote-queue efrit-repl-session efrit-repl-loop))
  (require feature))

(unless (equal (symbol-file 'efrit-todo-add)
               (expand-file-name "efrit-todo-compat.el" efrit-todo--directory))
  (error "Efrit's own efrit-todo.el was loaded instead of efrit-todo's"))

;; Nothing pops up in batch.
(setq efrit-do-async-show-progress-buffer nil)

(provide 'efrit-todo-real-efrit)
;;; efrit-todo-real-efrit.el ends here
