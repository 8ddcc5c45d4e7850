"""The chunk store: one integer slot per chunk, chunk metadata as numpy columns, the rest of
each chunk as one compressed blob in an arena that is not in the Python heap.

* **slots**: a chunk gets a non-negative int (:meth:`ChunkStore.add`); a removed chunk's
  slot goes to a free list and is reused by a later chunk. ``ids[slot]`` is the one copy of
  the chunk id string, ``slot_of[id]`` the way back. Every channel (BM25, names, dense
  keys' chunks) is keyed by slot.
* **columns** (numpy, one row per slot, :data:`ROW`): kind, object type, module kind, owner,
  path and region as indices into interned tables (:class:`daemon.index.chunk_columns.Interner`),
  export/async flags, part, start/end line, the name range (4 x int32), the chunk's blob
  offset/length, and the Cyrillic/Latin letter counts of its name (the corpus script share,
  summed vectorised). Filters are vectorised masks over them (:meth:`ChunkStore.mask`).
* **blobs**: the chunk's variable fields, encoded and compressed by
  :mod:`daemon.index.chunk_blobs`, in an arena: ``arena.bin`` of the loaded snapshot
  generation, read blob by blob with ``os.pread`` (the pages stay in the OS page cache,
  outside the process) plus an append area (a ``bytearray``, or a spill file) for chunks
  added since. :meth:`ChunkStore.get` materialises a :class:`Chunk` on demand.

Persistence (:meth:`ChunkStore.save` / :meth:`ChunkStore.load`): a folder of ``.npy`` column
files (the ids among them: :mod:`daemon.index.chunk_columns`), ``tables.msgpack``,
``zdict.bin`` (the zstd dictionary, possibly empty), ``arena.bin`` (live blobs only, streamed
to the file blob by blob) and ``store.json`` (counts and sizes, checked on load). Damage
raises :class:`ChunkStoreError`. Why this layout, and what it costs: ``docs/internals.md``,
"Chunk store".
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from ..contract import CODE_KINDS, DOCS_KINDS, Chunk
from .chunk_blobs import (
    FLAG_ZSTD,
    ArenaFile,
    BlobCodec,
    ChunkStoreError,
    Head,
    Var,
    decode_head,
    encode,
    encode_parts,
)
from .chunk_columns import (
    IdColumn,
    Interner,
    SlotMap,
    check_id_columns,
    id_lookups,
    read_id_columns,
    write_id_columns,
)
from .storage import save_npy_synced

__all__ = ["COLUMNS", "ROW", "STORE_VERSION", "ChunkStore", "ChunkStoreError", "ChunksView"]

#: Bump when the folder layout or the blob encoding changes (2: blobs start with an
#: uncompressed head; 3: ids as columns, zstd, symbol True = name).
STORE_VERSION = 3

# the flags column (the blob's compression flags are chunk_blobs.FLAG_LZ4 = 16, FLAG_ZSTD = 64)
_FLAG_EXPORT = 1
_FLAG_ASYNC = 2
_FLAG_LIVE = 4
_FLAG_CODE = 8
_FLAG_PATH_ID = 32  # on disk only: the chunk id is path + "::" + its entry in ids_blob.npy

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
#: scalars.
ROW = np.dtype([(name, dt) for name, dt in COLUMNS.items()] + [(f"nr{i}", np.int32) for i in range(4)])
_F = {name: i for i, name in enumerate(ROW.names)}
_TABLES = ("kind", "module_kind", "object_type", "owner", "path", "region")

_CYR = re.compile(r"[а-яёА-ЯЁ]")
_LAT = re.compile(r"[a-zA-Z]")


def _letters(text: str) -> tuple[int, int]:
    """(Cyrillic letters, Latin letters) in ``text`` (the engine's corpus script share)."""
    return len(_CYR.findall(text)), len(_LAT.findall(text))


class ChunkStore:
    """All chunks of one export root, by slot (see the module docstring).

    Not thread-safe on its own: the engine's lock serialises writers and readers.
    """

    def __init__(self, *, spill_dir: Path | None = None) -> None:
        """An empty store. ``spill_dir``: the append area is an unnamed temporary file in
        that folder instead of a ``bytearray`` (a first index of an ERP-sized tree appends
        hundreds of MB of blobs: in the page cache then, not in the heap); read back with
        ``os.pread``. Gone with the store or the process (it has no name)."""
        # lists while building; the lazy IdColumn / SlotMap after a load (or a rebase)
        self.ids: list[str | None] | IdColumn = []
        self.slot_of: dict[str, int] | SlotMap = {}
        self.tables: dict[str, Interner] = {t: Interner() for t in _TABLES}
        self._cap = 0
        self._rows = np.zeros(0, dtype=ROW)
        self._free: list[int] = []
        self._base: ArenaFile | bytes = b""  # the loaded generation's arena
        self._base_len = 0
        self._tail = bytearray()  # blobs added since the load, at offsets >= _base_len
        self._spill = None
        self._spill_dir = spill_dir  # the file is made by the first add (no index dir before)
        self._tail_len = 0
        self._dead_bytes = 0
        self._codec = BlobCodec()  # compression of the blobs, with its zstd dictionary
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
        body, zflag = self._codec.compress(raw)
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
        return base.read(off, n) if type(base) is ArenaFile else base[off : off + n]

    def _parts(self, row: tuple) -> tuple[Head, Var]:
        raw = self._bytes(row[_F["blob_off"]], row[_F["blob_len"]])
        return self._codec.decode(raw, row[_F["head_len"]], row[_F["flags"]])

    def head(self, slot: int) -> tuple[str, str | None]:
        """(name, symbol) of the chunk at ``slot``: the uncompressed start of its blob."""
        row = self._rows[slot].item()
        v = decode_head(self._bytes(row[_F["blob_off"]], row[_F["head_len"]]))
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
        v = decode_head(self._bytes(row[_F["blob_off"]], row[_F["head_len"]]))
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
        (``all`` / ``code`` / ``metadata`` / ``docs``: documentation sections),
        ``object_types`` (Russian singular types, any of), ``module_kind``, ``path_prefix``
        (``str.startswith`` on the relative path) and ``export_only`` (exported methods and
        every metadata chunk). Vectorised over the columns (one pass per criterion)."""
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
        """Write the store into the (new, empty or missing) folder ``d``: ``arena.bin`` with
        the live blobs only (streamed to the file, never one bytes object), the column files
        (with the id columns, :func:`daemon.index.chunk_columns.write_id_columns`),
        ``tables.msgpack``, ``zdict.bin`` and ``store.json``. Each file is fsynced; the caller
        makes the folder visible atomically (rename) and fsyncs the parent."""
        d.mkdir(parents=True, exist_ok=True, mode=0o700)
        n = len(self.ids)
        live = (self._col("flags") & _FLAG_LIVE) != 0
        offs, lens, arena_bytes = self._write_arena(d / "arena.bin", live)
        flags = self._col("flags").copy()
        path_id = write_id_columns(d, self.ids, self.tables["path"].values, self._col("path").tolist())
        flags[path_id] |= _FLAG_PATH_ID
        for name in COLUMNS:
            saved = {"blob_off": offs, "blob_len": lens, "flags": flags}
            save_npy_synced(d / f"{name}.npy", saved[name] if name in saved else self._col(name))
        rows = self._rows[:n]
        save_npy_synced(
            d / "name_range.npy",
            np.stack([rows[f"nr{i}"] for i in range(4)], axis=1) if n else np.zeros((0, 4), np.int32),
        )
        tables = {k: [list(v) if k == "region" else v for v in t.values] for k, t in self.tables.items()}
        _write_synced(d / "tables.msgpack", encode(tables))
        zdict = self._codec.zdict or b""
        _write_synced(d / "zdict.bin", zdict)
        meta = {
            "version": STORE_VERSION,
            "slots": n,
            "live": len(self.slot_of),
            "arena_bytes": arena_bytes,
            "zdict_bytes": len(zdict),
            "zdict": self._codec.state,
        }
        _write_synced(d / "store.json", json.dumps(meta).encode())

    def _write_arena(self, path: Path, live: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
        """Write the blobs of the ``live`` slots to ``path`` in slot order, fsynced; returns
        their new offsets and lengths by slot (0 for a free slot) and the file's size."""
        offs = np.zeros(len(self.ids), dtype=np.int64)
        lens = self._col("blob_len").copy()
        pos = 0
        with open(path, "wb") as fh:
            for slot in np.flatnonzero(live).tolist():
                off = int(self._rows["blob_off"][slot])
                ln = int(lens[slot])
                if off >= self._base_len and self._spill is None:  # the append area: no copy
                    o = off - self._base_len
                    fh.write(memoryview(self._tail)[o : o + ln])
                else:
                    fh.write(self._bytes(off, ln))
                offs[slot] = pos
                pos += ln
            lens[~live] = 0
            fh.flush()
            os.fsync(fh.fileno())
        return offs, lens, pos

    @classmethod
    def load(cls, d: Path, *, arena_file: bool = True) -> ChunkStore:
        """Load a folder written by :meth:`save`; the arena is read on demand from its file
        (:class:`daemon.index.chunk_blobs.ArenaFile`, the OS page cache) unless
        ``arena_file`` is False (then it is read into memory). :class:`ChunkStoreError` when a
        file is missing, damaged, of another version or inconsistent with ``store.json``."""
        meta, cols, nr, tables, zdict, id_cols = _read_folder(d)
        n, arena_bytes = int(meta["slots"]), int(meta["arena_bytes"])
        live = (cols["flags"] & _FLAG_LIVE) != 0
        path_id = (cols["flags"] & _FLAG_PATH_ID) != 0
        _check_folder(d, meta, cols, tables, live)
        check_id_columns(d, id_cols, live, path_id)
        s = cls()
        # a store saved before its dictionary was trained keeps LZ4 (no samples at hand)
        s._codec = BlobCodec(zdict if meta["zdict"] == "trained" else b"")
        if int((cols["flags"] & FLAG_ZSTD).astype(bool).sum()) and not s._codec.zdict:
            raise ChunkStoreError(f"chunk store in {d}: zstd blobs without a dictionary")
        s.tables = {
            k: Interner(tuple(v) for v in vals) if k == "region" else Interner(vals) for k, vals in tables.items()
        }
        s.ids, s.slot_of = id_lookups(id_cols, live, path_id, cols["path"], s.tables["path"].values)
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
            s._base = ArenaFile(d / "arena.bin") if arena_file else (d / "arena.bin").read_bytes()
        s._base_len = arena_bytes
        return s

    def rebase(self, d: Path) -> None:
        """After :meth:`save` into ``d``: serve the blobs from ``d``'s arena file
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
        (the loaded generation's file, read on demand: page cache), ``spilled`` (append area
        in a temporary file), ``dead`` (blobs of replaced or removed chunks)."""
        return {
            "columns": self._rows.nbytes,
            "tail": len(self._tail),
            "spilled": self._tail_len if self._spill is not None else 0,
            "arena": self._base_len,
            "dead": self._dead_bytes,
        }


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


def _read_folder(d: Path) -> tuple[dict, dict[str, np.ndarray], np.ndarray, dict[str, list[Any]], bytes, tuple]:
    """``(store.json, columns, name ranges, tables, zstd dictionary, id columns)`` of a saved
    store, each file's format checked; :class:`ChunkStoreError` naming the fault."""
    try:
        meta = json.loads((d / "store.json").read_bytes())
        if meta.get("version") != STORE_VERSION:
            raise ChunkStoreError(f"chunk store version {meta.get('version')!r}, expected {STORE_VERSION}")
        for key in ("slots", "arena_bytes", "live", "zdict_bytes"):
            meta[key] = int(meta[key])
        n = meta["slots"]
        id_cols = read_id_columns(d)
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
        zdict = (d / "zdict.bin").read_bytes()
        if len(zdict) != meta["zdict_bytes"] or meta.get("zdict") not in ("never", "trained", "untrained"):
            raise ChunkStoreError(
                f"zdict.bin: {len(zdict)} bytes, store.json says {meta['zdict_bytes']} ({meta.get('zdict')!r})"
            )
    except ChunkStoreError:
        raise
    except (OSError, ValueError, KeyError, TypeError, msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise ChunkStoreError(f"chunk store in {d} unusable: {exc}") from exc
    return meta, cols, nr, tables, zdict, id_cols


def _check_folder(
    d: Path, meta: dict, cols: dict[str, np.ndarray], tables: dict[str, list[Any]], live: np.ndarray
) -> None:
    """The columns of a saved store agree with ``store.json``, the arena file and the tables:
    :class:`ChunkStoreError` otherwise."""
    arena_bytes = int(meta["arena_bytes"])
    try:
        size = (d / "arena.bin").stat().st_size
    except OSError as exc:
        raise ChunkStoreError(f"chunk store in {d} unusable: {exc}") from exc
    if size != arena_bytes or set(tables) != set(_TABLES):
        raise ChunkStoreError(f"chunk store in {d} is inconsistent (arena {size}/{arena_bytes})")
    n_live = int(live.sum())
    if n_live != int(meta["live"]):
        raise ChunkStoreError(f"chunk store in {d}: {n_live} live flags, store.json says {meta['live']}")
    ends = cols["blob_off"][live] + cols["blob_len"][live]
    if ends.size and int(ends.max()) > arena_bytes:
        raise ChunkStoreError(f"chunk store in {d}: a blob lies beyond the arena")
    for table in _TABLES:
        if live.any() and int(cols[table][live].max()) >= len(tables[table]):
            raise ChunkStoreError(f"chunk store in {d}: column {table} points outside its table")


def _write_synced(path: Path, data: bytes) -> None:
    with open(path, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
