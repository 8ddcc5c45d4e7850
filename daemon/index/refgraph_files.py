"""The reference graph's saved form (:meth:`daemon.index.refgraph.RefGraph.to_bytes`).

zstd-compressed msgpack behind a magic number: one string table (each distinct string once, so a
load creates no duplicate to intern), the paths by file id, every file's record with its strings
as ids into that table, and the resolved indexes, so that a load resolves nothing but the files a
deferred update left pending. :func:`encode_graph` and :func:`decode_graph` convert between those
bytes and :class:`GraphParts`; the graph installs the parts and rebuilds its symbol table.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import msgspec
import numpy as np

from ..contract import Skip
from ..sources.ref_record import FileRefs


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


def encode_graph(parts: GraphParts) -> bytes:
    """``parts`` as the saved bytes (records in file id order)."""
    import zstandard

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
