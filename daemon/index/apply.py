"""Swapping a reconcile's results into an index state: one file's chunks into the chunk store
and every lexical channel (:func:`apply_file`), a file or a chunk dropped, and a first index
built aside while the files are read (:class:`StagedIndex`) then swapped in whole.

The same per-file apply serves an incremental batch (:meth:`daemon.index.reconcile.Reconciler.apply`,
under the engine's lock) and a staged first index (outside it), so both give the same index.
"""

from __future__ import annotations

from pathlib import Path

import msgspec
import numpy as np

from ..contract import Chunk, english_type, type_folder
from ..sources.docs import docs_name
from ..sources.ref_record import FileRefs
from .changes import EngineConfig, FileUpdate, RefreshReport
from .chunking import chunk_tokens
from .names import api_boost
from .state import FileRecord, IndexState

__all__ = [
    "StagedIndex",
    "add_chunk",
    "apply_file",
    "drop_file",
    "moved_only",
    "remove_chunk",
    "symbol_boost",
]


def symbol_boost(chunk: Chunk) -> float:
    """Secondary order of the names channel among equal match kinds.

    Methods: :func:`daemon.index.names.api_boost` (exported, common module, not an internal
    module, in ``ПрограммныйИнтерфейс``, not deprecated: the gold set's grade rules written
    as SSL conventions). Metadata objects and fields: 0 (their exact names rarely collide).
    """
    if not chunk.is_code:
        return 0.0
    return api_boost(export=chunk.export, module_kind=chunk.module_kind, owner=chunk.owner, region=chunk.region)


def moved_only(prev: Chunk, new: Chunk) -> bool:
    """True if ``new`` differs from ``prev`` only in its position in the file."""
    return (
        msgspec.structs.replace(prev, start_line=new.start_line, end_line=new.end_line, name_range=new.name_range)
        == new
    )


def _containers(c: Chunk) -> list[str]:
    """Qualifiers a ``Qualifier.Name`` query may use for this chunk: the module's short name
    for a method (``ОбщегоНазначения``), the type in Russian, English and as a folder name
    for an object (``Справочник``, ``Catalog``, ``Catalogs``), the object's name for a field."""
    if c.kind == "object":
        out = [c.object_type]
        en = english_type(c.object_type)
        folder = type_folder(c.object_type)
        return out + [x for x in (en, folder) if x]
    parts = c.owner.split(".")
    return [parts[1]] if len(parts) > 1 else [c.owner]


def apply_file(st: IndexState, u: FileUpdate, report: RefreshReport, config: EngineConfig) -> bool:
    """Swap one file's chunks (``u.chunks`` not None) into ``st``, counting them in ``report``;
    True if any chunk was added, changed or removed."""
    before = (report.chunks_added, report.chunks_changed, report.chunks_removed, report.chunks_moved)
    store = st.store
    old = st.files.get(u.path)
    old_ids = {store.ids[s] for s in old.slot_list()} if old else set()
    new_ids = set()
    new_slots = []
    for c in u.chunks:
        new_ids.add(c.id)
        prev = store.get_by_id(c.id) if c.id in store else None
        if prev is not None and prev == c:
            new_slots.append(store.slot_of[c.id])
            continue
        if prev is not None and moved_only(prev, c):
            slot = store.slot_of[c.id]  # lines shifted by an edit above: no index work
            store.set_position(slot, c.start_line, c.end_line, c.name_range)
            new_slots.append(slot)
            report.chunks_moved += 1
            continue
        if prev is None:
            report.chunks_added += 1
        else:
            report.chunks_changed += 1
        report.changed_ids.append(c.id)
        new_slots.append(add_chunk(st, c, config, u.tokens.get(c.id)))
    for cid in old_ids - new_ids:
        if cid is not None:
            remove_chunk(st, cid)
            report.chunks_removed += 1
    st.files[u.path] = FileRecord(
        path=u.path,
        kind=u.kind,
        hash=u.digest,
        size=u.size,
        mtime_ns=u.mtime_ns,
        slots=np.asarray(new_slots, dtype="<i4").tobytes(),
        encoding=u.encoding,
        deps=u.deps,
        ino=u.ino,
        ctime_ns=u.ctime_ns,
    )
    st.dirty = True
    after = (report.chunks_added, report.chunks_changed, report.chunks_removed, report.chunks_moved)
    return old is None or before != after


def drop_file(st: IndexState, path: str, report: RefreshReport) -> None:
    """Remove a file and its chunks from ``st`` (nothing if it is not indexed)."""
    rec = st.files.pop(path, None)
    if rec is None:
        return
    ids = st.store.ids
    for cid in [ids[s] for s in rec.slot_list()]:
        if cid is not None:
            remove_chunk(st, cid)
            report.chunks_removed += 1
    st.dirty = True


