;;; efrit-todo-bench.el --- Timings of efrit-todo beside Efrit's own code -*- lexical-binding: t; -*-

;;; Commentary:

;; `make bench' runs `efrit-todo-bench-run', which prints two tables.
;;
;; The first gives microseconds per call, and the share of that time
;; spent collecting garbage, for:
;;
;; - todo_write at 5, 20, 100 and 1000 items, on ten inputs in turn;
;; - todo_write at the same sizes as a model working through its plan
;;   sends it: the whole list without ids, one status changed since the
;;   call before ("one step");
;; - a before-tool + after-tool pair (the breaker's work around every
;;   tool call), with a small tool input, with two sessions named in
;;   turn and with a 20-item todo_write input;
;; - building the report of a session with 1000 ledger entries;
;; - the after-tool pair and todo_write at the 10000th and at the
;;   100000th call of one session, which must cost the same;
;; - the rows of the UI and store benches (redraw, save), when those
;;   files are on the `load-path';
;; - the task graph at 1000 items and 1000 edges: status writes,
;;   TaskUpdate adding and removing a blocker, a merge replacing
;;   `blocked_by' and TaskList, each timed in turn with a status write
;;   on 1000 items without edges and given as a multiple of it.
;;
;; The second gives the Lisp data one call allocates, from the deltas
;; of `memory-use-counts', for todo_write and the before + after pair.
;;
;; How it measures
;;
;; When EFRIT_DIR names an Efrit checkout, Efrit's own code runs in the
;; same batch Emacs as efrit-todo: the files `efrit-do' loads are
;; byte-compiled by a child Emacs into a temporary directory (never into
;; the checkout) and loaded from there, as an installed package would
;; be; efrit-todo is loaded after them and its own functions are
;; byte-compiled too.  Both sides then allocate from one heap, as in a
;; user's Emacs that runs Efrit with efrit-todo, so each garbage
;; collection costs both sides the same.
;;
;; Efrit's efrit-todo.el and efrit-todo's define some of the same names
;; (`efrit-todo-item-create', `efrit-todo--current-todos', ...), and
;; efrit-todo watches those two variables to copy what Efrit sets into
;; its module.  So the definitions Efrit's files made are captured
;; before efrit-todo is loaded, and around each of Efrit's runs (outside
;; the timing) the names both define get Efrit's definitions and values
;; back and the variable watchers are taken off; after the run,
;; efrit-todo's come back.  Efrit's code thus runs exactly as it does
;; without efrit-todo, and efrit-todo as it does without Efrit's file.
;;
;; The same work on both sides, on the same inputs (hash tables and
;; vectors as Efrit's JSON parser makes them, see
;; efrit-todo-bench-inputs.el):
;;
;; - todo_write: `efrit-todo-write' through the current session (as the
;;   adapter calls it, so Efrit's `efrit-todo--current-todos' is
;;   refreshed too) against Efrit's handler `efrit-do--handle-todo-write'
;;   as Efrit's dispatcher calls it, with the advice Efrit's own files
;;   put on it.  Ten inputs, each one step further on (two for 1000
;;   items), are used in turn; a row's inputs live only while it is timed.
;; - the pair: `efrit-todo-before-tool' + `efrit-todo-after-tool'
;;   against what `efrit-do--execute-tool' runs around a tool:
;;   `efrit-do--circuit-breaker-check-limits',
;;   `efrit-do--circuit-breaker-record-call' and
;;   `efrit-do--error-loop-check-result'.  Efrit's session tracking
;;   (metrics and a log line per call) is turned off, which only makes
;;   Efrit faster.  Limits on both sides are raised so that no rule
;;   trips: what is timed is the bookkeeping of an ordinary call, not
;;   a refusal.
;;
;; Each side's number of calls per run is chosen so a run lasts at
;; least 30 ms and, for a side that allocates, causes about 8 garbage
;; collections (a collection takes milliseconds: a run with none or one
;; would be a lottery), up to 0.3 s; then the sides run in turn (ours,
;; Efrit's, ours, ...) for at
;; least 10 rounds (EFRIT_TODO_BENCH_RUNS, default 15), and each row
;; gives the median time per call.  Garbage collection is not forced
;; between runs, so a run pays for the collections its allocation
;; causes; the GC column is the share of a side's time, over all its
;; runs, spent in them (`gc-elapsed').  The ratio is efrit-todo's median
;; over Efrit's.  A collection costs more the more live data there is:
;; the header gives the live heap (a batch Emacs holds a few megabytes,
;; a user's Emacs often a hundred), and EFRIT_TODO_BENCH_HEAP_MB grows it
;; with ballast.  Both sides are byte-compiled, not native-compiled.
;;
;; Without EFRIT_DIR the table has efrit-todo's numbers alone.

;;; Code:

(require 'cl-lib)
(require 'json)
(require 'subr-x)
(require 'efrit-todo-bench-inputs)

;; efrit-todo is loaded by `efrit-todo-bench-run', after Efrit's files
;; (see the Commentary): its names are only declared here.
(defvar efrit-todo-version)
(defvar efrit-todo--directory)
(defvar efrit-todo-current-session)
(defvar efrit-todo-auto-complete)
(defvar efrit-todo-breaker-without-progress)
(defvar efrit-todo-breaker-hard-cap)
(defvar efrit-todo-breaker-same-tool)
(defvar efrit-todo-breaker-churn)
(declare-function efrit-todo-write "efrit-todo" (input &optional session))
(declare-function efrit-todo-before-tool "efrit-todo" (name input &optional session))
(declare-function efrit-todo-after-tool "efrit-todo"
                  (name input result error-p &optional session duration))
(declare-function efrit-todo-report "efrit-todo" (&optional session))
(declare-function efrit-todo-ledger "efrit-todo" (&optional session))
(declare-function efrit-todo-ui-bench-rows "efrit-todo-ui-bench" ())
(declare-function efrit-todo-store-bench-rows "efrit-todo-store-bench" ())
(declare-function efrit-todo-shared-bench-rows "efrit-todo-shared-bench" ())

;; Efrit's, loaded from EFRIT_DIR.
(defvar efrit-data-directory)
(defvar native-comp-deferred-compilation)
(defvar native-comp-jit-compilation)
(defvar efrit-session-tracking-enabled)
(defvar efrit-do-max-tool-calls-per-session)
(defvar efrit-do-max-same-tool-calls)
(defvar efrit-do-max-identical-tool-calls)
(defvar efrit-do-same-tool-warning-threshold)
(declare-function efrit-do--handle-todo-write "efrit-do-handlers" (tool-input))
(declare-function efrit-do--circuit-breaker-reset "efrit-do-circuit-breaker" ())
(declare-function efrit-do--circuit-breaker-check-limits "efrit-do-circuit-breaker"
                  (tool-name &optional tool-input))
(declare-function efrit-do--circuit-breaker-record-call "efrit-do-circuit-breaker"
                  (tool-name &optional tool-input))
(declare-function efrit-do--error-loop-check-result "efrit-do-circuit-breaker" (result))

(defconst efrit-todo-bench--targets
  '(("todo_write 5" . 0.25) ("todo_write 20" . 0.25)
    ("todo_write 100" . 0.22) ("todo_write 1000" . 0.22)
    ("todo_write step 5" . 0.25) ("todo_write step 20" . 0.25)
    ("todo_write step 100" . 0.20) ("todo_write step 1000" . 0.20)
    ("pair small" . 0.05) ("pair sessions" . 0.05) ("pair todo_write 20" . 0.05))
  "Most a row may take as a fraction of Efrit's time.")

(defmacro efrit-todo-bench--with-open-breaker (&rest body)
  "Run BODY with breaker limits no bench call stream reaches.
The bench times bookkeeping, not a tripped breaker refusing calls."
  (declare (indent 0))
  `(let ((efrit-todo-breaker-without-progress 0)
         (efrit-todo-breaker-hard-cap 0)
         (efrit-todo-breaker-same-tool 0)
         (efrit-todo-breaker-churn 0))
     ,@body))

(defmacro efrit-todo-bench--with-open-efrit-breaker (&rest body)
  "Run BODY with Efrit's breaker limits out of reach, its tracking off."
  (declare (indent 0))
  `(let ((efrit-do-max-tool-calls-per-session most-positive-fixnum)
         (efrit-do-max-same-tool-calls most-positive-fixnum)
         (efrit-do-max-identical-tool-calls most-positive-fixnum)
         (efrit-do-same-tool-warning-threshold most-positive-fixnum)
         (efrit-session-tracking-enabled nil))
     ,@body))

;;;; Loading Efrit and efrit-todo into one Emacs

(defvar efrit-todo-bench--efrit nil
  "Nil, or Efrit's side of the names both packages define.
A cons (FUNCTIONS . VARIABLES) of alists from symbol to Efrit's
definition or value; `efrit-todo-bench--in-efrit' puts them in place.")

(defvar efrit-todo-bench--efrit-root nil
  "The Efrit checkout timed, or nil.")

(defun efrit-todo-bench--efrit-load-path (root)
  "Put the Lisp directories of the Efrit checkout ROOT on the `load-path'."
  (dolist (dir '("lisp" "lisp/core" "lisp/interfaces" "lisp/support" "lisp/tools"))
    (add-to-list 'load-path (expand-file-name dir root))))

(defun efrit-todo-bench--files-under (directory)
  "Return the files loaded from under DIRECTORY, first loaded first."
  (let ((directory (file-name-as-directory (file-truename directory))))
    (nreverse (cl-loop for entry in load-history
                       when (and (stringp (car entry))
                                 (string-prefix-p directory (file-truename (car entry))))
                       collect (car entry)))))

(defun efrit-todo-bench-compile-efrit (root out)
  "Byte-compile the Efrit files `efrit-do' needs, from the checkout ROOT.
The compiled files go to the directory OUT, not into ROOT.  Run in a
child Emacs by `efrit-todo-bench--load-efrit'."
  (setq efrit-data-directory (expand-file-name "data" out))
  (efrit-todo-bench--efrit-load-path root)
  (require 'efrit-do)
  ;; Each source is copied next to its compiled file, so that Emacs
  ;; finds it when loading (native compilation looks for it).
  (let ((byte-compile-warnings nil))
    (dolist (file (efrit-todo-bench--files-under root))
      (let ((copy (expand-file-name (concat (file-name-base file) ".el") out)))
        (copy-file (concat (file-name-sans-extension file) ".el") copy t)
        (unless (byte-compile-file copy)
          (error "Could not compile %s" file))))))

(defun efrit-todo-bench--load-efrit (root out)
  "Load `efrit-do' from the Efrit checkout ROOT, compiled into OUT.
Keep in `efrit-todo-bench--efrit' the definitions its files made.
Return nil if that failed, after saying why."
  (with-temp-buffer
    (let ((status (call-process
                   (expand-file-name invocation-name invocation-directory)
                   nil t nil "-Q" "--batch"
                   "-L" (file-name-directory (locate-library "efrit-todo-bench"))
                   "-l" "efrit-todo-bench"
                   "--eval" (format "(efrit-todo-bench-compile-efrit %S %S)" root out))))
      (if (not (eql status 0))
          (progn (message "efrit-todo-bench: compiling Efrit failed:\n%s" (buffer-string))
                 nil)
        (setq efrit-data-directory (expand-file-name "data" out))
        (efrit-todo-bench--efrit-load-path root)
        (push out load-path)
        (require 'efrit-do)
        (let (functions variables)
          (dolist (file (efrit-todo-bench--files-under out))
            (dolist (element (cdr (assoc file load-history)))
              (cond ((eq (car-safe element) 'defun)
                     (push (cons (cdr element) (symbol-function (cdr element))) functions))
                    ((and (symbolp element) (boundp element))
                     (push (cons element (symbol-value element)) variables)))))
          (if (byte-code-function-p (symbol-function 'efrit-do--circuit-breaker-check-limits))
              (setq efrit-todo-bench--efrit (cons functions variables))
            (message "efrit-todo-bench: Efrit was not loaded compiled")
            nil))))))

(defun efrit-todo-bench--load-ours ()
  "Load efrit-todo, after Efrit's own efrit-todo.el when that is loaded.
Keep in `efrit-todo-bench--efrit' only the names both define."
  (let ((ours (file-name-directory (locate-library "efrit-todo-ui"))))
    (if (not efrit-todo-bench--efrit)
        (require 'efrit-todo)
      (load (expand-file-name "efrit-todo.el" ours) nil t t)
      (let ((our-variables
             (cl-loop for file in (efrit-todo-bench--files-under ours)
                      append (cl-remove-if-not #'symbolp (cdr (assoc file load-history))))))
        (setq efrit-todo-bench--efrit
              (cons (cl-remove-if (lambda (cell) (eq (symbol-function (car cell)) (cdr cell)))
                                  (car efrit-todo-bench--efrit))
                    (cl-remove-if-not (lambda (cell) (memq (car cell) our-variables))
                                      (cdr efrit-todo-bench--efrit))))))
    ;; The UI is autoloaded on the first change: load it now, so that its
    ;; functions are compiled with the rest.
    (require 'efrit-todo-ui)
    (efrit-todo-bench-inputs-compile ours)
    (efrit-todo-bench-inputs-compile
     (file-name-directory (locate-library "efrit-todo-bench-inputs")))))

(defun efrit-todo-bench--in-efrit (function)
  "Call FUNCTION with Efrit's definitions of the names both packages define.
Their values too, with efrit-todo's variable watchers off; afterwards
efrit-todo's definitions, values and watchers are back, and Efrit's
values are kept for its next run."
  (let ((functions (car efrit-todo-bench--efrit))
        (variables (cdr efrit-todo-bench--efrit))
        saved-functions saved-values watchers)
    (pcase-dolist (`(,symbol . ,definition) functions)
      (push (cons symbol (symbol-function symbol)) saved-functions)
      (fset symbol definition))
    (pcase-dolist (`(,symbol . ,value) variables)
      (dolist (watcher (get-variable-watchers symbol))
        (push (cons symbol watcher) watchers)
        (remove-variable-watcher symbol watcher))
      (push (cons symbol (symbol-value symbol)) saved-values)
      (set symbol value))
    (unwind-protect
        (funcall function)
      (dolist (cell variables)
        (setcdr cell (symbol-value (car cell))))
      (pcase-dolist (`(,symbol . ,value) saved-values)
        (set symbol value))
      (pcase-dolist (`(,symbol . ,watcher) watchers)
        (add-variable-watcher symbol watcher))
      (pcase-dolist (`(,symbol . ,definition) saved-functions)
        (fset symbol definition)))))

;;;; The calls timed

(defun efrit-todo-bench--writer (size)
  "Return (OURS EFRIT), functions making one todo_write of SIZE items."
  (let* ((inputs (efrit-todo-bench-inputs-writes size))
         (n (length inputs))
         (session (format "bench-write-%d" size))
         (ours 0)
         (efrit 0))
    (list (lambda ()
            (let ((efrit-todo-current-session session))
              (efrit-todo-write (aref inputs (setq ours (% (1+ ours) n))))))
          (lambda ()
            (efrit-do--handle-todo-write (aref inputs (setq efrit (% (1+ efrit) n))))))))

(defun efrit-todo-bench--stepper (size)
  "Return (OURS EFRIT), functions making one step of a plan of SIZE items.
Each call sends the whole list, without ids, with one status changed
since the call before (see `efrit-todo-bench-inputs-stepper'); each
side has its own input and its own session of steps."
  (let ((ours (efrit-todo-bench-inputs-stepper size))
        (efrit (efrit-todo-bench-inputs-stepper size))
        (session (format "bench-step-%d" size)))
    (list (lambda ()
            (let ((efrit-todo-current-session session))
              (efrit-todo-write (funcall ours))))
          (lambda ()
            (efrit-do--handle-todo-write (funcall efrit))))))

(defun efrit-todo-bench--pair (calls session)
  "Return (OURS EFRIT), functions making the breaker's work for one tool call.
CALLS is a vector of (NAME INPUT RESULT), used in turn; SESSION is
efrit-todo's session, or a vector of sessions named in turn, one a call."
  (let ((n (length calls))
        (sessions (if (vectorp session) session (vector session)))
        (ours 0)
        (efrit 0))
    (list (lambda ()
            (let ((call (aref calls (setq ours (% (1+ ours) n))))
                  (session (aref sessions (% ours (length sessions)))))
              (efrit-todo-before-tool (car call) (nth 1 call) session)
              (efrit-todo-after-tool (car call) (nth 1 call) (nth 2 call) nil session)))
          (lambda ()
            (let ((call (aref calls (setq efrit (% (1+ efrit) n)))))
              (efrit-do--circuit-breaker-check-limits (car call) (nth 1 call))
              (efrit-do--circuit-breaker-record-call (car call) (nth 1 call))
              (efrit-do--error-loop-check-result (nth 2 call)))))))

(defun efrit-todo-bench--write-calls ()
  "Return a vector of 10 (NAME INPUT RESULT) for todo_write, 20 items each."
  (let ((inputs (efrit-todo-bench-inputs-writes 20)))
    (vconcat (cl-loop for input across inputs
                      collect (list "todo_write" input
                                    (efrit-todo-write input "bench-pair-results"))))))

(defun efrit-todo-bench--compared ()
  "Return the compared cases: (KEY LABEL MAKE).
MAKE returns (OURS EFRIT), the functions timed; it builds their inputs,
which live only while the case is timed."
  (append
   (mapcar (lambda (size)
             (list (format "todo_write %d" size) (format "todo_write, %d items" size)
                   (lambda () (efrit-todo-bench--writer size))))
           efrit-todo-bench-inputs-sizes)
   (mapcar (lambda (size)
             (list (format "todo_write step %d" size)
                   (format "todo_write, %d items, one step" size)
                   (lambda () (efrit-todo-bench--stepper size))))
           efrit-todo-bench-inputs-sizes)
   (list (list "pair small" "before + after tool, small input"
               (lambda ()
                 (efrit-todo-bench--pair (efrit-todo-bench-inputs-tool-calls 200) "bench-pair")))
         ;; Chats and commands in turn: each call names another session.
         (list "pair sessions" "before + after, two sessions in turn"
               (lambda ()
                 (efrit-todo-bench--pair (efrit-todo-bench-inputs-tool-calls 200)
                                         (vector "bench-pair-a" "bench-pair-b"))))
         (list "pair todo_write 20" "before + after, todo_write 20 items"
               (lambda ()
                 (efrit-todo-bench--pair (efrit-todo-bench--write-calls) "bench-pair-write"))))))

;;;; Rows for efrit-todo alone

(defun efrit-todo-bench--call (session calls i)
  "Make one tool call in SESSION: number I, modulo their number.
CALLS is a vector such as `efrit-todo-bench-inputs-tool-calls' returns.
Before-tool, then after-tool, as the adapter does around every tool."
  (let ((call (aref calls (% i (length calls)))))
    (efrit-todo-before-tool (car call) (nth 1 call) session)
    (efrit-todo-after-tool (car call) (nth 1 call) (nth 2 call) nil session)))

(defun efrit-todo-bench--report-row ()
  "Row timing the report of a session with 1000 ledger entries."
  (let ((calls (efrit-todo-bench-inputs-tool-calls 200)))
    (efrit-todo-write (efrit-todo-bench-inputs-write 20 5) "bench-report")
    (dotimes (i 1000)
      (efrit-todo-bench--call "bench-report" calls i))
    (cl-assert (= 1000 (length (efrit-todo-ledger "bench-report"))))
    (let ((result (efrit-todo-bench-inputs-measure-one
                   (lambda () (efrit-todo-report "bench-report")))))
      (list "report, 1000 ledger entries" (plist-get result :us) (plist-get result :gc)))))

(defun efrit-todo-bench--growth (label total window step)
  "Return rows timing STEP at call 10000 and call TOTAL of one session.
STEP is called with the call number; the WINDOW of calls before each
point is timed in 10 slices, and the median slice kept (a garbage
collection falls in one slice or two).  LABEL names the rows."
  (let ((at (lambda (from)
              (let ((slice (/ window 10))
                    (times nil)
                    (gc gc-elapsed)
                    (start (float-time)))
                (dotimes (k 10)
                  (let ((slice-start (float-time)))
                    (cl-loop for i from (+ from (* k slice)) below (+ from (* (1+ k) slice))
                             do (funcall step i))
                    (push (/ (* 1e6 (- (float-time) slice-start)) slice) times)))
                (list (efrit-todo-bench-inputs--median times)
                      (/ (- gc-elapsed gc) (- (float-time) start))))))
        (calls-done 0)
        rows)
    (dolist (point (list 10000 total))
      (while (< calls-done (- point window))
        (funcall step calls-done)
        (cl-incf calls-done))
      (push (cons (format "%s at call %d" label point) (funcall at calls-done)) rows)
      (cl-incf calls-done window))
    (let ((first (cadr (nth 1 rows)))
          (last (cadr (nth 0 rows))))
      (nreverse (cons (list (format "%s growth 10k->%dk (x)" label (/ total 1000))
                            (/ last first) 'ratio)
                      rows)))))

(defun efrit-todo-bench--growth-rows ()
  "Rows showing that per-call cost does not grow with the session."
  (let ((efrit-todo-auto-complete t)
        (calls (efrit-todo-bench-inputs-tool-calls 200))
        (inputs (efrit-todo-bench-inputs-writes 5)))
    (efrit-todo-write (efrit-todo-bench-inputs-write 5 1) "bench-growth-calls")
    (append
     (efrit-todo-bench--growth
      "after-tool pair" 100000 5000
      (lambda (i) (efrit-todo-bench--call "bench-growth-calls" calls i)))
     (efrit-todo-bench--growth
      "todo_write 5" 100000 2000
      (lambda (i) (let ((efrit-todo-current-session "bench-growth-writes"))
                    (efrit-todo-write (aref inputs (% i (length inputs))))))))))

(defun efrit-todo-bench--other-rows ()
  "Rows of the UI and store benches, when they are on the `load-path'."
  (append
   (when (require 'efrit-todo-ui-bench nil t) (efrit-todo-ui-bench-rows))
   (when (require 'efrit-todo-store-bench nil t) (efrit-todo-store-bench-rows))
   (when (require 'efrit-todo-shared-bench nil t) (efrit-todo-shared-bench-rows))))

;;;; The task graph

(declare-function efrit-todo--module-write "efrit-todo-module"
                  (session input max-items max-content full-up-to auto-complete
                           known-tools &optional max-description max-blockers))
(declare-function efrit-todo--module-task-tool "efrit-todo-module"
                  (session tool input &optional max-items max-content full-up-to
                           max-description max-blockers))

(defun efrit-todo-bench--graph-session (session edges)
  "Fill SESSION with 1000 pending items; with EDGES, 1000 dependencies.
Each item from t2 on waits for the one before it, and t1000 for t1 too."
  (efrit-todo--module-write
   session
   (json-encode
    `((todos . ,(vconcat (cl-loop for i from 1 to 1000
                                  collect `((content . ,(format "Step %d of the plan" i))
                                            (status . "pending")))))))
   1000 2000 30 nil nil)
  (when edges
    (efrit-todo--module-write
     session
     (json-encode
      `((merge . t)
        (todos . ,(vconcat (cl-loop for i from 2 to 1000
                                    collect `((id . ,(format "t%d" i))
                                              (blocked_by . ,(vconcat (list (format "t%d" (1- i)))
                                                                      (and (= i 1000) (list "t1"))))))))))
     1000 2000 30 nil nil 4000 50)))

(defconst efrit-todo-bench--graph-target 1.5
  "Most a write on the graph may take, as a multiple of the plain status write.")

(defun efrit-todo-bench--graph-rows ()
  "Rows timing writes on 1000 items with 1000 edges, in turn in one run.
The first row is a status change on 1000 items without edges, the
reference: every other row is timed in turn with it (as Efrit's side
is with ours), so a change of the machine's load falls on both, and
gives its time as a multiple of the reference's.  A write that
changes dependencies (TaskUpdate addBlockedBy and removeBlockedBy, a
merge replacing `blocked_by') must stay within
`efrit-todo-bench--graph-target' of it: the graph is checked only
where the write changed it.  Each row is (LABEL US GC RATIO TARGET)."
  (let* ((table (lambda (json) (json-parse-string json)))
         (status (lambda (id status)
                   (funcall table (format "{\"merge\":true,\"todos\":[{\"id\":\"%s\",\"status\":\"%s\"}]}" id status))))
         (flip (lambda (function inputs)
                 (let ((n 0))
                   (lambda () (funcall function (aref inputs (setq n (% (1+ n) (length inputs)))))))))
         (graph-write (lambda (input)
                        (efrit-todo--module-write "bench-graph" input 1000 2000 30 nil nil 4000 50)))
         (task-update (lambda (input)
                        (efrit-todo--module-task-tool "bench-graph" "TaskUpdate" input)))
         (reference
          (funcall flip (lambda (input)
                          (efrit-todo--module-write "bench-flat" input 1000 2000 30 nil nil))
                   (vector (funcall status "t1" "completed") (funcall status "t1" "pending"))))
         (rows
          `(("status write, 1000 edges" nil
             ,(funcall flip graph-write
                       (vector (funcall status "t1" "completed") (funcall status "t1" "pending"))))
            ("TaskUpdate status, 1000 edges" nil
             ,(funcall flip task-update
                       (vector (funcall table "{\"taskId\":\"t1\",\"status\":\"completed\"}")
                               (funcall table "{\"taskId\":\"t1\",\"status\":\"pending\"}"))))
            ("TaskUpdate add/removeBlockedBy, 1000 edges" ,efrit-todo-bench--graph-target
             ,(funcall flip task-update
                       (vector (funcall table "{\"taskId\":\"t500\",\"addBlockedBy\":[\"t2\"]}")
                               (funcall table "{\"taskId\":\"t500\",\"removeBlockedBy\":[\"t2\"]}"))))
            ("merge replacing blocked_by, 1000 edges" ,efrit-todo-bench--graph-target
             ,(funcall flip graph-write
                       (vector (funcall table "{\"merge\":true,\"todos\":[{\"id\":\"t500\",\"blocked_by\":[\"t499\",\"t3\"]}]}")
                               (funcall table "{\"merge\":true,\"todos\":[{\"id\":\"t500\",\"blocked_by\":[\"t499\"]}]}"))))
            ("TaskList, 1000 edges" nil
             ,(lambda () (efrit-todo--module-task-tool "bench-graph" "TaskList" nil))))))
    (efrit-todo-bench--graph-session "bench-flat" nil)
    (efrit-todo-bench--graph-session "bench-graph" t)
    (pcase-let ((`(,base . ,times)
                 (efrit-todo-bench-inputs-measure
                  (cons (list reference nil)
                        (mapcar (lambda (row) (list (nth 2 row) nil)) rows)))))
      (cons (list "status write, 1000 items, no edges"
                  (plist-get base :us) (plist-get base :gc) nil nil)
            (cl-loop for (label target) in rows
                     for time in times
                     collect (list label (plist-get time :us) (plist-get time :gc)
                                   (/ (plist-get time :us) (plist-get base :us))
                                   target))))))

;;;; Printing

(defconst efrit-todo-bench--row-format "%-42s %11s %4s %11s %4s %7s %s\n"
  "Format of a row of the time table.")

(defun efrit-todo-bench--percent (share)
  "Return SHARE, a fraction or nil, as a percentage."
  (if share (format "%.0f%%" (* 100 share)) "-"))

(defun efrit-todo-bench--print-row (label ours &optional ours-gc efrit efrit-gc target)
  "Print a row: LABEL, OURS and EFRIT microseconds, TARGET ratio.
OURS-GC and EFRIT-GC are the GC shares of the two sides."
  (let ((ratio (and efrit (/ ours efrit))))
    (princ (format efrit-todo-bench--row-format
                   label (format "%.2f" ours) (efrit-todo-bench--percent ours-gc)
                   (if efrit (format "%.2f" efrit) "-")
                   (if efrit (efrit-todo-bench--percent efrit-gc) "-")
                   (if ratio (format "%.3f" ratio) "-")
                   (cond ((not (and ratio target)) "")
                         ((<= ratio target) (format "met (<= %s)" target))
                         (t (format "MISSED (<= %s)" target)))))))

(defun efrit-todo-bench--print-graph-rows (rows)
  "Print ROWS of `efrit-todo-bench--graph-rows' under their own header."
  (princ (format "\nTask graph, 1000 items: each row timed in turn with the first; ratio to it\n"))
  (pcase-dolist (`(,label ,us ,gc ,ratio ,target) rows)
    (princ (format efrit-todo-bench--row-format
                   label (format "%.2f" us) (efrit-todo-bench--percent gc) "" ""
                   (if ratio (format "%.3f" ratio) "-")
                   (cond ((not (and ratio target)) "")
                         ((<= ratio target) (format "met (<= %s x the first)" target))
                         (t (format "MISSED (<= %s x the first)" target)))))))

(defun efrit-todo-bench--print-allocation (label side counts)
  "Print the allocation COUNTS per call of LABEL on SIDE."
  (princ (format "%-42s %-10s%s\n" label side
                 (mapconcat (lambda (n) (format "%10.1f" n)) counts ""))))

(defun efrit-todo-bench--efrit-commit (root)
  "Return the short commit of the Efrit checkout ROOT, or \"?\"."
  (with-temp-buffer
    (if (eql 0 (ignore-errors
                 (call-process "git" nil t nil "-C" root "rev-parse" "--short" "HEAD")))
        (string-trim (buffer-string))
      "?")))

(defun efrit-todo-bench--header (heap)
  "Print the lines above the time table; HEAP is the live megabytes."
  (princ (format "efrit-todo %s, Emacs %s, gc-cons-threshold %d, %.1f MB live%s\n"
                 efrit-todo-version emacs-version gc-cons-threshold heap
                 (if (getenv "EFRIT_TODO_BENCH_HEAP_MB") " (EFRIT_TODO_BENCH_HEAP_MB)"
                   " (batch Emacs; EFRIT_TODO_BENCH_HEAP_MB grows it)")))
  (princ (if efrit-todo-bench--efrit
             (format "Efrit from %s (%s), byte-compiled, in this same Emacs.\n"
                     efrit-todo-bench--efrit-root
                     (efrit-todo-bench--efrit-commit efrit-todo-bench--efrit-root))
           (let ((root (getenv "EFRIT_DIR")))
             (if (and root (not (string-empty-p root)))
                 (format "EFRIT_DIR=%s could not be loaded as an Efrit checkout: Efrit is not compared, efrit-todo alone.\n"
                         root)
               "EFRIT_DIR is unset: Efrit is not compared, efrit-todo alone (set it to an Efrit checkout to compare).\n"))))
  (princ (format "Median us per call of %d runs per side%s; GC: share of the time collecting garbage.\n"
                 (efrit-todo-bench-inputs-runs)
                 (if efrit-todo-bench--efrit ", the two sides in turn" "")))
  (princ (format efrit-todo-bench--row-format
                 "operation" "efrit-todo" "GC" "Efrit" "GC" "ratio" "target")))

;;;; Running

(defun efrit-todo-bench--time-compared (cases)
  "Time CASES, each (KEY LABEL MAKE), and print a row for each.
Return the allocation rows: (LABEL OURS EFRIT), the lists that
`efrit-todo-bench-inputs-allocation' returns, EFRIT nil without Efrit."
  (let ((efrit (and efrit-todo-bench--efrit t)))
    (efrit-todo-bench--with-open-breaker
      (efrit-todo-bench--with-open-efrit-breaker
        (when efrit (efrit-todo-bench--in-efrit #'efrit-do--circuit-breaker-reset))
        (mapcar
         (pcase-lambda (`(,key ,label ,make))
           (pcase-let* ((`(,ours ,theirs) (funcall make))
                        (`(,our-time ,their-time)
                         (efrit-todo-bench-inputs-measure
                          (cons (list ours nil)
                                (and efrit (list (list theirs #'efrit-todo-bench--in-efrit)))))))
             (efrit-todo-bench--print-row
              label (plist-get our-time :us) (plist-get our-time :gc)
              (plist-get their-time :us) (plist-get their-time :gc)
              (cdr (assoc key efrit-todo-bench--targets)))
             (list label
                   (efrit-todo-bench-inputs-allocation ours)
                   (and efrit (efrit-todo-bench-inputs-allocation
                               theirs nil #'efrit-todo-bench--in-efrit)))))
         cases)))))

(defun efrit-todo-bench--print-allocations (rows)
  "Print the allocation ROWS, each (LABEL OURS EFRIT)."
  (princ (format "\nLisp allocation per call (memory-use-counts deltas, mean of 200 calls)\n%-42s %-10s%s\n"
                 "operation" "side"
                 (mapconcat (lambda (kind) (format "%10s" (car (split-string kind))))
                            efrit-todo-bench-inputs-allocation-kinds "")))
  (princ (format "%-42s %-10s%s\n" "" ""
                 (mapconcat (lambda (kind) (format "%10s" (or (cadr (split-string kind)) "")))
                            efrit-todo-bench-inputs-allocation-kinds "")))
  (pcase-dolist (`(,label ,ours ,efrit) rows)
    (efrit-todo-bench--print-allocation label "efrit-todo" ours)
    (when efrit
      (efrit-todo-bench--print-allocation "" "Efrit" efrit))))

(defun efrit-todo-bench-run ()
  "Time efrit-todo (and Efrit's own code, with EFRIT_DIR) and print the tables."
  (let* ((root (getenv "EFRIT_DIR"))
         (out (and root (file-directory-p (expand-file-name "lisp" root))
                   (make-temp-file "efrit-todo-bench-efrit" t))))
    (unwind-protect
        ;; No native compilation starting in the background while timing;
        ;; Emacs 29 renamed the variable, keeping the old name as an alias.
        (with-suppressed-warnings ((obsolete native-comp-deferred-compilation))
          (let ((native-comp-jit-compilation nil)
                (native-comp-deferred-compilation nil))
            (when out
              (setq efrit-todo-bench--efrit-root (directory-file-name (expand-file-name root)))
              (efrit-todo-bench--load-efrit efrit-todo-bench--efrit-root out))
            (efrit-todo-bench--load-ours)
            (efrit-todo-bench--header (efrit-todo-bench-inputs-grow-heap))
            (let ((allocations (efrit-todo-bench--time-compared (efrit-todo-bench--compared))))
              (efrit-todo-bench--with-open-breaker
                (dolist (row (append (list (efrit-todo-bench--report-row))
                                     (efrit-todo-bench--growth-rows)
                                     (efrit-todo-bench--other-rows)))
                  (if (eq (nth 2 row) 'ratio)
                      (princ (format efrit-todo-bench--row-format (car row)
                                     (format "%.2f" (cadr row)) "" "" "" ""
                                     (if (<= (cadr row) 1.5) "no growth" "GROWS")))
                    (efrit-todo-bench--print-row (car row) (cadr row) (nth 2 row)))))
              (efrit-todo-bench--with-open-breaker
                (efrit-todo-bench--print-graph-rows (efrit-todo-bench--graph-rows)))
              (efrit-todo-bench--print-allocations allocations))))
      (when out
        (delete-directory out t)))))

(provide 'efrit-todo-bench)
;;; efrit-todo-bench.el ends here
