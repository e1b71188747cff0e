;;; efrit-todo-gptel-team-test.el --- Agent teams: gptel-agent's sub-agents on the chat's list -*- lexical-binding: t; -*-

;;; Commentary:

;; The agent-team scenarios, through gptel's requests with a scripted
;; model: a lead that plans and delegates with gptel-agent's Agent
;; tool, sub-agents that work on the chat's list under their own names,
;; a stuck sub-agent stopped alone, two sub-agents of one type at once.
;; Each ends with the chat waiting on nothing.
;;
;; gptel is the stand-in of test/efrit-todo-fake-gptel.el, or the
;; checkout GPTEL_DIR names; gptel-agent is the stand-in of
;; test/efrit-todo-fake-gptel-agent.el, or the checkout GPTEL_AGENT_DIR
;; names (Emacs 29.1 or later, with yaml and orderless beside it or
;; on GPTEL_LOAD_PATH).  Each scenario runs in every shape of the
;; sub-agent's state machine the gptel under test can run: gptel-agent's
;; snapshot 2e6ba04 as it is (gptel 0.9.9.4), with a TRET handler (gptel
;; 0.9.9.5), and with `gptel-send''s transitions and handlers, as later
;; gptel-agent gives it (the tool hooks then run for its calls).

;;; Code:

(require 'ert)
(require 'seq)
(require 'subr-x)
(require 'efrit-todo-gptel-test)
(require 'efrit-todo-ui)

(defvar efrit-todo-fake-gptel-agent-shape)
(defvar gptel-agent--agents)
(defvar gptel-agent-request--handlers)
(defvar gptel-send--handlers)
(defvar gptel-send--transitions)
(defvar efrit-todo-tool-style)
(defvar gptel-confirm-tool-calls)
(declare-function efrit-todo-agents "efrit-todo" (&optional session))
(declare-function gptel-make-fsm "gptel-request" (&rest slots))

(defconst efrit-todo-gptel-team-test--real-agent
  (not (member (getenv "GPTEL_AGENT_DIR") '(nil "")))
  "Non-nil when the scenarios run against gptel-agent's checkout.")

(if (not efrit-todo-gptel-team-test--real-agent)
    (require 'efrit-todo-fake-gptel-agent)
  (let ((root (expand-file-name (getenv "GPTEL_AGENT_DIR"))))
    (dolist (dir (list root (expand-file-name "../yaml.el" root)
                       (expand-file-name "../orderless" root)))
      (when (file-directory-p dir) (add-to-list 'load-path dir)))
    (require 'gptel-agent)
    (require 'gptel-agent-tools)))

(defconst efrit-todo-gptel-team-test--old-gptel
  (not (boundp 'gptel-post-tool-call-functions))
  "Non-nil for a gptel 0.9.9.4, before the TOOL state was split.")

(defun efrit-todo-gptel-team-test--shapes ()
  "Return the shapes of the sub-agent's state machine this gptel can run.
The snapshot's on gptel 0.9.9.5 as well: efrit-todo gives it the TRET
handler it lacks."
  (if efrit-todo-gptel-team-test--old-gptel '(snapshot) '(snapshot tret send)))

(defvar efrit-todo-gptel-team-test--real-handlers nil
  "The sub-agent handlers of gptel-agent, as loaded.")

(defun efrit-todo-gptel-team-test--send-table (slots)
  "Give a sub-agent's state machine made with SLOTS `gptel-send''s transitions."
  (if (and (eq (plist-get slots :handlers) gptel-agent-request--handlers)
           (not (plist-member slots :table)))
      (append slots (list :table gptel-send--transitions))
    slots))

