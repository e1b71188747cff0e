;;; efrit-todo-bench-inputs.el --- Inputs and timing shared by the benches -*- lexical-binding: t; -*-

;;; Commentary:

;; The inputs every row of `make bench' is timed on, and the timer.  This
;; file needs nothing but Emacs, so that the child Emacs that times
;; Efrit's own code (efrit-todo-bench-efrit.el) builds exactly the same
;; inputs as the parent that times efrit-todo.

;;; Code:

(require 'benchmark)

(defconst efrit-todo-bench-inputs-sizes '(5 20 100 1000)
  "List sizes todo_write is timed at.")

(defun efrit-todo-bench-inputs-write (size round)
  "Return a todo_write input of SIZE items, in Efrit's parsed shape.
The first ROUND items are completed, the next one is in progress."
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

(defun efrit-todo-bench-inputs-writes (size)
  "Return a vector of 10 inputs of SIZE items, each one step further on."
  (vconcat (mapcar (lambda (round) (efrit-todo-bench-inputs-write size (% round size)))
                   (number-sequence 0 9))))

(defconst efrit-todo-bench-inputs-tools
  '("eval_sexp" "read_file" "search_content" "edit_file" "shell_command")
  "Tool names the breaker benches rotate through.")

(defun efrit-todo-bench-inputs-tool-calls (n)
  "Return a vector of N tool invocations, each (NAME INPUT RESULT).
Tools rotate and inputs differ, so that no breaker rule trips: what is
timed is the bookkeeping of an ordinary call."
  (let ((calls (make-vector n nil))
        (tools (vconcat efrit-todo-bench-inputs-tools)))
    (dotimes (i n)
      (let ((input (make-hash-table :test 'equal)))
        (puthash "expr" (format "(progn (find-file \"file-%d.el\") (goto-char %d))" i (* 7 i)) input)
        (aset calls i (list (aref tools (% i (length tools)))
                            input
                            (format "Opened file-%d.el; point is %d" i (* 7 i))))))
    calls))

(defun efrit-todo-bench-inputs-compile (directory)
  "Byte-compile every function loaded from a file under DIRECTORY.
`make bench' loads sources, which Emacs interprets; an installed
package is byte-compiled, so both sides are timed compiled."
  (let ((directory (file-name-as-directory (file-truename directory)))
        (byte-compile-warnings nil)
        (inhibit-message t))
    (dolist (entry load-history)
      (when (and (stringp (car entry))
                 (string-prefix-p directory (file-truename (car entry))))
        (dolist (element (cdr entry))
          (when (and (eq (car-safe element) 'defun)
                     (functionp (cdr element))
                     (not (byte-code-function-p (indirect-function (cdr element))))
                     (not (subrp (indirect-function (cdr element))))
                     (not (module-function-p (indirect-function (cdr element)))))
            (ignore-errors (byte-compile (cdr element)))))))))

(defun efrit-todo-bench-inputs-us (repetitions function)
  "Return microseconds per call of FUNCTION: least of 5 rounds of REPETITIONS.
The least, because other processes only ever add time.  Garbage
collection during a run counts: it is part of the real cost, and
every run is long enough to include its share."
  (funcall function)
  (let (runs)
    (dotimes (_ 5)
      (garbage-collect)
      (push (/ (* 1e6 (car (benchmark-call function repetitions))) repetitions) runs))
    (apply #'min runs)))

(provide 'efrit-todo-bench-inputs)
;;; efrit-todo-bench-inputs.el ends here
