;;; efrit-todo-gptel-test.el --- The agent-loop scenarios through gptel -*- lexical-binding: t; -*-

;;; Commentary:

;; The scenarios efrit-todo-gptel.el must pass, driven through gptel's
;; chat requests with a scripted model: ids kept across writes, the
;; breaker stopping a request, tool output kept, a bounded continuation,
;; todo_pause, an aborted request taken up by the next one, one session
;; per chat buffer, the preset (also applied to one request, whose
;; continuations keep its tools, system text and model), and gptel
;; given back when the mode is off or the file unloaded.
;;
;; Without GPTEL_DIR (`make ert', CI) gptel is the stand-in of
;; test/efrit-todo-fake-gptel.el; with GPTEL_DIR naming a gptel checkout
;; (`make test-gptel') it is that gptel, unchanged, talking HTTP to a
;; scripted server in this Emacs (test/efrit-todo-real-gptel.el).  The
;; model's requests and answers are in the shape of OpenAI's chat
;; completions either way, and every request is checked against that
;; API's rules.

;;; Code:

(require 'ert)
(require 'json)
(require 'seq)
(require 'subr-x)
(require 'efrit-todo)
(if (not (member (getenv "GPTEL_DIR") '(nil "")))
    (require 'efrit-todo-real-gptel)
  (require 'efrit-todo-fake-gptel))
(require 'efrit-todo-gptel)

(defvar gptel-tools)
(defvar gptel-use-tools)
(defvar gptel-system-prompt)
(defvar gptel-version)
(defvar gptel-pre-tool-call-functions)
(defvar gptel-post-tool-call-functions)
(defvar gptel-post-response-functions)
(defvar gptel-prompt-transform-functions)
(defvar gptel--known-presets)
(defvar efrit-todo-gptel-harness-kind)
(defvar efrit-todo-gptel-harness-transport)
(declare-function gptel-send "gptel" (&optional arg))
(declare-function gptel-abort "gptel-request" (buf))
(declare-function gptel-make-tool "gptel-request" (&rest slots))
(declare-function gptel-get-tool "gptel-request" (path))
(declare-function gptel-get-preset "gptel" (name))
(declare-function gptel-make-preset "gptel" (name &rest keys))
(declare-function gptel-preset "gptel-transient" (preset &optional setter))
(declare-function gptel-tool-name "gptel-request" (tool))
(declare-function efrit-todo-show "efrit-todo-ui" (&optional session))
(declare-function efrit-todo-mode-line-text "efrit-todo-ui" (&optional session))
(defvar efrit-todo-mode-line-mode)
(declare-function efrit-todo-gptel-harness-chat-buffer "efrit-todo-fake-gptel" (name))
(declare-function efrit-todo-gptel-harness-busy-p "efrit-todo-fake-gptel" (buffer))

(message "efrit-todo-gptel-test: the scenarios run against %s" efrit-todo-gptel-harness-kind)

(defconst efrit-todo-gptel-test--system-variable
  (if (get 'gptel-system-prompt 'variable-documentation)
      'gptel-system-prompt
    'gptel--system-message)
  "The variable of the system message in the gptel under test.
gptel 0.9.9.4 and 0.9.9.5 call it `gptel--system-message'; later
versions `gptel-system-prompt', documented.")

(defconst efrit-todo-gptel-test--post-tool-hook-p
  (and (get 'gptel-post-tool-call-functions 'variable-documentation) t)
  "Non-nil if the gptel under test has `gptel-post-tool-call-functions'.
gptel 0.9.9.4 as gptel-agent's snapshot knew it has only the pre-tool hook.")

;;;; Tools for the scenarios

(defvar efrit-todo-gptel-test--runs nil
  "Names of the test tools run, newest first.")

(defun efrit-todo-gptel-test--echo (text)
  "The echo tool: two lines of output about TEXT."
  (push "echo" efrit-todo-gptel-test--runs)
  (format "echo: %s\nsecond line, kept as it is" text))

(defun efrit-todo-gptel-test--quiet ()
  "The quiet tool: no output at all."
  (push "quiet" efrit-todo-gptel-test--runs)
  nil)

(defun efrit-todo-gptel-test--fail ()
  "The fail tool: it signals."
  (push "fail" efrit-todo-gptel-test--runs)
  (error "The disk is on fire"))

(gptel-make-tool :name "echo" :function #'efrit-todo-gptel-test--echo
                 :description "Echo a text."
                 :args '((:name "text" :type string :description "What to echo."))
                 :category "efrit-todo-test" :include t)
(gptel-make-tool :name "quiet" :function #'efrit-todo-gptel-test--quiet
                 :description "Do something silently." :args nil
                 :category "efrit-todo-test" :include t)
(gptel-make-tool :name "fail" :function #'efrit-todo-gptel-test--fail
                 :description "Fail." :args nil
                 :category "efrit-todo-test" :include t)

;;;; The scripted model

(defvar efrit-todo-gptel-test--script nil
  "Answers still to give: JSON, `hang', `error' or functions of the request.")

(defvar efrit-todo-gptel-test--requests nil
  "Requests received, newest first, parsed into alists.")

(defvar efrit-todo-gptel-test--counter 0
  "Makes tool call ids unique.")

(defun efrit-todo-gptel-test--transport (json)
  "Record the request JSON and return the next scripted answer."
  (let ((request (json-parse-string json :object-type 'alist :array-type 'list
                                    :null-object nil :false-object nil)))
    (push request efrit-todo-gptel-test--requests)
    (let ((next (if efrit-todo-gptel-test--script
                    (pop efrit-todo-gptel-test--script)
                  (efrit-todo-gptel-test--text "(the script has ended)"))))
      (if (functionp next) (funcall next request) next))))

(setq efrit-todo-gptel-harness-transport #'efrit-todo-gptel-test--transport)

(defun efrit-todo-gptel-test--tool (name &optional input)
  "Return an answer calling tool NAME with INPUT, an alist."
  (efrit-todo-gptel-test--tools (list name input)))

(defun efrit-todo-gptel-test--tools (&rest calls)
  "Return an answer calling several tools at once.
Each element of CALLS is (NAME INPUT)."
  (json-encode
   `((choices
      . [((index . 0)
          (message
           (role . "assistant")
           (content)
           (tool_calls
            . ,(vconcat
                (mapcar (lambda (call)
                          `((id . ,(format "call_%d" (cl-incf efrit-todo-gptel-test--counter)))
                            (type . "function")
                            (function (name . ,(car call))
                                      (arguments . ,(json-encode (or (cadr call)
                                                                     (make-hash-table)))))))
                        calls))))
          (finish_reason . "tool_calls"))]))))

(defun efrit-todo-gptel-test--text (text)
  "Return an answer that ends the turn saying TEXT."
  (json-encode `((choices . [((index . 0)
                              (message (role . "assistant") (content . ,text))
                              (finish_reason . "stop"))]))))

(defun efrit-todo-gptel-test--todos (&rest items)
  "Return a todo_write answer for ITEMS, each (CONTENT STATUS) or an alist."
  (efrit-todo-gptel-test--tool
   "todo_write"
   `((todos . ,(vconcat (mapcar (lambda (item)
                                  (if (stringp (car item))
                                      `((content . ,(car item)) (status . ,(cadr item)))
                                    item))
                                items))))))

(defun efrit-todo-gptel-test--merge (&rest changes)
  "Return a merged todo_write answer.
Each element of CHANGES is (ID STATUS)."
  (efrit-todo-gptel-test--tool
   "todo_write"
   `((merge . t)
     (todos . ,(vconcat (mapcar (lambda (change) `((id . ,(car change)) (status . ,(cadr change))))
                                changes))))))

;;;; Running a chat

(defvar efrit-todo-gptel-test--buffers 0
  "Makes chat buffer names unique, so that no test sees another's list.")

(defun efrit-todo-gptel-test--chat (&optional tools)
  "Return a new chat buffer offering TOOLS (names; default all the test's)."
  (let ((buffer (efrit-todo-gptel-harness-chat-buffer
                 (format "*efrit-todo-gptel-test-%d*" (cl-incf efrit-todo-gptel-test--buffers)))))
    (with-current-buffer buffer
      (setq-local gptel-tools
                  (mapcar #'gptel-get-tool
                          (or tools '("todo_write" "todo_pause" "echo" "quiet" "fail"))))
      (setq-local gptel-use-tools t))
    buffer))

(defmacro efrit-todo-gptel-test--with-mode (&rest body)
  "Run BODY with `efrit-todo-gptel-mode' on; put it back as it was."
  (declare (indent 0) (debug t))
  `(let ((was-on efrit-todo-gptel-mode))
     (efrit-todo-gptel-mode 1)
     (unwind-protect (progn ,@body)
       (unless was-on (efrit-todo-gptel-mode -1)))))

(defun efrit-todo-gptel-test--idle-p (buffer)
  "Return non-nil when BUFFER has no request in flight or pending."
  (and (not (efrit-todo-gptel-harness-busy-p buffer))
       (not (buffer-local-value 'efrit-todo-gptel--active buffer))
       (not (buffer-local-value 'efrit-todo-gptel--timer buffer))))

(defun efrit-todo-gptel-test--wait (done-p &optional timeout)
  "Let timers and processes run until DONE-P is non-nil, TIMEOUT seconds at most."
  (let ((start (float-time)))
    (while (and (not (funcall done-p)) (< (- (float-time) start) (or timeout 10)))
      (accept-process-output nil 0.02))
    (funcall done-p)))

(defun efrit-todo-gptel-test-send (buffer prompt script &optional no-wait)
  "Send PROMPT in chat BUFFER, the model answering from SCRIPT.
Wait until the request chain ends, unless NO-WAIT.  Return the
requests of this run, oldest first."
  (setq efrit-todo-gptel-test--script script
        efrit-todo-gptel-test--requests nil
        efrit-todo-gptel-test--runs nil)
  (with-current-buffer buffer
    (goto-char (point-max))
    (unless (bobp) (insert "\n\n"))
    (insert prompt)
    (gptel-send))
  (unless no-wait
    (should (efrit-todo-gptel-test--wait
             (lambda () (and efrit-todo-gptel-test--requests
                             (efrit-todo-gptel-test--idle-p buffer)))))
    ;; Let anything the end of the request started show itself.
    (accept-process-output nil 0.05)
    (should (efrit-todo-gptel-test--idle-p buffer)))
  (reverse efrit-todo-gptel-test--requests))

;;;; What the requests say

(defun efrit-todo-gptel-test--messages (request)
  "Return the messages of REQUEST."
  (alist-get 'messages request))

(defun efrit-todo-gptel-test--system (request)
  "Return the system message of REQUEST, or nil."
  (alist-get 'content (seq-find (lambda (m) (equal (alist-get 'role m) "system"))
                                (efrit-todo-gptel-test--messages request))))

(defun efrit-todo-gptel-test--new-tool-results (request)
  "Return the contents of the tool messages at the end of REQUEST."
  (let ((results nil))
    (catch 'done
      (dolist (message (reverse (efrit-todo-gptel-test--messages request)))
        (if (equal (alist-get 'role message) "tool")
            (push (alist-get 'content message) results)
          (throw 'done nil))))
    results))

(defun efrit-todo-gptel-test-tool-results (requests)
  "Return every tool result the model got in REQUESTS, in order."
  (seq-mapcat #'efrit-todo-gptel-test--new-tool-results requests))

(defun efrit-todo-gptel-test--content-text (content)
  "Return CONTENT, a string or a list of parts, as text."
  (if (stringp content)
      content
    (mapconcat (lambda (part) (or (alist-get 'text part) "")) content "")))

(defun efrit-todo-gptel-test-continuations (requests)
  "Return the texts of the continuation messages in REQUESTS.
A continuation is a request whose last message is the user's, right
after an assistant's text that called no tool."
  (delq nil
        (mapcar (lambda (request)
                  (let* ((messages (efrit-todo-gptel-test--messages request))
                         (last (car (last messages)))
                         (before (car (last messages 2))))
                    (and (cdr messages)
                         (equal (alist-get 'role last) "user")
                         (equal (alist-get 'role before) "assistant")
                         (null (alist-get 'tool_calls before))
                         (efrit-todo-gptel-test--content-text (alist-get 'content last)))))
                requests)))

(defun efrit-todo-gptel-test-request-problems (request)
  "Return the reason REQUEST is invalid for OpenAI's chat completions, or nil.
The system message, if any, comes first, then a user message; user
and assistant text is never empty; every tool call of an assistant
message is answered by a tool message right after it, and no tool
message answers anything else."
  (let ((messages (efrit-todo-gptel-test--messages request))
        (problems nil)
        (pending nil))
    (when (equal (alist-get 'role (car messages)) "system")
      (pop messages))
    (unless (equal (alist-get 'role (car messages)) "user")
      (push "the conversation does not start with the user" problems))
    (dolist (message messages)
      (let ((role (alist-get 'role message))
            (content (alist-get 'content message)))
        (if (equal role "tool")
            (if (member (alist-get 'tool_call_id message) pending)
                (setq pending (delete (alist-get 'tool_call_id message) pending))
              (push (format "tool message %s answers no call" (alist-get 'tool_call_id message))
                    problems))
          (when pending
            (push (format "tool calls %s not answered" pending) problems)
            (setq pending nil))
          (unless (member role '("user" "assistant"))
            (push (format "unknown role %s" role) problems))
          (when (and (or (equal role "user") (null (alist-get 'tool_calls message)))
                     (string-empty-p (string-trim (efrit-todo-gptel-test--content-text
                                                   (or content "")))))
            (push (format "empty %s message" role) problems))
          (dolist (call (alist-get 'tool_calls message))
            (push (alist-get 'id call) pending)))))
    (when pending
      (push (format "tool calls %s not answered" pending) problems))
    (nreverse problems)))

(defun efrit-todo-gptel-test--check-requests (requests)
  "Fail if any of REQUESTS breaks the API's rules."
  (dolist (request requests)
    (should (equal (efrit-todo-gptel-test-request-problems request) nil))))

(defun efrit-todo-gptel-test--tool-names (request)
  "Return the names of the tools offered in REQUEST."
  (mapcar (lambda (tool) (alist-get 'name (alist-get 'function tool)))
          (alist-get 'tools request)))

(defun efrit-todo-gptel-test--ids (result)
  "Return (CONTENT . ID) for each listed item of a todo_write RESULT."
  (let ((pairs nil)
        (start 0))
    (while (string-match "^  \\(t[0-9]+\\) \\[[a-z_]+\\] \\(.*\\)$" result start)
      (push (cons (match-string 2 result) (match-string 1 result)) pairs)
      (setq start (match-end 0)))
    (nreverse pairs)))

;;;; The scenarios

(ert-deftest efrit-todo-gptel-test-validator-catches-bad-requests ()
  "The request checker can fail: it finds what the API would refuse."
  (should-not (efrit-todo-gptel-test-request-problems
               '((messages ((role . "system") (content . "s"))
                           ((role . "user") (content . "hi"))))))
  (should (efrit-todo-gptel-test-request-problems
           '((messages ((role . "assistant") (content . "hi"))))))
  (should (efrit-todo-gptel-test-request-problems
           '((messages ((role . "user") (content . "do it"))
                       ((role . "assistant") (tool_calls ((id . "c1"))))
                       ((role . "user") (content . "well?"))))))
  (should (efrit-todo-gptel-test-request-problems
           '((messages ((role . "user") (content . ""))))))
  (should (efrit-todo-gptel-test-request-problems
           '((messages ((role . "user") (content . "x"))
                       ((role . "tool") (tool_call_id . "c9") (content . "r")))))))

(ert-deftest efrit-todo-gptel-test-the-model-sees-the-rust-schemas-and-guidance ()
  "The tools todo_write and todo_pause reach the model as the Rust schemas say.
The system prompt carries efrit-todo's guidance, the same on every
request of the turn."
  (efrit-todo-gptel-test--with-mode
    (let* ((chat (efrit-todo-gptel-test--chat))
           (requests (efrit-todo-gptel-test-send
                      chat "Plan a little"
                      (list (efrit-todo-gptel-test--todos '("Look around" "in_progress"))
                            (efrit-todo-gptel-test--merge '("t1" "completed"))
                            (efrit-todo-gptel-test--text "Looked."))))
           (first (car requests))
           (session (efrit-todo-gptel-session chat)))
      (should (= (length requests) 3))
      (efrit-todo-gptel-test--check-requests requests)
      (should (member "todo_write" (efrit-todo-gptel-test--tool-names first)))
      (should (member "todo_pause" (efrit-todo-gptel-test--tool-names first)))
      (dolist (schema (efrit-todo-tool-schemas))
        (let* ((name (cdr (assoc "name" schema)))
               (input (cdr (assoc "input_schema" schema)))
               (sent (alist-get 'function
                                (seq-find (lambda (tool)
                                            (equal (alist-get 'name (alist-get 'function tool))
                                                   name))
                                          (alist-get 'tools first))))
               (parameters (alist-get 'parameters sent)))
          (should (equal (alist-get 'description sent) (cdr (assoc "description" schema))))
          (should (equal (mapcar (lambda (p) (symbol-name (car p)))
                                 (alist-get 'properties parameters))
                         (mapcar #'car (cdr (assoc "properties" input)))))
          (should (equal (alist-get 'required parameters)
                         (append (cdr (assoc "required" input)) nil)))))
      ;; The status enum and item fields survive the conversion.
      (let* ((todo-write (seq-find (lambda (tool)
                                     (equal (alist-get 'name (alist-get 'function tool))
                                            "todo_write"))
                                   (alist-get 'tools first)))
             (items (thread-last todo-write (alist-get 'function) (alist-get 'parameters)
                                 (alist-get 'properties) (alist-get 'todos)
                                 (alist-get 'items))))
        (should (equal (thread-last items (alist-get 'properties) (alist-get 'status)
                                    (alist-get 'enum))
                       '("pending" "in_progress" "completed" "cancelled")))
        (should (alist-get 'activeForm (alist-get 'properties items))))
      (let ((system (efrit-todo-gptel-test--system first)))
        (should (string-search (efrit-todo-prompt-guidance session) system))
        (dolist (request requests)
          (should (equal (efrit-todo-gptel-test--system request) system))))
      (should (equal (plist-get (efrit-todo-counts session) :completed) 1)))))

(ert-deftest efrit-todo-gptel-test-ids-survive-reordering ()
  "Items keep their ids when the model resends them reordered, without ids."
  (efrit-todo-gptel-test--with-mode
    (let* ((chat (efrit-todo-gptel-test--chat))
           (requests (efrit-todo-gptel-test-send
                      chat "Tidy the project"
                      (list (efrit-todo-gptel-test--todos '("Read the code" "in_progress")
                                                          '("Fix the bug" "pending")
                                                          '("Write a test" "pending"))
                            (efrit-todo-gptel-test--todos '("Write a test" "pending")
                                                          '("Read the code" "completed")
                                                          '("Fix the bug" "in_progress"))
                            (efrit-todo-gptel-test--todos '("Write a test" "completed")
                                                          '("Read the code" "completed")
                                                          '("Fix the bug" "completed"))
                            (efrit-todo-gptel-test--text "All tidy."))))
           (results (efrit-todo-gptel-test-tool-results requests))
           (session (efrit-todo-gptel-session chat)))
      (efrit-todo-gptel-test--check-requests requests)
      (should (= (length requests) 4))
      (should (= (length results) 3))
      (should (equal (efrit-todo-gptel-test--ids (nth 0 results))
                     '(("Read the code" . "t1") ("Fix the bug" . "t2") ("Write a test" . "t3"))))
      (let ((second (efrit-todo-gptel-test--ids (nth 1 results))))
        (should (equal (cdr (assoc "Read the code" second)) "t1"))
        (should (equal (cdr (assoc "Fix the bug" second)) "t2"))
        (should (equal (cdr (assoc "Write a test" second)) "t3")))
      (should (equal (mapcar (lambda (item) (plist-get item :id)) (efrit-todo-list session))
                     '("t3" "t1" "t2")))
      (should (equal (plist-get (efrit-todo-counts session) :completed) 3))
      ;; Nothing open: no continuation, no stop.
      (should-not (efrit-todo-gptel-test-continuations requests))
      (should-not (efrit-todo-stopped session))
      ;; The list is the chat buffer's, for the efrit-todo commands run there.
      (should (equal (buffer-local-value 'efrit-todo-current-session chat) session)))))

(ert-deftest efrit-todo-gptel-test-breaker-stops-the-request ()
  "A tripped breaker stops the request; no tool runs after it.
The model gets each refusal as the call's result; the stop reason
names the rule, and the next request of the chat sees the results."
  (efrit-todo-gptel-test--with-mode
    (let* ((chat (efrit-todo-gptel-test--chat))
           (call (efrit-todo-gptel-test--tool "echo" '((text . "again"))))
           (requests (efrit-todo-gptel-test-send
                      chat "Echo until told to stop"
                      (cons (efrit-todo-gptel-test--todos '("Echo things" "in_progress"))
                            (make-list 40 call))))
           (session (efrit-todo-gptel-session chat))
           (breaker (efrit-todo-breaker session))
           (results (efrit-todo-gptel-test-tool-results requests)))
      (efrit-todo-gptel-test--check-requests requests)
      (should (plist-get breaker :tripped))
      ;; Three identical calls run, the fourth and fifth are refused, and
      ;; the second refusal in a row trips: six requests, not forty-one.
      (should (= (length requests) 6))
      (should (equal efrit-todo-gptel-test--runs '("echo" "echo" "echo")))
      ;; The refused calls did not run, so they are not recorded as run.
      (should (= (seq-count (lambda (entry) (equal (plist-get entry :tool) "echo"))
                            (efrit-todo-ledger session))
                 3))
      (should (string-match-p "same call to echo" (car (last results))))
      (should (string-prefix-p "stopped by the circuit breaker: "
                               (plist-get (efrit-todo-stopped session) :reason)))
      (should (string-search (plist-get breaker :reason)
                             (plist-get (efrit-todo-stopped session) :reason)))
      ;; The refusal that tripped it is in the chat, and the next request
      ;; carries it to the model as that call's result.
      (let* ((reason (plist-get breaker :reason))
             (next (efrit-todo-gptel-test-send chat "What happened?"
                                               (list (efrit-todo-gptel-test--text "I was stopped.")))))
        (efrit-todo-gptel-test--check-requests next)
        (should (seq-some (lambda (message)
                            (and (equal (alist-get 'role message) "tool")
                                 (string-search reason (alist-get 'content message))))
                          (efrit-todo-gptel-test--messages (car next))))
        ;; A new request of the user gets a fresh breaker and goes on.
        (should-not (plist-get (efrit-todo-breaker session) :tripped))))))

(ert-deftest efrit-todo-gptel-test-several-calls-in-one-response ()
  "Calls made together are each checked, run, recorded and answered.
gptel checks every call of a response before the first runs, so three
identical calls made together all run; a fourth is refused."
  (efrit-todo-gptel-test--with-mode
    (let* ((chat (efrit-todo-gptel-test--chat))
           (echo '("echo" ((text . "twice"))))
           (requests (efrit-todo-gptel-test-send
                      chat "Plan and echo"
                      (list (efrit-todo-gptel-test--tools
                             '("todo_write" ((todos . [((content . "Echo") (status . "in_progress"))])))
                             '("echo" ((text . "one")))
                             '("quiet" nil))
                            (efrit-todo-gptel-test--tools echo echo echo)
                            (efrit-todo-gptel-test--tools echo)
                            (efrit-todo-gptel-test--merge '("t1" "completed"))
                            (efrit-todo-gptel-test--text "Echoed."))))
           (session (efrit-todo-gptel-session chat))
           (results (mapcar #'efrit-todo-gptel-test--new-tool-results requests)))
      (efrit-todo-gptel-test--check-requests requests)
      (should (= (length requests) 5))
      (should (equal (mapcar #'length results) '(0 3 3 1 1)))
      ;; gptel may answer the calls of a response in another order (it
      ;; does when it streams), which the API allows: match each by id.
      (let ((first (nth 1 results)))
        (should (seq-some (lambda (r) (string-match-p "^  t1 \\[in_progress\\] Echo" r)) first))
        (should (seq-some (lambda (r) (string-prefix-p "echo: one\n" r)) first))
        (should (seq-some (lambda (r) (string-match-p "quiet returned no output" r)) first)))
      ;; Three identical calls ran; the one after them was refused.
      (should (= (seq-count (lambda (name) (equal name "echo")) efrit-todo-gptel-test--runs) 4))
      (dolist (refused (nth 3 results))
        (should (string-match-p "same call to echo" refused)))
      (should (equal (sort (mapcar (lambda (entry) (plist-get entry :tool))
                                   (efrit-todo-ledger session))
                           #'string<)
                     '("echo" "echo" "echo" "echo" "quiet" "todo_write" "todo_write")))
      (should (equal (plist-get (efrit-todo-counts session) :completed) 1)))))

(ert-deftest efrit-todo-gptel-test-output-is-kept ()
  "Every tool's output reaches the model as it is; nothing is lost.
Notices come after the output; an empty result is named as such; an
error is recorded as one; the report has every result."
  (efrit-todo-gptel-test--with-mode
    (let* ((chat (efrit-todo-gptel-test--chat))
           (requests (efrit-todo-gptel-test-send
                      chat "Echo, be quiet, fail"
                      (list (efrit-todo-gptel-test--todos '("Echo" "in_progress")
                                                          '("Be quiet" "pending"))
                            (efrit-todo-gptel-test--tool "echo" '((text . "hello 100%")))
                            (efrit-todo-gptel-test--tool "quiet")
                            (efrit-todo-gptel-test--tool "fail")
                            (efrit-todo-gptel-test--merge '("t1" "completed") '("t2" "completed"))
                            (efrit-todo-gptel-test--text "Done, mostly."))))
           (results (efrit-todo-gptel-test-tool-results requests))
           (session (efrit-todo-gptel-session chat))
           (ledger (efrit-todo-ledger session))
           (report (efrit-todo-report session)))
      (efrit-todo-gptel-test--check-requests requests)
      (should (string-prefix-p "echo: hello 100%\nsecond line, kept as it is" (nth 1 results)))
      (should (string-match-p "quiet returned no output" (nth 2 results)))
      (should (string-match-p "The disk is on fire" (nth 3 results)))
      (should (equal (mapcar (lambda (entry) (plist-get entry :tool)) ledger)
                     '("todo_write" "echo" "quiet" "fail" "todo_write")))
      (should (plist-get (nth 3 ledger) :error))
      (should-not (plist-get (nth 1 ledger) :error))
      (should (string-search "echo: hello 100%\nsecond line, kept as it is" report))
      (should (string-search "quiet returned no output" report))
      (should-not (string-search "executed successfully" report)))))

(ert-deftest efrit-todo-gptel-test-continuation-is-sent-and-bounded ()
  "A response that ends with items open gets a continuation, twice at most.
Then the list is left for the next request, and the stop is noted."
  (efrit-todo-gptel-test--with-mode
    (let* ((chat (efrit-todo-gptel-test--chat))
           (requests (efrit-todo-gptel-test-send
                      chat "Do two things"
                      (cons (efrit-todo-gptel-test--todos '("First thing" "in_progress")
                                                          '("Second thing" "pending"))
                            (make-list 10 (efrit-todo-gptel-test--text "I think that is all.")))))
           (continuations (efrit-todo-gptel-test-continuations requests))
           (session (efrit-todo-gptel-session chat)))
      (efrit-todo-gptel-test--check-requests requests)
      (should (= (length continuations) 2))
      (should (= (length requests) 4))
      (dolist (text continuations)
        (should (string-search "t1" text)))
      (should (equal (plist-get (efrit-todo-stopped session) :reason)
                     "the model ended its turn with items still open"))
      ;; The continuation is in the chat, as the user's message.
      (should (string-search (car continuations)
                             (with-current-buffer chat (buffer-string)))))))

(ert-deftest efrit-todo-gptel-test-continuation-follows-the-option ()
  "`efrit-todo-gptel-max-continuations' bounds the continuations; 0 sends none."
  (efrit-todo-gptel-test--with-mode
    (dolist (limit '(1 0))
      (let* ((efrit-todo-gptel-max-continuations limit)
             (chat (efrit-todo-gptel-test--chat))
             (requests (efrit-todo-gptel-test-send
                        chat "Do two things"
                        (cons (efrit-todo-gptel-test--todos '("First thing" "in_progress")
                                                            '("Second thing" "pending"))
                              (make-list 10 (efrit-todo-gptel-test--text "Enough."))))))
        (should (= (length (efrit-todo-gptel-test-continuations requests)) limit))
        (should (= (length requests) (+ 2 limit)))))))

(ert-deftest efrit-todo-gptel-test-pause-stops-continuations ()
  "The tool todo_pause ends the turn without a continuation, with the reason."
  (efrit-todo-gptel-test--with-mode
    (let* ((chat (efrit-todo-gptel-test--chat))
           (requests (efrit-todo-gptel-test-send
                      chat "Deploy the site"
                      (list (efrit-todo-gptel-test--todos '("Build the site" "completed")
                                                          '("Upload it" "in_progress"))
                            (efrit-todo-gptel-test--tool
                             "todo_pause" '((reason . "The upload needs a password only the user has.")))
                            (efrit-todo-gptel-test--text "I need your password to go on."))))
           (session (efrit-todo-gptel-session chat)))
      (efrit-todo-gptel-test--check-requests requests)
      (should (= (length requests) 3))
      (should-not (efrit-todo-gptel-test-continuations requests))
      (should (equal (plist-get (efrit-todo-stopped session) :reason)
                     "paused by the model: The upload needs a password only the user has.")))))

(ert-deftest efrit-todo-gptel-test-interrupt-and-resume ()
  "An aborted request leaves its open items; the next request goes on with them.
The same ids, the stop named in the system prompt, then a merged
write by id finishes the list."
  (efrit-todo-gptel-test--with-mode
    (let* ((chat (efrit-todo-gptel-test--chat))
           (session (efrit-todo-gptel-session chat)))
      (efrit-todo-gptel-test-send
       chat "Write the report"
       (list (efrit-todo-gptel-test--todos '("Collect the numbers" "in_progress")
                                           '("Write the text" "pending"))
             'hang)
       t)
      (should (efrit-todo-gptel-test--wait
               (lambda () (= (length efrit-todo-gptel-test--requests) 2))))
      (gptel-abort chat)
      (should (efrit-todo-gptel-test--wait (lambda () (efrit-todo-gptel-test--idle-p chat))))
      (let ((stopped (efrit-todo-stopped session)))
        (should (equal (plist-get stopped :reason) "interrupted by the user"))
        (should (equal (plist-get stopped :running) "t1")))
      (should (equal (mapcar (lambda (item) (plist-get item :id)) (efrit-todo-list session))
                     '("t1" "t2")))
      ;; The next request of the chat goes on with the list.
      (let* ((requests (efrit-todo-gptel-test-send
                        chat "Go on"
                        (list (efrit-todo-gptel-test--merge '("t1" "completed") '("t2" "in_progress"))
                              (efrit-todo-gptel-test--merge '("t2" "completed"))
                              (efrit-todo-gptel-test--text "The report is written."))))
             (system (efrit-todo-gptel-test--system (car requests)))
             (results (efrit-todo-gptel-test-tool-results requests)))
        (efrit-todo-gptel-test--check-requests requests)
        (should (string-search "interrupted by the user" system))
        (should (string-search "t1" system))
        (should (string-match-p "^t1 completed" (car results)))
        (should-not (string-match-p "Error" (car results)))
        (should (equal (plist-get (efrit-todo-counts session) :completed) 2))
        (should-not (efrit-todo-stopped session))
        (should-not (efrit-todo-gptel-test-continuations requests))))))

;;;; Loading

(ert-deftest efrit-todo-gptel-test-gptel-is-loaded-only-on-request ()
  "The efrit-todo package never loads gptel; efrit-todo-gptel waits for it.
Loaded before gptel, it gives gptel the tools and the preset as soon
as gptel is loaded."
  (let* ((gptel (if (member (getenv "GPTEL_DIR") '(nil ""))
                    "efrit-todo-fake-gptel"
                  "efrit-todo-real-gptel"))
         (form `(progn
                  (require 'efrit-todo)
                  (require 'efrit-todo-ui)
                  (require 'efrit-todo-efrit)
                  (princ (format "after efrit-todo: %S\n" (featurep 'gptel)))
                  (require 'efrit-todo-gptel)
                  (princ (format "after efrit-todo-gptel: %S\n" (featurep 'gptel)))
                  (require ',(intern gptel))
                  (princ (format "tools: %S\n"
                                 (mapcar (lambda (name)
                                           (and (ignore-errors (gptel-get-tool name)) name))
                                         '("todo_write" "todo_pause"))))
                  (princ (format "preset: %S\n" (and (gptel-get-preset 'efrit-todo) t)))))
         (output (with-temp-buffer
                   (call-process (expand-file-name invocation-name invocation-directory)
                                 nil '(t nil) nil
                                 "-Q" "--batch"
                                 "-L" (file-name-directory (locate-library "efrit-todo"))
                                 "-L" (file-name-directory (locate-library "efrit-todo-gptel-test"))
                                 "--eval" (prin1-to-string form))
                   (buffer-string))))
    (should (string-search "after efrit-todo: nil\n" output))
    (should (string-search "after efrit-todo-gptel: nil\n" output))
    (should (string-search "tools: (\"todo_write\" \"todo_pause\")\n" output))
    (should (string-search "preset: t\n" output))))

;;;; Closing Emacs mid-request and opening the chat again

(defun efrit-todo-gptel-test--use-harness (buffer)
  "Have BUFFER, a chat visiting a file, talk to the harness as its chats do.
A gptel that has a default backend would otherwise send to it."
  (let ((template (efrit-todo-gptel-harness-chat-buffer " *efrit-todo-gptel-test-template*")))
    (dolist (variable '(gptel-backend gptel-model gptel-stream))
      (when (local-variable-p variable template)
        (with-current-buffer buffer
          (set (make-local-variable variable) (buffer-local-value variable template)))))
    (kill-buffer template)))

(defun efrit-todo-gptel-test-child-first (directory chat-file)
  "In a child Emacs: plan in CHAT-FILE, then close Emacs mid-request.
DIRECTORY is the state directory."
  (setq efrit-todo-state-directory directory)
  (efrit-todo-gptel-mode 1)
  (let ((chat (find-file-noselect chat-file)))
    (efrit-todo-gptel-test--use-harness chat)
    (with-current-buffer chat
      (setq-local gptel-tools (mapcar #'gptel-get-tool '("todo_write" "todo_pause"))))
    (efrit-todo-gptel-test-send
     chat "Write the report"
     (list (efrit-todo-gptel-test--todos '("Collect the numbers" "in_progress")
                                         '("Write the text" "pending"))
           'hang)
     t)
    (efrit-todo-gptel-test--wait (lambda () (= (length efrit-todo-gptel-test--requests) 2)))
    (with-current-buffer chat
      (let ((save-silently t)) (save-buffer)))
    (kill-emacs 0)))

(defun efrit-todo-gptel-test-child-second (directory chat-file)
  "In a child Emacs: restore, open CHAT-FILE, go on; say what happened.
DIRECTORY is the state directory; the outcome goes to CHAT-FILE.outcome."
  (setq efrit-todo-state-directory directory)
  (efrit-todo-restore)
  (efrit-todo-gptel-mode 1)
  (let* ((chat (find-file-noselect chat-file))
         (session (efrit-todo-gptel-session chat))
         (stopped (efrit-todo-stopped session)))
    (efrit-todo-gptel-test--use-harness chat)
    (with-current-buffer chat
      (setq-local gptel-tools (mapcar #'gptel-get-tool '("todo_write" "todo_pause"))))
    (let ((requests (efrit-todo-gptel-test-send
                     chat "Go on"
                     (list (efrit-todo-gptel-test--merge '("t1" "completed") '("t2" "completed"))
                           (efrit-todo-gptel-test--text "The report is written.")))))
      (with-temp-file (concat chat-file ".outcome")
        (prin1 (list :stopped stopped
                     :system (efrit-todo-gptel-test--system (car requests))
                     :results (efrit-todo-gptel-test-tool-results requests)
                     :counts (efrit-todo-counts session))
               (current-buffer)))
      (kill-emacs 0))))

(defun efrit-todo-gptel-test--child (function directory chat-file)
  "Run FUNCTION with DIRECTORY and CHAT-FILE in a child Emacs."
  (with-temp-buffer
    (let ((status (call-process
                   (expand-file-name invocation-name invocation-directory) nil t nil
                   "-Q" "--batch" "-L" (file-name-directory (locate-library "efrit-todo"))
                   "-L" (file-name-directory (locate-library "efrit-todo-gptel-test"))
                   "-l" "efrit-todo-gptel-test"
                   "--eval" (format "(%s %S %S)" function directory chat-file))))
      (unless (equal status 0)
        (message "%s" (buffer-string)))
      (should (equal status 0)))))

(ert-deftest efrit-todo-gptel-test-closing-emacs-leaves-the-list-for-the-chat ()
  "Emacs closed mid-request: the chat file opened again goes on with its list.
The stop is saved with the list; the next Emacs restores it, and the
first request of the chat says why it stopped and uses the same ids."
  (let* ((directory (file-name-as-directory (make-temp-file "efrit-todo-gptel" t)))
         (chat-file (expand-file-name "chat.txt" (make-temp-file "efrit-todo-gptel-chat" t))))
    (unwind-protect
        (progn
          (efrit-todo-gptel-test--child 'efrit-todo-gptel-test-child-first directory chat-file)
          (efrit-todo-gptel-test--child 'efrit-todo-gptel-test-child-second directory chat-file)
          (let ((outcome (with-temp-buffer
                           (insert-file-contents (concat chat-file ".outcome"))
                           (read (current-buffer)))))
            (should (equal (plist-get (plist-get outcome :stopped) :reason)
                           "Emacs was closed while the request ran"))
            (should (string-search "Emacs was closed while the request ran"
                                   (plist-get outcome :system)))
            (should (string-match-p "^t1 completed: Collect the numbers$"
                                    (car (plist-get outcome :results))))
            (should (equal (plist-get (plist-get outcome :counts) :completed) 2))))
      (delete-directory directory t)
      (delete-directory (file-name-directory chat-file) t))))

(ert-deftest efrit-todo-gptel-test-a-failed-request-leaves-the-list ()
  "A request that fails with items open leaves them for the next one."
  (efrit-todo-gptel-test--with-mode
    (let* ((chat (efrit-todo-gptel-test--chat))
           (session (efrit-todo-gptel-session chat)))
      (let ((inhibit-message t))
        (efrit-todo-gptel-test-send
         chat "Plan and fail"
         (list (efrit-todo-gptel-test--todos '("Step one" "in_progress") '("Step two" "pending"))
               'error)))
      (should (equal (plist-get (efrit-todo-stopped session) :reason) "the request failed"))
      (should (= (length (efrit-todo-list session)) 2)))))

(ert-deftest efrit-todo-gptel-test-one-session-per-chat-buffer ()
  "Two chats have two lists, each with its own ids."
  (efrit-todo-gptel-test--with-mode
    (let ((a (efrit-todo-gptel-test--chat))
          (b (efrit-todo-gptel-test--chat)))
      (dolist (chat (list a b))
        (efrit-todo-gptel-test-send
         chat "Plan"
         (list (efrit-todo-gptel-test--todos '("One" "completed") '("Two" "completed"))
               (efrit-todo-gptel-test--text "Done."))))
      (should-not (equal (efrit-todo-gptel-session a) (efrit-todo-gptel-session b)))
      (dolist (chat (list a b))
        (should (equal (mapcar (lambda (item) (plist-get item :id))
                               (efrit-todo-list (efrit-todo-gptel-session chat)))
                       '("t1" "t2"))))
      (should (member (efrit-todo-gptel-session a) (efrit-todo-sessions))))))

(ert-deftest efrit-todo-gptel-test-the-list-the-mode-line-and-undo-follow-the-chat ()
  "The list buffer, the mode line, history and undo work on a chat's list.
The user's edit in *efrit-todos* reaches the model in its next result."
  (efrit-todo-gptel-test--with-mode
    (let* ((chat (efrit-todo-gptel-test--chat))
           (session (efrit-todo-gptel-session chat))
           (was-on efrit-todo-mode-line-mode))
      (efrit-todo-mode-line-mode 1)
      (unwind-protect
          (progn
            (efrit-todo-gptel-test-send
             chat "Plan three things"
             (list (efrit-todo-gptel-test--todos '("One" "in_progress") '("Two" "pending")
                                                 '("Three" "pending"))
                   (efrit-todo-gptel-test--todos '("One" "completed") '("Two" "in_progress")
                                                 '("Three" "pending"))
                   (efrit-todo-gptel-test--tool "todo_pause" '((reason . "Lunch.")))
                   (efrit-todo-gptel-test--text "Back later.")))
            ;; The mode line follows the chat's list.
            (should (string-match-p "Todo 1/3" (efrit-todo-mode-line-text)))
            ;; *efrit-todos* has a section for the chat, with its items.
            (with-current-buffer (save-window-excursion (efrit-todo-show session))
              (should (string-search session (buffer-string)))
              (should (string-search "Three" (buffer-string))))
            ;; History and undo act on the chat's list from the chat buffer.
            (should (equal (mapcar (lambda (change) (plist-get change :kind))
                                   (with-current-buffer chat (efrit-todo-history)))
                           (mapcar (lambda (change) (plist-get change :kind))
                                   (efrit-todo-history session))))
            (with-current-buffer chat (efrit-todo-undo))
            (should (equal (mapcar (lambda (item) (plist-get item :status)) (efrit-todo-list session))
                           '(in-progress pending pending)))
            ;; The user cancels t3; the model hears of it with its next result.
            (efrit-todo-user-set-status "t3" 'cancelled session)
            (let* ((requests (efrit-todo-gptel-test-send
                              chat "Go on"
                              (list (efrit-todo-gptel-test--merge '("t1" "completed")
                                                                  '("t2" "completed"))
                                    (efrit-todo-gptel-test--text "Done."))))
                   (result (car (efrit-todo-gptel-test-tool-results requests))))
              (should (string-match-p "t3" result))
              (should (string-match-p "user" result))
              (should (equal (plist-get (efrit-todo-counts session) :cancelled) 1))))
        (efrit-todo-mode-line-mode (if was-on 1 -1))
        (when (get-buffer "*efrit-todos*")
          (kill-buffer "*efrit-todos*"))))))

(ert-deftest efrit-todo-gptel-test-requests-without-todo-tools-are-left-alone ()
  "A request that does not offer todo_write is gptel's own: no breaker, no notices."
  (efrit-todo-gptel-test--with-mode
    (let* ((chat (efrit-todo-gptel-test--chat '("echo")))
           (call (efrit-todo-gptel-test--tool "echo" '((text . "same"))))
           (requests (efrit-todo-gptel-test-send
                      chat "Echo a lot"
                      (append (make-list 6 call) (list (efrit-todo-gptel-test--text "Echoed.")))))
           (results (efrit-todo-gptel-test-tool-results requests)))
      (should (= (length efrit-todo-gptel-test--runs) 6))
      (should (equal (delete-dups (copy-sequence results))
                     '("echo: same\nsecond line, kept as it is")))
      (should-not (efrit-todo-ledger (efrit-todo-gptel-session chat)))
      (should-not (efrit-todo-gptel-test--system-has-guidance-p (car requests))))))

(defun efrit-todo-gptel-test--system-has-guidance-p (request)
  "Return non-nil if the system message of REQUEST mentions todo_write."
  (string-search "todo_write" (or (efrit-todo-gptel-test--system request) "")))

(ert-deftest efrit-todo-gptel-test-the-preset-switches-it-on ()
  "The preset `efrit-todo' offers the todo tools and turns the mode on."
  (let ((was-on efrit-todo-gptel-mode))
    (efrit-todo-gptel-mode -1)
    (unwind-protect
        (let* ((chat (efrit-todo-gptel-test--chat '("echo")))
               (requests nil))
          (should (gptel-get-preset 'efrit-todo))
          (with-current-buffer chat
            ;; `gptel-with-preset' is a macro of gptel, which the
            ;; byte-compiler does not have: expand it at run time.
            (eval `(gptel-with-preset 'efrit-todo
                     (funcall ',(lambda ()
                                 (setq requests
                                       (efrit-todo-gptel-test-send
                                        chat "Plan with the preset"
                                        (list (efrit-todo-gptel-test--todos '("Plan" "completed"))
                                              (efrit-todo-gptel-test--text "Planned.")))))))
                  t))
          (should efrit-todo-gptel-mode)
          (efrit-todo-gptel-test--check-requests requests)
          (should (equal (sort (efrit-todo-gptel-test--tool-names (car requests)) #'string<)
                         '("echo" "todo_pause" "todo_write")))
          (should (efrit-todo-gptel-test--system-has-guidance-p (car requests)))
          (should (= (length (efrit-todo-ledger (efrit-todo-gptel-session chat))) 1)))
      (efrit-todo-gptel-mode (if was-on 1 -1)))))

(ert-deftest efrit-todo-gptel-test-the-preset-from-the-menu ()
  "The preset picked in gptel's menu for one chat switches it on there."
  (skip-unless (fboundp 'gptel-preset))
  (let ((was-on efrit-todo-gptel-mode))
    (efrit-todo-gptel-mode -1)
    (unwind-protect
        (let ((chat (efrit-todo-gptel-test--chat '("echo")))
              (other (efrit-todo-gptel-test--chat '("echo"))))
          ;; What the menu runs for a preset whose scope is the buffer.
          (with-current-buffer chat
            (gptel-preset 'efrit-todo (lambda (symbol value)
                                        (set (make-local-variable symbol) value))))
          (should efrit-todo-gptel-mode)
          (should (equal (mapcar #'gptel-tool-name (buffer-local-value 'gptel-tools chat))
                         '("echo" "todo_write" "todo_pause")))
          (should (equal (mapcar #'gptel-tool-name (buffer-local-value 'gptel-tools other))
                         '("echo")))
          (let* ((requests (efrit-todo-gptel-test-send
                            chat "Plan"
                            (list (efrit-todo-gptel-test--todos '("Plan" "in_progress")
                                                                '("Do" "pending"))
                                  (efrit-todo-gptel-test--text "Stopping here.")
                                  (efrit-todo-gptel-test--merge '("t1" "completed")
                                                                '("t2" "completed"))
                                  (efrit-todo-gptel-test--text "Done."))))
                 (session (efrit-todo-gptel-session chat)))
            (efrit-todo-gptel-test--check-requests requests)
            (should (= (length (efrit-todo-gptel-test-continuations requests)) 1))
            (should (equal (plist-get (efrit-todo-counts session) :completed) 2))))
      (efrit-todo-gptel-mode (if was-on 1 -1)))))

(ert-deftest efrit-todo-gptel-test-the-preset-in-a-prompt ()
  "@efrit-todo in a prompt switches it all on for that request."
  (let ((was-on efrit-todo-gptel-mode))
    (efrit-todo-gptel-mode -1)
    (unwind-protect
        (let* ((chat (efrit-todo-gptel-test--chat '("echo")))
               (requests (efrit-todo-gptel-test-send
                          chat "@efrit-todo Plan this"
                          (list (efrit-todo-gptel-test--todos '("Plan" "in_progress")
                                                              '("Do" "pending"))
                                (efrit-todo-gptel-test--tool "echo" '((text . "x")))
                                (efrit-todo-gptel-test--merge '("t1" "completed")
                                                              '("t2" "completed"))
                                (efrit-todo-gptel-test--text "Planned and done."))))
               (session (efrit-todo-gptel-session chat))
               (user (alist-get 'content (seq-find (lambda (m) (equal (alist-get 'role m) "user"))
                                                    (efrit-todo-gptel-test--messages
                                                     (car requests))))))
          (should efrit-todo-gptel-mode)
          (efrit-todo-gptel-test--check-requests requests)
          (should (= (length requests) 4))
          (should (equal (string-trim (efrit-todo-gptel-test--content-text user)) "Plan this"))
          (should (member "todo_write" (efrit-todo-gptel-test--tool-names (car requests))))
          (should (efrit-todo-gptel-test--system-has-guidance-p (car requests)))
          ;; Managed: every call is in the ledger, the list is done.
          (should (equal (mapcar (lambda (entry) (plist-get entry :tool)) (efrit-todo-ledger session))
                         '("todo_write" "echo" "todo_write")))
          (should (equal (plist-get (efrit-todo-counts session) :completed) 2))
          ;; The chat buffer itself still offers only what it did.
          (should (equal (buffer-local-value 'gptel-tools chat) (list (gptel-get-tool "echo")))))
      (efrit-todo-gptel-mode (if was-on 1 -1)))))

(ert-deftest efrit-todo-gptel-test-a-continuation-keeps-the-preset-of-its-turn ()
  "A continuation offers the tools and the system text its turn began with.
@efrit-todo in the prompt applies the preset to the first request
only; the model writes two items and ends its turn with both open.
The continuation efrit-todo sends must still offer todo_write and
todo_pause with the same system text, so that the model's todo_write
there succeeds, the list is finished and the prompt cache holds."
  (let ((was-on efrit-todo-gptel-mode))
    (efrit-todo-gptel-mode -1)
    (unwind-protect
        (let* ((chat (efrit-todo-gptel-test--chat '("echo")))
               (requests (progn
                           (with-current-buffer chat
                             (set (make-local-variable efrit-todo-gptel-test--system-variable)
                                  "You help with a test."))
                           (efrit-todo-gptel-test-send
                            chat "@efrit-todo Plan two things"
                            (list (efrit-todo-gptel-test--todos '("One" "in_progress")
                                                                '("Two" "pending"))
                                  (efrit-todo-gptel-test--text "Stopping here.")
                                  (efrit-todo-gptel-test--merge '("t1" "completed")
                                                                '("t2" "completed"))
                                  (efrit-todo-gptel-test--text "Both done.")))))
               (session (efrit-todo-gptel-session chat))
               (first (car requests))
               (system (efrit-todo-gptel-test--system first)))
          (efrit-todo-gptel-test--check-requests requests)
          ;; Ask, write, continuation, the result of the write in it.
          (should (= (length requests) 4))
          (should (= (length (efrit-todo-gptel-test-continuations requests)) 1))
          (should (equal (efrit-todo-gptel-test-continuations (list (nth 2 requests)))
                         (efrit-todo-gptel-test-continuations requests)))
          ;; The first request is the preset's: its tools and the guidance
          ;; after the chat's own system text.
          (should (equal (sort (efrit-todo-gptel-test--tool-names first) #'string<)
                         '("echo" "todo_pause" "todo_write")))
          (should (string-prefix-p "You help with a test." system))
          (should (efrit-todo-gptel-test--system-has-guidance-p first))
          ;; Every request of the turn, the continuation and the one after
          ;; it included, offers the same tools with the same system text.
          (dolist (request (cdr requests))
            (should (equal (sort (efrit-todo-gptel-test--tool-names request) #'string<)
                           '("echo" "todo_pause" "todo_write")))
            (should (equal (efrit-todo-gptel-test--system request) system)))
          ;; The write made in the continuation ran and the list is done.
          (let ((results (efrit-todo-gptel-test-tool-results requests)))
            (should (= (length results) 2))
            (dolist (result results)
              (should (string-prefix-p "[TODO list updated" result))))
          (should (equal (mapcar (lambda (entry) (plist-get entry :tool))
                                 (efrit-todo-ledger session))
                         '("todo_write" "todo_write")))
          (should (equal (plist-get (efrit-todo-counts session) :completed) 2))
          (should-not (efrit-todo-stopped session))
          ;; The chat buffer itself offers only what it did before.
          (should (equal (buffer-local-value 'gptel-tools chat) (list (gptel-get-tool "echo"))))
          (should (equal (buffer-local-value efrit-todo-gptel-test--system-variable chat)
                         "You help with a test."))
          ;; The next prompt of the user, without the preset, is gptel's own.
          (let ((next (efrit-todo-gptel-test-send
                       chat "Thanks" (list (efrit-todo-gptel-test--text "You are welcome.")))))
            (should (equal (efrit-todo-gptel-test--tool-names (car next)) '("echo")))
            (should (equal (efrit-todo-gptel-test--system (car next)) "You help with a test."))))
      (efrit-todo-gptel-mode (if was-on 1 -1)))))

(ert-deftest efrit-todo-gptel-test-a-continuation-keeps-the-model-of-its-turn ()
  "A continuation names the model and system text a user's preset gave its turn.
The user's preset builds on `efrit-todo' and picks another model and
system text, for the request that names it only."
  (let ((was-on efrit-todo-gptel-mode))
    (efrit-todo-gptel-mode -1)
    (gptel-make-preset 'efrit-todo-test-large
      :description "Plan large things with efrit-todo"
      :parents 'efrit-todo :model 'fake-large :system "You plan large things.")
    (unwind-protect
        (let* ((chat (efrit-todo-gptel-test--chat '("echo")))
               (requests (efrit-todo-gptel-test-send
                          chat "@efrit-todo-test-large Plan two things"
                          (list (efrit-todo-gptel-test--todos '("One" "in_progress")
                                                              '("Two" "pending"))
                                (efrit-todo-gptel-test--text "Stopping here.")
                                (efrit-todo-gptel-test--merge '("t1" "completed")
                                                              '("t2" "completed"))
                                (efrit-todo-gptel-test--text "Both done."))))
               (session (efrit-todo-gptel-session chat))
               (system (efrit-todo-gptel-test--system (car requests))))
          (efrit-todo-gptel-test--check-requests requests)
          (should (= (length requests) 4))
          (should (= (length (efrit-todo-gptel-test-continuations requests)) 1))
          (should (string-prefix-p "You plan large things." system))
          (should (efrit-todo-gptel-test--system-has-guidance-p (car requests)))
          (dolist (request requests)
            (should (equal (alist-get 'model request) "fake-large"))
            (should (equal (efrit-todo-gptel-test--system request) system))
            (should (member "todo_write" (efrit-todo-gptel-test--tool-names request))))
          (should (equal (plist-get (efrit-todo-counts session) :completed) 2))
          ;; The chat's own model is back for the next prompt.
          (let ((next (efrit-todo-gptel-test-send
                       chat "Thanks" (list (efrit-todo-gptel-test--text "You are welcome.")))))
            (should (equal (alist-get 'model (car next)) "fake"))
            (should-not (efrit-todo-gptel-test--system-has-guidance-p (car next)))))
      (setq gptel--known-presets (assq-delete-all 'efrit-todo-test-large gptel--known-presets))
      (efrit-todo-gptel-mode (if was-on 1 -1)))))

(ert-deftest efrit-todo-gptel-test-an-older-gptel-is-refused ()
  "The mode refuses a gptel before 0.9.9.4, naming the version it needs.
It stays off and adds no hook; 0.9.9.4 and later are taken."
  (let ((was-on efrit-todo-gptel-mode))
    (unwind-protect
        (progn
          (efrit-todo-gptel-mode -1)
          ;; gptel before November 2025 had no `gptel-version' at all.
          (dolist (old '("0.9.9.3" "0.9.8.5" "0.9" nil))
            (let ((gptel-version old))
              (let ((err (should-error (efrit-todo-gptel-mode 1) :type 'user-error)))
                (should (string-match-p "gptel 0\\.9\\.9\\.4 or later" (cadr err)))
                (when old (should (string-search old (cadr err)))))
              (should-not efrit-todo-gptel-mode)
              (should-not (efrit-todo-gptel-test--ours-in-hooks))
              (should-not (advice-member-p #'efrit-todo-gptel--abort 'gptel-abort))))
          (dolist (new '("0.9.9.4" "0.9.9.5" "0.9.10" "1.0"))
            (let ((gptel-version new))
              (efrit-todo-gptel-mode 1)
              (should efrit-todo-gptel-mode)
              (should (efrit-todo-gptel-test--ours-in-hooks))
              (efrit-todo-gptel-mode -1))))
      (efrit-todo-gptel-mode (if was-on 1 -1)))))

(defun efrit-todo-gptel-test--ours-in-hooks ()
  "Return the hooks that hold one of the mode's functions."
  (seq-filter (lambda (entry)
                (and (boundp (nth 0 entry))
                     (memq (nth 1 entry) (ensure-list (default-value (nth 0 entry))))))
              efrit-todo-gptel--hooks))

;;;; The Task tools

(defun efrit-todo-gptel-test--task (name &rest keys-and-values)
  "Return an answer calling Task tool NAME with KEYS-AND-VALUES (key, value, ...)."
  (let ((input nil))
    (while keys-and-values
      (push (cons (intern (pop keys-and-values)) (pop keys-and-values)) input))
    (efrit-todo-gptel-test--tool name (nreverse input))))

(defconst efrit-todo-gptel-test--task-tools
  '("TaskCreate" "TaskUpdate" "TaskGet" "TaskList" "todo_pause" "echo")
  "The tools of a chat that plans with the Task tools.")

(ert-deftest efrit-todo-gptel-test-plans-with-the-task-tools ()
  "Two tasks, the second blocked by the first: done in order through gptel."
  (efrit-todo-gptel-test--with-mode
    (let* ((efrit-todo-tool-style 'tasks)
           (chat (efrit-todo-gptel-test--chat efrit-todo-gptel-test--task-tools))
           (requests (efrit-todo-gptel-test-send
                      chat "Write a parser for the config, then test it"
                      (list (efrit-todo-gptel-test--task "TaskCreate" "subject" "Write the parser"
                                                         "activeForm" "Writing the parser")
                            (efrit-todo-gptel-test--task "TaskCreate" "subject" "Test the parser"
                                                         "blockedBy" ["t1"])
                            (efrit-todo-gptel-test--task "TaskUpdate" "taskId" "t2"
                                                         "status" "in_progress")
                            (efrit-todo-gptel-test--task "TaskUpdate" "taskId" "t1"
                                                         "status" "in_progress")
                            (efrit-todo-gptel-test--tool "echo" '((text . "parsed")))
                            (efrit-todo-gptel-test--task "TaskUpdate" "taskId" "1"
                                                         "status" "completed")
                            (efrit-todo-gptel-test--task "TaskList")
                            (efrit-todo-gptel-test--task "TaskUpdate" "taskId" "#2"
                                                         "status" "in_progress")
                            (efrit-todo-gptel-test--tool "echo" '((text . "tested")))
                            (efrit-todo-gptel-test--task "TaskUpdate" "taskId" "t2"
                                                         "status" "completed")
                            (efrit-todo-gptel-test--text "Parser written and tested."))))
           (results (efrit-todo-gptel-test-tool-results requests))
           (session (efrit-todo-gptel-session chat)))
      (efrit-todo-gptel-test--check-requests requests)
      (should (= (length requests) 11))
      (should (equal (sort (efrit-todo-gptel-test--tool-names (car requests)) #'string<)
                     (sort (copy-sequence efrit-todo-gptel-test--task-tools) #'string<)))
      (should (string-match-p "TaskCreate" (efrit-todo-gptel-test--system (car requests))))
      (should (string-match-p "t2 is blocked by t1 (pending)" (nth 2 results)))
      (should (string-match-p "t2 is ready now" (nth 5 results)))
      (should (string-match-p "^ *t2 \\[pending\\] Test the parser$" (nth 6 results)))
      (should (equal (mapcar (lambda (item) (list (plist-get item :id) (plist-get item :status)))
                             (efrit-todo-list session))
                     '(("t1" completed) ("t2" completed))))
      (should (equal (mapcar (lambda (entry) (plist-get entry :tool)) (efrit-todo-ledger session))
                     '("TaskCreate" "TaskCreate" "TaskUpdate" "TaskUpdate" "echo" "TaskUpdate"
                       "TaskList" "TaskUpdate" "echo" "TaskUpdate")))
      ;; All done: no continuation, no stop.
      (should-not (efrit-todo-gptel-test-continuations requests))
      (should-not (efrit-todo-stopped session)))))

(defun efrit-todo-gptel-test--names-task-tools-only (text)
  "Return non-nil if TEXT names TaskUpdate and not todo_write."
  (and (string-search "TaskUpdate" text) (not (string-search "todo_write" text))))

(defun efrit-todo-gptel-test--echoes (n)
  "Return N answers calling echo, each with another text."
  (mapcar (lambda (k) (efrit-todo-gptel-test--tool "echo" `((text . ,(format "look %d" k)))))
          (number-sequence 1 n)))

(ert-deftest efrit-todo-gptel-test-texts-name-only-the-task-tools ()
  "In the style tasks, efrit-todo's texts name TaskUpdate, never todo_write.
The reminder and the continuations in one chat; the breaker's
warning and refusal in another."
  (efrit-todo-gptel-test--with-mode
    (let* ((efrit-todo-tool-style 'tasks)
           (chat (efrit-todo-gptel-test--chat efrit-todo-gptel-test--task-tools))
           (requests (efrit-todo-gptel-test-send
                      chat "Look around, then report"
                      (append (list (efrit-todo-gptel-test--task "TaskCreate" "subject" "Look around")
                                    (efrit-todo-gptel-test--task "TaskCreate" "subject" "Report")
                                    (efrit-todo-gptel-test--task "TaskUpdate" "taskId" "t1"
                                                                 "status" "in_progress"))
                              (efrit-todo-gptel-test--echoes 4)
                              (make-list 5 (efrit-todo-gptel-test--text "That is all.")))))
           (results (efrit-todo-gptel-test-tool-results requests))
           (continuations (efrit-todo-gptel-test-continuations requests))
           (reminder (seq-find (lambda (text) (string-search "[efrit-todo reminder]" text))
                               results)))
      (efrit-todo-gptel-test--check-requests requests)
      (should (= (length continuations) 2))
      (dolist (text (list reminder (car continuations)))
        (should (stringp text))
        (should (efrit-todo-gptel-test--names-task-tools-only text)))
      (dolist (text (append results continuations))
        (should-not (string-search "todo_write" text))))
    (let* ((efrit-todo-tool-style 'tasks)
           (efrit-todo-breaker-without-progress 6)
           (chat (efrit-todo-gptel-test--chat efrit-todo-gptel-test--task-tools))
           (requests (efrit-todo-gptel-test-send
                      chat "Look around"
                      (append (list (efrit-todo-gptel-test--task "TaskCreate" "subject" "Look around")
                                    (efrit-todo-gptel-test--task "TaskUpdate" "taskId" "t1"
                                                                 "status" "in_progress"))
                              (efrit-todo-gptel-test--echoes 12))))
           (results (efrit-todo-gptel-test-tool-results requests))
           (warning (seq-find (lambda (text) (string-search "other tools will be refused" text))
                              results))
           (refusal (seq-find (lambda (text) (string-search "was not run" text)) results))
           (session (efrit-todo-gptel-session chat)))
      (unwind-protect
          (progn
            (efrit-todo-gptel-test--check-requests requests)
            (should (plist-get (efrit-todo-breaker session) :tripped))
            (dolist (text (list warning refusal))
              (should (stringp text))
              (should (efrit-todo-gptel-test--names-task-tools-only text)))
            (dolist (text results)
              (should-not (string-search "todo_write" text))))
        ;; A tripped breaker anywhere makes every session's check go to
        ;; the module: leave none behind for the other tests.
        (efrit-todo-breaker-reset session)))))

(ert-deftest efrit-todo-gptel-test-a-plan-made-one-task-at-a-time-goes-through ()
  "Thirty TaskCreate calls, one per response: none refused, none warned about."
  (efrit-todo-gptel-test--with-mode
    (let* ((efrit-todo-tool-style 'tasks)
           (chat (efrit-todo-gptel-test--chat efrit-todo-gptel-test--task-tools))
           (plan (mapcar (lambda (k)
                           (efrit-todo-gptel-test--task
                            "TaskCreate" "subject" (format "Update the docstring of function-%d" k)))
                         (number-sequence 1 30)))
           (requests (efrit-todo-gptel-test-send
                      chat "Plan thirty steps"
                      (append plan
                              (list (efrit-todo-gptel-test--tool
                                     "todo_pause" '((reason . "The plan is ready for review.")))
                                    (efrit-todo-gptel-test--text "The plan is ready.")))))
           (results (efrit-todo-gptel-test-tool-results requests))
           (session (efrit-todo-gptel-session chat)))
      (efrit-todo-gptel-test--check-requests requests)
      (should (= (length (efrit-todo-list session)) 30))
      (should (= (length results) 31))
      (dolist (result results)
        (should-not (string-match-p "Warning\\|Vary\\|refused\\|not run" result)))
      (should-not (plist-get (efrit-todo-breaker session) :tripped)))))

(ert-deftest efrit-todo-gptel-test-the-preset-follows-the-tool-style ()
  "The preset offers the tools of `efrit-todo-tool-style', also after it changes."
  (let ((style efrit-todo-tool-style)
        (tools (lambda ()
                 (sort (copy-sequence
                        (plist-get (plist-get (gptel-get-preset 'efrit-todo) :tools) :append))
                       #'string<))))
    (unwind-protect
        (progn
          (setq efrit-todo-tool-style 'tasks)
          (should (equal (funcall tools)
                         '("TaskCreate" "TaskGet" "TaskList" "TaskUpdate" "todo_pause")))
          (setq efrit-todo-tool-style 'both)
          (should (equal (funcall tools)
                         '("TaskCreate" "TaskGet" "TaskList" "TaskUpdate" "todo_pause"
                           "todo_write")))
          (setq efrit-todo-tool-style 'todo)
          (should (equal (funcall tools) '("todo_pause" "todo_write")))
          ;; Every tool is registered, whatever the style.
          (dolist (name '("TaskCreate" "TaskUpdate" "TaskGet" "TaskList" "todo_write"))
            (should (gptel-get-tool name))))
      (setq efrit-todo-tool-style style))))

(ert-deftest efrit-todo-gptel-test-mode-off-gives-gptel-back ()
  "Turning the mode off removes every hook and the advice."
  (let ((was-on efrit-todo-gptel-mode))
    (unwind-protect
        (progn
          (efrit-todo-gptel-mode -1)
          ;; Turned on where the hooks are local, as in gptel's prompt
          ;; buffer, the mode still changes their global values.
          (with-temp-buffer
            (setq-local gptel-prompt-transform-functions '(ignore))
            (setq-local gptel-post-response-functions '(ignore))
            (efrit-todo-gptel-mode 1)
            (should (equal gptel-prompt-transform-functions '(ignore)))
            (should (equal gptel-post-response-functions '(ignore))))
          ;; Every hook gptel has; none that it has not.
          (should (= (length (efrit-todo-gptel-test--ours-in-hooks))
                     (seq-count (lambda (entry)
                                  (or efrit-todo-gptel-test--post-tool-hook-p
                                      (not (eq (car entry) 'gptel-post-tool-call-functions))))
                                efrit-todo-gptel--hooks)))
          (unless efrit-todo-gptel-test--post-tool-hook-p
            (should-not (boundp 'gptel-post-tool-call-functions)))
          (should (advice-member-p #'efrit-todo-gptel--abort 'gptel-abort))
          (efrit-todo-gptel-mode -1)
          (should-not (efrit-todo-gptel-test--ours-in-hooks))
          (should-not (advice-member-p #'efrit-todo-gptel--abort 'gptel-abort)))
      (efrit-todo-gptel-mode (if was-on 1 -1)))))

(ert-deftest efrit-todo-gptel-test-unloading-gives-gptel-back ()
  "Unloading the file removes the tools, the preset, the hooks and the advice."
  (efrit-todo-gptel-mode 1)
  (let ((chat (efrit-todo-gptel-test--chat)))
    (efrit-todo-gptel-session chat)
    (unwind-protect
        (progn
          (unload-feature 'efrit-todo-gptel t)
          (should-not (ignore-errors (gptel-get-tool "todo_write")))
          (should-not (ignore-errors (gptel-get-tool "todo_pause")))
          (should-not (ignore-errors (gptel-get-tool "TaskUpdate")))
          (should-not (memq #'efrit-todo-gptel--style-changed
                            (get-variable-watchers 'efrit-todo-tool-style)))
          (should (gptel-get-tool "echo"))
          (should-not (assq 'efrit-todo gptel--known-presets))
          (should-not (advice-member-p 'efrit-todo-gptel--abort 'gptel-abort))
          (dolist (hook '(gptel-pre-tool-call-functions gptel-post-tool-call-functions
                          gptel-post-response-functions gptel-prompt-transform-functions))
            (should-not (seq-some (lambda (f) (and (symbolp f)
                                                   (string-prefix-p "efrit-todo-gptel"
                                                                    (symbol-name f))))
                                  (and (boundp hook) (ensure-list (default-value hook))))))
          (with-current-buffer chat
            (should (equal (mapcar #'gptel-tool-name gptel-tools) '("echo" "quiet" "fail")))
            (should-not (local-variable-p 'efrit-todo-current-session))))
      (require 'efrit-todo-gptel)
      (should (gptel-get-tool "todo_write")))))

;;;; Shared lists

(ert-deftest efrit-todo-gptel-test-a-list-id-makes-chats-share-a-list ()
  "Chats whose buffer names a list in `efrit-todo-list-id' work on that list.
The second chat sees the first one's items with their ids and goes
on with them; a chat without a list id keeps a list of its own."
  (efrit-todo-gptel-test--with-mode
    (let ((list (format "gptel-shared-%d" (cl-incf efrit-todo-gptel-test--buffers)))
          (efrit-todo--shared-lists efrit-todo--shared-lists)
          (one (efrit-todo-gptel-test--chat))
          (two (efrit-todo-gptel-test--chat))
          (own (efrit-todo-gptel-test--chat)))
      (with-current-buffer one (setq-local efrit-todo-list-id list))
      (with-current-buffer two (setq-local efrit-todo-list-id list))
      (efrit-todo-gptel-test-send
       one "Plan it"
       (list (efrit-todo-gptel-test--todos '("Read the code" "completed") '("Fix the bug" "pending"))
             (efrit-todo-gptel-test--tool "todo_pause" '(("reason" . "the other chat fixes it")))
             (efrit-todo-gptel-test--text "Over to the other chat.")))
      (should (equal (efrit-todo-gptel-session one) list))
      (should (equal (efrit-todo-gptel-session two) list))
      (should (member list (efrit-todo-shared-lists)))
      (let* ((requests (efrit-todo-gptel-test-send
                        two "Fix it"
                        (list (efrit-todo-gptel-test--merge '("t2" "completed"))
                              (efrit-todo-gptel-test--text "Fixed."))))
             (results (efrit-todo-gptel-test-tool-results requests)))
        (efrit-todo-gptel-test--check-requests requests)
        (should (string-match-p "t2 completed" (car results))))
      (should (equal (mapcar (lambda (i) (list (plist-get i :id) (plist-get i :status)))
                             (efrit-todo-list list))
                     '(("t1" completed) ("t2" completed))))
      (should-not (equal (efrit-todo-gptel-session own) list))
      (should-not (efrit-todo-list (efrit-todo-gptel-session own)))
      (dolist (buffer (list one two own))
        (with-current-buffer buffer (set-buffer-modified-p nil))
        (kill-buffer buffer)))))

;; Written from the contract: a chat on a shared list works under its
;; own name beside the list's other agents.
(ert-deftest efrit-todo-gptel-test-a-chat-on-a-shared-list-is-an-agent-of-its-own ()
  "A chat's turn on a shared list is an agent named after the chat.
Another agent runs t1.  The chat's whole-list todo_write keeps t1;
its change of t1 is refused; while the turn runs, the items it adds
are the chat's and the chat is among the list's agents.  When the
turn ends its open items are free, and the list is not left as
unfinished."
  (efrit-todo-gptel-test--with-mode
    (let* ((list (format "gptel-team-%d" (cl-incf efrit-todo-gptel-test--buffers)))
           (efrit-todo--shared-lists efrit-todo--shared-lists)
           (chat (efrit-todo-gptel-test--chat))
           (name (buffer-name chat))
           other seen)
      (efrit-todo-share-list list)
      (setq other (efrit-todo-agent-start "other" list t))
      (let ((efrit-todo-agent other))
        (efrit-todo-task-create '(("subject" . "Review the patch")) list)
        (efrit-todo-task-update '(("taskId" . "t1") ("status" . "in_progress")) list))
      ;; The chat is in a project whose .dir-locals.el names the list.
      (let ((root (file-name-as-directory (make-temp-file "efrit-todo-project" t)))
            (enable-local-variables :safe))
        (unwind-protect
            (with-current-buffer chat
              (with-temp-file (expand-file-name ".dir-locals.el" root)
                (prin1 `((nil . ((efrit-todo-list-id . ,list)))) (current-buffer)))
              (setq default-directory root)
              (hack-dir-local-variables-non-file-buffer)
              (should (equal efrit-todo-list-id list))
              ;; The directory goes; gptel's processes start elsewhere.
              (setq default-directory temporary-file-directory))
          (delete-directory root t)))
      (let* ((requests
              (efrit-todo-gptel-test-send
               chat "Plan and fix"
               (list (efrit-todo-gptel-test--todos '("Read the code" "completed")
                                                   '("Fix the bug" "in_progress"))
                     (lambda (_request)
                       (setq seen (list (mapcar (lambda (i) (plist-get i :owner)) (efrit-todo-list list))
                                        (mapcar (lambda (a) (plist-get a :name)) (efrit-todo-agents list))))
                       (efrit-todo-gptel-test--merge '("t1" "completed")))
                     (efrit-todo-gptel-test--tool "todo_pause" '(("reason" . "over to the others")))
                     (efrit-todo-gptel-test--text "Paused."))))
             (results (efrit-todo-gptel-test-tool-results requests)))
        (efrit-todo-gptel-test--check-requests requests)
        (should (equal seen (list (list other name name) (list other name))))
        (should (string-match-p "t1 is owned by other" (nth 1 results))))
      (should (equal (mapcar (lambda (i) (list (plist-get i :id) (plist-get i :status) (plist-get i :owner)))
                             (efrit-todo-list list))
                     `(("t1" in-progress ,other) ("t2" completed ,name) ("t3" pending nil))))
      (should (equal (mapcar (lambda (a) (plist-get a :name)) (efrit-todo-agents list)) (list other)))
      (with-current-buffer chat (should-not (local-variable-p 'efrit-todo-agent)))
      (should-not (efrit-todo-stopped list))
      (efrit-todo-agent-end other list)
      (with-current-buffer chat (set-buffer-modified-p nil))
      (kill-buffer chat))))

(provide 'efrit-todo-gptel-test)
;;; efrit-todo-gptel-test.el ends here
