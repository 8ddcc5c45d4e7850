"""Atomic, versioned persistence of the index directory.

Layout of an index directory (one per export root)::

    lexical/<gen>/     the lexical snapshot, one generation folder (daemon.index.snapshot): manifest.json,
                       chunks/ (daemon.index.chunkstore column files + blob arena), bm25/,
                       meta_bm25/, names/ (column files), files.msgpack, skipped.msgpack;
                       written as <gen>.tmp/, renamed, then named by lexical/CURRENT
    journal.bin        lexical batches since that generation (daemon.index.journal)
    manifest.json      a readable copy of the snapshot's manifest (versions, fingerprints)
    dense-<tag>/       hnswlib index + key map + chunk->text-hash map, per embedder
    embeddings-<tag>.bin  embedding cache, per embedder (daemon.index.embed_cache)
    daemon.json, daemon.lock, daemon.log   the running daemon (daemon.server.runtime)

Every other file is written to a temporary name in the same directory, flushed, fsynced and
``os.replace``d over the old one, so a reader (or a restart after ``kill -9``) sees either
the old or the new file, never a torn one. A file that fails to decode raises
:class:`SnapshotError`; the engine then rebuilds that part instead of crashing.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from collections.abc import Iterable
from typing import Any

import msgspec
import platformdirs


class SnapshotError(Exception):
    """A persisted file is missing, damaged or of another version; rebuild that part."""


def default_index_dir(root: Path) -> Path:
    """The index directory for an export root: ``<user cache dir>/bsl-lens/<name>-<hash>``.

    ``<hash>`` is the first 12 hex digits of sha256 of the resolved root path, so two roots
    with the same folder name do not collide. The cache dir comes from ``platformdirs``
    (``~/.cache/bsl-lens`` on Linux, ``%LOCALAPPDATA%\\bsl-lens\\Cache`` on Windows).
    """
    resolved = str(Path(root).resolve())
    digest = hashlib.sha256(resolved.encode("utf-8")).hexdigest()[:12]
    return Path(platformdirs.user_cache_dir("bsl-lens", appauthor=False)) / f"{Path(resolved).name}-{digest}"


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (temp file in the same dir, fsync, os.replace):
    :func:`atomic_write_parts` with one part."""
    atomic_write_parts(path, (data,))


def atomic_write_parts(path: Path, parts: Iterable[bytes]) -> int:
    """Write the concatenation of ``parts`` to ``path`` atomically, as
    :func:`atomic_write_bytes` does, without ever holding it as one object. Returns the
    number of bytes written. An exception raised by ``parts`` removes the temp file and
    leaves the old ``path`` in place."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    size = 0
    try:
        with os.fdopen(fd, "wb") as fh:
            for part in parts:
                fh.write(part)
                size += len(part)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return size


def save_npy_synced(path: Path, arr: Any) -> dict[str, int]:
    """Write ``arr`` (a numpy array, made C-contiguous) as one ``.npy`` file at ``path``,
    flushed and fsynced (the column files of a snapshot generation: BM25, names, the chunk
    store); returns ``{"bytes": file size, "crc32": zlib CRC-32 of the array's data}`` for a
    column header. No pickles."""
    import zlib

    import numpy as np

    arr = np.ascontiguousarray(arr)
    with open(path, "wb") as fh:
        np.save(fh, arr, allow_pickle=False)
        fh.flush()
        os.fsync(fh.fileno())
    return {"bytes": path.stat().st_size, "crc32": zlib.crc32(arr.view(np.uint8))}


def write_msgpack(path: Path, obj: Any) -> None:
    """Encode ``obj`` with msgspec msgpack and write it atomically."""
    atomic_write_bytes(path, msgspec.msgpack.encode(obj))


def read_msgpack(path: Path, type_: Any = Any) -> Any:
    """Read and decode a msgpack file into ``type_``.

    Raises :class:`SnapshotError` if the file is missing or does not decode/validate.
    """
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise SnapshotError(f"{path.name}: cannot read ({exc})") from exc
    try:
        return msgspec.msgpack.decode(data, type=type_)
    except (msgspec.DecodeError, msgspec.ValidationError, ValueError) as exc:
        raise SnapshotError(f"{path.name}: damaged ({exc})") from exc


def write_json(path: Path, obj: Any) -> None:
    """Write ``obj`` as pretty UTF-8 JSON, atomically."""
    atomic_write_bytes(path, json.dumps(obj, ensure_ascii=False, indent=2, sort_keys=True).encode("utf-8"))
