"""The chunk store: one integer slot per chunk, chunk metadata as numpy columns, the rest
of each chunk as one compressed blob in an arena that is not in the Python heap.

Issue 12 ("ERP scale: a lean index"): a dict of ~770k :class:`daemon.contract.Chunk`
structs (``bench --scale 20``) cost ~4.5 KB per chunk in the warm daemon, each chunk's
path/owner/type/kind a separate string after a load and the text a 2-byte-per-character
``str``. Here:

* **slots**: a chunk gets a non-negative int (:meth:`ChunkStore.add`); a removed chunk's
  slot goes to a free list and is reused by a later chunk. ``ids[slot]`` is the one copy of
  the chunk id string, ``slot_of[id]`` the way back. Every channel is keyed by slot
  (``notes/slots.md``).
* **columns** (numpy, one row per slot): kind, object type, module kind, owner, path and
  region as indices into interned tables (:class:`Interner`), export/async flags, part,
  start/end line, the name range (4 x int32), the chunk's blob offset/length, and the
  Cyrillic/Latin letter counts of its name (the corpus script share, summed vectorised).
  Filters are vectorised masks over them (:meth:`ChunkStore.mask`).
* **blobs**: name, symbol, params, directives, annotations, doc, signature, synonym,
  comment, types, properties and text, msgpack-encoded (:class:`_Var`; the doc comment as a
  span of the text when it is one) and compressed: zstd with a dictionary the store trains
  on its first :data:`ZDICT_SAMPLES` blobs, LZ4 before that (:meth:`ChunkStore._compress`;
  ssl31-ru: 108 MB raw, 39 MB all LZ4, ~20 MB with the dictionary; zlib level 1 without one
  gave 31 MB and wrote 10x slower than LZ4), in an arena: ``arena.bin`` of the
  loaded snapshot generation, read blob by blob with ``os.pread`` (:class:`_ArenaFile`: the
  pages stay in the OS page cache, outside the process) plus an append area (a
  ``bytearray``) for chunks added since. :meth:`get` materialises a :class:`Chunk` on demand.

  Why not a memory map (the first design): every fault on a mapped file maps its 64 KB
  neighbourhood too (the kernel's fault-around, which ``MADV_RANDOM`` does not turn off),
  so the ~120 blob heads a search reads land on ~120 different 64 KB windows; after 100
  queries of ``bench --scale 5`` 125 of the 154 MB arena counted in the daemon's RSS
  (measured with ``/proc/self/smaps``), ~0.5 GB at ``--scale 20``. A ``pread`` of a blob
  costs ~1-2 us more than a slice of the map.

Persistence (:meth:`save` / :meth:`load`): a folder of ``.npy`` column files (the ids among
them: :class:`IdColumn`, :class:`SlotMap`), ``tables.msgpack``, ``zdict.bin`` (the zstd
dictionary, possibly empty), ``arena.bin`` (live blobs only, streamed to the file blob by blob) and
``store.json`` (counts and sizes, checked on load). Damage raises :class:`ChunkStoreError`.
"""

from __future__ import annotations

import json
import os
import re
import zlib
from array import array
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Mapping, MutableMapping, Sequence
from pathlib import Path
from typing import Any

import lz4.block
import msgspec
import numpy as np

from .storage import save_npy_synced

from ..contract import CODE_KINDS, DOCS_KINDS, Chunk

#: Bump when the folder layout or the blob encoding changes.
STORE_VERSION = (
    3  # 2: blobs start with an uncompressed head (name, symbol); 3: ids as columns, zstd, symbol True = name
)
#: Blobs shorter than this are stored raw (the compressor's call costs more than it saves).
COMPRESS_MIN = 96

_FLAG_EXPORT = 1
_FLAG_ASYNC = 2
_FLAG_LIVE = 4
_FLAG_CODE = 8
_FLAG_LZ4 = 16  # the blob is LZ4-compressed (block format, size stored)
_FLAG_PATH_ID = 32  # on disk only: the chunk id is path + "::" + its entry in ids_blob.npy
_FLAG_ZSTD = 64  # the blob is zstd-compressed with the store's dictionary (zdict.bin)
#: Blob bodies the store collects before it trains its zstd dictionary (the ones before are
#: LZ4): ~0.3 s of training; see :meth:`ChunkStore._compress`.
ZDICT_SAMPLES = 2000
#: Size of that dictionary (bytes) and the zstd level of the blobs.
ZDICT_BYTES = 65536
ZSTD_LEVEL = 3

#: name -> dtype of each column (one row per slot).
COLUMNS: dict[str, Any] = {
    "flags": np.uint8,
    "kind": np.uint8,
    "module_kind": np.uint8,
    "object_type": np.uint16,
    "owner": np.int32,
    "path": np.int32,
    "region": np.int32,
    "part": np.int32,
    "start_line": np.int32,
    "end_line": np.int32,
    "name_cyr": np.uint16,
    "name_lat": np.uint16,
    "blob_len": np.uint32,
    "head_len": np.uint16,
    "blob_off": np.int64,
}
#: One row per slot: the columns plus the name range (line0, col0, line1, col1), as one
#: structured array, so reading a chunk converts one row (``.item()``) instead of ~20 numpy
#: scalars (1.3 us each measured on the loaded bench machine).
ROW = np.dtype([(name, dt) for name, dt in COLUMNS.items()] + [(f"nr{i}", np.int32) for i in range(4)])
_F = {name: i for i, name in enumerate(ROW.names)}
_TABLES = ("kind", "module_kind", "object_type", "owner", "path", "region")


