"""The names channel's saved forms (:mod:`daemon.index.names`): column files and the msgspec state.

:func:`write_columns` writes a :class:`~daemon.index.names_table.NameTable` as one ``.npy`` file per
column and ``header.json`` (format, layout, counts, each file's byte size and CRC-32), and
:func:`read_columns` reads them back with no per-entry work (one decode per text column), checking
every column against the others (:class:`SymbolError` naming the folder). :class:`SymbolState` is
the same content as one msgspec struct (:func:`state_of`, :func:`table_from_state`), which is also
how the owner compacts a table once dead entries pile up.
"""

from __future__ import annotations

import json
import os
import zlib
from array import array
from itertools import compress
from pathlib import Path

import msgspec
import numpy as np

from .names_table import InternedColumn, NameTable, StrColumn, composites, composites_len
from .storage import save_npy_synced

#: Column-file format of :meth:`daemon.index.names.SymbolIndex.save`.
FORMAT = "bsl-lens.names"
_HEADER = "header.json"
#: Separator of the string columns in the saved blobs (never in a name: :meth:`daemon.index.names.SymbolIndex.add`
#: rejects it; identifiers cannot hold control characters).
SEP = "\x1f"
#: Columns of :meth:`daemon.index.names.SymbolIndex.save`: big-string columns, interned columns, id arrays.
_TEXT_COLS = ("names", "fnames", "sigs", "sigs2")
_INTERNED_COLS = ("kinds", "ini_text", "crow_text", "cini_text")
_SORTED_COLS = ("by_name", "by_ini", "by_cont", "by_cini")


#: Layout of :class:`SymbolState`; :meth:`~daemon.index.names.SymbolIndex.from_state` rejects any other.
STATE_LAYOUT = 2


class SymbolState(msgspec.Struct, frozen=True):
    """Persisted form of a :class:`~daemon.index.names.SymbolIndex`: one row per live entry, insertion order.

    Besides the entries themselves (``keys`` .. ``boosts``) it carries what the index derives
    from them, so that loading does no per-name work: the folded names, word signatures and
    initials, the four sorted id arrays and the trigram postings (``<u4``/``<i4`` bytes, ids
    and rows renumbered to the live entries). ``layout`` is :data:`STATE_LAYOUT`; a state of
    an older layout (without these fields) decodes with ``layout == 0`` and is rejected by
    :meth:`~daemon.index.names.SymbolIndex.from_state` with ``ValueError``, so the owner rebuilds it.
    """

    keys: list[str]  # always []: string keys were a compatibility path, removed (the slots say whose entry)
    names: list[str]
    containers: list[list[str]]
    kinds: list[str]
    boosts: list[float]
    layout: int = 0
    fnames: list[str] = []
    sigs: list[str] = []
    sigs2: list[str | None] = []
    inis: list[str] = []  # initials row 2*i (of sigs)
    inis2: list[str | None] = []  # initials row 2*i+1 (of sigs2, when they differ)
    by_name: bytes = b""  # <u4 ids sorted by folded name
    by_ini: bytes = b""  # <u4 initials rows sorted by initials
    by_cont: bytes = b""  # <u4 container rows sorted by folded container
    by_cini: bytes = b""  # <u4 container-initials rows sorted by initials
    tri_terms: list[str] = []
    tri_offsets: bytes = b""  # <u4[len(tri_terms) + 1]
    tri_ids: bytes = b""  # <i4 ids, ascending per trigram
    slots: bytes = b""  # <u4 slot per entry (empty: slots 0..n-1)


class SymbolError(ValueError):
    """Saved names that cannot be used (missing, damaged, another layout); the message
    names the folder. The owner logs it and rebuilds."""


