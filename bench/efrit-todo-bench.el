;;; efrit-todo-bench.el --- Timings for efrit-todo -*- lexical-binding: t; -*-

;;; Commentary:

;; `make bench' runs `efrit-todo-bench-run': microseconds per todo_write
;; through the module at several list sizes, beside a pure-Lisp baseline
;; that only stores the items the way Efrit's handler does (no validation,
;; no id matching), on the same hash-table inputs in the same run.

;;; Code:

(require 'benchmark)
(require 'efrit-todo)

(defun efrit-todo-bench--input (size round)
  "Return a todo_write input of SIZE items, ROUND of them completed."
  (let ((todos (make-vector size nil)))
    (dotimes (i size)
      (let ((item (make-hash-table :test 'equal)))
        (puthash "content" (format "Step %d of the plan: edit file-%d.el" i i) item)
        (puthash "status" (cond ((< i round) "completed") ((= i round) "in_progress") (t "pending")) item)
        (puthash "activeForm" (format "Editing file-%d.el" i) item)
        (aset todos i item)))
    (let ((input (make-hash-table :test 'equal)))
      (puthash "todos" todos input)
      input)))

(defun efrit-todo-bench--baseline (input)
  "Store INPUT as plain structs without checking it, like Efrit's handler."
  (let ((counter 0))
    (mapcar (lambda (item)
              (efrit-todo-item-create
               :id (format "todo-%d" (cl-incf counter))
               :content (gethash "content" item "")
               :status (intern (gethash "status" item "pending"))
               :priority 'medium
               :created-at (current-time)))
            (gethash "todos" input))))

(defun efrit-todo-bench--us (repetitions function)
  "Return microseconds per call of FUNCTION over REPETITIONS calls."
  (garbage-collect)
  (/ (* 1e6 (car (benchmark-call function repetitions))) repetitions))

(defun efrit-todo-bench-run ()
  "Print the benchmark table."
  (princ (format "%-28s %12s %12s %8s\n" "operation" "module us" "baseline us" "ratio"))
  (dolist (size '(5 20 100 1000))
    (let* ((repetitions (max 20 (/ 20000 size)))
           (inputs (vconcat (mapcar (lambda (r) (efrit-todo-bench--input size (% r size)))
                                    (number-sequence 0 9))))
           (round 0)
           (session (format "bench-%d" size))
           (module (efrit-todo-bench--us
                    repetitions
                    (lambda ()
                      (efrit-todo-write (aref inputs (% (cl-incf round) 10)) session))))
           (baseline (efrit-todo-bench--us
                      repetitions
                      (lambda () (efrit-todo-bench--baseline (aref inputs (% (cl-incf round) 10)))))))
      (princ (format "%-28s %12.1f %12.1f %8.2f\n"
                     (format "todo_write, %d items" size) module baseline (/ module baseline))))))

(provide 'efrit-todo-bench)
;;; efrit-todo-bench.el ends here
