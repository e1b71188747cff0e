;;; efrit-todo-fake-gptel.el --- A small stand-in for gptel's chat requests -*- lexical-binding: t; -*-

;;; Commentary:

;; CI cannot install gptel, so the gptel scenarios run against this
;; stand-in unless GPTEL_DIR names a gptel checkout.  It is written from
;; gptel's documented API (the docstrings of `gptel-make-tool',
;; `gptel-request', `gptel-make-preset', `gptel-abort' and of the hook
;; variables), not from its code, and provides the feature `gptel':
;;
;; - tools made by `gptel-make-tool' (:name :function :description
;;   :args :async :confirm :include :category), found by `gptel-get-tool',
;;   offered when `gptel-use-tools' and listed in `gptel-tools';
;; - `gptel-send' in a chat buffer: the text after the last response is
;;   the user's message, the conversation so far goes with it, in the
;;   shape of OpenAI's chat completions; the response is read in the same
;;   shape, its text inserted at the end of the buffer;
;; - `gptel-prompt-transform-functions', called in a prompt buffer with
;;   copies of the buffer's gptel variables, with no argument, the
;;   request's state (`gptel-fsm', whose INFO has :buffer) or a callback
;;   and the state, as their arity says;
;; - `gptel-pre-tool-call-functions' for every call of a response before
;;   any tool runs, `gptel-post-tool-call-functions' for every call after
;;   all have run, each with the documented plist (:name :args :result
;;   :buffer :backend :model) and answers (:stop :stop-reason :block
;;   :result); a stopped request still keeps the results it has;
;; - `gptel-post-request-hook' after each request is sent,
;;   `gptel-pre-response-hook' when a response arrives, and
;;   `gptel-post-response-functions' (START END) when the request ends:
;;   with a response, an error or an abort;
;; - `gptel-abort', and presets: `gptel-make-preset', `gptel-get-preset',
;;   `gptel-with-preset', `gptel-preset' (what the menu runs when a preset
;;   is picked), and @NAME in a prompt, which applies preset
;;   NAME to that request only, in its prompt buffer, before its
;;   transforms run (several, in the order named; keys :pre, then
;;   :parents, then :tools and any gptel-KEY, values as is or as
;;   (:append LIST) or (:function FUNCTION), then :post).  A request
;;   names `gptel-model' as it is in its prompt buffer.
;;
;; The registries keep gptel's internal names and shapes,
;; `gptel--known-tools' (category, then name, to tool) and
;; `gptel--known-presets' (name to keys), which efrit-todo-gptel.el
;; edits only when it is unloaded, as gptel offers no way to remove a
;; tool or a preset.
;;
;; Tool confirmation is not modelled: tools run without asking.  The
;; network is `efrit-todo-gptel-harness-transport', a function from the
;; request's JSON to the response's JSON (or `error', or `hang' for a
;; request that never answers), called from a timer.
;;
;; It stands for the newest gptel unless EFRIT_TODO_FAKE_GPTEL names an
;; older one: "0.9.9.4" is gptel 0.9.9.4 as gptel-agent's last public
;; snapshot knew it (v0.9.9.4-21): the system message is
;; `gptel--system-message' (the newest calls it `gptel-system-prompt'),
;; and there is `gptel-pre-tool-call-functions' but no
;; `gptel-post-tool-call-functions' yet.

;;; Code:

