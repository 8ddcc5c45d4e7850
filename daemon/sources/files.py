"""Reading one file of an export: what a file to index is (:class:`SourceFile`), how its
bytes are read (regular files only, no symlink followed, size-capped), decoded (UTF-8 with
or without a BOM, UTF-16 with a BOM, cp1251) and when it is skipped (:class:`SkipFile`); and
the one rule a user-given path is read by (:func:`confine`)."""

from __future__ import annotations

import errno
import hashlib
import os
import stat
import unicodedata
from pathlib import Path

import msgspec

from ..contract import Skip, shown


class ModuleIdentity(msgspec.Struct, frozen=True):
    """Who owns a module: ``owner`` (``ОбщийМодуль.X``, ``Справочник.X.Форма.F``,
    ``Конфигурация``), its Russian ``object_type`` and ``module_kind`` (one of
    :data:`daemon.contract.MODULE_KINDS`; ``""`` for a metadata descriptor)."""

    owner: str
    object_type: str
    module_kind: str


class SourceFile(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One file to index (a ``.bsl`` module or an object descriptor).

    * ``path``: relative to the export root, forward slashes, NFC (model convention);
      ``disk_path``: the on-disk relative path, set whenever it differs from ``path`` (a
      folder or file named in NFD, as macOS tools and some archives write them), ``""``
      otherwise. Open files with :meth:`fs_path`, never ``root / path``: on Linux the NFC
      spelling of an NFD name does not exist. Clients that open a hit need it too.
    * ``owner`` / ``object_type`` / ``module_kind``: see :class:`ModuleIdentity`
      (``module_kind`` is ``""`` for descriptors).
    * ``size`` in bytes, ``mtime_ns`` in nanoseconds since the epoch (``os.stat``); ``ino`` and
      ``ctime_ns`` too: a rewrite that restores size and mtime (``cp -p``, ``rsync -a``, ``tar``)
      cannot restore them.
    * ``project``: the EDT project folder (``"exts/yaxunit"``), ``""`` otherwise.
    * ``deps``: other files a descriptor's chunks read (Designer form / template
      descriptors ``<Folder>/<Name>/Forms/<F>.xml`` that give their synonyms).
    """

    path: str
    size: int
    mtime_ns: int
    ino: int = 0
    ctime_ns: int = 0
    owner: str = ""
    object_type: str = ""
    module_kind: str = ""
    project: str = ""
    disk_path: str = ""
    deps: list[str] = []
    flavor: str = ""  # markdown pages: how the site generator makes anchors (daemon.sources.markdown.FLAVORS)

    @property
    def identity(self) -> ModuleIdentity:
        """``(owner, object_type, module_kind)`` as a :class:`ModuleIdentity`."""
        return ModuleIdentity(self.owner, self.object_type, self.module_kind)

    def fs_path(self, root: Path) -> Path:
        """Path on disk: ``root / (disk_path or path)``."""
        return Path(root) / (self.disk_path or self.path)


class SkipFile(Exception):
    """A file that should not be indexed. ``reason`` is a :class:`daemon.contract.Skip`
    reason code (``binary``, ``too_large``, ``undecodable``, ``unreadable``, ``symlink``,
    ``not_regular``); ``detail`` a sentence."""

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail

    def to_skip(self, path: str) -> Skip:
        """The :class:`daemon.contract.Skip` record for ``path`` (relative, NFC)."""
        return Skip(path, self.reason, self.detail)


def content_hash(data: bytes) -> str:
    """BLAKE2b with a 16-byte digest, as 32 lowercase hex characters (change detection)."""
    return hashlib.blake2b(data, digest_size=16).hexdigest()


UTF8_BOM = b"\xef\xbb\xbf"


def decode_bytes(data: bytes) -> tuple[str, str]:
    """Decode file content; see :func:`read_text` for the rules and errors.

    Returns ``(text, encoding)`` with ``encoding`` one of ``"utf-8-sig"`` (BOM present,
    stripped), ``"utf-8"``, ``"utf-16"`` (BOM present, stripped), ``"cp1251"``.
    """
    if data.startswith(UTF8_BOM):
        try:
            return data[3:].decode("utf-8"), "utf-8-sig"
        except UnicodeDecodeError as exc:
            raise SkipFile("undecodable", f"UTF-8 BOM but invalid UTF-8 at byte {exc.start + 3}") from None
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        try:
            return data.decode("utf-16"), "utf-16"
        except UnicodeDecodeError as exc:
            raise SkipFile("undecodable", f"UTF-16 BOM but invalid UTF-16 at byte {exc.start}") from None
    nul = data.find(b"\x00")
    if nul >= 0:
        raise SkipFile("binary", f"NUL byte at offset {nul}")
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        pass
    try:
        return data.decode("cp1251"), "cp1251"
    except UnicodeDecodeError as exc:
        raise SkipFile(
            "undecodable", f"neither UTF-8 nor cp1251 (byte 0x{data[exc.start]:02x} at {exc.start})"
        ) from None


_OPEN_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NOFOLLOW", 0)  # a final symlink fails with ELOOP instead of being followed
    | getattr(os, "O_NONBLOCK", 0)  # a FIFO opens at once instead of waiting for a writer
    | getattr(os, "O_NOCTTY", 0)
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_BINARY", 0)
)


def _file_kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "socket"
    if stat.S_ISCHR(mode):
        return "character device"
    if stat.S_ISBLK(mode):
        return "block device"
    if stat.S_ISDIR(mode):
        return "folder"
    return "special file"


def link_detail(path: str | os.PathLike) -> str:
    """A skip detail for the symbolic link ``path``: where it points, and that it is not followed."""
    try:
        return f"symbolic link to {os.readlink(path)}; links are not followed"
    except OSError:
        return "symbolic link; links are not followed"


def unfollowed_link(path: str | os.PathLike) -> str | None:
    """The skip detail of a symbolic link the scanners would otherwise pass over in silence: one to
    a folder (its files are not indexed), or one that leads nowhere (a missing target, a loop of
    links). None for a link to anything else (a file the caller judges by its name). Only ``stat``."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return "dangling " + link_detail(path) + " (its target is missing, or links lead in a loop)"
    return "folder " + link_detail(path) if stat.S_ISDIR(mode) else None


