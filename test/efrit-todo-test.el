;;; efrit-todo-test.el --- ERT tests of the efrit-todo public API -*- lexical-binding: t; -*-

;;; Commentary:

;; These tests drive the public Lisp API of efrit-todo through the real
;; Rust module: `efrit-todo-write' and its validation, reconciliation and
;; result text, the accessors, sessions, the change hook, the tool
;; schemas and the prompt guidance.
;;
;; Every test runs in a fresh session (see `efrit-todo-test-with-session'),
;; so the tests are independent of each other and of their order.
;;
;; Run them with `make ert', which loads every test/*-test.el file in
;; batch Emacs with lisp/ and test/ on the `load-path'.

;;; Code:

(require 'ert)
(require 'cl-lib)
(require 'seq)
(require 'subr-x)
(require 'json)
(require 'efrit-todo)
(require 'efrit-todo-test-helpers)

(declare-function efrit-todo--module-panic-for-test "efrit-todo-module" (message))

;;;; Basic write and accessors

(ert-deftest efrit-todo-test-write-result-lists-items-with-ids ()
  "A first write shows every item with id and status, then the next step.
The header counts only what is done and cancelled: the list below
shows what is open."
  (efrit-todo-test-with-session
    (let ((text (efrit-todo-test-write
                 (efrit-todo-test-item "Read the file" "in_progress"
                                       "activeForm" "Reading the file")
                 (efrit-todo-test-item "Fix the bug" "pending")
                 (efrit-todo-test-item "Update the docs" "completed")
                 (efrit-todo-test-item "Skip the release" "cancelled"))))
      (should (stringp text))
      (should (equal text
                     (concat
                      "[TODO list updated: 1/4 done, 1 cancelled]\n"
                      "  t1 [in_progress] Read the file\n"
                      "  t2 [pending] Fix the bug\n"
                      "  t3 [completed] Update the docs\n"
                      "  t4 [cancelled] Skip the release\n"
                      ;; The list just shown names the running item.
                      "Next: work on t1.")))
      ;; Every new id is shown, so no line says how the ids run.
      (should-not (string-match-p "New ids" text))
      (should-not (string-match-p "Warning" text))
      (should-not (string-match-p "^Changes: " text)))
    (let ((change (efrit-todo-test-last-change)))
      (should (equal (plist-get change :summary) "added t1, t2, t3, t4"))
      (should (equal (plist-get change :added) '("t1" "t2" "t3" "t4")))
      (should (eq (plist-get change :actor) 'model))
      (should (eq (plist-get change :kind) 'write)))
    (should (= (length (efrit-todo-history)) 1))))

(ert-deftest efrit-todo-test-status-change-names-only-changed-items ()
  "A write that only changes statuses names the changed items, not the list.
When one of those lines starts the running item, that line is the next
step and no Next line follows."
  (efrit-todo-test-with-session
    (efrit-todo-test-seed)
    (let ((text (efrit-todo-test-write
                 (efrit-todo-test-item "Read the file" "completed" "id" "t1")
                 (efrit-todo-test-item "Fix the bug" "completed" "id" "t2")
                 (efrit-todo-test-item "Run the tests" "in_progress" "id" "t3"
                                       "activeForm" "Running the tests"))))
      (should (equal text
                     (concat "[TODO list updated: 2/3 done]\n"
                             "t2 completed: Fix the bug\n"
                             "t3 in_progress: Running the tests")))
      ;; The unchanged item is not repeated.
      (should-not (string-match-p "t1" text)))
    (should (equal (efrit-todo-test-summary) "started t3; completed t2"))
    (should (equal (efrit-todo-test-write
                    (efrit-todo-test-item "Read the file" "completed" "id" "t1")
                    (efrit-todo-test-item "Fix the bug" "completed" "id" "t2")
                    (efrit-todo-test-item "Run the tests" "completed" "id" "t3"))
                   (concat "[TODO list updated: 3/3 done]\n"
                           "t3 completed: Run the tests\n"
                           "Next: every item is finished; give the user the result.")))))

(ert-deftest efrit-todo-test-list-returns-plists ()
  "`efrit-todo-list' returns one plist per item with every documented key."
  (efrit-todo-test-with-session
    (should (null (efrit-todo-list)))
    (efrit-todo-test-seed)
    (let ((items (efrit-todo-list)))
      (should (= (length items) 3))
      (should (equal (efrit-todo-test-ids) '("t1" "t2" "t3")))
      (should (equal (efrit-todo-test-contents)
                     '("Read the file" "Fix the bug" "Run the tests")))
      (should (equal (efrit-todo-test-statuses) '(completed in-progress pending)))
      (should (equal (efrit-todo-test-field :active-form)
                     '("Read the file" "Fixing the bug" "Run the tests")))
      (dolist (item items)
        (dolist (key '(:id :content :active-form :status :parent
                           :created :started :completed))
          (should (plist-member item key)))
        ;; Priority is a slot of Efrit's struct only; the plists, which
        ;; nothing would read it from, do not carry it.
        (should-not (plist-member item :priority))
        (should (numberp (plist-get item :created)))
        (should (null (plist-get item :parent))))
      (pcase-let ((`(,done ,running ,waiting) items))
        (should (numberp (plist-get done :completed)))
        (should (numberp (plist-get running :started)))
        (should (null (plist-get running :completed)))
        (should (null (plist-get waiting :started)))
        (should (null (plist-get waiting :completed)))
        (should (<= (abs (- (plist-get waiting :created) (float-time))) 60))))))

(ert-deftest efrit-todo-test-counts ()
  "`efrit-todo-counts' counts by status, zero for an empty session."
  (efrit-todo-test-with-session
    (should (equal (efrit-todo-counts)
                   '(:total 0 :pending 0 :in-progress 0 :completed 0 :cancelled 0)))
    (efrit-todo-test-write
     (efrit-todo-test-item "a" "pending")
     (efrit-todo-test-item "b" "pending")
     (efrit-todo-test-item "c" "in_progress")
     (efrit-todo-test-item "d" "completed")
     (efrit-todo-test-item "e" "cancelled")
     (efrit-todo-test-item "f" "cancelled"))
    (let ((counts (efrit-todo-counts)))
      (should (equal (plist-get counts :total) 6))
      (should (equal (plist-get counts :pending) 2))
      (should (equal (plist-get counts :in-progress) 1))
      (should (equal (plist-get counts :completed) 1))
      (should (equal (plist-get counts :cancelled) 2)))))

(ert-deftest efrit-todo-test-current ()
  "`efrit-todo-current' is the in-progress item, or nil."
  (efrit-todo-test-with-session
    (should (null (efrit-todo-current)))
    (efrit-todo-test-write (efrit-todo-test-item "a" "pending")
                           (efrit-todo-test-item "b" "pending"))
    (should (null (efrit-todo-current)))
    (efrit-todo-test-write (efrit-todo-test-item "a" "completed" "id" "t1")
                           (efrit-todo-test-item "b" "in_progress" "id" "t2"))
    (let ((current (efrit-todo-current)))
      (should (equal (plist-get current :id) "t2"))
      (should (eq (plist-get current :status) 'in-progress))
      (should (equal current (nth 1 (efrit-todo-list)))))))

(ert-deftest efrit-todo-test-reset ()
  "Reset empties the session; ids issued before are not issued again."
  (efrit-todo-test-with-session
    (efrit-todo-test-seed)
    (efrit-todo-reset)
    (should (null (efrit-todo-list)))
    (should (null (efrit-todo-current)))
    (should (equal (plist-get (efrit-todo-counts) :total) 0))
    (efrit-todo-test-write (efrit-todo-test-item "Read the file" "pending"))
    (should (equal (efrit-todo-test-ids) '("t4")))))

(ert-deftest efrit-todo-test-defaults-and-error-symbol ()
  "The options have their documented defaults; the error is a child of `error'."
  (dolist (spec '((efrit-todo-max-items 1000)
                  (efrit-todo-max-content-length 2000)
                  (efrit-todo-full-list-threshold 30)))
    (should (custom-variable-p (car spec)))
    (should (equal (eval (car (get (car spec) 'standard-value)) t) (cadr spec))))
  (should (memq 'error (get 'efrit-todo-invalid-input 'error-conditions)))
  (should (memq 'efrit-todo-invalid-input
                (get 'efrit-todo-invalid-input 'error-conditions)))
  (should (stringp (get 'efrit-todo-invalid-input 'error-message))))

;;;; Input shapes

(ert-deftest efrit-todo-test-input-shapes ()
  "Hash tables, alists, plists, JSON strings and bare vectors are accepted."
  (let ((shapes
         `(("hash table as Efrit parses JSON"
            ,(efrit-todo-test-json
              "{\"todos\": [{\"content\": \"Read it\", \"status\": \"in_progress\", \"activeForm\": \"Reading it\"},
                            {\"content\": \"Fix it\", \"status\": \"pending\"}]}"))
           ("alist with symbol keys"
            ((todos . [((content . "Read it") (status . "in_progress")
                        (activeForm . "Reading it"))
                       ((content . "Fix it") (status . "pending"))])))
           ("alist with string keys"
            (("todos" . [(("content" . "Read it") ("status" . "in_progress")
                          ("activeForm" . "Reading it"))
                         (("content" . "Fix it") ("status" . "pending"))])))
           ("plist"
            (:todos [(:content "Read it" :status "in_progress" :activeForm "Reading it")
                     (:content "Fix it" :status "pending")]))
           ("JSON string"
            "{\"todos\": [{\"content\": \"Read it\", \"status\": \"in_progress\", \"activeForm\": \"Reading it\"}, {\"content\": \"Fix it\", \"status\": \"pending\"}]}")
           ("bare vector of hash tables"
            ,(vector (efrit-todo-test-item "Read it" "in_progress" "activeForm" "Reading it")
                     (efrit-todo-test-item "Fix it" "pending")))
           ("bare list of hash tables"
            ,(list (efrit-todo-test-item "Read it" "in_progress" "activeForm" "Reading it")
                   (efrit-todo-test-item "Fix it" "pending")))
           ("bare list of alists"
            (((content . "Read it") (status . "in_progress") (activeForm . "Reading it"))
             ((content . "Fix it") (status . "pending"))))
           ("hash table with a list of hash tables"
            ,(efrit-todo-test-object
              "todos" (list (efrit-todo-test-item "Read it" "in_progress"
                                                  "activeForm" "Reading it")
                            (efrit-todo-test-item "Fix it" "pending")))))))
    (dolist (shape shapes)
      (ert-info ((car shape) :prefix "Shape: ")
        (efrit-todo-test-with-session
          (let ((text (efrit-todo-write (cadr shape))))
            (should (string-prefix-p "[TODO list updated" text))
            (should (equal (efrit-todo-test-ids) '("t1" "t2")))
            (should (equal (efrit-todo-test-contents) '("Read it" "Fix it")))
            (should (equal (efrit-todo-test-statuses) '(in-progress pending)))
            (should (equal (efrit-todo-test-field :active-form)
                           '("Reading it" "Fix it")))))))))

(ert-deftest efrit-todo-test-input-bare-list-of-plists ()
  "A bare list of plist items, and a plist whose todos is such a list, work.
The docstring of `efrit-todo-write' promises \"a bare list or vector of
items\"; a list of plists is the most natural way to write one in Lisp."
  (efrit-todo-test-with-session
    (efrit-todo-write (list (list :content "Read it" :status "in_progress")
                            (list :content "Fix it" :status "pending")))
    (should (equal (efrit-todo-test-contents) '("Read it" "Fix it"))))
  (efrit-todo-test-with-session
    (efrit-todo-write (list :todos (list (list :content "Read it" :status "pending"))))
    (should (equal (efrit-todo-test-contents) '("Read it")))))

(ert-deftest efrit-todo-test-input-null-and-extra-fields ()
  "JSON null for an optional field means absent; unknown fields are ignored."
  (efrit-todo-test-with-session
    (efrit-todo-write
     (efrit-todo-test-json
      "{\"todos\": [{\"id\": null, \"content\": \"a\", \"status\": \"pending\", \"activeForm\": null, \"priority\": \"high\"}]}"))
    (should (equal (efrit-todo-test-ids) '("t1")))
    (should (equal (efrit-todo-test-field :active-form) '("a")))
    (efrit-todo-write "{\"todos\": [{\"id\": \"t1\", \"content\": \"a\", \"status\": \"completed\", \"activeForm\": null}]}")
    (should (equal (efrit-todo-test-statuses) '(completed)))))

;; The module reads an input into buffers it keeps from the input before:
;; nothing of an earlier input may show through in a later one.
(ert-deftest efrit-todo-test-input-texts-are-its-own ()
  "Each write reads its own texts, whatever inputs came before it.
Long texts, then short ones in the same places; items of three keys
other than the usual ones; a field that is not a string."
  (let ((long (lambda (word) (mapconcat #'identity (make-list 20 word) " "))))
    (efrit-todo-test-with-session
      (efrit-todo-test-write
       (efrit-todo-test-item (funcall long "first") "in_progress"
                             "activeForm" (funcall long "doing"))
       (efrit-todo-test-item (funcall long "second") "pending"
                             "activeForm" (funcall long "waiting")))
      (efrit-todo-test-write
       (efrit-todo-test-item "Go" "completed" "activeForm" "Going")
       (efrit-todo-test-item "Stop" "in_progress" "activeForm" "Stopping"))
      (should (equal (efrit-todo-test-contents) '("Go" "Stop")))
      (should (equal (efrit-todo-test-field :active-form) '("Going" "Stopping")))
      (should (equal (efrit-todo-test-statuses) '(completed in-progress)))
      ;; Three keys, not the usual three.
      (efrit-todo-test-write
       (efrit-todo-test-item "Go" "completed" "description" "Out")
       (efrit-todo-test-item "Stop" "completed" "owner" "lead"))
      (should (equal (efrit-todo-test-contents) '("Go" "Stop")))
      (should (equal (efrit-todo-test-field :description) '("Out" nil)))
      (should (equal (efrit-todo-test-field :owner) '(nil "lead")))
      ;; A field that is not a string is named, the list left as it was.
      (let ((err (should-error
                  (efrit-todo-test-write
                   (efrit-todo-test-item "Go" "completed" "activeForm" ["Going"]))
                  :type 'efrit-todo-invalid-input)))
        (should (string-match-p "todos\\[0\\]\\.activeForm" (cadr err))))
      ;; A longer list, then a shorter one, each item where another shape
      ;; stood before.
      (efrit-todo-test-write
       (efrit-todo-test-item "One" "completed" "activeForm" "Doing one")
       (efrit-todo-test-item "Two" "in_progress" "activeForm" "Doing two" "description" "Why")
       (efrit-todo-test-item "Three" "pending" "activeForm" "Doing three"))
      (should (equal (efrit-todo-test-contents) '("One" "Two" "Three")))
      (should (equal (efrit-todo-test-field :active-form) '("Doing one" "Doing two" "Doing three")))
      (should (equal (efrit-todo-test-field :description) '(nil "Why" nil)))
      (efrit-todo-test-write
       (efrit-todo-test-item "Uno" "completed" "activeForm" "Doing uno" "description" "Because")
       (efrit-todo-test-item "Dos" "in_progress" "activeForm" "Doing dos"))
      (should (equal (efrit-todo-test-contents) '("Uno" "Dos")))
      (should (equal (efrit-todo-test-field :active-form) '("Doing uno" "Doing dos")))
      (should (equal (efrit-todo-test-field :description) '("Because" nil)))
      ;; Texts longer than the module's read buffer, or not UTF-8, in an
      ;; item of the usual three keys.
      (let ((efrit-todo-max-content-length 10000))
        (efrit-todo-test-write
         (efrit-todo-test-item (make-string 5000 ?x) "completed" "activeForm" "Going")
         (efrit-todo-test-item "Stop" "in_progress" "activeForm" (make-string 4097 ?y)))
        (should (equal (mapcar #'length (efrit-todo-test-contents)) '(5000 4))))
      (should (equal (efrit-todo-test-field :active-form) (list "Going" (make-string 4097 ?y))))
      (let ((err (should-error
                  (efrit-todo-test-write
                   (efrit-todo-test-item "Go" "completed" "activeForm" "Going")
                   (efrit-todo-test-item (string-to-unibyte "Stop \377") "in_progress"
                                         "activeForm" "Stopping"))
                  :type 'efrit-todo-invalid-input)))
        (should (string-match-p "todos\\[1\\]\\.content" (cadr err))))
      (should (equal (mapcar #'length (efrit-todo-test-contents)) '(5000 4))))))

;; A table's hash test may run Lisp: what that Lisp signals or throws
;; while the module looks a key up is the caller's, as from any function.
(defvar efrit-todo-test--failing-key nil
  "The key whose hashing fails in `efrit-todo-test-failing-test' tables.")

(defvar efrit-todo-test--failure nil
  "Function called with the failing key; it signals or throws.")

(define-hash-table-test 'efrit-todo-test-failing-test
  (lambda (a b) (equal a b))
  (lambda (key)
    (when (equal key efrit-todo-test--failing-key)
      (funcall efrit-todo-test--failure key))
    (sxhash-equal key)))

(defun efrit-todo-test--failing-table (&rest keys-and-values)
  "Return a `efrit-todo-test-failing-test' table of KEYS-AND-VALUES."
  (let ((table (make-hash-table :test 'efrit-todo-test-failing-test)))
    (while keys-and-values
      (puthash (pop keys-and-values) (pop keys-and-values) table))
    table))

(ert-deftest efrit-todo-test-lookup-exits-reach-the-caller ()
  "A signal or throw from a table's hash test during a write is the caller's.
The list is unchanged, and the next write works."
  (efrit-todo-test-with-session
    (efrit-todo-test-write (efrit-todo-test-item "Keep me" "in_progress" "activeForm" "Keeping"))
    (let ((item (lambda ()
                  (efrit-todo-test--failing-table
                   "content" "Lose me" "status" "pending" "activeForm" "Losing"))))
      (dolist (key '("todos" "status"))
        (let ((efrit-todo-test--failing-key key)
              (input (efrit-todo-test--failing-table "todos" (vector (funcall item)))))
          ;; A signal.
          (let ((efrit-todo-test--failure (lambda (key) (error "Cannot hash %s" key))))
            (should (equal (cadr (should-error (efrit-todo-write input) :type 'error))
                           (format "Cannot hash %s" key))))
          ;; A throw.
          (let ((efrit-todo-test--failure (lambda (key) (throw 'efrit-todo-test-thrown key))))
            (should (equal (catch 'efrit-todo-test-thrown (efrit-todo-write input) 'not-thrown)
                           key)))
          (should (equal (efrit-todo-test-contents) '("Keep me")))))
      ;; The same tables, hashing nothing that fails, are read as usual.
      (efrit-todo-write (efrit-todo-test--failing-table "todos" (vector (funcall item))))
      (should (equal (efrit-todo-test-contents) '("Lose me"))))))

(ert-deftest efrit-todo-test-empty-list-is-valid ()
  "An empty todos array is a valid write that empties the list."
  (efrit-todo-test-with-session
    (efrit-todo-test-write (efrit-todo-test-item "Ship it" "completed"))
    (let ((text (efrit-todo-write (efrit-todo-test-object "todos" []))))
      (should (equal text
                     (concat "[TODO list updated: 0/0 done]\n"
                             "Removed finished items: t1\n"
                             "Next: the list is empty; write a plan when the task "
                             "needs three or more steps."))))
    (should (equal (efrit-todo-test-summary) "removed t1"))
    (should (equal (plist-get (efrit-todo-test-last-change) :removed) '("t1")))
    (should (null (efrit-todo-list)))))

;;;; Status spelling

(ert-deftest efrit-todo-test-status-spelling-is-forgiven ()
  "Status is forgiven for case and - or space versus _, nothing else."
  (dolist (case '(("pending" pending "pending")
                  ("PENDING" pending "pending")
                  ("Pending" pending "pending")
                  ("in_progress" in-progress "in_progress")
                  ("In Progress" in-progress "in_progress")
                  ("IN-PROGRESS" in-progress "in_progress")
                  ("in-progress" in-progress "in_progress")
                  ("in progress" in-progress "in_progress")
                  ("In_Progress" in-progress "in_progress")
                  ("completed" completed "completed")
                  ("Completed" completed "completed")
                  ("COMPLETED" completed "completed")
                  (" completed " completed "completed")
                  ("cancelled" cancelled "cancelled")
                  ("CANCELLED" cancelled "cancelled")))
    (ert-info ((format "%S" (car case)) :prefix "Status: ")
      (efrit-todo-test-with-session
        (let ((text (efrit-todo-test-write (efrit-todo-test-item "Do it" (car case)))))
          (should (equal (efrit-todo-test-statuses) (list (nth 1 case))))
          (should (string-match-p (regexp-quote (format "  t1 [%s] Do it\n" (nth 2 case)))
                                  text)))))))

(ert-deftest efrit-todo-test-status-near-misses-are-errors ()
  "Spellings that need a guess are errors, not silently mapped."
  (dolist (status '("done" "inprogress" "canceled" "todo" "in__progress" "complete" ""))
    (ert-info ((format "%S" status) :prefix "Status: ")
      (efrit-todo-test-with-session
        (let ((err (should-error
                    (efrit-todo-test-write (efrit-todo-test-item "Do it" status))
                    :type 'efrit-todo-invalid-input)))
          (should (string-match-p
                   (concat "\\`todos\\[0\\]\\.status: expected pending, in_progress, "
                           "completed or cancelled, got "
                           (regexp-quote (format "%S" status)) "\\'")
                   (cadr err)))
          (should (null (efrit-todo-list))))))))

;;;; activeForm

(ert-deftest efrit-todo-test-active-form ()
  "The activeForm is kept, defaults to content, survives writes that omit it."
  (efrit-todo-test-with-session
    (efrit-todo-test-write
     (efrit-todo-test-item "Run the tests" "in_progress" "activeForm" "Running the tests")
     (efrit-todo-test-item "Fix the bug" "pending")
     (efrit-todo-test-item "Write docs" "pending" "activeForm" "")
     (efrit-todo-test-item "Tag it" "pending" "active_form" "Tagging it"))
    (should (equal (efrit-todo-test-field :active-form)
                   '("Running the tests" "Fix the bug" "Write docs" "Tagging it")))
    (should (equal (plist-get (efrit-todo-current) :active-form) "Running the tests"))
    ;; Same content, no activeForm: the earlier activeForm stays.
    (efrit-todo-test-write
     (efrit-todo-test-item "Run the tests" "in_progress" "id" "t1")
     (efrit-todo-test-item "Fix the bug" "pending" "id" "t2"
                           "activeForm" "Fixing the bug")
     (efrit-todo-test-item "Write docs" "pending" "id" "t3")
     (efrit-todo-test-item "Tag it" "pending" "id" "t4"))
    (should (equal (efrit-todo-test-field :active-form)
                   '("Running the tests" "Fixing the bug" "Write docs" "Tagging it")))
    ;; The running item is named in the result by its activeForm, the
    ;; one it was given in an earlier write.
    (let ((text (efrit-todo-test-write
                 (efrit-todo-test-item "Run the tests" "completed" "id" "t1")
                 (efrit-todo-test-item "Fix the bug" "in_progress" "id" "t2")
                 (efrit-todo-test-item "Write docs" "pending" "id" "t3")
                 (efrit-todo-test-item "Tag it" "pending" "id" "t4"))))
      (should (equal (efrit-todo-test-line text "t1 ") "t1 completed: Run the tests"))
      (should (equal (efrit-todo-test-line text "t2 ") "t2 in_progress: Fixing the bug")))
    ;; Reworded without activeForm: the activeForm follows the new content.
    (let ((text (efrit-todo-test-write
                 (efrit-todo-test-item "Run the whole test suite" "in_progress" "id" "t1")
                 (efrit-todo-test-item "Fix the bug" "pending" "id" "t2")
                 (efrit-todo-test-item "Write docs" "pending" "id" "t3")
                 (efrit-todo-test-item "Tag it" "pending" "id" "t4"))))
      (should (equal (efrit-todo-test-line text "t1 ")
                     "t1 in_progress: Run the whole test suite")))
    (should (equal (car (efrit-todo-test-field :active-form)) "Run the whole test suite"))))

;;;; Ids

(ert-deftest efrit-todo-test-ids-are-sequential-per-session ()
  "Ids are t1, t2, ... per session; sessions do not share counters."
  (let ((a (format "test-%s" (cl-gensym)))
        (b (format "test-%s" (cl-gensym))))
    (efrit-todo-write (efrit-todo-test-input (efrit-todo-test-item "a1" "pending")
                                             (efrit-todo-test-item "a2" "pending")
                                             (efrit-todo-test-item "a3" "pending"))
                      a)
    (efrit-todo-write (efrit-todo-test-input (efrit-todo-test-item "b1" "pending")) b)
    (should (equal (efrit-todo-test-ids a) '("t1" "t2" "t3")))
    (should (equal (efrit-todo-test-ids b) '("t1")))
    (should (equal (efrit-todo-test-contents b) '("b1")))
    (efrit-todo-write (efrit-todo-test-input (efrit-todo-test-item "b1" "pending" "id" "t1")
                                             (efrit-todo-test-item "b2" "pending"))
                      b)
    (should (equal (efrit-todo-test-ids b) '("t1" "t2")))
    (should (equal (efrit-todo-test-ids a) '("t1" "t2" "t3")))))

(ert-deftest efrit-todo-test-ids-are-never-reused ()
  "An id that left the list, or was issued before a reset, is not reissued."
  (efrit-todo-test-with-session
    (efrit-todo-test-write (efrit-todo-test-item "Update the changelog" "pending"))
    (efrit-todo-test-write (efrit-todo-test-item "Deploy to production" "pending"))
    (should (equal (efrit-todo-test-ids) '("t2")))
    ;; The same content again, without id, is a new item with a new id.
    (efrit-todo-test-write (efrit-todo-test-item "Update the changelog" "pending"))
    (should (equal (efrit-todo-test-ids) '("t3")))
    (efrit-todo-reset)
    (efrit-todo-test-write (efrit-todo-test-item "Update the changelog" "pending")
                           (efrit-todo-test-item "Deploy to production" "pending"))
    (should (equal (efrit-todo-test-ids) '("t4" "t5")))))

(ert-deftest efrit-todo-test-retired-id-restores-its-item ()
  "An id that left the list brings its item back when sent again."
  (efrit-todo-test-with-session
    (efrit-todo-test-write (efrit-todo-test-item "Read config.el" "completed")
                           (efrit-todo-test-item "Fix the parser" "pending"))
    (let ((text (efrit-todo-test-write
                 (efrit-todo-test-item "Fix the parser" "pending" "id" "t2"))))
      (should (equal (efrit-todo-test-line text "Removed finished items: ")
                     "Removed finished items: t1"))
      (should-not (string-match-p "Warning" text)))
    (should (equal (efrit-todo-test-summary) "removed t1"))
    (let ((text (efrit-todo-test-write
                 (efrit-todo-test-item "Fix the parser" "pending" "id" "t2")
                 (efrit-todo-test-item "Read config.el" "completed" "id" "t1"))))
      ;; A restored item means the list changed shape: it is shown whole.
      (should (string-match-p (regexp-quote (concat "  t2 [pending] Fix the parser\n"
                                                    "  t1 [completed] Read config.el\n"))
                              text))
      (should-not (string-match-p "New ids" text)))
    (should (equal (efrit-todo-test-summary) "restored t1"))
    (should (equal (plist-get (efrit-todo-test-last-change) :restored) '("t1")))
    (should (null (plist-get (efrit-todo-test-last-change) :added)))
    (should (equal (efrit-todo-test-ids) '("t2" "t1")))
    (should (equal (efrit-todo-test-statuses) '(pending completed)))))

;;;; Matching

(ert-deftest efrit-todo-test-match-by-id ()
  "An item with a known id keeps it even when its content is reworded."
  (efrit-todo-test-with-session
    (efrit-todo-test-write (efrit-todo-test-item "Fix the parser bug" "in_progress")
                           (efrit-todo-test-item "Run the tests" "pending"))
    (let ((text (efrit-todo-test-write
                 (efrit-todo-test-item "Rewrite the tokenizer entirely" "in_progress" "id" "t1")
                 (efrit-todo-test-item "Run the tests" "pending" "id" "t2"))))
      (should (equal (efrit-todo-test-line text "t1 ")
                     "t1 in_progress: Rewrite the tokenizer entirely"))
      (should-not (string-match-p "t2" text)))
    (should (equal (efrit-todo-test-summary) "reworded t1"))
    (should (equal (plist-get (efrit-todo-test-last-change) :reworded) '("t1")))
    (should (equal (efrit-todo-test-ids) '("t1" "t2")))
    (should (equal (efrit-todo-test-contents)
                   '("Rewrite the tokenizer entirely" "Run the tests")))))

(ert-deftest efrit-todo-test-match-by-exact-content ()
  "Items without ids keep theirs by exact content, in any order."
  (efrit-todo-test-with-session
    (efrit-todo-test-write (efrit-todo-test-item "Read it" "in_progress")
                           (efrit-todo-test-item "Fix it" "pending")
                           (efrit-todo-test-item "Ship it" "pending"))
    (let ((text (efrit-todo-test-write (efrit-todo-test-item "Ship it" "pending")
                                       (efrit-todo-test-item "Read it" "completed")
                                       (efrit-todo-test-item "Fix it" "in_progress"))))
      ;; Reordered: the list is shown, in its new order, with the ids.
      (should (string-match-p (regexp-quote (concat "  t3 [pending] Ship it\n"
                                                    "  t1 [completed] Read it\n"
                                                    "  t2 [in_progress] Fix it\n"))
                              text)))
    (let ((change (efrit-todo-test-last-change)))
      (should (equal (plist-get change :summary) "started t2; completed t1; reordered"))
      (should (equal (plist-get change :started) '("t2")))
      (should (equal (plist-get change :completed) '("t1")))
      (should (plist-get change :moved))
      (should (null (plist-get change :added))))
    (should (equal (efrit-todo-test-ids) '("t3" "t1" "t2")))))

(ert-deftest efrit-todo-test-match-by-normalised-and-similar-content ()
  "Without ids, items match by normalised content, then by similarity."
  (efrit-todo-test-with-session
    (efrit-todo-test-write (efrit-todo-test-item "Read config.el" "pending")
                           (efrit-todo-test-item "Fix the parser bug" "pending")
                           (efrit-todo-test-item "Write tests for the tokenizer module" "pending"))
    (let ((text (efrit-todo-test-write
                 (efrit-todo-test-item "write tests for the tokeniser module" "pending")
                 (efrit-todo-test-item "  fix the PARSER bug!" "pending")
                 (efrit-todo-test-item "Read config.el" "pending"))))
      (should (string-match-p (regexp-quote "  t3 [pending] write tests for the tokeniser module\n")
                              text))
      (should-not (string-match-p "dropped\\|New ids" text)))
    (let ((change (efrit-todo-test-last-change)))
      (should (equal (plist-get change :summary) "reworded t3, t2; reordered"))
      (should (null (plist-get change :added)))
      (should (null (plist-get change :dropped))))
    (should (equal (efrit-todo-test-ids) '("t3" "t2" "t1")))
    (should (equal (efrit-todo-test-contents)
                   '("write tests for the tokeniser module" "  fix the PARSER bug!"
                     "Read config.el")))))

(ert-deftest efrit-todo-test-dissimilar-content-is-a-new-item ()
  "Unrelated content gets a new id, and the old open item is dropped."
  (efrit-todo-test-with-session
    (efrit-todo-test-write (efrit-todo-test-item "Update the changelog" "pending"))
    (let ((text (efrit-todo-test-write (efrit-todo-test-item "Deploy to production" "pending"))))
      (should (string-match-p (regexp-quote "\n  t2 [pending] Deploy to production\n") text))
      (should (string-match-p
               (regexp-quote "dropped: t1 [pending] Update the changelog; ")
               text)))
    (should (equal (efrit-todo-test-summary) "added t2; dropped t1"))
    (should (equal (efrit-todo-test-ids) '("t2")))))

(ert-deftest efrit-todo-test-same-list-changes-nothing ()
  "Sending the same list again reports no changes and keeps the ids."
  (efrit-todo-test-with-session
    (efrit-todo-test-seed)
    (let* ((before (efrit-todo-list))
           (history (efrit-todo-history))
           (text (efrit-todo-test-seed)))
      (should (equal text
                     (concat "[TODO list updated: 1/3 done]\n"
                             "No change: the list is as it was.\n"
                             "Next: work on t2; mark it completed when it is done.")))
      (should (equal (efrit-todo-list) before))
      ;; A write that changes nothing adds no history entry.
      (should (equal (efrit-todo-history) history)))))

;;;; A reorder

(defun efrit-todo-test-twelve (&optional reversed)
  "Return a todo_write input of 12 pending items without ids.
\"Step 1\" to \"Step 12\", or the other way round when REVERSED."
  (let ((items (mapcar (lambda (n) (efrit-todo-test-item (format "Step %d" n) "pending"))
                       (number-sequence 1 12))))
    (apply #'efrit-todo-test-input (if reversed (nreverse items) items))))

(defun efrit-todo-test-ids-in (text)
  "Return the item ids that begin lines of TEXT, in the order of the lines."
  (let ((ids nil)
        (start 0))
    (while (string-match "^ *\\(t[0-9]+\\) " text start)
      (push (match-string 1 text) ids)
      (setq start (match-end 0)))
    (nreverse ids)))

(ert-deftest efrit-todo-test-reorder-is-a-change-in-the-result ()
  "The same 12 items sent in reverse order, without ids, are reordered.
The result says so and shows the list with ids, in its new order,
rather than \"No change\"."
  (efrit-todo-test-with-session
    (efrit-todo-write (efrit-todo-test-twelve))
    (let ((text (efrit-todo-write (efrit-todo-test-twelve t)))
          (reversed (mapcar (lambda (n) (format "t%d" n)) (number-sequence 12 1 -1))))
      (should (equal (efrit-todo-test-ids) reversed))
      (should-not (string-match-p "No change" text))
      (should (string-match-p "\\<[Rr]eordered\\>" text))
      (should (equal (efrit-todo-test-ids-in text) reversed)))))

(ert-deftest efrit-todo-test-reorder-is-a-change-in-history-and-undo ()
  "A reorder is an undoable entry of the history, and the change hook runs."
  (efrit-todo-test-with-session
    (efrit-todo-write (efrit-todo-test-twelve))
    (let ((entries (length (efrit-todo-history))))
      (efrit-todo-test-recording-changes calls
        (efrit-todo-write (efrit-todo-test-twelve t))
        (should (equal calls (list (list efrit-todo-current-session)))))
      (should (= (length (efrit-todo-history)) (1+ entries)))
      (let ((change (efrit-todo-test-last-change)))
        (should (plist-get change :moved))
        (should (plist-get change :undoable)))
      (should (efrit-todo-undo))
      (should (equal (efrit-todo-test-ids)
                     (mapcar (lambda (n) (format "t%d" n)) (number-sequence 1 12)))))))

(ert-deftest efrit-todo-test-reorder-is-saved ()
  "The saved file holds the list in its new order after a reorder."
  (skip-unless (boundp 'efrit-todo-state-directory))
  (efrit-todo-test-with-state-directory
    (efrit-todo-test-with-session
      (efrit-todo-write (efrit-todo-test-twelve))
      (efrit-todo-flush)
      (efrit-todo-write (efrit-todo-test-twelve t))
      (efrit-todo-flush)
      (let* ((json-object-type 'alist)
             (json-array-type 'list)
             (json-key-type 'string)
             (saved (json-read-file (efrit-todo-state-file))))
        (should (equal (mapcar (lambda (item) (cdr (assoc "id" item)))
                               (cdr (assoc "items" saved)))
                       (mapcar (lambda (n) (format "t%d" n)) (number-sequence 12 1 -1))))))))

(ert-deftest efrit-todo-test-reorder-is-not-churn ()
  "The breaker's churn rule counts writes that change nothing, not reorders."
  (efrit-todo-test-with-session
    (let ((write (lambda (input)
                   (efrit-todo-after-tool "todo_write" input (efrit-todo-write input) nil))))
      (funcall write (efrit-todo-test-twelve))
      (funcall write (efrit-todo-test-twelve t))
      (should (equal (plist-get (efrit-todo-breaker) :churn) 0))
      (funcall write (efrit-todo-test-twelve))
      (should (equal (plist-get (efrit-todo-breaker) :churn) 0))
      ;; The same order again is a write that changes nothing.
      (funcall write (efrit-todo-test-twelve))
      (should (equal (plist-get (efrit-todo-breaker) :churn) 1)))))

;;;; In progress, dropped items, changes

(ert-deftest efrit-todo-test-first-in-progress-wins ()
  "With several in_progress items the first stays; the rest become pending."
  (efrit-todo-test-with-session
    (let ((text (efrit-todo-test-write (efrit-todo-test-item "a" "pending")
                                       (efrit-todo-test-item "b" "in_progress")
                                       (efrit-todo-test-item "c" "in_progress")
                                       (efrit-todo-test-item "d" "In Progress"))))
      (should (equal (efrit-todo-test-statuses) '(pending in-progress pending pending)))
      (should (equal (plist-get (efrit-todo-current) :id) "t2"))
      (should (equal (plist-get (efrit-todo-counts) :in-progress) 1))
      (should (equal (efrit-todo-test-line text "Warning: ")
                     (concat "Warning: only one item may be in_progress: "
                             "t2 stays in progress, t3, t4 set back to pending.")))
      (should (string-match-p (regexp-quote "  t3 [pending] c\n") text))
      (should (string-suffix-p "\nNext: work on t2." text)))
    (should (equal (plist-get (efrit-todo-test-last-change) :demoted) '("t3" "t4")))))

(ert-deftest efrit-todo-test-dropped-items-are-reported ()
  "An unfinished item missing from the new list is reported by id and content."
  (efrit-todo-test-with-session
    (efrit-todo-test-write (efrit-todo-test-item "Keep me" "in_progress")
                           (efrit-todo-test-item "Lose me" "pending")
                           (efrit-todo-test-item "Also running away" "pending")
                           (efrit-todo-test-item "Done already" "completed"))
    (let ((text (efrit-todo-test-write (efrit-todo-test-item "Keep me" "in_progress" "id" "t1"))))
      (should (string-prefix-p
               (concat "Warning: unfinished items missing from this list were dropped: "
                       "t2 [pending] Lose me; t3 [pending] Also running away; "
                       "if you meant to abandon them, set them cancelled; "
                       "otherwise send them again with their ids, or use merge")
               (efrit-todo-test-line text "Warning: ")))
      ;; A finished item leaving is not warned about, only named.
      (should (equal (efrit-todo-test-line text "Removed finished items: ")
                     "Removed finished items: t4"))
      (should-not (string-match-p "Done already" text)))
    (let ((change (efrit-todo-test-last-change)))
      (should (equal (plist-get change :summary) "dropped t2, t3; removed t4"))
      (should (equal (plist-get change :dropped) '("t2" "t3")))
      (should (equal (plist-get change :removed) '("t4"))))
    (should (equal (efrit-todo-test-ids) '("t1")))
    (should (equal (plist-get (efrit-todo-counts) :total) 1))))

(ert-deftest efrit-todo-test-dropped-in-progress-item ()
  "A dropped in-progress item says it was in_progress."
  (efrit-todo-test-with-session
    (efrit-todo-test-write (efrit-todo-test-item "Working on it" "in_progress")
                           (efrit-todo-test-item "Next thing" "pending"))
    (let ((text (efrit-todo-test-write (efrit-todo-test-item "Next thing" "pending" "id" "t2"))))
      (should (string-match-p
               (regexp-quote "dropped: t1 [in_progress] Working on it; ")
               text)))))

(ert-deftest efrit-todo-test-transitions-and-timestamps ()
  "Every kind of transition is recorded in the history; timestamps follow."
  (efrit-todo-test-with-session
    (let ((first (efrit-todo-test-write (efrit-todo-test-item "a" "in_progress")
                                        (efrit-todo-test-item "b" "completed")
                                        (efrit-todo-test-item "c" "pending")
                                        (efrit-todo-test-item "d" "pending"))))
      (should (string-prefix-p "[TODO list updated: 1/4 done]\n" first)))
    (should (equal (efrit-todo-counts)
                   '(:total 4 :pending 2 :in-progress 1 :completed 1 :cancelled 0)))
    (should (numberp (plist-get (nth 1 (efrit-todo-list)) :completed)))
    (let ((text (efrit-todo-test-write (efrit-todo-test-item "a" "pending" "id" "t1")
                                       (efrit-todo-test-item "b" "in_progress" "id" "t2")
                                       (efrit-todo-test-item "c" "cancelled" "id" "t3")
                                       (efrit-todo-test-item "d" "completed" "id" "t4")
                                       (efrit-todo-test-item "e" "pending"))))
      (should (equal text
                     (concat
                      "[TODO list updated: 1/5 done, 1 cancelled]\n"
                      "  t1 [pending] a\n"
                      "  t2 [in_progress] b\n"
                      "  t3 [cancelled] c\n"
                      "  t4 [completed] d\n"
                      "  t5 [pending] e\n"
                      "Next: work on t2."))))
    (let ((change (efrit-todo-test-last-change)))
      (should (equal (plist-get change :summary)
                     "added t5; completed t4; cancelled t3; reopened t2; paused t1"))
      (should (equal (plist-get change :added) '("t5")))
      (should (equal (plist-get change :completed) '("t4")))
      (should (equal (plist-get change :cancelled) '("t3")))
      (should (equal (plist-get change :reopened) '("t2")))
      (should (equal (plist-get change :paused) '("t1")))
      (should (null (plist-get change :started))))
    (pcase-let ((`(,a ,b ,c ,d ,e) (efrit-todo-list)))
      (should (numberp (plist-get a :started)))
      (should (null (plist-get a :completed)))
      (should (numberp (plist-get b :started)))
      (should (null (plist-get b :completed)))
      (should (null (plist-get c :completed)))
      (should (numberp (plist-get d :completed)))
      (should (null (plist-get e :started))))))

(ert-deftest efrit-todo-test-next-step ()
  "The Next line always says what to do."
  (efrit-todo-test-with-session
    (should (string-suffix-p
             "\nNext: set t1 in_progress and start it (Plan it)."
             (efrit-todo-test-write (efrit-todo-test-item "Plan it" "pending"))))
    ;; The line that starts the item is the next step.
    (let ((text (efrit-todo-test-write (efrit-todo-test-item "Plan it" "in_progress"
                                                             "id" "t1" "activeForm" "Planning it"))))
      (should (equal text (concat "[TODO list updated: 0/1 done]\n"
                                  "t1 in_progress: Planning it"))))
    ;; A change that does not start it says what to do with it.
    (should (string-suffix-p
             "\nNext: work on t1; mark it completed when it is done."
             (efrit-todo-write '((merge . t) (todos . [((id . "t1") (content . "Plan it well"))])))))
    (should (string-suffix-p
             "\nNext: every item is finished; give the user the result."
             (efrit-todo-test-write (efrit-todo-test-item "Plan it" "completed" "id" "t1"))))
    (should (string-suffix-p
             "\nNext: the list is empty; write a plan when the task needs three or more steps."
             (efrit-todo-write (efrit-todo-test-object "todos" []))))))

;;;; Long lists

(defun efrit-todo-test-long-list (n-completed n-cancelled n-pending &optional with-ids)
  "Return items: N-COMPLETED completed, N-CANCELLED cancelled, N-PENDING pending.
With WITH-IDS, give them the ids t1, t2, ... in order."
  (let ((items nil) (n 0))
    (dolist (spec (list (cons n-completed "completed")
                        (cons n-cancelled "cancelled")
                        (cons n-pending "pending")))
      (dotimes (_ (car spec))
        (setq n (1+ n))
        (push (apply #'efrit-todo-test-item (format "Step number %d" n) (cdr spec)
                     (and with-ids (list "id" (format "t%d" n))))
              items)))
    (nreverse items)))

(defun efrit-todo-test-resend-long-list-adding-one (n-completed n-cancelled n-pending)
  "Resend the long list of N-COMPLETED, N-CANCELLED, N-PENDING items, plus one.
The items go with their ids, and one pending item is added at the end,
named as the next step number.  Return the result of the write."
  (apply #'efrit-todo-test-write
         (append (efrit-todo-test-long-list n-completed n-cancelled n-pending t)
                 (list (efrit-todo-test-item
                        (format "Step number %d" (+ n-completed n-cancelled n-pending 1))
                        "pending")))))

(ert-deftest efrit-todo-test-long-list-is-summarised ()
  "Above the threshold, a shown list counts what it leaves out."
  (efrit-todo-test-with-session
    (let ((efrit-todo-full-list-threshold 5))
      ;; A new plan longer than the threshold: its first items, the rest
      ;; counted, and, since not every new id was shown, how the ids run.
      (let ((first (apply #'efrit-todo-test-write (efrit-todo-test-long-list 5 1 1))))
        (should (equal first
                       (concat "[TODO list updated: 5/7 done, 1 cancelled]\n"
                               "  t1 [completed] Step number 1\n"
                               "  t2 [completed] Step number 2\n"
                               "  t3 [completed] Step number 3\n"
                               "  t4 [completed] Step number 4\n"
                               "  t5 [completed] Step number 5\n"
                               "  ... and 2 more changed items not shown\n"
                               "New ids follow the order you sent: t1 to t7.\n"
                               "Next: set t7 in_progress and start it (Step number 7)."))))
      ;; An item added to it: unchanged finished items are counted, not
      ;; shown; unchanged open ones and the new one are shown.
      (let ((text (efrit-todo-test-resend-long-list-adding-one 5 1 1)))
        (should (equal text
                       (concat "[TODO list updated: 5/8 done, 1 cancelled]\n"
                               "  t7 [pending] Step number 7\n"
                               "  t8 [pending] Step number 8\n"
                               "  ... and 6 unchanged finished items not shown "
                               "(5 completed, 1 cancelled)\n"
                               "Next: set t7 in_progress and start it (Step number 7).")))
        (should-not (string-match-p (regexp-quote "t1 [completed]") text)))
      ;; The list itself keeps every item.
      (should (= (length (efrit-todo-list)) 8))
      ;; A finished item that changed in this write is still shown.
      (let ((items (append (efrit-todo-test-long-list 5 1 1 t)
                           (list (efrit-todo-test-item "Step number 8" "pending" "id" "t8")
                                 (efrit-todo-test-item "Step number 9" "pending")))))
        (puthash "status" "completed" (nth 6 items))
        (let ((text (apply #'efrit-todo-test-write items)))
          (should (string-match-p (regexp-quote "  t7 [completed] Step number 7\n") text))
          (should (string-match-p (regexp-quote "  t9 [pending] Step number 9\n") text))
          (should (string-match-p
                   (regexp-quote "  ... and 6 unchanged finished items not shown (5 completed, 1 cancelled)\n")
                   text))))
      (should (equal (efrit-todo-test-summary) "added t9; completed t7")))))

(ert-deftest efrit-todo-test-long-list-counts-hidden-pending-items ()
  "Above the threshold, only the first pending items are shown."
  (efrit-todo-test-with-session
    (let ((efrit-todo-full-list-threshold 3))
      (apply #'efrit-todo-test-write (efrit-todo-test-long-list 0 0 6))
      (let ((text (efrit-todo-test-resend-long-list-adding-one 0 0 6)))
        (should (equal text
                       (concat "[TODO list updated: 0/7 done]\n"
                               "  t1 [pending] Step number 1\n"
                               "  t2 [pending] Step number 2\n"
                               "  t3 [pending] Step number 3\n"
                               "  t7 [pending] Step number 7\n"
                               "  ... and 3 more pending items not shown\n"
                               "Next: set t1 in_progress and start it (Step number 1)."))))
      (should (= (length (efrit-todo-list)) 7)))))

(ert-deftest efrit-todo-test-many-changes-are-named-up-to-ten ()
  "A write changing more than ten items names ten and counts the rest."
  (efrit-todo-test-with-session
    (apply #'efrit-todo-test-write (efrit-todo-test-long-list 0 0 12))
    (let* ((items (efrit-todo-test-long-list 0 0 12 t))
           (text (progn (dolist (item items) (puthash "status" "completed" item))
                        (apply #'efrit-todo-test-write items)))
           (lines (split-string text "\n")))
      (should (equal (car lines) "[TODO list updated: 12/12 done]"))
      (should (equal (nth 1 lines) "t1 completed: Step number 1"))
      (should (equal (nth 10 lines) "t10 completed: Step number 10"))
      (should (equal (nth 11 lines) "... and 2 more changed"))
      (should (equal (nth 12 lines) "Next: every item is finished; give the user the result."))
      (should (= (length lines) 13))
      (should-not (string-match-p "t11\\|t12" text)))
    (should (equal (plist-get (efrit-todo-test-last-change) :completed)
                   '("t1" "t2" "t3" "t4" "t5" "t6" "t7" "t8" "t9" "t10" "t11" "t12")))))

(ert-deftest efrit-todo-test-list-at-threshold-is-shown-in-full ()
  "A list of exactly the threshold is shown in full; default threshold is 30."
  (efrit-todo-test-with-session
    (let ((efrit-todo-full-list-threshold 5))
      (apply #'efrit-todo-test-write (efrit-todo-test-long-list 3 0 1))
      (let ((text (efrit-todo-test-resend-long-list-adding-one 3 0 1)))
        (should (equal text
                       (concat "[TODO list updated: 3/5 done]\n"
                               "  t1 [completed] Step number 1\n"
                               "  t2 [completed] Step number 2\n"
                               "  t3 [completed] Step number 3\n"
                               "  t4 [pending] Step number 4\n"
                               "  t5 [pending] Step number 5\n"
                               "Next: set t4 in_progress and start it (Step number 4)."))))))
  (efrit-todo-test-with-session
    (apply #'efrit-todo-test-write (efrit-todo-test-long-list 30 0 1))
    (let ((text (efrit-todo-test-resend-long-list-adding-one 30 0 1)))
      (should (string-match-p
               (regexp-quote "\n  ... and 30 unchanged finished items not shown (30 completed, 0 cancelled)\n")
               text))
      (should (string-match-p (regexp-quote "\n  t31 [pending] Step number 31\n") text))
      (should (string-match-p (regexp-quote "\n  t32 [pending] Step number 32\n") text))
      (should-not (string-match-p (regexp-quote "t30 [completed]") text)))))

;;;; Merge

(ert-deftest efrit-todo-test-merge-updates-by-id ()
  "With merge, items named by id change only the fields they carry."
  (efrit-todo-test-with-session
    (efrit-todo-test-seed)
    (let ((text (efrit-todo-write
                 '((merge . t)
                   (todos . [((id . "t2") (status . "completed"))
                             ((id . "t3") (status . "in_progress")
                              (activeForm . "Running the tests"))])))))
      (should (equal text
                     (concat "[TODO list updated: 2/3 done]\n"
                             "t2 completed: Fix the bug\n"
                             "t3 in_progress: Running the tests"))))
    (should (equal (efrit-todo-test-ids) '("t1" "t2" "t3")))
    (should (equal (efrit-todo-test-contents)
                   '("Read the file" "Fix the bug" "Run the tests")))
    (should (equal (efrit-todo-test-statuses) '(completed completed in-progress)))
    (should (equal (efrit-todo-test-field :active-form)
                   '("Read the file" "Fixing the bug" "Running the tests")))
    (should (equal (efrit-todo-test-summary) "started t3; completed t2"))
    ;; Only content: the item is reworded, its status stays.
    (efrit-todo-write '((merge . t) (todos . [((id . "t1") (content . "Read the whole file"))])))
    (should (equal (efrit-todo-test-contents)
                   '("Read the whole file" "Fix the bug" "Run the tests")))
    (should (equal (efrit-todo-test-statuses) '(completed completed in-progress)))
    (should (equal (efrit-todo-test-summary) "reworded t1"))))

(ert-deftest efrit-todo-test-merge-adds-at-the-end ()
  "With merge, an item without id is added at the end; a hash table works too."
  (efrit-todo-test-with-session
    (efrit-todo-test-seed)
    (let ((text (efrit-todo-write
                 (efrit-todo-test-object
                  "merge" t
                  "todos" (vector (efrit-todo-test-item "Write the changelog" "pending"))))))
      (should (string-prefix-p "[TODO list updated: 1/4 done]\n" text))
      (should (string-match-p "\\bt4\\b" text))
      (should (string-match-p "Write the changelog" text)))
    (should (equal (efrit-todo-test-ids) '("t1" "t2" "t3" "t4")))
    (should (equal (efrit-todo-test-statuses) '(completed in-progress pending pending)))
    (should (equal (plist-get (efrit-todo-test-last-change) :added) '("t4")))
    ;; JSON false is a whole-list write: what is left out is dropped.
    (efrit-todo-write (efrit-todo-test-json
                       "{\"merge\": false, \"todos\": [{\"id\": \"t2\", \"content\": \"Fix the bug\", \"status\": \"in_progress\"}]}"))
    (should (equal (efrit-todo-test-ids) '("t2")))
    (should (equal (plist-get (efrit-todo-test-last-change) :dropped) '("t3" "t4")))))

(ert-deftest efrit-todo-test-merge-start-wins-over-running-item ()
  "With merge, the item set in_progress wins; the running one goes back to pending."
  (efrit-todo-test-with-session
    (efrit-todo-test-seed)
    (let ((text (efrit-todo-write '((merge . t) (todos . [((id . "t3") (status . "in_progress"))])))))
      (should (equal (efrit-todo-test-line text "Warning: ")
                     (concat "Warning: only one item may be in_progress: "
                             "t3 stays in progress, t2 set back to pending."))))
    (should (equal (efrit-todo-test-statuses) '(completed pending in-progress)))
    (should (equal (plist-get (efrit-todo-current) :id) "t3"))
    (let ((change (efrit-todo-test-last-change)))
      (should (equal (plist-get change :started) '("t3")))
      (should (equal (plist-get change :demoted) '("t2"))))))

;;;; Limits

(ert-deftest efrit-todo-test-limits-at-the-boundary ()
  "Exactly the limit is allowed; content length counts characters."
  (efrit-todo-test-with-session
    (let ((efrit-todo-max-items 2)
          (efrit-todo-max-content-length 5))
      (efrit-todo-test-write (efrit-todo-test-item "12345" "pending")
                             (efrit-todo-test-item "é2345" "pending"))
      (should (equal (efrit-todo-test-contents) '("12345" "é2345")))
      (should-error (efrit-todo-test-write (efrit-todo-test-item "123456" "pending"))
                    :type 'efrit-todo-invalid-input)
      (should-error (efrit-todo-test-write (efrit-todo-test-item "a" "pending")
                                           (efrit-todo-test-item "b" "pending")
                                           (efrit-todo-test-item "c" "pending"))
                    :type 'efrit-todo-invalid-input)
      (should (equal (efrit-todo-test-contents) '("12345" "é2345"))))
    ;; The limits are read on every call.
    (efrit-todo-test-write (efrit-todo-test-item "123456" "pending")
                           (efrit-todo-test-item "b" "pending")
                           (efrit-todo-test-item "c" "pending"))
    (should (equal (efrit-todo-test-contents) '("123456" "b" "c")))))

;;;; Bad inputs

(defvar efrit-todo-test-bad-input nil
  "The input `efrit-todo-test-write-bad-input' writes.
It is passed this way rather than as an argument so that a failing
test does not make ERT print it: some bad inputs are nested 10000
deep, which the printer refuses.")

(defun efrit-todo-test-write-bad-input ()
  "Write `efrit-todo-test-bad-input' to the current session."
  (efrit-todo-write efrit-todo-test-bad-input))

(defvar efrit-todo-state-directory)
(declare-function efrit-todo-save "efrit-todo")

(defun efrit-todo-test-disk-state ()
  "Return the state files of `efrit-todo-state-directory' and their contents.
A hook point for persistence: when efrit-todo saves state (the
function `efrit-todo-save' exists), pending saves are flushed first,
so that a refused input can be shown to leave the files as they were.
Without persistence this is nil."
  (when (and (fboundp 'efrit-todo-save) (boundp 'efrit-todo-state-directory)
             efrit-todo-state-directory)
    (if (equal (func-arity 'efrit-todo-save) '(0 . 0))
        (efrit-todo-save)
      (efrit-todo-save nil))
    (when (file-directory-p efrit-todo-state-directory)
      (mapcar (lambda (file)
                (cons file (with-temp-buffer
                             (insert-file-contents-literally file)
                             (buffer-string))))
              (directory-files efrit-todo-state-directory t "\\`[^.]")))))

(defun efrit-todo-test-state ()
  "Return everything a refused call must leave as it was in the session."
  (list :list (efrit-todo-list)
        :history (efrit-todo-history)
        :counts (efrit-todo-counts)
        :current (efrit-todo-current)
        :guidance (efrit-todo-prompt-guidance)
        :ledger (efrit-todo-ledger)
        :breaker (efrit-todo-breaker)
        :report (efrit-todo-report)
        :disk (efrit-todo-test-disk-state)))

(defun efrit-todo-test-check-error (err regexp)
  "Check that ERR is `efrit-todo-invalid-input' with a message matching REGEXP."
  (let ((msg (cadr err)))
    ;; (1) the error symbol itself, not just a parent
    (should (eq (car err) 'efrit-todo-invalid-input))
    ;; (2) a message naming the field
    (should (stringp msg))
    (should (string-match-p regexp msg))
    (should (< (length msg) 400))
    ;; `error-message-string' prints the message with `prin1', so
    ;; only its field path is sure to appear verbatim.
    (should (string-match-p
             (regexp-quote (substring msg 0 (string-match ": " msg)))
             (error-message-string err)))))

(defun efrit-todo-test-check-bad-input (regexp make-input &rest options)
  "Check that the input made by MAKE-INPUT is rejected with REGEXP.
OPTIONS is a plist of :max-items and :max-content, the limits in force.
The input is written over a seeded list; the write must signal
`efrit-todo-invalid-input' with a message matching REGEXP, change
nothing, run no hook, and a valid write must work afterwards."
  (efrit-todo-test-with-state-directory
   (efrit-todo-test-with-session
    (efrit-todo-test-seed)
    (efrit-todo-after-tool "read_file" '(:path "a.el") "contents of a.el" nil)
    (let ((input (funcall make-input))
          (session efrit-todo-current-session)
          (before (efrit-todo-test-state)))
      (efrit-todo-test-recording-changes calls
        (let* ((efrit-todo-max-items
                (or (plist-get options :max-items) efrit-todo-max-items))
               (efrit-todo-max-content-length
                (or (plist-get options :max-content) efrit-todo-max-content-length))
               (efrit-todo-test-bad-input input))
          (efrit-todo-test-check-error
           (should-error (efrit-todo-test-write-bad-input) :type 'efrit-todo-invalid-input)
           regexp))
        ;; (3) nothing changed and nobody was told of a change
        (should (equal (efrit-todo-test-state) before))
        (should (null calls))
        ;; A valid write works afterwards, and no id was used up.
        (let ((text (efrit-todo-test-write
                     (efrit-todo-test-item "Read the file" "completed" "id" "t1")
                     (efrit-todo-test-item "Fix the bug" "completed" "id" "t2")
                     (efrit-todo-test-item "Run the tests" "in_progress" "id" "t3")
                     (efrit-todo-test-item "Write the changelog" "pending"))))
          (should (equal text
                         (concat "[TODO list updated: 2/4 done]\n"
                                 "  t1 [completed] Read the file\n"
                                 "  t2 [completed] Fix the bug\n"
                                 "  t3 [in_progress] Run the tests\n"
                                 "  t4 [pending] Write the changelog\n"
                                 "Next: work on t3.")))
          (should (equal (efrit-todo-test-summary) "added t4; started t3; completed t2")))
        (should (equal (efrit-todo-test-ids) '("t1" "t2" "t3" "t4")))
        (should (equal (efrit-todo-test-statuses)
                       '(completed completed in-progress pending)))
        (should (equal calls (list (list session)))))))))

(defmacro efrit-todo-test-define-bad-inputs (&rest cases)
  "Define one test per bad input in CASES.
Each case is (NAME REGEXP INPUT-FORM . OPTIONS): INPUT-FORM is
evaluated in the test's session after the seed list is written,
REGEXP must match the error message, and OPTIONS are passed to
`efrit-todo-test-check-bad-input'.  Also defines
`efrit-todo-test-bad-input-names', the names of the cases."
  (declare (indent 0))
  `(progn
     (defconst efrit-todo-test-bad-input-names ',(mapcar #'car cases)
       "Names of the bad inputs that have a test.")
     ,@(mapcar
        (lambda (case)
          (pcase-let ((`(,name ,regexp ,form . ,options) case))
            `(ert-deftest ,(intern (format "efrit-todo-test-bad-input/%s" name)) ()
               ,(format "Bad input `%s' is rejected naming the field; nothing changes." name)
               (efrit-todo-test-check-bad-input ,regexp (lambda () ,form) ,@options))))
        cases)))

(defun efrit-todo-test-deep-vector (depth leaf)
  "Return LEAF nested in DEPTH one-element vectors."
  (let ((value leaf))
    (dotimes (_ depth)
      (setq value (vector value)))
    value))

(efrit-todo-test-define-bad-inputs
  ;; Not an object at all
  (input-number
   "\\`input: expected an object with a todos array, got integer 42\\'"
   42)
  (input-float
   "\\`input: expected an object with a todos array, got number 1\\.5\\'"
   1.5)
  (input-symbol
   "\\`input: expected an object with a todos array, got symbol some-symbol\\'"
   'some-symbol)
  (input-buffer
   "\\`input: expected an object with a todos array, got a buffer\\'"
   (current-buffer))
  (input-hash-table-with-integer-key
   "\\`input: "
   (let ((table (make-hash-table)))
     (puthash 1 (vector) table)
     table))
  (json-string-not-an-object
   "\\`input: expected an object with a todos array, got string \"just text\"\\'"
   "\"just text\"")
  (json-malformed
   "\\`input: not valid JSON: "
   "{\"todos\": [{\"content\": \"a\", \"status\": ")
  (json-nested-10000-deep
   "\\`input: not valid JSON: "
   (concat "{\"todos\": " (make-string 10000 ?\[) (make-string 10000 ?\]) "}"))
  ;; The todos field
  (todos-missing
   "\\`todos: is required"
   (efrit-todo-test-object "items" (vector (efrit-todo-test-item "a" "pending"))))
  (todos-missing-in-alist
   "\\`todos: is required"
   '((tasks . [((content . "a") (status . "pending"))])))
  (todos-a-string
   "\\`todos: expected an array of items, got string \"a, b\"\\'"
   (efrit-todo-test-object "todos" "a, b"))
  (todos-a-number
   "\\`todos: expected an array of items, got integer 3\\'"
   (efrit-todo-test-object "todos" 3))
  ;; null is not an empty list: a model that sends it has lost its list.
  (todos-json-null
   "\\`todos: expected an array of items, got nil\\'"
   "{\"todos\": null}")
  (todos-json-null-parsed
   "\\`todos: expected an array of items, got nil\\'"
   (efrit-todo-test-json "{\"todos\": null}"))
  (todos-null-keyword
   "\\`todos: expected an array of items, got nil\\'"
   '((todos . :null)))
  (todos-json-null-keyword
   "\\`todos: expected an array of items, got nil\\'"
   (efrit-todo-test-object "todos" :json-null))
  ;; merge
  (merge-a-string
   "\\`merge: expected true or false, got string \"yes\"\\'"
   '((merge . "yes") (todos . [((id . "t3") (status . "completed"))])))
  (merge-a-string-in-a-table
   "\\`merge: expected true or false, got string \"yes\"\\'"
   (efrit-todo-test-object "todos" (vector (efrit-todo-test-object "id" "t3" "status" "completed"))
                           "merge" "yes"))
  (merge-unknown-id
   "\\`todos\\[1\\]\\.id: unknown id \"t9\": "
   '((merge . t) (todos . [((id . "t2") (status . "completed"))
                           ((id . "t9") (status . "completed"))])))
  (merge-new-item-without-content
   "\\`todos\\[0\\]\\.content: is required for a new item"
   (efrit-todo-test-object "merge" t
                           "todos" (vector (efrit-todo-test-object "status" "pending"))))
  (merge-bad-status
   "\\`todos\\[0\\]\\.status: expected pending, in_progress, completed or cancelled, got \"done\"\\'"
   '((merge . t) (todos . [((id . "t3") (status . "done"))])))
  (todos-circular-list
   "\\`todos: expected an array of items, got a circular or dotted list\\'"
   (let ((items (list (efrit-todo-test-item "a" "pending")
                      (efrit-todo-test-item "b" "pending"))))
     (setcdr (last items) items)
     (efrit-todo-test-object "todos" items)))
  (todos-dotted-list
   "\\`todos: expected an array of items, got a circular or dotted list\\'"
   (efrit-todo-test-object "todos" (cons (efrit-todo-test-item "a" "pending") 7)))
  (todos-nested-10000-deep
   "\\`todos\\[0\\]: expected an object with content and status, got "
   (efrit-todo-test-object "todos" (efrit-todo-test-deep-vector 10000 (vector))))
  (too-many-items
   "\\`todos: has 4 items; the limit is 3\\'"
   (efrit-todo-test-input (efrit-todo-test-item "a" "pending")
                          (efrit-todo-test-item "b" "pending")
                          (efrit-todo-test-item "c" "pending")
                          (efrit-todo-test-item "d" "pending"))
   :max-items 3)
  ;; Items
  (item-a-number
   "\\`todos\\[1\\]: expected an object with content and status, got integer 3\\'"
   (efrit-todo-test-input (efrit-todo-test-item "a" "pending") 3))
  (item-a-string
   "\\`todos\\[0\\]: expected an object with content and status, got string \"Fix it\"\\'"
   (efrit-todo-test-input "Fix it"))
  ;; content
  (content-missing
   "\\`todos\\[0\\]\\.content: is required\\'"
   (efrit-todo-test-input (efrit-todo-test-object "status" "pending")))
  (content-empty
   "\\`todos\\[0\\]\\.content: must not be empty\\'"
   (efrit-todo-test-input (efrit-todo-test-item "" "pending")))
  (content-whitespace
   "\\`todos\\[1\\]\\.content: must not be empty\\'"
   (efrit-todo-test-input (efrit-todo-test-item "a" "pending")
                          (efrit-todo-test-item " \t\n  " "pending")))
  (content-a-number
   "\\`todos\\[0\\]\\.content: expected a string, got integer 7\\'"
   (efrit-todo-test-input (efrit-todo-test-item 7 "pending")))
  (content-a-symbol
   "\\`todos\\[0\\]\\.content: expected a string, got symbol fix-the-bug\\'"
   (efrit-todo-test-input (efrit-todo-test-item 'fix-the-bug "pending")))
  (content-json-false
   "\\`todos\\[0\\]\\.content: expected a string, got boolean false\\'"
   (efrit-todo-test-json "{\"todos\": [{\"content\": false, \"status\": \"pending\"}]}"))
  (content-a-marker
   "\\`todos\\[0\\]\\.content: expected a string, got a marker\\'"
   (efrit-todo-test-input (efrit-todo-test-item (point-marker) "pending")))
  (content-nested-10000-deep
   "\\`todos\\[0\\]\\.content: expected a string, got "
   (efrit-todo-test-input
    (efrit-todo-test-item (efrit-todo-test-deep-vector 10000 "x") "pending")))
  (content-unibyte-high-bytes
   "\\`todos\\[0\\]\\.content: .*UTF-8"
   (efrit-todo-test-input
    (efrit-todo-test-item (string-to-unibyte "\377abc") "pending")))
  (content-raw-byte-in-multibyte-string
   "\\`todos\\[2\\]\\.content: .*UTF-8"
   (efrit-todo-test-input (efrit-todo-test-item "a" "pending")
                          (efrit-todo-test-item "b" "pending")
                          (efrit-todo-test-item (string-to-multibyte "ok \377") "pending")))
  (content-nul-byte
   "\\`todos\\[0\\]\\.content: contains a NUL character\\'"
   (efrit-todo-test-input (efrit-todo-test-item "before\0after" "pending")))
  (content-over-limit
   "\\`todos\\[0\\]\\.content: is 6 characters long; the limit is 5\\'"
   (efrit-todo-test-input (efrit-todo-test-item "123456" "pending"))
   :max-content 5)
  (content-over-default-limit
   "\\`todos\\[1\\]\\.content: is 2001 characters long; the limit is 2000\\'"
   (efrit-todo-test-input (efrit-todo-test-item "a" "pending")
                          (efrit-todo-test-item (make-string 2001 ?x) "pending")))
  ;; status
  (status-missing
   "\\`todos\\[0\\]\\.status: is required"
   (efrit-todo-test-input (efrit-todo-test-object "content" "a")))
  (status-done
   "\\`todos\\[2\\]\\.status: expected pending, in_progress, completed or cancelled, got \"done\"\\'"
   (efrit-todo-test-input (efrit-todo-test-item "a" "pending")
                          (efrit-todo-test-item "b" "pending")
                          (efrit-todo-test-item "c" "done")))
  (status-done-in-json
   "\\`todos\\[0\\]\\.status: expected pending, in_progress, completed or cancelled, got \"done\"\\'"
   "{\"todos\": [{\"content\": \"a\", \"status\": \"done\"}]}")
  (status-a-number
   "\\`todos\\[0\\]\\.status: expected pending, in_progress, completed or cancelled, got integer 3\\'"
   (efrit-todo-test-input (efrit-todo-test-item "a" 3)))
  (status-in-plist
   "\\`todos\\[0\\]\\.status: expected pending, in_progress, completed or cancelled, got \"finished\"\\'"
   (list :todos (vector (list :content "a" :status "finished"))))
  ;; activeForm
  (active-form-a-number
   "\\`todos\\[0\\]\\.activeForm: expected a string, got integer 1\\'"
   (efrit-todo-test-input (efrit-todo-test-item "a" "pending" "activeForm" 1)))
  (active-form-over-limit
   "\\`todos\\[0\\]\\.activeForm: is 6 characters long; the limit is 5\\'"
   (efrit-todo-test-input (efrit-todo-test-item "abc" "pending" "activeForm" "abcdef"))
   :max-content 5)
  (active-form-raw-byte
   "\\`todos\\[0\\]\\.activeForm: .*UTF-8"
   (efrit-todo-test-input (efrit-todo-test-item "a" "pending" "activeForm" "\xff")))
  ;; id
  (id-a-number
   "\\`todos\\[0\\]\\.id: expected a string, got integer 5\\'"
   (efrit-todo-test-input (efrit-todo-test-item "a" "pending" "id" 5)))
  (id-empty
   "\\`todos\\[0\\]\\.id: must not be empty\\'"
   (efrit-todo-test-input (efrit-todo-test-item "a" "pending" "id" "")))
  (id-unknown
   "\\`todos\\[1\\]\\.id: unknown id \"t99\": "
   (efrit-todo-test-input (efrit-todo-test-item "Read the file" "completed" "id" "t1")
                          (efrit-todo-test-item "Fix the bug" "pending" "id" "t99")))
  (id-from-another-session
   "\\`todos\\[0\\]\\.id: unknown id \"t5\""
   (progn
     ;; Another session has issued t5; this one has not.
     (efrit-todo-write (apply #'efrit-todo-test-input (efrit-todo-test-long-list 0 0 5))
                       (format "test-%s" (cl-gensym)))
     (efrit-todo-test-input (efrit-todo-test-item "Step number 5" "pending" "id" "t5"))))
  (id-duplicate
   "\\`todos\\[1\\]\\.id: \"t1\" is also the id of todos\\[0\\]; every item needs its own id\\'"
   (efrit-todo-test-input (efrit-todo-test-item "Read the file" "completed" "id" "t1")
                          (efrit-todo-test-item "Fix the bug" "pending" "id" "t1")))
  ;; More shapes, sizes and encodings
  (input-marker
   "\\`input: expected an object with a todos array, got a marker\\'"
   (point-marker))
  (input-plist-without-value
   "\\`todos\\[0\\]: expected an object with content and status, got symbol :todos\\'"
   (list :todos))
  (todos-a-hash-table
   "\\`todos: expected an array of items, got an object\\'"
   (efrit-todo-test-object "todos" (efrit-todo-test-item "a" "pending")))
  (todos-a-buffer
   "\\`todos: expected an array of items, got a buffer\\'"
   (efrit-todo-test-object "todos" (current-buffer)))
  (todos-100000-items
   "\\`todos: has 100000 items; the limit is 1000\\'"
   (efrit-todo-test-object "todos" (make-vector 100000 (efrit-todo-test-item "a" "pending"))))
  (item-circular-list
   "\\`todos\\[0\\]: expected an object with content and status, got a circular or dotted list\\'"
   (let ((item (list (cons "content" "a") (cons "status" "pending"))))
     (setcdr (last item) item)
     (efrit-todo-test-input item)))
  (item-a-buffer
   "\\`todos\\[0\\]: expected an object with content and status, got a buffer\\'"
   (efrit-todo-test-input (current-buffer)))
  (content-one-megabyte
   "\\`todos\\[0\\]\\.content: is 1048576 characters long; the limit is 2000\\'"
   (efrit-todo-test-input (efrit-todo-test-item (make-string (* 1024 1024) ?x) "pending")))
  (content-a-float
   "\\`todos\\[0\\]\\.content: expected a string, got number 2\\.5\\'"
   (efrit-todo-test-input (efrit-todo-test-item 2.5 "pending")))
  (content-a-hash-table
   "\\`todos\\[0\\]\\.content: expected a string, got an object\\'"
   (efrit-todo-test-input (efrit-todo-test-item (efrit-todo-test-object "text" "a") "pending")))
  (content-circular-list
   "\\`todos\\[0\\]\\.content: expected a string, got a circular or dotted list\\'"
   (let ((words (list "fix" "it")))
     (setcdr (last words) words)
     (efrit-todo-test-input (efrit-todo-test-item words "pending"))))
  (status-empty
   "\\`todos\\[0\\]\\.status: expected pending, in_progress, completed or cancelled, got \"\"\\'"
   (efrit-todo-test-input (efrit-todo-test-item "a" "")))
  (status-null-in-json
   "\\`todos\\[0\\]\\.status: is required"
   "{\"todos\": [{\"content\": \"a\", \"status\": null}]}")
  (status-a-vector
   "\\`todos\\[0\\]\\.status: expected pending, in_progress, completed or cancelled, got an array of 1 elements\\'"
   (efrit-todo-test-input (efrit-todo-test-item "a" ["pending"])))
  (active-form-a-vector
   "\\`todos\\[0\\]\\.activeForm: expected a string, got an array of 2 elements\\'"
   (efrit-todo-test-input (efrit-todo-test-item "a" "pending" "activeForm" ["Doing" "it"])))
  (id-a-symbol
   "\\`todos\\[0\\]\\.id: expected a string, got symbol t1\\'"
   (efrit-todo-test-input (efrit-todo-test-item "Read the file" "completed" "id" 't1)))
  (id-whitespace
   "\\`todos\\[0\\]\\.id: must not be empty\\'"
   (efrit-todo-test-input (efrit-todo-test-item "a" "pending" "id" " \t")))
  (id-with-nul
   "\\`todos\\[0\\]\\.id: contains a NUL character\\'"
   (efrit-todo-test-input (efrit-todo-test-item "a" "pending" "id" "t1\0")))
  (json-invalid-utf-8
   "\\`input: a string that is not valid UTF-8\\'"
   (string-to-unibyte "{\"todos\": [{\"content\": \"\377\", \"status\": \"pending\"}]}"))
  (json-nul-in-content
   "\\`todos\\[0\\]\\.content: contains a NUL character\\'"
   "{\"todos\": [{\"content\": \"a\\u0000b\", \"status\": \"pending\"}]}")
  (json-empty-text
   "\\`input: not valid JSON: "
   "")
  (json-number-for-content
   "\\`todos\\[0\\]\\.content: expected a string, got integer 12\\'"
   "{\"todos\": [{\"content\": 12, \"status\": \"pending\"}]}"))

(defvar efrit-todo-test-bad-call nil
  "The function of no arguments `efrit-todo-test-make-bad-call' calls.
Passed this way for the reason given at `efrit-todo-test-bad-input'.")

(defun efrit-todo-test-make-bad-call ()
  "Call `efrit-todo-test-bad-call'."
  (funcall efrit-todo-test-bad-call))

(defun efrit-todo-test-check-bad-call (function regexp call good-call)
  "Check that CALL, a call of FUNCTION with bad arguments, is refused.
CALL and GOOD-CALL are functions of no arguments.  The session has a
list, a ledger entry and a refused completion; CALL must signal
`efrit-todo-invalid-input' with a message matching REGEXP, change
none of it (the list, counts, ledger, breaker, report, files on disk),
run no hook, and GOOD-CALL, a valid call of FUNCTION, must work
afterwards as if CALL had never been made."
  (efrit-todo-test-with-state-directory
   (efrit-todo-test-with-session
    (efrit-todo-test-seed)
    (efrit-todo-after-tool "read_file" '(:path "a.el") "contents of a.el" nil)
    (let ((before (efrit-todo-test-state)))
      (efrit-todo-test-recording-changes calls
        (let ((efrit-todo-test-bad-call call))
          (efrit-todo-test-check-error
           (should-error (efrit-todo-test-make-bad-call) :type 'efrit-todo-invalid-input)
           regexp))
        (should (equal (efrit-todo-test-state) before))
        (should (null calls)))
      (pcase function
        ('efrit-todo-after-tool
         (should (equal (funcall good-call) "contents of b.el"))
         (should (equal (mapcar (lambda (entry) (plist-get entry :tool)) (efrit-todo-ledger))
                        '("read_file" "read_file")))
         (should (= 2 (plist-get (efrit-todo-breaker) :calls))))
        ('efrit-todo-before-tool
         (should (null (funcall good-call))))
        ('efrit-todo-pause
         (should (string-prefix-p "[Paused]" (funcall good-call)))
         (should (null (efrit-todo-turn-end nil))))
        ('efrit-todo-complete
         ;; The bad call did not use up the one refusal: open items still
         ;; refuse the first real completion.
         (let ((completion (funcall good-call)))
           (should (null (plist-get completion :allowed)))
           (should (string-match-p "t2" (plist-get completion :text)))))
        (_ (error "No good call check for %s" function)))))))

(defmacro efrit-todo-test-define-bad-calls (&rest cases)
  "Define one test per bad call in CASES.
Each case is (NAME FUNCTION REGEXP BAD-ARGS GOOD-ARGS): FUNCTION is
called with the evaluated BAD-ARGS, must be refused with REGEXP, and
then works with GOOD-ARGS; see `efrit-todo-test-check-bad-call'.
Also defines `efrit-todo-test-bad-call-names'."
  (declare (indent 0))
  `(progn
     (defconst efrit-todo-test-bad-call-names
       ',(mapcar (lambda (case) (cons (car case) (cadr case))) cases)
       "Names of the bad calls that have a test, with their function.")
     ,@(mapcar
        (lambda (case)
          (pcase-let ((`(,name ,function ,regexp ,bad ,good) case))
            `(ert-deftest ,(intern (format "efrit-todo-test-bad-call/%s" name)) ()
               ,(format "`%s' refuses `%s' naming the field; nothing changes." function name)
               (efrit-todo-test-check-bad-call
                ',function ,regexp
                (lambda () (,function ,@bad))
                (lambda () (,function ,@good))))))
        cases)))

(efrit-todo-test-define-bad-calls
  ;; after-tool: NAME must be a tool name; INPUT, RESULT and ERROR-P may be
  ;; anything, since the tool has already run with them.
  (after-tool-name-nil efrit-todo-after-tool
   "\\`name: expected a string, got nil\\'"
   (nil '(:path "b.el") "contents of b.el" nil) ("read_file" '(:path "b.el") "contents of b.el" nil))
  (after-tool-name-a-number efrit-todo-after-tool
   "\\`name: expected a string, got integer 42\\'"
   (42 nil "x" nil) ("read_file" '(:path "b.el") "contents of b.el" nil))
  (after-tool-name-a-symbol efrit-todo-after-tool
   "\\`name: expected a string, got symbol read_file\\'"
   ('read_file nil "x" nil) ("read_file" '(:path "b.el") "contents of b.el" nil))
  (after-tool-name-empty efrit-todo-after-tool
   "\\`name: must not be empty\\'"
   ("" nil "x" nil) ("read_file" '(:path "b.el") "contents of b.el" nil))
  (after-tool-name-whitespace efrit-todo-after-tool
   "\\`name: must not be empty\\'"
   (" \n" nil "x" nil) ("read_file" '(:path "b.el") "contents of b.el" nil))
  (after-tool-name-with-nul efrit-todo-after-tool
   "\\`name: contains a NUL character\\'"
   ("read\0file" nil "x" nil) ("read_file" '(:path "b.el") "contents of b.el" nil))
  (after-tool-name-invalid-utf-8 efrit-todo-after-tool
   "\\`name: expected a string, got a string that is not valid UTF-8\\'"
   ((string-to-multibyte "read\377") nil "x" nil) ("read_file" '(:path "b.el") "contents of b.el" nil))
  (after-tool-name-a-buffer efrit-todo-after-tool
   "\\`name: expected a string, got a buffer\\'"
   ((current-buffer) nil "x" nil) ("read_file" '(:path "b.el") "contents of b.el" nil))
  (after-tool-name-a-list efrit-todo-after-tool
   "\\`name: expected a string, got an array of 1 elements\\'"
   ('("read_file") nil "x" nil) ("read_file" '(:path "b.el") "contents of b.el" nil))
  (after-tool-duration-a-string efrit-todo-after-tool
   "\\`duration: expected a number of seconds or nil, got string \"fast\"\\'"
   ("read_file" nil "x" nil nil "fast") ("read_file" '(:path "b.el") "contents of b.el" nil))
  (after-tool-duration-nan efrit-todo-after-tool
   "\\`duration: expected a number of seconds or nil, got number NaN\\'"
   ("read_file" nil "x" nil nil 0.0e+NaN) ("read_file" '(:path "b.el") "contents of b.el" nil))
  (after-tool-session-a-number efrit-todo-after-tool
   "\\`session: expected a string, got 42\\'"
   ("read_file" nil "x" nil 42) ("read_file" '(:path "b.el") "contents of b.el" nil))
  (after-tool-session-empty efrit-todo-after-tool
   "\\`session: expected a non-empty name"
   ("read_file" nil "x" nil "") ("read_file" '(:path "b.el") "contents of b.el" nil))
  ;; before-tool
  (before-tool-name-nil efrit-todo-before-tool
   "\\`name: expected a string, got nil\\'"
   (nil nil) ("read_file" nil))
  (before-tool-name-a-marker efrit-todo-before-tool
   "\\`name: expected a string, got a marker\\'"
   ((point-marker) nil) ("read_file" nil))
  ;; pause: REASON is 1 to 500 characters of text
  (pause-reason-nil efrit-todo-pause
   "\\`reason: expected a string, got nil\\'"
   (nil) ("I need the user's password"))
  (pause-reason-a-number efrit-todo-pause
   "\\`reason: expected a string, got integer 7\\'"
   (7) ("I need the user's password"))
  (pause-reason-a-symbol efrit-todo-pause
   "\\`reason: expected a string, got symbol blocked\\'"
   ('blocked) ("I need the user's password"))
  (pause-reason-empty efrit-todo-pause
   "\\`reason: expected 1 to 500 characters, got 0\\'"
   ("") ("I need the user's password"))
  (pause-reason-whitespace efrit-todo-pause
   "\\`reason: expected 1 to 500 characters, got 0\\'"
   (" \t\n ") ("I need the user's password"))
  (pause-reason-501-characters efrit-todo-pause
   "\\`reason: expected 1 to 500 characters, got 501\\'"
   ((make-string 501 ?x)) ("I need the user's password"))
  (pause-reason-one-megabyte efrit-todo-pause
   "\\`reason: expected 1 to 500 characters, got 1048576\\'"
   ((make-string (* 1024 1024) ?x)) ("I need the user's password"))
  (pause-reason-with-nul efrit-todo-pause
   "\\`reason: contains a NUL character\\'"
   ("blocked\0here") ("I need the user's password"))
  (pause-reason-unibyte efrit-todo-pause
   "\\`reason: expected a string, got a string that is not valid UTF-8\\'"
   ((string-to-unibyte "blocked \377")) ("I need the user's password"))
  (pause-reason-a-buffer efrit-todo-pause
   "\\`reason: expected a string, got a buffer\\'"
   ((current-buffer)) ("I need the user's password"))
  (pause-reason-circular-list efrit-todo-pause
   "\\`reason: expected a string, got a circular or dotted list\\'"
   ((let ((l (list "a"))) (setcdr l l) l)) ("I need the user's password"))
  (pause-reason-deep-vector efrit-todo-pause
   "\\`reason: expected a string, got an array of 1 elements\\'"
   ((efrit-todo-test-deep-vector 10000 "x")) ("I need the user's password"))
  (pause-session-a-symbol efrit-todo-pause
   "\\`session: expected a string, got other\\'"
   ("blocked" 'other) ("I need the user's password"))
  ;; complete: MESSAGE is text or nil
  (complete-message-a-number efrit-todo-complete
   "\\`message: expected a string, got integer 1\\'"
   (1) ("All done"))
  (complete-message-a-symbol efrit-todo-complete
   "\\`message: expected a string, got symbol done\\'"
   ('done) ("All done"))
  (complete-message-with-nul efrit-todo-complete
   "\\`message: contains a NUL character\\'"
   ("All\0done") ("All done"))
  (complete-message-invalid-utf-8 efrit-todo-complete
   "\\`message: expected a string, got a string that is not valid UTF-8\\'"
   ((string-to-multibyte "done \377")) ("All done"))
  (complete-message-a-buffer efrit-todo-complete
   "\\`message: expected a string, got a buffer\\'"
   ((current-buffer)) ("All done"))
  (complete-message-a-hash-table efrit-todo-complete
   "\\`message: expected a string, got an object\\'"
   ((efrit-todo-test-object "text" "done")) ("All done"))
  (complete-message-a-marker efrit-todo-complete
   "\\`message: expected a string, got a marker\\'"
   ((point-marker)) ("All done"))
  (complete-session-a-vector efrit-todo-complete
   "\\`session: expected a string, got \\[\"s\"\\]\\'"
   ("All done" ["s"]) ("All done")))

(ert-deftest efrit-todo-test-bad-inputs-are-many ()
  "At least 45 bad inputs across write, pause, after-tool and complete."
  (should (>= (+ (length efrit-todo-test-bad-input-names)
                 (length efrit-todo-test-bad-call-names))
              45))
  (dolist (function '(efrit-todo-after-tool efrit-todo-pause efrit-todo-complete))
    (should (>= (cl-count function efrit-todo-test-bad-call-names :key #'cdr) 5)))
  (dolist (name efrit-todo-test-bad-input-names)
    (should (ert-test-boundp (intern (format "efrit-todo-test-bad-input/%s" name)))))
  (dolist (case efrit-todo-test-bad-call-names)
    (should (ert-test-boundp (intern (format "efrit-todo-test-bad-call/%s" (car case)))))))

;;;; The change hook

(ert-deftest efrit-todo-test-hook-runs-once-per-write ()
  "The hook runs exactly once per successful write, with the session name."
  (efrit-todo-test-with-session
    (efrit-todo-test-recording-changes calls
      (efrit-todo-test-write (efrit-todo-test-item "a" "pending"))
      (should (equal calls (list (list efrit-todo-current-session))))
      (efrit-todo-test-write (efrit-todo-test-item "a" "in_progress" "id" "t1"))
      (efrit-todo-test-write (efrit-todo-test-item "a" "in_progress" "id" "t1"))
      (should (equal calls (make-list 3 (list efrit-todo-current-session))))
      ;; Failed writes do not run it.
      (should-error (efrit-todo-test-write (efrit-todo-test-item "a" "done"))
                    :type 'efrit-todo-invalid-input)
      (should-error (efrit-todo-write "not json") :type 'efrit-todo-invalid-input)
      (should (= (length calls) 3)))))

(ert-deftest efrit-todo-test-hook-gets-explicit-session ()
  "A write to an explicit SESSION runs the hook with that name."
  (efrit-todo-test-with-session
    (let ((other (format "test-%s" (cl-gensym))))
      (efrit-todo-test-recording-changes calls
        (efrit-todo-write (efrit-todo-test-input (efrit-todo-test-item "a" "pending")) other)
        (should (equal calls (list (list other)))))
      (should (null (efrit-todo-list)))
      (should (equal (efrit-todo-test-contents other) '("a"))))))

(ert-deftest efrit-todo-test-hook-error-does-not-break-write ()
  "A failing hook function neither loses the write nor stops other functions."
  (efrit-todo-test-with-session
    (let ((failing (lambda (_session) (error "Hook failure on purpose"))))
      (efrit-todo-test-recording-changes calls
        ;; Added last, so it runs first, before the recorder.
        (add-hook 'efrit-todo-change-functions failing)
        (unwind-protect
            (let ((inhibit-message t))
              (should (string-prefix-p
                       "[TODO list updated"
                       (efrit-todo-test-write (efrit-todo-test-item "a" "pending")))))
          (remove-hook 'efrit-todo-change-functions failing))
        (should (equal calls (list (list efrit-todo-current-session))))))
    (should (equal (efrit-todo-test-ids) '("t1")))))

(ert-deftest efrit-todo-test-hook-runs-every-function-in-every-form ()
  "Each function runs once despite failures, globally and buffer-locally."
  (efrit-todo-test-with-session
    (let* ((ran nil)
           (fail (lambda (name) (lambda (_session) (push name ran) (error "%s failed" name))))
           (succeed (lambda (name) (lambda (_session) (push name ran))))
           (global (list (funcall fail 'a) (funcall succeed 'b) (funcall fail 'c) (funcall succeed 'd)))
           (efrit-todo-change-functions global)
           (inhibit-message t))
      (efrit-todo--run-change-hook efrit-todo-current-session)
      (should (equal (nreverse ran) '(a b c d)))
      (setq ran nil)
      (with-temp-buffer
        (setq-local efrit-todo-change-functions (list (funcall fail 'local) t))
        (efrit-todo--run-change-hook efrit-todo-current-session))
      (should (equal (nreverse ran) '(local a b c d)))
      (setq ran nil)
      ;; Without t, as in `run-hooks', only the local functions run.
      (with-temp-buffer
        (setq-local efrit-todo-change-functions (list (funcall succeed 'only-local)))
        (efrit-todo--run-change-hook efrit-todo-current-session))
      (should (equal ran '(only-local)))
      (setq ran nil)
      (let ((efrit-todo-change-functions (funcall succeed 'single)))
        (efrit-todo--run-change-hook efrit-todo-current-session))
      (should (equal ran '(single))))))

;;;; Sessions

(ert-deftest efrit-todo-test-sessions ()
  "Sessions are listed oldest first; functions take an explicit SESSION."
  (let ((a (format "test-%s" (cl-gensym)))
        (b (format "test-%s" (cl-gensym))))
    (efrit-todo-write (efrit-todo-test-input (efrit-todo-test-item "in a" "in_progress")) a)
    (efrit-todo-write (efrit-todo-test-input (efrit-todo-test-item "in b" "pending")) b)
    (let ((sessions (efrit-todo-sessions)))
      (should (cl-every #'stringp sessions))
      (should (member a sessions))
      (should (member b sessions))
      (should (< (cl-position a sessions :test #'equal)
                 (cl-position b sessions :test #'equal))))
    (should (equal (plist-get (efrit-todo-current a) :content) "in a"))
    (should (null (efrit-todo-current b)))
    (should (equal (plist-get (efrit-todo-counts b) :pending) 1))
    (should (string-match-p (regexp-quote "t1 [in_progress] in a")
                            (efrit-todo-prompt-guidance a)))
    (efrit-todo-reset a)
    (should (null (efrit-todo-list a)))
    (should (equal (efrit-todo-test-contents b) '("in b")))))

(ert-deftest efrit-todo-test-nil-session-means-default ()
  "With no current session, functions act on the session \"default\"."
  (let ((efrit-todo-current-session nil))
    (efrit-todo-reset "default")
    (unwind-protect
        (progn
          (efrit-todo-test-write (efrit-todo-test-item "Default work" "pending"))
          (should (equal (efrit-todo-test-contents "default") '("Default work")))
          (should (equal (efrit-todo-list) (efrit-todo-list "default")))
          (should (member "default" (efrit-todo-sessions))))
      (efrit-todo-reset "default"))))

(ert-deftest efrit-todo-test-bad-session-is-an-error ()
  "An unusable session name is an input error, not a crash."
  (dolist (session '("" "   " "a\0b"))
    (should-error (efrit-todo-write (efrit-todo-test-input (efrit-todo-test-item "a" "pending"))
                                    session)
                  :type 'efrit-todo-invalid-input))
  (let ((efrit-todo-current-session 42))
    (should-error (efrit-todo-list) :type 'efrit-todo-invalid-input)))

;;;; Schemas and guidance

(defun efrit-todo-test-get (alist &rest keys)
  "Follow string KEYS through nested ALIST."
  (dolist (key keys alist)
    (setq alist (cdr (assoc key alist)))))

(ert-deftest efrit-todo-test-tool-schemas ()
  "The todo_write schema has Efrit's shape and matches what is validated."
  (let* ((schemas (efrit-todo-tool-schemas))
         (write (seq-find (lambda (schema)
                            (equal (efrit-todo-test-get schema "name") "todo_write"))
                          schemas))
         (input (efrit-todo-test-get write "input_schema"))
         (todos (efrit-todo-test-get input "properties" "todos"))
         (item (efrit-todo-test-get todos "items"))
         (properties (efrit-todo-test-get item "properties")))
    (should (listp schemas))
    (should write)
    (should (stringp (efrit-todo-test-get write "description")))
    (should (string-match-p "\"merge\": true" (efrit-todo-test-get write "description")))
    (should (equal (efrit-todo-test-get input "type") "object"))
    (should (equal (efrit-todo-test-get input "required") ["todos"]))
    (should (equal (efrit-todo-test-get todos "type") "array"))
    (should (equal (efrit-todo-test-get item "type") "object"))
    ;; With merge an item may carry only an id and one field, so no item
    ;; field is required by the schema; the validator asks for content
    ;; and status where they are needed.
    (should-not (assoc "required" item))
    (should (equal (efrit-todo-test-get input "properties" "merge" "type") "boolean"))
    (should (stringp (efrit-todo-test-get input "properties" "merge" "description")))
    (should (equal (sort (mapcar #'car (efrit-todo-test-get input "properties")) #'string<)
                   '("merge" "todos")))
    (should (equal (efrit-todo-test-get properties "status" "enum")
                   ["pending" "in_progress" "completed" "cancelled"]))
    (dolist (field '("id" "content" "status" "activeForm"))
      (should (equal (efrit-todo-test-get properties field "type") "string"))
      (should (stringp (efrit-todo-test-get properties field "description"))))
    ;; Every schema encodes to JSON as the API needs it.
    (dolist (schema schemas)
      (let ((decoded (efrit-todo-test-json (json-encode schema))))
        (should (hash-table-p decoded))
        (should (stringp (gethash "name" decoded)))))
    ;; Every status the schema advertises is accepted.
    (efrit-todo-test-with-session
      (efrit-todo-write
       (efrit-todo-test-object
        "todos" (vconcat (seq-map-indexed
                          (lambda (status n)
                            (efrit-todo-test-item (format "Item %d" n) status))
                          (efrit-todo-test-get properties "status" "enum")))))
      (should (equal (efrit-todo-test-statuses)
                     '(pending in-progress completed cancelled))))))

(ert-deftest efrit-todo-test-prompt-guidance ()
  "Guidance is fixed at the first call of a session, until a reset.
It shows the list as it was then, with ids, and how to update it."
  (efrit-todo-test-with-session
    (let ((empty (efrit-todo-prompt-guidance)))
      (should (stringp empty))
      (should (string-prefix-p "TODO LIST: empty when this session started.\n" empty))
      (should (string-match-p "todo_write" empty))
      (should (string-match-p (regexp-quote "\"merge\": true") empty))
      (should-not (string-match-p "\\bt[0-9]+ \\[" empty))
      ;; The list changes; the prompt text does not, so the prompt cache holds.
      (efrit-todo-test-seed)
      (should (equal (efrit-todo-prompt-guidance) empty))
      (efrit-todo-user-set-status "t3" 'cancelled)
      (efrit-todo-after-tool "read_file" nil "x" nil)
      (should (equal (efrit-todo-prompt-guidance) empty))
      ;; A reset starts a new session: the next call takes the list anew.
      (efrit-todo-reset)
      (efrit-todo-test-seed)
      (let ((text (efrit-todo-prompt-guidance)))
        (should (string-prefix-p
                 (concat "TODO LIST when this session started (1/3 done, 1 in progress, 1 pending):\n"
                         "  t4 [completed] Read the file\n"
                         "  t5 [in_progress] Fix the bug\n"
                         "  t6 [pending] Run the tests\n"
                         "Next: work on t5; mark it completed when it is done.\n")
                 text))
        (should (string-match-p "todo_write" text))
        ;; The guidance paragraph is the same with or without a list.
        (should (string-suffix-p (substring empty (length "TODO LIST: empty when this session started.\n"))
                                 text))
        (efrit-todo-test-write (efrit-todo-test-item "Something else" "in_progress"))
        (should (equal (efrit-todo-prompt-guidance) text))))))

;;;; Errors and panics

(ert-deftest efrit-todo-test-wrong-argument-types-are-invalid-input ()
  "Arguments of the wrong type are named as the caller's mistake."
  (let ((err (should-error (efrit-todo-unfinished "not a function")
                           :type 'efrit-todo-invalid-input)))
    (should (string-match-p "predicate" (error-message-string err))))
  (efrit-todo-test-with-session
    (efrit-todo-test-write (efrit-todo-test-item "One" "pending"))
    (let ((err (should-error (efrit-todo--module-set-status
                              efrit-todo-current-session "t1" "\377\376abc")
                             :type 'efrit-todo-invalid-input)))
      (should (string-match-p "status" (error-message-string err))))
    (should-error (efrit-todo--module-set-status efrit-todo-current-session 7 "completed")
                  :type 'efrit-todo-invalid-input)
    (let ((err (should-error (efrit-todo--module-add efrit-todo-current-session "Two" 7 10 100)
                             :type 'efrit-todo-invalid-input)))
      (should (string-match-p "priority" (error-message-string err))))
    (should (equal (plist-get (car (efrit-todo-list)) :status) 'pending))))

(ert-deftest efrit-todo-test-item-count ()
  "The item count agrees with the list, for a session with none too."
  (efrit-todo-test-with-session
    (should (= (efrit-todo--item-count) 0))
    (should (= (efrit-todo--item-count "no-such-session-for-counting") 0))
    (efrit-todo-test-write (efrit-todo-test-item "One" "in_progress")
                           (efrit-todo-test-item "Two" "pending")
                           (efrit-todo-test-item "Three" "pending"))
    (should (= (efrit-todo--item-count) 3))
    (should (= (efrit-todo--item-count) (length (efrit-todo-list))))
    (efrit-todo-reset)
    (should (= (efrit-todo--item-count) 0))))

(ert-deftest efrit-todo-test-loop-options-are-read-by-key ()
  "The module reads loop options by key; a wrong key or value is named."
  (let ((options (list :max-result-chars 7 :hard-cap 3)))
    ;; Keys in any order, the others at their defaults.
    (should (stringp (efrit-todo--module-report "options-test" options))))
  (let ((err (should-error (efrit-todo--module-report "options-test" '(:hard-kap 3))
                           :type 'efrit-todo-invalid-input)))
    (should (string-match-p "options\\.hard-kap" (error-message-string err))))
  (let ((err (should-error (efrit-todo--module-report "options-test" '(:hard-cap "3"))
                           :type 'efrit-todo-invalid-input)))
    (should (string-match-p "options\\.hard-cap" (error-message-string err))))
  (should-error (efrit-todo--module-report "options-test" '(:hard-cap))
                :type 'efrit-todo-invalid-input)
  (should-error (efrit-todo--module-report "options-test" [3 4])
                :type 'efrit-todo-invalid-input)
  ;; Every option the Lisp side has reaches the module under a key it knows.
  (should (stringp (efrit-todo--module-report "options-test" (efrit-todo--make-loop-options)))))

(ert-deftest efrit-todo-test-error-hierarchy ()
  "Every error the module signals is an `efrit-todo-error', each with a message."
  (dolist (child '(efrit-todo-invalid-input efrit-todo-storage-error
                                            efrit-todo-internal-error))
    (let ((conditions (get child 'error-conditions)))
      (should (eq (car conditions) child))
      (should (memq 'efrit-todo-error conditions))
      (should (memq 'error conditions))
      (should (stringp (get child 'error-message)))
      (should (> (length (get child 'error-message)) 0))))
  (should (equal (get 'efrit-todo-error 'error-conditions) '(efrit-todo-error error)))
  ;; Caught as the parent, a caller's mistake still names the field.
  (efrit-todo-test-with-session
    (let ((err (should-error (efrit-todo-write '(:todos [(:content "x" :status "later")]))
                             :type 'efrit-todo-error)))
      (should (eq (car err) 'efrit-todo-invalid-input))
      (should (string-match-p "status" (error-message-string err))))))


(ert-deftest efrit-todo-test-panic-becomes-lisp-error ()
  "A Rust panic arrives as `efrit-todo-internal-error' and Emacs keeps working."
  (efrit-todo-test-with-session
    (efrit-todo-test-write (efrit-todo-test-item "Before the panic" "in_progress"))
    (let ((err (should-error (efrit-todo--module-panic-for-test "deliberate panic 42")
                             :type 'efrit-todo-internal-error)))
      (should (eq (car err) 'efrit-todo-internal-error))
      (should (memq 'efrit-todo-error (get 'efrit-todo-internal-error 'error-conditions)))
      (should (memq 'error (get 'efrit-todo-internal-error 'error-conditions)))
      (should (string-match-p "deliberate panic 42" (format "%S" (cdr err)))))
    ;; Again, to be sure the first one left nothing broken.
    (should-error (efrit-todo--module-panic-for-test "second panic")
                  :type 'efrit-todo-internal-error)
    (should (equal (efrit-todo-test-contents) '("Before the panic")))
    (should (string-prefix-p
             "[TODO list updated"
             (efrit-todo-test-write (efrit-todo-test-item "Before the panic" "completed" "id" "t1")
                                    (efrit-todo-test-item "After the panic" "in_progress"))))
    (should (equal (efrit-todo-test-ids) '("t1" "t2")))
    (should (equal (efrit-todo-test-statuses) '(completed in-progress)))))

;;;; Speed

(ert-deftest efrit-todo-test-largest-write-keeps-ids ()
  "A write of the maximum number of items, sent twice, keeps every id.
Its speed is measured in `make bench', not here."
  (efrit-todo-test-with-session
    (let ((items (cl-loop for n from 1 to efrit-todo-max-items
                          collect (efrit-todo-test-item (format "Step %d of the plan" n)
                                                        "pending"))))
      (apply #'efrit-todo-test-write items)
      (apply #'efrit-todo-test-write items)
      (should (= (plist-get (efrit-todo-counts) :total) efrit-todo-max-items))
      (should (equal (car (efrit-todo-test-ids)) "t1"))
      (should (equal (car (last (efrit-todo-test-ids)))
                     (format "t%d" efrit-todo-max-items))))))

;;;; Efrit's variable

(ert-deftest efrit-todo-test-mirror-is-updated-in-place ()
  "Writes update Efrit's structs in place; another session's are left alone."
  (efrit-todo-test-with-session
    (efrit-todo-test-seed)
    (let ((structs efrit-todo--current-todos))
      (efrit-todo-test-write (efrit-todo-test-item "Read the file" "completed" "id" "t1")
                             (efrit-todo-test-item "Fix the bug" "completed" "id" "t2")
                             (efrit-todo-test-item "Run the tests" "in_progress" "id" "t3"))
      (should (eq efrit-todo--current-todos structs))
      (should (equal (mapcar #'efrit-todo-item-status structs) '(completed completed in-progress)))
      (should (numberp (efrit-todo-item-completed-at (nth 1 structs))))
      ;; A list of another length is built anew, with the same values.
      (efrit-todo-test-write (efrit-todo-test-item "Run the tests" "in_progress" "id" "t3"))
      (should-not (eq efrit-todo--current-todos structs))
      (should (equal (mapcar #'efrit-todo-item-id efrit-todo--current-todos) '("t3")))
      (let ((one efrit-todo--current-todos))
        (let ((efrit-todo-current-session (format "test-%s" (cl-gensym))))
          (efrit-todo-test-write (efrit-todo-test-item "Other work" "pending"))
          (should (equal (mapcar #'efrit-todo-item-content efrit-todo--current-todos)
                         '("Other work"))))
        (should (equal (mapcar #'efrit-todo-item-content one) '("Run the tests")))))))

;;;; Edits by the user

(ert-deftest efrit-todo-test-user-edits-reach-the-model ()
  (efrit-todo-test-with-session
    (efrit-todo-write "{\"todos\": [{\"content\": \"Read\", \"status\": \"in_progress\"},
                                {\"content\": \"Write\", \"status\": \"pending\"},
                                {\"content\": \"Test\", \"status\": \"pending\"}]}")
    (efrit-todo-test-recording-changes calls
      (should (equal (efrit-todo-user-set-status "t3" 'cancelled)
                     "the user marked t3 cancelled"))
      (efrit-todo-user-edit-content "t2" "Write the parser")
      (efrit-todo-user-move "t2" -1)
      (efrit-todo-user-add "Document it")
      (should (= (length calls) 4)))
    (should (equal (mapcar (lambda (i) (plist-get i :id)) (efrit-todo-list))
                   '("t2" "t1" "t3" "t4")))
    (should (equal (plist-get (car (efrit-todo-list)) :content) "Write the parser"))
    (should (equal (mapcar (lambda (change) (plist-get change :actor)) (efrit-todo-history))
                   '(model user user user user)))
    ;; The edits ride on the next tool result, once; the prompt is left alone.
    (let ((text (efrit-todo-after-tool "read_file" '(:path "a.el") "contents of a.el" nil)))
      (should (string-prefix-p "contents of a.el\n" text))
      (should (equal (efrit-todo-test-line text "[efrit-todo] ")
                     (concat "[efrit-todo] The user changed the list: "
                             "the user marked t3 cancelled; "
                             "the user reworded t2 to \"Write the parser\"; "
                             "the user moved t2 to position 1; "
                             "the user added t4 \"Document it\"."))))
    (should (equal (efrit-todo-after-tool "read_file" '(:path "b.el") "contents of b.el" nil)
                   "contents of b.el"))
    (should-not (string-match-p "the user" (efrit-todo-prompt-guidance)))
    (should (string-match-p "t3" (efrit-todo-user-clear-finished)))
    (should (equal (efrit-todo-user-clear-finished) ""))
    (should (equal (efrit-todo-test-line
                    (efrit-todo-after-tool "read_file" '(:path "c.el") "again" nil) "[efrit-todo] ")
                   (concat "[efrit-todo] The user changed the list: "
                           "the user removed the finished item t3 from the list.")))
    ;; Other notices may follow a result (a reminder, after this many
    ;; calls), but not the user's edits a second time.
    (should-not (string-match-p
                 "user changed"
                 (efrit-todo-after-tool "read_file" '(:path "d.el") "once more" nil)))
    ;; Notes not yet delivered go with a reset.
    (efrit-todo-user-set-status "t1" 'completed)
    (efrit-todo-reset)
    (should (equal (efrit-todo-after-tool "read_file" nil "after reset" nil) "after reset"))))

(ert-deftest efrit-todo-test-bad-user-edits-name-the-field ()
  (efrit-todo-test-with-session
    (efrit-todo-write "{\"todos\": [{\"content\": \"Read\", \"status\": \"pending\"}]}")
    (let ((before (efrit-todo-list)))
      (dolist (case '(("id" efrit-todo-user-set-status "t9" completed)
                       ("status" efrit-todo-user-set-status "t1" "done")
                       ("content" efrit-todo-user-edit-content "t1" "   ")
                       ("offset" efrit-todo-user-move "t1" "up")))
        (let ((err (should-error (apply (cadr case) (cddr case))
                                 :type 'efrit-todo-invalid-input)))
          (should (string-prefix-p (car case) (cadr err)))))
      (should-error (efrit-todo-user-add "") :type 'efrit-todo-invalid-input)
      (should (equal (efrit-todo-list) before))
      (should (= (length (efrit-todo-history)) 1))
      ;; Refused edits leave no note for the model.
      (should (equal (efrit-todo-after-tool "read_file" nil "contents" nil) "contents")))))

;;;; Values that cannot be printed

(ert-deftest efrit-todo-test-a-value-too-deep-to-print-is-still-described ()
  "A session argument nested 5000 levels deep is refused naming the field.
Emacs's printer signals on it even with `print-level' set; describing
it must not."
  (let ((deep []))
    (dotimes (_ 5000) (setq deep (vector deep)))
    (dolist (call (list (lambda () (efrit-todo-list deep))
                        (lambda () (efrit-todo-write "{\"todos\": []}" deep))
                        (lambda () (efrit-todo-after-tool "eval_sexp" nil "2" nil deep))))
      (let ((err (should-error (funcall call) :type 'efrit-todo-invalid-input)))
        (should (string-prefix-p "session: expected a string, got " (cadr err)))))))

;;;; Subtasks

(defun efrit-todo-test-merge (&rest items)
  "Merge ITEMS, alists as the model sends them; return the result text."
  (efrit-todo-write `((merge . t) (todos . ,(vconcat items)))))

(defun efrit-todo-test-parents ()
  "Return (ID . PARENT) for each item of the current session, in order."
  (mapcar (lambda (item) (cons (plist-get item :id) (plist-get item :parent)))
          (efrit-todo-list)))

(defun efrit-todo-test-seed-tree ()
  "Write the seed list, then t4 and t5 as subtasks of t3 and t6 of t5."
  (efrit-todo-test-seed)
  (efrit-todo-test-merge '((content . "Run the unit tests") (parent . "t3"))
                         '((content . "Run the UI tests") (parent . "t3")))
  (efrit-todo-test-merge '((content . "Run the tmux test") (parent . "t5"))))

(ert-deftest efrit-todo-test-subtasks-in-plists-results-and-guidance ()
  "Subtasks carry :parent, come after their parent and are shown as a tree."
  (efrit-todo-test-with-session
    (efrit-todo-test-seed)
    (should (equal (efrit-todo-test-merge
                    '((content . "Run the unit tests") (parent . "t3"))
                    '((content . "Run the UI tests") (parent . "t3")))
                   (concat "[TODO list updated: 1/5 done]\n"
                           "t4 pending: Run the unit tests (under t3)\n"
                           "t5 pending: Run the UI tests (under t3)\n"
                           "Next: work on t2; mark it completed when it is done.")))
    ;; A JSON string names the parent the same way.
    (efrit-todo-write "{\"merge\": true, \"todos\": [{\"content\": \"Run the tmux test\", \"parent\": \"t5\"}]}")
    (should (equal (efrit-todo-test-parents)
                   '(("t1") ("t2") ("t3") ("t4" . "t3") ("t5" . "t3") ("t6" . "t5"))))
    (should (equal (plist-get (car (last (efrit-todo-list))) :parent) "t5"))
    (should (string-match-p
             (concat "^  t3 \\[pending\\] Run the tests\n"
                     "    t4 \\[pending\\] Run the unit tests\n"
                     "    t5 \\[pending\\] Run the UI tests\n"
                     "      t6 \\[pending\\] Run the tmux test\n"
                     "Next: ")
             (efrit-todo-prompt-guidance)))
    ;; Efrit's API stays flat: six-slot structs, no parents.
    (should (equal (mapcar #'efrit-todo-item-id (efrit-todo-get-all))
                   '("t1" "t2" "t3" "t4" "t5" "t6")))
    (should (cl-every (lambda (item) (= (length item) 6)) (efrit-todo-get-all)))
    ;; Handing the structs back keeps the tree.
    (efrit-todo-set-all (efrit-todo-get-all))
    (should (equal (efrit-todo-test-parents)
                   '(("t1") ("t2") ("t3") ("t4" . "t3") ("t5" . "t3") ("t6" . "t5"))))))

(ert-deftest efrit-todo-test-subtasks-close-their-parent ()
  "A parent waits for its subtasks; the last one done says it can close."
  (efrit-todo-test-with-session
    (efrit-todo-test-seed-tree)
    (efrit-todo-test-merge '((id . "t4") (status . "completed"))
                           '((id . "t6") (status . "completed")))
    (let ((text (efrit-todo-test-merge '((id . "t5") (status . "completed")))))
      (should (equal (efrit-todo-test-line text "t3 (")
                     (concat "t3 (Run the tests) has no unfinished subtasks left: "
                             "mark it completed when it is done."))))
    (efrit-todo-test-merge '((id . "t3") (status . "completed")))
    (should (eq (plist-get (nth 2 (efrit-todo-list)) :status) 'completed))))

(ert-deftest efrit-todo-test-subtask-mistakes-name-the-field-and-change-nothing ()
  "Every subtask mistake is `efrit-todo-invalid-input' naming the field.
The list, its history, the files and the hook are left alone."
  (efrit-todo-test-with-state-directory
   (efrit-todo-test-with-session
    (efrit-todo-test-seed-tree)
    (dolist (case
             `(("\\`todos\\[0\\]\\.parent: unknown id \"t9\": a parent must be the id of an item in the list\\'"
                ((merge . t) (todos . [((id . "t2") (parent . "t9"))])))
               ("\\`todos\\[1\\]\\.parent: unknown id \"t9\""
                "{\"todos\": [{\"id\": \"t1\", \"content\": \"Read the file\", \"status\": \"completed\"}, {\"content\": \"New\", \"status\": \"pending\", \"parent\": \"t9\"}]}")
               ("\\`todos\\[0\\]\\.parent: t2 cannot be a subtask of itself\\'"
                ((merge . t) (todos . [((id . "t2") (parent . "t2"))])))
               ("\\`todos\\[0\\]\\.parent: would make a cycle (t3 -> t6 -> t5 -> t3)\\'"
                ((merge . t) (todos . [((id . "t3") (parent . "t6"))])))
               ("\\`todos\\[0\\]\\.parent: t6 is already 3 levels deep; subtasks go at most 3 levels\\'"
                ((merge . t) (todos . [((content . "Too deep") (parent . "t6"))])))
               ("\\`todos\\[0\\]\\.parent: under t4, t5's subtask t6 would be 4 levels deep"
                ((merge . t) (todos . [((id . "t5") (parent . "t4"))])))
               ("\\`todos\\[0\\]\\.parent: expected a string, got integer 3\\'"
                ((merge . t) (todos . [((id . "t5") (parent . 3))])))
               ("\\`todos\\[1\\]\\.status: t3 cannot be completed while its subtasks t5, t6 are unfinished; complete or cancel them first\\'"
                ((merge . t) (todos . [((id . "t4") (status . "completed"))
                                       ((id . "t3") (status . "completed"))])))
               ("\\`todos\\[0\\]\\.parent: t1 is completed and cannot have unfinished subtasks (t2)"
                ((merge . t) (todos . [((id . "t2") (parent . "t1"))])))
               ("\\`todos\\[1\\]\\.parent: \"t3\" is not in the list"
                "{\"todos\": [{\"id\": \"t2\", \"content\": \"Fix the bug\", \"status\": \"in_progress\"}, {\"id\": \"t4\", \"content\": \"Run the unit tests\", \"status\": \"pending\", \"parent\": \"t3\"}]}")))
      (let ((before (efrit-todo-test-state)))
        (efrit-todo-test-recording-changes calls
          (efrit-todo-test-check-error
           (should-error (efrit-todo-write (cadr case)) :type 'efrit-todo-invalid-input)
           (car case))
          (should (equal (efrit-todo-test-state) before))
          (should (null calls))))))))

(ert-deftest efrit-todo-test-merge-moves-an-item-under-another-parent-and-back ()
  "A merge moves an item under a parent, and to the top level with \"\"."
  (efrit-todo-test-with-session
    (efrit-todo-test-seed-tree)
    (should (equal (efrit-todo-test-merge '((id . "t6") (parent . "t3")))
                   (concat "[TODO list updated: 1/6 done]\n"
                           "t6 pending: Run the tmux test (under t3)\n"
                           "Next: work on t2; mark it completed when it is done.")))
    (should (equal (plist-get (efrit-todo-test-last-change) :reparented) '("t6")))
    (should (equal (efrit-todo-test-summary) "reparented t6"))
    (should (equal (efrit-todo-test-merge '((id . "t6") (parent . "")))
                   (concat "[TODO list updated: 1/6 done]\n"
                           "t6 pending: Run the tmux test (now top-level)\n"
                           "Next: work on t2; mark it completed when it is done.")))
    (should (equal (efrit-todo-test-parents)
                   '(("t1") ("t2") ("t3") ("t4" . "t3") ("t5" . "t3") ("t6"))))
    ;; Undo takes each move back.
    (efrit-todo-undo)
    (should (equal (plist-get (car (last (efrit-todo-list))) :parent) "t3"))
    (efrit-todo-undo)
    (should (equal (plist-get (car (last (efrit-todo-list))) :parent) "t5"))))

(ert-deftest efrit-todo-test-cancelling-a-parent-warns-about-its-subtasks ()
  "A parent may be cancelled with subtasks open; the result says which."
  (efrit-todo-test-with-session
    (efrit-todo-test-seed-tree)
    (should (equal (efrit-todo-test-line
                    (efrit-todo-test-merge '((id . "t3") (status . "cancelled")))
                    "Warning: ")
                   (concat "Warning: t3 was cancelled with unfinished subtasks t4, t5, t6: "
                           "cancel them too, or finish them.")))))

(provide 'efrit-todo-test)

;;; efrit-todo-test.el ends here
