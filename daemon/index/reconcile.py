"""The reconcile with the disk: what changed (:meth:`Reconciler.prepare`: scan, read, hash,
chunk, tokenize; in worker processes for big batches) and the swap into the index state
(:meth:`Reconciler.apply`, one batch, with the engine's lock held by the caller).

Also the reconcile's vocabulary: :class:`EngineConfig`, :class:`FileUpdate`,
:class:`ChangeSet`, :class:`RefreshReport` (and :class:`daemon.index.state.FileRecord`).
"""

from __future__ import annotations

import hashlib
import logging
import os
import unicodedata
import sys
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, NamedTuple

import msgspec
import numpy as np

from ..sources.bindings import (
    BINDING_TYPES,
    descriptor_references,
    form_layout_path,
    form_module_path,
    read_form_layout,
)
from ..sources.bsl import live_code
from ..sources.references import FileRefs, chunk_module_with_references
from ..contract import Chunk, Skip
from ..sources.metadata import chunk_metadata_bytes
from ..sources.scan import ExportInfo, scan_export
from ..sources.files import SkipFile, SourceFile, content_hash, decode_bytes, read_regular_bytes
from ..contract import english_type, type_folder
from .names import api_boost
from .state import FileRecord, IndexState
from ..text.tokenize import tokenize
from ..sources.docs import docs_name, docs_tokens, log_notes, read_page

log = logging.getLogger(__name__)

#: Skipped files named in the log per batch (the rest are counted in one line): enough for the
#: objects a large configuration lists but does not ship.
SKIP_LOG_LINES = 500
#: Skip reasons logged at INFO rather than WARNING: files that are expected where they are
#: (``not_markdown``: the images and other files of a docs folder).
QUIET_SKIP_REASONS = frozenset({"not_markdown"})

#: Reconciles of at least this many changed files are chunked in :attr:`Engine.pool`'s worker
#: processes, in batches of POOL_BATCH. Below it the daemon chunks in its own thread: starting
#: a spawned worker (imports, grammar) costs more than a few hundred small files take to chunk.
POOL_MIN_FILES = 200
POOL_BATCH = 32
#: Batches submitted ahead of the one being read, per worker process: enough to keep the
#: workers busy, few enough to bound the encoded results waiting in the owner.
POOL_WINDOW = 4


class Cancelled(Exception):
    """:meth:`Engine.prepare` stopped because its ``cancel()`` said so (the daemon is
    stopping); nothing was changed, the reconcile runs again on the next start."""


class EngineConfig(msgspec.Struct, kw_only=True):
    """Index settings (a change of a lexical setting rebuilds the lexical index).

    * ``max_file_bytes``: larger files are skipped with reason ``too_large`` (8 MiB).
    * ``max_method_lines``: methods longer than this are split into parts (400 lines).
    * ``docs``: documentation folders inside the root (:func:`daemon.sources.docs.normalize_docs_dirs`).
    * ``stem``: Snowball stemming (PyStemmer, Russian + English) of word parts in BM25.
    * ``embed_max_chars``: size of the embedded method head (characters).
    * ``bm25_k1``, ``bm25_b``: BM25 Okapi parameters; ``b`` below the usual 0.75, since long
      methods are long because they do the work a question asks about.

    Why these values: ``docs/ranking.md``, "Index settings".
    """

    max_file_bytes: int = 8 * 2**20
    max_method_lines: int = 400
    docs: list[str] = []
    stem: bool = True
    embed_max_chars: int = 400
    bm25_k1: float = 1.2
    bm25_b: float = 0.3

    def lexical_fingerprint(self) -> str:
        """The settings that change the lexical index; a mismatch with the saved manifest
        means a lexical rebuild."""
        return f"lines={self.max_method_lines};stem={self.stem};k1={self.bm25_k1};b={self.bm25_b}"


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
    ``tokens``: BM25 tokens of the chunks that are new or changed (not merely moved).
    ``refs``: the file's references (:mod:`daemon.index.refgraph`), read in the same pass: a
    module's record and, for a form module, its layout's; a binding descriptor's record; None:
    unchanged (or a file without references: docs pages, other descriptors)."""

    path: str
    kind: str
    digest: str
    size: int
    mtime_ns: int
    encoding: str
    chunks: list[Chunk] | None
    tokens: dict[str, list[str]] = {}
    deps: str = ""
    ino: int = 0
    ctime_ns: int = 0
    refs: list[FileRefs] | None = None


def refs_paths(path: str) -> tuple[str, ...]:
    """The reference-graph files one indexed file stands for: itself and, for a form module,
    its layout (``Form.xml`` / ``Form.form``), read with it."""
    layout = form_layout_path(path)
    return (path, layout) if layout else (path,)


class ChangeSet(msgspec.Struct, kw_only=True):
    """What one reconcile changes (:meth:`Engine.prepare`), applied by :meth:`Engine.apply`.

    ``full``: a whole-export scan (its skip list replaces the old one; files not seen are
    removed); otherwise only ``paths`` and the subtrees of ``dirs`` were looked at.
    ``staged``: a first index (or a rebuild of an empty engine) built aside as the results
    arrived (:class:`_Staged`: a chunk store and channels, no chunk held in ``updates``);
    :meth:`Reconciler.apply` swaps it in whole. Never journaled. ``refs_rebuilt``: a full
    reconcile that read the references of every file (they were incomplete).
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
    staged: Any = None
    refs_rebuilt: bool = False


