;;; efrit-todo-store-test.el --- ERT tests of persistence and history -*- lexical-binding: t; -*-

;;; Commentary:

;; Persistence and history through the real module: state files written
;; atomically with private modes, read back by `efrit-todo-restore', older
;; layouts, damaged files moved aside, session names that are not file
;; names, a file left alone by an invalid write, old files pruned, history
;; with undo, and a child Emacs killed with SIGKILL in the middle of a
;; stream of writes.
;;
;; Every test saves into a temporary directory of its own; in batch Emacs
;; `efrit-todo-state-directory' defaults to nil, so no test run ever
;; writes into the user's Emacs directory.

;;; Code:

(require 'ert)
(require 'cl-lib)
(require 'json)
(require 'subr-x)
(require 'efrit-todo)
(require 'efrit-todo-test-helpers)

;;;; Helpers

(defmacro efrit-todo-store-test-with-dir (dir &rest body)
  "Run BODY with persistence into a fresh directory bound to DIR.
The directory is deleted afterwards, once pending saves are done."
  (declare (indent 1) (debug (symbolp body)))
  (let ((root (make-symbol "root")))
    `(let* ((,root (make-temp-file "efrit-todo-store-test-" t))
            (,dir (expand-file-name "state/" ,root))
            (efrit-todo-state-directory ,dir))
       (unwind-protect
           (progn ,@body)
         (efrit-todo-flush)
         (delete-directory ,root t)))))

(defun efrit-todo-store-test-session ()
  "Return the name of a session that no other test has."
  (format "store-test-%s" (cl-gensym)))

(defun efrit-todo-store-test-write (session &rest items)
  "Write ITEMS, (CONTENT STATUS [ID]) lists, to SESSION."
  (efrit-todo-write
   (list :todos (vconcat (mapcar (lambda (item)
                                   (append (list :content (nth 0 item) :status (nth 1 item))
                                           (and (nth 2 item) (list :id (nth 2 item)))))
                                 items)))
   session))

(defun efrit-todo-store-test-contents (session)
  "Return the contents of SESSION's items."
  (mapcar (lambda (item) (plist-get item :content)) (efrit-todo-list session)))

(defun efrit-todo-store-test-bytes (file)
  "Return the bytes of FILE as a unibyte string."
  (with-temp-buffer
    (set-buffer-multibyte nil)
    (insert-file-contents-literally file)
    (buffer-string)))

(defmacro efrit-todo-store-test-with-saved (dir session items &rest body)
  "Run BODY once SESSION, a new session, has ITEMS saved in DIR.
DIR is a fresh state directory, as in `efrit-todo-store-test-with-dir';
ITEMS, not evaluated, are the (CONTENT STATUS) lists that
`efrit-todo-store-test-write' takes."
  (declare (indent 3) (debug (symbolp symbolp sexp body)))
  `(efrit-todo-store-test-with-dir ,dir
     (let ((,session (efrit-todo-store-test-session)))
       (efrit-todo-store-test-write ,session ,@(mapcar (lambda (item) (list 'quote item)) items))
       (efrit-todo-save)
       ,@body)))

(defun efrit-todo-store-test-read-json (file)
  "Return FILE parsed as JSON, objects as alists with symbol keys."
  (with-temp-buffer
    (insert-file-contents file)
    (let ((json-object-type 'alist) (json-array-type 'list))
      (json-read))))

(defmacro efrit-todo-store-test-capturing-warnings (var &rest body)
  "Run BODY with the texts given to `display-warning' collected in VAR."
  (declare (indent 1) (debug (symbolp body)))
  `(let ((,var nil))
     (cl-letf (((symbol-function 'display-warning)
                (lambda (_type text &rest _) (push text ,var))))
       ,@body)))

;;;; Saving

(ert-deftest efrit-todo-store-test-disk-failures-are-storage-errors ()
  "A directory the module cannot read or write is an `efrit-todo-storage-error'."
  (let* ((root (make-temp-file "efrit-todo-store-test-" t))
         (not-a-dir (expand-file-name "plain-file" root))
         (session (efrit-todo-store-test-session)))
    (unwind-protect
        (progn
          (with-temp-file not-a-dir (insert "just text"))
          (let ((err (should-error (efrit-todo--module-store-restore-within not-a-dir nil nil 10 10)
                                   :type 'efrit-todo-storage-error)))
            (should (memq 'efrit-todo-error (get (car err) 'error-conditions)))
            (should (string-match-p "plain-file" (error-message-string err))))
          (efrit-todo-store-test-write session '("Kept in memory" "pending"))
          (let ((err (should-error (efrit-todo--module-store-save
                                    session (expand-file-name "sub" not-a-dir))
                                   :type 'efrit-todo-storage-error)))
            (should (string-match-p (regexp-quote session) (error-message-string err))))
          ;; A wrong argument type is the caller's mistake, named.
          (let ((err (should-error (efrit-todo--module-store-save session 42)
                                   :type 'efrit-todo-invalid-input)))
            (should (string-match-p "dir" (error-message-string err)))))
      (efrit-todo-reset session)
      (delete-directory root t))))

(ert-deftest efrit-todo-store-test-a-change-is-saved-privately ()
  "A write lands in the session's file, mode 0600, in a directory of mode 0700."
  (efrit-todo-store-test-with-saved dir session (("Read the code" "in_progress") ("Fix it" "pending"))
    (let* ((file (efrit-todo-state-file session))
           (json (efrit-todo-store-test-read-json file)))
      (should (string-prefix-p (expand-file-name dir) file))
      (should (= (file-modes file) #o600))
      (should (= (file-modes dir) #o700))
      (should (= (alist-get 'schema_version json) 2))
      (should (equal (alist-get 'session json) session))
      (should (= (alist-get 'id_counter json) 2))
      (should (equal (mapcar (lambda (item) (alist-get 'status item)) (alist-get 'items json))
                     '("in_progress" "pending")))
      (should (equal (alist-get 'kind (car (alist-get 'history json))) "write"))
      (should (equal (directory-files dir nil "\\`[^.]") (list (file-name-nondirectory file)))))))

(ert-deftest efrit-todo-store-test-memory-only-writes-nothing ()
  "With `efrit-todo-state-directory' nil no file appears."
  (efrit-todo-store-test-with-dir dir
    (let ((efrit-todo-state-directory nil)
          (session (efrit-todo-store-test-session)))
      (efrit-todo-store-test-write session '("Stay in memory" "pending"))
      (efrit-todo-save)
      (should-not (efrit-todo-state-file session))
      (should-not (file-exists-p dir)))))

(ert-deftest efrit-todo-store-test-an-invalid-write-leaves-the-file-alone ()
  "A write that signals leaves the bytes on disk exactly as they were."
  (efrit-todo-store-test-with-saved dir session (("Keep me" "in_progress"))
    (let* ((file (efrit-todo-state-file session))
           (before (efrit-todo-store-test-bytes file)))
      (should-error (efrit-todo-store-test-write session '("Keep me" "done"))
                    :type 'efrit-todo-invalid-input)
      (should-error (efrit-todo-store-test-write session '("x" "pending" "t99"))
                    :type 'efrit-todo-invalid-input)
      (efrit-todo-save)
      (should (equal (efrit-todo-store-test-bytes file) before)))))

(ert-deftest efrit-todo-store-test-save-all-and-exit-hook ()
  "`efrit-todo-save' with ALL writes every session; exiting flushes."
  (should (memq #'efrit-todo--save-on-exit kill-emacs-hook))
  (efrit-todo-store-test-with-dir dir
    (let ((session (efrit-todo-store-test-session)))
      (let ((efrit-todo-state-directory nil))
        (efrit-todo-store-test-write session '("Made while off" "pending")))
      (should-not (file-exists-p (efrit-todo-state-file session)))
      (should (= 0 (efrit-todo-save t)))
      (should (file-exists-p (efrit-todo-state-file session))))))

(ert-deftest efrit-todo-store-test-a-failed-save-is-reported ()
  "A directory that cannot be made gives a message, not an error."
  (let* ((blocker (make-temp-file "efrit-todo-store-test-blocker"))
         (efrit-todo-state-directory (expand-file-name "sub/" blocker))
         (session (efrit-todo-store-test-session))
         (messages nil))
    (unwind-protect
        (cl-letf (((symbol-function 'message)
                   (lambda (format &rest args) (push (apply #'format-message format args) messages))))
          (efrit-todo-store-test-write session '("Cannot be saved" "pending"))
          (should (= 1 (efrit-todo-save)))
          (should (cl-some (lambda (m) (string-match-p (regexp-quote session) m)) messages)))
      ;; The save stays pending: let it land, then remove what it made.
      (delete-file blocker)
      (efrit-todo-save)
      (delete-directory blocker t))))

(ert-deftest efrit-todo-store-test-a-failed-save-stays-pending ()
  "A failed save is not forgotten: every save says so until it lands."
  (let* ((root (make-temp-file "efrit-todo-store-test-" t))
         (blocker (expand-file-name "blocker" root))
         (efrit-todo-state-directory (expand-file-name "state/" blocker))
         (session (efrit-todo-store-test-session))
         (inhibit-message t))
    (unwind-protect
        (progn
          (write-region "" nil blocker)
          (efrit-todo-store-test-write session '("Must not be lost" "pending"))
          (should (= 1 (efrit-todo-save)))
          ;; Nothing changed since, but the list is still not on disk.
          (should (= 1 (efrit-todo-save)))
          (should (string-match-p (regexp-quote session) (car (efrit-todo-flush))))
          (delete-file blocker)
          (should (= 0 (efrit-todo-save)))
          (should (equal (alist-get 'content
                                    (car (alist-get 'items (efrit-todo-store-test-read-json
                                                            (efrit-todo-state-file session)))))
                         "Must not be lost"))
          (should-not (efrit-todo-flush)))
      (efrit-todo-flush)
      (delete-directory root t))))

(ert-deftest efrit-todo-store-test-batch-emacs-saves-nothing-by-default ()
  "The default directory is nil in batch Emacs and under the user's Emacs directory otherwise."
  (should noninteractive)
  (should-not (eval (car (get 'efrit-todo-state-directory 'standard-value)) t))
  (let* ((home (file-name-as-directory (make-temp-file "efrit-todo-store-test-home" t)))
         (noninteractive nil)
         (user-emacs-directory home))
    (unwind-protect
        (should (equal (eval (car (get 'efrit-todo-state-directory 'standard-value)) t)
                       (abbreviate-file-name (expand-file-name "efrit-todo/" home))))
      (delete-directory home t))))

(ert-deftest efrit-todo-store-test-a-session-name-changed-in-place ()
  "A session string altered with `aset' after use names its new session."
  (let* ((old (efrit-todo-store-test-session))
         (name (copy-sequence old)))
    (efrit-todo-store-test-write name '("For the old name" "pending"))
    (aset name (1- (length name)) ?x)
    (should-not (equal name old))
    (efrit-todo-store-test-write name '("For the new name" "pending"))
    (should (equal (efrit-todo-store-test-contents old) '("For the old name")))
    (should (equal (efrit-todo-store-test-contents (copy-sequence name)) '("For the new name")))))

(ert-deftest efrit-todo-store-test-a-relative-directory-is-in-the-emacs-directory ()
  "A relative `efrit-todo-state-directory' is under `user-emacs-directory', whatever the buffer."
  (let* ((home (file-name-as-directory (make-temp-file "efrit-todo-store-test-home" t)))
         (elsewhere (file-name-as-directory (make-temp-file "efrit-todo-store-test-elsewhere" t)))
         (user-emacs-directory home)
         (efrit-todo-state-directory "relative-state")
         (session (efrit-todo-store-test-session))
         (expected (expand-file-name (concat "relative-state/" (efrit-todo--module-store-file session ""))
                                     home)))
    (unwind-protect
        (progn
          (let ((default-directory elsewhere))
            (should (equal (efrit-todo-state-file session) expected)))
          (with-temp-buffer
            (setq default-directory (expand-file-name "sub/" elsewhere))
            (should (equal (efrit-todo-state-file session) expected))
            (efrit-todo-store-test-write session '("Saved in one place" "pending"))
            (should (= 0 (efrit-todo-save)))
            (should (file-exists-p expected))
            (should-not (file-exists-p (expand-file-name "relative-state" default-directory)))))
      (efrit-todo-flush)
      (delete-directory home t)
      (delete-directory elsewhere t))))

(ert-deftest efrit-todo-store-test-a-directory-that-is-a-file-says-so ()
  "A state directory path that names a file gives a message saying that."
  (let* ((file (make-temp-file "efrit-todo-store-test-not-a-dir"))
         (efrit-todo-state-directory file)
         (session (efrit-todo-store-test-session))
         (inhibit-message t))
    (unwind-protect
        (progn
          (efrit-todo-store-test-write session '("Nowhere to go" "pending"))
          (let ((failures (efrit-todo-flush)))
            (should (= (length failures) 1))
            (should (string-match-p (concat (regexp-quote (directory-file-name file))
                                            " is a file, not a directory")
                                    (car failures)))
            (should-not (string-match-p "os error" (car failures)))))
      (delete-file file)
      (efrit-todo-flush)
      (ignore-errors (delete-directory file t)))))

(ert-deftest efrit-todo-store-test-a-directory-others-can-write-is-refused ()
  "A state directory writable by group or others is neither written nor read."
  (efrit-todo-store-test-with-dir dir
    (let ((session (efrit-todo-store-test-session))
          (inhibit-message t))
      (efrit-todo-store-test-write session '("Private" "pending"))
      (should (= 0 (efrit-todo-save)))
      (set-file-modes dir #o777)
      (efrit-todo-store-test-write session '("Private" "pending") '("Still private" "pending"))
      (let ((failures (efrit-todo-flush)))
        (should (= (length failures) 1))
        (should (string-match-p "writable by others" (car failures))))
      (should (string-match-p "writable by others"
                              (cadr (should-error (efrit-todo-restore t)))))
      (set-file-modes dir #o700)
      (should (= 0 (efrit-todo-save))))))

;;;; Restoring

(ert-deftest efrit-todo-store-test-restore-brings-a-list-back ()
  "A saved list comes back, with its ids, counter and history."
  (efrit-todo-store-test-with-saved dir session (("Step one" "completed") ("Step two" "in_progress"))
    (let ((saved (efrit-todo-list session))
          (history (efrit-todo-history session)))
      (let ((efrit-todo-state-directory nil))
        (efrit-todo-store-test-write session '("Something else" "pending")))
      (should-not (member session (efrit-todo-restore)))
      (should (equal (efrit-todo-store-test-contents session) '("Something else")))
      (should (member session (efrit-todo-restore t)))
      (should (equal (efrit-todo-list session) saved))
      (should (equal (efrit-todo-history session) history))
      (efrit-todo-store-test-write session '("Step one" "completed") '("Step three" "pending"))
      (should (equal (plist-get (car (last (efrit-todo-list session))) :id) "t4")))))

(ert-deftest efrit-todo-store-test-names-that-are-not-file-names ()
  "Session names with slashes, dots, case and non-ASCII text stay apart and inside."
  (efrit-todo-store-test-with-dir dir
    (let ((names (list "../../escape" "." "Mixed Case" "mixed case" "日本語 ü/ß"
                       (make-string 200 ?é))))
      (dolist (name names)
        (efrit-todo-reset name)
        (efrit-todo-store-test-write name (list (format "item of %s" (substring name 0 (min 10 (length name)))) "pending")))
      (efrit-todo-save)
      (let ((files (directory-files dir nil "\\.json\\'")))
        (should (= (length files) (length names)))
        (dolist (file files)
          (should (<= (string-bytes file) 200))))
      (should-not (file-exists-p (expand-file-name "../../escape.json" dir)))
      (should (equal (sort (efrit-todo-restore t) #'string<) (sort (copy-sequence names) #'string<)))
      (dolist (name names)
        (should (equal (efrit-todo-state-file name)
                       (expand-file-name (file-name-nondirectory (efrit-todo-state-file name)) dir)))))))

(ert-deftest efrit-todo-store-test-a-damaged-file-is-moved-aside ()
  "Truncated, empty and garbage files are moved aside with a warning."
  (efrit-todo-store-test-with-dir dir
    (let ((good (efrit-todo-store-test-session))
          (cut (efrit-todo-store-test-session)))
      (efrit-todo-store-test-write good '("Fine" "pending"))
      (efrit-todo-store-test-write cut '("Cut short" "pending"))
      (efrit-todo-save)
      (let* ((file (efrit-todo-state-file cut))
             (bytes (efrit-todo-store-test-bytes file)))
        (let ((coding-system-for-write 'binary))
          (write-region (substring bytes 0 (/ (length bytes) 2)) nil file)
          (write-region "" nil (expand-file-name "empty.json" dir))
          (write-region "\0\1garbage" nil (expand-file-name "garbage.json" dir)))
        (efrit-todo-store-test-capturing-warnings warnings
          (let ((restored (efrit-todo-restore t)))
            (should (member good restored))
            (should-not (member cut restored)))
          (should (= (length warnings) 3))
          (should (cl-every (lambda (w) (string-match-p "moved aside as .*\\.corrupt" w)) warnings)))
        (should-not (file-exists-p file))
        (should (equal (efrit-todo-store-test-bytes (concat file ".corrupt"))
                       (substring bytes 0 (/ (length bytes) 2))))
        (should (file-exists-p (expand-file-name "empty.json.corrupt" dir)))
        (should (equal (efrit-todo-store-test-contents cut) '("Cut short")))))))

(ert-deftest efrit-todo-store-test-older-and-newer-layouts ()
  "A file of the first layout loads; one from a newer version is left alone."
  (efrit-todo-store-test-with-dir dir
    (let ((old (efrit-todo-store-test-session))
          (new (efrit-todo-store-test-session)))
      (with-file-modes #o700 (make-directory dir t))
      (with-temp-file (expand-file-name "old-layout.json" dir)
        (insert (json-encode `((schema_version . 1) (session . ,old) (counter . 5)
                               (todos . [((id . "t5") (content . "From version 1")
                                          (status . "in_progress") (created . 1.5))])))))
      (with-temp-file (expand-file-name "new-layout.json" dir)
        (insert (json-encode `((schema_version . 99) (session . ,new) (items . [])))))
      (efrit-todo-store-test-capturing-warnings warnings
        (should (equal (efrit-todo-restore) (list old)))
        (should (string-match-p "newer efrit-todo" (car warnings))))
      (should (file-exists-p (expand-file-name "new-layout.json" dir)))
      (should (equal (plist-get (efrit-todo-current old) :content) "From version 1"))
      (efrit-todo-store-test-write old '("From version 1" "in_progress") '("Added now" "pending"))
      (should (equal (mapcar (lambda (i) (plist-get i :id)) (efrit-todo-list old)) '("t5" "t6"))))))

(ert-deftest efrit-todo-store-test-on-load-only-open-sessions-return ()
  "Restoring at load time brings back sessions with unfinished items only."
  (efrit-todo-store-test-with-dir dir
    (let ((open (efrit-todo-store-test-session))
          (done (efrit-todo-store-test-session)))
      (efrit-todo-store-test-write open '("Still to do" "pending"))
      (efrit-todo-store-test-write done '("All done" "completed"))
      (efrit-todo-save)
      (let ((efrit-todo-state-directory nil))
        (efrit-todo-reset open)
        (efrit-todo-reset done))
      (let ((noninteractive t))
        (efrit-todo--restore-on-load))
      (should-not (efrit-todo-list open))
      (let ((noninteractive nil))
        (efrit-todo--restore-on-load))
      (should (equal (efrit-todo-store-test-contents open) '("Still to do")))
      (should-not (efrit-todo-list done)))))

(defun efrit-todo-store-test-edit-file (file regexp replacement)
  "Replace the one match of REGEXP in FILE by REPLACEMENT."
  (with-temp-file file
    (insert-file-contents file)
    (goto-char (point-min))
    (should (re-search-forward regexp nil t))
    (replace-match replacement t t)
    (should-not (re-search-forward regexp nil t))))

(ert-deftest efrit-todo-store-test-a-bad-record-field-keeps-the-list ()
  "A bad value in a record-only part drops that part with a warning naming it.
The list comes back, and the file is not moved aside."
  (efrit-todo-store-test-with-saved dir session (("Keep me" "in_progress") ("And me" "pending"))
    (let ((file (efrit-todo-state-file session)))
      (efrit-todo-store-test-edit-file file "\"breaker\":{\"tripped\":false,\"calls\":[0-9]+"
                                       "\"breaker\":{\"tripped\":false,\"calls\":-1")
      (let ((efrit-todo-state-directory nil))
        (efrit-todo-reset session))
      (efrit-todo-store-test-capturing-warnings warnings
        (should (member session (efrit-todo-restore t)))
        (should (= (length warnings) 1))
        (should (string-match-p (regexp-quote file) (car warnings)))
        (should (string-match-p "breaker\\.calls: .*dropped" (car warnings))))
      (should (equal (efrit-todo-store-test-contents session) '("Keep me" "And me")))
      (should (file-exists-p file))
      (should-not (file-exists-p (concat file ".corrupt"))))))

(ert-deftest efrit-todo-store-test-restore-keeps-the-limits ()
  "A file over `efrit-todo-max-items' or the content length is left alone, saying why."
  (efrit-todo-store-test-with-dir dir
    (let ((three (efrit-todo-store-test-session))
          (long (efrit-todo-store-test-session)))
      (efrit-todo-store-test-write three '("One" "pending") '("Two" "pending") '("Three" "pending"))
      (efrit-todo-store-test-write long '("A rather long item" "pending"))
      (efrit-todo-save)
      (let ((efrit-todo-state-directory nil))
        (efrit-todo-reset three)
        (efrit-todo-reset long))
      (let ((efrit-todo-max-items 2))
        (efrit-todo-store-test-capturing-warnings warnings
          (let ((restored (efrit-todo-restore t)))
            (should-not (member three restored))
            (should (member long restored)))
          (should (cl-some (lambda (w) (string-match-p "has 3 items; the limit is 2 (efrit-todo-max-items)" w))
                           warnings))))
      (should-not (efrit-todo-list three))
      (let ((efrit-todo-max-content-length 10))
        (efrit-todo-store-test-capturing-warnings warnings
          (let ((restored (efrit-todo-restore t)))
            (should (member three restored))
            (should-not (member long restored)))
          (should (cl-some (lambda (w) (string-match-p "items\\[0\\]\\.content: is 18 characters long; the limit is 10" w))
                           warnings))))
      (dolist (session (list three long))
        (should (file-exists-p (efrit-todo-state-file session)))
        (should-not (file-exists-p (concat (efrit-todo-state-file session) ".corrupt")))))))

(ert-deftest efrit-todo-store-test-a-huge-file-is-refused-unread ()
  "A file bigger than any list within the limits is left alone, unparsed."
  (efrit-todo-store-test-with-dir dir
    (let ((file (expand-file-name "huge.json" dir))
          (efrit-todo-max-items 2)
          (efrit-todo-max-content-length 5))
      (with-file-modes #o700 (make-directory dir t))
      (with-temp-file file
        (insert (make-string (* 8 1024 1024) ?\[)))
      (efrit-todo-store-test-capturing-warnings warnings
        (should-not (efrit-todo-restore t))
        (should (= (length warnings) 1))
        (should (string-match-p "huge\\.json was left alone: .*8388608 bytes" (car warnings))))
      (should (file-exists-p file))
      (should-not (file-exists-p (concat file ".corrupt"))))))

(ert-deftest efrit-todo-store-test-copies-never-replace-the-newest-list ()
  "A copy of an older save, whatever its name and time, is skipped with a warning."
  (efrit-todo-store-test-with-dir dir
    (let* ((session (efrit-todo-store-test-session))
           (file nil)
           (copy (expand-file-name "zz-copy-of-my-list.json" dir)))
      (efrit-todo-store-test-write session '("Old plan" "pending"))
      (efrit-todo-save)
      (setq file (efrit-todo-state-file session))
      (copy-file file copy)
      (efrit-todo-store-test-write session '("New plan" "in_progress") '("More" "pending"))
      (efrit-todo-save)
      ;; The copy looks newer by its time, and sorts after the file.
      (set-file-times copy (time-add nil 3600))
      (let ((efrit-todo-state-directory nil))
        (efrit-todo-reset session))
      (efrit-todo-store-test-capturing-warnings warnings
        (should (equal (efrit-todo-restore t) (list session)))
        (should (equal (efrit-todo-store-test-contents session) '("New plan" "More")))
        (should (cl-some (lambda (w) (string-match-p (concat (regexp-quote copy) " was left alone: .*older copy") w))
                         warnings)))
      (should (file-exists-p copy)))))

(defconst efrit-todo-store-test--other-emacs
  '(let ((efrit-todo-state-directory (car command-line-args-left))
         (session (cadr command-line-args-left))
         (restore (equal (nth 2 command-line-args-left) "restore")))
     (setq command-line-args-left nil)
     (when restore
       (efrit-todo-restore))
     (efrit-todo-write (list :merge t :todos (vector (list :content "From the other Emacs" :status "pending")))
                       session)
     (princ (format "failed saves: %d\n" (efrit-todo-save)))
     (kill-emacs 0))
  "Another Emacs sharing the state directory: it adds an item and saves.
With \"restore\", it restores the session from the directory first.")

(defun efrit-todo-store-test--other-emacs (dir session &optional restore)
  "Run another Emacs to add an item to SESSION in DIR; RESTORE it first."
  (let ((process (efrit-todo-store-test--spawn
                  "efrit-todo-other" efrit-todo-store-test--other-emacs
                  dir session (if restore "restore" "fresh"))))
    (unwind-protect
        (progn
          (let ((output (efrit-todo-store-test--wait-for-end process 60 "the other Emacs")))
            (should (equal (process-exit-status process) 0))
            (should (string-match-p "^failed saves: 0" output))))
      (kill-buffer (process-buffer process)))))

(ert-deftest efrit-todo-store-test-two-emacsen-never-overwrite-each-other ()
  "A stale save keeps another Emacs's newer one as a conflict copy, with a warning.
So does a session name both Emacsen started in the same second."
  (skip-unless invocation-name)
  (efrit-todo-store-test-with-dir dir
    (let ((session (efrit-todo-store-test-session))
          (collision (format "efrit-do-20250101120000-%s" (cl-gensym))))
      ;; This Emacs saves; the other restores that save, adds and saves.
      (efrit-todo-store-test-write session '("Mine" "pending"))
      (efrit-todo-save)
      (efrit-todo-store-test--other-emacs dir session t)
      (let* ((file (efrit-todo-state-file session))
             (theirs (efrit-todo-store-test-bytes file)))
        (should (string-match-p "From the other Emacs" theirs))
        ;; This Emacs's copy is stale now: saving it keeps theirs.
        (efrit-todo-store-test-write session '("Mine" "pending") '("Mine too" "pending"))
        (efrit-todo-store-test-capturing-warnings warnings
          (should (= 0 (efrit-todo-save)))
          (should (cl-some (lambda (w) (string-match-p (regexp-quote (concat file ".conflict")) w))
                           warnings)))
        (should (equal (efrit-todo-store-test-bytes (concat file ".conflict")) theirs))
        (let ((json (efrit-todo-store-test-read-json file)))
          (should (equal (mapcar (lambda (i) (alist-get 'content i)) (alist-get 'items json))
                         '("Mine" "Mine too")))
          (should (= (alist-get 'generation json) 3))))
      ;; Both start a command in the same second: the same session name,
      ;; and neither has read the other's file.
      (efrit-todo-store-test--other-emacs dir collision)
      (efrit-todo-store-test-write collision '("This command" "in_progress"))
      (efrit-todo-store-test-capturing-warnings warnings
        (should (= 0 (efrit-todo-save)))
        (should (= (length warnings) 1)))
      (let ((file (efrit-todo-state-file collision)))
        (should (equal (efrit-todo-store-test-contents collision) '("This command")))
        (should (string-match-p "From the other Emacs" (efrit-todo-store-test-bytes (concat file ".conflict"))))))))

;;;; Pruning

(defun efrit-todo-store-test-write-file (dir session)
  "Write a state file for SESSION, which this Emacs never saw, into DIR.
Return its file name."
  (let ((file (expand-file-name (concat (string-remove-prefix "store-test-" session) ".json") dir)))
    (with-file-modes #o700 (make-directory dir t))
    (with-temp-file file
      (insert (json-encode `((schema_version . 2) (session . ,session)
                             (items . [((id . "t1") (content . ,(concat "Open in " session))
                                        (status . "pending"))])))))
    file))

(defun efrit-todo-store-test-age (file days)
  "Set the modification time of FILE to DAYS days ago."
  (set-file-times file (time-subtract nil (* days 86400))))

(ert-deftest efrit-todo-store-test-old-files-are-pruned-before-a-restore ()
  "Files past the age go, damaged ones too; live sessions, recent and other files stay."
  (efrit-todo-store-test-with-dir dir
    (let* ((efrit-todo-state-max-age 30)
           (live (efrit-todo-store-test-session))
           (stale (format "store-test-stale-%s" (cl-gensym)))
           (fresh (format "store-test-fresh-%s" (cl-gensym)))
           (stale-file (efrit-todo-store-test-write-file dir stale))
           (fresh-file (efrit-todo-store-test-write-file dir fresh))
           (old-corrupt (expand-file-name "gone.json.corrupt" dir))
           (old-corrupt-2 (expand-file-name "gone.json.2.corrupt" dir))
           (new-corrupt (expand-file-name "recent.json.corrupt" dir))
           (other (expand-file-name "notes.txt" dir)))
      (efrit-todo-store-test-write live '("Live and old" "pending"))
      (efrit-todo-save)
      (dolist (file (list old-corrupt old-corrupt-2 new-corrupt other))
        (write-region "damaged" nil file))
      (dolist (file (list stale-file old-corrupt old-corrupt-2 other
                          (efrit-todo-state-file live)))
        (efrit-todo-store-test-age file 31))
      (efrit-todo-store-test-age fresh-file 29)
      (efrit-todo-store-test-age new-corrupt 29)
      (let ((restored (efrit-todo-restore)))
        (should (member fresh restored))
        (should-not (member stale restored)))
      (should-not (efrit-todo-list stale))
      (dolist (file (list stale-file old-corrupt old-corrupt-2))
        (should-not (file-exists-p file)))
      (dolist (file (list fresh-file new-corrupt other (efrit-todo-state-file live)))
        (should (file-exists-p file)))
      (should (equal (efrit-todo-store-test-contents live) '("Live and old"))))))

(ert-deftest efrit-todo-store-test-pruning-can-be-turned-off ()
  "With `efrit-todo-state-max-age' nil every file stays and is read."
  (efrit-todo-store-test-with-dir dir
    (let* ((efrit-todo-state-max-age nil)
           (ancient (format "store-test-ancient-%s" (cl-gensym)))
           (file (efrit-todo-store-test-write-file dir ancient)))
      (efrit-todo-store-test-age file 3650)
      (should (member ancient (efrit-todo-restore)))
      (should (file-exists-p file))
      (let ((efrit-todo-state-max-age 3000))
        (should (equal (efrit-todo--prune-state-files dir) (list file))))
      (should-not (file-exists-p file)))))

(ert-deftest efrit-todo-store-test-on-load-prunes-before-reading ()
  "The restore at load time deletes old files rather than reading them."
  (efrit-todo-store-test-with-dir dir
    (let* ((efrit-todo-state-max-age 7)
           (old (format "store-test-old-%s" (cl-gensym)))
           (recent (format "store-test-recent-%s" (cl-gensym)))
           (old-file (efrit-todo-store-test-write-file dir old))
           (recent-file (efrit-todo-store-test-write-file dir recent)))
      (efrit-todo-store-test-age old-file 8)
      (efrit-todo-store-test-age recent-file 6)
      (let ((noninteractive nil))
        (efrit-todo--restore-on-load))
      (should-not (file-exists-p old-file))
      (should-not (efrit-todo-list old))
      (should (file-exists-p recent-file))
      (should (equal (efrit-todo-store-test-contents recent)
                     (list (concat "Open in " recent)))))))

;;;; History and undo

(ert-deftest efrit-todo-store-test-history-records-who-when-and-what ()
  "Every change is in the history with its actor, kind, time and ids."
  (let ((session (efrit-todo-store-test-session))
        (start (float-time)))
    (efrit-todo-store-test-write session '("Plan" "in_progress") '("Build" "pending"))
    (efrit-todo-store-test-write session '("Plan" "in_progress") '("Build" "pending"))
    (efrit-todo-user-set-status "t1" 'completed session)
    (efrit-todo-store-test-write session '("Plan" "completed") '("Build" "in_progress"))
    (let ((history (efrit-todo-history session)))
      (should (equal (mapcar (lambda (c) (plist-get c :seq)) history) '(1 2 3)))
      (should (equal (mapcar (lambda (c) (plist-get c :actor)) history) '(model user model)))
      (should (equal (mapcar (lambda (c) (plist-get c :kind)) history) '(write status write)))
      (should (equal (plist-get (nth 0 history) :added) '("t1" "t2")))
      (should (equal (plist-get (nth 1 history) :completed) '("t1")))
      (should (equal (plist-get (nth 1 history) :summary) "the user marked t1 completed"))
      (should (equal (plist-get (nth 2 history) :started) '("t2")))
      (should (cl-every (lambda (c) (<= start (plist-get c :time) (float-time))) history)))
    (let ((t1 (car (efrit-todo-list session))))
      (should (<= (plist-get t1 :started) (plist-get t1 :completed))))))

(ert-deftest efrit-todo-store-test-undo-restores-and-is-a-change ()
  "Undo takes back the newest change, runs the hook, is saved, reuses no id."
  (efrit-todo-store-test-with-dir dir
    (let ((session (efrit-todo-store-test-session))
          (calls nil))
      (efrit-todo-store-test-write session '("One" "in_progress"))
      (let ((first (efrit-todo-list session)))
        (efrit-todo-store-test-write session '("One" "completed") '("Two" "in_progress"))
        (let ((hook (lambda (s) (push s calls))))
          (add-hook 'efrit-todo-change-functions hook)
          (unwind-protect
              (should (string-match-p "undid change 2 (write by the model"
                                      (efrit-todo-undo session)))
            (remove-hook 'efrit-todo-change-functions hook)))
        (should (equal calls (list session)))
        (should (equal (efrit-todo-list session) first))
        (should (string-match-p "the user undid change 2"
                                (efrit-todo-after-tool "eval_sexp" "(+ 1 1)" "2" nil session)))
        (efrit-todo-save)
        (let ((json (efrit-todo-store-test-read-json (efrit-todo-state-file session))))
          (should (equal (mapcar (lambda (i) (alist-get 'content i)) (alist-get 'items json)) '("One")))
          (should (equal (alist-get 'kind (car (last (alist-get 'history json)))) "undo")))
        (efrit-todo-store-test-write session '("One" "in_progress") '("Three" "pending"))
        (should (equal (plist-get (nth 1 (efrit-todo-list session)) :id) "t3"))
        (should (efrit-todo-undo session))
        (should (equal (efrit-todo-list session) first))
        (should (efrit-todo-undo session))
        (should-not (efrit-todo-list session))
        (should-not (efrit-todo-undo session))
        (let ((last (car (last (efrit-todo-history session)))))
          (should (eq (plist-get last :kind) 'undo))
          (should (eq (plist-get last :actor) 'user))
          (should (= (plist-get last :undoes) 1)))))))

(ert-deftest efrit-todo-store-test-undo-of-user-edits-and-reset ()
  "User edits and a reset are undone like the model's writes."
  (let ((session (efrit-todo-store-test-session)))
    (efrit-todo-store-test-write session '("A" "pending") '("B" "completed"))
    (let ((written (efrit-todo-list session)))
      (efrit-todo-user-clear-finished session)
      (efrit-todo-user-add "C" session)
      (efrit-todo-reset session)
      (should-not (efrit-todo-list session))
      (efrit-todo-undo session)
      (should (equal (efrit-todo-store-test-contents session) '("A" "C")))
      (efrit-todo-undo session)
      (efrit-todo-undo session)
      (should (equal (efrit-todo-list session) written))
      (efrit-todo-user-add "D" session)
      (should (equal (plist-get (car (last (efrit-todo-list session))) :id) "t4")))))

;;;; A crash in the middle of writing

(defconst efrit-todo-store-test--child-program
  '(let ((session (car command-line-args-left))
         (efrit-todo-state-directory (cadr command-line-args-left))
         (size (string-to-number (nth 2 command-line-args-left)))
         (n 0))
     (setq command-line-args-left nil)
     (while t
       (setq n (1+ n))
       (message "writing %d" n)
       (efrit-todo-write
        (list :todos
              (vconcat (mapcar (lambda (i)
                                 (list :content (format "write %d item %d" n i)
                                       :status (if (= i (% n size)) "in_progress" "pending")))
                               (number-sequence 0 (+ size (% n 3) -1)))))
        session)
       (efrit-todo-save)
       (message "saved %d" n)))
  "What the child Emacs runs: write SIZE-ish items and save, forever.")

(defun efrit-todo-store-test--spawn (name program &rest args)
  "Start a batch Emacs named NAME running PROGRAM with ARGS after it.
It runs with a HOME of its own (`efrit-todo-test-as-child'); its end is
marked by `efrit-todo-store-test--note-end'."
  (efrit-todo-test-as-child
    (make-process
     :name name
     :buffer (generate-new-buffer (format " *%s*" name))
     :connection-type 'pipe
     :noquery t
     :sentinel #'efrit-todo-store-test--note-end
     :command (apply #'efrit-todo-test-child-command program args))))

(defun efrit-todo-store-test--wait (process predicate seconds what)
  "Wait up to SECONDS for PREDICATE on PROCESS's output; fail naming WHAT."
  (let ((deadline (+ (float-time) seconds)))
    (while (not (funcall predicate (with-current-buffer (process-buffer process) (buffer-string))))
      (when (> (float-time) deadline)
        (ert-fail (format "timed out waiting for %s; output: %s" what
                          (with-current-buffer (process-buffer process) (buffer-string)))))
      (accept-process-output process 0.05))))

(defun efrit-todo-store-test--note-end (process _event)
  "Mark PROCESS as ended once it has exited or been killed.
Emacs runs a sentinel only after it has read all that the process
wrote, so once the mark is set the process buffer holds all its output."
  (when (memq (process-status process) '(exit signal))
    (process-put process 'efrit-todo-store-test-ended t)))

(defun efrit-todo-store-test--wait-for-end (process seconds what)
  "Wait up to SECONDS for PROCESS to end; return all its output.
Fail naming WHAT when it has not ended by then.  Not `process-live-p':
it turns nil as soon as the process exits, possibly before Emacs has
read the last of its output."
  (efrit-todo-store-test--wait
   process (lambda (_) (process-get process 'efrit-todo-store-test-ended)) seconds what)
  (with-current-buffer (process-buffer process) (buffer-string)))

(defun efrit-todo-store-test--last-number (regexp output)
  "Return the number in the last match of REGEXP in OUTPUT, or 0."
  (let ((start 0) (n 0))
    (while (string-match regexp output start)
      (setq n (string-to-number (match-string 1 output))
            start (match-end 0)))
    n))

(ert-deftest efrit-todo-store-test-sigkill-mid-stream-leaves-a-whole-write ()
  "A child killed while writing leaves the last saved write or the next one.
The child saves after every write and says so; whatever it was doing
when SIGKILL arrived, the file must load through `efrit-todo-restore'
and hold exactly the list of one write: the last one it reported saved,
or the one after, if that write's save finished before the report.
In rounds 2 and 3 the module pauses in the middle of every file it
writes and the kill comes half a pause after a write began, so it
lands in a half-written file: a writer that did not write a temporary
file and rename it would leave a damaged state file there."
  (skip-unless (and (memq system-type '(gnu/linux darwin berkeley-unix)) invocation-name))
  (efrit-todo-store-test-with-dir dir
    (pcase-dolist (`(,round ,size ,kill-at ,pause ,delay)
                   '((1 5 10 nil 0.002) (2 100 4 "100" 0.05) (3 40 8 "50" 0.025)))
      (let* ((session (format "crash-%d-%s" round (cl-gensym)))
             (process-environment (if pause
                                      (cons (concat "EFRIT_TODO_TEST_WRITE_PAUSE_MS=" pause)
                                            process-environment)
                                    process-environment))
             (process (efrit-todo-store-test--spawn
                       (format "efrit-todo-crash-%d" round)
                       efrit-todo-store-test--child-program
                       session dir (number-to-string size))))
        (unwind-protect
            (progn
              (efrit-todo-store-test--wait
               process (lambda (out) (>= (efrit-todo-store-test--last-number "writing \\([0-9]+\\)" out) kill-at))
               60 (format "write %d" kill-at))
              ;; Half the pause: the kill lands while a file is half written.
              (sleep-for delay)
              (signal-process process 'kill)
              (let* ((output (efrit-todo-store-test--wait-for-end process 20 "the child to die"))
                     (saved (efrit-todo-store-test--last-number "saved \\([0-9]+\\)" output))
                     (writing (efrit-todo-store-test--last-number "writing \\([0-9]+\\)" output)))
                (should (eq (process-status process) 'signal))
                (should (member session (efrit-todo-restore t)))
                (let* ((items (efrit-todo-list session))
                       (n (and items (string-to-number
                                      (replace-regexp-in-string "\\`write \\([0-9]+\\) .*" "\\1"
                                                                (plist-get (car items) :content))))))
                  (should (memq n (delete-dups (list saved writing))))
                  (should (<= (- n 1) saved))
                  (should (equal (efrit-todo-store-test-contents session)
                                 (mapcar (lambda (i) (format "write %d item %d" n i))
                                         (number-sequence 0 (+ size (% n 3) -1))))))))
          (when (process-live-p process)
            (delete-process process))
          (kill-buffer (process-buffer process)))))))

(defconst efrit-todo-store-test--fifo-child
  '(let ((efrit-todo-state-directory (car command-line-args-left))
         (session (cadr command-line-args-left)))
     (setq command-line-args-left nil)
     (with-file-modes #o700 (make-directory efrit-todo-state-directory t))
     (call-process "mkfifo" nil nil nil (efrit-todo-state-file session))
     (efrit-todo-write (list :todos (vector (list :content "Blocked?" :status "pending"))) session)
     (let ((failures (efrit-todo-flush)))
       (princ (format "failures %d: %s\n" (length failures) (car failures))))
     (kill-emacs 0))
  "A child Emacs that saves a session whose state file is a FIFO.")

(ert-deftest efrit-todo-store-test-a-fifo-never-hangs-emacs ()
  "A FIFO at a state file's path: the save fails at once, saying why.
In a child Emacs, because a writer that opened the FIFO would hang."
  (skip-unless (and invocation-name (executable-find "mkfifo")))
  (efrit-todo-store-test-with-dir dir
    (let* ((session (format "fifo-%s" (cl-gensym)))
           (process (efrit-todo-store-test--spawn
                     "efrit-todo-fifo" efrit-todo-store-test--fifo-child dir session)))
      (unwind-protect
          (progn
            (let ((output (efrit-todo-store-test--wait-for-end process 30 "the child to exit"))
                  (file (expand-file-name (file-name-nondirectory
                                           (efrit-todo--module-store-file session dir))
                                          dir)))
              (should (equal (process-exit-status process) 0))
              (should (string-match-p "^failures 1: .*not a regular file (a FIFO)" output))
              (should (file-exists-p file))
              (should-not (file-regular-p file))
              ;; Restoring leaves it alone and says so, without blocking.
              (efrit-todo-store-test-capturing-warnings warnings
                (should-not (efrit-todo-restore t))
                (should (cl-some (lambda (w) (string-match-p "FIFO" w)) warnings)))
              (delete-file file)))
        (when (process-live-p process)
          (delete-process process))
        (kill-buffer (process-buffer process))))))

(defconst efrit-todo-store-test--stuck-child
  '(let ((efrit-todo-state-directory (car command-line-args-left))
         (session (cadr command-line-args-left))
         (efrit-todo-flush-timeout 0.3))
     (setq command-line-args-left nil)
     (efrit-todo-write (list :todos (vector (list :content "Slow" :status "pending"))) session)
     (let* ((start (float-time))
            (failures (efrit-todo-flush)))
       (princ (format "waited %.2f, failures %d: %s\n"
                      (- (float-time) start) (length failures) (car failures))))
     (kill-emacs 0))
  "A child Emacs whose flush meets a writer busy for seconds.")

(ert-deftest efrit-todo-store-test-a-flush-gives-up-after-its-timeout ()
  "A flush waits at most `efrit-todo-flush-timeout' for the writer, and says so."
  (skip-unless invocation-name)
  (efrit-todo-store-test-with-dir dir
    (let* ((session (format "stuck-%s" (cl-gensym)))
           (process-environment (cons "EFRIT_TODO_TEST_WRITE_PAUSE_MS=3000" process-environment))
           (process (efrit-todo-store-test--spawn
                     "efrit-todo-stuck" efrit-todo-store-test--stuck-child dir session)))
      (unwind-protect
          (progn
            (efrit-todo-store-test--wait
             process (lambda (out) (string-match-p "^waited" out)) 30 "the flush to return")
            (let ((output (with-current-buffer (process-buffer process) (buffer-string))))
              (should (string-match "^waited \\([0-9.]+\\), failures 1: \\(.*\\)$" output))
              (should (< (string-to-number (match-string 1 output)) 2))
              (should (string-match-p "gave up" (match-string 2 output)))
              (should (string-match-p (regexp-quote session) (match-string 2 output)))))
        (when (process-live-p process)
          (delete-process process))
        (kill-buffer (process-buffer process))))))

(ert-deftest efrit-todo-store-test-exit-flushes-unsaved-writes ()
  "A child that writes and exits without saving leaves its last write on disk."
  (skip-unless invocation-name)
  (efrit-todo-store-test-with-dir dir
    (let* ((session (format "exit-%s" (cl-gensym)))
           (process (efrit-todo-store-test--spawn
                     "efrit-todo-exit"
                     '(let ((efrit-todo-state-directory (cadr command-line-args-left))
                            (session (car command-line-args-left)))
                        (setq command-line-args-left nil)
                        (dotimes (n 30)
                          (efrit-todo-write (list :todos (vector (list :content (format "write %d" n)
                                                                       :status "pending")))
                                            session))
                        (setq efrit-todo-state-directory nil)
                        (kill-emacs 0))
                     session dir)))
      (unwind-protect
          (progn
            (efrit-todo-store-test--wait-for-end process 60 "the child to exit")
            (should (equal (process-exit-status process) 0))
            (should (equal (efrit-todo-restore t) (list session)))
            (should (equal (efrit-todo-store-test-contents session) '("write 29"))))
        (kill-buffer (process-buffer process))))))

;;;; The task graph across a restart

(defconst efrit-todo-store-test--fixtures
  (expand-file-name "fixtures/" (file-name-directory (or load-file-name buffer-file-name)))
  "Directory of the state files written by earlier versions.")

(defun efrit-todo-store-test--graph-fields (session)
  "Return (ID DESCRIPTION BLOCKED-BY OWNER READY) of SESSION's items."
  (mapcar (lambda (item)
            (list (plist-get item :id) (plist-get item :description)
                  (plist-get item :blocked-by) (plist-get item :owner)
                  (plist-get item :ready)))
          (efrit-todo-list session)))

(defun efrit-todo-store-test--write-graph (session)
  "Write a small task graph to SESSION and finish t1, which blocked t2.
Return the fields of its items as `efrit-todo-store-test--graph-fields'."
  (efrit-todo-write
   (json-encode
    '((todos . [((content . "Write the parser") (status . "pending") (owner . "alice")
                 (description . "Recursive descent.\nErrors keep their positions."))
                ((content . "Write the tests") (status . "pending") (blocked_by . ["t1"]))
                ((content . "Write the docs") (status . "pending") (blocked_by . ["t2"])
                 (owner . "bob"))])))
   session)
  (efrit-todo-store-test--graph-fields session))

(defconst efrit-todo-store-test--graph-before
  '(("t1" "Recursive descent.\nErrors keep their positions." nil "alice" t)
    ("t2" nil ("t1") nil nil)
    ("t3" nil ("t2") "bob" nil))
  "What the graph of `efrit-todo-store-test--write-graph' holds, from the issue:
t1 has no blocker and is ready, t2 waits for t1 and t3 for t2.")

(ert-deftest efrit-todo-store-test-restore-keeps-the-graph ()
  "Blockers, owners and descriptions come back from the saved file.
A finished blocker stays in the file: reopening it after a restore
blocks again."
  (efrit-todo-store-test-with-dir dir
    (let ((session (efrit-todo-store-test-session)))
      (should (equal (efrit-todo-store-test--write-graph session)
                     efrit-todo-store-test--graph-before))
      (efrit-todo-write (json-encode '((merge . t) (todos . [((id . "t1") (status . "completed"))])))
                        session)
      ;; The view shows open blockers only: t2 is ready now.
      (should (equal (nth 1 (efrit-todo-store-test--graph-fields session))
                     '("t2" nil nil nil t)))
      (efrit-todo-save)
      (let ((saved (efrit-todo-list session)))
        (let ((efrit-todo-state-directory nil))
          (efrit-todo-store-test-write session '("Something else" "pending")))
        (should (member session (efrit-todo-restore t)))
        (should (equal (efrit-todo-list session) saved)))
      (efrit-todo-write (json-encode '((merge . t) (todos . [((id . "t1") (status . "pending"))])))
                        session)
      (should (equal (efrit-todo-store-test--graph-fields session)
                     efrit-todo-store-test--graph-before)))))

(defconst efrit-todo-store-test--print-child
  '(let ((efrit-todo-state-directory (car command-line-args-left))
         (session (cadr command-line-args-left)))
     (setq command-line-args-left nil)
     (efrit-todo-restore t)
     (let ((print-length nil) (print-level nil) (print-escape-newlines t))
       (prin1 (mapcar (lambda (item)
                        (list (plist-get item :id) (plist-get item :description)
                              (plist-get item :blocked-by) (plist-get item :owner)
                              (plist-get item :ready)))
                      (efrit-todo-list session))))
     (terpri)
     (kill-emacs 0))
  "A child Emacs that restores the saved sessions and prints one's graph.")

(ert-deftest efrit-todo-store-test-a-new-emacs-gets-the-graph-back ()
  "A fresh Emacs restores blockers, owners, descriptions and readiness."
  (skip-unless invocation-name)
  (efrit-todo-store-test-with-dir dir
    (let ((session (efrit-todo-store-test-session)))
      (efrit-todo-store-test--write-graph session)
      (efrit-todo-save)
      (with-temp-buffer
        (should (= 0 (call-process (expand-file-name invocation-name invocation-directory)
                                   nil (list t nil) nil
                                   "-Q" "--batch"
                                   "-L" (file-name-directory (locate-library "efrit-todo"))
                                   "-l" "efrit-todo"
                                   "--eval" (prin1-to-string efrit-todo-store-test--print-child)
                                   dir session)))
        (should (equal (car (read-from-string (buffer-string)))
                       efrit-todo-store-test--graph-before))))))

(ert-deftest efrit-todo-store-test-a-file-from-before-the-graph-loads-unchanged ()
  "A state file written before items had blockers, owners and descriptions.
The fixture was written by the module of that version, and the list
it held then was recorded beside it: every field comes back as it
was, no item has a blocker, owner or description, the pending ones
are ready, the user's edit not yet told reaches the model, and new
ids go on from the old counter."
  (efrit-todo-store-test-with-dir dir
    (let* ((fixture (expand-file-name "state-before-graph.json" efrit-todo-store-test--fixtures))
           (expected (with-temp-buffer
                       (insert-file-contents
                        (expand-file-name "state-before-graph.eld" efrit-todo-store-test--fixtures))
                       (read (current-buffer))))
           (history (length (alist-get 'history (efrit-todo-store-test-read-json fixture))))
           (session (alist-get 'session (efrit-todo-store-test-read-json fixture))))
      (efrit-todo-reset session)
      (with-file-modes #o700 (make-directory dir t))
      (copy-file fixture (expand-file-name "before-graph.json" dir))
      (should (member session (efrit-todo-restore t)))
      (let ((items (efrit-todo-list session)))
        (should (equal (mapcar (lambda (item) (plist-get item :id)) items)
                       '("t1" "t2" "t5" "t3" "t4")))
        (cl-loop for item in items
                 for old in expected
                 do (cl-loop for (key value) on old by #'cddr
                             do (should (equal (list (plist-get item :id) key (plist-get item key))
                                               (list (plist-get old :id) key value)))))
        (dolist (item items)
          (should-not (plist-get item :description))
          (should-not (plist-get item :blocked-by))
          (should-not (plist-get item :owner))
          (should (eq (and (plist-get item :ready) t)
                      (eq (plist-get item :status) 'pending)))))
      (should (= (length (efrit-todo-history session)) history))
      (should (string-match-p "the user reworded t3"
                              (efrit-todo-after-tool "eval_sexp" "1" "1" nil session)))
      ;; The graph fields work on the old list at once.
      (efrit-todo-write (json-encode '((merge . t)
                                       (todos . [((content . "Test escapes") (status . "pending")
                                                  (blocked_by . ["t3"]) (owner . "carol"))])))
                        session)
      (should (equal (car (last (efrit-todo-store-test--graph-fields session)))
                     '("t6" nil ("t3") "carol" nil))))))

(provide 'efrit-todo-store-test)
;;; efrit-todo-store-test.el ends here
