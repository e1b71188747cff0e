;;; efrit-todo-demo.el --- Watch a scripted agent session: M-x efrit-todo-demo -*- lexical-binding: t; -*-

;; Copyright (C) 2026 The efrit-todo developers

;; Author: The efrit-todo developers
;; Maintainer: The efrit-todo developers
;; Keywords: tools, convenience
;; URL: https://github.com/efrit-todo/efrit-todo

;; This file is not part of GNU Emacs.

;; This program is free software; you can redistribute it and/or modify
;; it under the terms of the GNU General Public License as published by
;; the Free Software Foundation, either version 3 of the License, or
;; (at your option) any later version.

;; This program is distributed in the hope that it will be useful,
;; but WITHOUT ANY WARRANTY; without even the implied warranty of
;; MERCHANTABILITY or FITNESS FOR A PARTICULAR PURPOSE.  See the
;; GNU General Public License for more details.

;; You should have received a copy of the GNU General Public License
;; along with this program.  If not, see <https://www.gnu.org/licenses/>.

;;; Commentary:

;;; Commentary:

;; M-x efrit-todo-demo replays what a model does while renaming a
;; function across a small project, about 30 seconds of it: its
;; todo_write calls, sent as Efrit would send them (hash tables parsed
;; from JSON), two subtasks among them, its other tool calls, and one
;; edit by the user.  *efrit-todos* pops up by itself and follows every
;; step, and the mode line shows the progress.  Nothing is sent to a
;; model, and the demo's list is never saved.  q in the narration stops
;; the demo and puts the windows back.
;;
;; In batch, `efrit-todo-demo-run' prints every step with the text the
;; model would read.  `make demo' runs one or the other.

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
    (2.0 "All done: 6/7, t5 cancelled; t4 completed by its id alone.  q here ends the demo."
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

(defconst efrit-todo-demo-buffer-name "*efrit-todo-demo*"
  "The buffer that narrates the demo.")

(defvar efrit-todo-demo--timer nil
  "The timer of the demo's next step, or nil.")

(defvar efrit-todo-demo--windows nil
  "The window configuration before the demo, put back when it stops.")

(defvar efrit-todo-demo--indicator nil
  "Non-nil when the demo turned the mode-line indicator on.")

(defun efrit-todo-demo--narrate (caption)
  "Append CAPTION to the demo buffer and echo it."
  (with-current-buffer (get-buffer-create efrit-todo-demo-buffer-name)
    (let ((inhibit-read-only t))
      (goto-char (point-max))
      (insert "- " caption "\n")))
  (message "%s" caption))

(defun efrit-todo-demo--play (steps)
  "Perform the first step of a list and schedule the rest.
STEPS is that list.  The demo's list stays in memory: nothing is saved."
  (setq efrit-todo-demo--timer nil)
  (when (and steps (get-buffer efrit-todo-demo-buffer-name))
    (let ((step (car steps)))
      (setq efrit-todo-demo--timer
            (run-with-timer
             (/ (car step) efrit-todo-demo-speed) nil
             (lambda ()
               (let ((efrit-todo-state-directory nil))
                 (efrit-todo-demo--narrate (cadr step))
                 (let ((text (efrit-todo-demo--perform step efrit-todo-demo-session)))
                   (when (and text (string-prefix-p "Refused" text))
                     (efrit-todo-demo--narrate text))))
               (efrit-todo-demo--play (cdr steps))))))))

(defvar efrit-todo-demo-mode-map
  (let ((map (make-sparse-keymap)))
    (define-key map (kbd "q") #'efrit-todo-demo-stop)
    map)
  "Keymap of `efrit-todo-demo-mode'.")

(define-derived-mode efrit-todo-demo-mode special-mode "Efrit-Todo-Demo"
  "Major mode of the demo's narration.
\\[efrit-todo-demo-stop] stops the demo and puts the windows back."
  :group 'efrit-todo-ui
  (setq-local word-wrap t)
  (add-hook 'kill-buffer-hook #'efrit-todo-demo--cancel nil t))

(defun efrit-todo-demo--cancel ()
  "Cancel the demo's next step and give the mode line back."
  (when efrit-todo-demo--timer
    (cancel-timer efrit-todo-demo--timer)
    (setq efrit-todo-demo--timer nil))
  (when efrit-todo-demo--indicator
    (setq efrit-todo-demo--indicator nil)
    (efrit-todo-mode-line-mode -1)))

(defun efrit-todo-demo-stop ()
  "Stop the demo, close its buffer and put the windows back as they were."
  (interactive)
  (efrit-todo-demo--cancel)
  (let ((windows efrit-todo-demo--windows))
    (setq efrit-todo-demo--windows nil)
    (when (get-buffer efrit-todo-demo-buffer-name)
      (kill-buffer efrit-todo-demo-buffer-name))
    (when windows
      (set-window-configuration windows))))

;;;###autoload
(defun efrit-todo-demo ()
  "Watch a scripted agent session replayed, about 30 seconds of it.
*efrit-todos* pops up beside or below the narration and follows every
step, and the mode line shows the progress.  No model is asked and
nothing is saved.  \\<efrit-todo-demo-mode-map>\\[efrit-todo-demo-stop] in the narration stops the demo and puts
the windows back.  In batch Emacs, print what the model reads at each
step instead."
  (interactive)
  (if noninteractive
      (efrit-todo-demo-run)
    (efrit-todo-demo-live)))

(defun efrit-todo-demo-live ()
  "Replay the demo session live: watch *efrit-todos* and the mode line."
  (efrit-todo-demo--cancel)
  (unless (get-buffer efrit-todo-demo-buffer-name)
    (setq efrit-todo-demo--windows (current-window-configuration)))
  (let ((efrit-todo-state-directory nil))
    (efrit-todo-reset efrit-todo-demo-session))
  ;; Popped up again for this run, as the first list of a session is.
  (remhash efrit-todo-demo-session efrit-todo-ui--auto-shown)
  (unless efrit-todo-mode-line-mode
    (efrit-todo-mode-line-mode 1)
    (setq efrit-todo-demo--indicator t))
  (pop-to-buffer-same-window (get-buffer-create efrit-todo-demo-buffer-name))
  (delete-other-windows)
  (efrit-todo-demo-mode)
  (let ((inhibit-read-only t))
    (erase-buffer)
    (insert "efrit-todo demo: a scripted agent session, replayed live.\n\n"
            "The list and the mode line follow each step.  C-x o goes to the list:\n"
            "n/p move, TAB folds, c/i/r/k complete/start/reopen/cancel, ? lists\n"
            (substitute-command-keys
             "the keys, q closes it.  \\<efrit-todo-demo-mode-map>\\[efrit-todo-demo-stop] here ends the demo.\n\n")))
  ;; The list goes beside the narration on a wide terminal, below it on
  ;; an 80-column one: `efrit-todo-display-buffer-action' as it comes.
  (efrit-todo-demo--play efrit-todo-demo-steps))

(provide 'efrit-todo-demo)

;; Local Variables:
;; package-lint-main-file: "efrit-todo.el"
;; End:

;;; efrit-todo-demo.el ends here
