;;; efrit-todo-efrit.el --- Run Efrit's agent loop on efrit-todo -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The efrit-todo authors

;; Author: The efrit-todo authors
;; Keywords: tools, convenience
;; URL: https://github.com/efrit-todo/efrit-todo

;; This file is not part of GNU Emacs.

;; This program is free software; you can redistribute it and/or modify
;; it under the terms of the GNU General Public License as published by
;; the Free Software Foundation, either version 3 of the License, or
;; (at your option) any later version.

;; This program is distributed in the hope that it will be useful,
;; but WITHOUT ANY WARRANTY; without even the implied warranty of
;; MERCHANTABILITY or FITNESS FOR A PARTICULAR PURPOSE.  See the
;; GNU General Public License for more details.

;; You should have received a copy of the GNU General Public License
;; along with this program.  If not, see <https://www.gnu.org/licenses/>.

;;; Commentary:

;; `efrit-todo-efrit-mode' makes a running Efrit use efrit-todo in its
;; `efrit-do' loop, its REPL and `efrit-execute':
;;
;; - todo_write goes to `efrit-todo-write'; todo_pause and the Task
;;   tools (TaskCreate, TaskUpdate, TaskGet, TaskList) are real tools;
;;   the schemas Claude sees come from `efrit-todo-tool-schemas', and
;;   follow `efrit-todo-tool-style';
;; - every tool call passes `efrit-todo-before-tool' and
;;   `efrit-todo-after-tool' (Efrit's own breaker is bypassed), and a
;;   tripped breaker ends the session at once, with the report;
;; - session_complete goes through `efrit-todo-complete', and what the
;;   user reads at the end is the report: every tool result survives;
;; - a turn that ends with items open gets a continuation message;
;; - the system prompt carries the list and, for a complex first
;;   request, the suggestion to plan.
;;
;; Everything is advice, added when the mode is turned on and removed
;; when it is turned off.  Until efrit-todo's module is loaded (it is
;; being built, or its build was declined), the advice steps aside and
;; Efrit runs exactly as without efrit-todo; once it is loaded,
;; efrit-todo takes over from the next command.  Efrit is never required: the advice waits
;; for its functions to be defined.  Turning the mode on also turns on
;; the mode-line indicator (see `efrit-todo-show-mode-line').
;;
;; Loading this file, and turning the mode on, make efrit-todo's
;; efrit-todo.el the one in use even when Efrit's own file of that name
;; came first in `load-path' or was loaded already (see
;; efrit-todo-shadow.el), so `(require 'efrit-todo-efrit)' works in any
;; order with Efrit's set-up.

;;; Code:

(require 'seq)
(require 'efrit-todo-shadow)
;; Efrit's own efrit-todo.el may come first in `load-path', or may have
;; been loaded already: this package's must be the one in use.
(eval-and-compile (efrit-todo-shadow-ensure))
(require 'efrit-todo)
(require 'efrit-todo-ui nil t)

;; Efrit's variables and functions, used only once Efrit is loaded.
(defvar efrit-do-circuit-breaker-enabled)
(defvar efrit-do-error-loop-auto-complete)
(defvar efrit-do-max-same-error-occurrences)
(defvar efrit-do--tool-dispatch-table)
(defvar efrit-do--last-result)
(defvar efrit-repl-loop--tool-session)
(declare-function efrit-session-p "efrit-session-core" (object))
(declare-function efrit-session-id "efrit-session-core" (session))
(declare-function efrit-session-command "efrit-session-core" (session))
(declare-function efrit-session-get "efrit-session-core" (id))
(declare-function efrit-session-active "efrit-session-core" ())
(declare-function efrit-session-add-assistant-response "efrit-session-worklog"
                  (session content-array))
(declare-function efrit-session-add-tool-results "efrit-session-worklog"
                  (session tool-results))
(declare-function efrit-repl-session-p "efrit-repl-session" (object))
(declare-function efrit-do "efrit-do" (command))
(declare-function efrit-repl-session-id "efrit-repl-session" (session))
(declare-function efrit-repl-session-add-user-message "efrit-repl-session"
                  (session content))
(declare-function efrit-do-async--continue-iteration "efrit-do-async-loop" (session))
(declare-function efrit-do-async--finish "efrit-do-async-loop"
                  (session stop-reason error-message completion-message))
(declare-function efrit-repl-loop--continue-iteration "efrit-repl-loop" (session))
(declare-function efrit-repl-loop--finish "efrit-repl-loop"
                  (session stop-reason error-message completion-message))
(declare-function efrit-do--capture-context "efrit-do" (command result))
(declare-function efrit-do--display-result "efrit-do" (command result &optional error-p))
(declare-function efrit-do-queue-pop-command "efrit-do-queue" (&optional session))

(defcustom efrit-todo-efrit-suggest-plan t
  "Whether a complex first request gets a suggestion to plan first.
The suggestion, from `efrit-todo-analyze-request' and naming the
tools of `efrit-todo-tool-style', is added to the system prompt while
the session has no list and has not called a tool yet."
  :type 'boolean
  :group 'efrit-todo)

(defvar efrit-todo-efrit--advice
  '((efrit-session-create :around efrit-todo-efrit--create-session)
    (efrit-do--execute-tool :around efrit-todo-efrit--execute-tool)
    (efrit-do--dispatch-tool :around efrit-todo-efrit--dispatch-tool)
    (efrit-do--handle-todo-write :override efrit-todo-efrit--todo-write)
    (efrit-do--handle-session-complete :override efrit-todo-efrit--session-complete)
    (efrit-do--get-current-tools-schema :filter-return efrit-todo-efrit--tools-schema)
    (efrit-do--command-system-prompt :around efrit-todo-efrit--system-prompt)
    (efrit-todo-format-for-prompt :before-until efrit-todo-efrit--quiet-prompt)
    (efrit-loop-handle-response :before efrit-todo-efrit--note-response)
    (efrit-do-async--continue-iteration :around efrit-todo-efrit--continue-do)
    (efrit-do-async--finish :around efrit-todo-efrit--finish-do)
    (efrit-do--on-async-complete :override efrit-todo-efrit--on-async-complete)
    (efrit-repl-session-begin-turn :after efrit-todo-efrit--begin-repl-turn)
    (efrit-repl-loop--continue-iteration :around efrit-todo-efrit--continue-repl)
    (efrit-repl-loop--finish :around efrit-todo-efrit--finish-repl)
    (efrit-do-async--stop-loop :before efrit-todo-efrit--stopping-do)
    (efrit-do-async--stop-loop :after efrit-todo-efrit--stopped-do)
    (efrit-repl-loop--end-turn :before efrit-todo-efrit--stopping-repl)
    (efrit-execute :around efrit-todo-efrit--execute)
    (efrit-executor--sync-api-call :around efrit-todo-efrit--sync-api-call)
    (efrit-executor--finalize-session :around efrit-todo-efrit--finalize-executor))
  "The advice of `efrit-todo-efrit-mode': (FUNCTION HOW ADVICE).
Depth 100 puts each one innermost, so advice that others put on the
same function (Efrit's own, a user's) keeps running around it.")

(defvar efrit-todo-efrit--in-use nil
  "Non-nil once efrit-todo runs Efrit's commands.
Until the module is loaded, Efrit runs as without efrit-todo.  Once
it is, the next command that starts sets this, never one half-way
through: each command runs on one backend from start to end.")

(defconst efrit-todo-efrit--command-starts
  '(efrit-session-create efrit-repl-session-begin-turn efrit-execute)
  "Efrit's functions that begin a command or a REPL turn.")

(defun efrit-todo-efrit--guarded (function how advice)
  "Return ADVICE, of kind HOW on FUNCTION, as :around advice.
It runs ADVICE while `efrit-todo-efrit--in-use', and only FUNCTION
otherwise."
  (let ((starts (memq function efrit-todo-efrit--command-starts)))
    (lambda (original &rest args)
      (when (and starts (not efrit-todo-efrit--in-use))
        (setq efrit-todo-efrit--in-use (efrit-todo-build-module-loaded-p)))
      (if (not efrit-todo-efrit--in-use)
          (apply original args)
        (pcase how
          (:around (apply advice original args))
          (:override (apply advice args))
          (:filter-return (funcall advice (apply original args)))
          (:before-until (or (apply advice args) (apply original args)))
          (:before (apply advice args) (apply original args))
          (:after (prog1 (apply original args) (apply advice args)))
          (_ (error "Efrit-todo: no guard for %s advice" how)))))))

(defvar efrit-todo-efrit--efrit-ui-advice
  '(efrit-todos--after-todo-write-advice efrit-modeline--after-todo-write-advice)
  "Advice by which Efrit's own todo buffer and mode line follow todo_write.")

(defvar efrit-todo-efrit--suspended nil
  "Efrit's UI advice removed while the mode is on, to restore when off.")

(defvar efrit-todo-efrit--saved nil
  "Values the mode replaced, as (SYMBOL . VALUE), to restore when off.")

(defvar efrit-todo-efrit--end-turn-content (make-hash-table :test 'eq :weakness 'key)
  "The content of the last end_turn response, by Efrit session object.")

(defvar efrit-todo-efrit--final-reports (make-hash-table :test 'equal)
  "The report of each session completed through session_complete, by id.")

(defvar efrit-todo-efrit--completion-messages (make-hash-table :test 'equal)
  "The model's message of each session completed through session_complete.")

(defvar efrit-todo-efrit--building-prompt nil
  "Non-nil while Efrit builds a system prompt that gets our guidance.")

(defvar efrit-todo-efrit--binding-efrit nil
  "Non-nil while the adapter binds Efrit's breaker settings itself.
It does so while a tool runs, to keep Efrit's own breaker out of the
way; those values are not the user's.")

;;;; Sessions

(defvar efrit-todo-efrit--carried (make-hash-table :test 'equal)
  "The efrit-todo session each Efrit session works on, when not its own.
An Efrit session that took over a list a previous command left open
works on that command's efrit-todo session: the same items and ids.")

(defcustom efrit-todo-efrit-agent-name "efrit"
  "The name an efrit-do command goes by on a shared list.
A command started in a buffer whose `efrit-todo-list-id' names a
shared list works on it as an agent of this name (NAME-2, NAME-3...
while another of that name runs in this Emacs): the items it adds or
starts are its own while it runs, and it has a breaker, reminders and
a report of its own.  When it ends, its open items are let go for the
other agents of the list to take, and the list is not left as
unfinished: nothing asks whether to go on with it."
  :type 'string
  :group 'efrit-todo)

(defvar efrit-todo-efrit--agents (make-hash-table :test 'equal)
  "The agent the running command is on each shared list, by list name.")

(defun efrit-todo-efrit--agent-on (name)
  "Return the agent the running command is on the shared list NAME, or nil."
  (and (stringp name) (gethash name efrit-todo-efrit--agents)))

(defmacro efrit-todo-efrit--acting (name &rest body)
  "Run BODY as the agent the running command is on the list NAME, if any.
Off shared lists, BODY runs as it would."
  (declare (indent 1) (debug t))
  `(let ((efrit-todo-agent (or (efrit-todo-efrit--agent-on ,name) efrit-todo-agent)))
     ,@body))

(defun efrit-todo-efrit--join (list)
  "Make the command starting now an agent of the shared LIST."
  ;; A command that ended without Efrit saying so leaves no agent behind.
  (efrit-todo-efrit--leave list)
  (remhash list efrit-todo-efrit--final-reports)
  (remhash list efrit-todo-efrit--completion-messages)
  (condition-case err
      (puthash list (efrit-todo-agent-start efrit-todo-efrit-agent-name list t)
               efrit-todo-efrit--agents)
    ;; The command still runs, on the list, without a name of its own.
    (efrit-todo-error
     (message "Efrit-todo: the command works on %s without an agent name: %s"
              list (error-message-string err)))))

(defun efrit-todo-efrit--leave (list)
  "End the agent of the command on the shared LIST, letting its open items go."
  (when-let* ((agent (efrit-todo-efrit--agent-on list)))
    (remhash list efrit-todo-efrit--agents)
    (condition-case err
        (efrit-todo-agent-end agent list)
      (error (message "Efrit-todo: %s could not leave the shared list %s: %s"
                      agent list (error-message-string err))))))

(defun efrit-todo-efrit--todo-session (id)
  "Return the efrit-todo session of the Efrit session named ID."
  (gethash id efrit-todo-efrit--carried id))

(defun efrit-todo-efrit--name (session)
  "Return the efrit-todo session of Efrit SESSION, an efrit or REPL session."
  (cond ((and (fboundp 'efrit-repl-session-p) (efrit-repl-session-p session))
         (efrit-todo-efrit--todo-session (efrit-repl-session-id session)))
        ((and (fboundp 'efrit-session-p) (efrit-session-p session))
         (efrit-todo-efrit--todo-session (efrit-session-id session)))
        (t (efrit-todo--session nil))))

(defun efrit-todo-efrit--running-session ()
  "Return the efrit-todo session of the tool call running now."
  (cond ((bound-and-true-p efrit-repl-loop--tool-session)
         (efrit-todo-efrit--name efrit-repl-loop--tool-session))
        ((and (fboundp 'efrit-session-active) (efrit-session-active))
         (efrit-todo-efrit--todo-session (efrit-session-id (efrit-session-active))))
        (t (efrit-todo--session nil))))

(defun efrit-todo-efrit--carry-over-p (unfinished)
  "Return non-nil if a new command should go on with UNFINISHED.
UNFINISHED is (SESSION . STOP) from `efrit-todo-unfinished'; the
answer follows `efrit-todo-carry-over'."
  (pcase efrit-todo-carry-over
    ('never nil)
    ('ask (or noninteractive
              (let ((counts (efrit-todo-counts (car unfinished))))
                (y-or-n-p (format "Go on with the unfinished todo list of %s (%d of %d open; it stopped: %s)? "
                                  (car unfinished)
                                  (- (plist-get counts :total) (plist-get counts :completed)
                                     (plist-get counts :cancelled))
                                  (plist-get counts :total)
                                  (plist-get (cdr unfinished) :reason))))))
    (_ t)))

(defvar efrit-todo-efrit-foreign-sessions "\\`gptel:"
  "Regexp matching the names of sessions that other adapters own.
An Efrit command never takes over such a list: a gptel chat goes on
with its own.")

(defun efrit-todo-efrit--own-session-p (name)
  "Return non-nil if the session NAME may go on in an Efrit command.
A shared list is reached through `efrit-todo-list-id', never taken over."
  (not (or (string-match-p efrit-todo-efrit-foreign-sessions name)
           (member name (efrit-todo-shared-lists)))))

(defun efrit-todo-efrit--take-over (id)
  "Let the Efrit session named ID go on with the list left open last.
Nothing happens when ID already works on a list, or when there is no
unfinished list or `efrit-todo-carry-over' says no.  Return the
efrit-todo session ID now works on."
  (let ((unfinished (and (not (gethash id efrit-todo-efrit--carried))
                         (null (efrit-todo-list id))
                         (efrit-todo-unfinished #'efrit-todo-efrit--own-session-p))))
    (when (and unfinished
               (not (equal (car unfinished) id))
               (efrit-todo-efrit--carry-over-p unfinished))
      (puthash id (car unfinished) efrit-todo-efrit--carried)
      (efrit-todo-resume (car unfinished))
      (message "Efrit-todo: %s goes on with the unfinished list of %s" id (car unfinished)))
    (efrit-todo-efrit--todo-session id)))

(defun efrit-todo-efrit--stop-reason (name stop-reason error-message)
  "Return why session NAME stopped, from Efrit's STOP-REASON and ERROR-MESSAGE."
  (let ((detail (and (stringp error-message) (not (string-empty-p error-message))
                     (concat ": " error-message))))
    (truncate-string-to-width
     (string-trim
      (pcase stop-reason
        ("interrupted" "interrupted by the user")
        ("circuit-breaker"
         (concat "stopped by the circuit breaker: " (or (efrit-todo-efrit--tripped name) "")))
        ("api-error" (concat "an API error" detail))
        ("elisp-error" (concat "an error in Emacs" detail))
        ((or "iteration-limit" "iteration-limit-exceeded") "the iteration limit was reached")
        ("end_turn"
         (if-let* ((pause (efrit-todo-pause-reason name)))
             (concat "paused by the model: " pause)
           "the model ended its turn with items still open"))
        ((pred stringp) (concat stop-reason detail))
        (_ (format "%S" stop-reason))))
     280 nil nil "...")))

(defun efrit-todo-efrit--note-stop (name stop-reason &optional error-message)
  "Note that session NAME's command stopped for STOP-REASON, ERROR-MESSAGE.
An allowed session_complete is no stop: the work is done.  Any other
stop with items open leaves the list for the next command."
  ;; A command on a shared list leaves it to the others once Efrit has
  ;; shown its outcome (`efrit-todo-efrit--stopped-do'), rather than as
  ;; a list to go on with.
  (unless (or (equal stop-reason "session-complete") (efrit-todo-efrit--agent-on name))
    (condition-case err
        (efrit-todo-stop (efrit-todo-efrit--stop-reason name stop-reason error-message) name)
      (error (message "Efrit-todo: could not note the stop of %s: %s"
                      name (error-message-string err))))))

(defun efrit-todo-efrit--stopping-do (session stop-reason &optional error-message &rest _)
  "Note that efrit-do SESSION stops for STOP-REASON, with ERROR-MESSAGE.
Every stop of Efrit's async loop passes here, API errors included."
  (efrit-todo-efrit--note-stop (efrit-todo-efrit--name session) stop-reason error-message))

(defun efrit-todo-efrit--stopped-do (session &rest _)
  "Leave the shared list efrit-do SESSION worked on, if it did.
Its outcome has been shown by then."
  (efrit-todo-efrit--leave (efrit-todo-efrit--name session)))

(defun efrit-todo-efrit--stopping-repl (session stop-reason &rest _)
  "Note that the turn of REPL SESSION ends for STOP-REASON."
  (efrit-todo-efrit--note-stop (efrit-todo-efrit--name session) stop-reason))

(defun efrit-todo-efrit--note-exit ()
  "Mark the running Efrit command stopped, as Emacs is closing.
Run from `kill-emacs-hook' before the lists are saved, so that the
next Emacs goes on with the list."
  (when (and efrit-todo-efrit--in-use (fboundp 'efrit-session-active) (efrit-session-active))
    (efrit-todo-efrit--note-stop (efrit-todo-efrit--running-session)
                                 "Emacs was closed while the command ran"))
  (dolist (list (hash-table-keys efrit-todo-efrit--agents))
    (efrit-todo-efrit--leave list)))

(defun efrit-todo-efrit--taken-p (id)
  "Return non-nil if session ID is in use by Efrit or efrit-todo."
  (or (member id (efrit-todo-sessions))
      (and (fboundp 'efrit-session-get) (efrit-session-get id))))

(defun efrit-todo-efrit--create-session (create id command)
  "Call CREATE with a unique form of ID and COMMAND; make it current.
Efrit names sessions after the second they start in, so two commands
in one second would share a list; a suffix keeps them apart.  In a
buffer whose `efrit-todo-list-id' names a shared list, the command
works on that list."
  (let ((unique id)
        (n 1)
        (list-id (efrit-todo-buffer-list-id)))
    (while (efrit-todo-efrit--taken-p unique)
      (setq n (1+ n)
            unique (format "%s-%d" id n)))
    (prog1 (funcall create unique command)
      (if list-id
          ;; Started in a buffer that names a shared list: the command
          ;; works on it, and takes over no other list.
          (progn (puthash unique (efrit-todo-share-list list-id) efrit-todo-efrit--carried)
                 (setq efrit-todo-current-session list-id)
                 (efrit-todo-efrit--join list-id))
        ;; Set before Efrit empties its todo variables, so that emptying
        ;; reaches the new session and not the one that just finished;
        ;; a list taken over is made current at the first request.
        (setq efrit-todo-current-session unique)
        (efrit-todo-efrit--take-over unique)))))

(defun efrit-todo-efrit--begin-repl-turn (session)
  "Start a turn of REPL SESSION: fresh breaker and ledger, same list.
A turn after one that stopped with items open goes on with them, and
a new REPL session may take over a list a command left open."
  (let ((name (efrit-todo-efrit--name session)))
    (if (efrit-todo-stopped name)
        (progn (efrit-todo-begin-turn name)
               (efrit-todo-resume name))
      (setq name (efrit-todo-efrit--take-over (efrit-repl-session-id session)))
      (unless (efrit-todo-stopped name)
        (efrit-todo-begin-turn name)))
    (setq efrit-todo-current-session name)))

;;;; Tools

(defun efrit-todo-efrit--for-efrit (text)
  "Return TEXT with efrit-todo's error lines in the form Efrit detects.
Efrit flags a result as an error when a line starts with \"Error \"."
  (replace-regexp-in-string "^Error: " "Error from efrit-todo: " text t t))

(defun efrit-todo-efrit--error-result-p (result)
  "Return non-nil if tool RESULT reports an error, as Efrit's results do."
  (and (stringp result)
       (string-match-p "\\`[ \t\n]*\\[?Error\\b" result)))

(defun efrit-todo-efrit--completion-p (result)
  "Return non-nil if RESULT is an allowed session_complete."
  (and (stringp result) (string-match-p "\\[SESSION-COMPLETE: " result)))

(defun efrit-todo-efrit--execute-tool (execute tool-item)
  "Run TOOL-ITEM through EXECUTE between the breaker and the ledger.
Efrit's own breaker and error-loop checks are off for the call."
  (if (not (hash-table-p tool-item))
      (funcall execute tool-item)
    (let* ((efrit-todo-current-session (efrit-todo-efrit--running-session))
           (efrit-todo-agent (or (efrit-todo-efrit--agent-on efrit-todo-current-session)
                                 efrit-todo-agent))
           (name (gethash "name" tool-item))
           (input (gethash "input" tool-item))
           (refusal (and (stringp name) (efrit-todo-before-tool name input))))
      (if refusal
          (efrit-todo-efrit--for-efrit refusal)
        (let* ((start (float-time))
               (result (let ((efrit-todo-efrit--binding-efrit t))
                         (let ((efrit-do-circuit-breaker-enabled nil)
                               (efrit-do-error-loop-auto-complete nil)
                               (efrit-do-max-same-error-occurrences most-positive-fixnum))
                           (funcall execute tool-item)))))
          (if (or (not (stringp name)) (efrit-todo-efrit--completion-p result))
              result
            (efrit-todo-efrit--for-efrit
             (condition-case err
                 (efrit-todo-after-tool name input result
                                        (efrit-todo-efrit--error-result-p result)
                                        nil (- (float-time) start))
               (efrit-todo-invalid-input
                (format "%s\n[efrit-todo could not record this call: %s]"
                        result (cadr err)))))))))))

(defconst efrit-todo-efrit--own-tools
  (cons "todo_pause" efrit-todo-task-tool-names)
  "The tools efrit-todo runs itself; Efrit has no handler for them.
todo_write keeps Efrit's handler, which the mode overrides.")

(defun efrit-todo-efrit--dispatch-tool (dispatch tool-name tool-input input-str)
  "Run todo_pause and the Task tools here; pass any other TOOL-NAME to DISPATCH.
TOOL-INPUT and INPUT-STR are as Efrit's dispatcher receives them.
Every Task tool runs, whatever `efrit-todo-tool-style' offers now:
the model may call a tool a request offered before the style changed."
  (if (member tool-name efrit-todo-efrit--own-tools)
      (condition-case err
          (efrit-todo-efrit--acting (efrit-todo-efrit--running-session)
            (efrit-todo--run-tool tool-name (if (hash-table-p tool-input)
                                                tool-input
                                              (make-hash-table :test 'equal))))
        (efrit-todo-invalid-input (format "Error in %s: %s" tool-name (cadr err))))
    (funcall dispatch tool-name tool-input input-str)))

(defun efrit-todo-efrit--todo-write (tool-input)
  "Efrit's todo_write handler, on `efrit-todo-write' with TOOL-INPUT."
  (condition-case err
      (efrit-todo-efrit--acting (efrit-todo-efrit--running-session)
        (efrit-todo-write tool-input))
    (efrit-todo-invalid-input (format "Error in todo_write: %s" (cadr err)))))

(defun efrit-todo-efrit--session-complete (tool-input)
  "Efrit's session_complete handler, guarded by `efrit-todo-complete'.
TOOL-INPUT holds the model's message.  When completion is allowed the
marker Efrit looks for carries the short confirmation, which is what
goes back to the model; the whole report is kept for the places the
user looks, where the end of the session puts it."
  (let* ((message (or (and (hash-table-p tool-input) (gethash "message" tool-input))
                      "Task completed"))
         (message (if (stringp message) message (format "%s" message)))
         (session (efrit-todo--session nil))
         (answer (condition-case err
                     (efrit-todo-efrit--acting session (efrit-todo-complete message))
                   (efrit-todo-invalid-input
                    (list :allowed nil :text (format "Error in session_complete: %s"
                                                     (cadr err)))))))
    (if (not (plist-get answer :allowed))
        (let ((text (plist-get answer :text)))
          (if (string-prefix-p "Error" text) text (concat "Error from efrit-todo: " text)))
      (let ((report (string-trim-right (plist-get answer :text))))
        (puthash session report efrit-todo-efrit--final-reports)
        (puthash session message efrit-todo-efrit--completion-messages)
        (format "\n[SESSION-COMPLETE: %s]" (plist-get answer :model-text))))))

(defun efrit-todo-efrit--tools-schema (schemas)
  "Return Efrit's tool SCHEMAS with efrit-todo's in place of its own.
efrit-todo's are the tools of `efrit-todo-tool-style'; Efrit's
todo_write is left out when the style does not offer it.  A fresh
vector: Efrit's constant is never changed."
  (let* ((ours (efrit-todo-tool-schemas))
         (name (lambda (schema) (cdr (assoc "name" schema))))
         (by-name (mapcar (lambda (s) (cons (funcall name s) s)) ours))
         (left-out (seq-remove (lambda (tool) (assoc tool by-name))
                               (cons "todo_write" efrit-todo-efrit--own-tools)))
         (kept (delq nil
                     (mapcar (lambda (s)
                               (let ((tool (funcall name s)))
                                 (and (not (member tool left-out))
                                      (or (cdr (assoc tool by-name)) s))))
                             (append schemas nil))))
         (present (mapcar name kept)))
    (vconcat kept (seq-remove (lambda (s) (member (funcall name s) present)) ours))))

;;;; The system prompt

(defun efrit-todo-efrit--quiet-prompt (&rest _)
  "Return \"\" while Efrit's prompt is built, which gets the richer guidance."
  (and efrit-todo-efrit--building-prompt ""))

(defvar efrit-todo-efrit--prompt-suggestions (make-hash-table :test 'equal)
  "The plan suggestion of each Efrit session's prompt, or `none', by id.
Decided at the session's first request and kept, so that the system
prompt stays the same on every request and the prompt cache holds.")

(defun efrit-todo-efrit--stable-suggestion (id session)
  "Return the plan suggestion of Efrit session ID's prompt, always the same.
SESSION is the efrit-todo session it works on."
  (let ((known (gethash id efrit-todo-efrit--prompt-suggestions)))
    (unless known
      (setq known (or (efrit-todo-efrit--plan-suggestion id session) 'none))
      (puthash id known efrit-todo-efrit--prompt-suggestions))
    (and (stringp known) known)))

(defun efrit-todo-efrit--plan-suggestion (id session)
  "Return the suggestion to plan for Efrit session ID's first request, or nil.
SESSION is the efrit-todo session it works on."
  (when (and efrit-todo-efrit-suggest-plan
             (null (efrit-todo-list session))
             (null (efrit-todo-ledger session))
             (fboundp 'efrit-session-active)
             (efrit-session-active)
             (equal (efrit-session-id (efrit-session-active)) id))
    (let* ((command (efrit-session-command (efrit-session-active)))
           (analysis (and (stringp command)
                          (ignore-errors (efrit-todo-analyze-request command)))))
      (and (plist-get analysis :complex)
           (plist-get analysis :suggestion)))))

(defconst efrit-todo-efrit--tasks-note
  "In this session the planning tools are TaskCreate, TaskUpdate, TaskGet and TaskList; todo_write is not offered. Where the instructions or tool descriptions above say todo_write, use TaskCreate to plan and TaskUpdate to record progress."
  "What the prompt says in the style `tasks'.
efrit-todo's own texts name the tools of the style, but Efrit's
system prompt asks for todo_write in its own words (its task
management section, its examples, the description of eval_sexp),
and efrit-todo does not rewrite Efrit's text: this note says what
stands for it.")

(defvar efrit-todo-efrit--prompt-notes (make-hash-table :test 'equal)
  "The tool-style note of each Efrit session's prompt, or `none', by id.
Decided at the session's first request and kept, as the suggestion is.")

(defun efrit-todo-efrit--stable-note (id)
  "Return the tool-style note of Efrit session ID's prompt, always the same."
  (let ((known (gethash id efrit-todo-efrit--prompt-notes)))
    (unless known
      (setq known (if (eq efrit-todo-tool-style 'tasks) efrit-todo-efrit--tasks-note 'none))
      (puthash id known efrit-todo-efrit--prompt-notes))
    (and (stringp known) known)))

(defun efrit-todo-efrit--system-prompt (build &rest args)
  "Call BUILD with ARGS and add the todo guidance to its prompt.
The fourth of ARGS is Efrit's session id.  What is added is the same
on every request of a session (see `efrit-todo-prompt-guidance'):
Efrit marks the system prompt as a cache breakpoint, and a prompt
that changed would make every request pay for the whole
conversation again."
  (let* ((prompt (let ((efrit-todo-efrit--building-prompt t))
                   (apply build args)))
         (id (or (nth 3 args) (efrit-todo-efrit--running-session)))
         (session (efrit-todo-efrit--todo-session id))
         (guidance (condition-case nil
                       (efrit-todo-efrit--acting session (efrit-todo-prompt-guidance session))
                     (error nil)))
         (suggestion (efrit-todo-efrit--stable-suggestion id session))
         (note (efrit-todo-efrit--stable-note id)))
    ;; A session that took over a list works on it from its first request.
    (unless (equal id session)
      (setq efrit-todo-current-session session))
    (mapconcat #'identity (delq nil (list prompt guidance note suggestion)) "\n\n")))

;;;; Ending a session

(defun efrit-todo-efrit--note-response (session _adapter response)
  "Keep the content of RESPONSE when it ends SESSION's turn."
  (when (and (hash-table-p response)
             (equal (gethash "stop_reason" response) "end_turn"))
    (puthash session (gethash "content" response) efrit-todo-efrit--end-turn-content)))

(defun efrit-todo-efrit--tripped (name)
  "Return the reason the breaker of session NAME tripped, or nil."
  (let ((breaker (efrit-todo-efrit--acting name (efrit-todo-breaker name))))
    (and (plist-get breaker :tripped) (plist-get breaker :reason))))

(defun efrit-todo-efrit--outcome (name stop-reason)
  "Return the text for the user when session NAME stopped for STOP-REASON."
  (let ((report (or (gethash name efrit-todo-efrit--final-reports)
                    (efrit-todo-efrit--acting name (efrit-todo-report name))))
        (tripped (efrit-todo-efrit--tripped name)))
    (cond (tripped (format "Stopped by the circuit breaker: %s\n\n%s" tripped report))
          ((member stop-reason '("end_turn" "session-complete")) report)
          (t (format "Session ended: %s\n\n%s" stop-reason report)))))

(defun efrit-todo-efrit--stop-if-tripped (session continue finish)
  "Call CONTINUE on SESSION, or FINISH it when its breaker tripped."
  (let* ((name (efrit-todo-efrit--name session))
         (reason (efrit-todo-efrit--tripped name)))
    (if (not reason)
        (funcall continue session)
      (message "Efrit-todo: circuit breaker tripped in %s: %s" name reason)
      (funcall finish session "circuit-breaker"
               (efrit-todo-efrit--outcome name "circuit-breaker") nil))))

(defun efrit-todo-efrit--continue-do (continue session)
  "Run CONTINUE on efrit-do SESSION unless its breaker tripped."
  (efrit-todo-efrit--stop-if-tripped session continue #'efrit-do-async--finish))

(defun efrit-todo-efrit--continue-repl (continue session)
  "Run CONTINUE on REPL SESSION unless its breaker tripped."
  (efrit-todo-efrit--stop-if-tripped session continue #'efrit-repl-loop--finish))

(defun efrit-todo-efrit--continuation (session)
  "Return the continuation message for SESSION's end_turn, or nil.
Nil as well when the end_turn had no content: a reply to an empty
assistant message would not be a valid request."
  (let ((content (gethash session efrit-todo-efrit--end-turn-content)))
    (remhash session efrit-todo-efrit--end-turn-content)
    (and (> (length content) 0)
         (let ((name (efrit-todo-efrit--name session)))
           (efrit-todo-efrit--acting name (efrit-todo-turn-end nil name))))))

(defun efrit-todo-efrit--finish-do (finish session stop-reason error-message
                                           completion-message)
  "FINISH efrit-do SESSION, or send a continuation after its end_turn.
STOP-REASON, ERROR-MESSAGE and COMPLETION-MESSAGE are Efrit's.  The
agent buffer shows the report in place of the bare message."
  (let ((content (gethash session efrit-todo-efrit--end-turn-content))
        (continuation (and (equal stop-reason "end_turn")
                           (efrit-todo-efrit--continuation session))))
    (if continuation
        (progn
          (efrit-session-add-assistant-response session content)
          (efrit-session-add-tool-results
           session (list `((type . "text") (text . ,continuation))))
          (efrit-do-async--continue-iteration session))
      (funcall finish session stop-reason error-message
               (efrit-todo-efrit--shown-message session stop-reason
                                                completion-message)))))

(defun efrit-todo-efrit--shown-message (session stop-reason completion-message)
  "Return the final message of SESSION for the agent buffer.
STOP-REASON and COMPLETION-MESSAGE are Efrit's.  After
session_complete that is the report; after an end_turn that followed
tool calls, the report too, since Efrit would show no result at all."
  (let ((name (efrit-todo-efrit--name session)))
    (pcase stop-reason
      ("session-complete"
       (or (gethash name efrit-todo-efrit--final-reports) completion-message))
      ("end_turn"
       (or completion-message
           (and (efrit-todo-ledger name) (efrit-todo-efrit--outcome name stop-reason))))
      (_ completion-message))))

(defun efrit-todo-efrit--finish-repl (finish session stop-reason error-message
                                             completion-message)
  "FINISH REPL SESSION's turn, or send a continuation after its end_turn.
STOP-REASON, ERROR-MESSAGE and COMPLETION-MESSAGE are Efrit's.  The
REPL has already stored the assistant's reply."
  (let ((continuation (and (equal stop-reason "end_turn")
                           (efrit-todo-efrit--continuation session))))
    (if continuation
        (progn
          (efrit-repl-session-add-user-message session continuation)
          (efrit-repl-loop--continue-iteration session))
      (funcall finish session stop-reason error-message
               (if (equal stop-reason "session-complete")
                   (or (gethash (efrit-todo-efrit--name session)
                                efrit-todo-efrit--final-reports)
                       completion-message)
                 completion-message)))))

(defun efrit-todo-efrit--on-async-complete (session stop-reason)
  "Show the report of efrit-do SESSION, which stopped for STOP-REASON.
This replaces Efrit's summary of steps cut to 80 characters: the report
keeps every tool result, and is what later prompts see as the last
result."
  (let* ((name (efrit-todo-efrit--name session))
         (command (efrit-session-command session))
         (succeeded (and (member stop-reason '("end_turn" "session-complete"))
                         (not (efrit-todo-efrit--tripped name))))
         ;; With no tool call and no list there is nothing to report:
         ;; Efrit's own line, not a report of nothing (which Efrit also
         ;; copies into *Messages* when the command failed).
         (text (if (and (not succeeded)
                        (null (efrit-todo-ledger name))
                        (zerop (efrit-todo--item-count name)))
                   (format "Session ended: %s" stop-reason)
                 (efrit-todo-efrit--outcome name stop-reason))))
    (setq efrit-do--last-result text)
    (when (fboundp 'efrit-do--capture-context)
      (efrit-do--capture-context command (efrit-todo-efrit--context-text name stop-reason)))
    (when (fboundp 'efrit-do--display-result)
      (efrit-do--display-result command text (not succeeded)))
    (message "Efrit-todo: session %s %s" name
             (if succeeded "completed" (format "stopped (%s)" stop-reason)))
    (when (and succeeded (fboundp 'efrit-do-queue-pop-command))
      (when-let* ((next (efrit-do-queue-pop-command)))
        (run-at-time 0.1 nil #'efrit-do next)))))

(defcustom efrit-todo-efrit-context-max-chars 2000
  "Most characters of a session's outcome kept as context for the next command.
Efrit puts the last result into the system prompt of the next
command; the whole report of a long session would make each of its
requests dearer, so the context gets the todo summary and the
completion message, cut to this length."
  :type 'natnum
  :group 'efrit-todo)

(defun efrit-todo-efrit--context-text (name stop-reason)
  "Return the outcome of session NAME, stopped for STOP-REASON, in brief.
It names the open items with their ids, at most ten, and ends with
the model's completion message; see `efrit-todo-efrit-context-max-chars'."
  (let* ((counts (efrit-todo-counts name))
         (open (efrit-todo--open-items-text name))
         (message (gethash name efrit-todo-efrit--completion-messages))
         (text (concat
                (format "Session %s (%s). Todo list: %d/%d done."
                        name (or (efrit-todo-efrit--tripped name) stop-reason)
                        (plist-get counts :completed) (plist-get counts :total))
                (unless (string-empty-p open)
                  (concat " Left open: " open "."))
                (and message (concat "\n" (string-trim message))))))
    (truncate-string-to-width text efrit-todo-efrit-context-max-chars nil nil "...")))

;;;; efrit-execute

(defvar efrit-todo-efrit--sync-session nil
  "The efrit-todo session of the running `efrit-execute', if any.")

(defun efrit-todo-efrit--execute (execute command)
  "Run EXECUTE on COMMAND; return the report in place of its last text.
A nil or empty result thus never becomes a generic success message."
  (let* ((efrit-todo-efrit--sync-session nil)
         (result (condition-case err
                     (funcall execute command)
                   (quit
                    (when efrit-todo-efrit--sync-session
                      (efrit-todo-efrit--note-stop efrit-todo-efrit--sync-session "interrupted"))
                    (signal (car err) (cdr err)))))
         (name (or efrit-todo-efrit--sync-session efrit-todo-current-session)))
    (if (and name (member name (efrit-todo-sessions)))
        (let ((stop-reason (cond ((efrit-todo-efrit--tripped name) "circuit-breaker")
                                 ((gethash name efrit-todo-efrit--final-reports) "session-complete")
                                 (t "end_turn"))))
          (efrit-todo-efrit--note-stop name stop-reason)
          (prog1 (efrit-todo-efrit--outcome name stop-reason)
            (efrit-todo-efrit--leave name)))
      result)))

(defun efrit-todo-efrit--sync-api-call (call request-data)
  "CALL the API with REQUEST-DATA unless the running session is over.
After a trip or an allowed session_complete, answer with an empty
end_turn so Efrit's synchronous loop stops without a request."
  (let ((name (efrit-todo-efrit--running-session)))
    (setq efrit-todo-efrit--sync-session name)
    (if (or (efrit-todo-efrit--tripped name)
            (gethash name efrit-todo-efrit--final-reports))
        (let ((response (make-hash-table :test 'equal)))
          (puthash "content" [] response)
          (puthash "stop_reason" "end_turn" response)
          response)
      (funcall call request-data))))

(defun efrit-todo-efrit--finalize-executor (finalize session result-text complete-p
                                                    completion-message work-log callback)
  "Call FINALIZE; once the executor's SESSION is over, CALLBACK gets the report.
RESULT-TEXT, COMPLETE-P, COMPLETION-MESSAGE and WORK-LOG are the
executor's.  Its async path would pass on only the text of the last
response, losing the output of every earlier tool."
  (let* ((name (if session (efrit-session-id session) (efrit-todo-efrit--running-session)))
         (final (and callback (or complete-p (not session))
                     (member name (efrit-todo-sessions))))
         (callback (if final
                       (lambda (_result)
                         (funcall callback (efrit-todo-efrit--outcome
                                            name (if (efrit-todo-efrit--tripped name)
                                                     "circuit-breaker"
                                                   "end_turn"))))
                     callback)))
    (funcall finalize session result-text complete-p completion-message work-log callback)))

;;;; Efrit's own breaker settings

(defconst efrit-todo-efrit--efrit-limits
  '((efrit-todo-breaker-without-progress . efrit-do-max-tool-calls-per-session)
    (efrit-todo-breaker-same-tool . efrit-do-max-same-tool-calls)
    (efrit-todo-breaker-identical . efrit-do-max-identical-tool-calls)
    (efrit-todo-breaker-error-warn . efrit-do-max-same-error-occurrences)
    (efrit-todo-breaker-error-trip . efrit-do-error-loop-auto-complete))
  "Each efrit-todo breaker option and the Efrit setting it follows.")

(defconst efrit-todo-efrit--switched-off-with-efrit
  '(efrit-todo-breaker-without-progress efrit-todo-breaker-same-tool
    efrit-todo-breaker-identical)
  "The limits `efrit-do-circuit-breaker-enabled' nil turns off.")

(defun efrit-todo-efrit--set-by-user-p (variable value)
  "Return non-nil if VALUE of VARIABLE differs from its standard value."
  (let ((standard (get variable 'standard-value)))
    (and standard
         (not (equal value (condition-case nil (eval (car standard) t) (error value)))))))

(defun efrit-todo-efrit--efrit-value (variable)
  "Return (VALUE) of Efrit's VARIABLE when its user set it, else nil.
While the adapter binds it, the value outside any `let'."
  (when (boundp variable)
    (let ((value (if efrit-todo-efrit--binding-efrit
                     (default-toplevel-value variable)
                   (symbol-value variable))))
      (and (efrit-todo-efrit--set-by-user-p variable value) (list value)))))

(defun efrit-todo-efrit--option-value (option value)
  "Return the value in effect of loop OPTION, whose own value is VALUE.
An OPTION the user set wins; else the Efrit setting it follows, when
the user set that (nil or 0 there turns the rule off); else VALUE."
  (let ((efrit (cdr (assq option efrit-todo-efrit--efrit-limits))))
    (cond ((efrit-todo-efrit--set-by-user-p option value) value)
          ((and (memq option efrit-todo-efrit--switched-off-with-efrit)
                (equal (efrit-todo-efrit--efrit-value 'efrit-do-circuit-breaker-enabled) '(nil)))
           0)
          ((and efrit (efrit-todo-efrit--efrit-value efrit))
           (let ((theirs (car (efrit-todo-efrit--efrit-value efrit))))
             (if (natnump theirs) theirs 0)))
          (t value))))

(defun efrit-todo-efrit--efrit-setting-changed (_symbol _value _operation _where)
  "Forget the loop options: the user changed one of Efrit's settings.
The adapter's own bindings of them are not the user's, and ignored."
  (unless efrit-todo-efrit--binding-efrit
    (setq efrit-todo--loop-options nil)))

(defconst efrit-todo-efrit--efrit-settings
  (cons 'efrit-do-circuit-breaker-enabled (mapcar #'cdr efrit-todo-efrit--efrit-limits))
  "Efrit's settings the breaker follows.")

;;;; The mode

(defun efrit-todo-efrit--suspend-efrit-ui (&rest _)
  "Remove the advice that draws Efrit's own todo buffer and mode line."
  (dolist (advice efrit-todo-efrit--efrit-ui-advice)
    (when (advice-member-p advice 'efrit-do--handle-todo-write)
      (advice-remove 'efrit-do--handle-todo-write advice)
      (unless (memq advice efrit-todo-efrit--suspended)
        (push advice efrit-todo-efrit--suspended)))))

(defun efrit-todo-efrit--check-feature ()
  "Make the feature `efrit-todo' efrit-todo's; signal a `user-error' if it fails.
Efrit has a file of the same name, which may have been loaded (again)
since this file was."
  (unless (efrit-todo-shadow-ensure)
    (user-error "Efrit-todo: the feature `efrit-todo' came from %s, Efrit's own file, and efrit-todo's could not replace it; put efrit-todo's directory (%s) before Efrit's in `load-path' and restart Emacs"
                (or (car (seq-find (lambda (entry) (member '(provide . efrit-todo) (cdr entry)))
                                   load-history))
                    "another file")
                efrit-todo-shadow--directory)))

(defun efrit-todo-efrit--alias-efrit-variables ()
  "Make Efrit's todo variables the names of efrit-todo's, as efrit-do.el does.
Efrit's handlers read the list through them even when efrit-do.el,
which makes the aliases, is not loaded."
  (pcase-dolist (`(,name . ,base) '((efrit-do--current-todos . efrit-todo--current-todos)
                                    (efrit-do--todo-counter . efrit-todo--counter)))
    (unless (eq (indirect-variable name) base)
      ;; A value set before is Efrit's stale copy: the module holds the list.
      (makunbound name)
      (defvaralias name base))))

(defun efrit-todo-efrit--enable ()
  "Add the advice; save the values to restore later."
  ;; A package install compiled efrit-todo without asking: ask now.
  (efrit-todo-build-offer)
  (setq efrit-todo-efrit--in-use (efrit-todo-build-module-loaded-p))
  (efrit-todo-efrit--check-feature)
  (efrit-todo-efrit--alias-efrit-variables)
  (setq efrit-todo-efrit--saved
        `((efrit-todo-current-session . ,efrit-todo-current-session)
          (efrit-todo-known-tools . ,efrit-todo-known-tools)))
  (when (boundp 'efrit-do--tool-dispatch-table)
    (setq efrit-todo-known-tools
          (seq-uniq (append efrit-todo-known-tools
                            (mapcar #'car efrit-do--tool-dispatch-table)))))
  ;; Named after ADVICE, so that `advice-remove' and `advice-member-p'
  ;; know it by that name.
  (pcase-dolist (`(,function ,how ,advice) efrit-todo-efrit--advice)
    (advice-add function :around (efrit-todo-efrit--guarded function how advice)
                `((depth . 100) (name . ,advice))))
  (efrit-todo-efrit--suspend-efrit-ui)
  ;; Efrit's UI file adds its advice when it is loaded, maybe later.
  (add-hook 'after-load-functions #'efrit-todo-efrit--suspend-efrit-ui)
  ;; Before the lists are saved on exit (depth 90).
  (add-hook 'kill-emacs-hook #'efrit-todo-efrit--note-exit 50)
  (setq efrit-todo--loop-option-function #'efrit-todo-efrit--option-value
        efrit-todo--loop-options nil)
  (dolist (variable efrit-todo-efrit--efrit-settings)
    (add-variable-watcher variable #'efrit-todo-efrit--efrit-setting-changed))
  (efrit-todo--hold-mode-line 'efrit-todo-efrit-mode t))

(defun efrit-todo-efrit--disable ()
  "Remove the advice and restore what the mode changed."
  (pcase-dolist (`(,function ,_how ,advice) efrit-todo-efrit--advice)
    (advice-remove function advice))
  (remove-hook 'after-load-functions #'efrit-todo-efrit--suspend-efrit-ui)
  (remove-hook 'kill-emacs-hook #'efrit-todo-efrit--note-exit)
  (dolist (variable efrit-todo-efrit--efrit-settings)
    (remove-variable-watcher variable #'efrit-todo-efrit--efrit-setting-changed))
  (setq efrit-todo--loop-option-function nil
        efrit-todo--loop-options nil)
  (dolist (advice efrit-todo-efrit--suspended)
    (advice-add 'efrit-do--handle-todo-write :after advice))
  (setq efrit-todo-efrit--suspended nil)
  (pcase-dolist (`(,symbol . ,value) efrit-todo-efrit--saved)
    (set symbol value))
  (setq efrit-todo-efrit--saved nil)
  (efrit-todo--hold-mode-line 'efrit-todo-efrit-mode nil))

;;;###autoload
(define-minor-mode efrit-todo-efrit-mode
  "Run Efrit's todo tools, circuit breaker and results on efrit-todo.

While it is on, Efrit's `efrit-do', its REPL and `efrit-execute' use
efrit-todo for todo_write, todo_pause and the Task tools (those of
`efrit-todo-tool-style' are offered), check every tool call with
its breaker (a trip ends the session at once, with the report),
guard session_complete, ask Claude to go on when it stops with items
open, and show the report of every tool result at the end.  Turning
it off gives Efrit back exactly as it was.  Efrit need not be loaded
yet."
  :global t
  :group 'efrit-todo
  (if (not efrit-todo-efrit-mode)
      (efrit-todo-efrit--disable)
    (condition-case err
        (efrit-todo-efrit--enable)
      ;; Such as efrit-todo's module missing, when Efrit's efrit-todo.el
      ;; had to be replaced: the mode stays off, with nothing left on.
      (error
       (setq efrit-todo-efrit-mode nil)
       (efrit-todo-efrit--disable)
       (signal (car err) (cdr err))))))

(defun efrit-todo-efrit-unload-function ()
  "Turn the mode off before the file is unloaded."
  (efrit-todo-efrit-mode -1)
  nil)

(provide 'efrit-todo-efrit)

;; Local Variables:
;; package-lint-main-file: "efrit-todo.el"
;; End:

;;; efrit-todo-efrit.el ends here
