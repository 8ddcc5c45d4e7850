"""The language server's wire on stdio, and the pygls internals it overrides to get there.

* :class:`BslLensProtocol`: pygls' protocol with UTF-16 positions and no document sync at
  ``initialize``, msgspec's JSON encoder in the writer (:func:`encode` for handlers that answer
  pre-encoded JSON) and a fix to ``shutdown``;
* :func:`claim_stdout`: stdout is the protocol's alone; the wire moves to a private file
  descriptor and fd 1 (and ``sys.stdout``) point at stderr, so a stray ``print``, a C library
  or a child process cannot corrupt it;
* :class:`WireWriter`, :class:`PipeReader`, :func:`open_reader`: the writer that drops late
  frames after ``exit``, and stdin read on the event loop itself.

Every private pygls name used here is pinned by ``tests/test_framework_overrides.py``.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import os
import sys
from typing import Any, BinaryIO

import msgspec
from lsprotocol import types
from pygls.exceptions import JsonRpcInternalError
from pygls.io_ import StdinAsyncReader, StdoutWriter
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol, default_converter, lsp_method

log = logging.getLogger(__name__)


class BslLensProtocol(LanguageServerProtocol):
    """pygls' protocol with two changes to ``initialize``, a faster writer and a fix to
    ``shutdown``. ``initialize``:

    * the position encoding is always UTF-16: the daemon's ranges are UTF-16 and every
      client must accept it (pygls would otherwise pick the client's first choice, e.g.
      Neovim 0.11's ``utf-8``, and Cyrillic columns would be wrong);
    * no text document sync: the server reads files through the daemon, never the
      editor's buffers, so clients need not send them.
    """

    @lsp_method(types.INITIALIZE)
    def lsp_initialize(self, params: types.InitializeParams):
        """pygls' ``initialize`` with UTF-16 positions and no document sync (see the class)."""
        general = params.capabilities.general
        offered = general.position_encodings if general is not None else None
        if offered:
            general.position_encodings = [types.PositionEncodingKind.Utf16]
        try:
            result = yield from super().lsp_initialize(params)
        finally:
            if offered:
                general.position_encodings = offered
        result.capabilities.position_encoding = types.PositionEncodingKind.Utf16
        result.capabilities.text_document_sync = types.TextDocumentSyncOptions(
            open_close=False, change=types.TextDocumentSyncKind.None_
        )
        return result

    @lsp_method(types.SHUTDOWN)
    def lsp_shutdown(self, *args):
        """pygls' shutdown, iterating over a copy of the pending requests while it cancels
        them (a cancelled generator-handled request, e.g. a command, removes itself from
        the dict at once, and pygls' own loop then fails with "dictionary changed size").
        Upstream limitation pinned by ``tests/test_framework_overrides.py``: drop this
        override when pygls iterates over a copy."""
        if (user_handler := self.fm.features.get(types.SHUTDOWN)) is not None:
            yield user_handler, args, None
        current_id = self.msg_id
        for msg_id, future in list(self._request_futures.items()):
            if msg_id != current_id and not future.done():
                future.cancel()
        self._shutdown = True
        return None

    def _send_data(self, data: Any) -> None:
        """pygls' writer, with msgspec's JSON encoder instead of ``json.dumps`` (ten times faster on a
        full ``workspace/symbol`` answer: ``docs/frontends.md``) and UTF-8 bodies; ``Content-Length`` counts
        bytes. Anything msgspec cannot encode goes the pygls way. pygls has no public hook for
        the encoder, hence the override of a private method (pinned by
        ``tests/test_framework_overrides.py``)."""
        if getattr(self.writer, "closed", False):
            return
        if not data or self.writer is None or not self._include_headers:
            return super()._send_data(data)
        try:
            result = getattr(data, "result", None)
            if isinstance(result, msgspec.Raw):  # a handler's JSON, encoded already
                obj: Any = {"jsonrpc": data.jsonrpc, "id": data.id, "result": result}
            elif hasattr(data, "__attrs_attrs__"):
                obj = self._converter.unstructure(data)
            else:
                obj = data
            body = _encoder.encode(obj)
        except Exception:  # noqa: BLE001 - e.g. an object only json.dumps' default knows
            return super()._send_data(data)
        header = f"Content-Length: {len(body)}\r\nContent-Type: {self.CONTENT_TYPE}; charset={self.CHARSET}\r\n\r\n"
        try:
            self.writer.write(header.encode("ascii") + body)
        except BrokenPipeError:
            log.error("the client closed the connection")
            raise
        except Exception as exc:  # noqa: BLE001 - as pygls: report, keep serving
            log.exception("sending a message failed")
            self._server._report_server_error(exc, JsonRpcInternalError)


def _enc_hook(obj: Any) -> Any:
    if isinstance(obj, enum.Enum):
        return obj.value
    if hasattr(obj, "__attrs_attrs__"):
        return _converter.unstructure(obj)
    raise TypeError(f"cannot encode {type(obj).__name__}")


_converter = default_converter()
_encoder = msgspec.json.Encoder(enc_hook=_enc_hook)


def encode(obj: Any) -> bytes:
    """``obj`` as JSON bytes, as the writer encodes a message: msgspec, with lsprotocol's attrs
    classes and enums unstructured the pygls way (a handler that answers pre-encoded JSON wraps
    this in ``msgspec.Raw``)."""
    return _encoder.encode(obj)


def claim_stdout() -> BinaryIO:
    """Take stdout for the protocol: returns a binary stream on a duplicate of fd 1, then
    points fd 1 and ``sys.stdout`` at stderr. After this, anything else that writes to
    "stdout" (``print``, C code, child processes inheriting fd 1) lands on stderr."""
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        pass
    wire_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return os.fdopen(wire_fd, "wb")


class WireWriter(StdoutWriter):
    """pygls' stdout writer that drops what is written after ``close`` (pygls closes the
    wire on ``exit``; a late log line or progress report must not raise)."""

    closed = False

    def close(self) -> None:
        """Close the wire; later writes are dropped."""
        self.closed = True
        super().close()

    def write(self, data: bytes) -> None:
        """Write and flush one frame (nothing once closed)."""
        if not self.closed:
            super().write(data)


class PipeReader:
    """stdin read on the event loop itself (``connect_read_pipe``), for pygls' message
    loop: no worker-thread hop per header line and body as with pygls' own stdin reader,
    which a burst of keystrokes (a request and a ``$/cancelRequest`` each) pays for."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader

    async def readline(self) -> bytes:
        """One header line (``b""`` at the end of input)."""
        return await self._reader.readline()

    async def readexactly(self, n: int) -> bytes:
        """A body of ``n`` bytes (shorter only at the end of input)."""
        try:
            return await self._reader.readexactly(n)
        except asyncio.IncompleteReadError as exc:
            return exc.partial


async def open_reader(server: LanguageServer, stdin: BinaryIO):
    """A :class:`PipeReader` on ``stdin``, or pygls' threaded reader when stdin is not a
    pipe, socket or character device (a regular file) and on Windows."""
    if sys.platform == "win32":  # the proactor loop cannot read an inherited stdin pipe
        return StdinAsyncReader(stdin, server.thread_pool)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 26, loop=loop)
    try:
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader, loop=loop), stdin)
    except (ValueError, OSError) as exc:
        log.debug("stdin is not a pipe (%s): threaded reader", exc)
        return StdinAsyncReader(stdin, server.thread_pool)
    return PipeReader(reader)
