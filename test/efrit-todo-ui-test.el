;;; efrit-todo-ui-test.el --- ERT tests of the *efrit-todos* buffer and mode line -*- lexical-binding: t; -*-

;;; Commentary:

;; These tests drive lisp/efrit-todo-ui.el in batch Emacs against the real
;; module: what the buffer shows after writes, when it redraws and what it
;; leaves alone, where point stays, what every key does to the module's
;; state, auto-show, and the mode-line indicator.
;;
;; Batch Emacs has one frame with one window, so "visible" is real here:
;; the buffer is shown in that window or not.  `format-mode-line' returns
;; "" in batch, so the mode-line tests read the indicator's string; the
;; terminal test (test/efrit-todo-tmux-test.sh) checks the drawn mode line.

;;; Code:

(require 'ert)
(require 'cl-lib)
(require 'json)
(require 'seq)
(require 'subr-x)
(require 'efrit-todo)
(require 'efrit-todo-ui)

;;;; Helpers

(defun efrit-todo-ui-test--write (session &rest items)
  "Write ITEMS to SESSION: each is (CONTENT STATUS [ACTIVE-FORM [ID]])."
  (efrit-todo-write
   (json-encode
    `((todos . ,(vconcat
                 (mapcar (pcase-lambda (`(,content ,status ,active ,id))
                           `((content . ,content) (status . ,status)
                             ,@(and active `((activeForm . ,active)))
                             ,@(and id `((id . ,id)))))
                         items)))))
   session))

(defmacro efrit-todo-ui-test-with-buffer (session-var &rest body)
  "Run BODY with SESSION-VAR bound to a fresh session name.
The todo buffer starts afresh, auto-show and the mode-line mode are
off, and everything is put back afterwards."
  (declare (indent 1) (debug (symbolp body)))
  `(let ((,session-var (format "ui-test-%s" (cl-gensym)))
         (efrit-todo-auto-show nil)
         (efrit-todo-refresh-interval nil)
         (efrit-todo-use-unicode t))
     (when (get-buffer efrit-todo-buffer-name)
       (kill-buffer efrit-todo-buffer-name))
     (unwind-protect
         (progn ,@body)
       (efrit-todo-mode-line-mode -1)
       (when (get-buffer efrit-todo-buffer-name)
         (kill-buffer efrit-todo-buffer-name))
       (when (get-buffer "*Help*")
         (kill-buffer "*Help*"))
       (let ((ignore-window-parameters t))
         (delete-other-windows)))))

(defun efrit-todo-ui-test--model-reads (session)
  "Return the result the model gets for its next tool call in SESSION.
The user's edits reach the model there, not in the system prompt."
  (efrit-todo-after-tool "eval_sexp" "(+ 1 1)" "2" nil session))

(defun efrit-todo-ui-test--section (session)
  "Return the text of SESSION's section in *efrit-todos*, or nil."
  (with-current-buffer efrit-todo-buffer-name
    (let ((bounds (efrit-todo-ui--section-bounds (efrit-todo-ui--key session))))
      (and bounds (buffer-substring-no-properties (car bounds) (cdr bounds))))))

(defun efrit-todo-ui-test--show-two-sessions (session)
  "Write the sample list to SESSION and one item to another; show both.
Return the name of the other session."
  (let ((other (concat session "-other")))
    (efrit-todo-ui-test--sample session)
    (efrit-todo-ui-test--write other '("Other work" "pending"))
    (efrit-todo-show)
    other))

(defun efrit-todo-ui-test--mark-sections (&rest sessions)
  "Append the text MARK to the heading of each of SESSIONS in the buffer.
A section redrawn since loses its mark."
  (with-current-buffer efrit-todo-buffer-name
    (let ((inhibit-read-only t))
      (dolist (name sessions)
        (goto-char (car (efrit-todo-ui--section-bounds (efrit-todo-ui--key name))))
        (end-of-line)
        (insert-and-inherit " MARK")))))

(defun efrit-todo-ui-test--goto-item (session id)
  "Move point in *efrit-todos* to the line of item ID of SESSION."
  (with-current-buffer efrit-todo-buffer-name
    (goto-char (point-min))
    (while (not (and (equal (get-text-property (point) 'efrit-todo-session) session)
                     (equal (get-text-property (point) 'efrit-todo-item) id)
                     (eq (get-text-property (point) 'efrit-todo-line) 'item)))
      (when (eobp)
        (error "Item %s of %s is not in the buffer" id session))
      (forward-line 1))))

(defun efrit-todo-ui-test--goto-item-line (session kind)
  "Move point in *efrit-todos* to the first line of KIND in SESSION's section."
  (with-current-buffer efrit-todo-buffer-name
    (goto-char (point-min))
    (while (not (and (equal (get-text-property (point) 'efrit-todo-session) session)
                     (eq (get-text-property (point) 'efrit-todo-line) kind)))
      (when (eobp)
        (error "No %s line in the section of %s" kind session))
      (forward-line 1))
    (dolist (window (get-buffer-window-list (current-buffer) nil t))
      (set-window-point window (point)))))

(defun efrit-todo-ui-test--item (session id)
  "Return the plist of item ID in SESSION, or nil."
  (seq-find (lambda (item) (equal (plist-get item :id) id)) (efrit-todo-list session)))

(defun efrit-todo-ui-test--ids (session)
  "Return the ids of SESSION in list order."
  (mapcar (lambda (item) (plist-get item :id)) (efrit-todo-list session)))

(defun efrit-todo-ui-test--sample (session)
  "Write the sample list to SESSION: t1 done, t2 running, t3 and t4 pending."
  (efrit-todo-ui-test--write
   session
   '("Find every call of parse-config" "completed")
   '("Rename parse-config in config.el" "in_progress" "Renaming parse-config")
   '("Update the callers" "pending")
   '("Run the test suite" "pending")))

(defun efrit-todo-ui-test--show-sample (session &optional id)
  "Write the sample list to SESSION and show *efrit-todos*.
With ID, move point to that item."
  (efrit-todo-ui-test--sample session)
  (efrit-todo-show)
  (when id
    (efrit-todo-ui-test--goto-item session id)))

(defun efrit-todo-ui-test--press (keys &optional answer)
  "Press KEYS, a `kbd' string, in *efrit-todos* shown in the selected window.
With ANSWER, then replace what the minibuffer offers with ANSWER and
press RET."
  (select-window (get-buffer-window efrit-todo-buffer-name))
  (set-buffer efrit-todo-buffer-name)
  (execute-kbd-macro (if answer
                         (vconcat (kbd keys) (kbd "C-e C-SPC C-a C-w") answer (kbd "RET"))
                       (kbd keys))))

;;;; What the buffer shows

