;;; efrit-todo-efrit-mode-test.el --- ERT tests of the adapter's mode, without Efrit -*- lexical-binding: t; -*-

;;; Commentary:

;; What `efrit-todo-efrit-mode' does on its own: the advice it adds and
;; removes, what it restores, and the pieces that need no loop (schemas,
;; error texts).  The scenarios through a loop are in the harness suites.

;;; Code:

(require 'ert)
(require 'efrit-todo)
(require 'efrit-todo-efrit)

;; Efrit's breaker settings, made real by the test that needs them.
(defvar efrit-do-max-identical-tool-calls)

(defun efrit-todo-efrit-mode-test--advised ()
  "Return the functions that carry one of the mode's advice."
  (seq-filter (lambda (entry)
                (advice-member-p (nth 2 entry) (nth 0 entry)))
              efrit-todo-efrit--advice))

(defun efrit-todo-efrit-mode-test--efrit-ui-advice (&rest _)
  "Stand in for the advice of Efrit's own todo buffer.")

(ert-deftest efrit-todo-efrit-mode-test-on-and-off ()
  "Turning the mode on adds every advice; off removes them and restores."
  (let ((efrit-todo-current-session "before")
        (efrit-todo-known-tools '("mine"))
        (efrit-todo-efrit--efrit-ui-advice '(efrit-todo-efrit-mode-test--efrit-ui-advice)))
    (advice-add 'efrit-do--handle-todo-write :after
                #'efrit-todo-efrit-mode-test--efrit-ui-advice)
    (unwind-protect
        (progn
          (efrit-todo-efrit-mode 1)
          (should (= (length (efrit-todo-efrit-mode-test--advised))
                     (length efrit-todo-efrit--advice)))
          (should-not (advice-member-p #'efrit-todo-efrit-mode-test--efrit-ui-advice
                                       'efrit-do--handle-todo-write))
          (setq efrit-todo-current-session "efrit-do-1")
          (efrit-todo-efrit-mode -1)
          (should (null (efrit-todo-efrit-mode-test--advised)))
          (should (advice-member-p #'efrit-todo-efrit-mode-test--efrit-ui-advice
                                   'efrit-do--handle-todo-write))
          (should (equal efrit-todo-current-session "before"))
          (should (equal efrit-todo-known-tools '("mine"))))
      (efrit-todo-efrit-mode -1)
      (advice-remove 'efrit-do--handle-todo-write
                     #'efrit-todo-efrit-mode-test--efrit-ui-advice))))

(ert-deftest efrit-todo-efrit-mode-test-schemas-replace-without-mutating ()
  "Efrit's todo_write schema is replaced and todo_pause added, in a copy."
  (let* ((efrit (vector '(("name" . "eval_sexp") ("description" . "e"))
                        '(("name" . "todo_write") ("description" . "old"))))
         (before (copy-tree efrit t))
         (schemas (efrit-todo-efrit--tools-schema efrit))
         (names (mapcar (lambda (s) (cdr (assoc "name" s))) schemas)))
    (should (equal names '("eval_sexp" "todo_write" "todo_pause")))
    (should-not (equal (cdr (assoc "description" (aref schemas 1))) "old"))
    (should (equal (aref schemas 1) (car (efrit-todo-tool-schemas))))
    (should (equal efrit before))))

(ert-deftest efrit-todo-efrit-mode-test-errors-reach-efrit-as-errors ()
  "Efrit flags a line starting \"Error \"; efrit-todo's lines are rewritten."
  (let ((text (efrit-todo-efrit--for-efrit "2\n\nError: circuit breaker tripped")))
    (should (string-match-p "^Error " text))
    (should (string-prefix-p "2\n\n" text)))
  (should (efrit-todo-efrit--error-result-p "\n[Error: bad]"))
  (should-not (efrit-todo-efrit--error-result-p "42"))
  (should-not (efrit-todo-efrit--error-result-p nil)))

(ert-deftest efrit-todo-efrit-mode-test-todo-write-errors-name-the-field ()
  "A bad todo_write comes back to the model as an error naming the field."
  (let ((efrit-todo-current-session (format "mode-%s" (random)))
        (input (make-hash-table :test 'equal)))
    (puthash "todos" (vector '(("content" . "x") ("status" . "done"))) input)
    (let ((text (efrit-todo-efrit--todo-write input)))
      (should (string-prefix-p "Error in todo_write: todos[0].status" text)))
    (should (null (efrit-todo-list)))))

(ert-deftest efrit-todo-efrit-mode-test-session-complete-is-guarded ()
  "A session_complete is refused once with open items, then allowed.
The model gets a short confirmation; the report is kept for the user."
  (let ((efrit-todo-current-session (format "mode-%s" (random)))
        (input (make-hash-table :test 'equal)))
    (efrit-todo-write "{\"todos\": [{\"content\": \"Fix it\", \"status\": \"in_progress\"}]}")
    (efrit-todo-after-tool "eval_sexp" "(fix)" "42" nil)
    (puthash "message" "done" input)
    (let ((first (efrit-todo-efrit--session-complete input))
          (second (efrit-todo-efrit--session-complete input)))
      (should (string-prefix-p "Error" first))
      (should (string-match-p "Fix it" first))
      (should (string-match-p "\\`\n\\[SESSION-COMPLETE: Session complete: todo list 0/1 done" second))
      (should (string-match-p "full report of 1 tool call (0 errors)" second))
      (should-not (string-match-p "42" second))
      (let ((report (gethash efrit-todo-current-session efrit-todo-efrit--final-reports)))
        (should (string-prefix-p "[Session report" report))
        (should (string-match-p "42" report))
        (should (string-match-p "done\\'" report))))))

