;;; efrit-todo-shared-bench.el --- Timings of shared lists -*- lexical-binding: t; -*-

;;; Commentary:

;; `efrit-todo-shared-bench-rows' times a change of a shared list beside
;; the same change of an unshared session saved at once, at 20 and 100
;; items.  The unshared change pays the change and a save (lock, look at
;; the file, encode, write, fdatasync, rename); the shared one the same
;; plus a look at the file's identity before the change, and, when
;; another Emacs saved since, reading that save back.  That case is
;; timed with another Emacs's save put in place before each change (by
;; `write-region' and a rename, timed alone on its own row, so that its
;; cost can be taken off).

;;; Code:

(require 'cl-lib)
(require 'efrit-todo)
(require 'efrit-todo-bench-inputs)

(declare-function efrit-todo--module-store-save "efrit-todo-module" (session dir))
(declare-function efrit-todo--module-store-file "efrit-todo-module" (session dir))

(defun efrit-todo-shared-bench--us (function)
  "Return (MICROSECONDS GC-SHARE) per call of FUNCTION, as `make bench' times."
  (let ((result (efrit-todo-bench-inputs-measure-one function)))
    (list (plist-get result :us) (plist-get result :gc))))

(defun efrit-todo-shared-bench--fill (session size)
  "Give SESSION SIZE tasks."
  (dotimes (i size)
    (efrit-todo-task-create (list :subject (format "Step %d: edit file-%d.el" i i)) session)))

(defun efrit-todo-shared-bench--toggle (session)
  "Return a function to call for a change of one task of SESSION."
  (let ((n 0))
    (lambda ()
      (efrit-todo-task-update
       (list :taskId "t1" :subject (format "Step 0, take %d" (cl-incf n)))
       session))))

(defun efrit-todo-shared-bench--another-emacs (session dir)
  "Return a function that puts another Emacs's save of SESSION in DIR.
It writes the current file again with the next generation, through a
temporary file and a rename, as a save does: another Emacs saves
after the newest save it read."
  (let* ((file (efrit-todo--module-store-file session dir))
         (temp (concat file ".bench")))
    (lambda ()
      (let* ((text (with-temp-buffer (insert-file-contents-literally file) (buffer-string)))
             (generation (and (string-match "\"generation\":\\([0-9]+\\)" text)
                              (string-to-number (match-string 1 text))))
             (coding-system-for-write 'no-conversion))
        (write-region (replace-match (format "\"generation\":%d" (1+ generation)) t t text)
                      nil temp nil 'silent))
      (rename-file temp file t))))

(defun efrit-todo-shared-bench-rows ()
  "Return timing rows (LABEL MICROSECONDS-PER-CALL GC-SHARE) for shared lists."
  (let* ((root (make-temp-file "efrit-todo-shared-bench-" t))
         (dir (file-name-as-directory (expand-file-name "state" root)))
         (efrit-todo--shared-lists nil)
         (rows nil))
    (unwind-protect
        (dolist (size '(20 100))
          (let ((plain (format "shared-bench-plain-%d-%s" size (cl-gensym)))
                (shared (format "shared-bench-shared-%d-%s" size (cl-gensym))))
            (let ((efrit-todo-state-directory nil))
              (efrit-todo-shared-bench--fill plain size))
            (let ((efrit-todo-state-directory dir))
              (efrit-todo-share-list shared)
              (efrit-todo-shared-bench--fill shared size)
              (let ((change (efrit-todo-shared-bench--toggle plain)))
                (push (cons (format "unshared change + save, %d items" size)
                            (efrit-todo-shared-bench--us
                             (lambda ()
                               (let ((efrit-todo-state-directory nil)) (funcall change))
                               (efrit-todo--module-store-save plain dir))))
                      rows))
              (push (cons (format "shared change (lock, look, write), %d items" size)
                          (efrit-todo-shared-bench--us
                           (efrit-todo-shared-bench--toggle shared)))
                    rows)
              (let ((other (efrit-todo-shared-bench--another-emacs shared dir))
                    (change (efrit-todo-shared-bench--toggle shared)))
                (push (cons (format "  another Emacs's save put in place, %d items" size)
                            (efrit-todo-shared-bench--us other))
                      rows)
                (push (cons (format "  that + shared change (lock, read, write), %d" size)
                            (efrit-todo-shared-bench--us
                             (lambda () (funcall other) (funcall change))))
                      rows))
              (push (cons (format "shared TaskList, file unchanged, %d items" size)
                          (efrit-todo-shared-bench--us
                           (lambda () (efrit-todo-task-list nil shared))))
                    rows))))
      (efrit-todo-flush)
      (delete-directory root t))
    (nreverse rows)))

(defun efrit-todo-shared-bench-run ()
  "Print the shared-list timings."
  (pcase-dolist (`(,label ,us ,gc) (efrit-todo-shared-bench-rows))
    (princ (format "%-46s %12.1f us %4.0f%% GC\n" label us (* 100 gc)))))

(provide 'efrit-todo-shared-bench)
;;; efrit-todo-shared-bench.el ends here
