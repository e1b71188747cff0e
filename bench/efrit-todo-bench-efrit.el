;;; efrit-todo-bench-efrit.el --- Time Efrit's own todo handler and breaker -*- lexical-binding: t; -*-

;;; Commentary:

;; Run by `efrit-todo-bench-run' in a child Emacs when EFRIT_DIR names an
;; Efrit checkout.  A child process because Efrit's own efrit-todo.el and
;; this package's have the same feature name: here only Efrit's is
;; loaded.  Efrit's functions are byte-compiled after loading, as they
;; would be in an installed package, so that interpreted code does not
;; flatter efrit-todo.  The timings go to standard output as one
;; readable list: ((LABEL . MICROSECONDS) ...).

;;; Code:

(require 'efrit-todo-bench-inputs)

(defvar efrit-do-max-tool-calls-per-session)
(defvar efrit-data-directory)
(defvar efrit-session-tracking-enabled)
(declare-function efrit-do--handle-todo-write "efrit-do-handlers" (tool-input))
(declare-function efrit-do--circuit-breaker-reset "efrit-do-circuit-breaker" ())
(declare-function efrit-do--circuit-breaker-check-limits "efrit-do-circuit-breaker"
                  (tool-name &optional tool-input))
(declare-function efrit-do--circuit-breaker-record-call "efrit-do-circuit-breaker"
                  (tool-name &optional tool-input))
(declare-function efrit-do--error-loop-check-result "efrit-do-circuit-breaker" (result))

(defun efrit-todo-bench-efrit--load (root)
  "Load Efrit's handler and breaker from ROOT and byte-compile them."
  ;; Efrit writes logs under its data directory: keep them out of the
  ;; user's, and out of the way of other Emacs processes using it.
  (setq efrit-data-directory (make-temp-file "efrit-todo-bench" t))
  (dolist (dir '("lisp/tools" "lisp/support" "lisp/interfaces" "lisp/core" "lisp"))
    (add-to-list 'load-path (expand-file-name dir root)))
  ;; efrit-do brings the handlers, the breaker and the error-loop check.
  (require 'efrit-do)
  (efrit-todo-bench-inputs-compile root)
  (efrit-todo-bench-inputs-compile
   (file-name-directory (locate-library "efrit-todo-bench-inputs"))))

(defun efrit-todo-bench-efrit--breaker-us (calls with-error-check)
  "Microseconds per call of Efrit's breaker over the tool CALLS.
Check and record always; WITH-ERROR-CHECK adds the error-loop check
Efrit runs on every result."
  (let ((i 0)
        (n (length calls)))
    (efrit-do--circuit-breaker-reset)
    (efrit-todo-bench-inputs-us
     n
     (lambda ()
       (pcase-let ((`(,name ,input ,result) (aref calls (% (setq i (1+ i)) n))))
         (efrit-do--circuit-breaker-check-limits name input)
         (efrit-do--circuit-breaker-record-call name input)
         (when with-error-check
           (efrit-do--error-loop-check-result result)))))))

(defun efrit-todo-bench-efrit-run ()
  "Time Efrit's handler and breaker; print ((LABEL . MICROSECONDS) ...)."
  (efrit-todo-bench-efrit--load (getenv "EFRIT_DIR"))
  (let ((efrit-do-max-tool-calls-per-session most-positive-fixnum)
        (rows nil))
    (dolist (size efrit-todo-bench-inputs-sizes)
      (let ((inputs (efrit-todo-bench-inputs-writes size))
            (round 0))
        (push (cons (format "todo_write %d" size)
                    (efrit-todo-bench-inputs-us
                     (max 20 (/ 20000 size))
                     (lambda ()
                       (efrit-do--handle-todo-write (aref inputs (% (setq round (1+ round)) 10))))))
              rows)))
    (let ((calls (efrit-todo-bench-inputs-tool-calls 2000)))
      ;; Efrit's session tracking appends a line to a log file on every
      ;; call; the comparison is with the breaker alone, the logging is
      ;; shown apart.
      (let ((efrit-session-tracking-enabled nil))
        (push (cons "breaker" (efrit-todo-bench-efrit--breaker-us calls t)) rows)
        (push (cons "breaker check+record" (efrit-todo-bench-efrit--breaker-us calls nil)) rows))
      (push (cons "breaker with session log" (efrit-todo-bench-efrit--breaker-us calls t)) rows))
    (delete-directory efrit-data-directory t)
    (prin1 (nreverse rows))
    (terpri)))

(provide 'efrit-todo-bench-efrit)
;;; efrit-todo-bench-efrit.el ends here
