;;; efrit-todo-efrit-test.el --- ERT tests of Efrit's own todo code on efrit-todo -*- lexical-binding: t; -*-

;;; Commentary:

;; Runs only when EFRIT_DIR names an Efrit checkout.  Efrit's code is
;; loaded with this package's efrit-todo.el standing in for Efrit's file
;; of that name, and Efrit's own todo code is driven directly.

;;; Code:

(require 'ert)
(require 'efrit-todo)

(defvar efrit-do--current-todos)
(declare-function efrit-do--handle-todo-write "efrit-do-handlers" (tool-input))
(declare-function efrit-do--clear-todos "efrit-do" ())

(defun efrit-todo-efrit-test--load ()
  "Load Efrit from EFRIT_DIR behind this package, or skip the test."
  (let ((root (getenv "EFRIT_DIR")))
    (cond ((member root '(nil ""))
           (ert-skip "EFRIT_DIR is unset; to run it: make ert EFRIT_DIR=/path/to/efrit"))
          ((not (file-directory-p (expand-file-name "lisp" root)))
           (ert-skip (format "EFRIT_DIR=%s has no lisp/: it must name an Efrit checkout"
                             root))))
    (dolist (dir '("lisp/tools" "lisp/support" "lisp/interfaces" "lisp/core" "lisp"))
      (add-to-list 'load-path (expand-file-name dir root) t))
    (require 'efrit-do)
    (should (equal (symbol-file 'efrit-todo-add)
                   (expand-file-name "efrit-todo-compat.el" efrit-todo--directory)))))

(defun efrit-todo-efrit-test--input (&rest items)
  "Return a todo_write input in Efrit's parsed shape, from ITEMS (content status)."
  (let ((input (make-hash-table :test 'equal)))
    (puthash "todos"
             (vconcat (mapcar (lambda (item)
                                (let ((todo (make-hash-table :test 'equal)))
                                  (puthash "content" (car item) todo)
                                  (puthash "status" (cadr item) todo)
                                  todo))
                              items))
             input)
    input))

(ert-deftest efrit-todo-efrit-test-efrit-handler-writes-into-the-module ()
  "Efrit's own todo_write handler, which sets the variable, lands in the module."
  (efrit-todo-efrit-test--load)
  (let ((efrit-todo-current-session (format "efrit-handler-%s" (random))))
    (efrit-do--handle-todo-write
     (efrit-todo-efrit-test--input '("Read the file" "in_progress") '("Fix it" "pending")))
    (should (equal (mapcar (lambda (p) (plist-get p :content)) (efrit-todo-list))
                   '("Read the file" "Fix it")))
    (should (eq (plist-get (efrit-todo-current) :status) 'in-progress))
    (should (equal (length efrit-do--current-todos) 2))
    (should (string-match-p "Read the file" (efrit-todo-format-for-prompt)))
    (efrit-do--clear-todos)
    (should (null (efrit-todo-list)))
    (should (equal (efrit-todo-format-for-prompt) ""))))

(ert-deftest efrit-todo-efrit-test-efrit-sees-efrit-todo-writes ()
  "After `efrit-todo-write', Efrit's alias variable holds the new list."
  (efrit-todo-efrit-test--load)
  (let ((efrit-todo-current-session (format "efrit-alias-%s" (random))))
    (efrit-todo-write (efrit-todo-efrit-test--input '("Plan" "completed") '("Do" "in_progress")))
    (should (equal (mapcar #'efrit-do-todo-item-status efrit-do--current-todos)
                   '(completed in-progress)))
    (should (equal (mapcar #'efrit-do-todo-item-id efrit-do--current-todos) '("t1" "t2")))))

(provide 'efrit-todo-efrit-test)
;;; efrit-todo-efrit-test.el ends here
