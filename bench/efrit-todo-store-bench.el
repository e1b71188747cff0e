;;; efrit-todo-store-bench.el --- Timings of efrit-todo persistence -*- lexical-binding: t; -*-

;;; Commentary:

;; `efrit-todo-store-bench-rows' times saving a session to disk: the whole
;; atomic write (encode, temporary file, fdatasync, rename) done
;; synchronously, as `efrit-todo--module-store-save' does it while the
;; module's writer thread syncs the directory right after; the same with
;; that directory sync waited for (a save then `efrit-todo-flush', the
;; most a save can cost); what the call that made a change pays
;; when persistence is on (the save is only scheduled), todo_write with
;; persistence on and off, and reading a session back.  The bench runner
;; of `make bench' prints the rows; `efrit-todo-store-bench-run' prints
;; them alone.  Everything is written under `temporary-file-directory'.

;;; Code:

(require 'cl-lib)
(require 'efrit-todo)
(require 'efrit-todo-bench-inputs)

(declare-function efrit-todo--module-store-save "efrit-todo-module" (session dir))
(declare-function efrit-todo--module-store-flush "efrit-todo-module" ())
(declare-function efrit-todo--module-store-restore-within "efrit-todo-module"
                  (dir only-open force max-items max-content))

(defun efrit-todo-store-bench--object (&rest keys-and-values)
  "Return a hash table of KEYS-AND-VALUES, as Efrit's JSON parser builds."
  (let ((table (make-hash-table :test 'equal)))
    (while keys-and-values
      (puthash (pop keys-and-values) (pop keys-and-values) table))
    table))

(defun efrit-todo-store-bench--input (size round)
  "Return a todo_write input of SIZE items of which ROUND are completed."
  (efrit-todo-store-bench--object
   "todos"
   (vconcat (mapcar (lambda (i)
                      (efrit-todo-store-bench--object
                       "content" (format "Step %d of the plan: edit file-%d.el" i i)
                       "activeForm" (format "Editing file-%d.el" i)
                       "status" (cond ((< i round) "completed")
                                      ((= i round) "in_progress")
                                      (t "pending"))))
                    (number-sequence 0 (1- size))))))

(defun efrit-todo-store-bench--us (function)
  "Return (MICROSECONDS GC-SHARE) per call of FUNCTION, as `make bench' times."
  (let ((result (efrit-todo-bench-inputs-measure-one function)))
    (list (plist-get result :us) (plist-get result :gc))))

(defun efrit-todo-store-bench--session (size)
  "Return a fresh session with SIZE items and a history of 30 writes."
  (let ((session (format "store-bench-%d-%s" size (cl-gensym)))
        (efrit-todo-state-directory nil))
    (dotimes (round 30)
      (efrit-todo-write (efrit-todo-store-bench--input size round) session))
    session))

(defun efrit-todo-store-bench-rows ()
  "Return timing rows (LABEL MICROSECONDS-PER-CALL GC-SHARE) for persistence."
  (let* ((root (make-temp-file "efrit-todo-store-bench-" t))
         (dir (file-name-as-directory (expand-file-name "state" root)))
         (session (efrit-todo-store-bench--session 100))
         (rows nil))
    (unwind-protect
        (progn
          (efrit-todo--module-store-save session dir)
          (push (cons "save to disk, 100 items"
                      (efrit-todo-store-bench--us
		       (lambda () (efrit-todo--module-store-save session dir))))
                rows)
          (push (cons "save to disk + directory sync, 100 items"
                      (efrit-todo-store-bench--us
		       (lambda ()
                         (efrit-todo--module-store-save session dir)
                         (efrit-todo--module-store-flush))))
                rows)
          (let ((big (efrit-todo-store-bench--session 1000)))
            (push (cons "save to disk, 1000 items"
                        (efrit-todo-store-bench--us
			 (lambda () (efrit-todo--module-store-save big dir))))
                  rows))
          (let ((efrit-todo-state-directory dir))
            (push (cons "schedule a save (the changing call's cost)"
                        (efrit-todo-store-bench--us
			 (lambda () (efrit-todo--schedule-save session))))
                  rows))
          (efrit-todo-flush)
          (let ((inputs (vconcat (mapcar (lambda (r) (efrit-todo-store-bench--input 100 r))
                                         (number-sequence 0 9))))
                (round 0))
            (dolist (setting (list (cons "off" nil) (cons "on" dir)))
              (let ((efrit-todo-state-directory (cdr setting)))
                (push (cons (format "todo_write 100 items, persistence %s" (car setting))
                            (efrit-todo-store-bench--us
			     (lambda ()
                               (efrit-todo-write (aref inputs (% (cl-incf round) 10))
                                                 session))))
                      rows)
                (efrit-todo-flush))))
          (push (cons "restore 2 sessions (100 and 1000 items)"
                      (efrit-todo-store-bench--us
		       (lambda () (efrit-todo--module-store-restore-within
                                    dir nil t efrit-todo-max-items
                                    efrit-todo-max-content-length))))
                rows)
          (nreverse rows))
      (efrit-todo-flush)
      (delete-directory root t))))

(defun efrit-todo-store-bench-run ()
  "Print the persistence timings."
  (pcase-dolist (`(,label ,us ,gc) (efrit-todo-store-bench-rows))
    (princ (format "%-40s %12.1f us %4.0f%% GC\n" label us (* 100 gc)))))

(provide 'efrit-todo-store-bench)
;;; efrit-todo-store-bench.el ends here
