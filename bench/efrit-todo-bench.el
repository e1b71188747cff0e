;;; efrit-todo-bench.el --- Timings for efrit-todo -*- lexical-binding: t; -*-

;;; Commentary:

;; `make bench' runs `efrit-todo-bench-run', which prints one table of
;; microseconds per call:
;;
;; - todo_write at 5, 20, 100 and 1000 items;
;; - a before-tool + after-tool pair, the breaker's work per tool call;
;; - building the report of a session with 1000 ledger entries;
;; - the cost of after-tool and of todo_write at the 1000th and at the
;;   100000th call of one session, which must not grow;
;; - rows of the UI and store benches, when those files are present.
;;
;; When EFRIT_DIR names an Efrit checkout, a child Emacs times Efrit's
;; own todo_write handler and breaker on the same inputs (see
;; efrit-todo-bench-efrit.el) and the table shows the ratios against the
;; targets: todo_write at most 0.25 of Efrit's time, the breaker pair at
;; most 0.05.  Each time is the least of 5 runs, and the compared rows
;; are timed twice on each side, alternating, keeping the least: other
;; processes on the machine only ever add time.

;;; Code:

(require 'cl-lib)
(require 'efrit-todo)
(require 'efrit-todo-bench-inputs)

(declare-function efrit-todo-ui-bench-rows "efrit-todo-ui-bench" ())
(declare-function efrit-todo-store-bench-rows "efrit-todo-store-bench" ())

(defconst efrit-todo-bench--targets
  '(("todo_write" . 0.25) ("breaker" . 0.05))
  "Most a row may take as a fraction of Efrit's time, by row kind.")

(defmacro efrit-todo-bench--with-open-breaker (&rest body)
  "Run BODY with breaker limits no bench call stream reaches.
The bench times bookkeeping, not a tripped breaker refusing calls."
  (declare (indent 0))
  `(let ((efrit-todo-breaker-without-progress 0)
         (efrit-todo-breaker-hard-cap 0)
         (efrit-todo-breaker-same-tool 0)
         (efrit-todo-breaker-churn 0))
     ,@body))

(defun efrit-todo-bench--efrit-times ()
  "Time Efrit's own code in a child Emacs; return ((LABEL . US) ...) or nil."
  (let ((root (getenv "EFRIT_DIR")))
    (when (and root (file-directory-p (expand-file-name "lisp" root)))
      (with-temp-buffer
        (let ((status (call-process
                       (expand-file-name invocation-name invocation-directory)
                       nil t nil "-Q" "--batch"
                       "-L" (file-name-directory (locate-library "efrit-todo-bench-inputs"))
                       "-l" "efrit-todo-bench-efrit" "-f" "efrit-todo-bench-efrit-run")))
          (goto-char (point-max))
          (or (and (eql status 0)
                   (ignore-errors (backward-sexp) (read (current-buffer))))
              (progn (message "efrit-todo-bench: timing Efrit failed:\n%s" (buffer-string))
                     nil)))))))

(defun efrit-todo-bench--write-us (size)
  "Microseconds per todo_write of SIZE items.
The session is the current one, as under the Efrit adapter, so each
write also refreshes Efrit's variable `efrit-todo--current-todos'."
  (let ((inputs (efrit-todo-bench-inputs-writes size))
        (efrit-todo-current-session (format "bench-write-%d" size))
        (round 0))
    (efrit-todo-bench-inputs-us
     (max 20 (/ 20000 size))
     (lambda () (efrit-todo-write (aref inputs (% (cl-incf round) 10)))))))

(defun efrit-todo-bench--call (session calls i)
  "Make tool call I of CALLS (see `efrit-todo-bench-inputs-tool-calls') in SESSION.
Before-tool, then after-tool, as the adapter does around every tool."
  (pcase-let ((`(,name ,input ,result) (aref calls (% i (length calls)))))
    (efrit-todo-before-tool name input session)
    (efrit-todo-after-tool name input result nil session)))

(defun efrit-todo-bench--pair-us ()
  "Microseconds per before-tool + after-tool pair."
  (efrit-todo-bench--with-open-breaker
    (let ((calls (efrit-todo-bench-inputs-tool-calls 2000))
          (i 0))
      (efrit-todo-bench-inputs-us
       2000 (lambda () (efrit-todo-bench--call "bench-pair" calls (cl-incf i)))))))

(defun efrit-todo-bench--report-us ()
  "Microseconds per report of a session with 1000 ledger entries."
  (efrit-todo-bench--with-open-breaker
    (let ((calls (efrit-todo-bench-inputs-tool-calls 1000)))
      (efrit-todo-write (efrit-todo-bench-inputs-write 20 5) "bench-report")
      (dotimes (i 1000)
        (efrit-todo-bench--call "bench-report" calls i))
      (cl-assert (= 1000 (length (efrit-todo-ledger "bench-report"))))
      (efrit-todo-bench-inputs-us 20 (lambda () (efrit-todo-report "bench-report"))))))

(defun efrit-todo-bench--growth (label total window step)
  "Return rows timing STEP at call 1000 and call TOTAL of one session.
STEP is called with the call number; a WINDOW of calls is timed at each
point.  LABEL names the rows."
  (let ((at (lambda (from)
              ;; The least of 5 slices of the window, as for the other rows.
              (garbage-collect)
              (let ((slice (/ window 5))
                    (least nil))
                (dotimes (k 5)
                  (let ((start (float-time)))
                    (cl-loop for i from (+ from (* k slice)) below (+ from (* (1+ k) slice))
                             do (funcall step i))
                    (let ((us (/ (* 1e6 (- (float-time) start)) slice)))
                      (setq least (if least (min least us) us)))))
                least)))
        (calls-done 0)
        rows)
    (dolist (point (list 1000 total))
      (while (< calls-done (- point window))
        (funcall step calls-done)
        (cl-incf calls-done))
      (push (list (format "%s at call %d" label point) (funcall at calls-done)) rows)
      (cl-incf calls-done window))
    (let ((first (cadr (nth 1 rows)))
          (last (cadr (nth 0 rows))))
      (nreverse (cons (list (format "%s growth 1k->%dk (x)" label (/ total 1000))
                            (/ last first) 'ratio)
                      rows)))))

(defun efrit-todo-bench--growth-rows ()
  "Rows showing that per-call cost does not grow with the session."
  (efrit-todo-bench--with-open-breaker
    (let ((efrit-todo-auto-complete t)
          (calls (efrit-todo-bench-inputs-tool-calls 2000))
          (inputs (efrit-todo-bench-inputs-writes 5)))
      (efrit-todo-write (efrit-todo-bench-inputs-write 5 1) "bench-growth-calls")
      (append
       (efrit-todo-bench--growth
        "after-tool pair" 100000 1000
        (lambda (i) (efrit-todo-bench--call "bench-growth-calls" calls i)))
       (efrit-todo-bench--growth
        "todo_write 5" 100000 1000
        (lambda (i) (let ((efrit-todo-current-session "bench-growth-writes"))
                      (efrit-todo-write (aref inputs (% i 10))))))))))

(defun efrit-todo-bench--other-rows ()
  "Rows of the UI and store benches, when they are on the `load-path'."
  (append
   (when (require 'efrit-todo-ui-bench nil t) (efrit-todo-ui-bench-rows))
   (when (require 'efrit-todo-store-bench nil t) (efrit-todo-store-bench-rows))))

(defun efrit-todo-bench--print-row (label us &optional efrit target)
  "Print a row: LABEL, US microseconds, EFRIT's microseconds and TARGET ratio."
  (let ((ratio (and efrit (/ us efrit))))
    (princ (format "%-34s %12.2f %12s %8s %s\n"
                   label us
                   (if efrit (format "%.2f" efrit) "-")
                   (if ratio (format "%.3f" ratio) "-")
                   (cond ((not (and ratio target)) "")
                         ((<= ratio target) (format "met (<= %s)" target))
                         (t (format "MISSED (<= %s)" target)))))))

(defun efrit-todo-bench--compared-times ()
  "Return ((LABEL . US) ...) of the rows compared with Efrit."
  (append
   (mapcar (lambda (size)
             (cons (format "todo_write %d" size) (efrit-todo-bench--write-us size)))
           efrit-todo-bench-inputs-sizes)
   (list (cons "breaker" (efrit-todo-bench--pair-us)))))

(defun efrit-todo-bench--least (runs)
  "Merge RUNS, each ((LABEL . US) ...), keeping the least time per label."
  (mapcar (lambda (row)
            (cons (car row)
                  (apply #'min (delq nil (mapcar (lambda (run) (cdr (assoc (car row) run)))
                                                 runs)))))
          (car runs)))

(defun efrit-todo-bench-run ()
  "Time efrit-todo (and Efrit, with EFRIT_DIR) and print the table.
The compared rows are timed twice on each side, alternating with
Efrit's child Emacs, and the least time is kept on each side, so
that a change in the machine's load does not favour either."
  (efrit-todo-bench-inputs-compile efrit-todo--directory)
  (efrit-todo-bench-inputs-compile
   (file-name-directory (locate-library "efrit-todo-bench-inputs")))
  (let* ((efrit-runs nil)
         (runs (cl-loop repeat 2
                        do (let ((times (efrit-todo-bench--efrit-times)))
                             (when times (push times efrit-runs)))
                        collect (efrit-todo-bench--compared-times)))
         (ours (efrit-todo-bench--least runs))
         (efrit (and efrit-runs (efrit-todo-bench--least efrit-runs)))
         (target (lambda (kind) (cdr (assoc kind efrit-todo-bench--targets)))))
    (princ (format "efrit-todo %s, Emacs %s%s\n" efrit-todo-version emacs-version
                   (if efrit (format ", Efrit from %s" (getenv "EFRIT_DIR"))
                     " (set EFRIT_DIR to an Efrit checkout to compare)")))
    (princ (format "%-34s %12s %12s %8s %s\n" "operation" "us/call" "Efrit us" "ratio" "target"))
    (dolist (size efrit-todo-bench-inputs-sizes)
      (let ((label (format "todo_write %d" size)))
        (efrit-todo-bench--print-row
         (format "todo_write, %d items" size) (cdr (assoc label ours))
         (cdr (assoc label efrit)) (funcall target "todo_write"))))
    (let ((pair (cdr (assoc "breaker" ours))))
      (efrit-todo-bench--print-row "before-tool + after-tool" pair
                                   (cdr (assoc "breaker" efrit)) (funcall target "breaker"))
      (when efrit
        (efrit-todo-bench--print-row "  vs Efrit check+record only" pair
                                     (cdr (assoc "breaker check+record" efrit)))
        (efrit-todo-bench--print-row "  vs Efrit with its session log" pair
                                     (cdr (assoc "breaker with session log" efrit)))))
    (efrit-todo-bench--print-row "report, 1000 ledger entries" (efrit-todo-bench--report-us))
    (dolist (row (append (efrit-todo-bench--growth-rows) (efrit-todo-bench--other-rows)))
      (if (eq (nth 2 row) 'ratio)
          (princ (format "%-34s %12.2f %12s %8s %s\n" (car row) (cadr row) "-" "-"
                         (if (<= (cadr row) 1.5) "no growth" "GROWS")))
        (efrit-todo-bench--print-row (car row) (cadr row))))))

(provide 'efrit-todo-bench)
;;; efrit-todo-bench.el ends here
