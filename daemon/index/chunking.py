"""The chunking pass of a reconcile, one file at a time: read, hash, chunk, tokenize and read
its references (:func:`read_source`, :func:`chunk_tokens`), and the worker-process side that
runs it for a big batch (:func:`chunk_batch` in a :func:`make_pool` pool).

What a worker process imports: this module and the sources it reads with, not the index state
or the channels. The owner's side of the pool (batches submitted ahead, results read in order,
a broken pool) is :class:`daemon.index.reconcile.Reconciler`.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from pathlib import Path

import msgspec
import numpy as np

from ..contract import Chunk, Skip
from ..sources.bindings import BINDING_TYPES, descriptor_references, read_form_layout
from ..sources.bsl import chunk_module, live_code
from ..sources.docs import docs_tokens, read_page
from ..sources.files import SkipFile, SourceFile, content_hash, decode_bytes, read_regular_bytes
from ..sources.metadata import chunk_metadata_bytes
from ..sources.ref_record import FileRefs
from ..sources.references import chunk_module_with_references
from ..text.tokenize import tokenize
from .changes import EngineConfig, FileUpdate

__all__ = ["WorkItem", "WorkResult", "chunk_batch", "chunk_tokens", "make_pool", "read_source"]

log = logging.getLogger(__name__)


def _module_chunks(
    root: Path, src: SourceFile, fmt: str, text: str, config: EngineConfig, extension: bool
) -> tuple[list, list[FileRefs]]:
    """A BSL module's chunks and its references (with a form module's layout), from one parse;
    no references when ``config.references`` is off. Raises what the chunker raises."""
    where = {"path": src.path, "owner": src.owner, "object_type": src.object_type, "module_kind": src.module_kind}
    if not config.references:
        return chunk_module(text, **where, max_lines=config.max_method_lines), []
    chunks, mod_refs = chunk_module_with_references(
        text, **where, extension=extension, max_lines=config.max_method_lines
    )
    refs = [mod_refs]
    if src.module_kind == "form":
        layout = read_form_layout(root, src, fmt, extension=extension, max_file_bytes=config.max_file_bytes)
        if layout is not None:
            refs.append(layout)
    return chunks, refs


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
            chunks, refs = _module_chunks(root, src, fmt, text, config, extension)
        except Exception as exc:  # a chunker bug must not stop the index
            log.exception("chunking %s failed", src.path)
            return Skip(src.path, "parse_failed", f"{type(exc).__name__}: {exc}")
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
        if config.references and src.object_type in BINDING_TYPES:
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


class WorkItem(msgspec.Struct, array_like=True):
    """One file of a worker's batch: what :func:`read_source` is given (the current record's
    ``hash``, ``deps`` and ``encoding``, all ``""`` for a new file)."""

    kind: str
    src: SourceFile
    rec_hash: str
    rec_deps: str
    rec_encoding: str
    deps: str
    extension: bool = False
    refs_only: bool = False


class WorkResult(msgspec.Struct):
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
        """The batch's :class:`FileUpdate` and :class:`Skip` results in batch order, each
        update with its chunks' token lists rebuilt from ``vocab``."""
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
    """What :func:`read_source` reads of a file's current record, rebuilt from a :class:`WorkItem`."""

    hash: str
    deps: str
    encoding: str


def chunk_tokens(c: Chunk, stem: bool) -> list[str]:
    """BM25 tokens of a chunk: a code chunk's owner and its :func:`daemon.sources.bsl.live_code`
    (an extension's ``#Удаление`` lines left out), a metadata chunk's text."""
    if c.is_code:
        return tokenize(f"{c.owner}\n{live_code(c.text)}", stem=stem)
    if c.is_docs:  # docs: the prose tokenizer (daemon.sources.docs.docs_tokens)
        return docs_tokens(c, stem)
    return tokenize(f"\n{c.text}", stem=stem)


def chunk_batch(root: str, config: bytes, fmt: str, items: bytes) -> bytes:
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
    res = WorkResult([], [])
    vocab: dict[str, int] = {}
    for i, it in enumerate(msgspec.msgpack.decode(items, type=list[WorkItem])):
        rec = _Rec(it.rec_hash, it.rec_deps, it.rec_encoding) if it.rec_hash else None
        r = read_source(
            Path(root), cfg, it.kind, it.src, rec, it.deps, fmt, extension=it.extension, refs_only=it.refs_only
        )
        if isinstance(r, Skip):
            res.skips.append((i, r))
            continue
        if r.chunks is not None:
            for c in r.chunks:
                toks = chunk_tokens(c, cfg.stem)
                for t in dict.fromkeys(toks):
                    if t not in vocab:
                        vocab[t] = len(vocab)
                res.token_ids[c.id] = np.fromiter(map(vocab.__getitem__, toks), dtype="<u4", count=len(toks)).tobytes()
        res.updates.append((i, r))
    res.vocab = list(vocab)
    return msgspec.msgpack.encode(res)


def make_pool(workers: int | None = None, *, nice: int = 0):
    """A process pool for :attr:`daemon.engine.Engine.pool`: ``workers`` processes (default: the
    CPU count, at most 4), started with ``spawn`` (the daemon has threads; forking them is unsafe).
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
