;;; efrit-todo-ui-bench.el --- Timings of the *efrit-todos* buffer -*- lexical-binding: t; -*-

;;; Commentary:

;; `efrit-todo-ui-bench-rows' times the UI in batch Emacs against the real
;; module and returns (LABEL MICROSECONDS-PER-CALL GC-SHARE) rows for the
;; bench runner, timed as its other rows are (median of runs, see
;; `efrit-todo-bench-inputs-measure'): redrawing one session's section after a typical change (what
;; a write costs while the buffer is visible), the same with every line
;; rewritten, the running-time tick and the mode-line text.  The buffer is shown in the batch frame's window, so
;; the redraws are the ones a user's Emacs does, minus the display itself.
;; The UI is timed byte-compiled, as a package installs it.
;;
;; Alone, after `make build': `efrit-todo-ui-bench-run' in batch Emacs,
;; with the module's and the benches' directories on the `load-path'.

;;; Code:

(require 'bytecomp)
(require 'cl-lib)
(require 'efrit-todo)
(require 'efrit-todo-ui)
(require 'efrit-todo-bench-inputs)

(defun efrit-todo-ui-bench--input (size done)
  "Return a todo_write input of SIZE items, DONE of them completed."
  (let ((todos (make-vector size nil)))
    (dotimes (i size)
      (let ((item (make-hash-table :test 'equal)))
        (puthash "content" (format "Step %d of the plan: edit file-%d.el" i i) item)
        (puthash "activeForm" (format "Editing file-%d.el" i) item)
        (puthash "status" (cond ((< i done) "completed") ((= i done) "in_progress") (t "pending")) item)
        (aset todos i item)))
    (let ((input (make-hash-table :test 'equal)))
      (puthash "todos" todos input)
      input)))

;; One call per item for the first twenty, as an agent makes them.
(defun efrit-todo-ui-bench--session (size)
  "Return a fresh session with SIZE items, a third done, tool results under some."
  (let ((session (format "ui-bench-%d-%d" size (random 1000000)))
        (done (/ size 3)))
    (dotimes (i (min 20 done))
      (efrit-todo-write (efrit-todo-ui-bench--input size i) session)
      (efrit-todo-after-tool (format "tool-%d" (% i 7)) (format "input %d" i)
                             (format "result of call %d\nsecond line" i) nil session 0.1))
    (efrit-todo-write (efrit-todo-ui-bench--input size done) session)
    session))

(defun efrit-todo-ui-bench--redraw (session repetitions &optional all-lines)
  "Return (MICROSECONDS GC-SHARE) per redraw of SESSION after a typical change.
Between redraws, and outside the timing, the running item alternates
between completed and in progress, as when a write completes one item
and starts the next.  With ALL-LINES, every line is rewritten.  The
redraws are timed in runs of REPETITIONS (as many runs as the other
rows of `make bench' have); the time is the median run's, the GC share
that of all the redraws' time."
  (let* ((id (plist-get (efrit-todo-current session) :id))
         (status (lambda (state)
                   (let ((efrit-todo-change-functions nil))
                     (efrit-todo-user-set-status id state session))))
         (runs nil)
         (total 0.0)
         (gc-total 0.0))
    (dotimes (_ (efrit-todo-bench-inputs-runs))
      (let ((time 0.0))
        (dotimes (i repetitions)
          (funcall status (if (cl-evenp i) 'completed 'in-progress))
          (when all-lines
            (clrhash efrit-todo-ui--drawn))
          (let ((gc gc-elapsed)
                (start (float-time)))
            (efrit-todo-ui--redraw-session session)
            (setq time (+ time (- (float-time) start))
                  gc-total (+ gc-total (- gc-elapsed gc)))))
        (setq total (+ total time))
        (push (/ (* 1e6 time) repetitions) runs)))
    ;; The item is running again, as before.
    (funcall status 'in-progress)
    (list (efrit-todo-bench-inputs--median runs) (/ gc-total total))))

(defun efrit-todo-ui-bench--us (function)
  "Return (MICROSECONDS GC-SHARE) per call of FUNCTION, as `make bench' times."
  (let ((result (efrit-todo-bench-inputs-measure-one function)))
    (list (plist-get result :us) (plist-get result :gc))))

(defun efrit-todo-ui-bench--load-compiled ()
  "Load efrit-todo-ui byte-compiled, as users run it, unless it already is."
  (unless (byte-code-function-p (symbol-function 'efrit-todo-ui--draw-section))
    (let* ((dir (make-temp-file "efrit-todo-ui-bench" t))
           (byte-compile-dest-file-function
            (lambda (source) (expand-file-name (concat (file-name-nondirectory source) "c") dir))))
      (unwind-protect
          (let ((compiled (byte-compile-dest-file (locate-library "efrit-todo-ui.el"))))
            (byte-compile-file (locate-library "efrit-todo-ui.el"))
            (load compiled nil t))
        (delete-directory dir t)))))

(defun efrit-todo-ui-bench-rows ()
  "Time the UI; return rows (LABEL MICROSECONDS-PER-CALL GC-SHARE)."
  (let ((efrit-todo-auto-show nil)
        (efrit-todo-refresh-interval nil)
        (rows nil))
    (efrit-todo-ui-bench--load-compiled)
    (when (get-buffer efrit-todo-buffer-name)
      (kill-buffer efrit-todo-buffer-name))
    (unwind-protect
        (dolist (size '(100 500))
          (let ((session (efrit-todo-ui-bench--session size))
                (repetitions (if (= size 100) 20 4)))
            (efrit-todo-show)
            (with-current-buffer efrit-todo-buffer-name
              (push (cons (format "UI redraw, %d items" size)
                          (efrit-todo-ui-bench--redraw session repetitions))
                    rows)
              (push (cons (format "UI redraw every line, %d items" size)
                          (efrit-todo-ui-bench--redraw session repetitions t))
                    rows)
              (when (= size 100)
                (push (cons "UI running-time tick, 100 items"
                            (efrit-todo-ui-bench--us #'efrit-todo-ui--tick))
                      rows)
                (push (cons "Mode-line text, 100 items"
                            (efrit-todo-ui-bench--us
                             (lambda () (efrit-todo-mode-line-text session))))
                      rows)))
            (efrit-todo-reset session)))
      (when (get-buffer efrit-todo-buffer-name)
        (kill-buffer efrit-todo-buffer-name)))
    (nreverse rows)))

(defun efrit-todo-ui-bench-run ()
  "Print the UI timings."
  (princ (format "%-34s %12s %5s\n" "operation" "us per call" "GC"))
  (pcase-dolist (`(,label ,us ,gc) (efrit-todo-ui-bench-rows))
    (princ (format "%-34s %12.1f %4.0f%%\n" label us (* 100 gc)))))

(provide 'efrit-todo-ui-bench)
;;; efrit-todo-ui-bench.el ends here