class ChunkStoreError(Exception):
    """A saved chunk store folder is missing, damaged or of another version."""


class _Head(msgspec.Struct, array_like=True):
    """The start of a chunk's blob, never compressed: what a search reads of every candidate
    (:meth:`ChunkStore.hit_key`) without inflating the rest. ``symbol`` True: the symbol is
    the name (most methods: 93 % of ssl31-ru's chunks; the head of a method then holds its
    name once, ~115 -> ~60 bytes); read it through :meth:`sym`."""

    name: str
    symbol: str | bool | None

    def sym(self) -> str | None:
        """The chunk's symbol."""
        s = self.symbol
        return self.name if s is True else s


class _Var(msgspec.Struct, array_like=True):
    """The rest of a chunk's variable fields (the blob after its :class:`_Head`, compressed
    when large). ``doc_span``: ``[start, end]`` of the doc comment in ``text`` when the doc
    is a slice of it (it usually is: the text starts with the doc comment); ``doc`` is then
    empty."""

    params: str
    directives: list[str]
    annotations: list[str]
    doc: str
    doc_span: tuple[int, int] | None
    signature: str
    synonym: dict[str, str]
    comment: str
    types: list[str]
    properties: dict[str, str]
    text: str


_enc = msgspec.msgpack.Encoder()
_dec = msgspec.msgpack.Decoder(_Var)
_dec_head = msgspec.msgpack.Decoder(_Head)


class Interner:
    """An append-only table of distinct values (strings, or tuples of strings for regions):
    ``index(v)`` gives (and if new, assigns) its row, ``values[row]`` the one shared copy."""

    def __init__(self, values: Iterable[Any] = ()) -> None:
        self.values: list[Any] = list(values)
        self._row: dict[Any, int] = {v: i for i, v in enumerate(self.values)}

    def index(self, v: Any) -> int:
        """The row of ``v``, added at the end if new."""
        i = self._row.get(v)
        if i is None:
            i = self._row[v] = len(self.values)
            self.values.append(v)
        return i

    def find(self, v: Any) -> int:
        """The row of ``v``, or -1 if the table does not hold it."""
        return self._row.get(v, -1)

    def __len__(self) -> int:
        return len(self.values)


_CYR = re.compile(r"[а-яёА-ЯЁ]")
_LAT = re.compile(r"[a-zA-Z]")


def _letters(text: str) -> tuple[int, int]:
    """(Cyrillic letters, Latin letters) in ``text`` (the engine's corpus script share)."""
    return len(_CYR.findall(text)), len(_LAT.findall(text))


def encode_parts(c: Chunk) -> tuple[bytes, bytes]:
    """The blob of ``c`` before compression: its :class:`_Head` and its :class:`_Var`
    (msgpack)."""
    doc, span = c.doc, None
    if doc:
        at = c.text.find(doc)
        if at >= 0:
            doc, span = "", (at, at + len(c.doc))
    raw = _enc.encode(
        _Var(
            c.params,
            c.directives,
            c.annotations,
            doc,
            span,
            c.signature,
            c.synonym,
            c.comment,
            c.types,
            c.properties,
            c.text,
        )
    )
    head = _enc.encode(_Head(c.name, True if c.symbol is not None and c.symbol == c.name else c.symbol))
    if len(head) > 65535:
        raise ValueError(f"chunk {c.id!r}: name and symbol take {len(head)} bytes, at most 65535")
    return head, raw


_MISSING = object()


def _id_hash(cid: str) -> int:
    """The 32-bit hash of a chunk id kept sorted in ``id_hash.npy`` (CRC-32 of its UTF-8;
    collisions only cost a comparison: :meth:`SlotMap.get` checks the id itself)."""
    return zlib.crc32(cid.encode("utf-8", "surrogatepass"))


class IdColumn(Sequence):
    """``ChunkStore.ids`` of a loaded store: ``ids[slot]`` is the chunk id (None for a free
    slot), made on demand from the saved column (``ids_blob.npy``: UTF-8 of each id
    without its ``path + "::"`` prefix when it has one, ``ids_off.npy``: offsets) instead of
    ~770k ``str`` objects (``bench --scale 20``: ~200 MB of heap and ~1 s to decode, plus
    ~0.9 s and ~50 MB for the dict back). Slots written since the load (``ids[slot] = v``,
    :meth:`append`) are kept in a small dict that wins over the column.

    Reads cost ~1 us (a slice, a UTF-8 decode, a concatenation); the engine reads an id per
    channel hit and for BM25 / names ties, never all of them per query."""

    __slots__ = ("_blob", "_off", "_pfx", "_paths", "_n", "_len", "_over")

    def __init__(self, blob: bytes, off: array, pfx: array, paths: list[str], n: int) -> None:
        self._blob, self._off, self._pfx, self._paths = blob, off, pfx, paths
        self._n = self._len = n
        self._over: dict[int, str | None] = {}

    def __len__(self) -> int:
        return self._len

    def __getitem__(self, slot):  # type: ignore[override]
        if type(slot) is not int:
            if isinstance(slot, slice):
                return [self[i] for i in range(*slot.indices(self._len))]
            slot = int(slot)  # numpy integers
        o = self._over.get(slot, _MISSING)
        if o is not _MISSING:
            return o
        if slot < 0:
            slot += self._len
            o = self._over.get(slot, _MISSING)
            if o is not _MISSING:
                return o
        if not 0 <= slot < self._n:
            raise IndexError(slot)
        p = self._pfx[slot]
        if p == -2:
            return None
        a, b = self._off[slot], self._off[slot + 1]
        tail = self._blob[a:b].decode("utf-8", "surrogatepass")
        return tail if p < 0 else self._paths[p] + "::" + tail

    def __setitem__(self, slot: int, cid: str | None) -> None:
        if not 0 <= slot < self._len:
            raise IndexError(slot)
        self._over[slot] = cid

    def append(self, cid: str | None) -> None:
        """Add a slot at the end (a new chunk when no slot is free)."""
        self._over[self._len] = cid
        self._len += 1

    def __iter__(self) -> Iterator[str | None]:
        for i in range(self._len):
            yield self[i]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (list, tuple, IdColumn)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]