#: An applied batch with more reference records than this leaves their resolution to
#: :meth:`daemon.index.refgraph.RefGraph.resolve_pending` (the owner runs it in steps, outside
#: a long hold of the engine lock): a checkout, a rebuild of the references.
REFS_DEFER_FILES = 300


def same_stat(rec: FileRecord, src: SourceFile) -> bool:
    """True when a file's stat signature is what the index recorded: size, mtime, ctime and
    inode. A rewrite that restores size and mtime (``cp -p``, ``rsync -a``, a ``tar`` restore)
    changes ctime or the inode, so it is re-read."""
    return rec.size == src.size and rec.mtime_ns == src.mtime_ns and rec.ctime_ns == src.ctime_ns and rec.ino == src.ino


def symbol_boost(chunk: Chunk) -> float:
    """Secondary order of the names channel among equal match kinds.

    Methods: :func:`daemon.index.names.api_boost` (exported, common module, not an internal
    module, in ``ПрограммныйИнтерфейс``, not deprecated: the gold set's grade rules written
    as SSL conventions). Metadata objects and fields: 0 (their exact names rarely collide).
    """
    if not chunk.is_code:
        return 0.0
    return api_boost(export=chunk.export, module_kind=chunk.module_kind, owner=chunk.owner, region=chunk.region)


def read_source(
    root: Path,
    config: EngineConfig,
    kind: str,
    src,
    rec,
    deps: str,
    fmt: str,
    *,
    extension: bool = False,
    refs_only: bool = False,
) -> "FileUpdate | Skip":
    """Read, hash and chunk one file (a ``.bsl`` module or a descriptor) and read its
    references in the same pass (:attr:`FileUpdate.refs`); no tokens.

    ``rec``: the file's current :class:`FileRecord` (or anything with ``hash``, ``deps``,
    ``encoding``), None if new. Same content and dependencies as ``rec``: a
    :class:`FileUpdate` with ``chunks=None`` (only the stat changed), with its references
    all the same when ``refs_only`` (the references are being rebuilt). ``extension``: the file
    belongs to a configuration extension. Unreadable, binary, undecodable or invalid files: a
    :class:`Skip` (an invalid descriptor keeps its old chunks: no mass deletion on a
    half-written XML). Never raises for file content.
    """
    try:
        # no symlinks, no FIFOs swapped in after the scan; a size cap before reading
        data = read_regular_bytes(src.fs_path(root), config.max_file_bytes)
    except SkipFile as exc:
        return exc.to_skip(src.path)
    digest = content_hash(data)
    unchanged = rec is not None and rec.hash == digest and rec.deps == deps
    if unchanged and not refs_only:
        enc = rec.encoding or "utf-8"
        return FileUpdate(
            src.path, kind, digest, src.size, src.mtime_ns, enc, None, deps=deps, ino=src.ino, ctime_ns=src.ctime_ns
        )
    encoding = "utf-8"
    refs: list[FileRefs] | None = None
    if kind == "bsl":
        try:
            if len(data) > config.max_file_bytes:
                raise SkipFile("too_large", f"{len(data)} bytes > {config.max_file_bytes}")
            text, encoding = decode_bytes(data)
        except SkipFile as exc:
            return Skip(src.path, exc.reason, exc.detail)
        try:
            chunks, mod_refs = chunk_module_with_references(
                text,
                path=src.path,
                owner=src.owner,
                object_type=src.object_type,
                module_kind=src.module_kind,
                extension=extension,
                max_lines=config.max_method_lines,
            )
        except Exception as exc:  # a chunker bug must not stop the index
            log.exception("chunking %s failed", src.path)
            return Skip(src.path, "parse_failed", f"{type(exc).__name__}: {exc}")
        refs = [mod_refs]
        if src.module_kind == "form":
            layout = read_form_layout(root, src, fmt, extension=extension, max_file_bytes=config.max_file_bytes)
            if layout is not None:
                refs.append(layout)
    elif kind == "docs":  # docs: a markdown page (daemon.sources.docs.read_page)
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
        if src.object_type in BINDING_TYPES:
            bound = descriptor_references(
                data, path=src.path, owner=src.owner, object_type=src.object_type, extension=extension
            )
            refs = [bound] if bound is not None else []
    if unchanged:  # only the references were asked for
        chunks = None
        encoding = rec.encoding or "utf-8"
    return FileUpdate(
        src.path,
        kind,
        digest,
        src.size,
        src.mtime_ns,
        encoding,
        chunks,
        deps=deps,
        ino=src.ino,
        ctime_ns=src.ctime_ns,
        refs=refs,
    )


