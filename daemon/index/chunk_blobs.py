"""A chunk's blob in the chunk store: its encoding, its compression and the file it is read from.

The variable fields of a chunk (name, symbol, params, directives, annotations, doc, signature,
synonym, comment, types, properties, text) are one blob: a :class:`Head` (name and symbol,
never compressed: what a search reads of every candidate) and a :class:`Var` (the rest,
msgpack). The :class:`Var` part is compressed by :class:`BlobCodec`: zstd with a dictionary the
store trains on its first :data:`ZDICT_SAMPLES` blobs, LZ4 before that, raw when short. The
loaded generation's blobs are read from ``arena.bin`` by positional reads (:class:`ArenaFile`).
Why these choices (sizes, speeds, why not a memory map): ``docs/internals.md``, "Chunk store".
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import lz4.block
import msgspec

from ..contract import Chunk

#: Blobs shorter than this are stored raw (the compressor's call costs more than it saves).
COMPRESS_MIN = 96
#: Flags of a stored blob body (the chunk store keeps them in its ``flags`` column).
FLAG_LZ4 = 16  # the blob is LZ4-compressed (block format, size stored)
FLAG_ZSTD = 64  # the blob is zstd-compressed with the store's dictionary (zdict.bin)
#: Blob bodies the store collects before it trains its zstd dictionary (the ones before are LZ4).
ZDICT_SAMPLES = 2000
#: Size of that dictionary (bytes) and the zstd level of the blobs.
ZDICT_BYTES = 65536
ZSTD_LEVEL = 3


class ChunkStoreError(Exception):
    """A saved chunk store folder is missing, damaged or of another version."""


class Head(msgspec.Struct, array_like=True):
    """The start of a chunk's blob, never compressed: what a search reads of every candidate
    (:meth:`daemon.index.chunkstore.ChunkStore.hit_key`) without inflating the rest.
    ``symbol`` True: the symbol is the name (most methods: their head then holds the name
    once); read it through :meth:`sym`."""

    name: str
    symbol: str | bool | None

    def sym(self) -> str | None:
        """The chunk's symbol."""
        s = self.symbol
        return self.name if s is True else s


class Var(msgspec.Struct, array_like=True):
    """The rest of a chunk's variable fields (the blob after its :class:`Head`, compressed
    when large). ``doc_span``: ``[start, end]`` of the doc comment in ``text`` when the doc
    is a slice of it (it usually is: the text starts with the doc comment); ``doc`` is then
    empty."""

    params: str
    directives: list[str]
    annotations: list[str]
    doc: str
    doc_span: tuple[int, int] | None
    signature: str
    synonym: dict[str, str]
    comment: str
    types: list[str]
    properties: dict[str, str]
    text: str


_enc = msgspec.msgpack.Encoder()
_dec = msgspec.msgpack.Decoder(Var)
_dec_head = msgspec.msgpack.Decoder(Head)


def encode_parts(c: Chunk) -> tuple[bytes, bytes]:
    """The blob of ``c`` before compression: its :class:`Head` and its :class:`Var`
    (msgpack). ``ValueError`` when the name and symbol take more than 65535 bytes."""
    doc, span = c.doc, None
    if doc:
        at = c.text.find(doc)
        if at >= 0:
            doc, span = "", (at, at + len(c.doc))
    raw = _enc.encode(
        Var(
            c.params,
            c.directives,
            c.annotations,
            doc,
            span,
            c.signature,
            c.synonym,
            c.comment,
            c.types,
            c.properties,
            c.text,
        )
    )
    head = _enc.encode(Head(c.name, True if c.symbol is not None and c.symbol == c.name else c.symbol))
    if len(head) > 65535:
        raise ValueError(f"chunk {c.id!r}: name and symbol take {len(head)} bytes, at most 65535")
    return head, raw


def decode_head(data: bytes) -> Head:
    """The :class:`Head` of a blob (its first ``head_len`` bytes)."""
    return _dec_head.decode(data)


def encode(obj: object) -> bytes:
    """msgpack of ``obj`` with the blobs' encoder (the store's ``tables.msgpack`` too)."""
    return _enc.encode(obj)


