;;; efrit-todo-fuzz.el --- Random calls of every public efrit-todo function -*- lexical-binding: t; -*-

;;; Commentary:

;; `make fuzz' (part of `make test') runs this file in a batch Emacs
;; started with --module-assertions, which makes Emacs check every use of
;; the module API and abort on a misuse.  It calls every public function
;; of efrit-todo.el and efrit-todo-compat.el, and sets Efrit's
;; compatibility variables, with random nested Lisp values: strings
;; (multibyte, unibyte, with NUL), numbers, symbols, vectors, hash
;; tables, alists, plists, circular and dotted lists, buffers, markers
;; and more, across several sessions.
;;
;; The seed is fixed, so a run is repeatable; the time is bounded by
;; EFRIT_TODO_FUZZ_SECONDS (default 25).  The test fails when a call
;; signals anything but `efrit-todo-invalid-input' (or an error a
;; function documents, listed in `efrit-todo-fuzz--allowed'), when a hook
;; gets a bad argument, or when a valid write no longer works in a
;; session afterwards.  Emacs staying up is the rest of the proof.

;;; Code:

(require 'ert)
(require 'cl-lib)
(require 'seq)
(require 'json)
(require 'efrit-todo)

(defvar efrit-todo-state-directory)

(defconst efrit-todo-fuzz--excluded
  '(efrit-todo-build-module efrit-todo-unload-function efrit-todo-compat-unload-function)
  "Public functions not fuzzed: building runs cargo, unloading ends the test.")

(defconst efrit-todo-fuzz--allowed
  '(;; Efrit's struct: cl-defstruct accessors of a vector type check
    ;; nothing, as in Efrit, and the constructor refuses unknown keywords.
    ("\\`\\(?:copy-\\)?efrit\\(?:-do\\)?-todo-item" wrong-type-argument args-out-of-range circular-list error)
    ;; Efrit's formatter of a list of its structs, with Efrit's contract.
    ("\\`efrit-todo-format-list\\'" wrong-type-argument args-out-of-range))
  "Errors some functions may signal besides `efrit-todo-invalid-input'.
Each element is (REGEXP ERROR...): functions whose names match REGEXP.")

(defconst efrit-todo-fuzz--sessions '("fuzz-a" "fuzz-b" "fuzz-c" "fuzz-d")
  "Sessions the fuzzer works in.")

(defconst efrit-todo-fuzz--keys
  '("todos" "content" "status" "activeForm" "active_form" "id" "priority"
    "parent" "merge" "reason" "expr" "path" "" "todos\0"
    ;; The task graph and the Task tools.
    "description" "owner" "blocked_by" "subject" "taskId" "blockedBy"
    "addBlockedBy" "removeBlockedBy" "addBlocks" "removeBlocks")
  "Keys of the objects the fuzzer builds.")

(defconst efrit-todo-fuzz--strings
  `("" " " "\t\n" "pending" "in_progress" "In Progress" "completed" "cancelled"
    "done" "deleted" "t1" "t2" "t3" "t99" "3" "#2" "Fix the bug" "Run the tests" "eval_sexp"
    "read_file" "é✓ 日本語 🦀" "a\0b" ,(string-to-unibyte "\377\376abc")
    ,(string-to-multibyte "raw \377 byte") "%s %d %%" "{\"todos\": []}"
    "{\"todos\": [{\"content\": \"a\", \"status\": \"pending\"}]}" "{\"todos\": ["
    ,(make-string 3000 ?x) ,(concat (make-string 300 ?\[) (make-string 300 ?\])))
  "Strings the fuzzer draws from, besides random ones.")

(defvar efrit-todo-fuzz--buffer nil "A live buffer used as a value.")
(defvar efrit-todo-fuzz--dead-buffer nil "A killed buffer used as a value.")

(defun efrit-todo-fuzz--pick (sequence)
  "Return a random element of SEQUENCE."
  (elt sequence (random (length sequence))))

(defun efrit-todo-fuzz--string ()
  "Return a random string."
  (pcase (random 4)
    (0 (apply #'string
              (cl-loop repeat (random 40)
                       collect (efrit-todo-fuzz--pick [?a ?Z ?\s ?\n ?é ?日 ?\0 ?% ?\" ?\\ #x1F980]))))
    (_ (efrit-todo-fuzz--pick efrit-todo-fuzz--strings))))

(defun efrit-todo-fuzz--item (depth)
  "Return a todo item, mostly well formed, sometimes with a bad field.
DEPTH bounds the nesting of random parts."
  (let ((item (make-hash-table :test 'equal)))
    (puthash "content" (if (zerop (random 5)) (efrit-todo-fuzz--value depth)
                         (efrit-todo-fuzz--pick ["Fix the bug" "Run the tests" "Read the file"
                                                 "Write the changelog" "Step 7"]))
             item)
    (puthash "status" (if (zerop (random 5)) (efrit-todo-fuzz--value depth)
                        (efrit-todo-fuzz--pick ["pending" "in_progress" "completed" "cancelled"]))
             item)
    (when (zerop (random 2))
      (puthash "id" (if (zerop (random 4)) (efrit-todo-fuzz--value depth)
                      (format "t%d" (1+ (random 12))))
               item))
    (when (zerop (random 3))
      (puthash "activeForm" (efrit-todo-fuzz--string) item))
    (when (zerop (random 3))
      (puthash "parent" (pcase (random 4)
                          (0 (efrit-todo-fuzz--value depth))
                          (1 "")
                          (_ (format "t%d" (1+ (random 12)))))
               item))
    item))

(defun efrit-todo-fuzz--write-input (depth)
  "Return a todo_write input in one of the shapes callers use.
DEPTH bounds the nesting of random parts."
  (let ((items (cl-loop repeat (random 8) collect (efrit-todo-fuzz--item depth))))
    (pcase (random 5)
      (0 (let ((input (make-hash-table :test 'equal)))
           (puthash "todos" (vconcat items) input)
           input))
      ;; A merge: items named by id may carry a parent alone.
      (4 (let ((input (make-hash-table :test 'equal)))
           (dolist (item items)
             (when (zerop (random 2))
               (remhash "content" item)
               (remhash "status" item)))
           (puthash "merge" t input)
           (puthash "todos" (vconcat items) input)
           input))
      (1 (vconcat items))
      (2 (list (cons 'todos (vconcat items))))
      ;; JSON of atoms only: `json-encode' itself loops on circular lists.
      (_ (condition-case nil
             (json-encode (let ((input (make-hash-table :test 'equal)))
                            (puthash "todos"
                                     (vconcat (mapcar (lambda (_) (efrit-todo-fuzz--item 0)) items))
                                     input)
                            input))
           (error "{}"))))))

(defun efrit-todo-fuzz--value (&optional depth)
  "Return a random Lisp value nested at most DEPTH (default 4) deep."
  (let ((depth (or depth 4)))
    (if (<= depth 0)
        (efrit-todo-fuzz--pick (vector nil t 0 -1 1.5 "x" 'sym :kw))
      (pcase (random 26)
        (0 nil)
        (1 t)
        (2 (- (random 2000) 1000))
        (3 (efrit-todo-fuzz--pick (vector most-positive-fixnum most-negative-fixnum
                                          (expt 2 70) (- (expt 3 50)))))
        (4 (efrit-todo-fuzz--pick (vector 0.0 -0.0 1.0e+INF -1.0e+INF 0.0e+NaN 3.25 1e300)))
        ((or 5 6 7) (efrit-todo-fuzz--string))
        (8 (efrit-todo-fuzz--pick (vector 'pending 'in-progress 'todo :content :status
                                          :todos :json-false :null (make-symbol "uninterned")
                                          (intern (efrit-todo-fuzz--string)))))
        (9 (apply #'vector (cl-loop repeat (random 5)
                                    collect (efrit-todo-fuzz--value (1- depth)))))
        (10 (cl-loop repeat (random 5) collect (efrit-todo-fuzz--value (1- depth))))
        (11 (cl-loop repeat (random 4)
                     collect (cons (efrit-todo-fuzz--pick efrit-todo-fuzz--keys)
                                   (efrit-todo-fuzz--value (1- depth)))))
        (12 (cl-loop repeat (random 4)
                     nconc (list (intern (concat ":" (efrit-todo-fuzz--pick efrit-todo-fuzz--keys)))
                                 (efrit-todo-fuzz--value (1- depth)))))
        (13 (let ((table (make-hash-table :test (efrit-todo-fuzz--pick [equal eq eql]))))
              (dotimes (_ (random 4))
                (puthash (if (zerop (random 4)) (efrit-todo-fuzz--value 0)
                           (efrit-todo-fuzz--pick efrit-todo-fuzz--keys))
                         (efrit-todo-fuzz--value (1- depth))
                         table))
              table))
        (14 (let ((list (list (efrit-todo-fuzz--value 0) (efrit-todo-fuzz--value 0))))
              (setcdr (last list) list)
              list))
        (15 (cons (efrit-todo-fuzz--value (1- depth)) (efrit-todo-fuzz--value 0)))
        (16 efrit-todo-fuzz--buffer)
        (17 efrit-todo-fuzz--dead-buffer)
        (18 (with-current-buffer efrit-todo-fuzz--buffer
              (if (zerop (random 2)) (point-marker) (make-marker))))
        (19 (efrit-todo-fuzz--write-input (1- depth)))
        (20 (efrit-todo-fuzz--item (1- depth)))
        (21 (let ((value "leaf"))
              (dotimes (_ (+ 40 (random 2000)))
                (setq value (if (zerop (random 2)) (vector value) (list value))))
              value))
        (22 (efrit-todo-fuzz--pick (vector (make-bool-vector 3 t) (make-char-table 'fuzz)
                                           (lambda (x) x) #'car (record 'fuzz 1 2)
                                           (efrit-todo-item-create :id "t1" :content "a"
                                                                   :status 'todo))))
        (23 (efrit-todo-fuzz--pick efrit-todo-fuzz--sessions))
        (24 (let ((value (efrit-todo-fuzz--value (1- depth))))
              (list :id (efrit-todo-fuzz--value 0) :content value :status (efrit-todo-fuzz--value 0))))
        (_ (make-string (* 1024 (efrit-todo-fuzz--pick [1 64 1024])) ?y))))))

(defun efrit-todo-fuzz--functions ()
  "Return the public functions defined in efrit-todo.el and its compat file."
  (let ((files (mapcar (lambda (library)
                         (file-name-sans-extension (file-truename (locate-library library))))
                       '("efrit-todo.el" "efrit-todo-compat.el")))
        functions)
    (dolist (entry load-history)
      (when (and (stringp (car entry))
                 (member (file-name-sans-extension (file-truename (car entry))) files))
        (dolist (element (cdr entry))
          (let ((name (and (eq (car-safe element) 'defun) (cdr element))))
            ;; Since Emacs 29 an `autoload' call is recorded as a defun
            ;; of the file making it: the UI commands efrit-todo.el
            ;; autoloads are defined elsewhere, so `symbol-file' decides.
            (when (and name (fboundp name)
                       (member (file-name-sans-extension
                                (file-truename (symbol-file name 'defun)))
                               files)
                       (not (string-match-p "--" (symbol-name name)))
                       (not (memq name efrit-todo-fuzz--excluded)))
              (push name functions))))))
    (sort functions (lambda (a b) (string< a b)))))

(defun efrit-todo-fuzz--describe (err)
  "Return the message of ERR, cut short; its data may not print at all."
  (let ((print-length 5) (print-level 3))
    (condition-case nil
        (truncate-string-to-width (error-message-string err) 200)
      (error "<message not printable>"))))

(defun efrit-todo-fuzz--allowed-p (function error)
  "Return non-nil when FUNCTION may signal ERROR, a condition."
  (or (eq (car error) 'efrit-todo-invalid-input)
      (seq-some (lambda (rule)
                  (and (string-match-p (car rule) (symbol-name function))
                       (memq (car error) (cdr rule))))
                efrit-todo-fuzz--allowed)))

(defun efrit-todo-fuzz--arguments (function)
  "Return random arguments for FUNCTION, within its arity.
A trailing argument is often a fuzz session, as SESSION is."
  (let* ((arity (func-arity function))
         (low (car arity))
         (high (if (numberp (cdr arity)) (cdr arity) (+ low 3)))
         (count (+ low (random (1+ (- high low)))))
         (args (cl-loop repeat count collect (efrit-todo-fuzz--value))))
    (when (and args (> count low) (< (random 10) 7))
      (setcar (last args) (efrit-todo-fuzz--pick efrit-todo-fuzz--sessions)))
    args))

(defun efrit-todo-fuzz--valid-write (session)
  "Check that a valid write works in SESSION and the list comes back."
  (let ((text (efrit-todo-write
               "{\"todos\": [{\"content\": \"Fuzz check one\", \"status\": \"completed\"},
                             {\"content\": \"Fuzz check two\", \"status\": \"in_progress\"}]}"
               session)))
    (should (string-prefix-p "[TODO list updated" text))
    (should (equal (mapcar (lambda (item) (plist-get item :content)) (efrit-todo-list session))
                   '("Fuzz check one" "Fuzz check two")))
    (should (equal (plist-get (efrit-todo-current session) :content) "Fuzz check two"))
    (should (equal (plist-get (efrit-todo-counts session) :total) 2))))

(ert-deftest efrit-todo-fuzz-every-public-function ()
  "Random values into every public function: only documented errors."
  (let* ((seconds (string-to-number (or (getenv "EFRIT_TODO_FUZZ_SECONDS") "25")))
         (deadline (+ (float-time) seconds))
         (functions (efrit-todo-fuzz--functions))
         (calls (make-hash-table))
         (refused 0)
         (failures nil)
         (hook-arguments nil)
         (recorder (lambda (&rest args) (push args hook-arguments)))
         (efrit-todo-state-directory (make-temp-file "efrit-todo-fuzz" t))
         (inhibit-message t)
         (message-log-max nil)
         (rounds 0))
    (should (> (length functions) 40))
    (dolist (required '(efrit-todo-write efrit-todo-pause efrit-todo-after-tool
					 efrit-todo-complete efrit-todo-add efrit-todo-set-all))
      (should (memq required functions)))
    (random "efrit-todo-fuzz")
    (setq efrit-todo-fuzz--buffer (get-buffer-create " *efrit-todo-fuzz*"))
    (with-current-buffer efrit-todo-fuzz--buffer (insert "some text for markers"))
    (setq efrit-todo-fuzz--dead-buffer (generate-new-buffer " *efrit-todo-fuzz-dead*"))
    (kill-buffer efrit-todo-fuzz--dead-buffer)
    (add-hook 'efrit-todo-change-functions recorder)
    (unwind-protect
        ;; A function that asks (a reset with ASK) meets a user who
        ;; answers at random; batch Emacs would read the answer from stdin.
        (cl-letf (((symbol-function 'y-or-n-p) (lambda (&rest _) (zerop (random 2))))
                  ((symbol-function 'yes-or-no-p) (lambda (&rest _) (zerop (random 2)))))
          (while (< (float-time) deadline)
            (cl-incf rounds)
            (let ((efrit-todo-current-session (efrit-todo-fuzz--pick efrit-todo-fuzz--sessions)))
              (dotimes (_ 200)
		(let* ((function (efrit-todo-fuzz--pick functions))
                       (args (efrit-todo-fuzz--arguments function))
                       (variable (and (zerop (random 40))
                                      (efrit-todo-fuzz--pick [efrit-todo--current-todos
                                                              efrit-todo--counter]))))
                  (cl-incf (gethash function calls 0))
                  (condition-case err
                      (if variable
                          ;; Efrit sets these variables itself; that must never signal.
                          (set variable (car args))
			(apply function args))
                    (error
                     (if (efrit-todo-fuzz--allowed-p function err)
			 (cl-incf refused)
                       (push (format "%s signalled %s: %s" function (car err)
                                     (efrit-todo-fuzz--describe err))
                             failures))))))
              ;; Hook arguments must be session names.
              (dolist (args hook-arguments)
		(unless (and (= (length args) 1) (stringp (car args)))
                  (push (format "hook called with %S" args) failures)))
              (setq hook-arguments nil)
              (dolist (session efrit-todo-fuzz--sessions)
		(efrit-todo-fuzz--valid-write session)))))
      (remove-hook 'efrit-todo-change-functions recorder)
      (kill-buffer efrit-todo-fuzz--buffer)
      ;; The module's writer thread may be saving a session right now.
      (efrit-todo-flush)
      (delete-directory efrit-todo-state-directory t))
    (let ((inhibit-message nil))
      (message "efrit-todo-fuzz: %d rounds, %d calls of %d functions, %d refused as documented"
               rounds (apply #'+ (hash-table-values calls)) (length functions) refused))
    (should (equal (efrit-todo--module-version) efrit-todo-version))
    (setq failures (delete-dups failures))
    (let ((inhibit-message nil))
      (dolist (failure failures)
        (message "efrit-todo-fuzz: %s" failure)))
    (should-not failures)
    ;; Every function was called, most of them many times.
    (dolist (function functions)
      (should (> (gethash function calls 0) 0)))))

(provide 'efrit-todo-fuzz)
;;; efrit-todo-fuzz.el ends here
