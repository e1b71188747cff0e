;;; efrit-todo-test-helpers.el --- Helpers shared by the ERT suites -*- lexical-binding: t; -*-

;;; Commentary:

;; Sessions, input tables and accessors that efrit-todo-test.el and
;; efrit-todo-compat-test.el both use.  They live here, not in a suite,
;; because a suite that `require's another suite loads that suite's
;; tests a second time when `make ert' loads every test/*-test.el, and
;; Emacs 29 and later stop at a test defined twice.

;;; Code:

(require 'cl-lib)
(require 'seq)
(require 'json)
(require 'efrit-todo)

(defmacro efrit-todo-test-with-session (&rest body)
  "Run BODY with `efrit-todo-current-session' bound to a fresh session.
The session name is unique in this Emacs, so nothing another test
did is visible in BODY."
  (declare (indent 0) (debug t))
  `(let ((efrit-todo-current-session (format "test-%s" (cl-gensym))))
     ,@body))

(defmacro efrit-todo-test-recording-changes (var &rest body)
  "Run BODY while recording each call of `efrit-todo-change-functions'.
VAR is bound to the list of argument lists of the calls, newest first,
and can be read in BODY."
  (declare (indent 1) (debug (symbolp body)))
  (let ((recorder (make-symbol "recorder")))
    `(let* ((,var nil)
            (,recorder (lambda (&rest args) (push args ,var))))
       (add-hook 'efrit-todo-change-functions ,recorder)
       (unwind-protect
           (progn ,@body)
         (remove-hook 'efrit-todo-change-functions ,recorder)))))

(defun efrit-todo-test-object (&rest keys-and-values)
  "Return a hash table like those Efrit's JSON parser builds.
KEYS-AND-VALUES alternate string keys and their values."
  (let ((table (make-hash-table :test 'equal)))
    (while keys-and-values
      (puthash (pop keys-and-values) (pop keys-and-values) table))
    table))

(defun efrit-todo-test-item (content status &rest keys-and-values)
  "Return an item hash table with CONTENT, STATUS and KEYS-AND-VALUES."
  (apply #'efrit-todo-test-object "content" content "status" status keys-and-values))

(defun efrit-todo-test-input (&rest items)
  "Return a todo_write input hash table whose todos are ITEMS."
  (efrit-todo-test-object "todos" (apply #'vector items)))

(defun efrit-todo-test-write (&rest items)
  "Write ITEMS (hash tables) to the current session; return the result text."
  (efrit-todo-write (apply #'efrit-todo-test-input items)))

(defun efrit-todo-test-json (text)
  "Parse TEXT as Efrit does: objects as hash tables, arrays as vectors."
  (let ((json-object-type 'hash-table)
        (json-array-type 'vector)
        (json-key-type 'string)
        (json-false :json-false))
    (json-read-from-string text)))

(defun efrit-todo-test-field (key &optional session)
  "Return the values of KEY of every item of SESSION, in list order."
  (mapcar (lambda (item) (plist-get item key)) (efrit-todo-list session)))

(defun efrit-todo-test-ids (&optional session)
  "Return the ids of SESSION's items in list order."
  (efrit-todo-test-field :id session))

(defun efrit-todo-test-statuses (&optional session)
  "Return the status symbols of SESSION's items in list order."
  (efrit-todo-test-field :status session))

(defun efrit-todo-test-contents (&optional session)
  "Return the contents of SESSION's items in list order."
  (efrit-todo-test-field :content session))

(defun efrit-todo-test-line (text prefix)
  "Return the line of TEXT beginning with PREFIX, or nil."
  (seq-find (lambda (line) (string-prefix-p prefix line))
            (split-string text "\n")))

(defun efrit-todo-test-last-change (&optional session)
  "Return the newest entry of SESSION's history, a plist."
  (car (last (efrit-todo-history session))))

(defun efrit-todo-test-summary (&optional session)
  "Return the :summary of the newest change of SESSION's list."
  (plist-get (efrit-todo-test-last-change session) :summary))

(defun efrit-todo-test-seed ()
  "Write a known list: t1 completed, t2 in progress, t3 pending."
  (efrit-todo-test-write
   (efrit-todo-test-item "Read the file" "completed")
   (efrit-todo-test-item "Fix the bug" "in_progress" "activeForm" "Fixing the bug")
   (efrit-todo-test-item "Run the tests" "pending")))

(defmacro efrit-todo-test-with-state-directory (&rest body)
  "Run BODY with `efrit-todo-state-directory' a fresh temporary directory.
Only when persistence exists; otherwise BODY runs as it is."
  (declare (indent 0) (debug t))
  `(if (boundp 'efrit-todo-state-directory)
       (let ((efrit-todo-state-directory (make-temp-file "efrit-todo-test" t)))
         (unwind-protect (progn ,@body)
           ;; The writer thread may still be saving into the directory.
           (efrit-todo-flush)
           (delete-directory efrit-todo-state-directory t)))
     ,@body))

;;;; Child Emacsen

(defvar efrit-todo-test--child-home-directory nil
  "The HOME of the child Emacsen, made on first use: never the user's.")

(defun efrit-todo-test-child-home ()
  "Return the child Emacsen's HOME, a directory deleted when Emacs exits."
  (unless efrit-todo-test--child-home-directory
    (setq efrit-todo-test--child-home-directory (make-temp-file "efrit-todo-child-home" t))
    (add-hook 'kill-emacs-hook
              (lambda () (delete-directory efrit-todo-test--child-home-directory t))))
  efrit-todo-test--child-home-directory)

(defmacro efrit-todo-test-as-child (&rest body)
  "Run BODY with the HOME of child Emacsen set to one not the user's."
  (declare (indent 0) (debug t))
  `(let ((process-environment (cons (concat "HOME=" (efrit-todo-test-child-home))
                                    process-environment)))
     ,@body))

(defun efrit-todo-test-child-command (program &rest args)
  "The command line of a batch Emacs running PROGRAM with ARGS after it.
Native compilation makes no trampolines there: a child that redefines
a primitive would otherwise compile one into its HOME."
  (append (list (expand-file-name invocation-name invocation-directory)
                "-Q" "--batch"
                "--eval" "(setq comp-enable-subr-trampolines nil native-comp-enable-subr-trampolines nil)"
                "-L" (file-name-directory (locate-library "efrit-todo"))
                "-l" "efrit-todo"
                "--eval" (prin1-to-string program))
          args))

(provide 'efrit-todo-test-helpers)

;;; efrit-todo-test-helpers.el ends here
