"""The platform help index of one source and version: its entries as chunks, BM25 over them
with the 1C tokenizer, the bilingual names channel and, once embedded, a dense index.

A platform index is immutable once built: it is built from :class:`daemon.contract.PlatformEntry`
records (the bundled data set, :mod:`daemon.sources.platform.globals_json`, or an installed
platform's help books, :mod:`daemon.sources.platform.book`), saved into a folder of its own
under the platform cache (:func:`platform_cache_dir`; shared by every daemon of the machine
and named by :func:`index_key`: the source files' content and this module's layout), and
loaded memory-mapped by the next daemon. Slot ``i`` of its chunk store is entry ``i``.

Folder layout::

    meta.json         what it holds (source, version, counts, skips, build seconds)
    store/            the chunk store (daemon.index.chunkstore): one to_chunk record per entry
    bm25/             BM25 over each record's text (the 1C tokenizer, stemmed as for code)
    names/            the names channel: two rows per entry (BilingualNames)
    entries.bin       the entries themselves, msgpack one after another (entries_off.npy: offsets)
    embeddings-<tag>.bin, dense-<tag>/   per embedder: the embedded texts' vectors, the hnswlib index

The dense side is filled later, a batch at a time (:meth:`PlatformIndex.embed_batch`), through
an embedding cache keyed by text hash (:mod:`daemon.index.embed_cache`) and the team's shared
cache, so the same entries are embedded once per machine and model.
"""

from __future__ import annotations

import hashlib
import json
import logging
import mmap
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import msgspec
import numpy as np
import platformdirs

from ..contract import Chunk, PlatformEntry, Skip
from ..text.folding import fold
from ..text.tokenize import tokenize
from .bm25 import BM25Index
from .chunkstore import ChunkStore
from .names import SymbolIndex
from .storage import save_npy_synced

log = logging.getLogger(__name__)

__all__ = [
    "BOOSTS",
    "CACHE_ENV",
    "EMBED_MAX_CHARS",
    "FORMAT_VERSION",
    "BilingualNames",
    "PlatformIndex",
    "PlatformIndexError",
    "embed_text",
    "entry_boost",
    "file_digest",
    "index_key",
    "platform_cache_dir",
]

#: Bump when the folder layout, the chunk records, the BM25 tokens, the names rows or the
#: embedded text change: every platform index is then built again (they are keyed by it).
FORMAT_VERSION = 1
#: The environment variable naming the platform cache folder (default: ``<user cache>/bsl-lens/platform``).
CACHE_ENV = "BSL_LENS_PLATFORM_CACHE"
#: Characters of an entry's embedded text (its names, kind, signature, description start).
EMBED_MAX_CHARS = 300

#: The names channel's boost per entry kind (higher first among matches of one kind): a global
#: function, a type or a system enumeration before members and constructors of the same name
#: (``Найти``: the global function, then ``Массив.Найти``; ``ТаблицаЗначений``: the type, then
#: ``Новый ТаблицаЗначений``). Baked into the names channel when an index is built.
BOOSTS: dict[str, float] = {
    "function": 3.0,
    "type": 2.5,
    "enum": 2.5,
    "global_property": 2.0,
    "keyword": 1.5,
    "event": 1.0,
    "method": 1.0,
    "property": 0.75,
    "constructor": 0.5,
    "enum_value": 0.5,
}
#: Subtracted from the boost of an entry the help marks as not recommended (``deprecated_since``).
DEPRECATED_PENALTY = 1.5

#: The words of each kind in the embedded text (both languages: the model matches either).
_KIND_PHRASE = {
    "function": "функция глобального контекста, global function",
    "global_property": "свойство глобального контекста, global property",
    "event": "событие, event",
    "type": "тип, type",
    "constructor": "конструктор, constructor",
    "method": "метод, method",
    "property": "свойство, property",
    "enum": "системное перечисление, system enumeration",
    "enum_value": "значение системного перечисления, enumeration value",
    "keyword": "ключевое слово, keyword",
}


class PlatformIndexError(Exception):
    """A saved platform index is missing a part, damaged or of another layout: build it again."""


def platform_cache_dir(env: dict[str, str] | None = None) -> Path:
    """The folder platform indexes are saved in: ``$BSL_LENS_PLATFORM_CACHE``, else
    ``<user cache dir>/bsl-lens/platform`` (``platformdirs``; ``~/.cache/bsl-lens/platform`` on
    Linux). One sub-folder per index (:func:`index_key`), shared by every daemon of the user."""
    env = os.environ if env is None else env
    given = (env.get(CACHE_ENV) or "").strip()
    if given:
        return Path(given).expanduser()
    return Path(platformdirs.user_cache_dir("bsl-lens", appauthor=False)) / "platform"


