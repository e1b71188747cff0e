;;; efrit-todo-ui.el --- The *efrit-todos* buffer and mode-line indicator -*- lexical-binding: t; -*-

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

;; What the user sees of efrit-todo while an agent works:
;;
;; - `efrit-todo-show' opens *efrit-todos*, one section per session,
;;   newest first: each item with its status, id and content, the running
;;   item's activeForm and time, the time finished items took, and, folded
;;   under each item, the tool calls made while it ran.  The buffer
;;   follows `efrit-todo-change-functions' while it is visible, redrawing
;;   only the session that changed.  Its keys edit the list through the
;;   module; the agent reads about each edit with its next tool result.
;; - `efrit-todo-auto-show' pops the buffer up, without selecting it,
;;   when a session first has a list.
;; - `efrit-todo-mode-line-mode' shows progress and the running item in
;;   the mode line.
;;
;; Loading this file draws nothing until one of these is asked for.
;; It requires efrit-todo.el, which never requires it back: that file
;; autoloads the entry points above and the change hook of this one, so
;; that (require 'efrit-todo) is enough to use them.

;;; Code:

(require 'cl-lib)
(require 'seq)
(require 'subr-x)
(require 'efrit-todo)

;;;; Options and faces

(defgroup efrit-todo-ui nil
  "The *efrit-todos* buffer and the mode-line indicator of efrit-todo."
  :group 'efrit-todo
  :prefix "efrit-todo-")

(defcustom efrit-todo-auto-show t
  "Non-nil to show *efrit-todos* when a session first has a list.
The buffer appears as `efrit-todo-display-buffer-action' says and
does not take focus.  Batch Emacs never shows it."
  :type 'boolean
  :group 'efrit-todo-ui)

(defcustom efrit-todo-display-buffer-action
  '((display-buffer-reuse-window efrit-todo-display-buffer))
  "How `efrit-todo-show' and `efrit-todo-auto-show' display the buffer.
A `display-buffer' action.  The default shows the list in a window
of its own, beside the other windows when the frame is wide enough
and below them otherwise (see `efrit-todo-display-buffer').  It is an
ordinary window: \\[delete-other-windows] in it keeps only the list,
\\[delete-window] or q in it closes it, and it grows and shrinks
with the frame."
  :type 'sexp
  :group 'efrit-todo-ui)

(defcustom efrit-todo-window-width 0.35
  "Width of the *efrit-todos* window when it stands beside the others.
A float is a fraction of the frame's width, an integer a number of
columns.  When that leaves the list, or the windows beside it, fewer
columns than `efrit-todo-window-min-width', the list goes below."
  :type '(choice (float :tag "Fraction of the frame's width")
                 (natnum :tag "Columns"))
  :group 'efrit-todo-ui)

(defcustom efrit-todo-window-min-width 40
  "Fewest columns for the list, and for the windows beside it.
On a frame too narrow for both, `efrit-todo-display-buffer' puts the
list below the other windows, across the whole frame, where its
lines have room."
  :type 'natnum
  :group 'efrit-todo-ui)

(defcustom efrit-todo-window-height 0.4
  "Height of the *efrit-todos* window when it goes below the others.
A float is a fraction of the frame's height, an integer a number of
lines.  The window grows beyond that when the list needs more lines,
up to two thirds of the frame."
  :type '(choice (float :tag "Fraction of the frame's height")
                 (natnum :tag "Lines"))
  :group 'efrit-todo-ui)

(defcustom efrit-todo-use-unicode 'auto
  "Whether the status glyphs are the Unicode or the ASCII ones.
`auto' uses Unicode when the display can show every character of
a glyph (`char-displayable-p'), ASCII otherwise."
  :type '(choice (const :tag "When the display can show them" auto)
                 (const :tag "Always Unicode" t)
                 (const :tag "Always ASCII" nil))
  :group 'efrit-todo-ui)

(defcustom efrit-todo-glyphs
  '((pending "○" "[ ]")
    (in-progress "◐" "[>]")
    (completed "✓" "[x]")
    (cancelled "✗" "[-]")
    (blocked "⊘" "[b]")
    (folded "▸" "+")
    (unfolded "▾" "-")
    (separator "·" "-"))
  "Glyphs for statuses and fold state: (KEY UNICODE ASCII).
KEY is a status symbol, `blocked' (a pending item that waits for an
open blocker, its own or a parent's), `folded', `unfolded' or
`separator' (between the parts of the header line)."
  :type '(repeat (list (symbol :tag "Key")
                       (string :tag "Unicode")
                       (string :tag "ASCII")))
  :group 'efrit-todo-ui)

(defcustom efrit-todo-mode-line-max-length 30
  "Most characters of the running item shown in the mode line."
  :type 'natnum
  :group 'efrit-todo-ui)

(defcustom efrit-todo-refresh-interval 1
  "Seconds between updates of the running items' times, or nil.
The times are rewritten in place while the buffer is visible; every
other change redraws through `efrit-todo-change-functions'."
  :type '(choice (number :tag "Seconds") (const :tag "Never" nil))
  :group 'efrit-todo-ui)

(defcustom efrit-todo-tool-result-width 60
  "Most characters of a tool result shown under its item."
  :type 'natnum
  :group 'efrit-todo-ui)

(defface efrit-todo-pending '((t :inherit default))
  "Face of pending items."
  :group 'efrit-todo-ui)

(defface efrit-todo-in-progress '((t :inherit (bold font-lock-function-name-face)))
  "Face of the item in progress."
  :group 'efrit-todo-ui)

(defface efrit-todo-completed '((t :inherit success))
  "Face of completed items."
  :group 'efrit-todo-ui)

(defface efrit-todo-cancelled '((t :inherit shadow :strike-through t))
  "Face of cancelled items."
  :group 'efrit-todo-ui)

(defface efrit-todo-blocked '((t :inherit shadow))
  "Face of pending items that wait for another item: not ready to start."
  :group 'efrit-todo-ui)

(defface efrit-todo-blockers '((t :inherit warning))
  "Face of the \"blocked by\" note after a blocked item."
  :group 'efrit-todo-ui)

(defface efrit-todo-owner '((t :inherit font-lock-type-face))
  "Face of the owner shown after an item."
  :group 'efrit-todo-ui)

(defface efrit-todo-description '((t :inherit font-lock-doc-face))
  "Face of an item's description, shown when the item is unfolded."
  :group 'efrit-todo-ui)

(defface efrit-todo-id '((t :inherit font-lock-constant-face))
  "Face of item ids."
  :group 'efrit-todo-ui)

(defface efrit-todo-time '((t :inherit shadow))
  "Face of running and elapsed times."
  :group 'efrit-todo-ui)

(defface efrit-todo-heading '((t :inherit (bold font-lock-keyword-face)))
  "Face of session headings."
  :group 'efrit-todo-ui)

(defface efrit-todo-tool-call '((t :inherit shadow))
  "Face of the tool calls shown under an item."
  :group 'efrit-todo-ui)

(defface efrit-todo-tool-error '((t :inherit error))
  "Face of failed tool calls."
  :group 'efrit-todo-ui)

(defface efrit-todo-breaker-tripped '((t :inherit error))
  "Face of a tripped circuit breaker in the buffer."
  :group 'efrit-todo-ui)

(defface efrit-todo-mode-line '((t :inherit mode-line-emphasis))
  "Face of the mode-line indicator."
  :group 'efrit-todo-ui)

(defface efrit-todo-mode-line-tripped '((t :inherit error))
  "Face of the mode-line indicator when the breaker has tripped."
  :group 'efrit-todo-ui)

;;;; Text helpers

(defconst efrit-todo-buffer-name "*efrit-todos*"
  "Name of the buffer that shows the todo lists.")

;; The Efrit adapter's mode, in efrit-todo-efrit.el, which may not be loaded.
(defvar efrit-todo-efrit-mode)

(defvar efrit-todo-ui--list-buffer nil
  "The buffer named `efrit-todo-buffer-name' that was last put in its mode.
Kept so that the change hook, run on every tool call, need not look
the buffer up by name.")

(defun efrit-todo-ui--one-line (text)
  "Return TEXT, which may come from the model, on one line."
  (let ((text (or text "")))
    ;; Checking first is much faster than always replacing: most text is clean.
    (if (string-match-p "[\n\r\t\f]" text)
        (replace-regexp-in-string "[\n\r\t\f]+" " " text)
      text)))

(defvar efrit-todo-ui--signal-user-error
  (lambda (text) (signal 'user-error (list text)))
  "Function that signals a `user-error' with TEXT for `efrit-todo-ui--user-error'.")

(defun efrit-todo-ui--user-error (format &rest args)
  "Signal a `user-error' whose message FORMAT and ARGS make.
Before an error's message, *Messages* shows the name of the function
that signalled it: in code loaded from source, whichever special form
held the call (\"if: No todo item on this line\").  Signalled from an
anonymous function, the message stands alone."
  (funcall efrit-todo-ui--signal-user-error (apply #'format-message format args)))

(defun efrit-todo-ui--escape (text)
  "Return TEXT with `%' doubled, safe inside a mode-line construct."
  (string-replace "%" "%%" text))

(defun efrit-todo-ui--duration (seconds)
  "Return SECONDS as a short duration such as 45s, 3m05s or 2h10m."
  (let ((s (max 0 (floor seconds))))
    (cond ((< s 60) (format "%ds" s))
          ((< s 3600) (format "%dm%02ds" (/ s 60) (% s 60)))
          (t (format "%dh%02dm" (/ s 3600) (% (/ s 60) 60))))))

(defun efrit-todo-ui--progress (counts)
  "Return \"3/7 done\" for COUNTS, a plist from `efrit-todo-counts'."
  (format "%d/%d done" (plist-get counts :completed) (plist-get counts :total)))

(defun efrit-todo-ui--breaker-text (breaker)
  "Return a short description of BREAKER, a plist from `efrit-todo-breaker'."
  (if (plist-get breaker :tripped)
      (format "breaker tripped: %s"
              (efrit-todo-ui--one-line (or (plist-get breaker :reason) "no reason given")))
    (let ((calls (or (plist-get breaker :calls) 0)))
      (format "breaker ok, %d call%s" calls (if (= calls 1) "" "s")))))

(defun efrit-todo-ui--glyph-table ()
  "Return an alist from glyph keys to the glyphs fit for this display."
  (mapcar (lambda (entry)
            (pcase-let ((`(,key ,unicode ,ascii) entry))
              (cons key
                    (if (pcase efrit-todo-use-unicode
                          ('auto (seq-every-p #'char-displayable-p unicode))
                          (setting setting))
                        unicode
                      ascii))))
          efrit-todo-glyphs))

(defun efrit-todo-ui--status-face (status)
  "Return the face of items with STATUS."
  (pcase status
    ('in-progress 'efrit-todo-in-progress)
    ('completed 'efrit-todo-completed)
    ('cancelled 'efrit-todo-cancelled)
    (_ 'efrit-todo-pending)))

;;;; Buffer state

(defvar-local efrit-todo-ui--keys nil
  "Hash table from session names to the strings that mark their sections.
Sections are found with `eq' text-property searches, so each session
is marked by one string object.")

(defvar-local efrit-todo-ui--stale nil
  "Sessions that changed while the buffer was not visible; `all' for all.")

(defvar-local efrit-todo-ui--unfolded nil
  "Hash table of (SESSION . ID) whose tool calls are shown.")

(defvar-local efrit-todo-ui--folded-sessions nil
  "Hash table of sessions whose items are hidden.")

(defvar-local efrit-todo-ui--summaries nil
  "Hash table from sessions to their header-line summaries.
Each is (FULL SHORT TINY), for ever narrower windows: SHORT leaves out
the breaker, TINY the session's name too.")

(defvar-local efrit-todo-ui--selected nil
  "Session chosen with \\[efrit-todo-choose-session], or nil.")

(defvar-local efrit-todo-ui--last-changed nil
  "Session that changed last, shown in the header line by default.")

(defvar efrit-todo-ui--timer nil
  "Timer that updates the running times in *efrit-todos*.")

(defun efrit-todo-ui--key (session)
  "Return the string object that tags the section of SESSION."
  (or (gethash session efrit-todo-ui--keys)
      (puthash session (substring-no-properties session) efrit-todo-ui--keys)))

(defun efrit-todo-ui--visible-p (&optional buffer)
  "Return non-nil when BUFFER (default: current) is in a visible window."
  (get-buffer-window (or buffer (current-buffer)) 'visible))

(defun efrit-todo-ui--shown-p (session)
  "Return non-nil when SESSION gets a section in the buffer.
A session with items does, and so does one whose items were all
removed: its history tells what became of them, and `efrit-todo-undo-change'
brings them back.  A session that never had an item does not: an
agent command that failed before planning, or an undo with nothing
to undo, would otherwise leave an empty section behind.  A shared
list does, empty or not: the user or another Emacs adds to it here.
Efrit's own list, kept while `efrit-todo-efrit-mode' is off, does not:
no agent of efrit-todo reads it, and Efrit shows it itself."
  (and (not (efrit-todo-compat--efrit-list-p session))
       (or (> (efrit-todo--item-count session) 0)
           (member session efrit-todo--shared-lists)
           (efrit-todo-history session))))

(defun efrit-todo-ui--shown-sessions ()
  "Return the sessions that get a section, oldest first."
  (seq-filter #'efrit-todo-ui--shown-p (efrit-todo-sessions)))

(defun efrit-todo-ui--select-session (session)
  "Make SESSION the one of the header line and of new items in *efrit-todos*.
What a command that names a list for the user to work on, such as
`efrit-todo-share-list', does; nothing when the buffer does not exist,
where the newest list is the header's anyway."
  (let ((buffer efrit-todo-ui--list-buffer))
    (when (and buffer (buffer-live-p buffer))
      (with-current-buffer buffer
        (setq efrit-todo-ui--selected session)
        (force-mode-line-update)))))

(defun efrit-todo-ui--header-session ()
  "Return the session the header line and new items are about, or nil."
  (let ((sessions (efrit-todo-sessions)))
    (cond ((and (member efrit-todo-ui--selected sessions)
                (efrit-todo-ui--shown-p efrit-todo-ui--selected))
           efrit-todo-ui--selected)
          ((and (member efrit-todo-ui--last-changed sessions)
                (efrit-todo-ui--shown-p efrit-todo-ui--last-changed))
           efrit-todo-ui--last-changed)
          (t (seq-find #'efrit-todo-ui--shown-p (reverse sessions))))))

;;;; Drawing
;;
;; Every change redraws one session, and within it only the items whose
;; text changed: a write usually completes one item and starts the next,
;; and rewriting two lines instead of a hundred keeps a redraw cheap.
;; Each line is inserted as plain text, given its line properties in one
;; call, then its faces, which keeps the number of text intervals (and
;; the garbage a redraw leaves) low.

(defvar-local efrit-todo-ui--drawn nil
  "Hash table from session marker strings to what their sections show.
The value is a list of (SIGNATURE . LINES) per item in order, nil when
the section shows no items.")

(defun efrit-todo-ui--calls-by-item (session)
  "Return a hash table from item ids of SESSION to their ledger entries."
  (let ((table (make-hash-table :test 'equal)))
    (dolist (call (efrit-todo-ledger session))
      (let ((id (plist-get call :todo)))
        (when id
          (puthash id (cons call (gethash id table)) table))))
    (maphash (lambda (id calls) (puthash id (nreverse calls) table)) table)
    table))

(defvar efrit-todo-ui--spaces (make-vector 40 nil)
  "Strings of N spaces by N, made once: lines with the same indent share one.")

(defun efrit-todo-ui--spaces (n)
  "Return a string of N spaces, the same object for the same N below 40."
  (if (< n (length efrit-todo-ui--spaces))
      (or (aref efrit-todo-ui--spaces n)
          (aset efrit-todo-ui--spaces n (make-string n ?\s)))
    (make-string n ?\s)))

(defun efrit-todo-ui--insert-line (text props &rest faces)
  "Insert TEXT and a newline with the line properties PROPS.
PROPS go on the first character only, where every lookup reads them
\(at the beginning of the line): set on the whole line, each face
range would copy them.  FACES alternate a FROM-TO cons (offsets in
TEXT) and a face.  Ranges that touch make fewer text intervals than
ranges with gaps between."
  (let ((start (point)))
    (insert text "\n")
    (set-text-properties start (1+ start) props)
    (while faces
      (let ((range (pop faces))
            (face (pop faces)))
        (when (< (car range) (cdr range))
          (put-text-property (+ start (car range)) (+ start (cdr range)) 'face face))))))

(defun efrit-todo-ui--item-signature (session item entries)
  "Return what the lines of ITEM of SESSION with ledger ENTRIES depend on.
That is the item's plist, how many ENTRIES and whether they show.  The
running time is left out: the timer updates it in place."
  (cons (length entries)
        (cons (and (or entries (efrit-todo-ui--description item))
                   (gethash (cons session (plist-get item :id)) efrit-todo-ui--unfolded))
              item)))

(defun efrit-todo-ui--item-places (items)
  "Return where each of ITEMS stands in its tree, or nil for a flat list.
ITEMS are plists from `efrit-todo-list'.  Each place is (LEVEL . UNDER):
LEVEL is 1 for a top-level item, 2 for its subtasks and so on; UNDER
is the parent's id when the item does not follow its parent or one of
the parent's subtasks, else nil."
  (when (seq-some (lambda (item) (plist-get item :parent)) items)
    (let ((parents (make-hash-table :test 'equal))
          (previous nil)
          (places nil))
      (dolist (item items)
        (puthash (plist-get item :id) (plist-get item :parent) parents))
      (dolist (item items)
        (let* ((parent (plist-get item :parent))
               (level 1)
               (up parent)
               (steps 0))
          ;; The module keeps trees at most 3 deep and without cycles;
          ;; the step limit only guards against what it never hands out.
          (while (and up (< steps 10))
            (setq level (1+ level)
                  steps (1+ steps)
                  up (gethash up parents)))
          (let ((in-place (or (null parent)
                              (let ((at previous) (found nil) (steps 0))
                                (while (and at (not found) (< steps 10))
                                  (setq found (equal at parent)
                                        at (gethash at parents)
                                        steps (1+ steps)))
                                found))))
            (push (cons level (unless in-place parent)) places))
          (setq previous (plist-get item :id))))
      (nreverse places))))

(defun efrit-todo-ui--blocked-p (item)
  "Return non-nil when ITEM is pending but not ready to start.
That is when an open blocker of its own, or of a parent, holds it
back.  A list from a module that does not say what is ready (no
`:ready' key) has no blocked items."
  (and (eq (plist-get item :status) 'pending)
       (plist-member item :ready)
       (not (plist-get item :ready))))

(defconst efrit-todo-ui--blockers-shown 5
  "Most blockers named after an item; the rest are counted.")

(defun efrit-todo-ui--blockers-text (item)
  "Return the note after ITEM on its open blockers, or \"\".
A finished blocker no longer counts; an item that only waits for
its parent's blockers says so."
  (let ((blockers (mapcar #'efrit-todo-ui--one-line (plist-get item :blocked-by))))
    (cond
     (blockers
      (concat "  blocked by "
              (string-join (seq-take blockers efrit-todo-ui--blockers-shown) ", ")
              (if (> (length blockers) efrit-todo-ui--blockers-shown)
                  (format " and %d more" (- (length blockers) efrit-todo-ui--blockers-shown))
                "")))
     ((efrit-todo-ui--blocked-p item) "  parent blocked")
     (t ""))))

(defun efrit-todo-ui--description (item)
  "Return ITEM's description, or nil when it has none worth showing."
  (let ((description (plist-get item :description)))
    (and (stringp description)
         (string-match-p "[^ \t\n\r\f]" description)
         description)))

(defun efrit-todo-ui--insert-item (session item entries glyphs now &optional place)
  "Insert ITEM of SESSION with its ledger ENTRIES, using GLYPHS, at time NOW.
PLACE is the item's (LEVEL . UNDER) from `efrit-todo-ui--item-places':
a subtask is indented two columns per level, and one away from its
parent names it.  After the text come the owner in parentheses, the
open blockers, the time, and what unfolding the item shows: its
description and its tool calls.  Return the number of lines inserted."
  (let* ((indent (make-string (* 2 (1- (or (car place) 1))) ?\s))
         (lead (+ 2 (length indent)))
         (id (plist-get item :id))
         (status (plist-get item :status))
         (blocked (efrit-todo-ui--blocked-p item))
         (face (if blocked 'efrit-todo-blocked (efrit-todo-ui--status-face status)))
         (started (plist-get item :started))
         (completed (plist-get item :completed))
         (description (efrit-todo-ui--description item))
         (unfolded (and (or entries description)
                        (gethash (cons session id) efrit-todo-ui--unfolded)))
         (glyph (alist-get (if blocked 'blocked status) glyphs "?"))
         (text (efrit-todo-ui--one-line
                (plist-get item (if (eq status 'in-progress) :active-form :content))))
         (owner (let ((owner (plist-get item :owner)))
                  (if (and (stringp owner) (not (string-empty-p owner)))
                      (format " (%s)" (efrit-todo-ui--one-line owner))
                    "")))
         (under (if (cdr place) (format " (under %s)" (efrit-todo-ui--one-line (cdr place))) ""))
         (blockers (efrit-todo-ui--blockers-text item))
         (time (pcase status
                 ((and 'in-progress (guard started))
                  (concat "  running " (efrit-todo-ui--duration (- now started))))
                 ((and 'completed (guard completed))
                  (concat "  took " (efrit-todo-ui--duration
                                     (- completed (or started (plist-get item :created) completed)))))
                 (_ "")))
         (fold (if (or entries description)
                   (concat "  " (alist-get (if unfolded 'unfolded 'folded) glyphs) " "
                           (string-join
                            (delq nil (list (and description "description")
                                            (and entries
                                                 (format "%d call%s" (length entries)
                                                         (if (cdr entries) "s" "")))))
                            ", "))
                 ""))
         (text-column (+ lead (string-width glyph) 1 (string-width id) 2))
         (parts (list (cons (concat glyph " ") face)
                      (cons (concat id "  ") 'efrit-todo-id)
                      (cons text face)
                      (cons owner 'efrit-todo-owner)
                      (cons under 'efrit-todo-id)
                      (cons blockers 'efrit-todo-blockers)
                      (cons time 'efrit-todo-time)
                      (cons fold 'efrit-todo-tool-call)))
         (line-start (point))
         (lines 1))
    (insert "  " indent (car (nth 0 parts)) (car (nth 1 parts)) text owner under
            blockers time fold "\n")
    ;; Each part takes its face up to the next non-empty part, and the
    ;; last one the newline too: fewer text intervals than faces with
    ;; gaps between, which keeps a redraw of a long list cheap.
    (let ((pos (+ line-start lead))
          (last nil))
      (dolist (part parts)
        (let ((length (length (car part))))
          (unless (zerop length)
            (when last
              (put-text-property (car last) pos 'face (cdr last)))
            (when (and (eq (car part) time) (eq status 'in-progress))
              ;; The number the timer rewrites: after "  running ".
              (put-text-property (+ pos 10) (+ pos length) 'efrit-todo-elapsed started))
            (setq last (cons pos (cdr part))
                  pos (+ pos length)))))
      (put-text-property (car last) (point) 'face (cdr last)))
    (add-text-properties line-start (1+ line-start)
                         (list 'efrit-todo-line 'item 'efrit-todo-item id
                               'efrit-todo-session session))
    ;; A line too long for the window wraps under the start of the text.
    (put-text-property line-start (point) 'wrap-prefix (efrit-todo-ui--spaces text-column))
    (when unfolded
      (when description
        (let ((prefix (efrit-todo-ui--spaces text-column)))
          (dolist (line (split-string description "\r?\n"))
            (let ((line (concat prefix (string-trim-right (efrit-todo-ui--one-line line)))))
              (efrit-todo-ui--insert-line
               line
               (list 'efrit-todo-line 'description 'efrit-todo-item id
                     'efrit-todo-session session)
               (cons text-column (length line)) 'efrit-todo-description)
              (put-text-property (- (point) (length line) 1) (point) 'wrap-prefix prefix)
              (setq lines (1+ lines))))))
      (let ((index 0))
        (dolist (call entries)
          (let* ((result (plist-get call :result))
                 (duration (plist-get call :duration))
                 (line (format "%s      %s%s  %s%s" indent
                               (efrit-todo-ui--one-line (plist-get call :tool))
                               (if duration (format " %.1fs" duration) "")
                               (if (plist-get call :error) "error: " "")
                               (truncate-string-to-width
                                (efrit-todo-ui--one-line
                                 (if (and (stringp result) (not (string-empty-p result)))
                                     result
                                   "(no output)"))
                                efrit-todo-tool-result-width nil nil t))))
            (efrit-todo-ui--insert-line
             line
             (list 'efrit-todo-line 'call 'efrit-todo-item id 'efrit-todo-call index
                   'efrit-todo-session session)
             (cons 0 (length line))
             (if (plist-get call :error) 'efrit-todo-tool-error 'efrit-todo-tool-call))
            (put-text-property (- (point) (length line) 1) (point) 'wrap-prefix
                               (efrit-todo-ui--spaces (+ (length indent) 8)))
            (setq index (1+ index))))
        (setq lines (+ lines index))))
    lines))

(defun efrit-todo-ui--state-text (session breaker)
  "Return how SESSION stands: stopped and why, else its BREAKER's state."
  (let ((stopped (efrit-todo-stopped session)))
    (if (and stopped (not (plist-get breaker :tripped)))
        (format "stopped: %s" (efrit-todo-ui--one-line (plist-get stopped :reason)))
      (efrit-todo-ui--breaker-text breaker))))

(declare-function efrit-todo-agents "efrit-todo" (&optional session))

(defun efrit-todo-ui--lead-breaker (session)
  "Return the breaker plist of SESSION's own agent, the lead.
A sub-agent's tool call redraws the list while `efrit-todo-agent' names
that sub-agent; what is shown must not depend on whose call redrew it."
  (let ((efrit-todo-agent nil))
    (efrit-todo-breaker session)))

(defun efrit-todo-ui--agents-text (session)
  "Return the running sub-agents of SESSION and their running items, or \"\".
Each agent is named, with the id and activeForm of its running item."
  (let ((agents (and (fboundp 'efrit-todo-agents)
                     (ignore-errors (efrit-todo-agents session)))))
    (if (null agents)
        ""
      (concat "  agents: "
              (mapconcat
               (lambda (agent)
                 (let ((name (efrit-todo-ui--one-line (format "%s" (plist-get agent :name))))
                       (item (plist-get agent :current)))
                   (if item
                       (format "%s on %s %s" name (plist-get item :id)
                               (truncate-string-to-width
                                (efrit-todo-ui--one-line
                                 (or (plist-get item :active-form) (plist-get item :content) ""))
                                30 nil nil t))
                     name)))
               agents ", ")))))

(defun efrit-todo-ui--insert-heading (key counts breaker glyphs)
  "Insert the heading of session KEY with its COUNTS and BREAKER, using GLYPHS.
A session whose command stopped with items open says so and why; the
running sub-agents follow, with their running items."
  (let* ((name (format "%s %s" (alist-get (if (gethash key efrit-todo-ui--folded-sessions)
                                              'folded 'unfolded)
                                          glyphs)
                       key))
         (stopped (efrit-todo-stopped key))
         (breaker-text (efrit-todo-ui--state-text key breaker))
         (middle (concat "  " (efrit-todo-ui--progress counts)
                         (let ((running (plist-get counts :in-progress)))
                           (if (> running 0) (format ", %d running" running) ""))
                         "  "))
         (agents (efrit-todo-ui--agents-text key))
         (breaker-start (+ (length name) (length middle))))
    (puthash key (list (format "%s: %s %s %s" key (efrit-todo-ui--progress counts)
                               (alist-get 'separator glyphs "-") breaker-text)
                       (format "%s: %s" key (efrit-todo-ui--progress counts))
                       (efrit-todo-ui--progress counts))
             efrit-todo-ui--summaries)
    (efrit-todo-ui--insert-line
     (concat name middle breaker-text agents)
     (list 'efrit-todo-line 'heading 'efrit-todo-session key 'efrit-todo-heading key)
     (cons 0 (length name)) 'efrit-todo-heading
     (cons breaker-start (+ breaker-start (length breaker-text)))
     (if (or stopped (plist-get breaker :tripped)) 'efrit-todo-breaker-tripped 'efrit-todo-time))))

(defun efrit-todo-ui--draw-section (key glyphs &optional bounds)
  "Draw the section of the session whose marker string is KEY, with GLYPHS.
With BOUNDS, the (START . END) of the section as drawn before, rewrite
only the lines that changed; otherwise insert the section at point."
  (let* ((items (and (not (gethash key efrit-todo-ui--folded-sessions))
                     (efrit-todo-list key)))
         (calls (and items (efrit-todo-ui--calls-by-item key)))
         (places (efrit-todo-ui--item-places items))
         ;; Each signature starts with the item's place: moving an item
         ;; under another parent redraws its subtasks too.
         (signatures (let ((rest places))
                       (mapcar (lambda (item)
                                 (cons (pop rest)
                                       (efrit-todo-ui--item-signature
                                        key item (gethash (plist-get item :id) calls))))
                               items)))
         (old (and bounds (gethash key efrit-todo-ui--drawn)))
         (now (float-time)))
    (if (and old items)
        ;; Keep the items that lead and trail unchanged; rewrite the
        ;; heading and what lies between.
        (let* ((old-count (length old))
               (new-count (length items))
               (old-signatures (vconcat (mapcar #'car old)))
               (new-signatures (vconcat signatures))
               (prefix 0)
               (suffix 0))
          (while (and (< prefix (min old-count new-count))
                      (equal (aref old-signatures prefix) (aref new-signatures prefix)))
            (setq prefix (1+ prefix)))
          (while (and (< (+ prefix suffix) (min old-count new-count))
                      (equal (aref old-signatures (- old-count suffix 1))
                             (aref new-signatures (- new-count suffix 1))))
            (setq suffix (1+ suffix)))
          (goto-char (car bounds))
          (delete-region (point) (line-beginning-position 2))
          (efrit-todo-ui--insert-heading key (efrit-todo-counts key) (efrit-todo-ui--lead-breaker key) glyphs)
          (forward-line (apply #'+ (mapcar #'cdr (seq-take old prefix))))
          (delete-region (point) (line-beginning-position
                                  (1+ (apply #'+ (mapcar #'cdr (seq-subseq old prefix (- old-count suffix)))))))
          (puthash key
                   (append (seq-take old prefix)
                           (cl-loop for item in (seq-subseq items prefix (- new-count suffix))
                                    for signature in (seq-subseq signatures prefix (- new-count suffix))
                                    collect (cons signature
                                                  (efrit-todo-ui--insert-item
                                                   key item (gethash (plist-get item :id) calls)
                                                   glyphs now (car signature))))
                           (seq-subseq old (- old-count suffix)))
                   efrit-todo-ui--drawn))
      (when bounds
        (goto-char (car bounds))
        (delete-region (car bounds) (cdr bounds)))
      (efrit-todo-ui--insert-heading key (efrit-todo-counts key) (efrit-todo-ui--lead-breaker key) glyphs)
      (puthash key
               (cl-loop for item in items
                        for signature in signatures
                        collect (cons signature
                                      (efrit-todo-ui--insert-item
                                       key item (gethash (plist-get item :id) calls) glyphs now
                                       (car signature))))
               efrit-todo-ui--drawn)
      (when (and (null items) (not (gethash key efrit-todo-ui--folded-sessions)))
        (efrit-todo-ui--insert-line "  no items" (list 'efrit-todo-line 'empty 'efrit-todo-session key)
                                 (cons 0 10) 'efrit-todo-time))
      (efrit-todo-ui--insert-line "" (list 'efrit-todo-line 'blank 'efrit-todo-session key)))))

(defun efrit-todo-ui--section-bounds (key)
  "Return (START . END) of the section marked by KEY, or nil.
A section runs from its heading to the next heading."
  (let ((start (text-property-any (point-min) (point-max) 'efrit-todo-heading key)))
    (when start
      ;; Only the heading's first character carries the property, so the
      ;; next change after it is the next heading.
      (cons start (next-single-property-change (1+ start) 'efrit-todo-heading nil (point-max))))))

(defun efrit-todo-ui--place (pos)
  "Describe POS by its content: (SESSION ID KIND CALL COLUMN LINE).
LINE counts lines from the start of the section, for when the item is gone."
  (save-excursion
    (goto-char pos)
    (let* ((bol (line-beginning-position))
           (session (get-text-property bol 'efrit-todo-session))
           (section-start (and session (car (efrit-todo-ui--section-bounds session)))))
      (list session
            (get-text-property bol 'efrit-todo-item)
            (get-text-property bol 'efrit-todo-line)
            (get-text-property bol 'efrit-todo-call)
            (- pos bol)
            (if section-start (count-lines section-start bol) 0)))))

(defun efrit-todo-ui--find-place (place)
  "Return the position of what PLACE describes, or nil."
  (pcase-let ((`(,session ,id ,kind ,call ,column ,line) place))
    (let ((bounds (and session (efrit-todo-ui--section-bounds session))))
      (when bounds
        (save-excursion
          (goto-char (car bounds))
          (let ((found nil))
            (when id
              (while (and (not found) (< (point) (cdr bounds)))
                (if (and (equal (get-text-property (point) 'efrit-todo-item) id)
                         (eq (get-text-property (point) 'efrit-todo-line) kind)
                         (equal (get-text-property (point) 'efrit-todo-call) call))
                    (setq found (point))
                  (forward-line 1))))
            (unless found
              (goto-char (car bounds))
              (forward-line line)
              (when (>= (point) (cdr bounds))
                (goto-char (cdr bounds))
                (forward-line -1))
              (setq found (point)))
            (min (+ found column) (line-end-position))))))))

(defun efrit-todo-ui--places-to-keep (start end)
  "Return (WINDOW-OR-NIL . PLACE) for the points of this buffer in START..END.
nil stands for the buffer's own point."
  (let ((places nil))
    (dolist (window (get-buffer-window-list (current-buffer) nil t))
      (let ((pos (window-point window)))
        (when (and (not (eq window (selected-window))) (<= start pos) (< pos end))
          (push (cons window (efrit-todo-ui--place pos)) places))))
    (when (and (<= start (point)) (< (point) end))
      (push (cons nil (efrit-todo-ui--place (point))) places))
    places))

(defun efrit-todo-ui--restore-places (places)
  "Move the points in PLACES, from `efrit-todo-ui--places-to-keep', back."
  (pcase-dolist (`(,window . ,place) places)
    (let ((pos (efrit-todo-ui--find-place place)))
      (when pos
        (if window (set-window-point window pos) (goto-char pos))))))

(defun efrit-todo-ui--redraw-all ()
  "Draw every session afresh, newest first, keeping the points in place."
  (let* ((inhibit-read-only t)
         (places (efrit-todo-ui--places-to-keep (point-min) (1+ (point-max))))
         (glyphs (efrit-todo-ui--glyph-table))
         (sessions (reverse (efrit-todo-ui--shown-sessions))))
    (setq efrit-todo-ui--stale nil)
    (erase-buffer)
    (if sessions
        (dolist (session sessions)
          (efrit-todo-ui--draw-section (efrit-todo-ui--key session) glyphs))
      (insert (propertize "No todo lists yet.\n" 'face 'efrit-todo-heading)
              "A list appears here when an agent calls todo_write;\n"
              (substitute-command-keys
               "\\<efrit-todo-list-mode-map>\\[efrit-todo-add-item] adds an item yourself, \\[efrit-todo-help] lists the keys.\n")))
    (when (and (not (bound-and-true-p efrit-todo-efrit-mode))
               (seq-some (lambda (session)
                      (and (efrit-todo-compat--efrit-list-p session)
                           (> (efrit-todo--item-count session) 0)))
                    (efrit-todo-sessions)))
      (insert (propertize
               (substitute-command-keys
                "efrit-todo-efrit-mode is off: Efrit keeps its list itself, not shown here\n(\\[efrit-todo-efrit-mode] turns the mode on for the next command).\n")
               'face 'efrit-todo-time)))
    (efrit-todo-ui--restore-places places)
    (unless places (goto-char (point-min)))))

(defun efrit-todo-ui--redraw-session (session)
  "Redraw the section of SESSION only; a new session redraws everything."
  (let* ((key (efrit-todo-ui--key session))
         (bounds (efrit-todo-ui--section-bounds key)))
    (cond
     ((not bounds)
      (when (efrit-todo-ui--shown-p session)
        (efrit-todo-ui--redraw-all)))
     ((not (efrit-todo-ui--shown-p session))
      (efrit-todo-ui--redraw-all))
     (t
      (let ((inhibit-read-only t)
            (places (efrit-todo-ui--places-to-keep (car bounds) (cdr bounds))))
        (save-excursion
          (efrit-todo-ui--draw-section key (efrit-todo-ui--glyph-table) bounds))
        (efrit-todo-ui--restore-places places))))))

(defun efrit-todo-ui--catch-up ()
  "Redraw the sessions that changed while the buffer was hidden."
  (when (and efrit-todo-ui--stale (efrit-todo-ui--visible-p))
    (let ((stale efrit-todo-ui--stale))
      (setq efrit-todo-ui--stale nil)
      (if (memq 'all stale)
          (efrit-todo-ui--redraw-all)
        (mapc #'efrit-todo-ui--redraw-session stale)))))

(defun efrit-todo-ui--session-changed (session)
  "Redraw SESSION now if the buffer is visible, else remember it."
  (setq efrit-todo-ui--last-changed session)
  (if (efrit-todo-ui--visible-p)
      (progn (efrit-todo-ui--catch-up)
             (efrit-todo-ui--redraw-session session)
             (efrit-todo-ui--grow))
    (unless (member session efrit-todo-ui--stale)
      (push session efrit-todo-ui--stale))))

(defun efrit-todo-ui--on-display (window)
  "Catch up with the module now that WINDOW displays the buffer."
  (with-current-buffer (window-buffer window)
    (efrit-todo-ui--catch-up)
    (efrit-todo-ui--settle window)))

(defun efrit-todo-ui--on-select (window)
  "Put point on an item if WINDOW, showing the buffer, was just selected."
  (when (eq window (selected-window))
    (with-current-buffer (window-buffer window)
      (efrit-todo-ui--settle window))))

(defun efrit-todo-ui--tick ()
  "Update the running times shown in a visible *efrit-todos*."
  (let ((buffer (get-buffer efrit-todo-buffer-name)))
    (if (not (buffer-live-p buffer))
        (efrit-todo-ui--stop-timer)
      (with-current-buffer buffer
        (when (efrit-todo-ui--visible-p)
          (efrit-todo-ui--tick-visible))))))

(defun efrit-todo-ui--tick-visible ()
  "Do the work of `efrit-todo-ui--tick' in the current, visible buffer."
  (with-demoted-errors "Efrit-todo: %S"
    (efrit-todo-ui--catch-up)
    (let ((inhibit-read-only t)
          (now (float-time))
          (pos (point-min)))
      (while (setq pos (next-single-property-change pos 'efrit-todo-elapsed))
        (let ((started (get-text-property pos 'efrit-todo-elapsed))
              (end (next-single-property-change pos 'efrit-todo-elapsed nil (point-max))))
          (when started
            (let ((text (efrit-todo-ui--duration (- now started))))
              (unless (equal text (buffer-substring-no-properties pos end))
                ;; Insert before deleting so that a point after the
                ;; time stays after it.
                (save-excursion
                  (goto-char pos)
                  (insert (apply #'propertize text (text-properties-at pos)))
                  (delete-region (point) (+ (point) (- end pos))))
                (setq end (+ pos (length text))))))
          (setq pos end))))))

(defun efrit-todo-ui--stop-timer ()
  "Stop updating the running times."
  (when efrit-todo-ui--timer
    (cancel-timer efrit-todo-ui--timer)
    (setq efrit-todo-ui--timer nil)))

(defun efrit-todo-ui--header-keys ()
  "Return the key hints of the header line, longest first."
  (list (substitute-command-keys
         (concat "\\<efrit-todo-list-mode-map>\\[efrit-todo-mark-completed] done  "
                 "\\[efrit-todo-start-item] start  \\[efrit-todo-reopen-item] reopen  "
                 "\\[efrit-todo-mark-cancelled] cancel  \\[efrit-todo-add-blocker] block  "
                 "\\[efrit-todo-remove-blocker] unblock  \\[efrit-todo-help] keys"))
        (substitute-command-keys
         (concat "\\<efrit-todo-list-mode-map>\\[efrit-todo-mark-completed] done  "
                 "\\[efrit-todo-start-item] start  \\[efrit-todo-reopen-item] reopen  "
                 "\\[efrit-todo-mark-cancelled] cancel  \\[efrit-todo-help] keys"))
        (substitute-command-keys "\\<efrit-todo-list-mode-map>\\[efrit-todo-help] keys")))

(defvar-local efrit-todo-ui--header-keys nil
  "The key hints of the header line.
The function `efrit-todo-ui--header-keys' makes them.")

(defun efrit-todo-ui--header-line (&optional width)
  "Return the header line for a window WIDTH columns wide.
It is the summary of the header session, then as many of the key
hints as fit.  The hint for the help key stays even in a narrow
window: the summary leaves out the breaker first, then the session's
name, then is cut.
WIDTH defaults to the width of the window whose header line is drawn."
  (let* ((session (ignore-errors (efrit-todo-ui--header-session)))
         (summaries (if session
                        (or (gethash session efrit-todo-ui--summaries) (list session))
                      (list "no todo lists")))
         (separator (concat "  " (alist-get 'separator (efrit-todo-ui--glyph-table) "-") " "))
         (width (- (or width (window-total-width)) 4))
         (hints (or efrit-todo-ui--header-keys
                    (setq efrit-todo-ui--header-keys (efrit-todo-ui--header-keys))))
         (fits (lambda (summary)
                 (let ((keys (seq-find (lambda (keys)
                                         (<= (+ (string-width summary) (string-width separator)
                                                (string-width keys))
                                             width))
                                       hints)))
                   (and keys (concat summary separator keys))))))
    (efrit-todo-ui--escape
     (or (seq-some fits summaries)
         (let ((help (car (last hints))))
           (concat (truncate-string-to-width
                    (car (last summaries))
                    (max 1 (- width (string-width separator) (string-width help))))
                   separator help))))))

;;;; The mode and its commands

(defconst efrit-todo-ui--key-table
  '(("g" efrit-todo-refresh "redraw every session")
    ("n" efrit-todo-next-item "next item")
    ("p" efrit-todo-previous-item "previous item")
    ("TAB" efrit-todo-toggle-fold "show or hide the item's description and tool calls, or the session's items")
    ("c" efrit-todo-mark-completed "mark the item completed")
    ("i" efrit-todo-start-item "start the item: in progress (the running one goes back to pending)")
    ("r" efrit-todo-reopen-item "reopen the item: back to pending")
    ("t" efrit-todo-cycle-status "cycle the item: pending, in progress, completed, pending")
    ("k" efrit-todo-mark-cancelled "mark the item cancelled")
    ("e" efrit-todo-edit-item "edit the item's content")
    ("a" efrit-todo-add-item "add an item at the end of the session")
    ("b" efrit-todo-add-blocker "add a blocker: the item waits until that one is finished")
    ("B" efrit-todo-remove-blocker "remove one of the item's blockers")
    ("M-<up>" efrit-todo-move-item-up "move the item up")
    ("M-<down>" efrit-todo-move-item-down "move the item down")
    ("s" efrit-todo-choose-session "choose the session of the header line and of new items")
    ("d" efrit-todo-clear-finished "remove the session's completed and cancelled items")
    ("D" efrit-todo-clear-list "clear the session's whole list (asks first; u brings it back)")
    ("u" efrit-todo-undo-change "undo the session's newest change, by the agent or by you")
    ("x" efrit-todo-drop-stopped "let a stopped session's list go: the next command starts afresh")
    ("?" efrit-todo-help "this help")
    ("q" quit-window "close the window (C-x 1 in it keeps only the list)"))
  "Keys of `efrit-todo-list-mode': (KEY COMMAND DESCRIPTION), in help order.")

(defvar efrit-todo-list-mode-map
  (let ((map (make-sparse-keymap)))
    (pcase-dolist (`(,key ,command ,_) efrit-todo-ui--key-table)
      (define-key map (kbd key) command))
    (define-key map (kbd "RET") #'efrit-todo-toggle-fold)
    map)
  "Keymap of `efrit-todo-list-mode'.")

;;;###autoload
(define-derived-mode efrit-todo-list-mode special-mode "Efrit-Todos"
  "Major mode of the *efrit-todos* buffer: the live todo lists.
One section per session, newest first.  The buffer follows every
change while it is visible.  Edits go through the same checks as
the agent's writes, and the agent is told about each of them with
the result of its next tool call (\"the user marked t3 cancelled\").

Keys on the item at point: \\[efrit-todo-mark-completed] completes it, \\[efrit-todo-start-item] starts it
\(the item running before goes back to pending), \\[efrit-todo-reopen-item] reopens it
\(back to pending), \\[efrit-todo-mark-cancelled] cancels it, \\[efrit-todo-cycle-status] cycles it through pending,
in progress and completed.  \\[efrit-todo-help] lists every key with what it does.
\\[quit-window] closes the window; \\[delete-other-windows] in it keeps only the list.

Dependencies: \\[efrit-todo-add-blocker] adds a blocker to the item at point (it is not
ready to start until that item is completed or cancelled), \\[efrit-todo-remove-blocker]
removes one.  A pending item that waits shows the `blocked' glyph of
`efrit-todo-glyphs' and \"blocked by t2\", naming its open blockers
only, or \"parent blocked\" when a parent waits; the other pending
items are ready.  Starting or completing an item that waits says why
it cannot and offers to drop those dependencies first; no changes
nothing.  An item's owner stands after it in parentheses.
TAB (or RET) on an item shows or hides its description and tool calls.

\\{efrit-todo-list-mode-map}"
  :group 'efrit-todo-ui
  (when (equal (buffer-name) efrit-todo-buffer-name)
    (setq efrit-todo-ui--list-buffer (current-buffer)))
  (setq-local efrit-todo-ui--keys (make-hash-table :test 'equal))
  (setq-local efrit-todo-ui--unfolded (make-hash-table :test 'equal))
  (setq-local efrit-todo-ui--folded-sessions (make-hash-table :test 'equal))
  (setq-local efrit-todo-ui--summaries (make-hash-table :test 'equal))
  (setq-local revert-buffer-function (lambda (&rest _) (efrit-todo-ui--redraw-all)))
  (setq-local header-line-format '(:eval (efrit-todo-ui--header-line)))
  ;; Long lines wrap at a word, continued under the item's text (each
  ;; line carries its `wrap-prefix'), also in a window narrower than
  ;; `truncate-partial-width-windows' would otherwise truncate.
  (setq-local truncate-lines nil)
  (setq-local truncate-partial-width-windows nil)
  (setq-local word-wrap t)
  (setq-local wrap-prefix "  ")
  (setq-local efrit-todo-ui--drawn (make-hash-table :test 'equal))
  (setq buffer-undo-list t)
  (add-hook 'window-buffer-change-functions #'efrit-todo-ui--on-display nil t)
  (add-hook 'window-selection-change-functions #'efrit-todo-ui--on-select nil t)
  (add-hook 'kill-buffer-hook #'efrit-todo-ui--stop-timer nil t)
  (efrit-todo-ui--stop-timer)
  (when efrit-todo-refresh-interval
    (setq efrit-todo-ui--timer (run-with-timer efrit-todo-refresh-interval
                                            efrit-todo-refresh-interval
                                            #'efrit-todo-ui--tick))))

(defun efrit-todo-ui--buffer ()
  "Return *efrit-todos*, creating and drawing it when needed."
  (let ((buffer (get-buffer efrit-todo-buffer-name)))
    (unless (and buffer (with-current-buffer buffer (derived-mode-p 'efrit-todo-list-mode)))
      (setq buffer (get-buffer-create efrit-todo-buffer-name))
      (with-current-buffer buffer
        (efrit-todo-list-mode)
        (efrit-todo-ui--redraw-all)))
    buffer))

;;;; The window

(defun efrit-todo-ui--size (size whole)
  "Return SIZE as a count: a float is that fraction of WHOLE."
  (if (floatp size) (max 1 (round (* size whole))) size))

;;;###autoload
(defun efrit-todo-display-buffer (buffer alist)
  "Display BUFFER in a new window beside the frame's windows, or below them.
A `display-buffer' action function, used by the default of
`efrit-todo-display-buffer-action'.  Beside the other windows, at the
right, the window is the whole frame's height and
`efrit-todo-window-width' wide.  When that would leave it, or the
windows beside it, fewer columns than `efrit-todo-window-min-width',
it goes below them instead, the whole frame's width and
`efrit-todo-window-height' high, or as high as the list needs up to
two thirds of the frame.

The window is an ordinary one, not a side window: \\[delete-other-windows]
in it keeps only the list, and \\[delete-window] or q in it close it.  It
keeps its share of the frame when the frame is resized.  It is
weakly dedicated to BUFFER, so that `display-buffer' shows other
buffers elsewhere.  ALIST is the action alist; its entries win over
the ones this function adds.  Return the window, or nil."
  (let ((width (efrit-todo-ui--beside-width (frame-width))))
    (display-buffer-in-direction
     buffer
     (append alist
             (if width
                 `((direction . rightmost) (window-width . ,width))
               `((direction . bottom) (window-height . efrit-todo-ui--fit-height)))
             '((dedicated . efrit-todo))))))

(defun efrit-todo-ui--beside-width (columns)
  "Return the list's width beside the other windows of a frame COLUMNS wide.
nil when the list, or the windows beside it, would get fewer columns
than `efrit-todo-window-min-width': then it goes below."
  (let ((width (efrit-todo-ui--size efrit-todo-window-width columns)))
    (and (>= width efrit-todo-window-min-width)
         (>= (- columns width) efrit-todo-window-min-width)
         width)))

(defun efrit-todo-ui--fit-height (window &optional grow-only)
  "Make WINDOW, below the others, as high as the list needs, within bounds.
It is at least `efrit-todo-window-height' high, and at most two thirds
of the frame, so that the windows above keep some lines: on a narrow
frame wrapped items need more lines than a share of the height gives.
With GROW-ONLY, never make it lower than it is.  The window remembers
that it is to fit the list as it grows (`efrit-todo-ui--grow')."
  (set-window-parameter window 'efrit-todo-fit t)
  (let* ((lines (frame-height (window-frame window)))
         (most (max 1 (floor (* 2 lines) 3)))
         (least (min most (max (efrit-todo-ui--size efrit-todo-window-height lines)
                               (if grow-only (window-total-height window) 0)))))
    (fit-window-to-buffer window most least)))

(defun efrit-todo-ui--grow ()
  "Let the windows placed below the others grow with the list.
Only windows that `efrit-todo-ui--fit-height' sized, and only when
the list no longer fits: a list that gains items stays in view."
  (dolist (window (get-buffer-window-list (current-buffer) nil t))
    (when (and (window-parameter window 'efrit-todo-fit)
               (not (pos-visible-in-window-p (point-max) window)))
      (ignore-errors (efrit-todo-ui--fit-height window t)))))

(defun efrit-todo-ui--home ()
  "Return the position for point in a window that enters the buffer.
That is the running item of the header line's session, else its
first pending item, else its first item, else the first item
drawn, else the start of the buffer."
  (let* ((session (efrit-todo-ui--header-session))
         (items (and session (efrit-todo-list session)))
         (target (or (seq-find (lambda (item) (eq (plist-get item :status) 'in-progress)) items)
                     (seq-find (lambda (item) (eq (plist-get item :status) 'pending)) items)
                     (car items))))
    (or (and target
             (efrit-todo-ui--find-place
              (list (efrit-todo-ui--key session) (plist-get target :id) 'item nil 0 0)))
        (save-excursion
          (goto-char (point-min))
          (and (efrit-todo-ui--goto-line-kind 1 '(item)) (point)))
        (point-min))))

(defun efrit-todo-ui--on-item-line-p (pos)
  "Return non-nil when POS is on a line of the lists: an item, call or heading."
  (memq (get-text-property (save-excursion (goto-char pos) (line-beginning-position))
                           'efrit-todo-line)
        '(item call heading)))

(defun efrit-todo-ui--settle (window)
  "Put WINDOW's point on an item when it is not on a line of the lists.
A window that shows the buffer afresh would otherwise start on the
blank line after the last item, from which `efrit-todo-next-item'
finds nothing."
  (when (and (window-live-p window)
             (eq (window-buffer window) (current-buffer))
             (not (efrit-todo-ui--on-item-line-p (window-point window))))
    (let ((home (efrit-todo-ui--home)))
      (set-window-point window home)
      (when (eq window (selected-window))
        (goto-char home)))))

;;;###autoload
(defun efrit-todo-show (&optional session)
  "Show the todo lists in *efrit-todos* and select its window.
With SESSION, or interactively with a prefix argument, move to that
session's section."
  (interactive (list (and current-prefix-arg
                          (completing-read "Session: " (reverse (efrit-todo-ui--shown-sessions))
                                           nil t))))
  ;; The buffer is drawn from the module: during the first build, say so
  ;; rather than leave an empty window or a raw error.
  (unless (efrit-todo-build-module-loaded-p)
    (efrit-todo-ui--user-error "Efrit-todo: %s" (efrit-todo-build--status-text)))
  (let ((buffer (efrit-todo-ui--buffer)))
    (pop-to-buffer buffer efrit-todo-display-buffer-action)
    (efrit-todo-ui--catch-up)
    (if session
        (efrit-todo-ui--goto-session session)
      (efrit-todo-ui--settle (selected-window)))
    buffer))

;;;###autoload
(defun efrit-todo-refresh ()
  "Redraw every session from the module."
  (interactive)
  (efrit-todo-ui--redraw-all))

(defun efrit-todo-ui--goto-line-kind (direction kinds)
  "Move DIRECTION (1 or -1) lines to the next line of one of KINDS.
Return non-nil when one was found; otherwise leave point alone."
  (let ((start (point))
        (found nil))
    (while (and (not found) (zerop (forward-line direction))
                (not (and (> direction 0) (eobp))))
      (when (memq (get-text-property (point) 'efrit-todo-line) kinds)
        (setq found t)))
    (unless found (goto-char start))
    found))

;;;###autoload
(defun efrit-todo-next-item (&optional n)
  "Move to the next item, or the Nth next one."
  (interactive "p")
  (dotimes (_ (abs (or n 1)))
    (unless (efrit-todo-ui--goto-line-kind (if (< (or n 1) 0) -1 1) '(item))
      (efrit-todo-ui--user-error "No %s item" (if (< (or n 1) 0) "previous" "next")))))

;;;###autoload
(defun efrit-todo-previous-item (&optional n)
  "Move to the previous item, or the Nth previous one."
  (interactive "p")
  (efrit-todo-next-item (- (or n 1))))

(defun efrit-todo-ui--session-at-point ()
  "Return the session of the section at point, or the header's session."
  (or (get-text-property (line-beginning-position) 'efrit-todo-session)
      (efrit-todo-ui--header-session)
      (or efrit-todo-current-session "default")))

(defun efrit-todo-ui--item-at-point ()
  "Return (SESSION . ID) of the item on this line, or signal a `user-error'."
  (let ((id (get-text-property (line-beginning-position) 'efrit-todo-item)))
    (unless id
      (efrit-todo-ui--user-error "Efrit-todo: no item on this line"))
    (cons (get-text-property (line-beginning-position) 'efrit-todo-session) id)))

(defun efrit-todo-ui--apply-edit (function &rest args)
  "Call the user-edit FUNCTION with ARGS and tell the user what happened.
The module's complaint about bad input becomes a `user-error'."
  (efrit-todo-ui--report-edit
   (condition-case err
       (apply function args)
     (efrit-todo-invalid-input
      (efrit-todo-ui--user-error "Efrit-todo: %s" (cadr err))))))

(defun efrit-todo-ui--report-edit (note)
  "Tell the user what the edit whose NOTE for the agent this is did.
Redraw, and return NOTE."
  (if (string-empty-p note)
      (message "Efrit-todo: nothing to change")
    (message "Efrit-todo: %s (the agent reads this with its next tool result)" note))
  (efrit-todo-ui--catch-up)
  note)

(defun efrit-todo-ui--blocked-reason (refusal)
  "Return the part of REFUSAL, a status edit's error, that names blockers.
That is \"t4 is blocked by t2 (pending)\", with \"through its parent
t3\" when the wait is an ancestor's; nil when something else refused."
  (when (string-match "\\`status: \\([^ ]+ is blocked by [^;]*\\)" refusal)
    (match-string 1 refusal)))

(defun efrit-todo-ui--set-status-or-offer (id status session)
  "Set item ID of SESSION to STATUS, or offer to drop what blocks it.
When open blockers refuse the change, say so and ask whether to drop
those dependencies and make the change; a no changes nothing."
  (let ((why nil)
        (note nil))
    (condition-case err
        (setq note (efrit-todo-user-set-status id status session))
      (efrit-todo-invalid-input
       (setq why (efrit-todo-ui--blocked-reason (cadr err)))
       (unless why
         (efrit-todo-ui--user-error "Efrit-todo: %s" (cadr err)))))
    (cond
     (note (efrit-todo-ui--report-edit note))
     ((y-or-n-p (format "%s.  Drop %s and mark %s %s? "
                        why
                        (if (string-match-p ")," why) "those dependencies" "that dependency")
                        id (efrit-todo-ui--status-name status)))
      (efrit-todo-ui--apply-edit #'efrit-todo-user-set-status-unblocked id status session))
     (t (message "Efrit-todo: nothing changed; %s" why)
        nil))))

;; Status keys: c and k finish an item, i starts it, r reopens it, t
;; cycles through pending, in progress and completed.  A key that would
;; change nothing says what the item is and which key changes it.

(defun efrit-todo-ui--status-name (status)
  "Return STATUS, a status symbol, as words."
  (if (eq status 'in-progress) "in progress" (symbol-name status)))

(defun efrit-todo-ui--status-hint (status)
  "Return which keys move an item with STATUS on."
  (substitute-command-keys
   (pcase status
     ('pending "\\<efrit-todo-list-mode-map>\\[efrit-todo-start-item] starts it, \\[efrit-todo-mark-completed] completes it")
     ('in-progress "\\<efrit-todo-list-mode-map>\\[efrit-todo-mark-completed] completes it, \\[efrit-todo-reopen-item] puts it back to pending")
     (_ "\\<efrit-todo-list-mode-map>\\[efrit-todo-reopen-item] reopens it"))))

(defun efrit-todo-ui--set-status (status)
  "Set the item at point to STATUS, or say why that would change nothing.
When open blockers hold the item back, offer to drop them first.
Return the note the agent reads, or nil."
  (pcase-let* ((`(,session . ,id) (efrit-todo-ui--item-at-point))
               (item (seq-find (lambda (item) (equal (plist-get item :id) id))
                               (efrit-todo-list session)))
               (now (plist-get item :status)))
    (if (eq now status)
        (progn
          (message "Efrit-todo: %s is already %s: %s" id
                   (efrit-todo-ui--status-name now) (efrit-todo-ui--status-hint now))
          nil)
      (efrit-todo-ui--set-status-or-offer id status session))))

;;;###autoload
(defun efrit-todo-mark-completed ()
  "Mark the item at point completed."
  (interactive)
  (efrit-todo-ui--set-status 'completed))

;;;###autoload
(defun efrit-todo-mark-cancelled ()
  "Mark the item at point cancelled."
  (interactive)
  (efrit-todo-ui--set-status 'cancelled))

;;;###autoload
(defun efrit-todo-start-item ()
  "Start the item at point: mark it in progress.
The item that was running goes back to pending: one item runs at a time."
  (interactive)
  (efrit-todo-ui--set-status 'in-progress))

;;;###autoload
(defun efrit-todo-reopen-item ()
  "Reopen the item at point: put it back to pending."
  (interactive)
  (efrit-todo-ui--set-status 'pending))

;;;###autoload
(defun efrit-todo-cycle-status ()
  "Move the item at point on: pending, in progress, completed, pending.
A cancelled item goes back to pending."
  (interactive)
  (pcase-let* ((`(,session . ,id) (efrit-todo-ui--item-at-point))
               (item (seq-find (lambda (item) (equal (plist-get item :id) id))
                               (efrit-todo-list session))))
    (efrit-todo-ui--set-status
     (pcase (plist-get item :status)
       ('pending 'in-progress)
       ('in-progress 'completed)
       (_ 'pending)))))

;;;###autoload
(defun efrit-todo-edit-item (content)
  "Replace the content of the item at point with CONTENT."
  (interactive
   (pcase-let* ((`(,session . ,id) (efrit-todo-ui--item-at-point))
                (item (seq-find (lambda (item) (equal (plist-get item :id) id))
                                (efrit-todo-list session))))
     (list (read-string (format "Edit %s: " id) (plist-get item :content)))))
  (pcase-let ((`(,session . ,id) (efrit-todo-ui--item-at-point)))
    (efrit-todo-ui--apply-edit #'efrit-todo-user-edit-content id content session)))

;;;###autoload
(defun efrit-todo-add-item (content)
  "Add a pending item with CONTENT at the end of the session at point."
  (interactive (list (read-string (format "Add to %s: " (efrit-todo-ui--session-at-point)))))
  (let* ((session (efrit-todo-ui--session-at-point))
         (before (mapcar (lambda (item) (plist-get item :id)) (efrit-todo-list session)))
         (note (efrit-todo-ui--apply-edit #'efrit-todo-user-add content session))
         (added (seq-find (lambda (item) (not (member (plist-get item :id) before)))
                          (efrit-todo-list session))))
    (when added
      (efrit-todo-ui--goto-item session (plist-get added :id)))
    note))

(defun efrit-todo-ui--goto-item (session id)
  "Move point, and the window's point, to item ID of SESSION, if it is drawn."
  (when-let* ((pos (efrit-todo-ui--find-place
                    (list (efrit-todo-ui--key session) id 'item nil 0 0))))
    (goto-char pos)
    (dolist (window (get-buffer-window-list (current-buffer) nil t))
      (set-window-point window pos))))

(defun efrit-todo-ui--find-item (session id)
  "Return the plist of item ID of SESSION, or nil."
  (seq-find (lambda (item) (equal (plist-get item :id) id)) (efrit-todo-list session)))

(defun efrit-todo-ui--read-id (prompt items &optional default)
  "Read an item id with PROMPT, completing over ITEMS, plists of items.
Each candidate shows the item's content beside its id.  DEFAULT is
what RET alone gives.  An empty answer is a `user-error'."
  (let* ((contents (mapcar (lambda (item)
                             (cons (plist-get item :id)
                                   (efrit-todo-ui--one-line (plist-get item :content))))
                           items))
         (completion-extra-properties
          (list :annotation-function
                (lambda (id)
                  (let ((content (cdr (assoc id contents))))
                    (if content (concat "  " content) "")))))
         (answer (string-trim (completing-read prompt (mapcar #'car contents)
                                               nil nil nil nil default))))
    (when (string-empty-p answer)
      (efrit-todo-ui--user-error "Efrit-todo: no id given"))
    answer))

;;;###autoload
(defun efrit-todo-add-blocker (blocker)
  "Make the item at point wait for BLOCKER, another item's id.
The item is not ready to start until BLOCKER is completed or
cancelled.  Interactively, read BLOCKER with completion over the
session's other items.  A blocker that would close a cycle, or an
unknown id, is refused and the list stays as it was."
  (interactive
   (pcase-let* ((`(,session . ,id) (efrit-todo-ui--item-at-point))
                (item (efrit-todo-ui--find-item session id))
                (taken (cons id (plist-get item :blocked-by))))
     (list (efrit-todo-ui--read-id
            (format "%s is blocked by: " id)
            (seq-remove (lambda (other) (member (plist-get other :id) taken))
                        (efrit-todo-list session))))))
  (pcase-let ((`(,session . ,id) (efrit-todo-ui--item-at-point)))
    (efrit-todo-ui--apply-edit #'efrit-todo-user-add-blocker id blocker session)))

;;;###autoload
(defun efrit-todo-remove-blocker (blocker)
  "Let the item at point stop waiting for BLOCKER, one of its blockers.
Interactively, read BLOCKER with completion over the item's open
blockers, the first one by default."
  (interactive
   (pcase-let* ((`(,session . ,id) (efrit-todo-ui--item-at-point))
                (blockers (plist-get (efrit-todo-ui--find-item session id) :blocked-by)))
     (unless blockers
       (efrit-todo-ui--user-error "Efrit-todo: %s has no open blockers" id))
     (list (efrit-todo-ui--read-id
            (format-prompt "%s no longer blocked by" (car blockers) id)
            (mapcar (lambda (blocker)
                      (or (efrit-todo-ui--find-item session blocker)
                          (list :id blocker)))
                    blockers)
            (car blockers)))))
  (pcase-let ((`(,session . ,id) (efrit-todo-ui--item-at-point)))
    (efrit-todo-ui--apply-edit
     (lambda (id blocker session)
       (let ((note (efrit-todo-user-remove-blocker id blocker session)))
         (when (string-empty-p note)
           (efrit-todo-ui--user-error "Efrit-todo: %s is not a blocker of %s" blocker id))
         note))
     id blocker session)))

(defun efrit-todo-ui--under-p (item ancestor items)
  "Return non-nil when ITEM is a subtask of ANCESTOR, at any depth, in ITEMS."
  (let ((parent (plist-get item :parent))
        (steps 0))
    (while (and parent (not (equal parent ancestor)) (< steps 10))
      (setq parent (plist-get (seq-find (lambda (other) (equal (plist-get other :id) parent)) items)
                              :parent)
            steps (1+ steps)))
    (and parent (equal parent ancestor))))

(defun efrit-todo-ui--move (offset)
  "Move the item at point OFFSET places, refusing to move past either end."
  (pcase-let* ((`(,session . ,id) (efrit-todo-ui--item-at-point))
               (items (efrit-todo-list session))
               (index (seq-position items id (lambda (item id) (equal (plist-get item :id) id))))
               (target (+ (or index 0) offset)))
    (unless (and index (<= 0 target) (< target (length items)))
      (efrit-todo-ui--user-error "Efrit-todo: %s is already %s" id (if (< offset 0) "first" "last")))
    ;; A subtask moves among its parent's subtasks, never out of them;
    ;; on the way down, past its own subtasks.
    (let ((parent (plist-get (nth index items) :parent))
          (next (if (< offset 0)
                    (nth target items)
                  (seq-find (lambda (other) (not (efrit-todo-ui--under-p other id items)))
                            (nthcdr target items)))))
      (when (and parent
                 (not (and next (efrit-todo-ui--under-p next parent items))))
        (efrit-todo-ui--user-error "Efrit-todo: %s is already %s under %s"
                                   id (if (< offset 0) "first" "last") parent)))
    (efrit-todo-ui--apply-edit #'efrit-todo-user-move id offset session)))

;;;###autoload
(defun efrit-todo-move-item-up ()
  "Move the item at point one place up."
  (interactive)
  (efrit-todo-ui--move -1))

;;;###autoload
(defun efrit-todo-move-item-down ()
  "Move the item at point one place down."
  (interactive)
  (efrit-todo-ui--move 1))

;;;###autoload
(defun efrit-todo-clear-finished ()
  "Remove the completed and cancelled items of the session at point."
  (interactive)
  (efrit-todo-ui--apply-edit #'efrit-todo-user-clear-finished (efrit-todo-ui--session-at-point)))

;;;###autoload
(defun efrit-todo-clear-list ()
  "Clear the whole list of the session at point, after asking.
\\<efrit-todo-list-mode-map>\\[efrit-todo-undo-change] brings it back; the agent reads about it with its
next tool result."
  (interactive)
  (let* ((session (efrit-todo-ui--session-at-point))
         (count (efrit-todo--item-count session)))
    (cond ((zerop count)
           (message "Efrit-todo: the list of %s is empty already" session))
          ((y-or-n-p (format "Clear the whole list of %s (%d item%s)? "
                             session count (if (= count 1) "" "s")))
           (efrit-todo-ui--apply-edit #'efrit-todo-user-clear session))
          (t (message "Efrit-todo: nothing cleared")))))

;;;###autoload
(defun efrit-todo-drop-stopped ()
  "Let the list of the stopped session at point go.
The next agent command starts afresh instead of going on with it; the
list itself stays as it is."
  (interactive)
  (let ((session (efrit-todo-ui--session-at-point)))
    (if (efrit-todo-drop-unfinished session)
        (message "Efrit-todo: the next command will not go on with %s" session)
      (message "Efrit-todo: %s did not stop with items open" session))
    (efrit-todo-ui--catch-up)))

;;;###autoload
(defun efrit-todo-undo-change ()
  "Undo the newest change to the list of the session at point."
  (interactive)
  (let ((note (efrit-todo-undo (efrit-todo-ui--session-at-point))))
    (message "Efrit-todo: %s" (or note "nothing to undo"))
    (efrit-todo-ui--catch-up)
    note))

;;;###autoload
(defun efrit-todo-toggle-fold ()
  "Fold or unfold the item at point, or the session on a heading.
An unfolded item shows its description and its tool calls; a folded
session hides its items."
  (interactive)
  (let* ((bol (line-beginning-position))
         (session (get-text-property bol 'efrit-todo-session))
         (id (get-text-property bol 'efrit-todo-item)))
    (unless session
      (efrit-todo-ui--user-error "Efrit-todo: nothing to fold here"))
    (if id
        (let ((key (cons session id)))
          (unless (or (gethash key efrit-todo-ui--unfolded)
                      (gethash id (efrit-todo-ui--calls-by-item session))
                      (efrit-todo-ui--description (efrit-todo-ui--find-item session id)))
            (efrit-todo-ui--user-error "Efrit-todo: no description or tool calls under %s" id))
          (if (gethash key efrit-todo-ui--unfolded)
              (remhash key efrit-todo-ui--unfolded)
            (puthash key t efrit-todo-ui--unfolded)))
      (if (gethash session efrit-todo-ui--folded-sessions)
          (remhash session efrit-todo-ui--folded-sessions)
        (puthash session t efrit-todo-ui--folded-sessions)))
    (efrit-todo-ui--redraw-session session)
    ;; Folding moves the lines under the item away; stay on the item itself.
    (when (and id (not (eq (get-text-property (line-beginning-position) 'efrit-todo-line) 'item)))
      (efrit-todo-ui--goto-line-kind -1 '(item)))))

(defun efrit-todo-ui--goto-session (session)
  "Move point to the heading of SESSION."
  (let ((bounds (efrit-todo-ui--section-bounds (efrit-todo-ui--key session))))
    (unless bounds
      (efrit-todo-ui--redraw-all)
      (setq bounds (efrit-todo-ui--section-bounds (efrit-todo-ui--key session))))
    (when bounds
      (goto-char (car bounds))
      (dolist (window (get-buffer-window-list (current-buffer) nil t))
        (set-window-point window (point))))))

;;;###autoload
(defun efrit-todo-choose-session (session)
  "Put SESSION in the header line and move to its section."
  (interactive
   (list (completing-read "Session: " (reverse (efrit-todo-ui--shown-sessions)) nil t nil nil
                          (efrit-todo-ui--session-at-point))))
  (setq efrit-todo-ui--selected session)
  (efrit-todo-ui--goto-session session)
  (force-mode-line-update))

;;;###autoload
(defun efrit-todo-help ()
  "Show the keys of the *efrit-todos* buffer."
  (interactive)
  ;; Selected, so that q closes the help rather than the list.
  (let ((help-window-select t))
    (efrit-todo-ui--help-text)))

(defun efrit-todo-ui--help-text ()
  "Show the text of `efrit-todo-help' in the help window."
  (with-help-window (help-buffer)
    (princ "Keys of *efrit-todos*.  The agent is told about every edit with its next tool result.\n\n")
    (pcase-dolist (`(,key ,_ ,description) efrit-todo-ui--key-table)
      (princ (format "%-9s %s\n" key description)))
    (let ((glyphs (efrit-todo-ui--glyph-table)))
      (princ "\nWhat the marks before the items say:\n")
      (pcase-dolist (`(,key . ,meaning)
                     '((pending . "pending, ready to start")
                       (blocked . "pending, waiting: \"blocked by t2\" names the open blockers")
                       (in-progress . "in progress")
                       (completed . "completed")
                       (cancelled . "cancelled")))
        (princ (format "%-4s %s\n" (alist-get key glyphs "?") meaning))))
    (princ "(alice) after an item is its owner; \"description\" after it folds text.\n")
    (princ "\nRET also folds; M-x customize-group RET efrit-todo-ui for the options.\n")))

;;;; Auto-show

(defvar efrit-todo-ui--auto-shown (make-hash-table :test 'equal)
  "Sessions for which `efrit-todo-auto-show' has already shown the buffer.")

(defun efrit-todo-ui--maybe-auto-show (session)
  "Show the buffer if SESSION has its first list.
The caller checks that the user wants that: `efrit-todo-auto-show'."
  (when (and (not (gethash session efrit-todo-ui--auto-shown))
             (> (efrit-todo--item-count session) 0)
             (efrit-todo-ui--shown-p session))
    (puthash session t efrit-todo-ui--auto-shown)
    (let ((buffer (efrit-todo-ui--buffer)))
      (unless (efrit-todo-ui--visible-p buffer)
        (let ((window (display-buffer buffer efrit-todo-display-buffer-action)))
          (with-current-buffer buffer
            (efrit-todo-ui--catch-up)
            (efrit-todo-ui--settle window)))))))

;;;; The mode line

;; The indicator stands in `mode-line-format' before the buffer name: at
;; the end of the mode line, with the other global information, an
;; 80-column window cuts it off after the major mode.  It adapts to the
;; width of each window whose mode line it is drawn in: the running
;; item's text shrinks, and goes, before the progress does.

(defcustom efrit-todo-mode-line-position 'before-buffer-name
  "Where `efrit-todo-mode-line-mode' shows the indicator.
`before-buffer-name': in `mode-line-format', just before the buffer
name, where it stays in view on a narrow window.  `global-mode-string':
at the right of the major and minor modes, with the other global
information, where a narrow window cuts it off.  A mode line of your
own making, one without `mode-line-buffer-identification', gets the
indicator in `global-mode-string' either way."
  :type '(choice (const :tag "Before the buffer name" before-buffer-name)
                 (const :tag "With the global information, at the right" global-mode-string))
  :initialize #'custom-initialize-default
  :set (lambda (symbol value)
         (set-default symbol value)
         (when (bound-and-true-p efrit-todo-mode-line-mode)
           (efrit-todo-ui--mode-line-install t)))
  :group 'efrit-todo-ui)

(defvar efrit-todo-ui--mode-line-session nil
  "Session the mode-line indicator is about, or nil.")

(defvar efrit-todo-ui--mode-line-cache nil
  "The indicator as last computed: an alist from item widths to constructs.")

(defvar efrit-todo-ui--mode-line-dirty t
  "Non-nil when `efrit-todo-ui--mode-line-cache' needs computing again.")

(defvar efrit-todo-ui--mode-line-place nil
  "Where the indicator stands now.
`before-buffer-name', `global-mode-string' or nil (nowhere).")

(defvar efrit-todo-mode-line-format '(:eval (efrit-todo-ui--mode-line))
  "The mode-line construct of `efrit-todo-mode-line-mode'.")
(put 'efrit-todo-mode-line-format 'risky-local-variable t)

(defvar efrit-todo-ui--mode-line-map
  (let ((map (make-sparse-keymap)))
    (define-key map [mode-line mouse-1] #'efrit-todo-show)
    map)
  "Keymap of the mode-line indicator.")

(defun efrit-todo-ui--open-count (counts)
  "Return how many items in COUNTS are pending or in progress."
  (+ (plist-get counts :pending) (plist-get counts :in-progress)))

(defun efrit-todo-mode-line-text (&optional session item-width)
  "Return the mode-line indicator for SESSION, escaped for the mode line.
nil when SESSION has no list.  SESSION defaults to the session that
changed last.  The running item's text takes at most ITEM-WIDTH
columns (default `efrit-todo-mode-line-max-length'), none when that
is less than 8."
  (let* ((session (or session efrit-todo-ui--mode-line-session))
         (counts (and session (efrit-todo-counts session)))
         (item-width (min efrit-todo-mode-line-max-length
                          (or item-width efrit-todo-mode-line-max-length))))
    (when (and counts (> (plist-get counts :total) 0))
      (let* ((tripped (plist-get (efrit-todo-ui--lead-breaker session) :tripped))
             (current (efrit-todo-current session))
             (text (concat
                    "Todo " (format "%d/%d" (plist-get counts :completed) (plist-get counts :total))
                    (cond (tripped " breaker tripped")
                          ((efrit-todo-stopped session) " stopped")
                          (current
                           (if (< item-width 8)
                               ""
                             (concat " " (truncate-string-to-width
                                          (efrit-todo-ui--one-line (plist-get current :active-form))
                                          item-width nil nil t))))
                          ((zerop (efrit-todo-ui--open-count counts)) " done")
                          (t "")))))
        (propertize (efrit-todo-ui--escape text)
                    'face (if tripped 'efrit-todo-mode-line-tripped 'efrit-todo-mode-line)
                    'mouse-face 'mode-line-highlight
                    'local-map efrit-todo-ui--mode-line-map
                    'help-echo (lambda (&rest _) (efrit-todo-ui--mode-line-help session)))))))

(defun efrit-todo-ui--mode-line-help (session)
  "Return the help-echo of the indicator: the whole list of SESSION."
  (condition-case nil
      (let ((glyphs (efrit-todo-ui--glyph-table)))
        (concat
         (format "%s: %s\n" session (efrit-todo-ui--progress (efrit-todo-counts session)))
         (if-let* ((stopped (efrit-todo-stopped session)))
             (format "Stopped: %s\n" (efrit-todo-ui--one-line (plist-get stopped :reason)))
           "")
         (mapconcat (lambda (item)
                      (format "%s %s %s"
                              (alist-get (if (efrit-todo-ui--blocked-p item)
                                             'blocked
                                           (plist-get item :status))
                                         glyphs "?")
                              (plist-get item :id)
                              (efrit-todo-ui--one-line (plist-get item :content))))
                    (efrit-todo-list session) "\n")
         "\nmouse-1: show *efrit-todos*"))
    (error "Efrit-todo")))

(defun efrit-todo-ui--mode-line-item-width (width)
  "Return how many columns the running item gets in a mode line WIDTH wide.
What the default mode line shows besides, the buffer name, position
and major mode, takes about 60 columns, and the progress 10: at 80
columns the item's text is left out, so that the line number and the
mode's name stay in view."
  (- width 75))

(defun efrit-todo-ui--mode-line (&optional width)
  "Return the indicator for a window WIDTH columns wide, computing it if needed.
WIDTH defaults to the width of the window whose mode line is drawn:
while redisplay evaluates the mode line, that window is the selected
one.  Runs inside redisplay, so it never signals."
  (when efrit-todo-ui--mode-line-dirty
    (setq efrit-todo-ui--mode-line-dirty nil
          efrit-todo-ui--mode-line-cache nil))
  (let ((item-width (max 0 (min efrit-todo-mode-line-max-length
                                (efrit-todo-ui--mode-line-item-width
                                 (or width (window-total-width)))))))
    (if-let* ((cached (assq item-width efrit-todo-ui--mode-line-cache)))
        (cdr cached)
      (let ((construct
             (condition-case err
                 (let ((text (efrit-todo-mode-line-text nil item-width)))
                   (and text
                        (if (eq efrit-todo-ui--mode-line-place 'global-mode-string)
                            (list " " text " ")
                          (list "" text "  "))))
               (error (message "Efrit-todo: mode line: %s" (error-message-string err))
                      nil))))
        (push (cons item-width construct) efrit-todo-ui--mode-line-cache)
        construct))))

(defun efrit-todo-ui--has-list-p (session)
  "Return non-nil when SESSION has an item for efrit-todo to show.
Efrit's own list, kept while `efrit-todo-efrit-mode' is off, is not one."
  (and (not (efrit-todo-compat--efrit-list-p session))
       (> (plist-get (efrit-todo-counts session) :total) 0)))

(defun efrit-todo-ui--mode-line-follow (session)
  "Make the indicator follow SESSION, which changed."
  (cond ((efrit-todo-ui--has-list-p session)
         (setq efrit-todo-ui--mode-line-session session))
        ((or (null efrit-todo-ui--mode-line-session)
             (equal session efrit-todo-ui--mode-line-session))
         (setq efrit-todo-ui--mode-line-session
               (seq-find #'efrit-todo-ui--has-list-p (reverse (efrit-todo-sessions))))))
  (setq efrit-todo-ui--mode-line-dirty t)
  (force-mode-line-update t))

(defun efrit-todo-ui--mode-line-install (on)
  "Take the indicator out of the mode line; with ON, put it back in.
It goes where `efrit-todo-mode-line-position' says."
  (let ((format (default-value 'mode-line-format)))
    (when (consp format)
      (setq-default mode-line-format (remq 'efrit-todo-mode-line-format format))))
  (setq global-mode-string (remq 'efrit-todo-mode-line-format
                                 (if (listp global-mode-string)
                                     global-mode-string
                                   (list global-mode-string))))
  (setq efrit-todo-ui--mode-line-place nil)
  (when on
    (let ((format (default-value 'mode-line-format)))
      (if (and (eq efrit-todo-mode-line-position 'before-buffer-name)
               (consp format)
               (memq 'mode-line-buffer-identification format))
          (progn
            (setq-default mode-line-format
                          (mapcan (lambda (element)
                                    (if (eq element 'mode-line-buffer-identification)
                                        (list 'efrit-todo-mode-line-format element)
                                      (list element)))
                                  format))
            (setq efrit-todo-ui--mode-line-place 'before-buffer-name))
        (unless global-mode-string (setq global-mode-string '("")))
        (setq global-mode-string (append global-mode-string '(efrit-todo-mode-line-format)))
        (setq efrit-todo-ui--mode-line-place 'global-mode-string))))
  (setq efrit-todo-ui--mode-line-dirty t)
  (force-mode-line-update t))

;;;###autoload
(define-minor-mode efrit-todo-mode-line-mode
  "Show todo progress and the running item in the mode line.
The indicator stands where `efrit-todo-mode-line-position' says,
before the buffer name by default.  It follows the session that
changed last; it shows nothing when that session has no list, turns
to the face `efrit-todo-mode-line-tripped' when its breaker trips,
lists the whole list in its help-echo and opens *efrit-todos* on a
click.  On a narrow window it leaves out the running item's text
and shows only the progress."
  :global t
  :group 'efrit-todo-ui
  (efrit-todo-ui--mode-line-install efrit-todo-mode-line-mode)
  (efrit-todo-ui--mode-line-pick-session))

(defun efrit-todo-ui--mode-line-pick-session ()
  "Make the indicator show the last session with a list, if it is on.
Nothing while the module is being built: an init file turns the
indicator on at the first start, before the build ends; then this
runs again from `efrit-todo-build-loaded-hook'."
  (when (and efrit-todo-mode-line-mode (efrit-todo-build-module-loaded-p))
    (setq efrit-todo-ui--mode-line-session
          (seq-find #'efrit-todo-ui--has-list-p (reverse (efrit-todo-sessions))))
    (setq efrit-todo-ui--mode-line-dirty t)
    (force-mode-line-update t)))

;; After the saved lists are restored (efrit-todo.el's function, depth 0).
(add-hook 'efrit-todo-build-loaded-hook #'efrit-todo-ui--mode-line-pick-session 90)

;;;; Following the changes

(defun efrit-todo-ui--on-change (session)
  "Update the buffer and indicator for SESSION, which just changed.
This runs on every tool call: what it does when nothing is shown is
only variable tests."
  (when efrit-todo-mode-line-mode
    (efrit-todo-ui--mode-line-follow session))
  (let ((buffer efrit-todo-ui--list-buffer))
    (when (and buffer (buffer-live-p buffer)
               (with-current-buffer buffer (derived-mode-p 'efrit-todo-list-mode)))
      (with-current-buffer buffer
        (efrit-todo-ui--session-changed session))))
  (when (and efrit-todo-auto-show (not noninteractive))
    (efrit-todo-ui--maybe-auto-show session)))

(add-hook 'efrit-todo-change-functions #'efrit-todo-ui--on-change)

(defun efrit-todo-ui-unload-function ()
  "Remove the hook and the indicator when this file is unloaded."
  (remove-hook 'efrit-todo-change-functions #'efrit-todo-ui--on-change)
  (remove-hook 'efrit-todo-build-loaded-hook #'efrit-todo-ui--mode-line-pick-session)
  (efrit-todo-mode-line-mode -1)
  (efrit-todo-ui--stop-timer)
  nil)

(provide 'efrit-todo-ui)

;; Local Variables:
;; package-lint-main-file: "efrit-todo.el"
;; End:

;;; efrit-todo-ui.el ends here