class _WorkItem(msgspec.Struct, array_like=True):
    kind: str
    src: SourceFile
    rec_hash: str
    rec_deps: str
    rec_encoding: str
    deps: str
    extension: bool = False
    refs_only: bool = False


class _Todo(NamedTuple):
    """One file a reconcile reads: its kind, source, current record (None: new), dependencies'
    signature, whether it belongs to an extension, and whether only its references are wanted
    (its stat is unchanged; the references are being rebuilt)."""

    kind: str
    src: SourceFile
    rec: FileRecord | None
    deps: str
    extension: bool = False
    refs_only: bool = False


class _WorkResult(msgspec.Struct):
    """A worker's batch. The BM25 tokens travel as ``vocab`` (the batch's distinct tokens)
    plus, per chunk id, ``uint32`` little-endian indices into it: a decoded token list then
    refers to one ``str`` per distinct token instead of one per occurrence (duplicate token
    strings of a first index filled the daemon's heap, which kept most of it after they were
    freed)."""

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


#: How often (seconds) a wait for a worker batch checks whether the daemon is stopping.
CANCEL_POLL_S = 0.1


def _result_or_cancel(fut, cancel: Callable[[], bool]) -> bytes:
    """``fut.result()``, raising :class:`Cancelled` as soon as ``cancel()`` says so while the
    worker still chunks its batch (a batch of 32 large modules takes seconds on a busy
    machine; a stop must not wait for it)."""
    while True:
        try:
            return fut.result(timeout=CANCEL_POLL_S)
        except TimeoutError:  # concurrent.futures.TimeoutError is the builtin since 3.11
            if cancel():
                raise Cancelled() from None


def _chunk_tokens(c: Chunk, stem: bool) -> list[str]:
    """BM25 tokens of a chunk: a code chunk's owner and its :func:`daemon.sources.bsl.live_code`
    (an extension's ``#Удаление`` lines left out), a metadata chunk's text."""
    if c.is_code:
        return tokenize(f"{c.owner}\n{live_code(c.text)}", stem=stem)
    if c.is_docs:  # docs: the prose tokenizer (daemon.sources.docs.docs_tokens)
        return docs_tokens(c, stem)
    return tokenize(f"\n{c.text}", stem=stem)


def _chunk_batch(root: str, config: bytes, fmt: str, items: bytes) -> bytes:
    """Worker-process entry (:class:`concurrent.futures.ProcessPoolExecutor`): read, chunk,
    tokenize and extract the references of a batch of files; msgpack in and out (cheaper than
    pickling structs). The cyclic GC is off meanwhile (as in the owner's prepare): a batch
    allocates hundreds of thousands of short-lived objects (tree nodes, tokens, sites) that
    reference counting frees, and its passes over them cost a few per cent of the work."""
    import gc

    gc_on = gc.isenabled()
    gc.disable()
    try:
        return _chunk_batch_gc_off(root, config, fmt, items)
    finally:
        if gc_on:
            gc.enable()


def _chunk_batch_gc_off(root: str, config: bytes, fmt: str, items: bytes) -> bytes:
    cfg = msgspec.msgpack.decode(config, type=EngineConfig)
    res = _WorkResult([], [])
    vocab: dict[str, int] = {}
    for i, it in enumerate(msgspec.msgpack.decode(items, type=list[_WorkItem])):
        rec = _Rec(it.rec_hash, it.rec_deps, it.rec_encoding) if it.rec_hash else None
        r = read_source(
            Path(root), cfg, it.kind, it.src, rec, it.deps, fmt, extension=it.extension, refs_only=it.refs_only
        )
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
        max_workers=n,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_worker_init,
        initargs=(nice, os.getpid()),
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
    return (
        rel == "Configuration.xml"
        or rel.endswith("Configuration.mdo")
        or rel == "Configuration"
        or rel.endswith("/Configuration")
    )


