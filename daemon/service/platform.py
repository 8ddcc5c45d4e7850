"""Platform help of one export root: the sources there are, the version that answers, and their
indexes, built or loaded in the background.

Sources: the **bundled** data set (:mod:`daemon.sources.platform.globals_json`, always there,
no versions) and each **installed** platform version whose help books discovery finds
(:func:`daemon.sources.platform.discover.find_help`: the standard install folders and
``--platform-help DIR|FILE``). One index per source and version
(:class:`daemon.index.platform_index.PlatformIndex`), saved in the platform cache shared by every
daemon of the machine and keyed by the source files' content, so it is built once and loaded
warm afterwards.

Which version answers: ``--platform-version`` when it names an installed version; else the
configuration's ``CompatibilityMode`` picks the nearest installed one
(:func:`daemon.sources.platform.discover.nearest_version`); with no installed platform, the
bundled data set. While the chosen version is being indexed (or when its books cannot be read)
the bundled data set answers, and the answer says so (:class:`daemon.contract.PlatformUsed`).

Only the bundled data set and the chosen version are built at start (in a background thread,
niced, after the daemon answers: it never delays the code index); another installed version is
built when a request names it. The dense side of a source is filled by the daemon's dense
thread (:meth:`PlatformHelp.embed_next`), a batch at a time, between the export's batches.
"""

from __future__ import annotations

import logging
import re
import shutil
import threading
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

from ..contract import (
    MAX_TOP_K,
    SEARCH_MODES,
    PlatformAnswer,
    PlatformEntry,
    PlatformSource,
    PlatformStatus,
    PlatformUsed,
)
from ..index.platform_index import PlatformIndex, PlatformIndexError, file_digest, index_key, platform_cache_dir
from ..ranking.platform import PlatformRanker, entry_hit
from ..ranking.query import QUERY_EMBED_CHARS
from ..sources.platform.discover import find_help, mode_version, nearest_version, read_compatibility_mode, version_key

log = logging.getLogger(__name__)

__all__ = ["BUNDLED", "BUNDLED_LABEL", "ENTRY_KIND_NAMES", "PlatformHelp", "build_index", "read_entries"]

#: The name of the bundled data set among the sources (``--platform-version bundled`` picks it).
BUNDLED = "bundled"
#: How answers name it.
BUNDLED_LABEL = "bundled data set (no version)"
#: Entry kinds a request may ask for (``kind``), from :mod:`daemon.sources.platform.entries`.
ENTRY_KIND_NAMES = (
    "function",
    "global_property",
    "event",
    "type",
    "constructor",
    "method",
    "property",
    "enum",
    "enum_value",
    "keyword",
)
#: Skips a source shows in ``status``.
STATUS_SKIPS = 5
#: Seconds a request waits for the bundled data set's first build (it takes about one).
BUNDLED_WAIT_S = 30.0
#: A saved index of a source no daemon has loaded for this long is removed when another index of
#: that source is built (30 days).
PRUNE_AFTER_S = 30 * 86400

_NEW = re.compile(r"^\s*(?:новый|new)\s+([^\W\d][\w.]*)\s*(?:\(\s*\)?)?\s*$", re.IGNORECASE)


class _Source:
    """One source: what it is, its files, its state and, once built or loaded, its index."""

    def __init__(self, source: str, version: str, label: str, files: Sequence[Path]) -> None:
        self.source = source
        self.version = version
        self.label = label
        self.files = list(files)
        self.state = "available"
        self.index: PlatformIndex | None = None
        self.ranker: PlatformRanker | None = None
        self.error: str | None = None
        self.build_s: float | None = None
        self.lock = threading.Lock()  # one build at a time
        self.done = threading.Event()  # set once a build ended (ready or error)

    @property
    def name(self) -> str:
        """``bundled`` or the version."""
        return BUNDLED if self.source == BUNDLED else self.version

    def status(self, chosen: bool) -> PlatformSource:
        ix = self.index
        meta = ix.meta if ix is not None else None
        return PlatformSource(
            source=self.source,
            version=self.version,
            label=self.label,
            path=str(self.files[0].parent) if self.source != BUNDLED and self.files else "",
            books=[f.name for f in self.files],
            chosen=chosen,
            state=self.state,
            entries=len(ix) if ix is not None else 0,
            kinds=dict(meta.kinds) if meta else {},
            vectors=len(ix.dense) if ix is not None and ix.dense is not None else 0,
            skipped=meta.skipped if meta else 0,
            skips=list(meta.skips[:STATUS_SKIPS]) if meta else [],
            build_s=self.build_s,
            loaded_from_disk=bool(ix is not None and ix.loaded_from_disk),
            error=self.error,
        )


