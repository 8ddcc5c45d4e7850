"""The bsl-lens engine: one export root, its chunks and its three retrieval channels.

A plain library (no sockets, no asyncio, no threads of its own). The daemon owns one
:class:`Engine` per export root and serialises writers; every public method takes the
engine's lock, so readers never see a half-applied batch and hnswlib is never queried
while it is written.

Channels and fusion:

* ``names``: the symbol-name channel (:mod:`daemon.symbols`) for identifier-like queries:
  exact > prefix > CamelHump > substring, case- and ``ё``-folded, ``Модуль.Метод`` qualified.
* ``bm25``: BM25 Okapi over the 1C-aware tokenizer (:mod:`daemon.bm25`, :mod:`daemon.tokenize`).
* ``dense``: cosine similarity of embedded method heads in hnswlib (:mod:`daemon.dense`).

Modes: ``lexical`` fuses names + bm25, ``vector`` is dense alone, ``hybrid`` (default)
fuses all three with weighted RRF (:func:`daemon.fusion.rrf`). The weights are the
``CHANNEL_WEIGHTS`` rules below, measured on the dev gold set (README, "Quality").
"""

from __future__ import annotations

import hashlib
import logging
import os
import unicodedata
import re
import sys
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from . import __version__
from .bm25 import BM25Index, BM25State
from .bsl import chunk_module, live_code
from .fusion import RRF_K, rrf
from .intent import metadata_intent
from .metadata import chunk_metadata_bytes
from .contract import MAX_TOP_K, MODULE_KINDS, SCOPES, SEARCH_MODES, Chunk, Filters, Hit, SearchResult, Skip
from .docs import docs_name, docs_tokens, docs_weights, log_notes, read_page
from .scan import (
    ExportInfo,
    SkipFile,
    SourceFile,
    content_hash,
    decode_bytes,
    english_type,
    read_regular_bytes,
    scan_export,
    type_folder,
)
from .store import SnapshotError, atomic_write_parts, default_index_dir, read_msgpack, write_json, write_msgpack
from .symbols import SymbolIndex, SymbolState, api_boost, is_identifier_query
from .tokenize import tokenize, tokenize_query

log = logging.getLogger(__name__)

#: Skipped files named one per log line per batch (the rest are counted on one line): the
#: 136 objects ssl31-ru lists in Configuration.xml but does not ship all fit.
SKIP_LOG_LINES = 500

#: Bump when the layout of chunks.msgpack / lexical.msgpack changes (3: the symbol state
#: carries its derived arrays, see daemon.symbols.SymbolState).
SCHEMA_VERSION = 5  # 5: one snapshot.msgpack (chunks + lexical state) instead of two files
#: RRF weight of the metadata-restricted BM25 channel, used when the query asks about
#: metadata (:mod:`daemon.intent`); measured on the dev metadata queries (README).
META_WEIGHT = 1.0
#: RRF weight of the dense channel, and of the dense channel restricted to metadata chunks
#: for metadata questions (0 disables it); measured on the dev set (README).
DENSE_WEIGHT = 0.35
META_DENSE_WEIGHT = 1.0
#: The metadata dense channel reads the top CHANNEL_DEPTH * META_DENSE_DEPTH dense hits.
META_DENSE_DEPTH = 10
#: RRF weight of the lexical channels for a query in another script than the code
#: (measured on the dev crosslingual queries: README, "Quality").
CROSS_SCRIPT_WEIGHT = 0.0
#: The lexical snapshot file in the index directory (see :meth:`Engine.save_lexical`).
SNAPSHOT_FILE = "snapshot.msgpack"
#: The lexical journal (changes since the snapshot; :mod:`daemon.journal`), and when a new
#: snapshot is due instead: a journal over 64 MB (a frame holds the changed file's chunks:
#: ~1 MB for an edit of a 1 MB module; replaying 64 MB at start costs ~0.3 s) or a batch of
#: more than 300 files (a first index or a checkout: one snapshot is cheaper).
JOURNAL_FILE = "journal.bin"
JOURNAL_MAX_BYTES = 64 * 2**20
JOURNAL_MAX_FILES = 300
#: Dense journal: a snapshot of the dense side is due after this many journaled vectors
#: (4096 x 1.5 KB = 6 MB; replaying them into hnswlib at start takes well under a second).
DENSE_JOURNAL_MAX = 4096
#: Reconciles of at least this many changed files are chunked in :attr:`Engine.pool`'s worker
#: processes, in batches of POOL_BATCH. Below it the daemon chunks in its own thread: starting
#: a spawned worker (imports, grammar) costs ~1 s, more than 200 small files take to chunk.
POOL_MIN_FILES = 200
POOL_BATCH = 32
#: Longest query accepted (characters), and the part of it that is embedded: e5 reads at most
#: 512 tokens, and a query of a few thousand words would take seconds to embed while holding
#: the query embedder (every other hybrid query would wait behind it).
MAX_QUERY_CHARS = 4096
QUERY_EMBED_CHARS = 512
#: How many candidates each channel contributes to fusion.
CHANNEL_DEPTH = 100


class Cancelled(Exception):
    """:meth:`Engine.prepare` stopped because its ``cancel()`` said so (the daemon is
    stopping); nothing was changed, the reconcile runs again on the next start."""


class EngineConfig(msgspec.Struct, kw_only=True):
    """Engine settings (persisted in the manifest; a change of a lexical setting rebuilds).

    * ``max_file_bytes``: larger files are skipped with reason ``too_large`` (8 MiB; the
      largest real module, УправлениеДоступомСлужебный, is 3.5 MB).
    * ``max_method_lines``: methods longer than this are split into parts (400 lines).
    * ``stem``: Snowball stemming (PyStemmer, Russian + English) of word parts in BM25; on
      by default: on the dev gold set (ssl31-ru, lexical mode) it raised nDCG@10 from
      0.403 to 0.448 (semantic 0.311 -> 0.409, metadata file level 0.272 -> 0.501).
    * ``embed_max_chars``: size of the embedded method head (400 chars, research note:
      heads ≤ 400 chars beat ≤ 1000 chars on hit@1 and embed 2.3× faster).
    * ``rrf_k``: the RRF constant (60).
    * ``bm25_k1``, ``bm25_b``: BM25 Okapi parameters. k1 = 1.2 (the usual default);
      b = 0.3 instead of the usual 0.75, measured on the dev gold set (ssl31-ru, lexical mode,
      nDCG@10 symbol level): b 0.75 -> 0.500, 0.5 -> 0.519, 0.3 -> 0.528, 0.2 -> 0.515. Long
      methods are long because they do the work a question asks about; full length
      normalisation buries them under short wrappers that only mention the words.
    """

    max_file_bytes: int = 8 * 2**20
    max_method_lines: int = 400
    docs: list[str] = []  # docs: documentation folders inside the root (daemon.docs.normalize_docs_dirs)
    stem: bool = True
    embed_max_chars: int = 400
    rrf_k: int = RRF_K
    bm25_k1: float = 1.2
    bm25_b: float = 0.3

    def lexical_fingerprint(self) -> str:
        """The settings that change the lexical index; a mismatch with the saved manifest
        means a lexical rebuild."""
        return f"lines={self.max_method_lines};stem={self.stem};k1={self.bm25_k1};b={self.bm25_b}"


class FileRecord(msgspec.Struct, kw_only=True):
    """What the engine knows about one indexed file (module or metadata descriptor)."""

    path: str
    kind: str  # "bsl" | "metadata"
    hash: str
    size: int
    mtime_ns: int
    chunk_ids: list[str] = []
    encoding: str = "utf-8"
    deps: str = ""  # descriptors: signature of their form/template descriptors (see _deps_sig)


class RefreshReport(msgspec.Struct, kw_only=True):
    """What one reconcile with the disk did."""

    files_seen: int = 0
    files_changed: int = 0
    files_removed: int = 0
    chunks_added: int = 0
    chunks_changed: int = 0  # text or attributes changed: re-indexed
    chunks_moved: int = 0  # only the line numbers changed (an edit above): record updated
    chunks_removed: int = 0
    skipped: list[Skip] = []
    seconds: float = 0.0
    changed_ids: list[str] = []  # chunks added or changed (their vectors are due)


class FileUpdate(msgspec.Struct):
    """One file's new state, computed by :meth:`Engine.prepare` outside the lock.
    ``chunks`` None: the content is unchanged (a ``touch``), only the stat is refreshed.
    ``tokens``: BM25 tokens of the chunks that are new or changed (not merely moved)."""

    path: str
    kind: str
    digest: str
    size: int
    mtime_ns: int
    encoding: str
    chunks: list[Chunk] | None
    tokens: dict[str, list[str]] = {}
    deps: str = ""


class ChangeSet(msgspec.Struct, kw_only=True):
    """What one reconcile changes (:meth:`Engine.prepare`), applied by :meth:`Engine.apply`.

    ``full``: a whole-export scan (its skip list replaces the old one; files not seen are
    removed); otherwise only ``paths`` and the subtrees of ``dirs`` were looked at.
    """

    full: bool
    info: ExportInfo | None = None
    paths: tuple[str, ...] = ()
    dirs: tuple[str, ...] = ()
    updates: list[FileUpdate] = []
    removed: list[str] = []
    skipped: list[Skip] = []
    files_seen: int = 0
    seconds: float = 0.0


