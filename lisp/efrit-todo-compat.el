;;; efrit-todo-compat.el --- The names Efrit uses from its own efrit-todo.el -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The efrit-todo developers

;; Author: The efrit-todo developers
;; Maintainer: The efrit-todo developers
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

;; Efrit has a file efrit-todo.el of its own.  efrit-todo.el of this
;; package provides the same feature, so that it can stand in for that
;; file when it comes first in `load-path'; then Efrit's code calls the
;; names below, and they must behave as Efrit expects.  They act on the
;; current session (`efrit-todo-current-session'), see a flat list and
;; are backed by the module, which stays the source of truth: the two
;; variables mirror the current session's list after every change, and a
;; value Efrit sets directly is copied into the module.
;;
;; Until the module is loaded (it is being built, or its build was
;; declined), the names behave as Efrit's own file's do, on the two
;; variables alone: Efrit then works exactly as without efrit-todo.
;; When the module loads, the list Efrit holds is copied into it.
;;
;; efrit-todo.el loads this file; it is not meant to be loaded alone.  It
;; calls the core's functions only when Efrit calls it, so it requires
;; nothing of the core, and the core requires it: one direction.
;;
;; Who in Efrit uses what (files under Efrit's lisp/):
;;
;; - `efrit-todo--current-todos': interfaces/efrit-do.el makes it
;;   `efrit-do--current-todos' with `defvaralias'; through that name it
;;   is set by `efrit-do--create-session-for-command' and `efrit-do-sync'
;;   (in efrit-do.el) and by `efrit-do--handle-todo-write'
;;   (interfaces/efrit-do-handlers.el), read by `efrit-do-show-todos',
;;   `efrit-do--handle-format-todo-list', `efrit-agent-sync-todos'
;;   (interfaces/efrit-agent-integration.el), `efrit-todos--render' and
;;   `efrit-modeline--get-current-task' (support/efrit-ui-todos.el), and
;;   set again by `efrit-todos-clear-completed' (same file).
;; - `efrit-todo--counter': aliased as `efrit-do--todo-counter' in
;;   efrit-do.el; set by `efrit-do--create-session-for-command',
;;   `efrit-do-sync' and `efrit-do--handle-todo-write'.
;; - The struct `efrit-todo-item' and its `efrit-do-todo-item-*'
;;   aliases: `efrit-do--handle-todo-write' builds items with
;;   `efrit-do-todo-item-create'; the accessors are read by
;;   `efrit-do-show-todos', `efrit-agent--convert-todo-item',
;;   `efrit-todos--render', `efrit-todos-clear-completed' and
;;   `efrit-modeline--get-current-task'.
;; - `efrit-todo--generate-id', `efrit-todo-add', `efrit-todo-find':
;;   efrit-do.el aliases them as `efrit-do--generate-todo-id',
;;   `efrit-do--add-todo' and `efrit-do--find-todo'; no Efrit code
;;   calls those aliases today.
;; - `efrit-todo-update-status': aliased as
;;   `efrit-do--update-todo-status' in efrit-do.el, which
;;   `efrit-agent-setup-todo-integration' advises (and
;;   `efrit-agent-remove-todo-integration' un-advises).
;; - `efrit-todo-clear': called by `efrit-do--clear-todos' (efrit-do.el),
;;   which `efrit-do-clear-todos' and `efrit-do-clear-all' call.
;; - `efrit-todo-format-list': called by `efrit-tools-format-todo-list'
;;   (core/efrit-tools.el), which `efrit-do--handle-format-todo-list'
;;   calls.
;; - `efrit-todo-format-for-display': aliased as
;;   `efrit-do--format-todos-for-display' in efrit-do.el, called by
;;   `efrit-do-show-todos'.
;; - `efrit-todo-format-for-prompt': aliased as
;;   `efrit-do--format-todos-for-prompt' in efrit-do.el, called by
;;   `efrit-do--command-system-prompt' (core/efrit-do-prompt.el) for
;;   every request, so it never signals.
;; - `efrit-todo-get-all', `efrit-todo-set-all', `efrit-todo-count',
;;   `efrit-todo-set-counter': defined by Efrit's efrit-todo.el, called
;;   by no Efrit code today; kept for code written against that file.
;;
;; Near-synonyms: `efrit-todo-count' (Efrit's: a number) and
;; `efrit-todo-counts' (native: a plist by status); `efrit-todo-get-all'
;; (Efrit's: item vectors) and `efrit-todo-list' (native: plists with
;; ids, activeForm, parents and times); `efrit-todo-clear' (Efrit's:
;; the items only) and `efrit-todo-reset' (native: list, breaker, ledger
;; and guide); `efrit-todo-set-all' (Efrit's) and `efrit-todo-write'
;; (native, with validation and the model's result);
;; `efrit-todo-update-status' (Efrit's) and `efrit-todo-user-set-status'
;; (native, a user edit the model is told about);
;; `efrit-todo-format-for-prompt' (Efrit's: the live list) and
;; `efrit-todo-prompt-guidance' (native: the same text for a whole
;; session, which keeps the prompt cache).  New code should use the
;; native names, in efrit-todo.el; these exist for Efrit.

;;; Code:

(require 'cl-lib)
(require 'seq)
(require 'subr-x)

;; The core, efrit-todo.el, loads this file and defines these.
(defvar efrit-todo-max-items)
(defvar efrit-todo-max-content-length)
(declare-function efrit-todo--session "efrit-todo" (session))
(declare-function efrit-todo--change "efrit-todo" (session change))

(defmacro efrit-todo-compat--changing (session &rest body)
  "Run BODY, a change of the list of SESSION, and return its value.
A shared list's change is made on its newest save and saved before
this returns (see `efrit-todo--changing')."
  (declare (indent 1) (debug (form body)))
  `(efrit-todo--change ,session (lambda () ,@body)))

(defvar efrit-todo--shared-lists)
(declare-function efrit-todo--describe "efrit-todo" (value))
(declare-function efrit-todo--changed "efrit-todo" (session))
(declare-function efrit-todo--run-change-hook "efrit-todo" (session))
(declare-function efrit-todo-stopped "efrit-todo" (&optional session))
(declare-function efrit-todo-list "efrit-todo" (&optional session))
(declare-function efrit-todo-counts "efrit-todo" (&optional session))
(declare-function efrit-todo--module-structs "efrit-todo-module" (session old))
(declare-function efrit-todo--module-add "efrit-todo-module"
                  (session content priority max-items max-content))
(declare-function efrit-todo--module-set-status "efrit-todo-module"
                  (session id status))
(declare-function efrit-todo--module-set-all "efrit-todo-module"
                  (session items max-items max-content))
(declare-function efrit-todo--module-allocate-id "efrit-todo-module" (session))
(declare-function efrit-todo--module-id-counter "efrit-todo-module" (session))
(declare-function efrit-todo--module-raise-counter "efrit-todo-module"
                  (session n))
(declare-function efrit-todo--module-clear "efrit-todo-module" (session))
(declare-function efrit-todo-build-module-loaded-p "efrit-todo-build" ())

(cl-defstruct (efrit-todo-item
               (:constructor efrit-todo-item-create)
               (:type vector))
  "A todo item in Efrit's shape, mirrored from the module."
  id
  content
  status
  priority
  created-at
  completed-at)

;; Efrit's older code calls the accessors by their efrit-do- names.  They
;; are outside this package's prefix, hence made in a loop rather than
;; spelled out one by one.
(dolist (name '("id" "content" "status" "priority" "created-at" "completed-at" "create"))
  (defalias (intern (concat "efrit-do-todo-item-" name))
    (intern (concat "efrit-todo-item-" name))))

(defvar efrit-todo--current-todos nil
  "The current session's items as `efrit-todo-item' vectors, in list order.
Kept for Efrit, which reads and sets it; efrit-todo refreshes it after
every change and copies a value set from outside into the module.")

(defvar efrit-todo--counter 0
  "How many ids the current session has issued.")

;;;; Without the module: Efrit's own behaviour

(defsubst efrit-todo-compat--plain-p ()
  "Return non-nil while the module is not loaded: the names act as Efrit's."
  (not (efrit-todo-build-module-loaded-p)))

(defun efrit-todo-compat--plain-find (id)
  "Return the item with ID in Efrit's list, or nil."
  (seq-find (lambda (item) (equal (efrit-todo-item-id item) id))
            efrit-todo--current-todos))

(defun efrit-todo-compat--plain-line (item)
  "Return ITEM as a line of Efrit's own: mark, priority, content and id."
  (format "%s [%s] %s (%s)"
          (pcase (efrit-todo-item-status item)
            ('todo "\u2610")
            ('in-progress "\u27f3")
            ('completed "\u2611")
            (_ ""))
          (upcase (format "%s" (efrit-todo-item-priority item)))
          (efrit-todo-item-content item)
          (efrit-todo-item-id item)))

(defun efrit-todo-compat--plain-sort (todos sort-by)
  "Return TODOS in Efrit's order for SORT-BY (status, priority, nil)."
  (let ((order (pcase sort-by
                 ('status (cons '(in-progress todo completed) #'efrit-todo-item-status))
                 ('priority (cons '(high medium low) #'efrit-todo-item-priority)))))
    (if (not order)
        todos
      (sort (copy-sequence todos)
            (lambda (a b)
              (< (or (seq-position (car order) (funcall (cdr order) a)) 99)
                 (or (seq-position (car order) (funcall (cdr order) b)) 99)))))))

(defun efrit-todo-compat--plain (name &rest args)
  "Do what Efrit's function NAME does with ARGS, on the variables alone."
  (pcase (cons name args)
    (`(generate-id)
     (setq efrit-todo--counter (1+ efrit-todo--counter))
     (format "efrit-todo-%d" efrit-todo--counter))
    (`(add ,content ,priority)
     (unless (and (stringp content) (not (string-empty-p (string-trim content))))
       (error "TODO content must be a non-empty string"))
     (unless (memq priority '(nil low medium high))
       (error "TODO priority must be one of: low, medium, high"))
     (let ((item (efrit-todo-item-create
                  :id (efrit-todo-compat--plain 'generate-id) :content content :status 'todo
                  :priority (or priority 'medium) :created-at (current-time))))
       (push item efrit-todo--current-todos)
       item))
    (`(update-status ,id ,status)
     (unless (and (stringp id) (not (string-empty-p id)))
       (error "TODO ID must be a non-empty string"))
     (unless (memq status '(todo in-progress completed))
       (error "TODO status must be one of: todo, in-progress, completed"))
     (when-let* ((item (efrit-todo-compat--plain-find id)))
		(setf (efrit-todo-item-status item) status)
		(when (eq status 'completed)
		  (setf (efrit-todo-item-completed-at item) (current-time)))
		item))
    (`(clear) (setq efrit-todo--current-todos nil efrit-todo--counter 0))
    (`(format-list ,todos ,sort-by)
     (when todos
       (mapconcat #'efrit-todo-compat--plain-line
                  (efrit-todo-compat--plain-sort todos sort-by) "\n")))
    (`(format-for-display)
     (or (efrit-todo-compat--plain 'format-list efrit-todo--current-todos nil)
         "No current TODOs"))
    (`(format-for-prompt)
     (if efrit-todo--current-todos
         (concat "\n\nCURRENT TODOs:\n" (efrit-todo-compat--plain 'format-for-display) "\n")
       ""))))

(defun efrit-todo-compat--adopt-plain ()
  "Copy the list Efrit kept while the module was not loaded into the module."
  (let ((todos efrit-todo--current-todos)
        (counter efrit-todo--counter))
    (when (consp todos)
      (efrit-todo-compat--watch-variables 'efrit-todo--current-todos todos 'set nil))
    (when (and (natnump counter) (> counter 0))
      (efrit-todo-compat--watch-variables 'efrit-todo--counter counter 'set nil))))

;;;; With the module

(defvar efrit-todo-compat--mirroring nil
  "Non-nil while efrit-todo itself sets the Efrit compatibility variables.")

(defvar efrit-todo-compat--mirror-session nil
  "Session whose list `efrit-todo--current-todos' holds.
Nil when the variable must be read afresh from the module; a write
given the structs to update sets it to nil when it could not.")

(defun efrit-todo-compat--mirror-of (session)
  "Return `efrit-todo--current-todos' if SESSION's list is in it, else nil.
The list is in it when SESSION is the current session and the variable
was last set from SESSION's list."
  (and (equal session efrit-todo-compat--mirror-session)
       (equal session (efrit-todo--session nil))
       efrit-todo--current-todos))

;; The Efrit adapter's mode, in efrit-todo-efrit.el, which may not be loaded.
(defvar efrit-todo-efrit-mode)

(defvar efrit-todo-compat--efrit-lists (make-hash-table :test 'equal)
  "Sessions whose list Efrit's own code keeps, efrit-todo's adapter off.
With `efrit-todo-efrit-mode' off, Efrit's todo_write stores its list
through the names of this file, in the module; the list is still
Efrit's, which no agent of efrit-todo reads, and the buffer and
indicator leave it alone.")

(defun efrit-todo-compat--note-writer (session)
  "Record the keeper of SESSION's list, which Efrit's code is changing.
That is Efrit alone, unless `efrit-todo-efrit-mode' is on."
  (if (bound-and-true-p efrit-todo-efrit-mode)
      (remhash session efrit-todo-compat--efrit-lists)
    (puthash session t efrit-todo-compat--efrit-lists)))

(defun efrit-todo-compat--efrit-list-p (session)
  "Return non-nil when SESSION's list is Efrit's own, kept without the adapter."
  (gethash session efrit-todo-compat--efrit-lists))

(defun efrit-todo-compat--status-from-efrit (status)
  "Return the module spelling of Efrit's STATUS symbol."
  (pcase status
    ('todo "pending")
    ((or 'pending 'in-progress 'completed 'cancelled) (symbol-name status))
    (_ (signal 'efrit-todo-invalid-input
               (list (format "status: expected todo, in-progress, completed or cancelled, got %s"
                             (efrit-todo--describe status)))))))

(defun efrit-todo-compat--refresh-mirror (session)
  "Set Efrit's variables from the list of SESSION."
  (let ((efrit-todo-compat--mirroring t)
        ;; The structs of the same session are updated in place.
        (old (and (equal session efrit-todo-compat--mirror-session) efrit-todo--current-todos)))
    (setq efrit-todo-compat--mirror-session session)
    ;; Setting a watched variable calls the watcher: skip it when the list
    ;; was updated in place.
    (let ((todos (efrit-todo--module-structs session old)))
      (unless (eq todos efrit-todo--current-todos)
        (setq efrit-todo--current-todos todos)))
    (let ((counter (efrit-todo--module-id-counter session)))
      (unless (eql counter efrit-todo--counter)
        (setq efrit-todo--counter counter)))))

(defun efrit-todo-compat--mirror ()
  "Return `efrit-todo--current-todos', refreshed if the session changed."
  (let ((session (efrit-todo--session nil)))
    (unless (equal session efrit-todo-compat--mirror-session)
      (efrit-todo-compat--refresh-mirror session)))
  efrit-todo--current-todos)

(defun efrit-todo-compat--struct-p (object)
  "Return non-nil if OBJECT has the shape of an `efrit-todo-item'.
The struct is a plain vector, so this is the only test there is."
  (and (vectorp object) (= (length object) 6)))

(defun efrit-todo-compat--time (time)
  "Return TIME, any Lisp time value, as a float, or nil."
  (and time (ignore-errors (float-time time))))

(defun efrit-todo-compat--struct-plist (item)
  "Return the module plist for ITEM, an `efrit-todo-item' (or anything else)."
  (if (efrit-todo-compat--struct-p item)
      (list :id (efrit-todo-item-id item)
            :content (efrit-todo-item-content item)
            :status (let ((status (efrit-todo-item-status item)))
                      (if (symbolp status) (efrit-todo-compat--status-from-efrit status) status))
            :priority (let ((priority (efrit-todo-item-priority item)))
                        (if (symbolp priority) (and priority (symbol-name priority)) priority))
            :created (efrit-todo-compat--time (efrit-todo-item-created-at item))
            :completed (efrit-todo-compat--time (efrit-todo-item-completed-at item)))
    item))

(defun efrit-todo-compat--adopt (todos)
  "Copy TODOS, a list Efrit set directly, into the current session."
  (let ((session (efrit-todo--session nil)))
    (efrit-todo-compat--note-writer session)
    (efrit-todo-compat--changing session
      (efrit-todo--module-set-all session (mapcar #'efrit-todo-compat--struct-plist todos)
                                  efrit-todo-max-items efrit-todo-max-content-length))
    ;; The variable keeps what was set; when that is not a list of structs
    ;; (the module also takes plists and tables), read the structs afresh.
    (setq efrit-todo-compat--mirror-session
          (and (seq-every-p #'efrit-todo-compat--struct-p todos) session))
    (efrit-todo--run-change-hook session)))

(defun efrit-todo-compat--watch-variables (symbol value operation _where)
  "Copy VALUE, set from outside into SYMBOL by OPERATION, into the module.
Efrit clears its list with `setq' when a session starts; this keeps
the module in step.  Never signals: it runs inside someone's `setq'."
  (when (and (eq operation 'set) (not efrit-todo-compat--mirroring)
             (not (efrit-todo-compat--plain-p)))
    (condition-case err
        (pcase symbol
          ('efrit-todo--current-todos
           (if (listp value)
               ;; Efrit empties the list when a command starts; a list a
               ;; command left open stays, for the next one to take over,
               ;; and so does a shared list, which other agents work on.
               (if (and (null value)
                        (or (efrit-todo-stopped)
                            (member (efrit-todo--session nil) efrit-todo--shared-lists)))
                   (setq efrit-todo-compat--mirror-session nil)
                 (efrit-todo-compat--adopt value))
             (setq efrit-todo-compat--mirror-session nil)
             (message "Efrit-todo: ignoring a non-list value of efrit-todo--current-todos")))
          ('efrit-todo--counter
           (when (natnump value)
             (let ((session (efrit-todo--session nil)))
               (efrit-todo-compat--changing session
                 (efrit-todo--module-raise-counter session value))))))
      (error
       ;; The variable is about to hold what could not be adopted: read
       ;; the list from the module again next time.
       (setq efrit-todo-compat--mirror-session nil)
       (message "Efrit-todo: could not adopt %s: %s"
                symbol (error-message-string err))))))

(add-variable-watcher 'efrit-todo--current-todos #'efrit-todo-compat--watch-variables)
(add-variable-watcher 'efrit-todo--counter #'efrit-todo-compat--watch-variables)

(defun efrit-todo--generate-id ()
  "Reserve and return a fresh id in the current session."
  (if (efrit-todo-compat--plain-p)
      (efrit-todo-compat--plain 'generate-id)
    (let* ((session (efrit-todo--session nil))
           (id (efrit-todo-compat--changing session
                 (efrit-todo--module-allocate-id session))))
      (efrit-todo-compat--refresh-mirror session)
      id)))

(defun efrit-todo-compat--find-struct (id)
  "Return the mirrored item with ID, or nil."
  (seq-find (lambda (item) (equal (efrit-todo-item-id item) id))
            (efrit-todo-compat--mirror)))

(defun efrit-todo-add (content &optional priority)
  "Append a pending item with CONTENT and optional PRIORITY; return it.
PRIORITY is low, medium (the default) or high."
  (if (efrit-todo-compat--plain-p)
      (efrit-todo-compat--plain 'add content priority)
    (efrit-todo-compat--add content priority)))

(defun efrit-todo-compat--add (content priority)
  "Add an item with CONTENT and PRIORITY to the module; return it."
  (unless (memq priority '(nil low medium high))
    (signal 'efrit-todo-invalid-input
            (list (format "priority: expected low, medium or high, got %s"
                          (efrit-todo--describe priority)))))
  (let* ((session (efrit-todo--session nil))
         (plist (progn
                  (efrit-todo-compat--note-writer session)
                  (efrit-todo-compat--changing session
                    (efrit-todo--module-add session content
                                          (symbol-name (or priority 'medium))
                                          efrit-todo-max-items
                                          efrit-todo-max-content-length)))))
    (efrit-todo--changed session)
    (efrit-todo-compat--find-struct (plist-get plist :id))))

(defun efrit-todo-update-status (id new-status)
  "Set the status of the item with ID to NEW-STATUS; return it, or nil.
NEW-STATUS is todo, in-progress, completed or cancelled."
  (if (efrit-todo-compat--plain-p)
      (efrit-todo-compat--plain 'update-status id new-status)
    (efrit-todo-compat--update-status id new-status)))

(defun efrit-todo-compat--update-status (id new-status)
  "Set the status of the module's item ID to NEW-STATUS; return it, or nil."
  (unless (and (stringp id) (not (string-empty-p id)))
    (signal 'efrit-todo-invalid-input
            (list (format "id: expected a non-empty string, got %s" (efrit-todo--describe id)))))
  (let* ((session (efrit-todo--session nil))
         (plist (progn
                  (efrit-todo-compat--note-writer session)
                  (efrit-todo-compat--changing session
                    (efrit-todo--module-set-status
                     session id (efrit-todo-compat--status-from-efrit new-status))))))
    (when plist
      (efrit-todo--changed session)
      (efrit-todo-compat--find-struct id))))

(defun efrit-todo-find (id)
  "Return the item with ID in the current session, or nil."
  (if (efrit-todo-compat--plain-p)
      (efrit-todo-compat--plain-find id)
    (efrit-todo-compat--find-struct id)))

(defun efrit-todo-get-all ()
  "Return the items of the current session as `efrit-todo-item' vectors."
  (if (efrit-todo-compat--plain-p)
      efrit-todo--current-todos
    (efrit-todo-compat--mirror)))

(defun efrit-todo-set-all (todos)
  "Replace the current session's list with TODOS, `efrit-todo-item' vectors."
  (if (efrit-todo-compat--plain-p)
      (setq efrit-todo--current-todos todos)
    (efrit-todo-compat--set-all todos)))

(defun efrit-todo-compat--set-all (todos)
  "Replace the module's current list with TODOS."
  (unless (proper-list-p todos)
    (signal 'efrit-todo-invalid-input
            (list (format "todos: expected a list of items, got a %s" (type-of todos)))))
  (let ((session (efrit-todo--session nil)))
    (efrit-todo-compat--note-writer session)
    (efrit-todo-compat--changing session
      (efrit-todo--module-set-all session (mapcar #'efrit-todo-compat--struct-plist todos)
                                  efrit-todo-max-items efrit-todo-max-content-length))
    (efrit-todo--changed session)
    (efrit-todo-compat--mirror)))

(defun efrit-todo-clear ()
  "Remove every item of the current session.
Unlike Efrit's counter, the id counter keeps counting so that an id
never comes back with another meaning."
  (if (efrit-todo-compat--plain-p)
      (efrit-todo-compat--plain 'clear)
    (let ((session (efrit-todo--session nil)))
      (efrit-todo-compat--note-writer session)
      (efrit-todo-compat--changing session (efrit-todo--module-clear session))
      (efrit-todo--changed session))))

(defun efrit-todo-count ()
  "Return the number of items in the current session."
  (length (efrit-todo-get-all)))

(defun efrit-todo-set-counter (n)
  "Raise the id counter of the current session to N.
It never goes down: lowering it would reissue ids."
  (if (efrit-todo-compat--plain-p)
      (setq efrit-todo--counter n)
    (let ((session (efrit-todo--session nil)))
      (efrit-todo-compat--changing session (efrit-todo--module-raise-counter session n))
      (efrit-todo-compat--refresh-mirror session)
      efrit-todo--counter)))

(defun efrit-todo-compat--status-mark (status)
  "Return a short ASCII mark for STATUS."
  (pcase status
    ((or 'todo 'pending) "[ ]")
    ('in-progress "[>]")
    ('completed "[x]")
    ('cancelled "[-]")
    (_ "[?]")))

(defun efrit-todo-compat--format-item (item)
  "Return one display line for ITEM, an `efrit-todo-item'."
  (unless (efrit-todo-compat--struct-p item)
    (signal 'efrit-todo-invalid-input
            (list (format "todos: expected efrit-todo-item vectors, got %s"
                          (efrit-todo--describe item)))))
  (format "%s %s %s%s"
          (efrit-todo-compat--status-mark (efrit-todo-item-status item))
          (efrit-todo-item-id item)
          (efrit-todo-item-content item)
          (let ((priority (efrit-todo-item-priority item)))
            (if (memq priority '(nil medium)) "" (format " (%s priority)" priority)))))

(defun efrit-todo-format-list (todos &optional sort-by)
  "Return TODOS as display lines, sorted by SORT-BY.
SORT-BY is `status' (running first), `priority' (high first),
`created' (oldest first) or nil (list order)."
  (if (efrit-todo-compat--plain-p)
      (efrit-todo-compat--plain 'format-list todos sort-by)
    (efrit-todo-compat--format-list todos sort-by)))

(defun efrit-todo-compat--format-list (todos sort-by)
  "Return TODOS as efrit-todo's display lines, sorted by SORT-BY."
  (unless (proper-list-p todos)
    (signal 'efrit-todo-invalid-input
            (list (format "todos: expected a list, got a %s" (type-of todos)))))
  (let* ((print-level 3)
         (print-length 10)
         (rank (lambda (order key) (lambda (item) (or (seq-position order (funcall key item)) 99))))
         (key (pcase sort-by
                ('status (funcall rank '(in-progress todo pending completed cancelled)
                                  #'efrit-todo-item-status))
                ('priority (funcall rank '(high medium low) #'efrit-todo-item-priority))
                ('created (lambda (item) (or (efrit-todo-compat--time (efrit-todo-item-created-at item)) 0)))))
         (sorted (if key
                     (sort (copy-sequence todos)
                           (lambda (a b) (< (funcall key a) (funcall key b))))
                   todos)))
    (when sorted
      (mapconcat #'efrit-todo-compat--format-item sorted "\n"))))

(defun efrit-todo-format-for-display ()
  "Return the current session's items as display lines."
  (if (efrit-todo-compat--plain-p)
      (efrit-todo-compat--plain 'format-for-display)
    (or (efrit-todo-format-list (efrit-todo-compat--mirror)) "No current TODOs")))

(defun efrit-todo-format-for-prompt ()
  "Return the current list for the system prompt, or \"\" without one.
Efrit calls this while building every request, so it never signals.
It shows the live list, as Efrit's own function does; with
`efrit-todo-efrit-mode' on, the prompt gets the fixed text of
`efrit-todo-prompt-guidance' instead, which keeps the prompt cache."
  (condition-case err
      (if-let* (((efrit-todo-compat--plain-p)))
               (efrit-todo-compat--plain 'format-for-prompt)
               (if-let* ((items (efrit-todo-list)))
			(concat (let ((counts (efrit-todo-counts)))
				  (format "\n\nTODO LIST (%d/%d done):\n"
					  (plist-get counts :completed) (plist-get counts :total)))
				(mapconcat (lambda (item)
					     (format "  %s [%s] %s" (plist-get item :id)
						     (string-replace "-" "_" (symbol-name (plist-get item :status)))
						     (plist-get item :content)))
					   items "\n")
				"\n")
			""))
    (error (message "Efrit-todo: %s" (error-message-string err))
           "")))

(defun efrit-todo-compat-unload-function ()
  "Stop watching Efrit's variables when this file is unloaded."
  (remove-variable-watcher 'efrit-todo--current-todos #'efrit-todo-compat--watch-variables)
  (remove-variable-watcher 'efrit-todo--counter #'efrit-todo-compat--watch-variables)
  nil)

(provide 'efrit-todo-compat)

;; Local Variables:
;; package-lint-main-file: "efrit-todo.el"
;; End:

;;; efrit-todo-compat.el ends here
