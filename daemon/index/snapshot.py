"""Persistence of the index: the lexical snapshot and its journal, the dense index, its map
and journal (load and save), by :class:`Snapshotter`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import time
from pathlib import Path
from collections.abc import Callable
from typing import Any

import msgspec
import numpy as np

from .. import __version__
from .bm25 import BM25Index
from .chunkstore import ChunkStore, ChunkStoreError
from ..contract import Skip
from .changes import ChangeSet, EngineConfig
from .state import FileRecord, IndexState
from ..sources.scan import ExportInfo
from .storage import SnapshotError, atomic_write_bytes, read_msgpack, write_json, write_msgpack
from .names import SymbolIndex
from .refgraph import RefGraph

log = logging.getLogger(__name__)

#: Bump when the layout of the lexical snapshot changes (6: a generation folder of column files).
SCHEMA_VERSION = 6
#: The lexical snapshot of schema 5 (one file): found on load, it means a logged rebuild.
SNAPSHOT_FILE = "snapshot.msgpack"
#: The lexical snapshot: ``<index_dir>/lexical/<generation>/``, the current one named by
#: ``lexical/CURRENT`` (see :meth:`Snapshotter.save_lexical`).
LEXICAL_DIR = "lexical"
CURRENT_FILE = "CURRENT"
#: The lexical journal (changes since the snapshot; :mod:`daemon.index.journal`), and when a new
#: snapshot is due instead: a journal over 64 MiB (a frame holds the changed file's chunks) or
#: a batch of more than 300 files (a first index or a checkout: one snapshot is cheaper).
JOURNAL_FILE = "journal.bin"
JOURNAL_MAX_BYTES = 64 * 2**20
JOURNAL_MAX_FILES = 300
#: Dense journal: a snapshot of the dense side is due after this many journaled vectors.
DENSE_JOURNAL_MAX = 4096
#: The references (find usages) in a lexical generation (:meth:`daemon.index.refgraph.RefGraph.to_bytes`).
#: A generation without it (written before references existed) loads, and the next full
#: reconcile reads every file's references again.
REFS_FILE = "refs.bin"


class _DenseMeta(msgspec.Struct):
    """``dense-<tag>/embedded.msgpack``: which text each vector was made from, and the
    generation its journal must carry (:mod:`daemon.index.journal`)."""

    generation: str
    embedded: dict[str, str]


class _DenseEntry(msgspec.Struct, array_like=True):
    """One dense journal frame: the vectors set by one batch of the dense upkeep."""

    ids: list[str]
    hashes: list[str]
    vectors: bytes  # float32 little-endian, len(ids) x dim


def _fresh(v: Any) -> Any:
    """A copy of ``v`` in which every non-ASCII ``str`` is a new object (containers and
    structs copied as needed; other values shared).

    Why: encoding a non-ASCII ``str`` to UTF-8 (msgspec does it with
    ``PyUnicode_AsUTF8AndSize``) leaves a UTF-8 copy cached inside the string object for its
    whole life; encoding the live chunks, ids and terms for a journal frame would keep such a
    copy of each of them. Encoding copies instead lets the caches die with the copies."""
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


class _DenseLoad(msgspec.Struct):
    """What :meth:`Snapshotter.read_dense` read: the embedding cache, and the dense index with
    its map, generation and the vectors replayed from its journal (``dense`` None: none on
    disk, or unusable)."""

    cache: Any
    dense: Any = None
    generation: str = ""
    embedded: dict[str, str] = {}
    replayed: int = 0


class Snapshotter:
    """Loads and saves the index state of one root: the lexical snapshot (a generation folder
    of column files) with its journal, and the dense index, its map and journal, with the
    embedding cache.

    ``state``: the :class:`daemon.index.state.IndexState` it loads into and saves from;
    ``root``, ``index_dir``, ``config``: the export root, the index folder and the index
    settings (they key the manifest); ``embedder``: the dense side's model (None: lexical
    only); ``lock``: the engine's lock, taken only where a save changes what queries read.
    """

    def __init__(
        self, state: IndexState, *, root: Path, index_dir: Path, config: EngineConfig, embedder=None, lock
    ) -> None:
        self.state = state
        self.root = Path(root)
        self.index_dir = Path(index_dir)
        self.config = config
        self.embedder = embedder
        self.lock = lock

    def manifest(self) -> dict:
        """What a lexical snapshot must match to be loaded: versions and the lexical settings."""
        from ..text import tokenize as tok

        return {
            "bsl_lens": __version__,
            "schema": SCHEMA_VERSION,
            "tokenizer": getattr(tok, "TOKENIZER_VERSION", 1),
            "lexical": self.config.lexical_fingerprint(),
            "root": str(self.root),
        }

    # ------------------------------------------------------------------ lexical load
    def load_lexical(self) -> bool:
        """Load the current lexical snapshot into the state; True if one was loaded. A
        missing, damaged or mismatched snapshot is logged and left for the next reconcile to
        rebuild; it never raises. The journal is replayed separately (:meth:`replay_journal`)."""
        d = self.index_dir
        lex = d / LEXICAL_DIR
        if lex.is_dir():  # a snapshot being written when the last process died: never complete
            for tmp in lex.glob("*.tmp"):
                log.info("removing %s, a lexical snapshot left unfinished by an earlier process", tmp)
                shutil.rmtree(tmp, ignore_errors=True)
        gen = _current_generation(d)
        if not gen:
            if (d / SNAPSHOT_FILE).exists():
                log.warning("index in %s is a snapshot of an older format (%s); rebuilding", d, SNAPSHOT_FILE)
            elif (lex / CURRENT_FILE).exists():
                log.warning(
                    "%s does not name a snapshot generation (damaged); rebuilding the lexical index", lex / CURRENT_FILE
                )
            return False
        import gc

        # decoding creates the ids and file records: cyclic GC passes over them are wasted
        gc_on = gc.isenabled()
        gc.disable()
        try:
            loaded = self._read_generation(d / LEXICAL_DIR / gen, gen)
        finally:
            if gc_on:
                gc.enable()
        if loaded is None:
            return False
        manifest, store, bm25, meta, names, files, skipped = loaded
        st = self.state
        st.files = files
        st.store = store
        st.skipped = skipped
        st.bm25, st.meta_bm25, st.names = bm25, meta, names
        st.refs, st.refs_complete = _load_refs(d / LEXICAL_DIR / gen / REFS_FILE)
        st.format = manifest.get("format", "unknown")
        share = manifest.get("cyrillic_share")
        if isinstance(share, (int, float)):
            st.set_cyrillic_share(share)
        info = manifest.get("info")
        if isinstance(info, dict):
            try:
                st.info = msgspec.convert(info, ExportInfo)
            except msgspec.ValidationError:
                st.info = None
        st.generation = gen
        return True

    def _read_generation(self, g: Path, gen: str) -> tuple | None:
        """The parts of generation folder ``g``, or None (logged) when they do not match this
        version and settings or cannot be read."""
        try:
            manifest = json.loads((g / "manifest.json").read_bytes())
            want = self.manifest()
            if not all(manifest.get(k) == want[k] for k in ("schema", "tokenizer", "lexical")):
                log.warning("index in %s is from another version or settings; rebuilding", self.index_dir)
                return None
            if manifest.get("generation") != gen:
                raise SnapshotError(f"manifest names generation {manifest.get('generation')!r}, CURRENT {gen!r}")
            store = ChunkStore.load(g / "chunks")
            bm25 = _load_bm25(g / "bm25")
            meta = _load_bm25(g / "meta_bm25")
            names = _load_names(g / "names")
            files = read_msgpack(g / "files.msgpack", dict[str, FileRecord])
            skipped = read_msgpack(g / "skipped.msgpack", list[Skip])
            _check_file_slots(files, store)
        except (
            ChunkStoreError,
            SnapshotError,
            OSError,
            KeyError,
            TypeError,
            ValueError,
            AttributeError,
            IndexError,
        ) as exc:
            log.warning("lexical snapshot unusable (%s); rebuilding", exc)
            return None
        return manifest, store, bm25, meta, names, files, skipped

    def replay_journal(self, apply: Callable[[ChangeSet], Any]) -> int:
        """Hand each batch of the loaded generation's lexical journal to ``apply``; returns
        the number of batches. A batch that does not decode ends the replay (the rest is
        redone by the reconcile with the disk)."""
        from . import journal

        if not self.state.generation:
            return 0
        n = 0
        for payload in journal.read(self.index_dir / JOURNAL_FILE, self.state.generation):
            try:
                cs = msgspec.msgpack.decode(payload, type=ChangeSet)
            except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                log.warning("journal batch %d does not decode (%s); replay stops", n + 1, exc)
                break
            apply(cs)
            n += 1
        return n

    # ------------------------------------------------------------------ dense load
    def dense_paths(self) -> tuple[Path, Path, Path]:
        """(hnswlib dir, embedded-map file, embedding cache file) of the current embedder.

        Each embedder has its own files (named by a hash of its fingerprint), so a lexical-only
        run, a damaged lexical snapshot or a switch to another model and back never throws
        away vectors that took long to compute.
        """
        tag = hashlib.sha256(self.embedder.fingerprint.encode("utf-8")).hexdigest()[:12]
        d = self.index_dir
        return d / f"dense-{tag}", d / f"dense-{tag}" / "embedded.msgpack", d / f"embeddings-{tag}.bin"

    def read_dense(self) -> _DenseLoad:
        """Read the embedding cache and the dense index of the current embedder (no lock: the
        state is not touched; :meth:`install_dense` swaps the result in). Vectors without a map
        entry are dropped, the journal is replayed on top. Never raises for damaged files
        (logged; the cache rebuilds the index)."""
        from .dense import DenseIndex, DenseIndexError
        from .embed_cache import EmbeddingCache

        dense_dir, embedded_file, cache_file = self.dense_paths()
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
            return _DenseLoad(cache)
        embedded = {k: v for k, v in meta.embedded.items() if k in dense}
        stray = [k for k in dense.keys() if k not in embedded]
        if stray:
            dense.remove(stray)
        replayed = self._replay_dense_journal(dense_dir, meta.generation, dense, cache, embedded)
        return _DenseLoad(cache, dense, meta.generation, embedded, replayed)

    def install_dense(self, loaded: _DenseLoad) -> None:
        """Swap a :meth:`read_dense` result into the state (the caller holds the lock)."""
        from .embed import VECTOR_SEP

        st = self.state
        st.cache = loaded.cache
        if loaded.dense is None:
            return
        st.dense = loaded.dense
        st.dense_generation = loaded.generation
        st.extra_vectors = any(VECTOR_SEP in k for k in loaded.embedded)
        st.dense_gen += 1
        st.embedded = loaded.embedded
        st.dense_journal_vectors = loaded.replayed
        if loaded.replayed:
            st.dense_dirty = True

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
            for cid, h in zip(e.ids, e.hashes, strict=False):
                embedded[cid] = h
            n += len(e.ids)
        if n:
            log.info("replayed %d journaled vectors", n)
        return n

    # ------------------------------------------------------------------ save
    def save_lexical(self) -> bool:
        """Write a new generation of the lexical snapshot if the lexical side changed since
        the last save; returns True if it wrote.

        ``<index_dir>/lexical/<generation>/``: ``manifest.json``, ``chunks/``
        (:meth:`daemon.index.chunkstore.ChunkStore.save`), ``bm25/``, ``meta_bm25/``, ``names/``,
        ``files.msgpack``, ``skipped.msgpack``, ``refs.bin`` (the references, while complete).
        Written as a stream into ``<generation>.tmp/``
        (every file fsynced), renamed, then ``lexical/CURRENT`` (atomic replace) names it;
        older generations are deleted after that (a live memory map of a deleted file stays
        valid). A ``kill -9`` at any point leaves the old or the new generation current, each
        complete. Runs without the engine lock but for the BM25 compaction (it changes what
        queries read): call it from the writer thread (the only one that changes the lexical
        side). Afterwards the chunk blobs are served from the new generation's memory-mapped
        arena (:meth:`daemon.index.chunkstore.ChunkStore.rebase`).
        """
        d = self.index_dir
        st = self.state
        if not st.dirty and _current_generation(d):
            return False
        from . import journal

        d.mkdir(parents=True, exist_ok=True, mode=0o700)  # private: it holds the code
        st.dirty = False  # changes made while we write mark it dirty again
        generation = journal.new_generation()
        lex = d / LEXICAL_DIR
        lex.mkdir(exist_ok=True, mode=0o700)
        tmp = lex / f"{generation}.tmp"
        try:
            store = st.store
            version = store.version
            manifest = {
                **self.manifest(),
                "format": st.format,
                "info": msgspec.to_builtins(st.info) if st.info is not None else None,
                "cyrillic_share": st.cyrillic_share(),
                "saved_at": time.time(),
                "generation": generation,
                "chunks": len(store),
            }
            with self.lock:
                # BM25Index.save compacts first: it merges the tails and drops the tombstones,
                # renumbering the documents, one attribute at a time; a query meeting that half
                # done raised IndexError and took the index for damaged. So the compaction runs
                # here, under the lock; the saves below find nothing to do.
                st.bm25.compact()
                st.meta_bm25.compact()
                st.names.flush()
            self._write_generation(tmp, manifest)
            os.rename(tmp, lex / generation)
            _fsync_dir(lex)
            atomic_write_bytes(lex / CURRENT_FILE, generation.encode("ascii"))
            _fsync_dir(lex)
            # the snapshot holds everything the journal held: start a new, empty one
            journal.reset(d / JOURNAL_FILE, generation)
            st.generation = generation
            st.compact_due = False
            write_json(d / "manifest.json", manifest)  # for people and tools; the generation carries its own
            with self.lock:
                if st.store is store and store.version == version:
                    store.rebase(lex / generation / "chunks")
            _drop_generations(d, keep=generation)
        except BaseException:
            st.dirty = True
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return True

    def _write_generation(self, tmp: Path, manifest: dict) -> None:
        """Write every file of a generation into ``tmp`` (created here), each fsynced."""
        st = self.state
        tmp.mkdir(mode=0o700)
        st.store.save(tmp / "chunks")
        _save_bm25(st.bm25, tmp / "bm25")
        _save_bm25(st.meta_bm25, tmp / "meta_bm25")
        _save_names(st.names, tmp / "names")
        _write_parts_synced(tmp / "files.msgpack", _files_parts(st.files))
        _write_parts_synced(tmp / "skipped.msgpack", (msgspec.msgpack.encode(st.skipped),))
        if st.refs_complete:  # else left out: the next load reads every file's references again
            _write_parts_synced(tmp / REFS_FILE, (st.refs.to_bytes(),))
        _write_parts_synced(tmp / "manifest.json", (json.dumps(manifest, ensure_ascii=False, indent=2).encode(),))
        for sub in (tmp / "chunks", tmp / "bm25", tmp / "meta_bm25", tmp / "names", tmp):
            _fsync_dir(sub)

    def save_dense(self) -> bool:
        """Write the dense index, its chunk-to-text-hash map and the embedding cache if new
        vectors came in since the last save; returns True if it wrote.

        Each file is atomic; a crash between them is repaired on load (vectors without a map
        entry are dropped and the other way round; the cache re-fills the rest without the
        model). Safe from any thread: takes the engine lock only to copy the map, hnswlib's
        own lock while it writes the graph.
        """
        from . import journal

        st = self.state
        if st.dense is None or not st.dense_dirty:
            return False
        generation = journal.new_generation()
        with self.lock:
            st.dense_dirty = False
            embedded = dict(st.embedded)
            # vectors set after this point go to the next generation's journal
            dense_dir, embedded_file, cache_file = self.dense_paths()
        try:
            st.cache.save(cache_file)
            st.dense.save(dense_dir)
            write_msgpack(embedded_file, _DenseMeta(generation, embedded))
            journal.reset(dense_dir / JOURNAL_FILE, generation)
            st.dense_generation = generation
            st.dense_compact_due = False
            st.dense_journal_vectors = 0
        except BaseException:
            st.dense_dirty = True
            raise
        return True

    # ------------------------------------------------------------------ journals
    def journal_append(self, cs: ChangeSet) -> None:
        """Append a batch to the lexical journal; a big batch (a first index, a checkout)
        asks for a snapshot instead (``state.compact_due``)."""
        from . import journal

        st = self.state
        if st.compact_due or not st.generation or cs.staged is not None:
            st.compact_due = True
            return
        if len(cs.updates) > JOURNAL_MAX_FILES:
            st.compact_due = True
            return
        slim = msgspec.structs.replace(cs, updates=[msgspec.structs.replace(u, tokens={}) for u in cs.updates])
        try:
            # encoded from fresh copies: no UTF-8 cache stays on the live chunks (see _fresh)
            size = journal.append(self.index_dir / JOURNAL_FILE, msgspec.msgpack.encode(_fresh(slim)))
        except OSError as exc:
            log.warning("journal append failed (%s); a snapshot is written instead", exc)
            st.compact_due = True
            return
        if size > JOURNAL_MAX_BYTES:
            st.compact_due = True

    def dense_journal_append(self, live: list, mat: np.ndarray) -> None:
        """Append vectors just set (``live``: ``[(dense key, text hash, vector)]``, ``mat``
        their ``(n, dim)`` matrix) to the dense journal; past :data:`DENSE_JOURNAL_MAX` a
        dense snapshot is due (``state.dense_compact_due``). Lock held."""
        from . import journal

        st = self.state
        if not st.dense_generation or st.dense_compact_due:
            st.dense_compact_due = True
            return
        dense_dir, _, _ = self.dense_paths()
        entry = _DenseEntry(
            [x[0] for x in live], [x[1] for x in live], np.ascontiguousarray(mat, dtype="<f4").tobytes()
        )
        try:
            journal.append(dense_dir / JOURNAL_FILE, msgspec.msgpack.encode(entry))
        except OSError as exc:
            log.warning("dense journal append failed (%s); a dense snapshot is written instead", exc)
            st.dense_compact_due = True
            return
        st.dense_journal_vectors += len(live)
        if st.dense_journal_vectors > DENSE_JOURNAL_MAX:
            st.dense_compact_due = True


def _load_refs(path: Path) -> tuple[RefGraph, bool]:
    """``(graph, complete)`` from a generation's :data:`REFS_FILE`: an empty graph and False
    (the next full reconcile reads the references again) when it is missing or unusable (logged)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        log.info("the snapshot holds no references; they are read from the files again")
        return RefGraph(), False
    except OSError as exc:
        log.warning("references unreadable (%s); they are read from the files again", exc)
        return RefGraph(), False
    try:
        return RefGraph.from_bytes(data), True
    except Exception as exc:  # noqa: BLE001 - any damage (zstd, msgpack, format): rebuilt, never fatal
        log.warning("references unusable (%s: %s); they are read from the files again", type(exc).__name__, exc)
        return RefGraph(), False


