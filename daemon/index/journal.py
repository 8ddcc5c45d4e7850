"""Append-only journals: what changed since the last full snapshot.

A full snapshot of a large configuration is hundreds of MB (``docs/internals.md``,
"Journal"). Writing one after every edit would stall the writer (an edit that arrives
meanwhile waits) and the disk. Instead each applied batch is appended to a
journal (a few KB to a few MB), and a full snapshot ("compaction") is written only now and
then; loading replays the journal on top of the snapshot.

File format: ``MAGIC`` + a 32-character generation id (ASCII), then frames of
``<uint32 little-endian payload length><8-byte blake2b digest of the payload><payload>``.
The generation ties a journal to the snapshot it extends: a compaction writes the snapshot
with a new generation first, then resets the journal to that generation, so a crash between
the two leaves an old-generation journal that is ignored (its changes are in the snapshot).
A torn or damaged frame ends the replay (everything before it is used): appends are not
fsynced, which is enough for ``kill -9`` (the page cache survives the process); an OS crash
may lose the last frames, and the next start reconciles with the disk by content hash.
"""

from __future__ import annotations

import hashlib
import logging
import os
import uuid
from pathlib import Path

from .storage import atomic_write_bytes, atomic_write_parts

log = logging.getLogger(__name__)

MAGIC = b"BSLLENS-JNL\x01"
_GEN_LEN = 32
_DIGEST = 8


def new_generation() -> str:
    """A fresh generation id: 32 lowercase hex characters (uuid4)."""
    return uuid.uuid4().hex


def reset(path: Path, generation: str) -> None:
    """Make ``path`` an empty journal of ``generation`` (atomically replacing any old one)."""
    if len(generation) != _GEN_LEN:
        raise ValueError("generation must be 32 characters")
    atomic_write_bytes(Path(path), MAGIC + generation.encode("ascii"))


def frame(payload: bytes) -> bytes:
    """One frame of ``payload``: its length, its digest, the payload (the module docstring)."""
    return len(payload).to_bytes(4, "little") + hashlib.blake2b(payload, digest_size=_DIGEST).digest() + payload


def write(path: Path, generation: str, payloads: list[bytes]) -> None:
    """Make ``path`` a journal of ``generation`` holding ``payloads``, atomically replacing any
    old one (a journal rewritten with what is left of it)."""
    if len(generation) != _GEN_LEN:
        raise ValueError("generation must be 32 characters")
    atomic_write_parts(Path(path), [MAGIC + generation.encode("ascii"), *(frame(p) for p in payloads)])


def generation_of(path: Path) -> str | None:
    """The generation a journal file belongs to; None when it is missing, unreadable or not a
    journal."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(len(MAGIC) + _GEN_LEN)
    except OSError:
        return None
    if not head.startswith(MAGIC) or len(head) < len(MAGIC) + _GEN_LEN:
        return None
    return head[len(MAGIC) :].decode("ascii", "replace")


def append(path: Path, payload: bytes) -> int:
    """Append one frame to an existing journal; returns the journal's size in bytes.
    ``FileNotFoundError`` if the journal was never :func:`reset`."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | getattr(os, "O_BINARY", 0))  # no newline translation on Windows
    try:
        os.write(fd, frame(payload))
        return os.fstat(fd).st_size
    finally:
        os.close(fd)


def read(path: Path, generation: str) -> list[bytes]:
    """The intact payloads of a journal of ``generation``, in order.

    ``[]`` when the file is missing, is not a journal, or belongs to another generation
    (logged at debug level: the normal state after a compaction). Stops at the first torn
    or damaged frame and logs a warning; never raises for the file's content.
    """
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        return []
    except OSError as exc:
        log.warning("journal %s unreadable (%s); ignored", path, exc)
        return []
    head = len(MAGIC) + _GEN_LEN
    if not data.startswith(MAGIC) or len(data) < head:
        log.warning("journal %s is damaged (bad header); ignored", path)
        return []
    if data[len(MAGIC) : head].decode("ascii", "replace") != generation:
        log.debug("journal %s belongs to another snapshot; ignored", path)
        return []
    out = []
    pos = head
    while pos < len(data):
        if pos + 4 + _DIGEST > len(data):
            log.warning("journal %s: torn frame at byte %d; replay stops there", path, pos)
            break
        n = int.from_bytes(data[pos : pos + 4], "little")
        digest = data[pos + 4 : pos + 4 + _DIGEST]
        payload = data[pos + 4 + _DIGEST : pos + 4 + _DIGEST + n]
        if len(payload) != n or hashlib.blake2b(payload, digest_size=_DIGEST).digest() != digest:
            log.warning("journal %s: damaged frame at byte %d; replay stops there", path, pos)
            break
        out.append(payload)
        pos += 4 + _DIGEST + n
    return out


def size(path: Path) -> int:
    """Bytes in the journal file (0 if missing)."""
    try:
        return os.stat(path).st_size
    except OSError:
        return 0
