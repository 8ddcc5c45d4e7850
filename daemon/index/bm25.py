"""Incremental BM25 (Okapi, Lucene idf) over integer document slots.

Scoring, for a query given as a list of terms (a repeated term counts once per
occurrence, as in ``bm25s``) and a document ``d`` of length ``dl`` tokens::

    score(d) = Σ_t  idf(t) · tf(t,d)·(k1 + 1) / (tf(t,d) + k1·(1 − b + b·dl/avgdl))
    idf(t)   = ln(1 + (N − df(t) + 0.5) / (df(t) + 0.5))        # Lucene's idf, always > 0

with ``k1 = 1.2`` and ``b = 0.75`` by default (the Lucene / Elasticsearch defaults; the
classic Robertson–Spärck Jones range is k1 ∈ [1.2, 2.0], b = 0.75). ``N`` is the number of
live documents (documents with no tokens count too), ``avgdl`` their mean length in tokens.
This is ``bm25s.BM25(method="lucene")`` times the constant ``k1 + 1``, which ``bm25s`` (like
Lucene ≥ 8) leaves out; rankings are identical, and the tests check the scores against
``bm25s`` to float precision.

Documents are named by the caller's **slots** (non-negative ints, issue 12: one slot per
chunk shared by every channel, assigned by the chunk store; a freed slot may be given to a
later document). The index keeps no chunk id strings: ties are broken by ``key_of(slot)``
given to :meth:`BM25Index.search`, filters are a numpy bool mask indexed by slot.

Why hand-written: the daemon changes the corpus on every file-watch batch. ``bm25s``
precomputes per-posting scores that depend on ``N``, ``df`` and ``avgdl``, so every change
would be a full rebuild. Here ``idf`` and ``avgdl`` are computed at query time from live
counters, so :meth:`BM25Index.add` and :meth:`BM25Index.remove` cost O(terms of that
document):

* every added document gets an internal *doc number* (ascending, never reused until a
  compaction renumbers; ``slot -> doc`` and ``doc -> slot`` are two ``array`` columns), so a
  re-used slot never meets the postings of the document it held before;
* postings: a frozen CSR block (one ``uint32`` array of interleaved ``(doc, tf)`` pairs,
  grouped by term, docs ascending, plus ``int64`` term offsets), and per term an
  append-only ``array('I')`` *tail* for documents added after the block was built;
* :meth:`BM25Index.add` only counts the document's terms and buffers the ``(term id, tf)``
  rows (C-level: ``Counter``, ``map``, ``array``); the buffer is merged before the next
  read (:meth:`BM25Index.flush`): a few documents go to the tails (O(their terms)), a large
  buffer (a bulk build) or large tails are merged into a new CSR block by a counting
  sort by term in pieces of 512k postings (each piece stably sorted by two 16-bit radix
  passes), so a merge holds the old and the new postings plus ~30 MB, not a sort of all
  rows at once (whose temporaries made the peak of a first build: ×5 ssl31-ru 1,147 MB
  against 794 MB with the pieces; ~2.5 GB of them at ×20, extrapolated);
* a removed document becomes a tombstone (its doc is marked dead and skipped when scoring;
  ``df``, ``N`` and the total length are exact at every read); when dead docs outnumber half
  of the live ones, the index compacts itself (O(postings), amortised O(1) per removal);
* the distinct term ids of a document (needed to decrement ``df`` on removal) are kept in
  RAM only while its postings sit in the tails (the buffer holds them anyway); documents
  saved or loaded find theirs in the saved doc -> terms index (``doc_terms.npy``: per doc
  its ascending term ids as 16-bit deltas, the rare delta of 2**16 or more completed by
  ``doc_terms_xpos.npy`` / ``doc_terms_xhi.npy``; memory-mapped, O(their terms); 2.0-2.2
  bytes per posting instead of 4); documents merged into a block since then by one
  vectorised pass over the block's doc column for all removals buffered since the last read
  (O(postings): ~5 ms for ssl31-ru). No token lists, no per-document Python objects.

Vocabulary: terms added in this process are a ``dict``; terms of a block loaded or compacted
are one UTF-8 blob with ``int64`` offsets (term id order) plus a sorted column of 64-bit
hashes of the terms' bytes and the term ids in that order, so a lookup is a
``searchsorted`` and one byte comparison, and a warm load builds no per-term ``str``.

Persistence: :meth:`BM25Index.save` writes column files (``.npy``, little-endian) and a
JSON header with the counts, the parameters and each file's size; :meth:`BM25Index.load`
memory-maps them read-only. Merges and compactions build new arrays, so the mapped files are
never written; increments after a load go to the tails and the buffer as usual.

Search: :meth:`BM25Index.search` scores the query's rarer terms in full and, once the idf
bounds of the commoner ones sum below the k-th partial score, reads those only for the
remaining candidates (exact: the same (slot, score) list as scoring every posting; see
:meth:`BM25Index._scored`), in work arrays kept between searches.

Not thread-safe: the daemon must serialise calls (a search may merge buffered additions,
it holds buffer views of ``array`` objects that a concurrent ``add`` could not resize, and
its work arrays are shared).

Measured (``/work/scratch-channels/measure.py`` of issue 12: the engine's two BM25 channels,
all chunks + metadata chunks, built from ssl31-ru's real chunks by the engine's chunker; ×20:
the chunks replicated with renamed ids and owner tokens, as ``bench --scale`` renames objects;
heap bytes by ``tracemalloc``, per chunk; wall times on the shared 2-core dev box, whose load
average is given; before = the string-keyed index with the msgpack state):

=========================  ================================  ==================================
ssl31-ru, 38,570 chunks     before                            after
=========================  ================================  ==================================
heap, built                 1,546 B/chunk                     1,032 B/chunk (41 after ``save``:
                                                              remapped onto its files)
heap, loaded                1,996 B/chunk                     41 B/chunk + mapped files
on disk                     1,099 B/chunk (msgpack)           1,379 B/chunk (``.npy``; 300 B of it
                                                              the doc -> terms index)
load                        2.17 s (load avg 11)              0.01 s (load avg 5.7)
replace 30 chunks + query   356 ms (load avg 11)              16 ms (load avg 5.7)
=========================  ================================  ==================================

At ×20 (771,400 chunks, 276,721 terms, 58 M postings; before at load avg 4.7, after at 3.5):
load 6.3 s → 0.01 s, RSS after load +1,025 → +17 B/chunk (pages are read on use), 851 →
1,030 B/chunk on disk, build 66 → 45 s, save 5.3 → 9.5 s (the doc -> terms index), replace 30
chunks + one query 1.9 s → 22 ms, query p50 / p95 (300 queries: 200 method names, 100 random
6-token samples of chunks, top 100) 9.7 / 34 ms → 6.9 / 24 ms. The vocabulary at 20× ssl31-ru's
(3.49 M distinct terms, 251 MB of files): the hashed blob loads in 6.5 ms and looks up a
7-term query in 81 / 218 µs (p50 / p95); a ``dict`` built lazily from the blob at the first
lookup takes 165 s and 1,175 MB, then 14 / 31 µs (load avg 10.9) -- so the blob.
"""

from __future__ import annotations

import json
import math
import operator
import os
import zlib
from array import array
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from itertools import filterfalse
from pathlib import Path

import numpy as np

from .storage import save_npy_synced

__all__ = ["BM25Error", "BM25Index"]