(ert-deftest efrit-todo-ui-test-shows-items ()
  "Each item shows glyph, id and content; the running item its activeForm."
  (efrit-todo-ui-test-with-buffer session
    (efrit-todo-ui-test--sample session)
    (efrit-todo-user-set-status "t4" 'cancelled session)
    (efrit-todo-show)
    (let ((text (efrit-todo-ui-test--section session)))
      (should (string-match-p (concat "^▾ " (regexp-quote session) "  1/4 done, 1 running  breaker ok") text))
      (should (string-match-p "^  ✓ t1  Find every call of parse-config  took [0-9]+s$" text))
      (should (string-match-p "^  ◐ t2  Renaming parse-config  running [0-9]+s$" text))
      (should-not (string-match-p "Rename parse-config in config.el" text))
      (should (string-match-p "^  ○ t3  Update the callers$" text))
      (should (string-match-p "^  ✗ t4  Run the test suite$" text)))
    (with-current-buffer efrit-todo-buffer-name
      (should (derived-mode-p 'special-mode))
      (should buffer-read-only)
      (efrit-todo-choose-session session)
      (should (string-prefix-p (concat session ": 1/4 done · breaker ok")
                               (efrit-todo-ui--header-line))))))

(ert-deftest efrit-todo-ui-test-newest-session-first ()
  "Sessions are drawn newest first."
  (efrit-todo-ui-test-with-buffer older
    (let ((newer (concat older "-newer")))
      (efrit-todo-ui-test--write older '("Old work" "pending"))
      (efrit-todo-ui-test--write newer '("New work" "pending"))
      (efrit-todo-show)
      (with-current-buffer efrit-todo-buffer-name
        (should (< (car (efrit-todo-ui--section-bounds (efrit-todo-ui--key newer)))
                   (car (efrit-todo-ui--section-bounds (efrit-todo-ui--key older)))))))))

(ert-deftest efrit-todo-ui-test-ascii-fallback ()
  "ASCII glyphs when asked, or when the display cannot show the Unicode ones."
  (efrit-todo-ui-test-with-buffer session
    (efrit-todo-ui-test--sample session)
    (let ((efrit-todo-use-unicode nil))
      (efrit-todo-show)
      (should (string-match-p "^  \\[x\\] t1 " (efrit-todo-ui-test--section session)))
      (should (string-match-p "^  \\[>\\] t2 " (efrit-todo-ui-test--section session))))
    (let ((efrit-todo-use-unicode 'auto))
      (cl-letf (((symbol-function 'char-displayable-p) (lambda (char) (< char 128))))
        (efrit-todo-refresh)
        (should (string-match-p "^  \\[ \\] t3 " (efrit-todo-ui-test--section session))))
      (cl-letf (((symbol-function 'char-displayable-p) (lambda (_char) t)))
        (efrit-todo-refresh)
        (should (string-match-p "^  ○ t3 " (efrit-todo-ui-test--section session)))))))

(ert-deftest efrit-todo-ui-test-model-text-on-one-line ()
  "Newlines in the model's text do not break the buffer's lines."
  (efrit-todo-ui-test-with-buffer session
    (efrit-todo-ui-test--write session '("First line\nsecond line" "pending"))
    (efrit-todo-show)
    (should (string-match-p "^  ○ t1  First line second line$"
                            (efrit-todo-ui-test--section session)))))

(ert-deftest efrit-todo-ui-test-zero-items ()
  "A session that never had an item gets no section; one emptied since does.
An agent command that fails before it plans, or an undo with nothing
to undo, must not leave an empty \"0/0 done\" section behind, nor take
the header line."
  (efrit-todo-ui-test-with-buffer session
    (let ((listed (concat session "-listed")))
      (efrit-todo-ui-test--write listed '("Real work" "pending"))
      (efrit-todo-ui-test--write session)
      (efrit-todo-begin-turn (concat session "-failed"))
      (efrit-todo-show)
      (should-not (efrit-todo-ui-test--section session))
      (should-not (efrit-todo-ui-test--section (concat session "-failed")))
      (with-current-buffer efrit-todo-buffer-name
        (should (string-prefix-p (concat listed ": 0/1 done") (efrit-todo-ui--header-line))))
      (efrit-todo-mode-line-mode 1)
      (should-not (efrit-todo-mode-line-text session))
      ;; Emptied by the user: the section stays, saying so, so that u
      ;; can bring the items back.
      (efrit-todo-ui-test--write session '("Done already" "completed"))
      (efrit-todo-user-clear-finished session)
      (should (equal (efrit-todo-ui-test--section session)
                     (concat "▾ " session "  0/0 done  breaker ok, 0 calls\n  no items\n\n")))
      (efrit-todo-ui-test--goto-item-line session 'empty)
      (efrit-todo-ui-test--press "u")
      (should (equal (efrit-todo-ui-test--ids session) '("t1"))))))

(ert-deftest efrit-todo-ui-test-undo-in-a-fresh-emacs-adds-no-session ()
  "`efrit-todo-undo' of a session that does not exist creates none."
  (efrit-todo-ui-test-with-buffer session
    (should-not (efrit-todo-undo session))
    (should-not (member session (efrit-todo-sessions)))
    (efrit-todo-show)
    (should-not (efrit-todo-ui-test--section session))))

(ert-deftest efrit-todo-ui-test-500-items ()
  "500 items draw, redraw, navigate and show in the mode line without errors."
  (efrit-todo-ui-test-with-buffer session
    (apply #'efrit-todo-ui-test--write session
           (mapcar (lambda (i) (list (format "Step %d" i) (if (= i 0) "in_progress" "pending")))
                   (number-sequence 0 499)))
    (efrit-todo-show)
    (with-current-buffer efrit-todo-buffer-name
      (let ((bounds (efrit-todo-ui--section-bounds (efrit-todo-ui--key session)))
            (count 0))
        (save-excursion
          (goto-char (car bounds))
          (while (< (point) (cdr bounds))
            (when (eq (get-text-property (point) 'efrit-todo-line) 'item)
              (setq count (1+ count)))
            (forward-line 1)))
        (should (= count 500))))
    (efrit-todo-ui-test--goto-item session "t500")
    (efrit-todo-ui-test--press "c")
    (should (eq (plist-get (efrit-todo-ui-test--item session "t500") :status) 'completed))
    (with-current-buffer efrit-todo-buffer-name
      (should (equal (get-text-property (point) 'efrit-todo-item) "t500")))
    (efrit-todo-mode-line-mode 1)
    (should (string-prefix-p "Todo 1/500 Step 0" (efrit-todo-mode-line-text session)))
    (should (string-match-p "t500 Step 499" (efrit-todo-ui--mode-line-help session)))))

;;;; When and what it redraws

(ert-deftest efrit-todo-ui-test-redraws-only-while-visible ()
  "A hidden buffer is left alone and catches up when shown again."
  (efrit-todo-ui-test-with-buffer session
    (efrit-todo-ui-test--show-sample session)
    (let ((ignore-window-parameters t))
      (delete-other-windows (get-buffer-window "*scratch*" t)))
    (switch-to-buffer "*scratch*")
    (should-not (get-buffer-window efrit-todo-buffer-name 'visible))
    (efrit-todo-user-set-status "t2" 'completed session)
    (should (string-match-p "◐ t2" (efrit-todo-ui-test--section session)))
    (efrit-todo-show)
    (should (string-match-p "✓ t2" (efrit-todo-ui-test--section session)))))

(ert-deftest efrit-todo-ui-test-redraws-only-changed-session ()
  "A change redraws its own session's section and leaves the others."
  (efrit-todo-ui-test-with-buffer session
    (let ((other (efrit-todo-ui-test--show-two-sessions session)))
      (efrit-todo-ui-test--mark-sections session other)
      (efrit-todo-user-set-status "t3" 'cancelled session)
      (should (string-match-p "✗ t3" (efrit-todo-ui-test--section session)))
      (should-not (string-match-p "MARK" (efrit-todo-ui-test--section session)))
      (should (string-match-p "MARK" (efrit-todo-ui-test--section other))))))

(ert-deftest efrit-todo-ui-test-point-stays-on-item ()
  "Point stays on the same item, at the same column, across redraws."
  (efrit-todo-ui-test-with-buffer session
    (efrit-todo-ui-test--show-sample session "t3")
    (with-current-buffer efrit-todo-buffer-name
      (forward-char 5))
    (efrit-todo-ui-test--write session
                               '("A new first step" "pending")
                               '("Find every call of parse-config" "completed" nil "t1")
                               '("Rename parse-config in config.el" "completed" nil "t2")
                               '("Update the callers" "in_progress" "Updating the callers" "t3"))
    (with-current-buffer efrit-todo-buffer-name
      (should (equal (get-text-property (line-beginning-position) 'efrit-todo-item) "t3"))
      (should (= (current-column) 5))
      (should (string-match-p "Updating the callers" (thing-at-point 'line))))))

(ert-deftest efrit-todo-ui-test-window-point-stays-on-item ()
  "The point of a window that is not selected stays on its item too."
  (efrit-todo-ui-test-with-buffer session
    (efrit-todo-ui-test--show-sample session)
    (let ((other (get-buffer-window efrit-todo-buffer-name)))
      (efrit-todo-ui-test--goto-item session "t2")
      (set-window-point other (with-current-buffer efrit-todo-buffer-name (point)))
      (select-window (seq-find (lambda (window) (not (eq window other))) (window-list)))
      (switch-to-buffer "*scratch*")
      (should-not (eq (selected-window) other))
      ;; Move the buffer's own point away: only the window's must follow t2,
      ;; whose line is rewritten.
      (with-current-buffer efrit-todo-buffer-name
        (goto-char (point-min)))
      (efrit-todo-ui-test--write session
                                 '("A new first step" "pending")
                                 '("Find every call of parse-config" "completed" nil "t1")
                                 '("Rename parse-config in config.el" "completed" nil "t2")
                                 '("Update the callers" "in_progress" nil "t3")
                                 '("Run the test suite" "pending" nil "t4"))
      (with-current-buffer efrit-todo-buffer-name
        (should (string-match-p "A new first step" (efrit-todo-ui-test--section session)))
        (should (equal (get-text-property (window-point other) 'efrit-todo-item) "t2"))))))

(ert-deftest efrit-todo-ui-test-running-time-ticks ()
  "The timer rewrites the running time in place, leaving point alone."
  (efrit-todo-ui-test-with-buffer session
    (efrit-todo-ui-test--show-sample session "t2")
    (with-current-buffer efrit-todo-buffer-name
      (end-of-line)
      (let ((started (plist-get (efrit-todo-current session) :started))
            (real-float-time (symbol-function 'float-time)))
        (cl-letf (((symbol-function 'float-time)
                   (lambda (&optional time) (if time (funcall real-float-time time) (+ started 125.2)))))
          (efrit-todo-ui--tick)))
      (should (string-match-p "running 2m05s$" (thing-at-point 'line)))
      (should (eolp)))))

(defmacro efrit-todo-ui-test--with-clock-stopped (&rest body)
  "Run BODY with `float-time' of now stuck 5 seconds ahead.
Running times then read the same in a partial and a full redraw."
  (declare (indent 0) (debug (body)))
  (let ((real (make-symbol "real-float-time"))
        (now (make-symbol "now")))
    `(let* ((,real (symbol-function 'float-time))
            (,now (+ (funcall ,real) 5)))
       (cl-letf (((symbol-function 'float-time)
                  (lambda (&optional time) (if time (funcall ,real time) ,now))))
         ,@body))))

;; A redraw rewrites only the items that changed; what it leaves must be
;; exactly what drawing everything afresh gives.
(defun efrit-todo-ui-test--rendering (session)
  "Return SESSION's section as its text and, per character, its properties."
  (with-current-buffer efrit-todo-buffer-name
    (let ((bounds (efrit-todo-ui--section-bounds (efrit-todo-ui--key session))))
      (cons (buffer-substring-no-properties (car bounds) (cdr bounds))
            (cl-loop for pos from (car bounds) below (cdr bounds)
                     collect (list (get-text-property pos 'face)
                                   (get-text-property pos 'efrit-todo-line)
                                   (get-text-property pos 'efrit-todo-item)
                                   (get-text-property pos 'efrit-todo-call)
                                   (get-text-property pos 'efrit-todo-elapsed)))))))

(defun efrit-todo-ui-test--check-redraws (session changes)
  "Edit SESSION in the shown buffer by one function after another.
CHANGES are those functions.  After each, what the partial redraw
left must be what a full redraw draws."
  (dolist (change changes)
    (funcall change)
    (let ((partial (efrit-todo-ui-test--rendering session)))
      (with-current-buffer efrit-todo-buffer-name
        (efrit-todo-refresh))
      (should (equal partial (efrit-todo-ui-test--rendering session))))))

(ert-deftest efrit-todo-ui-test-partial-redraw-matches-full ()
  "After each kind of change, the partial redraw equals a full one."
  (efrit-todo-ui-test-with-buffer session
    (efrit-todo-ui-test--with-clock-stopped
      (efrit-todo-ui-test--sample session)
      (efrit-todo-after-tool "search_files" "x" "found" nil session 0.1)
      (efrit-todo-show)
      (efrit-todo-ui-test--check-redraws
       session
       (list
        (lambda () (efrit-todo-user-set-status "t2" 'completed session))
        (lambda () (efrit-todo-user-set-status "t3" 'in-progress session))
        (lambda () (efrit-todo-user-add "Appended at the end" session))
        (lambda () (efrit-todo-ui-test--write
                    session
                    '("Find every call of parse-config" "completed" nil "t1")
                    '("Inserted in the middle" "pending")
                    '("Rename parse-config in config.el" "completed" nil "t2")
                    '("Update the callers" "in_progress" "Updating" "t3")
                    '("Run the test suite" "pending" nil "t4")
                    '("Appended at the end" "pending" nil "t5")))
        (lambda () (efrit-todo-user-move "t5" -3 session))
        (lambda () (efrit-todo-ui-test--goto-item session "t2")
          (efrit-todo-ui-test--press "TAB"))
        (lambda () (efrit-todo-user-edit-content "t4" "Run every test" session))
        (lambda () (efrit-todo-user-clear-finished session))
        (lambda () (efrit-todo-ui-test--write session '("Only one left" "pending")))))
      (should (string-match-p "Only one left" (efrit-todo-ui-test--section session))))))

(ert-deftest efrit-todo-ui-test-tool-calls-redraw-their-session ()
  "A recorded tool call redraws the session that made it, and only that one."
  (efrit-todo-ui-test-with-buffer session
    (let ((other (efrit-todo-ui-test--show-two-sessions session)))
      (efrit-todo-ui-test--mark-sections other)
      (should-not (string-match-p "1 call" (efrit-todo-ui-test--section session)))
      (efrit-todo-after-tool "read_file" "config.el" "(setq x 1)" nil session 0.1)
      (should (string-match-p "◐ t2  Renaming parse-config  running [0-9]+s  ▸ 1 call$"
                              (efrit-todo-ui-test--section session)))
      (should (string-match-p "breaker ok, 1 call$" (efrit-todo-ui-test--section session)))
      (should (string-match-p "MARK" (efrit-todo-ui-test--section other))))))

;;;; Keys

(ert-deftest efrit-todo-ui-test-key-complete-and-cancel ()
  "Keys c and k complete and cancel the item at point, in the module."
  (efrit-todo-ui-test-with-buffer session
    (efrit-todo-ui-test--show-sample session "t2")
    (efrit-todo-ui-test--press "c")
    (should (eq (plist-get (efrit-todo-ui-test--item session "t2") :status) 'completed))
    (efrit-todo-ui-test--goto-item session "t3")
    (efrit-todo-ui-test--press "k")
    (should (eq (plist-get (efrit-todo-ui-test--item session "t3") :status) 'cancelled))
    (should (string-match-p "✗ t3" (efrit-todo-ui-test--section session)))
    (let ((guidance (efrit-todo-ui-test--model-reads session)))
      (should (string-match-p "the user marked t2 completed" guidance))
      (should (string-match-p "the user marked t3 cancelled" guidance)))))

(ert-deftest efrit-todo-ui-test-key-edit ()
  "Key e rewords the item at point; empty content is refused, nothing changes."
  (efrit-todo-ui-test-with-buffer session
    (efrit-todo-ui-test--show-sample session "t3")
    (efrit-todo-ui-test--press "e" "Update the callers in main.el")
    (should (equal (plist-get (efrit-todo-ui-test--item session "t3") :content)
                   "Update the callers in main.el"))
    (should (string-match-p "○ t3  Update the callers in main.el$" (efrit-todo-ui-test--section session)))
    (should (string-match-p "the user reworded t3" (efrit-todo-ui-test--model-reads session)))
    (with-current-buffer efrit-todo-buffer-name
      (should-error (efrit-todo-edit-item "") :type 'user-error))
    (should (equal (plist-get (efrit-todo-ui-test--item session "t3") :content)
                   "Update the callers in main.el"))))

(ert-deftest efrit-todo-ui-test-key-add ()
  "Key a appends a pending item to the session at point."
  (efrit-todo-ui-test-with-buffer session
    (efrit-todo-ui-test--show-sample session "t1")
    (efrit-todo-ui-test--press "a" "Update the docs")
    (let ((last (car (last (efrit-todo-list session)))))
      (should (equal (plist-get last :content) "Update the docs"))
      (should (eq (plist-get last :status) 'pending)))
    (should (string-match-p "○ t5  Update the docs" (efrit-todo-ui-test--section session)))
    (should (string-match-p "the user added t5" (efrit-todo-ui-test--model-reads session)))))

(ert-deftest efrit-todo-ui-test-key-reorder ()
  "M-up and M-down move the item at point; point follows it."
  (efrit-todo-ui-test-with-buffer session
    (efrit-todo-ui-test--show-sample session "t3")
    (efrit-todo-ui-test--press "M-<up>")
    (should (equal (efrit-todo-ui-test--ids session) '("t1" "t3" "t2" "t4")))
    (with-current-buffer efrit-todo-buffer-name
      (should (equal (get-text-property (point) 'efrit-todo-item) "t3")))
    (efrit-todo-ui-test--press "M-<down> M-<down>")
    (should (equal (efrit-todo-ui-test--ids session) '("t1" "t2" "t4" "t3")))
    (with-current-buffer efrit-todo-buffer-name
      (should-error (efrit-todo-move-item-down) :type 'user-error))
    (should (equal (efrit-todo-ui-test--ids session) '("t1" "t2" "t4" "t3")))
    (should (string-match-p "the user moved t3" (efrit-todo-ui-test--model-reads session)))))

(defun efrit-todo-ui-test--clear-finished (session)
  "Cancel t4 of the sample in SESSION, then press d on t3 in the buffer."
  (efrit-todo-ui-test--sample session)
  (efrit-todo-user-set-status "t4" 'cancelled session)
  (efrit-todo-show)
  (efrit-todo-ui-test--goto-item session "t3")
  (efrit-todo-ui-test--press "d")
  (should (equal (efrit-todo-ui-test--ids session) '("t2" "t3"))))

(ert-deftest efrit-todo-ui-test-key-clear-finished ()
  "Key d removes the completed and cancelled items of the session at point."
  (efrit-todo-ui-test-with-buffer session
    (efrit-todo-ui-test--clear-finished session)
    (should-not (string-match-p "t1\\|t4" (efrit-todo-ui-test--section session)))
    (with-current-buffer efrit-todo-buffer-name
      (should (equal (get-text-property (point) 'efrit-todo-item) "t3")))))

(ert-deftest efrit-todo-ui-test-stopped-session-shows-and-x-lets-it-go ()
  "A session stopped with items open says so in its heading and the mode line.
x lets its list go: it is no longer stopped, and the list stays."
  (efrit-todo-ui-test-with-buffer session
    (efrit-todo-ui-test--show-sample session)
    (should (efrit-todo-stop "interrupted by the user" session))
    (let ((heading (car (split-string (efrit-todo-ui-test--section session) "\n"))))
      (should (string-match-p (concat (regexp-quote session) " .*stopped: interrupted by the user")
                              heading)))
    (should (string-match-p "\\`Todo 1/4 stopped\\'" (efrit-todo-mode-line-text session)))
    (efrit-todo-ui-test--goto-item session "t2")
    (efrit-todo-ui-test--press "x")
    (should-not (efrit-todo-stopped session))
    (should-not (string-match-p "stopped:" (efrit-todo-ui-test--section session)))
    (should-not (string-match-p "stopped" (efrit-todo-mode-line-text session)))
    (should (= (length (efrit-todo-list session)) 4))))

(ert-deftest efrit-todo-ui-test-key-undo ()
  "Key u undoes the newest change of the session at point, then the one before."
  (efrit-todo-ui-test-with-buffer session
    (efrit-todo-ui-test--clear-finished session)
    (efrit-todo-ui-test--press "u")
    (should (equal (efrit-todo-ui-test--ids session) '("t1" "t2" "t3" "t4")))
    (should (string-match-p "t4" (efrit-todo-ui-test--section session)))
    (efrit-todo-ui-test--press "u")
    (should (eq (plist-get (seq-find (lambda (item) (equal (plist-get item :id) "t4"))
                                     (efrit-todo-list session))
                           :status)
                'pending))))

(ert-deftest efrit-todo-ui-test-key-next-previous ()
  "Keys n and p move between item lines."
  (efrit-todo-ui-test-with-buffer session
    (efrit-todo-ui-test--show-sample session "t1")
    (efrit-todo-ui-test--press "n n")
    (should (equal (get-text-property (point) 'efrit-todo-item) "t3"))
    (efrit-todo-ui-test--press "p")
    (should (equal (get-text-property (point) 'efrit-todo-item) "t2"))))

(ert-deftest efrit-todo-ui-test-key-fold ()
  "TAB shows and hides the tool calls under an item, and a session's items."
  (efrit-todo-ui-test-with-buffer session
    (efrit-todo-ui-test--sample session)
    (efrit-todo-after-tool "search_files" "parse-config" "config.el:12\nmain.el:3" nil session 0.25)
    (efrit-todo-after-tool "eval_sexp" "(oops)" "void-function oops" t session 0.1)
    (efrit-todo-show)
    (let ((text (efrit-todo-ui-test--section session)))
      (should (string-match-p "◐ t2  Renaming parse-config  running [0-9]+s  ▸ 2 calls$" text))
      (should-not (string-match-p "search_files" text)))
    (efrit-todo-ui-test--goto-item session "t2")
    (efrit-todo-ui-test--press "TAB")
    (let ((text (efrit-todo-ui-test--section session)))
      (should (string-match-p "▾ 2 calls\n      search_files 0.2s  config.el:12 main.el:3\n      eval_sexp 0.1s  error: void-function oops\n" text)))
    (efrit-todo-ui-test--press "TAB")
    (should-not (string-match-p "search_files" (efrit-todo-ui-test--section session)))
    (with-current-buffer efrit-todo-buffer-name
      (goto-char (car (efrit-todo-ui--section-bounds (efrit-todo-ui--key session)))))
    (efrit-todo-ui-test--press "TAB")
    (should (equal (efrit-todo-ui-test--section session)
                   (concat "▸ " session "  1/4 done, 1 running  breaker ok, 2 calls\n\n")))))

(ert-deftest efrit-todo-ui-test-key-refresh-and-session ()
  "Key g redraws from the module; s selects a session and moves to it."
  (efrit-todo-ui-test-with-buffer session
    (efrit-todo-ui-test--show-two-sessions session)
    (with-current-buffer efrit-todo-buffer-name
      (let ((inhibit-read-only t))
        (erase-buffer)))
    (efrit-todo-ui-test--press "g")
    (should (string-match-p "○ t3  Update the callers" (efrit-todo-ui-test--section session)))
    (efrit-todo-ui-test--press "s" session)
    (with-current-buffer efrit-todo-buffer-name
      (should (equal (get-text-property (point) 'efrit-todo-session) session))
      (should (eq (get-text-property (point) 'efrit-todo-line) 'heading))
      (should (string-prefix-p (concat session ": 1/4 done") (efrit-todo-ui--header-line))))
    (efrit-todo-ui-test--press "a" "Added from the heading")
    (should (equal (plist-get (car (last (efrit-todo-list session))) :content)
                   "Added from the heading"))))

(ert-deftest efrit-todo-ui-test-key-help ()
  "? lists every key with what its command does."
  (efrit-todo-ui-test-with-buffer session
    (efrit-todo-ui-test--show-sample session)
    (efrit-todo-ui-test--press "?")
    (with-current-buffer "*Help*"
      ;; Written out by hand from the keys in the README, not computed
      ;; from the table the help is printed from.
      (dolist (line '("g         redraw every session"
                      "n         next item"
                      "p         previous item"
                      "TAB       show or hide the item's description and tool calls, or the session's items"
                      "c         mark the item completed"
                      "i         start the item: in progress (the running one goes back to pending)"
                      "r         reopen the item: back to pending"
                      "t         cycle the item: pending, in progress, completed, pending"
                      "k         mark the item cancelled"
                      "e         edit the item's content"
                      "a         add an item at the end of the session"
                      "b         add a blocker: the item waits until that one is finished"
                      "B         remove one of the item's blockers"
                      "M-<up>    move the item up"
                      "M-<down>  move the item down"
                      "s         choose the session of the header line and of new items"
                      "d         remove the session's completed and cancelled items"
                      "u         undo the session's newest change, by the agent or by you"
                      "x         let a stopped session's list go: the next command starts afresh"
                      "?         this help"
                      "q         close the window (C-x 1 in it keeps only the list)"))
        (should (string-match-p (concat "^" (regexp-quote line) "$") (buffer-string)))))
    ;; The help names the key that really runs the command.
    (pcase-dolist (`(,key ,command ,_) efrit-todo-ui--key-table)
      (should (eq (lookup-key efrit-todo-list-mode-map (kbd key)) command)))
    (with-current-buffer efrit-todo-buffer-name
      (should (string-match-p "efrit-todo-mark-completed"
                              (substitute-command-keys (documentation 'efrit-todo-list-mode)))))))

(ert-deftest efrit-todo-ui-test-key-on-non-item ()
  "Item keys on a heading say so and change nothing."
  (efrit-todo-ui-test-with-buffer session
    (efrit-todo-ui-test--show-sample session)
    (with-current-buffer efrit-todo-buffer-name
      (goto-char (car (efrit-todo-ui--section-bounds (efrit-todo-ui--key session))))
      (should-error (efrit-todo-mark-completed) :type 'user-error))
    (should (eq (plist-get (efrit-todo-ui-test--item session "t2") :status) 'in-progress))))

;;;; Status keys, point, window and wrapping on a small terminal

(defun efrit-todo-ui-test--status (session id)
  "Return the status of item ID in SESSION."
  (plist-get (efrit-todo-ui-test--item session id) :status))

(defun efrit-todo-ui-test--messages (function)
  "Call FUNCTION; return the messages it showed, oldest first."
  (let ((seen nil))
    (cl-letf (((symbol-function 'message)
               (lambda (format &rest args)
                 (when format (push (apply #'format-message format args) seen)))))
      (funcall function))
    (nreverse seen)))

(ert-deftest efrit-todo-ui-test-key-start-reopen-cycle ()
  "Keys i, r and t start, reopen and cycle the item at point; the agent is told."
  (efrit-todo-ui-test-with-buffer session
    (efrit-todo-ui-test--show-sample session "t3")
    (efrit-todo-ui-test--press "i")
    (should (eq (efrit-todo-ui-test--status session "t3") 'in-progress))
    ;; One item runs at a time: the one running before waits again.
    (should (eq (efrit-todo-ui-test--status session "t2") 'pending))
    (should (string-match-p "◐ t3" (efrit-todo-ui-test--section session)))
    (efrit-todo-ui-test--goto-item session "t1")
    (efrit-todo-ui-test--press "r")
    (should (eq (efrit-todo-ui-test--status session "t1") 'pending))
    (should (string-match-p "○ t1" (efrit-todo-ui-test--section session)))
    (let ((guidance (efrit-todo-ui-test--model-reads session)))
      (should (string-match-p "the user marked t3 in.progress" guidance))
      (should (string-match-p "the user marked t1 pending" guidance)))
    (dolist (expected '(in-progress completed pending))
      (efrit-todo-ui-test--press "t")
      (should (eq (efrit-todo-ui-test--status session "t1") expected)))
    (efrit-todo-ui-test--goto-item session "t4")
    (efrit-todo-ui-test--press "k")
    (efrit-todo-ui-test--press "t")
    (should (eq (efrit-todo-ui-test--status session "t4") 'pending))))

(ert-deftest efrit-todo-ui-test-key-that-changes-nothing-says-what-would ()
  "Key c on a completed item changes nothing and names the key that reopens it."
  (efrit-todo-ui-test-with-buffer session
    (efrit-todo-ui-test--show-sample session "t1")
    (let* ((history (length (efrit-todo-history session)))
           (messages (efrit-todo-ui-test--messages
                      (lambda () (efrit-todo-ui-test--press "c")))))
      (should (equal messages '("Efrit-todo: t1 is already completed: r reopens it")))
      (should (= (length (efrit-todo-history session)) history)))
    (efrit-todo-ui-test--goto-item session "t2")
    (should (equal (efrit-todo-ui-test--messages (lambda () (efrit-todo-ui-test--press "i")))
                   '("Efrit-todo: t2 is already in progress: c completes it, r puts it back to pending")))
    (efrit-todo-ui-test--goto-item session "t3")
    (should (equal (efrit-todo-ui-test--messages (lambda () (efrit-todo-ui-test--press "r")))
                   '("Efrit-todo: t3 is already pending: i starts it, c completes it")))))

(ert-deftest efrit-todo-ui-test-key-on-non-item-says-so-plainly ()
  "An item key off an item signals a `user-error' whose text stands alone."
  (efrit-todo-ui-test-with-buffer session
    (efrit-todo-ui-test--show-sample session)
    (with-current-buffer efrit-todo-buffer-name
      (goto-char (car (efrit-todo-ui--section-bounds (efrit-todo-ui--key session))))
      (dolist (command '(efrit-todo-mark-completed efrit-todo-start-item
                         efrit-todo-reopen-item efrit-todo-cycle-status))
        (should (equal (cdr (should-error (funcall command) :type 'user-error))
                       '("Efrit-todo: no item on this line")))))))

(ert-deftest efrit-todo-ui-test-status-keys-are-documented ()
  "The mode's docstring and the header line name the status keys."
  (efrit-todo-ui-test-with-buffer session
    (efrit-todo-ui-test--show-sample session)
    (with-current-buffer efrit-todo-buffer-name
      (let ((doc (substitute-command-keys (documentation 'efrit-todo-list-mode))))
        (dolist (phrase '("c completes it" "i starts it" "r reopens it" "k cancels it"
                          "t cycles it" "q closes the window"))
          (should (string-match-p (regexp-quote phrase) doc))))
      (efrit-todo-choose-session session)
      (should (string-match-p "c done  i start  r reopen  k cancel  b block  B unblock  \\? keys\\'"
                              (efrit-todo-ui--header-line 200)))
      (should (string-match-p "c done  i start  r reopen  k cancel  \\? keys\\'"
                              (efrit-todo-ui--header-line 100)))
      (let ((narrow (efrit-todo-ui--header-line 60)))
        (should (string-match-p "\\? keys\\'" narrow))
        (should-not (string-match-p "i start" narrow))))))

(ert-deftest efrit-todo-ui-test-point-on-an-item-when-shown ()
  "The list's window starts on the running item, so n and p work at once."
  (efrit-todo-ui-test-with-buffer session
    (switch-to-buffer "*scratch*")
    (let ((noninteractive nil)
          (efrit-todo-auto-show t))
      (efrit-todo-ui-test--sample session))
    (let ((window (get-buffer-window efrit-todo-buffer-name)))
      (should window)
      (with-current-buffer efrit-todo-buffer-name
        (should (equal (get-text-property (window-point window) 'efrit-todo-item) "t2")))
      ;; A point left after the last item goes back to an item.
      (set-window-point window (with-current-buffer efrit-todo-buffer-name (point-max)))
      (efrit-todo-show)
      (should (eq (selected-window) window))
      (should (equal (get-text-property (point) 'efrit-todo-item) "t2"))
      (efrit-todo-ui-test--press "n")
      (should (equal (get-text-property (point) 'efrit-todo-item) "t3")))))

(ert-deftest efrit-todo-ui-test-beside-on-a-wide-frame-below-on-a-narrow-one ()
  "The list goes beside the other windows only where both keep 40 columns."
  (should-not (efrit-todo-ui--beside-width 30))
  (should-not (efrit-todo-ui--beside-width 80))
  (should (= (efrit-todo-ui--beside-width 120) 42))
  (should (= (efrit-todo-ui--beside-width 160) 56))
  (let ((efrit-todo-window-width 50))
    (should (= (efrit-todo-ui--beside-width 100) 50))
    (should-not (efrit-todo-ui--beside-width 85)))
  (let ((efrit-todo-window-min-width 20))
    (should (= (efrit-todo-ui--beside-width 80) 28))))

(ert-deftest efrit-todo-ui-test-window-keys-do-what-they-do-elsewhere ()
  "The list's window is an ordinary one: `q' and `delete-window' close it.
`delete-other-windows' in it keeps only the list."
  (efrit-todo-ui-test-with-buffer session
    (switch-to-buffer "*scratch*")
    (efrit-todo-ui-test--show-sample session)
    (let ((window (get-buffer-window efrit-todo-buffer-name)))
      (should-not (window-parameter window 'window-side))
      (should (= (length (window-list)) 2))
      (efrit-todo-ui-test--press "q")
      (should-not (window-live-p window))
      (should (equal (window-list) (list (get-buffer-window "*scratch*")))))
    (efrit-todo-show)
    (efrit-todo-ui-test--press "C-x 0")
    (should-not (get-buffer-window efrit-todo-buffer-name))
    (efrit-todo-show)
    (efrit-todo-ui-test--press "C-x 1")
    (should (equal (window-list) (list (get-buffer-window efrit-todo-buffer-name))))))

(ert-deftest efrit-todo-ui-test-long-items-wrap-under-their-text ()
  "A line too long for the window wraps, continued under the item's text."
  (efrit-todo-ui-test-with-buffer session
    (efrit-todo-ui-test--subtask-sample session)
    (efrit-todo-after-tool "search_files" "parse-config" "config.el:12" nil session 0.1)
    (efrit-todo-show)
    (efrit-todo-ui-test--goto-item session "t2")
    (efrit-todo-ui-test--press "TAB")
    (with-current-buffer efrit-todo-buffer-name
      (should-not truncate-lines)
      (should-not truncate-partial-width-windows)
      (should word-wrap)
      (let ((checked 0))
        (goto-char (point-min))
        (while (not (eobp))
          (let ((line (buffer-substring-no-properties (point) (line-end-position))))
            (pcase (get-text-property (point) 'efrit-todo-line)
              ('item
               ;; The text starts two columns after the id.
               (should (string-match " t[0-9]+  " line))
               (dotimes (i (length line))
                 (should (equal (get-text-property (+ (point) i) 'wrap-prefix)
                                (make-string (match-end 0) ?\s))))
               (setq checked (1+ checked)))
              ('call
               (should (string-match "search_files" line))
               (should (> (length (get-text-property (point) 'wrap-prefix))
                          (- (match-beginning 0) 2))))))
          (forward-line 1))
        (should (>= checked 7))))))

(ert-deftest efrit-todo-ui-test-mode-line-before-the-buffer-name ()
  "The indicator stands before the buffer name and fits a narrow window."
  (efrit-todo-ui-test-with-buffer session
    (let ((original (default-value 'mode-line-format)))
      (unwind-protect
          (progn
            (efrit-todo-mode-line-mode 1)
            (let ((format (default-value 'mode-line-format)))
              (should (< (cl-position 'efrit-todo-mode-line-format format)
                         (cl-position 'mode-line-buffer-identification format)))
              (should-not (memq 'efrit-todo-mode-line-format global-mode-string)))
            (efrit-todo-ui-test--write session
                                       '("Rename it" "in_progress" "Renaming parse-config to config-parse everywhere")
                                       '("Test it" "pending"))
            ;; 100 columns: progress and the start of the running item, in
            ;; few enough columns to leave the buffer name and position.
            (let ((text (concat (cadr (efrit-todo-ui--mode-line 100)))))
              (should (string-prefix-p "Todo 0/2 Renaming parse" text))
              (should (<= (string-width text) 40)))
            ;; 30 columns: the progress alone.
            (should (equal (substring-no-properties (cadr (efrit-todo-ui--mode-line 30)))
                           "Todo 0/2"))
            (customize-set-variable 'efrit-todo-mode-line-position 'global-mode-string)
            (should (memq 'efrit-todo-mode-line-format global-mode-string))
            (should-not (memq 'efrit-todo-mode-line-format (default-value 'mode-line-format)))
            (customize-set-variable 'efrit-todo-mode-line-position 'before-buffer-name)
            (should (memq 'efrit-todo-mode-line-format (default-value 'mode-line-format)))
            ;; A mode line of the user's own has no buffer name to stand
            ;; before: the indicator goes with the global information.
            (efrit-todo-mode-line-mode -1)
            (setq-default mode-line-format '("%b " mode-line-position))
            (efrit-todo-mode-line-mode 1)
            (should (equal (default-value 'mode-line-format) '("%b " mode-line-position)))
            (should (memq 'efrit-todo-mode-line-format global-mode-string))
            (efrit-todo-mode-line-mode -1)
            (should-not (memq 'efrit-todo-mode-line-format global-mode-string)))
        (efrit-todo-mode-line-mode -1)
        (setq-default mode-line-format original)
        (custom-reevaluate-setting 'efrit-todo-mode-line-position)))
    (should-not (memq 'efrit-todo-mode-line-format (default-value 'mode-line-format)))))

;;;; Auto-show

(ert-deftest efrit-todo-ui-test-auto-show ()
  "A first list shows the buffer without selecting it, once per session."
  (efrit-todo-ui-test-with-buffer session
    (switch-to-buffer "*scratch*")
    (let ((noninteractive nil)
          (efrit-todo-auto-show t)
          (selected (selected-window)))
      (efrit-todo-ui-test--write session)
      (should-not (get-buffer efrit-todo-buffer-name))
      (efrit-todo-ui-test--sample session)
      (should (get-buffer-window efrit-todo-buffer-name))
      (should (eq (selected-window) selected))
      (should (eq (window-buffer selected) (get-buffer "*scratch*")))
      (should (string-match-p "◐ t2" (efrit-todo-ui-test--section session)))
      (delete-window (get-buffer-window efrit-todo-buffer-name))
      (efrit-todo-user-set-status "t2" 'completed session)
      (should-not (get-buffer-window efrit-todo-buffer-name)))
    (let ((noninteractive nil)
          (efrit-todo-auto-show nil))
      (kill-buffer efrit-todo-buffer-name)
      (efrit-todo-ui-test--write (concat session "-quiet") '("Quiet" "pending"))
      (should-not (get-buffer efrit-todo-buffer-name)))))

;;;; Mode line

(ert-deftest efrit-todo-ui-test-mode-line-text ()
  "The indicator shows progress and the running item, escaping `%'."
  (efrit-todo-ui-test-with-buffer session
    (efrit-todo-mode-line-mode 1)
    (should (memq 'efrit-todo-mode-line-format (default-value 'mode-line-format)))
    (efrit-todo-ui-test--write session
                               '("Reach full coverage" "in_progress" "Raising 100%d %s coverage")
                               '("Ship" "pending"))
    (let ((text (car (cdr (efrit-todo-ui--mode-line 200)))))
      (should (equal (substring-no-properties text) "Todo 0/2 Raising 100%%d %%s coverage"))
      (should (eq (get-text-property 0 'face text) 'efrit-todo-mode-line))
      (should (eq (lookup-key (get-text-property 0 'local-map text) [mode-line mouse-1])
                  'efrit-todo-show))
      (let ((help (funcall (get-text-property 0 'help-echo text) nil nil 0)))
        (should (string-match-p "◐ t1 Reach full coverage\n○ t2 Ship" help))))
    (efrit-todo-ui-test--write session
                               '("Reach full coverage" "completed" nil "t1")
                               '("Ship" "in_progress" "Shipping the release to every mirror in the world" "t2"))
    (let ((efrit-todo-mode-line-max-length 12))
      (setq efrit-todo-ui--mode-line-dirty t)
      (should (member (substring-no-properties (car (cdr (efrit-todo-ui--mode-line 200))))
                      '("Todo 1/2 Shipping th…" "Todo 1/2 Shipping t..."))))
    (efrit-todo-ui-test--write session
                               '("Reach full coverage" "completed" nil "t1")
                               '("Ship" "completed" nil "t2"))
    (should (equal (substring-no-properties (cadr (efrit-todo-ui--mode-line 200))) "Todo 2/2 done"))
    (efrit-todo-mode-line-mode -1)
    (should-not (memq 'efrit-todo-mode-line-format (default-value 'mode-line-format)))
    (should-not (memq 'efrit-todo-mode-line-format global-mode-string))))

(ert-deftest efrit-todo-ui-test-mode-line-follows-sessions ()
  "The indicator follows the session that changed last and hides with no list."
  (efrit-todo-ui-test-with-buffer session
    (let ((other (concat session "-other")))
      (efrit-todo-mode-line-mode 1)
      (efrit-todo-ui-test--write session '("First" "in_progress" "Doing the first"))
      (should (string-match-p "Doing the first" (cadr (efrit-todo-ui--mode-line 200))))
      (efrit-todo-ui-test--write other '("Second" "in_progress" "Doing the second"))
      (should (string-match-p "Doing the second" (cadr (efrit-todo-ui--mode-line 200))))
      (efrit-todo-reset other)
      (should (string-match-p "Doing the first" (cadr (efrit-todo-ui--mode-line 200))))
      (should-not (efrit-todo-mode-line-text other)))))

(ert-deftest efrit-todo-ui-test-mode-line-tripped ()
  "A tripped breaker turns the indicator to its own face and says so."
  (efrit-todo-ui-test-with-buffer session
    (efrit-todo-mode-line-mode 1)
    (efrit-todo-ui-test--sample session)
    (should (equal (substring-no-properties (cadr (efrit-todo-ui--mode-line 200)))
                   "Todo 1/4 Renaming parse-config"))
    ;; Three identical calls run; the same call asked for twice more is
    ;; refused, and the second refusal trips the breaker.
    (dotimes (_ 3)
      (efrit-todo-after-tool "search_files" "same" "same" nil session))
    (dotimes (_ 2)
      (efrit-todo-before-tool "search_files" "same" session))
    (should (plist-get (efrit-todo-breaker session) :tripped))
    (should (equal (substring-no-properties (cadr (efrit-todo-ui--mode-line 200)))
                   "Todo 1/4 breaker tripped"))
    (let ((text (efrit-todo-mode-line-text session)))
      (should (equal (substring-no-properties text) "Todo 1/4 breaker tripped"))
      (should (eq (get-text-property 0 'face text) 'efrit-todo-mode-line-tripped)))
    (efrit-todo-show)
    (should (string-match-p "breaker tripped: it would be the same call to search_files 4 times"
                            (efrit-todo-ui-test--section session)))))

;;;; Faces and options

(ert-deftest efrit-todo-ui-test-faces-inherit-standard-faces ()
  "Every face of the UI inherits from faces that Emacs itself defines."
  (let ((faces (mapcar #'car (seq-filter (lambda (member) (eq (cadr member) 'custom-face))
                                         (get 'efrit-todo-ui 'custom-group)))))
    (should (>= (length faces) 12))
    (dolist (face faces)
      (let ((parents (ensure-list (face-attribute face :inherit nil nil))))
        (should parents)
        (dolist (parent parents)
          (should (facep parent))
          (should-not (string-prefix-p "efrit-todo" (symbol-name parent))))))))

(ert-deftest efrit-todo-ui-test-customization-group ()
  "The options and faces belong to the efrit-todo-ui group."
  (let ((members (mapcar #'car (get 'efrit-todo-ui 'custom-group))))
    (dolist (symbol '(efrit-todo-auto-show efrit-todo-mode-line-max-length
                      efrit-todo-use-unicode efrit-todo-glyphs
                      efrit-todo-pending efrit-todo-mode-line-tripped))
      (should (memq symbol members)))
    (should (memq 'efrit-todo-ui (mapcar #'car (get 'efrit-todo 'custom-group))))))

;;;; Subtasks

(defun efrit-todo-ui-test--merge (session &rest items)
  "Merge ITEMS, alists as the model sends them, into SESSION."
  (efrit-todo-write `((merge . t) (todos . ,(vconcat items))) session))

(defun efrit-todo-ui-test--subtask-sample (session)
  "Write the sample list to SESSION with subtasks under t3.
t5 and t6 are subtasks of t3, t7 of t6; t4 follows them."
  (efrit-todo-ui-test--sample session)
  (efrit-todo-ui-test--merge session
                             '((content . "Update main.el") (parent . "t3"))
                             '((content . "Update cli.el") (parent . "t3")))
  (efrit-todo-ui-test--merge session '((content . "Check cli.el") (parent . "t6"))))

(ert-deftest efrit-todo-ui-test-subtasks-are-indented-under-their-parent ()
  "A subtask is drawn under its parent, two columns further in per level."
  (efrit-todo-ui-test-with-buffer session
    (efrit-todo-ui-test--subtask-sample session)
    (efrit-todo-show)
    (let ((text (efrit-todo-ui-test--section session)))
      (should (string-match-p
               (concat "^  ○ t3  Update the callers\n"
                       "    ○ t5  Update main\\.el\n"
                       "    ○ t6  Update cli\\.el\n"
                       "      ○ t7  Check cli\\.el\n"
                       "  ○ t4  Run the test suite\n")
               text)))
    ;; The indentation has no face; the glyph has the status face.
    (efrit-todo-ui-test--goto-item session "t7")
    (with-current-buffer efrit-todo-buffer-name
      (should (looking-at "      ○ t7"))
      (should (null (get-text-property (+ (point) 4) 'face)))
      (should (eq (get-text-property (+ (point) 6) 'face) 'efrit-todo-pending))
      (should (eq (get-text-property (+ (point) 8) 'face) 'efrit-todo-id)))))

(ert-deftest efrit-todo-ui-test-a-subtask-away-from-its-parent-names-it ()
  "A subtask that does not follow its parent says whose it is; times still tick."
  (efrit-todo-ui-test-with-buffer session
    (efrit-todo-ui-test--subtask-sample session)
    (efrit-todo-show)
    ;; t2, running, moves under t4 but stays where it stands.
    (efrit-todo-ui-test--merge session '((id . "t2") (parent . "t4")))
    (should (string-match-p "^    ◐ t2  Renaming parse-config (under t4)  running [0-9]+s$"
                            (efrit-todo-ui-test--section session)))
    (efrit-todo-ui-test--goto-item session "t2")
    (with-current-buffer efrit-todo-buffer-name
      (search-forward "running ")
      (should (numberp (get-text-property (point) 'efrit-todo-elapsed)))
      (should (null (get-text-property (1- (point)) 'efrit-todo-elapsed)))
      (search-backward "(under t4)")
      (should (eq (get-text-property (point) 'face) 'efrit-todo-id)))
    ;; Back to the top level, with "".
    (efrit-todo-ui-test--merge session '((id . "t2") (parent . "")))
    (should (string-match-p "^  ◐ t2  Renaming parse-config  running [0-9]+s$"
                            (efrit-todo-ui-test--section session)))))

(ert-deftest efrit-todo-ui-test-subtask-changes-redraw-as-a-full-redraw ()
  "After each change of a tree, the partial redraw equals a full one."
  (efrit-todo-ui-test-with-buffer session
    (efrit-todo-ui-test--with-clock-stopped
      (efrit-todo-ui-test--subtask-sample session)
      (efrit-todo-after-tool "search_files" "x" "found" nil session 0.1)
      (efrit-todo-show)
      (efrit-todo-ui-test--check-redraws
       session
       (list
        ;; t6 moves to the top level: t7 under it moves out too.
        (lambda () (efrit-todo-ui-test--merge session '((id . "t6") (parent . ""))))
        (lambda () (efrit-todo-ui-test--merge session '((id . "t6") (parent . "t3"))))
        (lambda () (efrit-todo-ui-test--merge session '((id . "t2") (parent . "t4"))))
        (lambda () (efrit-todo-ui-test--goto-item session "t2")
          (efrit-todo-ui-test--press "TAB"))
        (lambda () (efrit-todo-ui-test--merge
                    session '((id . "t7") (status . "cancelled"))))
        (lambda () (efrit-todo-user-set-status "t6" 'cancelled session))
        (lambda () (efrit-todo-user-clear-finished session))
        (lambda () (efrit-todo-undo session))))
      (should (string-match-p "^      ✗ t7  Check cli\\.el$"
                              (efrit-todo-ui-test--section session))))))

(ert-deftest efrit-todo-ui-test-completing-a-parent-too-early-is-refused ()
  "Key c on a parent with unfinished subtasks says why and changes nothing."
  (efrit-todo-ui-test-with-buffer session
    (efrit-todo-ui-test--subtask-sample session)
    (efrit-todo-show)
    (efrit-todo-ui-test--goto-item session "t3")
    (let ((before (efrit-todo-list session)))
      (should (string-match-p
               "\\`Efrit-todo: status: t3 cannot be completed while its subtasks t5, t6, t7 are unfinished"
               (cadr (should-error (efrit-todo-ui-test--press "c") :type 'user-error))))
      (should (equal (efrit-todo-list session) before)))))

;;;; The task graph: blockers, owners and descriptions

(defun efrit-todo-ui-test--write-graph (session &rest items)
  "Write ITEMS to SESSION, each an alist of todo_write fields, with merge."
  (efrit-todo-write (json-encode `((merge . t) (todos . ,(vconcat items)))) session))

(defun efrit-todo-ui-test--write-plan (session &rest items)
  "Write ITEMS to SESSION as its whole list, each an alist of todo_write fields.
A new item may name an item before it by the id it is given."
  (efrit-todo-write (json-encode `((todos . ,(vconcat items)))) session))

(defun efrit-todo-ui-test--graph-sample (session)
  "Write a small task graph to SESSION.
t1 is pending and ready; t2 waits for t1; t3 has an owner and a
description of two lines; t4, a subtask of t2 drawn under it, waits
through its parent."
  (efrit-todo-ui-test--write-plan
   session
   '((content . "Write the parser") (status . "pending"))
   '((content . "Write the tests") (status . "pending") (blocked_by . ["t1"]))
   '((content . "Document the syntax") (status . "pending") (owner . "alice")
     (description . "Cover every form.\nGive an example of each.")))
  (efrit-todo-ui-test--write-graph
   session '((content . "Test the errors") (status . "pending") (parent . "t2"))))

(ert-deftest efrit-todo-ui-test-blocked-items-name-their-open-blockers ()
  "A blocked item says what blocks it and looks unlike a ready one."
  (efrit-todo-ui-test-with-buffer session
    (efrit-todo-ui-test--graph-sample session)
    (efrit-todo-show)
    (let ((text (efrit-todo-ui-test--section session)))
      (should (string-match-p "^  ○ t1  Write the parser$" text))
      (should (string-match-p "^  ⊘ t2  Write the tests  blocked by t1$" text))
      ;; A subtask of a blocked item is not ready either, and says why.
      (should (string-match-p "^    ⊘ t4  Test the errors  parent blocked$" text))
      (should (string-match-p "^  ○ t3  Document the syntax (alice)  ▸ description$" text))
      (should-not (string-match-p "Cover every form" text)))
    (with-current-buffer efrit-todo-buffer-name
      (efrit-todo-ui-test--goto-item session "t2")
      (should (eq (get-text-property (+ (point) 2) 'face) 'efrit-todo-blocked))
      (efrit-todo-ui-test--goto-item session "t1")
      (should (eq (get-text-property (+ (point) 2) 'face) 'efrit-todo-pending)))
    ;; A finished blocker no longer blocks: the view shows open ones only.
    (efrit-todo-ui-test--write-graph session '((id . "t1") (status . "completed")))
    (let ((text (efrit-todo-ui-test--section session)))
      (should (string-match-p "^  ○ t2  Write the tests$" text))
      (should (string-match-p "^    ○ t4  Test the errors$" text))
      (should-not (string-match-p "blocked" text)))
    ;; Reopening it blocks again.
    (efrit-todo-ui-test--write-graph session '((id . "t1") (status . "pending")))
    (should (string-match-p "^  ⊘ t2  Write the tests  blocked by t1$"
                            (efrit-todo-ui-test--section session)))))

(ert-deftest efrit-todo-ui-test-blocked-glyph-in-ascii ()
  "Without Unicode a blocked item shows [b]."
  (efrit-todo-ui-test-with-buffer session
    (efrit-todo-ui-test--graph-sample session)
    (let ((efrit-todo-use-unicode nil))
      (efrit-todo-show)
      (should (string-match-p "^  \\[b\\] t2  Write the tests  blocked by t1$"
                              (efrit-todo-ui-test--section session)))
      (should (string-match-p "^  \\[ \\] t1  Write the parser$"
                              (efrit-todo-ui-test--section session))))))

(ert-deftest efrit-todo-ui-test-many-blockers-are-bounded ()
  "An item with many open blockers names a few and counts the rest."
  (efrit-todo-ui-test-with-buffer session
    (apply #'efrit-todo-ui-test--write-plan session
           (mapcar (lambda (n) `((content . ,(format "Step %d" n)) (status . "pending")))
                   (number-sequence 1 8)))
    (efrit-todo-ui-test--write-graph
     session `((content . "Last") (status . "pending")
               (blocked_by . ,(vconcat (mapcar (lambda (n) (format "t%d" n)) (number-sequence 1 8))))))
    (efrit-todo-show)
    (should (string-match-p "^  ⊘ t9  Last  blocked by t1, t2, t3, t4, t5 and 3 more$"
                            (efrit-todo-ui-test--section session)))))

(ert-deftest efrit-todo-ui-test-tab-shows-the-description ()
  "TAB on an item shows its description under its text; again hides it."
  (efrit-todo-ui-test-with-buffer session
    (efrit-todo-ui-test--graph-sample session)
    (efrit-todo-show)
    (efrit-todo-ui-test--goto-item session "t3")
    (efrit-todo-ui-test--press "TAB")
    (should (string-match-p
             (concat "^  ○ t3  Document the syntax (alice)  ▾ description\n"
                     "        Cover every form\\.\n"
                     "        Give an example of each\\.\n")
             (efrit-todo-ui-test--section session)))
    (with-current-buffer efrit-todo-buffer-name
      (should (equal (get-text-property (point) 'efrit-todo-item) "t3")))
    ;; Keys on a description line act on its item.
    (efrit-todo-ui-test--goto-item-line session 'description)
    (efrit-todo-ui-test--press "TAB")
    (should-not (string-match-p "Cover every form" (efrit-todo-ui-test--section session)))
    (with-current-buffer efrit-todo-buffer-name
      (should (eq (get-text-property (point) 'efrit-todo-line) 'item)))
    ;; An item without description or tool calls has nothing to unfold.
    (efrit-todo-ui-test--goto-item session "t1")
    (should (string-match-p "no description or tool calls under t1"
                            (cadr (should-error (efrit-todo-ui-test--press "TAB")
                                                :type 'user-error))))))

(ert-deftest efrit-todo-ui-test-description-with-tool-calls ()
  "An item with a description and tool calls unfolds both, description first."
  (efrit-todo-ui-test-with-buffer session
    (efrit-todo-ui-test--write-graph
     session '((content . "Fix the lexer") (status . "in_progress") (activeForm . "Fixing the lexer")
               (description . "Strings with escapes")))
    (efrit-todo-after-tool "search_files" "lexer" "lexer.el:3" nil session 0.1)
    (efrit-todo-show)
    (should (string-match-p "◐ t1  Fixing the lexer  running [0-9]+s  ▸ description, 1 call$"
                            (efrit-todo-ui-test--section session)))
    (efrit-todo-ui-test--goto-item session "t1")
    (efrit-todo-ui-test--press "TAB")
    (should (string-match-p "▾ description, 1 call\n        Strings with escapes\n      search_files 0.1s  lexer.el:3\n"
                            (efrit-todo-ui-test--section session)))))

(ert-deftest efrit-todo-ui-test-key-b-adds-a-blocker-the-model-reads ()
  "Key b adds a blocker to the item at point; the model reads of it next turn."
  (efrit-todo-ui-test-with-buffer session
    (efrit-todo-ui-test--graph-sample session)
    (efrit-todo-show)
    (efrit-todo-ui-test--goto-item session "t3")
    (efrit-todo-ui-test--press "b" "t1")
    (should (equal (plist-get (efrit-todo-ui-test--item session "t3") :blocked-by) '("t1")))
    (should-not (plist-get (efrit-todo-ui-test--item session "t3") :ready))
    (should (string-match-p "^  ⊘ t3  Document the syntax (alice)  blocked by t1  ▸ description$"
                            (efrit-todo-ui-test--section session)))
    (let ((reads (efrit-todo-ui-test--model-reads session)))
      (should (string-match-p "user" reads))
      (should (string-match-p "user[^\n]*t3[^\n]*t1" reads)))
    ;; Told once: the next call reads nothing more about it.
    (should-not (string-match-p "user[^\n]*t3[^\n]*t1" (efrit-todo-ui-test--model-reads session)))))

(ert-deftest efrit-todo-ui-test-key-b-offers-the-other-items ()
  "Key b completes over the session's other items, not the item or its blockers."
  (efrit-todo-ui-test-with-buffer session
    (efrit-todo-ui-test--graph-sample session)
    (efrit-todo-show)
    (efrit-todo-ui-test--goto-item session "t2")
    (let (offered annotations)
      (cl-letf (((symbol-function 'completing-read)
                 (lambda (_prompt collection &rest _)
                   (setq offered (all-completions "" collection))
                   (let ((annotate (plist-get completion-extra-properties :annotation-function)))
                     (setq annotations (mapcar annotate offered)))
                   "t3")))
        (with-current-buffer efrit-todo-buffer-name
          (call-interactively #'efrit-todo-add-blocker)))
      (should (equal (sort offered #'string<) '("t3" "t4")))
      (should (member "  Document the syntax" annotations)))
    (should (equal (sort (copy-sequence (plist-get (efrit-todo-ui-test--item session "t2") :blocked-by))
                         #'string<)
                   '("t1" "t3")))))

(ert-deftest efrit-todo-ui-test-key-b-refuses-a-cycle-and-unknown-ids ()
  "A blocker that closes a cycle, or an unknown id, is refused and names it."
  (efrit-todo-ui-test-with-buffer session
    (efrit-todo-ui-test--graph-sample session)
    (efrit-todo-show)
    (let ((before (efrit-todo-list session)))
      (efrit-todo-ui-test--goto-item session "t1")
      (let ((text (cadr (should-error (efrit-todo-ui-test--press "b" "t2") :type 'user-error))))
        (should (string-match-p "cycle" text))
        (should (string-match-p "t2" text)))
      (let ((text (cadr (should-error (efrit-todo-ui-test--press "b" "t99") :type 'user-error))))
        (should (string-match-p "t99" text)))
      (should (string-match-p "no id given"
                              (cadr (should-error (efrit-todo-ui-test--press "b" "")
                                                  :type 'user-error))))
      (should (equal (efrit-todo-list session) before)))))

(ert-deftest efrit-todo-ui-test-key-B-removes-a-blocker ()
  "Key B removes one of the item's blockers; the item becomes ready."
  (efrit-todo-ui-test-with-buffer session
    (efrit-todo-ui-test--graph-sample session)
    (efrit-todo-show)
    (efrit-todo-ui-test--goto-item session "t2")
    ;; RET alone takes the first blocker.
    (efrit-todo-ui-test--press "B RET")
    (should-not (plist-get (efrit-todo-ui-test--item session "t2") :blocked-by))
    (should (plist-get (efrit-todo-ui-test--item session "t2") :ready))
    (should (plist-get (efrit-todo-ui-test--item session "t4") :ready))
    (let ((text (efrit-todo-ui-test--section session)))
      (should (string-match-p "^  ○ t2  Write the tests$" text))
      (should (string-match-p "^    ○ t4  Test the errors$" text)))
    (should (string-match-p "user[^\n]*t2[^\n]*t1" (efrit-todo-ui-test--model-reads session)))
    (should (string-match-p "t2 has no open blockers"
                            (cadr (should-error (efrit-todo-ui-test--press "B")
                                                :type 'user-error))))))

(defmacro efrit-todo-ui-test--answering (answer asked &rest body)
  "Run BODY with `y-or-n-p' returning ANSWER; push each question on ASKED."
  (declare (indent 2) (debug (form symbolp body)))
  `(cl-letf (((symbol-function 'y-or-n-p)
              (lambda (question) (push question ,asked) ,answer)))
     ,@body))

(ert-deftest efrit-todo-ui-test-key-c-on-a-blocked-item-offers-to-drop-the-wait ()
  "Completing a blocked item says why it cannot, and offers to drop the dependency.
No changes nothing; yes drops it and completes the item, which the model reads."
  (efrit-todo-ui-test-with-buffer session
    (efrit-todo-ui-test--graph-sample session)
    (efrit-todo-user-add-blocker "t3" "t1" session)
    (efrit-todo-ui-test--model-reads session)
    (efrit-todo-show)
    (efrit-todo-ui-test--goto-item session "t3")
    (let ((before (efrit-todo-list session))
          (history (length (efrit-todo-history session)))
          prompts)
      (efrit-todo-ui-test--answering nil prompts
        (efrit-todo-ui-test--press "c"))
      (should (= (length prompts) 1))
      (should (string-match-p "t3 is blocked by t1 (pending)" (car prompts)))
      (should (string-match-p "[Dd]rop that dependency and mark t3 completed" (car prompts)))
      (should (equal (efrit-todo-list session) before))
      (should (= (length (efrit-todo-history session)) history))
      (should (string-match-p "^  ⊘ t3  Document the syntax (alice)  blocked by t1"
                              (efrit-todo-ui-test--section session)))
      (efrit-todo-ui-test--goto-item session "t3")
      (efrit-todo-ui-test--answering t prompts
        (efrit-todo-ui-test--press "c"))
      (should (eq (plist-get (efrit-todo-ui-test--item session "t3") :status) 'completed))
      (should-not (plist-get (efrit-todo-ui-test--item session "t3") :blocked-by))
      (should (string-match-p "^  ✓ t3  Document the syntax (alice)" (efrit-todo-ui-test--section session)))
      (should-not (string-match-p "t3[^\n]*blocked" (efrit-todo-ui-test--section session)))
      (should (string-match-p "user[^\n]*dependency of t3 on t1[^\n]*t3 completed"
                              (efrit-todo-ui-test--model-reads session))))))

(ert-deftest efrit-todo-ui-test-key-i-under-a-blocked-parent-offers-to-drop-its-wait ()
  "Starting a subtask of a blocked item names the parent's blocker; yes drops that."
  (efrit-todo-ui-test-with-buffer session
    (efrit-todo-ui-test--graph-sample session)
    (efrit-todo-show)
    (efrit-todo-ui-test--goto-item session "t4")
    (let ((before (efrit-todo-list session))
          prompts)
      (efrit-todo-ui-test--answering nil prompts
        (efrit-todo-ui-test--press "i"))
      (should (string-match-p "t4 is blocked by t1 (pending) through its parent t2" (car prompts)))
      (should (equal (efrit-todo-list session) before))
      (efrit-todo-ui-test--goto-item session "t4")
      (efrit-todo-ui-test--answering t prompts
        (efrit-todo-ui-test--press "i"))
      (should (eq (plist-get (efrit-todo-ui-test--item session "t4") :status) 'in-progress))
      (should-not (plist-get (efrit-todo-ui-test--item session "t2") :blocked-by))
      (should (string-match-p "^    ◐ t4  Test the errors" (efrit-todo-ui-test--section session))))))

(ert-deftest efrit-todo-ui-test-other-refusals-offer-nothing ()
  "A refusal that no dropped dependency would lift is a plain error.
One that another rule would still refuse after the drop changes nothing."
  (efrit-todo-ui-test-with-buffer session
    (efrit-todo-ui-test--graph-sample session)
    (efrit-todo-show)
    (let ((before (efrit-todo-list session))
          prompts)
      ;; t2 waits for t1 and has an unfinished subtask t4.
      (efrit-todo-ui-test--goto-item session "t2")
      (efrit-todo-ui-test--answering t prompts
        (should (string-match-p "t4 is unfinished"
                                (cadr (should-error (efrit-todo-ui-test--press "c")
                                                    :type 'user-error)))))
      (should (equal (efrit-todo-list session) before))
      (efrit-todo-ui-test--write-graph session '((id . "t1") (status . "completed")))
      (setq prompts nil)
      (efrit-todo-ui-test--goto-item session "t2")
      (efrit-todo-ui-test--answering t prompts
        (should (string-match-p "t4 is unfinished"
                                (cadr (should-error (efrit-todo-ui-test--press "c")
                                                    :type 'user-error)))))
      (should-not prompts))))

(ert-deftest efrit-todo-ui-test-blocker-keys-are-documented ()
  "The mode's docstring tells what b, B and TAB do and what blocked means."
  (efrit-todo-ui-test-with-buffer session
    (efrit-todo-ui-test--show-sample session)
    (with-current-buffer efrit-todo-buffer-name
      (let ((doc (substitute-command-keys (documentation 'efrit-todo-list-mode))))
        (dolist (phrase '("b adds a blocker" "B\nremoves one" "blocked by t2"
                          "open blockers" "owner" "TAB (or RET) on an item shows or hides its description"))
          (should (string-match-p (regexp-quote phrase) doc)))))
    (efrit-todo-ui-test--press "?")
    (with-current-buffer "*Help*"
      (should (string-match-p "^⊘    pending, waiting" (buffer-string)))
      (should (string-match-p "^○    pending, ready to start" (buffer-string))))))

;;;; What a new user met at 80 columns

(ert-deftest efrit-todo-ui-test-ascii-header-has-no-unicode ()
  "With ASCII glyphs, the header line and summaries are ASCII too."
  (efrit-todo-ui-test-with-buffer session
    (efrit-todo-ui-test--sample session)
    (let ((efrit-todo-use-unicode nil))
      (efrit-todo-show)
      (with-current-buffer efrit-todo-buffer-name
        (efrit-todo-choose-session session)
        (dolist (width '(200 80 28))
          (should (string-match-p "\\`[[:ascii:]]*\\'" (efrit-todo-ui--header-line width))))))
    (let ((efrit-todo-use-unicode 'auto))
      (cl-letf (((symbol-function 'char-displayable-p) (lambda (char) (< char 128))))
        (with-current-buffer efrit-todo-buffer-name
          (efrit-todo-refresh)
          (should (string-match-p "\\`[[:ascii:]]*\\'" (efrit-todo-ui--header-line 80))))))))

(ert-deftest efrit-todo-ui-test-narrow-header-keeps-the-help-key ()
  "In a window as narrow as a side window, the header still names ? for the keys."
  (efrit-todo-ui-test-with-buffer session
    (efrit-todo-ui-test--show-sample session)
    (with-current-buffer efrit-todo-buffer-name
      (efrit-todo-choose-session session)
      (dolist (width '(28 34 40))
        (let ((header (efrit-todo-ui--header-line width)))
          (should (string-match-p "\\? keys\\'" header))
          (should (<= (string-width header) width))
          (should (string-match-p "1/4 done" header)))))))

(ert-deftest efrit-todo-ui-test-mode-line-leaves-room-at-80-columns ()
  "At 80 columns the indicator is short: line number and mode name stay in view.
Wider, the running item comes back."
  (efrit-todo-ui-test-with-buffer session
    (efrit-todo-ui-test--write session
                               '("Rename it" "in_progress" "Renaming parse-config to config-parse everywhere")
                               '("Test it" "pending"))
    (let ((efrit-todo-ui--mode-line-session session))
      (efrit-todo-mode-line-mode 1)
      (setq efrit-todo-ui--mode-line-session session
            efrit-todo-ui--mode-line-dirty t)
      ;; What Emacs's own mode line takes of an 80-column window, for
      ;; *efrit-todos*: "-UUU:%*--F1  *efrit-todos*   All L3     (Efrit-Todos) "
      ;; is 56 columns.  The indicator must fit in the rest.
      (let ((text (apply #'concat (efrit-todo-ui--mode-line 80))))
        (should (string-prefix-p "Todo 0/2" text))
        (should (<= (+ 56 (string-width text)) 80)))
      (should (string-match-p "\\`Todo 0/2 Renaming parse"
                              (apply #'concat (efrit-todo-ui--mode-line 140)))))))

(ert-deftest efrit-todo-ui-test-help-is-selected ()
  "? selects the help, so that the q it mentions closes the help, not the list."
  (efrit-todo-ui-test-with-buffer session
    (efrit-todo-ui-test--show-sample session)
    (efrit-todo-ui-test--press "?")
    (should (equal (buffer-name (window-buffer (selected-window))) "*Help*"))
    (execute-kbd-macro (kbd "q"))
    (should (get-buffer-window efrit-todo-buffer-name))
    (should-not (get-buffer-window "*Help*"))))

(ert-deftest efrit-todo-ui-test-key-add-moves-to-the-new-item ()
  "After a, point is on the item just added."
  (efrit-todo-ui-test-with-buffer session
    (efrit-todo-ui-test--show-sample session "t1")
    (efrit-todo-ui-test--press "a" "Update the docs")
    (with-current-buffer efrit-todo-buffer-name
      (should (equal (get-text-property (line-beginning-position) 'efrit-todo-item) "t5"))
      (should (equal (get-text-property (window-point (get-buffer-window (current-buffer)))
                                        'efrit-todo-item)
                     "t5")))))

(ert-deftest efrit-todo-ui-test-subtask-moves-stay-under-the-parent ()
  "M-up on a first subtask, M-down on a last one, is refused: it stays under its parent."
  (efrit-todo-ui-test-with-buffer session
    (efrit-todo-ui-test--subtask-sample session)
    (efrit-todo-show)
    (let ((before (efrit-todo-ui-test--ids session)))
      (efrit-todo-ui-test--goto-item session "t5")
      (should (string-match-p "t5 is already first under t3"
                              (cadr (should-error (efrit-todo-ui-test--press "M-<up>")
                                                  :type 'user-error))))
      (efrit-todo-ui-test--goto-item session "t6")
      (should (string-match-p "t6 is already last under t3"
                              (cadr (should-error (efrit-todo-ui-test--press "M-<down>")
                                                  :type 'user-error))))
      (should (equal (efrit-todo-ui-test--ids session) before))
      (should-not (string-match-p "(under " (efrit-todo-ui-test--section session))))
    ;; Between siblings it moves.
    (efrit-todo-ui-test--goto-item session "t6")
    (efrit-todo-ui-test--press "M-<up>")
    (should (equal (seq-take (efrit-todo-ui-test--ids session) 4) '("t1" "t2" "t3" "t6")))))

(ert-deftest efrit-todo-ui-test-key-B-names-an-id-that-is-not-a-blocker ()
  "B with an id that is not a blocker of the item says so, and changes nothing."
  (efrit-todo-ui-test-with-buffer session
    (efrit-todo-ui-test--graph-sample session)
    (efrit-todo-show)
    (efrit-todo-ui-test--goto-item session "t2")
    (should (string-match-p "t3 is not a blocker of t2"
                            (cadr (should-error (efrit-todo-ui-test--press "B" "t3")
                                                :type 'user-error))))
    (should (equal (plist-get (efrit-todo-ui-test--item session "t2") :blocked-by) '("t1")))))

(ert-deftest efrit-todo-ui-test-key-D-clears-the-list-after-asking ()
  "D asks, then clears the session's list; u brings it back; no leaves it."
  (efrit-todo-ui-test-with-buffer session
    (efrit-todo-ui-test--show-sample session "t2")
    (let ((asked nil))
      (cl-letf (((symbol-function 'y-or-n-p) (lambda (prompt) (setq asked prompt) nil)))
        (efrit-todo-ui-test--press "D"))
      (should (string-match-p (regexp-quote session) asked))
      (should (equal (efrit-todo-ui-test--ids session) '("t1" "t2" "t3" "t4")))
      (cl-letf (((symbol-function 'y-or-n-p) (lambda (_prompt) t)))
        (efrit-todo-ui-test--press "D")))
    (should (null (efrit-todo-list session)))
    (should (string-match-p "no items" (efrit-todo-ui-test--section session)))
    (should (string-match-p "the user cleared the list, removing t1, t2, t3, t4"
                            (efrit-todo-ui-test--model-reads session)))
    (efrit-todo-ui-test--goto-item-line session 'heading)
    (efrit-todo-ui-test--press "u")
    (should (equal (efrit-todo-ui-test--ids session) '("t1" "t2" "t3" "t4")))
    (should (eq (lookup-key efrit-todo-list-mode-map "D") 'efrit-todo-clear-list))))

(ert-deftest efrit-todo-ui-test-reset-is-a-command ()
  "The command `efrit-todo-reset' clears a session's list, asking first; it is autoloaded."
  (should (commandp 'efrit-todo-reset))
  (with-temp-buffer
    (insert-file-contents (locate-library "efrit-todo.el"))
    (should (re-search-forward "^;;;###autoload\n(defun efrit-todo-reset " nil t)))
  (let ((efrit-todo-current-session (format "reset-%s" (cl-gensym))))
    (efrit-todo-ui-test--sample efrit-todo-current-session)
    (cl-letf (((symbol-function 'y-or-n-p) (lambda (_prompt) nil)))
      (call-interactively #'efrit-todo-reset))
    (should (= (length (efrit-todo-list)) 4))
    (cl-letf (((symbol-function 'y-or-n-p) (lambda (_prompt) t)))
      (call-interactively #'efrit-todo-reset))
    (should (null (efrit-todo-list)))))

(ert-deftest efrit-todo-ui-test-graph-redraw-matches-full ()
  "Blocking, unblocking and finishing redraw only what changed, as a full redraw would."
  (efrit-todo-ui-test-with-buffer session
    (efrit-todo-ui-test--graph-sample session)
    (efrit-todo-show)
    (efrit-todo-ui-test--check-redraws
     session
     (list (lambda () (efrit-todo-user-add-blocker "t3" "t1" session))
           (lambda () (efrit-todo-ui-test--goto-item session "t3")
             (efrit-todo-ui-test--press "TAB"))
           (lambda () (efrit-todo-ui-test--write-graph
                       session '((id . "t1") (status . "completed"))))
           (lambda () (efrit-todo-user-remove-blocker "t2" "t1" session))
           (lambda () (efrit-todo-ui-test--write-graph
                       session '((id . "t3") (owner . "bob")
                                 (description . "Shorter now"))))))))

;;;; Agent teams

(ert-deftest efrit-todo-ui-test-the-heading-names-the-running-agents ()
  "A section's heading names each running sub-agent and its running item.
An agent with no running item is named alone; none running, nothing
is added.  The agents are what `efrit-todo-agents' says."
  (efrit-todo-ui-test-with-buffer session
    (efrit-todo-ui-test--write-plan
     session
     '((content . "Patch the loop") (status . "in_progress") (activeForm . "Patching the loop")
       (owner . "executor"))
     '((content . "Write the notes") (status . "pending") (owner . "executor-2")))
    (let ((agents nil))
      (cl-letf (((symbol-function 'efrit-todo-agents)
                 (lambda (&optional _session) agents)))
        (efrit-todo-show)
        (should-not (string-match-p "agents?:" (efrit-todo-ui-test--section session)))
        (setq agents (list (list :name "executor" :type "executor"
                                 :current (car (efrit-todo-list session)))
                           (list :name "executor-2" :type "executor" :current nil)))
        (efrit-todo-refresh)
        (let ((heading (car (split-string (efrit-todo-ui-test--section session) "\n"))))
          (should (string-match-p
                   "agents: executor on t1 Patching the loop, executor-2$" heading))
          ;; The owner shows on the item's line.
          (should (string-match-p "^  ◐ t1  Patching the loop (executor)"
                                  (efrit-todo-ui-test--section session))))))))

(ert-deftest efrit-todo-ui-test-the-heading-shows-the-leads-breaker ()
  "The heading's breaker is the lead's, whoever's call redraws the list.
A sub-agent's tool call that changes the list redraws it while that
agent's calls are being made; the count shown stays the lead's."
  (efrit-todo-ui-test-with-buffer session
    (efrit-todo-ui-test--write-plan
     session '((content . "Patch the loop") (status . "pending")))
    (dotimes (_ 3)
      (efrit-todo-after-tool "read_file" '(("path" . "a.el")) "text" nil session))
    (efrit-todo-show)
    (should (string-match-p "breaker ok, 3 calls" (efrit-todo-ui-test--section session)))
    (let ((efrit-todo-agent (efrit-todo-agent-start "executor" session)))
      (efrit-todo-after-tool "read_file" '(("path" . "b.el")) "text" nil session)
      (efrit-todo-task-update '(("taskId" . "t1") ("status" . "in_progress")) session)
      (efrit-todo-refresh)
      (let ((heading (car (split-string (efrit-todo-ui-test--section session) "\n"))))
        (should (string-match-p "breaker ok, 3 calls" heading))))))

(provide 'efrit-todo-ui-test)

;;; efrit-todo-ui-test.el ends here