(defmacro efrit-todo-efrit-mode-test--with-efrit-settings (settings &rest body)
  "Run BODY with Efrit's breaker SETTINGS, ((VARIABLE STANDARD VALUE) ...).
Each VARIABLE is made a customizable variable with the STANDARD value,
as Efrit's file would, and set to VALUE; afterwards it is gone again."
  (declare (indent 1) (debug t))
  `(let ((settings ,settings))
     (unwind-protect
         (progn
           (pcase-dolist (`(,variable ,standard ,value) settings)
             (put variable 'standard-value (list standard))
             (set-default variable value))
           (efrit-todo-efrit-mode 1)
           ,@body)
       (efrit-todo-efrit-mode -1)
       (pcase-dolist (`(,variable . ,_) settings)
         (put variable 'standard-value nil)
         (makunbound variable)))))

(defun efrit-todo-efrit-mode-test--limit (option)
  "Return the value of loop OPTION the module gets."
  (plist-get (efrit-todo--loop-options) (car (rassq option efrit-todo--loop-option-keys))))

(ert-deftest efrit-todo-efrit-mode-test-efrit-breaker-settings-are-followed ()
  "Efrit's breaker settings, when the user set them, set the module's limits.
Our own option, when the user set it, wins; Efrit's defaults change nothing."
  (efrit-todo-efrit-mode-test--with-efrit-settings
      '((efrit-do-max-identical-tool-calls 3 5)
        (efrit-do-max-same-tool-calls 15 15)
        (efrit-do-max-tool-calls-per-session 30 40)
        (efrit-do-error-loop-auto-complete 5 nil))
    (should (= (efrit-todo-efrit-mode-test--limit 'efrit-todo-breaker-identical) 5))
    (should (= (efrit-todo-efrit-mode-test--limit 'efrit-todo-breaker-same-tool) 15))
    (should (= (efrit-todo-efrit-mode-test--limit 'efrit-todo-breaker-without-progress) 40))
    (should (= (efrit-todo-efrit-mode-test--limit 'efrit-todo-breaker-error-trip) 0))
    ;; The module refuses by Efrit's limit: five identical calls run.
    (let ((efrit-todo-current-session (format "mode-%s" (random))))
      (unwind-protect
          (progn
            (dotimes (_ 5) (efrit-todo-after-tool "read_file" '(:path "a") "x" nil))
            (should (efrit-todo-before-tool "read_file" '(:path "a"))))
        (efrit-todo-reset)))
    ;; A setting the user changes later applies at once, by `setq' or
    ;; `let'; the adapter's own binding while a tool runs does not count.
    (setq efrit-do-max-identical-tool-calls 7)
    (should (= (efrit-todo-efrit-mode-test--limit 'efrit-todo-breaker-identical) 7))
    (let ((efrit-do-max-identical-tool-calls 6))
      (should (= (efrit-todo-efrit-mode-test--limit 'efrit-todo-breaker-identical) 6)))
    (should (= (efrit-todo-efrit-mode-test--limit 'efrit-todo-breaker-identical) 7))
    (let ((efrit-todo-efrit--binding-efrit t))
      (let ((efrit-do-max-identical-tool-calls most-positive-fixnum))
        (setq efrit-todo--loop-options nil)
        (should (= (efrit-todo-efrit-mode-test--limit 'efrit-todo-breaker-identical) 7))))
    ;; Our own option, set by the user, wins.
    (let ((efrit-todo-breaker-identical 2))
      (should (= (efrit-todo-efrit-mode-test--limit 'efrit-todo-breaker-identical) 2))))
  ;; Efrit's breaker switched off turns the count rules off.
  (efrit-todo-efrit-mode-test--with-efrit-settings
      '((efrit-do-circuit-breaker-enabled t nil))
    (should (= (efrit-todo-efrit-mode-test--limit 'efrit-todo-breaker-identical) 0))
    (should (= (efrit-todo-efrit-mode-test--limit 'efrit-todo-breaker-same-tool) 0))
    (should (= (efrit-todo-efrit-mode-test--limit 'efrit-todo-breaker-hard-cap) 100)))
  ;; Without the mode, Efrit's settings are Efrit's business.
  (should (= (efrit-todo-efrit-mode-test--limit 'efrit-todo-breaker-identical) 3)))

(ert-deftest efrit-todo-efrit-mode-test-efrit-variables-follow-the-list ()
  "With the mode on, Efrit's todo variables are efrit-todo's, loaded efrit-do.el or not."
  (let ((efrit-todo-current-session (format "mode-%s" (random))))
    (unwind-protect
        (progn
          (efrit-todo-efrit-mode 1)
          (should (eq (indirect-variable 'efrit-do--current-todos) 'efrit-todo--current-todos))
          (should (eq (indirect-variable 'efrit-do--todo-counter) 'efrit-todo--counter))
          (efrit-todo-write "{\"todos\": [{\"content\": \"One\", \"status\": \"pending\"}]}")
          (should (equal (mapcar #'efrit-todo-item-content (symbol-value 'efrit-do--current-todos))
                         '("One"))))
      (efrit-todo-reset)
      (efrit-todo-efrit-mode -1))))

(ert-deftest efrit-todo-efrit-mode-test-efrit-own-file-first-is-replaced ()
  "With another efrit-todo.el loaded first, the adapter loads efrit-todo's over it.
Its list, set through Efrit's variable, goes on in the module."
  (skip-unless invocation-name)
  (let* ((dir (make-temp-file "efrit-todo-other-" t))
         (other (expand-file-name "efrit-todo.el" dir)))
    (unwind-protect
        (progn
          (with-temp-file other
            (insert ";;; efrit-todo.el --- Another file of this name  -*- lexical-binding: t; -*-\n"
                    "(defvar efrit-todo--current-todos nil)\n"
                    "(defun efrit-todo-add (content &optional _priority) (push (vector \"todo-1\" content 'todo 'medium nil nil) efrit-todo--current-todos))\n"
                    "(provide 'efrit-todo)\n"))
          (with-temp-buffer
            (call-process (expand-file-name invocation-name invocation-directory) nil t nil
                          ;; The other directory first, as a load-path in the wrong order.
                          "-Q" "--batch" "-L" dir
                          "-L" (file-name-directory (locate-library "efrit-todo-efrit"))
                          "-l" "efrit-todo" "--eval" "(efrit-todo-add \"Left by the other file\")"
                          "-l" "efrit-todo-efrit" "--eval" "(efrit-todo-efrit-mode 1)"
                          "--eval" "(princ (format \"mode %s, %s, %S\" efrit-todo-efrit-mode (file-name-nondirectory (symbol-file 'efrit-todo-add)) (mapcar (lambda (item) (plist-get item :content)) (efrit-todo-list))))")
            (should (string-match-p "mode t, efrit-todo-compat.elc?, (\"Left by the other file\")"
                                    (buffer-string)))))
      (delete-directory dir t))))

(ert-deftest efrit-todo-efrit-mode-test-a-feature-not-replaced-is-explained ()
  "When efrit-todo's file cannot replace another one, the mode says what to fix."
  (cl-letf (((symbol-function 'efrit-todo-shadow-ensure) #'ignore))
    (let ((err (should-error (efrit-todo-efrit-mode 1) :type 'user-error)))
      (should (string-match-p "before Efrit.s in .load-path. and restart Emacs" (cadr err))))
    (should-not efrit-todo-efrit-mode)))

(ert-deftest efrit-todo-efrit-mode-test-context-for-the-next-command-is-brief ()
  "The outcome kept for the next command's prompt names ten open items at most.
The stop reason is the pause the model gave, never a line of a tool's output."
  (let ((efrit-todo-current-session (format "mode-%s" (random))))
    (unwind-protect
        (progn
          (efrit-todo-write
           (list :todos (vconcat (mapcar (lambda (n) (list :content (format "Step %d" n)
                                                           :status (if (= n 1) "in_progress" "pending")))
                                         (number-sequence 1 12)))))
          (efrit-todo-after-tool "eval_sexp" "(x)" "Paused by the model: not really" nil)
          (should-not (efrit-todo-pause-reason))
          (efrit-todo-pause "The user must choose a name.")
          (should (equal (efrit-todo-pause-reason) "The user must choose a name."))
          (should (equal (efrit-todo-efrit--stop-reason efrit-todo-current-session "end_turn" nil)
                         "paused by the model: The user must choose a name."))
          (let ((text (efrit-todo-efrit--context-text efrit-todo-current-session "end_turn")))
            (should (string-match-p "Todo list: 0/12 done\\. Left open: t1 \\[in_progress\\] Step 1; t2 \\[pending\\] Step 2; " text))
            (should (string-match-p "t10 \\[pending\\] Step 10; and 2 more\\.\\'" text))
            (should-not (string-match-p "t11" text))))
      (efrit-todo-reset))))

(ert-deftest efrit-todo-efrit-mode-test-unique-session-ids ()
  "A session id already in use gets a suffix, and becomes current."
  (let* ((efrit-todo-current-session nil)
         (id (format "efrit-do-%s" (random)))
         (create (lambda (id _command) (list :id id))))
    (efrit-todo-write "{\"todos\": []}" id)
    (should (equal (efrit-todo-efrit--create-session create id "c") (list :id (concat id "-2"))))
    (should (equal efrit-todo-current-session (concat id "-2")))
    (efrit-todo-write "{\"todos\": []}" (concat id "-2"))
    (should (equal (efrit-todo-efrit--create-session create id "c") (list :id (concat id "-3"))))))

(provide 'efrit-todo-efrit-mode-test)
;;; efrit-todo-efrit-mode-test.el ends here
