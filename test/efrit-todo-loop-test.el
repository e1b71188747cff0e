;;; efrit-todo-loop-test.el --- ERT tests of the agent-loop API -*- lexical-binding: t; -*-

;;; Commentary:

;; The breaker, ledger, completion guard, continuation, reminders,
;; auto-completion and request analysis, driven as the adapter drives
;; them, each test in a fresh session.

;;; Code:

(require 'ert)
(require 'cl-lib)
(require 'efrit-todo)

(defmacro efrit-todo-loop-test--in-session (&rest body)
  "Run BODY with `efrit-todo-current-session' set to a fresh session."
  (declare (indent 0) (debug t))
  `(let ((efrit-todo-current-session (symbol-name (cl-gensym "loop-test-"))))
     (unwind-protect (progn ,@body)
       (efrit-todo-reset))))

(defun efrit-todo-loop-test--plan (&rest contents)
  "Write CONTENTS as a plan, the first in progress."
  (efrit-todo-write
   (vconcat (cl-loop for content in contents
                     for first = t then nil
                     collect (list :content content :status (if first "in_progress" "pending"))))))

(defun efrit-todo-loop-test--advance ()
  "Complete the running item and start the next one, with ids."
  (let ((started nil))
    (efrit-todo-write
     (vconcat (mapcar (lambda (item)
                        (list :id (plist-get item :id)
                              :content (plist-get item :content)
                              :status (pcase (plist-get item :status)
                                        ('in-progress "completed")
                                        ('pending (if started "pending" (setq started t) "in_progress"))
                                        (status (symbol-name status)))))
                      (efrit-todo-list))))))

(defun efrit-todo-loop-test--rewrite ()
  "Send the current list back unchanged, with ids, as the model would."
  (efrit-todo-write
   (vconcat (mapcar (lambda (item)
                      (list :id (plist-get item :id)
                            :content (plist-get item :content)
                            :status (replace-regexp-in-string
                                     "-" "_" (symbol-name (plist-get item :status)))))
                    (efrit-todo-list)))))

(defun efrit-todo-loop-test--call (tool input result &optional error-p)
  "Run TOOL through the breaker and ledger with INPUT, RESULT and ERROR-P."
  (or (efrit-todo-before-tool tool input)
      (efrit-todo-after-tool tool input result error-p)))

(ert-deftest efrit-todo-loop-test-nil-result-is-named-not-hidden ()
  "A nil or empty result is reported as no output, never as success."
  (efrit-todo-loop-test--in-session
    (should (equal (efrit-todo-after-tool "eval_sexp" '(:expr "(ignore)") nil nil)
                   "eval_sexp returned no output"))
    (should (equal (efrit-todo-after-tool "read_file" '(:path "a") "" nil)
                   "read_file returned no output"))
    (should-not (string-match-p "executed successfully" (efrit-todo-report)))
    (should (equal (mapcar (lambda (e) (plist-get e :tool)) (efrit-todo-ledger))
                   '("eval_sexp" "read_file")))))

(ert-deftest efrit-todo-loop-test-ledger-records-every-field ()
  "Each call is recorded with its tool, input, result, error flag and item."
  (efrit-todo-loop-test--in-session
    (efrit-todo-loop-test--plan "Read the config with read_file")
    (efrit-todo-after-tool "read_file" '(:path "init.el") "(setq x 1)" nil nil 0.25)
    (efrit-todo-after-tool "eval_sexp" '(:expr "(x)") "Error: void-function x" nil)
    (let ((entries (efrit-todo-ledger)))
      (should (= (length entries) 2))
      (should (equal (plist-get (car entries) :result) "(setq x 1)"))
      (should (equal (plist-get (car entries) :todo) "t1"))
      (should (equal (plist-get (car entries) :duration) 0.25))
      (should (string-match-p "init.el" (plist-get (car entries) :input)))
      (should (numberp (plist-get (car entries) :time)))
      (should-not (plist-get (car entries) :error))
      (should (plist-get (cadr entries) :error)))))

(ert-deftest efrit-todo-loop-test-a-fourth-identical-call-is-refused-and-a-repeat-trips ()
  "Three identical calls run; a fourth is refused, other calls go ahead.
Asking for a refused call twice in a row trips the breaker; then every
tool is refused until reset."
  (efrit-todo-loop-test--in-session
    (let ((input (make-hash-table :test 'equal)))
      (puthash "path" "a.el" input)
      (should (equal (efrit-todo-loop-test--call "read_file" input "x") "x"))
      (should (equal (efrit-todo-loop-test--call "read_file" (copy-hash-table input) "x") "x"))
      (should (string-match-p "the same call again will be refused"
                              (efrit-todo-loop-test--call "read_file" input "x")))
      (should-not (plist-get (efrit-todo-breaker) :tripped))
      (should (string-prefix-p "Error: read_file was not run: it would be the same call to read_file 4 times in a row (limit 3)"
                               (efrit-todo-before-tool "read_file" input)))
      (let ((other (make-hash-table :test 'equal)))
        (puthash "path" "b.el" other)
        (should-not (efrit-todo-before-tool "read_file" other)))
      (should-not (efrit-todo-before-tool "eval_sexp" input))
      (should-not (plist-get (efrit-todo-breaker) :tripped))
      (should (string-match-p "circuit breaker tripped"
                              (efrit-todo-before-tool "read_file" input)))
      (let ((state (efrit-todo-breaker)))
        (should (plist-get state :tripped))
        (should (string-match-p "2 refused calls came in a row" (plist-get state :reason))))
      (dolist (tool '("read_file" "todo_write" "session_complete" "eval_sexp"))
        (should (string-prefix-p "Error" (efrit-todo-before-tool tool nil))))
      (efrit-todo-breaker-reset)
      (should-not (efrit-todo-before-tool "read_file" input))
      (should-not (plist-get (efrit-todo-breaker) :tripped)))))

(ert-deftest efrit-todo-loop-test-before-tool-refuses-after-a-trip-anywhere ()
  "A tripped breaker refuses the calls it let through before, until reset.
Other sessions go on; bad names always signal.
While no breaker is tripped, `efrit-todo-before-tool' answers a session
and tool it has seen without the module, so this is what keeps that honest."
  (let ((other (symbol-name (cl-gensym "loop-test-other-")))
        (trip (lambda (session)
                (dotimes (_ 3) (efrit-todo-after-tool "read_file" '(:path "a.el") "x" nil session))
                (dotimes (_ 2) (efrit-todo-before-tool "read_file" '(:path "a.el") session)))))
    (unwind-protect
        (efrit-todo-loop-test--in-session
          (dotimes (_ 2)
            (should-not (efrit-todo-before-tool "read_file" nil))
            (should-not (efrit-todo-before-tool "read_file" nil other)))
          (should-not efrit-todo--breaker-tripped)
          (funcall trip nil)
          (should efrit-todo--breaker-tripped)
          (should (string-prefix-p "Error: read_file was not run" (efrit-todo-before-tool "read_file" nil)))
          (should-not (efrit-todo-before-tool "read_file" nil other))
          (funcall trip other)
          (efrit-todo-breaker-reset)
          ;; The other session is still tripped.
          (should efrit-todo--breaker-tripped)
          (should-not (efrit-todo-before-tool "read_file" nil))
          (should (efrit-todo-before-tool "read_file" nil other))
          (efrit-todo-begin-turn other)
          (should-not (efrit-todo-before-tool "read_file" nil other))
          ;; That call found no breaker that could refuse anything.
          (should-not efrit-todo--breaker-tripped)
          (dolist (bad '("" "  " "a\0b" 42 nil read_file))
            (should-error (efrit-todo-before-tool bad nil) :type 'efrit-todo-invalid-input))
          (dolist (bad-session '("" "a\0b"))
            (should-error (efrit-todo-before-tool "read_file" nil bad-session)
                          :type 'efrit-todo-invalid-input)))
      (efrit-todo-reset other))))

(ert-deftest efrit-todo-loop-test-breaker-limits-are-options ()
  "The no-progress budget follows its option; warnings come first.
Once spent, other tools are refused but the todo tools go ahead."
  (efrit-todo-loop-test--in-session
    (let ((efrit-todo-breaker-without-progress 6)
          (texts nil))
      (dotimes (i 6)
        (push (efrit-todo-after-tool (format "tool_%d" (% i 2)) (list :n i) "ok" nil) texts))
      (should (cl-some (lambda (text) (string-match-p "calls? left before tool calls are refused" text)) texts))
      (should (string-match-p "6 tool calls have run without completing a todo item (limit 6)" (car texts)))
      (should-not (plist-get (efrit-todo-breaker) :tripped))
      (should (efrit-todo-before-tool "tool_0" '(:n 9)))
      (should-not (efrit-todo-before-tool "todo_write" '(:todos [])))
      (should-not (plist-get (efrit-todo-breaker) :tripped)))))

(ert-deftest efrit-todo-loop-test-options-changed-between-calls-apply ()
  "A limit changed by `setq', `let' or buffer-locally applies from the next call."
  (let ((identical (lambda (n)
                     ;; N identical calls in a fresh session; non-nil if
                     ;; the same call is then refused.
                     (efrit-todo-loop-test--in-session
                       (dotimes (_ n) (efrit-todo-after-tool "read_file" '(:path "a.el") "x" nil))
                       (efrit-todo-before-tool "read_file" '(:path "a.el")))))
        (saved efrit-todo-breaker-identical))
    (unwind-protect
        (progn
          (setq efrit-todo-breaker-identical 3)
          (should-not (funcall identical 2))
          (setq efrit-todo-breaker-identical 2)
          (should (funcall identical 2))
          (let ((efrit-todo-breaker-identical 5))
            (should-not (funcall identical 4)))
          (should (funcall identical 2))
          (with-temp-buffer
            (setq-local efrit-todo-breaker-identical 4)
            (should-not (funcall identical 3)))
          (should (funcall identical 2)))
      (setq efrit-todo-breaker-identical saved))))

(ert-deftest efrit-todo-loop-test-result-is-sent-back-as-it-is ()
  "A result with nothing to add comes back as the same string; a notice makes a new one."
  (efrit-todo-loop-test--in-session
    (let ((result (copy-sequence "Opened a.el")))
      (should (eq result (efrit-todo-after-tool "find_file" '(:path "a.el") result nil)))
      (should (equal result "Opened a.el")))
    (let ((efrit-todo-breaker-identical 3)
          (result (copy-sequence "Opened a.el")))
      (should (eq result (efrit-todo-after-tool "find_file" '(:path "a.el") result nil)))
      ;; The third identical call in a row carries a warning.
      (let ((text (efrit-todo-after-tool "find_file" '(:path "a.el") result nil)))
        (should-not (eq result text))
        (should (string-prefix-p "Opened a.el\n\n" text))
        (should (equal result "Opened a.el"))))))

(ert-deftest efrit-todo-loop-test-completing-an-item-refills-the-budget ()
  "Completing an item is progress: the no-progress count starts again."
  (efrit-todo-loop-test--in-session
    (let ((efrit-todo-breaker-without-progress 5))
      (efrit-todo-loop-test--plan "One" "Two")
      (dotimes (i 3) (efrit-todo-after-tool "grep" (list :n i) "ok" nil))
      (efrit-todo-after-tool "todo_write" nil (efrit-todo-loop-test--advance) nil)
      (should (= (plist-get (efrit-todo-breaker) :since-progress) 0))
      (dotimes (i 3) (efrit-todo-after-tool "grep" (list :m i) "ok" nil))
      (should-not (plist-get (efrit-todo-breaker) :tripped)))))

(ert-deftest efrit-todo-loop-test-complete-is-refused-once-with-open-items ()
  "A session_complete with items open is refused once, naming them, then allowed."
  (efrit-todo-loop-test--in-session
    (efrit-todo-loop-test--plan "Fix the parser" "Update the changelog")
    (let ((first (efrit-todo-complete "All done")))
      (should-not (plist-get first :allowed))
      (should (string-match-p "t1" (plist-get first :text)))
      (should (string-match-p "Update the changelog" (plist-get first :text))))
    (let ((second (efrit-todo-complete "Stopping anyway")))
      (should (plist-get second :allowed))
      (should (string-match-p "Stopping anyway" (plist-get second :text))))))

(ert-deftest efrit-todo-loop-test-turn-end-continues-twice-then-lets-go ()
  "Open items get two continuation messages, the second escalated."
  (efrit-todo-loop-test--in-session
    (efrit-todo-loop-test--plan "Fix the parser" "Update the changelog")
    (should-not (efrit-todo-turn-end t))
    (let ((first (efrit-todo-turn-end nil))
          (second (efrit-todo-turn-end nil)))
      (should (string-match-p "t1" first))
      (should (string-match-p "todo_pause" second))
      (should-not (equal first second)))
    (should-not (efrit-todo-turn-end nil))))

(ert-deftest efrit-todo-loop-test-pause-stops-continuation-and-is-reported ()
  "The todo_pause reason is 1 to 500 characters, stops continuation, is reported."
  (efrit-todo-loop-test--in-session
    (efrit-todo-loop-test--plan "Deploy")
    (should (eq (car (should-error (efrit-todo-pause "") :type 'efrit-todo-invalid-input))
                'efrit-todo-invalid-input))
    (should-error (efrit-todo-pause (make-string 501 ?x)) :type 'efrit-todo-invalid-input)
    (should-error (efrit-todo-pause 42) :type 'efrit-todo-invalid-input)
    (should (stringp (efrit-todo-pause "The server needs a password I do not have")))
    (should-not (efrit-todo-turn-end nil))
    (should (string-match-p "needs a password" (efrit-todo-report)))))

(ert-deftest efrit-todo-loop-test-reminder-after-four-calls ()
  "Four successful calls under one item bring one reminder naming it."
  (efrit-todo-loop-test--in-session
    (efrit-todo-loop-test--plan "Refactor the module")
    (let ((texts (cl-loop for i below 4
                          collect (efrit-todo-after-tool "edit_file" (list :n i) "ok" nil))))
      (should (= 1 (cl-count-if (lambda (text) (string-match-p "reminder" text)) texts)))
      (should (string-match-p "t1" (car (last texts)))))
    (let ((efrit-todo-reminders nil))
      (should-not (cl-loop for i below 8
                           thereis (string-match-p "reminder" (efrit-todo-after-tool "edit_file" (list :k i) "ok" nil)))))))

(ert-deftest efrit-todo-loop-test-auto-complete-is-opt-in ()
  "An item naming a tool completes when that tool succeeds, only when enabled."
  (efrit-todo-loop-test--in-session
    (efrit-todo-loop-test--plan "Run the tests with run_tests" "Commit")
    (efrit-todo-after-tool "run_tests" nil "3 passed" nil)
    (should (equal (plist-get (efrit-todo-current) :id) "t1"))
    (should-not (string-match-p "completes when" (efrit-todo-loop-test--plan "Run the tests with run_tests"
                                                                            "Commit" "Tag it")))
    ;; The marker is on the lines a result shows: those of a shown list
    ;; (here an item is added) and of changed items.
    (let ((efrit-todo-auto-complete t)
          (efrit-todo-known-tools '("run_tests" "vcs_commit")))
      (should (string-match-p "t1 \\[in_progress\\] Run the tests with run_tests (completes when run_tests succeeds)"
                              (efrit-todo-loop-test--plan "Run the tests with run_tests" "Commit"
                                                          "Tag it" "Push it"))))
    (let* ((efrit-todo-auto-complete t)
           (text (efrit-todo-after-tool "run_tests" nil "3 passed" nil)))
      (should (string-match-p "t1 completed automatically" text))
      (should (string-match-p "t2 is now in_progress" text))
      (should (equal (plist-get (efrit-todo-current) :id) "t2")))))

(ert-deftest efrit-todo-loop-test-analyze-request ()
  "A numbered request of three steps is complex; a question is not."
  (let ((complex (efrit-todo-analyze-request "1. Fix the parser\n2. Add a test\n3. Update NEWS")))
    (should (plist-get complex :complex))
    (should (= (plist-get complex :steps) 3))
    (should (string-match-p "todo_write" (plist-get complex :suggestion))))
  (let ((simple (efrit-todo-analyze-request "What is this function for?")))
    (should-not (plist-get simple :complex))
    (should (floatp (plist-get simple :score))))
  (should-error (efrit-todo-analyze-request 7) :type 'efrit-todo-invalid-input))

(ert-deftest efrit-todo-loop-test-schemas-include-todo-pause ()
  "The tool schemas offer todo_pause with a required reason."
  (let ((pause (seq-find (lambda (schema) (equal (cdr (assoc "name" schema)) "todo_pause"))
                         (efrit-todo-tool-schemas))))
    (should pause)
    (should (equal (cdr (assoc "required" (cdr (assoc "input_schema" pause)))) ["reason"]))))

(ert-deftest efrit-todo-loop-test-reset-clears-loop-state ()
  "`efrit-todo-reset' clears the breaker, the ledger and the guide."
  (efrit-todo-loop-test--in-session
    (efrit-todo-loop-test--plan "A")
    (dotimes (_ 3) (efrit-todo-after-tool "same" '(:x 1) "r" nil))
    (dotimes (_ 2) (efrit-todo-before-tool "same" '(:x 1)))
    (efrit-todo-pause "Blocked")
    (should (plist-get (efrit-todo-breaker) :tripped))
    (efrit-todo-reset)
    (should-not (plist-get (efrit-todo-breaker) :tripped))
    (should-not (efrit-todo-ledger))
    (should-not (string-match-p "Blocked" (efrit-todo-report)))))

(ert-deftest efrit-todo-loop-test-scripted-session-loses-nothing ()
  "A plan of 5 items, 12 calls with one nil result and one error, then completion."
  (efrit-todo-loop-test--in-session
    (efrit-todo-loop-test--plan "Find the callers" "Rename the function" "Update the callers"
                                "Update the docs" "Run the tests")
    (let ((calls '(("search_content" "found 3 callers in a.el b.el c.el")
                   ("read_file" "contents of a.el")
                   ("edit_file" "renamed in a.el")
                   ("edit_file" nil)
                   ("read_file" "contents of b.el")
                   ("edit_file" "updated b.el")
                   ("edit_file" "Error: c.el is read-only" t)
                   ("eval_sexp" "made c.el writable")
                   ("edit_file" "updated c.el")
                   ("edit_file" "updated README")
                   ("run_tests" "42 tests passed")
                   ("vcs_status" "3 files modified")))
          (step 0))
      (dolist (call calls)
        (should-not (efrit-todo-before-tool (car call) nil))
        (efrit-todo-after-tool (car call) (list :step step) (cadr call) (nth 2 call))
        (cl-incf step)
        (when (memq step '(1 4 9 10 12))
          (efrit-todo-after-tool "todo_write" nil (efrit-todo-loop-test--advance) nil)))
      (should (= (plist-get (efrit-todo-counts) :completed) 5))
      (let ((completion (efrit-todo-complete "Renamed parse-config everywhere")))
        (should (plist-get completion :allowed))
        (let ((report (plist-get completion :text)))
          (dolist (call calls)
            (when (cadr call)
              (should (string-match-p (regexp-quote (cadr call)) report))))
          (should (string-match-p "edit_file returned no output" report))
          (should (string-match-p "^Done (5):" report))
          (should-not (string-match-p "^Left open" report))
          (dolist (item (efrit-todo-list))
            (should (string-match-p (regexp-quote (plist-get item :content)) report)))
          (should (string-match-p "Renamed parse-config everywhere" report))
          (should-not (string-match-p "executed successfully" report)))))))

(provide 'efrit-todo-loop-test)
;;; efrit-todo-loop-test.el ends here