def file_digest(path: Path) -> str:
    """sha256 of a file's bytes, hex (read in 1 MiB blocks). ``OSError`` if it cannot be read."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def index_key(source: str, digests: Iterable[tuple[str, str]], *, stem: bool, k1: float, b: float) -> str:
    """The folder name of a platform index: ``<source>-<24 hex digits>`` of sha256 over
    :data:`FORMAT_VERSION`, the BM25 settings and each source file's name and content digest
    (``digests``: ``(file name, file_digest)``). A changed help file or data set, another
    layout or other BM25 settings give another key, so a stale index is never loaded."""
    h = hashlib.sha256(f"{FORMAT_VERSION};stem={stem};k1={k1};b={b}".encode())
    for name, digest in sorted(digests):
        h.update(f";{name}={digest}".encode())
    return f"{source}-{h.hexdigest()[:24]}"


def entry_boost(entry: PlatformEntry) -> float:
    """The names channel's boost of ``entry``: :data:`BOOSTS` by kind, a global event above a
    type's event, minus :data:`DEPRECATED_PENALTY` for a deprecated entry."""
    boost = BOOSTS.get(entry.kind, 0.0)
    if entry.kind == "event" and not entry.owner:
        boost += 0.5
    if entry.deprecated_since:
        boost -= DEPRECATED_PENALTY
    return boost


