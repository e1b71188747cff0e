;;; efrit-todo-demo-scenes.el --- Still scenes of the demo for the terminal test -*- lexical-binding: t; -*-

;;; Commentary:

;; test/efrit-todo-tmux-test.sh looks at these lists as they are drawn:
;; one part-way, one a small task graph.  They use the demo's session
;; and JSON parser, from lisp/efrit-todo-demo.el.

;;; Code:

(require 'efrit-todo)
(require 'efrit-todo-ui)
(require 'efrit-todo-demo)

(defconst efrit-todo-demo-scenes-still-list
  "{\"todos\": [
    {\"content\": \"Find every call of parse-config\", \"status\": \"completed\"},
    {\"content\": \"Rename it in config.el\", \"status\": \"in_progress\", \"activeForm\": \"Renaming it: 100% of calls\"},
    {\"content\": \"Update the callers in main.el and cli.el\", \"status\": \"pending\"}]}"
  "The list `efrit-todo-demo-scenes-still' shows: one item done, one running.")

(defun efrit-todo-demo-scenes-still ()
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
  (efrit-todo-write (efrit-todo-demo--parse efrit-todo-demo-scenes-still-list)
                    efrit-todo-demo-session))

(defconst efrit-todo-demo-scenes-graph-list
  "{\"todos\": [
    {\"content\": \"Write the parser\", \"status\": \"in_progress\", \"activeForm\": \"Writing the parser\",
     \"owner\": \"alice\", \"description\": \"Recursive descent.\\nErrors keep their line and column.\"},
    {\"content\": \"Write the tests\", \"status\": \"pending\", \"blocked_by\": [\"t1\"]},
    {\"content\": \"Document every form of the new syntax\", \"status\": \"pending\",
     \"blocked_by\": [\"t1\", \"t2\"], \"owner\": \"bob\"},
    {\"content\": \"Announce the release\", \"status\": \"pending\"}]}"
  "The list `efrit-todo-demo-scenes-graph' shows: a small task graph.")

(defun efrit-todo-demo-scenes-graph ()
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
  (efrit-todo-write (efrit-todo-demo--parse efrit-todo-demo-scenes-graph-list)
                    efrit-todo-demo-session))

(provide 'efrit-todo-demo-scenes)
;;; efrit-todo-demo-scenes.el ends here