class PlatformHelp:
    """Platform help for one export root (see the module docstring).

    Args:
        root: the export root (its ``CompatibilityMode`` is read once, here).
        help_paths: ``--platform-help`` values (folders or ``.hbk`` files), first wins.
        version: ``--platform-version`` (an installed version, a prefix of one, or ``bundled``).
        cache_dir: where indexes are saved (default :func:`daemon.index.platform_index.platform_cache_dir`).
        standard_roots: the install folders searched (None: this system's standard ones; ``[]``:
            only ``help_paths``).
        stem, k1, b: BM25 settings, as the export's index (:class:`daemon.index.changes.EngineConfig`).
        build_in_worker: build an index in a worker process (the daemon: it then holds only the
            loaded index, not the build's memory); False: in the calling thread.
    """

    def __init__(
        self,
        root: Path | str,
        *,
        help_paths: Iterable[Path | str] = (),
        version: str | None = None,
        cache_dir: Path | None = None,
        standard_roots: Iterable[Path | str] | None = None,
        stem: bool = True,
        k1: float = 1.2,
        b: float = 0.3,
        build_in_worker: bool = False,
    ) -> None:
        from ..sources.platform.globals_json import DATA_PATH

        self.cache_dir = Path(cache_dir) if cache_dir is not None else platform_cache_dir()
        self.stem, self.k1, self.b = stem, k1, b
        self.mode = read_compatibility_mode(root)
        self.requested = (version or "").strip()
        found = find_help(list(help_paths), roots=standard_roots)
        self.sources: dict[str, _Source] = {BUNDLED: _Source(BUNDLED, "", BUNDLED_LABEL, [DATA_PATH])}
        for v, files in found.items():
            self.sources[v] = _Source("installed", v, f"1C:Enterprise {v}", files)
        self.chosen, self.why = self._choose()
        self.build_in_worker = build_in_worker
        self.nice = 0
        self._pools: list = []
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._dense_checked: set[str] = set()

    # ------------------------------------------------------------------ the version
    def _choose(self) -> tuple[str, str]:
        """(the source that answers by default, why): the rule of the module docstring."""
        installed = [v for v in self.sources if v != BUNDLED]
        if self.requested:
            if self.requested.lower() == BUNDLED:
                return BUNDLED, "--platform-version bundled"
            match = self._match(self.requested)
            if match is not None:
                return match, f"--platform-version {self.requested}"
            why = f"--platform-version {self.requested} is not installed ({', '.join(installed) or 'none is'})"
            if not installed:
                return BUNDLED, why + "; the bundled data set answers"
            v = nearest_version(self.mode, installed) or installed[-1]
            return v, why + f"; the nearest to the compatibility mode answers ({v})"
        if not installed:
            return BUNDLED, "no installed 1C:Enterprise help found; --platform-help names one"
        v = nearest_version(self.mode, installed) or installed[-1]
        if mode_version(self.mode) is not None:
            return v, f"CompatibilityMode {self.mode}: the nearest installed version"
        if self.mode:
            return v, f"CompatibilityMode {self.mode}: the newest installed version"
        return v, "no CompatibilityMode in the configuration: the newest installed version"

    def _match(self, wanted: str) -> str | None:
        """The installed version ``wanted`` names: itself, or the newest whose version starts
        with it (``8.3.24`` -> ``8.3.24.1467``); None when none does."""
        if wanted in self.sources and wanted != BUNDLED:
            return wanted
        prefixed = sorted((v for v in self.sources if v.startswith(wanted + ".")), key=version_key)
        return prefixed[-1] if prefixed else None

    def source_for(self, version: str | None) -> _Source:
        """The source a request asks for (``version``: an installed version, a prefix of one,
        or ``bundled``; None: the chosen one). ``ValueError`` naming the known ones otherwise."""
        if not version:
            return self.sources[self.chosen]
        if version.strip().lower() == BUNDLED:
            return self.sources[BUNDLED]
        match = self._match(version.strip())
        if match is None:
            known = ", ".join(self.sources)
            raise ValueError(f"platform version {version!r} is not available; one of: {known}")
        return self.sources[match]

    # ------------------------------------------------------------------ building
    def start(self, *, nice: int = 0) -> None:
        """Build or load the bundled data set's and the chosen version's indexes in a
        background thread (``nice``: its priority, Linux). Idempotent."""
        if self._thread is not None:
            return
        self.nice = nice

        def run() -> None:
            if nice:
                _nice_this_thread(nice)
            for name in dict.fromkeys((BUNDLED, self.chosen)):
                if self._stop.is_set():
                    return
                self.ensure(self.sources[name])

        self._thread = threading.Thread(target=run, name="bsl-lens-platform", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop building (a worker's build in flight is dropped) and save vectors not saved."""
        self._stop.set()
        for pool in list(self._pools):
            pool.shutdown(wait=False, cancel_futures=True)
        for src in self.sources.values():
            ix = src.index
            if ix is not None and ix.dense is not None:
                try:
                    ix.save_dense()
                except Exception:
                    log.exception("saving the vectors of platform help %s failed", src.label)
        if self._thread is not None:
            self._thread.join(timeout=2.0)

    def ensure(self, src: _Source) -> _Source:
        """Load ``src``'s saved index, or build and save it (in this thread); never raises:
        a failure is the source's ``error`` (state ``error``)."""
        with src.lock:
            if src.state in ("ready", "error"):
                return src
            src.state = "indexing"
            t0 = time.perf_counter()
            try:
                src.index = self._load_or_build(src)
                src.ranker = PlatformRanker(src.index, stem=self.stem)
                src.state = "ready"
                log.info(
                    "platform help %s: %d entries %s in %.2fs",
                    src.label,
                    len(src.index),
                    "loaded" if src.index.loaded_from_disk else "indexed",
                    time.perf_counter() - t0,
                )
            except Exception as exc:  # a help file that cannot be read: the bundled data set answers
                log.exception("platform help %s could not be indexed", src.label)
                src.error = f"{type(exc).__name__}: {exc}"
                src.state = "error"
            src.build_s = round(time.perf_counter() - t0, 3)
            src.done.set()
        return src

    def _load_or_build(self, src: _Source) -> PlatformIndex:
        digests = [(f.name, file_digest(f)) for f in src.files]
        key = index_key(src.name, digests, stem=self.stem, k1=self.k1, b=self.b)
        folder = self.cache_dir / key
        if (folder / "meta.json").exists():
            try:
                ix = PlatformIndex.load(folder)
                _touch(folder)
                return ix
            except PlatformIndexError as exc:
                log.warning("%s; building it again", exc)
                shutil.rmtree(folder, ignore_errors=True)
        self._prune(src.name, keep=key)
        job = (src.source, src.name, src.version, src.label, [str(f) for f in src.files], key)
        settings = (str(self.cache_dir), self.stem, self.k1, self.b)
        if self.build_in_worker:
            final = self._in_worker(job, settings)
        else:
            final = build_index(*job, *settings)
        if final is None:  # a cache that cannot be written: built here, served from memory
            log.warning("platform help %s could not be saved in %s; kept in memory", src.label, self.cache_dir)
            return build_index(*job, *settings, save=False)
        built = PlatformIndex.load(Path(final))  # served from its files, as a warm start would
        built.loaded_from_disk = False
        return built

    def _in_worker(self, job: tuple, settings: tuple) -> str | None:
        """:func:`build_index` in a worker process (niced): reading a help book and indexing
        it takes hundreds of MB that a daemon would keep; the daemon only loads the result."""
        from ..index.chunking import make_pool

        pool = make_pool(1, nice=self.nice)
        self._pools.append(pool)
        try:
            return pool.submit(build_index, *job, *settings).result()
        finally:
            self._pools.remove(pool)
            pool.shutdown(wait=True, cancel_futures=True)

    def _prune(self, name: str, *, keep: str) -> None:
        """Remove the saved indexes of source ``name`` other than ``keep`` that no daemon has
        loaded for :data:`PRUNE_AFTER_S` (a help file or bsl-lens changed since)."""
        now = time.time()
        for old in self.cache_dir.glob(f"{name}-*"):
            try:
                stale = old.name != keep and now - (old / "meta.json").stat().st_mtime > PRUNE_AFTER_S
            except OSError:
                continue
            if stale:
                log.info("removing the platform index %s (unused for %d days)", old, PRUNE_AFTER_S // 86400)
                shutil.rmtree(old, ignore_errors=True)

    # ------------------------------------------------------------------ answering
    def answering(self, version: str | None = None) -> tuple[_Source, PlatformUsed]:
        """The source that answers a request for ``version`` (None: the chosen one) and how
        an answer names it. A source not built yet is started in the background and the
        bundled data set answers meanwhile (built here when it is not ready: about a second)."""
        want = self.source_for(version)
        why = self.why if not version else f"asked for {want.name}"
        if want.state == "ready":
            return want, _used(want, why)
        if want.state == "available" and want.source != BUNDLED:
            threading.Thread(target=self.ensure, args=(want,), name="bsl-lens-platform-build", daemon=True).start()
        bundled = self.sources[BUNDLED]
        if want is not bundled:
            if want.state == "error":
                why = f"{want.label} could not be read ({want.error}); the bundled data set answers"
            else:
                why = f"{want.label} is being indexed; the bundled data set answers meanwhile"
        if bundled.state != "ready":
            if bundled.state == "indexing":
                bundled.done.wait(BUNDLED_WAIT_S)
            self.ensure(bundled)
        if bundled.state != "ready":
            raise RuntimeError(f"platform help is unavailable: {bundled.error}")
        used = _used(bundled, why)
        if want is not bundled and want.state != "error":
            used.state = "indexing"
        return bundled, used

    def search(
        self,
        query: str,
        *,
        mode: str = "hybrid",
        top_k: int = 10,
        kinds: Sequence[str] | None = None,
        version: str | None = None,
        embedder=None,
        snippets: bool = True,
    ):
        """``(hits, slots, total, used, source)``: the platform's ranking for ``query`` (see
        :class:`daemon.ranking.platform.PlatformRanker`). ``kinds``: entry kinds to keep
        (``method``, ``enum_value``; None: all); ``embedder``: the query embedder (None: no
        dense channel). ``ValueError`` for a bad mode, kind, top_k or version."""
        if mode not in SEARCH_MODES:
            raise ValueError(f"mode must be one of {SEARCH_MODES}, got {mode!r}")
        if not 1 <= int(top_k) <= MAX_TOP_K:
            raise ValueError(f"top_k must be in 1..{MAX_TOP_K}, got {top_k}")
        bad = [k for k in kinds or () if k not in ENTRY_KIND_NAMES]
        if bad:
            raise ValueError(f"unknown platform entry kind {bad[0]!r}; one of {', '.join(ENTRY_KIND_NAMES)}")
        src, used = self.answering(version)
        ix, ranker = src.index, src.ranker
        text = query.strip() if any(ch.isalnum() for ch in query) else ""
        allow = ix.kind_mask(kinds) if kinds else None
        use_dense = mode != "lexical" and embedder is not None and ix.dense is not None and len(ix.dense) > 0
        cues = ranker.cues(text, translate=use_dense)
        qvec = None
        if use_dense and text and not (mode == "hybrid" and cues.identifier and self._names_answer(ix, cues, top_k)):
            qvec = embedder.encode_queries([(cues.translated or cues.text)[:QUERY_EMBED_CHARS]])[0]
        hits, slots, total = ranker.rank(cues, mode, top_k, allow=allow, qvec=qvec, snippets=snippets)
        return hits, slots, total, used, src

    @staticmethod
    def _names_answer(ix: PlatformIndex, cues, top_k: int) -> bool:
        """True when the names channel alone fills ``top_k`` with exact, prefix or CamelHump
        matches: a name query then needs no query vector (as the code engine's)."""
        res = ix.names.search(cues.text, top_k, key_of=ix.store.ids)
        return len(res) >= top_k and all(m in ("exact", "prefix", "camelhump") for _, _, m in res)

    def lookup(self, name: str, *, kinds: Sequence[str] | None = None, version: str | None = None, limit: int = 10):
        """``(slots, used, source)``: the entries ``name`` names exactly, in the names channel's
        order: ``Тип.Метод`` / ``Type.Method`` (both owners' languages), a bare name (global
        entries, types and enumerations before members of that name), ``Новый Тип`` / ``New
        Type`` (the constructor), ``Перечисление.Значение``; case- and ``ё``-insensitive.
        [] when it names none."""
        from ..text.folding import fold

        src, used = self.answering(version)
        ix = src.index
        m = _NEW.match(name)
        if m:
            name, kinds = m.group(1), ["constructor"]
        q = name.strip()
        if q.endswith("()"):
            q = q[:-2].strip()
        allow = ix.kind_mask(kinds) if kinds else None
        res = ix.names.search(q, max(limit * 4, 20), allow=allow, key_of=ix.store.ids)
        fq = fold(q)
        qualified = "." in q
        out = []
        for slot, _, match in res:
            if match != "exact":
                continue
            e = ix.entry(slot)
            if qualified:
                if fq not in (fold(e.qualified), fold(e.qualified_en)) and not _owner_mixed(e, fq):
                    continue
            out.append(slot)
            if len(out) >= limit:
                break
        return out, used, src

    def help(
        self,
        query: str,
        *,
        mode: str = "hybrid",
        top_k: int = 5,
        kind: str | None = None,
        version: str | None = None,
        names_only: bool = False,
        embedder=None,
    ) -> PlatformAnswer:
        """The ``platform_help`` answer: the entries ``query`` names (:meth:`lookup`), else
        (unless ``names_only``) the ranked answers to it as a question (:meth:`search`), each
        with its full entry. ``ValueError`` as :meth:`search`."""
        t0 = time.perf_counter()
        kinds = [kind] if kind else None
        if kind and kind not in ENTRY_KIND_NAMES:
            raise ValueError(f"unknown platform entry kind {kind!r}; one of {', '.join(ENTRY_KIND_NAMES)}")
        slots, used, src = self.lookup(query, kinds=kinds, version=version, limit=top_k)
        ix = src.index
        if slots:
            hits = [entry_hit(ix.store.get(s), 1.0, {}, "exact") for s in slots]
            return PlatformAnswer(
                query=query,
                platform=used,
                exact=True,
                entries=[ix.entry(s) for s in slots],
                hits=hits,
                total=len(slots),
                took_ms=round((time.perf_counter() - t0) * 1000, 3),
            )
        if names_only:
            return PlatformAnswer(query=query, platform=used, took_ms=round((time.perf_counter() - t0) * 1000, 3))
        hits, slots, total, used, src = self.search(
            query, mode=mode, top_k=top_k, kinds=kinds, version=version, embedder=embedder
        )
        return PlatformAnswer(
            query=query,
            platform=used,
            exact=False,
            entries=[src.index.entry(s) for s in slots],
            hits=hits,
            total=total,
            took_ms=round((time.perf_counter() - t0) * 1000, 3),
        )

    # ------------------------------------------------------------------ dense side
    def embed_next(self, embedder, *, batch: int = 16, shared=None) -> int:
        """Embed one batch of the chosen source's (then the bundled data set's) entries that
        have no vector yet; a ready source's dense side is opened first (its saved vectors).
        Returns the vectors added; 0 when every ready source is complete."""
        for name in dict.fromkeys((self.chosen, BUNDLED)):
            src = self.sources[name]
            ix = src.index
            if src.state != "ready" or ix is None:
                continue
            if ix.dense is None or ix.fingerprint != embedder.fingerprint:
                ix.load_dense(embedder)
            n = ix.embed_batch(embedder, batch=batch, shared=shared)
            if n:
                return n
        return 0

    def dense_pending(self) -> int:
        """Entries of the ready sources still without a vector (opened dense sides only)."""
        return sum(s.index.dense_pending() for s in self.sources.values() if s.index is not None)

    def fill_dense(self, embedder, *, shared=None, progress=None) -> int:
        """Embed every pending entry of the ready sources now (in-process use: ``eval``,
        the bench); ``progress(done, total)`` after each batch. Returns the vectors added."""
        for name in dict.fromkeys((self.chosen, BUNDLED)):
            src = self.sources[name]
            if src.index is not None and (src.index.dense is None or src.index.fingerprint != embedder.fingerprint):
                src.index.load_dense(embedder)
        total, done = self.dense_pending(), 0
        while True:
            n = self.embed_next(embedder, batch=32, shared=shared)
            if not n:
                return done
            done += n
            if progress is not None:
                progress(done, total)

    # ------------------------------------------------------------------ status
    def status(self) -> PlatformStatus:
        """What ``status`` shows: the mode, the version asked for, the source that answers,
        every source (:class:`daemon.contract.PlatformSource`), installed versions in ascending
        order after the bundled data set."""
        src = self.sources[self.chosen]
        used = _used(src, self.why)
        if src.state != "ready":
            used = _used(self.sources[BUNDLED], self.why)
            if src is not self.sources[BUNDLED]:
                used.why = (
                    f"{src.label} could not be read ({src.error}); the bundled data set answers"
                    if src.state == "error"
                    else f"{src.label} is being indexed; the bundled data set answers meanwhile"
                )
                used.state = "error" if src.state == "error" else "indexing"
            elif src.state != "ready":
                used.state = "indexing"
        return PlatformStatus(
            compatibility_mode=self.mode,
            requested=self.requested,
            used=used,
            sources=[s.status(s.name == self.chosen) for s in self.sources.values()],
        )

    def entry_counts(self) -> dict[str, int]:
        """``{source name: entries}`` of the ready sources (logs, the bench)."""
        return {n: len(s.index) for n, s in self.sources.items() if s.index is not None}


def read_entries(source: str, files: Sequence[Path]) -> tuple[list[PlatformEntry], list]:
    """The entries and skips of a source (``bundled``: the data set; else a version's help
    books: the language reference in Russian merged with its English twin, then the language
    book, then any other book named). ``PlatformIndexError`` when every book failed."""
    if source == BUNDLED:
        from ..sources.platform.globals_json import load_globals

        res = load_globals(Path(files[0]))
        return list(res.entries), list(res.skips)
    from ..sources.platform.book import read_book
    from ..sources.platform.entries import merge_languages

    books = {Path(f).name.lower(): Path(f) for f in files}
    entries: list[PlatformEntry] = []
    skips: list = []
    errors: list[str] = []
    for base in ("shcntx", "shlang"):
        parts = []
        for lang in ("ru", "en"):
            f = books.pop(f"{base}_{lang}.hbk", None)
            if f is None:
                continue
            res = read_book(f)
            skips.extend(res.skips)
            if res.error:
                errors.append(f"{f.name}: {res.error}")
            parts.append(list(res.entries))
        if len(parts) == 2:
            entries.extend(merge_languages(parts[0], parts[1]))
        elif parts:
            entries.extend(parts[0])
    for f in books.values():  # any other book named explicitly
        res = read_book(f)
        skips.extend(res.skips)
        if res.error:
            errors.append(f"{f.name}: {res.error}")
        entries.extend(res.entries)
    if not entries and errors:
        raise PlatformIndexError("; ".join(errors))
    return entries, skips


def build_index(
    source: str,
    name: str,
    version: str,
    label: str,
    files: Sequence[str],
    key: str,
    cache_dir: str,
    stem: bool,
    k1: float,
    b: float,
    *,
    save: bool = True,
):
    """Read a source (:func:`read_entries`), index it (:meth:`PlatformIndex.build`) and save it
    under ``cache_dir`` (:meth:`PlatformIndex.save_atomically`): the folder, as a string (what a
    worker process returns), or None when it cannot be saved; ``save=False``: the index itself.
    ``PlatformIndexError`` when the source gives no entry."""
    paths = [Path(f) for f in files]
    entries, skips = read_entries(source, paths)
    where = paths[0].name.removesuffix(".gz") if source == BUNDLED else _book_label(paths)
    ix = PlatformIndex.build(
        entries,
        key=key,
        source=source,
        version=version,
        label=label,
        path=f"platform/{name}/{where}",
        books=[p.name for p in paths],
        skips=skips,
        stem=stem,
        k1=k1,
        b=b,
    )
    if not len(ix):
        raise PlatformIndexError(f"no entries read from {', '.join(files)}")
    if not save:
        return ix
    try:
        return str(ix.save_atomically(Path(cache_dir)))
    except OSError:
        return None


def _touch(folder: Path) -> None:
    """Mark a saved index as in use (its ``meta.json``'s mtime; :meth:`PlatformHelp._prune`)."""
    try:
        (folder / "meta.json").touch()
    except OSError:
        pass


def _used(src: _Source, why: str) -> PlatformUsed:
    return PlatformUsed(source=src.source, version=src.version, label=src.label, why=why)


def _book_label(files: Sequence[Path]) -> str:
    """The file a version's hits name as their place: its Russian language reference if
    there is one, else its first book."""
    names = [f.name for f in files]
    for want in ("shcntx_ru.hbk", "shcntx_en.hbk"):
        if want in names:
            return want
    return names[0]


def _owner_mixed(e: PlatformEntry, fq: str) -> bool:
    """True when ``fq`` (folded) is the entry's owner in one language and its name in the
    other (``ValueTable.Свернуть``)."""
    from ..text.folding import fold

    owners = {fold(x) for x in (e.owner, e.owner_en) if x}
    names = {fold(x) for x in (e.name, e.name_en) if x}
    cont, _, nm = fq.rpartition(".")
    return cont in owners and nm in names


def _nice_this_thread(n: int) -> None:
    """Lower this thread's priority by ``n`` (Linux: ``setpriority`` on the thread id)."""
    import os

    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), n)
    except (OSError, AttributeError):
        pass
