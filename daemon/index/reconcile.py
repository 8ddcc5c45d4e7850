"""The reconcile with the disk: what changed (:meth:`Reconciler.prepare`: scan, read, hash,
chunk, tokenize; in worker processes for big batches) and the swap into the index state
(:meth:`Reconciler.apply`, one batch, with the engine's lock held by the caller).

The parts: the reconcile's vocabulary (:mod:`daemon.index.changes`), the chunking pass of one
file and the worker processes (:mod:`daemon.index.chunking`), and the per-file swap into a
state and the first index staged aside (:mod:`daemon.index.apply`). This module decides what is
read and where, feeds the workers, and applies a batch.
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
import unicodedata
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, NamedTuple

import msgspec

from ..contract import Skip
from ..sources.bindings import BINDING_TYPES, form_layout_path, form_module_path
from ..sources.docs import log_notes
from ..sources.files import SourceFile
from ..sources.ref_record import FileRefs
from ..sources.scan import scan_export
from .apply import StagedIndex, apply_file, drop_file, moved_only
from .changes import Cancelled, ChangeSet, EngineConfig, FileUpdate, RefreshReport
from .chunking import WorkItem, WorkResult, chunk_batch, chunk_tokens, read_source
from .state import FileRecord, IndexState

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


def refs_paths(path: str) -> tuple[str, ...]:
    """The reference-graph files one indexed file stands for: itself and, for a form module,
    its layout (``Form.xml`` / ``Form.form``), read with it."""
    layout = form_layout_path(path)
    return (path, layout) if layout else (path,)


#: An applied batch with more reference records than this leaves their resolution to
#: :meth:`daemon.index.refgraph.RefGraph.resolve_pending` (the owner runs it in steps, outside
#: a long hold of the engine lock): a checkout, a rebuild of the references.
REFS_DEFER_FILES = 300


def same_stat(rec: FileRecord, src: SourceFile) -> bool:
    """True when a file's stat signature is what the index recorded: size, mtime, ctime and
    inode. A rewrite that restores size and mtime (``cp -p``, ``rsync -a``, a ``tar`` restore)
    changes ctime or the inode, so it is re-read."""
    return rec.size == src.size and rec.mtime_ns == src.mtime_ns and rec.ctime_ns == src.ctime_ns and rec.ino == src.ino


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


def _is_configuration(rel: str) -> bool:
    """True for the configuration's own descriptor (Designer ``Configuration.xml``, EDT
    ``.../Configuration/Configuration.mdo``) or a folder holding it: the layout may change."""
    return (
        rel == "Configuration.xml"
        or rel.endswith("Configuration.mdo")
        or rel == "Configuration"
        or rel.endswith("/Configuration")
    )


class Reconciler:
    """The index's writer side: :meth:`prepare` works out what a reconcile with the disk
    changes (no lock, nothing changed), :meth:`apply` swaps it into the state (the caller
    holds the engine's lock).

    ``state``: the :class:`daemon.index.state.IndexState` it keeps current; ``root``: the
    export root; ``index_dir``: where a first index spills its chunk blobs; ``config``: the
    index settings. ``pool``: a process pool for big reconciles
    (:func:`daemon.index.chunking.make_pool`), set by the owner; None: everything is chunked in
    the calling thread. ``pool_broken`` is set when a worker died; the owner replaces the pool.
    Both run on the writer thread only.
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
            # while the references are rebuilt, every file that has some is read for them, also
            # one whose stat changed but whose text did not (the hash check skips its chunks)
            refs = rebuild and (kind == "bsl" or src.object_type in BINDING_TYPES)
            if rec is not None and src.path not in named and same_stat(rec, src) and rec.deps == deps:
                if refs:
                    todo.append(_Todo(kind, src, rec, deps, ext, True))
                continue
            todo.append(_Todo(kind, src, rec, deps, ext, refs))
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
        staged = (
            StagedIndex(self.config, self.index_dir, st.embedded)
            if full and not st.files and not len(st.store)
            else None
        )
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
            if prev is None or (prev != c and not moved_only(prev, c)):
                tokens[c.id] = computed.get(c.id) or chunk_tokens(c, self.config.stem)
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
            return msgspec.msgpack.decode(_result_or_cancel(fut, cancel), type=WorkResult).results()
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
            cs.staged.swap_in(st, report)
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
            if apply_file(st, u, report, self.config):
                report.files_changed += 1
        for path in cs.removed:
            drop_file(st, path, report)
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
                WorkItem(
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
                self.pool.submit(chunk_batch, self.root, self.config, self.fmt, msgspec.msgpack.encode(items))
            )