def _moved_only(prev: Chunk, new: Chunk) -> bool:
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


class Reconciler:
    """The index's writer side: :meth:`prepare` works out what a reconcile with the disk
    changes (no lock, nothing changed), :meth:`apply` swaps it into the state (the caller
    holds the engine's lock).

    ``state``: the :class:`daemon.index.state.IndexState` it keeps current; ``root``: the
    export root; ``index_dir``: where a first index spills its chunk blobs; ``config``: the
    index settings. ``pool``: a process pool for big reconciles (:func:`make_pool`), set by
    the owner; None: everything is chunked in the calling thread. ``pool_broken`` is set when
    a worker died; the owner replaces the pool. Both run on the writer thread only.
    """

    def __init__(self, state: IndexState, *, root: Path, index_dir: Path, config: EngineConfig) -> None:
        self.state = state
        self.root = Path(root)
        self.index_dir = Path(index_dir)
        self.config = config
        self.pool = None
        self.pool_broken = False
        self._skips_logged: set[tuple[str, str]] = set()  # (path, reason) logged by this process

    # ------------------------------------------------------------------ prepare
    def prepare(
        self,
        paths: Iterable[str] | None = None,
        dirs: Iterable[str] = (),
        *,
        progress: Callable[[str, int, int], None] | None = None,
        cancel: Callable[[], bool] | None = None,
    ) -> ChangeSet:
        """Work out what a reconcile changes, without touching the state (no lock held).

        ``paths is None``: the whole export (:func:`daemon.sources.scan.scan_export`); otherwise
        only ``paths`` and the subtrees of ``dirs`` (:func:`daemon.sources.scan.scan_paths`); a
        change of the configuration's own descriptor falls back to the whole export. Reads,
        hashes, chunks and tokenizes every file whose stat signature changed (:func:`same_stat`)
        and every file named in ``paths`` (a watcher event or a request names it), so that
        :meth:`apply` only swaps results in. ``cancel()``: polled after the scan and after
        every file (or worker batch); when it returns True, :class:`Cancelled` is raised and
        the work so far is dropped. Must run on the writer thread (it reads the current
        records, which only the writer changes). Never raises for file content.
        """
        import gc

        # a bulk build allocates millions of objects that all stay alive (chunks, token
        # tuples, index rows): the cyclic GC's passes over them would be wasted
        gc_on = gc.isenabled()
        gc.disable()
        try:
            return self._prepare(paths, dirs, progress, cancel or (lambda: False))
        finally:
            if gc_on:
                gc.enable()

    def _scan(self, paths: list[str] | None, dirs: list[str]) -> tuple[bool, Any]:
        """``(full, scan)``: the whole export or just ``paths`` and ``dirs``."""
        from ..sources.scan import scan_paths

        full = paths is None
        info = self.state.info
        if not full and (info is None or "" in dirs or any(_is_configuration(p) for p in paths + dirs)):
            full = True
        if full:
            return True, scan_export(self.root, max_file_bytes=self.config.max_file_bytes, docs=self.config.docs)
        return False, scan_paths(self.root, info, paths, dirs, max_file_bytes=self.config.max_file_bytes)

    def _todo(self, scan, named: set[str]) -> tuple[list, list[_Todo], set[str]]:
        """``(sources, todo, seen)``: every file the scan saw as ``(kind, source)``, those whose
        stat signature (:func:`same_stat`, or their dependencies': a descriptor's form and
        template descriptors, a form module's layout) changed or that ``named`` holds (a watcher
        event or a request named them: always read again) as :class:`_Todo`, and their paths.
        While the references are incomplete (:attr:`IndexState.refs_complete`: a snapshot
        without them), the unchanged modules and binding descriptors are read for their
        references only."""
        sources = [("bsl", s) for s in scan.modules] + [("metadata", s) for s in scan.metadata]
        sources += [("docs", s) for s in scan.docs]  # markdown pages (daemon.sources.docs)
        seen: set[str] = set()
        todo = []
        files = self.state.files
        rebuild = not self.state.refs_complete
        extensions = {p.path for p in scan.info.projects if p.is_extension}
        for kind, src in sources:
            seen.add(src.path)
            rec = files.get(src.path)
            deps = self._deps_sig(src) if kind != "docs" else ""
            ext = bool(extensions) and src.project in extensions
            if rec is not None and src.path not in named and same_stat(rec, src) and rec.deps == deps:
                if rebuild and (kind == "bsl" or src.object_type in BINDING_TYPES):
                    todo.append(_Todo(kind, src, rec, deps, ext, True))
                continue
            todo.append(_Todo(kind, src, rec, deps, ext))
        return sources, todo, seen

    def _removed(self, full: bool, scan, paths: list[str], dirs: list[str], seen: set[str]) -> list[str]:
        """Indexed files the reconcile did not see again; files under a folder that could not
        be listed are kept, not removed."""
        files = self.state.files
        blocked = tuple(d + "/" for d in scan.unreadable_dirs if d)
        keep_all = "" in scan.unreadable_dirs
        if full:
            candidates = list(files)
        else:
            prefixes = tuple(d + "/" for d in dirs if d)
            candidates = [p for p in paths if p in files]
            if prefixes:
                candidates += [p for p in files if p.startswith(prefixes)]
        return [
            path
            for path in dict.fromkeys(candidates)
            if not (path in seen or keep_all or (blocked and path.startswith(blocked)))
        ]

    def _prepare(self, paths, dirs, progress, cancel) -> ChangeSet:
        t0 = time.perf_counter()
        if paths is not None:
            paths = [unicodedata.normalize("NFC", str(p).replace("\\", "/")).strip("/") for p in paths]
            # a form layout (Form.xml, Form.form) is read with its form's module
            paths += [m for m in map(form_module_path, paths) if m is not None and m not in paths]
        dirs = [unicodedata.normalize("NFC", str(d).replace("\\", "/")).strip("/") for d in dirs]
        full, scan = self._scan(paths, dirs)
        paths = paths or []
        if cancel():
            raise Cancelled()
        cs = ChangeSet(full=full, info=scan.info, paths=tuple(paths), dirs=tuple(dirs))
        skipped: list[Skip] = list(scan.skipped)
        sources, todo, seen = self._todo(scan, set(paths))
        cs.files_seen = total = len(sources)
        fmt = scan.info.format
        # a first index streams into a state built aside (swapped in by apply): no ChangeSet
        # holding every chunk and its tokens until one big apply
        st = self.state
        staged = _Staged(self) if full and not st.files and not len(st.store) else None
        if self.pool is not None and len(todo) >= POOL_MIN_FILES:
            results = self._chunk_in_pool(self.pool, todo, fmt, cancel)
        else:  # a few files, or no pool: in this thread
            results = (self._read_file(t, fmt) for t in todo)
        done = total - len(todo)
        for n, result in enumerate(results, 1):
            if cancel():
                raise Cancelled()
            if progress and (done + n) % 200 == 0:
                progress("chunk", done + n, total)
            if isinstance(result, Skip):
                skipped.append(result)
            elif staged is not None and result is not None and result.chunks is not None:
                staged.take(result)
            elif result is not None:
                cs.updates.append(result)
        cs.removed = self._removed(full, scan, paths, dirs, seen)
        if progress:
            progress("chunk", total, total)
        if full:
            from ..sources.metadata import missing_objects

            skipped.extend(missing_objects(self.root))
        cs.skipped = skipped
        cs.refs_rebuilt = full and not st.refs_complete
        if staged is not None:
            staged.finish()
            cs.staged = staged
        cs.seconds = time.perf_counter() - t0
        return cs

    def _deps_sig(self, src) -> str:
        """Signature (size, mtime, ctime, inode) of the files a file's chunks or references read
        besides itself: a descriptor's form/template descriptors (a change of ``Forms/<F>.xml``
        re-chunks its owner object) and a form module's layout (a change of ``Form.xml`` or
        ``Form.form`` re-reads the form's references); "" when there are none."""
        deps = src.deps
        if src.module_kind == "form":
            layout = form_layout_path(src.disk_path or src.path)
            deps = [layout] if layout else []
        if not deps:
            return ""
        h = hashlib.blake2b(digest_size=8)
        for dep in deps:
            try:
                st = os.stat(self.root / dep, follow_symlinks=False)
                sig = f"{dep}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ctime_ns}\0{st.st_ino}\n"
                h.update(sig.encode("utf-8", "surrogatepass"))
            except OSError:
                h.update(f"{dep}\0-\n".encode("utf-8", "surrogatepass"))
        return h.hexdigest()

    def _read_file(self, t: _Todo, fmt: str) -> FileUpdate | Skip | None:
        """Read and chunk one file in this thread; BM25 tokens only for chunks that are new
        or changed (what :meth:`apply` needs)."""
        result = read_source(
            self.root, self.config, t.kind, t.src, t.rec, t.deps, fmt, extension=t.extension, refs_only=t.refs_only
        )
        if isinstance(result, FileUpdate) and result.chunks is not None:
            self._settle(result, {})
        return result

    def _settle(self, u: FileUpdate, computed: dict[str, list[str]]) -> None:
        """Prepare ``u`` for :meth:`apply`: ``u.tokens`` keeps tokens only for new or changed
        chunks (from ``computed`` when a worker made them)."""
        tokens = {}
        store = self.state.store
        log_notes(u)  # docs: a page's oddities, named (daemon.sources.docs.log_notes)
        for c in u.chunks:
            prev = store.get_by_id(c.id) if c.id in store else None
            if prev is None or (prev != c and not _moved_only(prev, c)):
                tokens[c.id] = computed.get(c.id) or _chunk_tokens(c, self.config.stem)
        u.tokens = tokens

    def _chunk_in_pool(self, pool, todo, fmt: str, cancel: Callable[[], bool] = lambda: False):
        """Chunk ``todo`` in the worker processes of ``pool`` (batches of :data:`POOL_BATCH`
        files); yields the results in order, each with only the tokens :meth:`apply` needs
        (the rest are dropped as each batch arrives, so a big checkout does not hold every
        chunk's tokens at once). If the pool breaks (a worker died, e.g. a crash in a native
        parser), the rest is chunked in this thread and :attr:`pool_broken` is set for the
        owner to replace the pool; unless ``cancel()`` says the owner is stopping (it kills
        the pool on purpose): then :class:`Cancelled`."""
        from concurrent.futures.process import BrokenProcessPool

        batches = _PoolBatches(pool, todo, str(self.root), msgspec.msgpack.encode(self.config), fmt)
        try:
            batches.submit_until(batches.window)
        except (BrokenProcessPool, OSError, RuntimeError) as exc:
            log.warning("worker processes unavailable (%s); chunking in the daemon instead", exc)
            self.pool_broken = True
        for k in range(0, len(todo), POOL_BATCH):
            b = k // POOL_BATCH
            results = None if self.pool_broken else self._pool_results(batches, b, cancel)
            if results is None:
                yield from (self._read_file(t, fmt) for t in todo[k : k + POOL_BATCH])
                continue
            for r in results:
                if isinstance(r, FileUpdate) and r.chunks is not None:
                    self._settle(r, r.tokens)  # keep only the tokens apply() needs
                yield r

    def _pool_results(self, batches: _PoolBatches, b: int, cancel: Callable[[], bool]) -> list | None:
        """The results of batch ``b`` from the workers, or None when the pool broke (then
        :attr:`pool_broken` is set and the batch is chunked in this thread)."""
        from concurrent.futures.process import BrokenProcessPool

        try:
            batches.submit_until(b + 1 + batches.window)
        except (BrokenProcessPool, OSError, RuntimeError):
            pass  # reading the batch's future below reports the broken pool
        if b >= len(batches.futures):
            return None
        # the future is dropped once read: it holds the batch's encoded result (chunks and
        # every chunk's tokens)
        fut, batches.futures[b] = batches.futures[b], None
        try:
            return msgspec.msgpack.decode(_result_or_cancel(fut, cancel), type=_WorkResult).results()
        except (BrokenProcessPool, OSError, RuntimeError) as exc:
            if cancel():
                raise Cancelled() from None
            log.warning("chunking in worker processes failed (%s); chunking in the daemon instead", exc)
            self.pool_broken = True
            for f in batches.futures:
                if f is not None:
                    f.cancel()
            return None

    # ------------------------------------------------------------------ apply
    def apply(self, cs: ChangeSet) -> tuple[RefreshReport, list[Skip]]:
        """Swap a :meth:`prepare` result into the state as one batch; the caller holds the
        engine's lock, so a reader sees the index before or after it, never half of it. Must
        run on the writer thread, right after the :meth:`prepare` it belongs to. Returns the
        report (its ``seconds`` not set) and the skip list now."""
        st = self.state
        report = RefreshReport(files_seen=cs.files_seen)
        st.version += 1
        if cs.info is not None:
            st.info = cs.info
            st.format = cs.info.format
        if cs.staged is not None:
            self._swap_in(cs.staged, report)
        records: list[FileRefs] = []
        gone: list[str] = []
        for u in cs.updates:
            if u.refs is not None:
                records.extend(u.refs)
                gone.extend(refs_paths(u.path))
                st.dirty = True
            if u.chunks is None:
                rec = st.files.get(u.path)
                if rec is not None:
                    rec.size, rec.mtime_ns, rec.deps = u.size, u.mtime_ns, u.deps
                    rec.ino, rec.ctime_ns = u.ino, u.ctime_ns
                    st.dirty = True
                continue
            if self._apply_file(st, u, report):
                report.files_changed += 1
        for path in cs.removed:
            self._drop_file(st, path, report)
            gone.extend(refs_paths(path))
            report.files_removed += 1
        if records or gone:
            # a file's new records replace its old ones; its paths without one are dropped
            st.refs.update(records, gone, defer=st.refs.pending > 0 or len(records) > REFS_DEFER_FILES)
        if cs.refs_rebuilt:
            st.refs_complete = True
        self._update_skipped(cs)
        report.skipped = list(cs.skipped)
        # write buffered index additions now, not in the first search
        st.bm25.flush()
        st.meta_bm25.flush()
        st.names.flush()
        return report, list(st.skipped)

    def _update_skipped(self, cs: ChangeSet) -> None:
        """A full scan's skip list replaces the old one; a partial one replaces the skips of
        the files and folders it looked at. One record per (file, reason): a file seen by both
        a path and a folder event of one batch must not count twice."""
        st = self.state
        if cs.full:
            st.skipped = list(dict.fromkeys(cs.skipped))
            return
        touched = set(cs.paths) | {u.path for u in cs.updates} | set(cs.removed)
        prefixes = tuple(d + "/" for d in cs.dirs if d)
        kept = [k for k in st.skipped if k.path not in touched and not (prefixes and k.path.startswith(prefixes))]
        st.skipped = list(dict.fromkeys(kept + list(cs.skipped)))
        if cs.skipped or len(kept) != len(st.skipped) - len(cs.skipped):
            st.dirty = True

    def log_skips(self, skipped: list[Skip]) -> None:
        """Log each skipped file once per process at WARNING (INFO for the reasons in
        :data:`QUIET_SKIP_REASONS`), with its path, reason and detail: the first reconcile
        names every skip (also those loaded from the snapshot), later ones only new skips; a
        file that stops being skipped and fails again later is named again. At most
        :data:`SKIP_LOG_LINES` lines per batch, then one line with the number left out."""
        current = {(k.path, k.reason) for k in skipped}
        self._skips_logged &= current
        new = [k for k in skipped if (k.path, k.reason) not in self._skips_logged]
        for k in new[:SKIP_LOG_LINES]:
            # an image or other file in a docs folder is expected there: INFO, not a warning
            level = logging.INFO if k.reason in QUIET_SKIP_REASONS else logging.WARNING
            log.log(level, "skipped %s: %s%s", k.path, k.reason, f" ({k.detail})" if k.detail else "")
        if len(new) > SKIP_LOG_LINES:
            log.warning("... and %d more skipped files (bsl-lens status -v lists them)", len(new) - SKIP_LOG_LINES)
        self._skips_logged |= {(k.path, k.reason) for k in new}

    def _swap_in(self, staged: _Staged, report: RefreshReport) -> None:
        """Install a staged first index (from :meth:`apply`)."""
        st, new = self.state, staged.state
        if st.files or len(st.store):
            raise RuntimeError("a staged build is only for an empty engine")
        st.store, st.files = new.store, new.files
        st.bm25, st.meta_bm25, st.names = new.bm25, new.meta_bm25, new.names
        st.refs, st.refs_complete = new.refs, True  # its files' references are resolved later (pending)
        st.stale_vectors = new.stale_vectors
        r = staged.report
        report.files_changed += r.files_changed
        report.chunks_added += r.chunks_added
        report.chunks_changed += r.chunks_changed
        report.chunks_moved += r.chunks_moved
        report.chunks_removed += r.chunks_removed
        report.changed_ids.extend(r.changed_ids)
        st.dirty = True
        st.compact_due = True  # never journaled: a snapshot is due

    def _apply_file(self, st: IndexState, u: FileUpdate, report: RefreshReport) -> bool:
        """Swap one file's chunks into ``st``; True if any chunk was added, changed or removed."""
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
            if prev is not None and _moved_only(prev, c):
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
            new_slots.append(self._add_chunk(st, c, u.tokens.get(c.id)))
        for cid in old_ids - new_ids:
            if cid is not None:
                self._remove_chunk(st, cid)
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

    def _drop_file(self, st: IndexState, path: str, report: RefreshReport) -> None:
        rec = st.files.pop(path, None)
        if rec is None:
            return
        ids = st.store.ids
        for cid in [ids[s] for s in rec.slot_list()]:
            if cid is not None:
                self._remove_chunk(st, cid)
                report.chunks_removed += 1
        st.dirty = True

    def _add_chunk(self, st: IndexState, c: Chunk, tokens: list[str] | None = None) -> int:
        """Store ``c`` in ``st`` and index it in every lexical channel; returns its slot."""
        if c.id in st.embedded:
            from .embed_cache import text_hash
            from .embed_text import embed_text

            # only the embedded head counts: an edit deep in a long method keeps its vector
            if st.embedded[c.id] != text_hash(embed_text(c, self.config.embed_max_chars)):
                st.stale_vectors.add(c.id)
            else:
                st.stale_vectors.discard(c.id)
        slot = st.store.add(c)
        if tokens is None:
            tokens = _chunk_tokens(c, self.config.stem)
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

    def _remove_chunk(self, st: IndexState, cid: str) -> None:
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


