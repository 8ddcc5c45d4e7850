"""What ``status`` counts in one root's index: files, modules, methods, metadata chunks, docs pages
and sections, the export's format, and the docs pages read with a problem. The per-chunk counts
and the problems are worked out again only after a batch changed the index (they read every
file record or a column of every chunk).
"""

from __future__ import annotations

import numpy as np

from .state import IndexState


class IndexCounts:
    """The counts of ``state`` (see the module docstring), cached per index version. Every
    method expects the engine's lock held."""

    def __init__(self, state: IndexState) -> None:
        self.state = state
        self._chunks: tuple = (None, 0, 0, 0)  # (store and index version, methods, metadata, docs sections)
        self._docs_problems: tuple = (None, {})  # (store and index version, docs_problems())

    def numbers(self) -> dict:
        """``format`` (designer, edt, unknown, or ``docs`` for a root that holds markdown pages
        only, :mod:`daemon.sources.docs`), ``files``, ``modules``, ``methods`` (a method split in
        parts counts once), ``metadata_chunks``, ``docs_pages`` and ``docs_sections``."""
        st = self.state
        store = st.store
        key = (id(store), store.version, st.version)
        if self._chunks[0] != key:
            live = store.mask()
            kinds = store.col("kind")
            method = np.zeros(len(store.tables["kind"]) + 1, dtype=bool)
            for k in ("procedure", "function"):
                if store.tables["kind"].find(k) >= 0:
                    method[store.tables["kind"].find(k)] = True
            methods = int((live & method[kinds] & (store.col("part") <= 1)).sum())
            meta = int(store.mask(scope="metadata").sum())
            docs = int(store.mask(scope="docs").sum())  # docs: sections
            self._chunks = (key, methods, meta, docs)
        _, methods, meta, docs = self._chunks
        pages = sum(1 for r in st.files.values() if r.kind == "docs")
        return {
            # a root of markdown pages only (no configuration, no .bsl) is a docs root
            "format": "docs" if st.format == "unknown" and pages and pages == len(st.files) else st.format,
            "files": len(st.files),
            "modules": sum(1 for r in st.files.values() if r.kind == "bsl"),
            "methods": methods,
            "metadata_chunks": meta,
            "docs_pages": pages,
            "docs_sections": docs,
        }

    def docs_problems(self) -> dict[str, str]:
        """``{path: what is wrong}`` of the docs pages read with a problem, in path order: a code
        fence never closed (the rest of the page, its headings included, is one code block), broken
        UTF-8, a page or heading cut (the notes :func:`daemon.sources.markdown.chunk_markdown` keeps
        on a page's first chunk)."""
        st = self.state
        key = (id(st.store), st.version)
        if self._docs_problems[0] != key:
            out = {}
            for r in st.files.values():
                if r.kind == "docs" and r.slots:
                    first = st.store.get(r.slot_list()[0])
                    note = first.properties.get("notes") if first is not None else None
                    if note:
                        out[r.path] = note
            self._docs_problems = (key, dict(sorted(out.items())))
        return self._docs_problems[1]
