;;; efrit-todo-fake-gptel-agent.el --- A small stand-in for gptel-agent's sub-agents -*- lexical-binding: t; -*-

;;; Commentary:

;; CI cannot fetch gptel-agent (github karthink/gptel-agent), so the
;; agent-team scenarios run against this stand-in unless
;; GPTEL_AGENT_DIR names a checkout.  It does what gptel-agent's README
;; and the docstrings of its tools say, in the shape its snapshot
;; 2e6ba04 gives them:
;;
;; - the tool TodoWrite (todos: content, status, activeForm), which
;;   keeps a list of its own and answers t;
;; - the async tool Agent (subagent_type, description, prompt), whose
;;   function `gptel-agent--task' applies the agent type's preset from
;;   `gptel-agent--agents' and calls `gptel-request' in the chat buffer
;;   with the prompt, a state machine of its own with the handlers of
;;   `efrit-todo-fake-gptel-agent-shape' and no prompt transforms; its
;;   callback gives the sub-agent's last text to the Agent call, or an
;;   error text when the request failed or was aborted.
;;
;; The shapes of the sub-agent's state machine: `snapshot', the
;; handlers of 2e6ba04 (WAIT and TOOL); `tret', those plus a TRET
;; handler, the least that runs on gptel 0.9.9.5; `send', what later
;; gptel-agent gives it: `gptel-send''s transitions and TPRE, TOOL and
;; TRET handlers, with the tool hooks.

;;; Code:

(require 'cl-lib)
;; The gptel loaded, else the stand-in (as when this file is compiled).
(eval-and-compile
  (unless (featurep 'gptel)
    (require 'efrit-todo-fake-gptel)))

(defvar gptel-send--transitions)
(defvar gptel-send--handlers)

(defvar gptel-agent--agents nil
  "Agent types: an alist of names to preset keys (:system, :tools ...).")

(defvar efrit-todo-fake-gptel-agent-shape 'snapshot
  "The handlers of the sub-agent's state machine: `snapshot', `tret' or `send'.")

(defvar-local efrit-todo-fake-gptel-agent--todos nil
  "The todo list of gptel-agent in this buffer.")

(defun gptel-agent--write-todo (todos)
  "Keep TODOS as this buffer's list; answer t, as gptel-agent's own does."
  (setq efrit-todo-fake-gptel-agent--todos todos)
  t)

(defun efrit-todo-fake-gptel-agent--fsm ()
  "Return a state machine for a sub-agent, of `efrit-todo-fake-gptel-agent-shape'."
  (pcase efrit-todo-fake-gptel-agent-shape
    ('snapshot (gptel-make-fsm :handlers '((WAIT gptel--handle-wait)
                                           (TOOL gptel--handle-tool-use))))
    ('tret (gptel-make-fsm :handlers '((WAIT gptel--handle-wait)
                                       (TOOL gptel--handle-tool-use)
                                       (TRET gptel--handle-tool-result))))
    ('send (gptel-make-fsm :table gptel-send--transitions :handlers gptel-send--handlers))))

(defun gptel-agent--task (main-cb agent-type description prompt)
  "Run agent AGENT-TYPE on PROMPT; give its result to MAIN-CB.
DESCRIPTION names the task in errors."
  (gptel-with-preset (append (list :use-tools t) (cdr (assoc agent-type gptel-agent--agents)))
    (let ((partial ""))
      (gptel-request prompt
        :fsm (efrit-todo-fake-gptel-agent--fsm)
        :callback
        (lambda (response info)
          (pcase response
            ('nil (funcall main-cb (format "Error: Task %s could not finish task \"%s\". \nError details: %S"
                                           agent-type description (plist-get info :error))))
            ((pred stringp)
             (setq partial (concat partial response))
             (unless (plist-get info :tool-use)
               (funcall main-cb partial)))
            ('abort (funcall main-cb (format "Error: Task \"%s\" was aborted by the user. %s could not finish."
                                             description agent-type)))))))))

(gptel-make-tool
 :name "TodoWrite"
 :function #'gptel-agent--write-todo
 :description "Create and manage a structured task list for your current session."
 :args '((:name "todos" :type array
                :items (:type object
                              :properties (:content (:type string)
                                                    :status (:type string
                                                                   :enum ["pending" "in_progress" "completed"])
                                                    :activeForm (:type string)))))
 :category "gptel-agent")

(gptel-make-tool
 :name "Agent"
 :function #'gptel-agent--task
 :description "Launch a specialized agent to handle complex, multi-step tasks autonomously."
 :args '((:name "subagent_type" :type string :description "The type of agent.")
         (:name "description" :type string :description "A short description of the task.")
         (:name "prompt" :type string :description "The task for the agent."))
 :category "gptel-agent"
 :async t
 :include t)

(provide 'gptel-agent-tools)
(provide 'gptel-agent)
(provide 'efrit-todo-fake-gptel-agent)
;;; efrit-todo-fake-gptel-agent.el ends here
