;;; efrit-todo-bench-inputs.el --- Inputs and timing shared by the benches -*- lexical-binding: t; -*-

;;; Commentary:

;; The inputs every row of `make bench' is timed on, the timer and the
;; allocation counter.  This file needs nothing but Emacs: it loads
;; before efrit-todo or Efrit, and both sides of a row are timed with
;; it on the same inputs (see efrit-todo-bench.el).

;;; Code:

(require 'cl-lib)

(defconst efrit-todo-bench-inputs-sizes '(5 20 100 1000)
  "List sizes todo_write is timed at.")

(defun efrit-todo-bench-inputs-write (size round)
  "Return a todo_write input of SIZE items, as from Efrit's JSON parser.
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
  "Return a vector of inputs of SIZE items, each one step further on.
Ten of them, or fewer for long lists (two of 1000 items), so that the
inputs a row keeps alive stay a small part of the heap: a hash table
from Efrit's JSON parser (`json-read' with `json-object-type'
`hash-table') has room for 65 entries, some 2 KB."
  (vconcat (mapcar (lambda (round) (efrit-todo-bench-inputs-write size (% round size)))
                   (number-sequence 0 (1- (max 2 (min 10 (/ 2000 size))))))))

;; A model working through a plan sends the whole list on every call,
;; without ids, with one status changed since the call before.  Inputs
;; made in advance for every step of a long list would be most of the
;; heap, so one input is changed in place before each call instead:
;; a `puthash' or two, the same on both sides.  The strings put in are
;; the same objects every time; what efrit-todo reads is compared by
;; text, never by identity, so that does not favour either side.
(defun efrit-todo-bench-inputs-stepper (size)
  "Return a function of no arguments giving todo_write inputs of SIZE items.
Each input is the one before with one item's status changed: item 0
started, item 0 completed, item 1 started, ... then back the other way
\(reopened, then pending), so the cycle never jumps.  It is one input
changed in place, as Efrit's JSON parser makes them, without ids."
  (let* ((input (efrit-todo-bench-inputs-write size -1))
         (todos (gethash "todos" input))
         (step -1))
    (lambda ()
      (setq step (% (1+ step) (* 4 size)))
      (let* ((forward (< step (* 2 size)))
             (at (if forward step (- step (* 2 size))))
             (item (aref todos (/ at 2))))
        (puthash "status"
                 (if forward
                     (if (cl-evenp at) "in_progress" "completed")
                   (if (cl-evenp at) "in_progress" "pending"))
                 item))
      input)))

(defconst efrit-todo-bench-inputs-tools
  '("eval_sexp" "read_file" "search_content" "edit_file" "shell_command")
  "Tool names the breaker benches rotate through.")

(defun efrit-todo-bench-inputs-tool-calls (n)
  "Return N tool invocations in a vector, each (NAME INPUT RESULT).
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
`make bench' loads efrit-todo's sources, which Emacs interprets; an
installed package is byte-compiled, so it is timed compiled."
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

;;;; Timing

(defun efrit-todo-bench-inputs-runs ()
  "Return how many times each side of a row is timed: at least 10.
The environment variable EFRIT_TODO_BENCH_RUNS sets it; default 15."
  (let ((runs (getenv "EFRIT_TODO_BENCH_RUNS")))
    (max 10 (if runs (string-to-number runs) 15))))

(defconst efrit-todo-bench-inputs-run-seconds 0.03
  "The least time one timed run lasts.")

(defconst efrit-todo-bench-inputs-collections-per-run 8
  "Garbage collections a run should cause, when its side allocates.
A collection takes milliseconds, so a run that caused none or one
would be a lottery: its time would depend on where the collections
fell.  Over 8 or more, the median run carries its side's share.")

(defconst efrit-todo-bench-inputs-max-run-seconds 0.3
  "The most time one timed run should last.")

(defun efrit-todo-bench-inputs--seconds (function repetitions)
  "Call FUNCTION REPETITIONS times; return (SECONDS GC-SECONDS)."
  (let ((gc gc-elapsed)
        (start (float-time)))
    (dotimes (_ repetitions)
      (funcall function))
    (list (- (float-time) start) (- gc-elapsed gc))))

(defun efrit-todo-bench-inputs--collection ()
  "Collect garbage; return (SECONDS LIVE-BYTES)."
  (let* ((start (float-time))
         (stats (garbage-collect))
         (seconds (- (float-time) start))
         (bytes 0))
    (dolist (entry stats)
      (when (and (numberp (nth 1 entry)) (numberp (nth 2 entry)))
        (setq bytes (+ bytes (* (nth 1 entry) (nth 2 entry))))))
    (list seconds bytes)))

(defun efrit-todo-bench-inputs--bytes (counts)
  "Return about how many bytes the `memory-use-counts' deltas COUNTS are."
  (cl-loop for n in counts
           ;; conses floats vector-cells symbols string-chars intervals strings
           for size in '(16 16 8 48 1 56 32)
           sum (* n size)))