class _PoolBatches:
    """The worker batches of one reconcile: submitted at most ``window`` ahead of the one
    being read (a pool given every batch at once finished them faster than they were taken,
    and their encoded results piled up in the owner)."""

    def __init__(self, pool, todo: list, root: str, config: bytes, fmt: str) -> None:
        self.pool, self.todo, self.root, self.config, self.fmt = pool, todo, root, config, fmt
        self.n = (len(todo) + POOL_BATCH - 1) // POOL_BATCH
        self.window = POOL_WINDOW * max(1, getattr(pool, "_max_workers", 1))
        self.futures: list = []

    def submit_until(self, end: int) -> None:
        while len(self.futures) < min(end, self.n):
            i = len(self.futures) * POOL_BATCH
            items = [
                _WorkItem(
                    t.kind,
                    t.src,
                    t.rec.hash if t.rec else "",
                    t.rec.deps if t.rec else "",
                    t.rec.encoding if t.rec else "",
                    t.deps,
                    t.extension,
                    t.refs_only,
                )
                for t in self.todo[i : i + POOL_BATCH]
            ]
            self.futures.append(
                self.pool.submit(_chunk_batch, self.root, self.config, self.fmt, msgspec.msgpack.encode(items))
            )


class _Staged:
    """A first index built aside while :meth:`Reconciler.prepare` reads the files: each file's
    chunks go into a new :class:`daemon.index.state.IndexState` (its store spilling to the
    index dir) as the file's result arrives (the same :meth:`Reconciler._apply_file` an
    incremental apply runs, so the index is the same), and the file's chunks and tokens are
    dropped. :meth:`Reconciler.apply` swaps the whole of it in: readers see the empty index
    or the complete one."""

    def __init__(self, rec: Reconciler) -> None:
        cfg = rec.config
        self._rec = rec
        # the blobs go to an unnamed file in the index dir until the first snapshot rebases
        # the store onto its memory-mapped arena
        self.state = IndexState(bm25_k1=cfg.bm25_k1, bm25_b=cfg.bm25_b, spill_dir=rec.index_dir)
        self.state.embedded = rec.state.embedded  # read only: which vectors the new texts make stale
        self.state.meta_names = None
        self.report = RefreshReport()
        self._refs: list[FileRefs] = []

    def take(self, u: FileUpdate) -> None:
        """Index one file's new chunks (``u.chunks`` not None) and take its references (swapped
        into the graph a batch at a time, resolved later), then drop them from ``u``."""
        if self._rec._apply_file(self.state, u, self.report):
            self.report.files_changed += 1
        if u.refs:
            self._refs.extend(u.refs)
            if len(self._refs) >= self.REFS_BATCH:
                self._flush_refs()
        u.chunks, u.tokens, u.refs = None, {}, None

    #: Reference records swapped into the staged graph at once.
    REFS_BATCH = 256

    def _flush_refs(self) -> None:
        self.state.refs.update(self._refs, defer=True)
        self._refs = []

    def finish(self) -> None:
        """Write the buffered postings, names and references (outside the engine lock)."""
        self.state.bm25.flush()
        self.state.meta_bm25.flush()
        self.state.names.flush()
        self._flush_refs()
