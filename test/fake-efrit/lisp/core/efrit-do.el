;;; efrit-do.el --- Stand-in for Efrit's command loop file, for the set-up tests -*- lexical-binding: t; -*-

;;; Commentary:

;; Efrit's command loop requires its efrit-todo.el and reads the list
;; under a name of its own, an alias of the todo file's variable.
;; Requiring this file thus loads whichever efrit-todo.el comes first,
;; as Efrit's does.  Not Efrit's code.

;;; Code:

(require 'efrit-todo)

(defvaralias 'efrit-do--current-todos 'efrit-todo--current-todos)

(provide 'efrit-do)

;;; efrit-do.el ends here