#: Buffered rows (or tail rows) that always go to a merge into a new CSR block.
_MERGE_MIN_ROWS = 4096
#: Postings per piece of a merge's counting sort (:meth:`BM25Index._merge`): bounds its
#: temporaries to ~60 bytes per posting of one piece (~30 MB).
_MERGE_PIECE = 1 << 19
#: Compact when the number of dead docs exceeds this fraction of live documents ...
_COMPACT_DEAD_RATIO = 0.5
#: ... and at least this many docs are dead (small indexes never bother).
_COMPACT_MIN_DEAD = 1024
#: Column-file format written by :meth:`BM25Index.save`; :meth:`BM25Index.load` rejects others.
FORMAT = "bsl-lens.bm25"
FORMAT_VERSION = 2  # 2: doc -> terms as 16-bit deltas + exceptions (1: uint32 term ids)
_HEADER = "header.json"
#: Query terms whose frozen-vocabulary lookup is remembered (a dict of at most this many).
_FCACHE_MAX = 1 << 16
#: Files :meth:`BM25Index.save` writes and :meth:`BM25Index.load` memory-maps (besides the
#: per-document columns copied into RAM).
_MAPPED = ("postings", "offsets", "vocab_blob", "vocab_off", "doc_off", "doc_terms", "doc_terms_xpos", "doc_terms_xhi")
#: Pruning in :meth:`BM25Index._scored`: queries of fewer postings are scored in full ...
_PRUNE_MIN_POSTINGS = 1 << 16
#: ... the bound is checked before a term of at least this many documents ...
_PRUNE_CHECK_DF = 1024
#: ... the rarer terms scored before the bound holds may hold at most this share of the
#: query's postings (beyond it the rest is scored in full, reusing what was scored) ...
_PRUNE_BUDGET = 0.35
#: ... a skipped term is read for its candidates by binary searches when it has more than
#: this many postings per candidate (else by one gather per posting) ...
_PRUNE_SEARCH_RATIO = 16
#: ... and the bound of the skipped terms, times this, must stay below the k-th score
#: (float rounding of the sums is ~1e-15 relative).
_PRUNE_MARGIN = 1.0 + 1e-9
#: Vocabulary hashing works on pieces of at most this many bytes (bounds the uint64 temporaries).
_HASH_PIECE = 1 << 20


class BM25Error(ValueError):
    """A saved index that cannot be used: missing, damaged or of another format. The message
    names the folder and what is wrong; the owner logs it and rebuilds."""


def _u32(data: bytes | array) -> np.ndarray:
    return np.frombuffer(data, dtype="<u4")


def _stable_argsort(keys: np.ndarray) -> np.ndarray:
    """Stable argsort of ``uint32`` keys as two 16-bit passes (numpy radix-sorts 16-bit keys
    stably: 0.10 s instead of 0.15-0.18 s for 2.9 M keys)."""
    lo = np.argsort((keys & 0xFFFF).astype(np.uint16), kind="stable")
    if not keys.size or int(keys.max()) <= 0xFFFF:
        return lo
    hi = (keys >> 16).astype(np.uint16)[lo]
    return lo[np.argsort(hi, kind="stable")]


# --- vocabulary ------------------------------------------------------------------------------
_P = np.uint64(0x100000001B3)  # the FNV-1 64-bit prime, as a polynomial base (odd)


def _pow_table(n: int) -> np.ndarray:
    p = np.full(max(n, 1), _P, dtype=np.uint64)
    p[0] = 1
    return np.cumprod(p, dtype=np.uint64)  # wraps modulo 2**64


def _hash_spans(blob: np.ndarray, off: np.ndarray) -> np.ndarray:
    """64-bit hash of each byte string ``blob[off[i]:off[i+1]]`` (``uint64[len(off) - 1]``):
    a polynomial over the bytes modulo 2**64, mixed with the length and a splitmix64
    finaliser. Vectorised (O(bytes), in pieces of :data:`_HASH_PIECE` bytes); the same
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
        end = int(np.searchsorted(off, off[start] + _HASH_PIECE, side="right")) - 1
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


class _Vocab:
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
        # changes, a compaction makes a new _Vocab). Cleared at _FCACHE_MAX entries.
        self.fcache: dict[str, int | None] = {}

    @classmethod
    def frozen(cls, blob: np.ndarray, off: np.ndarray) -> _Vocab:
        h = _hash_spans(blob, off)
        perm = np.argsort(h, kind="stable").astype(np.uint32)
        return cls(blob, off, h[perm], perm)

    @property
    def n_frozen(self) -> int:
        return self.off.size - 1

    def __len__(self) -> int:
        return self.n_frozen + len(self.new)

    def term(self, tid: int) -> str:
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
        h = _hash_spans(blob, off)
        hsort, hperm, vb, vo = self.hsort, self.hperm, self.blob, self.off
        pos = np.searchsorted(hsort, h).tolist()
        out: list[int | None] = []
        n = hsort.size
        for e, hv, p in zip(enc, h.tolist(), pos):
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
                    if len(fc) + len(ask) > _FCACHE_MAX:
                        fc.clear()
                    fc.update(zip((terms[i] for i in ask), self._frozen_lookup([terms[i] for i in ask])))
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
            ids.update((t, f) for t, f in zip(missing, found) if f is not None)
            missing = [t for t, f in zip(missing, found) if f is None]
        start = len(self)
        self.new.extend(missing)
        ids.update(zip(missing, range(start, start + len(missing))))
        return len(missing)

    def select(self, keep: np.ndarray) -> _Vocab:
        """A frozen vocabulary of the terms ``keep`` (ids, ascending), renumbered ``0..``."""
        f = self.n_frozen
        if not self.new and keep.size == f:
            return _Vocab(self.blob, self.off, self.hsort, self.hperm)  # all kept: same arrays
        blob, off = self.blob, self.off
        h_by_tid = np.empty(f, dtype=np.uint64)
        h_by_tid[self.hperm] = self.hsort
        if self.new:
            nblob, noff = _encode_terms(self.new)
            h_by_tid = np.concatenate((h_by_tid, _hash_spans(nblob, noff)))
            blob = np.concatenate((blob, nblob))
            off = np.concatenate((off, off[-1] + noff[1:]))
        if keep.size == off.size - 1:  # every term kept (a first build's save): no gather
            new_blob, new_off, h = blob, off, h_by_tid
        else:
            new_blob, new_off = _gather_spans(blob, off, keep.astype(np.int64))
            h = h_by_tid[keep]
        perm = np.argsort(h, kind="stable").astype(np.uint32)
        return _Vocab(new_blob, new_off, h[perm], perm)


def _encode_doc_terms(off: np.ndarray, tids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The doc -> terms CSR (``off`` ``<i8[docs + 1]``, ``tids`` ``<u4`` ascending per doc)
    as ``lo`` (``<u2[len(tids)]``: the low 16 bits of each delta, the first term id of a doc
    being its delta from 0), ``xpos`` (``<i8``, ascending: the positions whose delta is
    2**16 or more) and ``xhi`` (``<u2``: those deltas' high 16 bits; term ids < 2**32).
    Computed in pieces of :data:`_MERGE_PIECE` postings (bounded temporaries)."""
    n = tids.size
    lo = np.empty(n, dtype="<u2")
    xpos, xhi = [], []
    starts = off[:-1][np.diff(off) > 0]
    for a in range(0, n, _MERGE_PIECE):
        z = min(a + _MERGE_PIECE, n)
        d = np.empty(z - a, dtype=np.uint32)
        d[0] = (int(tids[a]) - (int(tids[a - 1]) if a else 0)) & 0xFFFFFFFF
        np.subtract(tids[a + 1 : z], tids[a : z - 1], out=d[1:])  # wraps at a doc's start: fixed next
        s = starts[(starts >= a) & (starts < z)]
        d[s - a] = tids[s]
        lo[a:z] = d.astype("<u2")  # the low 16 bits
        big = np.flatnonzero(d > 0xFFFF)
        if big.size:
            xpos.append(big + a)
            xhi.append((d[big] >> 16).astype("<u2"))
    return (
        lo,
        np.concatenate(xpos).astype("<i8") if xpos else np.zeros(0, dtype="<i8"),
        np.concatenate(xhi) if xhi else np.zeros(0, dtype="<u2"),
    )


