"""The reference graph's saved form (:meth:`daemon.index.refgraph.RefGraph.to_bytes`).

zstd-compressed msgpack behind a magic number: one string table (each distinct string once, so a
load creates no duplicate to intern), the paths by file id, every file's record with its strings
as ids into that table, and the resolved indexes, so that a load resolves nothing but the files a
deferred update left pending. :func:`encode_graph` and :func:`decode_graph` convert between those
bytes and :class:`GraphParts`; the graph installs the parts and rebuilds its symbol table.

The bytes are a function of the graph's content alone: :func:`encode_graph` numbers the files by
path and sorts every index, so the order files arrived in, the file ids of removed files and the
order of updates leave no trace (a snapshot after edits is the same file as a fresh build's).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import msgspec
import numpy as np

from ..contract import Skip
from ..sources.ref_record import FileRefs
from .refgraph_symbols import FID_SHIFT


class _SavedFile(msgspec.Struct, array_like=True):
    """One record in :class:`_Saved`: its strings (owner, method names, the sites' table) as
    ``uint32`` ids into the saved string table, everything else as in :class:`FileRefs`."""

    fid: int
    file_kind: str
    owner: int
    object_type: str
    module_kind: str
    extension: bool
    names: bytes
    methods: bytes
    strings: bytes
    sites: bytes
    count: int
    global_module: bool
    partial: bool
    skips: tuple[Skip, ...]


class _Saved(msgspec.Struct, array_like=True):
    """What :func:`encode_graph` writes: one string table (each distinct string once, so a load
    creates no duplicate to intern), the file ids' paths, the records, and the resolved indexes
    (keys as string ids, reverse index, foreign targets, dynamic counts) of every file but the
    ``pending`` ones (swapped in by a deferred update, not resolved yet): a load resolves only
    those."""

    version: int
    strings: list[str]
    paths: list[str | None]
    files: list[_SavedFile]
    keys: dict[int, bytes]
    callers: dict[int, bytes]
    targets: dict[int, bytes]
    dyn: dict[int, int]
    pending: list[int] = []


_SAVE_VERSION = 3
_MAGIC = b"BSLREFS1"


class GraphParts(NamedTuple):
    """A graph's saved content: ``paths`` by file id (None for a file id no longer used), the
    records by file id, the key index (key -> packed ``int64`` bytes), the reverse index (target
    gid -> packed bytes), each file's foreign targets, the dynamic sites per file, and the files
    left ``pending`` (sorted)."""

    paths: list[str | None]
    files: dict[int, FileRefs]
    keys: dict[str, bytes]
    callers: dict[int, bytes]
    targets: dict[int, bytes]
    dyn: dict[int, int]
    pending: list[int]


def canonical_parts(parts: GraphParts) -> GraphParts:
    """``parts`` renumbered and sorted: the files with a record get ids in path order (the paths
    of removed files are dropped), gids and index entries follow, the key index is sorted by key,
    the reverse index by gid, the targets, dynamic counts and pending files by file id, and each
    packed list by its entries. Equal graphs give equal parts, whatever updates made them."""
    live = sorted(parts.files, key=parts.paths.__getitem__)
    new = np.full(len(parts.paths), -1, dtype=np.int64)
    new[live] = np.arange(len(live), dtype=np.int64)
    keys = sorted(parts.keys)
    gids = np.fromiter(parts.callers, dtype=np.int64, count=len(parts.callers))
    new_gids = _renumber(gids, FID_SHIFT, new)
    by_gid = np.argsort(new_gids, kind="stable").tolist()
    old_gids = gids.tolist()
    callers = [parts.callers[old_gids[i]] for i in by_gid]
    owners = sorted(parts.targets, key=new.__getitem__)
    targets = _renumbered([parts.targets[f] for f in owners], FID_SHIFT, new, by=0)  # gids, several per file
    return GraphParts(
        paths=[parts.paths[f] for f in live],
        files={i: parts.files[f] for i, f in enumerate(live)},
        keys=dict(zip(keys, _renumbered(list(map(parts.keys.__getitem__, keys)), 32, new), strict=True)),
        callers=dict(zip(new_gids[by_gid].tolist(), _renumbered(callers, 40, new), strict=True)),
        targets=dict(zip(new[owners].tolist(), targets, strict=True)),
        dyn={int(new[f]): parts.dyn[f] for f in sorted(parts.dyn, key=new.__getitem__)},
        pending=sorted(int(new[f]) for f in parts.pending),
    )


def _renumber(a: np.ndarray, shift: int, new: np.ndarray) -> np.ndarray:
    """Packed ``int64`` values ``fid << shift | low`` with each file id replaced by ``new[fid]``."""
    return new[a >> shift] << shift | (a & ((1 << shift) - 1))


def _renumbered(lists: list[bytes], shift: int, new: np.ndarray, by: int | None = None) -> list[bytes]:
    """Each packed ``int64`` list (``fid << shift | low``) renumbered by ``new`` and sorted by its
    values ``>> by`` (default ``shift``: by file id, unique in a list of the key or reverse
    index); all lists in one vectorised pass (an export has tens of thousands of short ones)."""
    if not lists:
        return []
    lens = np.fromiter(map(len, lists), dtype=np.int64, count=len(lists)) // 8
    a = _renumber(np.frombuffer(b"".join(lists), dtype=np.int64), shift, new)
    seg = np.repeat(np.arange(len(lists), dtype=np.int64), lens)
    v = a >> (shift if by is None else by)
    span = int(v.max()) + 1 if len(v) else 1
    if len(lists) * span < 1 << 62:  # one sort of a combined key: lexsort is ~50x slower here
        order = np.argsort(seg * span + v, kind="stable")
    else:
        order = np.lexsort((v, seg))
    raw = a[order].tobytes()
    ends = (np.cumsum(lens) * 8).tolist()
    return [raw[s:e] for s, e in zip([0, *ends[:-1]], ends, strict=True)]


def encode_graph(parts: GraphParts) -> bytes:
    """``parts`` as the saved bytes, in their canonical form (:func:`canonical_parts`): one
    content, one file."""
    import zstandard

    parts = canonical_parts(parts)
    table: dict[str, int] = {}

    def ids(items) -> bytes:
        return np.fromiter((table.setdefault(x, len(table)) for x in items), dtype="<u4").tobytes()

    files = []
    for fid in sorted(parts.files):
        r = parts.files[fid]
        files.append(
            _SavedFile(
                fid,
                r.file_kind,
                table.setdefault(r.owner, len(table)),
                r.object_type,
                r.module_kind,
                r.extension,
                ids(r.names),
                r.methods,
                ids(r.strings),
                r.sites,
                r.count,
                r.global_module,
                r.partial,
                r.skips,
            )
        )
    keys = {table.setdefault(k, len(table)): v for k, v in parts.keys.items()}
    saved = _Saved(
        _SAVE_VERSION,
        list(table),
        parts.paths,
        files,
        keys,
        parts.callers,
        parts.targets,
        parts.dyn,
        parts.pending,
    )
    return _MAGIC + zstandard.compress(msgspec.msgpack.encode(saved), 1)


def decode_graph(data: bytes, intern: Callable[[str], str]) -> GraphParts:
    """The parts of saved ``data``, every string passed through ``intern`` once; ``ValueError``
    for another format or version, ``msgspec.DecodeError`` or ``zstandard.ZstdError`` for damaged
    data."""
    import zstandard

    if not data.startswith(_MAGIC):
        raise ValueError("not a saved reference graph")
    saved = msgspec.msgpack.decode(zstandard.decompress(data[len(_MAGIC) :]), type=_Saved)
    if saved.version != _SAVE_VERSION:
        raise ValueError(f"reference graph format {saved.version}, expected {_SAVE_VERSION}")
    table = [intern(x) for x in saved.strings]
    get = table.__getitem__
    files: dict[int, FileRefs] = {}
    for f in saved.files:
        files[f.fid] = FileRefs(
            path=saved.paths[f.fid],
            file_kind=f.file_kind,
            owner=table[f.owner],
            object_type=f.object_type,
            module_kind=f.module_kind,
            extension=f.extension,
            names=list(map(get, np.frombuffer(f.names, dtype="<u4").tolist())),
            methods=f.methods,
            strings=list(map(get, np.frombuffer(f.strings, dtype="<u4").tolist())),
            sites=f.sites,
            count=f.count,
            global_module=f.global_module,
            partial=f.partial,
            skips=f.skips,
        )
    del saved.files[:]
    keys = {table[k]: v for k, v in saved.keys.items()}
    return GraphParts(saved.paths, files, keys, saved.callers, saved.targets, saved.dyn, saved.pending)
