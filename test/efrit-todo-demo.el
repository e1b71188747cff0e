;;; efrit-todo-demo.el --- Replay a realistic agent session -*- lexical-binding: t; -*-

;;; Commentary:

;; `make demo' replays what a model does while renaming a function across
;; a small project: its todo_write calls, sent as Efrit would send them
;; (hash tables parsed from JSON), two subtasks among them, its other tool
;; calls, and one edit by the user.
;;
;; - `efrit-todo-demo-live' plays it in a running Emacs over about 30
;;   seconds: *efrit-todos* pops up by itself (`efrit-todo-auto-show') and
;;   follows every step, and `efrit-todo-mode-line-mode' shows progress.
;;   `efrit-todo-demo-speed' (or the environment variable
;;   EFRIT_TODO_DEMO_SPEED) plays it faster; the terminal test does.
;; - `efrit-todo-demo-run' prints every step with the text the model
;;   would read, in batch.

;;; Code:

(require 'json)
(require 'efrit-todo)
(require 'efrit-todo-ui)

(defvar efrit-todo-demo-speed
  (let ((env (getenv "EFRIT_TODO_DEMO_SPEED")))
    (if (and env (> (string-to-number env) 0)) (string-to-number env) 1.0))
  "How many times faster than real time `efrit-todo-demo-live' plays.")

(defconst efrit-todo-demo-session "demo"
  "The session the demo writes to.")

(defconst efrit-todo-demo-steps
  '((1.0 "You ask the agent to rename parse-config to config-parse across the project.")
    (1.5 "The model plans the work: four items, t1 running.  The list pops up by itself."
         write "{\"todos\": [
        {\"content\": \"Find every call of parse-config\", \"status\": \"in_progress\", \"activeForm\": \"Finding every call of parse-config\"},
        {\"content\": \"Rename parse-config to config-parse in config.el\", \"status\": \"pending\", \"activeForm\": \"Renaming parse-config in config.el\"},
        {\"content\": \"Update the callers in main.el and cli.el\", \"status\": \"pending\", \"activeForm\": \"Updating the callers\"},
        {\"content\": \"Run the test suite: 100%-pass\", \"status\": \"pending\", \"activeForm\": \"Running the tests: 100%-pass\"}]}")
    (2.0 "It searches; the call is filed under t1 (TAB on an item shows its calls)."
         tool "search_files" "parse-config" "config.el:12\nmain.el:40\ncli.el:7")
    (2.0 "t1 done, t2 started.  It resent t3 without its id, in lower case: t3 it stays."
         write "{\"todos\": [
        {\"id\": \"t1\", \"content\": \"Find every call of parse-config\", \"status\": \"completed\"},
        {\"id\": \"t2\", \"content\": \"Rename parse-config to config-parse in config.el\", \"status\": \"in_progress\"},
        {\"content\": \"update the callers in main.el and cli.el\", \"status\": \"pending\"},
        {\"id\": \"t4\", \"content\": \"Run the test suite: 100%-pass\", \"status\": \"pending\"}]}")
    (2.0 "It edits config.el."
         tool "edit_file" "config.el" "Replaced 1 occurrence in config.el")
    (2.0 "It marks two items in progress: the first stays, the other goes back to pending."
         write "{\"todos\": [
        {\"id\": \"t1\", \"content\": \"Find every call of parse-config\", \"status\": \"completed\"},
        {\"id\": \"t2\", \"content\": \"Rename parse-config to config-parse in config.el\", \"status\": \"completed\"},
        {\"id\": \"t3\", \"content\": \"Update the callers in main.el and cli.el\", \"status\": \"in_progress\"},
        {\"id\": \"t4\", \"content\": \"Run the test suite: 100%-pass\", \"status\": \"pending\"},
        {\"content\": \"Update the docs\", \"status\": \"in_progress\", \"activeForm\": \"Updating the docs\"}]}")
    (2.0 "It sends status \"done\": refused with the field named, the list unchanged."
         write "{\"todos\": [{\"id\": \"t3\", \"content\": \"Update the callers in main.el and cli.el\", \"status\": \"done\"}]}")
    (2.0 "t3 has two parts: it adds them as subtasks of t3 (merge), drawn under it."
         write "{\"merge\": true, \"todos\": [
        {\"content\": \"Update main.el\", \"status\": \"pending\", \"parent\": \"t3\"},
        {\"content\": \"Update cli.el\", \"status\": \"pending\", \"parent\": \"t3\"}]}")
    (1.0 "It edits main.el."
         tool "edit_file" "main.el" "Replaced 2 occurrences in main.el")
    (2.0 "It completes t6 and t3 together: refused, as t7 is still open."
         write "{\"merge\": true, \"todos\": [{\"id\": \"t6\", \"status\": \"completed\"}, {\"id\": \"t3\", \"status\": \"completed\"}]}")
    (1.5 "It completes t6 alone."
         write "{\"merge\": true, \"todos\": [{\"id\": \"t6\", \"status\": \"completed\"}]}")
    (1.0 "It edits cli.el."
         tool "edit_file" "cli.el" "Replaced 1 occurrence in cli.el")
    (2.0 "t7 done: the result says t3 has no unfinished subtasks left."
         write "{\"merge\": true, \"todos\": [{\"id\": \"t7\", \"status\": \"completed\"}]}")
    (2.0 "t3 done, t4 running.  Its text has a %, which the mode line shows as is."
         write "{\"todos\": [
        {\"id\": \"t1\", \"content\": \"Find every call of parse-config\", \"status\": \"completed\"},
        {\"id\": \"t2\", \"content\": \"Rename parse-config to config-parse in config.el\", \"status\": \"completed\"},
        {\"id\": \"t3\", \"content\": \"Update the callers in main.el and cli.el\", \"status\": \"completed\"},
        {\"id\": \"t6\", \"content\": \"Update main.el\", \"status\": \"completed\", \"parent\": \"t3\"},
        {\"id\": \"t7\", \"content\": \"Update cli.el\", \"status\": \"completed\", \"parent\": \"t3\"},
        {\"id\": \"t4\", \"content\": \"Run the test suite: 100%-pass\", \"status\": \"in_progress\"},
        {\"id\": \"t5\", \"content\": \"Update the docs\", \"status\": \"pending\"}]}")
    (1.5 "It runs the tests."
         tool "run_tests" "make test" "Ran 42 tests, 0 failures")
    (1.5 "You press k on t5 in *efrit-todos*: cancelled, and the model is told with its next tool result."
         cancel "t5")
    (2.0 "All done: 6/7, t5 cancelled; t4 completed by its id alone.  q leaves the list, C-x C-c quits Emacs."
         write "{\"merge\": true, \"todos\": [{\"id\": \"t4\", \"status\": \"completed\"}]}"))
  "Steps of the demo: (SECONDS CAPTION [ACTION ARGS...]).
SECONDS is the pause before the step.  ACTION is `write' with the
JSON the model sends, `tool' with a tool's name, input and result,
or `cancel' with the id the user cancels.")

(defun efrit-todo-demo--parse (json)
  "Parse JSON as Efrit does for tool input."
  (let ((json-object-type 'hash-table)
        (json-array-type 'vector)
        (json-key-type 'string))
    (json-read-from-string json)))

(defun efrit-todo-demo--perform (step session)
  "Perform STEP in SESSION and return the text for the model (or user)."
  (pcase (cddr step)
    (`(write ,json)
     (condition-case err
         (efrit-todo-write (efrit-todo-demo--parse json) session)
       (efrit-todo-invalid-input
        (format "Refused, list unchanged: %s" (cadr err)))))
    (`(tool ,name ,input ,result)
     ;; No change hook runs: the list notices the call within a second.
     (efrit-todo-after-tool name input result nil session 0.4))
    (`(cancel ,id)
     (efrit-todo-user-set-status id 'cancelled session))
    (_ nil)))

(defun efrit-todo-demo-run ()
  "Print each step of the demo with the text the model would read."
  (let ((session (format "demo-%d" (emacs-pid))))
    (dolist (step efrit-todo-demo-steps)
      (princ (format "\n=== %s ===\n" (cadr step)))
      (let ((text (efrit-todo-demo--perform step session)))
        (when text
          (princ text)
          (terpri))))
    (princ (format "\nFinal counts: %S\n" (efrit-todo-counts session)))))

(defun efrit-todo-demo--narrate (caption)
  "Append CAPTION to the demo buffer and echo it."
  (with-current-buffer (get-buffer-create "*demo*")
    (let ((inhibit-read-only t))
      (goto-char (point-max))
      (insert "- " caption "\n")))
  (message "%s" caption))

(defun efrit-todo-demo--play (steps)
  "Perform the first step of a list and schedule the rest.
STEPS is that list."
  (when steps
    (let ((step (car steps)))
      (run-with-timer
       (/ (car step) efrit-todo-demo-speed) nil
       (lambda ()
         (efrit-todo-demo--narrate (cadr step))
         (let ((text (efrit-todo-demo--perform step efrit-todo-demo-session)))
           (when (and text (string-prefix-p "Refused" text))
             (efrit-todo-demo--narrate text)))
         (efrit-todo-demo--play (cdr steps)))))))

(defun efrit-todo-demo-live ()
  "Replay the demo session live: watch *efrit-todos* and the mode line."
  (interactive)
  (setq inhibit-startup-screen t)
  (efrit-todo-reset efrit-todo-demo-session)
  (efrit-todo-mode-line-mode 1)
  (switch-to-buffer (get-buffer-create "*demo*"))
  (delete-other-windows)
  (let ((inhibit-read-only t))
    (erase-buffer)
    (insert "efrit-todo demo: a scripted agent session, replayed live.\n\n"
            "The list and the mode line follow each step.  C-x o goes to the list:\n"
            "n/p move, TAB folds, c/i/r/k complete/start/reopen/cancel, ? lists\n"
            "the keys, q closes it.\n\n"))
  (special-mode)
  (setq-local word-wrap t)
  ;; The list goes beside the narration on a wide terminal, below it on
  ;; an 80-column one: `efrit-todo-display-buffer-action' as it comes.
  (efrit-todo-demo--play efrit-todo-demo-steps))

(defconst efrit-todo-demo-still-list
  "{\"todos\": [
    {\"content\": \"Find every call of parse-config\", \"status\": \"completed\"},
    {\"content\": \"Rename it in config.el\", \"status\": \"in_progress\", \"activeForm\": \"Renaming it: 100% of calls\"},
    {\"content\": \"Update the callers in main.el and cli.el\", \"status\": \"pending\"}]}"
  "The list `efrit-todo-demo-still' shows: one item done, one running.")

(defun efrit-todo-demo-still ()
  "Show a list that an agent left part-way, and stay still.
The terminal test looks at it at several terminal sizes: the list pops
up as it does for a user, beside or below the window that keeps the
focus, and the indicator is in the mode line."
  (interactive)
  (setq inhibit-startup-screen t)
  (efrit-todo-reset efrit-todo-demo-session)
  (efrit-todo-mode-line-mode 1)
  (switch-to-buffer (get-buffer-create "*demo*"))
  (delete-other-windows)
  (let ((inhibit-read-only t))
    (erase-buffer)
    (insert "efrit-todo: a list part-way.\n"))
  (special-mode)
  (efrit-todo-write (efrit-todo-demo--parse efrit-todo-demo-still-list)
                    efrit-todo-demo-session))

(defconst efrit-todo-demo-graph-list
  "{\"todos\": [
    {\"content\": \"Write the parser\", \"status\": \"in_progress\", \"activeForm\": \"Writing the parser\",
     \"owner\": \"alice\", \"description\": \"Recursive descent.\\nErrors keep their line and column.\"},
    {\"content\": \"Write the tests\", \"status\": \"pending\", \"blocked_by\": [\"t1\"]},
    {\"content\": \"Document every form of the new syntax\", \"status\": \"pending\",
     \"blocked_by\": [\"t1\", \"t2\"], \"owner\": \"bob\"},
    {\"content\": \"Announce the release\", \"status\": \"pending\"}]}"
  "The list `efrit-todo-demo-graph' shows: a small task graph.")

(defun efrit-todo-demo-graph ()
  "Show a task graph part-way: blockers, owners, a folded description.
The terminal test presses the dependency keys on it."
  (interactive)
  (setq inhibit-startup-screen t)
  (efrit-todo-mode-line-mode 1)
  (switch-to-buffer (get-buffer-create "*demo*"))
  (delete-other-windows)
  (let ((inhibit-read-only t))
    (erase-buffer)
    (insert "efrit-todo: a task graph part-way.\n"))
  (special-mode)
  (efrit-todo-write (efrit-todo-demo--parse efrit-todo-demo-graph-list)
                    efrit-todo-demo-session))

(provide 'efrit-todo-demo)
;;; efrit-todo-demo.el ends here