(defmacro efrit-todo-gptel-team-test--in-shape (shape &rest body)
  "Run BODY with sub-agents' state machines of SHAPE."
  (declare (indent 1) (debug t))
  `(efrit-todo-gptel-team-test--call-in-shape ,shape (lambda () ,@body)))

(defun efrit-todo-gptel-team-test--call-in-shape (shape body)
  "Call BODY with sub-agents' state machines of SHAPE."
  (if (not efrit-todo-gptel-team-test--real-agent)
      (let ((efrit-todo-fake-gptel-agent-shape shape))
        (funcall body))
    (unless efrit-todo-gptel-team-test--real-handlers
      (setq efrit-todo-gptel-team-test--real-handlers gptel-agent-request--handlers))
    (let ((gptel-agent-request--handlers
           (pcase shape
             ('snapshot efrit-todo-gptel-team-test--real-handlers)
             ('tret (append efrit-todo-gptel-team-test--real-handlers
                            '((TRET gptel--handle-tool-result))))
             ('send gptel-send--handlers))))
      (if (not (eq shape 'send))
          (funcall body)
        (advice-add 'gptel-make-fsm :filter-args #'efrit-todo-gptel-team-test--send-table)
        (unwind-protect (funcall body)
          (advice-remove 'gptel-make-fsm #'efrit-todo-gptel-team-test--send-table))))))

;;;; The scripted lead and sub-agents

(defvar efrit-todo-gptel-team-test--scripts nil
  "The answers still to give: an alist of a script's name to its answers.
A request whose first user message starts with [NAME] gets NAME's
answers; every other, the lead's.")

(defvar efrit-todo-gptel-team-test--seen nil
  "Requests received, newest first, as (SCRIPT . REQUEST).")

(defun efrit-todo-gptel-team-test--first-user-text (request)
  "Return the text of REQUEST's first user message."
  (efrit-todo-gptel-test--content-text
   (or (alist-get 'content (seq-find (lambda (m) (equal (alist-get 'role m) "user"))
                                     (efrit-todo-gptel-test--messages request)))
       "")))

(defun efrit-todo-gptel-team-test--route (request)
  "Answer REQUEST from the script its first user message names."
  (let* ((text (efrit-todo-gptel-team-test--first-user-text request))
         (script (if (string-match "\\`\\[\\([^]]+\\)\\]" text) (match-string 1 text) "lead"))
         (entry (assoc script efrit-todo-gptel-team-test--scripts))
         (next (if (cdr entry) (pop (cdr entry))
                 (efrit-todo-gptel-test--text (format "(%s's script has ended)" script)))))
    (push (cons script request) efrit-todo-gptel-team-test--seen)
    (if (functionp next) (funcall next request) next)))

