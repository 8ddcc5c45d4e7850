"""The bsl-lens engine: one export root, its chunks and its retrieval channels.

A plain library (no sockets, no asyncio, no threads of its own). The daemon owns one
:class:`Engine` per export root and serialises writers; every public method takes the
engine's lock, so readers never see a half-applied batch and hnswlib is never queried while
it is written.

The engine is a facade over parts that each take what they need in their constructor:

* :class:`daemon.index.state.IndexState`: the chunk store, the channels (names, BM25, metadata
  BM25, metadata names, dense), the file records and the versions;
* :class:`daemon.index.reconcile.Reconciler`: the reconcile with the disk (prepare, apply);
* :class:`daemon.index.snapshot.Snapshotter`: snapshots and journals, load and save;
* :class:`daemon.index.dense_upkeep.DenseUpkeep`: which chunks need vectors, embedding them;
* :class:`daemon.ranking.ranker.Ranker`: a query's channels, RRF fusion and hits, with the
  tuned numbers of :class:`daemon.ranking.params.RankingParams`;
* :class:`daemon.index.usages.Usages`: find usages (references, callees, call graph,
  definition) over the reference graph the reconcile keeps with the chunks;
* :class:`daemon.index.counts.IndexCounts`: the counts of ``status``;
  :mod:`daemon.index.metadata_objects`: a metadata object with its fields and modules.

A query's path: :meth:`Engine.search` checks it (:mod:`daemon.ranking.query`), reads its cues
once (:class:`daemon.ranking.cues.QueryCues`), embeds it outside the lock when a dense channel
needs it, then ranks under the lock.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np

from .contract import (
    DEFAULT_REF_LIMIT,
    Callees,
    CallGraph,
    Chunk,
    Definition,
    Filters,
    Hit,
    References,
    RefsStatus,
    SearchResult,
    Skip,
)
from .index.chunkstore import ChunkStore, ChunksView
from .index.counts import IndexCounts
from .index.dense_upkeep import FIRST_FILL_MIN, DenseUpkeep
from .index.metadata_objects import metadata_object, object_names
from .index.apply import symbol_boost
from .index.changes import Cancelled, ChangeSet, EngineConfig, FileUpdate, RefreshReport
from .index.chunking import make_pool, read_source
from .index.reconcile import POOL_BATCH, POOL_MIN_FILES, Reconciler
from .index.snapshot import (
    CURRENT_FILE,
    DENSE_JOURNAL_MAX,
    JOURNAL_FILE,
    JOURNAL_MAX_BYTES,
    JOURNAL_MAX_FILES,
    LEXICAL_DIR,
    SCHEMA_VERSION,
    SNAPSHOT_FILE,
    Snapshotter,
)
from .index.state import FileRecord, IndexState
from .index.storage import default_index_dir
from .index.usages import Target, Usages
from .ranking.cues import QueryCues
from .ranking.params import RankingParams
from .ranking.query import QUERY_EMBED_CHARS, clean_query, export_filters
from .ranking.hits import snippet
from .ranking.ranker import NAME_TIER, IndexDamaged, Ranker
from .sources.files import confine

__all__ = [
    "CURRENT_FILE",
    "DENSE_JOURNAL_MAX",
    "FIRST_FILL_MIN",
    "JOURNAL_FILE",
    "JOURNAL_MAX_BYTES",
    "JOURNAL_MAX_FILES",
    "LEXICAL_DIR",
    "NAME_TIER",
    "POOL_BATCH",
    "POOL_MIN_FILES",
    "SCHEMA_VERSION",
    "SNAPSHOT_FILE",
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
    "IndexDamaged",
    "QueryCues",
    "RankingParams",
    "RefreshReport",
    "SearchResult",
    "Skip",
    "Target",
    "make_pool",
    "read_source",
    "snippet",
    "symbol_boost",
]

log = logging.getLogger(__name__)


def _state_attr(name: str, doc: str) -> property:
    """A property of the engine that reads and writes ``self.state.<name>``."""
    return property(
        lambda self: getattr(self.state, name), lambda self, value: setattr(self.state, name, value), doc=doc
    )


class Engine:
    """Chunks, lexical indexes and the dense index of one export root.

    Create with :meth:`open` (loads a persisted snapshot if one matches), bring up to date
    with :meth:`refresh` (lexical side) and :meth:`embed_pending` (dense side), query with
    :meth:`search`, persist with :meth:`save`. ``params``: the ranking's tuned numbers
    (default ``RankingParams()``); setting :attr:`params` later replaces the ranker (tuning).

    The attributes ``store``, ``files``, ``skipped``, ``format``, ``bm25``, ``meta_bm25``,
    ``names``, ``meta_names``, ``dense``, ``cache``, ``embedded``, ``stale_vectors``,
    ``version``, ``generation``, ``dense_generation``, ``compact_due`` and
    ``dense_compact_due`` are those of :attr:`state`. Set by the owner: ``pool`` (a process
    pool for big reconciles, :func:`make_pool`), ``journal_on`` (journal every batch; the
    daemon's), ``log_skips`` (name each skipped file in the log), ``on_damaged`` (called when a
    query finds the index damaged), ``shared_cache`` (the team's embedding cache, or None).
    """

    store = _state_attr("store", "Every chunk, by slot (:class:`daemon.index.chunkstore.ChunkStore`).")
    files = _state_attr("files", "Path -> :class:`daemon.index.state.FileRecord` of every indexed file.")
    skipped = _state_attr("skipped", "The files the last look at the disk did not index, and why.")
    format = _state_attr("format", "The export's format: designer, edt or unknown.")
    bm25 = _state_attr("bm25", "BM25 over every chunk.")
    meta_bm25 = _state_attr("meta_bm25", "BM25 over the metadata chunks.")
    names = _state_attr("names", "The names channel (:class:`daemon.index.names.SymbolIndex`).")
    meta_names = _state_attr("meta_names", "The metadata-names channel (:mod:`daemon.index.metanames`).")
    dense = _state_attr("dense", "The dense index (None without an embedder).")
    cache = _state_attr("cache", "The local embedding cache (None until the dense side is loaded).")
    embedded = _state_attr("embedded", "Dense key -> hash of the text its vector was made from.")
    stale_vectors = _state_attr("stale_vectors", "Chunks whose vector was made from an older text.")
    version = _state_attr("version", "Bumped by every applied batch.")
    generation = _state_attr("generation", "The lexical snapshot generation on disk.")
    dense_generation = _state_attr("dense_generation", "The dense snapshot generation on disk.")
    compact_due = _state_attr("compact_due", "The lexical journal is big: a snapshot is due.")
    dense_compact_due = _state_attr("dense_compact_due", "The dense journal is big: a dense snapshot is due.")

    def __init__(
        self,
        root: Path,
        index_dir: Path,
        config: EngineConfig,
        embedder=None,
        *,
        params: RankingParams | None = None,
    ) -> None:
        self.root = Path(root).resolve()
        self.index_dir = Path(index_dir)
        self.config = config
        self.embedder = embedder  # daemon.index.embedder.Embedder or None (lexical only)
        self.lock = threading.RLock()
        self.state = IndexState(
            bm25_k1=config.bm25_k1, bm25_b=config.bm25_b, dim=embedder.dim if embedder is not None else None
        )
        self.chunks = ChunksView(lambda: self.state.store)  # a read-only Mapping view of the chunks
        self.reconciler = Reconciler(self.state, root=self.root, index_dir=self.index_dir, config=config)
        self.snapshotter = Snapshotter(
            self.state, root=self.root, index_dir=self.index_dir, config=config, embedder=embedder, lock=self.lock
        )
        self.vectors = DenseUpkeep(
            self.state,
            embed_max_chars=config.embed_max_chars,
            embedder=embedder,
            lock=self.lock,
            on_vectors=self._journal_vectors,
        )
        self._params = params if params is not None else RankingParams()
        self.ranker = Ranker(self.state, root=self.root, params=self._params, stem=config.stem)
        self.journal_on = False  # journals (daemon.index.journal): on in the daemon, off for one-shot runs
        self.log_skips = False  # the daemon names each skipped file in its log
        self.on_damaged: Callable[[], None] | None = None
        self.shared_cache = None  # daemon.index.shared_cache.SharedCache or None, set by the caller
        self.usages = Usages(self.state)
        #: a find-usages question first resolves what a first index or a big batch left pending
        #: (in-process use); the daemon resolves it in the background instead (resolve_references)
        #: and answers meanwhile with ``resolving`` set
        self.resolve_on_demand = True
        self.counts = IndexCounts(self.state)

    @property
    def params(self) -> RankingParams:
        """The ranking's tuned numbers. Setting them replaces the ranker (its caches too)."""
        return self._params

    @params.setter
    def params(self, params: RankingParams) -> None:
        with self.lock:
            self._params = params
            self.ranker = Ranker(self.state, root=self.root, params=params, stem=self.config.stem)

    @property
    def pool(self):
        """The process pool big reconciles are chunked in (:func:`make_pool`), or None."""
        return self.reconciler.pool

    @pool.setter
    def pool(self, pool) -> None:
        self.reconciler.pool = pool

    @property
    def pool_broken(self) -> bool:
        """True once a worker of :attr:`pool` died; the owner replaces the pool and resets it."""
        return self.reconciler.pool_broken

    @pool_broken.setter
    def pool_broken(self, value: bool) -> None:
        self.reconciler.pool_broken = value

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
        params: RankingParams | None = None,
    ) -> Engine:
        """Create an engine for ``root`` and load its persisted snapshot when compatible.

        A missing, damaged or mismatched snapshot part is logged and rebuilt by the next
        :meth:`refresh` / :meth:`embed_pending`; it never raises. Raises ``FileNotFoundError``
        if ``root`` is not a directory. ``load_dense=False`` leaves the dense side empty
        until :meth:`load_dense` (the daemon answers lexical queries meanwhile).
        """
        root = Path(root)
        if not root.is_dir():
            raise FileNotFoundError(f"export root is not a directory: {root}")
        engine = cls(root, index_dir or default_index_dir(root), config or EngineConfig(), embedder, params=params)
        engine._load()
        if load_dense:
            engine.load_dense()
        return engine

    def _load(self) -> None:
        """Load the lexical snapshot and replay its journal on top."""
        t0 = time.perf_counter()
        if not self.snapshotter.load_lexical():
            return
        replayed = self.snapshotter.replay_journal(lambda cs: self.apply(cs, journal=False))
        log.info(
            "loaded snapshot: %d files, %d chunks, %d journal batches in %.2fs",
            len(self.state.files),
            len(self.state.store),
            replayed,
            time.perf_counter() - t0,
        )

    def load_dense(self) -> None:
        """Load the embedding cache and the dense index of the current embedder, if any.

        Independent of the lexical snapshot: vectors whose chunk no longer exists are pruned;
        chunks whose text changed are re-embedded by :meth:`embed_pending` / :meth:`embed_ids`
        (from the cache when the text was seen before). Read without the lock and swapped in
        under it, so queries meanwhile use the (empty) dense side, never a half-loaded one.
        Never raises for damaged files (logged; the cache rebuilds the index).
        """
        if self.embedder is None:
            return
        loaded = self.snapshotter.read_dense()
        with self.lock:
            self.snapshotter.install_dense(loaded)
            if loaded.dense is not None and self.state.files:  # never against an empty lexical side
                self.vectors.prune()

    def prewarm(self) -> float:
        """Build now what the first queries would otherwise build on demand, so that they
        answer at the warm latency: the cross-lingual lexicon, the metadata-names channel and
        the words of the objects' names (:class:`daemon.index.metanames.ObjectWords`).
        The method-name families (only a name typed in the other language needs them) stay on
        demand. Holds :attr:`lock` while the channel is built. Returns the seconds it took."""
        from .text.lexicon import default_lexicon

        t = time.perf_counter()
        default_lexicon()
        with self.lock:
            self.state.meta_names.ensure(self.state.store, self.state.entry_name)
            self.state.meta_names.ensure_objects(self.state.store)
        return time.perf_counter() - t

    def save(self) -> None:
        """Persist everything that changed: :meth:`save_lexical` then :meth:`save_dense`."""
        self.save_lexical()
        self.save_dense()

    def save_lexical(self) -> bool:
        """Write a new lexical snapshot generation if the lexical side changed
        (:meth:`daemon.index.snapshot.Snapshotter.save_lexical`); True if it wrote. Call it
        from the writer thread."""
        return self.snapshotter.save_lexical()

    def save_dense(self) -> bool:
        """Write the dense side if new vectors came in (:meth:`daemon.index.snapshot.Snapshotter.save_dense`);
        True if it wrote. Safe from any thread."""
        return self.snapshotter.save_dense()

    def _dense_paths(self) -> tuple[Path, Path, Path]:
        """(hnswlib dir, embedded-map file, embedding cache file) of the current embedder."""
        return self.snapshotter.dense_paths()

    @property
    def lexical_unsaved(self) -> bool:
        """True while the lexical side has changes that no snapshot holds yet (the journal
        does): the service writes a snapshot when it has been quiet for a while."""
        return self.state.dirty

    @property
    def dense_unsaved(self) -> bool:
        """True while the dense side has vectors that no dense snapshot holds yet."""
        return self.state.dense_dirty

    # ------------------------------------------------------------------ reconcile
    def refresh(self, progress: Callable[[str, int, int], None] | None = None) -> RefreshReport:
        """Reconcile the index with the disk: scan, re-chunk changed files, drop removed ones.

        :meth:`prepare` (read, hash, chunk, tokenize; no lock held) then :meth:`apply` (one
        batch under the lock). A file is re-read only if its stat signature (size, mtime, ctime,
        inode; for a descriptor also those of its form/template descriptors) changed, and re-chunked only if its
        content hash changed. Chunks are diffed by id and text: BM25 and the names channel are
        updated per changed chunk. Dense vectors are not computed here (:meth:`embed_pending`).
        ``progress(stage, done, total)`` is called now and then. Bad files become
        :class:`Skip` records in the report and in :attr:`skipped`; this never raises for file
        content.
        """
        return self.apply(self.prepare(progress=progress))

    def update_paths(self, rel_paths: Iterable[str], dirs: Iterable[str] = ()) -> RefreshReport:
        """Re-index just these files and folders (relative to the root, NFC or on-disk
        spelling); what no longer exists is removed, a folder's whole subtree is reconciled.
        The watcher's path: costs O(the files named), not O(export). A change of the
        configuration's own descriptor falls back to a full :meth:`refresh`."""
        return self.apply(self.prepare(rel_paths, dirs))

    def prepare(
        self,
        paths: Iterable[str] | None = None,
        dirs: Iterable[str] = (),
        *,
        progress: Callable[[str, int, int], None] | None = None,
        cancel: Callable[[], bool] | None = None,
    ) -> ChangeSet:
        """Work out what a reconcile changes, without touching the indexes (no lock held;
        :meth:`daemon.index.reconcile.Reconciler.prepare`). Must run on the writer thread.
        ``cancel()`` returning True raises :class:`Cancelled`."""
        return self.reconciler.prepare(paths, dirs, progress=progress, cancel=cancel)

    def apply(self, cs: ChangeSet, *, journal: bool = True) -> RefreshReport:
        """Swap a :meth:`prepare` result into the indexes as one batch under the lock, so a
        reader sees the index before or after it, never half of it; drop the vectors of the
        chunks it removed, journal it (``journal`` and :attr:`journal_on`) and log its skips
        (:attr:`log_skips`). Must run on the writer thread, right after its :meth:`prepare`."""
        t0 = time.perf_counter()
        with self.lock:
            report, skipped_now = self.reconciler.apply(cs)
            skipped_now += self.state.refs.skips()  # a broken layout or binding, named too
            # a swapped-in first index: every vector; else the chunks this batch added or changed
            self.vectors.prune(None if cs.staged is not None else report.changed_ids)
        if journal and self.journal_on and (cs.updates or cs.removed or cs.skipped):
            self.snapshotter.journal_append(cs)
        if self.log_skips:
            self.reconciler.log_skips(skipped_now)
        report.seconds = cs.seconds + time.perf_counter() - t0
        return report

    # ------------------------------------------------------------------ dense side
    def dense_done(self) -> int:
        """Chunks whose (first) vector was made from their current text (the ``done`` of
        dense progress; a chunk's extra vectors are not counted)."""
        return self.vectors.done()

    def vector_text(self, key: str) -> str | None:
        """The current text of dense key ``key`` (:func:`daemon.index.embed.vector_key`), None
        when the chunk is gone or has fewer texts now. Lock held."""
        return self.vectors.vector_text(key)

    def vector_texts_of(self, ids: Iterable[str]) -> dict[str, str]:
        """``{dense key: current text}`` of ``ids`` (chunk ids and/or dense keys;
        :meth:`daemon.index.dense_upkeep.DenseUpkeep.vector_texts_of`). Takes the lock."""
        return self.vectors.vector_texts_of(ids)

    def dense_pending(self) -> list[str]:
        """Dense keys whose vector is missing or was made from another text; [] without an
        embedder. The texts are hashed outside the lock, so queries are not held up."""
        if self.embedder is None:
            return []
        return self.vectors.pending()

    def text_hashes(self, ids: list[str]) -> tuple[tuple, list[tuple[str, str]]]:
        """``(content key, [(dense key, text hash)])`` of the live dense keys of ``ids``
        (:meth:`daemon.index.dense_upkeep.DenseUpkeep.text_hashes`)."""
        return self.vectors.text_hashes(ids)

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
        with all its texts handed to the model is done). Returns the number of vectors
        (re)set. No-op without an embedder.
        """
        if self.embedder is None:
            return 0
        with self.lock:
            self.vectors.prune()
        pending = self.dense_pending()
        if limit is not None:
            pending = pending[:limit]
        if self.shared_cache is not None:  # shared-cache hook: bulk lookup before embedding
            from .index.shared_cache import prefetch

            prefetch(self, pending)
        from .index.embed import vector_chunk

        def chunks(keys: list[str]) -> int:  # progress is in chunks, as the daemon's status
            return len({vector_chunk(k) for k in keys})

        first = 0
        if self.vectors.first_fill_due(pending):
            if self.state.cache is None:
                self.load_dense()
            first = self.vectors.first_fill(pending)
        filled = 0
        if first:
            rest = [cid for cid in pending if cid not in self.state.embedded]
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
        and upsert their vectors; returns how many vectors were set. ``ids``: chunk ids (each
        stands for all its texts) or dense keys.

        ``embedder``: another instance of the same model (same fingerprint) to compute the
        passages with, so that a long background batch does not hold the query embedder's
        lock (the daemon's dense thread). The engine lock is held only to read the texts and
        to upsert, never while the model runs. ``ValueError`` for another model.
        """
        if self.embedder is None:
            return 0
        if self.state.cache is None:  # opened with load_dense=False and not loaded yet
            self.load_dense()
        model = embedder or self.embedder
        if model is not self.embedder and model.fingerprint != self.embedder.fingerprint:
            raise ValueError("embed_ids: the passage embedder is another model than the engine's")
        return self.vectors.embed_ids(ids, batch_size=batch_size, model=model, shared=self.shared_cache)

    def _journal_vectors(self, live: list, mat: np.ndarray) -> None:
        """Journal vectors just set (lock held), when journals are on."""
        if self.journal_on:
            self.snapshotter.dense_journal_append(live, mat)

    # ------------------------------------------------------------------ search
    def query_cues(self, query: str, filters: Filters | None = None, *, mode: str = "hybrid") -> QueryCues:
        """The cues of ``query`` (:class:`daemon.ranking.cues.QueryCues`) over this index and
        ``filters``, read once: a caller that picks the search mode from them passes them on to
        :meth:`search`. ``mode``: the search they are for (a cross-script question gets its
        translation for the *dense_tr* channel unless ``lexical``). ``ValueError`` as
        :meth:`search`."""
        text = clean_query(query, mode, 1)
        filters = export_filters(filters)
        with self.lock:
            cues = self.ranker.cues(text, filters)
        if mode != "lexical" and self.embedder is not None:
            cues = self.ranker.translate(cues)
        return cues

    def search(
        self,
        query: str,
        *,
        mode: str = "hybrid",
        top_k: int = 10,
        filters: Filters | None = None,
        snippets: bool = True,
        cues: QueryCues | None = None,
    ) -> SearchResult:
        """Rank chunks for ``query``.

        Args:
            query: a name (``ЗначениеРеквизитаОбъекта``, ``ЗнРекОб``, ``ОбщегоНазначения.Сообщ``)
                or natural language ("как отправить письмо").
            mode: ``hybrid`` (every channel through weighted RRF), ``lexical`` (names, bm25,
                the metadata channels and api) or ``vector`` (dense only; empty without an
                embedder).
            top_k: number of hits to return (1..:data:`daemon.contract.MAX_TOP_K`). Parts of
                one method collapse to one hit.
            filters: see :class:`Filters`.
            snippets: False leaves ``Hit.snippet`` empty (symbol pickers show names only).
            cues: the query's cues from :meth:`query_cues` for the same query, filters and a
                mode other than ``lexical`` unless ``mode`` is lexical; None: read here.

        Returns a :class:`SearchResult`; ``dense_done``/``dense_total`` tell how complete the
        dense side was for this answer. Raises ``ValueError`` for a bad mode, top_k, filter
        value or a query over :data:`daemon.ranking.query.MAX_QUERY_CHARS`; :class:`IndexDamaged` when the index
        files turn out damaged (the lexical side is then rebuilt).
        """
        text = clean_query(query, mode, top_k)
        filters = export_filters(filters)
        t0 = time.perf_counter()
        if cues is None or cues.text != text:
            cues = self.query_cues(text, filters, mode=mode)
        fan_in = self.params.names_fanin_weight or self.params.api_fanin_weight
        if fan_in and self.resolve_on_demand and self.state.refs.pending:  # re-checked under the lock
            with self.lock:
                self._refs_resolved()  # the fan-in terms count resolved references only
        qvec, tvec, names = self._query_vector(cues, mode, top_k, filters)
        with self.lock:
            if names is not None and names[0] != self.state.content_key():
                names = None  # a batch came in meanwhile: the names channel is searched again
            try:
                hits, total = self.ranker.rank(
                    cues,
                    mode,
                    top_k,
                    filters,
                    qvec=qvec,
                    tvec=tvec,
                    snippets=snippets,
                    names=names[1] if names is not None else None,
                )
            except IndexDamaged as exc:
                self._lexical_damaged(exc.__cause__ or exc)
                raise
            return SearchResult(
                query=text,
                mode=mode,
                hits=hits,
                total=total,
                dense_done=self.dense_done(),
                dense_total=len(self.chunks) if self.embedder else 0,
                took_ms=(time.perf_counter() - t0) * 1000,
            )

    def _query_vector(self, cues: QueryCues, mode: str, top_k: int, filters: Filters | None) -> tuple:
        """``(qvec, tvec, names)``: the query's vector for the dense channels, or its
        translation's for *dense_tr* (the model reads at most :data:`daemon.ranking.query.QUERY_EMBED_CHARS`),
        embedded outside the lock; none in lexical mode, without an embedder or dense vectors.
        A name query in hybrid mode is looked up in the names channel first: when that alone
        fills ``top_k`` with first-tier matches, nothing is embedded. ``names``: that lookup as
        ``(content key, hits)`` for the ranker to reuse, or None."""
        if mode == "lexical" or self.embedder is None or not cues.text or not len(self.dense):
            return None, None, None
        names = None
        if mode == "hybrid" and cues.identifier:
            with self.lock:
                depth = max(top_k, self.ranker.params.channel_depth)
                hits = self.ranker.name_hits(cues, depth, self.ranker.allow(filters))
                names = (self.state.content_key(), hits)
            if self.ranker.names_fill(hits, top_k):
                return None, None, names  # the names channel answers in full: no query embedding
        vec = self.embedder.encode_queries([(cues.translated or cues.text)[:QUERY_EMBED_CHARS]])[0]
        return (None, vec, names) if cues.translated else (vec, None, names)

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
        self.state.reset_lexical(self.config.bm25_k1, self.config.bm25_b)
        if self.on_damaged is not None:
            self.on_damaged()

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
        """The files (and metadata objects) the last look at the disk did not index, and why;
        also the form layouts and bindings the references could not read (``bad_binding``,
        ``invalid_xml`` of a layout: the rest is indexed)."""
        with self.lock:
            return list(self.skipped) + self.state.refs.skips()

    # ------------------------------------------------------------------ find usages
    def references(
        self, target: Target, *, limit: int = DEFAULT_REF_LIMIT, possible: bool = False, locate: bool = False
    ) -> References:
        """Who references the methods ``target`` names (:meth:`daemon.index.usages.Usages.references`):
        references by path and position, at most ``limit``; ``possible``: list the unresolved
        sites with a target's name too; ``locate``: where each listed caller is. ``LookupError``
        for a name or method id that is not indexed, ``ValueError`` for bad arguments."""
        target = self._confined(target)
        with self.lock:
            self._refs_resolved()
            return self.usages.references(target, limit=limit, possible=possible, locate=locate)

    def callees(self, target: Target, *, locate: bool = False) -> Callees:
        """What the (first) method of ``target`` references (:meth:`daemon.index.usages.Usages.callees`)."""
        target = self._confined(target)
        with self.lock:
            self._refs_resolved()
            return self.usages.callees(target, locate=locate)

    def call_graph(self, target: Target, *, direction: str = "callers", depth: int = 2, fan_out: int = 10) -> CallGraph:
        """Callers or callees of the (first) method of ``target`` to ``depth`` levels, at most
        ``fan_out`` per node (:meth:`daemon.index.usages.Usages.call_graph`)."""
        target = self._confined(target)
        with self.lock:
            self._refs_resolved()
            return self.usages.call_graph(target, direction=direction, depth=depth, fan_out=fan_out)

    def definition(self, path: str, line: int, character: int) -> Definition:
        """The call or string naming a method at a position (0-based line, UTF-16 column) and
        where that method is; the method holding the position (:meth:`daemon.index.usages.Usages.definition`)."""
        if line < 0 or character < 0:
            raise ValueError("line and character are 0-based")
        rel = self.confine(path)
        with self.lock:
            self._refs_resolved()
            return self.usages.definition(rel, line, character)

    def resolve_references(self, step: int = 256, cancel: Callable[[], bool] | None = None) -> int:
        """Resolve the references a first index, a load or a big batch left pending, ``step``
        files per hold of the lock (queries run between the steps and say ``resolving``
        meanwhile); returns the files left (0 unless ``cancel()`` stopped it)."""
        while True:
            if cancel is not None and cancel():
                with self.lock:
                    return self.state.refs.pending
            with self.lock:
                left = self.state.refs.resolve_pending(step)
            if not left:
                return 0

    def source_lines(self, rel: str, lines: set[int]) -> dict[int, str]:
        """Indexed lines of a module (:meth:`daemon.index.usages.Usages.source_lines`)."""
        with self.lock:
            return self.usages.source_lines(rel, lines)

    def refs_status(self) -> RefsStatus:
        """The references for ``status`` (:meth:`daemon.index.usages.Usages.status`)."""
        with self.lock:
            return self.usages.status()

    def fan_in(self, chunk_ids: Iterable[str]) -> list[int]:
        """How many places in other files reach each method chunk (:meth:`daemon.index.state.IndexState.fan_in`)."""
        with self.lock:
            return self.state.fan_in(list(chunk_ids))

    def _refs_resolved(self) -> None:
        """Lock held: resolve what is pending when :attr:`resolve_on_demand` (in-process use)."""
        if self.resolve_on_demand and self.state.refs.pending:
            self.state.refs.resolve_pending()

    def _confined(self, target: Target) -> Target:
        """``target`` with its path (if any) relative to the root (:meth:`confine`)."""
        if target.path is not None:
            target.path = self.confine(target.path)
        return target

    def skipped_indexed(self) -> list[str]:
        """Paths skipped at the last look that still have an indexed state (the chunks of an
        older good read: a descriptor caught half-written, a module that no longer decodes):
        they are known to be older than the disk. Files dropped on a skip (binary, too
        large) have no indexed state and are not listed."""
        with self.lock:
            return [k.path for k in self.skipped if k.path in self.files]

    def docs_problems(self) -> dict[str, str]:
        """``{path: what is wrong}`` of the docs pages read with a problem, in path order
        (:meth:`daemon.index.counts.IndexCounts.docs_problems`)."""
        with self.lock:
            return self.counts.docs_problems()

    def metadata_object(self, object_type: str, name: str) -> tuple[Chunk, list[Chunk], dict[str, str], list[str]]:
        """The metadata object ``<object_type>.<name>``: its ``object`` chunk, its field chunks,
        its modules and the paths of its other definitions (an extension's adopted copy), read in
        one batch under the lock (:func:`daemon.index.metadata_objects.metadata_object`: the own
        definition first). ``LookupError`` if no such object is indexed; the message lists up to
        10 similar names."""
        with self.lock:
            return metadata_object(self.state, object_type, name)

    def object_names(self, object_type: str) -> dict[str, str]:
        """``{owner: name}`` of every indexed metadata object of ``object_type`` (Russian
        singular), in index order: what a lookup that found nothing picks its suggestions from."""
        with self.lock:
            return object_names(self.state, object_type)

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

    def confine(self, path: str) -> str:
        """A user-given path as an NFC path relative to the root (:func:`daemon.sources.files.confine`):
        the one path rule of every lookup (the daemon's ``get_method``, ``read_module``,
        ``document_symbols``). ``ValueError`` for a path that is empty or leaves the root."""
        return confine(self.root, path)

    def stats(self) -> dict:
        """Counts for ``status``: :meth:`daemon.index.counts.IndexCounts.numbers` (files, modules,
        methods, metadata chunks, docs pages and sections, the format), BM25 terms and dense."""
        with self.lock:
            return {
                "root": str(self.root),
                **self.counts.numbers(),
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
