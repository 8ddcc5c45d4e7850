"""The embedding cache: the vector of every text embedded so far, under one embedder
fingerprint, keyed by :func:`text_hash` of the text, persisted in one file and memory-mapped.

Embedding is the slowest step of indexing, so :func:`daemon.index.embed.embed_chunks` embeds
only the texts this cache does not hold: unchanged text is never embedded twice, also across
restarts. Its measured memory costs: ``docs/internals.md``, "The embedding cache".
"""

from __future__ import annotations

import hashlib
import logging
import mmap
import os
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path

import msgspec
import numpy as np

from .embedder import Embedder
from .storage import atomic_write_parts

log = logging.getLogger(__name__)

__all__ = ["HASH_BYTES", "EmbeddingCache", "text_hash"]

#: Digest size of :func:`text_hash` in bytes (hex string of twice that length).
HASH_BYTES = 16
_CACHE_MAGIC = b"BSLLENS-EMB\x01"


def text_hash(text: str) -> str:
    """Key of an embedded text: blake2b-128 of its UTF-8 bytes, 32 lowercase hex chars."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=HASH_BYTES).hexdigest()


class _CacheHeader(msgspec.Struct):
    version: int
    fingerprint: str
    dim: int
    count: int
    keys: bytes  # count * HASH_BYTES raw digests, in row order
    checksum: str  # blake2b-128 hex of the float32 blob


class _MappedRows:
    """The float32 rows of a saved cache file, memory-mapped copy-on-write
    (``mmap.ACCESS_COPY``): reading a row faults in its file pages (clean, file-backed
    memory the kernel can drop and re-read), writing one copies only that page into the
    process; the file itself is never written through the mapping. ``rows`` is the
    ``(count, dim)`` array; :meth:`close` releases the mapping (no view of ``rows`` may be
    alive then: :class:`EmbeddingCache` hands out copies only)."""

    def __init__(self, fh, offset: int, count: int, dim: int) -> None:
        self._mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_COPY)
        self.rows: np.ndarray | None = np.frombuffer(self._mm, dtype="<f4", count=count * dim, offset=offset).reshape(
            count, dim
        )

    def close(self) -> None:
        self.rows = None
        self._mm.close()


class EmbeddingCache:
    """Vectors of embedded texts under one embedder fingerprint, keyed by :func:`text_hash`.

    Storage (4 bytes per dimension per text): the rows of the file :meth:`load` read (or
    :meth:`save` last wrote) stay in that file, memory-mapped (:class:`_MappedRows`), so they
    cost no heap and only the pages actually read count in the RSS; rows added since are in a
    growable heap float32 matrix (doubling). Each :meth:`save` maps the new file and empties
    the heap part. Thread-safe: an internal lock serialises ``put_many`` / ``get_many`` /
    ``save`` / ``retain``.

    File format (``save``): ``b"BSLLENS-EMB\\x01"``, a little-endian uint32 header length,
    a msgpack header (version, fingerprint, dim, count, raw key digests, blake2b checksum of
    the blob), then the raw float32 ``count x dim`` blob. Written to a temporary file in the
    same directory, fsynced and ``os.replace``d. This cache's own mapping is closed before the
    replace, as Windows requires (untested there; another process or cache mapping the same
    file would still block the replace on Windows).
    """

    VERSION = 1

    def __init__(self, fingerprint: str, dim: int) -> None:
        if dim < 1:
            raise ValueError("dim must be >= 1")
        self.fingerprint = fingerprint
        self.dim = int(dim)
        self._rows: dict[str, int] = {}
        self._keys: list[str] = []
        self._mapped: _MappedRows | None = None  # rows [0, _n_mapped) live in the mapped file
        self._n_mapped = 0
        self._mapped_path = Path()  # the mapped file and its header length, to map it again
        self._mapped_head = 0
        self._data = np.zeros((0, self.dim), dtype=np.float32)  # rows [_n_mapped, len) on the heap
        self._lock = threading.RLock()

    @classmethod
    def for_embedder(cls, embedder: Embedder) -> EmbeddingCache:
        """An empty cache for ``embedder`` (its fingerprint and dim)."""
        return cls(embedder.fingerprint, embedder.dim)

    def __len__(self) -> int:
        return len(self._keys)

    def __contains__(self, key: object) -> bool:
        return key in self._rows

    def keys(self) -> list[str]:
        """The cached text hashes, in row order (a copy)."""
        with self._lock:
            return list(self._keys)

    @property
    def mapped_rows(self) -> int:
        """How many rows are read from the memory-mapped file (the rest are on the heap)."""
        return self._n_mapped

    def _row(self, row: int) -> np.ndarray:
        if row < self._n_mapped:
            assert self._mapped is not None and self._mapped.rows is not None
            return self._mapped.rows[row]
        return self._data[row - self._n_mapped]

    def get_many(self, hashes: Iterable[str]) -> dict[str, np.ndarray]:
        """The cached vectors of ``hashes`` that are present: ``{hash: (dim,) float32}``
        (copies). Missing hashes are simply absent from the result."""
        with self._lock:
            out = {}
            for h in hashes:
                row = self._rows.get(h)
                if row is not None:
                    out[h] = np.array(self._row(row), dtype=np.float32)
            return out

    def put_many(self, hashes: Sequence[str], vectors: np.ndarray) -> None:
        """Store ``vectors`` (``(len(hashes), dim)``, any float dtype) under ``hashes``;
        an existing hash is overwritten (a mapped row copy-on-write, the file untouched).
        Raises ``ValueError`` on a shape mismatch."""
        vectors = np.asarray(vectors, dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape != (len(hashes), self.dim):
            raise ValueError(f"vectors shape {vectors.shape} != ({len(hashes)}, {self.dim})")
        with self._lock:
            new = [h for h in dict.fromkeys(hashes) if h not in self._rows]
            heap_need = len(self._keys) + len(new) - self._n_mapped
            if heap_need > self._data.shape[0]:
                cap = max(heap_need, 2 * self._data.shape[0], 1024)
                grown = np.zeros((cap, self.dim), dtype=np.float32)
                used = len(self._keys) - self._n_mapped
                grown[:used] = self._data[:used]
                self._data = grown
            for h in new:
                self._rows[h] = len(self._keys)
                self._keys.append(h)
            rows = np.fromiter((self._rows[h] for h in hashes), dtype=np.int64, count=len(hashes))
            on_heap = rows >= self._n_mapped
            if on_heap.all():
                self._data[rows - self._n_mapped] = vectors
            else:
                self._data[rows[on_heap] - self._n_mapped] = vectors[on_heap]
                assert self._mapped is not None and self._mapped.rows is not None
                self._mapped.rows[rows[~on_heap]] = vectors[~on_heap]

    def _matrix(self, rows: np.ndarray) -> np.ndarray:
        """A heap copy of ``rows`` (row numbers), from both parts."""
        out = np.empty((len(rows), self.dim), dtype=np.float32)
        mapped = rows < self._n_mapped
        if mapped.any():
            assert self._mapped is not None and self._mapped.rows is not None
            out[mapped] = self._mapped.rows[rows[mapped]]
        out[~mapped] = self._data[rows[~mapped] - self._n_mapped]
        return out

    def _unmap(self) -> None:
        if self._mapped is not None:
            self._mapped.close()
            self._mapped = None

    def retain(self, hashes: Iterable[str]) -> int:
        """Drop every vector whose hash is not in ``hashes`` (texts that no longer exist);
        returns the number dropped. Compacts the storage (onto the heap, until the next
        :meth:`save` maps it again)."""
        keep = set(hashes)
        with self._lock:
            kept = [h for h in self._keys if h in keep]
            dropped = len(self._keys) - len(kept)
            if dropped:
                rows = np.fromiter((self._rows[h] for h in kept), dtype=np.int64, count=len(kept))
                self._data = self._matrix(rows)
                self._unmap()
                self._n_mapped = 0
                self._keys = kept
                self._rows = {h: i for i, h in enumerate(kept)}
            return dropped

    def save(self, path: str | Path) -> None:
        """Write the cache atomically to ``path`` (see the class docstring for the format),
        streaming the rows (no second copy in memory), then map the new file. Holds the lock
        for the whole write. An ``OSError`` leaves the old file and this cache as they were."""
        path = Path(path)
        with self._lock:
            n = len(self._keys)
            step = max(1, (16 << 20) // (4 * self.dim))  # 16 MB of rows per part
            h = hashlib.blake2b(digest_size=16)
            for start in range(0, n, step):
                h.update(self._block(start, min(n, start + step)))
            header = _CacheHeader(
                version=self.VERSION,
                fingerprint=self.fingerprint,
                dim=self.dim,
                count=n,
                keys=b"".join(bytes.fromhex(k) for k in self._keys),
                checksum=h.hexdigest(),
            )
            head = msgspec.msgpack.encode(header)
            old = self._mapped_path

            def parts():
                yield _CACHE_MAGIC + len(head).to_bytes(4, "little") + head
                for start in range(0, n, step):
                    yield self._block(start, min(n, start + step))
                # the rows are all in the temporary file: close the old mapping before the
                # replace (a mapped file cannot be replaced on Windows)
                self._unmap()

            try:
                atomic_write_parts(path, parts())
            except BaseException:
                if self._mapped is None and self._n_mapped:
                    self._map(old, len(_CACHE_MAGIC) + 4 + self._mapped_head, self._n_mapped)
                raise
            self._unmap()
            offset = len(_CACHE_MAGIC) + 4 + len(head)
            try:
                if n:
                    self._map(path, offset, n)
                data = np.zeros((0, self.dim), dtype=np.float32)
            except OSError as exc:  # cannot map (address space, file system): keep the rows on the heap
                log.warning("embedding cache %s cannot be memory-mapped (%s); its rows stay in memory", path, exc)
                data = np.fromfile(path, dtype="<f4", offset=offset).astype(np.float32).reshape(n, self.dim)
                n = 0
            self._n_mapped = n
            self._mapped_head = len(head)
            self._data = data

    def _block(self, start: int, stop: int) -> bytes:
        """Rows ``[start, stop)`` as little-endian float32 bytes (a copy, never a view of the
        mapping)."""
        return np.ascontiguousarray(self._matrix(np.arange(start, stop, dtype=np.int64)), dtype="<f4").tobytes()

    def _map(self, path: Path, offset: int, count: int) -> None:
        with open(path, "rb") as fh:
            self._mapped = _MappedRows(fh, offset, count, self.dim)
        self._mapped_path = path

    @classmethod
    def read(cls, path: str | Path) -> EmbeddingCache:
        """A cache file (:meth:`save`'s format, also the portable export of ``bsl-lens cache
        export``) with whatever model fingerprint and dim its header names. Unlike
        :meth:`load` it raises: ``OSError`` when unreadable, ``ValueError`` naming the fault
        for a file that is not a cache, damaged, truncated or of another format version."""
        data = Path(path).read_bytes()
        try:
            if not data.startswith(_CACHE_MAGIC):
                raise ValueError("not a bsl-lens embedding cache file (bad magic)")
            pos = len(_CACHE_MAGIC)
            hlen = int.from_bytes(data[pos : pos + 4], "little")
            header = msgspec.msgpack.decode(data[pos + 4 : pos + 4 + hlen], type=_CacheHeader)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise ValueError(f"damaged header ({exc})") from None
        if header.version != cls.VERSION:
            raise ValueError(f"format version {header.version}, this bsl-lens reads {cls.VERSION}")
        if header.dim < 1:
            raise ValueError(f"bad dim {header.dim}")
        cache = cls.load(path, header.fingerprint, header.dim)
        if len(cache) != header.count:
            raise ValueError("damaged or truncated (size or checksum mismatch)")
        return cache

    @classmethod
    def load(cls, path: str | Path, fingerprint: str, dim: int) -> EmbeddingCache:
        """Load a cache saved by :meth:`save`: the header and keys are read, the blob's
        checksum verified by streaming it, and the rows memory-mapped (not copied onto the
        heap). Never raises for a bad file: a missing file gives an empty cache silently; a
        damaged, truncated, other-version, other-dim or other-fingerprint file gives an empty
        cache and a logged warning (the vectors are then recomputed). The file must not be
        changed in place while mapped (:meth:`save` replaces it, it never rewrites it)."""
        path = Path(path)
        try:
            fh = open(path, "rb")
        except FileNotFoundError:
            return cls(fingerprint, dim)
        except OSError as exc:
            log.warning("embedding cache %s unreadable (%s); starting empty", path, exc)
            return cls(fingerprint, dim)
        try:
            with fh:
                header, pos, size = _read_header(fh)
                if header.version != cls.VERSION:
                    raise ValueError(f"format version {header.version} != {cls.VERSION}")
                if header.fingerprint != fingerprint:
                    log.warning(
                        "embedding cache %s was made by %r, not %r; starting empty",
                        path,
                        header.fingerprint,
                        fingerprint,
                    )
                    return cls(fingerprint, dim)
                keys = _checked_keys(fh, header, pos, size, dim)
                return cls._mapped_from(fh, path, header, pos, keys)
        except (ValueError, OSError, msgspec.DecodeError, msgspec.ValidationError) as exc:
            log.warning("embedding cache %s is damaged (%s); starting empty", path, exc)
            return cls(fingerprint, dim)

    @classmethod
    def _mapped_from(cls, fh, path: Path, header: _CacheHeader, pos: int, keys: list[str]) -> EmbeddingCache:
        """The cache of a checked file (open as ``fh``; its blob at ``pos``): the rows mapped,
        or read into memory when the file cannot be mapped."""
        cache = cls(header.fingerprint, header.dim)
        n_mapped = len(keys)
        if keys:
            try:
                cache._mapped = _MappedRows(fh, pos, header.count, header.dim)
            except OSError as exc:  # cannot map (address space, file system): read it in
                log.warning("embedding cache %s cannot be memory-mapped (%s); its rows are read into memory", path, exc)
                rows = np.fromfile(path, dtype="<f4", offset=pos).astype(np.float32)
                cache._data = rows.reshape(header.count, header.dim)
                n_mapped = 0
        cache._mapped_path = path
        cache._mapped_head = pos - len(_CACHE_MAGIC) - 4
        cache._n_mapped = n_mapped
        cache._keys = keys
        cache._rows = {h: i for i, h in enumerate(keys)}
        return cache


def _read_header(fh) -> tuple[_CacheHeader, int, int]:
    """``(header, offset of the blob, file size)`` of an open cache file; ``ValueError`` (or a
    msgspec decode error) for a file that is not one or is cut short."""
    size = os.fstat(fh.fileno()).st_size
    if fh.read(len(_CACHE_MAGIC)) != _CACHE_MAGIC:
        raise ValueError("not an embedding cache file (bad magic)")
    raw = fh.read(4)
    if len(raw) < 4:
        raise ValueError("truncated header")
    hlen = int.from_bytes(raw, "little")
    pos = len(_CACHE_MAGIC) + 4
    if pos + hlen > size:
        raise ValueError("truncated header")
    header = msgspec.msgpack.decode(fh.read(hlen), type=_CacheHeader)
    return header, pos + hlen, size


def _checked_keys(fh, header: _CacheHeader, pos: int, size: int, dim: int) -> list[str]:
    """The text hashes of a cache file whose header says ``header`` and whose blob starts at
    ``pos``, after checking its dim, its size and the blob's checksum (read through ``fh``,
    streamed); ``ValueError`` naming the first fault."""
    if header.dim != dim:
        raise ValueError(f"dim {header.dim} != {dim}")
    if size - pos != header.count * dim * 4 or len(header.keys) != header.count * HASH_BYTES:
        raise ValueError("size mismatch (truncated file?)")
    h = hashlib.blake2b(digest_size=16)
    buf = bytearray(1 << 20)
    view = memoryview(buf)
    while True:
        got = fh.readinto(buf)
        if not got:
            break
        h.update(view[:got])
    if h.hexdigest() != header.checksum:
        raise ValueError("checksum mismatch")
    keys = [header.keys[i : i + HASH_BYTES].hex() for i in range(0, len(header.keys), HASH_BYTES)]
    if len(set(keys)) != len(keys):
        raise ValueError("duplicate keys")
    return keys