(defun efrit-todo-bench-inputs-repetitions (function)
  "Return the repetitions of FUNCTION that make one timed run.
At least `efrit-todo-bench-inputs-run-seconds' long and, when
FUNCTION allocates, long enough to cause as many garbage collections
as `efrit-todo-bench-inputs-collections-per-run' says (but at most
`efrit-todo-bench-inputs-max-run-seconds' long).
FUNCTION is called once first, to warm up."
  (funcall function)
  (let ((n 1)
        run)
    (while (< (car (setq run (efrit-todo-bench-inputs--seconds function n))) 0.005)
      (setq n (* 2 n)))
    (pcase-let* ((mutator (/ (max 1e-7 (- (car run) (cadr run))) n))
                 (bytes (/ (efrit-todo-bench-inputs--bytes
                            (efrit-todo-bench-inputs--counts function n))
                           (float n)))
                 (`(,gc-seconds ,live) (efrit-todo-bench-inputs--collection))
                 (threshold (max gc-cons-threshold (* gc-cons-percentage live)))
                 (per-call (+ mutator (* gc-seconds (/ bytes threshold))))
                 (for-time (ceiling efrit-todo-bench-inputs-run-seconds per-call))
                 (for-collections
                  (if (> bytes 0)
                      (ceiling (* efrit-todo-bench-inputs-collections-per-run threshold) bytes)
                    0))
                 (most (floor efrit-todo-bench-inputs-max-run-seconds per-call)))
      (max 1 for-time (min for-collections most)))))

