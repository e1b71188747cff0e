;;; efrit-todo-scenarios.el --- Agent-loop scenarios through efrit-do -*- lexical-binding: t; -*-

;;; Commentary:

;; The scenarios `efrit-todo-efrit-mode' must pass, driven through the
;; efrit-do loop with a scripted Claude.  The loop is either the
;; stand-in of efrit-todo-fake-efrit.el (`make test', in CI) or a real
;; Efrit checkout loaded by efrit-todo-real-efrit.el (`make test-efrit').
;; Load one of them first, then this file.
;;
;; The scripted Claude answers `efrit-api-request-async' (and the
;; synchronous `efrit-api-request-sync') from a list of responses
;; parsed from JSON, as Efrit parses them.  Every request is kept, and
;; checked against the Messages API's rules.

;;; Code:

(require 'ert)
(require 'cl-lib)
(require 'json)
(require 'seq)
(require 'subr-x)
(require 'efrit-todo)
(require 'efrit-todo-efrit)

(defvar efrit-do--tool-dispatch-table)
(defvar efrit-do--last-result)
(defvar efrit-do-async-max-iterations)
(declare-function efrit-do "efrit-do" (command))
(declare-function efrit-session-active "efrit-session-core" ())
(declare-function efrit-session-id "efrit-session-core" (session))
(declare-function efrit-remote-queue--execute-command "efrit-remote-queue" (content))
(declare-function efrit-todo-show "efrit-todo-ui" (&optional session))
(declare-function efrit-execute-async "efrit-executor" (command &optional callback))
(declare-function efrit-repl-session-create "efrit-repl-session" (&optional project-root))
(declare-function efrit-repl-session-id "efrit-repl-session" (session))
(declare-function efrit-repl-continue "efrit-repl-loop" (session input &optional on-turn-complete))

;;;; The scripted Claude

(defvar efrit-todo-scenarios--script nil
  "Responses still to give: JSON strings, or functions of the request.")

(defvar efrit-todo-scenarios--requests nil
  "Requests received, newest first, each (REQUEST . BREAKER-TRIPPED-P).")

(defvar efrit-todo-scenarios--dispatches nil
  "Tools run, newest first, each (NAME . BREAKER-TRIPPED-P).")

(defvar efrit-todo-scenarios--stopped nil
  "The stop reason once the running session stopped.")

(defvar efrit-todo-scenarios--tool-counter 0
  "Makes tool_use ids unique.")

(defun efrit-todo-scenarios--parse (json)
  "Parse JSON as Efrit does for an API response."
  (let ((json-object-type 'hash-table)
        (json-array-type 'vector)
        (json-key-type 'string))
    (json-read-from-string json)))

(defun efrit-todo-scenarios--tool (name input)
  "Return a response asking for tool NAME with INPUT, an alist."
  (json-encode
   `(("content" . [(("type" . "tool_use")
                    ("id" . ,(format "toolu_%d" (cl-incf efrit-todo-scenarios--tool-counter)))
                    ("name" . ,name)
                    ("input" . ,(or input (make-hash-table :test 'equal))))])
     ("stop_reason" . "tool_use"))))

(defun efrit-todo-scenarios--text (text)
  "Return a response that ends the turn saying TEXT."
  (json-encode `(("content" . [(("type" . "text") ("text" . ,text))])
                 ("stop_reason" . "end_turn"))))

(defun efrit-todo-scenarios--todos (&rest items)
  "Return a todo_write response for ITEMS, each (CONTENT STATUS)."
  (efrit-todo-scenarios--tool
   "todo_write"
   `(("todos" . ,(vconcat (mapcar (lambda (item)
                                    `(("content" . ,(car item)) ("status" . ,(cadr item))))
                                  items))))))

(defun efrit-todo-scenarios--tripped-p ()
  "Return non-nil if the breaker of the current efrit-todo session tripped."
  (and efrit-todo-efrit-mode efrit-todo-efrit--in-use
       (plist-get (efrit-todo-breaker (efrit-todo-efrit--running-session)) :tripped)))

(defun efrit-todo-scenarios--answer (request)
  "Record REQUEST and return the next scripted response."
  (push (cons request (efrit-todo-scenarios--tripped-p)) efrit-todo-scenarios--requests)
  (let ((next (if efrit-todo-scenarios--script
                  (pop efrit-todo-scenarios--script)
                (efrit-todo-scenarios--text "(the script has ended)"))))
    (efrit-todo-scenarios--parse (if (functionp next) (funcall next request) next))))

(defun efrit-todo-scenarios--async (request callback &optional error-callback)
  "Answer REQUEST through CALLBACK a moment later, as the network would.
A scripted `api-error' fails the request through ERROR-CALLBACK."
  (if (eq (car efrit-todo-scenarios--script) 'api-error)
      (progn (pop efrit-todo-scenarios--script)
             (push (cons request nil) efrit-todo-scenarios--requests)
             (run-at-time 0 nil error-callback "overloaded_error: Overloaded"))
    (let ((response (efrit-todo-scenarios--answer request)))
      (run-at-time 0 nil callback response))))

(defun efrit-todo-scenarios--sync (request &optional _timeout)
  "Answer REQUEST at once."
  (efrit-todo-scenarios--answer request))

(defun efrit-todo-scenarios--count-dispatch (name &rest _)
  "Count a run of tool NAME."
  (push (cons name (efrit-todo-scenarios--tripped-p)) efrit-todo-scenarios--dispatches))

(defun efrit-todo-scenarios--note-stop (_session stop-reason &rest _)
  "Note that the session stopped for STOP-REASON."
  (setq efrit-todo-scenarios--stopped stop-reason))

(defun efrit-todo-scenarios--nil-tool (_input)
  "Return nothing, as a tool may."
  nil)

(defun efrit-todo-scenarios--quit-tool (_input)
  "A tool the user interrupts with \\[keyboard-quit]."
  (signal 'quit nil))

;;;; Running a scenario

(defun efrit-todo-scenarios--buffer-text (name)
  "Return the text of buffer NAME, or \"\"."
  (if (get-buffer name)
      (with-current-buffer name (buffer-substring-no-properties (point-min) (point-max)))
    ""))

(defmacro efrit-todo-scenarios--instrumented (script &rest body)
  "Run BODY with Claude answering from SCRIPT and the loop watched."
  (declare (indent 1) (debug t))
  `(let ((efrit-todo-scenarios--script ,script)
         (efrit-todo-scenarios--requests nil)
         (efrit-todo-scenarios--dispatches nil)
         (efrit-todo-scenarios--stopped nil)
         (efrit-do--tool-dispatch-table
          (append '(("nil_tool" . (efrit-todo-scenarios--nil-tool . :tool-input))
                    ("quit_tool" . (efrit-todo-scenarios--quit-tool . :tool-input)))
                  efrit-do--tool-dispatch-table)))
     (advice-add 'efrit-api-request-async :override #'efrit-todo-scenarios--async)
     (advice-add 'efrit-api-request-sync :override #'efrit-todo-scenarios--sync)
     (advice-add 'efrit-do--dispatch-tool :before #'efrit-todo-scenarios--count-dispatch
                 '((depth . -100)))
     (advice-add 'efrit-do-async--stop-loop :after #'efrit-todo-scenarios--note-stop)
     (unwind-protect (progn ,@body)
       (advice-remove 'efrit-api-request-async #'efrit-todo-scenarios--async)
       (advice-remove 'efrit-api-request-sync #'efrit-todo-scenarios--sync)
       (advice-remove 'efrit-do--dispatch-tool #'efrit-todo-scenarios--count-dispatch)
       (advice-remove 'efrit-do-async--stop-loop #'efrit-todo-scenarios--note-stop))))

(defun efrit-todo-scenarios--outcome (session start)
  "Return the plist describing the run of SESSION begun at START."
  (let ((requests (reverse efrit-todo-scenarios--requests))
        (dispatches (reverse efrit-todo-scenarios--dispatches)))
    (list :session session
          :stop efrit-todo-scenarios--stopped
          :seconds (- (float-time) start)
          :requests (mapcar #'car requests)
          :requests-after-trip (seq-count #'cdr requests)
          :runs (mapcar #'car dispatches)
          :runs-after-trip (seq-count #'cdr dispatches)
          :agent (efrit-todo-scenarios--buffer-text "*efrit-agent*")
          :do (efrit-todo-scenarios--buffer-text "*efrit-do*")
          :last-result (and (boundp 'efrit-do--last-result) efrit-do--last-result))))

(defvar efrit-todo-scenarios--keep-unfinished nil
  "Non-nil to let a run go on with a list an earlier run left open.")

(defun efrit-todo-scenarios--fresh-buffers ()
  "Kill the buffers in which a previous run showed its results.
Unless `efrit-todo-scenarios--keep-unfinished', also let go of every
list an earlier run left open, so that each run starts afresh."
  (dolist (name '("*efrit-agent*" "*efrit-do*" "*efrit-todos*"))
    (when (get-buffer name)
      (kill-buffer name)))
  ;; Without the module (being built) there are no lists.
  (unless (or efrit-todo-scenarios--keep-unfinished (not (efrit-todo-build-module-loaded-p)))
    (while (efrit-todo-unfinished)
      (efrit-todo-drop-unfinished (car (efrit-todo-unfinished))))))

(defmacro efrit-todo-scenarios--with-mode (on &rest body)
  "Run BODY with `efrit-todo-efrit-mode' on if ON is non-nil, else off.
The mode is put back as it was afterwards."
  (declare (indent 1) (debug t))
  (let ((was-on (make-symbol "was-on")))
    `(let ((,was-on efrit-todo-efrit-mode))
       (efrit-todo-efrit-mode (if ,on 1 -1))
       (unwind-protect (progn ,@body)
         (efrit-todo-efrit-mode (if ,was-on 1 -1))))))

(defun efrit-todo-scenarios--wait (done-p start &optional timeout)
  "Let timers run until DONE-P is non-nil or TIMEOUT seconds (10) after START."
  (while (and (not (funcall done-p))
              (< (- (float-time) start) (or timeout 10)))
    (accept-process-output nil 0.02)))

(defun efrit-todo-scenarios--stopped-p ()
  "Return non-nil once the running session or turn stopped."
  efrit-todo-scenarios--stopped)

(defun efrit-todo-scenarios-run (command script &optional mode timeout)
  "Run COMMAND through `efrit-do' with Claude answering from SCRIPT.
MODE is the state of `efrit-todo-efrit-mode' for the run (on unless
`off').  Wait at most TIMEOUT seconds (10) for the session to stop.
Return a plist: :session :stop :seconds :requests :requests-after-trip
:runs :runs-after-trip :agent :do :last-result."
  (when (efrit-session-active)
    (error "A session is still running: %s" (efrit-session-id (efrit-session-active))))
  (efrit-todo-scenarios--fresh-buffers)
  (let ((start (float-time)))
    (efrit-todo-scenarios--with-mode (not (eq mode 'off))
      (efrit-todo-scenarios--instrumented script
        (let ((session (efrit-session-id (efrit-do command))))
          (efrit-todo-scenarios--wait #'efrit-todo-scenarios--stopped-p start timeout)
          (efrit-todo-scenarios--outcome session start))))))

(defun efrit-todo-scenarios-run-remote (command script)
  "Run COMMAND as Efrit's remote queue does, Claude answering from SCRIPT.
Return the text the remote queue would send back."
  (efrit-todo-scenarios--with-mode t
    (efrit-todo-scenarios--instrumented script
      (efrit-remote-queue--execute-command command))))

(defun efrit-todo-scenarios-run-repl (turns)
  "Run a REPL conversation, with the mode on.
TURNS are its turns, each (INPUT SCRIPT), run in one REPL session.
Return the outcome of each turn, as `efrit-todo-scenarios-run' does."
  (efrit-todo-scenarios--fresh-buffers)
  (let ((session (efrit-repl-session-create)))
    (efrit-todo-scenarios--with-mode t
      (mapcar
       (lambda (turn)
         (efrit-todo-scenarios--instrumented (cadr turn)
           (let ((start (float-time)))
             (efrit-repl-continue session (car turn)
                                  (lambda (_session reason)
                                    (setq efrit-todo-scenarios--stopped reason)))
             (efrit-todo-scenarios--wait #'efrit-todo-scenarios--stopped-p start)
             (efrit-todo-scenarios--outcome (efrit-repl-session-id session) start))))
       turns))))

;;;; What the requests say

(defun efrit-todo-scenarios--keep (function sequence)
  "Return the non-nil values of FUNCTION over SEQUENCE (Emacs 28 lacks `seq-keep')."
  (delq nil (mapcar function sequence)))

(defun efrit-todo-scenarios--get (object key)
  "Return KEY, a string, of OBJECT: a hash table or an alist.
The alist's keys may be strings or symbols."
  (cond ((hash-table-p object) (gethash key object))
        ((listp object) (cdr (or (assoc key object) (assq (intern key) object))))))

(defun efrit-todo-scenarios--blocks (message)
  "Return the content blocks of MESSAGE as a list (a string is one text block)."
  (let ((content (efrit-todo-scenarios--get message "content")))
    (if (stringp content)
        (list `(("type" . "text") ("text" . ,content)))
      (append content nil))))

(defun efrit-todo-scenarios--block-text (block)
  "Return the text of BLOCK: its text, or its tool_result content."
  (let ((content (or (efrit-todo-scenarios--get block "text")
                     (efrit-todo-scenarios--get block "content"))))
    (if (stringp content)
        content
      (mapconcat (lambda (b) (or (efrit-todo-scenarios--get b "text") "")) content ""))))

(defun efrit-todo-scenarios--last-message (request)
  "Return the last message of REQUEST."
  (let ((messages (efrit-todo-scenarios--get request "messages")))
    (and (> (length messages) 0) (aref messages (1- (length messages))))))

(defun efrit-todo-scenarios-tool-results (outcome)
  "Return the tool_result texts of OUTCOME in the order Claude got them.
Each is (TEXT . IS-ERROR)."
  (seq-mapcat (lambda (request)
                (efrit-todo-scenarios--keep (lambda (block)
                            (and (equal (efrit-todo-scenarios--get block "type") "tool_result")
                                 (cons (efrit-todo-scenarios--block-text block)
                                       (eq (efrit-todo-scenarios--get block "is_error") t))))
                          (efrit-todo-scenarios--blocks
                           (efrit-todo-scenarios--last-message request))))
              (plist-get outcome :requests)))

(defun efrit-todo-scenarios-continuations (outcome)
  "Return the texts of the continuation messages sent in OUTCOME.
A continuation is a user message after an assistant's end_turn: one
that holds text and no tool_result."
  (efrit-todo-scenarios--keep (lambda (request)
              (let* ((message (efrit-todo-scenarios--last-message request))
                     (blocks (efrit-todo-scenarios--blocks message)))
                (and (> (length (efrit-todo-scenarios--get request "messages")) 1)
                     (equal (efrit-todo-scenarios--get message "role") "user")
                     (seq-every-p (lambda (b) (equal (efrit-todo-scenarios--get b "type") "text"))
                                  blocks)
                     (mapconcat #'efrit-todo-scenarios--block-text blocks ""))))
            (plist-get outcome :requests)))

(defun efrit-todo-scenarios--merge-user-messages (messages)
  "Return MESSAGES as (ROLE . BLOCKS), consecutive user messages joined."
  (let ((merged nil))
    (dolist (message messages)
      (let ((role (efrit-todo-scenarios--get message "role"))
            (blocks (efrit-todo-scenarios--blocks message)))
        (if (and merged (equal role "user") (equal (car (car merged)) "user"))
            (setcdr (car merged) (append (cdr (car merged)) blocks))
          (push (cons role blocks) merged))))
    (nreverse merged)))

(defun efrit-todo-scenarios-request-problems (request)
  "Return why REQUEST is invalid for the Messages API, or nil.
Roles alternate from user, content is never empty, and every tool_use
is answered by a tool_result in the next message.  Consecutive user
messages count as one, as the API combines them: Efrit's REPL sends
its next input after the tool results of a finished turn."
  (let ((messages (efrit-todo-scenarios--merge-user-messages
                   (append (efrit-todo-scenarios--get request "messages") nil)))
        (expected "user")
        (problems nil)
        (pending nil))
    (unless messages (push "no messages" problems))
    (dolist (message messages)
      (let ((role (car message))
            (blocks (cdr message)))
        (unless (equal role expected)
          (push (format "%s message where %s was due" role expected) problems))
        (when (or (null blocks)
                  (seq-some (lambda (b)
                              (and (equal (efrit-todo-scenarios--get b "type") "text")
                                   (string-empty-p (efrit-todo-scenarios--block-text b))))
                            blocks))
          (push (format "empty content in a %s message" role) problems))
        (let ((answered (efrit-todo-scenarios--keep (lambda (b) (efrit-todo-scenarios--get b "tool_use_id")) blocks)))
          (dolist (id pending)
            (unless (member id answered)
              (push (format "tool_use %s not answered" id) problems))))
        (setq pending (efrit-todo-scenarios--keep (lambda (b)
                                  (and (equal (efrit-todo-scenarios--get b "type") "tool_use")
                                       (efrit-todo-scenarios--get b "id")))
                                blocks))
        (setq expected (if (equal role "user") "assistant" "user"))))
    (unless (equal expected "assistant")
      (push "the last message is not the user's" problems))
    (nreverse problems)))

(defun efrit-todo-scenarios-ids (result)
  "Return (CONTENT . ID) for each item line of a todo_write RESULT."
  (let ((pairs nil)
        (start 0))
    (while (string-match "^  \\(t[0-9]+\\) \\[[a-z_]+\\] \\(.*\\)$" result start)
      (push (cons (match-string 2 result) (match-string 1 result)) pairs)
      (setq start (match-end 0)))
    (nreverse pairs)))

;;;; The scripts

(defun efrit-todo-scenarios-script (name)
  "Return the command and the scripted answers of scenario NAME."
  (pcase name
    ('results-survive
     (list "Compute six times seven"
           (list (efrit-todo-scenarios--tool "eval_sexp" '(("expr" . "(* 6 7)")))
                 (efrit-todo-scenarios--tool "session_complete" '(("message" . "done"))))))
    ('nil-result
     (list "Run the quiet tool"
           (list (efrit-todo-scenarios--tool "nil_tool" nil)
                 (efrit-todo-scenarios--tool "session_complete" '(("message" . "finished"))))))
    ('identical-forever
     (let ((call (efrit-todo-scenarios--tool "eval_sexp" '(("expr" . "(+ 1 1)")))))
       (list "Add one and one" (make-list 150 call))))
    ('ids-survive
     (list "Tidy the project"
           (list (efrit-todo-scenarios--todos '("Read the code" "in_progress")
                                              '("Fix the bug" "pending")
                                              '("Write a test" "pending"))
                 (efrit-todo-scenarios--todos '("Write a test" "pending")
                                              '("Read the code" "completed")
                                              '("Fix the bug" "in_progress"))
                 (efrit-todo-scenarios--todos '("Write a test" "completed")
                                              '("Read the code" "completed")
                                              '("Fix the bug" "completed"))
                 (efrit-todo-scenarios--tool "session_complete" '(("message" . "tidy"))))))
    ('continuation
     (list "Do two things"
           (cons (efrit-todo-scenarios--todos '("First thing" "in_progress")
                                              '("Second thing" "pending"))
                 (make-list 10 (efrit-todo-scenarios--text "I think that is all.")))))
    ('paused
     (list "Deploy the site"
           (list (efrit-todo-scenarios--todos '("Build the site" "completed")
                                              '("Upload it" "in_progress"))
                 (efrit-todo-scenarios--tool "todo_pause"
                                             '(("reason" . "The upload needs a password only the user has.")))
                 (efrit-todo-scenarios--text "I need your password to go on."))))
    ('planned
     (list "Rename parse-config to config-parse in every file, then update the callers, then run the tests and fix any failures"
           (list (efrit-todo-scenarios--text "Let me plan first."))))
    ('guarded-completion
     (list "Finish the report"
           (list (efrit-todo-scenarios--todos '("Write the report" "in_progress"))
                 (efrit-todo-scenarios--tool "session_complete" '(("message" . "done")))
                 (efrit-todo-scenarios--tool "session_complete" '(("message" . "done anyway"))))))))

;;;; Long plans, written in full or merged by id

(defun efrit-todo-scenarios--step (k)
  "Return the content of step K of a long plan."
  (format "Update the docstring of function-%d in file-%d.el" k k))

(defun efrit-todo-scenarios--plan (n)
  "Return a todo_write response planning N items, the first in progress."
  (efrit-todo-scenarios--tool
   "todo_write"
   `(("todos" . ,(vconcat (mapcar (lambda (k)
                                    `(("content" . ,(efrit-todo-scenarios--step k))
                                      ("status" . ,(if (= k 1) "in_progress" "pending"))))
                                  (number-sequence 1 n)))))))

(defun efrit-todo-scenarios--merge (&rest changes)
  "Return a merged todo_write response.
CHANGES are what it carries, each (ID STATUS)."
  (efrit-todo-scenarios--tool
   "todo_write"
   `(("merge" . t)
     ("todos" . ,(vconcat (mapcar (lambda (change)
                                    `(("id" . ,(car change)) ("status" . ,(cadr change))))
                                  changes))))))

(defun efrit-todo-scenarios--advance (k)
  "Return the merged write to complete step K and start the next."
  (efrit-todo-scenarios--merge (list (format "t%d" k) "completed")
                               (list (format "t%d" (1+ k)) "in_progress")))

(defun efrit-todo-scenarios--long-plan-script (n)
  "Return a script over a plan of N items that meets every text for the model.
Two steps are done by merged writes, the model then stops with items
open (a continuation), calls session_complete (refused, items open)
and calls it again (allowed)."
  (list (efrit-todo-scenarios--plan n)
        (efrit-todo-scenarios--tool "eval_sexp" '(("expr" . "(+ 1 1)")))
        (efrit-todo-scenarios--advance 1)
        (efrit-todo-scenarios--tool "eval_sexp" '(("expr" . "(+ 2 1)")))
        (efrit-todo-scenarios--advance 2)
        (efrit-todo-scenarios--text "I will stop here.")
        (efrit-todo-scenarios--tool "session_complete" '(("message" . "partly done")))
        (efrit-todo-scenarios--tool "session_complete" '(("message" . "partly done, really")))))

(defun efrit-todo-scenarios--named-ids (text)
  "Return the item ids TEXT names, each once."
  (let ((ids nil) (start 0))
    (while (string-match "\\_<t[0-9]+\\_>" text start)
      (cl-pushnew (match-string 0 text) ids :test #'equal)
      (setq start (match-end 0)))
    ids))

;;;; Stopping and going on

(defun efrit-todo-scenarios--interrupt-then (response)
  "Return a script step that asks for an interrupt and answers RESPONSE.
The interrupt takes effect before the next request, as Efrit's does."
  (lambda (_request)
    (when (fboundp 'efrit-session-request-interrupt)
      (efrit-session-request-interrupt (efrit-session-active)))
    response))

(defun efrit-todo-scenarios--stopping-script (how)
  "Return the first command's script: three items, t1 done, t2 started, then HOW.
HOW names the way the command stops."
  (let ((start (list (efrit-todo-scenarios--plan 3)
                     (efrit-todo-scenarios--tool "eval_sexp" '(("expr" . "(+ 1 1)")))
                     (efrit-todo-scenarios--advance 1))))
    (append
     start
     (pcase how
       ('interrupt
        (list (efrit-todo-scenarios--interrupt-then
               (efrit-todo-scenarios--tool "eval_sexp" '(("expr" . "(+ 2 2)"))))))
       ('quit (list (efrit-todo-scenarios--tool "quit_tool" nil)))
       ('breaker (make-list 8 (efrit-todo-scenarios--tool "eval_sexp" '(("expr" . "(+ 3 3)")))))
       ('api-error (list 'api-error))
       ('pause (list (efrit-todo-scenarios--tool "todo_pause" '(("reason" . "I need the user's password.")))
                     (efrit-todo-scenarios--text "I need your password.")))
       ('end-turn (make-list 4 (efrit-todo-scenarios--text "I will stop here.")))
       ('iteration-limit (make-list 3 (efrit-todo-scenarios--tool "eval_sexp" '(("expr" . "(+ 4 4)")))))))))

(defconst efrit-todo-scenarios--going-on
  (list (efrit-todo-scenarios--advance 2)
        (efrit-todo-scenarios--merge '("t3" "completed"))
        (efrit-todo-scenarios--tool "session_complete" '(("message" . "finished the rest"))))
  "The second command's script: it goes on by id and finishes.")

(defun efrit-todo-scenarios-stop-and-go-on (how)
  "Stop a first command in way HOW, then run a second; return both outcomes."
  (let* ((efrit-todo-scenarios--keep-unfinished nil)
         (first (let ((efrit-do-async-max-iterations (if (eq how 'iteration-limit) 4
                                                       efrit-do-async-max-iterations)))
                  (efrit-todo-scenarios-run "Do three steps"
                                            (efrit-todo-scenarios--stopping-script how))))
         (efrit-todo-scenarios--keep-unfinished t)
         (second (efrit-todo-scenarios-run "Please continue from where we left off."
                                           efrit-todo-scenarios--going-on)))
    (list first second)))

(defconst efrit-todo-scenarios-names
  '(results-survive nil-result identical-forever ids-survive continuation guarded-completion
                    paused)
  "Every scenario, in the order the comparison prints them.")

(defun efrit-todo-scenarios-play (name &optional mode)
  "Run scenario NAME with `efrit-todo-efrit-mode' per MODE; return the outcome."
  (pcase-let ((`(,command ,script) (efrit-todo-scenarios-script name)))
    (efrit-todo-scenarios-run command script mode)))

(defun efrit-todo-scenarios-compare ()
  "Print the requests, tools run and stop of each scenario, the mode off and on."
  (princ (format "%-20s %8s %8s %8s %8s %7s %7s  %s\n" "scenario" "req off" "req on"
                 "runs off" "runs on" "s off" "s on" "stop off -> on"))
  (dolist (name efrit-todo-scenarios-names)
    (let ((off (efrit-todo-scenarios-play name 'off))
          (on (efrit-todo-scenarios-play name)))
      (princ (format "%-20s %8d %8d %8d %8d %7.2f %7.2f  %s -> %s\n" name
                     (length (plist-get off :requests)) (length (plist-get on :requests))
                     (length (plist-get off :runs)) (length (plist-get on :runs))
                     (plist-get off :seconds) (plist-get on :seconds)
                     (plist-get off :stop) (plist-get on :stop))))))

;;;; The scenarios

(ert-deftest efrit-todo-scenarios-validator-catches-bad-requests ()
  "The request check finds an unanswered tool_use, empty text and wrong roles."
  (let ((tool-use '((type . "tool_use") (id . "toolu_1") (name . "eval_sexp"))))
    (should (null (efrit-todo-scenarios-request-problems
                   `((messages . [((role . "user") (content . "hi"))
                                  ((role . "assistant") (content . [,tool-use]))
                                  ((role . "user")
                                   (content . [((type . "tool_result") (tool_use_id . "toolu_1")
                                                (content . "2"))]))])))))
    (should (equal (efrit-todo-scenarios-request-problems
                    `((messages . [((role . "user") (content . "hi"))
                                   ((role . "assistant") (content . [,tool-use]))
                                   ((role . "user") (content . "go on"))])))
                   '("tool_use toolu_1 not answered")))
    (should (equal (efrit-todo-scenarios-request-problems
                    '((messages . [((role . "user") (content . "hi"))
                                   ((role . "assistant") (content . [((type . "text") (text . ""))]))
                                   ((role . "assistant") (content . "more"))])))
                   '("empty content in a assistant message"
                     "assistant message where user was due"
                     "the last message is not the user's")))))

(defun efrit-todo-scenarios--should-be-valid (outcome)
  "Fail unless every request of OUTCOME is a valid Messages API request."
  (dolist (request (plist-get outcome :requests))
    (should (equal (efrit-todo-scenarios-request-problems request) nil))))

(defun efrit-todo-scenarios--user-sees (outcome regexp)
  "Fail unless all the user sees of OUTCOME matches REGEXP.
That is the agent buffer, *efrit-do* and the last result."
  (should (string-match-p regexp (plist-get outcome :agent)))
  (should (string-match-p regexp (plist-get outcome :do)))
  (should (string-match-p regexp (plist-get outcome :last-result))))

(ert-deftest efrit-todo-scenarios-results-survive ()
  "An eval_sexp gives 42, session_complete says done: the user sees both."
  (let ((outcome (efrit-todo-scenarios-play 'results-survive)))
    (should (equal (plist-get outcome :stop) "session-complete"))
    (should (equal (plist-get outcome :runs) '("eval_sexp" "session_complete")))
    (should (= (length (plist-get outcome :requests)) 2))
    (efrit-todo-scenarios--user-sees outcome "\\_<42\\_>")
    (efrit-todo-scenarios--user-sees outcome "\\_<done\\_>")
    (efrit-todo-scenarios--should-be-valid outcome)))

(ert-deftest efrit-todo-scenarios-nil-result-is-named ()
  "A tool that returns nil is reported as such, in the loop and the remote queue."
  (let ((outcome (efrit-todo-scenarios-play 'nil-result)))
    (should (equal (plist-get outcome :stop) "session-complete"))
    (should (string-match-p "nil_tool returned no output"
                            (car (car (efrit-todo-scenarios-tool-results outcome)))))
    (efrit-todo-scenarios--user-sees outcome "nil_tool returned no output")
    (efrit-todo-scenarios--user-sees outcome "finished")
    (should-not (string-match-p "Command executed successfully"
                                (concat (plist-get outcome :agent) (plist-get outcome :do))))
    (efrit-todo-scenarios--should-be-valid outcome))
  (pcase-let ((`(,command ,script) (efrit-todo-scenarios-script 'nil-result)))
    (let ((text (efrit-todo-scenarios-run-remote command script)))
      (should (string-match-p "nil_tool returned no output" text))
      (should (string-match-p "finished" text))
      (should-not (string-match-p "Command executed successfully" text)))))

(ert-deftest efrit-todo-scenarios-breaker-ends-the-session ()
  "Claude repeats one call forever: after the trip nothing runs, the loop ends."
  (let* ((outcome (efrit-todo-scenarios-play 'identical-forever))
         (reason (plist-get (efrit-todo-breaker (plist-get outcome :session)) :reason)))
    (should (equal (plist-get outcome :stop) "circuit-breaker"))
    (should (stringp reason))
    (should (= (plist-get outcome :runs-after-trip) 0))
    (should (<= (plist-get outcome :requests-after-trip) 1))
    (should (< (length (plist-get outcome :requests)) 6))
    (efrit-todo-scenarios--user-sees outcome "circuit breaker")
    (efrit-todo-scenarios--user-sees outcome (regexp-quote reason))
    (efrit-todo-scenarios--should-be-valid outcome)))

(ert-deftest efrit-todo-scenarios-breaker-refuses-only-the-call-past-a-limit ()
  "After three identical calls a fourth is refused; a different call still runs."
  (let* ((same (efrit-todo-scenarios--tool "eval_sexp" '(("expr" . "(+ 1 1)"))))
         (outcome (efrit-todo-scenarios-run
                   "Add one and one"
                   (list same same same
                         (efrit-todo-scenarios--tool "eval_sexp" '(("expr" . "(+ 2 2)")))
                         same
                         (efrit-todo-scenarios--tool "eval_sexp" '(("expr" . "(+ 3 3)")))
                         (efrit-todo-scenarios--tool "session_complete" '(("message" . "done"))))))
         (results (efrit-todo-scenarios-tool-results outcome)))
    (should (equal (plist-get outcome :stop) "session-complete"))
    (should (equal (plist-get outcome :runs)
                   '("eval_sexp" "eval_sexp" "eval_sexp" "eval_sexp" "eval_sexp" "eval_sexp"
                     "session_complete")))
    (should-not (cdr (nth 3 results)))
    (should-not (plist-get (efrit-todo-breaker (plist-get outcome :session)) :tripped))
    (efrit-todo-scenarios--should-be-valid outcome))
  ;; Four identical in a row: the fourth is refused as an error, and asking
  ;; again ends the session.
  (let* ((same (efrit-todo-scenarios--tool "eval_sexp" '(("expr" . "(+ 1 1)"))))
         (outcome (efrit-todo-scenarios-run "Add one and one" (make-list 6 same)))
         (results (efrit-todo-scenarios-tool-results outcome)))
    (should (equal (plist-get outcome :stop) "circuit-breaker"))
    (should (equal (plist-get outcome :runs) '("eval_sexp" "eval_sexp" "eval_sexp")))
    (should (cdr (nth 3 results)))
    (should (string-match-p "was not run: it would be the same call to eval_sexp 4 times" (car (nth 3 results))))
    (efrit-todo-scenarios--should-be-valid outcome)))

(ert-deftest efrit-todo-scenarios-ids-survive-reordering ()
  "A list resent reordered and without ids keeps its ids; *efrit-todos* shows it."
  (let* ((outcome (efrit-todo-scenarios-play 'ids-survive))
         (results (mapcar #'car (efrit-todo-scenarios-tool-results outcome)))
         (first (efrit-todo-scenarios-ids (nth 0 results)))
         (second (efrit-todo-scenarios-ids (nth 1 results))))
    (should (equal (plist-get outcome :stop) "session-complete"))
    (should (= (length first) 3))
    (should (equal (sort (copy-sequence first) (lambda (a b) (string< (car a) (car b))))
                   (sort (copy-sequence second) (lambda (a b) (string< (car a) (car b))))))
    (should (equal (mapcar #'car second) '("Write a test" "Read the code" "Fix the bug")))
    (should (equal (seq-uniq (mapcar #'cdr first)) (mapcar #'cdr first)))
    ;; Batch Emacs pops nothing up by itself, so show the buffer here.
    (let ((shown (save-window-excursion
                   (with-current-buffer (efrit-todo-show (plist-get outcome :session))
                     (buffer-substring-no-properties (point-min) (point-max))))))
      (dolist (item (efrit-todo-list (plist-get outcome :session)))
        (should (string-match-p (format "%s +%s" (plist-get item :id)
                                        (regexp-quote (plist-get item :content)))
                                shown))))
    (efrit-todo-scenarios--should-be-valid outcome)))

(ert-deftest efrit-todo-scenarios-continuation ()
  "Items left open at an end_turn bring a continuation, twice at most."
  (let* ((outcome (efrit-todo-scenarios-play 'continuation))
         (continuations (efrit-todo-scenarios-continuations outcome)))
    (should (equal (plist-get outcome :stop) "end_turn"))
    (should (= (length continuations) 2))
    (should (string-match-p "First thing" (car continuations)))
    (should (= (length (plist-get outcome :requests)) 4))
    (efrit-todo-scenarios--should-be-valid outcome)))

(ert-deftest efrit-todo-scenarios-guarded-completion ()
  "A session_complete with an item open is refused once, then allowed."
  (let* ((outcome (efrit-todo-scenarios-play 'guarded-completion))
         (results (efrit-todo-scenarios-tool-results outcome)))
    (should (equal (plist-get outcome :stop) "session-complete"))
    (should (= (length (plist-get outcome :requests)) 3))
    (should (cdr (nth 1 results)))
    (should (string-match-p "Write the report" (car (nth 1 results))))
    (efrit-todo-scenarios--user-sees outcome "done anyway")
    (efrit-todo-scenarios--should-be-valid outcome)))

(defun efrit-todo-scenarios--system-text (request)
  "Return the system prompt of REQUEST as one string."
  (let ((system (efrit-todo-scenarios--get request "system")))
    (if (stringp system)
        system
      (mapconcat #'efrit-todo-scenarios--block-text system ""))))

(defun efrit-todo-scenarios--tool-names (request)
  "Return the names of the tools offered in REQUEST."
  (mapcar (lambda (tool) (efrit-todo-scenarios--get tool "name"))
          (efrit-todo-scenarios--get request "tools")))

(ert-deftest efrit-todo-scenarios-sessions-stay-apart ()
  "Each command has its own session, whose ledger stays queryable when it ends."
  (let* ((first (efrit-todo-scenarios-play 'results-survive))
         (second (efrit-todo-scenarios-play 'results-survive))
         (tools (lambda (outcome)
                  (mapcar (lambda (entry) (plist-get entry :tool))
                          (efrit-todo-ledger (plist-get outcome :session))))))
    (should-not (equal (plist-get first :session) (plist-get second :session)))
    (should (equal (funcall tools first) '("eval_sexp")))
    (should (equal (funcall tools second) '("eval_sexp")))
    (should-not (plist-get (efrit-todo-breaker (plist-get second :session)) :tripped))))

(ert-deftest efrit-todo-scenarios-requests-carry-todo-tools-and-guidance ()
  "Claude is offered todo_write and todo_pause, and sees the list with its ids."
  (let* ((outcome (efrit-todo-scenarios-play 'ids-survive))
         (requests (plist-get outcome :requests)))
    (should (member "todo_pause" (efrit-todo-scenarios--tool-names (car requests))))
    (should (member "todo_write" (efrit-todo-scenarios--tool-names (car requests))))
    (should (equal (efrit-todo-scenarios--get (car (efrit-todo-tool-schemas)) "description")
                   (seq-some (lambda (tool)
                               (and (equal (efrit-todo-scenarios--get tool "name") "todo_write")
                                    (efrit-todo-scenarios--get tool "description")))
                             (efrit-todo-scenarios--get (car requests) "tools"))))
    (should (string-match-p "^  t1 \\[in_progress\\] Read the code$"
                            (car (car (efrit-todo-scenarios-tool-results outcome)))))
    (should (string-match-p "\"merge\": true"
                            (efrit-todo-scenarios--system-text (car requests))))))

(ert-deftest efrit-todo-scenarios-system-prompt-is-the-same-on-every-request ()
  "What efrit-todo adds to the system prompt does not change within a session.
The list changes on every write and is in the tool results; a prompt
that changed would void the prompt cache of the whole conversation."
  (dolist (name '(ids-survive planned guarded-completion))
    (let* ((outcome (efrit-todo-scenarios-play name))
           (systems (mapcar #'efrit-todo-scenarios--system-text (plist-get outcome :requests))))
      (should (> (length systems) 0))
      (should (string-match-p "todo_write" (car systems)))
      (should (equal (seq-uniq systems) (list (car systems))))))
  (let* ((outcome (efrit-todo-scenarios-run "Do twelve steps"
                                            (efrit-todo-scenarios--long-plan-script 12)))
         (systems (mapcar #'efrit-todo-scenarios--system-text (plist-get outcome :requests))))
    (should (= (length systems) 8))
    (should (= (length (seq-uniq systems)) 1))))

(ert-deftest efrit-todo-scenarios-texts-stay-small-on-long-lists ()
  "A status change, a continuation and a refusal stay short at any list size."
  (dolist (n '(12 100 1000))
    (let* ((outcome (efrit-todo-scenarios-run (format "Do %d steps" n)
                                              (efrit-todo-scenarios--long-plan-script n)))
           (results (mapcar #'car (efrit-todo-scenarios-tool-results outcome)))
           (change (nth 2 results))
           (continuation (car (efrit-todo-scenarios-continuations outcome)))
           (refusal (nth 5 results))
           (session (plist-get outcome :session)))
      (ert-info ((format "%d items" n))
        (should (equal (plist-get outcome :stop) "session-complete"))
        ;; The status change names the two changed items and nothing else.
        (should (string-prefix-p "[TODO list updated: 1/" change))
        (should (< (string-bytes change) 300))
        (should (string-match-p "^t1 completed: Update the docstring of function-1 " change))
        (should (string-match-p "^t2 in_progress: " change))
        (should (equal (sort (efrit-todo-scenarios--named-ids change) #'string<) '("t1" "t2")))
        (should (< (string-bytes (nth 4 results)) 300))
        ;; The continuation and the refusal name at most ten open items.
        (should (string-match-p "t3" continuation))
        (should (<= (length (efrit-todo-scenarios--named-ids continuation)) 11))
        (should (< (string-bytes continuation) 1500))
        (should (string-match-p "session_complete refused" refusal))
        (should (<= (length (efrit-todo-scenarios--named-ids refusal)) 10))
        (should (< (string-bytes refusal) 1800))
        (when (> n 12)
          (should (string-match-p (format "and %d more" (- n 12)) refusal)))
        (should (equal (mapcar (lambda (i) (plist-get i :status)) (seq-take (efrit-todo-list session) 4))
                       '(completed completed in-progress pending)))
        (should (= (length (efrit-todo-list session)) n))))))

(ert-deftest efrit-todo-scenarios-merged-writes-finish-a-plan ()
  "A plan finished by merged writes keeps its ids; a bad merge is an error result."
  (let* ((script (append (list (efrit-todo-scenarios--plan 3)
                               (efrit-todo-scenarios--merge '("t9" "completed"))
                               (efrit-todo-scenarios--tool
                                "todo_write" '(("merge" . "yes") ("todos" . [])))
                               (efrit-todo-scenarios--advance 1)
                               (efrit-todo-scenarios--advance 2)
                               (efrit-todo-scenarios--merge '("t3" "completed")))
                         (list (efrit-todo-scenarios--tool "session_complete"
                                                           '(("message" . "all three"))))))
         (outcome (efrit-todo-scenarios-run "Do three steps" script))
         (results (efrit-todo-scenarios-tool-results outcome))
         (session (plist-get outcome :session)))
    (should (equal (plist-get outcome :stop) "session-complete"))
    (should (cdr (nth 1 results)))
    (should (string-match-p "todos\\[0\\]\\.id: unknown id \"t9\"" (car (nth 1 results))))
    (should (cdr (nth 2 results)))
    (should (string-match-p "merge: expected true or false" (car (nth 2 results))))
    (should (equal (mapcar (lambda (i) (list (plist-get i :id) (plist-get i :status)))
                           (efrit-todo-list session))
                   '(("t1" completed) ("t2" completed) ("t3" completed))))
    (should (string-match-p "\\`\\[TODO list updated: 3/3 done\\]\nt3 completed: "
                            (car (nth 5 results))))
    (efrit-todo-scenarios--should-be-valid outcome)))

(ert-deftest efrit-todo-scenarios-model-gets-a-short-completion ()
  "A session_complete sends the model a confirmation; the user gets the report.
In the REPL the conversation goes on, so the tool result of
session_complete is in the next turn's request."
  (let* ((outcomes
          (efrit-todo-scenarios-run-repl
           (list (list "Compute"
                       (list (efrit-todo-scenarios--tool "eval_sexp" '(("expr" . "(* 6 7)")))
                             (efrit-todo-scenarios--tool "session_complete"
                                                         '(("message" . "the answer is 42")))))
                 (list "Thanks"
                       (list (efrit-todo-scenarios--text "You are welcome."))))))
         (session (plist-get (car outcomes) :session))
         (request (car (plist-get (nth 1 outcomes) :requests)))
         (sent (efrit-todo-scenarios--block-text
                (car (last (seq-filter
                            (lambda (block)
                              (equal (efrit-todo-scenarios--get block "type") "tool_result"))
                            (seq-mapcat #'efrit-todo-scenarios--blocks
                                        (efrit-todo-scenarios--get request "messages"))))))))
    (should (equal (mapcar (lambda (o) (plist-get o :stop)) outcomes)
                   '("session-complete" "end_turn")))
    (should (string-match-p "\\[SESSION-COMPLETE: Session complete: the user was shown the full report of 1 tool call" sent))
    (should-not (string-match-p "Session report" sent))
    (should (< (string-bytes sent) 200))
    ;; The report of the first turn is what the REPL was given to show.
    (let ((report (gethash session efrit-todo-efrit--final-reports)))
      (should (string-match-p "\\[Result: 42\\]" report))
      (should (string-match-p "the answer is 42" report)))))

(ert-deftest efrit-todo-scenarios-complex-request-gets-a-plan-suggestion ()
  "A complex first request with no list brings the suggestion to plan."
  (pcase-let* ((`(,command ,_) (efrit-todo-scenarios-script 'planned))
               (suggestion (plist-get (efrit-todo-analyze-request command) :suggestion))
               (outcome (efrit-todo-scenarios-play 'planned)))
    (should (> (length suggestion) 0))
    (should (string-match-p (regexp-quote suggestion)
                            (efrit-todo-scenarios--system-text
                             (car (plist-get outcome :requests)))))))

(ert-deftest efrit-todo-scenarios-pause-stops-continuations ()
  "After todo_pause gives a reason, an end_turn with items open ends the session."
  (let ((outcome (efrit-todo-scenarios-play 'paused)))
    (should (equal (plist-get outcome :stop) "end_turn"))
    (should (member "todo_pause" (plist-get outcome :runs)))
    (should (null (efrit-todo-scenarios-continuations outcome)))
    (should (= (length (plist-get outcome :requests)) 3))
    (efrit-todo-scenarios--user-sees outcome "password only the user has")))

(ert-deftest efrit-todo-scenarios-repl-keeps-the-list-per-session ()
  "In the REPL the list outlives a turn; breaker and ledger start afresh."
  (let* ((outcomes
          (efrit-todo-scenarios-run-repl
           (list (list "Plan two steps"
                       (list (efrit-todo-scenarios--todos '("Look around" "completed")
                                                          '("Report back" "in_progress"))
                             (efrit-todo-scenarios--tool "eval_sexp" '(("expr" . "(+ 1 2)")))
                             (efrit-todo-scenarios--tool "session_complete" '(("message" . "one")))
                             (efrit-todo-scenarios--tool "session_complete" '(("message" . "two")))))
                 (list "Go on"
                       (list (efrit-todo-scenarios--tool "eval_sexp" '(("expr" . "(+ 2 2)")))
                             (efrit-todo-scenarios--text "Here you are."))))))
         (session (plist-get (car outcomes) :session))
         (tools (mapcar (lambda (entry) (plist-get entry :tool)) (efrit-todo-ledger session))))
    (should (equal (mapcar (lambda (o) (plist-get o :stop)) outcomes)
                   '("session-complete" "end_turn")))
    (should (equal (plist-get (nth 1 outcomes) :session) session))
    (should (equal (mapcar (lambda (item) (plist-get item :content)) (efrit-todo-list session))
                   '("Look around" "Report back")))
    ;; The second turn ended with "Report back" still open: a stop, noted
    ;; for the next turn to go on from.
    (should (equal tools '("eval_sexp" "session_stopped")))
    (should (equal (plist-get (efrit-todo-stopped session) :reason)
                   "the model ended its turn with items still open"))
    (should (= (plist-get (efrit-todo-breaker session) :calls) 1))
    (dolist (outcome outcomes)
      (efrit-todo-scenarios--should-be-valid outcome))))

(defun efrit-todo-scenarios--skip-without (what)
  "Skip this test, which needs WHAT from Efrit, saying how to run it."
  (ert-skip (if (featurep 'efrit-todo-fake-efrit)
                (format (concat "the stand-in Efrit has no %s; to run this on a real"
                                " Efrit: make test-efrit EFRIT_DIR=/path/to/efrit")
                        what)
              (format "the Efrit at EFRIT_DIR has no %s" what))))

(ert-deftest efrit-todo-scenarios-legacy-executor-keeps-every-result ()
  "Efrit's older async executor hands its caller the report, not the last text."
  (unless (fboundp 'efrit-execute-async)
    (efrit-todo-scenarios--skip-without "`efrit-execute-async'"))
  (pcase-let ((`(,command ,script) (efrit-todo-scenarios-script 'results-survive))
              (result nil))
    (efrit-todo-scenarios--with-mode t
      (efrit-todo-scenarios--instrumented script
        (efrit-execute-async command (lambda (text) (setq result text)))
        (efrit-todo-scenarios--wait (lambda () result) (float-time))))
    (should (string-match-p "\\_<42\\_>" result))
    (should (string-match-p "\\_<done\\_>" result))))

(ert-deftest efrit-todo-scenarios-efrit-own-todo-ui-is-suspended ()
  "Efrit's own todo buffer, loaded while the mode is on, waits for it to go off."
  (unless (locate-library "efrit-ui-todos")
    (efrit-todo-scenarios--skip-without "efrit-ui-todos.el"))
  (efrit-todo-scenarios--with-mode t
    (require 'efrit-ui-todos)
    (dolist (advice efrit-todo-efrit--efrit-ui-advice)
      (should-not (advice-member-p advice 'efrit-do--handle-todo-write)))
    (efrit-todo-efrit-mode -1)
    (dolist (advice efrit-todo-efrit--efrit-ui-advice)
      (should (advice-member-p advice 'efrit-do--handle-todo-write)))))

(ert-deftest efrit-todo-scenarios-mode-off-is-efrit ()
  "With the mode off the loop is Efrit's own: the faults the mode fixes are there."
  (let ((outcome (efrit-todo-scenarios-play 'identical-forever 'off)))
    (should-not (equal (plist-get outcome :stop) "circuit-breaker"))
    (should (> (length (plist-get outcome :requests)) 50)))
  (let ((outcome (efrit-todo-scenarios-play 'continuation 'off)))
    (should (null (efrit-todo-scenarios-continuations outcome)))))

(ert-deftest efrit-todo-scenarios-mode-off-leaves-efrit-its-own-list ()
  "After the mode is off, Efrit's own list is Efrit's, not efrit-todo's.
*efrit-todos* does not draw it under efrit-todo's header (where a key
would promise that an agent reads the edit), and the indicator does
not follow it; the lists efrit-todo kept stay."
  (require 'efrit-todo-ui)
  (let ((efrit-todo-auto-show nil))
    (efrit-todo-scenarios-play 'ids-survive)
    (efrit-todo-mode-line-mode 1)
    (unwind-protect
        (progn
          (efrit-todo-scenarios-run
           "Plan without efrit-todo"
           (list (efrit-todo-scenarios--todos '("Efrit's own first step" "in_progress")
                                              '("Efrit's own second step" "pending"))
                 (efrit-todo-scenarios--text "Planned."))
           'off)
          ;; Efrit kept its list, in its own shape.
          (should (equal (mapcar #'efrit-todo-item-content (symbol-value 'efrit-do--current-todos))
                         '("Efrit's own first step" "Efrit's own second step")))
          (should-not (string-match-p "0/2" (or (efrit-todo-mode-line-text) "")))
          (with-current-buffer (efrit-todo-ui--buffer)
            (efrit-todo-refresh)
            (let ((text (buffer-string)))
              (should-not (string-match-p "Efrit's own" text))
              (should (string-match-p "Read the code" text))
              (should (string-match-p "efrit-todo-efrit-mode is off" text)))
            (goto-char (point-min))
            (while (not (eobp))
              (should-not (member (get-text-property (point) 'efrit-todo-item) '("todo-1" "todo-2")))
              (forward-line 1))))
      (efrit-todo-mode-line-mode -1)
      (when (get-buffer "*efrit-todos*")
        (kill-buffer "*efrit-todos*")))))

(ert-deftest efrit-todo-scenarios-a-failed-command-without-a-list-says-so-briefly ()
  "A command that fails before any tool call or list gets Efrit's one line, no report."
  (let ((outcome (efrit-todo-scenarios-run "Do something" (list 'api-error))))
    (should (equal (plist-get outcome :stop) "api-error"))
    (should (equal (plist-get outcome :last-result) "Session ended: api-error"))))

(ert-deftest efrit-todo-scenarios-unfinished-list-carries-over ()
  "However a command stops with items open, the next one goes on with them.
Its first request names the open items with their ids, its writes by
those ids are accepted, and the list finishes there."
  (dolist (how '(interrupt quit breaker api-error pause end-turn iteration-limit))
    (ert-info ((format "stopped by %s" how))
      (pcase-let* ((`(,first ,second) (efrit-todo-scenarios-stop-and-go-on how))
                   (list-session (plist-get first :session))
                   (system (efrit-todo-scenarios--system-text
                            (car (plist-get second :requests))))
                   (results (efrit-todo-scenarios-tool-results second)))
        (should (member (plist-get first :stop)
                        (pcase how
                          ((or 'interrupt 'quit) '("interrupted"))
                          ('breaker '("circuit-breaker"))
                          ('api-error '("api-error"))
                          ((or 'pause 'end-turn) '("end_turn"))
                          ('iteration-limit '("iteration-limit" "iteration-limit-exceeded")))))
        (should (string-match-p
                 (concat "THE PREVIOUS COMMAND STOPPED while t2 was in progress ("
                         (regexp-quote
                          (cdr (assq how '((interrupt . "interrupted by the user")
                                           (quit . "interrupted by the user")
                                           (breaker . "stopped by the circuit breaker: it would be the same call to eval_sexp 4 times")
                                           (api-error . "an API error: overloaded_error")
                                           (pause . "paused by the model: I need the user's password.")
                                           (end-turn . "the model ended its turn with items still open")
                                           (iteration-limit . "the iteration limit was reached"))))))
                 system))
        (should (string-match-p "^  t2 \\[in_progress\\] Update the docstring of function-2" system))
        (should (string-match-p "^  t3 \\[pending\\] " system))
        (should-not (string-match-p "^  t1 " system))
        (should (equal (plist-get second :stop) "session-complete"))
        (should-not (seq-some #'cdr results))
        (should (string-match-p "^t2 completed: " (car (nth 0 results))))
        (should (equal (mapcar (lambda (i) (list (plist-get i :id) (plist-get i :status)))
                               (efrit-todo-list list-session))
                       '(("t1" completed) ("t2" completed) ("t3" completed))))
        (should-not (efrit-todo-stopped list-session))
        ;; The stop is in the history and the report; the report has both commands.
        (should (seq-find (lambda (c) (eq (plist-get c :kind) 'stop)) (efrit-todo-history list-session)))
        (should (string-match-p "session_stopped" (plist-get second :last-result)))
        (should (string-match-p "finished the rest" (plist-get second :last-result)))
        (efrit-todo-scenarios--should-be-valid second)))))

(ert-deftest efrit-todo-scenarios-carry-over-follows-the-option ()
  "With `efrit-todo-carry-over' never, or a list dropped, the next command starts afresh."
  (dolist (setting '(never drop))
    (ert-info ((format "%s" setting))
      (let* ((first (efrit-todo-scenarios-run "Do three steps"
                                              (efrit-todo-scenarios--stopping-script 'interrupt)))
             (efrit-todo-carry-over (if (eq setting 'never) 'never 'carry)))
        (should (efrit-todo-stopped (plist-get first :session)))
        (when (eq setting 'drop)
          (should (efrit-todo-drop-unfinished))
          (should-not (efrit-todo-stopped (plist-get first :session))))
        (let* ((efrit-todo-scenarios--keep-unfinished t)
               (second (efrit-todo-scenarios-run
                        "Something else"
                        (list (efrit-todo-scenarios--text "Done.")))))
          (should-not (string-match-p "THE PREVIOUS COMMAND STOPPED"
                                      (efrit-todo-scenarios--system-text
                                       (car (plist-get second :requests)))))
          (should (null (efrit-todo-list (plist-get second :session))))
          ;; The old list is still there, as it was.
          (should (= (length (efrit-todo-list (plist-get first :session))) 3)))))))

(ert-deftest efrit-todo-scenarios-a-gptel-chat-keeps-its-list ()
  "An Efrit command leaves alone the list a gptel chat left open.
It would take over an Efrit command's list stopped the same way."
  (let ((chat "gptel:plan.org"))
    (unwind-protect
        (progn
          (efrit-todo-write '(:todos [(:content "Chat step" :status "in_progress")]) chat)
          (efrit-todo-stop "interrupted by the user" chat)
          (let* ((efrit-todo-scenarios--keep-unfinished t)
                 (efrit-todo-carry-over 'carry)
                 (run (efrit-todo-scenarios-run
                       "Something else"
                       (list (efrit-todo-scenarios--text "Done.")))))
            (should-not (equal (plist-get run :session) chat))
            (should-not (string-match-p "THE PREVIOUS COMMAND STOPPED"
                                        (efrit-todo-scenarios--system-text
                                         (car (plist-get run :requests)))))
            (should (efrit-todo-stopped chat))
            (should (equal (car (efrit-todo-unfinished)) chat))
            (should-not (efrit-todo-unfinished #'efrit-todo-efrit--own-session-p))))
      (efrit-todo-reset chat))))

(defun efrit-todo-scenarios--graph-fields (session)
  "Return (ID STATUS BLOCKED-BY OWNER DESCRIPTION) of SESSION's items."
  (mapcar (lambda (item)
            (list (plist-get item :id) (plist-get item :status) (plist-get item :blocked-by)
                  (plist-get item :owner) (plist-get item :description)))
          (efrit-todo-list session)))

(ert-deftest efrit-todo-scenarios-carry-over-keeps-the-graph ()
  "A command interrupted with a task graph open leaves the graph to the next.
Blockers, owners and descriptions are there; starting the blocked item
first is refused naming its blocker; finishing the blocker makes it
ready, and the list finishes."
  (let* ((efrit-todo-scenarios--keep-unfinished nil)
         (first (efrit-todo-scenarios-run
                 "Write a parser with tests and docs"
                 (list (efrit-todo-scenarios--tool
                        "todo_write"
                        '(("todos" . [(("content" . "Write the parser") ("status" . "in_progress")
                                       ("activeForm" . "Writing the parser") ("owner" . "alice")
                                       ("description" . "Recursive descent, errors with positions"))
                                      (("content" . "Write the tests") ("status" . "pending")
                                       ("blocked_by" . ["t1"]))
                                      (("content" . "Write the docs") ("status" . "pending")
                                       ("blocked_by" . ["t2"]) ("owner" . "bob"))])))
                       (efrit-todo-scenarios--tool "eval_sexp" '(("expr" . "(+ 1 1)")))
                       (efrit-todo-scenarios--interrupt-then
                        (efrit-todo-scenarios--tool "eval_sexp" '(("expr" . "(+ 2 2)")))))))
         (list-session (plist-get first :session))
         (graph '(("t1" in-progress nil "alice" "Recursive descent, errors with positions")
                  ("t2" pending ("t1") nil nil)
                  ("t3" pending ("t2") "bob" nil))))
    (should (equal (plist-get first :stop) "interrupted"))
    (should (efrit-todo-stopped list-session))
    (should (equal (efrit-todo-scenarios--graph-fields list-session) graph))
    (let* ((efrit-todo-scenarios--keep-unfinished t)
           (second (efrit-todo-scenarios-run
                    "Please continue from where we left off."
                    (list (efrit-todo-scenarios--merge '("t2" "in_progress"))
                          (efrit-todo-scenarios--merge '("t1" "completed"))
                          (efrit-todo-scenarios--merge '("t2" "in_progress"))
                          (efrit-todo-scenarios--merge '("t2" "completed"))
                          (efrit-todo-scenarios--merge '("t3" "in_progress"))
                          (efrit-todo-scenarios--merge '("t3" "completed"))
                          (efrit-todo-scenarios--tool "session_complete"
                                                      '(("message" . "parser, tests and docs"))))))
           (results (efrit-todo-scenarios-tool-results second)))
      (should (string-match-p "THE PREVIOUS COMMAND STOPPED while t1 was in progress"
                              (efrit-todo-scenarios--system-text (car (plist-get second :requests)))))
      ;; The blocked item cannot start before its blocker is finished.
      (should (cdr (nth 0 results)))
      (should (string-match-p "t2 is blocked by t1" (car (nth 0 results))))
      (should-not (cdr (nth 1 results)))
      (should (string-match-p "t2 is ready now" (car (nth 1 results))))
      (should (string-match-p "t3 is ready now" (car (nth 3 results))))
      (should (equal (plist-get second :stop) "session-complete"))
      (should (equal (efrit-todo-scenarios--graph-fields list-session)
                     '(("t1" completed nil "alice" "Recursive descent, errors with positions")
                       ("t2" completed nil nil nil)
                       ("t3" completed nil "bob" nil))))
      (efrit-todo-scenarios--should-be-valid second))))

(ert-deftest efrit-todo-scenarios-repl-goes-on-after-an-interrupted-turn ()
  "A REPL turn interrupted by \\[keyboard-quit] leaves its list to the next message."
  (let* ((outcomes
          (efrit-todo-scenarios-run-repl
           (list (list "Do three steps"
                       (list (efrit-todo-scenarios--plan 3)
                             (efrit-todo-scenarios--advance 1)
                             (efrit-todo-scenarios--tool "quit_tool" nil)))
                 (list "Please continue from where we left off."
                       efrit-todo-scenarios--going-on))))
         (session (plist-get (car outcomes) :session))
         (system (efrit-todo-scenarios--system-text (car (plist-get (nth 1 outcomes) :requests)))))
    (should (equal (mapcar (lambda (o) (plist-get o :stop)) outcomes)
                   '("interrupted" "session-complete")))
    (should (string-match-p "THE PREVIOUS COMMAND STOPPED while t2 was in progress (interrupted by the user)" system))
    (should (equal (mapcar (lambda (i) (plist-get i :status)) (efrit-todo-list session))
                   '(completed completed completed)))
    (dolist (outcome outcomes)
      (efrit-todo-scenarios--should-be-valid outcome))))

(ert-deftest efrit-todo-scenarios-replacing-a-carried-list-drops-nothing-silently ()
  "A new plan in place of a carried-over list names what it drops; undo brings it back."
  (let* ((first (efrit-todo-scenarios-run "Do three steps"
                                          (efrit-todo-scenarios--stopping-script 'interrupt)))
         (session (plist-get first :session))
         (efrit-todo-scenarios--keep-unfinished t)
         (second (efrit-todo-scenarios-run
                  "Forget that; write the release notes instead."
                  (list (efrit-todo-scenarios--todos '("Write the release notes" "in_progress"))
                        (efrit-todo-scenarios--text "Writing them."))))
         (result (car (car (efrit-todo-scenarios-tool-results second)))))
    (should (string-match-p "dropped: t2 \\[in_progress\\] Update the docstring of function-2 in file-2.el; t3 \\[pending\\]" result))
    (should (equal (mapcar (lambda (i) (plist-get i :id)) (efrit-todo-list session)) '("t4")))
    (efrit-todo-undo session)
    (should (equal (mapcar (lambda (i) (plist-get i :id)) (efrit-todo-list session)) '("t1" "t2" "t3")))))

(defconst efrit-todo-scenarios--closing-child
  '(let ((efrit-todo-state-directory (car command-line-args-left))
         (answers (list (efrit-todo-scenarios--plan 3) (efrit-todo-scenarios--advance 1))))
     (setq command-line-args-left nil)
     (efrit-todo-efrit-mode 1)
     ;; Claude answers twice, then the user closes Emacs mid-command.
     (advice-add 'efrit-api-request-async :override
                 (lambda (_request callback &optional _error-callback)
                   (when answers
                     (run-at-time 0 nil callback
                                  (efrit-todo-scenarios--parse (pop answers))))))
     (efrit-do "Do three steps")
     (let ((deadline (+ (float-time) 20)))
       (while (and answers (< (float-time) deadline))
         (accept-process-output nil 0.02)))
     (accept-process-output nil 0.1)
     (princ (format "session %s\n" efrit-todo-current-session))
     (kill-emacs 0))
  "A child Emacs that closes while an efrit-do command runs.")

(ert-deftest efrit-todo-scenarios-carry-over-can-ask ()
  "With `efrit-todo-carry-over' ask, the user's answer decides."
  (dolist (answer '(yes no))
    (let* ((first (efrit-todo-scenarios-run "Do three steps"
                                            (efrit-todo-scenarios--stopping-script 'interrupt)))
           (asked nil)
           (efrit-todo-carry-over 'ask)
           (efrit-todo-scenarios--keep-unfinished t)
           (second (cl-letf (((symbol-function 'y-or-n-p)
                              (lambda (prompt) (setq asked prompt) (eq answer 'yes))))
                     (let ((noninteractive nil))
                       (efrit-todo-scenarios-run "Go on" efrit-todo-scenarios--going-on))))
           (system (efrit-todo-scenarios--system-text (car (plist-get second :requests)))))
      (ert-info ((format "answered %s" answer))
        (should (string-match-p (concat "Go on with the unfinished todo list of "
                                        (regexp-quote (plist-get first :session))
                                        " (2 of 3 open; it stopped: interrupted by the user)")
                                asked))
        (should (eq (and (string-match-p "THE PREVIOUS COMMAND STOPPED" system) t)
                    (eq answer 'yes)))))))

(ert-deftest efrit-todo-scenarios-list-survives-closing-emacs ()
  "Emacs closed mid-command: after the restart the next command goes on."
  (skip-unless invocation-name)
  (let* ((root (make-temp-file "efrit-todo-closing-" t))
         (dir (expand-file-name "state/" root))
         (ended nil)
         ;; The sentinel runs once the child's last output is read;
         ;; `process-live-p' turns nil before that.
         (process (make-process
                   :name "efrit-todo-closing" :buffer (generate-new-buffer " *closing*")
                   :connection-type 'pipe :noquery t
                   :sentinel (lambda (_process _event) (setq ended t))
                   :command (list (expand-file-name invocation-name invocation-directory)
                                  "-Q" "--batch"
                                  "-L" (file-name-directory (locate-library "efrit-todo"))
                                  "-L" (file-name-directory (locate-library "efrit-todo-scenarios"))
                                  "-l" (locate-library "efrit-todo-fake-efrit")
                                  "-l" "efrit-todo-scenarios"
                                  "--eval" (prin1-to-string efrit-todo-scenarios--closing-child)
                                  dir))))
    (unwind-protect
        (let ((deadline (+ (float-time) 60)))
          (while (and (not ended) (< (float-time) deadline))
            (accept-process-output process 0.05))
          (should ended)
          (should (equal (process-exit-status process) 0))
          (efrit-todo-scenarios--fresh-buffers)
          (let* ((output (with-current-buffer (process-buffer process) (buffer-string)))
                 (session (and (string-match "^session \\(.*\\)$" output) (match-string 1 output)))
                 (efrit-todo-state-directory dir))
            (should session)
            (should (member session (efrit-todo-restore t)))
            (should (equal (plist-get (efrit-todo-stopped session) :reason)
                           "Emacs was closed while the command ran"))
            (let* ((efrit-todo-state-directory nil)
                   (efrit-todo-scenarios--keep-unfinished t)
                   (second (efrit-todo-scenarios-run "Please continue from where we left off."
                                                     efrit-todo-scenarios--going-on)))
              (should (string-match-p "THE PREVIOUS COMMAND STOPPED while t2 was in progress (Emacs was closed"
                                      (efrit-todo-scenarios--system-text
                                       (car (plist-get second :requests)))))
              (should (equal (plist-get second :stop) "session-complete"))
              (should (equal (mapcar (lambda (i) (plist-get i :status)) (efrit-todo-list session))
                             '(completed completed completed))))))
      (kill-buffer (process-buffer process))
      (delete-directory root t))))

;;;; Planning with the Task tools

(defun efrit-todo-scenarios--task (name &rest keys-and-values)
  "Return a response calling Task tool NAME with KEYS-AND-VALUES (key, value, ...)."
  (let ((input nil))
    (while keys-and-values
      (push (cons (pop keys-and-values) (pop keys-and-values)) input))
    (efrit-todo-scenarios--tool name (nreverse input))))

(defconst efrit-todo-scenarios--task-plan
  (list (efrit-todo-scenarios--task "TaskCreate" "subject" "Write the parser"
                                    "activeForm" "Writing the parser")
        (efrit-todo-scenarios--task "TaskCreate" "subject" "Test the parser"
                                    "description" "Run the parser over every example file."
                                    "blockedBy" ["t1"])
        ;; Too early: t2 waits for t1.
        (efrit-todo-scenarios--task "TaskUpdate" "taskId" "t2" "status" "in_progress")
        (efrit-todo-scenarios--task "TaskUpdate" "taskId" "t1" "status" "in_progress")
        (efrit-todo-scenarios--tool "eval_sexp" '(("expr" . "(* 6 7)")))
        (efrit-todo-scenarios--task "TaskUpdate" "taskId" "1" "status" "completed")
        (efrit-todo-scenarios--task "TaskList")
        (efrit-todo-scenarios--task "TaskUpdate" "taskId" "#2" "status" "in_progress")
        (efrit-todo-scenarios--tool "eval_sexp" '(("expr" . "(+ 20 22)")))
        (efrit-todo-scenarios--task "TaskUpdate" "taskId" "t2" "status" "completed")
        (efrit-todo-scenarios--tool "session_complete" '(("message" . "parser written and tested"))))
  "Claude plans two tasks, the second blocked by the first, and does both.")

(defun efrit-todo-scenarios--check-task-plan (outcome)
  "Fail unless OUTCOME is the Task-tool plan done right."
  (let* ((session (plist-get outcome :session))
         (results (efrit-todo-scenarios-tool-results outcome))
         (requests (plist-get outcome :requests))
         (tools (efrit-todo-scenarios--tool-names (car requests))))
    (should (equal (plist-get outcome :stop) "session-complete"))
    (dolist (tool '("TaskCreate" "TaskUpdate" "TaskGet" "TaskList" "todo_pause"))
      (should (member tool tools)))
    (should-not (member "todo_write" tools))
    ;; Starting t2 before t1 is done is refused, naming the blocker.
    (should (cdr (nth 2 results)))
    (should (string-match-p "t2 is blocked by t1 (pending)" (car (nth 2 results))))
    ;; Completing t1 makes t2 ready.
    (should-not (cdr (nth 5 results)))
    (should (string-match-p "t2 is ready now" (car (nth 5 results))))
    (should (string-match-p "^ *t1 \\[completed\\] Write the parser$" (car (nth 6 results))))
    (should (string-match-p "^ *t2 \\[pending\\] Test the parser$" (car (nth 6 results))))
    (should (equal (mapcar (lambda (item) (list (plist-get item :id) (plist-get item :status)
                                                (plist-get item :blocked-by)))
                           (efrit-todo-list session))
                   '(("t1" completed nil) ("t2" completed nil))))
    (should (equal (plist-get (car (last (efrit-todo-list session))) :description)
                   "Run the parser over every example file."))
    (should-not (plist-get (efrit-todo-breaker session) :tripped))
    (efrit-todo-scenarios--should-be-valid outcome)))

(ert-deftest efrit-todo-scenarios-plans-with-the-task-tools ()
  "Two tasks, the second blocked by the first: done in order, then complete."
  (let* ((efrit-todo-tool-style 'tasks)
         (outcome (efrit-todo-scenarios-run "Write a parser for the config, then test it"
                                            efrit-todo-scenarios--task-plan)))
    (efrit-todo-scenarios--check-task-plan outcome)
    ;; The guidance explains the Task tools, and says they stand for the
    ;; todo_write of Efrit's own instructions; the same on every request.
    (let ((system (efrit-todo-scenarios--system-text (car (plist-get outcome :requests)))))
      (should (string-match-p "TaskCreate" system))
      (should (string-match-p "todo_write is not offered" system))
      (dolist (request (plist-get outcome :requests))
        (should (equal (efrit-todo-scenarios--system-text request) system))))
    (efrit-todo-scenarios--user-sees outcome "parser written and tested")))

(ert-deftest efrit-todo-scenarios-task-tools-in-the-repl ()
  "The REPL offers and runs the Task tools too."
  (let* ((efrit-todo-tool-style 'tasks)
         (outcome (car (efrit-todo-scenarios-run-repl
                        (list (list "Write a parser for the config, then test it"
                                    efrit-todo-scenarios--task-plan))))))
    (efrit-todo-scenarios--check-task-plan outcome)))

(ert-deftest efrit-todo-scenarios-style-both-offers-every-tool ()
  "With the style both, todo_write and the Task tools work on one list."
  (let* ((efrit-todo-tool-style 'both)
         (outcome (efrit-todo-scenarios-run
                   "Plan and do one thing"
                   (list (efrit-todo-scenarios--task "TaskCreate" "subject" "Look around")
                         (efrit-todo-scenarios--todos '("Look around" "completed"))
                         (efrit-todo-scenarios--task "TaskGet" "taskId" "t1")
                         (efrit-todo-scenarios--tool "session_complete" '(("message" . "looked"))))))
         (results (efrit-todo-scenarios-tool-results outcome))
         (tools (efrit-todo-scenarios--tool-names (car (plist-get outcome :requests)))))
    (dolist (tool '("todo_write" "TaskCreate" "TaskUpdate" "TaskGet" "TaskList" "todo_pause"))
      (should (member tool tools)))
    (should (equal (plist-get outcome :stop) "session-complete"))
    (should (string-match-p "completed" (car (nth 2 results))))
    (should (equal (mapcar (lambda (item) (plist-get item :id))
                           (efrit-todo-list (plist-get outcome :session)))
                   '("t1")))))

(ert-deftest efrit-todo-scenarios-plan-suggestion-names-the-task-tools ()
  "With the style tasks, the suggestion to plan names TaskCreate, not todo_write."
  (let* ((efrit-todo-tool-style 'tasks)
         (outcome (efrit-todo-scenarios-play 'planned))
         (system (efrit-todo-scenarios--system-text (car (plist-get outcome :requests)))))
    (should (string-match-p "looks like about [0-9]+ steps\\. Create the plan with TaskCreate"
                            system))
    ;; Not the todo_write suggestion.  (Efrit's own prompt may name
    ;; todo_write elsewhere: it is not efrit-todo's text.)
    (should-not (string-match-p
                 (regexp-quote (plist-get (let ((efrit-todo-tool-style 'todo))
                                            (efrit-todo-analyze-request
                                             (car (efrit-todo-scenarios-script 'planned))))
                                          :suggestion))
                 system))))

(ert-deftest efrit-todo-scenarios-reading-tasks-in-a-loop-trips-the-breaker ()
  "TaskGet and TaskList over and over is no progress: the breaker ends it."
  (let* ((efrit-todo-tool-style 'tasks)
         (reads (cl-loop for k from 0 below 60
                         collect (if (= (% k 3) 2)
                                     (efrit-todo-scenarios--task "TaskList")
                                   (efrit-todo-scenarios--task "TaskGet" "taskId"
                                                               (nth (% k 4) '("t1" "1" "#1" "t1"))))))
         (outcome (efrit-todo-scenarios-run
                   "Keep looking"
                   (cons (efrit-todo-scenarios--task "TaskCreate" "subject" "Look around")
                         reads)
                   nil 30)))
    (should (equal (plist-get outcome :stop) "circuit-breaker"))
    (should (= (plist-get outcome :runs-after-trip) 0))
    (should (< (length (plist-get outcome :runs)) 40))
    (efrit-todo-scenarios--should-be-valid outcome)))

;;;; Shared lists

(ert-deftest efrit-todo-scenarios-a-list-id-makes-commands-share-a-list ()
  "Commands started where `efrit-todo-list-id' names a list work on that list.
The first plans two items and leaves one open; the next, started in
another buffer naming the same list, sees them and goes on with the
same ids; a command started elsewhere has a list of its own."
  (let ((list (format "scenario-shared-%s" (cl-gensym)))
        (efrit-todo--shared-lists efrit-todo--shared-lists)
        (efrit-todo-scenarios--keep-unfinished t))
    (with-temp-buffer
      (setq-local efrit-todo-list-id list)
      (let ((outcome (efrit-todo-scenarios-run
                      "Plan the work"
                      (list (efrit-todo-scenarios--todos '("Read the code" "completed")
                                                         '("Fix the bug" "pending"))
                            (efrit-todo-scenarios--tool "todo_pause" '(("reason" . "waiting for the other command")))
                            (efrit-todo-scenarios--text "Paused.")))))
        (should-not (equal (plist-get outcome :session) list))
        (should (member list (efrit-todo-shared-lists)))
        (should (equal (mapcar (lambda (i) (plist-get i :id)) (efrit-todo-list list)) '("t1" "t2")))))
    (with-temp-buffer
      (setq-local efrit-todo-list-id list)
      (efrit-todo-scenarios-run
       "Go on with the plan"
       (list (efrit-todo-scenarios--tool
              "todo_write" `(("merge" . t)
                             ("todos" . [(("id" . "t2") ("content" . "Fix the bug") ("status" . "completed"))
                                         (("content" . "Write a test") ("status" . "completed"))])))
             (efrit-todo-scenarios--tool "session_complete" '(("message" . "done")))))
      (should (equal (mapcar (lambda (i) (list (plist-get i :id) (plist-get i :status)))
                             (efrit-todo-list list))
                     '(("t1" completed) ("t2" completed) ("t3" completed)))))
    (with-temp-buffer
      (let ((outcome (efrit-todo-scenarios-run
                      "Something else"
                      (list (efrit-todo-scenarios--todos '("Unrelated" "completed"))
                            (efrit-todo-scenarios--tool "session_complete" '(("message" . "done")))))))
        (should (equal (length (efrit-todo-list list)) 3))
        (should (equal (mapcar (lambda (i) (plist-get i :content))
                               (efrit-todo-list (plist-get outcome :session)))
                       '("Unrelated")))))))

(defmacro efrit-todo-scenarios--in-project (list &rest body)
  "Run BODY in a file buffer of a project whose .dir-locals.el names LIST."
  (declare (indent 1) (debug t))
  `(let ((root (file-name-as-directory (make-temp-file "efrit-todo-project" t)))
         (enable-local-variables :safe))
     (unwind-protect
         (progn
           (with-temp-file (expand-file-name ".dir-locals.el" root)
             (prin1 `((nil . ((efrit-todo-list-id . ,,list)))) (current-buffer)))
           (with-current-buffer (find-file-noselect (expand-file-name "main.el" root))
             (unwind-protect (progn ,@body)
               (set-buffer-modified-p nil)
               (kill-buffer))))
       (delete-directory root t))))

;; Written from the contract: a command on a shared list is an agent of
;; its own beside the list's other agents, and leaves the list to them.
(ert-deftest efrit-todo-scenarios-a-command-on-a-shared-list-is-an-agent-of-its-own ()
  "An efrit-do command on a shared list works under its own name.
Another agent (a chat) runs t1 on the list.  The command's whole-list
todo_write covers its own items only; its attempt on the chat's t1 is
refused; the items it adds are its own (owner \"efrit\") while it
runs; its report holds its own calls.  When it ends its open items
are free (no owner), the chat's stay the chat's, and the list is not
left as unfinished for the next command to be asked about."
  (let ((list (format "scenario-team-%s" (cl-gensym)))
        (efrit-todo--shared-lists efrit-todo--shared-lists)
        (efrit-todo-scenarios--keep-unfinished t)
        owners-while-running)
    (efrit-todo-share-list list)
    (let* ((chat (efrit-todo-agent-start "chat" list t)))
      (let ((efrit-todo-agent chat))
        (efrit-todo-task-create '(("subject" . "Answer the user")) list)
        (efrit-todo-task-update '(("taskId" . "t1") ("status" . "in_progress")) list))
      (with-temp-buffer
        (setq-local efrit-todo-list-id list)
        (let* ((outcome
                (efrit-todo-scenarios-run
                 "Fix the bug"
                 (list (efrit-todo-scenarios--todos '("Read the code" "completed")
                                                    '("Fix the bug" "in_progress"))
                       (lambda (_request)
                         (setq owners-while-running
                               (mapcar (lambda (i) (list (plist-get i :content) (plist-get i :owner)))
                                       (efrit-todo-list list)))
                         (efrit-todo-scenarios--tool
                          "todo_write" '(("merge" . t)
                                         ("todos" . [(("id" . "t1") ("content" . "Answer the user")
                                                      ("status" . "completed"))]))))
                       (efrit-todo-scenarios--tool "todo_pause" '(("reason" . "the chat goes on")))
                       (efrit-todo-scenarios--text "Paused."))))
               (results (mapcar #'car (efrit-todo-scenarios-tool-results outcome))))
          (should (equal owners-while-running
                         '(("Answer the user" "chat") ("Read the code" "efrit") ("Fix the bug" "efrit"))))
          (should (string-match-p "t1 is owned by chat" (nth 1 results)))
          (should (string-search "shared with other agents; you work on it as efrit"
                                 (efrit-todo-scenarios--system-text
                                  (car (plist-get outcome :requests)))))
          ;; Its report holds its own calls: three, not the chat's two.
          (should (string-match-p "Session report: 3 tool calls" (plist-get outcome :last-result)))))
      (should (equal (mapcar (lambda (i) (list (plist-get i :id) (plist-get i :status) (plist-get i :owner)))
                             (efrit-todo-list list))
                     `(("t1" in-progress "chat") ("t2" completed "efrit") ("t3" pending nil))))
      (should (equal (mapcar (lambda (a) (plist-get a :name)) (efrit-todo-agents list)) (list chat)))
      (should-not (efrit-todo-stopped list))
      (should-not (assoc list (list (efrit-todo-unfinished))))
      ;; The next command in the project (its .dir-locals.el names the
      ;; list) goes on with the open item.
      (efrit-todo-scenarios--in-project list
        (should (equal efrit-todo-list-id list))
        (efrit-todo-scenarios-run
         "Go on"
         (list (efrit-todo-scenarios--task "TaskUpdate" "taskId" "t3" "status" "completed")
               (efrit-todo-scenarios--tool "session_complete" '(("message" . "done"))))))
      (should (eq (plist-get (seq-find (lambda (i) (equal (plist-get i :id) "t3")) (efrit-todo-list list))
                             :status)
                  'completed))
      (efrit-todo-agent-end chat list))))

(defun efrit-todo-scenarios--texts (outcome)
  "Return every text efrit-todo sent the model in OUTCOME.
The tool results, then the continuations."
  (append (mapcar #'car (efrit-todo-scenarios-tool-results outcome))
          (efrit-todo-scenarios-continuations outcome)))

(defun efrit-todo-scenarios--names-task-tools-only (text)
  "Return non-nil if TEXT names TaskUpdate and not todo_write."
  (and (string-search "TaskUpdate" text) (not (string-search "todo_write" text))))

(defun efrit-todo-scenarios--reads (n)
  "Return N answers calling eval_sexp, each with another expression."
  (cl-loop for k from 0 below n
           collect (efrit-todo-scenarios--tool "eval_sexp" `(("expr" . ,(format "(+ %d 1)" k))))))

(ert-deftest efrit-todo-scenarios-texts-name-only-the-task-tools ()
  "In the style tasks, efrit-todo's texts name TaskUpdate, never todo_write.
The reminder, the completion guard's refusal and the continuations
in one run; the breaker's warning and refusal in another."
  (let* ((efrit-todo-tool-style 'tasks)
         (outcome (efrit-todo-scenarios-run
                   "Look around, then report"
                   (append (list (efrit-todo-scenarios--task "TaskCreate" "subject" "Look around")
                                 (efrit-todo-scenarios--task "TaskCreate" "subject" "Report")
                                 (efrit-todo-scenarios--task "TaskUpdate" "taskId" "t1"
                                                             "status" "in_progress"))
                           (efrit-todo-scenarios--reads 4)
                           (list (efrit-todo-scenarios--tool "session_complete"
                                                             '(("message" . "looked"))))
                           (make-list 5 (efrit-todo-scenarios--text "That is all.")))))
         (texts (efrit-todo-scenarios--texts outcome))
         (reminder (seq-find (lambda (text) (string-search "[efrit-todo reminder]" text)) texts))
         (refusal (seq-find (lambda (text) (string-search "session_complete refused" text)) texts))
         (continuations (efrit-todo-scenarios-continuations outcome)))
    (should (= (length continuations) 2))
    (dolist (text (list reminder refusal (car continuations)))
      (should (stringp text))
      (should (efrit-todo-scenarios--names-task-tools-only text)))
    (dolist (text texts)
      (should-not (string-search "todo_write" text)))
    (efrit-todo-scenarios--should-be-valid outcome))
  (let* ((efrit-todo-tool-style 'tasks)
         (efrit-todo-breaker-without-progress 6)
         (outcome (efrit-todo-scenarios-run
                   "Look around"
                   (append (list (efrit-todo-scenarios--task "TaskCreate" "subject" "Look around")
                                 (efrit-todo-scenarios--task "TaskUpdate" "taskId" "t1"
                                                             "status" "in_progress"))
                           (efrit-todo-scenarios--reads 12))))
         (texts (efrit-todo-scenarios--texts outcome))
         (warning (seq-find (lambda (text) (string-search "other tools will be refused" text))
                            texts))
         (refusal (seq-find (lambda (text) (string-search "was not run" text)) texts)))
    (should (equal (plist-get outcome :stop) "circuit-breaker"))
    (dolist (text (list warning refusal))
      (should (stringp text))
      (should (efrit-todo-scenarios--names-task-tools-only text)))
    (dolist (text texts)
      (should-not (string-search "todo_write" text)))
    (efrit-todo-scenarios--should-be-valid outcome)))

(ert-deftest efrit-todo-scenarios-a-plan-made-one-task-at-a-time-goes-through ()
  "Thirty TaskCreate calls, one per response: none refused, none warned about."
  (let* ((efrit-todo-tool-style 'tasks)
         (plan (cl-loop for k from 1 to 30
                        collect (efrit-todo-scenarios--task
                                 "TaskCreate" "subject" (format "Update the docstring of function-%d" k))))
         (outcome (efrit-todo-scenarios-run
                   "Plan thirty steps"
                   (append plan
                           (list (efrit-todo-scenarios--task "TaskUpdate" "taskId" "t1"
                                                             "status" "in_progress")
                                 (efrit-todo-scenarios--tool "todo_pause"
                                                             '(("reason" . "The plan is ready for review.")))
                                 (efrit-todo-scenarios--text "The plan is ready.")))))
         (results (efrit-todo-scenarios-tool-results outcome)))
    (should (equal (plist-get outcome :stop) "end_turn"))
    (should (= (seq-count (lambda (name) (equal name "TaskCreate")) (plist-get outcome :runs)) 30))
    (should (= (length (efrit-todo-list (plist-get outcome :session))) 30))
    (dolist (result (seq-take results 31))
      (should-not (cdr result))
      (should-not (string-match-p "Warning\\|Vary\\|refused\\|not run" (car result))))
    (should-not (plist-get (efrit-todo-breaker (plist-get outcome :session)) :tripped))
    (efrit-todo-scenarios--should-be-valid outcome)))

(provide 'efrit-todo-scenarios)
;;; efrit-todo-scenarios.el ends here
