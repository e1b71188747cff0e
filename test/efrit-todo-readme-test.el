;;; efrit-todo-readme-test.el --- Run the set-up blocks of README.org -*- lexical-binding: t; -*-

;;; Commentary:

;; The README is the first thing a new user follows, so its Lisp must
;; work as written.  Every `#+begin_src emacs-lisp' block of README.org
;; is evaluated here, in a fresh child `emacs -Q --batch' (so that the
;; blocks cannot lean on each other or on this Emacs), with HOME set to
;; an empty directory and the placeholder "/path/to/efrit-todo/lisp"
;; replaced by this checkout's lisp/.  A block must signal nothing, and
;; what the README says it does must then hold.
;;
;; - A block that is an example not to run has `:eval no' (or
;;   `:eval never') in its header, as Org itself honours:
;;   "#+begin_src emacs-lisp :eval no".  No other block is skipped.
;; - Every other block must be claimed by exactly one entry of
;;   `efrit-todo-readme-test--claims', and every entry must claim one
;;   block: a block added to the README without a check here, or a
;;   check whose block was removed, fails
;;   `efrit-todo-readme-test-every-block-is-checked'.
;; - The Efrit block runs with Efrit set up after it, before it, and
;;   between its load-path line and the rest (users order init files
;;   every way).  Efrit is the checkout EFRIT_DIR names, set up as its
;;   own README says; without EFRIT_DIR a stand-in set-up that, like
;;   Efrit's, puts a directory holding its own efrit-todo.el in front of
;;   `load-path', and then the stand-in loop of
;;   test/efrit-todo-fake-efrit.el.
;; - The gptel block runs after gptel is loaded, and with gptel
;;   installed (in `load-path') but not loaded yet; gptel is the
;;   stand-in of test/efrit-todo-fake-gptel.el.
;; - The results the README shows (the blocks named plan-result,
;;   merge-result, graph-result and tasks-*-result, from the inputs
;;   merge-input, graph-input and tasks-*-input) are compared with what
;;   the module answers, in both tool styles.
;; - The package.el blocks install into a scratch `package-user-dir';
;;   a second child, as after a restart, activates the packages and
;;   turns the mode on with no `require'.  package-vc-install clones
;;   this repository (its committed HEAD), into which the built module
;;   is then copied, as the build offered on first load would put it;
;;   on Emacs 28 it is skipped, saying so.

;;; Code:

