;;; efrit-todo-shadow.el --- Make efrit-todo win over Efrit's own efrit-todo.el -*- lexical-binding: t; -*-

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

;; Efrit has a file efrit-todo.el of its own, in its lisp/core, and
;; `(require 'efrit)' puts that directory at the front of `load-path'.
;; Both files provide the feature `efrit-todo', so which one an init
;; file gets depends on the order of its lines: the first in
;; `load-path' when `efrit-todo' is first required, and only that one,
;; since a feature is loaded once.
;;
;; Users order their init files every way there is, so the order must
;; not matter:
;;
;; - `efrit-todo-shadow-ensure' makes the feature this package's: it
;;   loads this package's efrit-todo.el (and its Efrit-compatible names)
;;   by absolute file name when Efrit's file came first, and moves this
;;   directory ahead of Efrit's in `load-path'.  The adapters call it
;;   when they are loaded and when their mode is turned on, and their
;;   names are unique, so `(require 'efrit-todo-efrit)' works whatever
;;   the order.
;; - A package install runs `efrit-todo-shadow-load-path-first' once
;;   Efrit is loaded (the generated autoloads arrange it), so that a
;;   later `(require 'efrit-todo)' finds this package's file.

;;; Code:

(require 'seq)

(defconst efrit-todo-shadow--directory
  (file-name-directory (or load-file-name buffer-file-name default-directory))
  "This package's Lisp directory, where efrit-todo.el is.")

(defun efrit-todo-shadow--same-directory-p (dir)
  "Return non-nil if DIR, an entry of `load-path', is this package's."
  (and (stringp dir)
       (file-equal-p (file-name-as-directory (expand-file-name dir))
                     efrit-todo-shadow--directory)))

(defun efrit-todo-shadow--other-p (dir)
  "Return non-nil if there is an efrit-todo.el in DIR, not this package's."
  (and (stringp dir)
       (not (efrit-todo-shadow--same-directory-p dir))
       (locate-file "efrit-todo" (list dir) (get-load-suffixes))))

;;;###autoload
(defun efrit-todo-shadow-load-path-first ()
  "Put this package's directory before any other efrit-todo.el in `load-path'.
Efrit's lisp/core has a file of that name.  Nothing changes when this
directory already comes first.  Return non-nil if `load-path' changed."
  (let ((before nil)
        (rest load-path))
    ;; Only the entries up to this directory can shadow it.
    (while (and rest (not (efrit-todo-shadow--same-directory-p (car rest))))
      (push (car rest) before)
      (setq rest (cdr rest)))
    (let ((other (seq-find #'efrit-todo-shadow--other-p (nreverse before))))
      (when (or other (null rest))
        (let ((ours (directory-file-name efrit-todo-shadow--directory))
              (others (seq-remove #'efrit-todo-shadow--same-directory-p load-path)))
          (setq load-path
                (if other
                    (let ((tail (member other others)))
                      (append (butlast others (length tail)) (list ours) tail))
                  (append others (list ours))))
          t)))))

(defun efrit-todo-shadow--defined-by-p (symbol file)
  "Return non-nil if SYMBOL's function was last defined by a file named FILE.
FILE is a base name without suffix, such as \"efrit-todo-compat\", which
only this package has; any copy of this package will do."
  (let ((defined-in (symbol-file symbol 'defun)))
    (and defined-in
         (string-match-p (concat "\\`" (regexp-quote file) "\\.elc?\\(?:\\.gz\\)?\\'")
                         (file-name-nondirectory defined-in)))))

(defun efrit-todo-shadow-ours-p ()
  "Return non-nil if the feature `efrit-todo' in use is this package's.
That is: its core is loaded, and the names Efrit's own file defines
\(loaded after it, they would replace them) are still this package's."
  (and (featurep 'efrit-todo)
       (fboundp 'efrit-todo-write)
       (efrit-todo-shadow--defined-by-p 'efrit-todo-add "efrit-todo-compat")
       (efrit-todo-shadow--defined-by-p 'efrit-todo-format-for-prompt "efrit-todo-compat")))

(defvar efrit-todo--current-todos)
(defvar efrit-todo--counter)

(defun efrit-todo-shadow--adopt-efrit-state ()
  "Hand what Efrit's own efrit-todo.el held over to this package's.
Its variables keep their values when this package's file is loaded
over it; setting them again copies the list into the module."
  (when (consp (bound-and-true-p efrit-todo--current-todos))
    (setq efrit-todo--current-todos efrit-todo--current-todos))
  (when (and (natnump (bound-and-true-p efrit-todo--counter)) (> efrit-todo--counter 0))
    (setq efrit-todo--counter efrit-todo--counter)))

(defun efrit-todo-shadow-ensure ()
  "Make the feature `efrit-todo' this package's, whatever the order of `load-path'.
When another efrit-todo.el (Efrit's own) was loaded, or would be, load
this package's files by absolute name so that their definitions win,
and put this directory first in `load-path'.  Return non-nil when the
feature is this package's."
  (efrit-todo-shadow-load-path-first)
  (unless (efrit-todo-shadow-ours-p)
    (let ((foreign (and (featurep 'efrit-todo) (not (fboundp 'efrit-todo-write)))))
      (unless (fboundp 'efrit-todo-write)
        (load (expand-file-name "efrit-todo" efrit-todo-shadow--directory) nil t))
      ;; A foreign file loaded after this package's replaced the names it
      ;; shares with it; the core is intact, so `require' would not help.
      (unless (efrit-todo-shadow-ours-p)
        (load (expand-file-name "efrit-todo-compat" efrit-todo-shadow--directory) nil t)
        (setq foreign t))
      (when foreign
        (efrit-todo-shadow--adopt-efrit-state))))
  (efrit-todo-shadow-ours-p))

;; A package install: once Efrit has put its lisp/core first, put this
;; directory before it, so that `(require 'efrit-todo)' and the
;; autoloads of efrit-todo.el load this package's file.  This form goes
;; to the generated autoloads only: loading this file means efrit-todo's
;; adapters are taking care of it already.
;;;###autoload (with-eval-after-load 'efrit (efrit-todo-shadow-load-path-first))

(provide 'efrit-todo-shadow)

;; Local Variables:
;; package-lint-main-file: "efrit-todo.el"
;; End:

;;; efrit-todo-shadow.el ends here
