;;; efrit-todo-real-gptel.el --- Load a real gptel for the gptel scenarios -*- lexical-binding: t; -*-

;;; Commentary:

;; `make test-gptel' (and test/efrit-todo-gptel-test.el whenever
;; GPTEL_DIR is set and not empty) loads this file to run the gptel
;; scenarios through the gptel checkout that GPTEL_DIR names.
;; GPTEL_LOAD_PATH may add directories (colon-separated) for its
;; dependencies: on Emacs 28 gptel needs compat (a checkout of
;; emacs-compat/compat loads from source), and its menu a transient
;; newer than Emacs's own.  Without them on the path, checkouts beside
;; GPTEL_DIR (compat*, transient*, and what they need in turn), or
;; what package.el or Debian installed, are used when recent enough.
;;
;; gptel is not changed at all: it talks HTTP (over curl, or url.el
;; with EFRIT_TODO_GPTEL_CURL=0) to a server run inside this Emacs on
;; 127.0.0.1, as OpenAI's chat completions (streamed with
;; EFRIT_TODO_GPTEL_STREAM=1) or, with EFRIT_TODO_GPTEL_BACKEND=anthropic,
;; as Anthropic's Messages API.  The server answers each request with
;; what `efrit-todo-gptel-harness-transport' says (a JSON string, `error'
;; for an HTTP 500, or `hang' to leave the request unanswered until it is
;; aborted); Anthropic's requests and answers are translated from and to
;; OpenAI's shape, in which the scenarios read them.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'seq)
(require 'json)

(defun efrit-todo-real-gptel--candidates (name)
  "Return directories with NAME.el: checkouts beside gptel's, or installed.
A checkout is a directory NAME* beside GPTEL_DIR, or its lisp/; an
install is package.el's or Debian's NAME-VERSION directory."
  (let ((beside (expand-file-name (concat "../" name "*")
                                  (directory-file-name (getenv "GPTEL_DIR")))))
    (seq-filter (lambda (dir) (file-exists-p (expand-file-name (concat name ".el") dir)))
                (append (file-expand-wildcards beside)
                        (file-expand-wildcards (concat beside "/lisp"))
                        (file-expand-wildcards (locate-user-emacs-file (concat "elpa/" name "-*")))
                        (file-expand-wildcards
                         (concat "/usr/share/emacs/site-lisp/elpa/" name "-*"))))))

(defun efrit-todo-real-gptel--package (file)
  "Return the package description in the headers of FILE, or nil."
  (with-temp-buffer
    (insert-file-contents file)
    (ignore-errors (package-buffer-info))))

(defun efrit-todo-real-gptel--requirements (file)
  "Return the packages FILE requires, as (NAME VERSION-LIST)."
  (let ((package (efrit-todo-real-gptel--package file)))
    (and package (package-desc-reqs package))))

(defun efrit-todo-real-gptel--version (file)
  "Return the version of the package FILE heads, a list, or (0)."
  (let ((package (and file (efrit-todo-real-gptel--package file))))
    (or (and package (package-desc-version package)) '(0))))

(defun efrit-todo-real-gptel--provide (name &optional version)
  "Put a library NAME of VERSION (a list) or later on `load-path', if one is found.