def add_chunk(st: IndexState, c: Chunk, config: EngineConfig, tokens: list[str] | None = None) -> int:
    """Store ``c`` in ``st`` and index it in every lexical channel; returns its slot. ``tokens``:
    its BM25 tokens when already made (:func:`daemon.index.chunking.chunk_tokens`)."""
    if c.id in st.embedded:
        from .embed_cache import text_hash
        from .embed_text import embed_text

        # only the embedded head counts: an edit deep in a long method keeps its vector
        if st.embedded[c.id] != text_hash(embed_text(c, config.embed_max_chars)):
            st.stale_vectors.add(c.id)
        else:
            st.stale_vectors.discard(c.id)
    slot = st.store.add(c)
    if tokens is None:
        tokens = chunk_tokens(c, config.stem)
    st.bm25.add(slot, tokens)
    if c.is_metadata:
        st.meta_bm25.add(slot, tokens)
    if c.kind != "module" and c.part <= 1:
        name = docs_name(c) if c.is_docs else c.name  # docs: a heading's key (daemon.sources.docs.docs_name)
        st.names.add(slot, name, container=_containers(c), kind=c.kind, boost=symbol_boost(c))
    elif slot in st.names:
        st.names.remove(slot)
    if st.meta_names is not None:  # a staged build has none: built on first use
        st.meta_names.add(st.store, slot, c)
    # the dense side notices the changed text through DenseUpkeep.pending()
    return slot


def remove_chunk(st: IndexState, cid: str) -> None:
    """Remove chunk ``cid`` from the store, every channel and the dense side (its vectors too)."""
    slot = st.store.remove(cid)
    st.stale_vectors.discard(cid)
    if slot is not None:
        st.bm25.remove(slot)
        st.meta_bm25.remove(slot)
        st.names.remove(slot)
        if st.meta_names is not None:
            st.meta_names.remove(st.store, slot)
    if st.dense is not None:
        from .embed import vector_key
        from .embed_text import MAX_TEXTS

        # the chunk's extra vectors (daemon.index.embed_text.embed_texts) go with it
        keys = [k for k in (vector_key(cid, i) for i in range(MAX_TEXTS)) if k in st.embedded]
        if not keys:
            return
        st.dense.remove(keys)
        for k in keys:
            st.embedded.pop(k, None)
            st.stale_vectors.discard(k)
        st.dense_dirty = True


class StagedIndex:
    """A first index built aside while :meth:`daemon.index.reconcile.Reconciler.prepare` reads
    the files: each file's chunks go into a new :class:`daemon.index.state.IndexState` (its store
    spilling to ``index_dir``) as the file's result arrives (the same :func:`apply_file` an
    incremental apply runs, so the index is the same), and the file's chunks and tokens are
    dropped. :meth:`swap_in` installs the whole of it: readers see the empty index or the
    complete one. ``embedded``: the engine's embedded texts, read only (which vectors the new
    texts make stale)."""

    #: Reference records swapped into the staged graph at once.
    REFS_BATCH = 256

    def __init__(self, config: EngineConfig, index_dir: Path, embedded: dict) -> None:
        self.config = config
        # the blobs go to an unnamed file in the index dir until the first snapshot rebases
        # the store onto its memory-mapped arena
        self.state = IndexState(bm25_k1=config.bm25_k1, bm25_b=config.bm25_b, spill_dir=index_dir)
        self.state.embedded = embedded
        self.state.meta_names = None
        self.report = RefreshReport()
        self._refs: list[FileRefs] = []

    def take(self, u: FileUpdate) -> None:
        """Index one file's new chunks (``u.chunks`` not None) and take its references (swapped
        into the graph a batch at a time, resolved later), then drop them from ``u``."""
        if apply_file(self.state, u, self.report, self.config):
            self.report.files_changed += 1
        if u.refs:
            self._refs.extend(u.refs)
            if len(self._refs) >= self.REFS_BATCH:
                self._flush_refs()
        u.chunks, u.tokens, u.refs = None, {}, None

    def _flush_refs(self) -> None:
        self.state.refs.update(self._refs, defer=True)
        self._refs = []

    def finish(self) -> None:
        """Write the buffered postings, names and references (outside the engine lock)."""
        self.state.bm25.flush()
        self.state.meta_bm25.flush()
        self.state.names.flush()
        self._flush_refs()

    def swap_in(self, st: IndexState, report: RefreshReport) -> None:
        """Install this index in ``st``, an empty engine's state (the engine's lock held), and
        add its counts to ``report``. ``RuntimeError`` if ``st`` is not empty."""
        new = self.state
        if st.files or len(st.store):
            raise RuntimeError("a staged build is only for an empty engine")
        st.store, st.files = new.store, new.files
        st.bm25, st.meta_bm25, st.names = new.bm25, new.meta_bm25, new.names
        st.refs, st.refs_complete = new.refs, True  # its files' references are resolved later (pending)
        st.stale_vectors = new.stale_vectors
        r = self.report
        report.files_changed += r.files_changed
        report.chunks_added += r.chunks_added
        report.chunks_changed += r.chunks_changed
        report.chunks_moved += r.chunks_moved
        report.chunks_removed += r.chunks_removed
        report.changed_ids.extend(r.changed_ids)
        st.dirty = True
        st.compact_due = True  # never journaled: a snapshot is due