(require 'cl-lib)
(require 'seq)
(require 'subr-x)
(require 'json)

(defconst efrit-todo-gptel-harness-kind "the fake gptel of test/efrit-todo-fake-gptel.el"
  "What the gptel scenarios run against.")

(defvar efrit-todo-gptel-harness-transport nil
  "Function from a request's JSON to the response's JSON, `error' or `hang'.")

;;;; Options and hooks, as gptel names them

(defconst efrit-todo-fake-gptel--old (equal (getenv "EFRIT_TODO_FAKE_GPTEL") "0.9.9.4")
  "Non-nil to stand for gptel 0.9.9.4, before its post-tool hook.")

(defvar gptel-version (if efrit-todo-fake-gptel--old "0.9.9.4" "0.9.9.5")
  "The version of gptel the stand-in stands for.")

(defconst efrit-todo-fake-gptel--system-variable
  (if efrit-todo-fake-gptel--old 'gptel--system-message 'gptel-system-prompt)
  "The variable that holds the system message in the gptel stood for.")

(defvar gptel-tools nil
  "The tools offered with a request, `gptel-tool' structures.")

(defvar gptel-use-tools t
  "Non-nil to offer `gptel-tools' with requests.")

(defvar efrit-todo-fake-gptel--default-system "You are a helpful assistant living in Emacs."
  "The system message until one is set.")

(if efrit-todo-fake-gptel--old
    (defvar gptel--system-message efrit-todo-fake-gptel--default-system
      "The system message.")
  (defvar gptel-system-prompt efrit-todo-fake-gptel--default-system
    "The system message."))

(defvar gptel-backend nil
  "The backend: the stand-in has one, the scripted model, so nil.")

(defvar gptel-model 'fake
  "The model a request names.")

(defvar gptel-prompt-transform-functions nil
  "Functions that change a request in its prompt buffer.")

(defvar gptel-pre-tool-call-functions nil
  "Abnormal hook called with a plist before each tool call.")

(unless efrit-todo-fake-gptel--old
  (defvar gptel-post-tool-call-functions nil
    "Abnormal hook called with a plist after each tool call."))

(defvar gptel-post-request-hook nil
  "Hook run after sending a request.")

(defvar gptel-pre-response-hook nil
  "Hook run before inserting a response.")

(defvar gptel-post-response-functions nil
  "Abnormal hook run with START and END when a request ends.")

;;;; Tools

(cl-defstruct (gptel-tool (:constructor nil)
                          (:constructor efrit-todo-fake-gptel--make-tool
                                        (&key function name description args async
                                              category confirm (include t)
                                              &allow-other-keys))
                          (:copier nil))
  "A tool for the model."
  function name description args async category confirm include)

(defvar gptel--known-tools nil
  "Registered tools: an alist of categories, each an alist of names to tools.")

(defun gptel-make-tool (&rest slots)
  "Make a tool from SLOTS and register it under its category."
  (let* ((tool (apply #'efrit-todo-fake-gptel--make-tool slots))
         (category (or (gptel-tool-category tool) "misc")))
    (setf (alist-get (gptel-tool-name tool)
                     (alist-get category gptel--known-tools nil nil #'equal)
                     nil nil #'equal)
          tool)
    tool))

(defun gptel-get-tool (path)
  "Return the tool named PATH, (CATEGORY NAME) or a tool itself."
  (or (cond ((gptel-tool-p path) path)
            ((stringp path)
             (seq-some (lambda (category) (cdr (assoc path (cdr category))))
                       gptel--known-tools))
            ((consp path)
             (cdr (assoc (cadr path) (cdr (assoc (car path) gptel--known-tools))))))
      (error "No tool matches for %S" path)))

(defun efrit-todo-fake-gptel--tool-schema (tool)
  "Return TOOL as OpenAI's function definition: an alist for `json-encode'."
  (let ((args (gptel-tool-args tool)))
    `((type . "function")
      (function
       (name . ,(gptel-tool-name tool))
       (description . ,(gptel-tool-description tool))
       (parameters
        (type . "object")
        (properties
         . ,(mapcar (lambda (arg)
                      (cons (intern (plist-get arg :name))
                            (efrit-todo-fake-gptel--json-spec
                             (cl-loop for (key value) on arg by #'cddr
                                      unless (memq key '(:name :optional))
                                      append (list key value)))))
                    args))
        (required . ,(vconcat (delq nil (mapcar (lambda (arg)
                                                  (and (not (plist-get arg :optional))
                                                       (plist-get arg :name)))
                                                args)))))))))

(defun efrit-todo-fake-gptel--json-spec (spec)
  "Return SPEC, a plist, as an alist for `json-encode'; symbol types as strings."
  (cond ((and (consp spec) (keywordp (car spec)))
         (cl-loop for (key value) on spec by #'cddr
                  collect (cons (intern (substring (symbol-name key) 1))
                                (if (and (eq key :type) (symbolp value))
                                    (symbol-name value)
                                  (efrit-todo-fake-gptel--json-spec value)))))
        (t spec)))

;;;; Presets

(defvar gptel--known-presets nil
  "Defined presets: an alist of names to their keys.")

(defvar gptel--preset nil
  "The preset applied last.")

(defun gptel-make-preset (name &rest keys)
  "Define preset NAME with KEYS."
  (declare (indent 1))
  (setf (alist-get name gptel--known-presets) keys)
  name)

(defun gptel-get-preset (name)
  "Return the keys of preset NAME."
  (alist-get name gptel--known-presets))

(defun efrit-todo-fake-gptel--variable (key)
  "Return the variable set by preset KEY."
  (if (eq key :system)
      efrit-todo-fake-gptel--system-variable
    (intern (concat "gptel-" (substring (symbol-name key) 1)))))

(defun efrit-todo-fake-gptel--modify (value spec)
  "Return VALUE changed by SPEC: (:append LIST), (:function F) or a value."
  (pcase spec
    (`(:append ,more) (if (stringp more) (concat value more) (append value more)))
    (`(:function ,function) (funcall function value))
    (_ spec)))

(defun efrit-todo-fake-gptel--apply-preset (keys &optional setter)
  "Set the options of preset KEYS with SETTER (default `set').
Its :pre runs first, then its :parents are applied, in order."
  (when-let* ((pre (plist-get keys :pre))) (funcall pre))
  (dolist (parent (ensure-list (plist-get keys :parents)))
    (efrit-todo-fake-gptel--apply-preset (gptel-get-preset parent) setter))
  (cl-loop for (key value) on keys by #'cddr
           unless (memq key '(:description :pre :post :parents))
           do (let* ((variable (efrit-todo-fake-gptel--variable key))
                     (new (efrit-todo-fake-gptel--modify (symbol-value variable) value)))
                (funcall (or setter #'set) variable
                         (if (eq key :tools)
                             (cl-remove-duplicates (mapcar #'gptel-get-tool new)
                                                   :test #'eq :from-end t)
                           new))))
  (when-let* ((post (plist-get keys :post))) (funcall post)))

(defun efrit-todo-fake-gptel--preset-variables (keys)
  "Return the variables set by preset KEYS and by its parents."
  (append (mapcan (lambda (parent)
                    (efrit-todo-fake-gptel--preset-variables (gptel-get-preset parent)))
                  (ensure-list (plist-get keys :parents)))
          (cl-loop for (key _) on keys by #'cddr
                   unless (memq key '(:description :pre :post :parents))
                   collect (efrit-todo-fake-gptel--variable key))))

(defun efrit-todo-fake-gptel--with-preset (name body)
  "Call BODY with preset NAME applied, the options bound around it."
  (let* ((keys (if (symbolp name) (gptel-get-preset name) name))
         (variables (cons 'gptel--preset
                          (delete-dups (efrit-todo-fake-gptel--preset-variables keys)))))
    (cl-progv variables (mapcar #'symbol-value variables)
      (when (symbolp name) (setq gptel--preset name))
      (efrit-todo-fake-gptel--apply-preset keys)
      (funcall body))))

(defun gptel-preset (preset &optional setter)
  "Load gptel PRESET with SETTER, as the menu does (default: globally)."
  (unless (gptel-get-preset preset)
    (user-error "No gptel preset %s" preset))
  (funcall (or setter #'set) 'gptel--preset preset)
  (efrit-todo-fake-gptel--apply-preset (gptel-get-preset preset) setter))

(defmacro gptel-with-preset (name &rest body)
  "Run BODY with gptel preset NAME applied."
  (declare (indent 1))
  `(efrit-todo-fake-gptel--with-preset ,name (lambda () ,@body)))

;;;; Requests

(defvar gptel-request--handlers)

(defvar gptel-request--transitions
  (if efrit-todo-fake-gptel--old
      '((TOOL (t . WAIT)))
    '((TOOL (t . TRET)) (TRET (t . WAIT))))
  "The transitions of a `gptel-request' after TOOL.
See `efrit-todo-fake-gptel--next' for the others.")

(cl-defstruct (gptel-fsm (:constructor gptel-make-fsm) (:copier nil))
  "The state of a request: TABLE and HANDLERS are used by `gptel-request'."
  (state 'INIT) (table gptel-request--transitions) (handlers gptel-request--handlers) info)

(defvar-local efrit-todo-fake-gptel--messages nil
  "The conversation of this chat buffer so far, OpenAI's messages, in order.")

(defvar-local efrit-todo-fake-gptel--seen nil
  "Marker at the end of the last response: the user writes after it.")

(defvar efrit-todo-fake-gptel--running nil
  "Requests in flight: (BUFFER . FSM).")

(defun efrit-todo-fake-gptel--hook-functions (hook)
  "Return the functions of HOOK in the current buffer, t expanded."
  (let ((value (and (boundp hook) (symbol-value hook))))
    (when (functionp value) (setq value (list value)))
    (apply #'append (mapcar (lambda (function)
                              (if (eq function t)
                                  (let ((global (default-value hook)))
                                    (if (functionp global) (list global) global))
                                (list function)))
                            value))))

(defun efrit-todo-fake-gptel--presets-in (text)
  "Return (PRESETS . TEXT-WITHOUT-THEM) for the known presets TEXT names.
TEXT names a preset as @NAME; PRESETS are in the order it names them."
  (let ((start 0) presets)
    (while (string-match "\\(?:^\\|[[:space:]]\\)@\\([^[:space:]]+\\)" text start)
      (let ((name (intern-soft (match-string 1 text))))
        (if (and name (gptel-get-preset name))
            (setq presets (cons name presets)
                  start (1- (match-beginning 1))
                  text (concat (substring text 0 start) (substring text (match-end 1))))
          (setq start (match-end 0)))))
    (cons (nreverse presets) (string-trim text))))

(defun efrit-todo-fake-gptel--transform (fsm text)
  "Run the prompt transforms for FSM's user TEXT in a prompt buffer.
The presets named in TEXT as @NAME are applied there first, in order,
buffer-locally, and taken out of TEXT.  Return (SYSTEM TOOLS MODEL TEXT)."
  (let ((buffer (plist-get (gptel-fsm-info fsm) :buffer))
        (prompt (generate-new-buffer " *gptel-prompt*"))
        (presets (efrit-todo-fake-gptel--presets-in text)))
    (unwind-protect
        (with-current-buffer prompt
          (dolist (variable (list efrit-todo-fake-gptel--system-variable
                                  'gptel-tools 'gptel-use-tools 'gptel-backend 'gptel-model
                                  'gptel-prompt-transform-functions))
            (set (make-local-variable variable) (buffer-local-value variable buffer)))
          (setq text (cdr presets))
          (dolist (preset (car presets))
            (efrit-todo-fake-gptel--apply-preset
             (gptel-get-preset preset)
             (lambda (symbol value) (set (make-local-variable symbol) value))))
          (insert text)
          (dolist (function (efrit-todo-fake-gptel--hook-functions
                             'gptel-prompt-transform-functions))
            (goto-char (point-max))
            (pcase (car (func-arity function))
              (0 (funcall function))
              (1 (funcall function fsm))
              (_ (funcall function #'ignore fsm))))
          (list (symbol-value efrit-todo-fake-gptel--system-variable)
                (and gptel-use-tools gptel-tools) gptel-model text))
      (kill-buffer prompt))))

(defun gptel-send (&optional _arg)
  "Send the text after the last response, with the conversation, to the model."
  (interactive "P")
  (let* ((buffer (current-buffer))
         (start (or efrit-todo-fake-gptel--seen (point-min)))
         (text (string-trim (buffer-substring-no-properties start (max start (point)))))
         (fsm (gptel-make-fsm :info (list :buffer buffer :position (point-max-marker)))))
    (pcase-let ((`(,system ,tools ,model ,text) (efrit-todo-fake-gptel--transform fsm text)))
      (plist-put (gptel-fsm-info fsm) :system system)
      (plist-put (gptel-fsm-info fsm) :tools tools)
      (plist-put (gptel-fsm-info fsm) :model model)
      (unless (string-empty-p text)
        (setq efrit-todo-fake-gptel--messages
              (append efrit-todo-fake-gptel--messages
                      (list `((role . "user") (content . ,text)))))))
    (setq efrit-todo-fake-gptel--seen (point-max-marker))
    (push (cons buffer fsm) efrit-todo-fake-gptel--running)
    (efrit-todo-fake-gptel--request fsm)
    fsm))

(defun efrit-todo-fake-gptel--request-json (fsm)
  "Return the JSON of FSM's next request."
  (let* ((info (gptel-fsm-info fsm))
         (system (plist-get info :system))
         (system (if (consp system) (car system) system))
         (messages (with-current-buffer (plist-get info :buffer)
                     efrit-todo-fake-gptel--messages)))
    (json-encode
     `((model . ,(format "%s" (plist-get info :model)))
       (messages . ,(vconcat (and system (list `((role . "system") (content . ,system))))
                             messages))
       ,@(and (plist-get info :tools)
              `((tools . ,(vconcat (mapcar #'efrit-todo-fake-gptel--tool-schema
                                           (plist-get info :tools))))))))))

(defun efrit-todo-fake-gptel--request (fsm)
  "Send FSM's next request; its answer comes from a timer."
  (let ((info (gptel-fsm-info fsm)))
    (setf (gptel-fsm-state fsm) 'WAIT)
    (let ((json (efrit-todo-fake-gptel--request-json fsm)))
      (with-current-buffer (plist-get info :buffer)
        (run-hooks 'gptel-post-request-hook))
      (run-at-time 0 nil
                   (lambda ()
                     (unless (eq (gptel-fsm-state fsm) 'ABRT)
                       (let ((response (condition-case err
                                           (funcall efrit-todo-gptel-harness-transport json)
                                         (error (message "Fake gptel: %S" err) 'error))))
                         (unless (eq response 'hang)
                           (efrit-todo-fake-gptel--handle fsm response)))))))))

(defun efrit-todo-fake-gptel--finish (fsm &optional error)
  "End FSM's request, with ERROR if it failed; run the post-response hook."
  (let* ((info (gptel-fsm-info fsm))
         (buffer (plist-get info :buffer)))
    (setf (gptel-fsm-state fsm) (if error 'ERRS 'DONE))
    (setq efrit-todo-fake-gptel--running (rassq-delete-all fsm efrit-todo-fake-gptel--running))
    (when error
      (plist-put info :error error)
      (message "Fake gptel error: %s" error))
    (when (buffer-live-p buffer)
      (with-current-buffer buffer
        (let ((start (marker-position (plist-get info :position))))
          (run-hook-with-args 'gptel-post-response-functions
                              start (if error start (point-max))))))))

(defun efrit-todo-fake-gptel--insert (buffer text &optional property)
  "Insert TEXT at the end of BUFFER, marked with gptel's PROPERTY."
  (with-current-buffer buffer
    (save-excursion
      (goto-char (point-max))
      (insert (propertize text 'gptel (or property 'response)))
      (setq efrit-todo-fake-gptel--seen (point-max-marker)))))

(defun efrit-todo-fake-gptel--add-message (buffer message)
  "Add MESSAGE to the conversation of BUFFER."
  (with-current-buffer buffer
    (setq efrit-todo-fake-gptel--messages
          (append efrit-todo-fake-gptel--messages (list message)))))

(defun efrit-todo-fake-gptel--handle (fsm response)
  "Handle RESPONSE, JSON or `error', to FSM's request."
  (let* ((info (gptel-fsm-info fsm))
         (buffer (plist-get info :buffer)))
    (if (or (not (stringp response)) (not (buffer-live-p buffer)))
        (efrit-todo-fake-gptel--finish fsm "the request failed")
      (setf (gptel-fsm-state fsm) 'TYPE)
      (with-current-buffer buffer
        (run-hooks 'gptel-pre-response-hook))
      (let* ((parsed (json-parse-string response :object-type 'plist :array-type 'array
                                        :null-object nil :false-object :json-false))
             (message (plist-get (aref (plist-get parsed :choices) 0) :message))
             (content (plist-get message :content))
             (tool-calls (plist-get message :tool_calls)))
        (when (and (stringp content) (not (string-empty-p content)))
          (efrit-todo-fake-gptel--insert buffer content))
        (efrit-todo-fake-gptel--add-message
         buffer `((role . "assistant") (content . ,content)
                  ,@(and tool-calls
                         `((tool_calls
                            . ,(vconcat
                                (mapcar (lambda (call)
                                          `((id . ,(plist-get call :id)) (type . "function")
                                            (function
                                             (name . ,(plist-get (plist-get call :function) :name))
                                             (arguments . ,(plist-get (plist-get call :function)
                                                                      :arguments)))))
                                        tool-calls)))))))
        (if (= (length tool-calls) 0)
            (efrit-todo-fake-gptel--finish fsm)
          (efrit-todo-fake-gptel--run-tools
           fsm (mapcar (lambda (call)
                         (let ((function (plist-get call :function)))
                           (list :id (plist-get call :id)
                                 :name (plist-get function :name)
                                 :args (json-parse-string (plist-get function :arguments)
                                                          :object-type 'plist
                                                          :array-type 'array
                                                          :null-object nil
                                                          :false-object :json-false))))
                       tool-calls)))))))

(defun efrit-todo-fake-gptel--blocked (name block)
  "Return the result of the call of NAME that a hook blocked with BLOCK."
  (concat "<tool_call_error>\n"
          (if (stringp block) block (format "Tool %s blocked by user" name))
          "\n</tool_call_error>"))

(defun efrit-todo-fake-gptel--run-hook (hook fsm calls &optional with-result)
  "Run HOOK for each tool call in the list of FSM, applying the answers.
The list is CALLS.
WITH-RESULT non-nil passes each call's :result, as after the call.
Return non-nil if a function asked to stop the request."
  (let* ((info (gptel-fsm-info fsm))
         (buffer (plist-get info :buffer))
         (stop nil))
    (with-current-buffer buffer
      (dolist (function (efrit-todo-fake-gptel--hook-functions hook))
        (dolist (call calls)
          (unless (and (not with-result) (plist-get call :result))
            (let ((answer (with-demoted-errors "Fake gptel hook error: %S"
                            (funcall function
                                     (append (list :name (plist-get call :name)
                                                   :args (plist-get call :args))
                                             (and with-result
                                                  (list :result (plist-get call :result)))
                                             (list :buffer (buffer-name buffer)
                                                   :backend "fake" :model 'fake))))))
              (cond ((plist-get answer :stop)
                     (setq stop t)
                     (plist-put info :error (or (plist-get answer :stop-reason)
                                                (format "Request stopped by %s" function))))
                    ((plist-get answer :block)
                     (plist-put call :result (efrit-todo-fake-gptel--blocked
                                              (plist-get call :name)
                                              (plist-get answer :block))))
                    ((plist-get answer :result)
                     (plist-put call :result (plist-get answer :result))))))))
      stop)))

(defun efrit-todo-fake-gptel--run-tools (fsm calls)
  "Run the tools that FSM's response asked for between the hooks.
CALLS is the list of them."
  (let* ((info (gptel-fsm-info fsm))
         (buffer (plist-get info :buffer))
         (pending 0)
         (all-started nil)
         (finish (lambda ()
                   (when (and all-started (zerop pending)
                              (not (eq (gptel-fsm-state fsm) 'ABRT)))
                     (efrit-todo-fake-gptel--tools-done fsm calls)))))
    (setf (gptel-fsm-state fsm) 'TPRE)
    ;; gptel 0.9.9.5 goes from TPRE to ERRS on any error; 0.9.9.4 only
    ;; when a pre-tool hook stops the request.
    (if (or (efrit-todo-fake-gptel--run-hook 'gptel-pre-tool-call-functions fsm calls)
            (and (not efrit-todo-fake-gptel--old) (plist-get info :error)))
        (efrit-todo-fake-gptel--finish fsm (plist-get info :error))
      (setf (gptel-fsm-state fsm) 'TOOL)
      (dolist (call calls)
        (unless (plist-get call :result)
          (let* ((name (plist-get call :name))
                 (tool (seq-find (lambda (tool) (equal (gptel-tool-name tool) name))
                                 (plist-get info :tools)))
                 (values (and tool (mapcar (lambda (arg)
                                             (plist-get (plist-get call :args)
                                                        (intern (concat ":" (plist-get arg :name)))))
                                           (gptel-tool-args tool))))
                 (done (lambda (result)
                         (plist-put call :result (efrit-todo-fake-gptel--to-string result))
                         (cl-decf pending)
                         (funcall finish))))
            (cl-incf pending)
            (cond ((null tool)
                   (funcall done (format "Error: Tool '%s' is not available." name)))
                  ((gptel-tool-async tool)
                   (with-current-buffer buffer
                     (apply (gptel-tool-function tool) done values)))
                  (t
                   (funcall done (with-current-buffer buffer
                                   (condition-case err
                                       (apply (gptel-tool-function tool) values)
                                     (error (mapconcat #'efrit-todo-fake-gptel--to-string
                                                       err " "))))))))))
      (setq all-started t)
      (funcall finish))))

(defun efrit-todo-fake-gptel--to-string (value)
  "Return VALUE as a tool result string, the way gptel does."
  (cond ((stringp value) value)
        ((symbolp value) (symbol-name value))
        (t (prin1-to-string value))))

(defun efrit-todo-fake-gptel--tools-done (fsm calls)
  "Run the post-tool hook on the finished tools of FSM; go on or stop.
CALLS is the list of them."
  (let* ((info (gptel-fsm-info fsm))
         (buffer (plist-get info :buffer)))
    (setf (gptel-fsm-state fsm) 'TRET)
    (efrit-todo-fake-gptel--run-hook 'gptel-post-tool-call-functions fsm calls t)
    (dolist (call calls)
      (let ((tool (seq-find (lambda (tool) (equal (gptel-tool-name tool) (plist-get call :name)))
                            (plist-get info :tools))))
        (efrit-todo-fake-gptel--add-message
         buffer `((role . "tool") (tool_call_id . ,(plist-get call :id))
                  (content . ,(plist-get call :result))))
        (when (or (null tool) (gptel-tool-include tool))
          (efrit-todo-fake-gptel--insert
           buffer (format "\n(%s %S)\n%s\n" (plist-get call :name) (plist-get call :args)
                          (plist-get call :result))
           (cons 'tool (plist-get call :id))))))
    (if (plist-get info :error)
        (efrit-todo-fake-gptel--finish fsm (plist-get info :error))
      (efrit-todo-fake-gptel--request fsm))))

(defun gptel-abort (buf)
  "Stop the requests in flight from buffer BUF."
  (interactive (list (current-buffer)))
  (efrit-todo-fake-gptel--abort-requests buf)
  (when-let* ((fsm (cdr (assq buf efrit-todo-fake-gptel--running))))
    (setq efrit-todo-fake-gptel--running (rassq-delete-all fsm efrit-todo-fake-gptel--running))
    (setf (gptel-fsm-state fsm) 'ABRT)
    (with-current-buffer buf
      (let ((start (marker-position (plist-get (gptel-fsm-info fsm) :position))))
        (run-hook-with-args 'gptel-post-response-functions start start)))
    (message "Stopped gptel request in buffer %S" (buffer-name buf))))

;;;; `gptel-request': a request driven by its state machine's handlers

;; As gptel documents `gptel-request' and `gptel-fsm': a request made
;; from Lisp with its own state machine, whose handlers (an alist of
;; states to functions of the machine) do the work of each state and
;; move it on.  The handlers here carry gptel's names, so that a
;; handler list written for gptel (gptel-agent's) works the same.
;; Standing for 0.9.9.4, the TOOL state injects the results and moves
;; on itself; standing for the newest gptel, TOOL goes to TRET, whose
;; handler does that.  The tool hooks run only in the handlers that run
;; them (`gptel--handle-pre-tool', `gptel--handle-post-tool'), and the
;; response hooks only in `gptel-send''s handlers, as in gptel.

(defvar efrit-todo-fake-gptel--in-flight nil
  "Requests of `gptel-request' waiting for their response: (BUFFER . FSM).")

(defvar gptel-send--transitions '((TYPE (t . TPRE)) (TPRE (t . TOOL)))
  "The transitions of `gptel-send': tool calls go through TPRE first.")

(defvar gptel-request--handlers
  (append '((WAIT gptel--handle-wait) (TOOL gptel--handle-tool-use))
          (unless efrit-todo-fake-gptel--old '((TRET gptel--handle-tool-result)))
          '((DONE gptel--handle-post) (ERRS gptel--handle-post) (ABRT gptel--handle-post)))
  "The handlers of a `gptel-request' state machine by default.")

(defvar gptel-send--handlers
  '((WAIT gptel--handle-wait) (TYPE gptel--handle-pre-insert)
    (ERRS gptel--handle-error) (TPRE gptel--handle-pre-tool gptel--fsm-transition)
    (TOOL gptel--handle-tool-use) (TRET gptel--handle-post-tool gptel--handle-tool-result)
    (DONE gptel--handle-post-insert) (ABRT gptel--handle-abort))
  "The handlers of `gptel-send' in the newest gptel.")

(defun efrit-todo-fake-gptel--next (fsm)
  "Return the state after FSM's state, as gptel's tables have it."
  (let ((info (gptel-fsm-info fsm)))
    (pcase (gptel-fsm-state fsm)
      ('INIT 'WAIT)
      ('WAIT 'TYPE)
      ('TYPE (cond ((plist-get info :error) 'ERRS)
                   ((plist-get info :tool-use)
                    (if (assq 'TPRE (gptel-fsm-table fsm)) 'TPRE 'TOOL))
                   (t 'DONE)))
      ('TPRE (if (plist-get info :error) 'ERRS 'TOOL))
      ((and 'TOOL (guard (not efrit-todo-fake-gptel--old))) 'TRET)
      ((or 'TOOL 'TRET) (cond ((plist-get info :error) 'ERRS)
                              ((plist-get info :tool-result) 'WAIT)
                              (t 'DONE))))))

(defun gptel--fsm-transition (fsm &optional new-state)
  "Move FSM to NEW-STATE, or the next one; run that state's handlers."
  (setf (gptel-fsm-state fsm) (or new-state (efrit-todo-fake-gptel--next fsm)))
  (dolist (handler (alist-get (gptel-fsm-state fsm) (gptel-fsm-handlers fsm)))
    (funcall handler fsm)))

(cl-defun gptel-request (&optional prompt &key callback (buffer (current-buffer)) context
                                   (fsm (gptel-make-fsm)) &allow-other-keys)
  "Send PROMPT, a string, with the current options, driven by FSM.
CALLBACK gets each response text, (tool-result . RESULTS) after tool
calls, nil on an error and `abort' when aborted, with the request's
INFO; CONTEXT is kept in INFO; BUFFER is where tools run."
  (setf (gptel-fsm-info fsm)
        (list :buffer buffer :callback (or callback #'ignore) :context context
              :tools (and gptel-use-tools gptel-tools)
              :system (symbol-value efrit-todo-fake-gptel--system-variable)
              :model gptel-model
              :position (with-current-buffer buffer (point-max-marker))
              :messages (list `((role . "user") (content . ,prompt)))))
  (gptel--fsm-transition fsm 'WAIT)
  fsm)

(defun gptel--handle-wait (fsm)
  "Send FSM's request; its response comes from a timer."
  (let* ((info (gptel-fsm-info fsm))
         (buffer (plist-get info :buffer))
         (system (plist-get info :system))
         (json (json-encode
                `((model . ,(format "%s" (plist-get info :model)))
                  (messages . ,(vconcat (and system `(((role . "system") (content . ,system))))
                                        (plist-get info :messages)))
                  ,@(and (plist-get info :tools)
                         `((tools . ,(vconcat (mapcar #'efrit-todo-fake-gptel--tool-schema
                                                      (plist-get info :tools))))))))))
    (dolist (key '(:tool-use :tool-result :error))
      (plist-put info key nil))
    (push (cons buffer fsm) efrit-todo-fake-gptel--in-flight)
    (with-current-buffer buffer
      (run-hooks 'gptel-post-request-hook))
    (run-at-time 0 nil
                 (lambda ()
                   (when (rassq fsm efrit-todo-fake-gptel--in-flight)
                     (let ((response (condition-case err
                                         (funcall efrit-todo-gptel-harness-transport json)
                                       (error (message "Fake gptel: %S" err) 'error))))
                       (unless (eq response 'hang)
                         (setq efrit-todo-fake-gptel--in-flight
                               (rassq-delete-all fsm efrit-todo-fake-gptel--in-flight))
                         (efrit-todo-fake-gptel--request-response fsm response))))))))

(defun efrit-todo-fake-gptel--request-response (fsm response)
  "Handle RESPONSE, JSON or `error', to the request of FSM."
  (let* ((info (gptel-fsm-info fsm))
         (callback (plist-get info :callback)))
    (if (or (not (stringp response)) (not (buffer-live-p (plist-get info :buffer))))
        (progn (plist-put info :error "the request failed")
               (funcall callback nil info)
               (gptel--fsm-transition fsm 'ERRS))
      (let* ((parsed (json-parse-string response :object-type 'plist :array-type 'array
                                        :null-object nil :false-object :json-false))
             (message (plist-get (aref (plist-get parsed :choices) 0) :message))
             (content (plist-get message :content))
             (calls (mapcar (lambda (call)
                              (let ((function (plist-get call :function)))
                                (list :id (plist-get call :id)
                                      :name (plist-get function :name)
                                      :args (json-parse-string (plist-get function :arguments)
                                                               :object-type 'plist
                                                               :array-type 'array
                                                               :null-object nil
                                                               :false-object :json-false))))
                            (plist-get message :tool_calls))))
        (plist-put info :messages
                   (append (plist-get info :messages)
                           (list (append `((role . "assistant") (content . ,content))
                                         (and calls
                                              `((tool_calls
                                                 . ,(vconcat
                                                     (mapcar (lambda (call)
                                                               `((id . ,(plist-get call :id))
                                                                 (type . "function")
                                                                 (function
                                                                  (name . ,(plist-get call :name))
                                                                  (arguments
                                                                   . ,(json-encode
                                                                       (plist-get call :args))))))
                                                             calls)))))))))
        (plist-put info :tool-use calls)
        (gptel--fsm-transition fsm 'TYPE)
        (when (and (stringp content) (not (string-empty-p content)))
          (funcall callback content info))
        (gptel--fsm-transition fsm)))))

(defun gptel--handle-pre-insert (fsm)
  "Run `gptel-pre-response-hook' in FSM's buffer."
  (with-current-buffer (plist-get (gptel-fsm-info fsm) :buffer)
    (run-hooks 'gptel-pre-response-hook)))

(defun gptel--handle-pre-tool (fsm)
  "Run `gptel-pre-tool-call-functions' for the tools FSM is to run."
  (let ((info (gptel-fsm-info fsm)))
    (efrit-todo-fake-gptel--run-hook 'gptel-pre-tool-call-functions fsm
                                     (plist-get info :tool-use))))

(defun gptel--handle-post-tool (fsm)
  "Run `gptel-post-tool-call-functions' for the tools FSM ran."
  (let ((info (gptel-fsm-info fsm)))
    (efrit-todo-fake-gptel--run-hook 'gptel-post-tool-call-functions fsm
                                     (plist-get info :tool-use) t)))

(defun efrit-todo-fake-gptel--inject-results (fsm)
  "Add FSM's tool results to its messages; give them to its callback."
  (let ((info (gptel-fsm-info fsm)))
    (plist-put info :messages
               (append (plist-get info :messages)
                       (mapcar (lambda (call)
                                 `((role . "tool") (tool_call_id . ,(plist-get call :id))
                                   (content . ,(plist-get call :result))))
                               (plist-get info :tool-use))))
    (plist-put info :tool-result
               (mapcar (lambda (call) (list (plist-get call :name) (plist-get call :args)
                                            (plist-get call :result)))
                       (plist-get info :tool-use)))
    (funcall (plist-get info :callback) (cons 'tool-result (plist-get info :tool-result)) info)))

(defun gptel--handle-tool-use (fsm)
  "Run the tools FSM's response asked for; move on when all have answered."
  (let* ((info (gptel-fsm-info fsm))
         (buffer (plist-get info :buffer))
         (calls (plist-get info :tool-use))
         (pending (seq-count (lambda (call) (not (plist-get call :result))) calls))
         (all-done (lambda ()
                     (when (zerop pending)
                       (when efrit-todo-fake-gptel--old
                         (efrit-todo-fake-gptel--inject-results fsm))
                       (gptel--fsm-transition fsm)))))
    (if (zerop pending)
        (funcall all-done)
      (with-current-buffer buffer
        (dolist (call calls)
          (unless (plist-get call :result)
            (let* ((tool (seq-find (lambda (tool)
                                     (equal (gptel-tool-name tool) (plist-get call :name)))
                                   (plist-get info :tools)))
                   (values (and tool (mapcar (lambda (arg)
                                               (plist-get (plist-get call :args)
                                                          (intern (concat ":" (plist-get arg :name)))))
                                             (gptel-tool-args tool))))
                   (done (lambda (result)
                           (unless (eq (gptel-fsm-state fsm) 'ABRT)
                             (plist-put call :result (efrit-todo-fake-gptel--to-string result))
                             (cl-decf pending)
                             (funcall all-done)))))
              (cond ((null tool)
                     (funcall done (format "Error: Tool '%s' is not available." (plist-get call :name))))
                    ((gptel-tool-async tool)
                     (apply (gptel-tool-function tool) done values))
                    (t
                     (funcall done (condition-case err
                                       (apply (gptel-tool-function tool) values)
                                     (error (mapconcat #'efrit-todo-fake-gptel--to-string
                                                       err " ")))))))))))))

(defun gptel--handle-tool-result (fsm)
  "Give FSM's tool results to the model and its callback; move on."
  (efrit-todo-fake-gptel--inject-results fsm)
  (gptel--fsm-transition fsm))

(defun gptel--handle-post (fsm)
  "Run the :post functions of FSM's request."
  (mapc (lambda (function) (funcall function (gptel-fsm-info fsm)))
        (plist-get (gptel-fsm-info fsm) :post)))

(defun efrit-todo-fake-gptel--post-response (fsm)
  "Run `gptel-post-response-functions' in FSM's buffer, as `gptel-send''s end does."
  (let* ((info (gptel-fsm-info fsm))
         (buffer (plist-get info :buffer)))
    (when (buffer-live-p buffer)
      (with-current-buffer buffer
        (let ((start (marker-position (plist-get info :position))))
          (run-hook-with-args 'gptel-post-response-functions start start))))))

(defalias 'gptel--handle-error #'efrit-todo-fake-gptel--post-response)
(defalias 'gptel--handle-post-insert #'efrit-todo-fake-gptel--post-response)
(defalias 'gptel--handle-abort #'efrit-todo-fake-gptel--post-response)

(defun efrit-todo-fake-gptel--abort-requests (buffer)
  "Abort the requests of `gptel-request' in flight from BUFFER."
  (dolist (entry efrit-todo-fake-gptel--in-flight)
    (when (eq (car entry) buffer)
      (let ((fsm (cdr entry)))
        (setq efrit-todo-fake-gptel--in-flight (delq entry efrit-todo-fake-gptel--in-flight))
        (funcall (plist-get (gptel-fsm-info fsm) :callback) 'abort (gptel-fsm-info fsm))
        (gptel--fsm-transition fsm 'ABRT)))))

;;;; The harness

(defun efrit-todo-gptel-harness-chat-buffer (name)
  "Return a fresh chat buffer called NAME."
  (when (get-buffer name)
    (let ((kill-buffer-query-functions nil))
      (kill-buffer name)))
  (with-current-buffer (get-buffer-create name)
    (text-mode)
    (current-buffer)))

(defun efrit-todo-gptel-harness-busy-p (buffer)
  "Return non-nil while a request of BUFFER is in flight."
  (or (assq buffer efrit-todo-fake-gptel--running)
      (assq buffer efrit-todo-fake-gptel--in-flight)))

(provide 'gptel)
(provide 'efrit-todo-fake-gptel)
;;; efrit-todo-fake-gptel.el ends here
