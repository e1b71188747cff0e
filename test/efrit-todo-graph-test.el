;;; efrit-todo-graph-test.el --- ERT tests of the task graph and the Task tools -*- lexical-binding: t; -*-

;;; Commentary:

;; The task graph through the public Lisp API: dependencies
;; (blocked_by), readiness, owners and descriptions, deletion, the Task
;; tools (TaskCreate, TaskUpdate, TaskGet, TaskList) and the tool
;; styles.  The expected values come from the rules of the task graph
;; as shared/DESIGN.md and the issue state them: an item is ready when
;; it is pending, every blocker is finished or gone and no ancestor is
;; blocked; starting or completing a blocked item is an error naming
;; its blockers; a dependency on an unknown id, on itself, or closing a
;; cycle is an error naming it, and changes nothing; deleting strips the
;; id from every blocked_by and retires it; undo restores the edges;
;; ids are accepted as t3, 3 or #3; errors name the field.
;;
;; Every test runs in a fresh session.

;;; Code:

(require 'ert)
(require 'cl-lib)
(require 'seq)
(require 'subr-x)
(require 'efrit-todo)
(require 'efrit-todo-test-helpers)

;;;; Helpers

(defun efrit-todo-graph-test--create (subject &rest keys-and-values)
  "Run TaskCreate for SUBJECT with KEYS-AND-VALUES; return the result."
  (efrit-todo-task-create (apply #'efrit-todo-test-object "subject" subject keys-and-values)))

(defun efrit-todo-graph-test--update (id &rest keys-and-values)
  "Run TaskUpdate on item ID with KEYS-AND-VALUES; return the result."
  (efrit-todo-task-update (apply #'efrit-todo-test-object "taskId" id keys-and-values)))

(defun efrit-todo-graph-test--get (id)
  "Run TaskGet on item ID; return the text."
  (efrit-todo-task-get (efrit-todo-test-object "taskId" id)))

(defun efrit-todo-graph-test--item (id)
  "Return the plist of item ID in the current session, or nil."
  (seq-find (lambda (item) (equal (plist-get item :id) id)) (efrit-todo-list)))

(defun efrit-todo-graph-test--prop (id key)
  "Return KEY of item ID in the current session."
  (plist-get (efrit-todo-graph-test--item id) key))

(defmacro efrit-todo-graph-test--error (&rest body)
  "Run BODY, which must signal `efrit-todo-invalid-input'; return its message."
  (declare (indent 0) (debug t))
  `(cadr (should-error (progn ,@body) :type 'efrit-todo-invalid-input)))

(defmacro efrit-todo-graph-test--unchanged (&rest body)
  "Run BODY, which must signal `efrit-todo-invalid-input' and change nothing.
Return the error's message.  The list and its history are compared."
  (declare (indent 0) (debug t))
  (let ((items (make-symbol "items"))
        (history (make-symbol "history"))
        (message (make-symbol "message")))
    `(let* ((,items (efrit-todo-list))
            (,history (length (efrit-todo-history)))
            (,message (efrit-todo-graph-test--error ,@body)))
       (should (equal (efrit-todo-list) ,items))
       (should (= (length (efrit-todo-history)) ,history))
       ,message)))

(defun efrit-todo-graph-test--two ()
  "Create t1 \"Write the parser\" and t2 \"Test the parser\", blocked by t1."
  (efrit-todo-graph-test--create "Write the parser")
  (efrit-todo-graph-test--create "Test the parser" "blockedBy" ["t1"]))

(defun efrit-todo-graph-test--names (schemas)
  "Return the tool names of SCHEMAS, sorted."
  (sort (mapcar (lambda (schema) (cdr (assoc "name" schema))) schemas) #'string<))

;;;; Creating, readiness

(ert-deftest efrit-todo-graph-test-create-gives-ids-and-fields ()
  "TaskCreate makes pending items with fresh ids, description and blockers."
  (efrit-todo-test-with-session
    (let ((first (efrit-todo-graph-test--create "Write the parser"
                                                "description" "A recursive descent parser for the config."
                                                "activeForm" "Writing the parser")))
      (should (stringp first))
      (should (string-match-p "\\_<t1\\_>" first)))
    (efrit-todo-graph-test--create "Test the parser" "blockedBy" ["t1"])
    (should (equal (efrit-todo-test-ids) '("t1" "t2")))
    (should (equal (efrit-todo-test-statuses) '(pending pending)))
    (should (equal (efrit-todo-graph-test--prop "t1" :description)
                   "A recursive descent parser for the config."))
    (should (equal (efrit-todo-graph-test--prop "t1" :active-form) "Writing the parser"))
    (should (null (efrit-todo-graph-test--prop "t2" :description)))
    (should (null (efrit-todo-graph-test--prop "t1" :owner)))
    (should (equal (efrit-todo-graph-test--prop "t2" :blocked-by) '("t1")))
    (should (null (efrit-todo-graph-test--prop "t1" :blocked-by)))))

(ert-deftest efrit-todo-graph-test-ready-means-pending-and-unblocked ()
  "Ready: pending, every blocker completed, cancelled or gone, no blocked ancestor."
  (efrit-todo-test-with-session
    (efrit-todo-graph-test--two)
    (should (eq (efrit-todo-graph-test--prop "t1" :ready) t))
    (should (null (efrit-todo-graph-test--prop "t2" :ready)))
    ;; In progress is not ready: ready is for what can be started.
    (efrit-todo-graph-test--update "t1" "status" "in_progress")
    (should (null (efrit-todo-graph-test--prop "t1" :ready)))
    (should (null (efrit-todo-graph-test--prop "t2" :ready)))
    (should (equal (efrit-todo-graph-test--prop "t2" :blocked-by) '("t1")))
    (efrit-todo-graph-test--update "t1" "status" "completed")
    (should (eq (efrit-todo-graph-test--prop "t2" :ready) t))
    ;; A finished blocker no longer shows as a blocker.
    (should (null (efrit-todo-graph-test--prop "t2" :blocked-by)))
    (should (null (efrit-todo-graph-test--prop "t1" :ready)))))

(ert-deftest efrit-todo-graph-test-cancelled-blocker-stops-blocking ()
  "A cancelled blocker stops blocking; reopening it blocks again."
  (efrit-todo-test-with-session
    (efrit-todo-graph-test--two)
    (efrit-todo-graph-test--update "t1" "status" "cancelled")
    (should (eq (efrit-todo-graph-test--prop "t2" :ready) t))
    (should (null (efrit-todo-graph-test--prop "t2" :blocked-by)))
    (efrit-todo-graph-test--update "t1" "status" "pending")
    (should (null (efrit-todo-graph-test--prop "t2" :ready)))
    (should (equal (efrit-todo-graph-test--prop "t2" :blocked-by) '("t1")))))

(ert-deftest efrit-todo-graph-test-blocked-ancestor-makes-subtask-not-ready ()
  "A subtask of a blocked item is not ready, though it has no blocker itself."
  (efrit-todo-test-with-session
    (efrit-todo-graph-test--create "Get the keys")
    (efrit-todo-graph-test--create "Deploy" "blockedBy" ["t1"])
    (efrit-todo-graph-test--create "Copy the files" "parent" "t2")
    (should (equal (efrit-todo-graph-test--prop "t3" :parent) "t2"))
    (should (null (efrit-todo-graph-test--prop "t3" :blocked-by)))
    (should (null (efrit-todo-graph-test--prop "t3" :ready)))
    (efrit-todo-graph-test--update "t1" "status" "completed")
    (should (eq (efrit-todo-graph-test--prop "t3" :ready) t))))

(ert-deftest efrit-todo-graph-test-completing-says-what-became-ready ()
  "Completing a blocker says which items are ready now."
  (efrit-todo-test-with-session
    (dolist (subject '("One" "Two" "Three" "Four"))
      (efrit-todo-graph-test--create subject))
    (efrit-todo-graph-test--create "Five" "blockedBy" ["t4"])
    (efrit-todo-graph-test--update "t4" "status" "in_progress")
    (let ((text (efrit-todo-graph-test--update "t4" "status" "completed")))
      (should (string-match-p "t5 is ready now" text))
      (should (string-match-p "\\_<t4\\_>" text)))
    ;; Nothing waits for t1: completing it makes nothing ready.
    (should-not (string-match-p "ready now"
                                (efrit-todo-graph-test--update "t1" "status" "completed")))))

;;;; Blocked items cannot start or finish

(ert-deftest efrit-todo-graph-test-starting-a-blocked-item-is-an-error ()
  "Starting or completing a blocked item names its blockers; nothing changes."
  (efrit-todo-test-with-session
    (efrit-todo-graph-test--two)
    (dolist (status '("in_progress" "completed"))
      (let ((message (efrit-todo-graph-test--unchanged
                       (efrit-todo-graph-test--update "t2" "status" status))))
        (should (string-match-p "t2 is blocked by t1 (pending)" message))
        ;; It says how to go on.
        (should (string-match-p "removeBlockedBy" message))))
    (efrit-todo-graph-test--update "t1" "status" "in_progress")
    (should (string-match-p "t2 is blocked by t1 (in_progress)"
                            (efrit-todo-graph-test--unchanged
                              (efrit-todo-graph-test--update "t2" "status" "in_progress"))))
    ;; Through todo_write as well.
    (should (string-match-p
             "t2 is blocked by t1"
             (efrit-todo-graph-test--unchanged
               (efrit-todo-write
                (efrit-todo-test-object
                 "merge" t
                 "todos" (vector (efrit-todo-test-item "Test the parser" "in_progress"
                                                       "id" "t2")))))))))

(ert-deftest efrit-todo-graph-test-cancelling-a-blocked-item-is-allowed ()
  "A blocked item can be cancelled."
  (efrit-todo-test-with-session
    (efrit-todo-graph-test--two)
    (efrit-todo-graph-test--update "t2" "status" "cancelled")
    (should (eq (efrit-todo-graph-test--prop "t2" :status) 'cancelled))))

;;;; Dependency errors

(ert-deftest efrit-todo-graph-test-unknown-dependency-is-an-error ()
  "A dependency on an unknown id names the field and the id; nothing changes."
  (efrit-todo-test-with-session
    (efrit-todo-graph-test--two)
    (should (string-match-p
             "addBlockedBy\\[1\\]: unknown id t9"
             (efrit-todo-graph-test--unchanged
               (efrit-todo-graph-test--update "t2" "addBlockedBy" ["t1" "t9"]))))
    (should (string-match-p
             "blockedBy\\[0\\]: unknown id t9"
             (efrit-todo-graph-test--unchanged
               (efrit-todo-graph-test--create "Ship it" "blockedBy" ["t9"]))))
    (should (string-match-p
             "addBlocks\\[0\\]: unknown id t9"
             (efrit-todo-graph-test--unchanged
               (efrit-todo-graph-test--update "t1" "addBlocks" ["t9"]))))
    (should (string-match-p
             "todos\\[0\\]\\.blocked_by\\[0\\]: unknown id t9"
             (efrit-todo-graph-test--unchanged
               (efrit-todo-write
                (efrit-todo-test-object
                 "merge" t
                 "todos" (vector (efrit-todo-test-item "Test the parser" "pending"
                                                       "id" "t2" "blocked_by" ["t9"])))))))))

(ert-deftest efrit-todo-graph-test-self-dependency-is-an-error ()
  "An item cannot wait for itself; nothing changes."
  (efrit-todo-test-with-session
    (efrit-todo-graph-test--two)
    (let ((message (efrit-todo-graph-test--unchanged
                     (efrit-todo-graph-test--update "t1" "addBlockedBy" ["t1"]))))
      (should (string-match-p "addBlockedBy\\[0\\]" message))
      (should (string-match-p "\\_<t1\\_>" message)))
    (should (string-match-p
             "addBlocks\\[0\\]"
             (efrit-todo-graph-test--unchanged
               (efrit-todo-graph-test--update "t2" "addBlocks" ["t2"]))))))

(ert-deftest efrit-todo-graph-test-cycle-is-an-error ()
  "A dependency that closes a cycle names the cycle; nothing changes."
  (efrit-todo-test-with-session
    (efrit-todo-graph-test--two)
    (efrit-todo-graph-test--create "Release" "blockedBy" ["t2"])
    ;; t3 waits for t2, which waits for t1: t1 waiting for t3 closes a cycle.
    (let ((message (efrit-todo-graph-test--unchanged
                     (efrit-todo-graph-test--update "t1" "addBlockedBy" ["t3"]))))
      (should (string-match-p "addBlockedBy\\[0\\]" message))
      (should (string-match-p "cycle" message))
      (should (string-match-p "\\_<t3\\_>" message)))
    ;; The same edge from the other end.
    (should (string-match-p
             "cycle"
             (efrit-todo-graph-test--unchanged
               (efrit-todo-graph-test--update "t3" "addBlocks" ["t1"]))))
    (should (string-match-p
             "todos\\[0\\]\\.blocked_by\\[0\\]: .*cycle"
             (efrit-todo-graph-test--unchanged
               (efrit-todo-write
                (efrit-todo-test-object
                 "merge" t
                 "todos" (vector (efrit-todo-test-item "Write the parser" "pending"
                                                       "id" "t1" "blocked_by" ["t3"])))))))))

;;;; Removing dependencies

(ert-deftest efrit-todo-graph-test-remove-blocked-by-and-remove-blocks ()
  "The fields removeBlockedBy and removeBlocks take a dependency away."
  (efrit-todo-test-with-session
    (efrit-todo-graph-test--two)
    (efrit-todo-graph-test--update "t2" "removeBlockedBy" ["t1"])
    (should (null (efrit-todo-graph-test--prop "t2" :blocked-by)))
    (should (eq (efrit-todo-graph-test--prop "t2" :ready) t))
    (efrit-todo-graph-test--update "t1" "addBlocks" ["t2"])
    (should (equal (efrit-todo-graph-test--prop "t2" :blocked-by) '("t1")))
    (efrit-todo-graph-test--update "t1" "removeBlocks" ["t2"])
    (should (null (efrit-todo-graph-test--prop "t2" :blocked-by)))
    ;; Now t2 can start.
    (efrit-todo-graph-test--update "t2" "status" "in_progress")
    (should (eq (efrit-todo-graph-test--prop "t2" :status) 'in-progress))))

;;;; Deletion

(ert-deftest efrit-todo-graph-test-delete-strips-and-retires-the-id ()
  "Deleting removes the item and its id from every blocked_by; the id is not reused."
  (efrit-todo-test-with-session
    (efrit-todo-graph-test--two)
    (efrit-todo-graph-test--create "Document the parser" "blockedBy" ["t1" "t2"])
    (efrit-todo-graph-test--update "t1" "status" "deleted")
    (should (equal (efrit-todo-test-ids) '("t2" "t3")))
    (should (null (efrit-todo-graph-test--prop "t2" :blocked-by)))
    (should (eq (efrit-todo-graph-test--prop "t2" :ready) t))
    (should (equal (efrit-todo-graph-test--prop "t3" :blocked-by) '("t2")))
    (should (eq (plist-get (efrit-todo-test-last-change) :kind) 'delete))
    (should (plist-get (efrit-todo-test-last-change) :undoable))
    ;; The id stays retired.
    (efrit-todo-graph-test--create "Benchmark the parser")
    (should (equal (efrit-todo-test-ids) '("t2" "t3" "t4")))
    ;; A deleted id names no item from now on.
    (should (string-match-p "taskId: .*\\_<t1\\_>"
                            (efrit-todo-graph-test--unchanged
                              (efrit-todo-graph-test--get "t1"))))))

(ert-deftest efrit-todo-graph-test-undo-restores-the-item-and-its-edges ()
  "Undoing a deletion brings the item back with its blockers and its dependents'."
  (efrit-todo-test-with-session
    (efrit-todo-graph-test--two)
    (efrit-todo-graph-test--create "Document the parser" "blockedBy" ["t2"])
    (efrit-todo-graph-test--update "t2" "status" "deleted")
    (should (null (efrit-todo-graph-test--prop "t3" :blocked-by)))
    (should (efrit-todo-undo))
    (should (equal (efrit-todo-test-ids) '("t1" "t2" "t3")))
    (should (equal (efrit-todo-graph-test--prop "t2" :blocked-by) '("t1")))
    (should (equal (efrit-todo-graph-test--prop "t3" :blocked-by) '("t2")))
    (should (equal (efrit-todo-graph-test--prop "t2" :content) "Test the parser"))))

(ert-deftest efrit-todo-graph-test-an-item-with-subtasks-cannot-be-deleted ()
  "Deleting an item with subtasks is an error naming them; nothing changes."
  (efrit-todo-test-with-session
    (efrit-todo-graph-test--create "Release")
    (efrit-todo-graph-test--create "Tag the commit" "parent" "t1")
    (let ((message (efrit-todo-graph-test--unchanged
                     (efrit-todo-graph-test--update "t1" "status" "deleted"))))
      (should (string-match-p "\\_<t2\\_>" message))
      (should (string-match-p "subtask" message)))))

;;;; Ids and fields

(ert-deftest efrit-todo-graph-test-ids-as-t3-3-or-hash-3 ()
  "Task tools and blocked_by accept an id as t3, 3 or #3."
  (efrit-todo-test-with-session
    (efrit-todo-graph-test--create "One")
    (efrit-todo-graph-test--create "Two")
    (efrit-todo-graph-test--create "Three" "blockedBy" ["1" "#2"])
    (should (equal (efrit-todo-graph-test--prop "t3" :blocked-by) '("t1" "t2")))
    (efrit-todo-graph-test--update "3" "owner" "alice")
    (should (equal (efrit-todo-graph-test--prop "t3" :owner) "alice"))
    (efrit-todo-graph-test--update "#3" "removeBlockedBy" ["#1"])
    (should (equal (efrit-todo-graph-test--prop "t3" :blocked-by) '("t2")))
    (should (string-match-p "Three" (efrit-todo-graph-test--get "3")))
    (should (string-match-p "Three" (efrit-todo-graph-test--get "#3")))
    (efrit-todo-write
     (efrit-todo-test-object
      "merge" t
      "todos" (vector (efrit-todo-test-item "Three" "pending" "id" "t3" "blocked_by" ["1"]))))
    (should (equal (efrit-todo-graph-test--prop "t3" :blocked-by) '("t1")))))

(ert-deftest efrit-todo-graph-test-errors-name-the-field ()
  "Bad Task tool input names the field; nothing changes."
  (efrit-todo-test-with-session
    (efrit-todo-graph-test--two)
    (should (string-match-p "taskId"
                            (efrit-todo-graph-test--unchanged
                              (efrit-todo-task-update (efrit-todo-test-object "status" "completed")))))
    (should (string-match-p "taskId: unknown id t9"
                            (efrit-todo-graph-test--unchanged
                              (efrit-todo-graph-test--update "t9" "status" "completed"))))
    (should (string-match-p "taskId"
                            (efrit-todo-graph-test--unchanged
                              (efrit-todo-task-get (efrit-todo-test-object)))))
    (should (string-match-p "subject"
                            (efrit-todo-graph-test--unchanged
                              (efrit-todo-task-create (efrit-todo-test-object "description" "x")))))
    (should (string-match-p "status"
                            (efrit-todo-graph-test--unchanged
                              (efrit-todo-graph-test--update "t1" "status" "finished"))))
    (should (string-match-p "owner"
                            (efrit-todo-graph-test--unchanged
                              (efrit-todo-graph-test--update "t1" "owner" 42))))
    (should (string-match-p "addBlockedBy"
                            (efrit-todo-graph-test--unchanged
                              (efrit-todo-graph-test--update "t1" "addBlockedBy" "t2"))))))

(ert-deftest efrit-todo-graph-test-limits ()
  "A description or a blocker list over its limit is an error naming the field."
  (efrit-todo-test-with-session
    (efrit-todo-graph-test--two)
    (let ((efrit-todo-max-description-length 10)
          (efrit-todo-max-blockers 1))
      (should (string-match-p "description"
                              (efrit-todo-graph-test--unchanged
                                (efrit-todo-graph-test--create "Three" "description"
                                                               "eleven char"))))
      (should (string-match-p "description"
                              (efrit-todo-graph-test--unchanged
                                (efrit-todo-graph-test--update "t1" "description"
                                                               (make-string 11 ?x)))))
      (should (string-match-p "todos\\[0\\]\\.description"
                              (efrit-todo-graph-test--unchanged
                                (efrit-todo-write
                                 (efrit-todo-test-object
                                  "merge" t
                                  "todos" (vector (efrit-todo-test-item
                                                   "Write the parser" "pending" "id" "t1"
                                                   "description" (make-string 11 ?x))))))))
      ;; Exactly at the limit is fine.
      (efrit-todo-graph-test--update "t1" "description" (make-string 10 ?x))
      (should (equal (efrit-todo-graph-test--prop "t1" :description) (make-string 10 ?x)))
      (efrit-todo-graph-test--create "Three")
      (should (string-match-p "blockedBy"
                              (efrit-todo-graph-test--unchanged
                                (efrit-todo-graph-test--create "Four" "blockedBy" ["t1" "t2"]))))
      ;; Over the limit through addBlockedBy: checked in its own test below.
      (efrit-todo-graph-test--unchanged
        (efrit-todo-graph-test--update "t2" "addBlockedBy" ["t3"]))
      (should (string-match-p "todos\\[0\\]\\.blocked_by"
                              (efrit-todo-graph-test--unchanged
                                (efrit-todo-write
                                 (efrit-todo-test-object
                                  "merge" t
                                  "todos" (vector (efrit-todo-test-item
                                                   "Three" "pending" "id" "t3"
                                                   "blocked_by" ["t1" "t2"]))))))))
    ;; With the default limits, the same is fine.
    (efrit-todo-graph-test--create "Four" "blockedBy" ["t1" "t2"]
                                   "description" (make-string 200 ?y))
    (should (equal (efrit-todo-graph-test--prop "t4" :blocked-by) '("t1" "t2")))))

(ert-deftest efrit-todo-graph-test-blocker-limit-names-the-field-sent ()
  "Going over the blocker limit through TaskUpdate names addBlockedBy.
That is the field the model sent: TaskUpdate has no blockedBy."
  (efrit-todo-test-with-session
    (efrit-todo-graph-test--two)
    (efrit-todo-graph-test--create "Three")
    (let ((efrit-todo-max-blockers 1))
      (should (string-match-p "\\`addBlockedBy"
                              (efrit-todo-graph-test--unchanged
                                (efrit-todo-graph-test--update "t2" "addBlockedBy" ["t3"]))))
      (should (string-match-p "\\`addBlocks"
                              (efrit-todo-graph-test--unchanged
                                (efrit-todo-graph-test--update "t3" "addBlocks" ["t2"])))))))

;;;; todo_write and the graph

(ert-deftest efrit-todo-graph-test-todo-write-takes-description-blockers-owner ()
  "The items of todo_write take description, blocked_by and owner.
With merge, blocked_by replaces the item's list."
  (efrit-todo-test-with-session
    (efrit-todo-test-write
     (efrit-todo-test-item "Write the parser" "in_progress" "description" "By hand."
                           "owner" "main")
     (efrit-todo-test-item "Write the lexer" "pending")
     (efrit-todo-test-item "Test both" "pending"))
    (efrit-todo-write (efrit-todo-test-object
                       "merge" t
                       "todos" (vector (efrit-todo-test-item "Test both" "pending"
                                                             "id" "t3" "blocked_by" ["t1" "t2"]))))
    (should (equal (efrit-todo-graph-test--prop "t1" :description) "By hand."))
    (should (equal (efrit-todo-graph-test--prop "t1" :owner) "main"))
    (should (equal (efrit-todo-graph-test--prop "t3" :blocked-by) '("t1" "t2")))
    ;; With merge, blocked_by replaces the item's list.
    (efrit-todo-write (efrit-todo-test-object
                       "merge" t
                       "todos" (vector (efrit-todo-test-item "Test both" "pending"
                                                             "id" "t3" "blocked_by" ["t2"]))))
    (should (equal (efrit-todo-graph-test--prop "t3" :blocked-by) '("t2")))
    ;; An item sent without blocked_by keeps its blockers.
    (efrit-todo-write (efrit-todo-test-object
                       "merge" t
                       "todos" (vector (efrit-todo-test-item "Test both, twice" "pending"
                                                             "id" "t3"))))
    (should (equal (efrit-todo-graph-test--prop "t3" :blocked-by) '("t2")))
    ;; An empty blocked_by takes them all away.
    (efrit-todo-write (efrit-todo-test-object
                       "merge" t
                       "todos" (vector (efrit-todo-test-item "Test both, twice" "pending"
                                                             "id" "t3" "blocked_by" []))))
    (should (null (efrit-todo-graph-test--prop "t3" :blocked-by)))))

(ert-deftest efrit-todo-graph-test-a-first-write-may-name-its-own-items ()
  "A whole-list write may make an item wait for another item of the same write.
Ids are given in list order, so a first plan can say how its steps depend."
  (efrit-todo-test-with-session
    (efrit-todo-test-write
     (efrit-todo-test-item "Write the parser" "in_progress")
     (efrit-todo-test-item "Write the lexer" "pending")
     (efrit-todo-test-item "Test both" "pending" "blocked_by" ["t1" "t2"]))
    (should (equal (efrit-todo-graph-test--prop "t3" :blocked-by) '("t1" "t2")))))

;;;; TaskList and TaskGet

(ert-deftest efrit-todo-graph-test-task-list-line-format ()
  "TaskList: one line per item, t3 [pending] subject (owner) [blocked by t1]."
  (efrit-todo-test-with-session
    (efrit-todo-graph-test--create "Write the parser")
    (efrit-todo-graph-test--create "Write the lexer")
    (efrit-todo-graph-test--create "Test both" "blockedBy" ["t1" "t2"])
    (efrit-todo-graph-test--update "t3" "owner" "tester")
    (efrit-todo-graph-test--update "t1" "status" "in_progress")
    (let ((lines (split-string (efrit-todo-task-list) "\n" t "[ \t]+")))
      (should (member "t1 [in_progress] Write the parser" lines))
      (should (member "t2 [pending] Write the lexer" lines))
      (should (member "t3 [pending] Test both (tester) [blocked by t1, t2]" lines)))
    ;; Finished blockers are not shown.
    (efrit-todo-graph-test--update "t2" "status" "completed")
    (let ((lines (split-string (efrit-todo-task-list) "\n" t "[ \t]+")))
      (should (member "t2 [completed] Write the lexer" lines))
      (should (member "t3 [pending] Test both (tester) [blocked by t1]" lines)))))

(ert-deftest efrit-todo-graph-test-task-list-is-bounded ()
  "A long TaskList names some items and counts the rest."
  (efrit-todo-test-with-session
    (apply #'efrit-todo-test-write
           (mapcar (lambda (k) (efrit-todo-test-item (format "Step %d" k) "pending"))
                   (number-sequence 1 300)))
    (let* ((text (efrit-todo-task-list))
           (named (seq-count (lambda (line) (string-match-p "\\`[ \t]*t[0-9]+ \\[" line))
                             (split-string text "\n"))))
      (should (< named 300))
      (should (> named 0))
      (should (string-match "and \\([0-9]+\\) more" text))
      (should (= (+ named (string-to-number (match-string 1 text))) 300))
      (should (< (length text) 6000)))))

(ert-deftest efrit-todo-graph-test-task-get-shows-the-item ()
  "TaskGet shows id, status, subject, description, owner, open blockers, blocks, parent."
  (efrit-todo-test-with-session
    (efrit-todo-graph-test--create "Release")
    (efrit-todo-graph-test--create "Build" "parent" "t1")
    (efrit-todo-graph-test--create "Write the notes")
    (efrit-todo-graph-test--create "Upload" "parent" "t1"
                                   "description" "Upload the tarball to the mirror."
                                   "activeForm" "Uploading"
                                   "blockedBy" ["t2" "t3"])
    (efrit-todo-graph-test--create "Announce" "blockedBy" ["t4"])
    (efrit-todo-graph-test--update "t4" "owner" "uploader")
    (efrit-todo-graph-test--update "t3" "status" "completed")
    (let ((text (efrit-todo-graph-test--get "t4")))
      (should (string-match-p "\\_<t4\\_>" text))
      (should (string-match-p "pending" text))
      (should (string-match-p "Upload" text))
      (should (string-match-p "Uploading" text))
      (should (string-match-p "Upload the tarball to the mirror\\." text))
      (should (string-match-p "uploader" text))
      (should (string-match-p "[Bb]locked by:? t2\\b" text))
      ;; t3 is completed: it no longer blocks, and TaskGet does not say it does.
      (should-not (string-match-p "\\_<t3\\_>" text))
      (should (string-match-p "[Bb]locks:? t5\\b" text))
      (should (string-match-p "[Pp]arent:? t1\\b" text)))))

(ert-deftest efrit-todo-graph-test-get-and-list-change-nothing ()
  "TaskCreate and TaskUpdate run the change hook; TaskGet and TaskList do not."
  (efrit-todo-test-with-session
    (efrit-todo-test-recording-changes calls
      (efrit-todo-graph-test--create "One")
      (should (= (length calls) 1))
      (efrit-todo-graph-test--update "t1" "status" "in_progress")
      (should (= (length calls) 2))
      (let ((history (efrit-todo-history)))
        (efrit-todo-graph-test--get "t1")
        (efrit-todo-task-list)
        (efrit-todo-task-list nil efrit-todo-current-session)
        (should (= (length calls) 2))
        (should (equal (efrit-todo-history) history)))
      (should (equal (car calls) (list efrit-todo-current-session))))))

;;;; The user's dependency edits

(ert-deftest efrit-todo-graph-test-user-adds-and-removes-blockers ()
  "The user adds and removes a dependency; the same rules hold."
  (efrit-todo-test-with-session
    (efrit-todo-graph-test--create "One")
    (efrit-todo-graph-test--create "Two")
    (efrit-todo-test-recording-changes calls
      (should (stringp (efrit-todo-user-add-blocker "t2" "t1")))
      (should calls))
    (should (equal (efrit-todo-graph-test--prop "t2" :blocked-by) '("t1")))
    (should (eq (plist-get (efrit-todo-test-last-change) :actor) 'user))
    (should (string-match-p "cycle" (efrit-todo-graph-test--unchanged
                                      (efrit-todo-user-add-blocker "t1" "t2"))))
    (efrit-todo-graph-test--unchanged (efrit-todo-user-add-blocker "t1" "t1"))
    (efrit-todo-graph-test--unchanged (efrit-todo-user-add-blocker "t1" "t9"))
    (efrit-todo-user-remove-blocker "t2" "t1")
    (should (null (efrit-todo-graph-test--prop "t2" :blocked-by)))
    ;; The blocker limit holds for the user too.
    (efrit-todo-graph-test--create "Three")
    (efrit-todo-user-add-blocker "t3" "t1")
    (let ((efrit-todo-max-blockers 1))
      (efrit-todo-graph-test--unchanged (efrit-todo-user-add-blocker "t3" "t2")))))

;;;; One set of rules for every writer

(defun efrit-todo-graph-test--blocked-parent ()
  "Create t1, t2 blocked by t1, t3 under t2 and t4 under t3."
  (efrit-todo-graph-test--create "Get the keys")
  (efrit-todo-graph-test--create "Deploy" "blockedBy" ["t1"])
  (efrit-todo-graph-test--create "Copy the files" "parent" "t2")
  (efrit-todo-graph-test--create "Check the copy" "parent" "t3"))

(ert-deftest efrit-todo-graph-test-user-cannot-start-a-blocked-item ()
  "The user's status edit is refused as the model's is, naming the blocker."
  (efrit-todo-test-with-session
    (efrit-todo-graph-test--two)
    (dolist (status '(in-progress completed "completed"))
      (should (string-match-p
               "\\`status: t2 is blocked by t1 (pending); finish t1 first"
               (efrit-todo-graph-test--unchanged
                 (efrit-todo-user-set-status "t2" status)))))
    ;; Cancelling is allowed, as for the model.
    (should (equal (efrit-todo-user-set-status "t2" 'cancelled)
                   "the user marked t2 cancelled"))))

(ert-deftest efrit-todo-graph-test-user-cannot-start-under-a-blocked-ancestor ()
  "Starting a subtask whose ancestor waits is refused, naming that blocker."
  (efrit-todo-test-with-session
    (efrit-todo-graph-test--blocked-parent)
    (should (string-match-p
             "\\`status: t3 is blocked by t1 (pending) through its parent t2"
             (efrit-todo-graph-test--unchanged
               (efrit-todo-user-set-status "t3" 'in-progress))))
    (should (string-match-p
             "t4 is blocked by t1 (pending) through its ancestor t2"
             (efrit-todo-graph-test--unchanged
               (efrit-todo-graph-test--update "t4" "status" "in_progress"))))
    (should-not (efrit-todo-graph-test--prop "t3" :ready))
    (efrit-todo-graph-test--update "t1" "status" "completed")
    (should (efrit-todo-graph-test--prop "t3" :ready))
    (should (equal (efrit-todo-user-set-status "t3" 'in-progress)
                   "the user marked t3 in_progress"))))

(ert-deftest efrit-todo-graph-test-user-drops-what-holds-an-item-back ()
  "`efrit-todo-user-set-status-unblocked' drops the waits and sets the status, as one change."
  (efrit-todo-test-with-session
    (efrit-todo-graph-test--blocked-parent)
    (let ((changes (length (efrit-todo-history))))
      (should (equal (efrit-todo-user-set-status-unblocked "t3" 'in-progress)
                     "the user removed the dependency of t2 on t1 and marked t3 in_progress"))
      (should (= (length (efrit-todo-history)) (1+ changes))))
    (should (eq (efrit-todo-graph-test--prop "t3" :status) 'in-progress))
    (should-not (efrit-todo-graph-test--prop "t2" :blocked-by))
    ;; Another rule still refuses, and then nothing changes.
    (efrit-todo-user-add-blocker "t4" "t1")
    (should (string-match-p "unfinished"
                            (efrit-todo-graph-test--unchanged
                              (efrit-todo-user-set-status-unblocked "t2" 'completed))))))

(ert-deftest efrit-todo-graph-test-no-wait-between-an-item-and-its-ancestors ()
  "A subtask waiting for its ancestor, or a parent for its subtask, is refused."
  (efrit-todo-test-with-session
    (efrit-todo-graph-test--blocked-parent)
    (should (string-match-p
             "\\`blockedBy\\[0\\]: the new item cannot wait for t3, its parent"
             (efrit-todo-graph-test--unchanged
               (efrit-todo-graph-test--create "Sub" "parent" "t3" "blockedBy" ["t3"]))))
    (should (string-match-p
             "\\`addBlockedBy\\[0\\]: t2 cannot wait for t4, its subtask: a parent already waits for its subtasks"
             (efrit-todo-graph-test--unchanged
               (efrit-todo-graph-test--update "t2" "addBlockedBy" ["t4"]))))
    (should (string-match-p
             "\\`todos\\[0\\]\\.blocked_by\\[0\\]: t4 cannot wait for t2, its ancestor"
             (efrit-todo-graph-test--unchanged
               (efrit-todo-write (efrit-todo-test-object
                                  "merge" t
                                  "todos" (vector (efrit-todo-test-object
                                                   "id" "t4" "blocked_by" ["t2"])))))))
    (should (string-match-p
             "\\`blocker: t3 cannot wait for t2, its parent"
             (efrit-todo-graph-test--unchanged
               (efrit-todo-user-add-blocker "t3" "t2"))))))

(ert-deftest efrit-todo-graph-test-a-first-plan-may-name-its-own-parents ()
  "A whole-list write may put an item under another new item of the same write."
  (efrit-todo-test-with-session
    (efrit-todo-test-write
     (efrit-todo-test-item "Write the parser" "in_progress")
     (efrit-todo-test-item "Write the lexer" "pending")
     (efrit-todo-test-item "Test both" "pending" "blocked_by" ["t1" "t2"])
     (efrit-todo-test-item "Test the parser" "pending" "parent" "t3")
     (efrit-todo-test-item "Test the lexer" "pending" "parent" "t3"))
    (should (equal (mapcar (lambda (item) (plist-get item :parent)) (efrit-todo-list))
                   '(nil nil nil "t3" "t3")))))

(ert-deftest efrit-todo-graph-test-ready-next-and-task-list-agree ()
  "What is ready is the same in `efrit-todo-list', TaskList and the Next line."
  (efrit-todo-test-with-session
    (efrit-todo-graph-test--blocked-parent)
    (efrit-todo-graph-test--create "Write the notes")
    (let* ((ready (mapcar (lambda (item) (plist-get item :id))
                          (seq-filter (lambda (item) (plist-get item :ready)) (efrit-todo-list))))
           (list (efrit-todo-task-list nil))
           (result (efrit-todo-write (efrit-todo-test-object
                                      "merge" t
                                      "todos" (vector (efrit-todo-test-object
                                                       "id" "t5" "content" "Write the release notes"))))))
      ;; The rules say: t1 and t5 are ready; t2 waits for t1, t3 and t4 through t2.
      (should (equal ready '("t1" "t5")))
      (should (string-match-p "^Ready: t1, t5$" list))
      (should (string-match-p "Next: set t1 in_progress" result))
      (efrit-todo-graph-test--update "t1" "status" "cancelled")
      (should (equal (mapcar (lambda (item) (plist-get item :id))
                             (seq-filter (lambda (item) (plist-get item :ready)) (efrit-todo-list)))
                     '("t2" "t3" "t4" "t5")))
      (should (string-match-p "^Ready: t2, t3, t4, t5$" (efrit-todo-task-list nil))))))

;;;; Tool styles

(ert-deftest efrit-todo-graph-test-tool-names-are-the-schemas-names ()
  "`efrit-todo-tool-names' names, in order, the tools the schemas give.
The names are known without the module, while it builds; the schemas
come from it: the two must not drift apart."
  (dolist (style '(todo tasks both))
    (let ((efrit-todo-tool-style style))
      (should (equal (efrit-todo-tool-names)
                     (mapcar (lambda (schema) (cdr (assoc "name" schema)))
                             (efrit-todo-tool-schemas)))))))

(ert-deftest efrit-todo-graph-test-style-switches-schemas ()
  "The schemas offered follow `efrit-todo-tool-style'."
  (let ((efrit-todo-tool-style 'todo))
    (should (equal (efrit-todo-graph-test--names (efrit-todo-tool-schemas))
                   '("todo_pause" "todo_write"))))
  (let ((efrit-todo-tool-style 'tasks))
    (should (equal (efrit-todo-graph-test--names (efrit-todo-tool-schemas))
                   '("TaskCreate" "TaskGet" "TaskList" "TaskUpdate" "todo_pause"))))
  (let ((efrit-todo-tool-style 'both))
    (let ((schemas (efrit-todo-tool-schemas)))
      (should (equal (efrit-todo-graph-test--names schemas)
                     '("TaskCreate" "TaskGet" "TaskList" "TaskUpdate" "todo_pause" "todo_write")))
      (let* ((update (seq-find (lambda (s) (equal (cdr (assoc "name" s)) "TaskUpdate")) schemas))
             (input (cdr (assoc "input_schema" update)))
             (properties (mapcar #'car (cdr (assoc "properties" input)))))
        (dolist (field '("taskId" "status" "subject" "description" "activeForm" "owner"
                         "addBlockedBy" "removeBlockedBy" "addBlocks" "removeBlocks"))
          (should (member field properties)))
        (should (member "taskId" (append (cdr (assoc "required" input)) nil)))
        (should (member "deleted" (append (cdr (assoc "enum" (cdr (assoc "status" (cdr (assoc "properties" input))))))
                                          nil))))))
  (let ((efrit-todo-tool-style 'todo))
    ;; The default style is todo.
    (should (eq (default-value 'efrit-todo-tool-style) 'todo)))
  (let ((efrit-todo-tool-style 'sideways))
    (should (string-match-p "efrit-todo-tool-style"
                            (efrit-todo-graph-test--error (efrit-todo-tool-schemas))))))

(ert-deftest efrit-todo-graph-test-guidance-follows-the-style-and-stays-put ()
  "The guidance explains the chosen style and does not change within a session."
  (let ((efrit-todo-tool-style 'tasks))
    (efrit-todo-test-with-session
      (let ((guidance (efrit-todo-prompt-guidance)))
        (should (string-match-p "TaskCreate" guidance))
        (should (string-match-p "TaskUpdate" guidance))
        (efrit-todo-graph-test--two)
        (efrit-todo-graph-test--update "t1" "status" "completed")
        (should (equal (efrit-todo-prompt-guidance) guidance)))))
  (let ((efrit-todo-tool-style 'todo))
    (efrit-todo-test-with-session
      (let ((guidance (efrit-todo-prompt-guidance)))
        (should (string-match-p "todo_write" guidance))
        (should-not (string-match-p "TaskCreate" guidance))))))

;;;; Efrit's API stays flat

(ert-deftest efrit-todo-graph-test-compat-api-stays-flat ()
  "Efrit's names see blocked items as plain items of Efrit's shape."
  (efrit-todo-test-with-session
    (efrit-todo-graph-test--two)
    (efrit-todo-graph-test--update "t1" "owner" "main" "description" "Long text.")
    (let ((todos (efrit-todo-get-all)))
      (should (= (length todos) 2))
      (dolist (todo todos)
        (should (vectorp todo))
        (should (= (length todo) 6))
        (should (memq (efrit-todo-item-status todo) '(todo in-progress completed))))
      (should (equal (mapcar #'efrit-todo-item-content todos)
                     '("Write the parser" "Test the parser"))))
    (should (stringp (efrit-todo-format-for-prompt)))
    (should (= (length efrit-todo--current-todos) 2))
    ;; Efrit setting its flat list back as it was loses nothing of the graph.
    (efrit-todo-set-all (efrit-todo-get-all))
    (should (equal (efrit-todo-graph-test--prop "t2" :blocked-by) '("t1")))
    (should (equal (efrit-todo-graph-test--prop "t1" :owner) "main"))
    (should (equal (efrit-todo-graph-test--prop "t1" :description) "Long text."))))

;;;; One breaker

(defun efrit-todo-graph-test--call (name input)
  "Run efrit-todo's tool NAME with INPUT between the breaker's hooks.
Return the refusal, or the result as the model would get it."
  (or (efrit-todo-before-tool name input)
      (let ((result (condition-case err
                        (pcase name
                          ("TaskGet" (efrit-todo-task-get input))
                          ("TaskList" (efrit-todo-task-list input))
                          ("TaskUpdate" (efrit-todo-task-update input))
                          ("TaskCreate" (efrit-todo-task-create input)))
                      (efrit-todo-invalid-input (concat "Error: " (cadr err))))))
        (efrit-todo-after-tool name input result (string-prefix-p "Error" result)))))

(ert-deftest efrit-todo-graph-test-reading-the-list-is-no-progress ()
  "A loop of TaskGet and TaskList trips the breaker; completing an item is progress."
  (efrit-todo-test-with-session
    (let ((efrit-todo-breaker-without-progress 4)
          (efrit-todo-breaker-identical 100)
          (efrit-todo-breaker-oscillation 100)
          (efrit-todo-breaker-same-tool 100))
      (efrit-todo-graph-test--call "TaskCreate" (efrit-todo-test-object "subject" "One"))
      (efrit-todo-graph-test--call "TaskCreate" (efrit-todo-test-object "subject" "Two"))
      (efrit-todo-graph-test--call "TaskUpdate" (efrit-todo-test-object "taskId" "t1"
                                                                        "status" "in_progress"))
      ;; Completing is progress: the count starts again.
      (efrit-todo-graph-test--call "TaskUpdate" (efrit-todo-test-object "taskId" "t1"
                                                                        "status" "completed"))
      (should (= (plist-get (efrit-todo-breaker) :since-progress) 0))
      (let ((inputs (list (efrit-todo-test-object "taskId" "t1")
                          (efrit-todo-test-object "taskId" "t2")
                          (efrit-todo-test-object)
                          (efrit-todo-test-object "taskId" "2")
                          (efrit-todo-test-object "taskId" "#1")
                          (efrit-todo-test-object "taskId" "1")))
            (refused nil))
        (dotimes (k (length inputs))
          (let ((input (nth k inputs)))
            (unless refused
              (let ((text (efrit-todo-graph-test--call (if (gethash "taskId" input) "TaskGet" "TaskList")
                                                       input)))
                (when (plist-get (efrit-todo-breaker) :tripped)
                  (setq refused k))
                (ignore text)))))
        ;; Reading never counted as progress: the breaker stopped the loop.
        (unwind-protect
            (progn (should refused)
                   (should (plist-get (efrit-todo-breaker) :tripped)))
          ;; A tripped breaker anywhere makes every session's check go
          ;; to the module: leave none behind for the other tests.
          (efrit-todo-reset))))))

;;;; Every text names only the tools of the style

(defun efrit-todo-graph-test--names-only-tools-of (style text)
  "Return non-nil if TEXT names only the tools of STYLE that mark items.
In the style `todo' that is todo_write; in `tasks' TaskUpdate (or
TaskCreate); in `both' either."
  (let ((todo (string-search "todo_write" text))
        (task (string-match-p "Task\\(Update\\|Create\\)" text)))
    (pcase style
      ('todo (and todo (not task)))
      ('tasks (and task (not todo)))
      ('both (or todo task)))))

(defun efrit-todo-graph-test--texts-of-a-stuck-session ()
  "Return the texts the model gets in a fresh session that stops progressing.
A plist: :reminder, :continuation, :completion, :warning and :refusal."
  (let ((efrit-todo-breaker-without-progress 8)
        (efrit-todo-reminder-after 4)
        (texts nil))
    (efrit-todo-graph-test--call "TaskCreate" (efrit-todo-test-object "subject" "Look around"))
    (efrit-todo-graph-test--call "TaskUpdate" (efrit-todo-test-object "taskId" "t1"
                                                                      "status" "in_progress"))
    (dotimes (k 4)
      (let ((text (efrit-todo-after-tool "read_file" (efrit-todo-test-object "path" (format "%d.el" k))
                                         "contents" nil)))
        (when (string-search "reminder" text)
          (setq texts (plist-put texts :reminder text)))))
    (setq texts (plist-put texts :continuation (efrit-todo-turn-end nil)))
    (setq texts (plist-put texts :completion (plist-get (efrit-todo-complete "done") :text)))
    (let ((k 4))
      (while (and (< k 20) (not (plist-get texts :refusal)))
        (let* ((input (efrit-todo-test-object "path" (format "%d.el" k)))
               (refusal (efrit-todo-before-tool "read_file" input)))
          (if refusal
              (setq texts (plist-put texts :refusal refusal))
            (let ((text (efrit-todo-after-tool "read_file" input "contents" nil)))
              (when (string-search "other tools will be refused" text)
                (setq texts (plist-put texts :warning text))))))
        (setq k (1+ k))))
    (efrit-todo-reset)
    texts))

(ert-deftest efrit-todo-graph-test-texts-name-the-tools-of-the-style ()
  "Reminder, continuation, completion guard, warning and refusal follow the style.
In the style `tasks' none of them names todo_write, which is not offered."
  (dolist (style '(todo tasks both))
    (let ((efrit-todo-tool-style style))
      (efrit-todo-test-with-session
        (let ((texts (efrit-todo-graph-test--texts-of-a-stuck-session)))
          (dolist (key '(:reminder :continuation :completion :warning :refusal))
            (let ((text (plist-get texts key)))
              (should (stringp text))
              (should (efrit-todo-graph-test--names-only-tools-of style text))))))
      (let ((suggestion (plist-get (efrit-todo-analyze-request
                                    "1. Fix the parser\n2. Add a test\n3. Update NEWS")
                                   :suggestion)))
        (should (efrit-todo-graph-test--names-only-tools-of style suggestion))
        (when (eq style 'tasks)
          (should (string-match-p "TaskCreate" suggestion)))))))

(ert-deftest efrit-todo-graph-test-a-bad-style-is-named ()
  "A style that is not one of the three is an error naming the option."
  (efrit-todo-test-with-session
    (efrit-todo-test-write (efrit-todo-test-item "Look" "in_progress"))
    (let ((efrit-todo-tool-style 'sideways))
      (should (string-match-p "tool-style"
                              (efrit-todo-graph-test--error (efrit-todo-turn-end nil))))
      (should (string-match-p "tool-style"
                              (efrit-todo-graph-test--error
                                (efrit-todo-analyze-request "1. a\n2. b\n3. c")))))))

;;;; Planning is progress

(ert-deftest efrit-todo-graph-test-a-plan-made-one-task-at-a-time-goes-through ()
  "Thirty TaskCreate calls, one per response, are neither refused nor warned about.
The same TaskCreate again and again is still caught."
  (let ((efrit-todo-tool-style 'tasks))
    (efrit-todo-test-with-session
      (unwind-protect
          (progn
            (dotimes (k 30)
              (let ((text (efrit-todo-graph-test--call
                           "TaskCreate"
                           (efrit-todo-test-object "subject" (format "Step %d of the plan" (1+ k))))))
                (should (string-prefix-p "[Task list updated" text))
                (should-not (string-match-p "Warning\\|Vary\\|refused\\|not run" text))))
            (should (= (length (efrit-todo-list)) 30))
            (should-not (plist-get (efrit-todo-breaker) :tripped))
            ;; The work can begin: no call is refused for want of progress.
            (should-not (efrit-todo-before-tool "read_file" (efrit-todo-test-object "path" "a.el")))
            (let ((same (efrit-todo-test-object "subject" "Once more")))
              (dotimes (_ 3) (efrit-todo-graph-test--call "TaskCreate" same))
              (should (string-match-p "same call to TaskCreate 4 times"
                                      (efrit-todo-before-tool "TaskCreate" same)))))
        (efrit-todo-reset)))))

;;;; What the model is shown

(ert-deftest efrit-todo-graph-test-lines-show-blockers-and-merges-say-what-changed ()
  "The guidance and a first plan's result show what each item waits for.
A merge that adds blocked_by or owner says so in its result."
  (efrit-todo-test-with-session
    (let ((result (efrit-todo-test-write
                   (efrit-todo-test-item "Write the fix" "in_progress")
                   (efrit-todo-test-item "Patch the loop" "pending" "blocked_by" ["t1"])
                   (efrit-todo-test-item "Ship it" "pending"))))
      (should (string-match-p "^  t2 \\[pending\\] Patch the loop \\[blocked by t1\\]$" result))
      (should (string-match-p "^  t3 \\[pending\\] Ship it$" result)))
    (should (string-match-p "^  t2 \\[pending\\] Patch the loop \\[blocked by t1\\]$"
                            (efrit-todo-prompt-guidance)))
    (let ((result (efrit-todo-write (efrit-todo-test-object
                                     "merge" t
                                     "todos" (vector (efrit-todo-test-object
                                                      "id" "t3" "blocked_by" ["t2"]
                                                      "owner" "executor"))))))
      (should (string-match-p "^t3 pending: Ship it (executor) \\[blocked by t2\\]$" result)))))

(provide 'efrit-todo-graph-test)

;;; efrit-todo-graph-test.el ends here
