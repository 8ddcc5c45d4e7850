"""The chunk store's lookup columns: interned value tables (:class:`Interner`) and the chunk
ids of a loaded store (:class:`IdColumn` for slot -> id, :class:`SlotMap` for id -> slot),
which read the saved id columns on demand instead of making one ``str`` and one dict entry
per chunk at load (their measured cost at ERP size: ``docs/internals.md``, "Chunk store").

The id columns on disk (:func:`write_id_columns`): ``ids_blob.npy`` (UTF-8 of each id without
its ``path + "::"`` prefix when it has one), ``ids_off.npy`` (``<i8[slots + 1]``),
``id_hash.npy`` / ``id_hash_slot.npy`` (``<u4[live]``: :func:`id_hash` of every live id,
ascending, and their slots).
"""

from __future__ import annotations

import zlib
from array import array
from bisect import bisect_left
from collections.abc import Iterable, Iterator, MutableMapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .chunk_blobs import ChunkStoreError
from .storage import save_npy_synced


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


_MISSING = object()


def id_hash(cid: str) -> int:
    """The 32-bit hash of a chunk id kept sorted in ``id_hash.npy`` (CRC-32 of its UTF-8;
    collisions only cost a comparison: :meth:`SlotMap.get` checks the id itself)."""
    return zlib.crc32(cid.encode("utf-8", "surrogatepass"))


class IdColumn(Sequence):
    """``ChunkStore.ids`` of a loaded store: ``ids[slot]`` is the chunk id (None for a free
    slot), made on demand from the saved column (``ids_blob.npy``: UTF-8 of each id
    without its ``path + "::"`` prefix when it has one, ``ids_off.npy``: offsets) instead of
    one ``str`` per chunk. Slots written since the load (``ids[slot] = v``, :meth:`append`)
    are kept in a small dict that wins over the column.

    A read is a slice, a UTF-8 decode and a concatenation; the engine reads an id per channel
    hit and for BM25 / names ties, never all of them per query."""

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
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]


class SlotMap(MutableMapping):
    """``ChunkStore.slot_of`` of a loaded store: chunk id -> slot through the saved hash
    column (``id_hash.npy``: :func:`id_hash` of every live id, ascending;
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
        h = id_hash(cid)
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


def write_id_columns(d: Path, ids: Sequence[str | None], paths: list[str], path_col: list[int]) -> np.ndarray:
    """Write the id columns of ``ids`` (by slot, None for a free slot) into the folder ``d``;
    ``paths[path_col[slot]]`` is the path of the chunk at ``slot``. Returns a bool per slot:
    its id is its path, ``::`` and the part stored (the store keeps this as a flag)."""
    n = len(ids)
    off = np.zeros(n + 1, dtype="<i8")
    path_id = np.zeros(n, dtype=bool)
    hashes: list[int] = []
    slots: list[int] = []
    buf = bytearray()
    for slot in range(n):
        cid = ids[slot]
        if cid is not None:
            p = paths[path_col[slot]]
            if cid.startswith(p) and cid.startswith("::", len(p)):
                tail = cid[len(p) + 2 :]
                path_id[slot] = True
            else:
                tail = cid
            buf += tail.encode("utf-8", "surrogatepass")
            hashes.append(id_hash(cid))
            slots.append(slot)
        off[slot + 1] = len(buf)
    h = np.array(hashes, dtype="<u4")
    order = np.argsort(h, kind="stable")
    save_npy_synced(d / "ids_blob.npy", np.frombuffer(bytes(buf), dtype=np.uint8))
    save_npy_synced(d / "ids_off.npy", off)
    save_npy_synced(d / "id_hash.npy", h[order])
    save_npy_synced(d / "id_hash_slot.npy", np.array(slots, dtype="<u4")[order])
    return path_id


def read_id_columns(d: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(ids_blob, ids_off, id_hash, id_hash_slot)`` of the folder ``d`` (the blob
    memory-mapped), unchecked: :func:`check_id_columns` checks them against the store."""
    return (
        np.load(d / "ids_blob.npy", mmap_mode="r", allow_pickle=False),
        np.load(d / "ids_off.npy", allow_pickle=False),
        np.load(d / "id_hash.npy", allow_pickle=False),
        np.load(d / "id_hash_slot.npy", allow_pickle=False),
    )


def check_id_columns(
    d: Path, columns: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray], live: np.ndarray, path_id: np.ndarray
) -> None:
    """The id columns agree with the store's live flags (``live``, ``path_id``: bool per
    slot): offsets monotone over the blob, no bytes for a free slot, a hash per live slot,
    sorted. :class:`ChunkStoreError` otherwise."""
    blob, id_off, hashes, hslot = columns
    n, n_live = live.size, int(live.sum())
    lens = np.diff(id_off) if id_off.shape == (n + 1,) else None
    if (
        blob.dtype != np.uint8
        or blob.ndim != 1
        or id_off.dtype != np.dtype("<i8")
        or lens is None
        or int(id_off[0]) != 0
        or int(id_off[-1]) != blob.size
        or (lens.size and int(lens.min()) < 0)
        or bool((lens[~live] != 0).any())
        or bool((path_id & ~live).any())
        or bool((live & ~path_id & (lens == 0)).any())
    ):
        raise ChunkStoreError(f"chunk store in {d}: the id columns (ids_blob, ids_off) disagree with the live flags")
    if (
        hashes.dtype != np.dtype("<u4")
        or hashes.shape != (n_live,)
        or hslot.dtype != np.dtype("<u4")
        or hslot.shape != (n_live,)
        or (
            n_live
            and (
                bool((np.diff(hashes.astype(np.int64)) < 0).any())
                or int(hslot.max()) >= n
                or not np.array_equal(np.bincount(hslot, minlength=n).astype(bool), live)
            )
        )
    ):
        raise ChunkStoreError(f"chunk store in {d}: the id hash columns are not a sorted index of the live slots")


def id_lookups(
    columns: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    live: np.ndarray,
    path_id: np.ndarray,
    path_col: np.ndarray,
    paths: list[str],
) -> tuple[IdColumn, SlotMap]:
    """The :class:`IdColumn` and :class:`SlotMap` over checked id columns."""
    blob, id_off, hashes, hslot = columns
    pfx = np.where(path_id, path_col, -1).astype("<i4")
    pfx[~live] = -2
    ids = IdColumn(bytes(blob), array("q", id_off.tobytes()), array("i", pfx.tobytes()), paths, live.size)
    return ids, SlotMap(array("I", hashes.tobytes()), array("I", hslot.tobytes()), ids, int(live.sum()))