class _DenseMeta(msgspec.Struct):
    """``dense-<tag>/embedded.msgpack``: which text each vector was made from, and the
    generation its journal must carry (:mod:`daemon.journal`)."""

    generation: str
    embedded: dict[str, str]


class _DenseEntry(msgspec.Struct, array_like=True):
    """One dense journal frame: vectors set by one :meth:`Engine.embed_ids` call."""

    ids: list[str]
    hashes: list[str]
    vectors: bytes  # float32 little-endian, len(ids) x dim


class _Lexical(msgspec.Struct):
    bm25: BM25State
    meta: BM25State  # Engine.meta_bm25 (field name kept: snapshots written before the rename load)
    names: SymbolState


class _Snapshot(msgspec.Struct):
    """``snapshot.msgpack``: everything of the lexical side in one file, so one atomic
    rename commits it (two files could be caught half-written by a ``kill -9``)."""

    manifest: dict[str, Any]
    files: dict[str, FileRecord]
    chunks: list[Chunk]
    lexical: _Lexical
    skipped: list[Skip] = []


#: Chunks / file records per encoded piece of the snapshot (:func:`_snapshot_parts`).
SNAPSHOT_PART_ITEMS = 512


def _fresh(v: Any) -> Any:
    """A copy of ``v`` in which every non-ASCII ``str`` is a new object (containers and
    structs copied as needed; other values shared).

    Why: encoding a non-ASCII ``str`` to UTF-8 (msgspec does it with
    ``PyUnicode_AsUTF8AndSize``) leaves a UTF-8 copy cached inside the string object for its
    whole life. Encoding the live chunks, ids and terms for a snapshot of ssl31-ru cached
    ~130 MB that way (852k strings, measured with tracemalloc): a daemon that had written a
    snapshot sat at ~1.3x the RSS of one that had only read it. Encoding copies instead lets
    the caches die with the copies."""
    t = type(v)
    if t is str:
        return v if v.isascii() else "".join((v, ""))
    if t is list or t is tuple:
        if all(type(x) in _SCALARS for x in v):  # numbers only (a line range): nothing to copy
            return v
        out = [_fresh(x) for x in v]
        return out if t is list else tuple(out)
    if t is dict:
        return {_fresh(k): _fresh(x) for k, x in v.items()}
    if isinstance(v, msgspec.Struct):
        changes = {}
        for f in v.__struct_fields__:
            x = getattr(v, f)
            tx = type(x)
            if tx is str:
                if not x.isascii():
                    changes[f] = "".join((x, ""))
            elif x and (tx in _CONTAINER_OR_STR or isinstance(x, msgspec.Struct)):
                y = _fresh(x)
                if y is not x:
                    changes[f] = y
        return msgspec.structs.replace(v, **changes) if changes else v
    return v


_CONTAINER_OR_STR = frozenset((str, list, tuple, dict))
_SCALARS = frozenset((int, float, bool, type(None)))


def _msgpack_header(n: int, small: int, b16: int, b32: int) -> bytes:
    if n < 16:
        return bytes((small | n,))
    if n < 1 << 16:
        return bytes((b16,)) + n.to_bytes(2, "big")
    return bytes((b32,)) + n.to_bytes(4, "big")


def _snapshot_parts(snap: "_Snapshot"):
    """``msgspec.msgpack.encode(snap)``, byte for byte, as a sequence of pieces of at most
    :data:`SNAPSHOT_PART_ITEMS` chunks or file records each (asserted by the tests).

    The whole ssl31-ru snapshot is ~170 MB: built as one ``bytes`` it cost that much on
    top of the index, plus the encoder's growing buffer. Every piece encodes
    :func:`_fresh` copies, so no UTF-8 cache stays on the live strings. A map of the struct's
    fields in declaration order, as msgspec writes a non-``array_like`` struct."""
    enc = msgspec.msgpack.Encoder()
    fields = snap.__struct_fields__
    yield _msgpack_header(len(fields), 0x80, 0xDE, 0xDF)
    step = SNAPSHOT_PART_ITEMS
    for name in fields:
        yield enc.encode(name)
        value = getattr(snap, name)
        if name == "chunks":
            yield _msgpack_header(len(value), 0x90, 0xDC, 0xDD)
            for i in range(0, len(value), step):
                yield enc.encode(_fresh(value[i : i + step]))[len(_msgpack_header(min(step, len(value) - i), 0x90, 0xDC, 0xDD)) :]
        elif name == "files":
            items = list(value.items())
            yield _msgpack_header(len(items), 0x80, 0xDE, 0xDF)
            for i in range(0, len(items), step):
                part = dict(_fresh(items[i : i + step]))
                yield enc.encode(part)[len(_msgpack_header(len(part), 0x80, 0xDE, 0xDF)) :]
        else:
            yield enc.encode(_fresh(value))


def symbol_boost(chunk: Chunk) -> float:
    """Secondary order of the names channel among equal match kinds.

    Methods: :func:`daemon.symbols.api_boost` (exported, common module, not an internal
    module, in ``ПрограммныйИнтерфейс``, not deprecated: the gold set's grade rules written
    as SSL conventions). Metadata objects and fields: 0 (their exact names rarely collide).
    """
    if not chunk.is_code:
        return 0.0
    return api_boost(export=chunk.export, module_kind=chunk.module_kind, owner=chunk.owner, region=chunk.region)