def _decode_doc_terms(off: np.ndarray, lo: np.ndarray, xpos: np.ndarray, xhi: np.ndarray, doc: int) -> list[int]:
    """The ascending term ids of ``doc`` from :func:`_encode_doc_terms`'s columns."""
    a, z = int(off[doc]), int(off[doc + 1])
    d = lo[a:z].astype(np.int64)
    if xpos.size:
        i0, i1 = int(np.searchsorted(xpos, a)), int(np.searchsorted(xpos, z))
        if i1 > i0:
            d[np.asarray(xpos[i0:i1], dtype=np.int64) - a] += np.asarray(xhi[i0:i1], dtype=np.int64) << 16
    return np.cumsum(d).tolist()


def _same_dir(a: Path, b: Path) -> bool:
    """``a`` and ``b`` are one folder (False when ``a`` is gone: renamed or deleted)."""
    try:
        return a.samefile(b)
    except OSError:
        return False


def _check_slot(slot: object) -> int:
    s = operator.index(slot)  # type: ignore[arg-type]
    if s < 0:
        raise ValueError(f"slot must be >= 0, got {s}")
    return s


class BM25Index:
    """BM25 Okapi index over integer slots, updatable one document at a time.

    ``k1`` (term-frequency saturation, > 0) and ``b`` (length normalisation, 0..1) are the
    usual BM25 parameters; defaults 1.2 / 0.75 as in Lucene. See the module docstring for the
    exact formula. Raises ``ValueError`` for parameters outside those ranges.
    """

    def __init__(self, k1: float = 1.2, b: float = 0.75) -> None:
        if not k1 > 0 or not 0.0 <= b <= 1.0:
            raise ValueError(f"BM25 needs k1 > 0 and 0 <= b <= 1, got k1={k1}, b={b}")
        self.k1 = float(k1)
        self.b = float(b)
        self._reset()

    def _reset(self) -> None:
        self._vocab = _Vocab()
        self._df = array("I")  # term id -> live document frequency (exact after _flush)
        # postings: CSR block + per-term tails (see the module docstring)
        self._base: np.ndarray = np.zeros(0, dtype="<u4")  # interleaved (doc, tf), grouped by term
        self._base_off: np.ndarray = np.zeros(1, dtype=np.int64)  # term id -> offset in pairs
        self._tail: dict[int, array] = {}  # term id -> interleaved (doc, tf) after the block
        self._tail_pairs = 0
        # buffered additions: per document its doc number and number of distinct terms;
        # per row the term id and tf
        self._p_docs = array("I")
        self._p_nterms = array("I")
        self._p_tids = array("I")
        self._p_tfs = array("I")
        self._slot_doc = array("i")  # slot -> doc (-1: none)
        self._doc_slot = array("I")  # doc -> slot
        self._dl = array("I")  # doc -> length in tokens
        self._alive = bytearray()  # doc -> 1 live / 0 dead
        self._doc_terms: dict[int, array] = {}  # doc -> distinct term ids, while in the tails
        self._rm_block = array("I")  # removed docs whose df decrements wait for a block scan
        # doc -> term ids of the docs saved or loaded (docs < _dt_n), memory-mapped (save/load)
        self._dt_n = 0
        self._dt_off: np.ndarray = np.zeros(1, dtype=np.int64)
        self._dt_lo: np.ndarray = np.zeros(0, dtype=np.uint16)  # see _encode_doc_terms
        self._dt_xpos: np.ndarray = np.zeros(0, dtype=np.int64)
        self._dt_xhi: np.ndarray = np.zeros(0, dtype=np.uint16)
        self._n_live = 0
        self._n_live_terms = 0
        self._total_len = 0
        self._dead = 0
        self._dead_at_merge = 0  # the block holds postings of dead docs iff _dead differs
        # doc -> k1·(1 − b + b·dl/avgdl) for the current N and total length (None: stale);
        # made by the first search after a change (:meth:`_norms`)
        self._norm: np.ndarray | None = None
        # work arrays of a search (:meth:`_buffers`), all zero between searches
        self._bufs: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    # --- size ----------------------------------------------------------------------------
    def __len__(self) -> int:
        """Number of live documents."""
        return self._n_live

    def _doc(self, slot: int) -> int:
        sd = self._slot_doc
        return sd[slot] if 0 <= slot < len(sd) else -1

    def __contains__(self, slot: object) -> bool:
        try:
            return self._doc(operator.index(slot)) >= 0  # type: ignore[arg-type]
        except TypeError:
            return False

    @property
    def n_terms(self) -> int:
        """Number of distinct terms that occur in at least one live document."""
        self._flush()
        return self._n_live_terms

    def df(self, term: str) -> int:
        """Number of live documents containing ``term`` (0 if unknown). With the tokenizer's
        pair tokens, ``df("модуль.метод")`` counts the chunks that call ``Модуль.Метод``."""
        tid = self._vocab.get(term)
        if tid is None:
            return 0
        self._flush()
        return self._df[tid]

    def coverage(self, query_tokens: list[str]) -> float:
        """Share of the distinct query tokens that occur in at least one live document, in
        [0, 1] (0.0 for an empty query or index).

        A cheap "does this channel have anything to say" signal for fusion: an English
        question over Russian code has most of its tokens unknown, and a full-weight vote for
        whatever few tokens happen to match adds noise (``shared/research/peer_baseline.md``,
        trap 3).
        """
        distinct = set(query_tokens)
        if not distinct or not self._n_live:
            return 0.0
        known = sum(1 for t in distinct if self.df(t) > 0)
        return known / len(distinct)

    def slots(self) -> np.ndarray:
        """Live slots (``int64``), in insertion order (compaction keeps that order)."""
        live = np.flatnonzero(np.frombuffer(self._alive, dtype=np.uint8))
        return _u32(self._doc_slot)[live].astype(np.int64)

    # --- updates -------------------------------------------------------------------------
    def _intern(self, terms: Iterable[str]) -> None:
        n_new = self._vocab.intern(terms)
        if n_new:
            self._df.frombytes(bytes(4 * n_new))

    def add(self, slot: int, tokens: Iterable[str]) -> None:
        """Index the document at ``slot`` with its tokens (order irrelevant, repeats = term
        frequency).

        Replaces the document if ``slot`` is already indexed. An empty token list is a valid,
        unmatchable document that still counts in ``N`` and ``avgdl``. Cost: O(len(tokens)),
        all of it in C (plus a vectorised vocabulary lookup for terms first seen since a
        load); the postings are written by the next :meth:`flush` (any read does it).
        ``ValueError``/``TypeError`` for a negative or non-integer slot.
        """
        slot = _check_slot(slot)
        if self._doc(slot) >= 0:
            self._remove_slot(slot)
        counts = Counter(tokens)
        self._intern(counts)
        ids = self._vocab.ids
        self._add_doc(slot, array("I", map(ids.__getitem__, counts)), array("I", counts.values()))

    def term_ids(self, terms: Sequence[str]) -> np.ndarray:
        """Term ids (``uint32[len(terms)]``) of ``terms``, new terms added to the vocabulary:
        the cold-build path maps a worker batch's distinct tokens once, then passes each
        chunk's token ids to :meth:`add_term_ids` (no per-occurrence ``str``)."""
        self._intern(dict.fromkeys(terms))
        ids = self._vocab.ids
        return np.fromiter(map(ids.__getitem__, terms), dtype=np.uint32, count=len(terms))

    def add_term_ids(self, slot: int, term_ids: np.ndarray | Sequence[int]) -> None:
        """:meth:`add` with the document given as term ids from :meth:`term_ids`, one per
        token occurrence (any order; repeats = term frequency). Same result as ``add`` with
        the tokens. ``ValueError`` for an id that is not a term of this index."""
        slot = _check_slot(slot)
        tids = np.asarray(term_ids, dtype=np.int64)
        if tids.size and (int(tids.min()) < 0 or int(tids.max()) >= len(self._vocab)):
            raise ValueError(f"term id out of range for slot {slot}")
        if self._doc(slot) >= 0:
            self._remove_slot(slot)
        uniq, tfs = np.unique(tids, return_counts=True)
        self._add_doc(slot, array("I", uniq.astype("<u4").tobytes()), array("I", tfs.astype("<u4").tobytes()))

    def _add_doc(self, slot: int, tids: array, tfs: array) -> None:
        doc = len(self._doc_slot)
        self._norm = None
        sd = self._slot_doc
        if slot >= len(sd):
            sd.frombytes(b"\xff" * (4 * (slot + 1 - len(sd))))
        sd[slot] = doc
        self._doc_slot.append(slot)
        length = sum(tfs)
        self._dl.append(length)
        self._alive.append(1)
        self._total_len += length
        self._n_live += 1
        self._p_docs.append(doc)
        self._p_nterms.append(len(tids))
        self._p_tids.extend(tids)
        self._p_tfs.extend(tfs)

    def flush(self) -> None:
        """Write buffered additions into the postings and buffered removals into ``df``
        (searching and every other read do this by themselves; call it to take the cost at a
        chosen moment, e.g. after a bulk build). A few documents are appended to the per-term
        tails; a buffer of more than 1/32 of the block's postings (or 4,096) is merged into a
        new block."""
        if self._rm_block:
            self._apply_block_removals()
        self._flush_rows()

    def _flush_rows(self) -> None:
        """The additions part of :meth:`flush` (removals waiting for a block scan stay
        buffered unless a merge needs them)."""
        n_rows = len(self._p_tids)
        if not n_rows:
            return
        if n_rows >= max(_MERGE_MIN_ROWS, self._base.size // 32):
            self._merge()
            return
        df, tail, doc_terms = self._df, self._tail, self._doc_terms
        p_tids, p_tfs = self._p_tids, self._p_tfs
        row = 0
        for doc, nt in zip(self._p_docs, self._p_nterms):
            doc_terms[doc] = p_tids[row : row + nt]  # needed to uncount it while in the tails
            for j in range(row, row + nt):
                tid = p_tids[j]
                t = tail.get(tid)
                if t is None:
                    t = tail[tid] = array("I")
                t.append(doc)
                t.append(p_tfs[j])
                if df[tid] == 0:
                    self._n_live_terms += 1
                df[tid] += 1
            row += nt
        self._tail_pairs += n_rows
        self._clear_pending()
        if self._tail_pairs >= max(_MERGE_MIN_ROWS, self._base.size // 8):
            self._merge()

    def _clear_pending(self) -> None:
        self._p_docs = array("I")
        self._p_nterms = array("I")
        self._p_tids = array("I")
        self._p_tfs = array("I")

    def _flush(self) -> None:
        if self._p_tids or self._rm_block:
            self.flush()

    def _apply_block_removals(self) -> None:
        """``df`` decrements of the removed documents whose postings are in the block: one
        pass over the block's doc column for all of them."""
        gone = np.zeros(len(self._doc_slot), dtype=bool)
        gone[np.frombuffer(self._rm_block, dtype=np.uint32)] = True
        self._rm_block = array("I")
        pos = np.flatnonzero(gone[self._base[0::2]])
        if not pos.size:
            return
        tids = np.searchsorted(self._base_off, pos, side="right") - 1
        uniq, cnt = np.unique(tids, return_counts=True)
        df = np.frombuffer(self._df, dtype=np.uint32)
        after = df[uniq].astype(np.int64) - cnt
        df[uniq] = after
        self._n_live_terms -= int(np.count_nonzero(after == 0))
        del df

    def _merge(self) -> None:
        """One new CSR block from the block, the tails and the buffer (dead documents'
        postings dropped); updates ``df`` for the buffered rows. Every live document's
        postings are in the block afterwards, so their term lists are dropped.

        A counting sort by term in pieces of at most :data:`_MERGE_PIECE` postings: the
        new block's offsets come from the per-term counts, then each piece of the block,
        of the tails and of the buffer is stably sorted by term and scattered behind the
        postings its terms already have (block, then tails, then buffer: docs ascending per
        term). Beyond the old and new postings themselves, it holds O(piece) temporaries
        (at ``bench --scale 20``: ~0.1 GB instead of ~2.5 GB for one sort of everything)."""
        if self._rm_block:
            self._apply_block_removals()
        n_terms = len(self._vocab)
        p_tids = np.frombuffer(self._p_tids, dtype=np.uint32)
        alive = np.frombuffer(self._alive, dtype=np.uint8) if self._dead else None
        base = np.asarray(self._base)
        base_off = np.asarray(self._base_off)
        base_terms = base_off.size - 1
        base_rows = base.view("<u8") if base.size else np.zeros(0, dtype="<u8")
        p_docs = np.frombuffer(self._p_docs, dtype=np.uint32)
        p_nterms = np.frombuffer(self._p_nterms, dtype=np.uint32)
        p_tfs = np.frombuffer(self._p_tfs, dtype=np.uint32)
        row_end = np.cumsum(p_nterms, dtype=np.int64) if p_docs.size else np.zeros(0, dtype=np.int64)

        def block_pieces():
            # term ranges of the block of at most _MERGE_PIECE postings (at least one term)
            t0 = 0
            while t0 < base_terms:
                t1 = int(np.searchsorted(base_off, base_off[t0] + _MERGE_PIECE, side="right")) - 1
                t1 = min(max(t1, t0 + 1), base_terms)
                a, z = int(base_off[t0]), int(base_off[t1])
                tids = np.repeat(np.arange(t0, t1, dtype=np.uint32), np.diff(base_off[t0 : t1 + 1]))
                yield tids, base_rows[a:z], True
                t0 = t1

        def tail_pieces():
            if self._tail:
                rows = np.concatenate([np.frombuffer(t, dtype="<u8") for t in self._tail.values()])
                tids = np.repeat(
                    np.fromiter(self._tail, dtype=np.uint32, count=len(self._tail)),
                    np.fromiter((len(t) // 2 for t in self._tail.values()), dtype=np.int64, count=len(self._tail)),
                )
                yield tids, rows, False

        def buffer_pieces():
            # document ranges of the buffer of at most _MERGE_PIECE rows (at least one doc)
            d0, n = 0, p_docs.size
            while d0 < n:
                r0 = int(row_end[d0 - 1]) if d0 else 0
                d1 = int(np.searchsorted(row_end, r0 + _MERGE_PIECE, side="right"))
                d1 = min(max(d1, d0 + 1), n)
                r1 = int(row_end[d1 - 1])
                docs = np.repeat(p_docs[d0:d1], p_nterms[d0:d1]).astype("<u8")
                rows = docs | (p_tfs[r0:r1].astype("<u8") << np.uint64(32))
                yield p_tids[r0:r1], rows, False
                d0 = d1

        def live(tids, rows):
            if alive is None:
                return tids, rows
            keep = alive[(rows & np.uint64(0xFFFFFFFF)).astype(np.int64)] == 1
            return tids[keep], rows[keep]

        def pieces():
            yield from block_pieces()
            yield from tail_pieces()
            yield from buffer_pieces()

        # pass 1: live postings per term
        counts = np.zeros(n_terms, dtype=np.int64)
        if alive is None and base_terms:
            counts[:base_terms] += np.diff(base_off)
            first = (tail_pieces(), buffer_pieces())
        else:
            first = (block_pieces(), tail_pieces(), buffer_pieces())
        for gen in first:
            for tids, rows, _ in gen:
                tids, rows = live(tids, rows)
                counts += np.bincount(tids, minlength=n_terms)
        new_off = np.zeros(n_terms + 1, dtype=np.int64)
        np.cumsum(counts, out=new_off[1:])
        # pass 2: scatter each piece behind what its terms already hold
        out = np.empty(int(new_off[-1]), dtype="<u8")
        cursor = new_off[:-1].copy()
        for tids, rows, ordered in pieces():
            tids, rows = live(tids, rows)
            if not tids.size:
                continue
            if not ordered:
                order = _stable_argsort(tids)
                tids, rows = tids[order], rows[order]
                del order
            cnt = np.bincount(tids, minlength=n_terms)
            first_of = np.cumsum(cnt) - cnt  # each term's first position in the piece
            dest = cursor[tids] + (np.arange(tids.size, dtype=np.int64) - first_of[tids])
            out[dest] = rows
            cursor += cnt
            del dest, first_of, cnt
        if p_tids.size:
            df = np.frombuffer(self._df, dtype=np.uint32).astype(np.int64)
            df += np.bincount(p_tids, minlength=n_terms)
            self._df = array("I", df.astype(np.uint32).tobytes())
            self._n_live_terms = int(np.count_nonzero(df))
            del df
        self._base = out.view("<u4")
        self._base_off = new_off
        self._tail = {}
        self._tail_pairs = 0
        self._doc_terms = {}
        self._dead_at_merge = self._dead
        self._clear_pending()

    def _pairs(self, tid: int) -> np.ndarray:
        """All postings of term ``tid`` (flushed), interleaved (doc, tf)."""
        off = self._base_off
        if tid + 1 < off.size:
            block = self._base[2 * int(off[tid]) : 2 * int(off[tid + 1])]
        else:
            block = self._base[:0]
        t = self._tail.get(tid)
        if t is None:
            return block
        return np.concatenate((block, np.frombuffer(t, dtype=np.uint32)))

    def remove(self, slot: int) -> bool:
        """Remove the document at ``slot``; returns False if none is indexed there.

        Cost: O(distinct terms of the document) while its postings are in the tails; for
        one in the block the ``df`` decrements wait for the next read (one pass over the
        block for all such removals). Occasionally triggers a compaction (O(all postings),
        amortised over at least ``N/2`` removals).
        """
        try:
            s = operator.index(slot)
        except TypeError:
            return False
        if self._doc(s) < 0:
            return False
        self._remove_slot(s)
        return True

    def _remove_slot(self, slot: int) -> None:
        if self._p_tids:
            self._flush_rows()  # the document's own rows must be counted before it is uncounted
        doc = self._slot_doc[slot]
        self._slot_doc[slot] = -1
        self._n_live -= 1
        if not self._n_live:
            self._reset()
            return
        tids = self._doc_terms.pop(doc, None)
        if tids is None and doc < self._dt_n:
            tids = _decode_doc_terms(self._dt_off, self._dt_lo, self._dt_xpos, self._dt_xhi, doc)
        if tids is None:
            self._rm_block.append(doc)
        else:
            df = self._df
            for tid in tids:
                df[tid] -= 1
                if df[tid] == 0:
                    self._n_live_terms -= 1
        self._total_len -= self._dl[doc]
        self._alive[doc] = 0
        self._norm = None
        self._dead += 1
        if self._dead >= _COMPACT_MIN_DEAD and self._dead > _COMPACT_DEAD_RATIO * self._n_live:
            self.compact()

    def compact(self) -> None:
        """Drop tombstones and unused terms, renumbering docs and term ids. O(all postings).

        Called automatically by :meth:`remove` and by :meth:`save`; scores and results do
        not change. Afterwards the vocabulary is one frozen blob (no per-term ``str``)."""
        self._flush()
        if len(self._p_tids) or self._tail or self._dead != self._dead_at_merge:
            self._merge()
        counts = np.diff(self._base_off)
        keep = np.flatnonzero(counts)  # terms with live postings (the block holds no dead ones)
        if not self._dead and keep.size == len(self._vocab) and not self._vocab.new:
            return
        live = np.flatnonzero(np.frombuffer(self._alive, dtype=np.uint8))
        base = self._base
        if self._dead:
            remap = np.zeros(len(self._doc_slot), dtype=np.uint32)
            remap[live] = np.arange(live.size, dtype=np.uint32)
            pairs = base.reshape(-1, 2)
            base = np.column_stack((remap[pairs[:, 0]], pairs[:, 1])).astype("<u4").ravel()
        vocab = self._vocab.select(keep)
        doc_slot = _u32(self._doc_slot)[live]
        dl = _u32(self._dl)[live]
        self._install(
            vocab, counts[keep], base, np.concatenate(([0], np.cumsum(counts[keep]))).astype(np.int64), doc_slot, dl
        )

    def _install(
        self,
        vocab: _Vocab,
        df: np.ndarray,
        base: np.ndarray,
        base_off: np.ndarray,
        doc_slot: np.ndarray,
        dl: np.ndarray,
    ) -> None:
        """Reset to a clean block (no tails, no buffer, no dead docs)."""
        self._reset()
        n = doc_slot.size
        self._vocab = vocab
        self._df = array("I", df.astype("<u4").tobytes())
        self._base = base
        self._base_off = base_off
        self._doc_slot = array("I", doc_slot.astype("<u4").tobytes())
        n_slots = int(doc_slot.max()) + 1 if n else 0
        sd = np.full(n_slots, -1, dtype="<i4")
        sd[doc_slot] = np.arange(n, dtype="<i4")
        self._slot_doc = array("i", sd.tobytes())
        self._dl = array("I", dl.astype("<u4").tobytes())
        self._alive = bytearray(b"\x01" * n)
        self._n_live = n
        self._n_live_terms = int(np.count_nonzero(df))
        self._total_len = int(dl.sum(dtype=np.int64))

    # --- search --------------------------------------------------------------------------
    def scores(self, query_tokens: list[str]) -> dict:
        """BM25 score of every live document matching at least one query term,
        ``{slot: score}`` (for tests and diagnostics; :meth:`search` is the fast path)."""
        acc = self._accumulate(query_tokens)
        if acc is None:
            return {}
        docs = np.flatnonzero(acc)
        slots = _u32(self._doc_slot)[docs].tolist()
        vals = acc[docs].tolist()
        return dict(zip(slots, vals))

    def _norms(self) -> np.ndarray:
        """``k1·(1 − b + b·dl/avgdl)`` per doc (``float64[docs]``), cached until the next
        add or removal: the same float operations per element as evaluating it per posting,
        so scores are bit-identical, and a query does 5 array operations per posting
        instead of 9 (no gather of ``dl``, no three arithmetic passes)."""
        norm = self._norm
        if norm is None:
            k1, b = self.k1, self.b
            avgdl = self._total_len / self._n_live
            norm = self._norm = k1 * (1.0 - b + b * _u32(self._dl) / avgdl)
        return norm

    def _accumulate(self, query_tokens: list[str]) -> np.ndarray | None:
        """Score array over docs (0 = no match or dead), or None if nothing can match."""
        n = self._n_live
        if n == 0 or self._total_len == 0:
            return None
        self._flush()
        k1 = self.k1
        norm = self._norms()
        alive = np.frombuffer(self._alive, dtype=np.uint8) if self._dead else None
        acc: np.ndarray | None = None
        for tid in self._vocab.get_many(query_tokens):
            if tid is None:
                continue
            df = self._df[tid]
            if df == 0:
                continue
            if acc is None:
                acc = np.zeros(len(self._doc_slot), dtype=np.float64)
            pairs = self._pairs(tid).reshape(-1, 2)
            docs = pairs[:, 0]
            tf = pairs[:, 1].astype(np.float64)
            idf = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
            contrib = (idf * (k1 + 1.0)) * tf / (tf + norm[docs])
            if alive is not None:
                contrib *= alive[docs]
            acc[docs] += contrib
        return acc

    def _buffers(self, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per-doc work arrays of one search, kept between searches (allocating and zeroing
        three arrays over every doc per query cost ~1 ms at 769k docs): the score
        accumulator and the partial scores of the pruning (``float64[n]``) and the candidate
        mark (``bool[n]``). All zero between searches: :meth:`_scored` zeroes what it
        touched before it returns, and drops them if it is interrupted."""
        bufs = self._bufs
        if bufs is None or bufs[0].size != n:
            bufs = self._bufs = (np.zeros(n, dtype=np.float64), np.zeros(n, dtype=np.float64), np.zeros(n, dtype=bool))
        return bufs

    def _term_scores(
        self, pairs: np.ndarray, c: float, norm: np.ndarray, alive: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray]:
        """(docs as ``intp``, contributions ``float64``) of the postings ``pairs`` (``(m, 2)``
        doc, tf) of a term whose ``idf·(k1 + 1)`` is ``c``: ``c·tf / (tf + norm[doc])``, the
        same float operations in the same order as :meth:`_accumulate`, in place."""
        docs = pairs[:, 0].astype(np.intp)
        return docs, _contributions(pairs[:, 1].astype(np.float64), docs, c, norm, alive)

    def _candidate_scores(
        self,
        pairs: np.ndarray,
        mark: np.ndarray,
        cand: np.ndarray,
        c: float,
        norm: np.ndarray,
        alive: np.ndarray | None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`_term_scores` of the postings ``pairs`` whose doc is one of ``cand``
        (ascending docs, marked in ``mark``, ``bool[docs]``). Few candidates for many
        postings (:data:`_PRUNE_SEARCH_RATIO`): a binary search of each in the term's doc
        column (ascending: block, then tails, docs numbered in the order they were added);
        else one gather of ``mark`` per posting (a boolean row selection of the ``(m, 2)``
        pairs was 2-3x slower). Then only the kept postings are scored."""
        col = pairs[:, 0]
        if cand.size * _PRUNE_SEARCH_RATIO < col.size:
            pos = np.searchsorted(col, cand.astype(col.dtype))
            pos[pos == col.size] = col.size - 1
            hit = col[pos] == cand
            sel = pos[hit]
            docs = cand[hit]
        else:
            docs = col.astype(np.intp)
            sel = np.flatnonzero(mark[docs])
            docs = docs[sel]
        return docs, _contributions(pairs[:, 1].take(sel).astype(np.float64), docs, c, norm, alive)

    def _scored(self, query_tokens: list[str], k: int, mask: np.ndarray | None) -> tuple[np.ndarray, np.ndarray] | None:
        """``(docs, scores)`` of the candidates for the top ``k``: the same scores, bit for
        bit, as :meth:`_accumulate` (each doc's terms summed in query order), for a set of
        docs that holds every doc of the top ``k`` (of those ``mask`` allows, a bool array
        by slot, or all) with its ties; None if nothing can match.

        Exact pruning decided up front (no per-posting steps): a term contributes at most
        ``idf·(k1 + 1)`` to a doc (``tf / (tf + norm) < 1``). The terms are scored rarest
        first into partial sums; before a common term, if the bounds of it and every
        commoner one add up to less than the ``k``-th best partial score so far (a lower
        bound of the final ``k``-th score), no doc those terms alone match can reach the
        top ``k``: the candidates are the docs of the rarer terms, and the common terms are
        only read for them (one bool gather per posting instead of scoring it). The final
        scores are then summed again in query order. Queries of fewer than
        :data:`_PRUNE_MIN_POSTINGS` postings, or whose rarer terms would exceed
        :data:`_PRUNE_BUDGET` of them before the bound holds, are scored in full.

        Measured (``bsl-lens bench --scale 20`` tree, 769k chunks, the bench's 100
        doc-comment queries, warm process): most of a slow query's 0.9-1.5 M postings belong
        to 3-6 terms of 100k-490k docs whose bounds (1-4 each) sum far below the 100th
        score (15-60)."""
        n = self._n_live
        if n == 0 or self._total_len == 0:
            return None
        self._flush()
        df_of = self._df
        occ = [(tid, df_of[tid]) for tid in self._vocab.get_many(query_tokens) if tid is not None and df_of[tid]]
        if not occ:
            return None
        k1 = self.k1
        norm = self._norms()
        alive = np.frombuffer(self._alive, dtype=np.uint8) if self._dead else None
        cs = [math.log(1.0 + (n - df + 0.5) / (df + 0.5)) * (k1 + 1.0) for _, df in occ]
        acc, part, mark = self._buffers(len(self._doc_slot))
        try:
            return self._scored_into(occ, cs, k, mask, norm, alive, acc, part, mark)
        except BaseException:
            self._bufs = None  # possibly dirty
            raise

    def _scored_into(self, occ, cs, k, mask, norm, alive, acc, part, mark):
        """The body of :meth:`_scored` on its zeroed work arrays (zeroed again on return)."""
        pairs_of = self._pairs
        total = sum(df for _, df in occ)
        cache: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        skip_from = None  # position in `order` from which the terms are only read for candidates
        touched = None
        scored = False  # some terms were scored into `part` (and their docs marked)
        if len(occ) > 1 and total >= _PRUNE_MIN_POSTINGS and k > 0:
            order = sorted(range(len(occ)), key=lambda i: occ[i][1])
            rest = [0.0] * (len(order) + 1)  # rest[j]: bound of the terms order[j:]
            for j in range(len(order) - 1, -1, -1):
                rest[j] = rest[j + 1] + cs[order[j]]
            done = 0.0  # bound of the terms scored so far (>= any partial score)
            budget = _PRUNE_BUDGET * total
            used = 0
            for j, i in enumerate(order):
                tid, df = occ[i]
                if scored and df >= _PRUNE_CHECK_DF and rest[j] * _PRUNE_MARGIN < done:
                    touched = np.flatnonzero(mark)  # the docs of the terms scored so far
                    ok = touched
                    if mask is not None:
                        slots = _u32(self._doc_slot)[touched]
                        keep = slots < mask.size
                        keep[keep] = mask[slots[keep]]
                        ok = touched[keep]
                    if ok.size >= k:
                        vals = part[ok]
                        kth = float(np.partition(vals, ok.size - k)[ok.size - k])
                        if rest[j] * _PRUNE_MARGIN < kth:
                            skip_from = j
                            break
                if used > budget:
                    break
                docs, c = self._term_scores(pairs_of(tid).reshape(-1, 2), cs[i], norm, alive)
                cache[i] = (docs, c)
                part[docs] += c
                mark[docs] = True
                scored = True
                done += cs[i]
                used += docs.size
            if scored and skip_from is None:
                touched = np.flatnonzero(mark)
                part[touched] = 0.0
        if skip_from is not None:
            # the candidates: of the docs scored so far, those whose partial score plus the
            # bound of the terms not yet read reaches the k-th partial score (a lower bound of
            # the final k-th score); no other doc can be in the top k. The skipped terms are
            # read rarest first for the candidates, and each one read raises the partial
            # scores and lowers the bound, so the candidates only shrink.
            cp = part[touched]  # the candidates' partial scores
            part[touched] = 0.0
            cand = touched
            allowed = None
            if mask is not None:
                slots = _u32(self._doc_slot)[cand]
                allowed = slots < mask.size
                allowed[allowed] = mask[slots[allowed]]
            read: dict[int, tuple[np.ndarray, np.ndarray]] = {}
            for jj in range(skip_from, len(order) + 1):
                keep = (cp + rest[jj]) * _PRUNE_MARGIN >= kth
                if not keep.all():
                    mark[cand[~keep]] = False  # `mark` holds the candidates
                    cand, cp = cand[keep], cp[keep]
                    if allowed is not None:
                        allowed = allowed[keep]
                if jj == len(order):
                    break
                i = order[jj]
                docs, c = self._candidate_scores(pairs_of(occ[i][0]).reshape(-1, 2), mark, cand, cs[i], norm, alive)
                read[i] = (docs, c)
                cp[np.searchsorted(cand, docs)] += c  # docs: ascending, all candidates
                ok = cp if allowed is None else cp[allowed]
                kth = max(kth, float(np.partition(ok, ok.size - k)[ok.size - k]))
            for i in range(len(occ)):
                docs, c = read[i] if i in read else cache[i]
                acc[docs] += c  # in query order: each candidate's sum as in full scoring
            mark[cand] = False
            vals = acc[cand]
            acc[touched] = 0.0
            live = vals != 0.0
            return cand[live], vals[live]
        if scored:
            mark[touched] = False
        for i, (tid, _) in enumerate(occ):
            hit = cache.get(i)
            docs, c = hit if hit is not None else self._term_scores(pairs_of(tid).reshape(-1, 2), cs[i], norm, alive)
            acc[docs] += c
        cand = np.flatnonzero(acc != 0.0)  # (flatnonzero of the float array itself is ~5x slower)
        vals = acc[cand]
        acc[cand] = 0.0
        return cand, vals

    def search(
        self,
        query_tokens: list[str],
        k: int,
        *,
        allow: np.ndarray | Callable | None = None,
        key_of: Callable[[int], str] | Sequence[str | None] | None = None,
    ) -> list[tuple]:
        """Top ``k`` live documents for the query terms: ``[(slot, score), ...]``.

        Scores are descending; equal scores are ordered by ``key_of(slot)`` (the chunk id:
        stable across runs and rebuilds; a sequence is indexed), or by slot without it.
        Terms not in the index contribute nothing; an empty query, ``k <= 0`` or an empty
        index give ``[]``. ``allow``: a bool array indexed by slot (slots at or beyond its
        length are not allowed), or a predicate on the slot called lazily in rank order.
        The same list as scoring every posting (:meth:`_accumulate`, then the top ``k``):
        see :meth:`_scored` for what is skipped.
        """
        if k <= 0:
            return []
        if key_of is not None and not callable(key_of):
            key_of = key_of.__getitem__
        mask = allow if isinstance(allow, np.ndarray) else None
        # no pruning for a predicate (asked lazily in rank order: no k-th score up front) or a
        # mask keeping under half the slots (the rarer terms' allowed docs seldom give a k-th
        # score to bound by: at x20 a scope=metadata search was slower pruned than in full)
        prune = allow is None or (mask is not None and np.count_nonzero(mask) * 2 >= mask.size)
        got = self._scored(query_tokens, k if prune else 0, mask)
        if got is None:
            return []
        cand, vals = got
        if cand.size and mask is not None:
            slots = _u32(self._doc_slot)[cand]
            ok = slots < mask.size
            ok[ok] = mask[slots[ok]]
            cand, vals = cand[ok], vals[ok]
            allow = None
        if cand.size == 0:
            return []
        if allow is None:
            out = self._top(vals, cand, k, key_of)
        else:
            out = []
            verdict: dict[int, bool] = {}
            want = max(4 * k, 64)
            while True:
                out.clear()
                for slot, score in self._top(vals, cand, want, key_of):
                    ok_ = verdict.get(slot)
                    if ok_ is None:
                        ok_ = verdict[slot] = bool(allow(slot))
                    if ok_:
                        out.append((slot, score))
                        if len(out) == k:
                            break
                if len(out) == k or want >= cand.size:
                    break
                want *= 4
        return out

    def _top(self, vals: np.ndarray, cand: np.ndarray, k: int, key_of: Callable | None) -> list[tuple[int, float]]:
        """The best ``k`` of ``cand`` (docs, with their scores ``vals``) as ``(slot, score)``
        by (-score, key), ties at the cut-off resolved by key."""
        if cand.size > k:
            kth = np.partition(vals, cand.size - k)[cand.size - k]
            keep = vals >= kth
            cand, vals = cand[keep], vals[keep]
        slots = _u32(self._doc_slot)[cand].tolist()
        if key_of is None:
            ranked = sorted(zip(vals.tolist(), slots), key=lambda x: (-x[0], x[1]))
        else:
            ranked = sorted(zip(vals.tolist(), slots), key=lambda x: (-x[0], key_of(x[1])))
        return [(slot, score) for score, slot in ranked[:k]]

    # --- persistence: column files -------------------------------------------------------
    def save(self, folder: Path | str, *, remap: bool = True) -> None:
        """Write the index as column files into ``folder`` (created if missing; files of
        the same names are replaced): ``postings.npy`` (``<u4`` (doc, tf) pairs grouped by
        term), ``offsets.npy`` (``<i8``), ``slots.npy`` / ``lengths.npy`` (``<u4`` per doc),
        ``vocab_blob.npy`` (``u1``), ``vocab_off.npy`` (``<i8``), ``vocab_hash.npy``
        (``<u8`` sorted), ``vocab_perm.npy`` (``<u4``) and last ``header.json`` (format,
        parameters, counts, every file's byte size and CRC-32). Compacts first (see
        :meth:`compact`); each array is written straight from memory (no encoded copy),
        and each file is fsynced. The caller makes the folder's appearance atomic (a new
        generation folder: ``ValueError`` for the folder this index is mapped from).
        ``doc_off.npy`` (``<i8``) / ``doc_terms.npy`` (``<u2`` deltas) /
        ``doc_terms_xpos.npy`` (``<i8``) / ``doc_terms_xhi.npy`` (``<u2``) (doc -> term ids,
        :func:`_encode_doc_terms`) make removals of saved documents O(their terms). With ``remap`` the index then reads its block, vocabulary and that
        doc index from the written files (memory-mapped; their RAM copies are freed).
        """
        self.compact()
        folder = Path(folder)
        v = self._vocab
        for arr in (self._base, self._base_off, v.blob, v.off, v.hsort, v.hperm, self._dt_off, self._dt_lo):
            mapped = getattr(arr, "filename", None)
            if mapped and folder.exists() and _same_dir(Path(mapped).parent, folder):
                # rewriting a file that is mapped would pull the pages from under this index
                raise ValueError(f"cannot save a BM25 index into {folder}: it is memory-mapped from there")
        folder.mkdir(parents=True, exist_ok=True)
        doc_off, doc_terms = self._doc_csr()
        lo, xpos, xhi = _encode_doc_terms(doc_off, doc_terms)
        del doc_terms
        cols = {
            "doc_off": doc_off,
            "doc_terms": lo,
            "doc_terms_xpos": xpos,
            "doc_terms_xhi": xhi,
            "postings": np.asarray(self._base, dtype="<u4"),
            "offsets": np.asarray(self._base_off, dtype="<i8"),
            "slots": _u32(self._doc_slot),
            "lengths": _u32(self._dl),
            "vocab_blob": np.asarray(v.blob, dtype=np.uint8),
            "vocab_off": np.asarray(v.off, dtype="<i8"),
            "vocab_hash": np.asarray(v.hsort, dtype="<u8"),
            "vocab_perm": np.asarray(v.hperm, dtype="<u4"),
        }
        files = {name: save_npy_synced(folder / f"{name}.npy", arr) for name, arr in cols.items()}
        header = {
            "format": FORMAT,
            "version": FORMAT_VERSION,
            "k1": self.k1,
            "b": self.b,
            "docs": len(self._doc_slot),
            "terms": len(v),
            "postings": int(self._base_off[-1]),
            "total_len": self._total_len,
            "files": files,
        }
        path = folder / _HEADER
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(header, fh, indent=1)
            fh.flush()
            os.fsync(fh.fileno())
        del cols, doc_off, lo, xpos, xhi
        if remap:
            # from now on read the block, the vocabulary and the doc -> terms index from the
            # files just written: their RAM copies are freed (a cold build ends with the
            # footprint of a warm load)
            m = {
                name: np.load(folder / f"{name}.npy", mmap_mode="r") for name in (*_MAPPED, "vocab_hash", "vocab_perm")
            }
            self._base, self._base_off = m["postings"], m["offsets"]
            self._vocab = _Vocab(m["vocab_blob"], m["vocab_off"], m["vocab_hash"], m["vocab_perm"])
            self._dt_n, self._dt_off = len(self._doc_slot), m["doc_off"]
            self._dt_lo, self._dt_xpos, self._dt_xhi = m["doc_terms"], m["doc_terms_xpos"], m["doc_terms_xhi"]

    def _doc_csr(self) -> tuple[np.ndarray, np.ndarray]:
        """doc -> its term ids of a clean block (after :meth:`compact`), as CSR: offsets
        ``<i8[docs + 1]`` and term ids ``<u4[postings]``, term ids ascending per doc. The
        transpose of the block by a counting sort over pieces of :data:`_MERGE_PIECE`
        postings taken in term order (bounded temporaries)."""
        n = len(self._doc_slot)
        base = np.asarray(self._base)
        docs_all = base[0::2]
        counts = np.bincount(docs_all, minlength=n) if docs_all.size else np.zeros(n, dtype=np.int64)
        off = np.zeros(n + 1, dtype="<i8")
        np.cumsum(counts, out=off[1:])
        del counts
        out = np.empty(int(off[-1]), dtype="<u4")
        term_off = np.asarray(self._base_off)
        n_terms = term_off.size - 1
        cursor = off[:-1].copy()
        t0 = 0
        while t0 < n_terms:
            t1 = int(np.searchsorted(term_off, term_off[t0] + _MERGE_PIECE, side="right")) - 1
            t1 = min(max(t1, t0 + 1), n_terms)
            a, z = int(term_off[t0]), int(term_off[t1])
            docs = np.ascontiguousarray(docs_all[a:z])
            tids = np.repeat(np.arange(t0, t1, dtype="<u4"), np.diff(term_off[t0 : t1 + 1]))
            order = _stable_argsort(docs)  # per doc its terms stay ascending
            docs, tids = docs[order], tids[order]
            del order
            cnt = np.bincount(docs, minlength=n)
            first_of = np.cumsum(cnt) - cnt
            out[cursor[docs] + (np.arange(docs.size, dtype=np.int64) - first_of[docs])] = tids
            cursor += cnt
            del docs, tids, cnt, first_of
            t0 = t1
        return off, out

    @classmethod
    def load(cls, folder: Path | str, *, mmap: bool = True, verify: bool = False) -> BM25Index:
        """Open an index written by :meth:`save`. With ``mmap`` the postings, offsets and
        vocabulary are memory-mapped read-only (pages are read on use; the files must stay
        unchanged while the index lives -- replacing them by a rename is fine); per-document
        columns and ``df`` are copied into RAM (they change with increments).

        Checks always: the header, every file's size, dtypes and shapes against the counts,
        offsets monotone and consistent with the postings, slots distinct; with ``verify``
        also each file's CRC-32 and every posting (doc in range, tf sums equal to the
        lengths). Raises :class:`BM25Error` naming the folder otherwise.
        """
        folder = Path(folder)
        try:
            with open(folder / _HEADER, encoding="utf-8") as fh:
                header = json.load(fh)
        except (OSError, ValueError) as exc:
            raise BM25Error(f"BM25 index in {folder}: cannot read {_HEADER}: {exc}") from exc
        if not isinstance(header, dict) or header.get("format") != FORMAT or header.get("version") != FORMAT_VERSION:
            raise BM25Error(f"BM25 index in {folder}: not format {FORMAT} v{FORMAT_VERSION}")
        try:
            n_docs, n_terms, n_post = int(header["docs"]), int(header["terms"]), int(header["postings"])
            k1, b, files = float(header["k1"]), float(header["b"]), header["files"]
            want = {
                "doc_off": ("<i8", (n_docs + 1,)),
                "doc_terms": ("<u2", (n_post,)),
                "doc_terms_xpos": ("<i8", None),
                "doc_terms_xhi": ("<u2", None),
                "postings": ("<u4", (2 * n_post,)),
                "offsets": ("<i8", (n_terms + 1,)),
                "slots": ("<u4", (n_docs,)),
                "lengths": ("<u4", (n_docs,)),
                "vocab_blob": ("|u1", None),
                "vocab_off": ("<i8", (n_terms + 1,)),
                "vocab_hash": ("<u8", (n_terms,)),
                "vocab_perm": ("<u4", (n_terms,)),
            }
            cols = {}
            for name, (dtype, shape) in want.items():
                path = folder / f"{name}.npy"
                meta = files[name]
                if path.stat().st_size != int(meta["bytes"]):
                    raise BM25Error(
                        f"BM25 index in {folder}: {path.name} has {path.stat().st_size} bytes, header says {meta['bytes']}"
                    )
                arr = np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)
                if arr.dtype.str != dtype or arr.ndim != 1 or (shape is not None and arr.shape != shape):
                    raise BM25Error(
                        f"BM25 index in {folder}: {path.name} is {arr.dtype.str}{arr.shape}, expected {dtype}{shape}"
                    )
                if verify and zlib.crc32(memoryview(np.ascontiguousarray(arr)).cast("B")) != int(meta["crc32"]):
                    raise BM25Error(f"BM25 index in {folder}: {path.name} fails its CRC-32")
                cols[name] = arr
        except (OSError, KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, BM25Error):
                raise
            raise BM25Error(f"BM25 index in {folder}: {exc}") from exc
        off, post, slots, lengths = cols["offsets"], cols["postings"], cols["slots"], cols["lengths"]
        voff, vblob = cols["vocab_off"], cols["vocab_blob"]
        counts = np.diff(off)
        if (
            off[0] != 0
            or off[-1] != n_post
            or (counts.size and int(counts.min()) <= 0)
            or voff[0] != 0
            or voff[-1] != vblob.size
            or (n_terms and int(np.diff(voff).min()) < 0)
            or (n_docs and (int(slots.max()) >= 1 << 31 or int(np.bincount(slots).max()) > 1))
            or int(lengths.sum(dtype=np.int64)) != int(header.get("total_len", -1))
            or cols["doc_off"][0] != 0
            or cols["doc_off"][-1] != n_post
            or (n_docs and int(np.diff(cols["doc_off"]).min()) < 0)
            or cols["doc_terms_xpos"].size != cols["doc_terms_xhi"].size
            or (
                cols["doc_terms_xpos"].size
                and not 0 <= int(cols["doc_terms_xpos"][0]) <= int(cols["doc_terms_xpos"][-1]) < n_post
            )
        ):
            raise BM25Error(f"BM25 index in {folder}: inconsistent columns (offsets, slots or lengths)")
        if verify and post.size:
            docs = post[0::2]
            if int(docs.max()) >= n_docs or not np.array_equal(
                np.bincount(docs, weights=post[1::2], minlength=n_docs), lengths
            ):
                raise BM25Error(f"BM25 index in {folder}: postings do not match the document lengths")
        try:
            index = cls(k1, b)
        except ValueError as exc:
            raise BM25Error(f"BM25 index in {folder}: {exc}") from exc
        if verify and n_post:
            top = 0  # the largest term id (each doc's last: ascending)
            for d in range(n_docs):
                ids = _decode_doc_terms(
                    cols["doc_off"], cols["doc_terms"], cols["doc_terms_xpos"], cols["doc_terms_xhi"], d
                )
                top = max(top, ids[-1] if ids else 0)
            if top >= n_terms:
                raise BM25Error(f"BM25 index in {folder}: doc -> terms index out of range")
        vocab = _Vocab(vblob, voff, cols["vocab_hash"], cols["vocab_perm"])
        index._install(vocab, counts, post, off, np.asarray(slots), np.asarray(lengths))
        index._dt_n, index._dt_off = n_docs, cols["doc_off"]
        index._dt_lo, index._dt_xpos, index._dt_xhi = cols["doc_terms"], cols["doc_terms_xpos"], cols["doc_terms_xhi"]
        return index


def _contributions(
    tf: np.ndarray, docs: np.ndarray, c: float, norm: np.ndarray, alive: np.ndarray | None
) -> np.ndarray:
    """``c·tf / (tf + norm[docs])`` (times ``alive[docs]`` when given), computed in place in
    ``tf`` (``float64``, one per posting of ``docs``): the same float operations in the same
    order as :meth:`BM25Index._accumulate`, so pruned and full scoring agree bit for bit."""
    den = norm.take(docs)
    np.add(tf, den, out=den)
    np.multiply(tf, c, out=tf)
    np.divide(tf, den, out=tf)
    if alive is not None:
        tf *= alive[docs]
    return tf
