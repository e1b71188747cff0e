;;; efrit-todo-setup-probe.el --- What a set-up left behind, read in the Emacs it set up -*- lexical-binding: t; -*-

;;; Commentary:

;; efrit-todo-setup-test.el starts a fresh `emacs -Q' in a terminal with
;; an init file that holds a set-up as the README gives it, then loads
;; this file.  It runs what the environment asks for, writes a plist of
;; what it found to the file EFRIT_TODO_SETUP_OUT and exits.
;;
;; EFRIT_TODO_SETUP_MODE names the adapter's mode, EFRIT_TODO_SETUP_MX a
;; command to run as \[execute-extended-command] would, before anything
;; is read.
;;
;; When the set-up fails, this file is never loaded: the set-up test
;; starts Emacs with a timer that writes *Messages* instead (see
;; `efrit-todo-setup-test--watchdog').

;;; Code:

(declare-function efrit-todo-write "efrit-todo" (input &optional session))
(defvar efrit-todo-mode-line-mode)
(defvar efrit-do--current-todos)

(defun efrit-todo-setup-probe--mode-line ()
  "Return the selected window's mode line, as drawn, as plain text.
Its properties hold closures, which another Emacs version may not read."
  (redisplay t)
  (substring-no-properties (format-mode-line mode-line-format nil (selected-window))))

(defun efrit-todo-setup-probe--try (function)
  "Return the value of FUNCTION, or (error MESSAGE) if it signals."
  (condition-case err
      (funcall function)
    (error (list 'error (error-message-string err)))))

(defun efrit-todo-setup-probe--run ()
  "Probe this Emacs and return the plist of findings."
  (let* ((mode (intern (or (getenv "EFRIT_TODO_SETUP_MODE") "efrit-todo-efrit-mode")))
         (mx (getenv "EFRIT_TODO_SETUP_MX"))
         (mx-result (and mx (efrit-todo-setup-probe--try
                             (lambda ()
                               ;; What M-x does with the name it read.
                               (command-execute (or (intern-soft mx) (error "No command %s" mx))
                                                'record)
                               t))))
         (mode-on (and (boundp mode) (symbol-value mode)))
         (write (efrit-todo-setup-probe--try
                 (lambda ()
                   (efrit-todo-write "{\"todos\": [{\"content\": \"Probe the set-up\", \"status\": \"in_progress\"}, {\"content\": \"Report\", \"status\": \"pending\"}]}"))))
         ;; Efrit's own code reads the list through its variable.
         (efrit-view (efrit-todo-setup-probe--try
                      (lambda ()
                        (when (require 'efrit-do nil t)
                          (mapcar (lambda (item) (aref item 0)) efrit-do--current-todos)))))
         (mode-line (efrit-todo-setup-probe--mode-line))
         (indicator (bound-and-true-p efrit-todo-mode-line-mode))
         (off (efrit-todo-setup-probe--try (lambda () (funcall mode -1) t))))
    (list :mode-on mode-on
          :mx mx-result
          :compat-file (symbol-file 'efrit-todo-add 'defun)
          :core-file (symbol-file 'efrit-todo-write 'defun)
          :library (locate-library "efrit-todo")
          :write write
          :efrit-view efrit-view
          :indicator indicator
          :mode-line mode-line
          :off off
          :indicator-after-off (bound-and-true-p efrit-todo-mode-line-mode)
          :mode-line-after-off (efrit-todo-setup-probe--mode-line))))

(let ((findings (efrit-todo-setup-probe--try #'efrit-todo-setup-probe--run)))
  (with-temp-file (getenv "EFRIT_TODO_SETUP_OUT")
    (let ((print-length nil) (print-level nil))
      (prin1 (cons :findings findings) (current-buffer))))
  (kill-emacs 0))

;;; efrit-todo-setup-probe.el ends here