(defun efrit-todo-gptel-team-test--run (chat prompt scripts)
  "Send PROMPT in CHAT; answer from SCRIPTS, an alist of names to answers.
Wait until the chat waits on nothing; return the requests as (SCRIPT . REQUEST),
oldest first."
  (setq efrit-todo-gptel-team-test--scripts
        (mapcar (lambda (script) (cons (car script) (copy-sequence (cdr script)))) scripts)
        efrit-todo-gptel-team-test--seen nil)
  (efrit-todo-gptel-test-send chat prompt (make-list 100 #'efrit-todo-gptel-team-test--route))
  (reverse efrit-todo-gptel-team-test--seen))

(defun efrit-todo-gptel-team-test--of (script seen)
  "Return the requests of SCRIPT among SEEN, oldest first."
  (mapcar #'cdr (seq-filter (lambda (entry) (equal (car entry) script)) seen)))

(defun efrit-todo-gptel-team-test--agent (type description prompt)
  "Return an answer calling the Agent tool: agent TYPE, DESCRIPTION, PROMPT."
  (efrit-todo-gptel-test--tool "Agent" `((subagent_type . ,type) (description . ,description)
                                         (prompt . ,prompt))))

(defun efrit-todo-gptel-team-test--todo-write (&rest items)
  "Return an answer calling TodoWrite with ITEMS, each (CONTENT STATUS)."
  (efrit-todo-gptel-test--tool
   "TodoWrite"
   `((todos . ,(vconcat (mapcar (lambda (item)
                                  `((content . ,(car item)) (status . ,(cadr item))
                                    (activeForm . ,(concat (car item) " (doing)"))))
                                items))))))

(defmacro efrit-todo-gptel-team-test--with-team (&rest body)
  "Run BODY with the mode on, the Task tools, and the test's agent types."
  (declare (indent 0) (debug t))
  ;; The mode first: turned on, it makes the preset for the style then.
  `(efrit-todo-gptel-test--with-mode
     (let ((efrit-todo-tool-style 'tasks)
           ;; gptel-agent's Agent tool asks first; the script answers.
           (gptel-confirm-tool-calls nil)
           (gptel-agent--agents
            (append '(("executor" :system "You carry out one task." :tools ("TodoWrite" "echo"))
                      ("helper" :system "You help." :tools ("echo")))
                    gptel-agent--agents)))
       ,@body)))

(defun efrit-todo-gptel-team-test--chat ()
  "Return a chat whose agent plans with TodoWrite and delegates with Agent."
  (efrit-todo-gptel-test--chat '("TodoWrite" "Agent" "echo")))

(defun efrit-todo-gptel-team-test--item (session content)
  "Return the item of SESSION whose content is CONTENT."
  (seq-find (lambda (item) (equal (plist-get item :content) content))
            (efrit-todo-list session)))

(defun efrit-todo-gptel-team-test--waits-on-nothing (chat session)
  "Check that CHAT waits on nothing and SESSION has no agent running."
  (should (efrit-todo-gptel-test--idle-p chat))
  (should-not (efrit-todo-agents session)))

;;;; The scenarios

(ert-deftest efrit-todo-gptel-team-test-todowrite-is-served-by-efrit-todo ()
  "TodoWrite of gptel-agent, name and schema kept, writes the chat's list.
Its result has ids; an agent with TodoWrite is offered the Task tools too."
  (efrit-todo-gptel-team-test--with-team
    (let* ((chat (efrit-todo-gptel-team-test--chat))
           (seen (efrit-todo-gptel-team-test--run
                  chat "Plan two things"
                  `(("lead" ,(efrit-todo-gptel-team-test--todo-write '("Patch the loop" "pending")
                                                                     '("Write the notes" "pending"))
                     ,(efrit-todo-gptel-test--text "Planned.")))))
           (requests (efrit-todo-gptel-team-test--of "lead" seen))
           (session (efrit-todo-gptel-session chat))
           (result (car (efrit-todo-gptel-test-tool-results requests))))
      (efrit-todo-gptel-test--check-requests requests)
      (should (string-prefix-p "[TODO list updated" result))
      (should (string-match-p "\\bt1\\b" result))
      (should (equal (mapcar (lambda (item) (plist-get item :content)) (efrit-todo-list session))
                     '("Patch the loop" "Write the notes")))
      (let ((names (efrit-todo-gptel-test--tool-names (car requests))))
        (should (member "TodoWrite" names))
        (dolist (name '("TaskCreate" "TaskUpdate" "TaskGet" "TaskList"))
          (should (member name names)))))))

(ert-deftest efrit-todo-gptel-team-test-an-agent-with-efrit-todos-tools-gets-the-style ()
  "An agent offered one of efrit-todo's tools is offered those of the style."
  (efrit-todo-gptel-team-test--with-team
    (let* ((chat (efrit-todo-gptel-test--chat '("todo_write" "echo")))
           (seen (efrit-todo-gptel-team-test--run
                  chat "Plan" `(("lead" ,(efrit-todo-gptel-test--text "Nothing to plan."))))))
      (should (equal (sort (efrit-todo-gptel-test--tool-names
                            (car (efrit-todo-gptel-team-test--of "lead" seen)))
                           #'string<)
                     '("TaskCreate" "TaskGet" "TaskList" "TaskUpdate" "echo"
                       "todo_pause" "todo_write"))))))

(ert-deftest efrit-todo-gptel-team-test-mode-off-gives-gptel-agent-back ()
  "With the mode off, TodoWrite is gptel-agent's own and its functions unadvised."
  (let ((was-on efrit-todo-gptel-mode))
    (unwind-protect
        (progn
          (efrit-todo-gptel-mode 1)
          (should (advice-member-p #'efrit-todo-gptel--run-sub-agent 'gptel-agent--task))
          (should (advice-member-p #'efrit-todo-gptel--agent-todo-write 'gptel-agent--write-todo))
          (efrit-todo-gptel-mode -1)
          (should-not (advice-member-p #'efrit-todo-gptel--run-sub-agent 'gptel-agent--task))
          (should-not (advice-member-p #'efrit-todo-gptel--sub-agent-request 'gptel-request))
          (should-not (advice-member-p #'efrit-todo-gptel--agent-todo-write
                                       'gptel-agent--write-todo))
          (let* ((chat (efrit-todo-gptel-team-test--chat))
                 (seen (efrit-todo-gptel-team-test--run
                        chat "Plan"
                        `(("lead" ,(efrit-todo-gptel-team-test--todo-write '("Patch the loop" "pending"))
                           ,(efrit-todo-gptel-test--text "Planned."))))))
            (should-not (string-prefix-p "[TODO list updated"
                                         (car (efrit-todo-gptel-test-tool-results
                                               (efrit-todo-gptel-team-test--of "lead" seen)))))
            (should-not (efrit-todo-list (efrit-todo-gptel-session chat)))))
      (efrit-todo-gptel-mode (if was-on 1 -1)))))

(ert-deftest efrit-todo-gptel-team-test-a-sub-agent-works-on-the-chats-list ()
  "The lead plans and delegates one task; the sub-agent works on it as itself.
It lists the graph, starts and completes its task, writes a whole list
of its own steps and is refused a task another agent owns; the lead's
next TaskList shows its progress, with owners."
  (skip-unless (fboundp 'efrit-todo-agent-start))
  (dolist (shape (efrit-todo-gptel-team-test--shapes))
    (efrit-todo-gptel-team-test--in-shape shape
      (efrit-todo-gptel-team-test--with-team
        (let* ((heading nil)
               (chat (efrit-todo-gptel-team-test--chat))
               (seen (efrit-todo-gptel-team-test--run
                      chat "Patch the loop, with help"
                      `(("lead"
                         ,(efrit-todo-gptel-team-test--todo-write '("Patch the loop" "pending")
                                                                  '("Write the notes" "pending"))
                         ,(efrit-todo-gptel-test--task "TaskUpdate" "taskId" "t2" "owner" "researcher")
                         ,(efrit-todo-gptel-team-test--agent "executor" "Patch" "[executor] Do t1.")
                         ,(efrit-todo-gptel-test--task "TaskList")
                         ,(efrit-todo-gptel-test--task "TaskUpdate" "taskId" "t2" "status" "completed")
                         ,(efrit-todo-gptel-test--text "All done."))
                        ("executor"
                         ,(efrit-todo-gptel-test--task "TaskList")
                         ,(efrit-todo-gptel-test--task "TaskUpdate" "taskId" "t1" "status" "in_progress")
                         ,(lambda (_request)
                            ;; What *efrit-todos* shows while it works.
                            (efrit-todo-show (efrit-todo-gptel-session chat))
                            (setq heading (with-current-buffer efrit-todo-buffer-name
                                            (efrit-todo-refresh)
                                            (buffer-substring-no-properties
                                             (point-min) (point-max))))
                            (efrit-todo-gptel-team-test--todo-write '("Patch the loop" "in_progress")
                                                                  '("Read the loop" "completed")
                                                                  '("Fix the bound" "completed")))
                         ,(efrit-todo-gptel-test--task "TaskUpdate" "taskId" "t2" "status" "completed")
                         ,(efrit-todo-gptel-test--task "TaskUpdate" "taskId" "t1" "status" "completed")
                         ,(efrit-todo-gptel-test--text "Patched the loop.")))))
               (lead (efrit-todo-gptel-team-test--of "lead" seen))
               (executor (efrit-todo-gptel-team-test--of "executor" seen))
               (session (efrit-todo-gptel-session chat))
               (sub-results (efrit-todo-gptel-test-tool-results executor))
               (lead-results (efrit-todo-gptel-test-tool-results lead)))
          (efrit-todo-gptel-test--check-requests (mapcar #'cdr seen))
          (should (= (length executor) 6))
          ;; While it worked, the buffer showed it on its item, owners on lines.
          (should (string-match-p "agents: executor on t1 Patch the loop" heading))
          (should (string-match-p "t1 +Patch the loop.*(executor)" heading))
          (should (string-match-p "t2 +Write the notes (researcher)" heading))
          ;; The sub-agent is offered efrit-todo's tools with its TodoWrite.
          (should (member "TaskUpdate" (efrit-todo-gptel-test--tool-names (car executor))))
          ;; It sees the whole graph, owners included.
          (should (string-match-p "t1 .*Patch the loop" (nth 0 sub-results)))
          (should (string-match-p "t2 .*Write the notes.*researcher" (nth 0 sub-results)))
          ;; Another agent's task is refused, naming the owner; nothing changed.
          (should (string-match-p "owned by researcher" (nth 3 sub-results)))
          ;; Its whole list covered its own items: the lead's t2 stayed.
          (let ((patch (efrit-todo-gptel-team-test--item session "Patch the loop"))
                (notes (efrit-todo-gptel-team-test--item session "Write the notes"))
                (fix (efrit-todo-gptel-team-test--item session "Fix the bound")))
            (should (equal (plist-get patch :id) "t1"))
            (should (eq (plist-get patch :status) 'completed))
            (should (equal (plist-get patch :owner) "executor"))
            (should (equal (plist-get fix :owner) "executor"))
            (should (equal (plist-get notes :owner) "researcher"))
            (should (eq (plist-get notes :status) 'completed)))
          ;; The lead's Agent call got the sub-agent's answer; its next
          ;; TaskList shows the progress with the owner.
          (should (seq-some (lambda (result) (string-search "Patched the loop." result))
                            lead-results))
          (should (seq-some (lambda (result)
                              (string-match-p "t1 \\[completed\\] Patch the loop (executor)" result))
                            lead-results))
          ;; The ledger names each call's agent.
          (let ((ledger (efrit-todo-ledger session)))
            (should (seq-some (lambda (entry) (and (equal (plist-get entry :tool) "TaskList")
                                                   (equal (plist-get entry :agent) "executor")))
                              ledger))
            (should (seq-some (lambda (entry) (and (equal (plist-get entry :tool) "Agent")
                                                   (null (plist-get entry :agent))))
                              ledger)))
          (efrit-todo-gptel-team-test--waits-on-nothing chat session))))))

(ert-deftest efrit-todo-gptel-team-test-unfinished-work-is-named-to-the-lead ()
  "A sub-agent that ends with its task running leaves it pending, owner kept.
The lead's Agent result names it."
  (skip-unless (fboundp 'efrit-todo-agent-start))
  (dolist (shape (efrit-todo-gptel-team-test--shapes))
    (efrit-todo-gptel-team-test--in-shape shape
      (efrit-todo-gptel-team-test--with-team
        (let* ((chat (efrit-todo-gptel-team-test--chat))
               (seen (efrit-todo-gptel-team-test--run
                      chat "Patch the loop"
                      `(("lead"
                         ,(efrit-todo-gptel-team-test--todo-write '("Patch the loop" "pending"))
                         ,(efrit-todo-gptel-team-test--agent "executor" "Patch" "[executor] Do t1.")
                         ,(efrit-todo-gptel-test--task "TaskUpdate" "taskId" "t1" "status" "cancelled")
                         ,(efrit-todo-gptel-test--text "Given up."))
                        ("executor"
                         ,(efrit-todo-gptel-test--task "TaskUpdate" "taskId" "t1" "status" "in_progress")
                         ,(efrit-todo-gptel-test--text "I must stop here.")))))
               (session (efrit-todo-gptel-session chat))
               (agent-result (nth 1 (efrit-todo-gptel-test-tool-results
                                     (efrit-todo-gptel-team-test--of "lead" seen)))))
          (should (string-search "I must stop here." agent-result))
          (should (string-match-p "t1.*pending" agent-result))
          (should (equal (plist-get (efrit-todo-gptel-team-test--item session "Patch the loop") :owner)
                         "executor"))
          (efrit-todo-gptel-team-test--waits-on-nothing chat session))))))

(ert-deftest efrit-todo-gptel-team-test-a-stuck-sub-agent-is-stopped-alone ()
  "A sub-agent making the same call again and again is stopped by its breaker.
Its request ends; the lead's Agent call gets \"circuit breaker: ...\",
the lead's own breaker is untouched and it finishes its turn."
  (skip-unless (fboundp 'efrit-todo-agent-start))
  (dolist (shape (efrit-todo-gptel-team-test--shapes))
    (efrit-todo-gptel-team-test--in-shape shape
      (efrit-todo-gptel-team-test--with-team
        (let* ((efrit-todo-gptel-test--runs nil)
               (chat (efrit-todo-gptel-team-test--chat))
               (stuck (efrit-todo-gptel-test--tool "echo" '((text . "again"))))
               (seen (efrit-todo-gptel-team-test--run
                      chat "Echo things"
                      `(("lead"
                         ,(efrit-todo-gptel-team-test--agent "helper" "Echo" "[helper] Echo.")
                         ,(efrit-todo-gptel-test--text "The helper got stuck; I stop here."))
                        ("helper" ,@(make-list 20 stuck)))))
               (session (efrit-todo-gptel-session chat))
               (lead (efrit-todo-gptel-team-test--of "lead" seen))
               (helper (efrit-todo-gptel-team-test--of "helper" seen))
               (agent-result (car (efrit-todo-gptel-test-tool-results lead))))
          (efrit-todo-gptel-test--check-requests (mapcar #'cdr seen))
          ;; Stopped after a few calls, not twenty; three of them ran.
          (should (< (length helper) 8))
          (should (= (seq-count (lambda (entry) (and (equal (plist-get entry :tool) "echo")
                                                     (equal (plist-get entry :agent) "helper")))
                                (efrit-todo-ledger session))
                     3))
          (should (string-match-p "circuit breaker: " agent-result))
          ;; The lead goes on: it got its next answer, its breaker is fine.
          (should (= (length lead) 2))
          (should-not (plist-get (efrit-todo-breaker session) :tripped))
          (should-not (efrit-todo-stopped session))
          (efrit-todo-gptel-team-test--waits-on-nothing chat session))))))

(defun efrit-todo-gptel-team-test--slow (callback text)
  "The slow tool: CALLBACK gets TEXT a moment later."
  (run-at-time 0.2 nil callback (format "slow: %s" text)))

(gptel-make-tool :name "slow" :function #'efrit-todo-gptel-team-test--slow
                 :description "Answer slowly." :async t
                 :args '((:name "text" :type string :description "What to answer."))
                 :category "efrit-todo-test" :include t)

(ert-deftest efrit-todo-gptel-team-test-a-call-that-ends-after-its-agent ()
  "A sub-agent's calls after its breaker stopped it: none runs, none is recorded.
A call still running then is let go: not recorded for an agent that
has ended, nor for the lead; a call after the trip in the same
response does not run; nothing waits for either."
  (skip-unless (fboundp 'efrit-todo-agent-start))
  (dolist (shape (efrit-todo-gptel-team-test--shapes))
    (efrit-todo-gptel-team-test--in-shape shape
      (efrit-todo-gptel-team-test--with-team
        (let* ((efrit-todo-gptel-test--runs nil)
               (gptel-agent--agents (cons '("slowpoke" :system "You wait." :tools ("echo" "slow"))
                                          gptel-agent--agents))
               (chat (efrit-todo-gptel-team-test--chat))
               (stuck '("echo" ((text . "again"))))
               (seen (efrit-todo-gptel-team-test--run
                      chat "Wait for it"
                      `(("lead"
                         ,(efrit-todo-gptel-team-test--agent "slowpoke" "Wait" "[slowpoke] Wait.")
                         ,(efrit-todo-gptel-test--text "It got stuck."))
                        ("slowpoke" ,@(make-list 3 (efrit-todo-gptel-test--tools stuck))
                         ,(efrit-todo-gptel-test--tools '("slow" ((text . "late"))) stuck stuck stuck)))))
               (session (efrit-todo-gptel-session chat))
               (agent-result (car (efrit-todo-gptel-test-tool-results
                                   (efrit-todo-gptel-team-test--of "lead" seen)))))
          (should (string-match-p "circuit breaker: " agent-result))
          (should (equal efrit-todo-gptel-test--runs '("echo" "echo" "echo")))
          ;; Let the slow call answer, after the agent ended.
          (accept-process-output nil 0.4)
          (should-not (seq-some (lambda (entry) (equal (plist-get entry :tool) "slow"))
                                (efrit-todo-ledger session)))
          (efrit-todo-gptel-team-test--waits-on-nothing chat session))))))

(ert-deftest efrit-todo-gptel-team-test-two-sub-agents-of-one-type-at-once ()
  "Two executors delegated in one response run at once under distinct names."
  (skip-unless (fboundp 'efrit-todo-agent-start))
  (dolist (shape (efrit-todo-gptel-team-test--shapes))
    (efrit-todo-gptel-team-test--in-shape shape
      (efrit-todo-gptel-team-test--with-team
        (let* ((chat (efrit-todo-gptel-team-test--chat))
               (seen (efrit-todo-gptel-team-test--run
                      chat "Do both"
                      `(("lead"
                         ,(efrit-todo-gptel-team-test--todo-write '("First part" "pending")
                                                                  '("Second part" "pending"))
                         ,(efrit-todo-gptel-test--tools
                           '("Agent" ((subagent_type . "executor") (description . "One")
                                      (prompt . "[one] Do t1.")))
                           '("Agent" ((subagent_type . "executor") (description . "Two")
                                      (prompt . "[two] Do t2."))))
                         ,(efrit-todo-gptel-test--text "Both done."))
                        ("one"
                         ,(efrit-todo-gptel-test--task "TaskUpdate" "taskId" "t1" "status" "in_progress")
                         ,(efrit-todo-gptel-test--task "TaskUpdate" "taskId" "t1" "status" "completed")
                         ,(efrit-todo-gptel-test--text "One done."))
                        ("two"
                         ,(efrit-todo-gptel-test--task "TaskUpdate" "taskId" "t2" "status" "in_progress")
                         ,(efrit-todo-gptel-test--task "TaskUpdate" "taskId" "t2" "status" "completed")
                         ,(efrit-todo-gptel-test--text "Two done.")))))
               (session (efrit-todo-gptel-session chat))
               (owners (list (plist-get (efrit-todo-gptel-team-test--item session "First part") :owner)
                             (plist-get (efrit-todo-gptel-team-test--item session "Second part") :owner)))
               (results (efrit-todo-gptel-test-tool-results (efrit-todo-gptel-team-test--of "lead" seen))))
          (efrit-todo-gptel-test--check-requests (mapcar #'cdr seen))
          (should (equal (sort (copy-sequence owners) #'string<) '("executor" "executor-2")))
          (should (eq (plist-get (efrit-todo-gptel-team-test--item session "First part") :status)
                      'completed))
          (should (eq (plist-get (efrit-todo-gptel-team-test--item session "Second part") :status)
                      'completed))
          (should (seq-some (lambda (r) (string-search "One done." r)) results))
          (should (seq-some (lambda (r) (string-search "Two done." r)) results))
          (efrit-todo-gptel-team-test--waits-on-nothing chat session))))))

(provide 'efrit-todo-gptel-team-test)
;;; efrit-todo-gptel-team-test.el ends here
