;;; efrit-todo.el --- Stand-in for the efrit-todo.el that Efrit ships -*- lexical-binding: t; -*-

;;; Commentary:

;; The file that shadows efrit-todo's in the set-up tests: the same
;; feature name, a plain list in a variable, none of efrit-todo's own
;; names (no `efrit-todo-write', no module).  Written for the tests from
;; the names efrit-todo-compat.el documents; not Efrit's code.

;;; Code:

(defvar efrit-todo--current-todos nil
  "The items, as vectors [ID CONTENT STATUS PRIORITY CREATED COMPLETED].")

(defvar efrit-todo--counter 0
  "How many ids were issued.")

(defun efrit-todo-add (content &optional priority)
  "Append an item with CONTENT and PRIORITY; return it."
  (let ((item (vector (format "todo-%d" (setq efrit-todo--counter (1+ efrit-todo--counter)))
                      content 'todo (or priority 'medium) (current-time) nil)))
    (setq efrit-todo--current-todos (append efrit-todo--current-todos (list item)))
    item))

(defun efrit-todo-format-for-prompt ()
  "Return the items as lines of text."
  (mapconcat (lambda (item) (format "%s %s" (aref item 0) (aref item 1)))
             efrit-todo--current-todos "\n"))

(provide 'efrit-todo)

;;; efrit-todo.el ends here