(defun efrit-todo-bench-inputs--median (numbers)
  "Return the median of NUMBERS."
  (let* ((sorted (sort (copy-sequence numbers) #'<))
         (n (length sorted)))
    (if (cl-oddp n)
        (nth (/ n 2) sorted)
      (/ (+ (nth (1- (/ n 2)) sorted) (nth (/ n 2) sorted)) 2.0))))

(defun efrit-todo-bench-inputs--in (wrap thunk)
  "Call THUNK, through WRAP when WRAP is non-nil."
  (if wrap (funcall wrap thunk) (funcall thunk)))

(defun efrit-todo-bench-inputs-measure (sides)
  "Time SIDES in turn, run after run, and return one result per side.
Each of SIDES is (FUNCTION WRAP): FUNCTION does one call; WRAP, when
non-nil, is called with a function of no arguments and must call it
with that side in place (Efrit's definitions, say); it is not timed.

The number of calls in a run is chosen per side, by
`efrit-todo-bench-inputs-repetitions': at least 30 ms, and long
enough for a side that allocates to cause several garbage
collections.  Then each side makes one run in turn, for
`efrit-todo-bench-inputs-runs' rounds: in one Emacs, so both sides
allocate from the same heap and pay the same price per collection,
and interleaved, so a change in the machine's load falls
on both.  Garbage collection is not forced between runs: a run pays
for the collections that happen during it, which over many runs is
what its own allocation costs.

Each result is a plist: :us, the median microseconds per call over
the runs; :gc, the share of all the side's run time spent collecting
garbage (`gc-elapsed'); :gcs, collections per call; :repetitions,
calls per run; :runs."
  (let* ((runs (efrit-todo-bench-inputs-runs))
         (repetitions
          (mapcar (lambda (side)
                    (efrit-todo-bench-inputs--in
                     (nth 1 side)
                     (lambda () (efrit-todo-bench-inputs-repetitions (car side)))))
                  sides))
         (times (make-list (length sides) nil)))
    (garbage-collect)
    (dotimes (_ runs)
      (cl-loop for side in sides
               for n in repetitions
               for cell on times
               do (push (let ((gcs gcs-done))
                          (append (efrit-todo-bench-inputs--in
                                   (nth 1 side)
                                   (lambda () (efrit-todo-bench-inputs--seconds (car side) n)))
                                  (list (- gcs-done gcs))))
                        (car cell))))
    (cl-loop for n in repetitions
             for side-times in times
             collect (let ((total (apply #'+ (mapcar #'car side-times))))
                       (list :us (efrit-todo-bench-inputs--median
                                  (mapcar (lambda (run) (/ (* 1e6 (car run)) n)) side-times))
                             :gc (if (> total 0) (/ (apply #'+ (mapcar #'cadr side-times)) total) 0.0)
                             :gcs (/ (float (apply #'+ (mapcar #'caddr side-times))) (* n runs))
                             :repetitions n
                             :runs runs)))))

(defun efrit-todo-bench-inputs-measure-one (function)
  "Time FUNCTION alone as `efrit-todo-bench-inputs-measure' does.
Return its plist."
  (car (efrit-todo-bench-inputs-measure (list (list function nil)))))

;;;; The heap

(defun efrit-todo-bench-inputs-heap-mb ()
  "Return the megabytes of live Lisp data, after a garbage collection."
  (/ (cadr (efrit-todo-bench-inputs--collection)) 1048576.0))

(defvar efrit-todo-bench-inputs--ballast nil
  "Live data that makes the heap as large as EFRIT_TODO_BENCH_HEAP_MB asks.")

(defun efrit-todo-bench-inputs-grow-heap ()
  "Grow the heap to EFRIT_TODO_BENCH_HEAP_MB megabytes of live data, if set.
A batch Emacs holds a few megabytes; a user's Emacs with many packages
a hundred or more, and a garbage collection takes time in proportion.
The ballast is small vectors, each holding a string, so that the
collector has objects to trace, as in a real heap.  Return the live
megabytes."
  (let ((wanted (string-to-number (or (getenv "EFRIT_TODO_BENCH_HEAP_MB") "0")))
        (have (efrit-todo-bench-inputs-heap-mb))
        ;; First guess at the size of one piece, then measured.
        (piece-mb (/ 100 1048576.0)))
    (dotimes (_ 2)
      (let ((count (floor (/ (max 0 (- wanted have)) 2) piece-mb)))
        (when (> count 0)
          (dotimes (i count)
            (push (vector i (make-string 32 ?x) nil nil) efrit-todo-bench-inputs--ballast))
          (let ((now (efrit-todo-bench-inputs-heap-mb)))
            (setq piece-mb (/ (- now have) count)
                  have now)))))
    (let ((count (floor (max 0 (- wanted have)) piece-mb)))
      (dotimes (i count)
        (push (vector i (make-string 32 ?x) nil nil) efrit-todo-bench-inputs--ballast))
      (if (> count 0) (efrit-todo-bench-inputs-heap-mb) have))))

;;;; Allocation

(defconst efrit-todo-bench-inputs-allocation-kinds
  '("conses" "floats" "vector cells" "symbols" "string chars" "intervals" "strings")
  "What the numbers of `memory-use-counts' count, in its order.")

(defun efrit-todo-bench-inputs--counts (function repetitions)
  "Return the `memory-use-counts' deltas of REPETITIONS of FUNCTION."
  (let ((before (memory-use-counts)))
    (dotimes (_ repetitions)
      (funcall function))
    (cl-mapcar #'- (memory-use-counts) before)))

(defun efrit-todo-bench-inputs-allocation (function &optional repetitions wrap)
  "Return the Lisp data one call of FUNCTION allocates, as a list of floats.
The average over REPETITIONS calls (default 200) of the deltas of
`memory-use-counts', in `efrit-todo-bench-inputs-allocation-kinds'
order, less what the same loop around `ignore' allocates.  WRAP is as
in `efrit-todo-bench-inputs-measure'.  FUNCTION is called once before,
so that caches it fills on a first call are not counted."
  (let ((repetitions (or repetitions 200)))
    (efrit-todo-bench-inputs--in
     wrap
     (lambda ()
       (funcall function)
       (let ((empty (efrit-todo-bench-inputs--counts #'ignore repetitions))
             (used (efrit-todo-bench-inputs--counts function repetitions)))
         (cl-mapcar (lambda (u e) (/ (float (- u e)) repetitions)) used empty))))))

(provide 'efrit-todo-bench-inputs)
;;; efrit-todo-bench-inputs.el ends here