class SlotMap(MutableMapping):
    """``ChunkStore.slot_of`` of a loaded store: chunk id -> slot through the saved hash
    column (``id_hash.npy``: :func:`_id_hash` of every live id, ascending;
    ``id_hash_slot.npy``: their slots) and a binary search, the id at the slot compared
    to rule out collisions; ids added since the load are in a small dict, saved ids removed
    since in a small set. No per-chunk object is made at load."""

    __slots__ = ("_hash", "_hslot", "_ids", "_new", "_gone", "_len")

    def __init__(self, hashes: array, hslot: array, ids: IdColumn, live: int) -> None:
        self._hash, self._hslot, self._ids = hashes, hslot, ids
        self._new: dict[str, int] = {}
        self._gone: set[int] = set()  # slots whose saved id was removed since the load
        self._len = live

    def get(self, cid, default=None):  # type: ignore[override]
        """The slot of ``cid`` or ``default``."""
        s = self._new.get(cid)
        if s is not None:
            return s
        if type(cid) is not str:
            return default
        s = self._base_slot(cid)
        return default if s is None else s

    def _base_slot(self, cid: str) -> int | None:
        """The slot of ``cid`` in the saved hash column, None if absent or removed since."""
        h = _id_hash(cid)
        hs = self._hash
        i = bisect_left(hs, h)
        n = len(hs)
        ids = self._ids
        while i < n and hs[i] == h:
            s = self._hslot[i]
            if s not in self._gone and ids[s] == cid:
                return s
            i += 1
        return None

    def __getitem__(self, cid: str) -> int:
        s = self.get(cid)
        if s is None:
            raise KeyError(cid)
        return s

    def __contains__(self, cid: object) -> bool:
        return self.get(cid) is not None

    def __setitem__(self, cid: str, slot: int) -> None:
        if self.get(cid) is None:
            self._len += 1
        self._new[cid] = slot

    def __delitem__(self, cid: str) -> None:
        """Forget ``cid`` (the caller frees its slot)."""
        if self._new.pop(cid, None) is None:
            s = self._base_slot(cid) if type(cid) is str else None
            if s is None:
                raise KeyError(cid)
            self._gone.add(s)
        self._len -= 1

    def pop(self, cid, default=_MISSING):  # type: ignore[override]
        """The slot of ``cid``, forgotten (see :meth:`__delitem__`); ``default`` if absent."""
        s = self.get(cid)
        if s is None:
            if default is _MISSING:
                raise KeyError(cid)
            return default
        del self[cid]
        return s

    def __len__(self) -> int:
        return self._len

    def __iter__(self) -> Iterator[str]:
        for cid in self._ids:
            if cid is not None:
                yield cid


