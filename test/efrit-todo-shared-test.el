;;; efrit-todo-shared-test.el --- Shared lists across Emacs processes -*- lexical-binding: t; -*-

;;; Commentary:

;; Shared lists: several Emacs processes on one state directory work on
;; one list.  Child batch Emacsen take turns and burst, one is killed
;; in the middle, locks are held and left behind; a list id comes from
;; directory-local variables only when it is a short printable name.

;;; Code:

(require 'ert)
(require 'cl-lib)
(require 'json)
(require 'efrit-todo)
(require 'efrit-todo-test-helpers)

(defmacro efrit-todo-shared-test-with-dir (var &rest body)
  "Run BODY with VAR a fresh state directory, then delete it."
  (declare (indent 1) (debug (symbolp body)))
  `(let* ((,var (file-name-as-directory (make-temp-file "efrit-todo-shared" t)))
          (efrit-todo-state-directory ,var)
          (efrit-todo--shared-lists nil))
     (unwind-protect (progn ,@body)
       (efrit-todo-flush)
       (delete-directory ,var t))))

(defun efrit-todo-shared-test--run (program &rest args)
  "Run PROGRAM with ARGS in a batch Emacs to its end; return its output."
  (with-temp-buffer
    (let ((status (efrit-todo-test-as-child
                    (apply #'call-process
                           (car (apply #'efrit-todo-test-child-command program args))
                           nil t nil
                           (cdr (apply #'efrit-todo-test-child-command program args))))))
      (unless (eql status 0)
        (ert-fail (format "child Emacs exited with %s: %s" status (buffer-string))))
      (buffer-string))))

(defun efrit-todo-shared-test--spawn (name program &rest args)
  "Start a batch Emacs named NAME running PROGRAM with ARGS."
  (efrit-todo-test-as-child
    (make-process
     :name name
     :buffer (generate-new-buffer (format " *%s*" name))
     :connection-type 'pipe
     :noquery t
     :sentinel (lambda (process _event)
                 (when (memq (process-status process) '(exit signal))
                   (process-put process 'ended t)))
     :command (apply #'efrit-todo-test-child-command program args))))

(defun efrit-todo-shared-test--output (process)
  "What PROCESS has written so far."
  (with-current-buffer (process-buffer process) (buffer-string)))

(defun efrit-todo-shared-test--wait (processes predicate seconds what)
  "Wait up to SECONDS for PREDICATE (no arguments); fail naming WHAT.
Output of PROCESSES is read meanwhile."
  (let ((deadline (+ (float-time) seconds)))
    (while (not (funcall predicate))
      (when (> (float-time) deadline)
        (ert-fail (format "timed out waiting for %s; output: %S" what
                          (mapcar #'efrit-todo-shared-test--output processes))))
      (accept-process-output nil 0.05))))

(defun efrit-todo-shared-test--wait-for-output (process regexp what)
  "Wait up to 30 seconds for PROCESS to write a match for REGEXP.
Fail naming WHAT."
  (efrit-todo-shared-test--wait
   (list process)
   (lambda () (string-match-p regexp (efrit-todo-shared-test--output process)))
   30 what))

(defun efrit-todo-shared-test--created (output tag)
  "Return the ids child TAG created by its OUTPUT, in order, as (ID . SUBJECT)."
  (let ((start 0) ids)
    (while (string-match (format "^created %s \\(t[0-9]+\\) \\(.*\\)$" (regexp-quote tag))
                         output start)
      (push (cons (match-string 1 output) (match-string 2 output)) ids)
      (setq start (match-end 0)))
    (nreverse ids)))

(defun efrit-todo-shared-test--saved (dir list)
  "The saved file of LIST in DIR, parsed: an alist."
  (let ((json-object-type 'alist) (json-array-type 'list) (json-key-type 'symbol))
    (json-read-file (efrit-todo--module-store-file list dir))))

(defun efrit-todo-shared-test--saved-items (dir list)
  "The items in LIST's saved file in DIR, as (ID . CONTENT)."
  (mapcar (lambda (item) (cons (alist-get 'id item) (alist-get 'content item)))
          (alist-get 'items (efrit-todo-shared-test--saved dir list))))

(defun efrit-todo-shared-test--set-aside (dir)
  "The files of DIR set aside as conflict or corrupt copies."
  (directory-files dir nil "\\.\\(?:conflict\\|corrupt\\)\\'"))

(defconst efrit-todo-shared-test--creator
  '(let* ((args command-line-args-left)
          (efrit-todo-state-directory (nth 0 args))
          (list (nth 1 args))
          (tag (nth 2 args))
          (count (string-to-number (nth 3 args))))
     (setq command-line-args-left nil)
     (efrit-todo-share-list list)
     (dotimes (i count)
       (let* ((subject (format "%s task %d" tag i))
              (text (efrit-todo-task-create (list :subject subject) list)))
         (unless (string-match "Created \\(t[0-9]+\\)" text)
           (error "No id in %S" text))
         ;; Said only once the call returned: the change is saved by then.
         (message "created %s %s %s" tag (match-string 1 text) subject))))
  "A child Emacs: share LIST in DIR and make COUNT tasks, saying each id.")

(defconst efrit-todo-shared-test--lister
  '(let* ((args command-line-args-left)
          (efrit-todo-state-directory (nth 0 args))
          (list (nth 1 args)))
     (setq command-line-args-left nil)
     (efrit-todo-share-list list)
     (message "LIST<%s>" (efrit-todo-task-list nil list)))
  "A child Emacs: share LIST in DIR and print its TaskList.")

;;;; Taking turns

(ert-deftest efrit-todo-shared-test-two-emacsen-take-turns ()
  "Each Emacs's change is made on the other's saved changes, ids in one row.
This Emacs and a child take turns on one shared list: each sees what
the other added, no id is issued twice, nothing is set aside."
  (skip-unless invocation-name)
  (efrit-todo-shared-test-with-dir dir
    (let ((list (format "turns-%s" (cl-gensym))))
      (efrit-todo-share-list list)
      (should (string-match-p "Created t1:" (efrit-todo-task-create '(:subject "Parent one") list)))
      (let ((out (efrit-todo-shared-test--run efrit-todo-shared-test--creator dir list "child" "1")))
        (should (equal (mapcar #'car (efrit-todo-shared-test--created out "child")) '("t2"))))
      ;; A reading call sees the child's saved task.
      (should (string-match-p "t2 \\[pending\\] child task 0" (efrit-todo-task-list nil list)))
      (should (equal (mapcar (lambda (i) (plist-get i :id)) (efrit-todo-list list)) '("t1" "t2")))
      (should (string-match-p "Created t3:" (efrit-todo-task-create '(:subject "Parent two") list)))
      (should (string-match-p "Updated t2\\|t2" (efrit-todo-task-update '(:taskId "t2" :status "in_progress") list)))
      (let ((out (efrit-todo-shared-test--run efrit-todo-shared-test--lister dir list)))
        (should (string-match-p "t1 \\[pending\\] Parent one" out))
        (should (string-match-p "t2 \\[in_progress\\] child task 0" out))
        (should (string-match-p "t3 \\[pending\\] Parent two" out)))
      (let ((out (efrit-todo-shared-test--run efrit-todo-shared-test--creator dir list "child" "1")))
        (should (equal (mapcar #'car (efrit-todo-shared-test--created out "child")) '("t4"))))
      (should (equal (mapcar #'car (efrit-todo-shared-test--saved-items dir list))
                     '("t1" "t2" "t3" "t4")))
      (should (equal (mapcar (lambda (i) (plist-get i :id)) (efrit-todo-list list))
                     '("t1" "t2" "t3" "t4")))
      (should-not (efrit-todo-shared-test--set-aside dir)))))

(defconst efrit-todo-shared-test--agent
  '(let* ((args command-line-args-left)
          (efrit-todo-state-directory (nth 0 args))
          (list (nth 1 args))
          (what (nth 2 args)))
     (setq command-line-args-left nil)
     (efrit-todo-share-list list)
     (let ((efrit-todo-agent (efrit-todo-agent-start "efrit" list t)))
       (pcase what
         ;; A command that starts a task, and whose Emacs goes away
         ;; while it runs: its agent never ends.
         ("start"
          (efrit-todo-task-create '(:subject "Patch the loop") list)
          (message "RESULT<%s>" (efrit-todo-task-update '(:taskId "t1" :status "in_progress") list)))
         ;; A later command of that name, which ends.
         ("end" (message "RESULT<%s>" (efrit-todo-agent-end efrit-todo-agent list))))))
  "A child Emacs: share LIST in DIR and run an efrit command's agent: WHAT.")

(ert-deftest efrit-todo-shared-test-an-agent-of-another-emacs-keeps-its-items ()
  "An item another Emacs's agent runs is that agent's here too.
A child Emacs's command starts t1 and goes away without ending.  This
Emacs's chat cannot change t1, naming the owner; the lead can.  A
later command of that name, in a third Emacs, ends and lets t1 go,
after which the chat takes it."
  (skip-unless invocation-name)
  (efrit-todo-shared-test-with-dir dir
    (let ((list (format "agents-%s" (cl-gensym))))
      (efrit-todo-shared-test--run efrit-todo-shared-test--agent dir list "start")
      (efrit-todo-share-list list)
      (let ((chat (efrit-todo-agent-start "chat" list t)))
        (should (equal (mapcar (lambda (i) (list (plist-get i :status) (plist-get i :owner)))
                               (efrit-todo-list list))
                       '((in-progress "efrit"))))
        (let ((efrit-todo-agent chat))
          (should (equal (cadr (should-error (efrit-todo-task-update '(:taskId "t1" :status "completed") list)
                                             :type 'efrit-todo-invalid-input))
                         "taskId: t1 is owned by efrit; only efrit or the lead may change it")))
        (let ((out (efrit-todo-shared-test--run efrit-todo-shared-test--agent dir list "end")))
          (should (string-match-p "efrit left t1 (Patch the loop) unfinished; it is pending again, free to take" out)))
        (let ((efrit-todo-agent chat))
          (efrit-todo-task-update '(:taskId "t1" :status "in_progress") list))
        (should (equal (mapcar (lambda (i) (list (plist-get i :status) (plist-get i :owner)))
                               (efrit-todo-list list))
                       `((in-progress ,chat))))
        (efrit-todo-agent-end chat list)
        (should (equal (efrit-todo-shared-test--run-list dir list) '((pending nil))))
        (should-not (efrit-todo-shared-test--set-aside dir))))))

(defun efrit-todo-shared-test--run-list (dir list)
  "Return LIST's items as saved in DIR: (STATUS OWNER) each."
  (mapcar (lambda (item)
            (list (intern (replace-regexp-in-string "_" "-" (alist-get 'status item)))
                  (alist-get 'owner item)))
          (alist-get 'items (efrit-todo-shared-test--saved dir list))))

(ert-deftest efrit-todo-shared-test-efrit-own-calls-change-the-newest-save ()
  "Efrit's own list functions change a shared list on its newest save too.
A child Emacs adds t1 and t2; then `efrit-todo-add', `efrit-todo-update-status'
and `efrit-todo--generate-id' here, on the same list, build on them:
no id comes twice, nothing is set aside, the child's tasks stay."
  (skip-unless invocation-name)
  (efrit-todo-shared-test-with-dir dir
    (let* ((list (format "compat-%s" (cl-gensym)))
           (efrit-todo-current-session list))
      (efrit-todo-share-list list)
      (efrit-todo-shared-test--run efrit-todo-shared-test--creator dir list "child" "2")
      (should (equal (efrit-todo-item-id (efrit-todo-add "Efrit's own")) "t3"))
      (should (equal (efrit-todo--generate-id) "t4"))
      (efrit-todo-shared-test--run efrit-todo-shared-test--creator dir list "child" "1")
      (should (efrit-todo-update-status "t5" 'completed))
      (should (equal (efrit-todo-shared-test--saved-items dir list)
                     '(("t1" . "child task 0") ("t2" . "child task 1") ("t3" . "Efrit's own")
                       ("t5" . "child task 0"))))
      (should (equal (efrit-todo-shared-test--run-list dir list)
                     '((pending nil) (pending nil) (pending nil) (completed nil))))
      (should-not (efrit-todo-shared-test--set-aside dir)))))

(defconst efrit-todo-shared-test--running-command
  '(let* ((args command-line-args-left)
          (efrit-todo-state-directory (nth 0 args))
          (list (nth 1 args)))
     (setq command-line-args-left nil)
     (efrit-todo-share-list list)
     (let ((efrit-todo-agent (efrit-todo-agent-start "efrit" list t)))
       (efrit-todo-task-create '(:subject "Patch the loop") list)
       (efrit-todo-task-update '(:taskId "t1" :status "in_progress") list)
       (message "RUNNING<%s>" efrit-todo-agent)
       ;; The command runs on until it is killed.
       (sleep-for 60)))
  "A child Emacs: an efrit command on LIST in DIR that starts t1 and runs on.")

(ert-deftest efrit-todo-shared-test-two-emacsen-commands-get-two-names ()
  "A command in each of two Emacsen on one list: two names, two owners.
While the child's \"efrit\" runs, this Emacs's command is \"efrit-2\": it
cannot change the child's t1, and its whole-list write keeps it.  Once
the child is killed, its name is free again."
  (skip-unless invocation-name)
  (efrit-todo-shared-test-with-dir dir
    (let* ((list (format "names-%s" (cl-gensym)))
           (child (efrit-todo-shared-test--spawn
                   "efrit-todo-running-command" efrit-todo-shared-test--running-command dir list)))
      (unwind-protect
          (progn
            (efrit-todo-shared-test--wait-for-output child "RUNNING<efrit>" "the child's command")
            (efrit-todo-share-list list)
            (let ((mine (efrit-todo-agent-start "efrit" list t)))
              (should (equal mine "efrit-2"))
              (let ((efrit-todo-agent mine))
                (should (string-match-p
                         "owned by efrit;"
                         (cadr (should-error (efrit-todo-task-update '(:taskId "t1" :status "completed") list)
                                             :type 'efrit-todo-invalid-input))))
                (efrit-todo-write '(:todos [(:content "My own plan" :status "pending")]) list))
              (should (equal (mapcar (lambda (i) (list (plist-get i :id) (plist-get i :status) (plist-get i :owner)))
                                     (efrit-todo-list list))
                             '(("t1" in-progress "efrit") ("t2" pending "efrit-2"))))
              (efrit-todo-agent-end mine list))
            (kill-process child)
            (efrit-todo-shared-test--wait
             (list child) (lambda () (process-get child 'ended)) 30 "the child's end")
            (should (equal (efrit-todo-agent-start "efrit" list t) "efrit"))
            (efrit-todo-agent-end "efrit" list)
            (should-not (efrit-todo-shared-test--set-aside dir)))
        (when (process-live-p child) (kill-process child))))))

(ert-deftest efrit-todo-shared-test-unshared-sessions-keep-conflict-copies ()
  "A session that is not shared keeps today's rule: a conflict copy."
  (skip-unless invocation-name)
  (efrit-todo-shared-test-with-dir dir
    (let ((list (format "unshared-%s" (cl-gensym)))
          (writer '(let ((efrit-todo-state-directory (nth 0 command-line-args-left))
                         (list (nth 1 command-line-args-left)))
                     (setq command-line-args-left nil)
                     (efrit-todo-task-create '(:subject "The child's") list)
                     (efrit-todo-flush))))
      (efrit-todo-task-create '(:subject "Mine") list)
      (efrit-todo-flush)
      (efrit-todo-shared-test--run writer dir list)
      (efrit-todo-task-create '(:subject "Mine too") list)
      (efrit-todo-flush)
      (should (efrit-todo-shared-test--set-aside dir)))))

;;;; Bursts and a kill

(ert-deftest efrit-todo-shared-test-two-bursts-at-once ()
  "Two Emacsen making 200 tasks each at once: 400 tasks, ids unique, nothing set aside."
  (skip-unless invocation-name)
  (efrit-todo-shared-test-with-dir dir
    (let* ((list (format "burst-%s" (cl-gensym)))
           (count 200)
           (a (efrit-todo-shared-test--spawn "efrit-todo-burst-a" efrit-todo-shared-test--creator
                                             dir list "a" (number-to-string count)))
           (b (efrit-todo-shared-test--spawn "efrit-todo-burst-b" efrit-todo-shared-test--creator
                                             dir list "b" (number-to-string count))))
      (unwind-protect
          (efrit-todo-shared-test--wait
           (list a b) (lambda () (and (process-get a 'ended) (process-get b 'ended)))
           120 "both bursts")
        (dolist (p (list a b)) (when (process-live-p p) (kill-process p))))
      (should (eql 0 (process-exit-status a)))
      (should (eql 0 (process-exit-status b)))
      (let* ((created (append (efrit-todo-shared-test--created (efrit-todo-shared-test--output a) "a")
                              (efrit-todo-shared-test--created (efrit-todo-shared-test--output b) "b")))
             (saved (efrit-todo-shared-test--saved-items dir list)))
        (should (= (length created) (* 2 count)))
        (should (= (length (delete-dups (mapcar #'car created))) (* 2 count)))
        (should (= (length saved) (* 2 count)))
        ;; Every task each child was told it made is saved under that id.
        (dolist (pair created)
          (should (equal (cdr (assoc (car pair) saved)) (cdr pair))))
        (should-not (efrit-todo-shared-test--set-aside dir))
        ;; This Emacs, sharing the list, reads all 400 and goes on at t401.
        (efrit-todo-share-list list)
        (should (= (length (efrit-todo-list list)) (* 2 count)))
        (should (string-match-p "Created t401:" (efrit-todo-task-create '(:subject "After") list)))))))

(ert-deftest efrit-todo-shared-test-a-killed-emacs-loses-nothing-it-returned-from ()
  "SIGKILL in the middle of a burst: what the killed Emacs returned from is saved.
The file is whole, and the other Emacs goes on to the end of its burst."
  (skip-unless (and invocation-name (memq system-type '(gnu/linux darwin berkeley-unix))))
  (efrit-todo-shared-test-with-dir dir
    (let* ((list (format "kill-%s" (cl-gensym)))
           (count 120)
           ;; The victim's burst is long enough that it is still making
           ;; tasks when it is killed, on a fast machine too; both bursts
           ;; together stay within the list's item limit.
           (victim-count 800)
           (victim (efrit-todo-shared-test--spawn "efrit-todo-victim" efrit-todo-shared-test--creator
                                                  dir list "v" (number-to-string victim-count)))
           (survivor (efrit-todo-shared-test--spawn "efrit-todo-survivor" efrit-todo-shared-test--creator
                                                    dir list "s" (number-to-string count))))
      (unwind-protect
          (progn
            (efrit-todo-shared-test--wait
             (list victim survivor)
             (lambda () (>= (length (efrit-todo-shared-test--created
                                     (efrit-todo-shared-test--output victim) "v"))
                            30))
             60 "the victim's 30th task")
            (signal-process victim 'SIGKILL)
            (efrit-todo-shared-test--wait
             (list victim survivor)
             (lambda () (and (process-get victim 'ended) (process-get survivor 'ended)))
             120 "the survivor's burst"))
        (dolist (p (list victim survivor)) (when (process-live-p p) (kill-process p))))
      (should (eq (process-status victim) 'signal))
      (should (eql 0 (process-exit-status survivor)))
      (let ((returned (efrit-todo-shared-test--created (efrit-todo-shared-test--output victim) "v"))
            (survived (efrit-todo-shared-test--created (efrit-todo-shared-test--output survivor) "s"))
            (saved (efrit-todo-shared-test--saved-items dir list)))
        (should (< (length returned) victim-count))
        (should (= (length survived) count))
        (dolist (pair (append returned survived))
          (should (equal (cdr (assoc (car pair) saved)) (cdr pair))))
        (should (= (length saved) (length (delete-dups (mapcar #'car saved)))))
        (should-not (efrit-todo-shared-test--set-aside dir))
        ;; Whole: it loads, and this Emacs goes on after the highest id.
        (efrit-todo-share-list list)
        (should (= (length (efrit-todo-list list)) (length saved)))
        (let ((next (1+ (apply #'max (mapcar (lambda (p) (string-to-number (substring (car p) 1)))
                                             saved)))))
          (should (string-match-p (format "Created t%d:" next)
                                  (efrit-todo-task-create '(:subject "After") list))))))))

;;;; Locks

(defconst efrit-todo-shared-test--holder
  '(let* ((args command-line-args-left)
          (dir (nth 0 args))
          (list (nth 1 args)))
     (setq command-line-args-left nil)
     (efrit-todo--module-shared-share list 1000 2000)
     (unless (efrit-todo--module-shared-begin list dir 5)
       (error "Could not take the lock"))
     (message "holding")
     (sleep-for 60))
  "A child Emacs: take the lock of DIR for a change of LIST, and keep it.")

(ert-deftest efrit-todo-shared-test-a-held-lock-is-waited-for-then-refused ()
  "A live holder is waited for boundedly; the change then fails, changing nothing.
Once the holder is killed, its lock is free at once."
  (skip-unless (and invocation-name (memq system-type '(gnu/linux darwin berkeley-unix))))
  (efrit-todo-shared-test-with-dir dir
    (let* ((list (format "held-%s" (cl-gensym)))
           (efrit-todo-shared-lock-timeout 0.5))
      (efrit-todo-share-list list)
      (efrit-todo-task-create '(:subject "Before") list)
      (let ((before (efrit-todo-shared-test--saved dir list))
            (holder (efrit-todo-shared-test--spawn "efrit-todo-holder" efrit-todo-shared-test--holder
                                                   dir list)))
        (unwind-protect
            (progn
              (efrit-todo-shared-test--wait-for-output holder "holding" "the holder")
              (let* ((started (float-time))
                     (err (should-error (efrit-todo-task-create '(:subject "Refused") list)
                                        :type 'efrit-todo-storage-error)))
                (should (string-match-p "lock" (error-message-string err)))
                (should (string-match-p (regexp-quote list) (error-message-string err)))
                (should (< (- (float-time) started) 5)))
              (should (equal (mapcar (lambda (i) (plist-get i :content)) (efrit-todo-list list))
                             '("Before")))
              (should (equal (efrit-todo-shared-test--saved dir list) before))
              ;; The holder dies without letting go: the lock is free.
              (signal-process holder 'SIGKILL)
              (efrit-todo-shared-test--wait (list holder) (lambda () (process-get holder 'ended))
                                            30 "the holder's end")
              (let ((efrit-todo-shared-lock-timeout 2)
                    (started (float-time)))
                (should (string-match-p "Created t2:" (efrit-todo-task-create '(:subject "After") list)))
                (should (< (- (float-time) started) 1))))
          (when (process-live-p holder) (kill-process holder)))))))

(defconst efrit-todo-shared-test--brief-holder
  '(let* ((args command-line-args-left)
          (dir (nth 0 args))
          (list (nth 1 args))
          (seconds (string-to-number (nth 2 args))))
     (setq command-line-args-left nil)
     (efrit-todo--module-shared-share list 1000 2000)
     (unless (efrit-todo--module-shared-begin list dir 5)
       (error "Could not take the lock"))
     (message "holding")
     (sleep-for seconds))
  "A child Emacs: take the lock of DIR for a change of LIST, for SECONDS.")

(ert-deftest efrit-todo-shared-test-waiting-for-the-lock-says-so ()
  "A change that waits for another Emacs's lock says so after about half a second.
The message names the key that stops the wait, and goes once the lock is had."
  (skip-unless (and invocation-name (memq system-type '(gnu/linux darwin berkeley-unix))))
  (efrit-todo-shared-test-with-dir dir
    (let* ((list (format "waiting-%s" (cl-gensym)))
           (efrit-todo-shared-lock-timeout 10)
           (messages nil))
      (efrit-todo-share-list list)
      (efrit-todo-task-create '(:subject "Before") list)
      (let ((holder (efrit-todo-shared-test--spawn "efrit-todo-brief-holder"
                                                   efrit-todo-shared-test--brief-holder
                                                   dir list "1.5")))
        (unwind-protect
            (progn
              (efrit-todo-shared-test--wait-for-output holder "holding" "the holder")
              (let ((started (float-time)))
                (cl-letf (((symbol-function 'message)
                           (lambda (fmt &rest args)
                             (push (cons (- (float-time) started) (and fmt (apply #'format fmt args)))
                                   messages))))
                  (should (string-match-p "Created t2:" (efrit-todo-task-create '(:subject "After") list)))))
              (setq messages (nreverse messages))
              (let ((waiting (cl-find-if (lambda (m) (and (cdr m) (string-match-p "waiting for another Emacs" (cdr m))))
                                         messages)))
                (should waiting)
                (should (string-match-p "C-g" (cdr waiting)))
                (should (<= 0.3 (car waiting) 1.2))
                ;; Once the lock is had, the message is cleared.
                (should (cl-find-if (lambda (m) (and (null (cdr m)) (> (car m) (car waiting))))
                                    messages))))
          (when (process-live-p holder) (kill-process holder))))
      ;; A lock that is free at once shows nothing.
      (setq messages nil)
      (cl-letf (((symbol-function 'message)
                 (lambda (fmt &rest args) (push (and fmt (apply #'format fmt args)) messages))))
        (efrit-todo-task-create '(:subject "At once") list))
      (should-not (cl-some (lambda (m) (and m (string-match-p "waiting" m))) messages)))))

(ert-deftest efrit-todo-shared-test-a-damaged-shared-file-is-moved-aside ()
  "A damaged file is kept as .corrupt with a warning; a FIFO is refused."
  (efrit-todo-shared-test-with-dir dir
    (let ((list (format "damaged-%s" (cl-gensym))))
      (efrit-todo-share-list list)
      (efrit-todo-task-create '(:subject "One") list)
      (let ((file (efrit-todo--module-store-file list dir)))
        (with-temp-file file (insert "{ not json"))
        (let ((warnings nil))
          (cl-letf (((symbol-function 'display-warning)
                     (lambda (_type text &rest _) (push text warnings))))
            (should (string-match-p "Created t2:" (efrit-todo-task-create '(:subject "Two") list))))
          (should (cl-some (lambda (w) (string-match-p "corrupt" w)) warnings)))
        (should (directory-files dir nil "\\.corrupt\\'"))
        (when (executable-find "mkfifo")
          (delete-file file)
          (call-process "mkfifo" nil nil nil file)
          (should-error (efrit-todo-task-create '(:subject "Three") list)
                        :type 'efrit-todo-storage-error)
          (should (equal (length (efrit-todo--module-items list)) 2)))))))

;;;; A file damaged, lost or replaced

(defun efrit-todo-shared-test--recording-warnings (thunk)
  "Call THUNK; return the warnings it showed, oldest first."
  (let ((warnings nil))
    (cl-letf (((symbol-function 'display-warning)
               (lambda (_type text &rest _) (push text warnings))))
      (funcall thunk))
    (nreverse warnings)))

(ert-deftest efrit-todo-shared-test-a-look-that-moves-a-damaged-file-aside-saves-in-its-place ()
  "The look that moves a damaged shared file aside saves this Emacs's list there.
Another Emacs then reads the list from the file at once, rather than
finding no file, and nothing is lost meanwhile."
  (skip-unless invocation-name)
  (efrit-todo-shared-test-with-dir dir
    (let ((list (format "damaged-look-%s" (cl-gensym))))
      (efrit-todo-share-list list)
      (efrit-todo-task-create '(:subject "One") list)
      (efrit-todo-task-create '(:subject "Two") list)
      (let ((file (efrit-todo--module-store-file list dir)))
        (with-temp-file file (insert "garbage{{{"))
        (let ((warnings (efrit-todo-shared-test--recording-warnings #'efrit-todo--shared-poll)))
          (should (cl-some (lambda (w) (string-match-p "corrupt" w)) warnings)))
        (should (directory-files dir nil "\\.corrupt\\'"))
        (should (file-exists-p file))
        (should (equal (efrit-todo-shared-test--saved-items dir list)
                       '(("t1" . "One") ("t2" . "Two"))))
        (let ((out (efrit-todo-shared-test--run efrit-todo-shared-test--lister dir list)))
          (should (string-match-p "t1 \\[pending\\] One" out))
          (should (string-match-p "t2 \\[pending\\] Two" out)))))))

(ert-deftest efrit-todo-shared-test-an-emacs-exiting-saves-its-shared-lists ()
  "An Emacs that exits saves a shared list whose file is gone, as any list."
  (skip-unless invocation-name)
  (efrit-todo-shared-test-with-dir dir
    (let ((list (format "exit-%s" (cl-gensym))))
      (efrit-todo-shared-test--run
       '(let* ((args command-line-args-left)
               (list (nth 1 args)))
          ;; Set, not bound: the exit comes after this form.
          (setq efrit-todo-state-directory (nth 0 args))
          (setq command-line-args-left nil)
          (efrit-todo-share-list list)
          (efrit-todo-task-create '(:subject "Kept at exit") list)
          ;; The file goes; the list is saved again as this Emacs exits.
          (delete-file (efrit-todo--module-store-file list efrit-todo-state-directory)))
       dir list)
      (should (file-exists-p (efrit-todo--module-store-file list dir)))
      (should (equal (efrit-todo-shared-test--saved-items dir list)
                     '(("t1" . "Kept at exit")))))))

(ert-deftest efrit-todo-shared-test-a-file-replaced-by-a-fresh-emacs-is-not-overwritten ()
  "A save of a lower generation that replaced the file is taken in, nothing lost.
The file is lost; a fresh Emacs shares the list and saves its own
list there, at generation 1 with t1.  This Emacs's next change takes
that list in, keeps its own list beside as a .conflict copy with a
warning, and issues an id above every id either Emacs issued."
  (skip-unless invocation-name)
  (efrit-todo-shared-test-with-dir dir
    (let ((list (format "replaced-%s" (cl-gensym))))
      (efrit-todo-share-list list)
      (dolist (subject '("One" "Two" "Three"))
        (efrit-todo-task-create (list :subject subject) list))
      (delete-file (efrit-todo--module-store-file list dir))
      (let ((out (efrit-todo-shared-test--run efrit-todo-shared-test--creator dir list "fresh" "1")))
        (should (equal (efrit-todo-shared-test--created out "fresh") '(("t1" . "fresh task 0")))))
      (let* ((result nil)
             (warnings (efrit-todo-shared-test--recording-warnings
                        (lambda ()
                          (setq result (efrit-todo-task-create '(:subject "After") list))))))
        (should (string-match-p "Created t4:" result))
        (should (cl-some (lambda (w) (string-match-p "\\.conflict" w)) warnings)))
      (should (equal (efrit-todo-shared-test--saved-items dir list)
                     '(("t1" . "fresh task 0") ("t4" . "After"))))
      (let ((kept (directory-files dir t "\\.conflict\\'")))
        (should (= (length kept) 1))
        (let ((json-object-type 'alist) (json-array-type 'list) (json-key-type 'symbol))
          (should (equal (mapcar (lambda (item) (alist-get 'content item))
                                 (alist-get 'items (json-read-file (car kept))))
                         '("One" "Two" "Three")))))
      ;; The fresh Emacs's next id comes after them all.
      (let ((out (efrit-todo-shared-test--run efrit-todo-shared-test--creator dir list "fresh" "1")))
        (should (equal (mapcar #'car (efrit-todo-shared-test--created out "fresh")) '("t5")))))))

;;;; The buffer

(ert-deftest efrit-todo-shared-test-a-look-runs-the-change-hook-for-another-emacs-change ()
  "Another Emacs's change makes the look at the files run the change hook.
That is what redraws *efrit-todos*; a look that finds nothing new
runs nothing."
  (skip-unless invocation-name)
  (efrit-todo-shared-test-with-dir dir
    (let ((list (format "watch-%s" (cl-gensym)))
          (changed nil))
      (efrit-todo-share-list list)
      (efrit-todo-task-create '(:subject "Mine") list)
      (let ((efrit-todo-change-functions (list (lambda (session) (push session changed)))))
        (efrit-todo--shared-poll)
        (should-not (member list changed))
        (efrit-todo-shared-test--run efrit-todo-shared-test--creator dir list "child" "1")
        (efrit-todo--shared-poll)
        (should (member list changed))
        ;; The list the hook's functions read is the new one.
        (should (equal (mapcar (lambda (i) (plist-get i :id)) (efrit-todo--module-items list))
                       '("t1" "t2")))))))

;; The look runs every second: a file it cannot read would otherwise put
;; its message over whatever the user types in the minibuffer, forever.
(ert-deftest efrit-todo-shared-test-a-look-that-fails-says-so-once ()
  "A shared file the look cannot take is named once, not at every look.
Once it can be read again, a later failure is named again."
  (efrit-todo-shared-test-with-dir dir
    (let ((list (format "unreadable-%s" (cl-gensym)))
          (messages nil))
      (efrit-todo-share-list list)
      (efrit-todo-task-create '(:subject "Mine") list)
      (let ((file (efrit-todo--module-store-file list dir)))
        (cl-letf (((symbol-function 'message)
                   (lambda (fmt &rest args) (push (apply #'format fmt args) messages))))
          (delete-file file)
          (make-directory file)
          (dotimes (_ 3) (efrit-todo--shared-poll))
          (should (equal (length messages) 1))
          (should (string-match-p "not a regular file" (car messages)))
          (delete-directory file)
          (efrit-todo-task-create '(:subject "Saved again") list)
          (efrit-todo--shared-poll)
          (should (equal (length messages) 1))
          (delete-file file)
          (make-directory file)
          (efrit-todo--shared-poll)
          (should (equal (length messages) 2))
          (delete-directory file))))))

;;;; A list shared by hand, in the buffer

(ert-deftest efrit-todo-shared-test-a-list-shared-by-hand-is-reachable-in-the-buffer ()
  "A fresh Emacs shares an empty list by hand: *efrit-todos* reaches it.
The prompt shows its default; the buffer shows the list's section,
`a' adds to it and `s' offers it."
  (skip-unless invocation-name)
  (efrit-todo-shared-test-with-dir dir
    (let* ((list (format "byhand-%s" (cl-gensym)))
           (out (efrit-todo-shared-test--run
                 '(let* ((args command-line-args-left)
                         (efrit-todo-state-directory (nth 0 args))
                         (list (nth 1 args))
                         (prompts nil))
                    (setq command-line-args-left nil)
                    (require 'efrit-todo-ui)
                    ;; Plain RET: the default.
                    (cl-letf (((symbol-function 'read-string)
                               (lambda (prompt &optional _initial _history default &rest _)
                                 (push prompt prompts)
                                 default)))
                      (call-interactively #'efrit-todo-share-list))
                    (message "PROMPT<%s>" (car prompts))
                    (cl-letf (((symbol-function 'read-string)
                               (lambda (prompt &rest _) (push prompt prompts) list)))
                      (call-interactively #'efrit-todo-share-list))
                    (with-current-buffer (efrit-todo-show)
                      (message "BUFFER<%s>" (buffer-string))
                      (cl-letf (((symbol-function 'read-string)
                                 (lambda (prompt &rest _) (push prompt prompts) "By hand")))
                        (call-interactively #'efrit-todo-add-item))
                      (message "ADD<%s>" (car prompts))
                      (message "ITEMS<%S>" (mapcar (lambda (i) (plist-get i :content)) (efrit-todo-list list)))
                      (cl-letf (((symbol-function 'completing-read)
                                 (lambda (_prompt collection &rest _)
                                   (message "OFFERED<%S>" (all-completions "" collection))
                                   list)))
                        (call-interactively #'efrit-todo-choose-session))))
                 dir list)))
      (should (string-match-p "PROMPT<Share the list named (default default): >" out))
      (should (string-match-p (format "BUFFER<[^>]*%s" (regexp-quote list)) out))
      (should-not (string-match-p "No todo lists yet" out))
      (should (string-match-p (format "ADD<Add to %s: >" (regexp-quote list)) out))
      (should (string-match-p "ITEMS<(\"By hand\")>" out))
      (should (string-match-p (format "OFFERED<[^>]*\"%s\"" (regexp-quote list)) out)))))

;;;; Undo

(ert-deftest efrit-todo-shared-test-undo-takes-back-this-emacs-change-only ()
  "Undo on a shared list undoes this Emacs's own last change, and only that.
It refuses, saying why, when another Emacs has since changed the same item."
  (skip-unless invocation-name)
  (efrit-todo-shared-test-with-dir dir
    (let ((list (format "undo-%s" (cl-gensym)))
          (updater '(let* ((args command-line-args-left)
                           (efrit-todo-state-directory (nth 0 args))
                           (list (nth 1 args)))
                      (setq command-line-args-left nil)
                      (efrit-todo-share-list list)
                      (efrit-todo-task-update (list :taskId (nth 2 args) :status (nth 3 args)) list))))
      (efrit-todo-share-list list)
      (efrit-todo-task-create '(:subject "Mine") list)
      (efrit-todo-shared-test--run efrit-todo-shared-test--creator dir list "child" "1")
      ;; The child's t2 came after this Emacs's t1: undo takes back t1 only.
      (should (string-match-p "undid" (efrit-todo-undo list)))
      (should (equal (mapcar (lambda (i) (plist-get i :id)) (efrit-todo-list list)) '("t2")))
      (should (equal (mapcar #'car (efrit-todo-shared-test--saved-items dir list)) '("t2")))
      ;; Nothing more of this Emacs's to undo: the child's change stays.
      (should-not (efrit-todo-undo list))
      (should (equal (mapcar (lambda (i) (plist-get i :id)) (efrit-todo-list list)) '("t2")))
      ;; This Emacs starts t2; the child then completes it: refused.
      (efrit-todo-task-update '(:taskId "t2" :status "in_progress") list)
      (efrit-todo-shared-test--run updater dir list "t2" "completed")
      (let ((err (should-error (efrit-todo-undo list) :type 'efrit-todo-invalid-input)))
        (should (string-match-p "t2" (error-message-string err)))
        (should (string-match-p "since" (error-message-string err))))
      (should (eq (plist-get (car (efrit-todo-list list)) :status) 'completed)))))

;;;; The list id

(ert-deftest efrit-todo-shared-test-list-id-is-a-short-printable-name ()
  "Only short printable strings are safe list ids; others are ignored with a message."
  (should (efrit-todo-list-id-p "my-project"))
  (should (efrit-todo-list-id-p "Projekt Straße 2"))
  (should (eq (get 'efrit-todo-list-id 'safe-local-variable) #'efrit-todo-list-id-p))
  (dolist (bad (list nil 'sym 42 "" "   " "a\nb" "tab\there" (make-string 65 ?x)
                     '("list") "bell\a"))
    (should-not (efrit-todo-list-id-p bad)))
  ;; A path is only a name: its file stays in the state directory.
  (efrit-todo-shared-test-with-dir dir
    (let ((list "../../etc/evil"))
      (should (efrit-todo-list-id-p list))
      (efrit-todo-share-list list)
      (efrit-todo-task-create '(:subject "Contained") list)
      (should (file-in-directory-p (efrit-todo--module-store-file list dir) dir))
      (should (file-exists-p (efrit-todo--module-store-file list dir)))))
  (with-temp-buffer
    (setq-local efrit-todo-list-id "a\nb")
    (let ((messages nil))
      (cl-letf (((symbol-function 'message)
                 (lambda (fmt &rest args) (push (apply #'format fmt args) messages))))
        (should-not (efrit-todo-buffer-list-id)))
      (should (cl-some (lambda (m) (string-match-p "ignoring efrit-todo-list-id" m)) messages))
      ;; The value comes from a file anyone may write: the message shows
      ;; its newline escaped, on one line, rather than a second line of
      ;; the file's choosing.
      (should (cl-some (lambda (m) (string-match-p "a\\\\nb" m)) messages))
      (should-not (cl-some (lambda (m) (string-match-p "\n" m)) messages))))
  (with-temp-buffer
    (setq-local efrit-todo-list-id "team")
    (should (equal (efrit-todo-buffer-list-id) "team"))))

(ert-deftest efrit-todo-shared-test-list-id-from-dir-locals ()
  "A .dir-locals.el list id is taken when safe, and not when it is not."
  (let ((root (file-name-as-directory (make-temp-file "efrit-todo-dirlocal" t)))
        (enable-local-variables :safe))
    (unwind-protect
        (pcase-dolist (`(,value . ,expected) '(("project-x" . "project-x")
                                               ((evil . form) . nil)
                                               ("line\nbreak" . nil)))
          (with-temp-file (expand-file-name ".dir-locals.el" root)
            (prin1 `((nil . ((efrit-todo-list-id . ,value)))) (current-buffer)))
          (let ((file (expand-file-name "notes.txt" root)))
            (with-current-buffer (find-file-noselect file)
              (unwind-protect
                  (should (equal (efrit-todo-buffer-list-id) expected))
                (set-buffer-modified-p nil)
                (kill-buffer)))))
      (delete-directory root t))))

(provide 'efrit-todo-shared-test)

;;; efrit-todo-shared-test.el ends here
