"""The vocabulary of :class:`daemon.index.bm25.BM25Index`: term <-> term id.

Terms added in this process are a ``dict``; the terms of a block loaded or compacted are
*frozen*: one UTF-8 blob with ``int64`` offsets (term id order) plus a sorted column of 64-bit
hashes of the terms' bytes and the term ids in that order. A lookup is then a
``searchsorted`` and one byte comparison, and a warm load builds no per-term ``str`` (the
measured trade-off against a lazily built ``dict``: ``docs/internals.md``, "BM25").
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import filterfalse

import numpy as np

#: Query terms whose frozen-vocabulary lookup is remembered (a dict of at most this many).
FCACHE_MAX = 1 << 16
#: Vocabulary hashing works on pieces of at most this many bytes (bounds the uint64 temporaries).
HASH_PIECE = 1 << 20

_P = np.uint64(0x100000001B3)  # the FNV-1 64-bit prime, as a polynomial base (odd)


def _pow_table(n: int) -> np.ndarray:
    p = np.full(max(n, 1), _P, dtype=np.uint64)
    p[0] = 1
    return np.cumprod(p, dtype=np.uint64)  # wraps modulo 2**64


def hash_spans(blob: np.ndarray, off: np.ndarray) -> np.ndarray:
    """64-bit hash of each byte string ``blob[off[i]:off[i+1]]`` (``uint64[len(off) - 1]``):
    a polynomial over the bytes modulo 2**64, mixed with the length and a splitmix64
    finaliser. Vectorised (O(bytes), in pieces of :data:`HASH_PIECE` bytes); the same
    function hashes query terms, so it only has to be deterministic, not cryptographic."""
    n = off.size - 1
    out = np.empty(n, dtype=np.uint64)
    if n <= 0:
        return out
    lens = np.diff(off)
    pw = _pow_table(int(lens.max()) + 1)
    start = 0
    while start < n:
        # as many terms as fit the piece (at least one)
        end = int(np.searchsorted(off, off[start] + HASH_PIECE, side="right")) - 1
        end = min(max(end, start + 1), n)
        b0, b1 = int(off[start]), int(off[end])
        seg = blob[b0:b1].astype(np.uint64) + np.uint64(1)
        ln = lens[start:end]
        pos = np.arange(b1 - b0, dtype=np.int64) - np.repeat(off[start:end] - b0, ln)
        cs = np.concatenate((np.zeros(1, dtype=np.uint64), np.cumsum(seg * pw[pos], dtype=np.uint64)))
        h = cs[off[start + 1 : end + 1] - b0] - cs[off[start:end] - b0]
        h ^= ln.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
        h ^= h >> np.uint64(30)
        h *= np.uint64(0xBF58476D1CE4E5B9)
        h ^= h >> np.uint64(27)
        h *= np.uint64(0x94D049BB133111EB)
        h ^= h >> np.uint64(31)
        out[start:end] = h
        start = end
    return out


def _encode_terms(terms: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """UTF-8 blob (``uint8``) and ``int64`` offsets of ``terms``."""
    enc = [t.encode("utf-8", "surrogatepass") for t in terms]
    off = np.zeros(len(enc) + 1, dtype=np.int64)
    if enc:
        np.cumsum(np.fromiter(map(len, enc), dtype=np.int64, count=len(enc)), out=off[1:])
    return np.frombuffer(b"".join(enc), dtype=np.uint8), off


def _gather_spans(blob: np.ndarray, off: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The byte strings ``ids`` of ``(blob, off)`` as a new blob and offsets (in pieces)."""
    lens = off[ids + 1] - off[ids]
    new_off = np.zeros(ids.size + 1, dtype=np.int64)
    np.cumsum(lens, out=new_off[1:])
    out = np.empty(int(new_off[-1]), dtype=np.uint8)
    step = 1 << 20
    for i in range(0, ids.size, step):
        j = min(i + step, ids.size)
        ln = lens[i:j]
        total = int(new_off[j] - new_off[i])
        src = np.repeat(off[ids[i:j]] - (new_off[i:j] - new_off[i]), ln) + np.arange(total, dtype=np.int64)
        out[new_off[i] : new_off[j]] = blob[src]
    return out, new_off