def _not_regular_detail(mode: int) -> str:
    return f"a {_file_kind(mode)}, not a regular file; not opened"


def open_regular(path: str | os.PathLike) -> int:
    """File descriptor of the regular file ``path``, opened without following a symlink in
    the last component and without blocking on a FIFO. Raises :class:`SkipFile` with
    reason ``symlink``, ``not_regular`` or ``unreadable``."""
    if not getattr(os, "O_NOFOLLOW", 0) and os.path.islink(path):  # no O_NOFOLLOW (Windows)
        raise SkipFile("symlink", link_detail(path))
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EMLINK) and os.path.islink(path):
            raise SkipFile("symlink", link_detail(path)) from None
        raise SkipFile("unreadable", str(exc)) from None
    try:
        mode = os.fstat(fd).st_mode
    except OSError as exc:
        os.close(fd)
        raise SkipFile("unreadable", str(exc)) from None
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise SkipFile("not_regular", _not_regular_detail(mode))
    return fd


def read_regular_bytes(path: str | os.PathLike, max_bytes: int | None = None) -> bytes:
    """The bytes of ``path`` if it is a regular file; never follows a symlink (in the last
    path component) and never blocks on a FIFO or device: use this, not ``open`` /
    ``Path.read_bytes``, to read a file the scanner listed (it may have been replaced since).

    Raises :class:`SkipFile`: ``symlink`` (detail: where it points), ``not_regular``
    (FIFO, socket, device, folder), ``unreadable`` (``OSError``), ``too_large`` (more than
    ``max_bytes``, when given; checked before reading).
    """
    fd = open_regular(path)
    with os.fdopen(fd, "rb") as fh:
        try:
            if max_bytes is None:
                return fh.read()
            size = os.fstat(fh.fileno()).st_size
            if size > max_bytes:
                raise SkipFile("too_large", f"{size} bytes > limit {max_bytes}")
            data = fh.read(max_bytes + 1)
        except OSError as exc:
            raise SkipFile("unreadable", str(exc)) from None
    if len(data) > max_bytes:  # grew while we looked
        raise SkipFile("too_large", f"more than {max_bytes} bytes")
    return data


