;;; efrit-todo.el --- Todo lists that keep an Efrit agent honest -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The efrit-todo developers

;; Author: The efrit-todo developers
;; Maintainer: The efrit-todo developers
;; Version: 0.1.0
;; Package-Requires: ((emacs "28.1"))
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

;; efrit-todo is the backend of the `todo_write' tool that the Efrit agent
;; uses to plan and show progress.  A Rust dynamic module owns the lists:
;; it validates every write, keeps item ids stable across writes, and
;; tells the model exactly what changed and what to do next.
;;
;; This file loads the module (offering to build it with cargo when it is
;; missing) and defines the public API.  It loads efrit-todo-compat.el,
;; which keeps every name of Efrit's own efrit-todo.el, so that this
;; package can stand in for that file.
;;
;; Lists belong to sessions, named by strings.  Every function takes an
;; optional trailing SESSION; nil means `efrit-todo-current-session'.

;;; Code:

(require 'cl-lib)
(require 'seq)
(require 'subr-x)

(defconst efrit-todo-version "0.1.0"
  "Version of the efrit-todo Lisp code; the module must match it.")

(defgroup efrit-todo nil
  "Todo lists for the Efrit agent, backed by a Rust module."
  :group 'tools
  :prefix "efrit-todo-")

(defcustom efrit-todo-max-items 1000
  "Most items a todo list may hold; a longer write is an error."
  :type 'natnum
  :group 'efrit-todo)

(defcustom efrit-todo-max-content-length 2000
  "Most characters an item's content may have; a longer one is an error."
  :type 'natnum
  :group 'efrit-todo)

(defcustom efrit-todo-max-description-length 4000
  "Most characters an item's description may have; a longer one is an error.
The description is the longer text of a task, besides its one-line
content; results and the prompt never repeat it, only TaskGet shows it."
  :type 'natnum
  :group 'efrit-todo)

(defcustom efrit-todo-max-blockers 50
  "Most items one item may wait for (its blocked_by); more is an error."
  :type 'natnum
  :group 'efrit-todo)

(defcustom efrit-todo-tool-style 'todo
  "Which planning tools the model is offered.
`todo': todo_write, which sends the list (whole, or merged by id),
and todo_pause.  `tasks': TaskCreate, TaskUpdate, TaskGet and
TaskList, one task per call, the shape Claude Code's models know,
and todo_pause.  `both': all of them.  Whichever the model uses, it
works on one list, with one history and one circuit breaker, and
items may wait for others (blocked_by) in every style.  The tool
schemas (`efrit-todo-tool-schemas'), the guidance in the system
prompt (`efrit-todo-prompt-guidance') and every text the model gets
\(continuations, reminders, the breaker's warnings and refusals, the
completion guard, the plan suggestion) follow this option and name
only the tools it offers; a running session keeps the guidance it
started with."
  :type '(choice (const :tag "todo_write and todo_pause" todo)
                 (const :tag "TaskCreate, TaskUpdate, TaskGet, TaskList and todo_pause" tasks)
                 (const :tag "Both" both))
  :group 'efrit-todo)

(defcustom efrit-todo-full-list-threshold 30
  "Longest list shown whole when a `todo_write' result lists the list.
A result lists the list only when items were added, restored, dropped
or reordered; otherwise it names just the changed items.  A longer
list shows the running item, up to this many changed items and this
many of the next pending ones, and counts the rest, so that a long
plan does not cost the model thousands of tokens."
  :type 'natnum
  :group 'efrit-todo)

(defcustom efrit-todo-auto-complete nil
  "Non-nil to complete the running item when a tool it names succeeds.
An item whose content names a tool (as a whole word; the longest name
wins) is completed when that tool succeeds while the item is in
progress, and the next pending item starts.  The todo_write result
marks such items."
  :type 'boolean
  :group 'efrit-todo)

(defvar efrit-todo-known-tools nil
  "Names of the tools the agent has, for `efrit-todo-auto-complete'.
The Efrit adapter sets it; tools already called count as well.")

(defvar efrit-todo-current-session nil
  "The session that functions act on when their SESSION is nil.
nil stands for \"default\".  The Efrit adapter binds it to the
running Efrit session.")

(defvar efrit-todo-agent nil
  "The agent making the calls: nil for the session's own agent.
A string is the name of a sub-agent, as `efrit-todo-agent-start'
gave it; adapters bind it around a sub-agent's tool calls.  The
functions that act for the model (`efrit-todo-write', the Task
tools, `efrit-todo-pause', `efrit-todo-before-tool',
`efrit-todo-after-tool', `efrit-todo-turn-end',
`efrit-todo-complete' and `efrit-todo-breaker') act as this agent:
with its own breaker, reminders and continuations, on its own items.
A sub-agent may not change an item another agent owns.  A name
that is not running in the session signals `efrit-todo-invalid-input'.")

(defvar efrit-todo-change-functions nil
  "Abnormal hook run with the session name after every change to a list.
An error in one function is reported and does not stop the others.")


;; The errors, defined by the module when it loads, and before that by
;; efrit-todo-build.el: `efrit-todo-error' is the parent of
;; `efrit-todo-invalid-input' (a caller's or the model's mistake, naming
;; the field), `efrit-todo-storage-error' (the disk) and
;; `efrit-todo-internal-error' (a bug of ours, such as a caught panic).

;;;; The module
;;
;; efrit-todo-build.el loads it, or builds it in the background when it
;; is missing: this file then loads without it, every module function
;; signalling that the build is running, until cargo ends and the module
;; is loaded.  The saved lists are restored then.

(require 'efrit-todo-build)

(defconst efrit-todo--directory
  (file-name-directory (or load-file-name buffer-file-name default-directory))
  "Directory of this file, where the module lives.")

(declare-function efrit-todo--module-version "efrit-todo-module" ())
(declare-function efrit-todo--module-write "efrit-todo-module"
                  (session input max-items max-content full-up-to
                           auto-complete known-tools
                           &optional max-description max-blockers mirror))
(declare-function efrit-todo--module-task-tool "efrit-todo-module"
                  (session tool input &optional max-items max-content full-up-to
                           max-description max-blockers))
(declare-function efrit-todo--module-items "efrit-todo-module" (session))
(declare-function efrit-todo--module-counts "efrit-todo-module" (session))
(declare-function efrit-todo--module-current "efrit-todo-module" (session))
(declare-function efrit-todo--module-reset "efrit-todo-module" (session))
(declare-function efrit-todo--module-sessions "efrit-todo-module" ())
(declare-function efrit-todo--module-tool-schemas "efrit-todo-module" (&optional style))
(declare-function efrit-todo--module-prompt-guidance "efrit-todo-module"
                  (session full-up-to &optional style))
(declare-function efrit-todo--module-change-seq "efrit-todo-module" (session))
(declare-function efrit-todo--module-item-count "efrit-todo-module" (session))
(declare-function efrit-todo--module-begin-turn "efrit-todo-module" (session))
(declare-function efrit-todo--module-user-edit "efrit-todo-module"
                  (session op id arg max-items max-content &optional max-blockers))

(defun efrit-todo--load-module ()
  "Load the module, or start building it, and check its version."
  (efrit-todo-build--ensure efrit-todo-version))

(declare-function efrit-todo-compat--adopt-plain "efrit-todo-compat" ())

(defun efrit-todo--after-build ()
  "Take over, now that a build has loaded the module.
The list Efrit kept meanwhile goes into the module, and the saved
lists are restored.  Nothing when the build ended while this file was
still loading (a batch script waiting for it), before that code was
defined."
  (when (fboundp 'efrit-todo-compat--adopt-plain)
    (efrit-todo-compat--adopt-plain))
  (when (fboundp 'efrit-todo--restore-on-load)
    (efrit-todo--restore-on-load)))

(add-hook 'efrit-todo-build-loaded-hook #'efrit-todo--after-build)

(efrit-todo--load-module)

;;;; Sessions and change notification

(defun efrit-todo--describe (value)
  "Return VALUE printed for an error message, kept short.
Values from a model or a caller may be nested too deep to print whole,
and Emacs's printer refuses some even with `print-level' set: then
only VALUE's type is named.  Never signals."
  (condition-case nil
      ;; Escaped, so that a value from a file (a directory-local list id)
      ;; shows on one line and cannot add lines of its own to a message.
      (let ((print-level 3) (print-length 10)
            (print-escape-newlines t) (print-escape-control-characters t))
        (truncate-string-to-width (format "%S" value) 100 nil nil "..."))
    (error (format "a %s that cannot be printed" (type-of value)))))

(defun efrit-todo--invalid-session (name)
  "Signal that NAME, given as a session, is not a string."
  (signal 'efrit-todo-invalid-input
          (list (format "session: expected a string, got %s" (efrit-todo--describe name)))))

;; Inline, like the other accessors called on every tool call: a call of
;; a byte-compiled function costs more than the work these do.
(defsubst efrit-todo--session (session)
  "Return the name of SESSION, resolving nil to the current session."
  (let ((name (or session efrit-todo-current-session "default")))
    (if (stringp name) name (efrit-todo--invalid-session name))))

(defvar efrit-todo--shared-lists nil
  "Names of the lists this Emacs shares; see `efrit-todo-share-list'.")

(defmacro efrit-todo--changing (session &rest body)
  "Run BODY, a change of the list of SESSION (a variable), and return its value.
A shared list's change is made on its newest save and saved before
this returns; see `efrit-todo--shared-change'."
  (declare (indent 1) (debug (symbolp body)))
  `(if (and efrit-todo--shared-lists (member ,session efrit-todo--shared-lists))
       (efrit-todo--shared-change ,session (lambda () ,@body))
     ,@body))

(defun efrit-todo--change (session change)
  "Call CHANGE, a change of the list of SESSION, as `efrit-todo--changing' does.
For callers that cannot use the macro (efrit-todo-compat.el, which
this file requires)."
  (efrit-todo--changing session (funcall change)))

(defsubst efrit-todo--reading (session)
  "Take in another Emacs's newer save of SESSION, when it is a shared list.
Called before a call reads the list; return SESSION."
  (when (and efrit-todo--shared-lists (member session efrit-todo--shared-lists))
    (efrit-todo--shared-refresh session))
  session)

(defun efrit-todo--report-change-error (function err)
  "Report ERR, which change hook FUNCTION signaled, without stopping."
  (message "Efrit-todo: error in %S: %s" function (error-message-string err)))

(defsubst efrit-todo--change-functions (value)
  "Return VALUE, a value of `efrit-todo-change-functions', as a list.
A single function becomes a list of one, as `run-hooks' reads it."
  (if (functionp value) (list value) value))

(defsubst efrit-todo--run-change-hook (session)
  "Run `efrit-todo-change-functions' with SESSION, reporting errors.
As in `run-hook-with-args', t in a buffer-local value stands for the
global functions; unlike there, a function that fails does not stop
the others."
  (let ((functions (efrit-todo--change-functions efrit-todo-change-functions)))
    ;; This runs on every tool call: one handler for the whole list, set
    ;; up again only after a function failed.
    (while functions
      (let ((function nil))
        (condition-case err
            (while functions
              (setq function (pop functions))
              (if (eq function t)
                  (setq functions
                        (append (remq t (efrit-todo--change-functions
                                         (default-value 'efrit-todo-change-functions)))
                                functions))
                (funcall function session)))
          (error (efrit-todo--report-change-error function err)))))))

(declare-function efrit-todo-compat--refresh-mirror "efrit-todo-compat" (session))
(declare-function efrit-todo-compat--mirror-of "efrit-todo-compat" (session))
(defvar efrit-todo-compat--mirror-session)

(defun efrit-todo--changed (session)
  "Note that SESSION changed: refresh Efrit's variables, run the hook."
  (when (equal session (efrit-todo--session nil))
    (efrit-todo-compat--refresh-mirror session))
  (efrit-todo--run-change-hook session))

;;;; Public API

(defun efrit-todo-write (input &optional session)
  "Apply a `todo_write' call with INPUT and return the result for the model.
INPUT is the tool input as Efrit parses it: a hash table whose
\"todos\" is a vector of hash tables with \"content\", \"status\"
and optionally \"id\" and \"activeForm\".  Alists, plists, a bare
list or vector of items and a JSON string are accepted too.

Without \"merge\", the items are the whole new list.  With
\"merge\" true, an item with an id changes only the fields it
carries, an item without one is added at the end, and items not
named stay as they are.

The whole input is checked before anything changes; a problem
signals `efrit-todo-invalid-input' naming the field, e.g.
todos[2].status.  The result names the items that changed, with
their ids; it lists the whole list only when items were added,
restored, dropped or reordered.  SESSION defaults to
`efrit-todo-current-session'."
  (let* ((session (efrit-todo--session session))
         ;; Efrit's structs of this list, which the write brings up to
         ;; date in place when it can: one module call fewer on every write.
         (mirror (efrit-todo-compat--mirror-of session))
         (text (efrit-todo--changing session
                 (efrit-todo--module-write session input efrit-todo-max-items
                                           efrit-todo-max-content-length
                                           efrit-todo-full-list-threshold
                                           efrit-todo-auto-complete
                                           efrit-todo-known-tools
                                           efrit-todo-max-description-length
                                           efrit-todo-max-blockers
                                           mirror))))
    ;; The write cleared the mirror's session when it could not update it.
    (if (and mirror (equal session efrit-todo-compat--mirror-session))
        (efrit-todo--run-change-hook session)
      (efrit-todo--changed session))
    text))

;;;; The Task tools

(defun efrit-todo--task-tool (tool input session)
  "Run the Task tool TOOL with INPUT in SESSION; return the result text.
The change hook runs when the list changed, which TaskGet and
TaskList never do."
  (let* ((session (efrit-todo--session session))
         (call (lambda ()
                 (efrit-todo--module-task-tool session tool input efrit-todo-max-items
                                               efrit-todo-max-content-length
                                               efrit-todo-full-list-threshold
                                               efrit-todo-max-description-length
                                               efrit-todo-max-blockers)))
         (before (efrit-todo--module-change-seq session))
         (text (if (member tool '("TaskGet" "TaskList"))
                   (progn (efrit-todo--reading session) (funcall call))
                 (efrit-todo--changing session (funcall call)))))
    (unless (eql before (efrit-todo--module-change-seq session))
      (efrit-todo--changed session))
    text))

(defun efrit-todo-task-create (input &optional session)
  "Apply a TaskCreate call with INPUT and return the result for the model.
INPUT is taken in the forms `efrit-todo-write' takes: a hash table,
an alist, a plist or a JSON string, with \"subject\" (required,
the item's content), and optionally \"description\",
\"activeForm\", \"blockedBy\" (ids of the items it waits for,
written t3, 3 or #3) and \"parent\".  The new item is pending.
A problem signals `efrit-todo-invalid-input' naming the field, e.g.
blockedBy[0]: unknown id t9, and changes nothing.  SESSION
defaults to `efrit-todo-current-session'."
  (efrit-todo--task-tool "TaskCreate" input session))

(defun efrit-todo-task-update (input &optional session)
  "Apply a TaskUpdate call with INPUT and return the result for the model.
INPUT (in the forms `efrit-todo-write' takes) names the item by
\"taskId\" (t3, 3 or #3) and carries the fields to change:
\"status\" (pending, in_progress, completed, cancelled, or deleted
to remove the item), \"subject\", \"description\",
\"activeForm\", \"owner\", and the dependencies to add or remove:
\"addBlockedBy\", \"removeBlockedBy\" (items this one waits for),
\"addBlocks\", \"removeBlocks\" (items that wait for this one).
Starting or completing an item that waits for open items, a
dependency on an unknown item, on itself or one that would close a
cycle signal `efrit-todo-invalid-input' naming them, and change
nothing.  The result says what changed and which items became ready.
SESSION defaults to `efrit-todo-current-session'."
  (efrit-todo--task-tool "TaskUpdate" input session))

(defun efrit-todo-task-get (input &optional session)
  "Apply a TaskGet call with INPUT and return the item's details as text.
INPUT (in the forms `efrit-todo-write' takes) names the item by
\"taskId\".  The text gives its id, status, subject, activeForm,
description, owner, the open items it waits for, the open items that
wait for it, and its parent.  SESSION defaults to
`efrit-todo-current-session'."
  (efrit-todo--task-tool "TaskGet" input session))

(defun efrit-todo-task-list (&optional input session)
  "Apply a TaskList call and return the list as text, one line per item.
A line reads t3 [pending] subject (owner) [blocked by t1], naming
only the open items it waits for; a long list names the first items
and counts the rest.  INPUT is ignored beyond being checked: TaskList
takes none.  SESSION defaults to `efrit-todo-current-session'."
  (efrit-todo--task-tool "TaskList" input session))

(defun efrit-todo-list (&optional session)
  "Return the items of SESSION as plists, in list order.
Keys: :id :content :active-form :status :parent :created :started
:completed :description :blocked-by :owner :ready.  :parent is the
id of the item this one is a subtask of, nil for a top-level item.
:description and :owner are strings or nil.  :blocked-by lists the
ids of the open (pending or in-progress) items this one waits for;
finished and deleted ones no longer block.  :ready is t when the
item is pending, waits for no open item and no item above it does.
Times are floats as `float-time' gives them, or nil."
  (efrit-todo--module-items (efrit-todo--reading (efrit-todo--session session))))

(defun efrit-todo--item-count (&optional session)
  "Return the number of items in SESSION's list.
Unlike `efrit-todo-counts' it makes no garbage, for code that runs on
every tool call."
  (efrit-todo--module-item-count (efrit-todo--session session)))

(defun efrit-todo-counts (&optional session)
  "Return a plist counting the items of SESSION by status.
Keys: :total :pending :in-progress :completed :cancelled."
  (efrit-todo--module-counts (efrit-todo--reading (efrit-todo--session session))))

(defun efrit-todo-current (&optional session)
  "Return the plist of the item in progress in SESSION, or nil."
  (efrit-todo--module-current (efrit-todo--reading (efrit-todo--session session))))

;;;###autoload
(defun efrit-todo-reset (&optional session ask)
  "Clear the list and all other state of SESSION.
Ids already issued are not issued again.  The reset is a change like
any other: `efrit-todo-undo' brings the list back, and the model reads
about it at its next request.  With ASK non-nil, ask first, and do
nothing on no.  Interactively, ask about the current session, or with
a prefix argument about the session you name.  Return non-nil when
the list was cleared."
  (interactive (list (and current-prefix-arg
                          (completing-read "Clear the list of session: " (efrit-todo-sessions)
                                           nil t nil nil (efrit-todo--session nil)))
                     t))
  (let ((session (efrit-todo--session session)))
    (if (and ask
             (not (y-or-n-p (format "Clear the list of %s (%d items)? "
                                    session (efrit-todo--item-count session)))))
        (progn (message "Efrit-todo: nothing cleared") nil)
      (efrit-todo--changing session (efrit-todo--module-reset session))
      (efrit-todo--changed session)
      t)))

(defun efrit-todo-sessions ()
  "Return the names of the live sessions, oldest first."
  (efrit-todo--module-sessions))

(defun efrit-todo--style-name ()
  "Return `efrit-todo-tool-style' as the module names it.
A value that is not one of the three signals `efrit-todo-invalid-input'."
  (pcase efrit-todo-tool-style
    ((or 'todo 'nil) "todo")
    ('tasks "tasks")
    ('both "both")
    (other (signal 'efrit-todo-invalid-input
                   (list (format "efrit-todo-tool-style: expected todo, tasks or both, got %s"
                                 (efrit-todo--describe other)))))))

(defun efrit-todo-tool-schemas ()
  "Return the tool schemas in Efrit's shape: alists with string keys.
They are the tools of `efrit-todo-tool-style': todo_write, the
Task tools, or both, and todo_pause.  They come from the same Rust
definitions that validate the input."
  (efrit-todo--module-tool-schemas (efrit-todo--style-name)))

(defconst efrit-todo-task-tool-names '("TaskCreate" "TaskUpdate" "TaskGet" "TaskList")
  "The names of the Task tools, offered by the styles `tasks' and `both'.")

(defun efrit-todo-tool-names ()
  "Return the names of the tools `efrit-todo-tool-schemas' gives.
They follow `efrit-todo-tool-style' and need no module, so that an
adapter can name them while the module is still being built."
  (append (unless (eq efrit-todo-tool-style 'tasks) '("todo_write"))
          (unless (eq efrit-todo-tool-style 'todo) efrit-todo-task-tool-names)
          '("todo_pause")))

(defun efrit-todo--run-tool (name input &optional session)
  "Run efrit-todo's tool NAME with INPUT in SESSION; return its result.
NAME is todo_write, todo_pause or a Task tool: the adapters dispatch
every tool of efrit-todo here, whatever the style offers, since a
model may call a tool it was offered earlier.  Bad input signals
`efrit-todo-invalid-input'; an unknown NAME does too."
  (pcase name
    ("todo_write" (efrit-todo-write input session))
    ("todo_pause" (efrit-todo-pause (efrit-todo--input-field input "reason") session))
    ("TaskCreate" (efrit-todo-task-create input session))
    ("TaskUpdate" (efrit-todo-task-update input session))
    ("TaskGet" (efrit-todo-task-get input session))
    ("TaskList" (efrit-todo-task-list input session))
    (_ (signal 'efrit-todo-invalid-input
               (list (format "tool: not a tool of efrit-todo: %s" (efrit-todo--describe name)))))))

(defun efrit-todo--input-field (input key)
  "Return field KEY, a string, of tool INPUT: a hash table, alist or plist."
  (cond ((hash-table-p input) (gethash key input))
        ((and (consp input) (keywordp (car input))) (plist-get input (intern (concat ":" key))))
        ((consp input) (cdr (or (assoc key input) (assq (intern key) input))))))

(defun efrit-todo-prompt-guidance (&optional session)
  "Return what efrit-todo puts in the system prompt of SESSION.
It says how to plan with the tools of `efrit-todo-tool-style' and
how to record changes by id and, when SESSION had items at the
first call, lists them with their ids.
Every later call for SESSION returns the same text, until
`efrit-todo-reset': a system prompt that changed between requests
would void the prompt cache of the whole conversation each time.
The live list reaches the model through tool results."
  (efrit-todo--module-prompt-guidance (efrit-todo--session session)
                                      efrit-todo-full-list-threshold
                                      (efrit-todo--style-name)))

;;;; Edits by the user

(defun efrit-todo--user-edit (op id arg session)
  "Apply the user edit OP to item ID with ARG in SESSION; return the note."
  (let* ((session (efrit-todo--session session))
         (note (efrit-todo--changing session
                 (efrit-todo--module-user-edit session op id arg
                                               efrit-todo-max-items
                                               efrit-todo-max-content-length
                                               efrit-todo-max-blockers))))
    (unless (string-empty-p note)
      (efrit-todo--changed session))
    note))

(defun efrit-todo-user-set-status (id status &optional session)
  "Set item ID of SESSION to STATUS on the user's behalf.
STATUS is a symbol such as `cancelled', or its name as a string.
The model reads about it with its next tool result.  Return the note.
The rules of the model's writes hold: starting or completing an item
that waits for an open blocker, its own or an ancestor's, signals
`efrit-todo-invalid-input' naming the blocker and changes nothing;
`efrit-todo-user-set-status-unblocked' drops such waits first."
  (efrit-todo--user-edit "status" id (if (symbolp status) (symbol-name status) status)
                         session))

(defun efrit-todo-user-set-status-unblocked (id status &optional session)
  "Set item ID of SESSION to STATUS, dropping first the waits that block it.
When STATUS starts or completes the item, its dependencies on open
blockers, and those of its ancestors, are removed in the same change
\(one undo takes all of it back).  Any other rule still refuses with
`efrit-todo-invalid-input', and then nothing changes.  Return the note."
  (efrit-todo--user-edit "status-unblocked" id
                         (if (symbolp status) (symbol-name status) status)
                         session))

(defun efrit-todo-user-edit-content (id content &optional session)
  "Replace the content of item ID of SESSION with CONTENT; return the note."
  (efrit-todo--user-edit "edit" id content session))

(defun efrit-todo-user-add (content &optional session)
  "Append a pending item with CONTENT to SESSION; return the note."
  (efrit-todo--user-edit "add" nil content session))

(defun efrit-todo-user-move (id offset &optional session)
  "Move item ID of SESSION by OFFSET places (negative is up); return the note."
  (efrit-todo--user-edit "move" id offset session))

(defun efrit-todo-user-add-blocker (id blocker &optional session)
  "Make item ID of SESSION wait for item BLOCKER; return the note.
Both are ids such as \"t3\".  An unknown id, ID itself or a
dependency that would close a cycle signal `efrit-todo-invalid-input'
and change nothing.  The model reads about it at its next request."
  (efrit-todo--user-edit "block" id blocker session))

(defun efrit-todo-user-remove-blocker (id blocker &optional session)
  "Make item ID of SESSION no longer wait for item BLOCKER; return the note."
  (efrit-todo--user-edit "unblock" id blocker session))

(defun efrit-todo-user-clear (&optional session)
  "Remove every item of SESSION, as an edit by the user; return the note.
The ids stay retired; `efrit-todo-undo' brings the items back.  The
note is empty when the list was empty."
  (efrit-todo--user-edit "clear" nil nil session))

(defun efrit-todo-user-clear-finished (&optional session)
  "Remove the completed and cancelled items of SESSION; return the note.
The note is empty when there was nothing to remove."
  (efrit-todo--user-edit "clear-finished" nil nil session))

;;;; The agent loop

(defgroup efrit-todo-loop nil
  "How efrit-todo steers the agent loop: breaker, reminders, completion."
  :group 'efrit-todo
  :prefix "efrit-todo-")

(defcustom efrit-todo-breaker-without-progress 30
  "Tool calls allowed without completing a todo item before the breaker trips."
  :type 'natnum
  :group 'efrit-todo-loop)

(defcustom efrit-todo-breaker-same-tool 15
  "Calls of one tool in a row before the breaker trips."
  :type 'natnum
  :group 'efrit-todo-loop)

(defcustom efrit-todo-breaker-identical 3
  "Identical calls (same tool, equal input) in a row before the breaker trips."
  :type 'natnum
  :group 'efrit-todo-loop)

(defcustom efrit-todo-breaker-error-warn 3
  "Times the same error may repeat before a warning rides on the result."
  :type 'natnum
  :group 'efrit-todo-loop)

(defcustom efrit-todo-breaker-error-trip 5
  "Times the same error may repeat before the breaker trips."
  :type 'natnum
  :group 'efrit-todo-loop)

(defcustom efrit-todo-breaker-oscillation 6
  "Length of an A-B-A-B run of two identical calls that trips the breaker."
  :type 'natnum
  :group 'efrit-todo-loop)

(defcustom efrit-todo-breaker-churn 3
  "Todo writes in a row that change nothing before the breaker trips."
  :type 'natnum
  :group 'efrit-todo-loop)

(defcustom efrit-todo-breaker-hard-cap 100
  "Tool calls in a session after which the breaker trips, progress or not."
  :type 'natnum
  :group 'efrit-todo-loop)

(defcustom efrit-todo-max-continuations 2
  "Continuation messages per session when the model stops with items open."
  :type 'natnum
  :group 'efrit-todo-loop)

(defcustom efrit-todo-reminders t
  "Non-nil to remind the model to update its list after several calls."
  :type 'boolean
  :group 'efrit-todo-loop)

(defcustom efrit-todo-reminder-after 4
  "Successful tool calls under one running item before a reminder."
  :type 'natnum
  :group 'efrit-todo-loop)

(defcustom efrit-todo-max-result-length 4000
  "Characters of one tool result kept in the final report.
Longer results are cut with a marker giving their full length."
  :type 'natnum
  :group 'efrit-todo-loop)

(declare-function efrit-todo--module-before-tool "efrit-todo-module" (session tool input options))
(declare-function efrit-todo--module-after-tool "efrit-todo-module"
                  (session tool input result error duration options))
(declare-function efrit-todo--module-turn-end "efrit-todo-module"
                  (session had-tool-calls options))
(declare-function efrit-todo--module-pause "efrit-todo-module" (session reason))
(declare-function efrit-todo--module-complete "efrit-todo-module"
                  (session message options))
(declare-function efrit-todo--module-report "efrit-todo-module" (session options))
(declare-function efrit-todo--module-ledger "efrit-todo-module" (session))
(declare-function efrit-todo--module-breaker "efrit-todo-module" (session))
(declare-function efrit-todo--module-breaker-reset "efrit-todo-module" (session))
(declare-function efrit-todo--module-analyze-request "efrit-todo-module" (text &optional style))

(defconst efrit-todo--loop-option-keys
  '((:without-progress . efrit-todo-breaker-without-progress)
    (:same-tool . efrit-todo-breaker-same-tool)
    (:identical . efrit-todo-breaker-identical)
    (:error-warn . efrit-todo-breaker-error-warn)
    (:error-trip . efrit-todo-breaker-error-trip)
    (:oscillation . efrit-todo-breaker-oscillation)
    (:churn . efrit-todo-breaker-churn)
    (:hard-cap . efrit-todo-breaker-hard-cap)
    (:max-continuations . efrit-todo-max-continuations)
    (:reminder-after . efrit-todo-reminder-after)
    (:reminders . efrit-todo-reminders)
    (:auto-complete . efrit-todo-auto-complete)
    (:max-result-chars . efrit-todo-max-result-length)
    (:tool-style . efrit-todo-tool-style))
  "The options the module's loop functions read: (KEY . VARIABLE).
The module reads a plist of these keys with the variables' values.
The tool style makes every text the model gets (continuation,
reminder, the breaker's warnings and refusals, the completion guard)
name only the tools it is offered.")

(defvar efrit-todo--loop-options nil
  "The options plist for the module, or nil when an option changed since.")

(defvar efrit-todo--loop-options-local nil
  "Non-nil once an option was set buffer-locally: then nothing is cached.")

(defun efrit-todo--loop-option-changed (_symbol _value _operation where)
  "Forget the options plist: an option is changing, in buffer WHERE if non-nil."
  (setq efrit-todo--loop-options nil)
  (when where (setq efrit-todo--loop-options-local t)))

(pcase-dolist (`(,_ . ,variable) efrit-todo--loop-option-keys)
  (add-variable-watcher variable #'efrit-todo--loop-option-changed))

(defvar efrit-todo--loop-option-function nil
  "Nil, or a function that gives a loop option's value in effect.
Called with the option's symbol and its value; returns the value to
use.  The Efrit adapter sets it to follow Efrit's own settings.")

(defun efrit-todo--make-loop-options ()
  "Return a new options plist, and keep it unless an option is buffer-local."
  (let ((options nil))
    (pcase-dolist (`(,key . ,variable) (reverse efrit-todo--loop-option-keys))
      (let ((value (symbol-value variable)))
        (push (if efrit-todo--loop-option-function
                  (funcall efrit-todo--loop-option-function variable value)
                value)
              options)
        (push key options)))
    (unless efrit-todo--loop-options-local
      (setq efrit-todo--loop-options options))
    options))

(defsubst efrit-todo--loop-options ()
  "Return the options plist for the loop functions of the module.
The same plist comes back until an option changes (the variable
watchers say when), and the module reads a plist it has seen before
without converting it again.  An old plist is never altered."
  (or efrit-todo--loop-options (efrit-todo--make-loop-options)))

(defvar efrit-todo--breaker-tripped nil
  "Non-nil while the breaker of some session may refuse a call.
That is, it tripped, or one of its count rules stands at its limit.
The module sets it after a call and clears it when no longer so.")

(defvar efrit-todo--checked-session nil
  "The session `efrit-todo-before-tool' last had the module check.")

(defvar efrit-todo--checked-tools (make-hash-table :test 'equal)
  "Tool names `efrit-todo-before-tool' has had the module check.")

(defvar efrit-todo--checked-agent nil
  "The agent `efrit-todo-before-tool' last had the module check.")

(defun efrit-todo-before-tool (name input &optional session)
  "Return nil to let tool NAME run with INPUT in SESSION, or the refusal.
A count rule refuses the call that would take it past its limit, and
only that kind of call (the same INPUT again, the same tool again, any
but the todo tools without progress); a second refusal in a row trips
the breaker, and a tripped breaker refuses every call."
  (let ((session (efrit-todo--session session)))
    ;; While no breaker is tripped, the answer for a session and tool the
    ;; module has checked before is nil: this runs before every tool call.
    (if (and (not efrit-todo--breaker-tripped)
             (eq session efrit-todo--checked-session)
             (eq efrit-todo-agent efrit-todo--checked-agent)
             (gethash name efrit-todo--checked-tools))
        nil
      (prog1 (efrit-todo--module-before-tool session name input (efrit-todo--loop-options))
        ;; The module signals for a bad session, agent or name, so all are good.
        (setq efrit-todo--checked-session session
              efrit-todo--checked-agent efrit-todo-agent)
        (unless (or (gethash name efrit-todo--checked-tools)
                    (>= (hash-table-count efrit-todo--checked-tools) 256))
          (puthash (copy-sequence name) t efrit-todo--checked-tools))))))

(defun efrit-todo-after-tool (name input result error-p &optional session duration)
  "Record the call of tool NAME with INPUT, RESULT and ERROR-P in SESSION.
Feeds the ledger, the breaker, reminders and auto-completion, and
returns the text to send back: RESULT (\"NAME returned no output\"
when it is nil or empty) plus any notice.  DURATION is in seconds."
  (let* ((session (efrit-todo--session session))
         (seq-before (and efrit-todo-auto-complete (efrit-todo--module-change-seq session)))
         ;; Auto-completion may change a shared list.
         (text (efrit-todo--changing session
                 (efrit-todo--module-after-tool session name input result error-p duration
                                                (efrit-todo--loop-options)))))
    ;; A recorded call changes the ledger and the breaker, which the UI
    ;; shows; Efrit's mirror of the list needs refreshing only when
    ;; auto-completion changed the list itself.
    (if (and seq-before (/= seq-before (efrit-todo--module-change-seq session)))
        (efrit-todo--changed session)
      (efrit-todo--run-change-hook session))
    text))

(defun efrit-todo-turn-end (had-tool-calls &optional session)
  "The model ended its turn in SESSION; HAD-TOOL-CALLS non-nil if it used tools.
Return nil to let the session end, or a continuation message to send."
  (efrit-todo--module-turn-end (efrit-todo--session session) had-tool-calls
                               (efrit-todo--loop-options)))

(defun efrit-todo-pause (reason &optional session)
  "The todo_pause tool: the model stops SESSION with items open for REASON.
REASON is 1 to 500 characters.  Return the text for the model."
  (let ((session (efrit-todo--session session)))
    (prog1 (efrit-todo--changing session (efrit-todo--module-pause session reason))
      (efrit-todo--run-change-hook session))))

(declare-function efrit-todo--module-pause-reason "efrit-todo-module" (session))
(declare-function efrit-todo--module-open-items "efrit-todo-module" (session))

(defun efrit-todo-pause-reason (&optional session)
  "Return the reason the model of SESSION gave with todo_pause, or nil."
  (efrit-todo--module-pause-reason (efrit-todo--session session)))

(defun efrit-todo--open-items-text (&optional session)
  "Return the open items of SESSION on one line, at most ten named, or \"\"."
  (efrit-todo--module-open-items (efrit-todo--session session)))

(defun efrit-todo-complete (message &optional session)
  "The session_complete guard for SESSION with the model's MESSAGE.
Return (:allowed BOOL :text STRING :model-text STRING).  With open
items the first call is refused and both texts list them.  When
allowed, TEXT is the final report for the user, with every tool
result, and MODEL-TEXT a short confirmation to send back to the
model: it has seen every result already, and whatever it is sent
stays in the conversation it pays for on each later request."
  (efrit-todo--module-complete (efrit-todo--session session) message
                               (efrit-todo--loop-options)))

(defun efrit-todo-report (&optional session)
  "Return the report of SESSION: every tool result in order, then the list."
  (efrit-todo--module-report (efrit-todo--session session) (efrit-todo--loop-options)))

(defun efrit-todo-ledger (&optional session)
  "Return a plist for each tool call recorded in SESSION, oldest first.
Keys: :tool :input :result :error :todo :time :duration :agent.
:agent is the name of the sub-agent that made the call, nil for the
session's own agent."
  (efrit-todo--module-ledger (efrit-todo--session session)))

(defun efrit-todo-breaker (&optional session)
  "Return the breaker state of SESSION as a plist.
Keys: :tripped :reason :calls :since-progress :same-tool :identical
:errors :churn.  With `efrit-todo-agent' bound to a sub-agent, the
state of that agent's breaker."
  (efrit-todo--module-breaker (efrit-todo--session session)))

;;;; Agent teams

(declare-function efrit-todo--module-agent-start "efrit-todo-module" (session type peer))
(declare-function efrit-todo--module-agent-end "efrit-todo-module" (session name))
(declare-function efrit-todo--module-agents "efrit-todo-module" (session))

(defun efrit-todo-agent-start (type &optional session peer)
  "Start a sub-agent of TYPE (a string such as \"executor\") in SESSION.
Return its name: TYPE, or TYPE-2, TYPE-3... while an agent of that
name is running (on a shared list, in any Emacs sharing it).
Bind `efrit-todo-agent' to the name around the sub-agent's calls: it
gets its own breaker, reminders and continuations, its calls are
marked with its name in the ledger and the report, and the items it
starts or adds are its own.

With PEER non-nil the agent works beside the others on a shared list
\(an efrit-do command, a gptel chat; see `efrit-todo-list-id') rather
than for a lead: its hard cap counts its own calls only, its report
holds its own calls, and when it ends its open items are let go for
the others to take."
  (let* ((session (efrit-todo--session session))
         (name (efrit-todo--changing session
                 (efrit-todo--module-agent-start session type peer))))
    (setq efrit-todo--checked-session nil)
    (efrit-todo--run-change-hook session)
    name))

(defun efrit-todo-agent-end (name &optional session)
  "End sub-agent NAME of SESSION.
Its items in progress go back to pending and stay its own (a peer's
open items are let go: no owner).  Return a short text for the lead
naming them, or nil when none was in progress or no agent NAME is
running."
  (let* ((session (efrit-todo--session session))
         (text (efrit-todo--changing session
                 (efrit-todo--module-agent-end session name))))
    (setq efrit-todo--checked-session nil)
    (if text
        (efrit-todo--changed session)
      (efrit-todo--run-change-hook session))
    text))

(defun efrit-todo-agents (&optional session)
  "Return the running sub-agents of SESSION, oldest first.
Each is a plist (:name NAME :type TYPE :current ITEM), ITEM being the
plist of its item in progress, as `efrit-todo-list' gives it, or nil."
  (efrit-todo--module-agents (efrit-todo--session session)))

;;;###autoload
(defun efrit-todo-begin-turn (&optional session)
  "Start a new turn of SESSION: fresh breaker, ledger and guide, same list.
For conversations whose list outlives one request, such as a REPL."
  (let ((session (efrit-todo--session session)))
    (efrit-todo--module-begin-turn session)
    (efrit-todo--run-change-hook session)))

;;;; Stopped sessions and carry-over

(declare-function efrit-todo--module-stop "efrit-todo-module" (session reason))
(declare-function efrit-todo--module-resume "efrit-todo-module" (session))
(declare-function efrit-todo--module-stopped "efrit-todo-module" (session))
(declare-function efrit-todo--module-forget-stop "efrit-todo-module" (session))
(declare-function efrit-todo--module-unfinished "efrit-todo-module" ())

(defcustom efrit-todo-carry-over 'carry
  "What a new agent command does with a list the previous one left open.
A command that stops with items open for any reason but completion
\(an interrupt, \[keyboard-quit] in a tool, the breaker, an API
error, a limit, todo_pause, Emacs closed) leaves an unfinished list.
`carry' makes the next command go on with it: the same items, ids,
history and report, and its first request says why the last one
stopped.  `ask' asks first; `never' starts every command afresh,
as Efrit does.  `efrit-todo-drop-unfinished' (\`x' in *efrit-todos*)
lets one list go without carrying it."
  :type '(choice (const :tag "Carry over" carry)
                 (const :tag "Ask first" ask)
                 (const :tag "Never" never))
  :group 'efrit-todo)

(defun efrit-todo-stop (reason &optional session)
  "Note that the command working on SESSION stopped for REASON.
With items open, SESSION is kept as unfinished, for the next command
to take over (see `efrit-todo-carry-over'); the stop is marked in the
history and the report, and t returned.  Without, return nil.
REASON is 1 to 300 characters."
  (let ((session (efrit-todo--session session)))
    (prog1 (efrit-todo--changing session (efrit-todo--module-stop session reason))
      (efrit-todo--run-change-hook session))))

(defun efrit-todo-resume (&optional session)
  "Let a new command take over SESSION, which stopped with items open.
The list, ids, history and report stay; breaker and reminders start
afresh, and the next `efrit-todo-prompt-guidance' says why the
previous command stopped and names the open items."
  (let ((session (efrit-todo--session session)))
    (efrit-todo--module-resume session)
    (efrit-todo--run-change-hook session)))

(defun efrit-todo-stopped (&optional session)
  "Return how SESSION stopped with items open, or nil.
A plist (:reason STRING :time FLOAT :running ID-OR-NIL), kept until a
command takes SESSION over or the user drops it."
  (efrit-todo--module-stopped (efrit-todo--session session)))

(defun efrit-todo-unfinished (&optional predicate)
  "Return (SESSION . STOP) for the list a command left open last, or nil.
STOP is as `efrit-todo-stopped' gives it.  With PREDICATE, only a
session whose name it accepts counts: an adapter takes over only the
lists of its own kind of session."
  (unless (or (null predicate) (functionp predicate))
    (signal 'efrit-todo-invalid-input
            (list (format "predicate: expected a function or nil, got %s"
                          (efrit-todo--describe predicate)))))
  (seq-find (lambda (entry) (or (null predicate) (funcall predicate (car entry))))
            (efrit-todo--module-unfinished)))

;;;###autoload
(defun efrit-todo-drop-unfinished (&optional session)
  "Let the unfinished list of SESSION go: no command will take it over.
The list itself stays, as it is.  Interactively, SESSION is the list
a command left open last."
  (interactive)
  (let ((session (or session (car (efrit-todo-unfinished)))))
    (if (and session (efrit-todo--module-forget-stop (efrit-todo--session session)))
        (progn (efrit-todo--run-change-hook session)
               (when (called-interactively-p 'interactive)
                 (message "Efrit-todo: the next command starts afresh instead of going on with %s"
                          session))
               t)
      (when (called-interactively-p 'interactive)
        (message "Efrit-todo: no unfinished list"))
      nil)))

;;;###autoload
(defun efrit-todo-breaker-reset (&optional session)
  "Reset the circuit breaker of SESSION so that tools may run again."
  (interactive (list (completing-read "Reset the breaker of session: "
                                      (efrit-todo-sessions) nil t nil nil
                                      (efrit-todo--session nil))))
  (let ((session (efrit-todo--session session)))
    (efrit-todo--module-breaker-reset session)
    (efrit-todo--run-change-hook session)
    (when (called-interactively-p 'interactive)
      (message "Efrit-todo: breaker of %s reset" session))))

(defun efrit-todo-analyze-request (text)
  "Return an estimate of how complex the request TEXT is.
The value is a plist: :complex is non-nil for three steps or more or
a high score, :score runs from 0.0 to 1.0, :steps is a count, and
:suggestion is text for the system prompt, empty unless complex.  The
suggestion names the planning tools of `efrit-todo-tool-style'."
  (efrit-todo--module-analyze-request text (efrit-todo--style-name)))

;;;; Efrit compatibility
;;
;; The names Efrit uses from its own efrit-todo.el live in their own file.
;; It is part of this feature: loaded here, before anything can change a
;; list, because `efrit-todo--changed' refreshes its mirror of the list.

(require 'efrit-todo-compat)

;;;; History

(declare-function efrit-todo--module-history "efrit-todo-module" (session))
(declare-function efrit-todo--module-undo "efrit-todo-module" (session))
(declare-function efrit-todo--module-shared-undo "efrit-todo-module" (session))

(defun efrit-todo-history (&optional session)
  "Return a plist for each change of SESSION's list, oldest first.
Keys: :seq (1, 2, ... never reused), :actor (`model' or `user'),
:kind (`write', `auto-complete', `status', `edit', `add', `move',
`clear-finished', `set-all', `clear', `reset' or `undo'), :time (a
float, as `float-time' gives it), :summary (one line), the ids the
change touched by what happened to them (:added :started :completed
:cancelled :reopened :paused :reworded :restored :demoted :dropped
:removed :reparented), :moved (non-nil when items were reordered), :undone,
:undoes (for an undo, the :seq it took back) and :undoable.  The
newest 200 changes are kept, and the newest 50 can be undone."
  (efrit-todo--module-history (efrit-todo--session session)))

;;;###autoload
(defun efrit-todo-undo (&optional session)
  "Undo the newest change of SESSION's list that is not undone yet.
Changes by the model and by the user alike; repeat to go further
back.  The undo is itself a change: `efrit-todo-change-functions'
run, it is saved, and the model reads about it at its next request.
Ids are never reused.  Return the note for the model, or nil when
there is nothing to undo.  Interactively, the current session; with
a prefix argument, ask which.

On a shared list (see `efrit-todo-share-list'), only this Emacs's
own newest change is undone, and only what it did to its items;
when another agent has changed one of those items since, the undo is
refused with `efrit-todo-invalid-input' saying which."
  (interactive (list (and current-prefix-arg
                          (completing-read "Undo in session: " (efrit-todo-sessions)
                                           nil t nil nil (efrit-todo--session nil)))))
  (let* ((session (efrit-todo--session session))
         ;; A session that does not exist has nothing to undo; asking
         ;; the module would create it, empty.
         (note (and (member session (efrit-todo-sessions))
                    (efrit-todo--changing session
                      (if (member session efrit-todo--shared-lists)
                          (efrit-todo--module-shared-undo session)
                        (efrit-todo--module-undo session))))))
    (when note
      (efrit-todo--changed session))
    (when (called-interactively-p 'interactive)
      (if note
          (message "Efrit-todo: %s" note)
        (message "Efrit-todo: nothing to undo in session %s" session)))
    note))

;;;; Persistence

(declare-function efrit-todo--module-store-schedule "efrit-todo-module" (session dir))
(declare-function efrit-todo--module-store-flush-begin "efrit-todo-module" ())
(declare-function efrit-todo--module-store-flush-wait "efrit-todo-module" (ticket seconds))
(declare-function efrit-todo--module-store-flush-end "efrit-todo-module" (ticket waited))
(declare-function efrit-todo--module-store-save "efrit-todo-module" (session dir))
(declare-function efrit-todo--module-store-file "efrit-todo-module" (session dir))
(declare-function efrit-todo--module-store-restore-within "efrit-todo-module"
                  (dir only-open force max-items max-content))

(defcustom efrit-todo-state-directory
  (and (not noninteractive) (locate-user-emacs-file "efrit-todo/"))
  "Directory where each session's list is saved, or nil for memory only.
A relative name is in `user-emacs-directory'.  One JSON file per
session (list, id counter, history, breaker and ledger summary), mode
0600 in a directory made with mode 0700.  A directory that others can
write, or that is not yours, is refused: its files become text the
model reads.  It is written atomically after every change, by a
thread of the module so that the change does not wait for the disk.
Sessions with unfinished items are restored when efrit-todo loads;
`efrit-todo-restore' restores them all.  The default is
\"efrit-todo/\" in `user-emacs-directory', but nil in batch Emacs,
so that scripts and test runs leave nothing behind; set it to save
from batch Emacs too."
  :type '(choice (directory :tag "Directory")
                 (const :tag "Keep lists in memory only" nil))
  :group 'efrit-todo)

;; Efrit starts a session per command, so without pruning the directory
;; grows by a file per command and every load reads them all.
(defcustom efrit-todo-state-max-age 30
  "Days a saved list is kept after its last change, or nil to keep all.
Before lists are restored (on load and by `efrit-todo-restore'),
the files in `efrit-todo-state-directory' not modified for this many
days are deleted, damaged files moved aside as .corrupt and other
Emacsen's saves kept beside as .conflict included.  The file of a
session live in this Emacs is never deleted."
  :type '(choice (number :tag "Days")
                 (const :tag "Keep every list" nil))
  :group 'efrit-todo)

(defcustom efrit-todo-flush-timeout 10
  "Seconds `efrit-todo-flush' waits at most for the saves to land.
Saves are written by a thread of the module; a flush (also
`efrit-todo-save' and the one as Emacs exits) waits for it, never
longer than this, so that a disk that does not answer cannot hang
Emacs.  When the time runs out, the flush says so and the saves stay
pending.  \\[keyboard-quit] stops the waiting too."
  :type 'number
  :group 'efrit-todo)

(defconst efrit-todo--state-file-regexp
  "\\`[^.].*\\.json\\(?:\\(?:\\.[0-9]+\\)?\\.\\(?:corrupt\\|conflict\\)\\)?\\'"
  "Names of the files the module keeps in the state directory.
State files NAME.json, damaged ones moved aside as NAME.json.corrupt
or NAME.json.N.corrupt, and saves of another Emacs kept beside as
NAME.json.conflict or NAME.json.N.conflict; never the dot files (the
temporary files of a save, the directory's lock).")

(defvar efrit-todo--restoring nil
  "Non-nil while sessions are read back, which need no saving.")

(defvar efrit-todo--state-dir-cache nil
  "(SETTING USER-EMACS-DIRECTORY . EXPANDED) of the last expansion.
Expanding a file name costs more than scheduling the save itself.")

(defun efrit-todo--expand-state-dir ()
  "Return `efrit-todo-state-directory' expanded, and remember it.
A relative name is in `user-emacs-directory', never in the current
buffer's directory: every buffer saves into the same place.  The
result is a string of its own, which no caller can alter in place."
  (let* ((setting efrit-todo-state-directory)
         (expanded (copy-sequence
                    (file-name-as-directory
                     (expand-file-name setting (expand-file-name user-emacs-directory))))))
    (setq efrit-todo--state-dir-cache (cons setting (cons user-emacs-directory expanded)))
    expanded))

(defsubst efrit-todo--state-dir ()
  "Return `efrit-todo-state-directory' expanded, or nil for memory only."
  (let ((setting efrit-todo-state-directory)
        (cache efrit-todo--state-dir-cache))
    (cond ((null setting) nil)
          ((and (eq (car cache) setting) (eq (cadr cache) user-emacs-directory))
           (cddr cache))
          (t (efrit-todo--expand-state-dir)))))

(defun efrit-todo--report-save-failures (news)
  "Show NEWS from the store; return the failures among it.
A string is the message of a failed save; (warning TEXT) is something
a save did that the user must know, such as another Emacs's save
kept beside as a conflict copy, and is shown with `display-warning'."
  (let (failures)
    (dolist (item news)
      (if (stringp item)
          (progn (message "Efrit-todo: %s" item)
                 (push item failures))
        (display-warning 'efrit-todo (cadr item))))
    (nreverse failures)))

(defun efrit-todo--schedule-save (session)
  "Have SESSION saved off the caller's path, when persistence is on.
Runs from `efrit-todo-change-functions', so every change is saved."
  (let ((dir (efrit-todo--state-dir)))
    ;; A shared list's change was saved before its call returned.
    (when (and dir (not efrit-todo--restoring)
               (not (member session efrit-todo--shared-lists)))
      (efrit-todo--report-save-failures
       (efrit-todo--module-store-schedule session dir)))))

(add-hook 'efrit-todo-change-functions #'efrit-todo--schedule-save)

(defun efrit-todo-state-file (&optional session)
  "Return the file SESSION is saved in, or nil when persistence is off."
  (let ((dir (efrit-todo--state-dir)))
    (and dir (efrit-todo--module-store-file (efrit-todo--session session) dir))))

(defun efrit-todo-flush ()
  "Finish every pending save before returning.
A save that failed earlier is tried again.  Return the messages of
the saves that have not landed (each is also shown): a failed save
stays pending, is retried in the background and is named by every
flush until it lands."
  (let* ((limit (if (and (numberp efrit-todo-flush-timeout) (> efrit-todo-flush-timeout 0))
                    (float efrit-todo-flush-timeout)
                  10.0))
         (ticket (efrit-todo--module-store-flush-begin))
         (deadline (+ (float-time) limit))
         left)
    ;; Short waits in a Lisp loop, so that C-g can stop it.
    (while (and (> (setq left (- deadline (float-time))) 0)
                (not (efrit-todo--module-store-flush-wait ticket (min left 0.05)))))
    (efrit-todo--report-save-failures
     (efrit-todo--module-store-flush-end ticket limit))))

;;;###autoload
(defun efrit-todo-save (&optional all)
  "Write every todo list waiting to be saved to disk now, and wait.
With ALL (interactively, a prefix argument), save every live session
into `efrit-todo-state-directory' as well.  Return the number of
saves that have not landed; they stay pending and are retried."
  (interactive "P")
  (let ((dir (efrit-todo--state-dir)))
    (when (and all dir)
      (dolist (session (efrit-todo-sessions))
        (efrit-todo--report-save-failures
         (efrit-todo--module-store-schedule session dir))))
    (let ((failures (efrit-todo-flush)))
      (when (called-interactively-p 'interactive)
        (cond (failures
               (message "Efrit-todo: %d save%s failed; %s pending and retried"
                        (length failures) (if (cdr failures) "s" "")
                        (if (cdr failures) "they stay" "it stays")))
              ((not dir)
               (message "Efrit-todo: efrit-todo-state-directory is nil; lists stay in memory"))
              (t (message "Efrit-todo: saved in %s" dir))))
      (length failures))))

(defun efrit-todo--save-on-exit ()
  "Write what is pending to disk as Emacs exits; never stop the exit.
A shared list's changes were saved as they were made; one whose file
is gone is saved again."
  (condition-case err
      ;; Without the module (its build not finished) there is nothing.
      (when (efrit-todo-build-module-loaded-p)
        (efrit-todo--save-shared-lists-on-exit)
        (efrit-todo-flush))
    (quit (message "Efrit-todo: stopped waiting for the saves to land"))
    (error (message "Efrit-todo: could not save: %s" (error-message-string err)))))

;; Late, so that changes other exit functions make are saved too.
(add-hook 'kill-emacs-hook #'efrit-todo--save-on-exit 90)

(defun efrit-todo--prune-state-files (dir)
  "Delete the files in DIR older than `efrit-todo-state-max-age'.
Only state files, damaged files moved aside and conflict copies are
candidates, and never the file of a live session.  Return the deleted
file names."
  (when (and (numberp efrit-todo-state-max-age) (file-directory-p dir))
    (let ((cutoff (time-subtract nil (* 86400 efrit-todo-state-max-age)))
          ;; The current session may not have been created yet, and may
          ;; be a name no file can have: such a name protects nothing.
          (live (delq nil (mapcar (lambda (session)
                                    (ignore-errors
                                      (file-name-nondirectory
                                       (efrit-todo--module-store-file session dir))))
                                  (cons (or efrit-todo-current-session "default")
                                        (efrit-todo-sessions)))))
          (deleted nil))
      (pcase-dolist (`(,file . ,attributes)
                     (directory-files-and-attributes
                      dir t efrit-todo--state-file-regexp t))
        (when (and (null (file-attribute-type attributes))
                   (time-less-p (file-attribute-modification-time attributes) cutoff)
                   (not (member (file-name-nondirectory file) live)))
          (condition-case err
              (progn (delete-file file)
                     (push file deleted))
            (file-error
             (display-warning 'efrit-todo (format "could not delete the old file %s: %s"
                                                  file (error-message-string err)))))))
      (nreverse deleted))))

(defun efrit-todo--restore-from (dir only-open force)
  "Read the sessions saved in DIR; see `efrit-todo-restore' for FORCE.
With ONLY-OPEN, only sessions with unfinished items.  Files older than
`efrit-todo-state-max-age' are deleted first.  Return the module's
report plist, with the deleted files under :pruned."
  (efrit-todo-flush)
  (let* ((pruned (efrit-todo--prune-state-files dir))
         (report (append (efrit-todo--module-store-restore-within
                          dir only-open force
                          efrit-todo-max-items efrit-todo-max-content-length)
                         (list :pruned pruned))))
    (pcase-dolist (`(,file ,aside ,reason) (plist-get report :moved))
      (display-warning
       'efrit-todo
       (format "%s could not be read (%s); it was moved aside as %s and its list is lost"
               file reason aside)))
    (pcase-dolist (`(,file ,reason) (plist-get report :skipped))
      (display-warning 'efrit-todo (format "%s was left alone: %s" file reason)))
    (pcase-dolist (`(,file ,text) (plist-get report :warnings))
      (display-warning 'efrit-todo (format "%s: %s" file text)))
    (let ((efrit-todo--restoring t))
      (mapc #'efrit-todo--changed (plist-get report :restored)))
    report))

;;;###autoload
(defun efrit-todo-restore (&optional force)
  "Read the sessions saved in `efrit-todo-state-directory' back.
A session whose list in this Emacs is not empty is kept as it is
unless FORCE (interactively, a prefix argument) is non-nil.  A file
that cannot be read is moved aside as NAME.corrupt with a warning.
Files older than `efrit-todo-state-max-age' are deleted first.
Return the names of the sessions restored."
  (interactive "P")
  (let* ((dir (or (efrit-todo--state-dir)
                  (user-error "Efrit-todo: efrit-todo-state-directory is nil")))
         (report (efrit-todo--restore-from dir nil force))
         (restored (plist-get report :restored)))
    (when (called-interactively-p 'interactive)
      (message "Efrit-todo: restored %d session%s from %s%s%s"
               (length restored) (if (= (length restored) 1) "" "s") dir
               (if (plist-get report :kept)
                   (format "; kept the live %s (use a prefix argument to replace)"
                           (string-join (plist-get report :kept) ", "))
                 "")
               (let ((pruned (length (plist-get report :pruned))))
                 (if (> pruned 0)
                     (format "; deleted %d file%s older than %s days" pruned
                             (if (= pruned 1) "" "s") efrit-todo-state-max-age)
                   ""))))
    restored))

(defun efrit-todo--restore-on-load ()
  "Restore the saved sessions that have unfinished items.
Not in batch Emacs, which runs scripts rather than resuming work."
  (let ((dir (efrit-todo--state-dir)))
    (when (and dir (not noninteractive) (file-directory-p dir)
               (efrit-todo-build-module-loaded-p))
      (condition-case err
          (efrit-todo--restore-from dir t nil)
        (error (display-warning 'efrit-todo
                                (format "could not restore lists from %s: %s"
                                        dir (error-message-string err))))))))

(efrit-todo--restore-on-load)

;;;; Shared lists
;;
;; A shared list is a session that several agents work on: every efrit-do
;; command and gptel chat started in a buffer whose `efrit-todo-list-id'
;; names it, and every Emacs using the same state directory.  Each change
;; of it is made on its newest save, under the directory's lock, and saved
;; before the call returns; a call that reads it first takes in a newer
;; save (a look at the file's identity, a read only when it changed).

(declare-function efrit-todo--module-shared-share "efrit-todo-module"
                  (session max-items max-content))
(declare-function efrit-todo--module-shared-unshare "efrit-todo-module" (session))
(declare-function efrit-todo--module-shared-begin "efrit-todo-module" (session dir wait))
(declare-function efrit-todo--module-shared-end "efrit-todo-module" (session dir))
(declare-function efrit-todo--module-shared-refresh "efrit-todo-module" (session dir wait))
(declare-function efrit-todo--module-shared-news "efrit-todo-module" ())
(declare-function efrit-todo--module-shared-save-if-missing "efrit-todo-module"
                  (session dir wait))

(defcustom efrit-todo-shared-lock-timeout 5
  "Seconds a change of a shared list waits at most for another Emacs.
Every Emacs using `efrit-todo-state-directory' changes a shared list
under the directory's lock, each change taking milliseconds.  A change
that cannot have the lock within this time fails with
`efrit-todo-storage-error' and changes nothing; \\[keyboard-quit] stops
the waiting sooner.  A lock whose Emacs died is free at once."
  :type 'number
  :group 'efrit-todo)

(defconst efrit-todo--shared-lock-slice 0.05
  "Seconds the module waits for the lock in one go.
Between these, Lisp runs, so that \\[keyboard-quit] stops the waiting.")

(defcustom efrit-todo-list-id nil
  "The shared list the agents started in this buffer work on, or nil.
A string names a shared list (see `efrit-todo-share-list'): every
efrit-do command and gptel chat started in a buffer where it is set
works on that list, each under its own agent name, and so does every
Emacs using the same `efrit-todo-state-directory'.  nil gives each
command and chat a list of its own.

Set it for a project in .dir-locals.el, e.g.
  ((nil . ((efrit-todo-list-id . \"my-project\"))))
It is only a name, saved under an encoded file name like every
session's, never a path.  As a file-local or directory-local
variable, only a short printable string is taken (see
`efrit-todo-list-id-p'); anything else is ignored with a message."
  :type '(choice (const :tag "A list of its own" nil)
                 (string :tag "Shared list"))
  :safe #'efrit-todo-list-id-p
  :local t
  :group 'efrit-todo)

(defconst efrit-todo--max-list-id-length 64
  "The longest name `efrit-todo-list-id' may be.")

(defun efrit-todo-list-id-p (value)
  "Return non-nil if VALUE can name a shared list.
That is a string of 1 to 64 printable characters, not all blank,
without newlines or other control characters."
  (and (stringp value)
       (<= 1 (length value) efrit-todo--max-list-id-length)
       (string-match-p "\\`[[:print:]]+\\'" value)
       (not (string-match-p "[[:cntrl:]]" value))
       (string-match-p "[^[:space:]]" value)))

(defun efrit-todo-buffer-list-id (&optional buffer)
  "Return the shared list BUFFER's agents work on, or nil.
BUFFER defaults to the current buffer.  A value of
`efrit-todo-list-id' that cannot name a list is ignored, with a
message saying so."
  (let* ((buffer (cond ((null buffer) (current-buffer))
                        ((and (bufferp buffer) (buffer-live-p buffer)) buffer)
                        ((and (stringp buffer) (get-buffer buffer)))
                        (t (signal 'efrit-todo-invalid-input
                                   (list (format "buffer: expected a live buffer or its name, got %s"
                                                 (efrit-todo--describe buffer)))))))
         (value (buffer-local-value 'efrit-todo-list-id buffer)))
    (cond ((null value) nil)
          ((efrit-todo-list-id-p value) value)
          (t (message "Efrit-todo: ignoring efrit-todo-list-id %s: expected a name of 1 to %d printable characters"
                      (efrit-todo--describe value) efrit-todo--max-list-id-length)
             nil))))

;;;###autoload
(defun efrit-todo-share-list (name)
  "Make NAME a shared list in this Emacs, and return NAME.
Its changes are then made on its newest save and saved before each
call returns, so that every Emacs using `efrit-todo-state-directory'
sees one list, and ids are never issued twice; a call that reads it
sees another Emacs's saved changes.  The saved list, when there is
one, becomes this Emacs's list of that name (a different list this
Emacs held under that name is kept beside as a .conflict file).
Agents started in a buffer whose `efrit-todo-list-id' is NAME work
on it."
  (interactive (let ((default (or (efrit-todo-buffer-list-id) (efrit-todo--session nil))))
                 (list (read-string (format-prompt "Share the list named" default)
                                    nil nil default))))
  (unless (efrit-todo-list-id-p name)
    (signal 'efrit-todo-invalid-input
            (list (format "name: expected 1 to %d printable characters, got %s"
                          efrit-todo--max-list-id-length (efrit-todo--describe name)))))
  (efrit-todo--module-shared-share name efrit-todo-max-items efrit-todo-max-content-length)
  (unless (member name efrit-todo--shared-lists)
    (push name efrit-todo--shared-lists))
  (efrit-todo--shared-refresh name)
  (efrit-todo--shared-watch)
  (efrit-todo--run-change-hook name)
  (when (called-interactively-p 'interactive)
    ;; Shared by hand, it is what the user means to work on next.
    (when (fboundp 'efrit-todo-ui--select-session)
      (efrit-todo-ui--select-session name))
    (message "Efrit-todo: %s is a shared list%s" name
             (if (efrit-todo--state-dir)
                 (format " in %s" (efrit-todo--state-dir))
               " (in this Emacs only: `efrit-todo-state-directory' is nil)")))
  name)

;; Another Emacs's change reaches this one when a call reads the list;
;; for the *efrit-todos* buffer, which nothing reads until it redraws, a
;; watch on the state directory (a file notification, and a timer where
;; there is none or it misses a rename) looks at the shared files and
;; runs the change hook for a list another Emacs changed.

(require 'filenotify)

(defcustom efrit-todo-shared-poll-interval 1
  "Seconds between looks at the shared lists' files for other Emacsen's changes.
A look is a `stat' of each shared list's file; a list another Emacs
changed is read and `efrit-todo-change-functions' run, so that
*efrit-todos* redraws.  A file notification makes the look at once
where the system offers one.  nil: only when a call reads the list."
  :type '(choice (number :tag "Seconds") (const :tag "Never" nil))
  :group 'efrit-todo)

(defvar efrit-todo--shared-timer nil
  "The timer that looks at the shared lists' files, while there are some.")

(defvar efrit-todo--shared-watch nil
  "(DIRECTORY . DESCRIPTOR) of the file notification on the state directory.")

(defvar efrit-todo--shared-poll-failures nil
  "Alist of (LIST . TEXT): the failure last shown for each shared list.
The look runs every second; a failure that stays is shown once.")

(defun efrit-todo--shared-poll ()
  "Take in the shared lists other Emacsen changed, and say they changed.
Never signals: a failure is shown once as a message, until the list
can be looked at again."
  (if (not (and efrit-todo--shared-lists (efrit-todo--state-dir)))
      (efrit-todo--shared-unwatch)
    (dolist (name efrit-todo--shared-lists)
      (condition-case err
          (progn
            (when (efrit-todo--shared-refresh name)
              (efrit-todo--changed name))
            (setq efrit-todo--shared-poll-failures
                  (assoc-delete-all name efrit-todo--shared-poll-failures)))
        (error
         (let ((text (format "Efrit-todo: shared list %s: %s" name (error-message-string err))))
           (unless (equal (cdr (assoc name efrit-todo--shared-poll-failures)) text)
             (setf (alist-get name efrit-todo--shared-poll-failures nil nil #'equal) text)
             (message "%s" text))))))))

(defvar efrit-todo--shared-poll-soon nil
  "The timer of a look asked for by a file notification, until it runs.
A burst of saves in the directory asks for one look.")

(defun efrit-todo--shared-notified (_event)
  "Look at the shared lists' files soon: something in the directory changed."
  (unless (timerp efrit-todo--shared-poll-soon)
    (setq efrit-todo--shared-poll-soon
          (run-with-timer 0.05 nil (lambda ()
                                     (setq efrit-todo--shared-poll-soon nil)
                                     (efrit-todo--shared-poll))))))

(defun efrit-todo--shared-unwatch ()
  "Stop looking at the shared lists' files."
  (when (timerp efrit-todo--shared-timer)
    (cancel-timer efrit-todo--shared-timer))
  (setq efrit-todo--shared-timer nil)
  (when efrit-todo--shared-watch
    (ignore-errors (file-notify-rm-watch (cdr efrit-todo--shared-watch)))
    (setq efrit-todo--shared-watch nil)))

(defun efrit-todo--shared-watch ()
  "Look at the shared lists' files now and then, and when they change."
  (let ((dir (efrit-todo--state-dir)))
    (when (and dir efrit-todo-shared-poll-interval (not noninteractive))
      (unless (timerp efrit-todo--shared-timer)
        (setq efrit-todo--shared-timer
              (run-with-timer efrit-todo-shared-poll-interval efrit-todo-shared-poll-interval
                              #'efrit-todo--shared-poll)))
      (unless (and efrit-todo--shared-watch (equal (car efrit-todo--shared-watch) dir))
        (when efrit-todo--shared-watch
          (ignore-errors (file-notify-rm-watch (cdr efrit-todo--shared-watch))))
        (setq efrit-todo--shared-watch
              (condition-case nil
                  (cons dir (file-notify-add-watch
                             dir '(change)
                             #'efrit-todo--shared-notified))
                (error nil)))))))

(defun efrit-todo-unshare-list (name)
  "Make NAME a list of this Emacs alone again.
Its list stays; its changes are saved as any session's are."
  (interactive (list (completing-read "Stop sharing: " efrit-todo--shared-lists nil t)))
  (setq efrit-todo--shared-lists (delete name efrit-todo--shared-lists))
  (efrit-todo--module-shared-unshare name))

(defun efrit-todo-shared-lists ()
  "Return the names of the lists this Emacs shares."
  (reverse efrit-todo--shared-lists))

(defun efrit-todo--shared-news ()
  "Show what the store has to say after a shared change (warnings)."
  (efrit-todo--report-save-failures (efrit-todo--module-shared-news)))

(defun efrit-todo--shared-refresh (session)
  "Take in another Emacs's newer save of the shared list SESSION.
Return non-nil when the list was replaced.  Nothing without a state
directory, where the list is shared within this Emacs only."
  (let ((dir (efrit-todo--state-dir)))
    (when dir
      (prog1 (efrit-todo--module-shared-refresh session dir efrit-todo--shared-lock-slice)
        (efrit-todo--shared-news)))))

(defconst efrit-todo--shared-wait-notice-delay 0.5
  "Seconds of waiting for the lock after which the echo area says so.")

(defun efrit-todo--shared-lock (session dir)
  "Take DIR's lock for a change of the shared list SESSION.
Wait in slices, so that \\[keyboard-quit] stops the waiting, at most
`efrit-todo-shared-lock-timeout' seconds; then signal
`efrit-todo-storage-error'.  A wait longer than half a second is shown
in the echo area until the lock is had or the wait ends."
  (let* ((started (float-time))
         (deadline (+ started efrit-todo-shared-lock-timeout))
         (shown nil))
    (unwind-protect
        (while (not (efrit-todo--module-shared-begin session dir efrit-todo--shared-lock-slice))
          (when (and (not shown)
                     (> (float-time) (+ started efrit-todo--shared-wait-notice-delay)))
            (setq shown t)
            (let ((message-log-max nil))
              (message "Efrit-todo: waiting for another Emacs to let go of the shared list %s (%s to stop)"
                       session (substitute-command-keys "\\[keyboard-quit]"))))
          (when (> (float-time) deadline)
            (signal 'efrit-todo-storage-error
                    (list (format "another process has held the lock of %s for more than %s s; the shared list %s was not changed"
                                  dir efrit-todo-shared-lock-timeout session)))))
      (when shown
        (message nil)))))

(defun efrit-todo--save-shared-lists-on-exit ()
  "Save each shared list whose file is gone, as Emacs exits.
Waits for another Emacs's lock at most `efrit-todo-shared-lock-timeout'
seconds in all; \\[keyboard-quit] stops it."
  (let ((dir (efrit-todo--state-dir))
        (deadline (+ (float-time) efrit-todo-shared-lock-timeout)))
    (when dir
      (dolist (name efrit-todo--shared-lists)
        (condition-case err
            (while (and (not (efrit-todo--module-shared-save-if-missing
                              name dir efrit-todo--shared-lock-slice))
                        (< (float-time) deadline)))
          (efrit-todo-error
           (message "Efrit-todo: could not save the shared list %s: %s"
                    name (error-message-string err)))))
      (efrit-todo--shared-news))))

(defun efrit-todo--shared-change (session change)
  "Call CHANGE, a change of the shared list SESSION, and return its value.
With a state directory, the change is made on the newest save of the
list, under the directory's lock, and saved before this returns.  A
change that fails changes nothing; so does one whose save fails, which
signals `efrit-todo-storage-error'."
  (let ((dir (efrit-todo--state-dir)))
    (if (not dir)
        (funcall change)
      (efrit-todo--shared-lock session dir)
      (let ((done nil) value)
        (unwind-protect
            (progn (setq value (funcall change))
                   (setq done t))
          (if done
              (efrit-todo--module-shared-end session dir)
            ;; The change failed and changed nothing: only let go of the lock.
            (condition-case nil
                (efrit-todo--module-shared-end session dir)
              (efrit-todo-error nil))))
        (efrit-todo--shared-news)
        value))))

;;;; The *efrit-todos* buffer and the mode line
;;
;; They live in efrit-todo-ui.el, which requires this file; this file
;; never requires it.  Its entry points are autoloaded instead, so that
;; `(require 'efrit-todo)' alone offers them, and the change hook loads
;; it when a list first changes, for `efrit-todo-auto-show'.  Commands
;; of the buffer need no autoload: the buffer exists only once the UI
;; is loaded.  Without the UI file beside this one (this file standing
;; in for Efrit's efrit-todo.el), nothing is drawn.

(declare-function efrit-todo-ui--on-change "efrit-todo-ui" (session))
(declare-function efrit-todo-ui--select-session "efrit-todo-ui" (session))

(when (locate-file "efrit-todo-ui" (list efrit-todo--directory) (get-load-suffixes))
  (dolist (command '(efrit-todo-show efrit-todo-mode-line-mode efrit-todo-list-mode))
    (autoload command "efrit-todo-ui" nil t))
  (custom-autoload 'efrit-todo-mode-line-mode "efrit-todo-ui" nil)
  (autoload 'efrit-todo-mode-line-text "efrit-todo-ui")
  (autoload 'efrit-todo-ui--on-change "efrit-todo-ui")
  (add-hook 'efrit-todo-change-functions #'efrit-todo-ui--on-change))

(when (locate-file "efrit-todo-demo" (list efrit-todo--directory) (get-load-suffixes))
  (autoload 'efrit-todo-demo (expand-file-name "efrit-todo-demo" efrit-todo--directory) nil t))

;;;; The adapters
;;
;; `(require 'efrit-todo)' offers the modes of the Efrit and gptel
;; adapters, as a package install's autoloads do, without loading
;; either adapter, Efrit or gptel.  By absolute name, so that the
;; adapter comes from the same copy of the package as this file.

(pcase-dolist (`(,file . ,commands)
               '(("efrit-todo-efrit" efrit-todo-efrit-mode)
                 ("efrit-todo-gptel" efrit-todo-gptel-mode efrit-todo-gptel-report)))
  (let ((library (expand-file-name file efrit-todo--directory)))
    (when (locate-file file (list efrit-todo--directory) (get-load-suffixes))
      (dolist (command commands)
        (autoload command library nil t))
      (custom-autoload (car commands) library nil))))

(defcustom efrit-todo-show-mode-line t
  "Non-nil to show the mode-line indicator while an adapter's mode is on.
Turning `efrit-todo-efrit-mode' or `efrit-todo-gptel-mode' on turns
`efrit-todo-mode-line-mode' on as well, and turning the last of them
off turns it off again, unless it was on before.  nil leaves the
indicator to `efrit-todo-mode-line-mode' alone."
  :type 'boolean
  :group 'efrit-todo)

(defvar efrit-todo--mode-line-holders nil
  "The adapter modes that keep `efrit-todo-mode-line-mode' on.
nil when the indicator is not theirs: off, or turned on by the user.")

(defvar efrit-todo-mode-line-mode)
(declare-function efrit-todo-mode-line-mode "efrit-todo-ui" (&optional arg))

(defun efrit-todo--hold-mode-line (holder on)
  "Let the mode HOLDER, turned on if ON, keep the indicator on or release it.
See `efrit-todo-show-mode-line'."
  (if on
      (when (and efrit-todo-show-mode-line (fboundp 'efrit-todo-mode-line-mode)
                 ;; Already on, and not by an adapter: the user's.
                 (or efrit-todo--mode-line-holders
                     (not (bound-and-true-p efrit-todo-mode-line-mode))))
        (cl-pushnew holder efrit-todo--mode-line-holders)
        (unless (bound-and-true-p efrit-todo-mode-line-mode)
          (efrit-todo-mode-line-mode 1)))
    (when (memq holder efrit-todo--mode-line-holders)
      (setq efrit-todo--mode-line-holders (delq holder efrit-todo--mode-line-holders))
      (when (and (null efrit-todo--mode-line-holders)
                 (bound-and-true-p efrit-todo-mode-line-mode))
        (efrit-todo-mode-line-mode -1)))))

(defun efrit-todo-unload-function ()
  "Stop watching variables when this file is unloaded.
Efrit's names go too, being part of this feature.  The module itself
stays loaded: Emacs cannot unload modules."
  (when (featurep 'efrit-todo-compat)
    (unload-feature 'efrit-todo-compat t))
  (pcase-dolist (`(,_ . ,variable) efrit-todo--loop-option-keys)
    (remove-variable-watcher variable #'efrit-todo--loop-option-changed))
  (efrit-todo--shared-unwatch)
  nil)

(provide 'efrit-todo)

;;; efrit-todo.el ends here