def _checked_state(state: SymbolState) -> tuple:
    """``(slots, boosts, by_name, by_ini, tri_off, tri_ids)`` of ``state`` as arrays, after
    checking that they fit its entries; ``ValueError`` if they do not."""
    n = len(state.names)
    if state.layout != STATE_LAYOUT:
        raise ValueError(f"symbol state has layout {state.layout}, expected {STATE_LAYOUT}")
    slots = _u4(state.slots) if state.slots else np.arange(n, dtype=np.uint32)
    if slots.size != n or (n and (int(slots.max()) >= 1 << 31 or np.unique(slots).size != n)):
        raise ValueError("symbol state is inconsistent (slots)")
    columns = (
        state.names, state.containers, state.kinds, state.boosts,
        state.fnames, state.sigs, state.sigs2, state.inis, state.inis2,
    )  # fmt: skip
    if any(len(c) != n for c in columns):
        raise ValueError("symbol state is inconsistent (column lengths differ)")
    if state.keys and len(set(state.keys)) != n:
        raise ValueError("symbol state is inconsistent (duplicate keys)")
    if not all(state.names):
        raise ValueError("symbol state is inconsistent (empty name)")
    boosts = np.asarray(state.boosts, dtype=np.float64)
    if not np.isfinite(boosts).all():
        raise ValueError("symbol state is inconsistent (non-finite boost)")
    by_name = _u4(state.by_name)
    by_ini = _u4(state.by_ini)
    ini_rows = np.ones(2 * n, dtype=bool)
    ini_rows[1::2] = np.fromiter((x is not None for x in state.inis2), dtype=bool, count=n)
    if not _is_permutation(by_name, np.ones(n, dtype=bool)) or not _is_permutation(by_ini, ini_rows):
        raise ValueError("symbol state is inconsistent (sorted name or initials ids)")
    tri_off = _u4(state.tri_offsets).astype(np.int64)
    tri_ids = np.frombuffer(state.tri_ids, dtype="<i4") if len(state.tri_ids) % 4 == 0 else None
    if (
        tri_ids is None
        or tri_off.size != len(state.tri_terms) + 1
        or tri_off[0] != 0
        or np.any(np.diff(tri_off) < 0)
        or tri_off[-1] != tri_ids.size
        or (tri_ids.size and (tri_ids.min() < 0 or tri_ids.max() >= n))
    ):
        raise ValueError("symbol state is inconsistent (trigram postings)")
    return slots, boosts, by_name, by_ini, tri_off, tri_ids


def _in_range(a: np.ndarray, hi: int) -> bool:
    """True if every value of ``a`` is in ``[0, hi)``."""
    return not a.size or (int(a.min()) >= 0 and int(a.max()) < hi)


class _ColumnFiles:
    """The column files of a saved names index: ``header.json`` checked, each ``.npy`` loaded
    (memory-mapped with ``mmap``; its CRC-32 checked with ``verify``). ``SymbolError`` for a
    missing or damaged file."""

    def __init__(self, folder: Path, mmap: bool, verify: bool) -> None:
        self.folder = folder
        try:
            with open(folder / _HEADER, encoding="utf-8") as fh:
                header = json.load(fh)
        except (OSError, ValueError) as exc:
            raise SymbolError(f"names index in {folder}: cannot read {_HEADER}: {exc}") from exc
        if not isinstance(header, dict) or header.get("format") != FORMAT or header.get("layout") != STATE_LAYOUT:
            raise SymbolError(f"names index in {folder}: not format {FORMAT} layout {STATE_LAYOUT}")
        self.counts, files = header["counts"], header["files"]
        self.n = int(self.counts["entries"])
        self.cols: dict[str, np.ndarray] = {}
        for name, meta in files.items():
            path = folder / f"{name}.npy"
            size = path.stat().st_size
            if size != int(meta["bytes"]):
                raise SymbolError(f"names index in {folder}: {path.name} has {size} bytes, header says {meta['bytes']}")
            arr = np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)
            if arr.ndim != 1:
                raise SymbolError(f"names index in {folder}: {path.name} is not one-dimensional")
            if verify and zlib.crc32(np.ascontiguousarray(arr).view(np.uint8)) != int(meta["crc32"]):
                raise SymbolError(f"names index in {folder}: {path.name} fails its CRC-32")
            self.cols[name] = arr

    def bad(self, what: str) -> SymbolError:
        return SymbolError(f"names index in {self.folder}: inconsistent {what}")

    def arr(self, name: str, dtype: str, size: int | None = None) -> np.ndarray:
        """Column ``name``; ``SymbolError`` unless it is of ``dtype`` (and ``size``)."""
        a = self.cols[name]
        if a.dtype != np.dtype(dtype) or (size is not None and a.size != size):
            raise self.bad(f"{name} ({a.dtype}[{a.size}])")
        return a


