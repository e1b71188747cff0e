;;; efrit-todo-gptel.el --- Efrit-todo's todo list and breaker for gptel chats -*- lexical-binding: t; -*-

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

;; The efrit-todo backend for gptel (karthink/gptel) chats, loaded only
;; when asked for: `efrit-todo.el' never requires gptel, and this file
;; needs gptel only once it is loaded.
;;
;; - todo_write, todo_pause and the Task tools (TaskCreate, TaskUpdate,
;;   TaskGet, TaskList) are gptel tools (category "efrit-todo"), made
;;   from the same Rust schemas that validate their input; the preset
;;   offers those of `efrit-todo-tool-style';
;; - while `efrit-todo-gptel-mode' is on, every tool call of a request
;;   that offers todo_write or a Task tool passes `efrit-todo-before-tool' (a refusal
;;   is the call's result) and `efrit-todo-after-tool' (the output is
;;   kept, notices follow it), and a tripped breaker stops the request
;;   with its reason;
;; - a response that ends with items open gets a continuation message,
;;   at most `efrit-todo-gptel-max-continuations' per request, sent
;;   with the tools, system text, backend and model of the request
;;   that began the turn (a preset given with @efrit-todo included);
;; - each chat buffer is an efrit-todo session of its own, so the
;;   *efrit-todos* buffer, the mode line, history, undo and saving work
;;   as they do for Efrit; a request aborted with items open leaves
;;   them for the next request in that buffer;
;; - the gptel preset `efrit-todo' switches all of it on.
;;
;; Everything goes through gptel's documented hooks:
;; `gptel-prompt-transform-functions', `gptel-pre-tool-call-functions',
;; `gptel-post-tool-call-functions', `gptel-post-request-hook',
;; `gptel-pre-response-hook', `gptel-post-response-functions', plus
;; advice on `gptel-abort'.  Turning the mode off removes them, and
;; unloading this file removes the tools and the preset as well.
;;
;; It needs gptel 0.9.9.4 or later.  A gptel without the tool hooks
;; (0.9.9.4 had the pre-tool hook from its 21st commit on, the
;; post-tool hook from its 23rd) has a managed request's tools run
;; through copies that do the same checks around each call; the
;; system message is `gptel-system-prompt' since 0.9.9.5's successors,
;; `gptel--system-message' before.

;;; Code:

(require 'cl-lib)
(require 'seq)
(require 'subr-x)
(require 'efrit-todo-shadow)
;; Efrit's own efrit-todo.el may come first in `load-path', or may have
;; been loaded already: this package's must be the one in use.
(eval-and-compile (efrit-todo-shadow-ensure))
(require 'efrit-todo)
(require 'efrit-todo-ui nil t)

;; gptel's variables and functions, used only once gptel is loaded.
(defvar gptel-tools)
(defvar gptel-use-tools)
(defvar gptel-version)
(defvar gptel-backend)
(defvar gptel-model)
(defvar gptel-prompt-transform-functions)
(defvar gptel-pre-tool-call-functions)
(defvar gptel-post-tool-call-functions)
(defvar gptel-post-request-hook)
(defvar gptel-pre-response-hook)
(defvar gptel-post-response-functions)
(defvar gptel--known-tools)
(defvar gptel--known-presets)
(declare-function gptel-make-tool "gptel-request" (&rest slots))
(declare-function gptel-make-preset "gptel" (name &rest keys))
(declare-function gptel-tool-name "gptel-request" (tool))
(declare-function gptel-tool-function "gptel-request" (tool))
(declare-function gptel-tool-args "gptel-request" (tool))
(declare-function gptel-tool-async "gptel-request" (tool))
(declare-function gptel-fsm-info "gptel-request" (fsm))
(declare-function gptel-send "gptel" (&optional arg))
(declare-function gptel-abort "gptel-request" (buf))
(declare-function gptel-get-tool "gptel-request" (path))
(declare-function gptel-make-fsm "gptel-request" (&rest slots))

;; The agent-teams API of efrit-todo.el.
(defvar efrit-todo-agent)
(declare-function efrit-todo-agent-start "efrit-todo" (type &optional session peer))
(declare-function efrit-todo-agent-end "efrit-todo" (name &optional session))

(defgroup efrit-todo-gptel nil
  "Efrit-todo's todo tools, breaker and continuation in gptel chats."
  :group 'efrit-todo
  :prefix "efrit-todo-gptel-")

(defcustom efrit-todo-gptel-max-continuations 2
  "Most continuation messages sent after one request of the user.
When a response ends with todo items open and no todo_pause, the
model is asked to go on, in a message added to the chat buffer and
sent, at most this many times before the user writes again (and no
more than `efrit-todo-max-continuations' allows).  0 sends none."
  :type 'natnum
  :group 'efrit-todo-gptel)

(defcustom efrit-todo-gptel-guidance t
  "Non-nil to add efrit-todo's guidance to the system prompt.
The text, from `efrit-todo-prompt-guidance', says how to plan with
the tools of `efrit-todo-tool-style' and record changes by id; it
is the same on every request of a chat's turn, so the prompt cache
holds."
  :type 'boolean
  :group 'efrit-todo-gptel)

(defconst efrit-todo-gptel-tool-names
  (append '("todo_write" "todo_pause") efrit-todo-task-tool-names)
  "The names of the tools this file gives gptel.
All are registered; the preset offers those of `efrit-todo-tool-style'.")

(defconst efrit-todo-gptel--agent-todo-tool "TodoWrite"
  "The name of gptel-agent's todo tool, which efrit-todo serves.")

(defconst efrit-todo-gptel--planning-tools
  (append (list "todo_write" efrit-todo-gptel--agent-todo-tool) efrit-todo-task-tool-names)
  "The tools whose presence makes a request one that efrit-todo manages.")

(defconst efrit-todo-gptel--category "efrit-todo"
  "The category of efrit-todo's tools in gptel's tool registry.")

(defconst efrit-todo-gptel-minimum-gptel "0.9.9.4"
  "The oldest gptel version `efrit-todo-gptel-mode' works with.")

(defun efrit-todo-gptel--check-gptel-version ()
  "Signal a `user-error' unless the loaded gptel is recent enough.
See `efrit-todo-gptel-minimum-gptel'.  A gptel without
`gptel-version' predates it."
  (let ((version (and (boundp 'gptel-version) gptel-version)))
    (unless (and (stringp version)
                 (ignore-errors (version<= efrit-todo-gptel-minimum-gptel version)))
      (user-error "Efrit-todo needs gptel %s or later; this gptel is %s"
                  efrit-todo-gptel-minimum-gptel
                  (if (stringp version) version "older (it has no `gptel-version')")))))

(defun efrit-todo-gptel--system-variable ()
  "Return the variable of gptel's system message.
gptel 0.9.9.4 and 0.9.9.5 name it `gptel--system-message'; later
versions `gptel-system-prompt', the old name an alias of it."
  (if (boundp 'gptel--system-message)
      (indirect-variable 'gptel--system-message)
    'gptel-system-prompt))

;;;; Sessions: one per chat buffer

(defvar-local efrit-todo-gptel--session nil
  "The efrit-todo session of this chat buffer, once it has one.")
(put 'efrit-todo-gptel--session 'permanent-local t)

(defvar-local efrit-todo-gptel--fsm nil
  "The state of the request this buffer's managed request chain began with.")

(defvar-local efrit-todo-gptel--active nil
  "Non-nil from the start of a request that offers a planning tool to its end.")

(defvar-local efrit-todo-gptel--response-ok nil
  "Non-nil once the response to the latest request arrived.")

(defvar-local efrit-todo-gptel--ended nil
  "Why this buffer's request chain was stopped (breaker, abort), or nil.")

(defvar-local efrit-todo-gptel--blocked nil
  "The argument lists of the tool calls refused in the latest response.")

(defvar-local efrit-todo-gptel--continuations 0
  "Continuation messages sent since the user's last request.")

(defvar-local efrit-todo-gptel--continuing nil
  "Non-nil while a continuation message is being sent.")

(defvar-local efrit-todo-gptel--timer nil
  "The timer that sends a pending continuation message, or nil.")

(defvar-local efrit-todo-gptel--turn nil
  "The settings of the request that began this buffer's turn.
An alist of (VARIABLE . VALUE) for `efrit-todo-gptel--turn-settings',
as that request was made with them; its continuations are sent with
the same.")

(defun efrit-todo-gptel--turn-settings ()
  "Return the gptel options every request of a turn is sent with, as its first was.
A continuation is a request of its own, sent from the chat buffer: a
preset applied to the first request only (@efrit-todo in the prompt)
would not reach it, its todo_write would be an unknown tool, and a
system text or tool list that changes within a turn breaks the
provider's prompt cache."
  (list 'gptel-backend 'gptel-model (efrit-todo-gptel--system-variable)
        'gptel-tools 'gptel-use-tools))

(defvar efrit-todo-gptel--sub-agent nil
  "The name of the sub-agent whose request is being handled, or nil.
Bound around every handler of a sub-agent's request: gptel's hooks
run from them are not the lead's, and are left to the sub-agent's
own checked tools.")

(defvar efrit-todo-gptel--missing-checks nil
  "The checks the loaded gptel has no hook for: :pre, :post or both.
Set when the mode is turned on.")

(defvar efrit-todo-gptel--buffers (make-hash-table :test 'equal :weakness 'value)
  "The chat buffer of each session this file named, by session name.")

(defun efrit-todo-gptel--base-name (buffer)
  "Return the session name BUFFER would have: after its file, else its name."
  (concat "gptel:" (with-current-buffer buffer
                     (if buffer-file-name
                         (abbreviate-file-name buffer-file-name)
                       (buffer-name)))))

(defun efrit-todo-gptel-session (&optional buffer)
  "Return the efrit-todo session of the gptel chat BUFFER, naming it if new.
BUFFER defaults to the current buffer.  In a buffer whose
`efrit-todo-list-id' names a shared list, it is that list.  Else
the name follows the file the buffer visits, else the buffer's name,
so that a saved list comes back with the chat; a name another live
buffer uses gets a suffix.
The buffer's `efrit-todo-current-session' is set to it, so that the
efrit-todo commands run there act on the chat's list."
  (with-current-buffer (or buffer (current-buffer))
    (when (and (not efrit-todo-gptel--session) (efrit-todo-buffer-list-id))
      ;; The chat works on the shared list its buffer names.
      (setq efrit-todo-gptel--session (efrit-todo-share-list (efrit-todo-buffer-list-id))))
    (unless efrit-todo-gptel--session
      (let* ((base (efrit-todo-gptel--base-name (current-buffer)))
             (name base)
             (n 1))
        (while (let ((owner (gethash name efrit-todo-gptel--buffers)))
                 (and owner (buffer-live-p owner) (not (eq owner (current-buffer)))))
          (setq n (1+ n)
                name (format "%s<%d>" base n)))
        (puthash name (current-buffer) efrit-todo-gptel--buffers)
        (setq efrit-todo-gptel--session name)))
    (unless (equal efrit-todo-current-session efrit-todo-gptel--session)
      (setq-local efrit-todo-current-session efrit-todo-gptel--session))
    efrit-todo-gptel--session))

(defvar-local efrit-todo-gptel--peer nil
  "The agent this chat is on its shared list while a turn runs, or nil.
A chat whose `efrit-todo-list-id' names a shared list works on it as
an agent named after the chat buffer, from the first request of a
turn to the turn's end; `efrit-todo-agent' is that name in the chat
buffer meanwhile.")

(defun efrit-todo-gptel--agent-type ()
  "Return the agent name of the current chat on a shared list: its buffer's."
  (let ((name (string-trim (replace-regexp-in-string "[[:cntrl:]]+" " " (buffer-name)))))
    ;; Room for the -2 of a second agent of the name.
    (truncate-string-to-width (if (string-empty-p name) "chat" name) 90)))

(defun efrit-todo-gptel--join (session)
  "Make this chat an agent of the shared list SESSION for a turn."
  (efrit-todo-gptel--leave)
  (let ((name (efrit-todo-agent-start (efrit-todo-gptel--agent-type) session t)))
    (setq efrit-todo-gptel--peer name)
    (setq-local efrit-todo-agent name)
    (add-hook 'kill-buffer-hook #'efrit-todo-gptel--leave nil t)))

(defun efrit-todo-gptel--leave ()
  "End this chat's turn on its shared list: its open items are let go."
  (when efrit-todo-gptel--peer
    (let ((name efrit-todo-gptel--peer))
      (setq efrit-todo-gptel--peer nil)
      (kill-local-variable 'efrit-todo-agent)
      (condition-case err
          (efrit-todo-agent-end name (efrit-todo-gptel-session))
        (error (message "Efrit-todo: %s could not leave its shared list: %s"
                        name (error-message-string err)))))))

(defun efrit-todo-gptel--open-p (session)
  "Return non-nil if SESSION has pending or running items."
  (let ((counts (efrit-todo-counts session)))
    (> (+ (plist-get counts :pending) (plist-get counts :in-progress)) 0)))

(defun efrit-todo-gptel--note-stop (session reason)
  "Note that the request working on SESSION stopped for REASON.
With items open the list is kept for the next request of the chat.
A chat on a shared list leaves it to the other agents instead."
  (if efrit-todo-gptel--peer
      (efrit-todo-gptel--leave)
    (condition-case err
        (efrit-todo-stop (truncate-string-to-width reason 280 nil nil "...") session)
      (error (message "Efrit-todo: could not note the stop of %s: %s"
                      session (error-message-string err))))))

(defun efrit-todo-gptel--tripped (session)
  "Return the reason the breaker of SESSION tripped, or nil."
  (let ((breaker (efrit-todo-breaker session)))
    (and (plist-get breaker :tripped) (plist-get breaker :reason))))

;;;; The tools

(defun efrit-todo-gptel--plist (object)
  "Return OBJECT, a schema part with string-keyed alists, as plists.
Alists become plists with keyword keys, at every level; vectors and
other values stay as they are."
  (if (and (consp object) (consp (car object)) (stringp (caar object)))
      (cl-loop for (key . value) in object
               append (list (intern (concat ":" key)) (efrit-todo-gptel--plist value)))
    object))

(defun efrit-todo-gptel--args (input-schema)
  "Return gptel's argument list for a tool whose schema is INPUT-SCHEMA.
Each property becomes (:name NAME :type TYPE ...), with the rest of
its schema kept, and :optional t unless it is required."
  (let ((required (append (cdr (assoc "required" input-schema)) nil)))
    (mapcar (lambda (property)
              (let* ((spec (efrit-todo-gptel--plist (cdr property)))
                     (type (plist-get spec :type)))
                (append (list :name (car property)
                              :type (if (stringp type) (intern type) type))
                        (cl-loop for (key value) on spec by #'cddr
                                 unless (eq key :type) append (list key value))
                        (unless (member (car property) required) (list :optional t)))))
            (cdr (assoc "properties" input-schema)))))

(defun efrit-todo-gptel--arg-names (input-schema)
  "Return the keywords of INPUT-SCHEMA's properties, in order."
  (mapcar (lambda (property) (intern (concat ":" (car property))))
          (cdr (assoc "properties" input-schema))))

(defun efrit-todo-gptel--tool-input (keys values)
  "Return the tool input plist of KEYS and VALUES, without absent values.
gptel passes an argument the model left out as nil, and JSON false as
`:json-false'."
  (cl-loop for key in keys
           for value in values
           unless (memq value '(nil :null))
           append (list key value)))

(defun efrit-todo-gptel--run-tool (name input)
  "Run efrit-todo's tool NAME with INPUT, a plist, in the current chat's session."
  (condition-case err
      (efrit-todo--run-tool name input (efrit-todo-gptel-session))
    (efrit-todo-invalid-input (format "Error in %s: %s" name (cadr err)))))

(defun efrit-todo-gptel--tool-function (name keys)
  "Return the function for tool NAME, whose arguments are KEYS."
  (lambda (&rest values)
    (efrit-todo-gptel--run-tool name (efrit-todo-gptel--tool-input keys values))))

(defun efrit-todo-gptel--register-tools ()
  "Register efrit-todo's tools with gptel, from the Rust schemas.
Every tool of every style: a chat may name any of them in
`gptel-tools', and the preset picks those of `efrit-todo-tool-style'."
  (dolist (schema (let ((efrit-todo-tool-style 'both)) (efrit-todo-tool-schemas)))
    (let ((name (cdr (assoc "name" schema)))
          (input-schema (cdr (assoc "input_schema" schema))))
      (when (member name efrit-todo-gptel-tool-names)
        (gptel-make-tool
         :name name
         :function (efrit-todo-gptel--tool-function
                    name (efrit-todo-gptel--arg-names input-schema))
         :description (cdr (assoc "description" schema))
         :args (efrit-todo-gptel--args input-schema)
         :category efrit-todo-gptel--category
         :include t)))))

(defun efrit-todo-gptel--todo-tool-p (tool)
  "Return non-nil if TOOL, a gptel tool or its name, is a planning tool.
That is todo_write or a Task tool: a request offering one is managed."
  (member (if (stringp tool) tool (ignore-errors (gptel-tool-name tool)))
          efrit-todo-gptel--planning-tools))

;;;; Requests

(defun efrit-todo-gptel--add-guidance (system guidance)
  "Return the system prompt SYSTEM with GUIDANCE added at its end.
SYSTEM is a string, nil, or a list whose first element is the system
message; a function is left alone."
  (cond ((null system) guidance)
        ((stringp system) (concat system "\n\n" guidance))
        ((and (consp system) (or (null (car system)) (stringp (car system))))
         (cons (efrit-todo-gptel--add-guidance (car system) guidance) (cdr system)))
        (t system)))

(defun efrit-todo-gptel--begin-request (fsm tools)
  "Start managing the request of state FSM in this chat buffer.
TOOLS are the request's tools.  A request the user sent begins a
turn: fresh breaker, ledger and continuation budget, the same list,
and a list a stopped request left open is taken over.  A
continuation goes on with the turn.  Return the session."
  (let ((session (efrit-todo-gptel-session)))
    (unless (eq fsm efrit-todo-gptel--fsm)
      (setq efrit-todo-gptel--fsm fsm
            efrit-todo-gptel--active t
            efrit-todo-gptel--ended nil
            efrit-todo-gptel--response-ok nil
            efrit-todo-gptel--blocked nil)
      (setq-local efrit-todo-known-tools
                  (delq nil (mapcar (lambda (tool) (ignore-errors (gptel-tool-name tool)))
                                    tools)))
      (if efrit-todo-gptel--continuing
          (setq efrit-todo-gptel--continuing nil)
        (setq efrit-todo-gptel--continuations 0)
        (efrit-todo-gptel--cancel-timer)
        (if (member session (efrit-todo-shared-lists))
            ;; Other agents work on the list too: the chat's turn is an
            ;; agent of its own, its breaker and report its own.
            (efrit-todo-gptel--join session)
          (efrit-todo-begin-turn session)
          (when (efrit-todo-stopped session)
            (efrit-todo-resume session)))))
    session))

(defun efrit-todo-gptel--settings ()
  "Return the current buffer's turn settings as (VARIABLE . VALUE).
The settings are `efrit-todo-gptel--turn-settings', those bound."
  (cl-loop for variable in (efrit-todo-gptel--turn-settings)
           when (boundp variable)
           collect (cons variable (symbol-value variable))))

(defun efrit-todo-gptel--transform (fsm)
  "Prepare the request of state FSM, in gptel's prompt buffer.
A request that offers todo_write or a Task tool is managed: its chat
buffer's session begins a turn (or goes on with one).  The first
request of a turn gets the guidance at the end of its system prompt,
and its settings are kept for the continuations; a continuation,
sent with those settings, already has it."
  (let ((buffer (plist-get (gptel-fsm-info fsm) :buffer))
        (tools (and (bound-and-true-p gptel-use-tools) (bound-and-true-p gptel-tools))))
    (when (buffer-live-p buffer)
      (cond
       ;; Until the module is loaded, gptel runs as without efrit-todo;
       ;; once it is, from the next request on.
       ((or (not (efrit-todo-build-module-loaded-p))
            (not (seq-some #'efrit-todo-gptel--todo-tool-p tools)))
        (with-current-buffer buffer
          (unless (eq fsm efrit-todo-gptel--fsm)
            ;; The user wrote again: no continuation is due any more.
            (setq efrit-todo-gptel--active nil
                  efrit-todo-gptel--continuing nil
                  efrit-todo-gptel--turn nil)
            (efrit-todo-gptel--cancel-timer))))
       ;; Run twice for one request (once from the buffer's transforms,
       ;; once from the preset's): it is prepared already.
       ((eq fsm (buffer-local-value 'efrit-todo-gptel--fsm buffer)))
       (t
        ;; An agent that plans is offered the tools of the style.
        (let ((offered (efrit-todo-gptel--with-style-tools tools)))
          (unless (equal offered tools)
            (setq tools (setq-local gptel-tools offered))))
        (let* ((continuation (and (buffer-local-value 'efrit-todo-gptel--continuing buffer)
                                  (buffer-local-value 'efrit-todo-gptel--turn buffer)))
               (session (with-current-buffer buffer
                          (efrit-todo-gptel--begin-request fsm tools))))
          (unless continuation
            (when efrit-todo-gptel-guidance
              (let ((guidance (condition-case nil
                                  (let ((efrit-todo-agent
                                         (buffer-local-value 'efrit-todo-gptel--peer buffer)))
                                    (efrit-todo-prompt-guidance session))
                                (error nil))))
                (when (and guidance (not (string-empty-p guidance)))
                  (let ((system (efrit-todo-gptel--system-variable)))
                    (set (make-local-variable system)
                         (efrit-todo-gptel--add-guidance (symbol-value system)
                                                         guidance))))))
            (let ((settings (efrit-todo-gptel--settings)))
              (with-current-buffer buffer
                (setq efrit-todo-gptel--turn settings))))
          ;; A gptel without the tool hooks: the checks go with the tools.
          (when (and efrit-todo-gptel--missing-checks gptel-use-tools)
            (setq-local gptel-tools
                        (efrit-todo-gptel--wrap-tools
                         gptel-tools efrit-todo-gptel--missing-checks
                         (lambda () (efrit-todo-gptel--end-if-tripped buffer fsm))
                         (buffer-local-value 'efrit-todo-gptel--peer buffer))))))))))

(defun efrit-todo-gptel--managed-buffer (call)
  "Return the chat buffer of tool CALL when its request is managed.
A sub-agent's calls are not: its tools check themselves."
  (let ((buffer (or (and (plist-get call :buffer) (get-buffer (plist-get call :buffer)))
                    (current-buffer))))
    (and (not efrit-todo-gptel--sub-agent)
         (buffer-live-p buffer)
         (buffer-local-value 'efrit-todo-gptel--active buffer)
         buffer)))

(defun efrit-todo-gptel--input (args)
  "Return the tool arguments ARGS, a plist, as Efrit's hash table of input."
  (let ((table (make-hash-table :test 'equal)))
    (cl-loop for (key value) on args by #'cddr
             do (puthash (if (keywordp key) (substring (symbol-name key) 1) (format "%s" key))
                         value table))
    table))

(defun efrit-todo-gptel--error-result-p (result)
  "Return non-nil if tool RESULT, a string, reports an error.
gptel gives a tool that signalled the error's symbol and data as
its result, and a call it could not run starts with \"Error\"."
  (and (stringp result)
       (string-match "\\`[ \t\n]*\\(<tool_call_error>\\|Error\\b\\|\\([a-z][-a-z]*\\) \\)"
                     result)
       (or (match-beginning 1)
           (let ((symbol (intern-soft (match-string 2 result))))
             (and symbol (get symbol 'error-conditions) t)))))

(defun efrit-todo-gptel--pre-tool (call)
  "Check tool CALL with the breaker before the tool is run: refusal or nil.
CALL is the plist gptel gives `gptel-pre-tool-call-functions'.  The
refusal is sent as the call's result, marked as an error."
  (when-let* ((buffer (efrit-todo-gptel--managed-buffer call)))
    (with-current-buffer buffer
      (let* ((args (plist-get call :args))
             (refusal (condition-case err
                          (efrit-todo-before-tool (format "%s" (plist-get call :name))
                                                  (efrit-todo-gptel--input args)
                                                  (efrit-todo-gptel-session))
                        (efrit-todo-invalid-input
                         (message "Efrit-todo: %s" (cadr err))
                         nil))))
        (when refusal
          (push args efrit-todo-gptel--blocked)
          ;; Without the post-tool hook, no later point sees the trip.
          (when (memq :post efrit-todo-gptel--missing-checks)
            (efrit-todo-gptel--end-if-tripped buffer efrit-todo-gptel--fsm))
          (list :block refusal))))))

(defun efrit-todo-gptel--post-tool (call)
  "Record tool CALL in the ledger and the breaker; return notices, if any.
CALL is the plist gptel gives `gptel-post-tool-call-functions'.  The
output is kept as it is; notices (warnings, reminders, what the user
changed) follow it.  A result gptel made of nil or an empty string is
named as no output."
  (when-let* ((buffer (efrit-todo-gptel--managed-buffer call)))
    (with-current-buffer buffer
      (let ((args (plist-get call :args)))
        (if (memq args efrit-todo-gptel--blocked)
            (progn (setq efrit-todo-gptel--blocked (delq args efrit-todo-gptel--blocked))
                   nil)
          (let* ((name (format "%s" (plist-get call :name)))
                 (result (plist-get call :result))
                 (output (and (stringp result) (not (member result '("" "nil"))) result))
                 (text (condition-case err
                           (efrit-todo-after-tool name (efrit-todo-gptel--input args) output
                                                  (efrit-todo-gptel--error-result-p output)
                                                  (efrit-todo-gptel-session))
                         (efrit-todo-invalid-input
                          (format "%s\n[efrit-todo could not record this call: %s]"
                                  result (cadr err))))))
            (unless (equal text result)
              (list :result text))))))))

(defun efrit-todo-gptel--note-trip (buffer)
  "Note that the breaker of chat BUFFER's request tripped, if it did just now.
Return the reason to stop the request with, or nil when the breaker
has not tripped or the request was stopped already."
  (with-current-buffer buffer
    (let* ((session (efrit-todo-gptel-session))
           (reason (and (not efrit-todo-gptel--ended) (efrit-todo-gptel--tripped session))))
      (when reason
        (setq efrit-todo-gptel--ended (concat "stopped by the circuit breaker: " reason))
        (efrit-todo-gptel--note-stop session efrit-todo-gptel--ended)
        (message "Efrit-todo: circuit breaker tripped in %s: %s (M-x efrit-todo-gptel-report)"
                 (buffer-name) reason)
        (concat "Stopped by the circuit breaker: " reason)))))

(defun efrit-todo-gptel--stop-if-tripped (call)
  "Stop the request of tool CALL when the breaker has tripped.
This runs after `efrit-todo-gptel--post-tool' has recorded every call
of the response, so the results, refusals and notices stay in the
chat; the request then ends without asking the model again."
  (when-let* ((buffer (efrit-todo-gptel--managed-buffer call))
              (reason (efrit-todo-gptel--note-trip buffer)))
    (list :stop t :stop-reason reason)))

(defun efrit-todo-gptel--end-if-tripped (buffer fsm)
  "End the request of state FSM from chat BUFFER if its breaker tripped.
For a gptel without the post-tool hook: the request ends with the
reason as its error once the calls of the response have run, as
the hook's stop would end it."
  (when (buffer-live-p buffer)
    (when-let* ((reason (efrit-todo-gptel--note-trip buffer))
                (info (and fsm (gptel-fsm-info fsm))))
      (plist-put info :stop-reason reason)
      (plist-put info :error reason))))

;;;; Tools that carry the checks themselves

(defvar efrit-todo-gptel--originals (make-hash-table :test 'eq :weakness 'key)
  "The tool each of the tool copies made here stands for.")

(defun efrit-todo-gptel--to-string (value)
  "Return VALUE, a tool's result or error data, as text, as gptel does."
  (cond ((stringp value) value)
        ((symbolp value) (symbol-name value))
        (t (prin1-to-string value))))

(defun efrit-todo-gptel--refuse (name input session checks after)
  "Return the breaker's refusal of the call of tool NAME with INPUT, or nil.
SESSION is the chat's; only with :pre in CHECKS is the breaker asked.
AFTER is called once a refusal is recorded."
  (when (memq :pre checks)
    (when-let* ((refusal (condition-case err
                             (efrit-todo-before-tool name input session)
                           (efrit-todo-invalid-input
                            (message "Efrit-todo: %s" (cadr err))
                            nil))))
      (funcall after)
      (concat "<tool_call_error>\n" refusal "\n</tool_call_error>"))))

(defun efrit-todo-gptel--record (name input session checks after result error-p)
  "Return the RESULT of tool NAME's call with INPUT, recorded if asked.
SESSION is the chat's; with :post in CHECKS the call is recorded
and the text the model gets has the notices after the output.
ERROR-P non-nil when the tool failed.  AFTER is called once it is
recorded."
  (if (not (memq :post checks))
      result
    (let* ((output (cond ((null result) nil)
                         ((stringp result) (and (not (string-empty-p result)) result))
                         (t (efrit-todo-gptel--to-string result))))
           (text (condition-case err
                     (efrit-todo-after-tool name input output
                                            (or error-p (efrit-todo-gptel--error-result-p output))
                                            session)
                   (efrit-todo-invalid-input
                    (format "%s\n[efrit-todo could not record this call: %s]"
                            (or output "") (cadr err))))))
      (funcall after)
      text)))

(defun efrit-todo-gptel--checked-function (tool checks after &optional agent live-p)
  "Return TOOL's function, wrapped for the breaker.
With :pre in CHECKS the breaker is asked before each call, with
:post the call is recorded; AFTER is called once a call is refused
or recorded.  AGENT, a sub-agent's name, is `efrit-todo-agent' for
all of it and for the tool itself; once LIVE-P says it has ended, a
call is not run, and a call that ends later is not recorded."
  (let ((function (gptel-tool-function tool))
        (name (gptel-tool-name tool))
        (keys (mapcar (lambda (arg) (intern (concat ":" (plist-get arg :name))))
                      (gptel-tool-args tool)))
        (ended (lambda () (and live-p (not (funcall live-p)))))
        (refusal (format "<tool_call_error>\n%s has stopped: this call was not run\n</tool_call_error>"
                         agent)))
    (if (gptel-tool-async tool)
        (lambda (callback &rest values)
          (let* ((efrit-todo-agent agent)
                 (buffer (current-buffer))
                 (session (efrit-todo-gptel-session))
                 (input (efrit-todo-gptel--input (efrit-todo-gptel--tool-input keys values)))
                 (finish (lambda (result error-p)
                           (funcall callback
                                    (if (and (buffer-live-p buffer) (not (funcall ended)))
                                        (with-current-buffer buffer
                                          (let ((efrit-todo-agent agent))
                                            (efrit-todo-gptel--record name input session checks
                                                                      after result error-p)))
                                      result)))))
            (if-let* ((refusal (if (funcall ended)
                                   refusal
                                 (efrit-todo-gptel--refuse name input session checks after))))
                (funcall callback refusal)
              (condition-case err
                  (apply function (lambda (result) (funcall finish result nil)) values)
                (error (funcall finish (mapconcat #'efrit-todo-gptel--to-string err " ") t))))))
      (lambda (&rest values)
        (let* ((efrit-todo-agent agent)
               (session (efrit-todo-gptel-session))
               (input (efrit-todo-gptel--input (efrit-todo-gptel--tool-input keys values))))
          (or (and (funcall ended) refusal)
              (efrit-todo-gptel--refuse name input session checks after)
              (pcase-let ((`(,result . ,error-p)
                           (condition-case err
                               (cons (apply function values) nil)
                             (error (cons (mapconcat #'efrit-todo-gptel--to-string err " ")
                                          t)))))
                (efrit-todo-gptel--record name input session checks after result
                                          error-p))))))))

(defun efrit-todo-gptel--wrap-tools (tools checks after &optional agent live-p)
  "Return copies of TOOLS whose functions are checked around each call.
CHECKS has :pre to ask the breaker before a call, :post to record it
after; AFTER is called with no argument after each refusal or record.
AGENT is the sub-agent whose tools they are, or nil for the lead;
LIVE-P says whether it is still running.
The copies keep the name, schema and everything else; a copy made
here is copied from the tool it stands for, never wrapped twice."
  (mapcar (lambda (tool)
            (let* ((original (gethash tool efrit-todo-gptel--originals tool))
                   (copy (copy-sequence original)))
              (aset copy (cl-struct-slot-offset 'gptel-tool 'function)
                    (efrit-todo-gptel--checked-function original checks after agent live-p))
              (puthash copy original efrit-todo-gptel--originals)
              copy))
          tools))

(defun efrit-todo-gptel--request-sent ()
  "Note that a request left this buffer: no response yet, nothing refused."
  (when (and efrit-todo-gptel--active (not efrit-todo-gptel--sub-agent))
    (setq efrit-todo-gptel--response-ok nil
          efrit-todo-gptel--blocked nil)))

(defun efrit-todo-gptel--response-arrived ()
  "Note that the response to this buffer's latest request arrived."
  (when (and efrit-todo-gptel--active (not efrit-todo-gptel--sub-agent))
    (setq efrit-todo-gptel--response-ok t)))

(defun efrit-todo-gptel--cancel-timer ()
  "Cancel this buffer's pending continuation, if any."
  (when (timerp efrit-todo-gptel--timer)
    (cancel-timer efrit-todo-gptel--timer))
  (setq efrit-todo-gptel--timer nil))

(defun efrit-todo-gptel--send-continuation (buffer text)
  "Add TEXT at the end of chat BUFFER as the user's and send it.
It is sent with the settings of the request that began the turn, and
through `efrit-todo-gptel--transform', whatever the buffer's own."
  (when (buffer-live-p buffer)
    (with-current-buffer buffer
      (setq efrit-todo-gptel--timer nil)
      (setq efrit-todo-gptel--continuing t
            efrit-todo-gptel--continuations (1+ efrit-todo-gptel--continuations))
      (goto-char (point-max))
      (unless (or (bobp) (memq (char-before) '(?\s ?\n ?\t)))
        (insert "\n\n"))
      (insert text)
      (condition-case err
          (let ((settings efrit-todo-gptel--turn))
            (cl-progv (mapcar #'car settings) (mapcar #'cdr settings)
              (let ((gptel-prompt-transform-functions
                     (efrit-todo-gptel--with-transform gptel-prompt-transform-functions)))
                (gptel-send))))
        (error (setq efrit-todo-gptel--continuing nil)
               (efrit-todo-gptel--note-stop (efrit-todo-gptel-session)
                                            (concat "the continuation could not be sent: "
                                                    (error-message-string err))))))))

(defun efrit-todo-gptel--post-response (&rest _)
  "End this buffer's managed request: go on, or note why it stopped.
Run from `gptel-post-response-functions', which gptel runs after a
response, an error and an abort alike.  A sub-agent's request ends
with its Agent call, not here."
  (when (and efrit-todo-gptel--active (not efrit-todo-gptel--sub-agent))
    (setq efrit-todo-gptel--active nil)
    (let ((session (efrit-todo-gptel-session)))
      (cond
       (efrit-todo-gptel--ended nil)    ; the breaker or an abort, noted then
       ((not efrit-todo-gptel--response-ok)
        (efrit-todo-gptel--note-stop session "the request failed"))
       ((not (efrit-todo-gptel--open-p session)) (efrit-todo-gptel--leave))
       (t
        (let ((continuation
               (and (< efrit-todo-gptel--continuations
                       efrit-todo-gptel-max-continuations)
                    (efrit-todo-turn-end nil session))))
          (if continuation
              (setq efrit-todo-gptel--timer
                    (run-at-time 0 nil #'efrit-todo-gptel--send-continuation
                                 (current-buffer) continuation))
            (efrit-todo-gptel--note-stop
             session
             (if-let* ((pause (efrit-todo-pause-reason session)))
                 (concat "paused by the model: " pause)
               "the model ended its turn with items still open")))))))))

(defun efrit-todo-gptel--abort (buffer &rest _)
  "Note that the user aborts the request of chat BUFFER.
A pending continuation is cancelled; with items open, the list is
kept for the next request of the chat."
  (when (buffer-live-p buffer)
    (with-current-buffer buffer
      (when (or efrit-todo-gptel--active efrit-todo-gptel--timer)
        (efrit-todo-gptel--cancel-timer)
        (setq efrit-todo-gptel--continuing nil)
        (unless efrit-todo-gptel--ended
          (setq efrit-todo-gptel--ended "interrupted by the user")
          (efrit-todo-gptel--note-stop (efrit-todo-gptel-session) efrit-todo-gptel--ended))))))

(defun efrit-todo-gptel--note-exit ()
  "Mark the running requests stopped, as Emacs is closing.
Run from `kill-emacs-hook' before the lists are saved."
  (dolist (buffer (buffer-list))
    (when (or (buffer-local-value 'efrit-todo-gptel--active buffer)
              (buffer-local-value 'efrit-todo-gptel--peer buffer))
      (with-current-buffer buffer
        (efrit-todo-gptel--note-stop (efrit-todo-gptel-session)
                                     "Emacs was closed while the request ran")))))

;;;; Sub-agents (gptel-agent)

;; gptel-agent's Agent tool runs `gptel-agent--task' in the chat buffer:
;; it applies the agent's preset and calls `gptel-request' with a state
;; machine of its own and no prompt transforms, so neither our
;; transform nor, before later gptel-agent versions, the tool hooks see
;; the sub-agent's request.  Around the Agent call the sub-agent gets a
;; name (`efrit-todo-agent-start'); the request it makes then gets
;; tools that check themselves as that agent, and handlers that say,
;; while they run, whose request it is; and its end, whatever ends it,
;; is the Agent call's result, once.

(defvar efrit-todo-gptel-mode)

(defvar efrit-todo-gptel--agent-starting nil
  "While a sub-agent starts: (NAME SESSION FINISH LIVE-P) for its request.
FINISH ends the Agent call with a result text; LIVE-P says whether
it has not yet.")

(defun efrit-todo-gptel--with-style-tools (tools)
  "Return TOOLS with the tools of `efrit-todo-tool-style' added.
Only when TOOLS plan (gptel-agent's TodoWrite, or efrit-todo's):
an agent that keeps a todo list gets efrit-todo's."
  (if (not (seq-some #'efrit-todo-gptel--todo-tool-p tools))
      tools
    (let ((names (mapcar (lambda (tool) (ignore-errors (gptel-tool-name tool))) tools)))
      (append tools
              (delq nil (mapcar (lambda (name)
                                  (unless (member name names)
                                    (ignore-errors (gptel-get-tool name))))
                                (efrit-todo-tool-names)))))))

(defun efrit-todo-gptel--agents-p ()
  "Return non-nil if efrit-todo.el knows agents (its agent-teams API)."
  (and (fboundp 'efrit-todo-agent-start) (fboundp 'efrit-todo-agent-end)))

(defun efrit-todo-gptel--run-sub-agent (task main-cb agent-type description prompt)
  "Run gptel-agent's TASK as a sub-agent of the chat's managed request.
Around `gptel-agent--task': MAIN-CB, AGENT-TYPE, DESCRIPTION and
PROMPT are its arguments.  The sub-agent is named by
`efrit-todo-agent-start'; when it ends, however it ends, MAIN-CB
gets its result once, with what `efrit-todo-agent-end' says after
it (the tasks it left unfinished)."
  (if (not (and efrit-todo-gptel-mode
                (efrit-todo-gptel--agents-p)
                efrit-todo-gptel--active
                (not efrit-todo-gptel--sub-agent)))
      (funcall task main-cb agent-type description prompt)
    (let* ((session (efrit-todo-gptel-session))
           (name (efrit-todo-agent-start (format "%s" agent-type) session))
           (buffer (current-buffer))
           (done nil)
           (finish
            (lambda (result)
              (unless done
                (setq done t)
                (let* ((efrit-todo-gptel--sub-agent nil)
                       (efrit-todo-agent nil)
                       (left (condition-case err
                                 (efrit-todo-agent-end name session)
                               (error (message "Efrit-todo: could not end agent %s: %s"
                                               name (error-message-string err))
                                      nil)))
                       (text (efrit-todo-gptel--to-string result)))
                  (with-current-buffer (if (buffer-live-p buffer) buffer (current-buffer))
                    (funcall main-cb (if left (concat text "\n\n" left) text))))))))
      (condition-case err
          (let ((efrit-todo-gptel--agent-starting
                 (list name session finish (lambda () (not done)))))
            (funcall task finish agent-type description prompt))
        (error (funcall finish (format "Error: agent %s could not start: %s"
                                       name (error-message-string err))))))))

(defun efrit-todo-gptel--as-agent-handlers (handlers table name)
  "Return the state HANDLERS of a request, each run as sub-agent NAME's.
TABLE is the request's transitions: when it has gptel 0.9.9.5's TRET
state and HANDLERS have none for it (gptel-agent's snapshot, written
before that state), gptel's own handler is added, without which the
sub-agent would wait forever after its first tool calls."
  (when (and (assq 'TRET table) (not (assq 'TRET handlers))
             (fboundp 'gptel--handle-tool-result))
    (setq handlers (append handlers (list (list 'TRET 'gptel--handle-tool-result)))))
  (mapcar (lambda (entry)
            (cons (car entry)
                  (mapcar (lambda (handler)
                            (lambda (fsm)
                              (let ((efrit-todo-gptel--sub-agent name))
                                (funcall handler fsm))))
                          (cdr entry))))
          handlers))

(defun efrit-todo-gptel--sub-agent-stopper (fsm name session finish)
  "Return what ends sub-agent NAME's request of state FSM when its breaker trips.
SESSION is the chat's; FINISH ends the Agent call."
  (let ((stopped nil))
    (lambda ()
      (unless stopped
        (when-let* ((reason (let ((efrit-todo-agent name))
                              (efrit-todo-gptel--tripped session))))
          (setq stopped t)
          (let ((info (gptel-fsm-info fsm))
                (text (format "Error: %s was stopped by the circuit breaker: %s" name reason)))
            ;; No further request of the sub-agent: its state machine
            ;; ends with this error once the response's calls have run.
            (plist-put info :stop-reason text)
            (plist-put info :error text)
            (message "Efrit-todo: %s" text)
            (funcall finish text)))))))

(defun efrit-todo-gptel--sub-agent-request (request &rest args)
  "Have the `gptel-request' of a starting sub-agent check its own tools.
REQUEST is `gptel-request', ARGS its arguments.  Only the first
request made while `efrit-todo-gptel--agent-starting' is set is
changed: its state machine's handlers run as the sub-agent's, and its
tools (with efrit-todo's when it plans) ask the sub-agent's breaker
before each call and record each call as the sub-agent's."
  (if (not efrit-todo-gptel--agent-starting)
      (apply request args)
    (pcase-let* ((`(,name ,session ,finish ,live-p) efrit-todo-gptel--agent-starting)
                 (efrit-todo-gptel--agent-starting nil)
                 (fsm (or (plist-get (cdr args) :fsm)
                          (let ((fsm (gptel-make-fsm)))
                            (setq args (append args (list :fsm fsm)))
                            fsm)))
                 (handlers-slot (cl-struct-slot-offset 'gptel-fsm 'handlers))
                 (table (aref fsm (cl-struct-slot-offset 'gptel-fsm 'table))))
      (aset fsm handlers-slot
            (efrit-todo-gptel--as-agent-handlers (aref fsm handlers-slot) table name))
      (let ((gptel-tools (and (bound-and-true-p gptel-use-tools)
                              (efrit-todo-gptel--wrap-tools
                               (efrit-todo-gptel--with-style-tools gptel-tools)
                               '(:pre :post)
                               (efrit-todo-gptel--sub-agent-stopper fsm name session finish)
                               name live-p))))
        (apply request args)))))

(defun efrit-todo-gptel--agent-todo-write (write todos)
  "Serve gptel-agent's TodoWrite with efrit-todo: the chat's list, ids.
WRITE is gptel-agent's own, used while the mode is off; TODOS its
argument."
  (if (not efrit-todo-gptel-mode)
      (funcall write todos)
    (efrit-todo-gptel--run-tool "todo_write" (list :todos todos))))

(defconst efrit-todo-gptel--advice
  '((gptel-agent--task efrit-todo-gptel--run-sub-agent)
    (gptel-request efrit-todo-gptel--sub-agent-request)
    (gptel-agent--write-todo efrit-todo-gptel--agent-todo-write))
  "The functions the mode advises (around) for gptel-agent's sub-agents.")

;;;; Commands

;;;###autoload
(defun efrit-todo-gptel-report (&optional buffer)
  "Show the report of the chat BUFFER's session: every tool result, the list.
BUFFER defaults to the current buffer."
  (interactive)
  (let* ((session (efrit-todo-gptel-session buffer))
         (tripped (efrit-todo-gptel--tripped session))
         (report (efrit-todo-report session)))
    (with-help-window (get-buffer-create "*efrit-todo-report*")
      (when tripped
        (princ (format "Stopped by the circuit breaker: %s\n\n" tripped)))
      (princ report))))

;;;; The mode

(defconst efrit-todo-gptel--hooks
  '((gptel-prompt-transform-functions efrit-todo-gptel--transform 90)
    (gptel-pre-tool-call-functions efrit-todo-gptel--pre-tool 0)
    (gptel-post-tool-call-functions efrit-todo-gptel--post-tool 80)
    (gptel-post-tool-call-functions efrit-todo-gptel--stop-if-tripped 90)
    (gptel-post-request-hook efrit-todo-gptel--request-sent 0)
    (gptel-pre-response-hook efrit-todo-gptel--response-arrived 0)
    (gptel-post-response-functions efrit-todo-gptel--post-response 90))
  "The hooks of `efrit-todo-gptel-mode': (HOOK FUNCTION DEPTH).
The breaker's stop comes after every call of a response is recorded.")

(defun efrit-todo-gptel--enable ()
  "Register the tools and add the hooks and the advice."
  (unless (require 'gptel nil t)
    (user-error "Efrit-todo: gptel is not installed"))
  (efrit-todo-gptel--check-gptel-version)
  ;; A package install compiled efrit-todo without asking: ask now.
  (efrit-todo-build-offer)
  (efrit-todo-gptel--register)
  ;; A hook this gptel does not have is left undefined: its check is
  ;; made by the tools of a managed request instead.
  (setq efrit-todo-gptel--missing-checks
        (append (unless (boundp 'gptel-pre-tool-call-functions) '(:pre))
                (unless (boundp 'gptel-post-tool-call-functions) '(:post))))
  ;; In a buffer where a hook has a local value without t, `add-hook'
  ;; changes that value instead of the global one, and a preset applied
  ;; to one request turns the mode on in gptel's prompt buffer, where
  ;; `gptel-prompt-transform-functions' is local.
  (with-temp-buffer
    (pcase-dolist (`(,hook ,function ,depth) efrit-todo-gptel--hooks)
      (when (boundp hook)
        (add-hook hook function depth))))
  (advice-add 'gptel-abort :before #'efrit-todo-gptel--abort)
  (pcase-dolist (`(,function ,advice) efrit-todo-gptel--advice)
    (advice-add function :around advice))
  ;; Before the lists are saved on exit (depth 90).
  (add-hook 'kill-emacs-hook #'efrit-todo-gptel--note-exit 50)
  (efrit-todo--hold-mode-line 'efrit-todo-gptel-mode t))

(defun efrit-todo-gptel--remove-hooks ()
  "Remove the hooks from their global values and from every buffer."
  (pcase-dolist (`(,hook ,function ,_) efrit-todo-gptel--hooks)
    (when (boundp hook)
      (with-temp-buffer (remove-hook hook function))
      (dolist (buffer (buffer-list))
        (when (local-variable-p hook buffer)
          (with-current-buffer buffer
            (remove-hook hook function t)))))))

(defun efrit-todo-gptel--disable ()
  "Remove the hooks and the advice; cancel pending continuations."
  (efrit-todo-gptel--remove-hooks)
  (advice-remove 'gptel-abort #'efrit-todo-gptel--abort)
  (pcase-dolist (`(,function ,advice) efrit-todo-gptel--advice)
    (advice-remove function advice))
  (remove-hook 'kill-emacs-hook #'efrit-todo-gptel--note-exit)
  (efrit-todo--hold-mode-line 'efrit-todo-gptel-mode nil)
  (dolist (buffer (buffer-list))
    (with-current-buffer buffer
      (efrit-todo-gptel--cancel-timer)
      (efrit-todo-gptel--leave)
      (setq efrit-todo-gptel--active nil))))

;;;###autoload
(define-minor-mode efrit-todo-gptel-mode
  "Run gptel requests that offer efrit-todo's planning tools on efrit-todo.

While it is on, a gptel request whose tools include todo_write or a
Task tool \(see the preset `efrit-todo') is managed: every tool call
passes efrit-todo's circuit breaker, which stops the request when it trips;
the output of each tool is kept, with notices after it; a response
that ends with items open gets a continuation message, at most
`efrit-todo-gptel-max-continuations' times; an aborted request leaves
its open items for the next request of the chat.  Each chat buffer
is an efrit-todo session of its own.  Turning it off removes the
hooks and the advice; gptel works as before."
  :global t
  :group 'efrit-todo-gptel
  (if efrit-todo-gptel-mode
      (condition-case err
          (efrit-todo-gptel--enable)
        (error (setq efrit-todo-gptel-mode nil)
               (efrit-todo-gptel--disable)
               (signal (car err) (cdr err))))
    (efrit-todo-gptel--disable)))

;;;; The preset

(defun efrit-todo-gptel--with-transform (transforms)
  "Return TRANSFORMS with `efrit-todo-gptel--transform' in it, once.
A t in TRANSFORMS stands for the global value, as in a hook."
  (if (or (memq #'efrit-todo-gptel--transform transforms)
          (and (memq t transforms)
               (memq #'efrit-todo-gptel--transform
                     (default-value 'gptel-prompt-transform-functions))))
      transforms
    (append transforms (list #'efrit-todo-gptel--transform))))

(defun efrit-todo-gptel--preset-pre ()
  "Turn `efrit-todo-gptel-mode' on, as the preset is applied."
  (unless efrit-todo-gptel-mode
    (efrit-todo-gptel-mode 1)))

(defun efrit-todo-gptel--make-preset ()
  "Define the gptel preset `efrit-todo', with the tools of the style.
See `efrit-todo-tool-style'; the preset is made again when it changes."
  (gptel-make-preset 'efrit-todo
    :description (if (eq efrit-todo-tool-style 'todo)
                     "Plan with efrit-todo: todo_write with ids, a circuit breaker, continuation"
                   "Plan with efrit-todo: tasks with dependencies, a circuit breaker, continuation")
    :pre #'efrit-todo-gptel--preset-pre
    :tools (list :append (efrit-todo-tool-names))
    :use-tools t
    ;; Applied to one request (@efrit-todo in a prompt), the preset comes
    ;; after that request's transforms were chosen: add ours to them.
    :prompt-transform-functions '(:function efrit-todo-gptel--with-transform)))

(defun efrit-todo-gptel--register-after-build ()
  "Register the tools, now that a build has loaded the module."
  (remove-hook 'efrit-todo-build-loaded-hook #'efrit-todo-gptel--register-after-build)
  (when (featurep 'gptel)
    (efrit-todo-gptel--register-tools)))

(defun efrit-todo-gptel--register ()
  "Give gptel the tools and the preset; it must be loaded.
The tools' schemas come from the module: while it is being built (an
init file's first start), they are registered when it loads."
  (if (efrit-todo-build-module-loaded-p)
      (efrit-todo-gptel--register-tools)
    (add-hook 'efrit-todo-build-loaded-hook #'efrit-todo-gptel--register-after-build))
  (efrit-todo-gptel--make-preset))

(defun efrit-todo-gptel--after-load (&rest _)
  "Register the tools and the preset once gptel is loaded."
  (when (featurep 'gptel)
    (remove-hook 'after-load-functions #'efrit-todo-gptel--after-load)
    (efrit-todo-gptel--register)))

(if (featurep 'gptel)
    (efrit-todo-gptel--register)
  (add-hook 'after-load-functions #'efrit-todo-gptel--after-load))

(defun efrit-todo-gptel--style-changed (_symbol value operation where)
  "Make the preset again for the tool style VALUE, set by OPERATION.
A buffer-local setting (WHERE non-nil) does not change the preset,
which is global."
  (when (and (eq operation 'set) (null where) (featurep 'gptel)
             (memq value '(todo tasks both)))
    (let ((efrit-todo-tool-style value))
      (condition-case err
          (efrit-todo-gptel--make-preset)
        (error (message "Efrit-todo: could not update the gptel preset: %s"
                        (error-message-string err)))))))

(add-variable-watcher 'efrit-todo-tool-style #'efrit-todo-gptel--style-changed)

;;;; Unloading

(defun efrit-todo-gptel--forget-tools ()
  "Remove efrit-todo's tools from gptel's registry and tool lists."
  (let ((ours (and (boundp 'gptel--known-tools)
                   (mapcar #'cdr (cdr (assoc efrit-todo-gptel--category gptel--known-tools))))))
    (when (and ours (boundp 'gptel-tools))
      (let ((keep (lambda (tools) (seq-remove (lambda (tool) (memq tool ours)) tools))))
        (dolist (buffer (buffer-list))
          (when (local-variable-p 'gptel-tools buffer)
            (with-current-buffer buffer
              (setq gptel-tools (funcall keep gptel-tools)))))
        (set-default 'gptel-tools (funcall keep (default-value 'gptel-tools)))))
    (when ours
      (setq gptel--known-tools
            (assoc-delete-all efrit-todo-gptel--category gptel--known-tools)))))

(defun efrit-todo-gptel-unload-function ()
  "Give gptel back as it was: no hooks, advice, tools or preset.
Chat buffers let go of their sessions; the lists stay in efrit-todo."
  (efrit-todo-gptel-mode -1)
  (remove-hook 'after-load-functions #'efrit-todo-gptel--after-load)
  (remove-hook 'efrit-todo-build-loaded-hook #'efrit-todo-gptel--register-after-build)
  (remove-variable-watcher 'efrit-todo-tool-style #'efrit-todo-gptel--style-changed)
  (efrit-todo-gptel--forget-tools)
  (when (boundp 'gptel--known-presets)
    (setq gptel--known-presets (assq-delete-all 'efrit-todo gptel--known-presets)))
  (dolist (buffer (buffer-list))
    (with-current-buffer buffer
      (when efrit-todo-gptel--session
        (when (and (local-variable-p 'efrit-todo-current-session)
                   (equal efrit-todo-current-session efrit-todo-gptel--session))
          (kill-local-variable 'efrit-todo-current-session))
        (when (local-variable-p 'efrit-todo-known-tools)
          (kill-local-variable 'efrit-todo-known-tools)))))
  nil)

(provide 'efrit-todo-gptel)

;; Local Variables:
;; package-lint-main-file: "efrit-todo.el"
;; End:

;;; efrit-todo-gptel.el ends here
