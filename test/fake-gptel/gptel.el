;;; gptel.el --- Makes the gptel stand-in findable as gptel, for the set-up tests -*- lexical-binding: t; -*-

;;; Commentary:

;; A gptel user's `load-path' holds gptel's directory, so that
;; `(require 'gptel)' works wherever it comes in an init file.  This
;; directory does the same for test/efrit-todo-fake-gptel.el, the
;; stand-in for gptel that CI uses.

;;; Code:

(load (expand-file-name "../efrit-todo-fake-gptel"
                        (file-name-directory (or load-file-name buffer-file-name)))
      nil t)

(provide 'gptel)

;;; gptel.el ends here