class Engine:
    """Chunks, lexical indexes and the dense index of one export root.

    Create with :meth:`open` (loads a persisted snapshot if one matches), bring up to date
    with :meth:`refresh` (lexical side) and :meth:`embed_pending` (dense side), query with
    :meth:`search`, persist with :meth:`save`.
    """

    def __init__(self, root: Path, index_dir: Path, config: EngineConfig, embedder=None):
        self.root = Path(root).resolve()
        self.index_dir = Path(index_dir)
        self.config = config
        self.embedder = embedder  # daemon.embed.Embedder or None (lexical only)
        self.lock = threading.RLock()
        self.files: dict[str, FileRecord] = {}
        self.chunks: dict[str, Chunk] = {}
        self.embedded: dict[str, str] = {}
        # chunks whose text changed since their vector was made: the old vector still
        # answers (it is close) until embed_ids replaces it, but it is not counted as done
        self.stale_vectors: set[str] = set()
        self.skipped: list[Skip] = []
        self.log_skips = False  # the daemon names each skipped file in its log (_log_skips)
        self._skips_logged: set[tuple[str, str]] = set()  # (path, reason) logged by this process
        self.format = "unknown"
        self.bm25 = BM25Index(config.bm25_k1, config.bm25_b)
        self.meta_bm25 = BM25Index(config.bm25_k1, config.bm25_b)  # metadata chunks only: the channel for metadata questions
        self.names = SymbolIndex()
        self.dense = None
        self.cache = None
        # daemon.shared_cache.SharedCache or None: the team's cache, set by the caller (hook)
        self.shared_cache = None
        self._dirty = False
        self._dense_dirty = False
        self._script_cache: tuple[int, float] = (-1, 0.5)
        self._info = None  # daemon.scan.ExportInfo of the last full scan (targeted scans need it)
        self.version = 0  # bumped by every applied batch
        self._counts: tuple = (None, 0, 0, 0)
        # journals (daemon.journal): on in the daemon, off for one-shot CLI runs
        self.journal_on = False
        # a concurrent.futures process pool for big reconciles (make_pool); None: this thread
        self.pool = None
        self.pool_broken = False
        self.generation = ""  # of the lexical snapshot on disk
        self.dense_generation = ""
        self.compact_due = False  # the lexical journal is big: write a snapshot soon
        self.dense_compact_due = False
        self._dense_journal_vectors = 0
        if embedder is not None:
            from .dense import DenseIndex

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

    def _manifest(self) -> dict:
        from . import tokenize as tok

        return {
            "bsl_lens": __version__,
            "schema": SCHEMA_VERSION,
            "tokenizer": getattr(tok, "TOKENIZER_VERSION", 1),
            "lexical": self.config.lexical_fingerprint(),
            "root": str(self.root),
        }

    def _load(self) -> None:
        d = self.index_dir
        if not (d / SNAPSHOT_FILE).exists():
            return
        t0 = time.perf_counter()
        import gc

        # decoding creates ~40k chunk structs and their containers: cyclic GC passes over
        # them would cost a third of the decode time (measured: 0.47 -> 0.26 s CPU for
        # ssl31-ru's chunks), and none of it is garbage
        gc_on = gc.isenabled()
        gc.disable()
        try:
            snap = read_msgpack(d / SNAPSHOT_FILE, _Snapshot)
            want = self._manifest()
            if not all(snap.manifest.get(k) == want[k] for k in ("schema", "tokenizer", "lexical")):
                log.warning("index in %s is from another version or settings; rebuilding", d)
                return
            bm25 = BM25Index.from_state(snap.lexical.bm25)
            meta = BM25Index.from_state(snap.lexical.meta)
            names = SymbolIndex.from_state(snap.lexical.names)
            chunks = {c.id: c for c in snap.chunks}
        except (SnapshotError, KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
            log.warning("lexical snapshot unusable (%s); rebuilding", exc)
            return
        finally:
            if gc_on:
                gc.enable()
        self.files = snap.files
        self.chunks = chunks
        self.skipped = snap.skipped
        self.bm25, self.meta_bm25, self.names = bm25, meta, names
        self.format = snap.manifest.get("format", "unknown")
        share = snap.manifest.get("cyrillic_share")
        if isinstance(share, (int, float)):
            self._script_cache = (len(self.chunks), float(share))
        info = snap.manifest.get("info")
        if isinstance(info, dict):
            try:
                self._info = msgspec.convert(info, ExportInfo)
            except msgspec.ValidationError:
                self._info = None
        self.generation = str(snap.manifest.get("generation", ""))
        replayed = self._replay_journal()
        log.info(
            "loaded snapshot: %d files, %d chunks, %d journal batches in %.2fs",
            len(self.files), len(self.chunks), replayed, time.perf_counter() - t0,
        )

    def _replay_journal(self) -> int:
        """Apply the lexical journal of the loaded snapshot's generation; returns the number
        of batches replayed. A batch that does not decode ends the replay (the rest is
        redone by the reconcile with the disk)."""
        from . import journal

        if not self.generation:
            return 0
        n = 0
        for payload in journal.read(self.index_dir / JOURNAL_FILE, self.generation):
            try:
                cs = msgspec.msgpack.decode(payload, type=ChangeSet)
            except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                log.warning("journal batch %d does not decode (%s); replay stops", n + 1, exc)
                break
            self.apply(cs, journal=False)
            n += 1
        return n

    def _dense_paths(self) -> tuple[Path, Path, Path]:
        """(hnswlib dir, embedded-map file, embedding cache file) of the current embedder.

        Each embedder has its own files (named by a hash of its fingerprint), so a lexical-only
        run, a damaged lexical snapshot or a switch to another model and back never throws
        away vectors that took an hour to compute.
        """
        tag = hashlib.sha256(self.embedder.fingerprint.encode("utf-8")).hexdigest()[:12]
        d = self.index_dir
        return d / f"dense-{tag}", d / f"dense-{tag}" / "embedded.msgpack", d / f"embeddings-{tag}.bin"

    def load_dense(self) -> None:
        """Load the embedding cache and the dense index of the current embedder, if any.

        Independent of the lexical snapshot: vectors whose chunk no longer exists are pruned;
        chunks whose text changed are re-embedded by :meth:`embed_pending` / :meth:`embed_ids`
        (from the cache when the text was seen before). Loads into locals and swaps them in
        under the lock, so queries meanwhile use the (empty) dense side, never a half-loaded
        one. Never raises for damaged files (logged; the cache rebuilds the index).
        """
        if self.embedder is None:
            return
        from .dense import DenseIndex, DenseIndexError
        from .embed import EmbeddingCache

        dense_dir, embedded_file, cache_file = self._dense_paths()
        cache = EmbeddingCache.load(cache_file, self.embedder.fingerprint, self.embedder.dim)
        dense, meta = None, None
        if dense_dir.exists():
            try:
                dense = DenseIndex.load(dense_dir, self.embedder.dim)
                try:
                    meta = read_msgpack(embedded_file, _DenseMeta)
                except SnapshotError:  # written before the journal existed: a bare map
                    meta = _DenseMeta("", read_msgpack(embedded_file, dict[str, str]))
            except (DenseIndexError, SnapshotError) as exc:
                log.warning("dense index unusable (%s); it is rebuilt from the embedding cache", exc)
                dense, meta = None, None
        if dense is None:
            with self.lock:
                self.cache = cache
            return
        embedded = {k: v for k, v in meta.embedded.items() if k in dense}
        stray = [k for k in dense.keys() if k not in embedded]
        if stray:
            dense.remove(stray)
        replayed = self._replay_dense_journal(dense_dir, meta.generation, dense, cache, embedded)
        with self.lock:
            self.cache = cache
            self.dense = dense
            self.dense_generation = meta.generation
            self.embedded = embedded
            self._dense_journal_vectors = replayed
            if replayed:
                self._dense_dirty = True
            if self.files:  # never prune against an empty (unloaded, rebuilding) lexical side
                self._prune_dense()

    def _replay_dense_journal(self, dense_dir: Path, generation: str, dense, cache, embedded: dict[str, str]) -> int:
        """Upsert the vectors journaled since the dense snapshot into ``dense`` (and ``cache``,
        ``embedded``); returns how many."""
        from . import journal

        if not generation:
            return 0
        n = 0
        for payload in journal.read(dense_dir / JOURNAL_FILE, generation):
            try:
                e = msgspec.msgpack.decode(payload, type=_DenseEntry)
                vecs = np.frombuffer(e.vectors, dtype="<f4").reshape(len(e.ids), self.embedder.dim)
            except (msgspec.DecodeError, msgspec.ValidationError, ValueError) as exc:
                log.warning("dense journal frame does not decode (%s); replay stops", exc)
                break
            dense.upsert(e.ids, vecs)
            cache.put_many(e.hashes, vecs)
            for cid, h in zip(e.ids, e.hashes):
                embedded[cid] = h
            n += len(e.ids)
        if n:
            log.info("replayed %d journaled vectors", n)
        return n

    def _prune_dense(self) -> None:
        """Drop vectors of chunks that no longer exist (after a refresh or a lexical rebuild)."""
        if self.dense is None:
            return
        gone = [k for k in self.embedded if k not in self.chunks]
        if gone:
            self.dense.remove(gone)
            for k in gone:
                del self.embedded[k]
            self._dense_dirty = True

    def save(self) -> None:
        """Persist everything that changed: :meth:`save_lexical` then :meth:`save_dense`."""
        self.save_lexical()
        self.save_dense()

    def save_lexical(self) -> bool:
        """Write ``snapshot.msgpack`` (file records, chunks, BM25 and names state) if the
        lexical side changed since the last save; returns True if it wrote.

        One file, written atomically (:func:`daemon.store.atomic_write_bytes`), so a crash
        leaves the old or the new snapshot, never a mix. Encoding runs without the engine
        lock: call it from the writer thread (the only one that changes the lexical side);
        readers are never blocked by it. ssl31-ru: ~180 MB, see README "Benchmarks".
        """
        d = self.index_dir
        if not self._dirty and (d / SNAPSHOT_FILE).exists():
            return False
        from . import journal

        d.mkdir(parents=True, exist_ok=True, mode=0o700)  # private: it holds the code
        self._dirty = False  # changes made while we write mark it dirty again
        generation = journal.new_generation()
        try:
            manifest = {
                **self._manifest(),
                "format": self.format,
                "info": msgspec.to_builtins(self._info) if self._info is not None else None,
                "cyrillic_share": self._corpus_cyrillic_share(),
                "saved_at": time.time(),
                "generation": generation,
            }
            snap = _Snapshot(
                manifest=manifest,
                files=self.files,
                chunks=list(self.chunks.values()),
                lexical=_Lexical(self.bm25.to_state(), self.meta_bm25.to_state(), self.names.to_state()),
                skipped=self.skipped,
            )
            atomic_write_parts(d / SNAPSHOT_FILE, _snapshot_parts(snap))
            # the snapshot holds everything the journal held: start a new, empty one
            journal.reset(d / JOURNAL_FILE, generation)
            self.generation = generation
            self.compact_due = False
            write_json(d / "manifest.json", manifest)  # for people and tools; the snapshot carries its own
            for legacy in ("chunks.msgpack", "lexical.msgpack"):  # schema <= 4
                (d / legacy).unlink(missing_ok=True)
        except BaseException:
            self._dirty = True
            raise
        return True

    def save_dense(self) -> bool:
        """Write the dense index, its chunk-to-text-hash map and the embedding cache if new
        vectors came in since the last save; returns True if it wrote.

        Each file is atomic; a crash between them is repaired on load (:meth:`load_dense`
        drops vectors without a map entry and the other way round; the cache re-fills the
        rest without the model). Safe from any thread: takes the engine lock only to copy
        the map, hnswlib's own lock while it writes the graph.
        """
        from . import journal

        if self.dense is None or not self._dense_dirty:
            return False
        generation = journal.new_generation()
        with self.lock:
            self._dense_dirty = False
            embedded = dict(self.embedded)
            # vectors set after this point go to the next generation's journal
            dense_dir, embedded_file, cache_file = self._dense_paths()
        try:
            self.cache.save(cache_file)
            self.dense.save(dense_dir)
            write_msgpack(embedded_file, _DenseMeta(generation, embedded))
            journal.reset(dense_dir / JOURNAL_FILE, generation)
            self.dense_generation = generation
            self.dense_compact_due = False
            self._dense_journal_vectors = 0
        except BaseException:
            self._dense_dirty = True
            raise
        return True

    # ------------------------------------------------------------------ indexing
    def refresh(self, progress: Callable[[str, int, int], None] | None = None) -> RefreshReport:
        """Reconcile the index with the disk: scan, re-chunk changed files, drop removed ones.

        :meth:`prepare` (read, hash, chunk, tokenize; no lock held) then :meth:`apply` (one
        batch under the lock). A file is re-read only if its size or mtime changed (for a
        descriptor also those of its form/template descriptors), and re-chunked only if its
        content hash changed (so ``touch`` costs nothing). Chunks are diffed by id and
        text: BM25 and the names channel are updated per changed chunk, O(its terms). Dense
        vectors are not computed here; :meth:`embed_pending` does that.

        ``progress(stage, done, total)`` is called now and then. Bad files become
        :class:`Skip` records in the report and in :attr:`skipped`; this never raises for
        file content.
        """
        return self.apply(self.prepare(progress=progress))

    def update_paths(self, rel_paths: Iterable[str], dirs: Iterable[str] = ()) -> RefreshReport:
        """Re-index just these files and folders (relative to the root, NFC or on-disk
        spelling); what no longer exists is removed, a folder's whole subtree is reconciled.

        The watcher's path: costs O(the files named), not O(export) (:func:`daemon.scan.scan_paths`).
        A change of ``Configuration.xml`` or an EDT ``Configuration.mdo`` falls back to a full
        :meth:`refresh` (the export's layout may have changed).
        """
        return self.apply(self.prepare(rel_paths, dirs))

    # The writer's two steps ------------------------------------------------------------
    def prepare(
        self,
        paths: Iterable[str] | None = None,
        dirs: Iterable[str] = (),
        *,
        progress: Callable[[str, int, int], None] | None = None,
        cancel: Callable[[], bool] | None = None,
    ) -> "ChangeSet":
        """Work out what a reconcile changes, without touching the indexes (no lock held).

        ``cancel()``: polled after the scan and after every file (or worker batch of
        :data:`POOL_BATCH` files); when it returns True, :class:`Cancelled` is raised and the
        work so far is dropped (the indexes are untouched).

        ``paths is None``: the whole export (:func:`daemon.scan.scan_export`); otherwise only
        ``paths`` and the subtrees of ``dirs`` (:func:`daemon.scan.scan_paths`). Reads,
        hashes, chunks and tokenizes every file whose size or mtime changed, so that
        :meth:`apply` only swaps results in. Must run on the writer thread (it reads the
        current records, which only the writer changes). Never raises for file content.
        """
        import gc

        # a bulk build allocates millions of objects that all stay alive (chunks, token
        # tuples, index rows): with the cyclic GC on, its passes over them cost ~1.5 s of
        # ~13 s CPU for ssl31-ru
        gc_on = gc.isenabled()
        gc.disable()
        try:
            return self._prepare(paths, dirs, progress, cancel or (lambda: False))
        finally:
            if gc_on:
                gc.enable()

    def _prepare(self, paths, dirs, progress, cancel) -> "ChangeSet":
        from .scan import scan_paths

        t0 = time.perf_counter()
        full = paths is None
        paths = [] if paths is None else [unicodedata.normalize("NFC", str(p).replace("\\", "/")).strip("/") for p in paths]
        dirs = [unicodedata.normalize("NFC", str(d).replace("\\", "/")).strip("/") for d in dirs]
        if not full and (self._info is None or "" in dirs or any(_is_configuration(p) for p in paths + dirs)):
            full = True
        if full:
            scan = scan_export(self.root, max_file_bytes=self.config.max_file_bytes, docs=self.config.docs)
        else:
            scan = scan_paths(self.root, self._info, paths, dirs, max_file_bytes=self.config.max_file_bytes)
        if cancel():
            raise Cancelled()
        cs = ChangeSet(full=full, info=scan.info, paths=tuple(paths), dirs=tuple(dirs))
        skipped: list[Skip] = list(scan.skipped)
        sources = [("bsl", s) for s in scan.modules] + [("metadata", s) for s in scan.metadata]
        sources += [("docs", s) for s in scan.docs]  # docs: markdown pages (daemon.docs)
        cs.files_seen = len(sources)
        seen: set[str] = set()
        total = len(sources)
        todo = []
        for kind, src in sources:
            seen.add(src.path)
            rec = self.files.get(src.path)
            deps = self._deps_sig(src) if kind == "metadata" else ""
            if rec is not None and rec.size == src.size and rec.mtime_ns == src.mtime_ns and rec.deps == deps:
                continue
            todo.append((kind, src, rec, deps))
        fmt = scan.info.format
        if self.pool is not None and len(todo) >= POOL_MIN_FILES:
            results = self._chunk_in_pool(self.pool, todo, fmt, cancel)
        else:  # a few files, or no pool: in this thread
            results = (self._read_file(kind, src, rec, deps, fmt) for kind, src, rec, deps in todo)
        done = total - len(todo)
        for n, result in enumerate(results, 1):
            if cancel():
                raise Cancelled()
            if progress and (done + n) % 200 == 0:
                progress("chunk", done + n, total)
            if isinstance(result, Skip):
                skipped.append(result)
            elif result is not None:
                cs.updates.append(result)
        # files under a folder that could not be listed are kept, not deleted
        blocked = tuple(d + "/" for d in scan.unreadable_dirs if d)
        keep_all = "" in scan.unreadable_dirs
        if full:
            candidates = list(self.files)
        else:
            prefixes = tuple(d + "/" for d in dirs if d)
            candidates = [p for p in paths if p in self.files]
            if prefixes:
                candidates += [p for p in self.files if p.startswith(prefixes)]
        for path in dict.fromkeys(candidates):
            if path in seen or keep_all or (blocked and path.startswith(blocked)):
                continue
            cs.removed.append(path)
        if progress:
            progress("chunk", total, total)
        if full:
            from .metadata import missing_objects

            skipped.extend(missing_objects(self.root))
        cs.skipped = skipped
        cs.seconds = time.perf_counter() - t0
        return cs

    def _deps_sig(self, src) -> str:
        """Signature (size, mtime) of a descriptor's form/template descriptors: a change of
        ``Forms/<F>.xml`` re-chunks its owner object."""
        if not src.deps:
            return ""
        h = hashlib.blake2b(digest_size=8)
        for dep in src.deps:
            try:
                st = os.stat(self.root / dep, follow_symlinks=False)
                h.update(f"{dep}\0{st.st_size}\0{st.st_mtime_ns}\n".encode("utf-8", "surrogatepass"))
            except OSError:
                h.update(f"{dep}\0-\n".encode("utf-8", "surrogatepass"))
        return h.hexdigest()

    def _read_file(self, kind: str, src, rec: FileRecord | None, deps: str, fmt: str) -> "FileUpdate | Skip | None":
        """Read and chunk one file in this thread; BM25 tokens only for chunks that are new
        or changed (what :meth:`apply` needs)."""
        result = read_source(self.root, self.config, kind, src, rec, deps, fmt)
        if isinstance(result, FileUpdate) and result.chunks is not None:
            self._settle(result, {})
        return result

    def _settle(self, u: "FileUpdate", computed: dict[str, list[str]]) -> None:
        """Prepare ``u`` for :meth:`apply`: a chunk equal to the indexed one is replaced by
        the indexed instance (a re-indexed file holds new copies of every chunk; a checkout
        of 2,000 modules would otherwise double the chunks in memory until it is applied),
        and ``u.tokens`` keeps tokens only for new or changed chunks (from ``computed`` when
        a worker made them)."""
        tokens = {}
        chunks = u.chunks
        log_notes(u)  # docs: a page's oddities, named (daemon.docs.log_notes)
        for i, c in enumerate(chunks):
            prev = self.chunks.get(c.id)
            if prev is not None and prev == c:
                chunks[i] = prev
            elif prev is None or not _moved_only(prev, c):
                tokens[c.id] = computed.get(c.id) or self._bm25_tokens(c)
        u.tokens = tokens

    def _chunk_in_pool(self, pool, todo, fmt: str, cancel: Callable[[], bool] = lambda: False):
        """Chunk ``todo`` in the worker processes of ``pool`` (batches of
        :data:`POOL_BATCH` files); yields the results in order, each with only the tokens
        :meth:`apply` needs (the rest are dropped as each batch arrives, so a checkout of
        2,000 modules does not hold every chunk's tokens at once). If the pool breaks (a
        worker died, e.g. a crash in a native parser), the rest is chunked in this thread
        and :attr:`pool_broken` is set for the owner to replace the pool; unless ``cancel()``
        says the owner is stopping (it kills the pool on purpose): then :class:`Cancelled`."""
        from concurrent.futures.process import BrokenProcessPool

        cfg = msgspec.msgpack.encode(self.config)
        futures = []
        try:
            for i in range(0, len(todo), POOL_BATCH):
                items = [
                    _WorkItem(kind, src, rec.hash if rec else "", rec.deps if rec else "", rec.encoding if rec else "", deps)
                    for kind, src, rec, deps in todo[i : i + POOL_BATCH]
                ]
                futures.append(pool.submit(_chunk_batch, str(self.root), cfg, fmt, msgspec.msgpack.encode(items)))
        except (BrokenProcessPool, OSError, RuntimeError) as exc:
            log.warning("worker processes unavailable (%s); chunking in the daemon instead", exc)
            self.pool_broken = True
            futures = []
        for k in range(0, len(todo), POOL_BATCH):
            batch_todo = todo[k : k + POOL_BATCH]
            results = None
            if not self.pool_broken and k // POOL_BATCH < len(futures):
                # the future is dropped once read: it holds the batch's encoded result
                # (chunks and every chunk's tokens), and keeping all of them until the last
                # batch held ~870 MB in the daemon after a first index of ssl31-ru
                fut, futures[k // POOL_BATCH] = futures[k // POOL_BATCH], None
                try:
                    results = msgspec.msgpack.decode(fut.result(), type=_WorkResult).results()
                except (BrokenProcessPool, OSError, RuntimeError) as exc:
                    if cancel():
                        raise Cancelled() from None
                    log.warning("chunking in worker processes failed (%s); chunking in the daemon instead", exc)
                    self.pool_broken = True
                    for f in futures:
                        if f is not None:
                            f.cancel()
            if results is None:
                yield from (self._read_file(kind, src, rec, deps, fmt) for kind, src, rec, deps in batch_todo)
                continue
            for r in results:
                if isinstance(r, FileUpdate) and r.chunks is not None:
                    self._settle(r, r.tokens)  # keep only the tokens apply() needs
                yield r

    def apply(self, cs: "ChangeSet", *, journal: bool = True) -> RefreshReport:
        """Swap a :meth:`prepare` result into the indexes as one batch under the lock, so a
        reader sees the index before or after it, never half of it. Must run on the writer
        thread, right after the :meth:`prepare` it belongs to."""
        t0 = time.perf_counter()
        report = RefreshReport(files_seen=cs.files_seen)
        with self.lock:
            self.version += 1
            if cs.info is not None:
                self._info = cs.info
                self.format = cs.info.format
            for u in cs.updates:
                if u.chunks is None:
                    rec = self.files.get(u.path)
                    if rec is not None:
                        rec.size, rec.mtime_ns, rec.deps = u.size, u.mtime_ns, u.deps
                        self._dirty = True
                    continue
                if self._apply_file(u, report):
                    report.files_changed += 1
            for path in cs.removed:
                self._drop_file(path, report)
                report.files_removed += 1
            if cs.full:
                self.skipped = list(dict.fromkeys(cs.skipped))
            else:
                touched = set(cs.paths) | {u.path for u in cs.updates} | set(cs.removed)
                prefixes = tuple(d + "/" for d in cs.dirs if d)
                kept = [
                    k for k in self.skipped if k.path not in touched and not (prefixes and k.path.startswith(prefixes))
                ]
                # one record per (file, reason): a file seen by both a path and a folder
                # event of one batch must not count twice
                self.skipped = list(dict.fromkeys(kept + list(cs.skipped)))
                if cs.skipped or len(kept) != len(self.skipped) - len(cs.skipped):
                    self._dirty = True
            report.skipped = list(cs.skipped)
            skipped_now = list(self.skipped)
            # write buffered index additions now, not in the first search
            self.bm25.flush()
            self.meta_bm25.flush()
            self.names.flush()
            self._prune_dense()
        if journal and self.journal_on and (cs.updates or cs.removed or cs.skipped):
            self._journal_append(cs)
        if self.log_skips:
            self._log_skips(skipped_now)
        report.seconds = cs.seconds + time.perf_counter() - t0
        return report

    def _log_skips(self, skipped: list[Skip]) -> None:
        """Log each skipped file once per process at WARNING, with its path, reason and
        detail: the first reconcile names every skip (also those loaded from the snapshot),
        later ones only new skips; a file that stops being skipped and fails again later is
        named again. At most :data:`SKIP_LOG_LINES` lines per batch, then one line with the
        number left out (``bsl-lens status -v`` lists them)."""
        current = {(k.path, k.reason) for k in skipped}
        self._skips_logged &= current
        new = [k for k in skipped if (k.path, k.reason) not in self._skips_logged]
        for k in new[:SKIP_LOG_LINES]:
            log.warning("skipped %s: %s%s", k.path, k.reason, f" ({k.detail})" if k.detail else "")
        if len(new) > SKIP_LOG_LINES:
            log.warning("... and %d more skipped files (bsl-lens status -v lists them)", len(new) - SKIP_LOG_LINES)
        self._skips_logged |= {(k.path, k.reason) for k in new}

    def _journal_append(self, cs: "ChangeSet") -> None:
        """Append a batch to the lexical journal; a big batch (a first index, a checkout)
        asks for a snapshot instead (:attr:`compact_due`)."""
        from . import journal

        if self.compact_due or not self.generation:
            self.compact_due = True
            return
        if len(cs.updates) > JOURNAL_MAX_FILES:
            self.compact_due = True
            return
        slim = msgspec.structs.replace(
            cs, updates=[msgspec.structs.replace(u, tokens={}) for u in cs.updates]
        )
        try:
            # encoded from fresh copies: no UTF-8 cache stays on the live chunks (see _fresh)
            size = journal.append(self.index_dir / JOURNAL_FILE, msgspec.msgpack.encode(_fresh(slim)))
        except OSError as exc:
            log.warning("journal append failed (%s); a snapshot is written instead", exc)
            self.compact_due = True
            return
        if size > JOURNAL_MAX_BYTES:
            self.compact_due = True

    def _apply_file(self, u: "FileUpdate", report: RefreshReport) -> bool:
        """Swap one file's chunks in; True if any chunk was added, changed or removed."""
        before = (report.chunks_added, report.chunks_changed, report.chunks_removed, report.chunks_moved)
        old = self.files.get(u.path)
        old_ids = set(old.chunk_ids) if old else set()
        new_ids = []
        for c in u.chunks:
            new_ids.append(c.id)
            prev = self.chunks.get(c.id)
            if prev is not None and prev == c:
                continue
            if prev is not None and _moved_only(prev, c):
                self.chunks[c.id] = c  # lines shifted by an edit above: no index work
                report.chunks_moved += 1
                continue
            if prev is None:
                report.chunks_added += 1
            else:
                report.chunks_changed += 1
            report.changed_ids.append(c.id)
            self._add_chunk(c, u.tokens.get(c.id))
        for cid in old_ids - set(new_ids):
            self._remove_chunk(cid)
            report.chunks_removed += 1
        self.files[u.path] = FileRecord(
            path=u.path,
            kind=u.kind,
            hash=u.digest,
            size=u.size,
            mtime_ns=u.mtime_ns,
            chunk_ids=new_ids,
            encoding=u.encoding,
            deps=u.deps,
        )
        self._dirty = True
        return old is None or before != (report.chunks_added, report.chunks_changed, report.chunks_removed, report.chunks_moved)

    def _drop_file(self, path: str, report: RefreshReport) -> None:
        with self.lock:
            rec = self.files.pop(path, None)
            if rec is None:
                return
            for cid in rec.chunk_ids:
                self._remove_chunk(cid)
                report.chunks_removed += 1
            self._dirty = True

    def _bm25_tokens(self, c: Chunk) -> list[str]:
        return _chunk_tokens(c, self.config.stem)

    def _add_chunk(self, c: Chunk, tokens: list[str] | None = None) -> None:
        if c.id in self.embedded:
            from .embed import embed_text, text_hash

            # only the embedded head counts: an edit deep in a long method keeps its vector
            if self.embedded[c.id] != text_hash(embed_text(c, self.config.embed_max_chars)):
                self.stale_vectors.add(c.id)
            else:
                self.stale_vectors.discard(c.id)
        self.chunks[c.id] = c
        if tokens is None:
            tokens = self._bm25_tokens(c)
        self.bm25.add(c.id, tokens)
        if c.is_metadata:
            self.meta_bm25.add(c.id, tokens)
        if c.kind != "module" and c.part <= 1:
            name = docs_name(c) if c.is_docs else c.name  # docs: a heading's key (daemon.docs.docs_name)
            self.names.add(c.id, name, container=_containers(c), kind=c.kind, boost=symbol_boost(c))
        elif c.id in self.names:
            self.names.remove(c.id)
        # the dense side notices the changed text through embed_pending()

    def _remove_chunk(self, cid: str) -> None:
        self.chunks.pop(cid, None)
        self.stale_vectors.discard(cid)
        self.bm25.remove(cid)
        self.meta_bm25.remove(cid)
        self.names.remove(cid)
        if self.dense is not None and cid in self.embedded:
            self.dense.remove([cid])
            self.embedded.pop(cid, None)
            self._dense_dirty = True

    # ------------------------------------------------------------------ dense side
    def dense_done(self) -> int:
        """Chunks whose vector was made from their current text (the ``done`` of dense
        progress; a chunk edited since counts again once re-embedded)."""
        return len(self.embedded) - len(self.stale_vectors)

    def dense_pending(self) -> list[str]:
        """Ids of chunks whose vector is missing or was made from another text; also
        refreshes :attr:`stale_vectors`. The texts are hashed outside the lock (~40k chunks:
        about a second), so queries are not held up."""
        if self.embedder is None:
            return []
        from .embed import embed_text, text_hash

        with self.lock:
            items = list(self.chunks.items())
            embedded = dict(self.embedded)
        out = []
        for cid, c in items:
            if embedded.get(cid) != text_hash(embed_text(c, self.config.embed_max_chars)):
                out.append(cid)
        with self.lock:
            self.stale_vectors = {cid for cid in out if cid in self.embedded}
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
        resumes where it stopped. Returns the number of chunks whose vector was (re)set.
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
            from .shared_cache import prefetch

            prefetch(self, pending)
        total, done = len(pending), 0
        last_save = time.monotonic()
        step = batch_size * 8
        for i in range(0, total, step):
            self.embed_ids(pending[i : i + step], batch_size=batch_size)
            done += len(pending[i : i + step])
            if progress:
                progress("embed", min(done, total), total)
            if time.monotonic() - last_save > save_every_s:
                self.save()
                last_save = time.monotonic()
        return done

    def embed_ids(self, ids: Iterable[str], *, batch_size: int = 32, embedder=None) -> int:
        """Embed these chunks (those that still exist and whose vector is missing or stale)
        and upsert their vectors; returns how many vectors were set.

        ``embedder``: another instance of the same model (same fingerprint) to compute the
        passages with, so that a long background batch does not hold the query embedder's
        lock (the daemon's dense thread; see :class:`daemon.service.Service`). The engine lock
        is held only to read the texts and to upsert, never while the model runs.
        """
        if self.embedder is None:
            return 0
        from .embed import embed_chunks, embed_text, text_hash

        if self.cache is None:  # opened with load_dense=False and not loaded yet
            self.load_dense()
        model = embedder or self.embedder
        if model is not self.embedder and model.fingerprint != self.embedder.fingerprint:
            raise ValueError("embed_ids: the passage embedder is another model than the engine's")
        with self.lock:
            todo = []
            for cid in ids:
                c = self.chunks.get(cid)
                if c is None:
                    continue
                t = embed_text(c, self.config.embed_max_chars)
                h = text_hash(t)
                if self.embedded.get(cid) != h:
                    todo.append((cid, t, h))
        if not todo:
            return 0
        vecs = embed_chunks(model, self.cache, [t for _, t, _ in todo], batch_size=batch_size, shared=self.shared_cache)
        with self.lock:
            live = []
            for (cid, t, h), v in zip(todo, vecs):
                c = self.chunks.get(cid)
                # the chunk may have changed or gone while the model ran: then its new text
                # is (or will be) queued again
                if c is not None and text_hash(embed_text(c, self.config.embed_max_chars)) == h:
                    live.append((cid, h, v))
            if live:
                mat = np.stack([x[2] for x in live]).astype(np.float32)
                self.dense.upsert([x[0] for x in live], mat)
                for cid, h, _ in live:
                    self.embedded[cid] = h
                    self.stale_vectors.discard(cid)
                self._dense_dirty = True
        if live and self.journal_on:
            self._dense_journal_append(live, mat)
        return len(live)

    def _dense_journal_append(self, live, mat: np.ndarray) -> None:
        from . import journal

        if not self.dense_generation or self.dense_compact_due:
            self.dense_compact_due = True
            return
        dense_dir, _, _ = self._dense_paths()
        entry = _DenseEntry([x[0] for x in live], [x[1] for x in live], np.ascontiguousarray(mat, dtype="<f4").tobytes())
        try:
            journal.append(dense_dir / JOURNAL_FILE, msgspec.msgpack.encode(entry))
        except OSError as exc:
            log.warning("dense journal append failed (%s); a dense snapshot is written instead", exc)
            self.dense_compact_due = True
            return
        self._dense_journal_vectors += len(live)
        if self._dense_journal_vectors > DENSE_JOURNAL_MAX:
            self.dense_compact_due = True

    # ------------------------------------------------------------------ search
    def _allow(self, f: Filters | None) -> Callable[[str], bool] | None:
        if f is None or f == Filters():
            return None
        if f.scope not in SCOPES:
            raise ValueError(f"scope must be one of {SCOPES}, got {f.scope!r}")
        otype = None
        if f.object_type:
            from .scan import normalize_object_type

            otype = normalize_object_type(f.object_type)
            if otype is None:
                from .scan import object_type_list

                raise ValueError(f"unknown object type {f.object_type!r}; use one of: {object_type_list()}")
        prefix = self._normalize_prefix(f.path_prefix) if f.path_prefix else None
        if f.module_kind and f.module_kind not in MODULE_KINDS:
            raise ValueError(f"unknown module kind {f.module_kind!r}; one of {', '.join(MODULE_KINDS)}")
        chunks = self.chunks

        def allow(cid: str) -> bool:
            c = chunks.get(cid)
            if c is None:
                return False
            if f.scope == "code" and not c.is_code or f.scope == "metadata" and not c.is_metadata:
                return False
            if f.scope == "docs" and not c.is_docs:  # docs: documentation sections only
                return False
            if otype and c.object_type != otype:
                return False
            if f.module_kind and c.module_kind != f.module_kind:
                return False
            if prefix and not c.path.startswith(prefix):
                return False
            if f.export_only and not (c.export or not c.is_code):
                return False
            return True

        return allow

    def _normalize_prefix(self, prefix: str) -> str:
        """A path prefix relative to the root, forward slashes, NFC; an absolute prefix inside
        the root is made relative; ``ValueError`` for one outside it or with ``..``."""
        p = prefix.replace("\\", "/")
        if Path(p).is_absolute():
            try:
                p = Path(p).resolve().relative_to(self.root).as_posix()
            except ValueError:
                raise ValueError(f"path prefix {prefix!r} is outside the export root {self.root}") from None
            if p == ".":
                p = ""
        while p.startswith("./"):
            p = p[2:]
        if ".." in p.split("/"):
            raise ValueError(f"path prefix {prefix!r} contains '..'; give a prefix relative to the export root")
        return unicodedata.normalize("NFC", p)

    def search(
        self,
        query: str,
        *,
        mode: str = "hybrid",
        top_k: int = 10,
        filters: Filters | None = None,
        snippets: bool = True,
    ) -> SearchResult:
        """Rank chunks for ``query``.

        Args:
            query: a name (``ЗначениеРеквизитаОбъекта``, ``ЗнРекОб``, ``ОбщегоНазначения.Сообщ``)
                or natural language ("как отправить письмо").
            mode: ``hybrid`` (names + bm25 + dense through weighted RRF), ``lexical`` (names +
                bm25) or ``vector`` (dense only; empty without an embedder).
            top_k: number of hits to return (1..:data:`daemon.contract.MAX_TOP_K`). Parts of one method collapse to one hit.
            filters: see :class:`Filters`.
            snippets: False leaves ``Hit.snippet`` empty (symbol pickers show names only;
                a 128-hit answer is ~3x smaller on the wire without them).

        Returns a :class:`SearchResult`; ``dense_done``/``dense_total`` tell how complete
        the dense side was for this answer. Raises ``ValueError`` for a bad mode, top_k, a query over MAX_QUERY_CHARS or
        filter value.
        """
        if mode not in SEARCH_MODES:
            raise ValueError(f"mode must be one of {SEARCH_MODES}, got {mode!r}")
        if len(query) > MAX_QUERY_CHARS:
            raise ValueError(f"query is {len(query)} characters long; at most {MAX_QUERY_CHARS}")
        if not 1 <= int(top_k) <= MAX_TOP_K:
            raise ValueError(f"top_k must be in 1..{MAX_TOP_K}, got {top_k}")
        t0 = time.perf_counter()
        query = query.strip()
        if not any(ch.isalnum() for ch in query):
            query = ""  # nothing to search for: punctuation or whitespace only
        qvec = None
        if mode != "lexical" and self.embedder is not None and query and len(self.dense):
            if mode == "hybrid" and is_identifier_query(query) and self._names_fill(query, top_k, filters):
                pass  # a name query the names channel answers in full: skip the ~5 ms query embedding
            else:
                # a question is a sentence or two: the model reads at most the first
                # QUERY_EMBED_CHARS (a long text would be windowed and cost seconds)
                qvec = self.embedder.encode_queries([query[:QUERY_EMBED_CHARS]])[0]
        with self.lock:
            allow = self._allow(filters)
            channels, weights, match = self._channels(query, mode, qvec, allow)
            if self._docs_search(filters):  # docs: the weights measured on the docs gold set
                weights = docs_weights(weights, query, self.chunks)
            fused = rrf(channels, k=self.config.rrf_k, weights=weights)
            if match:
                fused = _names_first(fused, match)
            hits: list[Hit] = []
            seen: set[tuple[str, str | None]] = set()
            for cid, score, ranks in fused:
                c = self.chunks.get(cid)
                if c is None:
                    continue
                key = (c.path, c.symbol if not c.is_code else c.name if c.kind != "module" else "<module>")
                if c.is_docs:  # docs: parts of one section collapse, same-named sections do not
                    key = (c.path, "#" + c.properties.get("anchor", ""))
                if key in seen:  # parts of one method, or an #Если twin: one hit
                    continue
                seen.add(key)
                if len(hits) < top_k:
                    hits.append(self._hit(c, score, ranks, match.get(cid, ""), snippets))
            return SearchResult(
                query=query,
                mode=mode,
                hits=hits,
                total=len(seen),
                dense_done=self.dense_done(),
                dense_total=len(self.chunks) if self.embedder else 0,
                took_ms=(time.perf_counter() - t0) * 1000,
            )

    def _docs_search(self, filters: Filters | None) -> bool:
        """True for a search of documentation: ``scope`` docs, or a root that holds only docs
        sections (a docs root searched in ``all``)."""
        if filters is not None and filters.scope == "docs":
            return True
        if self.format != "unknown" or (filters is not None and filters.scope != "all"):
            return False
        return bool(self.chunks) and all(r.kind == "docs" for r in self.files.values())

    def _channels(self, query: str, mode: str, qvec, allow):
        channels: dict[str, list[str]] = {}
        weights: dict[str, float] = {}
        match: dict[str, str] = {}
        if not query:
            return channels, weights, match
        ident = is_identifier_query(query)
        intent = None
        if mode in ("hybrid", "lexical"):
            if ident:
                res = self.names.search(query, CHANNEL_DEPTH, allow=allow)
                channels["names"] = [k for k, _, _ in res]
                match = {k: m for k, _, m in res}
                # a name query is answered by the names channel; the others only break ties
                weights["names"] = 4.0 if res else 0.0
            qtok = tokenize_query(query, stem=self.config.stem)
            res = self.bm25.search(qtok, CHANNEL_DEPTH, allow=allow)
            channels["bm25"] = [k for k, _ in res]
            weights["bm25"] = self._lexical_weight(query)
            intent = metadata_intent(query) if not ident else None
            if intent is not None and intent.metadata:
                res = self.meta_bm25.search(qtok, CHANNEL_DEPTH, allow=self._metadata_filter(intent.object_types, allow))
                if not res and intent.object_types:
                    res = self.meta_bm25.search(qtok, CHANNEL_DEPTH, allow=allow)
                channels["meta"] = [k for k, _ in res]
                weights["meta"] = META_WEIGHT * weights["bm25"]
        if mode in ("hybrid", "vector") and qvec is not None and len(self.dense):
            intent = intent if intent is not None else (metadata_intent(query) if not ident else None)
            meta = mode == "hybrid" and META_DENSE_WEIGHT and intent is not None and intent.metadata
            # one hnswlib search serves both channels: the metadata channel is the dense
            # ranking restricted to metadata chunks (of the named types), read off a deeper list
            res = self.dense.search(qvec, CHANNEL_DEPTH * (META_DENSE_DEPTH if meta else 1), allow=allow)
            channels["dense"] = [k for k, _ in res[:CHANNEL_DEPTH]]
            weights["dense"] = DENSE_WEIGHT
            if meta:
                meta_allow = self._metadata_filter(intent.object_types)
                channels["meta_dense"] = [k for k, _ in res if meta_allow(k)][:CHANNEL_DEPTH]
                weights["meta_dense"] = META_DENSE_WEIGHT
        return channels, weights, match

    def _lexical_weight(self, query: str) -> float:
        """RRF weight of the lexical channels for a natural-language query: 1, or
        :data:`CROSS_SCRIPT_WEIGHT` when the query is written in another script than the code
        (an English question over a Russian configuration), where BM25 only matches stray
        English words in comments and strings and would vote with noise
        (research/peer_baseline.md, trap 3)."""
        q_cyr, q_lat = _script_counts(query)
        if q_cyr + q_lat == 0:
            return 1.0
        corpus_cyrillic = self._corpus_cyrillic_share()
        query_cyrillic = q_cyr / (q_cyr + q_lat)
        if abs(query_cyrillic - corpus_cyrillic) > 0.5:
            return CROSS_SCRIPT_WEIGHT
        return 1.0

    def _corpus_cyrillic_share(self) -> float:
        """Share of Cyrillic letters in the method and object names (cached per chunk count;
        docs sections do not count: 0.5, no cross-script rule, in a docs root)."""
        n = len(self.chunks)
        if self._script_cache[0] != n:
            cyr = lat = 0
            for c in self.chunks.values():
                if c.is_docs:  # docs: pages are bilingual; the rule is about the code's script
                    continue
                a, b = _script_counts(c.name)
                cyr += a
                lat += b
            self._script_cache = (n, cyr / (cyr + lat) if cyr + lat else 0.5)
        return self._script_cache[1]

    def _names_fill(self, query: str, top_k: int, filters: Filters | None) -> bool:
        """True if the names channel alone has ``top_k`` first-tier (exact, prefix, CamelHump)
        hits for ``query``: then those are the whole answer (see :func:`_names_first`)."""
        with self.lock:
            res = self.names.search(query, top_k, allow=self._allow(filters))
        return sum(1 for _, _, m in res if m in NAME_TIER) >= top_k

    def _metadata_filter(self, types: tuple[str, ...], allow=None):
        """Predicate over chunk ids: metadata chunks (of ``types`` when given) that ``allow``
        also accepts; used by the metadata BM25 and metadata dense channels."""
        chunks = self.chunks

        def metadata_only(cid: str) -> bool:
            c = chunks.get(cid)
            if c is None or not c.is_metadata or (types and c.object_type not in types):
                return False
            return allow is None or allow(cid)

        return metadata_only

    def _hit(self, c: Chunk, score: float, ranks: dict[str, int], match: str, snippets: bool = True) -> Hit:
        return Hit(
            id=c.id,
            path=c.path,
            symbol=(c.symbol if c.kind != "module" else None),
            kind=c.kind,
            name=c.name,
            owner=c.owner,
            object_type=c.object_type,
            module_kind=c.module_kind,
            export=c.export,
            signature=c.signature,
            start_line=c.start_line,
            end_line=c.end_line,
            name_range=c.name_range,
            score=round(score, 6),
            ranks=ranks,
            match=match,
            snippet=snippet(c) if snippets else "",
            anchor=c.properties.get("anchor", "") if c.is_docs else "",  # docs: path#anchor link
        )

    # ------------------------------------------------------------------ lookups
    def get_chunk(self, chunk_id: str) -> Chunk | None:
        """The chunk with this id, or None."""
        with self.lock:
            return self.chunks.get(chunk_id)

    def file_chunks(self, rel: str, *, kind: str | None = None) -> list[Chunk] | None:
        """The chunks of one indexed file in index order (a module's methods and header code;
        a descriptor's object and its fields), or None when ``rel`` (relative, NFC) is not
        indexed or is not of ``kind`` (``"bsl"``: a module). One consistent batch: read
        under the engine lock."""
        with self.lock:
            rec = self.files.get(rel)
            if rec is None or (kind is not None and rec.kind != kind):
                return None
            return [self.chunks[c] for c in rec.chunk_ids if c in self.chunks]

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
        from .folding import fold

        owner_key = fold(f"{object_type}.{name}")
        with self.lock:
            objects = [c for c in self.chunks.values() if c.kind == "object" and c.object_type == object_type]
            match = [c for c in objects if fold(c.owner) == owner_key]
            if not match:
                close = sorted(c.owner for c in objects if fold(name) in fold(c.name))[:10]
                hint = f"; similar: {', '.join(close)}" if close else ""
                raise LookupError(f"no metadata object {object_type}.{name} in the index{hint}")
            o = match[0]
            rec = self.files.get(o.path)
            fields = [self.chunks[c] for c in (rec.chunk_ids if rec else []) if c in self.chunks and c != o.id]
            prefix = o.owner + "."
            modules = {}
            for r in self.files.values():
                first = self.chunks.get(r.chunk_ids[0]) if r.kind == "bsl" and r.chunk_ids else None
                if first is not None and (first.owner == o.owner or first.owner.startswith(prefix)):
                    modules[r.path] = first.module_kind
        return o, fields, modules

    def similar_objects(self, name: str, limit: int = 5) -> list[str]:
        """Metadata objects whose names are closest to an unknown ``Тип.Имя`` (or a bare
        name), for "did you mean": the names channel (exact, prefix, CamelHump) on the name
        and on it shortened by up to 4 characters (``Пользователь`` -> ``Пользовател``
        finds ``Справочник.Пользователи``; ``КурсВалют`` finds ``РегистрСведений.КурсыВалют``
        by CamelHump), qualified by the type when one is given, then without it; objects of
        the asked type first. At most ``limit`` owners; [] when nothing is close."""
        from .scan import normalize_object_type

        typ, _, obj = name.strip().partition(".")
        if not obj:
            typ, obj = "", typ
        ru = normalize_object_type(typ) if typ else None
        found: list[str] = []
        for qualifier in ([typ] if typ else []) + [""]:
            for k in range(len(obj), max(2, len(obj) - 4) - 1, -1):
                query = f"{qualifier}.{obj[:k]}" if qualifier else obj[:k]
                try:
                    res = self.search(query, mode="lexical", top_k=20, filters=Filters(scope="metadata"), snippets=False)
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
        """Counts for ``status``: files, modules, methods, metadata chunks, BM25 terms, dense.
        The per-chunk counts are recounted only after a batch changed the index."""
        with self.lock:
            key = (id(self.chunks), len(self.chunks), self.version)
            if self._counts[0] != key:
                methods = sum(1 for c in self.chunks.values() if c.kind in ("procedure", "function") and c.part <= 1)
                meta = sum(1 for c in self.chunks.values() if c.is_metadata)
                docs = sum(1 for c in self.chunks.values() if c.is_docs)  # docs: sections
                self._counts = (key, methods, meta, docs)
            _, methods, meta, docs = self._counts
            return {
                "root": str(self.root),
                "format": self.format,
                "files": len(self.files),
                "modules": sum(1 for r in self.files.values() if r.kind == "bsl"),
                "methods": methods,
                "metadata_chunks": meta,
                "docs_pages": sum(1 for r in self.files.values() if r.kind == "docs"),
                "docs_sections": docs,
                "chunks": len(self.chunks),
                "bm25_terms": self.bm25.n_terms,
                "dense_done": self.dense_done(),
                "dense_total": len(self.chunks) if self.embedder else 0,
                "embedder": self.embedder.name if self.embedder else None,
                "skipped": len(self.skipped),
                "index_dir": str(self.index_dir),
            }


#: Names-channel match kinds that put a hit in the first tier of a name query.
NAME_TIER = ("exact", "prefix", "camelhump")


def _names_first(fused: list, match: dict[str, str]) -> list:
    """Order for a name query: hits the names channel matched as exact, prefix or CamelHump
    come first, in the names channel's own order (match kind, then the API boost); the rest
    follow by fused score. Measured on the 31 dev symbol queries (ssl31-ru, lexical mode):
    plain weighted RRF let BM25 lift callers and same-named copies over the definition
    (Hit@1 0.32 -> see README for the tiered result)."""
    first = [t for t in fused if match.get(t[0]) in NAME_TIER]
    first.sort(key=lambda t: t[2]["names"])
    rest = [t for t in fused if match.get(t[0]) not in NAME_TIER]
    return first + rest


_CYR = re.compile(r"[а-яёА-ЯЁ]")
_LAT = re.compile(r"[a-zA-Z]")


def _script_counts(text: str) -> tuple[int, int]:
    """(Cyrillic letters, Latin letters) in ``text``."""
    return len(_CYR.findall(text)), len(_LAT.findall(text))


def read_source(root: Path, config: EngineConfig, kind: str, src, rec, deps: str, fmt: str) -> "FileUpdate | Skip":
    """Read, hash and chunk one file (a ``.bsl`` module or a descriptor); no tokens.

    ``rec``: the file's current :class:`FileRecord` (or anything with ``hash``, ``deps``,
    ``encoding``), None if new. Same content and dependencies as ``rec``: a
    :class:`FileUpdate` with ``chunks=None`` (only the stat changed). Unreadable, binary,
    undecodable or invalid files: a :class:`Skip` (an invalid descriptor keeps its old
    chunks: no mass deletion on a half-written XML). Never raises for file content.
    """
    try:
        # no symlinks, no FIFOs swapped in after the scan; a size cap before reading
        data = read_regular_bytes(src.fs_path(root), config.max_file_bytes)
    except SkipFile as exc:
        return exc.to_skip(src.path)
    digest = content_hash(data)
    if rec is not None and rec.hash == digest and rec.deps == deps:
        return FileUpdate(src.path, kind, digest, src.size, src.mtime_ns, rec.encoding or "utf-8", None, deps=deps)
    encoding = "utf-8"
    if kind == "bsl":
        try:
            if len(data) > config.max_file_bytes:
                raise SkipFile("too_large", f"{len(data)} bytes > {config.max_file_bytes}")
            text, encoding = decode_bytes(data)
        except SkipFile as exc:
            return Skip(src.path, exc.reason, exc.detail)
        try:
            chunks = chunk_module(
                text,
                path=src.path,
                owner=src.owner,
                object_type=src.object_type,
                module_kind=src.module_kind,
                max_lines=config.max_method_lines,
            )
        except Exception as exc:  # a chunker bug must not stop the index
            log.exception("chunking %s failed", src.path)
            return Skip(src.path, "parse_failed", f"{type(exc).__name__}: {exc}")
    elif kind == "docs":  # docs: a markdown page (daemon.docs.read_page)
        try:
            chunks = read_page(data, src, config)
        except SkipFile as exc:
            return Skip(src.path, exc.reason, exc.detail)
        except Exception as exc:  # a chunker bug must not stop the index
            log.exception("chunking %s failed", src.path)
            return Skip(src.path, "parse_failed", f"{type(exc).__name__}: {exc}")
    else:
        chunks, skips = chunk_metadata_bytes(data, src, fmt, root=root)
        if skips and not chunks:
            # invalid or half-written XML: keep what we had (no mass deletion); retried later
            return skips[0]
    return FileUpdate(src.path, kind, digest, src.size, src.mtime_ns, encoding, chunks, deps=deps)


class _WorkItem(msgspec.Struct, array_like=True):
    kind: str
    src: SourceFile
    rec_hash: str
    rec_deps: str
    rec_encoding: str
    deps: str


class _WorkResult(msgspec.Struct):
    """A worker's batch. The BM25 tokens travel as ``vocab`` (the batch's distinct tokens)
    plus, per chunk id, ``uint32`` little-endian indices into it: a decoded token list then
    refers to one ``str`` per distinct token instead of one per occurrence (a first index of
    ssl31-ru decoded ~700 MB of duplicate token strings that way and the daemon's heap kept
    most of it after they were freed)."""

    updates: list[tuple[int, FileUpdate]]  # (position in the batch, result; tokens empty)
    skips: list[tuple[int, Skip]]
    vocab: list[str] = []
    token_ids: dict[str, bytes] = {}  # chunk id -> uint32[] indices into vocab

    def results(self) -> list:
        out: list = [None] * (len(self.updates) + len(self.skips))
        vocab, ids = self.vocab, self.token_ids
        get = vocab.__getitem__
        for i, r in self.updates:
            if r.chunks is not None and ids:
                r.tokens = {
                    c.id: list(map(get, np.frombuffer(ids[c.id], dtype="<u4").tolist()))
                    for c in r.chunks
                    if c.id in ids
                }
            out[i] = r
        for i, r in self.skips:
            out[i] = r
        return out


class _Rec(msgspec.Struct):
    hash: str
    deps: str
    encoding: str


def _chunk_tokens(c: Chunk, stem: bool) -> list[str]:
    """BM25 tokens of a chunk: a code chunk's owner and its :func:`daemon.bsl.live_code`
    (an extension's ``#Удаление`` lines left out), a metadata chunk's text."""
    if c.is_code:
        return tokenize(f"{c.owner}\n{live_code(c.text)}", stem=stem)
    if c.is_docs:  # docs: the prose tokenizer (daemon.docs.docs_tokens)
        return docs_tokens(c, stem)
    return tokenize(f"\n{c.text}", stem=stem)


def _chunk_batch(root: str, config: bytes, fmt: str, items: bytes) -> bytes:
    """Worker-process entry (:class:`concurrent.futures.ProcessPoolExecutor`): read, chunk
    and tokenize a batch of files; msgpack in and out (cheaper than pickling structs)."""
    cfg = msgspec.msgpack.decode(config, type=EngineConfig)
    res = _WorkResult([], [])
    vocab: dict[str, int] = {}
    for i, it in enumerate(msgspec.msgpack.decode(items, type=list[_WorkItem])):
        rec = _Rec(it.rec_hash, it.rec_deps, it.rec_encoding) if it.rec_hash else None
        r = read_source(Path(root), cfg, it.kind, it.src, rec, it.deps, fmt)
        if isinstance(r, Skip):
            res.skips.append((i, r))
            continue
        if r.chunks is not None:
            for c in r.chunks:
                toks = _chunk_tokens(c, cfg.stem)
                for t in dict.fromkeys(toks):
                    if t not in vocab:
                        vocab[t] = len(vocab)
                res.token_ids[c.id] = np.fromiter(map(vocab.__getitem__, toks), dtype="<u4", count=len(toks)).tobytes()
        res.updates.append((i, r))
    res.vocab = list(vocab)
    return msgspec.msgpack.encode(res)


def make_pool(workers: int | None = None, *, nice: int = 0):
    """A process pool for :attr:`Engine.pool`: ``workers`` processes (default: the CPU count,
    at most 4), started with ``spawn`` (the daemon has threads; forking them is unsafe).
    Chunking in workers keeps the daemon's GIL free for queries during a big reindex and
    uses every core for a first index. ``nice``: added to the workers' nice value (POSIX), so
    that the daemon's query threads win the CPU while a checkout is re-indexed.

    The workers die with the process that made the pool, ``kill -9`` included
    (:func:`_worker_init`); multiprocessing's resource tracker, which the pool's semaphores
    start, then reads EOF on its pipe (the workers held the last copies) and exits too."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    n = workers or min(4, os.cpu_count() or 1)
    return ProcessPoolExecutor(
        max_workers=n, mp_context=multiprocessing.get_context("spawn"), initializer=_worker_init, initargs=(nice, os.getpid())
    )


#: A worker checks this often (seconds) that its parent is alive, where PR_SET_PDEATHSIG is
#: missing (not Linux) or did not fire (the parent died before it was set).
PARENT_POLL_S = 0.5


def _worker_init(nice: int, parent: int) -> None:
    """Worker initializer: ``os.nice(nice)``; die with ``parent``: on Linux
    ``prctl(PR_SET_PDEATHSIG, SIGKILL)`` (the kernel kills the worker when the parent thread
    that spawned it exits), everywhere a daemon thread that calls ``os._exit`` once the parent
    pid is gone (reparented)."""
    if nice and hasattr(os, "nice"):
        try:
            os.nice(nice)
        except OSError:
            pass
    if sys.platform.startswith("linux"):
        try:
            import ctypes
            import signal

            ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG = 1
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(1)

    def watch() -> None:
        while True:
            time.sleep(PARENT_POLL_S)
            if os.getppid() != parent:
                os._exit(1)

    threading.Thread(target=watch, name="bsl-lens-parent-watch", daemon=True).start()



def _is_configuration(rel: str) -> bool:
    """True for the configuration's own descriptor (Designer ``Configuration.xml``, EDT
    ``.../Configuration/Configuration.mdo``) or a folder holding it: the layout may change."""
    return rel == "Configuration.xml" or rel.endswith("Configuration.mdo") or rel == "Configuration" or rel.endswith("/Configuration")


def _moved_only(prev: Chunk, new: Chunk) -> bool:
    """True if ``new`` differs from ``prev`` only in its position in the file."""
    return msgspec.structs.replace(prev, start_line=new.start_line, end_line=new.end_line, name_range=new.name_range) == new


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


def snippet(c: Chunk, max_chars: int = 300) -> str:
    """A short preview: doc comment and signature first for methods, the description for
    metadata; at most ``max_chars`` characters."""
    if c.is_code and c.kind != "module":
        body = "\n".join(x for x in (c.doc, c.signature) if x)
    else:
        body = c.text
    return body if len(body) <= max_chars else body[: max_chars - 1] + "…"