def _join(strings: list[str]) -> np.ndarray:
    text = SEP.join(strings)
    if text.count(SEP) != max(len(strings) - 1, 0):
        raise ValueError("a string column holds the separator U+001F")
    return np.frombuffer(text.encode("utf-8", "surrogatepass"), dtype=np.uint8)


def _split(blob: np.ndarray, n: int) -> list[str]:
    if n == 0:
        return []
    out = blob.tobytes().decode("utf-8", "surrogatepass").split(SEP)
    if len(out) != n:
        raise ValueError(f"string column has {len(out)} entries, expected {n}")
    return out


def _u4(data: bytes) -> np.ndarray:
    if len(data) % 4:
        raise ValueError("symbol state is inconsistent (array of odd size)")
    return np.frombuffer(data, dtype="<u4")


def _is_permutation(ids: np.ndarray, rows: np.ndarray) -> bool:
    """True if ``ids`` lists every index where ``rows`` is True exactly once, and no other."""
    if ids.size != int(rows.sum()):
        return False
    if not ids.size:
        return True
    if int(ids.max()) >= rows.size:
        return False
    return bool(np.array_equal(np.bincount(ids, minlength=rows.size), rows))


def state_of(t: NameTable) -> SymbolState:
    """The live entries of ``t`` in insertion order, with the derived structures renumbered to
    them (slots, no keys); buffered additions are merged first."""
    t.flush()
    n_all = len(t.slot)
    alive = np.frombuffer(t.alive, dtype=np.uint8).astype(bool)
    remap = np.cumsum(alive, dtype=np.int64) - 1  # old id -> new id (where alive)
    if t.dead:
        live = np.flatnonzero(alive).tolist()

        def col(c: list) -> list:
            return [c[e] for e in live]

    else:

        def col(c: list) -> list:
            return list(c)

    ini = t.ini_text

    def u4(a: np.ndarray) -> bytes:
        return a.astype("<u4").tobytes()

    ids = np.frombuffer(t.by_name.ids, dtype=np.int64)
    ids = remap[ids[alive[ids]]]
    rows = np.frombuffer(t.by_ini.ids, dtype=np.int64)
    rows = rows[alive[rows >> 1]]
    rows = 2 * remap[rows >> 1] + (rows & 1)
    by_cont = _rows_state(t.by_cont.ids, t.crow_eid, alive)
    by_cini = _rows_state(t.by_cini.ids, t.cini_eid, alive)
    # trigram postings, stale ids dropped, renumbered
    terms = list(t.tri)
    posts = [np.frombuffer(p, dtype=np.int32) for p in t.tri.values()]
    counts = np.fromiter(map(len, posts), dtype=np.int64, count=len(posts))
    flat = np.concatenate(posts) if posts else np.zeros(0, dtype=np.int32)
    if t.dead and flat.size:
        keep = alive[flat]
        flat = remap[flat[keep]]
        owner = np.repeat(np.arange(len(posts)), counts)[keep]
        counts = np.bincount(owner, minlength=len(posts))
        terms = list(compress(terms, (counts > 0).tolist()))
        counts = counts[counts > 0]
    del posts
    slots = np.frombuffer(t.slot, dtype=np.uint32)
    return SymbolState(
        keys=[],
        slots=(slots[alive] if t.dead else slots).astype("<u4").tobytes(),
        names=col(t.names),
        containers=[list(c) for c in col(t.conts)],
        kinds=col(t.kinds),
        boosts=col(t.boosts.tolist()),
        layout=STATE_LAYOUT,
        fnames=col(t.fnames),
        sigs=col(t.sigs),
        sigs2=col(t.sigs2),
        inis=col([ini[2 * e] for e in range(n_all)]),
        inis2=col([ini[2 * e + 1] for e in range(n_all)]),
        by_name=u4(ids),
        by_ini=u4(rows),
        by_cont=by_cont,
        by_cini=by_cini,
        tri_terms=terms,
        tri_offsets=u4(np.concatenate(([0], np.cumsum(counts)))),
        tri_ids=flat.astype("<i4").tobytes(),
    )


