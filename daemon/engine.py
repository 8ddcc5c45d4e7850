"""The bsl-lens engine: one export root, its chunks and its three retrieval channels.

A plain library (no sockets, no asyncio, no threads of its own). The daemon owns one
:class:`Engine` per export root and serialises writers; every public method takes the
engine's lock, so readers never see a half-applied batch and hnswlib is never queried
while it is written.

Channels and fusion:

* ``names``: the symbol-name channel (:mod:`daemon.index.names`) for identifier-like queries:
  exact > prefix > CamelHump > substring, case- and ``ё``-folded, ``Модуль.Метод`` qualified.
* ``bm25``: BM25 Okapi over the 1C-aware tokenizer (:mod:`daemon.index.bm25`, :mod:`daemon.text.tokenize`).
* ``dense``: cosine similarity of embedded method heads in hnswlib (:mod:`daemon.index.dense`).

Modes: ``lexical`` fuses names + bm25, ``vector`` is dense alone, ``hybrid`` (default)
fuses all three with weighted RRF (:func:`daemon.ranking.fusion.rrf`). The weights are the
``CHANNEL_WEIGHTS`` rules below, measured on the dev gold set (README, "Quality").
"""

from __future__ import annotations

import logging
import os
import unicodedata
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np

from .index.bm25 import BM25Index
from .index.chunkstore import ChunkStore, ChunksView
from .contract import Chunk, Filters, Hit, SearchResult, Skip
from .ranking.fusion import RRF_K
from .index.snapshot import (
    DENSE_JOURNAL_MAX,
    JOURNAL_FILE,
    JOURNAL_MAX_BYTES,
    JOURNAL_MAX_FILES,
    SCHEMA_VERSION,
    CURRENT_FILE,
    LEXICAL_DIR,
    SNAPSHOT_FILE,
    PersistMixin,
)
from .ranking.ranker import (
    CHANNEL_DEPTH,
    CROSS_SCRIPT_WEIGHT,
    DENSE_WEIGHT,
    MAX_QUERY_CHARS,
    META_DENSE_DEPTH,
    META_DENSE_WEIGHT,
    META_WEIGHT,
    NAME_TIER,
    QUERY_EMBED_CHARS,
    RankingMixin,
    snippet,
)
from .index.reconcile import (
    POOL_BATCH,
    POOL_MIN_FILES,
    Cancelled,
    ChangeSet,
    EngineConfig,
    FileRecord,
    FileUpdate,
    RefreshReport,
    ReconcileMixin,
    make_pool,
    read_source,
    symbol_boost,
)
from .index.storage import default_index_dir
from .index.metanames import MetadataNames
from .index.names import SymbolIndex

__all__ = [
    "CHANNEL_DEPTH",
    "CROSS_SCRIPT_WEIGHT",
    "DENSE_JOURNAL_MAX",
    "DENSE_WEIGHT",
    "JOURNAL_FILE",
    "JOURNAL_MAX_BYTES",
    "JOURNAL_MAX_FILES",
    "MAX_QUERY_CHARS",
    "META_DENSE_DEPTH",
    "META_DENSE_WEIGHT",
    "META_WEIGHT",
    "NAME_TIER",
    "POOL_BATCH",
    "POOL_MIN_FILES",
    "QUERY_EMBED_CHARS",
    "RRF_K",
    "SCHEMA_VERSION",
    "SNAPSHOT_FILE",
    "CURRENT_FILE",
    "LEXICAL_DIR",
    "Cancelled",
    "ChangeSet",
    "Chunk",
    "ChunkStore",
    "Engine",
    "EngineConfig",
    "FileRecord",
    "FileUpdate",
    "Filters",
    "Hit",
    "RefreshReport",
    "SearchResult",
    "Skip",
    "make_pool",
    "read_source",
    "snippet",
    "symbol_boost",
]

log = logging.getLogger(__name__)

#: A first dense index is built in one multi-threaded hnswlib build when the local embedding
#: cache holds at least this many of its texts (:meth:`Engine._first_fill`); fewer go the usual
#: way, 256 upserts at a time (a build's thread start-up and the swap are not worth it).
FIRST_FILL_MIN = 1024