def _check_file_slots(files: dict[str, FileRecord], store: ChunkStore) -> None:
    """``SnapshotError`` unless the file records name every live chunk slot of ``store``
    exactly once and nothing else (vectorised: one array of all the records' slots)."""
    recs = list(files.values())
    if any(len(r.slots) % 4 for r in recs):
        raise SnapshotError("files.msgpack: a record's chunk slots are damaged (not int32)")
    try:
        allslots = np.frombuffer(b"".join(r.slots for r in recs), dtype="<i4")
    except ValueError as exc:  # a slots field of a size not a multiple of 4
        raise SnapshotError(f"files.msgpack: a record's chunk slots are damaged ({exc})") from exc
    live = np.zeros(store.capacity, dtype=bool)
    live[store.live_slots()] = True
    ok = (allslots >= 0) & (allslots < store.capacity)
    if ok.all():
        ok = live[allslots]
    if not ok.all():
        bad = int(np.flatnonzero(~ok)[0])
        ends = np.cumsum([len(r.slots) // 4 for r in recs])
        path = recs[int(np.searchsorted(ends, bad, side="right"))].path
        raise SnapshotError(f"files.msgpack: {path} names chunk slots the store does not hold")
    if allslots.size != len(store) or (allslots.size and int(np.bincount(allslots).max()) > 1):
        raise SnapshotError(f"files.msgpack names {allslots.size} chunk slots, the store holds {len(store)} chunks")


def _current_generation(d: Path) -> str:
    """The generation ``<index_dir>/lexical/CURRENT`` names, "" when there is none (or it is
    not a 32-hex-digit id)."""
    try:
        gen = (d / LEXICAL_DIR / CURRENT_FILE).read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return ""
    return gen if len(gen) == 32 and all(ch in "0123456789abcdef" for ch in gen) else ""


def _drop_generations(d: Path, keep: str) -> None:
    """Delete every generation folder (and leftover ``*.tmp``) but ``keep``, and the
    single-file snapshots of older versions."""
    lex = d / LEXICAL_DIR
    for p in lex.iterdir():
        if p.is_dir() and p.name != keep:
            shutil.rmtree(p, ignore_errors=True)
    for legacy in (SNAPSHOT_FILE, "chunks.msgpack", "lexical.msgpack"):  # schema <= 5
        (d / legacy).unlink(missing_ok=True)


def _fsync_dir(p: Path) -> None:
    fd = os.open(p, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_parts_synced(path: Path, parts) -> None:
    with open(path, "wb") as fh:
        for part in parts:
            fh.write(part)
        fh.flush()
        os.fsync(fh.fileno())


def _files_parts(files: dict[str, FileRecord]):
    """``msgspec.msgpack.encode(files)`` in pieces of at most 512 records (a map header,
    then the encoded key/value pairs): never the whole map as one bytes object."""
    enc = msgspec.msgpack.Encoder()
    n = len(files)
    yield (
        bytes((0x80 | n,))
        if n < 16
        else (b"\xde" + n.to_bytes(2, "big") if n < 1 << 16 else b"\xdf" + n.to_bytes(4, "big"))
    )
    buf = bytearray()
    for k, rec in files.items():
        enc.encode_into(k, buf, len(buf))
        enc.encode_into(rec, buf, len(buf))
        if len(buf) > 1 << 20:
            yield bytes(buf)
            buf.clear()
    if buf:
        yield bytes(buf)


def _save_bm25(index: BM25Index, d: Path) -> None:
    index.save(d)


def _load_bm25(d: Path) -> BM25Index:
    return BM25Index.load(d, mmap=True)


def _save_names(index: SymbolIndex, d: Path) -> None:
    index.save(d)


def _load_names(d: Path) -> SymbolIndex:
    return SymbolIndex.load(d, mmap=True)
