"""Platform help sources: the 1C:Enterprise platform's own reference (the syntax assistant).

Pure library code, no index and no daemon state: :mod:`.entries` (the entry model and its
index record), :mod:`.globals_json` (the bundled open data set), :mod:`.hbk` (the v8
container and the help book's two ZIP archives), :mod:`.toc` (the book's table of contents),
:mod:`.pages` (one help page), :mod:`.book` (a whole help book into entries) and
:mod:`.discover` (installed platforms, their versions, and the configuration's
compatibility mode). See ``docs/platform-help.md``.
"""
