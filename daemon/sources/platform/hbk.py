"""The ``.hbk`` help book: the platform's v8 container and the two ZIP archives inside it.

Written from the layout the public readers document (``docs/platform-help.md``; never run on
a real platform file here, only on containers built to that description by the tests):

* a 16-byte header (first free block, default block size, a count, reserved), little-endian;
* blocks, each behind a 31-byte ASCII header ``\\r\\n<payload> <block size> <next>
  \\r\\n`` (8 hex digits each). A document starts at its first block, whose ``payload`` is the
  document's length; it continues in the ``next`` blocks (``7FFFFFFF`` or ``FFFFFFFF``: none),
  each giving at most its block size;
* the document at offset 16 is the table of entries: 12-byte records ``<header address,
  body address, reserved>``; an entry's header document holds 20 bytes of dates and
  attributes, then its name in UTF-16LE (and, in practice, 4 zero bytes);
* in a help book the entries ``PackBlock`` (a ZIP whose first member is the table of contents,
  :mod:`.toc`) and ``FileStorage`` (a ZIP of the HTML pages) are the ones read.

Everything is bounded by construction: a chain visits a block at most once and at most
``file size / 31`` blocks; a document may not claim more bytes than the file has; the entry
table, the ZIP member count, each inflated member and the total inflated are capped
(:class:`Limits`). What breaks a rule is a :class:`HbkError` (the whole book cannot be read)
or a :class:`daemon.contract.Skip` naming the file and the entry or page (the rest is read).
"""

from __future__ import annotations

import io
import re
import struct
import zipfile
from pathlib import Path

import msgspec

from daemon.contract import Skip

__all__ = ["BLOCK_HEADER", "END_OF_CHAIN", "HbkError", "HelpBook", "Limits", "V8Container"]

#: Bytes of a block header.
BLOCK_HEADER = 31
#: ``next`` values that end a chain.
END_OF_CHAIN = (0x7FFFFFFF, 0xFFFFFFFF)
_CONTAINER_HEADER = 16
_RECORD = 12
_ENTRY_PREFIX = 20
#: Longest entry name read, in bytes (real ones are a few dozen).
_MAX_NAME = 4096
_HEADER_RE = re.compile(rb"\r\n([0-9A-Fa-f]{8}) ([0-9A-Fa-f]{8}) ([0-9A-Fa-f]{8}) \r\n")


class Limits(msgspec.Struct, frozen=True, kw_only=True):
    """Caps that keep a hostile or broken file from costing more than a real one would.

    ``max_entries``: records in the container's entry table (a help book has about 7);
    ``max_document``: bytes of one container document (a full ``shcntx_ru.hbk`` is tens of
    MB; never more than the file either); ``max_members``: members of ``FileStorage`` (about
    52,000 pages in a recent ``shcntx_ru.hbk``); ``max_page``: inflated bytes of one page;
    ``max_toc``: inflated bytes of the table of contents; ``max_inflated``: inflated bytes of
    all pages read from one book; ``max_seconds``: time to read one book's pages (the pages
    left are a named skip)."""

    max_entries: int = 4096
    max_document: int = 1 << 30
    max_members: int = 500_000
    max_page: int = 4 << 20
    max_toc: int = 64 << 20
    max_inflated: int = 2 << 30
    max_seconds: float = 300.0


class HbkError(Exception):
    """A help book that cannot be read at all. ``reason`` is a short code (``truncated``,
    ``out_of_bounds``, ``chain_loop``, ``bad_block``, ``too_many_entries``,
    ``missing_entry``, ``not_zip``, ``zip_bomb``, ``bad_toc``, ``too_large``, ``unreadable``); the message
    names the file and the entry."""

    def __init__(self, path: str, reason: str, detail: str) -> None:
        super().__init__(f"{path}: {detail}")
        self.path = path
        self.reason = reason
        self.detail = detail

    def skip(self) -> Skip:
        """The error as a :class:`Skip` of the whole book (for status and logs)."""
        return Skip(self.path, f"hbk_{self.reason}", self.detail)