class Engine(ReconcileMixin, PersistMixin, RankingMixin):
    """Chunks, lexical indexes and the dense index of one export root.

    Create with :meth:`open` (loads a persisted snapshot if one matches), bring up to date
    with :meth:`refresh` (lexical side) and :meth:`embed_pending` (dense side), query with
    :meth:`search`, persist with :meth:`save`.
    """

    def __init__(self, root: Path, index_dir: Path, config: EngineConfig, embedder=None):
        self.root = Path(root).resolve()
        self.index_dir = Path(index_dir)
        self.config = config
        self.embedder = embedder  # daemon.index.embed.Embedder or None (lexical only)
        self.lock = threading.RLock()
        self.files: dict[str, FileRecord] = {}
        # every chunk, by slot (daemon.index.chunkstore); engine.chunks is a read-only Mapping view
        self.store = ChunkStore()
        self.chunks = ChunksView(lambda: self.store)
        self.embedded: dict[str, str] = {}
        # chunks whose text changed since their vector was made: the old vector still
        # answers (it is close) until embed_ids replaces it, but it is not counted as done
        self.stale_vectors: set[str] = set()
        self.skipped: list[Skip] = []
        self.log_skips = False  # the daemon names each skipped file in its log (_log_skips)
        self._skips_logged: set[tuple[str, str]] = set()  # (path, reason) logged by this process
        self.format = "unknown"
        self.bm25 = BM25Index(config.bm25_k1, config.bm25_b)
        self.meta_bm25 = BM25Index(
            config.bm25_k1, config.bm25_b
        )  # metadata chunks only: the channel for metadata questions
        self.names = SymbolIndex()
        # name words of metadata chunks and word families of method names (daemon.index.metanames):
        # built from the store on first use, kept current by the reconcile hooks
        self.meta_names = MetadataNames()
        self.dense = None
        self.cache = None
        # daemon.index.shared_cache.SharedCache or None: the team's cache, set by the caller (hook)
        self.shared_cache = None
        self._dirty = False
        self._dense_dirty = False
        self._script_cache: tuple[Any, float] = (None, 0.5)
        # the metadata masks of the metadata channels per object-type tuple, for one store
        # version (RankingMixin._metadata_filter)
        self._meta_masks: tuple[Any, Any, dict] = (None, None, {})
        # the linked objects of the metadata roll-up for one store version (RankingMixin._object_links)
        self._links: tuple[Any, Any, dict] = (None, None, {})
        self._info = None  # daemon.sources.scan.ExportInfo of the last full scan (targeted scans need it)
        self.version = 0  # bumped by every applied batch
        self._counts: tuple = (None, 0, 0, 0)
        self._pending_hashes: tuple = (None, {})  # (content key, {chunk id: text hash}) of dense_pending
        self.on_damaged: Callable[[], None] | None = None  # called when a query finds the index damaged
        # journals (daemon.index.journal): on in the daemon, off for one-shot CLI runs
        self.journal_on = False
        # a concurrent.futures process pool for big reconciles (make_pool); None: this thread
        self.pool = None
        self.pool_broken = False
        self.generation = ""  # of the lexical snapshot on disk
        self.dense_generation = ""
        self.compact_due = False  # the lexical journal is big: write a snapshot soon
        self.dense_compact_due = False
        self._dense_journal_vectors = 0
        # True once a dense key of a chunk's extra text (daemon.index.embed.vector_key) was set
        self._extra_vectors = False
        # bumped whenever dense keys are added or stale_vectors is rebuilt: with the sizes of
        # embedded / stale_vectors and self.version it keys the extra-vector counts (dense_done)
        self._dense_gen = 0
        self._extra_counts: tuple = (None, 0, 0)
        if embedder is not None:
            from .index.dense import DenseIndex

            self.dense = DenseIndex(embedder.dim)
            # the cache (keyed by the model's fingerprint: a hash of its weights, ~0.06 s)
            # comes with load_dense(), off the warm start's critical path
            self.cache = None

    # ------------------------------------------------------------------ lifecycle
    @classmethod
    def open(
        cls,
        root: Path,
        *,
        index_dir: Path | None = None,
        config: EngineConfig | None = None,
        embedder=None,
        load_dense: bool = True,
    ) -> "Engine":
        """Create an engine for ``root`` and load its persisted snapshot when compatible.

        A missing, damaged or mismatched snapshot part is logged and rebuilt by the next
        :meth:`refresh` / :meth:`embed_pending`; it never raises. Raises ``FileNotFoundError``
        if ``root`` is not a directory. ``load_dense=False`` leaves the dense side empty
        until :meth:`load_dense` (the daemon answers lexical queries meanwhile).
        """
        root = Path(root)
        if not root.is_dir():
            raise FileNotFoundError(f"export root is not a directory: {root}")
        engine = cls(root, index_dir or default_index_dir(root), config or EngineConfig(), embedder)
        engine._load()
        if load_dense:
            engine.load_dense()
        return engine

    def prewarm(self) -> float:
        """Build now what the first queries would otherwise build on demand, so that they
        answer at the warm latency: the cross-lingual lexicon (:func:`daemon.text.lexicon.default_lexicon`,
        read on the first English question; 62-76 ms) and the metadata-names channel
        (:meth:`daemon.index.metanames.MetadataNames.ensure`, built on the first metadata question;
        1.1 s for the 769k chunks of ``bench --scale 20``, measured 2026-12-02). The method-name
        families (only a name typed in the other language needs them; ~1 s per 31k methods)
        stay on demand. Holds :attr:`lock` while the channel is built. Returns the seconds it
        took. The daemon calls it after its first reconcile; the bench's warm process before
        its query loop."""
        from .text.lexicon import default_lexicon

        t = time.perf_counter()
        default_lexicon()
        with self.lock:
            self.meta_names.ensure(self.store, self._entry_name)
        return time.perf_counter() - t

    # ------------------------------------------------------------------ dense side
    def dense_done(self) -> int:
        """Chunks whose (first) vector was made from their current text (the ``done`` of
        dense progress; a chunk edited since counts again once re-embedded). A chunk's extra
        vectors (:func:`daemon.index.embed.embed_texts`) are not counted: ``dense_total`` stays the
        number of chunks. Counting them is a pass over the keys (1.5 ms for 40k), made only
        once an extra vector was ever set (:attr:`_extra_vectors`) and then only when keys
        were added, removed or marked stale since the last count, not per search."""
        if not self._extra_vectors:
            return len(self.embedded) - len(self.stale_vectors)
        from .index.embed import VECTOR_SEP

        with self.lock:  # the counts and their key are read in one hold (a batch mutates both)
            key = (self._dense_gen, self.version, id(self.embedded), len(self.embedded), len(self.stale_vectors))
            known, n_emb, n_stale = self._extra_counts
            if known != key:
                n_emb = sum(1 for k in self.embedded if VECTOR_SEP in k)
                n_stale = sum(1 for k in self.stale_vectors if VECTOR_SEP in k)
                self._extra_counts = (key, n_emb, n_stale)
            return (len(self.embedded) - n_emb) - (len(self.stale_vectors) - n_stale)

    def vector_text(self, key: str) -> str | None:
        """The current text of dense key ``key`` (:func:`daemon.index.embed.vector_key`): a chunk
        id is its first text; None when the chunk is gone or has fewer texts now. Lock held."""
        from .index.embed import embed_text, vector_chunk

        cid = vector_chunk(key)
        c = self.store.get_by_id(cid)
        if c is None:
            return None
        if cid == key:
            return embed_text(c, self.config.embed_max_chars)
        for k, t in self._chunk_vector_texts(c):
            if k == key:
                return t
        return None

    def _chunk_vector_texts(self, c: Chunk) -> list[tuple[str, str]]:
        """``[(dense key, text)]`` of chunk ``c`` (:func:`daemon.index.embed.vector_texts`)."""
        from .index.embed import vector_texts

        return vector_texts(c, self.config.embed_max_chars)

    def vector_texts_of(self, ids: Iterable[str]) -> dict[str, str]:
        """``{dense key: current text}`` of ``ids`` (chunk ids and/or dense keys): a chunk
        id stands for all its texts (:func:`daemon.index.embed.vector_texts`; the first text's key
        is the id itself), a dense key of an extra text for that text. Ids of chunks that are
        gone, or keys of texts a chunk no longer has, give nothing. Order kept, duplicates
        dropped. Takes the lock."""
        from .index.embed import VECTOR_SEP

        out: dict[str, str] = {}
        with self.lock:
            for key in ids:
                if key in out:
                    continue
                if VECTOR_SEP in key:
                    t = self.vector_text(key)
                    if t is not None:
                        out[key] = t
                    continue
                c = self.store.get_by_id(key)
                if c is not None:
                    for k, t in self._chunk_vector_texts(c):
                        out.setdefault(k, t)
        return out

    def dense_pending(self) -> list[str]:
        """Dense keys (:func:`daemon.index.embed.vector_key`: a chunk's id for its first text)
        whose vector is missing or was made from another text; also refreshes
        :attr:`stale_vectors`. The texts are hashed outside the lock (~40k chunks: about a
        second), so queries are not held up."""
        if self.embedder is None:
            return []
        from .index.embed import text_hash, vector_texts

        with self.lock:
            slots = self.store.live_slots().tolist()
            embedded = dict(self.embedded)
        out = []
        hashes: dict[str, str] = {}
        with self.lock:
            key = self._content_key()
        step = 2048  # chunks materialised per hold of the lock
        for i in range(0, len(slots), step):
            with self.lock:
                store = self.store
                items = [(store.ids[s], store.get(s)) for s in slots[i : i + step] if store.ids[s] is not None]
            for _, c in items:
                for key, t in vector_texts(c, self.config.embed_max_chars):
                    h = text_hash(t)
                    if embedded.get(key) != h:
                        out.append(key)
                        hashes[key] = h
        with self.lock:
            self.stale_vectors = {cid for cid in out if cid in self.embedded}
            self._dense_gen += 1
            # the pending texts' hashes, valid while no batch changes the chunks (_text_hashes)
            self._pending_hashes = (key, hashes) if key == self._content_key() else (None, {})
        return out

    def embed_pending(
        self,
        progress: Callable[[str, int, int], None] | None = None,
        *,
        batch_size: int = 32,
        save_every_s: float = 60.0,
        limit: int | None = None,
    ) -> int:
        """Embed every chunk whose embedded text changed (cache first, model for misses).

        Saves the snapshot every ``save_every_s`` seconds, so an interrupted first index
        resumes where it stopped. ``progress("embed", done, total)`` counts chunks (a chunk
        with all its texts handed to the model is done). Returns the number of vectors (re)set (dense keys: a docs
        section may have more than one, :func:`daemon.index.embed.embed_texts`).
        No-op without an embedder.
        """
        if self.embedder is None:
            return 0
        with self.lock:
            self._prune_dense()
        pending = self.dense_pending()
        if limit is not None:
            pending = pending[:limit]
        if self.shared_cache is not None:  # shared-cache hook: bulk lookup before embedding
            from .index.shared_cache import prefetch

            prefetch(self, pending)
        from .index.embed import vector_chunk

        def chunks(keys: list[str]) -> int:  # progress is in chunks, as the daemon's status
            return len({vector_chunk(k) for k in keys})

        first = self._first_fill(pending)
        filled = 0
        if first:
            rest = [cid for cid in pending if cid not in self.embedded]
            filled = chunks(pending) - chunks(rest)
            pending = rest
            if progress:
                progress("embed", filled, filled + chunks(pending))
        total, done = len(pending), 0
        total_chunks = filled + chunks(pending)
        last_save = time.monotonic()
        step = batch_size * 8
        seen: set[str] = set()
        for i in range(0, total, step):
            self.embed_ids(pending[i : i + step], batch_size=batch_size)
            done += len(pending[i : i + step])
            seen.update(vector_chunk(k) for k in pending[i : i + step])
            if progress:
                progress("embed", min(filled + len(seen), total_chunks), total_chunks)
            if time.monotonic() - last_save > save_every_s:
                self.save()
                last_save = time.monotonic()
        return first + done

    def embed_ids(self, ids: Iterable[str], *, batch_size: int = 32, embedder=None) -> int:
        """Embed these chunks (those that still exist and whose vector is missing or stale)
        and upsert their vectors; returns how many vectors were set. ``ids`` are chunk ids
        (each stands for all its texts, :meth:`vector_texts_of`) or dense keys (one text, as
        :meth:`dense_pending` lists them).

        ``embedder``: another instance of the same model (same fingerprint) to compute the
        passages with, so that a long background batch does not hold the query embedder's
        lock (the daemon's dense thread; see :class:`daemon.service.service.Service`). The engine lock
        is held only to read the texts and to upsert, never while the model runs.
        """
        if self.embedder is None:
            return 0
        from .index.embed import embed_chunks, text_hash

        if self.cache is None:  # opened with load_dense=False and not loaded yet
            self.load_dense()
        model = embedder or self.embedder
        if model is not self.embedder and model.fingerprint != self.embedder.fingerprint:
            raise ValueError("embed_ids: the passage embedder is another model than the engine's")
        with self.lock:
            todo = []
            for cid, t in self.vector_texts_of(ids).items():
                h = text_hash(t)
                if self.embedded.get(cid) != h:
                    todo.append((cid, t, h))
            # the texts the local cache already has are set now, in this hold of the lock
            # (their chunks cannot change meanwhile): no second read and hash of the chunk,
            # which was half the time of a dense index filled from a cache (issue 13)
            found = self.cache.get_many([h for _, _, h in todo]) if todo else {}
            cached = [(cid, h, found[h]) for cid, _, h in todo if h in found]
            todo = [x for x in todo if x[2] not in found]
            n = self._set_vectors(cached)
        if not todo:
            return n
        vecs = embed_chunks(model, self.cache, [t for _, t, _ in todo], batch_size=batch_size, shared=self.shared_cache)
        with self.lock:
            live = []
            for (cid, t, h), v in zip(todo, vecs):
                now = self.vector_text(cid)
                # the chunk may have changed or gone while the model ran: then its new text
                # is (or will be) queued again
                if now is not None and text_hash(now) == h:
                    live.append((cid, h, v))
            return n + self._set_vectors(live)

    def _lexical_damaged(self, exc: BaseException) -> None:
        """A channel failed on the loaded snapshot's data (lock held): log it, drop the
        lexical side (empty store and channels, no file records: the next reconcile re-reads
        every file; vectors are kept, keyed by text hash) and call :attr:`on_damaged` (the
        daemon queues a full reconcile)."""
        log.error(
            "lexical index in %s is damaged (%s: %s); rebuilding it from the export",
            self.index_dir,
            type(exc).__name__,
            exc,
            exc_info=exc,
        )
        cfg = self.config
        self.store = ChunkStore()
        self.bm25 = BM25Index(cfg.bm25_k1, cfg.bm25_b)
        self.meta_bm25 = BM25Index(cfg.bm25_k1, cfg.bm25_b)
        self.names = SymbolIndex()
        self.files = {}
        self.generation = ""
        self.version += 1
        self._dirty = True
        if self.on_damaged is not None:
            self.on_damaged()

    def _content_key(self) -> tuple:
        """Changes whenever a chunk is added, changed or removed (lock held)."""
        return (id(self.store), self.store.version, self.version)

    def text_hashes(self, ids: list[str]) -> tuple[tuple, list[tuple[str, str]]]:
        """``(content key, [(dense key, hash of its embedded text)])`` for the live dense keys
        of ``ids`` (:meth:`dense_pending`'s): from the last :meth:`dense_pending` when no batch changed the chunks since
        (one pass over the texts instead of one per caller: ~2.4 s for ssl31-ru's 38,570
        chunks), else read and hashed now under the lock. Compare the key with
        :meth:`_content_key` later to know whether the hashes still hold."""
        from .index.embed import text_hash

        with self.lock:
            key = self._content_key()
            known_key, known = self._pending_hashes
            if known_key == key and all(cid in known for cid in ids):
                return key, [(cid, known[cid]) for cid in ids]
            out = []
            for cid in ids:
                t = self.vector_text(cid)
                if t is not None:
                    out.append((cid, text_hash(t)))
            return key, out

    def _first_fill(self, pending: list[str]) -> int:
        """A first dense index (the dense index is empty) whose texts the local embedding
        cache already holds — a second developer's, filled from the team's shared cache, or
        one rebuilt after ``cache import`` — is built in one multi-threaded hnswlib build
        (:meth:`daemon.index.dense.DenseIndex.rebuild_from`, all cores) outside the engine lock, then
        swapped in, instead of upserted 256 at a time on one thread. Returns the vectors set
        (0 when the dense index is not empty or fewer than :data:`FIRST_FILL_MIN` are cached).
        Chunks that changed while the graph was built are left pending (their vectors are
        dropped from the new graph)."""
        from .index.dense import DenseIndex
        from .index.embed import VECTOR_SEP, text_hash

        if self.dense is None or len(self.dense) or len(pending) < FIRST_FILL_MIN:
            return 0
        if self.cache is None:
            self.load_dense()
        key, todo = self.text_hashes(pending)
        found = self.cache.get_many([h for _, h in todo])
        hits = [(cid, h) for cid, h in todo if h in found]
        if len(hits) < FIRST_FILL_MIN:
            return 0
        fresh = DenseIndex(self.embedder.dim)
        fresh.rebuild_from([cid for cid, _ in hits], np.stack([found[h] for _, h in hits]), num_threads=-1)
        with self.lock:
            if len(self.dense):  # another batch got there first: keep it, the upserts follow
                return 0
            gone = []
            if self._content_key() != key:  # a batch changed chunks while the graph was built
                for cid, h in hits:
                    now = self.vector_text(cid)
                    if now is None or text_hash(now) != h:
                        gone.append(cid)
            if gone:
                fresh.remove(gone)
            self.dense = fresh
            dead = set(gone)
            for cid, h in hits:
                if cid not in dead:
                    self.embedded[cid] = h
                    self.stale_vectors.discard(cid)
                    if VECTOR_SEP in cid:
                        self._extra_vectors = True
            self._dense_gen += 1
            self._dense_dirty = True
            self.dense_compact_due = True  # one dense snapshot, not a journal of every vector
        log.info("dense index built from the embedding cache: %d vectors", len(hits) - len(gone))
        return len(hits) - len(gone)

    def _set_vectors(self, live: list) -> int:
        """Upsert ``live`` (``[(chunk id, text hash, (dim,) vector)]``) into the dense index,
        record them as embedded and journal them; returns ``len(live)``. Lock held."""
        if not live:
            return 0
        from .index.embed import VECTOR_SEP

        mat = np.stack([x[2] for x in live]).astype(np.float32)
        self.dense.upsert([x[0] for x in live], mat)
        for cid, h, _ in live:
            self.embedded[cid] = h
            self.stale_vectors.discard(cid)
            if VECTOR_SEP in cid:
                self._extra_vectors = True
        self._dense_gen += 1
        self._dense_dirty = True
        if self.journal_on:
            self._dense_journal_append(live, mat)
        return len(live)

    # ------------------------------------------------------------------ lookups
    def get_chunk(self, chunk_id: str) -> Chunk | None:
        """The chunk with this id, or None."""
        with self.lock:
            return self.store.get_by_id(chunk_id)

    def file_chunks(self, rel: str, *, kind: str | None = None) -> list[Chunk] | None:
        """The chunks of one indexed file in index order (a module's methods and header code;
        a descriptor's object and its fields), or None when ``rel`` (relative, NFC) is not
        indexed or is not of ``kind`` (``"bsl"``: a module). One consistent batch: read
        under the engine lock."""
        with self.lock:
            rec = self.files.get(rel)
            if rec is None or (kind is not None and rec.kind != kind):
                return None
            store = self.store
            return [store.get(s) for s in rec.slot_list() if store.ids[s] is not None]

    def is_indexed(self, rel: str) -> bool:
        """True if the file ``rel`` (relative, NFC) is in the index (as a module or a descriptor)."""
        with self.lock:
            return rel in self.files

    def skipped_files(self) -> list[Skip]:
        """The files (and metadata objects) the last look at the disk did not index, and why."""
        with self.lock:
            return list(self.skipped)

    def skipped_indexed(self) -> list[str]:
        """Paths skipped at the last look that still have an indexed state (the chunks of an
        older good read: a descriptor caught half-written, a module that no longer decodes):
        they are known to be older than the disk. Files dropped on a skip (binary, too
        large) have no indexed state and are not listed."""
        with self.lock:
            return [k.path for k in self.skipped if k.path in self.files]

    def metadata_object(self, object_type: str, name: str) -> tuple[Chunk, list[Chunk], dict[str, str]]:
        """The metadata object ``<object_type>.<name>`` (Russian singular type; the name is
        matched case- and ``ё``-insensitively): its ``object`` chunk, its field chunks (in
        index order) and its modules (path -> module kind, the object's own and those of
        its forms and commands). Read in one batch under the lock. ``LookupError`` if no
        such object is indexed; the message lists up to 10 similar names."""
        from .text.folding import fold

        owner_key = fold(f"{object_type}.{name}")
        with self.lock:
            store = self.store
            objects = [store.get(s) for s in store.slots_where(kind="object", object_type=object_type).tolist()]
            match = [c for c in objects if fold(c.owner) == owner_key]
            if not match:
                close = sorted(c.owner for c in objects if fold(name) in fold(c.name))[:10]
                hint = f"; similar: {', '.join(close)}" if close else ""
                raise LookupError(f"no metadata object {object_type}.{name} in the index{hint}")
            o = match[0]
            rec = self.files.get(o.path)
            fields = [store.get(s) for s in (rec.slot_list() if rec else []) if store.ids[s] not in (None, o.id)]
            prefix = o.owner + "."
            modules = {}
            owners, kinds = store.tables["owner"].values, store.tables["module_kind"].values
            owner_col, kind_col = store.col("owner"), store.col("module_kind")
            for r in self.files.values():
                if r.kind != "bsl" or not r.slots:
                    continue
                first = r.slot_list()[0]
                if store.ids[first] is None:
                    continue
                owner = owners[owner_col[first]]
                if owner == o.owner or owner.startswith(prefix):
                    modules[r.path] = kinds[kind_col[first]]
        return o, fields, modules

    def similar_objects(self, name: str, limit: int = 5) -> list[str]:
        """Metadata objects whose names are closest to an unknown ``Тип.Имя`` (or a bare
        name), for "did you mean": the names channel (exact, prefix, CamelHump) on the name
        and on it shortened by up to 4 characters (``Пользователь`` -> ``Пользовател``
        finds ``Справочник.Пользователи``; ``КурсВалют`` finds ``РегистрСведений.КурсыВалют``
        by CamelHump), qualified by the type when one is given, then without it; objects of
        the asked type first. At most ``limit`` owners; [] when nothing is close."""
        from .contract import normalize_object_type

        typ, _, obj = name.strip().partition(".")
        if not obj:
            typ, obj = "", typ
        ru = normalize_object_type(typ) if typ else None
        found: list[str] = []
        for qualifier in ([typ] if typ else []) + [""]:
            for k in range(len(obj), max(2, len(obj) - 4) - 1, -1):
                query = f"{qualifier}.{obj[:k]}" if qualifier else obj[:k]
                try:
                    res = self.search(
                        query, mode="lexical", top_k=20, filters=Filters(scope="metadata"), snippets=False
                    )
                except ValueError:
                    break
                for h in res.hits:
                    if h.kind == "object" and h.match in ("exact", "prefix", "camelhump") and h.owner not in found:
                        found.append(h.owner)
                if len(found) >= limit:
                    break
            if found:
                break
        found.sort(key=lambda o: o.split(".", 1)[0] != ru)  # the asked type first, else the names channel's order
        return found[:limit]

    @property
    def lexical_unsaved(self) -> bool:
        """True while the lexical side has changes that no snapshot holds yet (the journal
        does): the service writes a snapshot when it has been quiet for a while."""
        return self._dirty

    @property
    def dense_unsaved(self) -> bool:
        """True while the dense side has vectors that no dense snapshot holds yet."""
        return self._dense_dirty

    def confine(self, path: str) -> str:
        """A user-given path as an NFC path relative to the root (the spelling of
        :class:`daemon.contract.Chunk` ``.path``). ``ValueError`` for an empty path, an
        absolute path outside the root, ``..``, or a symlink that leaves the root. The one
        path rule of every lookup (the daemon's ``get_method``, ``read_module``,
        ``document_symbols``)."""
        p = str(path).replace("\\", "/").strip()
        if not p:
            raise ValueError("empty path")
        if os.path.isabs(p):
            try:
                p = Path(p).resolve().relative_to(self.root).as_posix()
            except ValueError:
                raise ValueError(f"path {path!r} is outside the export root {self.root}") from None
        parts = [x for x in p.split("/") if x not in ("", ".")]
        if ".." in parts:
            raise ValueError(f"path {path!r} contains '..'; give a path relative to the export root")
        rel = unicodedata.normalize("NFC", "/".join(parts))
        full = (self.root / rel).resolve()
        try:
            full.relative_to(self.root)
        except ValueError:
            raise ValueError(f"path {path!r} leaves the export root through a symlink") from None
        return rel

    def stats(self) -> dict:
        """Counts for ``status``: files, modules, methods, metadata chunks, docs pages and
        sections, BM25 terms, dense. ``format`` is the export's (designer, edt, unknown), or
        ``docs`` for a root that holds markdown pages only (:mod:`daemon.sources.docs`). The per-chunk counts are recounted only after a batch changed the index."""
        with self.lock:
            store = self.store
            key = (id(store), store.version, self.version)
            if self._counts[0] != key:
                live = store.mask()
                kinds = store.col("kind")
                method = np.zeros(len(store.tables["kind"]) + 1, dtype=bool)
                for k in ("procedure", "function"):
                    if store.tables["kind"].find(k) >= 0:
                        method[store.tables["kind"].find(k)] = True
                methods = int((live & method[kinds] & (store.col("part") <= 1)).sum())
                meta = int(store.mask(scope="metadata").sum())
                docs = int(store.mask(scope="docs").sum())  # docs: sections
                self._counts = (key, methods, meta, docs)
            _, methods, meta, docs = self._counts
            pages = sum(1 for r in self.files.values() if r.kind == "docs")
            return {
                "root": str(self.root),
                # a root of markdown pages only (no configuration, no .bsl) is a docs root
                "format": "docs" if self.format == "unknown" and pages and pages == len(self.files) else self.format,
                "files": len(self.files),
                "modules": sum(1 for r in self.files.values() if r.kind == "bsl"),
                "methods": methods,
                "metadata_chunks": meta,
                "docs_pages": pages,
                "docs_sections": docs,
                "chunks": len(self.chunks),
                "bm25_terms": self.bm25.n_terms,
                "dense_done": self.dense_done(),
                "dense_total": len(self.chunks) if self.embedder else 0,
                # every current vector: chunks' first vectors and exported methods' context vectors
                "dense_vectors": len(self.embedded) - len(self.stale_vectors) if self.embedder else 0,
                "embedder": self.embedder.name if self.embedder else None,
                "skipped": len(self.skipped),
                "index_dir": str(self.index_dir),
            }