def read_text(path: Path, max_bytes: int) -> tuple[str, str]:
    """Read a text file as 1C tools write it: ``(text, encoding_used)``.

    Rules (Designer dumps are UTF-8 with a BOM, EDT files UTF-8 without; old hand-made
    files may be Windows-1251):

    * a UTF-8 BOM is stripped (encoding ``"utf-8-sig"``); a UTF-16 BOM is honoured
      (``"utf-16"``); otherwise UTF-8 is tried (``"utf-8"``), then cp1251 (``"cp1251"``).
    * line endings are kept as they are (CRLF stays CRLF), so line numbers match the file.

    Raises :class:`SkipFile` with reason ``too_large`` (size > ``max_bytes``, checked before
    reading), ``binary`` (a NUL byte and no UTF-16 BOM), ``undecodable`` (neither encoding
    fits; cp1251 only fails on byte 0x98), ``unreadable`` (``OSError``), ``symlink`` or
    ``not_regular`` (see :func:`read_regular_bytes`: links are not followed, FIFOs and
    devices are not opened).
    """
    return decode_bytes(read_regular_bytes(path, max_bytes))


_SNIFF_BYTES = 8000  # like git's binary heuristic: a NUL in the first 8000 bytes


def sniff_binary(path: str) -> int:
    """Offset of a NUL byte in the head of the file, or -1 (UTF-16 with BOM is text).
    Raises :class:`SkipFile` (``symlink``/``not_regular``) if the file was replaced by one
    since it was listed; other read errors are left to the reader (-1)."""
    try:
        fd = open_regular(path)
    except SkipFile as exc:
        if exc.reason == "unreadable":
            return -1
        raise
    try:
        with os.fdopen(fd, "rb") as fh:
            head = fh.read(_SNIFF_BYTES)
    except OSError:
        return -1
    if head[:2] in (b"\xff\xfe", b"\xfe\xff"):
        return -1
    return head.find(b"\x00")


def special_kind(e: os.DirEntry, is_link: bool) -> tuple[str, str]:
    """(reason, detail) for an entry that is not a regular file (nor a folder)."""
    if is_link:
        return "symlink", link_detail(e.path)
    try:
        mode = e.stat(follow_symlinks=False).st_mode
    except OSError as exc:
        return "unreadable", str(exc)
    return "not_regular", _not_regular_detail(mode)


def confine(root: Path, path: str) -> str:
    """A user-given path as an NFC path relative to ``root`` (resolved; the spelling of
    :class:`daemon.contract.Chunk` ``.path``). ``ValueError`` for an empty path, an absolute
    path outside the root, ``..``, a NUL character, or a symlink that leaves the root."""
    p = str(path).replace("\\", "/").strip()
    if not p:
        raise ValueError("empty path")
    if "\x00" in p:
        raise ValueError(f"path {shown(path)} contains a NUL character")
    if os.path.isabs(p):
        try:
            p = Path(p).resolve().relative_to(root).as_posix()
        except ValueError:
            raise ValueError(f"path {shown(path)} is outside the export root {root}") from None
    parts = [x for x in p.split("/") if x not in ("", ".")]
    if ".." in parts:
        raise ValueError(f"path {shown(path)} contains '..'; give a path relative to the export root")
    rel = unicodedata.normalize("NFC", "/".join(parts))
    full = (root / rel).resolve()
    try:
        full.relative_to(root)
    except ValueError:
        raise ValueError(f"path {shown(path)} leaves the export root through a symlink") from None
    return rel