def _rows_state(sorted_rows: array, row_eid: array, alive: np.ndarray) -> bytes:
    """Sorted container rows of live entries, renumbered as the rows of the live
    entries (rows are appended in id order, so that is their rank)."""
    rows = np.frombuffer(sorted_rows, dtype=np.int64)
    eid = np.frombuffer(row_eid, dtype=np.int64)
    row_alive = alive[eid] if eid.size else np.zeros(0, dtype=bool)
    new_row = np.cumsum(row_alive, dtype=np.int64) - 1
    rows = rows[row_alive[rows]] if rows.size else rows
    return new_row[rows].astype("<u4").tobytes() if rows.size else b""


def table_from_state(state: SymbolState) -> NameTable:
    """A table holding ``state``, built with no per-name work; ``ValueError`` if the state is
    inconsistent (see :meth:`daemon.index.names.SymbolIndex.from_state`)."""
    n = len(state.names)
    slots, boosts, by_name, by_ini, tri_off, tri_ids = _checked_state(state)
    t = NameTable()
    interned = t.intern.setdefault
    t.slot = array("I", slots.astype("<u4").tobytes())
    eo = np.full(int(slots.max()) + 1 if n else 0, -1, dtype="<i4")
    eo[slots] = np.arange(n, dtype="<i4")
    t.eid_of = array("i", eo.tobytes())
    t.n_live = n
    t.names.extend(state.names)
    t.fnames.extend(state.fnames)
    t.sigs.extend(state.sigs)
    t.sigs2.extend(state.sigs2)
    for c in state.containers:
        t.conts.append(tuple(map(interned, c, c)))
    for kind in state.kinds:
        t.kinds.append(kind)
    t.boosts = array("d", boosts.tobytes())
    t.comp = array("q", composites(boosts, state.fnames).tobytes())
    t.alive = bytearray(b"\x01" * n)
    ini_col = t.ini_text
    for a, b in zip(state.inis, state.inis2, strict=False):
        ini_col.append(a)
        ini_col.append(b)
    # container rows, in id order as add() appends them
    info = t.container_info
    crow_text, crow_eid = t.crow_text, []
    cini_text, cini_eid = t.cini_text, []
    for e, conts in enumerate(list(t.conts)):
        for c in conts:
            fc, c_inis, _ = info(c)
            crow_text.append(fc)
            crow_eid.append(e)
            for ci in c_inis:
                cini_text.append(ci)
                cini_eid.append(e)
    t.crow_eid = array("q", crow_eid)
    t.cini_eid = array("q", cini_eid)
    by_cont, by_cini = _u4(state.by_cont), _u4(state.by_cini)
    if not _is_permutation(by_cont, np.ones(len(crow_text), dtype=bool)) or not _is_permutation(
        by_cini, np.ones(len(cini_text), dtype=bool)
    ):
        raise ValueError("symbol state is inconsistent (sorted container ids)")
    for sorted_ids, arr in (
        (t.by_name, by_name),
        (t.by_ini, by_ini),
        (t.by_cont, by_cont),
        (t.by_cini, by_cini),
    ):
        sorted_ids.ids = array("q", arr.astype(np.int64).tobytes())
    t.install_trigrams(state.tri_terms, tri_off, tri_ids)
    return t