class ChunkStore:
    """All chunks of one export root, by slot (see the module docstring).

    Not thread-safe on its own: the engine's lock serialises writers and readers.
    """

    def __init__(self, *, spill_dir: Path | None = None) -> None:
        """An empty store. ``spill_dir``: the append area is an unnamed temporary file in
        that folder instead of a ``bytearray`` (a first index of ``bench --scale 20`` appends
        ~650 MB of blobs: in the page cache then, not in the heap); read back with
        ``os.pread``. Gone with the store or the process (it has no name)."""
        # lists while building; the lazy IdColumn / SlotMap after a load (or a rebase)
        self.ids: list[str | None] | IdColumn = []
        self.slot_of: dict[str, int] | SlotMap = {}
        self.tables: dict[str, Interner] = {t: Interner() for t in _TABLES}
        self._cap = 0
        self._rows = np.zeros(0, dtype=ROW)
        self._free: list[int] = []
        self._base: _ArenaFile | bytes = b""  # the loaded generation's arena
        self._base_len = 0
        self._tail = bytearray()  # blobs added since the load, at offsets >= _base_len
        self._spill = None
        self._spill_dir = spill_dir  # the file is made by the first add (no index dir before)
        self._tail_len = 0
        self._dead_bytes = 0
        # zstd dictionary of the blobs (None: not trained yet, b"": never, the corpus is too small)
        self._zdict: bytes | None = None
        self._zc = self._zd = None  # its compressor / decompressor, made on first use
        self._samples: list[bytes] = []  # blob bodies for the training
        self.version = 0  # bumped by every add/remove (caches keyed on it)

    # ------------------------------------------------------------------ size and ids
    def __len__(self) -> int:
        return len(self.slot_of)

    def __contains__(self, cid: object) -> bool:
        return cid in self.slot_of

    @property
    def capacity(self) -> int:
        """Rows in use or free (``max slot + 1``): the length of every mask."""
        return len(self.ids)

    def live_slots(self) -> np.ndarray:
        """Slots of the live chunks, ascending (int64)."""
        return np.flatnonzero(self._col("flags") & _FLAG_LIVE)

    def col(self, name: str) -> np.ndarray:
        """A read-only view of column ``name`` over ``0..capacity-1`` (see :data:`COLUMNS`)."""
        v = self._col(name).view()
        v.flags.writeable = False
        return v

    def _col(self, name: str) -> np.ndarray:
        return self._rows[name][: len(self.ids)]

    def _grow(self, need: int) -> None:
        if need <= self._cap:
            return
        cap = max(1024, need, self._cap * 2)
        new = np.zeros(cap, dtype=ROW)
        new[: len(self._rows)] = self._rows
        self._rows = new
        self._cap = cap

    # ------------------------------------------------------------------ writes
    def add(self, c: Chunk) -> int:
        """Store ``c`` (replacing the chunk of the same id, which keeps its slot); returns
        its slot."""
        slot = self.slot_of.get(c.id)
        if slot is None:
            if self._free:
                slot = self._free.pop()
                self.ids[slot] = c.id
            else:
                slot = len(self.ids)
                self._grow(slot + 1)
                self.ids.append(c.id)
            self.slot_of[c.id] = slot
        else:
            self._dead_bytes += int(self._rows["blob_len"][slot])
        head, raw = encode_parts(c)
        body, zflag = self._compress(raw)
        t = self.tables
        cyr, lat = _letters(c.name)
        nr = c.name_range
        row = dict(
            flags=_FLAG_LIVE
            | (_FLAG_EXPORT if c.export else 0)
            | (_FLAG_ASYNC if c.is_async else 0)
            | (_FLAG_CODE if c.kind in CODE_KINDS else 0)
            | zflag,
            kind=t["kind"].index(c.kind),
            module_kind=t["module_kind"].index(c.module_kind),
            object_type=t["object_type"].index(c.object_type),
            owner=t["owner"].index(c.owner),
            path=t["path"].index(c.path),
            region=t["region"].index(tuple(c.region)),
            part=c.part,
            start_line=c.start_line,
            end_line=c.end_line,
            name_cyr=min(cyr, 65535),
            name_lat=min(lat, 65535),
            blob_len=len(head) + len(body),
            head_len=len(head),
            blob_off=self._base_len + self._tail_len,
            nr0=nr[0],
            nr1=nr[1],
            nr2=nr[2],
            nr3=nr[3],
        )
        self._rows[slot] = tuple(row[name] for name in ROW.names)
        if self._spill is None and self._spill_dir is not None:
            import tempfile

            self._spill_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
            self._spill = tempfile.TemporaryFile(dir=self._spill_dir, prefix="staging-arena-")
        if self._spill is not None:
            self._spill.write(head)
            self._spill.write(body)
        else:
            self._tail += head
            self._tail += body
        self._tail_len += len(head) + len(body)
        self.version += 1
        return slot

    def _compress(self, raw: bytes) -> tuple[bytes, int]:
        """A blob body as stored, and its flag (0: raw, :data:`_FLAG_LZ4`, :data:`_FLAG_ZSTD`).

        zstd with a dictionary trained on the store's first :data:`ZDICT_SAMPLES` bodies
        (LZ4 until then; a store that never gets that many keeps LZ4). Measured on ssl31-ru,
        the dictionary trained on 2,000 chunks of one half of the objects and applied to the
        other half: LZ4 14.1 MB, zstd level 3 without a dictionary 10.6 MB, with it 6.5 MB;
        ~30 us a blob to write against LZ4's ~10 (a loaded 2-core machine), ~18 us to read
        against ~6. The dictionary is saved with the store (``zdict.bin``) and serves every
        later blob of it."""
        if len(raw) < COMPRESS_MIN:
            return raw, 0
        if self._zdict is None:
            self._samples.append(raw)
            if len(self._samples) >= ZDICT_SAMPLES:
                self._train()
        if self._zdict:
            if self._zc is None:
                import zstandard

                self._zc = zstandard.ZstdCompressor(
                    level=ZSTD_LEVEL, dict_data=zstandard.ZstdCompressionDict(self._zdict)
                )
            z = self._zc.compress(raw)
            if len(z) < len(raw):
                return z, _FLAG_ZSTD
            return raw, 0
        z = lz4.block.compress(raw, store_size=True)
        if len(z) < len(raw):
            return z, _FLAG_LZ4
        return raw, 0

    def _train(self) -> None:
        import zstandard

        try:
            self._zdict = zstandard.train_dictionary(ZDICT_BYTES, self._samples).as_bytes()
        except zstandard.ZstdError:  # too little or too uniform data: LZ4 for good
            self._zdict = b""
        self._samples = []

    def _decompress(self, body: bytes) -> bytes:
        if self._zd is None:
            import zstandard

            self._zd = zstandard.ZstdDecompressor(dict_data=zstandard.ZstdCompressionDict(self._zdict or b""))
        return self._zd.decompress(body)

    def set_position(self, slot: int, start_line: int, end_line: int, name_range: tuple[int, int, int, int]) -> None:
        """Move a chunk (an edit above it shifted its lines): only the location columns change."""
        r = self._rows
        r["start_line"][slot], r["end_line"][slot] = start_line, end_line
        r["nr0"][slot], r["nr1"][slot], r["nr2"][slot], r["nr3"][slot] = name_range
        self.version += 1

    def remove(self, cid: str) -> int | None:
        """Drop the chunk ``cid``; returns its (now free) slot, None if it was not stored."""
        slot = self.slot_of.pop(cid, None)
        if slot is None:
            return None
        self.ids[slot] = None
        self._rows["flags"][slot] = 0
        self._dead_bytes += int(self._rows["blob_len"][slot])
        self._free.append(slot)
        self.version += 1
        return slot

    # ------------------------------------------------------------------ reads
    def _bytes(self, off: int, n: int) -> bytes:
        if off >= self._base_len:
            off -= self._base_len
            if self._spill is not None:
                self._spill.flush()
                return os.pread(self._spill.fileno(), n, off)
            return bytes(self._tail[off : off + n])
        base = self._base
        return base.read(off, n) if type(base) is _ArenaFile else base[off : off + n]

    def _parts(self, row: tuple) -> tuple[_Head, _Var]:
        raw = self._bytes(row[_F["blob_off"]], row[_F["blob_len"]])
        h = row[_F["head_len"]]
        body = raw[h:]
        fl = row[_F["flags"]]
        if fl & _FLAG_ZSTD:
            body = self._decompress(body)
        elif fl & _FLAG_LZ4:
            body = lz4.block.decompress(body)
        return _dec_head.decode(raw[:h]), _dec.decode(body)

    def head(self, slot: int) -> tuple[str, str | None]:
        """(name, symbol) of the chunk at ``slot``: the uncompressed start of its blob."""
        row = self._rows[slot].item()
        v = _dec_head.decode(self._bytes(row[_F["blob_off"]], row[_F["head_len"]]))
        return v.name, v.sym()

    def hit_key(self, slot: int) -> tuple[str, str | None]:
        """What makes two chunks one search hit: (path, symbol) for metadata, (path, method
        name) for the parts of a method or its ``#Если`` twins, (path, "<module>") for module
        code, (path, "#" + the heading chain) for the parts of one docs section (same-named
        sections under other headings stay apart). No blob is inflated."""
        row = self._rows[slot].item()
        path = self.tables["path"].values[row[_F["path"]]]
        kind = self.tables["kind"].values[row[_F["kind"]]]
        if row[_F["flags"]] & _FLAG_CODE and kind == "module":
            return path, "<module>"
        if kind in DOCS_KINDS:
            return path, "#" + "\x00".join(self.tables["region"].values[row[_F["region"]]])
        v = _dec_head.decode(self._bytes(row[_F["blob_off"]], row[_F["head_len"]]))
        return path, (v.name if row[_F["flags"]] & _FLAG_CODE else v.sym())

    def get(self, slot: int) -> Chunk:
        """The chunk at ``slot`` as a :class:`Chunk` (a new struct each call; ``KeyError``
        for a free slot)."""
        cid = self.ids[slot] if 0 <= slot < len(self.ids) else None
        if cid is None:
            raise KeyError(slot)
        row = self._rows[slot].item()
        hd, v = self._parts(row)
        t = self.tables
        doc = v.doc if v.doc_span is None else v.text[v.doc_span[0] : v.doc_span[1]]
        flags = row[_F["flags"]]
        return Chunk(
            id=cid,
            path=t["path"].values[row[_F["path"]]],
            kind=t["kind"].values[row[_F["kind"]]],
            name=hd.name,
            owner=t["owner"].values[row[_F["owner"]]],
            object_type=t["object_type"].values[row[_F["object_type"]]],
            module_kind=t["module_kind"].values[row[_F["module_kind"]]],
            symbol=hd.sym(),
            export=bool(flags & _FLAG_EXPORT),
            is_async=bool(flags & _FLAG_ASYNC),
            params=v.params,
            directives=v.directives,
            annotations=v.annotations,
            region=list(t["region"].values[row[_F["region"]]]),
            doc=doc,
            signature=v.signature,
            part=row[_F["part"]],
            synonym=v.synonym,
            comment=v.comment,
            types=v.types,
            properties=v.properties,
            start_line=row[_F["start_line"]],
            end_line=row[_F["end_line"]],
            name_range=(row[_F["nr0"]], row[_F["nr1"]], row[_F["nr2"]], row[_F["nr3"]]),
            text=v.text,
        )

    def get_by_id(self, cid: str) -> Chunk | None:
        """The chunk with id ``cid``, or None."""
        slot = self.slot_of.get(cid)
        return None if slot is None else self.get(slot)

    def kind_of(self, slot: int) -> str:
        """The chunk kind at ``slot`` (no blob read)."""
        return self.tables["kind"].values[self._rows["kind"][slot]]

    def part_export(self, slot: int) -> tuple[int, bool]:
        """(``part``, ``export``) of the chunk at ``slot`` (no blob read)."""
        return int(self._rows["part"][slot]), bool(self._rows["flags"][slot] & _FLAG_EXPORT)

    def path_of(self, slot: int) -> str:
        """The path of the chunk at ``slot`` (no blob read)."""
        return self.tables["path"].values[self._rows["path"][slot]]

    # ------------------------------------------------------------------ masks
    def _in_table(self, table: str, values: Iterable[str]) -> np.ndarray:
        """Bool per table row: the row's value is one of ``values``."""
        ok = np.zeros(len(self.tables[table]) + 1, dtype=bool)
        for v in values:
            i = self.tables[table].find(v)
            if i >= 0:
                ok[i] = True
        return ok

    def mask(
        self,
        *,
        scope: str = "all",
        object_types: Iterable[str] | None = None,
        module_kind: str | None = None,
        path_prefix: str | None = None,
        export_only: bool = False,
    ) -> np.ndarray:
        """A bool array of length :attr:`capacity`, True for live chunks that pass: ``scope``
        (``all`` / ``code`` / ``metadata`` / ``docs``: documentation sections), ``object_types`` (Russian singular types, any
        of), ``module_kind``, ``path_prefix`` (``str.startswith`` on the relative path) and
        ``export_only`` (exported methods and every metadata chunk). Vectorised over the
        columns: ~1 ms per million slots per criterion."""
        flags = self._col("flags")
        m = (flags & _FLAG_LIVE) != 0
        code = (flags & _FLAG_CODE) != 0
        if scope == "code":
            m &= code
        elif scope == "metadata":
            m &= ~code & ~self._in_table("kind", DOCS_KINDS)[self._col("kind")]
        elif scope == "docs":
            m &= self._in_table("kind", DOCS_KINDS)[self._col("kind")]
        if object_types is not None:
            m &= self._in_table("object_type", object_types)[self._col("object_type")]
        if module_kind:
            m &= self._in_table("module_kind", (module_kind,))[self._col("module_kind")]
        if path_prefix:
            paths = self.tables["path"].values
            ok = np.fromiter((p.startswith(path_prefix) for p in paths), dtype=bool, count=len(paths))
            m &= ok[self._col("path")]
        if export_only:
            m &= ((flags & _FLAG_EXPORT) != 0) | ~code
        return m

    def object_type_mask(self, object_types: Iterable[str]) -> np.ndarray:
        """A bool array of length :attr:`capacity`: True where the slot's object type is one
        of ``object_types`` (live or not; :meth:`mask` combines it with the other criteria).
        One gather over the slots."""
        return self._in_table("object_type", object_types)[self._col("object_type")]

    def slots_where(self, *, kind: str | None = None, object_type: str | None = None) -> np.ndarray:
        """Live slots (ascending) of chunks of ``kind`` and ``object_type`` (None: any)."""
        m = (self._col("flags") & _FLAG_LIVE) != 0
        if kind is not None:
            m &= self._col("kind") == self.tables["kind"].find(kind)
        if object_type is not None:
            m &= self._col("object_type") == self.tables["object_type"].find(object_type)
        return np.flatnonzero(m)

    def name_letters(self) -> tuple[int, int]:
        """(Cyrillic, Latin) letters in the names of the live chunks (docs sections left
        out: pages are bilingual, the cross-script rule is about the code's script)."""
        live = ((self._col("flags") & _FLAG_LIVE) != 0) & ~self._in_table("kind", DOCS_KINDS)[self._col("kind")]
        return int(self._col("name_cyr")[live].sum()), int(self._col("name_lat")[live].sum())

    # ------------------------------------------------------------------ persistence
    def save(self, d: Path) -> None:
        """Write the store into the (new, empty or missing) folder ``d``: column files
        (with the id columns, :meth:`_save_ids`), ``tables.msgpack``, ``arena.bin`` with the live blobs only (streamed
        to the file, never one bytes object) and ``store.json``. Each file is fsynced; the
        caller makes the folder visible atomically (rename) and fsyncs the parent."""
        d.mkdir(parents=True, exist_ok=True, mode=0o700)
        n = len(self.ids)
        offs = np.zeros(n, dtype=np.int64)
        lens = self._col("blob_len").copy()
        live = (self._col("flags") & _FLAG_LIVE) != 0
        pos = 0
        with open(d / "arena.bin", "wb") as fh:
            for slot in np.flatnonzero(live).tolist():
                off = int(self._rows["blob_off"][slot])
                ln = int(lens[slot])
                if off >= self._base_len and self._spill is not None:
                    fh.write(self._bytes(off, ln))
                elif off >= self._base_len:
                    o = off - self._base_len
                    fh.write(memoryview(self._tail)[o : o + ln])
                else:
                    fh.write(self._bytes(off, ln))
                offs[slot] = pos
                pos += ln
            lens[~live] = 0
            fh.flush()
            os.fsync(fh.fileno())
        flags = self._col("flags").copy()
        self._save_ids(d, flags)
        for name in COLUMNS:
            col = (
                offs
                if name == "blob_off"
                else lens
                if name == "blob_len"
                else flags
                if name == "flags"
                else self._col(name)
            )
            save_npy_synced(d / f"{name}.npy", col)
        rows = self._rows[:n]
        save_npy_synced(
            d / "name_range.npy",
            np.stack([rows[f"nr{i}"] for i in range(4)], axis=1) if n else np.zeros((0, 4), np.int32),
        )
        tables = {k: [list(v) if k == "region" else v for v in t.values] for k, t in self.tables.items()}
        _write_synced(d / "tables.msgpack", _enc.encode(tables))
        zdict = self._zdict or b""
        _write_synced(d / "zdict.bin", zdict)
        meta = {
            "version": STORE_VERSION,
            "slots": n,
            "live": len(self.slot_of),
            "arena_bytes": pos,
            "zdict_bytes": len(zdict),
            "zdict": "never" if self._zdict == b"" else "trained" if self._zdict else "untrained",
        }
        _write_synced(d / "store.json", json.dumps(meta).encode())

    def _save_ids(self, d: Path, flags: np.ndarray) -> None:
        """Write the id columns (see :class:`IdColumn`, :class:`SlotMap`): ``ids_blob.npy``,
        ``ids_off.npy`` (``<i8[slots + 1]``), ``id_hash.npy`` / ``id_hash_slot.npy``
        (``<u4[live]``, by hash); sets :data:`_FLAG_PATH_ID` in ``flags`` (the column to
        save) for ids that start with their path and ``::``."""
        n = len(self.ids)
        paths = self.tables["path"].values
        path_col = self._col("path").tolist()
        off = np.zeros(n + 1, dtype="<i8")
        hashes: list[int] = []
        slots: list[int] = []
        buf = bytearray()
        ids = self.ids
        for slot in range(n):
            cid = ids[slot]
            if cid is not None:
                p = paths[path_col[slot]]
                if cid.startswith(p) and cid.startswith("::", len(p)):
                    tail = cid[len(p) + 2 :]
                    flags[slot] |= _FLAG_PATH_ID
                else:
                    tail = cid
                buf += tail.encode("utf-8", "surrogatepass")
                hashes.append(_id_hash(cid))
                slots.append(slot)
            off[slot + 1] = len(buf)
        h = np.array(hashes, dtype="<u4")
        order = np.argsort(h, kind="stable")
        save_npy_synced(d / "ids_blob.npy", np.frombuffer(bytes(buf), dtype=np.uint8))
        save_npy_synced(d / "ids_off.npy", off)
        save_npy_synced(d / "id_hash.npy", h[order])
        save_npy_synced(d / "id_hash_slot.npy", np.array(slots, dtype="<u4")[order])

    @classmethod
    def load(cls, d: Path, *, mmap_arena: bool = True) -> "ChunkStore":
        """Load a folder written by :meth:`save`; the arena is read on demand from its file
        (:class:`_ArenaFile`, the OS page cache) unless ``mmap_arena`` is False (then it is
        read into memory). :class:`ChunkStoreError` when a
        file is missing, damaged, of another version or inconsistent with ``store.json``."""
        try:
            meta = json.loads((d / "store.json").read_bytes())
            if meta.get("version") != STORE_VERSION:
                raise ChunkStoreError(f"chunk store version {meta.get('version')!r}, expected {STORE_VERSION}")
            n, arena_bytes = int(meta["slots"]), int(meta["arena_bytes"])
            blob = np.load(d / "ids_blob.npy", mmap_mode="r", allow_pickle=False)
            id_off = np.load(d / "ids_off.npy", allow_pickle=False)
            id_hash = np.load(d / "id_hash.npy", allow_pickle=False)
            id_hslot = np.load(d / "id_hash_slot.npy", allow_pickle=False)
            tables = msgspec.msgpack.decode((d / "tables.msgpack").read_bytes(), type=dict[str, list[Any]])
            cols = {}
            for name, dt in COLUMNS.items():
                a = np.load(d / f"{name}.npy", allow_pickle=False)
                if a.dtype != np.dtype(dt) or a.shape != (n,):
                    raise ChunkStoreError(f"{name}.npy: {a.dtype} {a.shape}, expected {np.dtype(dt)} ({n},)")
                cols[name] = a
            nr = np.load(d / "name_range.npy", allow_pickle=False)
            if nr.dtype != np.int32 or nr.shape != (n, 4):
                raise ChunkStoreError(f"name_range.npy: {nr.dtype} {nr.shape}, expected int32 ({n}, 4)")
            size = (d / "arena.bin").stat().st_size
            zdict = (d / "zdict.bin").read_bytes()
            if len(zdict) != int(meta["zdict_bytes"]) or meta.get("zdict") not in ("never", "trained", "untrained"):
                raise ChunkStoreError(
                    f"zdict.bin: {len(zdict)} bytes, store.json says {meta['zdict_bytes']} ({meta.get('zdict')!r})"
                )
        except ChunkStoreError:
            raise
        except (OSError, ValueError, KeyError, TypeError, msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise ChunkStoreError(f"chunk store in {d} unusable: {exc}") from exc
        if size != arena_bytes or set(tables) != set(_TABLES):
            raise ChunkStoreError(f"chunk store in {d} is inconsistent (arena {size}/{arena_bytes})")
        live = (cols["flags"] & _FLAG_LIVE) != 0
        n_live = int(live.sum())
        if n_live != int(meta["live"]):
            raise ChunkStoreError(f"chunk store in {d}: {n_live} live flags, store.json says {meta['live']}")
        path_id = (cols["flags"] & _FLAG_PATH_ID) != 0
        lens_ = np.diff(id_off) if id_off.shape == (n + 1,) else None
        if (
            blob.dtype != np.uint8
            or blob.ndim != 1
            or id_off.dtype != np.dtype("<i8")
            or lens_ is None
            or int(id_off[0]) != 0
            or int(id_off[-1]) != blob.size
            or (lens_.size and int(lens_.min()) < 0)
            or bool((lens_[~live] != 0).any())
            or bool((path_id & ~live).any())
            or bool((live & ~path_id & (lens_ == 0)).any())
        ):
            raise ChunkStoreError(
                f"chunk store in {d}: the id columns (ids_blob, ids_off) disagree with the live flags"
            )
        if (
            id_hash.dtype != np.dtype("<u4")
            or id_hash.shape != (n_live,)
            or id_hslot.dtype != np.dtype("<u4")
            or id_hslot.shape != (n_live,)
            or (
                n_live
                and (
                    bool((np.diff(id_hash.astype(np.int64)) < 0).any())
                    or int(id_hslot.max()) >= n
                    or not np.array_equal(np.bincount(id_hslot, minlength=n).astype(bool), live)
                )
            )
        ):
            raise ChunkStoreError(f"chunk store in {d}: the id hash columns are not a sorted index of the live slots")
        ends = cols["blob_off"][live] + cols["blob_len"][live]
        if ends.size and int(ends.max()) > arena_bytes:
            raise ChunkStoreError(f"chunk store in {d}: a blob lies beyond the arena")
        for t, col in (
            ("kind", "kind"),
            ("module_kind", "module_kind"),
            ("object_type", "object_type"),
            ("owner", "owner"),
            ("path", "path"),
            ("region", "region"),
        ):
            if live.any() and int(cols[col][live].max()) >= len(tables[t]):
                raise ChunkStoreError(f"chunk store in {d}: column {col} points outside its table")
        s = cls()
        # a store saved before its dictionary was trained keeps LZ4 (no samples at hand)
        s._zdict = zdict if meta["zdict"] == "trained" else b""
        if int((cols["flags"] & _FLAG_ZSTD).astype(bool).sum()) and not s._zdict:
            raise ChunkStoreError(f"chunk store in {d}: zstd blobs without a dictionary")
        s.tables = {
            k: Interner(tuple(v) for v in vals) if k == "region" else Interner(vals) for k, vals in tables.items()
        }
        pfx = np.where(path_id, cols["path"], -1).astype("<i4")
        pfx[~live] = -2
        ids = IdColumn(bytes(blob), array("q", id_off.tobytes()), array("i", pfx.tobytes()), s.tables["path"].values, n)
        s.ids = ids
        s.slot_of = SlotMap(array("I", id_hash.tobytes()), array("I", id_hslot.tobytes()), ids, n_live)
        s._free = np.flatnonzero(~live)[::-1].tolist()
        rows = np.zeros(n, dtype=ROW)
        for name, a in cols.items():
            rows[name] = a
        rows["flags"] &= np.uint8(0xFF & ~_FLAG_PATH_ID)
        for i in range(4):
            rows[f"nr{i}"] = nr[:, i]
        s._rows = rows
        s._cap = n
        if arena_bytes:
            if mmap_arena:
                s._base = _ArenaFile(d / "arena.bin")
            else:
                s._base = (d / "arena.bin").read_bytes()
        s._base_len = arena_bytes
        return s

    def rebase(self, d: Path) -> None:
        """After :meth:`save` into ``d``: serve the blobs from ``d``'s memory-mapped arena
        and drop the append area (a first index's blobs leave the heap). The columns are
        rewritten to the saved offsets; the store must not have changed since the save."""
        fresh = ChunkStore.load(d)
        self._base, self._base_len = fresh._base, fresh._base_len  # the old file closes with its last user
        # the ids as the saved columns (a first index's ~770k id strings and their dict leave the heap)
        fresh.ids._paths = self.tables["path"].values
        self.ids, self.slot_of = fresh.ids, fresh.slot_of
        n = len(self.ids)
        self._rows["blob_off"][:n] = fresh._rows["blob_off"]
        self._rows["blob_len"][:n] = fresh._rows["blob_len"]
        self._tail = bytearray()
        self._tail_len = 0
        if self._spill is not None:
            self._spill.close()
            self._spill = None
        self._spill_dir = None
        self._dead_bytes = 0

    def nbytes(self) -> dict[str, int]:
        """Bytes held: ``columns`` (numpy), ``tail`` (append area in the heap), ``arena``
        (the loaded generation's file, read on demand: page cache), ``spilled`` (append area in a temporary file), ``dead`` (blobs of
        replaced or removed chunks)."""
        return {
            "columns": self._rows.nbytes,
            "tail": len(self._tail),
            "spilled": self._tail_len if self._spill is not None else 0,
            "arena": self._base_len,
            "dead": self._dead_bytes,
        }


class _ArenaFile:
    """The blob arena of a loaded generation (``arena.bin``), read by positional reads
    (``os.pread``) instead of a memory map: see the module docstring. The file stays open
    while the store uses it (a newer generation's save deletes the folder: an open file
    stays readable); ``posix_fadvise(RANDOM)`` turns off the kernel's readahead for it."""

    __slots__ = ("fd", "__weakref__")

    def __init__(self, path: Path) -> None:
        self.fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0))
        if hasattr(os, "posix_fadvise"):
            try:
                os.posix_fadvise(self.fd, 0, 0, os.POSIX_FADV_RANDOM)
            except OSError:
                pass

    def read(self, off: int, n: int) -> bytes:
        """``n`` bytes at ``off``; ``ChunkStoreError`` if the file is shorter (damaged since
        the load)."""
        if os.name == "nt":  # no pread on Windows
            os.lseek(self.fd, off, os.SEEK_SET)
            data = os.read(self.fd, n)
        else:
            data = os.pread(self.fd, n, off)
        if len(data) != n:
            raise ChunkStoreError(f"arena.bin: {len(data)} of {n} bytes at {off} (the file shrank)")
        return data

    def close(self) -> None:
        """Close the file (idempotent)."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __del__(self) -> None:
        try:
            self.close()
        except OSError:
            pass


class ChunksView(Mapping):
    """``engine.chunks``: a read-only ``Mapping[str, Chunk]`` over a :class:`ChunkStore`, in
    slot order. Each lookup materialises the chunk (:meth:`ChunkStore.get`)."""

    def __init__(self, store_of) -> None:
        self._store_of = store_of  # a callable: the engine swaps its store on a rebuild

    def __getitem__(self, cid: str) -> Chunk:
        c = self._store_of().get_by_id(cid)
        if c is None:
            raise KeyError(cid)
        return c

    def get(self, cid: str, default: Any = None) -> Any:
        """The chunk ``cid`` or ``default``."""
        c = self._store_of().get_by_id(cid)
        return default if c is None else c

    def __contains__(self, cid: object) -> bool:
        return cid in self._store_of().slot_of

    def __iter__(self) -> Iterator[str]:
        s = self._store_of()
        ids = s.ids
        return iter([ids[i] for i in s.live_slots().tolist()])

    def __len__(self) -> int:
        return len(self._store_of())


def _write_synced(path: Path, data: bytes) -> None:
    with open(path, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