class BlobCodec:
    """Compresses and inflates the :class:`Var` part of the blobs of one store.

    zstd with a dictionary trained on the store's first :data:`ZDICT_SAMPLES` bodies (LZ4
    until then; a store that never gets that many keeps LZ4). The dictionary is saved with
    the store (``zdict.bin``) and serves every later blob of it. ``zdict``: the trained
    dictionary, ``b""`` when training failed or is not wanted (LZ4 for good), None while the
    samples are collected.

    Blobs are compressed by the one thread that writes the store; they are decoded by any
    thread (queries under the engine's lock, the writer's prepare without it), and a zstd
    decompressor must not be used by two threads at once, so each thread has its own."""

    def __init__(self, zdict: bytes | None = None) -> None:
        self.zdict = zdict
        self._zc = None  # the compressor, made on first use
        self._local = threading.local()  # .zd: this thread's decompressor, made on first use
        self._samples: list[bytes] = []  # blob bodies for the training

    @property
    def state(self) -> str:
        """``"trained"``, ``"never"`` (LZ4 for good) or ``"untrained"`` (still sampling)."""
        return "never" if self.zdict == b"" else "trained" if self.zdict else "untrained"

    def compress(self, raw: bytes) -> tuple[bytes, int]:
        """A blob body as stored, and its flag (0: raw, :data:`FLAG_LZ4`, :data:`FLAG_ZSTD`)."""
        if len(raw) < COMPRESS_MIN:
            return raw, 0
        if self.zdict is None:
            self._samples.append(raw)
            if len(self._samples) >= ZDICT_SAMPLES:
                self._train()
        if self.zdict:
            if self._zc is None:
                import zstandard

                self._zc = zstandard.ZstdCompressor(
                    level=ZSTD_LEVEL, dict_data=zstandard.ZstdCompressionDict(self.zdict)
                )
            z = self._zc.compress(raw)
            if len(z) < len(raw):
                return z, FLAG_ZSTD
            return raw, 0
        z = lz4.block.compress(raw, store_size=True)
        if len(z) < len(raw):
            return z, FLAG_LZ4
        return raw, 0

    def _train(self) -> None:
        import zstandard

        try:
            self.zdict = zstandard.train_dictionary(ZDICT_BYTES, self._samples).as_bytes()
        except zstandard.ZstdError:  # too little or too uniform data: LZ4 for good
            self.zdict = b""
        self._samples = []

    def decode(self, raw: bytes, head_len: int, flags: int) -> tuple[Head, Var]:
        """The :class:`Head` and :class:`Var` of a stored blob ``raw`` whose head is
        ``head_len`` bytes and whose body carries ``flags``."""
        body = raw[head_len:]
        if flags & FLAG_ZSTD:
            zd = getattr(self._local, "zd", None)
            if zd is None:
                import zstandard

                zd = zstandard.ZstdDecompressor(dict_data=zstandard.ZstdCompressionDict(self.zdict or b""))
                self._local.zd = zd
            body = zd.decompress(body)
        elif flags & FLAG_LZ4:
            body = lz4.block.decompress(body)
        return _dec_head.decode(raw[:head_len]), _dec.decode(body)


class ArenaFile:
    """The blob arena of a loaded generation (``arena.bin``), read by positional reads
    (``os.pread``) instead of a memory map: a fault on a mapped file maps its neighbourhood
    too, and the scattered blobs a search reads would pull most of the arena into the
    process's RSS (``docs/internals.md``, "Chunk store"). The file stays open
    while the store uses it (a newer generation's save deletes the folder: an open file
    stays readable); ``posix_fadvise(RANDOM)`` turns off the kernel's readahead for it."""

    __slots__ = ("fd", "__weakref__")

    def __init__(self, path: Path) -> None:
        self.fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0))
        if hasattr(os, "posix_fadvise"):
            try:
                os.posix_fadvise(self.fd, 0, 0, os.POSIX_FADV_RANDOM)
            except OSError:
                pass

    def read(self, off: int, n: int) -> bytes:
        """``n`` bytes at ``off``; ``ChunkStoreError`` if the file is shorter (damaged since
        the load)."""
        if os.name == "nt":  # no pread on Windows
            os.lseek(self.fd, off, os.SEEK_SET)
            data = os.read(self.fd, n)
        else:
            data = os.pread(self.fd, n, off)
        if len(data) != n:
            raise ChunkStoreError(f"arena.bin: {len(data)} of {n} bytes at {off} (the file shrank)")
        return data

    def close(self) -> None:
        """Close the file (idempotent)."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __del__(self) -> None:
        try:
            self.close()
        except OSError:
            pass