class Vocab:
    """Term <-> term id. Ids ``0..F-1`` are *frozen* terms: a UTF-8 blob with offsets (term
    id order) and a hash column sorted with its term ids (``hsort``, ``hperm``), possibly
    memory-mapped; ids ``F..`` are terms added in this process (``new``). ``ids`` maps every
    new term and the frozen terms looked up by :meth:`intern` (documents added after a load)
    to its id."""

    __slots__ = ("blob", "fcache", "hperm", "hsort", "ids", "new", "off")

    def __init__(
        self,
        blob: np.ndarray | None = None,
        off: np.ndarray | None = None,
        hsort: np.ndarray | None = None,
        hperm: np.ndarray | None = None,
    ) -> None:
        self.blob = np.zeros(0, dtype=np.uint8) if blob is None else blob
        self.off = np.zeros(1, dtype=np.int64) if off is None else off
        self.hsort = np.zeros(0, dtype=np.uint64) if hsort is None else hsort
        self.hperm = np.zeros(0, dtype=np.uint32) if hperm is None else hperm
        self.ids: dict[str, int] = {}
        self.new: list[str] = []
        # query terms looked up in the frozen part (hits and misses; the frozen part never
        # changes, a compaction makes a new Vocab). Cleared at FCACHE_MAX entries.
        self.fcache: dict[str, int | None] = {}

    @property
    def n_frozen(self) -> int:
        """How many terms are frozen (ids ``0..n_frozen - 1``)."""
        return self.off.size - 1

    def __len__(self) -> int:
        return self.n_frozen + len(self.new)

    def term(self, tid: int) -> str:
        """The term of id ``tid``."""
        f = self.n_frozen
        if tid >= f:
            return self.new[tid - f]
        return bytes(self.blob[self.off[tid] : self.off[tid + 1]]).decode("utf-8", "surrogatepass")

    def _frozen_lookup(self, terms: Sequence[str]) -> list[int | None]:
        """Frozen term ids of ``terms`` (None where absent): one vectorised hash and
        ``searchsorted`` for the batch, a byte comparison per found term."""
        if not self.hsort.size or not terms:
            return [None] * len(terms)
        enc = [t.encode("utf-8", "surrogatepass") for t in terms]
        blob, off = np.frombuffer(b"".join(enc), dtype=np.uint8), np.zeros(len(enc) + 1, dtype=np.int64)
        np.cumsum(np.fromiter(map(len, enc), dtype=np.int64, count=len(enc)), out=off[1:])
        h = hash_spans(blob, off)
        hsort, hperm, vb, vo = self.hsort, self.hperm, self.blob, self.off
        pos = np.searchsorted(hsort, h).tolist()
        out: list[int | None] = []
        n = hsort.size
        for e, hv, p in zip(enc, h.tolist(), pos, strict=True):
            found = None
            while p < n and int(hsort[p]) == hv:
                tid = int(hperm[p])
                if vb[vo[tid] : vo[tid + 1]].tobytes() == e:
                    found = tid
                    break
                p += 1
            out.append(found)
        return out

    def get(self, term: str) -> int | None:
        """Term id of ``term`` or None (query terms do not grow :attr:`ids`)."""
        tid = self.ids.get(term)
        if tid is None and self.hsort.size:
            tid = self.get_many([term])[0]
        return tid

    def get_many(self, terms: Sequence[str]) -> list[int | None]:
        """:meth:`get` for a batch (one vectorised lookup of the terms not in :attr:`ids`)."""
        ids, fc = self.ids, self.fcache
        out = [ids.get(t) for t in terms]
        if self.hsort.size:
            miss = [i for i, v in enumerate(out) if v is None]
            if miss:
                ask = [i for i in miss if terms[i] not in fc]
                if ask:
                    if len(fc) + len(ask) > FCACHE_MAX:
                        fc.clear()
                    fc.update(zip((terms[i] for i in ask), self._frozen_lookup([terms[i] for i in ask]), strict=True))
                for i in miss:
                    out[i] = fc.get(terms[i])
        return out

    def intern(self, terms: Iterable[str]) -> int:
        """Give every term of ``terms`` (distinct) an id in :attr:`ids`, new ones appended;
        returns how many new ids were created."""
        ids = self.ids
        missing = list(filterfalse(ids.__contains__, terms))
        if not missing:
            return 0
        if self.hsort.size:
            found = self._frozen_lookup(missing)
            ids.update((t, f) for t, f in zip(missing, found, strict=True) if f is not None)
            missing = [t for t, f in zip(missing, found, strict=True) if f is None]
        start = len(self)
        self.new.extend(missing)
        ids.update(zip(missing, range(start, start + len(missing)), strict=True))
        return len(missing)

    def select(self, keep: np.ndarray) -> Vocab:
        """A frozen vocabulary of the terms ``keep`` (ids, ascending), renumbered ``0..``."""
        f = self.n_frozen
        if not self.new and keep.size == f:
            return Vocab(self.blob, self.off, self.hsort, self.hperm)  # all kept: same arrays
        blob, off = self.blob, self.off
        h_by_tid = np.empty(f, dtype=np.uint64)
        h_by_tid[self.hperm] = self.hsort
        if self.new:
            nblob, noff = _encode_terms(self.new)
            h_by_tid = np.concatenate((h_by_tid, hash_spans(nblob, noff)))
            blob = np.concatenate((blob, nblob))
            off = np.concatenate((off, off[-1] + noff[1:]))
        if keep.size == off.size - 1:  # every term kept (a first build's save): no gather
            new_blob, new_off, h = blob, off, h_by_tid
        else:
            new_blob, new_off = _gather_spans(blob, off, keep.astype(np.int64))
            h = h_by_tid[keep]
        perm = np.argsort(h, kind="stable").astype(np.uint32)
        return Vocab(new_blob, new_off, h[perm], perm)