def embed_text(entry: PlatformEntry, max_chars: int = EMBED_MAX_CHARS) -> str:
    """The text embedded for an entry: both qualified names, the kind in words, the first
    signature without its types' noise, then the description, cut at a word boundary to
    ``max_chars``."""
    names = entry.qualified + (f" ({entry.qualified_en})" if entry.qualified_en else "")
    parts = [names, _KIND_PHRASE.get(entry.kind, entry.kind)]
    if entry.signatures and entry.signatures[0].params:
        parts.append("параметры: " + ", ".join(p.name for p in entry.signatures[0].params))
    if entry.description:
        parts.append(" ".join(entry.description.split()))
    elif entry.returns:
        parts.append(" ".join(entry.returns.split()))
    text = ". ".join(parts)
    if len(text) <= max_chars:
        return text
    cut = text.rfind(" ", 0, max_chars)
    return text[: cut if cut > max_chars // 2 else max_chars]


class BilingualNames:
    """The names channel of a platform index: a :class:`daemon.index.names.SymbolIndex` with
    two rows per entry, row ``2·slot`` its Russian name and row ``2·slot + 1`` its English name,
    each qualified by both owner names (``ТаблицаЗначений.Свернуть``, ``ValueTable.GroupBy`` and
    ``ValueTable.Свернуть`` all find one method). Searches answer chunk slots, each once, in
    the order of its best row (exact > prefix > CamelHump > substring, then the boost)."""

    def __init__(self, inner: SymbolIndex | None = None) -> None:
        self.inner = inner if inner is not None else SymbolIndex()

    def __len__(self) -> int:
        return len(self.inner)

    def add(self, slot: int, entry: PlatformEntry) -> None:
        """Index the entry at ``slot`` (its Russian and English names; a constructor under its
        type's names)."""
        boost = entry_boost(entry)
        ru = entry.owner if entry.kind == "constructor" else entry.name
        en = (entry.owner_en or entry.name_en) if entry.kind == "constructor" else entry.name_en
        owners = () if entry.kind == "constructor" else (entry.owner, entry.owner_en)
        self.inner.add(2 * slot, ru, container=owners, kind=entry.kind, boost=boost)
        if en and fold(en) != fold(ru):
            self.inner.add(2 * slot + 1, en, container=owners[::-1], kind=entry.kind, boost=boost)

    def search(
        self,
        query: str,
        k: int,
        *,
        allow: np.ndarray | None = None,
        key_of: Callable[[int], str] | Sequence[str | None] | None = None,
    ) -> list[tuple[int, float, str]]:
        """Best ``k`` entries for a name query: ``[(slot, score, match kind)]``, each slot once
        (:meth:`daemon.index.names.SymbolIndex.search` over the rows). ``allow``: a bool mask
        over slots; ``key_of(slot)``: the tie-break key (the chunk id)."""
        if k <= 0:
            return []
        row_allow = np.repeat(np.asarray(allow, dtype=bool), 2) if allow is not None else None
        if key_of is not None and not callable(key_of):
            key_of = key_of.__getitem__
        row_key = (lambda r: key_of(r // 2)) if key_of is not None else None
        want = 2 * k
        while True:
            rows = self.inner.search(query, want, allow=row_allow, key_of=row_key)
            out: list[tuple[int, float, str]] = []
            seen: set[int] = set()
            for row, score, match in rows:
                slot = row // 2
                if slot not in seen:
                    seen.add(slot)
                    out.append((slot, score, match))
            if len(out) >= k or len(rows) < want:
                return out[:k]
            want *= 2

    def boost(self, slot: int) -> float:
        """The boost of the entry at ``slot`` (:func:`entry_boost`; 0 without one)."""
        e = self.inner.get(2 * slot)
        return e[3] if e is not None else 0.0

    def save(self, folder: Path) -> None:
        """Write the rows as the names channel's column files (:meth:`SymbolIndex.save`)."""
        self.inner.save(folder)

    @classmethod
    def load(cls, folder: Path) -> BilingualNames:
        """Read them back, memory-mapped (:meth:`SymbolIndex.load`)."""
        return cls(SymbolIndex.load(folder))


class _Meta(msgspec.Struct, kw_only=True):
    format: str = "bsl-lens.platform"
    layout: int = FORMAT_VERSION
    key: str
    source: str  # bundled | installed
    version: str = ""
    label: str
    path: str  # what hits show as their place: platform/<version>/<file>
    books: list[str] = []
    entries: int
    kinds: dict[str, int] = {}
    skips: list[Skip] = []
    skipped: int = 0
    build_s: float = 0.0
    built_at: float = 0.0


#: Skips kept in ``meta.json`` (the count keeps the rest).
META_SKIPS = 50
#: The embedding cache is saved after this many new vectors (an interrupted first fill keeps them).
SAVE_EVERY = 512


class PlatformIndex:
    """One platform help source and version as an index (see the module docstring).

    Read-only once built or loaded, so queries need no lock; the dense side alone changes
    (:meth:`embed_batch`), under :attr:`dense_lock`. ``meta``: what it holds (source,
    version, label, counts, skips). Build with :meth:`build`, persist with :meth:`save`, load
    with :meth:`load`; :meth:`entry` decodes one entry.
    """

    def __init__(self, meta: _Meta, store: ChunkStore, bm25: BM25Index, names: BilingualNames, entries, offsets):
        self.meta = meta
        self.store = store
        self.bm25 = bm25
        self.names = names
        self._entries = entries  # bytes, or an mmap of entries.bin
        self._offsets = offsets  # int64, len(entries) + 1
        self.folder: Path | None = None
        self.loaded_from_disk = False
        # dense side: None until load_dense (and without an embedder)
        self.dense = None
        self.cache = None
        self.fingerprint = ""
        self.dense_lock = threading.Lock()
        self._dense_dirty = False
        self._pending: list[int] = []  # slots without a vector, in order
        self._since_save = 0
        self._cyr_share = 0.5

    # ------------------------------------------------------------------ build
    @classmethod
    def build(
        cls,
        entries: Sequence[PlatformEntry],
        *,
        key: str,
        source: str,
        version: str,
        label: str,
        path: str,
        books: Sequence[str] = (),
        skips: Sequence[Skip] = (),
        stem: bool = True,
        k1: float = 1.2,
        b: float = 0.3,
    ) -> PlatformIndex:
        """An index over ``entries`` in memory (:meth:`save` persists it): one chunk per
        entry (:func:`daemon.sources.platform.entries.to_chunk` with ``path``), its text in
        BM25, its names in the names channel. Entries of the same key after the first are
        left out as ``duplicate_entry`` skips."""
        from ..sources.platform.entries import to_chunk

        t0 = time.perf_counter()
        store, bm25, names = ChunkStore(), BM25Index(k1, b), BilingualNames()
        kept: list[bytes] = []
        kinds: dict[str, int] = {}
        skipped = list(skips)
        seen: set[str] = set()
        enc = msgspec.msgpack.Encoder()
        for e in entries:
            if e.key in seen:
                skipped.append(Skip(path, "duplicate_entry", f"{e.key} is listed twice; the first one is kept"))
                continue
            seen.add(e.key)
            c = to_chunk(e, version=version, path=path)
            slot = store.add(c)
            if slot != len(kept):  # a fresh store numbers its slots 0, 1, 2 ...
                raise RuntimeError(f"platform index: slot {slot} for entry {len(kept)}")
            bm25.add(slot, chunk_tokens(c, stem))
            names.add(slot, e)
            kept.append(enc.encode(e))
            kinds[e.kind] = kinds.get(e.kind, 0) + 1
        bm25.flush()
        names.inner.flush()
        offsets = np.zeros(len(kept) + 1, dtype=np.int64)
        np.cumsum([len(x) for x in kept], out=offsets[1:])
        meta = _Meta(
            key=key,
            source=source,
            version=version,
            label=label,
            path=path,
            books=list(books),
            entries=len(kept),
            kinds=kinds,
            skips=skipped[:META_SKIPS],
            skipped=len(skipped),
            build_s=round(time.perf_counter() - t0, 3),
            built_at=time.time(),
        )
        return cls(meta, store, bm25, names, b"".join(kept), offsets)

    # ------------------------------------------------------------------ reads
    def __len__(self) -> int:
        return self.meta.entries

    def entry(self, slot: int) -> PlatformEntry:
        """The entry at ``slot`` (decoded from its bytes; ``IndexError`` out of range)."""
        if not 0 <= slot < self.meta.entries:
            raise IndexError(slot)
        a, b = int(self._offsets[slot]), int(self._offsets[slot + 1])
        return msgspec.msgpack.decode(self._entries[a:b], type=PlatformEntry)

    def chunk(self, slot: int) -> Chunk:
        """The index record of the entry at ``slot``."""
        return self.store.get(slot)

    def cyrillic_share(self) -> float:
        """Share of Cyrillic letters in the entries' (Russian) names, as the code ranking's
        cross-script rule reads a corpus (0..1)."""
        if self._cyr_share == 0.5 and len(self):
            cyr, lat = self.store.name_letters()
            self._cyr_share = cyr / (cyr + lat) if cyr + lat else 0.5
        return self._cyr_share

    def kind_mask(self, kinds: Iterable[str]) -> np.ndarray:
        """A bool mask over slots: entries of these entry kinds (``method``, ``enum_value``)."""
        m = np.zeros(self.store.capacity, dtype=bool)
        for k in kinds:
            m[self.store.slots_where(kind="platform_" + k)] = True
        return m

    # ------------------------------------------------------------------ persistence
    def save(self, folder: Path) -> None:
        """Write the index into the new folder ``folder`` (every file fsynced; the caller
        renames a temporary folder into place, :func:`save_atomically`) and serve it from there."""
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.store.save(folder / "store")
        self.bm25.save(folder / "bm25", remap=False)
        self.names.save(folder / "names")
        with open(folder / "entries.bin", "wb") as fh:
            fh.write(self._entries)
            fh.flush()
            os.fsync(fh.fileno())
        save_npy_synced(folder / "entries_off.npy", self._offsets)
        data = msgspec.json.encode(self.meta)
        with open(folder / "meta.json", "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())

    def save_atomically(self, parent: Path) -> Path:
        """Save into ``parent/<key>`` through a temporary folder renamed into place. When
        another process saved the same key meanwhile, its folder is kept (same content) and
        ours dropped. Returns the folder."""
        parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        final = parent / self.meta.key
        tmp = Path(tempfile.mkdtemp(prefix=f".{self.meta.key}.", suffix=".tmp", dir=parent))
        try:
            self.save(tmp)
            try:
                os.rename(tmp, final)
            except OSError:
                if not (final / "meta.json").exists():
                    raise
                shutil.rmtree(tmp, ignore_errors=True)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        self.folder = final
        return final

    @classmethod
    def load(cls, folder: Path) -> PlatformIndex:
        """Open a folder written by :meth:`save`: the store, BM25 and the entries memory-mapped,
        the names channel read. :class:`PlatformIndexError` for a missing or damaged part."""
        from .bm25 import BM25Error
        from .chunk_blobs import ChunkStoreError
        from .names import SymbolError

        try:
            meta = msgspec.json.decode((folder / "meta.json").read_bytes(), type=_Meta)
            if meta.layout != FORMAT_VERSION or meta.key != folder.name:
                raise PlatformIndexError(f"platform index {folder}: layout {meta.layout}, key {meta.key}")
            store = ChunkStore.load(folder / "store")
            bm25 = BM25Index.load(folder / "bm25")
            names = BilingualNames.load(folder / "names")
            offsets = np.load(folder / "entries_off.npy", allow_pickle=False)
            with open(folder / "entries.bin", "rb") as fh:
                size = os.fstat(fh.fileno()).st_size
                entries = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
        except (OSError, ValueError, msgspec.DecodeError, BM25Error, ChunkStoreError, SymbolError) as exc:
            raise PlatformIndexError(f"platform index {folder} is unusable: {exc}") from exc
        if len(offsets) != meta.entries + 1 or int(offsets[-1]) != size or len(store) != meta.entries:
            raise PlatformIndexError(f"platform index {folder}: the parts disagree on the entry count")
        index = cls(meta, store, bm25, names, entries, offsets)
        index.folder = folder
        index.loaded_from_disk = True
        return index

    # ------------------------------------------------------------------ dense side
    def dense_paths(self, fingerprint: str) -> tuple[Path, Path]:
        """(hnswlib folder, embedding cache file) of one embedder, by a hash of its fingerprint."""
        if self.folder is None:
            raise PlatformIndexError("the platform index is not saved: no place for its vectors")
        tag = hashlib.sha256(fingerprint.encode("utf-8")).hexdigest()[:12]
        return self.folder / f"dense-{tag}", self.folder / f"embeddings-{tag}.bin"

    def load_dense(self, embedder) -> None:
        """Open the dense side for ``embedder``: the saved hnswlib index when it is complete,
        else the vectors the cache holds (the rest come from :meth:`embed_batch`). A damaged
        file is logged and rebuilt from the cache."""
        from .dense import DenseIndex, DenseIndexError
        from .embed_cache import EmbeddingCache, text_hash

        dense_dir, cache_file = self.dense_paths(embedder.fingerprint)
        dense, cache = None, None
        if dense_dir.exists():
            try:
                dense = DenseIndex.load(dense_dir, embedder.dim)
            except DenseIndexError as exc:
                log.warning("platform dense index %s unusable (%s); rebuilt from its embedding cache", dense_dir, exc)
        if dense is not None and len(dense) == len(self):  # complete: neither an entry nor the cache is read
            pending: list[int] = []
        else:
            cache = EmbeddingCache.load(cache_file, embedder.fingerprint, embedder.dim)
            ids, texts = self.dense_texts()
            dense = DenseIndex(embedder.dim, initial_capacity=max(1024, len(self)))
            hashes = [text_hash(t) for t in texts]
            found = cache.get_many(hashes)
            have = [i for i, h in enumerate(hashes) if h in found]
            if have:
                dense.rebuild_from([ids[i] for i in have], np.stack([found[hashes[i]] for i in have]))
            pending = [s for s, cid in enumerate(ids) if cid not in dense]
        with self.dense_lock:
            self.dense, self.cache, self.fingerprint = dense, cache, embedder.fingerprint
            self._pending = pending
            self._dense_dirty = False

    def dense_texts(self) -> tuple[list[str], list[str]]:
        """(chunk ids, embedded texts) of every entry, in slot order."""
        ids = [self.store.ids[s] for s in range(len(self))]
        return ids, [embed_text(self.entry(s)) for s in range(len(self))]

    def dense_pending(self) -> int:
        """Entries without a vector (0 before :meth:`load_dense`)."""
        return len(self._pending) if self.dense is not None else 0

    def embed_batch(self, embedder, *, batch: int = 16, shared=None) -> int:
        """Embed the next ``batch`` entries that have no vector yet (taken from the embedding
        cache or the shared cache when they hold the text) and add them to the dense index.
        The cache is saved every :data:`SAVE_EVERY` vectors and, with the hnswlib index, once
        every entry has its vector. Returns the vectors added (0 when nothing is pending)."""
        from .embed import embed_chunks

        if self.dense is None or not self._pending:
            return 0
        todo = self._pending[:batch]
        ids = [self.store.ids[s] for s in todo]
        texts = [embed_text(self.entry(s)) for s in todo]
        vectors = embed_chunks(embedder, self.cache, texts, batch_size=batch, shared=shared)
        with self.dense_lock:
            self.dense.upsert(ids, vectors)
            del self._pending[: len(todo)]
            self._dense_dirty = True
            self._since_save += len(todo)
        if not self._pending or self._since_save >= SAVE_EVERY:
            self.save_dense()
        return len(ids)

    def save_dense(self) -> None:
        """Write the embedding cache, and the hnswlib index once it is complete."""
        if self.dense is None or self.folder is None or not self._dense_dirty:
            return
        dense_dir, cache_file = self.dense_paths(self.fingerprint)
        with self.dense_lock:
            self.cache.save(cache_file)
            if not self._pending:
                self.dense.save(dense_dir)
            self._dense_dirty = False
            self._since_save = 0

    def meta_json(self) -> str:
        """``meta.json`` as text (for logs and the bench)."""
        return json.dumps(msgspec.to_builtins(self.meta), ensure_ascii=False)


def chunk_tokens(c: Chunk, stem: bool) -> list[str]:
    """BM25 tokens of a platform chunk: the 1C tokenizer over its text (both qualified names,
    kind words, signatures, description, parameters; :func:`daemon.sources.platform.entries.entry_text`)."""
    return tokenize(f"\n{c.text}", stem=stem)