class V8Container:
    """The entries of a v8 container (``{name: body address}``) and their documents.

    Open with :meth:`open` (the file read into memory: a mapping would crash the process with
    SIGBUS if the file were cut short while mapped, say by an uninstall) or build from bytes;
    ``skips`` lists the entries left out (a name that is not UTF-16, a duplicate, a header
    that cannot be read), each naming the file and the record number."""

    def __init__(self, data: bytes, name: str, limits: Limits | None = None) -> None:
        self.data = data
        self.name = name
        self.limits = limits or Limits()
        self.entries: dict[str, int] = {}
        self.skips: list[Skip] = []
        self._read_table()

    @classmethod
    def open(cls, path: Path, limits: Limits | None = None) -> V8Container:
        """Read ``path`` and its entry table; :class:`HbkError` if it cannot (a file larger
        than :attr:`Limits.max_document` is refused before it is read)."""
        limits = limits or Limits()
        try:
            size = path.stat().st_size
            if size > limits.max_document:
                raise HbkError(path.name, "too_large", f"{size} bytes (limit {limits.max_document})")
            data = path.read_bytes()
        except OSError as exc:
            raise HbkError(path.name, "unreadable", f"cannot read: {exc}") from exc
        if not data:
            raise HbkError(path.name, "truncated", "the file is empty")
        return cls(data, path.name, limits)

    def close(self) -> None:
        """Drop the file's bytes (a later :meth:`read` fails with ``truncated``)."""
        self.data = b""

    def __enter__(self) -> V8Container:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- blocks -------------------------------------------------------------------------
    def _error(self, reason: str, detail: str) -> HbkError:
        return HbkError(self.name, reason, detail)

    def _block(self, addr: int, what: str) -> tuple[int, int, int]:
        """``(payload, block size, next)`` of the block header at ``addr``."""
        size = len(self.data)
        if addr < 0 or addr + BLOCK_HEADER > size:
            raise self._error("out_of_bounds", f"{what}: a block at byte {addr} is past the end ({size} bytes)")
        m = _HEADER_RE.match(self.data, addr)
        if m is None:
            raise self._error("bad_block", f"{what}: no block header at byte {addr}")
        return int(m.group(1), 16), int(m.group(2), 16), int(m.group(3), 16)

    def document(self, addr: int, what: str) -> bytes:
        """The document whose first block is at ``addr``: its declared length, gathered along
        the chain. :class:`HbkError` for a length past the file or :attr:`Limits.max_document`,
        a block out of the file, a chain that loops or ends early."""
        if addr in END_OF_CHAIN:
            return b""
        size = len(self.data)
        total, block_size, nxt = self._block(addr, what)
        if total > size:
            raise self._error("out_of_bounds", f"{what}: declares {total} bytes, the file has {size}")
        if total > self.limits.max_document:
            raise self._error("too_large", f"{what}: declares {total} bytes (limit {self.limits.max_document})")
        parts: list[bytes] = []
        remaining = total
        seen = {addr}
        cur = addr
        while True:
            start = cur + BLOCK_HEADER
            take = min(block_size, remaining)
            if start + take > size:
                raise self._error("truncated", f"{what}: the block at byte {cur} runs past the end of the file")
            parts.append(self.data[start : start + take])
            remaining -= take
            if remaining == 0:
                return b"".join(parts)
            if nxt in END_OF_CHAIN:
                raise self._error("truncated", f"{what}: the block chain ends {remaining} bytes short")
            if nxt in seen:
                raise self._error("chain_loop", f"{what}: the block chain loops back to byte {nxt}")
            if len(seen) > size // BLOCK_HEADER:
                raise self._error("chain_loop", f"{what}: the block chain is longer than the file allows")
            seen.add(nxt)
            cur = nxt
            _, block_size, nxt = self._block(cur, what)

    # --- entries ------------------------------------------------------------------------
    def _read_table(self) -> None:
        size = len(self.data)
        if size < _CONTAINER_HEADER + BLOCK_HEADER:
            raise self._error("truncated", f"{size} bytes: too short for a v8 container")
        table = self.document(_CONTAINER_HEADER, "the entry table")
        count = len(table) // _RECORD
        if count > self.limits.max_entries:
            raise self._error("too_many_entries", f"{count} entries (limit {self.limits.max_entries})")
        for i in range(count):
            header, body, _reserved = struct.unpack_from("<III", table, i * _RECORD)
            where = f"entry #{i}"
            try:
                raw = self.document(header, f"{where} header")
            except HbkError as exc:
                self.skips.append(Skip(self.name, f"hbk_{exc.reason}", exc.detail))
                continue
            if len(raw) > _ENTRY_PREFIX + _MAX_NAME:
                self.skips.append(Skip(self.name, "hbk_bad_name", f"{where}: a name of {len(raw)} bytes"))
                continue
            end = len(raw) - (len(raw) - _ENTRY_PREFIX) % 2
            while end - 2 >= _ENTRY_PREFIX and raw[end - 2 : end] == b"\x00\x00":
                end -= 2
            name_bytes = raw[_ENTRY_PREFIX:end]
            try:
                name = name_bytes.decode("utf-16-le")
            except UnicodeDecodeError as exc:
                shown = name_bytes.decode("utf-16-le", "replace")
                self.skips.append(
                    Skip(self.name, "hbk_bad_name", f"{where}: the name {shown!r} is not UTF-16 ({exc.reason})")
                )
                continue
            if not name:
                self.skips.append(Skip(self.name, "hbk_bad_name", f"{where}: an empty name"))
                continue
            if name in self.entries:
                self.skips.append(Skip(self.name, "hbk_duplicate", f"{where}: a second entry named {name!r}"))
                continue
            self.entries[name] = body

    def read(self, name: str) -> bytes:
        """The body of entry ``name``; :class:`HbkError` ``missing_entry`` when absent."""
        if name not in self.entries:
            have = ", ".join(sorted(self.entries)) or "none"
            raise self._error("missing_entry", f"no entry {name!r} (entries: {have})")
        return self.document(self.entries[name], f"entry {name!r}")


