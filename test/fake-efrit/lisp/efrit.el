;;; efrit.el --- Stand-in for Efrit's entry file, for the set-up tests -*- lexical-binding: t; -*-

;;; Commentary:

;; CI has no Efrit.  The set-up tests need only what Efrit does to
;; `load-path': loading its entry file, as Efrit's README says to,
;; puts its subdirectory core/ at the front, and core/ holds an
;; efrit-todo.el of its own.  This directory reproduces that, and no
;; more; nothing here is Efrit's code.

;;; Code:

(add-to-list 'load-path
             (expand-file-name "core" (file-name-directory (or load-file-name buffer-file-name))))

(provide 'efrit)

;;; efrit.el ends here