def write_columns(t: NameTable, folder: Path) -> None:
    """Write ``t`` (flushed, no dead entries: the owner compacts first) into ``folder`` (created
    if missing) as the column files and ``header.json`` described by
    :meth:`daemon.index.names.SymbolIndex.save`, each fsynced."""
    folder.mkdir(parents=True, exist_ok=True)
    cols: dict[str, np.ndarray] = {}
    for name in _TEXT_COLS:
        col: StrColumn = getattr(t, name)
        col.freeze()
        cols[name + "_text"] = np.frombuffer(col.big.encode("utf-8", "surrogatepass"), dtype=np.uint8)
        cols[name + "_off"] = np.frombuffer(col.off, dtype=np.uint32)
    for name in _INTERNED_COLS:
        icol: InternedColumn = getattr(t, name)
        cols[name + "_ids"] = np.frombuffer(icol.ids, dtype=np.uint32)
        cols[name + "_table"] = _join(icol.table[1:])
    conts = t.conts
    flat = [c for tup in conts.table[1:] for c in tup]
    cols["conts_ids"] = np.frombuffer(conts.ids, dtype=np.uint32)
    cols["conts_len"] = np.fromiter(map(len, conts.table[1:]), dtype=np.uint32, count=len(conts.table) - 1)
    cols["conts_table"] = _join(flat)
    cols["slots"] = np.frombuffer(t.slot, dtype=np.uint32)
    cols["boosts"] = np.frombuffer(t.boosts, dtype=np.float64)
    cols["crow_eid"] = np.frombuffer(t.crow_eid, dtype=np.int64)
    cols["cini_eid"] = np.frombuffer(t.cini_eid, dtype=np.int64)
    for name in _SORTED_COLS:
        cols[name] = np.frombuffer(getattr(t, name).ids, dtype=np.int64)
    terms = list(t.tri)
    posts = [np.frombuffer(p, dtype=np.int32) for p in t.tri.values()]
    cols["tri_terms"] = _join(terms)
    cols["tri_off"] = np.concatenate(([0], np.cumsum([p.size for p in posts], dtype=np.int64))).astype(np.int64)
    cols["tri_ids"] = np.concatenate(posts) if posts else np.zeros(0, dtype=np.int32)
    del posts
    files = {name: save_npy_synced(folder / f"{name}.npy", arr) for name, arr in cols.items()}
    counts = {
        "entries": len(t.slot),
        **{name: len(getattr(t, name).table) - 1 for name in _INTERNED_COLS},
        "conts": len(conts.table) - 1,
        "conts_flat": len(flat),
        "tri_terms": len(terms),
    }
    header = {"format": FORMAT, "layout": STATE_LAYOUT, "counts": counts, "files": files}
    with open(folder / _HEADER, "w", encoding="utf-8") as fh:
        json.dump(header, fh, indent=1)
        fh.flush()
        os.fsync(fh.fileno())


def read_columns(folder: Path, mmap: bool, verify: bool) -> NameTable:
    """The table saved in ``folder`` by :func:`write_columns`, every column checked against the
    others; :class:`SymbolError` (or ``OSError``, ``KeyError``, ``ValueError`` … for the owner
    to wrap) when a file is missing, foreign or damaged."""
    cols = _ColumnFiles(folder, mmap, verify)
    n = cols.n
    t = NameTable()
    _load_text_columns(t, cols)
    _load_interned(t, cols)
    _load_containers(t, cols)
    slots = cols.arr("slots", "<u4", n)
    if n and (int(slots.max()) >= 1 << 31 or int(np.bincount(slots).max()) > 1):
        raise cols.bad("slots")
    boosts = cols.arr("boosts", "<f8", n)
    if not np.isfinite(boosts).all():
        raise cols.bad("boosts (not finite)")
    n_crow, n_cini = len(t.crow_text), len(t.cini_text)
    crow_eid = cols.arr("crow_eid", "<i8", n_crow)
    cini_eid = cols.arr("cini_eid", "<i8", n_cini)
    if not _in_range(crow_eid, n) or not _in_range(cini_eid, n):
        raise cols.bad("container rows")
    _load_sorted(t, cols, n_crow, n_cini)
    tri_terms = _split(cols.arr("tri_terms", "|u1"), int(cols.counts["tri_terms"]))
    tri_off = cols.arr("tri_off", "<i8", len(tri_terms) + 1)
    tri_ids = cols.arr("tri_ids", "<i4")
    if tri_off[0] != 0 or int(tri_off[-1]) != tri_ids.size or np.any(np.diff(tri_off) < 0) or not _in_range(tri_ids, n):
        raise cols.bad("trigram postings")
    t.slot = array("I", slots.astype("<u4").tobytes())
    eo = np.full(int(slots.max()) + 1 if n else 0, -1, dtype="<i4")
    eo[slots] = np.arange(n, dtype="<i4")
    t.eid_of = array("i", eo.tobytes())
    t.n_live = n
    t.boosts = array("d", boosts.astype("<f8").tobytes())
    fname_len = np.diff(np.frombuffer(t.fnames.off, dtype=np.uint32).astype(np.int64))
    t.comp = array("q", composites_len(np.asarray(boosts, dtype=np.float64), fname_len).tobytes())
    t.alive = bytearray(b"\x01" * n)
    t.crow_eid = array("q", crow_eid.astype("<i8").tobytes())
    t.cini_eid = array("q", cini_eid.astype("<i8").tobytes())
    t.install_trigrams(tri_terms, tri_off, tri_ids)
    return t