class HelpBook:
    """A help book: its table of contents (the first member of ``PackBlock``, as text) and
    its pages (``FileStorage``), read within :class:`Limits`.

    :meth:`page` returns a page's bytes or ``None`` after recording a :class:`Skip` (missing,
    too large, damaged), so one bad page never stops a book; ``skips`` also holds the
    container's. Construction raises :class:`HbkError` when the book has no readable table of
    contents or page archive."""

    def __init__(self, container: V8Container) -> None:
        self.container = container
        self.name = container.name
        self.limits = container.limits
        self.skips: list[Skip] = list(container.skips)
        self.inflated = 0
        self.toc_text = self._toc_text(container.read("PackBlock"))
        storage = container.read("FileStorage")
        try:
            self._zip = zipfile.ZipFile(io.BytesIO(storage))
        except Exception as exc:  # zipfile raises BadZipFile, OSError, ValueError, struct.error ... on bad archives
            raise HbkError(self.name, "not_zip", f"FileStorage is not a ZIP archive: {exc}") from exc
        infos = self._zip.infolist()
        if len(infos) > self.limits.max_members:
            raise HbkError(
                self.name, "too_many_entries", f"FileStorage has {len(infos)} members (limit {self.limits.max_members})"
            )
        self._members = {i.filename.lstrip("/"): i for i in infos if not i.is_dir()}
        container.close()  # both parts are copied out: the file's bytes are not needed any more

    @classmethod
    def open(cls, path: Path, limits: Limits | None = None) -> HelpBook:
        """Open the book at ``path``; :class:`HbkError` when it cannot be read."""
        container = V8Container.open(path, limits)
        try:
            return cls(container)
        except BaseException:
            container.close()
            raise

    def close(self) -> None:
        """Release the page archive."""
        self._zip.close()

    def __enter__(self) -> HelpBook:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _toc_text(self, pack: bytes) -> str:
        try:
            with zipfile.ZipFile(io.BytesIO(pack)) as zf:
                infos = [i for i in zf.infolist() if not i.is_dir()]
                if not infos:
                    raise HbkError(self.name, "bad_toc", "PackBlock holds no member")
                data = _inflate(zf, infos[0], self.limits.max_toc, self.name, "the table of contents")
        except HbkError:
            raise
        except Exception as exc:  # as for FileStorage: any failure of zipfile on a bad archive
            raise HbkError(self.name, "not_zip", f"PackBlock is not a ZIP archive: {exc}") from exc
        try:
            return data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise HbkError(self.name, "bad_toc", f"the table of contents is not UTF-8: {exc}") from exc

    @property
    def page_paths(self) -> list[str]:
        """Member paths of ``FileStorage`` (no leading ``/``), in archive order."""
        return list(self._members)

    def page(self, path: str) -> bytes | None:
        """The bytes of page ``path`` (a leading ``/`` is ignored), or ``None`` with a
        :class:`Skip` recorded: ``page_missing``, ``zip_bomb`` (inflates past
        :attr:`Limits.max_page`, or the book's pages past :attr:`Limits.max_inflated`),
        ``bad_zip_member``."""
        key = path.lstrip("/")
        where = f"{self.name}:{key}"
        info = self._members.get(key)
        if info is None:
            self.skips.append(Skip(where, "page_missing", "the table of contents names a page FileStorage lacks"))
            return None
        if self.inflated + info.file_size > self.limits.max_inflated:
            self.skips.append(
                Skip(where, "zip_bomb", f"the book's pages inflate past {self.limits.max_inflated} bytes")
            )
            return None
        try:
            data = _inflate(self._zip, info, self.limits.max_page, self.name, key)
        except HbkError as exc:
            self.skips.append(Skip(where, exc.reason, exc.detail))
            return None
        self.inflated += len(data)
        return data


def _inflate(zf: zipfile.ZipFile, info: zipfile.ZipInfo, cap: int, book: str, what: str) -> bytes:
    """A member's bytes, never more than ``cap`` inflated (the declared size is checked first,
    then the stream is read to at most ``cap + 1`` bytes, since a header can lie)."""
    if info.file_size > cap:
        raise HbkError(book, "zip_bomb", f"{what}: declares {info.file_size} bytes inflated (limit {cap})")
    # zipfile raises BadZipFile (CRC), zlib.error, EOFError, NotImplementedError, RuntimeError (encrypted) ...
    try:
        with zf.open(info) as fh:
            data = fh.read(cap + 1)
    except Exception as exc:
        raise HbkError(book, "bad_zip_member", f"{what}: {type(exc).__name__}: {exc}") from exc
    if len(data) > cap:
        raise HbkError(book, "zip_bomb", f"{what}: inflates past {cap} bytes")
    return data
