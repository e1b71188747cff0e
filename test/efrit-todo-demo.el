;;; efrit-todo-demo.el --- Replay a realistic agent plan in batch -*- lexical-binding: t; -*-

;;; Commentary:

;; `make demo' runs `efrit-todo-demo-run': the writes a model makes while
;; renaming a function across a small project, sent as Efrit would send
;; them (hash tables parsed from JSON), with every result text printed.

;;; Code:

(require 'json)
(require 'efrit-todo)

(defconst efrit-todo-demo-steps
  '(("The model plans the work"
     "{\"todos\": [
        {\"content\": \"Find every call of parse-config\", \"status\": \"in_progress\", \"activeForm\": \"Finding every call of parse-config\"},
        {\"content\": \"Rename parse-config to config-parse in config.el\", \"status\": \"pending\", \"activeForm\": \"Renaming parse-config in config.el\"},
        {\"content\": \"Update the callers in main.el and cli.el\", \"status\": \"pending\", \"activeForm\": \"Updating the callers\"},
        {\"content\": \"Run the test suite\", \"status\": \"pending\", \"activeForm\": \"Running the test suite\"}]}")
    ("It finishes t1, starts t2, and forgets one id"
     "{\"todos\": [
        {\"id\": \"t1\", \"content\": \"Find every call of parse-config\", \"status\": \"completed\"},
        {\"id\": \"t2\", \"content\": \"Rename parse-config to config-parse in config.el\", \"status\": \"in_progress\"},
        {\"content\": \"update the callers in main.el and cli.el\", \"status\": \"pending\"},
        {\"id\": \"t4\", \"content\": \"Run the test suite\", \"status\": \"pending\"}]}")
    ("It marks two items in progress and leaves one out"
     "{\"todos\": [
        {\"id\": \"t1\", \"content\": \"Find every call of parse-config\", \"status\": \"completed\"},
        {\"id\": \"t2\", \"content\": \"Rename parse-config to config-parse in config.el\", \"status\": \"completed\"},
        {\"id\": \"t3\", \"content\": \"Update the callers in main.el and cli.el\", \"status\": \"in_progress\"},
        {\"content\": \"Update the docs\", \"status\": \"in_progress\"}]}")
    ("It sends a status the backend cannot guess"
     "{\"todos\": [{\"id\": \"t3\", \"content\": \"Update the callers in main.el and cli.el\", \"status\": \"done\"}]}")
    ("It cancels what it will not do and finishes"
     "{\"todos\": [
        {\"id\": \"t1\", \"content\": \"Find every call of parse-config\", \"status\": \"completed\"},
        {\"id\": \"t2\", \"content\": \"Rename parse-config to config-parse in config.el\", \"status\": \"completed\"},
        {\"id\": \"t3\", \"content\": \"Update the callers in main.el and cli.el\", \"status\": \"completed\"},
        {\"id\": \"t4\", \"content\": \"Run the test suite\", \"status\": \"completed\"},
        {\"id\": \"t5\", \"content\": \"Update the docs\", \"status\": \"cancelled\"}]}"))
  "Steps of the demo: a caption and the JSON the model sends.")

(defun efrit-todo-demo--parse (json)
  "Parse JSON the way Efrit parses tool input."
  (let ((json-object-type 'hash-table)
        (json-array-type 'vector)
        (json-key-type 'string))
    (json-read-from-string json)))

(defun efrit-todo-demo-run ()
  "Print each step of the demo with the result the model would see."
  (let ((efrit-todo-current-session (format "demo-%d" (emacs-pid))))
    (dolist (step efrit-todo-demo-steps)
      (princ (format "\n=== %s ===\n" (car step)))
      (princ (condition-case err
                 (efrit-todo-write (efrit-todo-demo--parse (cadr step)))
               (efrit-todo-invalid-input
                (format "Refused, list unchanged: %s" (cadr err)))))
      (terpri))
    (princ (format "\nFinal counts: %S\n" (efrit-todo-counts)))))

(provide 'efrit-todo-demo)
;;; efrit-todo-demo.el ends here
