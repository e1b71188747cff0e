;;; efrit-todo-bench-cost.el --- Bytes and cache-weighted cost of efrit-do sessions -*- lexical-binding: t; -*-

;;; Commentary:

;; `make bench' runs `efrit-todo-bench-cost-run', which plays one
;; scripted efrit-do session of 12 and one of 100 todo items through the
;; stand-in efrit-do loop (test/efrit-todo-fake-efrit.el), driven by the
;; scripted Claude of test/efrit-todo-scenarios.el, and prints what the
;; requests of each session weigh on three sides:
;;
;;   A  plain Efrit: `efrit-todo-efrit-mode' off, Efrit's own todo_write,
;;      the list in the system prompt; the model sends full lists;
;;   B  efrit-todo, the model sending the full list at every write, no
;;      ids, as models do today;
;;   C  efrit-todo, the model planning with a full list once, then
;;      recording each status change with "merge": true and the ids
;;      t1..tN the backend gave the plan.
;;
;; The script of a session: plan N items (the first in progress), then
;; for each item one eval_sexp and one todo_write recording the item
;; completed and the next one in progress, then session_complete.
;;
;; Rows: requests; bytes of the system prompt and of the messages
;; (their JSON) summed over all requests; bytes of the todo_write
;; results the model got and of the tool inputs it wrote; how often the
;; system prompt changed; and an input cost weighted by the prompt
;; cache, with bytes standing in for tokens.  Each request is a
;; sequence of blocks: the tools (one block), the system prompt (one
;; block), then every content block of every message.  Efrit marks
;; cache breakpoints after the tools, after the system prompt and after
;; the last block.  A request reads from the cache the longest prefix,
;; ending at a block boundary, that an earlier request ended a
;; breakpoint with (price 0.1 a byte); the rest up to its last
;; breakpoint is written to the cache (1.25 a byte); anything after it
;; would cost 1.0.
;;
;; The stand-in's system prompt is "You are Efrit." and the list, where
;; Efrit's is some 16 kB, which is paid for on every request that
;; misses the cache; so the bench puts a neutral filler of that size in
;; front of it (`efrit-todo-bench-cost-padding').
;;
;; When EFRIT_DIR names an Efrit checkout, a child Emacs plays the same
;; sessions through the real efrit-do loop (as test/efrit-todo-real-
;; efrit.el loads it), without padding, and prints its table too.

;;; Code:

