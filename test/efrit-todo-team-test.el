;;; efrit-todo-team-test.el --- ERT tests of agent teams in the Lisp API -*- lexical-binding: t; -*-

;;; Commentary:

;; Sub-agents on a session's list through the public Lisp API, as
;; shared/DESIGN.md ("Agent teams") states the rules: `efrit-todo-agent'
;; names the agent of a call (nil: the session's own agent, the lead);
;; `efrit-todo-agent-start' gives unique names (executor, executor-2);
;; starting an unowned task claims it; a sub-agent may not change a task
;; another agent owns (the error names the owner, nothing changes), the
;; lead and the user may; one running item per agent; a whole-list write
;; covers only the writer's items; an ending sub-agent's running tasks go
;; back to pending, owner kept, and the text for the lead names them;
;; each agent has its own breaker, the hard cap counts all; the ledger
;; and the report name each call's agent; owners and agents are saved,
;; and a restored sub-agent's running task is pending.
;;
;; Every test runs in a fresh session.

;;; Code:

(require 'ert)
(require 'cl-lib)
(require 'seq)
(require 'subr-x)
(require 'efrit-todo)
(require 'efrit-todo-test-helpers)

(defvar efrit-todo-state-directory)
(defvar efrit-todo-breaker-hard-cap)
(declare-function efrit-todo-restore "efrit-todo" (&optional force))

;;;; Helpers

(defun efrit-todo-team-test--plan ()
  "Write the lead's plan: t1 in progress, t2 and t3 pending."
  (efrit-todo-test-write
   (efrit-todo-test-item "Plan" "in_progress")
   (efrit-todo-test-item "Patch the loop" "pending")
   (efrit-todo-test-item "Test" "pending")))

(defun efrit-todo-team-test--update (agent id &rest keys-and-values)
  "Run TaskUpdate as AGENT on item ID with KEYS-AND-VALUES."
  (let ((efrit-todo-agent agent))
    (efrit-todo-task-update
     (apply #'efrit-todo-test-object "taskId" id keys-and-values))))

(defun efrit-todo-team-test--owners ()
  "Return (ID STATUS OWNER) of every item of the current session."
  (mapcar (lambda (item)
            (list (plist-get item :id) (plist-get item :status) (plist-get item :owner)))
          (efrit-todo-list)))

(defmacro efrit-todo-team-test--refused (&rest body)
  "Run BODY, which must signal `efrit-todo-invalid-input' and change nothing.
Return the error's message."
  (declare (indent 0) (debug t))
  (let ((items (make-symbol "items")) (history (make-symbol "history"))
        (message (make-symbol "message")))
    `(let* ((,items (efrit-todo-list))
            (,history (efrit-todo-history))
            (,message (cadr (should-error (progn ,@body) :type 'efrit-todo-invalid-input))))
       (should (equal (efrit-todo-list) ,items))
       (should (equal (efrit-todo-history) ,history))
       ,message)))

;;;; Names

(ert-deftest efrit-todo-team-agents-get-unique-names ()
  (efrit-todo-test-with-session
    (should (equal (efrit-todo-agent-start "executor") "executor"))
    (should (equal (efrit-todo-agent-start "executor") "executor-2"))
    (should (equal (efrit-todo-agent-start "researcher") "researcher"))
    (should (equal (mapcar (lambda (a) (plist-get a :name)) (efrit-todo-agents))
                   '("executor" "executor-2" "researcher")))
    (should (equal (plist-get (nth 1 (efrit-todo-agents)) :type) "executor"))
    (should-not (efrit-todo-agent-end "executor"))
    (should (equal (efrit-todo-agent-start "executor") "executor"))
    (should-error (efrit-todo-agent-start "") :type 'efrit-todo-invalid-input)
    (should-error (efrit-todo-agent-start 'executor) :type 'efrit-todo-invalid-input)))

(ert-deftest efrit-todo-team-an-agent-that-is-not-running-is-refused ()
  (efrit-todo-test-with-session
    (efrit-todo-team-test--plan)
    (let ((message (efrit-todo-team-test--refused
                     (let ((efrit-todo-agent "ghost"))
                       (efrit-todo-task-list)))))
      (should (string-prefix-p "efrit-todo-agent: no sub-agent \"ghost\" is running" message)))
    (should-error (let ((efrit-todo-agent 'executor)) (efrit-todo-task-list))
                  :type 'efrit-todo-invalid-input)))

;;;; Owners and claims

(ert-deftest efrit-todo-team-starting-an-unowned-task-claims-it ()
  (efrit-todo-test-with-session
    (efrit-todo-team-test--plan)
    (let ((name (efrit-todo-agent-start "executor")))
      (efrit-todo-team-test--update name "t2" "status" "in_progress")
      (should (equal (efrit-todo-team-test--owners)
                     '(("t1" in-progress nil) ("t2" in-progress "executor") ("t3" pending nil))))
      (should (equal (plist-get (plist-get (car (efrit-todo-agents)) :current) :id) "t2"))
      ;; What it adds is its own; starting it demotes its own t2 only.
      (let ((efrit-todo-agent name))
        (efrit-todo-task-create (efrit-todo-test-object "subject" "Lint"))
        (efrit-todo-task-update (efrit-todo-test-object "taskId" "t4" "status" "in_progress")))
      (should (equal (efrit-todo-team-test--owners)
                     '(("t1" in-progress nil) ("t2" pending "executor") ("t3" pending nil)
                       ("t4" in-progress "executor")))))))

(ert-deftest efrit-todo-team-a-sub-agent-cannot-change-another-agents-task ()
  (efrit-todo-test-with-session
    (efrit-todo-team-test--plan)
    (efrit-todo-agent-start "executor")
    (efrit-todo-agent-start "executor")
    (efrit-todo-team-test--update "executor-2" "t2" "status" "in_progress")
    (should (equal (efrit-todo-team-test--refused
                     (efrit-todo-team-test--update "executor" "t2" "status" "completed"))
                   "taskId: t2 is owned by executor-2; only executor-2 or the lead may change it"))
    (should (string-match-p
             "owned by executor-2"
             (efrit-todo-team-test--refused
               (let ((efrit-todo-agent "executor"))
                 (efrit-todo-write (efrit-todo-test-object
                                    "merge" t
                                    "todos" (vector (efrit-todo-test-object "id" "t2" "content" "Mine"))))))))))

(ert-deftest efrit-todo-team-the-lead-and-the-user-may-change-a-sub-agents-task ()
  (efrit-todo-test-with-session
    (efrit-todo-team-test--plan)
    (efrit-todo-agent-start "executor")
    (efrit-todo-team-test--update "executor" "t2" "status" "in_progress")
    (let ((text (efrit-todo-team-test--update nil "t2" "status" "completed")))
      (should (string-match-p "t2 (executor)" text)))
    (should (equal (nth 1 (efrit-todo-team-test--owners)) '("t2" completed "executor")))
    (efrit-todo-user-set-status "t2" 'pending)
    (should (equal (nth 1 (efrit-todo-team-test--owners)) '("t2" pending "executor")))))

(ert-deftest efrit-todo-team-a-whole-list-covers-the-writers-items-only ()
  (efrit-todo-test-with-session
    (efrit-todo-team-test--plan)
    (efrit-todo-agent-start "executor")
    (efrit-todo-team-test--update "executor" "t2" "status" "in_progress")
    (let ((text (let ((efrit-todo-agent "executor"))
                  (efrit-todo-test-write
                   (efrit-todo-test-item "Patch the loop" "in_progress" "id" "t2")
                   (efrit-todo-test-item "Read the loop" "completed")))))
      (should-not (string-match-p "dropped" text)))
    (should (equal (efrit-todo-team-test--owners)
                   '(("t1" in-progress nil) ("t2" in-progress "executor") ("t3" pending nil)
                     ("t4" completed "executor"))))
    ;; The lead's whole list leaves the executor's items alone.
    (let ((text (efrit-todo-test-write
                 (efrit-todo-test-item "Plan" "completed" "id" "t1")
                 (efrit-todo-test-item "Test" "in_progress" "id" "t3"))))
      (should-not (string-match-p "dropped" text)))
    (should (equal (efrit-todo-team-test--owners)
                   '(("t1" completed nil) ("t2" in-progress "executor") ("t3" in-progress nil)
                     ("t4" completed "executor"))))))

(ert-deftest efrit-todo-team-ending-an-agent-puts-its-tasks-back-to-pending ()
  (efrit-todo-test-with-session
    (efrit-todo-team-test--plan)
    (efrit-todo-agent-start "executor")
    (efrit-todo-team-test--update "executor" "t2" "status" "in_progress")
    (efrit-todo-test-recording-changes changes
      (should (equal (efrit-todo-agent-end "executor")
                     "executor left t2 (Patch the loop) unfinished; it is pending again."))
      (should changes))
    (should (equal (nth 1 (efrit-todo-team-test--owners)) '("t2" pending "executor")))
    (should-not (efrit-todo-agents))
    (should-not (efrit-todo-agent-end "executor"))))

;;;; Breaker, ledger, report

(ert-deftest efrit-todo-team-a-sub-agents-trip-refuses-that-agent-only ()
  (efrit-todo-test-with-session
    (efrit-todo-team-test--plan)
    (efrit-todo-agent-start "executor")
    (let ((input (efrit-todo-test-object "path" "a.el"))
          (refusal nil))
      (let ((efrit-todo-agent "executor"))
        (dotimes (_ 6)
          (setq refusal (efrit-todo-before-tool "read_file" input))
          (unless refusal
            (efrit-todo-after-tool "read_file" input "ok" nil)))
        (should (string-match-p "circuit breaker tripped" refusal))
        (should (plist-get (efrit-todo-breaker) :tripped)))
      (should-not (plist-get (efrit-todo-breaker) :tripped))
      (should-not (efrit-todo-before-tool "read_file" input))
      (should-not (efrit-todo-before-tool "shell" (efrit-todo-test-object "c" "ls"))))))

(ert-deftest efrit-todo-team-the-hard-cap-counts-every-agent ()
  (efrit-todo-test-with-session
    (efrit-todo-team-test--plan)
    (efrit-todo-agent-start "executor")
    (let ((efrit-todo-breaker-hard-cap 6))
      (dotimes (n 6)
        (let ((efrit-todo-agent (and (cl-evenp n) "executor"))
              (input (efrit-todo-test-object "n" n)))
          (should-not (efrit-todo-before-tool "shell" input))
          (efrit-todo-after-tool "shell" input "ok" nil)))
      (should (string-match-p "hard cap 6" (efrit-todo-before-tool "shell" nil)))
      (let ((efrit-todo-agent "executor"))
        (should (string-match-p "hard cap 6" (efrit-todo-before-tool "shell" nil)))))))

(ert-deftest efrit-todo-team-the-ledger-and-the-report-name-the-agent ()
  (efrit-todo-test-with-session
    (efrit-todo-team-test--plan)
    (efrit-todo-agent-start "executor")
    (efrit-todo-team-test--update "executor" "t2" "status" "in_progress")
    (let ((efrit-todo-agent "executor"))
      (efrit-todo-after-tool "shell" nil "ok" nil))
    (efrit-todo-after-tool "shell" nil "ok" nil)
    (let ((ledger (efrit-todo-ledger)))
      (should (equal (mapcar (lambda (e) (plist-get e :agent)) ledger) '("executor" nil)))
      (should (equal (mapcar (lambda (e) (plist-get e :todo)) ledger) '("t2" "t1"))))
    (let ((report (efrit-todo-report)))
      (should (string-match-p "--- 1\\. shell null (by executor, during t2)" report))
      (should (string-match-p "--- 2\\. shell null (during t1)" report)))))

(ert-deftest efrit-todo-team-a-sub-agents-turn-end-looks-at-its-own-items ()
  (efrit-todo-test-with-session
    (efrit-todo-team-test--plan)
    (efrit-todo-agent-start "executor")
    (let ((efrit-todo-agent "executor"))
      (should-not (efrit-todo-turn-end nil)))
    (efrit-todo-team-test--update "executor" "t2" "status" "in_progress")
    (let ((efrit-todo-agent "executor"))
      (should (efrit-todo-turn-end nil)))))

;;;; Without sub-agents nothing changes

(ert-deftest efrit-todo-team-without-sub-agents-owners-do-not-split-the-list ()
  ;; An owner the model writes is no agent of the session: one item runs
  ;; in the list, a whole list covers every item, calls have no agent.
  (efrit-todo-test-with-session
    (efrit-todo-test-write
     (efrit-todo-test-item "A" "in_progress" "owner" "executor")
     (efrit-todo-test-item "B" "pending"))
    (let ((text (efrit-todo-task-update
                 (efrit-todo-test-object "taskId" "t2" "status" "in_progress"))))
      (should-not (string-match-p "Owned by" text)))
    (should (equal (efrit-todo-test-statuses) '(pending in-progress)))
    (should (string-match-p "dropped: t1"
                            (efrit-todo-test-write (efrit-todo-test-item "B" "in_progress" "id" "t2"))))
    (efrit-todo-after-tool "shell" nil "ok" nil)
    (should (plist-member (car (efrit-todo-ledger)) :agent))
    (should-not (plist-get (car (efrit-todo-ledger)) :agent))
    (should-not (efrit-todo-agents))))

;;;; Saved and restored

(ert-deftest efrit-todo-team-owners-and-agents-are-saved-and-running-tasks-come-back-pending ()
  (efrit-todo-test-with-state-directory
    (efrit-todo-test-with-session
      (efrit-todo-team-test--plan)
      (efrit-todo-agent-start "executor")
      (efrit-todo-team-test--update "executor" "t2" "status" "in_progress")
      (efrit-todo-save)
      (efrit-todo-flush)
      (let ((efrit-todo-state-directory nil))
        (efrit-todo-reset))
      (should (member efrit-todo-current-session (efrit-todo-restore t)))
      (should (equal (efrit-todo-team-test--owners)
                     '(("t1" in-progress nil) ("t2" pending "executor") ("t3" pending nil))))
      (should-not (efrit-todo-agents))
      ;; The restored session still knows the executor: the lead's whole
      ;; list leaves its t2 alone.
      (efrit-todo-test-write (efrit-todo-test-item "Plan" "in_progress" "id" "t1"))
      (should (member "t2" (efrit-todo-test-ids))))))

(provide 'efrit-todo-team-test)

;;; efrit-todo-team-test.el ends here