(require 'cl-lib)
(require 'ert)
(require 'seq)
(require 'subr-x)

(defconst efrit-todo-readme-test--root
  (file-name-directory
   (directory-file-name
    (file-name-directory (or load-file-name buffer-file-name default-directory))))
  "The root of this checkout.")

(defconst efrit-todo-readme-test--lisp
  (expand-file-name "lisp" efrit-todo-readme-test--root)
  "This checkout's lisp/ directory, which the README's placeholder names.")

(defconst efrit-todo-readme-test--placeholder "/path/to/efrit-todo/lisp"
  "What the README writes for the user's lisp/ directory.")

(defconst efrit-todo-readme-test--url "https://github.com/efrit-todo/efrit-todo"
  "The repository the README's `package-vc-install' block clones.")

(defconst efrit-todo-readme-test--claims
  '((efrit . "(efrit-todo-efrit-mode 1)")
    (gptel . "(efrit-todo-gptel-mode 1)")
    (package-file . "(package-install-file ")
    (package-vc . "(package-vc-install"))
  "Which README block each check runs: (NAME . TEXT the block holds).")

;;;; Reading the README

(defun efrit-todo-readme-test--blocks ()
  "Return the emacs-lisp blocks of README.org as plists.
Each has :line (of its #+begin_src), :header (the rest of that line),
:body (the code, Org's comma escapes undone) and :run (nil when the
header says :eval no or :eval never)."
  (with-temp-buffer
    (insert-file-contents (expand-file-name "README.org" efrit-todo-readme-test--root))
    (goto-char (point-min))
    (let ((case-fold-search t) blocks)
      (while (re-search-forward "^[ \t]*#\\+begin_src[ \t]+emacs-lisp\\(.*\\)$" nil t)
        (let ((header (match-string-no-properties 1))
              (line (line-number-at-pos))
              (start (line-beginning-position 2)))
          (unless (re-search-forward "^[ \t]*#\\+end_src" nil t)
            (error "README.org:%d: a block with no #+end_src" line))
          (push (list :line line :header header
                      :body (replace-regexp-in-string
                             "^\\([ \t]*\\),\\([*,]\\|#\\+\\)" "\\1\\2"
                             (buffer-substring-no-properties start (line-beginning-position)))
                      :run (not (string-match-p ":eval[ \t]+\\(no\\|never\\)\\b" header)))
                blocks)))
      (nreverse blocks))))

(defun efrit-todo-readme-test--claimants (block)
  "Return the names of the claims whose text is in BLOCK's body."
  (mapcar #'car (seq-filter (lambda (claim) (string-search (cdr claim) (plist-get block :body)))
                            efrit-todo-readme-test--claims)))

(defun efrit-todo-readme-test--block (name)
  "Return the body of the one runnable README block that claim NAME claims."
  (let ((found (seq-filter (lambda (block)
                             (and (plist-get block :run)
                                  (memq name (efrit-todo-readme-test--claimants block))))
                           (efrit-todo-readme-test--blocks))))
    (unless (= (length found) 1)
      (ert-fail (format "README.org has %d runnable blocks holding %S, not one"
                        (length found) (alist-get name efrit-todo-readme-test--claims))))
    (plist-get (car found) :body)))

(defun efrit-todo-readme-test--substitute (body)
  "Return BODY with the README's placeholder made this checkout's lisp/."
  (string-replace efrit-todo-readme-test--placeholder efrit-todo-readme-test--lisp body))

(defun efrit-todo-readme-test--split (body)
  "Return BODY as (FIRST-FORM-TEXT . REST-TEXT)."
  (let ((end (cdr (read-from-string body))))
    (cons (substring body 0 end) (substring body end))))

;;;; Running a child Emacs

(defun efrit-todo-readme-test--skip (reason)
  "Skip the test for REASON, saying so in the output too.
Emacs 28's batch runner names a skipped test without its reason."
  (message "README test skipped: %s" reason)
  (ert-skip reason))

(defun efrit-todo-readme-test--write (directory name text)
  "Write TEXT to file NAME in DIRECTORY and return its name."
  (let ((file (expand-file-name name directory)))
    (make-directory (file-name-directory file) t)
    (with-temp-file file
      (insert text))
    file))

(defun efrit-todo-readme-test--load (file)
  "Return an action: `load' FILE, as Emacs does an init file."
  `(load ,file nil t t))

(defun efrit-todo-readme-test--child (home actions conditions)
  "Run ACTIONS, then CONDITIONS, in a fresh `emacs -Q --batch' with HOME.
ACTIONS are (DESCRIPTION FORM); CONDITIONS are (DESCRIPTION FORM),
each FORM of which must return non-nil.  Fail the test, with the
child's output, when an action signals or a condition does not hold."
  (unless invocation-name (efrit-todo-readme-test--skip "no Emacs to run as a child"))
  (let* ((script
          `(progn
             (setq debug-on-error nil)
             (dolist (step ',actions)
               (condition-case err
                   (eval (cadr step) t)
                 (error (princ (format "%s signalled %S\n" (car step) err))
                        (kill-emacs 2))))
             (let ((failed 0))
               (dolist (check ',conditions)
                 (unless (condition-case err
                             (eval (cadr check) t)
                           (error (princ (format "%s: signalled %S\n" (car check) err))
                                  nil))
                   (princ (format "not so: %s\n" (car check)))
                   (setq failed (1+ failed))))
               (kill-emacs (if (> failed 0) 1 0)))))
         (file (efrit-todo-readme-test--write
                home "readme-child.el"
                (let ((print-length nil) (print-level nil) (print-escape-newlines t))
                  (prin1-to-string script))))
         (emacs (expand-file-name invocation-name invocation-directory))
         (timeout (executable-find "timeout"))
         (process-environment (cons (concat "HOME=" home) process-environment)))
    (with-temp-buffer
      (let ((status (apply #'call-process (or timeout emacs) nil t nil
                           (append (and timeout (list "120" emacs))
                                   (list "-Q" "--batch" "-l" file)))))
        (unless (eql status 0)
          (ert-fail (format "exit %s:\n%s" status (buffer-string))))))))

(defmacro efrit-todo-readme-test--with-home (var &rest body)
  "Bind VAR to a fresh empty directory for BODY, then delete it."
  (declare (indent 1))
  `(let ((,var (file-name-as-directory (make-temp-file "efrit-todo-readme-" t))))
     (unwind-protect (progn ,@body)
       (delete-directory ,var t))))

;;;; What the README's blocks must do

(defun efrit-todo-readme-test--ours-p (function)
  "Return a form: is FUNCTION defined by a file of this checkout's lisp/?"
  `(let ((file (symbol-file ',function)))
     (and file (file-equal-p (file-name-directory file)
                             ,(file-name-as-directory efrit-todo-readme-test--lisp)))))

(defconst efrit-todo-readme-test--write-input
  "{\"todos\": [{\"content\": \"Read the README\", \"activeForm\": \"Reading the README\", \"status\": \"in_progress\"}]}"
  "A todo_write input, as Efrit's JSON parser gets it from Claude.")

(defun efrit-todo-readme-test--indicator-checks ()
  "Return the conditions: the mode-line indicator is on, with the list.
Run after a list was written.  A batch Emacs formats every mode line
as \"\", so the indicator is looked for in the mode line's construct."
  '(("the mode-line indicator is on"
     (and (boundp 'efrit-todo-mode-line-mode) efrit-todo-mode-line-mode))
    ("the mode line holds efrit-todo's indicator"
     (let (walk seen)
       (setq walk (lambda (construct)
                    (cond ((and construct (symbolp construct))
                           (or (string-prefix-p "efrit-todo" (symbol-name construct))
                               (and (boundp construct) (not (memq construct seen))
                                    (progn (push construct seen)
                                           (funcall walk (default-value construct))))))
                          ((consp construct)
                           (or (funcall walk (car construct)) (funcall walk (cdr construct)))))))
       (funcall walk 'mode-line-format)))
    ("the indicator shows the written list"
     (string-match-p "Todo 0/1" (or (efrit-todo-mode-line-text) "")))))

(defun efrit-todo-readme-test--efrit-setup (home)
  "Return the actions to set Efrit up as in its README, and its kind.
The Efrit checkout at EFRIT_DIR, else a stand-in made in HOME whose
efrit.el, as Efrit's, puts a directory holding an efrit-todo.el of its
own at the front of `load-path'."
  (let ((efrit (getenv "EFRIT_DIR")))
    (if (and efrit (not (string-empty-p efrit)))
        (cons `(("Efrit's set-up"
                 (progn (add-to-list 'load-path ,(expand-file-name "lisp" efrit))
                        (require 'efrit))))
              'real)
      (let ((lisp (expand-file-name "efrit/lisp/" home)))
        (efrit-todo-readme-test--write
         lisp "efrit.el"
         (concat ";;; efrit.el --- stand-in for Efrit's set-up -*- lexical-binding: t -*-\n"
                 "(add-to-list 'load-path (expand-file-name \"core\" (file-name-directory load-file-name)))\n"
                 "(provide 'efrit)\n"))
        (efrit-todo-readme-test--write
         lisp "core/efrit-todo.el"
         (concat ";;; efrit-todo.el --- stand-in for Efrit's own file of this name -*- lexical-binding: t -*-\n"
                 "(defun efrit-todo-add (content &optional _priority) (list 'stand-in content))\n"
                 "(provide 'efrit-todo)\n"))
        (cons `(("the stand-in Efrit set-up"
                 (progn (add-to-list 'load-path ,lisp) (require 'efrit))))
              'stand-in)))))

(defun efrit-todo-readme-test--efrit-checks (kind)
  "Return the conditions after the Efrit block, Efrit set up being of KIND.
With the stand-in set-up, the stand-in loop is loaded first."
  (append
   (and (eq kind 'stand-in)
        `(("the stand-in efrit-do loop loads"
           (progn (load ,(expand-file-name "test/efrit-todo-fake-efrit.el" efrit-todo-readme-test--root)
                        nil t t)
                  t))))
   `(("efrit-todo-efrit-mode is on"
      (and (boundp 'efrit-todo-efrit-mode) efrit-todo-efrit-mode))
     ("the feature efrit-todo is efrit-todo's, module and all"
      (and (fboundp 'efrit-todo--module-version)
           ,(efrit-todo-readme-test--ours-p 'efrit-todo-write)))
     ("Efrit's names (efrit-todo-add) are efrit-todo's"
      ,(efrit-todo-readme-test--ours-p 'efrit-todo-add))
     ("Efrit's todo_write handler answers with efrit-todo's result"
      (progn
        ,@(and (eq kind 'real) '((require 'efrit-do)))
        (string-prefix-p "[TODO list updated: 0/1 done]"
                         (efrit-do--handle-todo-write
                          (json-parse-string ,efrit-todo-readme-test--write-input))))))
   (efrit-todo-readme-test--indicator-checks)))

(defun efrit-todo-readme-test--efrit-order (order)
  "Run the README's Efrit block with Efrit set up in ORDER.
ORDER is `after' (the block first), `before' (Efrit first) or
`between' (Efrit set up after the block's `load-path' line)."
  (efrit-todo-readme-test--with-home home
    (let* ((body (efrit-todo-readme-test--substitute (efrit-todo-readme-test--block 'efrit)))
           (parts (efrit-todo-readme-test--split body))
           (setup (efrit-todo-readme-test--efrit-setup home))
           (whole `(("the README's Efrit block"
                     ,(efrit-todo-readme-test--load
                       (efrit-todo-readme-test--write home "block.el" body)))))
           (first `(("the README's load-path line"
                     ,(efrit-todo-readme-test--load
                       (efrit-todo-readme-test--write home "block-1.el" (car parts))))))
           (rest `(("the rest of the README's Efrit block"
                    ,(efrit-todo-readme-test--load
                      (efrit-todo-readme-test--write home "block-2.el" (cdr parts)))))))
      (efrit-todo-readme-test--child
       home
       (pcase order
         ('after (append whole (car setup)))
         ('before (append (car setup) whole))
         ('between (append first (car setup) rest)))
       (efrit-todo-readme-test--efrit-checks (cdr setup))))))

(ert-deftest efrit-todo-readme-test-efrit-block-then-efrit ()
  "The Efrit block, then Efrit's own set-up: the mode is on, on our module."
  (efrit-todo-readme-test--efrit-order 'after))

(ert-deftest efrit-todo-readme-test-efrit-then-efrit-block ()
  "Efrit's own set-up, then the Efrit block: the mode is on, on our module."
  (efrit-todo-readme-test--efrit-order 'before))

(ert-deftest efrit-todo-readme-test-efrit-between-efrit-block ()
  "Efrit's set-up between the block's `load-path' line and its `require'."
  (efrit-todo-readme-test--efrit-order 'between))

(defun efrit-todo-readme-test--gptel-order (order)
  "Run the README's gptel block, gptel being set up in ORDER.
`loaded': gptel was loaded before the block.  `installed': gptel is
in `load-path', as package.el puts it, but not loaded yet."
  (efrit-todo-readme-test--with-home home
    (let* ((fake (expand-file-name "test/efrit-todo-fake-gptel.el" efrit-todo-readme-test--root))
           (installed (expand-file-name "gptel/" home))
           (block `(("the README's gptel block"
                     ,(efrit-todo-readme-test--load
                       (efrit-todo-readme-test--write
                        home "block.el"
                        (efrit-todo-readme-test--substitute
                         (efrit-todo-readme-test--block 'gptel)))))))
           (gptel (pcase order
                    ('loaded `(("gptel's set-up (the fake gptel, loaded)" (load ,fake nil t t))))
                    ('installed
                     (efrit-todo-readme-test--write
                      installed "gptel.el"
                      (format ";;; gptel.el --- the fake gptel, under gptel's name -*- lexical-binding: t -*-\n(load %S nil t t)\n" fake))
                     `(("gptel installed, not loaded (the fake gptel)"
                        (add-to-list 'load-path ,installed)))))))
      (efrit-todo-readme-test--child
       home
       (append gptel block)
       (append
        '(("efrit-todo-gptel-mode is on"
           (and (boundp 'efrit-todo-gptel-mode) efrit-todo-gptel-mode))
          ("gptel is loaded" (featurep 'gptel))
          ("gptel has the tool todo_write" (gptel-get-tool "todo_write"))
          ("gptel has the tool todo_pause" (gptel-get-tool "todo_pause"))
          ("gptel has the preset efrit-todo" (gptel-get-preset 'efrit-todo))
          ("a list is written"
           (efrit-todo-write '(:todos [(:content "Read the README" :status "in_progress")]))))
        (efrit-todo-readme-test--indicator-checks))))))

(ert-deftest efrit-todo-readme-test-gptel-loaded-then-gptel-block ()
  "With gptel loaded first, the gptel block gives tools, preset and mode."
  (efrit-todo-readme-test--gptel-order 'loaded))

(ert-deftest efrit-todo-readme-test-gptel-installed-then-gptel-block ()
  "With gptel installed, not loaded, the gptel block loads it and so on."
  (efrit-todo-readme-test--gptel-order 'installed))

(defun efrit-todo-readme-test--package (name substitutions &optional build)
  "Run the README's package block NAME, then restart and turn the mode on.
SUBSTITUTIONS are (FROM . TO) pairs made in the block besides the
placeholder.  BUILD non-nil puts the built module into the installed
package's Lisp directory between the two, as the build offered on
first load would."
  (efrit-todo-readme-test--with-home home
    (let ((body (efrit-todo-readme-test--substitute (efrit-todo-readme-test--block name)))
          (elpa (expand-file-name "elpa" home))
          (init `(progn (require 'package)
                        (setq package-archives nil
                              package-user-dir ,(expand-file-name "elpa" home)))))
      (pcase-dolist (`(,from . ,to) substitutions)
        (setq body (string-replace from to body)))
      (efrit-todo-readme-test--child
       home
       `(("package.el set up in HOME" ,init)
         ("the README's package block"
          ,(efrit-todo-readme-test--load (efrit-todo-readme-test--write home "block.el" body))))
       '(("efrit-todo is installed" (package-installed-p 'efrit-todo))
         ("every file compiled without an error"
          (not (and (get-buffer "*Compile-Log*")
                    (with-current-buffer "*Compile-Log*"
                      (goto-char (point-min))
                      (re-search-forward "Error:" nil t)))))))
      (when build
        (let ((lisp (file-name-directory
                     (car (directory-files-recursively elpa "\\`efrit-todo\\.el\\'")))))
          (copy-file (expand-file-name "efrit-todo-module.so" efrit-todo-readme-test--lisp)
                     lisp t)))
      ;; As after a restart: Emacs activates the packages before the
      ;; init file, which then needs only the mode.
      (efrit-todo-readme-test--child
       home
       `(("package.el set up in HOME" ,init)
         ("the packages activated, as at start-up" (package-activate-all))
         ("(efrit-todo-efrit-mode 1) in the init file, with no require"
          (efrit-todo-efrit-mode 1)))
       `(("efrit-todo-efrit-mode is on" efrit-todo-efrit-mode)
         ("efrit-todo comes from the installed package, not the checkout"
          (string-prefix-p ,(file-name-as-directory elpa)
                           (symbol-file 'efrit-todo-write)))
         ("a list is written"
          (efrit-todo-write '(:todos [(:content "Read the README" :status "in_progress")])))
         ("efrit-todo-gptel-mode is autoloaded" (fboundp 'efrit-todo-gptel-mode)))))))

(ert-deftest efrit-todo-readme-test-package-install-file ()
  "The `package-install-file' block installs a package needing no `require'."
  (efrit-todo-readme-test--package 'package-file nil))

(ert-deftest efrit-todo-readme-test-package-vc-install ()
  "The `package-vc-install' block installs efrit-todo from its repository.
It clones this checkout's committed HEAD: uncommitted changes are not
in it.  The module, which is not in git, is put in the clone as the
build on first load would."
  (unless (version<= "29.1" emacs-version)
    (efrit-todo-readme-test--skip
     (format "package-vc-install is new in Emacs 29.1, this is %s; to run it: make ert EMACS=emacs-29-or-later"
             emacs-version)))
  (unless (and (executable-find "git")
               (file-exists-p (expand-file-name ".git" efrit-todo-readme-test--root)))
    (efrit-todo-readme-test--skip "package-vc-install clones this checkout with git: git or the checkout's .git is missing"))
  (efrit-todo-readme-test--package
   'package-vc `((,efrit-todo-readme-test--url . ,efrit-todo-readme-test--root)) t))

;;;; The demo

(ert-deftest efrit-todo-readme-test-demo-is-a-command ()
  "The command `efrit-todo-demo' needs lisp/ alone: it plays the session, q puts the windows back."
  (efrit-todo-readme-test--with-home home
    (efrit-todo-readme-test--child
     home
     `(("efrit-todo from lisp/ alone"
        (progn (add-to-list 'load-path ,efrit-todo-readme-test--lisp)
               (require 'efrit-todo)))
       ("the demo, played fast, as if interactively"
        (progn (setq efrit-todo-demo-speed 100)
               (let ((noninteractive nil))
                 (call-interactively #'efrit-todo-demo))
               (let ((end (+ (float-time) 20)))
                 (while (and efrit-todo-demo--timer (< (float-time) end))
                   (accept-process-output nil 0.05))))))
     '(("efrit-todo-demo was autoloaded by efrit-todo.el" (featurep 'efrit-todo-demo))
       ("the demo is a command" (commandp 'efrit-todo-demo))
       ("no file of test/ was loaded"
        (not (seq-some (lambda (entry) (string-match-p "/test/" (car entry))) load-history)))
       ("the session was played to its end"
        (equal (efrit-todo-counts "demo")
               '(:total 7 :pending 0 :in-progress 0 :completed 6 :cancelled 1)))
       ("q in the narration ends it"
        (progn (with-current-buffer "*efrit-todo-demo*" (efrit-todo-demo-stop))
               (and (not (get-buffer "*efrit-todo-demo*")) (null efrit-todo-demo--timer))))))))

;;;; The options table

(defun efrit-todo-readme-test--defcustoms ()
  "Return (OPTION . GROUP) for every `defcustom' in lisp/, read from the source.
GROUP is the symbol its :group names."
  (let (found)
    (dolist (file (directory-files efrit-todo-readme-test--lisp t "\\`efrit-todo[a-z-]*\\.el\\'"))
      (with-temp-buffer
        (insert-file-contents file)
        (goto-char (point-min))
        (condition-case nil
            (while t
              (let ((form (read (current-buffer))))
                (when (eq (car-safe form) 'defcustom)
                  (let ((group (plist-get (nthcdr 4 form) :group)))
                    (push (cons (nth 1 form) (if (eq (car-safe group) 'quote) (cadr group) group))
                          found)))))
          (end-of-file nil))))
    (nreverse found)))

(defun efrit-todo-readme-test--options-table ()
  "Return (OPTION GROUP LINE) for every row of the README's option tables.
The tables are in the section \"* Options\"; the group of a table is
the last \"group =NAME=\" the text before it names."
  (with-temp-buffer
    (insert-file-contents (expand-file-name "README.org" efrit-todo-readme-test--root))
    (goto-char (point-min))
    (unless (re-search-forward "^\\* Options[ \t]*$" nil t)
      (ert-fail "README.org has no section \"* Options\""))
    (let ((end (save-excursion (if (re-search-forward "^\\* " nil t) (point) (point-max))))
          (group nil)
          (rows nil))
      (while (< (point) end)
        (let ((line (buffer-substring-no-properties (line-beginning-position) (line-end-position))))
          (cond
           ((string-match "\\`[ \t]*|[ \t]*=\\(efrit-todo-[a-z0-9-]+\\)=[ \t]*|" line)
            (push (list (intern (match-string 1 line)) group (line-number-at-pos)) rows))
           ((string-match "group =\\([a-z-]+\\)=" line)
            (setq group (intern (match-string 1 line))))))
        (forward-line 1))
      (nreverse rows))))

(ert-deftest efrit-todo-readme-test-options-table-is-the-defcustoms ()
  "The README's option tables list every option once, under its real group."
  (let ((defcustoms (efrit-todo-readme-test--defcustoms))
        (rows (efrit-todo-readme-test--options-table)))
    (should (> (length defcustoms) 30))
    (dolist (row rows)
      (let ((defined (assq (car row) defcustoms)))
        (unless defined
          (ert-fail (format "README.org:%d: %s is not an option of lisp/" (nth 2 row) (car row))))
        (unless (eq (cdr defined) (nth 1 row))
          (ert-fail (format "README.org:%d: %s is in the group %s, the README says %s"
                            (nth 2 row) (car row) (cdr defined) (nth 1 row))))))
    (dolist (option defcustoms)
      (let ((listed (seq-count (lambda (row) (eq (car row) (car option))) rows)))
        (unless (= listed 1)
          (ert-fail (format "README.org's option tables list %s %d times, not once"
                            (car option) listed)))))))

;;;; What the model sees

(defun efrit-todo-readme-test--named (name)
  "Return the text of the README block named NAME (#+name: NAME)."
  (with-temp-buffer
    (insert-file-contents (expand-file-name "README.org" efrit-todo-readme-test--root))
    (goto-char (point-min))
    (let ((case-fold-search t))
      (unless (re-search-forward (concat "^#\\+name:[ \t]*" (regexp-quote name)
                                         "[ \t]*\n#\\+begin_\\(example\\|src\\).*\n")
                                 nil t)
        (ert-fail (format "README.org has no block named %s" name)))
      (let ((start (point)))
        (re-search-forward "^#\\+end_")
        (buffer-substring-no-properties start (match-beginning 0))))))

(ert-deftest efrit-todo-readme-test-results-are-the-module-s ()
  "The results the README shows are what the module answers."
  (efrit-todo-readme-test--with-home home
    (efrit-todo-readme-test--child
     home
     `(("efrit-todo loaded"
        (progn (add-to-list 'load-path ,efrit-todo-readme-test--lisp)
               (require 'efrit-todo))))
     `(("the plan's result is the README's plan-result"
        (equal (concat (efrit-todo-write
                        '(:todos [(:content "Find every call of parse-config"
                                   :activeForm "Finding every call of parse-config"
                                   :status "in_progress")
                                  (:content "Rename parse-config to config-parse in config.el"
                                   :activeForm "Renaming parse-config in config.el"
                                   :status "pending")
                                  (:content "Update the callers in main.el and cli.el"
                                   :status "pending")
                                  (:content "Run the test suite" :status "pending")]))
                       "\n")
               ,(efrit-todo-readme-test--named "plan-result")))
       ("the README's merge-input gives its merge-result"
        (equal (concat (efrit-todo-write
                        (json-parse-string ,(efrit-todo-readme-test--named "merge-input")))
                       "\n")
               ,(efrit-todo-readme-test--named "merge-result")))
       ("then the README's graph-input gives its graph-result"
        (equal (concat (efrit-todo-write
                        (json-parse-string ,(efrit-todo-readme-test--named "graph-input")))
                       "\n")
               ,(efrit-todo-readme-test--named "graph-result")))
       ;; The tasks style, in a session of its own, after the TaskCreate
       ;; the README names in its text.
       ("the README's tasks-create-input gives its tasks-create-result"
        (progn
          (efrit-todo-task-create '(:subject "Write the parser" :activeForm "Writing the parser")
                                  "tasks")
          (equal (concat (efrit-todo-task-create
                          (json-parse-string ,(efrit-todo-readme-test--named "tasks-create-input"))
                          "tasks")
                         "\n")
                 ,(efrit-todo-readme-test--named "tasks-create-result"))))
       ("TaskList then gives the README's tasks-list-result"
        (equal (concat (efrit-todo-task-list nil "tasks") "\n")
               ,(efrit-todo-readme-test--named "tasks-list-result")))
       ("the README's tasks-update-input gives its tasks-update-result"
        (equal (concat (efrit-todo-task-update
                        (json-parse-string ,(efrit-todo-readme-test--named "tasks-update-input"))
                        "tasks")
                       "\n")
               ,(efrit-todo-readme-test--named "tasks-update-result")))))))

(ert-deftest efrit-todo-readme-test-every-block-is-checked ()
  "Every runnable emacs-lisp block has one check, and every check a block."
  (let ((blocks (seq-filter (lambda (block) (plist-get block :run))
                            (efrit-todo-readme-test--blocks))))
    (should blocks)
    (dolist (block blocks)
      (let ((claimants (efrit-todo-readme-test--claimants block)))
        (unless (= (length claimants) 1)
          (ert-fail (format "README.org:%d: a runnable emacs-lisp block claimed by %s; give it one check in efrit-todo-readme-test--claims, or :eval no if it is not to be run"
                            (plist-get block :line) (or claimants "no check"))))))
    (pcase-dolist (`(,name . ,text) efrit-todo-readme-test--claims)
      (unless (seq-some (lambda (block) (memq name (efrit-todo-readme-test--claimants block)))
                        blocks)
        (ert-fail (format "README.org has no runnable block holding %S for the check %s"
                          text name))))))

(ert-deftest efrit-todo-readme-test-eval-no-is-honoured ()
  "A block whose header says :eval no is read but not run."
  (with-temp-buffer
    (let ((blocks (cl-letf (((symbol-function 'insert-file-contents)
                             (lambda (&rest _)
                               (insert "#+begin_src emacs-lisp :eval no\n(error \"ran\")\n#+end_src\n"
                                       "#+BEGIN_SRC emacs-lisp\n,* (message \"x\")\n#+END_SRC\n"))))
                    (efrit-todo-readme-test--blocks))))
      (should (equal (mapcar (lambda (block) (plist-get block :run)) blocks) '(nil t)))
      (should (equal (plist-get (cadr blocks) :body) "* (message \"x\")\n")))))

(provide 'efrit-todo-readme-test)
;;; efrit-todo-readme-test.el ends here