Its own requirements are looked for the same way.  Return non-nil
when NAME is on the path, found or already there."
  (or (and (locate-library name)
           (or (null version)
               (version-list-<= version (efrit-todo-real-gptel--version
                                         (locate-library (concat name ".el"))))))
      (seq-some
       (lambda (dir)
         (let ((file (expand-file-name (concat name ".el") dir)))
           (when (and (or (null version)
                          (version-list-<= version (efrit-todo-real-gptel--version file)))
                      (seq-every-p (lambda (requirement)
                                     (or (memq (car requirement) '(emacs seq))
                                         (efrit-todo-real-gptel--provide
                                          (symbol-name (car requirement)))))
                                   (efrit-todo-real-gptel--requirements file)))
             (add-to-list 'load-path dir)
             t)))
       (efrit-todo-real-gptel--candidates name))))

(require 'package)

(let ((root (getenv "GPTEL_DIR")))
  (unless (and root (file-exists-p (expand-file-name "gptel.el" root)))
    (error "GPTEL_DIR does not name a gptel checkout: %S" root))
  (dolist (dir (reverse (split-string (or (getenv "GPTEL_LOAD_PATH") "") path-separator t)))
    (add-to-list 'load-path (expand-file-name dir)))
  (add-to-list 'load-path (expand-file-name root) t)
  ;; gptel needs compat before Emacs 30, and its menu a recent transient
  ;; (Emacs 28 has 0.3.7): take checkouts beside gptel's, or what
  ;; package.el or Debian installed, when none is on the path.
  (efrit-todo-real-gptel--provide "compat")
  (let ((transient (assq 'transient (efrit-todo-real-gptel--requirements
                                     (expand-file-name "gptel.el" root)))))
    (efrit-todo-real-gptel--provide "transient" (cadr transient))))

;; Required by name at run time: the byte-compiler has no gptel to load.
(dolist (feature '(gptel gptel-openai gptel-anthropic))
  (require feature))

;; The menu, when a transient recent enough was found.
(condition-case err
    (require 'gptel-transient)
  (error (message "efrit-todo-real-gptel: no gptel menu: %s" (error-message-string err))))

(defvar gptel-version)
(defvar gptel-backend)
(defvar gptel-model)
(defvar gptel-use-curl)
(defvar gptel-stream)
(defvar gptel--request-alist)
(declare-function gptel-make-openai "gptel-openai" (name &rest args))
(declare-function gptel-make-anthropic "gptel-anthropic" (name &rest args))
(declare-function gptel-fsm-info "gptel-request" (fsm))

(defconst efrit-todo-gptel-harness-kind
  (format "gptel %s from %s%s, compat from %s, %s, over %s, %s"
          gptel-version (getenv "GPTEL_DIR")
          (let ((default-directory (file-name-as-directory (getenv "GPTEL_DIR"))))
            (condition-case nil
                (concat " at commit "
                        (string-trim (car (process-lines "git" "rev-parse" "--short" "HEAD"))))
              (error "")))
          (if (featurep 'compat) (file-name-directory (locate-library "compat")) "nowhere")
          (if (featurep 'gptel-transient)
              (format "transient %s" (bound-and-true-p transient-version))
            "no menu")
          (cond ((or (equal (getenv "EFRIT_TODO_GPTEL_CURL") "0") (not (executable-find "curl")))
                 "url.el")
                ((equal (getenv "EFRIT_TODO_GPTEL_STREAM") "1") "curl, streamed")
                (t "curl"))
          (if (equal (getenv "EFRIT_TODO_GPTEL_BACKEND") "anthropic")
              "Anthropic's API" "OpenAI's API"))
  "What the gptel scenarios run against.")

(defvar efrit-todo-gptel-harness-transport nil
  "Function from a request's JSON to the response's JSON, `error' or `hang'.")

;;;; The server

(defun efrit-todo-real-gptel--reply (process status body &optional type)
  "Send an HTTP reply with STATUS and BODY on PROCESS and close it.
TYPE is the content type, JSON unless given."
  (let ((bytes (encode-coding-string body 'utf-8)))
    (process-send-string
     process
     (format "HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
             status (or type "application/json") (length bytes)))
    (process-send-string process bytes)
    (process-send-eof process)))

(defun efrit-todo-real-gptel--events (response)
  "Return RESPONSE, a chat completion in JSON, as the stream of its events.
As OpenAI streams: a chunk with the text, one chunk per tool call (its
index, id, name and arguments), one with the finish reason, then the
end of the stream."
  (let* ((parsed (json-parse-string response :object-type 'alist :array-type 'list
                                    :null-object nil :false-object :json-false))
         (choice (car (alist-get 'choices parsed)))
         (message (alist-get 'message choice))
         (event (lambda (delta &optional finish)
                  (concat "data: "
                          (json-encode `((choices . [((index . 0) (delta . ,delta)
                                                      ,@(and finish `((finish_reason . ,finish))))])))
                          "\n\n"))))
    (concat (funcall event `((role . "assistant")
                             ,@(and (alist-get 'content message)
                                    `((content . ,(alist-get 'content message))))))
            (mapconcat (lambda (call)
                         (funcall event `((tool_calls . [,call]))))
                       (seq-map-indexed (lambda (call index) (cons (cons 'index index) call))
                                        (alist-get 'tool_calls message))
                       "")
            (funcall event (make-hash-table) (alist-get 'finish_reason choice))
            "data: [DONE]\n\n")))

;;;; Anthropic's Messages API, in and out of OpenAI's shape

(defun efrit-todo-real-gptel--text-of (content)
  "Return the text of CONTENT: a string, or a list of content blocks."
  (if (stringp content)
      content
    (mapconcat (lambda (block) (or (alist-get 'text block) ""))
               (seq-filter (lambda (block) (equal (alist-get 'type block) "text")) content)
               "")))

(defun efrit-todo-real-gptel--from-anthropic (body)
  "Return BODY, a request to Anthropic's Messages API, as OpenAI's JSON.
The scripted model and the scenarios read every request in the shape
of OpenAI's chat completions."
  (let* ((request (json-parse-string body :object-type 'alist :array-type 'list
                                     :null-object nil :false-object :json-false))
         (system (alist-get 'system request))
         (messages (and system `(((role . "system")
                                  (content . ,(efrit-todo-real-gptel--text-of system)))))))
    (dolist (message (alist-get 'messages request))
      (let ((role (alist-get 'role message))
            (content (alist-get 'content message)))
        (cond
         ((stringp content)
          (push `((role . ,role) (content . ,content)) messages))
         ((equal role "assistant")
          (let ((text (efrit-todo-real-gptel--text-of content))
                (calls (delq nil (mapcar
                                  (lambda (block)
                                    (when (equal (alist-get 'type block) "tool_use")
                                      `((id . ,(alist-get 'id block)) (type . "function")
                                        (function (name . ,(alist-get 'name block))
                                                  (arguments . ,(json-encode
                                                                 (or (alist-get 'input block)
                                                                     (make-hash-table))))))))
                                  content))))
            (push `((role . "assistant") (content . ,(and (not (string-empty-p text)) text))
                    ,@(and calls `((tool_calls . ,(vconcat calls)))))
                  messages)))
         (t
          (dolist (block content)
            (when (equal (alist-get 'type block) "tool_result")
              (push `((role . "tool") (tool_call_id . ,(alist-get 'tool_use_id block))
                      (content . ,(efrit-todo-real-gptel--text-of (alist-get 'content block))))
                    messages)))
          (let ((text (efrit-todo-real-gptel--text-of content)))
            (unless (string-empty-p text)
              (push `((role . "user") (content . ,text)) messages)))))))
    (json-encode
     `((model . ,(alist-get 'model request))
       (messages . ,(vconcat (nreverse messages)))
       ,@(and (alist-get 'tools request)
              `((tools . ,(vconcat
                           (mapcar (lambda (tool)
                                     `((type . "function")
                                       (function (name . ,(alist-get 'name tool))
                                                 (description . ,(alist-get 'description tool))
                                                 (parameters . ,(alist-get 'input_schema tool)))))
                                   (alist-get 'tools request))))))))))

(defun efrit-todo-real-gptel--to-anthropic (response)
  "Return RESPONSE, an OpenAI chat completion in JSON, as Anthropic's message."
  (let* ((parsed (json-parse-string response :object-type 'alist :array-type 'list
                                    :null-object nil :false-object :json-false))
         (message (alist-get 'message (car (alist-get 'choices parsed))))
         (calls (alist-get 'tool_calls message)))
    (json-encode
     `((id . "msg_efrit_todo_test") (type . "message") (role . "assistant") (model . "fake")
       (content . ,(vconcat
                    (and (alist-get 'content message)
                         `(((type . "text") (text . ,(alist-get 'content message)))))
                    (mapcar (lambda (call)
                              (let ((function (alist-get 'function call)))
                                `((type . "tool_use") (id . ,(alist-get 'id call))
                                  (name . ,(alist-get 'name function))
                                  (input . ,(json-parse-string (alist-get 'arguments function))))))
                            calls)))
       (stop_reason . ,(if calls "tool_use" "end_turn"))
       (usage (input_tokens . 1) (output_tokens . 1))))))

(defun efrit-todo-real-gptel--filter (process chunk)
  "Collect CHUNK of a request on PROCESS; answer it once it is whole."
  (let ((data (concat (or (process-get process 'data) "") chunk)))
    (process-put process 'data data)
    (when (string-match "\r\n\r\n" data)
      (let* ((head (substring data 0 (match-beginning 0)))
             (body (substring data (match-end 0)))
             (length (and (string-match "^content-length: *\\([0-9]+\\)" (downcase head))
                          (string-to-number (match-string 1 (downcase head))))))
        (when (and length (>= (length body) length) (not (process-get process 'answered)))
          (process-put process 'answered t)
          (let* ((anthropic (string-match-p "\\`POST /v1/messages" head))
                 (request (decode-coding-string body 'utf-8))
                 (response (condition-case err
                               (funcall efrit-todo-gptel-harness-transport
                                        (if anthropic
                                            (efrit-todo-real-gptel--from-anthropic request)
                                          request))
                             (error (message "Test server: %S" err) 'error))))
            (when (and anthropic (stringp response))
              (setq response (efrit-todo-real-gptel--to-anthropic response)))
            (cond ((eq response 'hang))
                  ((and (stringp response)
                        (string-match-p "\"stream\": *true" body))
                   (efrit-todo-real-gptel--reply process "200 OK"
                                                 (efrit-todo-real-gptel--events response)
                                                 "text/event-stream"))
                  ((stringp response) (efrit-todo-real-gptel--reply process "200 OK" response))
                  (t (efrit-todo-real-gptel--reply
                      process "500 Internal Server Error"
                      "{\"error\":{\"message\":\"scripted failure\",\"type\":\"server_error\"}}")))))))))

(defvar efrit-todo-real-gptel--server
  (make-network-process :name "efrit-todo-gptel-server" :server t :host "127.0.0.1"
                        :service t :family 'ipv4 :coding 'binary
                        :filter #'efrit-todo-real-gptel--filter)
  "The OpenAI-compatible server gptel talks to.")

(defvar efrit-todo-real-gptel--backend
  (let ((host (format "127.0.0.1:%d" (process-contact efrit-todo-real-gptel--server :service))))
    (if (equal (getenv "EFRIT_TODO_GPTEL_BACKEND") "anthropic")
        (gptel-make-anthropic "efrit-todo-test"
          :host host :protocol "http" :endpoint "/v1/messages" :stream nil :key "none"
          :models '(fake fake-large))
      (gptel-make-openai "efrit-todo-test"
        :host host :protocol "http" :endpoint "/v1/chat/completions" :stream t :key "none"
        :models '(fake fake-large))))
  "The gptel backend for the test server: OpenAI's by default.
With EFRIT_TODO_GPTEL_BACKEND=anthropic, Anthropic's (not streamed).")

;;;; The harness

;; gptel reads `gptel-use-curl' where the request is sent, not in the
;; chat buffer: set it globally.  curl is gptel's default when found;
;; EFRIT_TODO_GPTEL_CURL=0 makes gptel use url.el instead.  With curl,
;; EFRIT_TODO_GPTEL_STREAM=1 has responses streamed, as server-sent
;; events.
(setq gptel-use-curl (and (not (equal (getenv "EFRIT_TODO_GPTEL_CURL") "0"))
                          (executable-find "curl")
                          t)
      gptel-stream (and gptel-use-curl (equal (getenv "EFRIT_TODO_GPTEL_STREAM") "1")))

(defun efrit-todo-gptel-harness-chat-buffer (name)
  "Return a fresh chat buffer called NAME, talking to the test server."
  (when (get-buffer name)
    (let ((kill-buffer-query-functions nil))
      (kill-buffer name)))
  (with-current-buffer (get-buffer-create name)
    (text-mode)
    (setq-local gptel-backend efrit-todo-real-gptel--backend
                gptel-model 'fake
                gptel-stream (default-value 'gptel-stream))
    (current-buffer)))

(defun efrit-todo-gptel-harness-busy-p (buffer)
  "Return non-nil while a request of BUFFER is in flight."
  (seq-some (lambda (entry)
              (eq (plist-get (gptel-fsm-info (cadr entry)) :buffer) buffer))
            gptel--request-alist))

(provide 'efrit-todo-real-gptel)
;;; efrit-todo-real-gptel.el ends here
