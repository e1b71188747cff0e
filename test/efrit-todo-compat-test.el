;;; efrit-todo-compat-test.el --- ERT tests of efrit-todo's Efrit-compatible API -*- lexical-binding: t; -*-

;;; Commentary:

;; efrit-todo stands in for Efrit's own efrit-todo.el, so it must keep
;; every name Efrit uses from that file: the `efrit-todo-item' vector
;; struct and its `efrit-do-todo-item-*' aliases, the variables
;; `efrit-todo--current-todos' and `efrit-todo--counter', and the
;; functions `efrit-todo-add', `-update-status', `-find', `-get-all',
;; `-set-all', `-clear', `-count', `-set-counter', `-format-for-display',
;; `-format-for-prompt', `-format-list' and `efrit-todo--generate-id'.
;; These tests check the behaviours Efrit's code relies on, against the
;; real module, each in a fresh session.
;;
;; Run them with `make ert'; this file needs test/ on the `load-path'
;; for its helpers from efrit-todo-test-helpers.el.

;;; Code:

(require 'ert)
(require 'cl-lib)
(require 'seq)
(require 'subr-x)
(require 'efrit-todo)
(require 'efrit-todo-test-helpers)

(declare-function efrit-todo--module-structs "efrit-todo-module" (session old))
(declare-function efrit-todo--module-id-counter "efrit-todo-module" (session))

;;;; Helpers

(defun efrit-todo-compat-test-ids (todos)
  "Return the ids of TODOS, a list of `efrit-todo-item' vectors."
  (mapcar #'efrit-todo-item-id todos))

(defun efrit-todo-compat-test-statuses (todos)
  "Return the status symbols of TODOS."
  (mapcar #'efrit-todo-item-status todos))

(defun efrit-todo-compat-test-contents (todos)
  "Return the contents of TODOS."
  (mapcar #'efrit-todo-item-content todos))

(defun efrit-todo-compat-test-id-number (id)
  "Return the number in ID, a string \"tN\"."
  (should (string-match "\\`t\\([0-9]+\\)\\'" id))
  (string-to-number (match-string 1 id)))

(defun efrit-todo-compat-test-time-p (time)
  "Return non-nil when TIME is a Lisp time value."
  (and time (numberp (ignore-errors (float-time time)))))

;;;; The struct

(ert-deftest efrit-todo-compat-test-struct-shape ()
  "`efrit-todo-item' is Efrit's 6-slot vector struct with setf-able accessors."
  (let ((item (efrit-todo-item-create :id "t1" :content "Do it" :status 'todo
                                      :priority 'high :created-at '(1 2 3 4)
                                      :completed-at nil)))
    (should (vectorp item))
    (should (= (length item) 6))
    (should (equal item ["t1" "Do it" todo high (1 2 3 4) nil]))
    (should (equal (efrit-todo-item-id item) "t1"))
    (should (equal (efrit-todo-item-content item) "Do it"))
    (should (eq (efrit-todo-item-status item) 'todo))
    (should (eq (efrit-todo-item-priority item) 'high))
    (should (equal (efrit-todo-item-created-at item) '(1 2 3 4)))
    (should (null (efrit-todo-item-completed-at item)))
    (setf (efrit-todo-item-status item) 'completed)
    (setf (efrit-todo-item-completed-at item) '(5 6 7 8))
    (setf (efrit-todo-item-content item) "Done it")
    (should (equal item ["t1" "Done it" completed high (1 2 3 4) (5 6 7 8)]))))

(ert-deftest efrit-todo-compat-test-efrit-do-aliases ()
  "The `efrit-do-todo-item-*' aliases Efrit's older code calls still work."
  (let ((item (efrit-do-todo-item-create :id "t9" :content "Old code" :status 'in-progress
                                         :priority 'low :created-at 1.0 :completed-at 2.0)))
    (should (equal item ["t9" "Old code" in-progress low 1.0 2.0]))
    (should (equal (efrit-do-todo-item-id item) "t9"))
    (should (equal (efrit-do-todo-item-content item) "Old code"))
    (should (eq (efrit-do-todo-item-status item) 'in-progress))
    (should (eq (efrit-do-todo-item-priority item) 'low))
    (should (equal (efrit-do-todo-item-created-at item) 1.0))
    (should (equal (efrit-do-todo-item-completed-at item) 2.0))
    (setf (efrit-do-todo-item-status item) 'completed)
    (should (eq (efrit-todo-item-status item) 'completed))))

(ert-deftest efrit-todo-compat-test-variables-are-plain ()
  "The variables Efrit aliases and sets are ordinary special variables."
  (should (special-variable-p 'efrit-todo--current-todos))
  (should (special-variable-p 'efrit-todo--counter))
  (should (boundp 'efrit-todo--current-todos))
  (should (listp efrit-todo--current-todos))
  (should (integerp efrit-todo--counter))
  (dolist (function '(efrit-todo--generate-id efrit-todo-add efrit-todo-update-status
                      efrit-todo-find efrit-todo-get-all efrit-todo-set-all
                      efrit-todo-clear efrit-todo-count efrit-todo-set-counter
                      efrit-todo-format-for-display efrit-todo-format-for-prompt
                      efrit-todo-format-list))
    (should (fboundp function))))

;;;; Adding and finding

(ert-deftest efrit-todo-compat-test-add-then-find ()
  "`efrit-todo-add' returns the new item; `efrit-todo-find' finds it."
  (efrit-todo-test-with-session
    (let ((item (efrit-todo-add "Write the parser")))
      (should (vectorp item))
      (should (= (length item) 6))
      (should (string-match-p "\\`t[0-9]+\\'" (efrit-todo-item-id item)))
      (should (equal (efrit-todo-item-content item) "Write the parser"))
      (should (eq (efrit-todo-item-status item) 'todo))
      (should (eq (efrit-todo-item-priority item) 'medium))
      (should (efrit-todo-compat-test-time-p (efrit-todo-item-created-at item)))
      (should (null (efrit-todo-item-completed-at item)))
      (let ((found (efrit-todo-find (efrit-todo-item-id item))))
        (should found)
        (should (equal (efrit-todo-item-id found) (efrit-todo-item-id item)))
        (should (equal (efrit-todo-item-content found) "Write the parser"))
        (should (eq (efrit-todo-item-status found) 'todo))
        (should (eq (efrit-todo-item-priority found) 'medium)))
      (should (null (efrit-todo-find "t999")))
      ;; The module holds it: the public API sees it as pending.
      (should (equal (efrit-todo-test-contents) '("Write the parser")))
      (should (equal (efrit-todo-test-statuses) '(pending)))
      (should (equal (efrit-todo-test-ids) (list (efrit-todo-item-id item)))))))

(ert-deftest efrit-todo-compat-test-add-priorities-and-order ()
  "Priorities are kept; items come back in the order they were added."
  (efrit-todo-test-with-session
    (let ((high (efrit-todo-add "First" 'high))
          (low (efrit-todo-add "Second" 'low))
          (medium (efrit-todo-add "Third" 'medium)))
      (should (eq (efrit-todo-item-priority high) 'high))
      (should (eq (efrit-todo-item-priority low) 'low))
      (should (eq (efrit-todo-item-priority medium) 'medium))
      (should (equal (efrit-todo-compat-test-contents (efrit-todo-get-all))
                     '("First" "Second" "Third")))
      (should (equal (mapcar #'efrit-todo-item-priority (efrit-todo-get-all))
                     '(high low medium)))
      (should (equal (efrit-todo-compat-test-ids (efrit-todo-get-all))
                     (efrit-todo-test-ids)))
      ;; Ids are distinct and increasing.
      (let ((numbers (mapcar #'efrit-todo-compat-test-id-number
                             (efrit-todo-compat-test-ids (list high low medium)))))
        (should (equal numbers (sort (copy-sequence numbers) #'<)))
        (should (= (length (delete-dups (copy-sequence numbers))) 3)))
      (should (= (efrit-todo-count) 3))
      (should (= efrit-todo--counter 3)))))

(ert-deftest efrit-todo-compat-test-add-rejects-bad-arguments ()
  "Bad content or priority signals an error and adds nothing."
  (efrit-todo-test-with-session
    (efrit-todo-add "Keep me")
    (let ((before (efrit-todo-list)))
      (efrit-todo-test-recording-changes calls
        (dolist (content (list nil "" "   " 42 'a-symbol "a\0b"
                               (make-string (1+ efrit-todo-max-content-length) ?x)))
          (ert-info ((format "%S" content) :prefix "Content: ")
            (should-error (efrit-todo-add content))))
        (dolist (priority '(urgent "high" 1))
          (ert-info ((format "%S" priority) :prefix "Priority: ")
            (should-error (efrit-todo-add "Valid content" priority))))
        (should (null calls)))
      (should (equal (efrit-todo-list) before))
      (should (= (efrit-todo-count) 1))
      (should (equal (efrit-todo-compat-test-contents (efrit-todo-get-all)) '("Keep me"))))))

(ert-deftest efrit-todo-compat-test-add-respects-item-limit ()
  "`efrit-todo-add' cannot grow a list beyond `efrit-todo-max-items'."
  (efrit-todo-test-with-session
    (let ((efrit-todo-max-items 2))
      (efrit-todo-add "one")
      (efrit-todo-add "two")
      (should-error (efrit-todo-add "three") :type 'efrit-todo-invalid-input)
      (should (= (efrit-todo-count) 2)))))

;;;; Status updates

(ert-deftest efrit-todo-compat-test-update-status ()
  "`efrit-todo-update-status' changes the item; `efrit-todo-get-all' shows it."
  (efrit-todo-test-with-session
    (let* ((first (efrit-todo-add "First"))
           (second (efrit-todo-add "Second"))
           (id (efrit-todo-item-id first)))
      (let ((updated (efrit-todo-update-status id 'in-progress)))
        (should (vectorp updated))
        (should (equal (efrit-todo-item-id updated) id))
        (should (eq (efrit-todo-item-status updated) 'in-progress)))
      (should (equal (efrit-todo-compat-test-statuses (efrit-todo-get-all))
                     '(in-progress todo)))
      (should (eq (efrit-todo-item-status (efrit-todo-find id)) 'in-progress))
      (should (equal (plist-get (efrit-todo-current) :id) id))
      (let ((done (efrit-todo-update-status id 'completed)))
        (should (eq (efrit-todo-item-status done) 'completed))
        (should (efrit-todo-compat-test-time-p (efrit-todo-item-completed-at done))))
      (should (equal (efrit-todo-compat-test-statuses (efrit-todo-get-all))
                     '(completed todo)))
      (should (equal (efrit-todo-test-statuses) '(completed pending)))
      (should (null (efrit-todo-current)))
      ;; Back to todo
      (should (eq (efrit-todo-item-status
                   (efrit-todo-update-status (efrit-todo-item-id second) 'todo))
                  'todo))
      (should (eq (efrit-todo-item-status
                   (efrit-todo-update-status id 'todo))
                  'todo))
      (should (null (efrit-todo-item-completed-at (efrit-todo-find id))))
      (should (equal (efrit-todo-test-statuses) '(pending pending))))))

(ert-deftest efrit-todo-compat-test-update-status-unknown-id-and-bad-status ()
  "An unknown id gives nil; a status Efrit does not know is an error."
  (efrit-todo-test-with-session
    (let ((item (efrit-todo-add "Only one")))
      (efrit-todo-test-recording-changes calls
        (should (null (efrit-todo-update-status "t999" 'completed)))
        (should-error (efrit-todo-update-status (efrit-todo-item-id item) 'done))
        (should-error (efrit-todo-update-status (efrit-todo-item-id item) "completed!"))
        (should-error (efrit-todo-update-status "" 'completed))
        (should-error (efrit-todo-update-status nil 'completed))
        (should (null calls)))
      (should (equal (efrit-todo-compat-test-statuses (efrit-todo-get-all)) '(todo))))))

;;;; Whole-list operations

(ert-deftest efrit-todo-compat-test-set-all-replaces ()
  "`efrit-todo-set-all' replaces the list, keeping ids, statuses and priorities."
  (efrit-todo-test-with-session
    (efrit-todo-add "Going away")
    (efrit-todo-set-all
     (list (efrit-todo-item-create :id "t7" :content "Seven" :status 'completed
                                   :priority 'high :created-at (current-time)
                                   :completed-at (current-time))
           (efrit-todo-item-create :id "t8" :content "Eight" :status 'in-progress
                                   :priority 'low :created-at (current-time))
           (efrit-todo-item-create :id "t9" :content "Nine" :status 'todo
                                   :priority 'medium :created-at (current-time))
           (efrit-todo-item-create :id "todo-1" :content "Old style id" :status 'todo
                                   :priority 'medium :created-at (current-time))))
    (let ((all (efrit-todo-get-all)))
      (should (equal (efrit-todo-compat-test-ids all) '("t7" "t8" "t9" "todo-1")))
      (should (equal (efrit-todo-compat-test-contents all)
                     '("Seven" "Eight" "Nine" "Old style id")))
      (should (equal (efrit-todo-compat-test-statuses all)
                     '(completed in-progress todo todo)))
      (should (equal (mapcar #'efrit-todo-item-priority all) '(high low medium medium)))
      (should (efrit-todo-compat-test-time-p (efrit-todo-item-completed-at (car all)))))
    (should (equal (efrit-todo-test-statuses) '(completed in-progress pending pending)))
    (should (equal (plist-get (efrit-todo-current) :id) "t8"))
    (should (= (efrit-todo-count) 4))
    ;; An id adopted from outside is never issued again.
    (let ((next (efrit-todo-add "Ten")))
      (should (> (efrit-todo-compat-test-id-number (efrit-todo-item-id next)) 9)))
    ;; An item without id gets a fresh one.
    (efrit-todo-set-all (list (efrit-todo-item-create :content "No id yet" :status 'todo
                                                      :priority 'low)))
    (let ((item (car (efrit-todo-get-all))))
      (should (string-match-p "\\`t[0-9]+\\'" (efrit-todo-item-id item)))
      (should (> (efrit-todo-compat-test-id-number (efrit-todo-item-id item)) 10)))
    (efrit-todo-set-all nil)
    (should (null (efrit-todo-get-all)))
    (should (null (efrit-todo-list)))))

(ert-deftest efrit-todo-compat-test-set-all-rejects-bad-items ()
  "Bad items in `efrit-todo-set-all' signal and leave the list alone."
  (efrit-todo-test-with-session
    (efrit-todo-add "Keep me")
    (let ((before (efrit-todo-list)))
      (should-error (efrit-todo-set-all
                     (list (efrit-todo-item-create :id "t5" :content "" :status 'todo))))
      (should-error (efrit-todo-set-all
                     (list (efrit-todo-item-create :id "t5" :content "x" :status 'done))))
      (should (equal (efrit-todo-list) before))
      (should (equal (efrit-todo-compat-test-contents (efrit-todo-get-all)) '("Keep me"))))))

(ert-deftest efrit-todo-compat-test-clear ()
  "`efrit-todo-clear' empties the list; ids are still not reissued."
  (efrit-todo-test-with-session
    (let ((ids (mapcar (lambda (content) (efrit-todo-item-id (efrit-todo-add content)))
                       '("a" "b" "c"))))
      (efrit-todo-clear)
      (should (null (efrit-todo-get-all)))
      (should (null efrit-todo--current-todos))
      (should (= (efrit-todo-count) 0))
      (should (null (efrit-todo-list)))
      (should (equal (efrit-todo-format-for-display) "No current TODOs"))
      (should (equal (efrit-todo-format-for-prompt) ""))
      (let ((next (efrit-todo-item-id (efrit-todo-add "d"))))
        (should-not (member next ids))
        (should (> (efrit-todo-compat-test-id-number next)
                   (apply #'max (mapcar #'efrit-todo-compat-test-id-number ids))))))))

(ert-deftest efrit-todo-compat-test-count ()
  "`efrit-todo-count' is the number of items in the current session."
  (efrit-todo-test-with-session
    (should (= (efrit-todo-count) 0))
    (efrit-todo-add "a")
    (should (= (efrit-todo-count) 1))
    (efrit-todo-test-write (efrit-todo-test-item "x" "pending")
                           (efrit-todo-test-item "y" "pending")
                           (efrit-todo-test-item "z" "completed"))
    (should (= (efrit-todo-count) 3))
    (should (= (efrit-todo-count) (length (efrit-todo-get-all))))))

;;;; Ids and the counter

(ert-deftest efrit-todo-compat-test-generate-id-and-counter ()
  "`efrit-todo--generate-id' issues fresh ids; the counter tracks them."
  (efrit-todo-test-with-session
    (let ((one (efrit-todo--generate-id))
          (two (efrit-todo--generate-id)))
      (should (stringp one))
      (should (equal one "t1"))
      (should (equal two "t2"))
      (should (= efrit-todo--counter 2))
      ;; Reserved ids are not handed to new items.
      (let ((added (efrit-todo-item-id (efrit-todo-add "After reserving"))))
        (should (equal added "t3"))
        (should (= efrit-todo--counter 3)))
      ;; Nor to items todo_write creates.
      (efrit-todo-test-write (efrit-todo-test-item "After reserving" "pending" "id" "t3")
                             (efrit-todo-test-item "Written" "pending"))
      (should (equal (efrit-todo-test-ids) '("t3" "t4")))
      (should (= efrit-todo--counter 4)))))

(ert-deftest efrit-todo-compat-test-set-counter ()
  "`efrit-todo-set-counter' raises the counter; it never lowers it."
  (efrit-todo-test-with-session
    (efrit-todo-set-counter 10)
    (should (= efrit-todo--counter 10))
    (should (equal (efrit-todo--generate-id) "t11"))
    (should (= efrit-todo--counter 11))
    (efrit-todo-set-counter 0)
    (let ((next (efrit-todo--generate-id)))
      (should (> (efrit-todo-compat-test-id-number next) 11)))
    (should (equal (efrit-todo-item-id (efrit-todo-add "x")) "t13"))))

;;;; Formatting

(ert-deftest efrit-todo-compat-test-format-for-display ()
  "Display text says there is nothing, or shows every item with its id."
  (efrit-todo-test-with-session
    (should (equal (efrit-todo-format-for-display) "No current TODOs"))
    (let ((a (efrit-todo-add "Write the parser" 'high))
          (b (efrit-todo-add "Test the parser")))
      (efrit-todo-update-status (efrit-todo-item-id a) 'in-progress)
      (let ((text (efrit-todo-format-for-display)))
        (should (stringp text))
        (should (string-match-p "Write the parser" text))
        (should (string-match-p "Test the parser" text))
        (should (string-match-p (regexp-quote (efrit-todo-item-id a)) text))
        (should (string-match-p (regexp-quote (efrit-todo-item-id b)) text))
        (should (< (string-match "Write the parser" text)
                   (string-match "Test the parser" text)))))))

(ert-deftest efrit-todo-compat-test-format-for-prompt ()
  "Prompt text is empty without items and shows the items with ids otherwise."
  (efrit-todo-test-with-session
    (should (equal (efrit-todo-format-for-prompt) ""))
    (let ((item (efrit-todo-add "Refactor the loop")))
      (let ((text (efrit-todo-format-for-prompt)))
        (should (stringp text))
        (should (string-match-p "Refactor the loop" text))
        (should (string-match-p (regexp-quote (efrit-todo-item-id item)) text))))))

(ert-deftest efrit-todo-compat-test-format-for-prompt-never-signals ()
  "Efrit calls `efrit-todo-format-for-prompt' for every request: no errors."
  (efrit-todo-test-with-session
    (efrit-todo-add "Real item")
    (dolist (garbage (list 'foo 42 "a string" [1 2 3] (list 1 2 3)
                           (list (vector 1 2)) (list (make-vector 6 nil))
                           (list (efrit-todo-item-create :id 5 :content 'x
                                                         :status 'weird :priority "high"))
                           (cons 1 2)))
      (ert-info ((format "%S" garbage) :prefix "efrit-todo--current-todos: ")
        (let ((efrit-todo--current-todos garbage))
          (should (stringp (efrit-todo-format-for-prompt))))))
    (dolist (session (list "" "a\0b" 42 'a-symbol))
      (ert-info ((format "%S" session) :prefix "efrit-todo-current-session: ")
        (let ((efrit-todo-current-session session)
              (inhibit-message t))
          (should (stringp (efrit-todo-format-for-prompt))))))))

(ert-deftest efrit-todo-compat-test-format-list ()
  "`efrit-todo-format-list' sorts by status or priority, else keeps order."
  (let* ((done (efrit-todo-item-create :id "t1" :content "Alpha done" :status 'completed
                                       :priority 'low))
         (waiting (efrit-todo-item-create :id "t2" :content "Bravo waiting" :status 'todo
                                          :priority 'high))
         (running (efrit-todo-item-create :id "t3" :content "Charlie running"
                                          :status 'in-progress :priority 'medium))
         (todos (list done waiting running))
         (copy (copy-sequence todos)))
    (cl-flet ((order (text)
                (mapcar #'car
                        (sort (mapcar (lambda (word) (cons word (string-match word text)))
                                      '("Alpha" "Bravo" "Charlie"))
                              (lambda (a b) (< (cdr a) (cdr b)))))))
      (let ((plain (efrit-todo-format-list todos)))
        (should (stringp plain))
        (should (cl-every (lambda (id) (string-match-p id plain)) '("t1" "t2" "t3")))
        (should (equal (order plain) '("Alpha" "Bravo" "Charlie"))))
      (should (equal (order (efrit-todo-format-list todos 'status))
                     '("Charlie" "Bravo" "Alpha")))
      (should (equal (order (efrit-todo-format-list todos 'priority))
                     '("Bravo" "Charlie" "Alpha"))))
    ;; Sorting does not touch the caller's list.
    (should (equal todos copy))
    (should (eq (car todos) done))))

;;;; The variable mirrors the module

(ert-deftest efrit-todo-compat-test-variable-mirrors-todo-write ()
  "After `efrit-todo-write' the variable holds the list as item vectors."
  (efrit-todo-test-with-session
    (efrit-todo-test-write (efrit-todo-test-item "Plan" "completed")
                           (efrit-todo-test-item "Build" "in_progress")
                           (efrit-todo-test-item "Test" "pending")
                           (efrit-todo-test-item "Gold-plate" "cancelled"))
    (let ((todos efrit-todo--current-todos))
      (should (= (length todos) 4))
      (should (cl-every (lambda (item) (and (vectorp item) (= (length item) 6))) todos))
      (should (equal (efrit-todo-compat-test-ids todos) '("t1" "t2" "t3" "t4")))
      (should (equal (efrit-todo-compat-test-contents todos)
                     '("Plan" "Build" "Test" "Gold-plate")))
      (should (equal (efrit-todo-compat-test-statuses todos)
                     '(completed in-progress todo cancelled)))
      (should (efrit-todo-compat-test-time-p (efrit-todo-item-completed-at (car todos))))
      (should (efrit-todo-compat-test-time-p (efrit-todo-item-created-at (nth 2 todos))))
      (should (equal (efrit-todo-get-all) todos))
      (should (= efrit-todo--counter 4)))
    ;; The next write is mirrored too.
    (efrit-todo-test-write (efrit-todo-test-item "Plan" "completed" "id" "t1")
                           (efrit-todo-test-item "Build" "completed" "id" "t2")
                           (efrit-todo-test-item "Test" "in_progress" "id" "t3"))
    (should (equal (efrit-todo-compat-test-statuses efrit-todo--current-todos)
                   '(completed completed in-progress)))
    (should (equal (efrit-todo-item-status (efrit-todo-find "t3")) 'in-progress))))

(ert-deftest efrit-todo-compat-test-variable-matches-a-fresh-build ()
  "The variable always equals the list built afresh from the module.
So it does through random writes, edits, undos and session switches,
and a write that changes one item reuses the other structs."
  (random "efrit-todo-mirror")           ; A fixed seed: the same steps every run.
  (let ((sessions (list (format "test-%s" (cl-gensym)) (format "test-%s" (cl-gensym))))
        (statuses ["pending" "in_progress" "completed" "cancelled"]))
    (dotimes (step 300)
      (let ((efrit-todo-current-session (nth (if (= (% step 50) 49) 1 0) sessions)))
        (pcase (random 10)
          ((or 0 1 2 3 4 5)
           ;; Rewrite the list: keep ids, change one status, sometimes
           ;; reorder, drop or add an item.
           (let* ((items (mapcar (lambda (item)
                                   (efrit-todo-test-item
                                    (plist-get item :content)
                                    (pcase (plist-get item :status)
                                      ('in-progress "in_progress")
                                      (status (symbol-name status)))
                                    "id" (plist-get item :id)))
                                 (efrit-todo-list)))
                  (items (if (and items (= 0 (random 4))) (reverse items) items))
                  (items (if (and items (= 0 (random 5))) (cdr items) items)))
             (when items
               (puthash "status" (aref statuses (random 3)) (nth (random (length items)) items)))
             (when (or (null items) (= 0 (random 4)))
               (setq items (append items (list (efrit-todo-test-item
                                                (format "Step %d" step) "pending")))))
             (ignore-errors (apply #'efrit-todo-test-write items))))
          (6 (let ((item (seq-random-elt (or (efrit-todo-list) '(nil)))))
               (when item
                 (ignore-errors
                   (efrit-todo-user-set-status (plist-get item :id) (aref statuses (random 4)))))))
          (7 (efrit-todo-undo))
          (8 (when (= 0 (random 5)) (efrit-todo-reset)))
          (9 (efrit-todo-add (format "Added %d" step))))
        (should (equal efrit-todo--current-todos
                       (efrit-todo--module-structs efrit-todo-current-session nil)))
        (should (equal efrit-todo--counter
                       (efrit-todo--module-id-counter efrit-todo-current-session))))))
  ;; Only the struct of the item that changed is touched.
  (efrit-todo-test-with-session
    (efrit-todo-test-write (efrit-todo-test-item "A" "in_progress")
                           (efrit-todo-test-item "B" "pending")
                           (efrit-todo-test-item "C" "pending"))
    (let* ((before efrit-todo--current-todos)
           (structs (copy-sequence before))
           (content-b (efrit-todo-item-content (nth 1 before))))
      (efrit-todo-test-write (efrit-todo-test-item "A" "completed" "id" "t1")
                             (efrit-todo-test-item "B" "in_progress" "id" "t2")
                             (efrit-todo-test-item "C" "pending" "id" "t3"))
      (should (eq efrit-todo--current-todos before))
      (should (cl-every #'eq efrit-todo--current-todos structs))
      (should (eq (efrit-todo-item-content (nth 1 efrit-todo--current-todos)) content-b))
      (should (equal (efrit-todo-compat-test-statuses efrit-todo--current-todos)
                     '(completed in-progress todo))))))

(ert-deftest efrit-todo-compat-test-variable-after-a-write-of-the-same-length ()
  "A write that keeps the length but adds an item updates both variables.
The item left out is dropped and the new one takes a new id: the
structs show it, and `efrit-todo--counter' counts it."
  (efrit-todo-test-with-session
    (efrit-todo-test-write (efrit-todo-test-item "A" "completed")
                           (efrit-todo-test-item "B" "in_progress"))
    (should (= efrit-todo--counter 2))
    (efrit-todo-test-write (efrit-todo-test-item "B" "in_progress" "id" "t2")
                           (efrit-todo-test-item "C" "pending"))
    (should (equal (efrit-todo-compat-test-ids efrit-todo--current-todos) '("t2" "t3")))
    (should (equal (efrit-todo-compat-test-contents efrit-todo--current-todos) '("B" "C")))
    (should (= efrit-todo--counter 3))
    (should (equal efrit-todo--current-todos
                   (efrit-todo--module-structs efrit-todo-current-session nil)))))

(ert-deftest efrit-todo-compat-test-variable-untouched-by-failures-and-others ()
  "A failed write, or a write to another session, leaves the variable alone."
  (efrit-todo-test-with-session
    (efrit-todo-test-seed)
    (let ((before (copy-tree efrit-todo--current-todos t)))
      (should (= (length before) 3))
      (should-error (efrit-todo-test-write (efrit-todo-test-item "x" "done"))
                    :type 'efrit-todo-invalid-input)
      (should (equal efrit-todo--current-todos before))
      (efrit-todo-write (efrit-todo-test-input (efrit-todo-test-item "Elsewhere" "pending"))
                        (format "test-%s" (cl-gensym)))
      (should (equal efrit-todo--current-todos before))
      (should (equal (efrit-todo-get-all) before)))))

(ert-deftest efrit-todo-compat-test-variable-follows-reset ()
  "Resetting the current session empties the variable."
  (efrit-todo-test-with-session
    (efrit-todo-test-seed)
    (should efrit-todo--current-todos)
    (efrit-todo-reset)
    (should (null efrit-todo--current-todos))
    (should (null (efrit-todo-get-all)))))

(ert-deftest efrit-todo-compat-test-fresh-session-starts-empty ()
  "Items of another session never show through the compatibility API."
  (efrit-todo-test-with-session
    (efrit-todo-add "Belongs to the first session")
    (should (= (efrit-todo-count) 1)))
  (efrit-todo-test-with-session
    (should (null (efrit-todo-get-all)))
    (should (= (efrit-todo-count) 0))
    (should (null (efrit-todo-find "t1")))
    (should (equal (efrit-todo-format-for-display) "No current TODOs"))
    (should (equal (efrit-todo-format-for-prompt) ""))
    (efrit-todo-add "Belongs to the second session")
    (should (equal (efrit-todo-compat-test-contents (efrit-todo-get-all))
                   '("Belongs to the second session")))
    (should (equal (efrit-todo-compat-test-contents efrit-todo--current-todos)
                   '("Belongs to the second session")))))

(ert-deftest efrit-todo-compat-test-compat-and-todo-write-share-ids ()
  "Items added through the compatibility API can be referred to by todo_write."
  (efrit-todo-test-with-session
    (let ((id (efrit-todo-item-id (efrit-todo-add "Added the old way"))))
      (efrit-todo-test-write (efrit-todo-test-item "Added the old way" "completed" "id" id)
                             (efrit-todo-test-item "Written the new way" "in_progress"))
      (should (equal (efrit-todo-compat-test-ids (efrit-todo-get-all))
                     (list id (format "t%d" (1+ (efrit-todo-compat-test-id-number id))))))
      (should (equal (efrit-todo-compat-test-statuses (efrit-todo-get-all))
                     '(completed in-progress))))))

(ert-deftest efrit-todo-compat-test-changes-run-the-hook ()
  "Each compatibility change runs `efrit-todo-change-functions' once."
  (efrit-todo-test-with-session
    (let ((session efrit-todo-current-session))
      (efrit-todo-test-recording-changes calls
        (let ((item (efrit-todo-add "Hooked")))
          (should (equal calls (list (list session))))
          (efrit-todo-update-status (efrit-todo-item-id item) 'completed)
          (should (= (length calls) 2))
          (efrit-todo-set-all (list (efrit-todo-item-create :id "t40" :content "Replaced"
                                                            :status 'todo :priority 'low)))
          (should (= (length calls) 3))
          (efrit-todo-clear)
          (should (= (length calls) 4))
          (should (cl-every (lambda (args) (equal args (list session))) calls)))))))

;;;; What Efrit itself does with the variables

(ert-deftest efrit-todo-compat-test-defvaralias-from-efrit-do ()
  "Efrit's `defvaralias' of efrit-do--current-todos still sees the list."
  (defvaralias 'efrit-do--current-todos 'efrit-todo--current-todos)
  (defvaralias 'efrit-do--todo-counter 'efrit-todo--counter)
  (efrit-todo-test-with-session
    (let ((item (efrit-todo-add "Seen through the alias")))
      (should (equal (symbol-value 'efrit-do--current-todos) efrit-todo--current-todos))
      (should (member (efrit-todo-item-id item)
                      (mapcar #'efrit-do-todo-item-id (symbol-value 'efrit-do--current-todos))))
      (should (equal (symbol-value 'efrit-do--todo-counter) efrit-todo--counter)))
    (efrit-todo-test-write (efrit-todo-test-item "Seen through the alias" "completed" "id" "t1")
                           (efrit-todo-test-item "Written later" "in_progress"))
    (should (equal (mapcar #'efrit-do-todo-item-status (symbol-value 'efrit-do--current-todos))
                   '(completed in-progress)))
    (should (= (symbol-value 'efrit-do--todo-counter) 2))))

(ert-deftest efrit-todo-compat-test-setq-of-the-variable-is-adopted ()
  "Setting the variable as Efrit does (setq ... nil, or a list) reaches the module."
  (efrit-todo-test-with-session
    (efrit-todo-add "Old")
    (setq efrit-todo--current-todos
          (list (efrit-todo-item-create :id "t20" :content "Set by Efrit" :status 'in-progress
                                        :priority 'high :created-at (current-time))))
    (should (equal (efrit-todo-test-contents) '("Set by Efrit")))
    (should (equal (efrit-todo-test-ids) '("t20")))
    (should (equal (plist-get (efrit-todo-current) :id) "t20"))
    (should (> (efrit-todo-compat-test-id-number (efrit-todo-item-id (efrit-todo-add "New")))
               20))
    (setq efrit-todo--current-todos nil)
    (should (null (efrit-todo-list)))
    (should (= (efrit-todo-count) 0))))

(ert-deftest efrit-todo-compat-test-setq-of-tables-gives-structs-back ()
  "A list of tables set into the variable is adopted; readers then get structs."
  (efrit-todo-test-with-session
    (let ((table (make-hash-table :test 'equal)))
      (puthash "content" "Set as a table" table)
      (puthash "status" "in_progress" table)
      (setq efrit-todo--current-todos (list table))
      (let ((item (car (efrit-todo-get-all))))
        (should (equal (efrit-todo-item-content item) "Set as a table"))
        (should (eq (efrit-todo-item-status item) 'in-progress))
        (should (equal (efrit-todo-find (efrit-todo-item-id item)) item))
        (should (string-match-p "Set as a table" (efrit-todo-format-for-display)))))))

(provide 'efrit-todo-compat-test)
;;; efrit-todo-compat-test.el ends here