(require 'cl-lib)
(require 'json)
(require 'seq)
(require 'subr-x)
(require 'efrit-todo)
;; The stand-in loop, unless a real Efrit was loaded first (the child
;; Emacs loads test/efrit-todo-real-efrit.el before this file).
(unless (featurep 'efrit-todo-real-efrit)
  (require 'efrit-todo-fake-efrit))
(require 'efrit-todo-efrit)

(defvar efrit-do--last-result)
(defvar efrit-do-async-max-iterations)
(defvar efrit-do-max-tool-calls-per-session)
(defvar efrit-do-max-same-tool-calls)
(declare-function efrit-do "efrit-do" (command))
(declare-function efrit-session-active "efrit-session-core" ())

;;;; Settings

(defconst efrit-todo-bench-cost-real-prompt-bytes 16283
  "Bytes of the system prompt of Efrit's efrit-do session requests.
Measured on Efrit a4d9001 (2026-07-04) by calling
`efrit-do--command-system-prompt' with a session id in batch Emacs;
its tools schema was 32490 bytes (41 tools).")

(defvar efrit-todo-bench-cost-padding efrit-todo-bench-cost-real-prompt-bytes
  "Bytes of filler put in front of the stand-in's system prompt, or 0.")

(defconst efrit-todo-bench-cost-sizes '(12 100)
  "Numbers of todo items of the sessions the table shows.")

(defconst efrit-todo-bench-cost-sides
  '((a "A plain" off full) (b "B full" on full) (c "C merge" on merge))
  "The sides compared: (KEY LABEL MODE STYLE).")

(defconst efrit-todo-bench-cost-prices '(:read 0.1 :write 1.25 :uncached 1.0)
  "Price of a byte read from the cache, written to it, and neither.")

;;;; The scripted model

(defvar efrit-todo-bench-cost--model-bytes 0
  "Bytes of the tool inputs the scripted model sent so far.")

(defvar efrit-todo-bench-cost--tool-counter 0
  "Makes the tool_use ids of the scripted model unique.")

(defun efrit-todo-bench-cost--item-content (k)
  "Return the content of item K: update one docstring."
  (format "Update the docstring of function-%d in file-%d.el" k k))

(defun efrit-todo-bench-cost--active-form (k)
  "Return the activeForm of item K."
  (format "Updating the docstring of function-%d in file-%d.el" k k))

(defun efrit-todo-bench-cost--full-list (n done)
  "Return the todo_write input for N items, the first DONE completed.
The item after them is in progress, the others pending; no ids, as a
model writes the whole list."
  `(("todos" . ,(vconcat
                 (mapcar (lambda (k)
                           `(("content" . ,(efrit-todo-bench-cost--item-content k))
                             ("status" . ,(cond ((<= k done) "completed")
                                                ((= k (1+ done)) "in_progress")
                                                (t "pending")))
                             ("activeForm" . ,(efrit-todo-bench-cost--active-form k))))
                         (number-sequence 1 n))))))

(defun efrit-todo-bench-cost--merge-change (n k)
  "Return the merge todo_write recording item K of N completed.
The next item, if any, goes in progress; items are named by the ids
t1..tN that the backend gave the plan."
  `(("merge" . t)
    ("todos" . ,(vconcat
                 `((("id" . ,(format "t%d" k)) ("status" . "completed")))
                 (and (< k n)
                      `((("id" . ,(format "t%d" (1+ k))) ("status" . "in_progress"))))))))

(defun efrit-todo-bench-cost--tool (name input)
  "Return the script step of a call of tool NAME with INPUT, an alist.
The step is a function of the request, as the scripted Claude takes
them, so that the bytes of INPUT are counted only when it is sent."
  (lambda (_request)
    (let ((json (json-encode input)))
      (cl-incf efrit-todo-bench-cost--model-bytes (string-bytes json))
      (json-encode
       `(("content" . [(("type" . "tool_use")
                        ("id" . ,(format "toolu_bench_%d"
                                         (cl-incf efrit-todo-bench-cost--tool-counter)))
                        ("name" . ,name)
                        ("input" . ,input))])
         ("stop_reason" . "tool_use"))))))

(defun efrit-todo-bench-cost-script (n style)
  "Return the command and script of a session of N items in STYLE.
STYLE is `full' (every todo_write sends the whole list) or `merge'
\(the plan is a full list, each status change a merge write)."
  (list
   (format "Update the docstrings of function-1 to function-%d, each in its own file (file-1.el to file-%d.el)"
           n n)
   (append
    (list (efrit-todo-bench-cost--tool "todo_write" (efrit-todo-bench-cost--full-list n 0)))
    (cl-loop for k from 1 to n
             append (list (efrit-todo-bench-cost--tool
                           "eval_sexp" `(("expr" . ,(format "(+ 1 %d)" k))))
                          (efrit-todo-bench-cost--tool
                           "todo_write"
                           (if (eq style 'merge)
                               (efrit-todo-bench-cost--merge-change n k)
                             (efrit-todo-bench-cost--full-list n k)))))
    (list (efrit-todo-bench-cost--tool
           "session_complete"
           `(("message" . ,(format "Updated the docstrings of all %d functions." n))))))))

;;;; Padding the system prompt

(defvar efrit-todo-bench-cost--last-filler nil
  "The filler of the last padding, as (BYTES . STRING).")

(defun efrit-todo-bench-cost--filler (bytes)
  "Return a neutral filler text of BYTES bytes."
  (unless (eql (car efrit-todo-bench-cost--last-filler) bytes)
    (let* ((line "This line stands in for the rest of Efrit's system prompt.\n")
           (text (apply #'concat (make-list (1+ (/ bytes (length line))) line))))
      (setq efrit-todo-bench-cost--last-filler (cons bytes (substring text 0 bytes)))))
  (cdr efrit-todo-bench-cost--last-filler))

(defun efrit-todo-bench-cost--pad (prompt)
  "Return PROMPT behind `efrit-todo-bench-cost-padding' bytes of filler."
  (if (and (stringp prompt) (> efrit-todo-bench-cost-padding 0))
      (concat (efrit-todo-bench-cost--filler efrit-todo-bench-cost-padding) prompt)
    prompt))

;;;; Reading the requests

(defvar efrit-todo-bench-cost--json-memo nil
  "JSON of messages and blocks already encoded, by object (eq).
Requests share their earlier messages, so each is encoded once.")

(defun efrit-todo-bench-cost--get (object key)
  "Return KEY, a string, of OBJECT: a hash table or an alist."
  (cond ((hash-table-p object) (gethash key object))
        ((consp object) (cdr (or (assoc key object) (assq (intern key) object))))))

(defun efrit-todo-bench-cost--marked-p (block)
  "Return non-nil if BLOCK carries a cache_control mark."
  (efrit-todo-bench-cost--get block "cache_control"))

(defun efrit-todo-bench-cost--bare (block)
  "Return BLOCK without its cache_control mark (a copy if it had one).
The mark tells the API where to cache; it is not part of the prefix."
  (cond ((not (efrit-todo-bench-cost--marked-p block)) block)
        ((hash-table-p block)
         (let ((copy (copy-hash-table block)))
           (remhash "cache_control" copy)
           copy))
        (t (seq-remove (lambda (pair) (member (car-safe pair) '("cache_control" cache_control)))
                       block))))

(defun efrit-todo-bench-cost--json (object)
  "Return the JSON of OBJECT with no cache_control in it, encoded once."
  (or (gethash object efrit-todo-bench-cost--json-memo)
      (puthash object (json-encode (efrit-todo-bench-cost--bare object))
               efrit-todo-bench-cost--json-memo)))

(defun efrit-todo-bench-cost--content (message)
  "Return the content of MESSAGE: a string, or a list of blocks."
  (let ((content (efrit-todo-bench-cost--get message "content")))
    (if (stringp content) content (append content nil))))

(defun efrit-todo-bench-cost--message-json (message)
  "Return the JSON of MESSAGE with no cache_control mark in it."
  (let ((content (efrit-todo-bench-cost--content message)))
    (if (or (stringp content) (not (seq-some #'efrit-todo-bench-cost--marked-p content)))
        (efrit-todo-bench-cost--json message)
      (json-encode `(("role" . ,(efrit-todo-bench-cost--get message "role"))
                     ("content" . ,(vconcat (mapcar #'efrit-todo-bench-cost--bare content))))))))

(defun efrit-todo-bench-cost--system-text (request)
  "Return the system prompt of REQUEST as one string."
  (let ((system (efrit-todo-bench-cost--get request "system")))
    (if (stringp system)
        system
      (mapconcat (lambda (block) (or (efrit-todo-bench-cost--get block "text") ""))
                 system ""))))

(defun efrit-todo-bench-cost--messages-bytes (request)
  "Return the bytes of the JSON of REQUEST's messages vector."
  (let ((messages (append (efrit-todo-bench-cost--get request "messages") nil)))
    ;; `json-encode' joins the elements of a vector with "," in "[...]".
    (+ 2 (max 0 (1- (length messages)))
       (apply #'+ (mapcar (lambda (m) (string-bytes (efrit-todo-bench-cost--message-json m)))
                          messages)))))

(defvar efrit-todo-bench-cost--key-memo nil
  "The cache block string of each message content block, by object (eq).")

(defvar efrit-todo-bench-cost--digests nil
  "The md5 of each cache block string already hashed, by string (eq).")

(defun efrit-todo-bench-cost--block-key (role object &optional text)
  "Return the cache block string of content OBJECT in a message of ROLE.
OBJECT is a content block, or with TEXT a message whose content is
the string TEXT."
  (or (gethash object efrit-todo-bench-cost--key-memo)
      (puthash object
               (concat role ":" (if text
                                    (json-encode text)
                                  (efrit-todo-bench-cost--json object)))
               efrit-todo-bench-cost--key-memo)))

(defun efrit-todo-bench-cost--tools-json (request)
  "Return the JSON of REQUEST's tools vector, with no cache_control in it.
The same as `json-encode' of the vector, but each tool is encoded once."
  (concat "[" (mapconcat #'efrit-todo-bench-cost--json
                         (efrit-todo-bench-cost--get request "tools") ",")
          "]"))

(defun efrit-todo-bench-cost--blocks (request)
  "Return REQUEST as its cache blocks, a list of strings.
The tools, the system prompt, then each content block of each
message, tagged with the message's role."
  (append
   (list (efrit-todo-bench-cost--tools-json request)
         (efrit-todo-bench-cost--system-text request))
   (seq-mapcat
    (lambda (message)
      (let ((role (efrit-todo-bench-cost--get message "role"))
            (content (efrit-todo-bench-cost--content message)))
        (if (stringp content)
            (list (efrit-todo-bench-cost--block-key role message content))
          (mapcar (lambda (block) (efrit-todo-bench-cost--block-key role block))
                  content))))
    (efrit-todo-bench-cost--get request "messages"))))

(defun efrit-todo-bench-cost--chain (previous block)
  "Return the hash of the prefix that is PREVIOUS's prefix then BLOCK.
PREVIOUS is the hash of the prefix before BLOCK, \"\" for none.  The
hash of a prefix is the md5 of its previous hash and of the md5 of its
last block, which is hashed once however many requests carry it."
  (md5 (concat previous
               (or (gethash block efrit-todo-bench-cost--digests)
                   (puthash block (md5 block) efrit-todo-bench-cost--digests)))))

(defun efrit-todo-bench-cost--cache (requests)
  "Return the cache-weighted input cost of REQUESTS, oldest first.
A plist: :cost, and the bytes :read from the cache, :written to it
and :uncached."
  (let ((cached (make-hash-table :test 'equal))
        (efrit-todo-bench-cost--digests (make-hash-table :test 'eq))
        (read 0) (written 0) (uncached 0))
    (dolist (request requests)
      (let* ((blocks (vconcat (efrit-todo-bench-cost--blocks request)))
             (count (length blocks))
             (hashes (make-vector count nil))
             (hash "")
             (hit -1))
        ;; Each block's hash names the whole prefix that ends with it.
        (dotimes (i count)
          (setq hash (efrit-todo-bench-cost--chain hash (aref blocks i)))
          (aset hashes i hash)
          (when (gethash hash cached)
            (setq hit i)))
        (let ((last-breakpoint (1- count)))
          (dotimes (i count)
            (let ((bytes (string-bytes (aref blocks i))))
              (cond ((<= i hit) (cl-incf read bytes))
                    ((<= i last-breakpoint) (cl-incf written bytes))
                    (t (cl-incf uncached bytes)))))
          (dolist (breakpoint (list 0 1 last-breakpoint))
            (when (< breakpoint count)
              (puthash (aref hashes breakpoint) t cached))))))
    (list :cost (+ (* read (plist-get efrit-todo-bench-cost-prices :read))
                   (* written (plist-get efrit-todo-bench-cost-prices :write))
                   (* uncached (plist-get efrit-todo-bench-cost-prices :uncached)))
          :read read :written written :uncached uncached)))

(defun efrit-todo-bench-cost--result-text (block)
  "Return the text of tool_result BLOCK: a string, or text blocks joined."
  (let ((content (efrit-todo-bench-cost--get block "content")))
    (if (stringp content)
        content
      (mapconcat (lambda (b) (or (efrit-todo-bench-cost--get b "text") "")) content ""))))

(defun efrit-todo-bench-cost--error-text-p (text)
  "Return non-nil if tool result TEXT reports an error."
  (string-match-p "\\`[ \t\n]*\\[?Error\\b" text))

(defun efrit-todo-bench-cost--todo-results (requests)
  "Return the todo_write results REQUESTS carried, each (TEXT . ERROR-P)."
  (let ((names (make-hash-table :test 'equal))
        (results nil)
        (seen (make-hash-table :test 'equal)))
    (dolist (request requests)
      (seq-doseq (message (efrit-todo-bench-cost--get request "messages"))
        (let ((content (efrit-todo-bench-cost--content message)))
          (unless (stringp content)
            (dolist (block content)
              (pcase (efrit-todo-bench-cost--get block "type")
                ("tool_use"
                 (puthash (efrit-todo-bench-cost--get block "id")
                          (efrit-todo-bench-cost--get block "name") names))
                ("tool_result"
                 (let ((id (efrit-todo-bench-cost--get block "tool_use_id")))
                   (when (and (equal (gethash id names) "todo_write")
                              (not (gethash id seen)))
                     (puthash id t seen)
                     (let ((text (efrit-todo-bench-cost--result-text block)))
                       (push (cons text
                                   (or (eq (efrit-todo-bench-cost--get block "is_error") t)
                                       (efrit-todo-bench-cost--error-text-p text)))
                             results)))))))))))
    (nreverse results)))

;;;; The scripted Claude

;; Like the scripted Claude of test/efrit-todo-scenarios.el, but the
;; answer to a request is handed over by the loop below rather than by a
;; timer, so that a session of 200 requests takes no 200 timer waits.

(defvar efrit-todo-bench-cost--script nil
  "Script steps still to play, functions of the request.")

(defvar efrit-todo-bench-cost--requests nil
  "Requests received, newest first.")

(defvar efrit-todo-bench-cost--pending nil
  "The answer to hand over next, as (CALLBACK RESPONSE), or nil.")

(defvar efrit-todo-bench-cost--stopped nil
  "The stop reason once the session stopped.")

(defun efrit-todo-bench-cost--parse (json)
  "Parse JSON into hash tables and vectors, as Efrit does with responses."
  (let ((json-object-type 'hash-table)
        (json-array-type 'vector)
        (json-key-type 'string))
    (json-read-from-string json)))

(defun efrit-todo-bench-cost--answer (request callback &optional _error-callback)
  "Record REQUEST; keep the next scripted response for CALLBACK.
When the script is over, the model ends its turn."
  (push request efrit-todo-bench-cost--requests)
  (let ((step (pop efrit-todo-bench-cost--script)))
    (setq efrit-todo-bench-cost--pending
          (list callback
                (efrit-todo-bench-cost--parse
                 (if step
                     (funcall step request)
                   (json-encode '(("content" . [(("type" . "text")
                                                  ("text" . "(the script has ended)"))])
                                  ("stop_reason" . "end_turn")))))))))

(defun efrit-todo-bench-cost--note-stop (_session stop-reason &rest _)
  "Note that the session stopped for STOP-REASON."
  (setq efrit-todo-bench-cost--stopped stop-reason))

(defun efrit-todo-bench-cost--play (command script mode)
  "Run COMMAND through `efrit-do' with the model answering from SCRIPT.
MODE is `on' or `off', the state of `efrit-todo-efrit-mode' for the
run.  Return (STOP-REASON . REQUESTS), the requests oldest first."
  (when (efrit-session-active)
    (error "A session is still running"))
  (let ((efrit-todo-bench-cost--script script)
        ;; Efrit puts the last command's result in the system prompt:
        ;; every session starts from none, so the sides compare.
        (efrit-do--last-result nil)
        (efrit-todo-bench-cost--requests nil)
        (efrit-todo-bench-cost--pending nil)
        (efrit-todo-bench-cost--stopped nil)
        (was-on efrit-todo-efrit-mode)
        (start (float-time)))
    (efrit-todo-efrit-mode (if (eq mode 'on) 1 -1))
    (advice-add 'efrit-api-request-async :override #'efrit-todo-bench-cost--answer)
    (advice-add 'efrit-do-async--stop-loop :after #'efrit-todo-bench-cost--note-stop)
    (unwind-protect
        (progn
          (efrit-do command)
          (while (and (not efrit-todo-bench-cost--stopped)
                      (< (- (float-time) start) 60))
            (if (not efrit-todo-bench-cost--pending)
                ;; The loop may go on from a timer.
                (accept-process-output nil 0.01)
              (let ((answer efrit-todo-bench-cost--pending))
                (setq efrit-todo-bench-cost--pending nil)
                (funcall (car answer) (cadr answer))))))
      (advice-remove 'efrit-api-request-async #'efrit-todo-bench-cost--answer)
      (advice-remove 'efrit-do-async--stop-loop #'efrit-todo-bench-cost--note-stop)
      (efrit-todo-efrit-mode (if was-on 1 -1)))
    (cons efrit-todo-bench-cost--stopped (reverse efrit-todo-bench-cost--requests))))

;;;; Measuring a session

(defmacro efrit-todo-bench-cost--with-open-limits (&rest body)
  "Run BODY with no iteration or breaker limit the scripts reach.
The bench weighs what a whole session sends, not where a limit cuts it."
  (declare (indent 0) (debug t))
  `(let ((efrit-do-async-max-iterations 10000)
         (efrit-do-max-tool-calls-per-session 10000)
         (efrit-do-max-same-tool-calls 10000)
         (efrit-todo-breaker-without-progress 0)
         (efrit-todo-breaker-same-tool 0)
         (efrit-todo-breaker-error-trip 0)
         (efrit-todo-breaker-churn 0)
         (efrit-todo-breaker-hard-cap 0))
     ,@body))

(defun efrit-todo-bench-cost-measure (n mode style)
  "Play a session of N items and return what its requests weigh.
MODE is `on' or `off', the state of `efrit-todo-efrit-mode'; STYLE is
`full' or `merge', as in `efrit-todo-bench-cost-script'.  The system
prompt is padded by `efrit-todo-bench-cost-padding' bytes.  Return a
plist: :requests :system-bytes :messages-bytes :todo-result-bytes
:todo-writes :todo-errors :last-todo-result-bytes :last-todo-result
:model-bytes :system-changes :cost :read :written :uncached :stop
:seconds."
  (let ((efrit-todo-bench-cost--model-bytes 0)
        (efrit-todo-bench-cost--tool-counter 0)
        (efrit-todo-bench-cost--json-memo (make-hash-table :test 'eq))
        (efrit-todo-bench-cost--key-memo (make-hash-table :test 'eq))
        (start (float-time))
        (outcome nil))
    (pcase-let ((`(,command ,script) (efrit-todo-bench-cost-script n style)))
      (advice-add 'efrit-do--command-system-prompt :filter-return #'efrit-todo-bench-cost--pad)
      (unwind-protect
          (efrit-todo-bench-cost--with-open-limits
            (setq outcome (efrit-todo-bench-cost--play command script mode)))
        (advice-remove 'efrit-do--command-system-prompt #'efrit-todo-bench-cost--pad)))
    (let* ((requests (cdr outcome))
           (systems (mapcar #'efrit-todo-bench-cost--system-text requests))
           (results (efrit-todo-bench-cost--todo-results requests))
           (last-result (car (car (last results)))))
      (append
       (list :requests (length requests)
             :system-bytes (apply #'+ (mapcar #'string-bytes systems))
             :messages-bytes (apply #'+ (mapcar #'efrit-todo-bench-cost--messages-bytes requests))
             :todo-result-bytes (apply #'+ (mapcar (lambda (r) (string-bytes (car r))) results))
             :todo-writes (length results)
             :todo-errors (seq-count #'cdr results)
             :last-todo-result-bytes (if last-result (string-bytes last-result) 0)
             :last-todo-result last-result
             :model-bytes efrit-todo-bench-cost--model-bytes
             :system-changes (cl-loop for (previous this) on systems
                                      count (and this (not (equal previous this)))))
       (efrit-todo-bench-cost--cache requests)
       (list :stop (car outcome)
             :seconds (- (float-time) start))))))

;;;; The table

(defconst efrit-todo-bench-cost--rows
  '(("requests" :requests)
    ("system bytes, all requests" :system-bytes)
    ("messages bytes, all requests" :messages-bytes)
    ("todo_write result bytes" :todo-result-bytes)
    ("model output bytes (tool inputs)" :model-bytes)
    ("system prompt changes" :system-changes)
    ("cache read bytes" :read)
    ("cache write bytes" :written)
    ("cache-weighted input cost" :cost)
    ("last todo_write result bytes" :last-todo-result-bytes)
    ("todo_write calls" :todo-writes)
    ("todo_write errors" :todo-errors))
  "The rows of the table: (LABEL KEY).")

(defun efrit-todo-bench-cost--ratio (value base)
  "Return VALUE / BASE formatted, or \"-\" when BASE is zero."
  (if (and (numberp base) (/= base 0))
      (format "%.2f" (/ (float value) base))
    "-"))

(defun efrit-todo-bench-cost--print-size (n results)
  "Print the table of N items from RESULTS, ((KEY . PLIST) ...) by side."
  (let* ((a (cdr (assq 'a results)))
         (b (cdr (assq 'b results)))
         (c (cdr (assq 'c results)))
         (label (lambda (key) (nth 1 (assq key efrit-todo-bench-cost-sides))))
         (show (lambda (value) (if (floatp value) (format "%.0f" value) (format "%d" value)))))
    (princ (format "\n%-36s %12s %12s %6s %12s %6s\n" (format "%d items" n)
                   (funcall label 'a) (funcall label 'b) "B/A" (funcall label 'c) "C/A"))
    (dolist (row efrit-todo-bench-cost--rows)
      (let ((key (cadr row)))
        (princ (format "%-36s %12s %12s %6s %12s %6s\n" (car row)
                       (funcall show (plist-get a key)) (funcall show (plist-get b key))
                       (efrit-todo-bench-cost--ratio (plist-get b key) (plist-get a key))
                       (funcall show (plist-get c key))
                       (efrit-todo-bench-cost--ratio (plist-get c key) (plist-get a key))))))
    (princ (format "cost B/A %s, C/A %s; stop: A %s, B %s, C %s\n"
                   (efrit-todo-bench-cost--ratio (plist-get b :cost) (plist-get a :cost))
                   (efrit-todo-bench-cost--ratio (plist-get c :cost) (plist-get a :cost))
                   (plist-get a :stop) (plist-get b :stop) (plist-get c :stop)))
    (dolist (side (list (cons 'a a) (cons 'b b) (cons 'c c)))
      (let ((plist (cdr side)))
        (when (> (plist-get plist :todo-errors) 0)
          (princ (format "%s: %d of %d todo_write calls failed; the last result: %s\n"
                         (upcase (symbol-name (car side)))
                         (plist-get plist :todo-errors) (plist-get plist :todo-writes)
                         (truncate-string-to-width
                          (replace-regexp-in-string
                           "\n" " " (or (plist-get plist :last-todo-result) ""))
                          200 nil nil "..."))))))))

(defun efrit-todo-bench-cost-print (loop)
  "Play every side at every size and print the tables; LOOP names the loop."
  (princ (format "\nBytes sent by scripted efrit-do sessions, %s; system prompt padded by %d bytes\n"
                 loop efrit-todo-bench-cost-padding))
  (princ (format "(cost: bytes for tokens; cache read %s, write %s, uncached %s a byte)\n"
                 (plist-get efrit-todo-bench-cost-prices :read)
                 (plist-get efrit-todo-bench-cost-prices :write)
                 (plist-get efrit-todo-bench-cost-prices :uncached)))
  (dolist (n efrit-todo-bench-cost-sizes)
    (efrit-todo-bench-cost--print-size
     n (mapcar (lambda (side)
                 (pcase-let ((`(,key ,_label ,mode ,style) side))
                   (cons key (efrit-todo-bench-cost-measure n mode style))))
               efrit-todo-bench-cost-sides))))

(defun efrit-todo-bench-cost--real-efrit ()
  "Print the tables of a child Emacs that plays the real efrit-do loop.
Only when EFRIT_DIR names an Efrit checkout."
  (let ((root (getenv "EFRIT_DIR"))
        (dir (lambda (feature) (file-name-directory (locate-library feature)))))
    (if (not (and root (file-directory-p (expand-file-name "lisp/core" root))))
        (princ "\n(set EFRIT_DIR to an Efrit checkout to play the sessions through Efrit's own loop too)\n")
      (with-temp-buffer
        (let ((status (call-process
                       (expand-file-name invocation-name invocation-directory)
                       nil t nil "-Q" "--batch"
                       "-L" (funcall dir "efrit-todo")
                       "-L" (funcall dir "efrit-todo-scenarios")
                       "-L" (funcall dir "efrit-todo-bench-cost")
                       "-l" "efrit-todo-real-efrit" "-l" "efrit-todo-bench-cost"
                       "-f" "efrit-todo-bench-cost-run-real")))
          (if (eql status 0)
              (princ (buffer-string))
            (princ (format "\nThe real efrit-do loop failed (%s):\n%s" status (buffer-string)))))))))

(defun efrit-todo-bench-cost-run-real ()
  "Print the tables in an Emacs where the real Efrit is loaded.
No padding: the system prompt is Efrit's own."
  (let ((efrit-todo-bench-cost-padding 0)
        (inhibit-message t))
    (efrit-todo-bench-cost-print (format "real efrit-do loop of %s" (getenv "EFRIT_DIR")))))

(defun efrit-todo-bench-cost-run ()
  "Print the tables of bytes and cost on the stand-in loop (and Efrit's).
Efrit's own loop is played in a child Emacs when EFRIT_DIR is set."
  (let ((inhibit-message t))
    (efrit-todo-bench-cost-print "stand-in efrit-do loop"))
  (efrit-todo-bench-cost--real-efrit))

(provide 'efrit-todo-bench-cost)
;;; efrit-todo-bench-cost.el ends here