def _load_text_columns(t: NameTable, cols: _ColumnFiles) -> None:
    """The name, folded-name and signature columns: one UTF-8 text plus offsets each."""
    n = cols.n
    for name in _TEXT_COLS:
        off = cols.arr(name + "_off", "<u4", n + 1)
        text = bytes(cols.arr(name + "_text", "|u1")).decode("utf-8", "surrogatepass")
        d = np.diff(off.astype(np.int64))
        if (
            off[0] != 0
            or int(off[-1]) != len(text)
            or (d.size and int(d.min()) < (1 if name in ("names", "fnames") else 0))
        ):
            raise cols.bad(f"{name} offsets")
        col: StrColumn = getattr(t, name)
        col.big, col.off, col.nf = text, array("I", off.astype("<u4").tobytes()), n


def _load_interned(t: NameTable, cols: _ColumnFiles) -> None:
    """The kinds and initials: ids into tables of distinct values."""
    n = cols.n
    rows = {"kinds": n, "ini_text": 2 * n}
    for name in _INTERNED_COLS:
        table = [None, *_split(cols.arr(name + "_table", "|u1"), int(cols.counts[name]))]
        ids = cols.arr(name + "_ids", "<u4", rows.get(name))
        if not _in_range(ids, len(table)):
            raise cols.bad(f"{name} ids")
        icol: InternedColumn = getattr(t, name)
        icol.table, icol.index = table, dict(zip(table[1:], range(1, len(table)), strict=False))
        icol.ids = array("I", ids.astype("<u4").tobytes())
        icol.vals.extend(map(table.__getitem__, icol.ids))


def _load_containers(t: NameTable, cols: _ColumnFiles) -> None:
    """The container tuples (interned, each container string once) and each entry's tuple id."""
    n = cols.n
    flat = _split(cols.arr("conts_table", "|u1"), int(cols.counts["conts_flat"]))
    clen = cols.arr("conts_len", "<u4", int(cols.counts["conts"])).astype(np.int64)
    if int(clen.sum()) != len(flat):
        raise cols.bad("container tuples")
    interned = t.intern.setdefault
    flat = [interned(c, c) for c in flat]
    bounds = np.concatenate(([0], np.cumsum(clen))).tolist()
    tuples = [tuple(flat[bounds[i] : bounds[i + 1]]) for i in range(clen.size)]
    conts_ids = cols.arr("conts_ids", "<u4", n)
    if not _in_range(conts_ids, len(tuples) + 1) or (n and int(conts_ids.min()) == 0):
        raise cols.bad("container ids")
    t.conts.table = [None, *tuples]
    t.conts.index = dict(zip(tuples, range(1, len(tuples) + 1), strict=False))
    t.conts.ids = array("I", conts_ids.astype("<u4").tobytes())
    t.conts.vals.extend(map(t.conts.table.__getitem__, t.conts.ids))


def _load_sorted(t: NameTable, cols: _ColumnFiles, n_crow: int, n_cini: int) -> None:
    """The four sorted id lists, each a permutation of its rows."""
    ini_rows = np.frombuffer(t.ini_text.ids, dtype=np.uint32) != 0
    for name, rows_ok in (
        ("by_name", np.ones(cols.n, dtype=bool)),
        ("by_ini", ini_rows),
        ("by_cont", np.ones(n_crow, dtype=bool)),
        ("by_cini", np.ones(n_cini, dtype=bool)),
    ):
        ids = cols.arr(name, "<i8")
        if not _in_range(ids, max(rows_ok.size, 1)) or not _is_permutation(ids, rows_ok):
            raise cols.bad(f"{name} (not a permutation of its rows)")
        getattr(t, name).ids = array("q", ids.astype("<i8").tobytes())
