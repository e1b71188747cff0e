;;; efrit-todo-fake-efrit.el --- A small stand-in for Efrit's efrit-do loop -*- lexical-binding: t; -*-

;;; Commentary:

;; CI cannot install Efrit, so the loop scenarios run against this
;; stand-in.  It defines the functions `efrit-todo-efrit-mode' advises
;; or calls, under Efrit's names and in the order Efrit calls them,
;; and it reproduces the behaviour the adapter must correct:
;;
;; - todo_write stores what arrives, renumbers ids, drops activeForm;
;; - a breaker that refuses calls (with a text that does not start
;;   with "Error") while the loop keeps asking Claude up to 100 times;
;; - session_complete's message is taken from the last
;;   [SESSION-COMPLETE: ...] marker, greedily over lines;
;; - the summary in *efrit-do* cuts every step to 80 characters;
;; - `efrit-execute' returns the text of string results only, and the
;;   remote queue reports a nil or empty one as a generic success.
;;
;; Nothing here is Efrit's code: it is written from what Efrit does.
;; Load it instead of Efrit, never beside it.

;;; Code:

(require 'cl-lib)
(require 'seq)
(require 'subr-x)
(require 'json)
(require 'efrit-todo)

(defvar efrit-do-circuit-breaker-enabled t
  "Non-nil while the stand-in breaker is on.")
(defvar efrit-do-error-loop-auto-complete t
  "Stand-in for Efrit's option; bound by the adapter.")
(defvar efrit-do-max-same-error-occurrences 3
  "Stand-in for Efrit's option; bound by the adapter.")
(defvar efrit-do-async-max-iterations 100
  "Most API requests in one session, as in Efrit.")
(defvar efrit-do--last-result nil
  "The text *efrit-do* last showed.")
(defvar efrit-repl-loop--tool-session nil
  "The REPL session whose tool is running.")
(defvar efrit-do--current-todos)
(defvaralias 'efrit-do--current-todos 'efrit-todo--current-todos)

;;;; Sessions

(cl-defstruct (efrit-session (:constructor efrit-session--make))
  "A stand-in Efrit session."
  id command messages work-log status on-complete (iterations 0) interrupt-requested)

(defvar efrit-todo-fake--sessions (make-hash-table :test 'equal)
  "Every session by id.")

(defvar efrit-todo-fake--active nil
  "The running session.")

(defun efrit-session-create (id command)
  "Make session ID for COMMAND, its history holding the user's command."
  (puthash id (efrit-session--make :id id :command command
                                   :messages (list `((role . "user") (content . ,command)))
                                   :status 'active)
           efrit-todo-fake--sessions))

(defun efrit-session-get (id)
  "Return the session named ID, or nil."
  (gethash id efrit-todo-fake--sessions))

(defun efrit-session-active ()
  "Return the running session, or nil."
  efrit-todo-fake--active)

(defun efrit-session-add-assistant-response (session content)
  "Append the assistant's CONTENT to SESSION's history."
  (when (and session content)
    (setf (efrit-session-messages session)
          (append (efrit-session-messages session)
                  (list `((role . "assistant") (content . ,content)))))))

(defun efrit-session-add-tool-results (session blocks)
  "Append BLOCKS to SESSION's history as one user message."
  (when (and session blocks)
    (setf (efrit-session-messages session)
          (append (efrit-session-messages session)
                  (list `((role . "user") (content . ,(vconcat blocks))))))))

(defun efrit-session-add-work (session result call)
  "Log CALL and its RESULT in SESSION's work log, newest first."
  (push (list result call) (efrit-session-work-log session)))

(defun efrit-session-request-interrupt (session)
  "Ask SESSION to stop before its next request, as Efrit's interrupt does."
  (setf (efrit-session-interrupt-requested session) t))

(defun efrit-session-complete (session _reason)
  "Mark SESSION finished; nothing is running afterwards."
  (setf (efrit-session-status session) 'complete)
  (setq efrit-todo-fake--active nil))

;;;; The network, which tests replace

(defun efrit-api-request-async (_request _callback &optional _error-callback)
  "Send a request to Claude; the stand-in has no network."
  (error "The fake Efrit has no network; advise `efrit-api-request-async'"))

(defun efrit-api-request-sync (_request &optional _timeout)
  "Send a request to Claude and wait; the stand-in has no network."
  (error "The fake Efrit has no network; advise `efrit-api-request-sync'"))

;;;; Tools

(defvar efrit-todo-fake--breaker-calls nil
  "Fingerprints of this session's calls, newest first.")

(defun efrit-todo-fake--breaker-refusal (name input)
  "Return the stand-in breaker's refusal of NAME with INPUT, or nil.
A fourth identical call in a row trips it, and it stays tripped; the
refusal does not start with \"Error\", so it goes back as a success."
  (when efrit-do-circuit-breaker-enabled
    (push (format "%s %S" name (and (hash-table-p input) (json-encode input)))
          efrit-todo-fake--breaker-calls)
    (when (and (> (length efrit-todo-fake--breaker-calls) 3)
               (seq-every-p (lambda (call) (equal call (car efrit-todo-fake--breaker-calls)))
                            (seq-take efrit-todo-fake--breaker-calls 4)))
      "[Circuit breaker tripped: the same call 3 times in a row]")))

(defvar efrit-do--tool-dispatch-table
  '(("eval_sexp" . (efrit-todo-fake--eval . :input-str))
    ("todo_write" . (efrit-do--handle-todo-write . :tool-input))
    ("session_complete" . (efrit-do--handle-session-complete . :tool-input)))
  "Tool name to (HANDLER . ARGUMENT-KIND), as Efrit's table.")

(defun efrit-todo-fake--eval (expression)
  "Evaluate EXPRESSION, as eval_sexp does."
  (format "\n[Executed: %s]\n[Result: %S]" expression (eval (read expression) t)))

(defun efrit-todo-fake--todo-summary ()
  "Return the stand-in's todo_write result: counts and the running item.
As long as Efrit's own, so that byte counts through this loop compare
with Efrit's, and, like Efrit's, without ids."
  (let* ((todos efrit-todo--current-todos)
         (count (lambda (status)
                  (seq-count (lambda (todo) (eq (efrit-todo-item-status todo) status)) todos)))
         (running (seq-find (lambda (todo) (eq (efrit-todo-item-status todo) 'in-progress))
                            todos)))
    (format "\n[Stored the todo list: %d items (%d to do, %d running, %d done)%s]"
            (length todos) (funcall count 'todo) (funcall count 'in-progress)
            (funcall count 'completed)
            (if running (format "\nWorking on: %s" (efrit-todo-item-content running)) ""))))

(defun efrit-do--handle-todo-write (input)
  "Store INPUT's todos as they come, numbering ids afresh, as Efrit does."
  (let ((n 0))
    (setq efrit-todo--current-todos
          (mapcar (lambda (todo)
                    (efrit-todo-item-create
                     :id (format "todo-%d" (cl-incf n))
                     :content (gethash "content" todo)
                     :status (let ((status (gethash "status" todo)))
                               (if (equal status "pending") 'todo
                                 (intern (string-replace "_" "-" status))))
                     :priority 'medium))
                  (and (hash-table-p input) (gethash "todos" input))))
    (efrit-todo-fake--todo-summary)))

(defun efrit-do--handle-session-complete (input)
  "Return the marker that ends the session, with INPUT's message."
  (format "\n[SESSION-COMPLETE: %s]" (or (gethash "message" input) "done")))

(defun efrit-do--dispatch-tool (name input input-str)
  "Run tool NAME on INPUT (or on INPUT-STR, if its table entry asks for it)."
  (pcase (cdr (assoc name efrit-do--tool-dispatch-table))
    (`(,handler . :input-str) (funcall handler input-str))
    (`(,handler . :tool-input) (funcall handler input))
    (_ (format "\n[Unknown tool: %s]" name))))

(defun efrit-do--execute-tool (tool-item)
  "Run TOOL-ITEM behind the stand-in breaker; log it in the session."
  (let* ((name (gethash "name" tool-item))
         (input (gethash "input" tool-item))
         (input-str (and (hash-table-p input) (gethash "expr" input)))
         (refusal (efrit-todo-fake--breaker-refusal name input)))
    (or refusal
        (let ((result (efrit-do--dispatch-tool name input input-str)))
          (when efrit-todo-fake--active
            (efrit-session-add-work efrit-todo-fake--active result (format "(%s)" name)))
          result))))

(defun efrit-do--get-current-tools-schema ()
  "Return the schemas sent to Claude, Efrit's old todo_write among them."
  (vector '(("name" . "eval_sexp") ("description" . "Evaluate Emacs Lisp."))
          '(("name" . "todo_write") ("description" . "Replace the todo list."))
          '(("name" . "session_complete") ("description" . "Finish the session."))))

(defun efrit-do--command-system-prompt (&optional _retry _error _code _session-id _extra)
  "Return the system prompt, with the todo list where Efrit puts it."
  (concat "You are Efrit." (efrit-todo-format-for-prompt)))

;;;; The async loop

(defun efrit-loop-handle-response (session _adapter response)
  "Run the tools of RESPONSE for SESSION, or end the turn."
  (let ((content (gethash "content" response))
        (finish (if (efrit-repl-session-p session) #'efrit-repl-loop--finish
                  #'efrit-do-async--finish)))
    (pcase (gethash "stop_reason" response)
      ("tool_use" (efrit-todo-fake--execute-tools session content))
      ("end_turn"
       ;; The REPL keeps Claude's last words for the next turn.
       (when (efrit-repl-session-p session)
         (efrit-repl-session-add-assistant-message session content))
       (funcall finish session "end_turn" nil nil))
      (other (funcall finish session "unknown-stop-reason" (format "%S" other) nil)))))

(defun efrit-todo-fake--run-tool-use (block)
  "Run the tool_use BLOCK of a response through `efrit-do--execute-tool'."
  (let ((item (make-hash-table :test 'equal)))
    (puthash "name" (gethash "name" block) item)
    (puthash "input" (gethash "input" block) item)
    (efrit-do--execute-tool item)))

(defconst efrit-todo-fake--interrupted
  "Error: the tool was interrupted (C-g)"
  "The result of a tool that \\[keyboard-quit] interrupted.")

(defun efrit-todo-fake--execute-tools (session content)
  "Run every tool_use of CONTENT, send the results, go on or stop SESSION.
SESSION is an efrit-do session or a REPL session.  A \\[keyboard-quit]
in a tool ends the turn: the tools after it are skipped, each with an
error result, so that the conversation stays valid."
  (let ((repl (efrit-repl-session-p session))
        results completion interrupted)
    (if repl
        (efrit-repl-session-add-assistant-message session content)
      (efrit-session-add-assistant-response session content))
    (seq-doseq (block content)
      (when (equal (gethash "type" block) "tool_use")
        (let* ((result (if interrupted
                           "Error: skipped, the turn was interrupted"
                         (condition-case nil
                             (let ((efrit-repl-loop--tool-session (and repl session)))
                               (efrit-todo-fake--run-tool-use block))
                           (quit (setq interrupted t)
                                 efrit-todo-fake--interrupted))))
               (text (if (stringp result) result (format "%S" result))))
          (push `((type . "tool_result") (tool_use_id . ,(gethash "id" block))
                  (content . ,text)
                  ,@(and (string-match-p "^Error " text) '((is_error . t))))
                results)
          (when (string-match "\\[SESSION-COMPLETE: \\(\\(?:.\\|\n\\)*\\)\\]" text)
            (setq completion (match-string 1 text))))))
    (if repl
        (efrit-repl-session-add-user-message session (vconcat (nreverse results)))
      (efrit-session-add-tool-results session (nreverse results)))
    (cond ((and interrupted repl) (efrit-repl-loop--finish session "interrupted" nil nil))
          (interrupted (efrit-do-async--finish session "interrupted" nil nil))
          ((and completion repl) (efrit-repl-loop--finish session "session-complete" nil completion))
          (completion (efrit-do-async--finish session "session-complete" nil completion))
          (repl (efrit-repl-loop--continue-iteration session))
          (t (efrit-do-async--continue-iteration session)))))

(defun efrit-todo-fake--request (session-id messages)
  "Return the request for MESSAGES of the session named SESSION-ID."
  `(("model" . "fake") ("max_tokens" . 8192)
    ("messages" . ,(vconcat messages))
    ("system" . ,(efrit-do--command-system-prompt nil nil nil session-id nil))
    ("tools" . ,(efrit-do--get-current-tools-schema))))

(defun efrit-do-async--continue-iteration (session)
  "Send SESSION's next request, unless it used up its iterations.
An interrupt requested meanwhile stops it instead."
  (cond
   ((efrit-session-interrupt-requested session)
    (setf (efrit-session-interrupt-requested session) nil)
    (efrit-do-async--finish session "interrupted" nil nil))
   ((>= (efrit-session-iterations session) efrit-do-async-max-iterations)
    (efrit-do-async--finish session "iteration-limit" nil nil))
   (t
    (cl-incf (efrit-session-iterations session))
    (efrit-api-request-async
     (efrit-todo-fake--request (efrit-session-id session) (efrit-session-messages session))
     (lambda (response)
       (condition-case err
           (efrit-loop-handle-response session nil response)
         (error (efrit-do-async--finish session "elisp-error"
                                        (error-message-string err) nil))))
     (lambda (message) (efrit-do-async--finish session "api-error" message nil))))))

(defun efrit-do-async--finish (session stop-reason error-message completion-message)
  "End SESSION's loop for STOP-REASON, with ERROR-MESSAGE or COMPLETION-MESSAGE."
  (efrit-do-async--stop-loop session (if (equal stop-reason "iteration-limit")
                                         "iteration-limit-exceeded"
                                       stop-reason)
                             error-message completion-message))

(defun efrit-agent-end-session (success-p stop-reason error-message completion-message)
  "Show the end of the session in *efrit-agent*, as Efrit's agent buffer does.
SUCCESS-P, STOP-REASON, ERROR-MESSAGE and COMPLETION-MESSAGE as Efrit."
  (with-current-buffer (get-buffer-create "*efrit-agent*")
    (goto-char (point-max))
    (insert (cond (completion-message (format "✓ %s\n" completion-message))
                  (success-p (format "Session complete (%s)\n" stop-reason))
                  (t (format "✗ Failed: %s\n" (or error-message stop-reason)))))))

(defun efrit-do-async--stop-loop (session stop-reason &optional error-message completion-message)
  "Stop SESSION for STOP-REASON; tell the agent buffer and the caller.
ERROR-MESSAGE and COMPLETION-MESSAGE go to the agent buffer."
  (efrit-session-complete session stop-reason)
  (efrit-agent-end-session (member stop-reason '("end_turn" "session-complete"))
                           stop-reason error-message completion-message)
  (when-let* ((on-complete (efrit-session-on-complete session)))
    (funcall on-complete session stop-reason)))

(defun efrit-do--capture-context (_command _result)
  "Keep the result for a later prompt (nothing to keep here).")

(defun efrit-do--display-result (command result &optional _error-p)
  "Append COMMAND and RESULT to *efrit-do*."
  (with-current-buffer (get-buffer-create "*efrit-do*")
    (goto-char (point-max))
    (insert (format "Command: %s\n%s\n" command result))))

(defun efrit-do-queue-pop-command ()
  "Return the next queued command: the stand-in queues none."
  nil)

(defun efrit-do--on-async-complete (session _stop-reason)
  "Show the work log of SESSION in *efrit-do*, each step cut to 80 characters."
  (let* ((steps (reverse (efrit-session-work-log session)))
         (result (format "Completed %d steps:\n%s" (length steps)
                         (mapconcat (lambda (step)
                                      (truncate-string-to-width
                                       (format "%s => %s" (nth 1 step)
                                               (string-trim (format "%s" (nth 0 step))))
                                       80))
                                    steps "\n"))))
    (setq efrit-do--last-result result)
    (efrit-do--display-result (efrit-session-command session) result)))

(defun efrit-do (command)
  "Start an async session for COMMAND; return it."
  (let ((session (efrit-session-create (format-time-string "efrit-do-%Y%m%d%H%M%S")
                                       command)))
    (setq efrit-todo-fake--active session
          efrit-todo-fake--breaker-calls nil)
    (setq efrit-do--current-todos nil)
    (setf (efrit-session-on-complete session) #'efrit-do--on-async-complete)
    (efrit-do-async--continue-iteration session)
    session))

;;;; The REPL: one session over many turns

(cl-defstruct (efrit-repl-session (:constructor efrit-repl-session--make))
  "A stand-in REPL session."
  id messages status on-turn-complete (iterations 0))

(defvar efrit-todo-fake--repl-count 0
  "Makes REPL session ids unique.")

(defun efrit-repl-session-create (&optional _project-root)
  "Make a REPL session."
  (efrit-repl-session--make :id (format "repl-%d" (cl-incf efrit-todo-fake--repl-count))
                            :status 'idle))

(defun efrit-repl-session-add-user-message (session content)
  "Append a user message with CONTENT to SESSION."
  (setf (efrit-repl-session-messages session)
        (append (efrit-repl-session-messages session)
                (list `((role . "user") (content . ,content))))))

(defun efrit-repl-session-add-assistant-message (session content)
  "Append an assistant message with CONTENT to SESSION."
  (setf (efrit-repl-session-messages session)
        (append (efrit-repl-session-messages session)
                (list `((role . "assistant") (content . ,content))))))

(defun efrit-repl-session-begin-turn (session)
  "Start a turn of SESSION."
  (setf (efrit-repl-session-status session) 'working
        (efrit-repl-session-iterations session) 0))

(defun efrit-repl-continue (session input &optional on-turn-complete)
  "Send INPUT in SESSION; call ON-TURN-COMPLETE when the turn ends."
  (efrit-repl-session-add-user-message session input)
  (efrit-repl-session-begin-turn session)
  (setf (efrit-repl-session-on-turn-complete session) on-turn-complete)
  (efrit-repl-loop--continue-iteration session)
  (efrit-repl-session-id session))

(defun efrit-repl-loop--continue-iteration (session)
  "Send REPL SESSION's next request, unless its turn used up its iterations."
  (if (>= (efrit-repl-session-iterations session) efrit-do-async-max-iterations)
      (efrit-repl-loop--finish session "iteration-limit" nil nil)
    (cl-incf (efrit-repl-session-iterations session))
    (efrit-api-request-async
     (efrit-todo-fake--request (efrit-repl-session-id session)
                               (efrit-repl-session-messages session))
     (lambda (response) (efrit-loop-handle-response session nil response))
     (lambda (message) (efrit-repl-loop--finish session "api-error" message nil)))))

(defun efrit-repl-loop--finish (session stop-reason _error-message _completion-message)
  "End SESSION's turn for STOP-REASON; the session stays."
  (efrit-repl-loop--end-turn session stop-reason))

(defun efrit-repl-loop--end-turn (session stop-reason)
  "End SESSION's turn for STOP-REASON, the way every turn ends."
  (setf (efrit-repl-session-status session) 'idle)
  (when-let* ((callback (efrit-repl-session-on-turn-complete session)))
    (funcall callback session stop-reason)))

;;;; The synchronous path and the remote queue

(defun efrit-executor--sync-api-call (request)
  "Send REQUEST and wait for the answer."
  (efrit-api-request-sync request 60))

(defun efrit-execute (command)
  "Run COMMAND to the end; return the text and string results it saw."
  (let ((session (efrit-session-create (format-time-string "sync-%Y%m%d%H%M%S") command))
        (seen "")
        (done nil))
    (setq efrit-todo-fake--active session
          efrit-todo-fake--breaker-calls nil)
    (while (and (not done) (< (efrit-session-iterations session) efrit-do-async-max-iterations))
      (cl-incf (efrit-session-iterations session))
      (let* ((response (efrit-executor--sync-api-call
                        `(("messages" . ,(vconcat (efrit-session-messages session)))
                          ("system" . ,(efrit-do--command-system-prompt))
                          ("tools" . ,(efrit-do--get-current-tools-schema)))))
             (content (gethash "content" response))
             (text ""))
        (efrit-session-add-assistant-response session content)
        (let (results)
          (seq-doseq (block content)
            (pcase (gethash "type" block)
              ("text" (setq text (concat text (gethash "text" block))))
              ("tool_use"
               (let ((result (efrit-todo-fake--run-tool-use block)))
                 (when (stringp result) (setq text (concat text result)))
                 (push `((type . "tool_result") (tool_use_id . ,(gethash "id" block))
                         (content . ,(format "%s" result)))
                       results)))))
          (efrit-session-add-tool-results session (nreverse results)))
        (unless (string-empty-p text)
          (setq seen (if (string-empty-p seen) text (concat seen "\n" text))))
        (when (equal (gethash "stop_reason" response) "end_turn")
          (setq done t))))
    (efrit-session-complete session "end_turn")
    seen))

(defun efrit-remote-queue--execute-command (content)
  "Run CONTENT from the remote queue; a nil or empty result is a success."
  (let ((result (efrit-execute content)))
    (if (and result (not (string-empty-p result)))
        result
      "Command executed successfully")))

(provide 'efrit-todo-fake-efrit)
;;; efrit-todo-fake-efrit.el ends here
