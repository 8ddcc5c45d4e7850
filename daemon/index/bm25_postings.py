"""The postings block of :class:`daemon.index.bm25.BM25Index` and its upkeep, as array functions.

The block is CSR: one ``<u4`` array of interleaved ``(doc, tf)`` pairs grouped by term (docs
ascending per term) and ``int64`` term offsets into it, in pairs. :func:`merge_postings`
builds a new block from the old one, the per-term tails and the buffered additions;
:func:`doc_csr` transposes a block into the doc -> terms index that makes removals of saved
documents cheap, and :func:`encode_doc_terms` / :func:`decode_doc_terms` store that index as
16-bit deltas. Every pass works on pieces of at most :data:`MERGE_PIECE` postings, so its
temporaries stay bounded however large the block is (``docs/internals.md``, "BM25").
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator

import numpy as np

#: Postings per piece of a merge's counting sort, of the transposition and of the doc -> terms
#: encoding: bounds their temporaries to ~60 bytes per posting of one piece.
MERGE_PIECE = 1 << 19

#: One piece of postings to merge: term ids, ``(doc, tf)`` rows as ``<u8`` (doc in the low 32
#: bits), and whether the rows are already ordered by term.
_Piece = tuple[np.ndarray, np.ndarray, bool]


def stable_argsort(keys: np.ndarray) -> np.ndarray:
    """Stable argsort of ``uint32`` keys as two 16-bit passes (numpy radix-sorts 16-bit keys
    stably, faster than its general stable sort)."""
    lo = np.argsort((keys & 0xFFFF).astype(np.uint16), kind="stable")
    if not keys.size or int(keys.max()) <= 0xFFFF:
        return lo
    hi = (keys >> 16).astype(np.uint16)[lo]
    return lo[np.argsort(hi, kind="stable")]


def _piece_end(off: np.ndarray, start: int, n: int) -> int:
    """The end of a piece that starts at entry ``start`` of the offsets ``off`` (``n``
    entries): as many entries as hold at most :data:`MERGE_PIECE` rows, at least one."""
    end = int(np.searchsorted(off, off[start] + MERGE_PIECE, side="right")) - 1
    return min(max(end, start + 1), n)


def _block_pieces(base_off: np.ndarray, base_rows: np.ndarray) -> Iterator[_Piece]:
    """The block in term ranges of at most :data:`MERGE_PIECE` postings (ordered by term)."""
    n_terms = base_off.size - 1
    t0 = 0
    while t0 < n_terms:
        t1 = _piece_end(base_off, t0, n_terms)
        a, z = int(base_off[t0]), int(base_off[t1])
        tids = np.repeat(np.arange(t0, t1, dtype=np.uint32), np.diff(base_off[t0 : t1 + 1]))
        yield tids, base_rows[a:z], True
        t0 = t1


def _tail_pieces(tails: dict[int, array]) -> Iterator[_Piece]:
    """The per-term tails (term id -> interleaved ``(doc, tf)``) as one piece."""
    if tails:
        rows = np.concatenate([np.frombuffer(t, dtype="<u8") for t in tails.values()])
        tids = np.repeat(
            np.fromiter(tails, dtype=np.uint32, count=len(tails)),
            np.fromiter((len(t) // 2 for t in tails.values()), dtype=np.int64, count=len(tails)),
        )
        yield tids, rows, False


def _buffer_pieces(p_docs: np.ndarray, p_nterms: np.ndarray, p_tids: np.ndarray, p_tfs: np.ndarray) -> Iterator[_Piece]:
    """The buffered additions (per document its doc number and number of distinct terms; per
    row a term id and tf) in document ranges of at most :data:`MERGE_PIECE` rows."""
    row_end = np.cumsum(p_nterms, dtype=np.int64) if p_docs.size else np.zeros(0, dtype=np.int64)
    d0, n = 0, p_docs.size
    while d0 < n:
        r0 = int(row_end[d0 - 1]) if d0 else 0
        d1 = int(np.searchsorted(row_end, r0 + MERGE_PIECE, side="right"))
        d1 = min(max(d1, d0 + 1), n)
        r1 = int(row_end[d1 - 1])
        docs = np.repeat(p_docs[d0:d1], p_nterms[d0:d1]).astype("<u8")
        rows = docs | (p_tfs[r0:r1].astype("<u8") << np.uint64(32))
        yield p_tids[r0:r1], rows, False
        d0 = d1


def _live(tids: np.ndarray, rows: np.ndarray, alive: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """The postings of a piece whose doc is alive (all of them when ``alive`` is None)."""
    if alive is None:
        return tids, rows
    keep = alive[(rows & np.uint64(0xFFFFFFFF)).astype(np.int64)] == 1
    return tids[keep], rows[keep]


def merge_postings(
    n_terms: int,
    base: np.ndarray,
    base_off: np.ndarray,
    tails: dict[int, array],
    buffer: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    alive: np.ndarray | None,
) -> tuple[np.ndarray, np.ndarray]:
    """One new block ``(postings <u4, term offsets int64[n_terms + 1])`` holding the live
    postings of the block ``base``/``base_off``, then of the ``tails``, then of the
    ``buffer`` (``p_docs``, ``p_nterms``, ``p_tids``, ``p_tfs``), docs ascending per term.
    ``alive``: ``uint8`` per doc, 1 for a live one (None: every doc is alive).

    A counting sort by term in pieces of at most :data:`MERGE_PIECE` postings: the new
    block's offsets come from the per-term counts, then each piece is stably sorted by term
    and scattered behind the postings its terms already have. Beyond the old and new
    postings themselves it holds O(piece) temporaries."""
    p_docs, p_nterms, p_tids, p_tfs = buffer
    base_terms = base_off.size - 1
    base_rows = base.view("<u8") if base.size else np.zeros(0, dtype="<u8")

    def pieces(with_block: bool = True) -> Iterator[_Piece]:
        if with_block:
            yield from _block_pieces(base_off, base_rows)
        yield from _tail_pieces(tails)
        yield from _buffer_pieces(p_docs, p_nterms, p_tids, p_tfs)

    # pass 1: live postings per term (a block without dead docs is counted by its offsets)
    counts = np.zeros(n_terms, dtype=np.int64)
    count_block = alive is not None or not base_terms
    if not count_block:
        counts[:base_terms] += np.diff(base_off)
    for tids, rows, _ in pieces(count_block):
        tids, rows = _live(tids, rows, alive)
        counts += np.bincount(tids, minlength=n_terms)
    new_off = np.zeros(n_terms + 1, dtype=np.int64)
    np.cumsum(counts, out=new_off[1:])
    # pass 2: scatter each piece behind what its terms already hold
    out = np.empty(int(new_off[-1]), dtype="<u8")
    cursor = new_off[:-1].copy()
    for tids, rows, ordered in pieces():
        tids, rows = _live(tids, rows, alive)
        if not tids.size:
            continue
        if not ordered:
            order = stable_argsort(tids)
            tids, rows = tids[order], rows[order]
            del order
        cnt = np.bincount(tids, minlength=n_terms)
        first_of = np.cumsum(cnt) - cnt  # each term's first position in the piece
        dest = cursor[tids] + (np.arange(tids.size, dtype=np.int64) - first_of[tids])
        out[dest] = rows
        cursor += cnt
        del dest, first_of, cnt
    return out.view("<u4"), new_off


def doc_csr(base: np.ndarray, base_off: np.ndarray, n_docs: int) -> tuple[np.ndarray, np.ndarray]:
    """doc -> its term ids of a clean block (no dead docs), as CSR: offsets ``<i8[docs + 1]``
    and term ids ``<u4[postings]``, term ids ascending per doc. The transpose of the block by
    a counting sort over pieces of :data:`MERGE_PIECE` postings taken in term order."""
    docs_all = base[0::2]
    counts = np.bincount(docs_all, minlength=n_docs) if docs_all.size else np.zeros(n_docs, dtype=np.int64)
    off = np.zeros(n_docs + 1, dtype="<i8")
    np.cumsum(counts, out=off[1:])
    del counts
    out = np.empty(int(off[-1]), dtype="<u4")
    n_terms = base_off.size - 1
    cursor = off[:-1].copy()
    t0 = 0
    while t0 < n_terms:
        t1 = _piece_end(base_off, t0, n_terms)
        a, z = int(base_off[t0]), int(base_off[t1])
        docs = np.ascontiguousarray(docs_all[a:z])
        tids = np.repeat(np.arange(t0, t1, dtype="<u4"), np.diff(base_off[t0 : t1 + 1]))
        order = stable_argsort(docs)  # per doc its terms stay ascending
        docs, tids = docs[order], tids[order]
        del order
        cnt = np.bincount(docs, minlength=n_docs)
        first_of = np.cumsum(cnt) - cnt
        out[cursor[docs] + (np.arange(docs.size, dtype=np.int64) - first_of[docs])] = tids
        cursor += cnt
        del docs, tids, cnt, first_of
        t0 = t1
    return off, out


def encode_doc_terms(off: np.ndarray, tids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The doc -> terms CSR (``off`` ``<i8[docs + 1]``, ``tids`` ``<u4`` ascending per doc)
    as ``lo`` (``<u2[len(tids)]``: the low 16 bits of each delta, the first term id of a doc
    being its delta from 0), ``xpos`` (``<i8``, ascending: the positions whose delta is
    2**16 or more) and ``xhi`` (``<u2``: those deltas' high 16 bits; term ids < 2**32).
    Computed in pieces of :data:`MERGE_PIECE` postings (bounded temporaries)."""
    n = tids.size
    lo = np.empty(n, dtype="<u2")
    xpos, xhi = [], []
    starts = off[:-1][np.diff(off) > 0]
    for a in range(0, n, MERGE_PIECE):
        z = min(a + MERGE_PIECE, n)
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


def decode_doc_terms(off: np.ndarray, lo: np.ndarray, xpos: np.ndarray, xhi: np.ndarray, doc: int) -> list[int]:
    """The ascending term ids of ``doc`` from :func:`encode_doc_terms`'s columns."""
    a, z = int(off[doc]), int(off[doc + 1])
    d = lo[a:z].astype(np.int64)
    if xpos.size:
        i0, i1 = int(np.searchsorted(xpos, a)), int(np.searchsorted(xpos, z))
        if i1 > i0:
            d[np.asarray(xpos[i0:i1], dtype=np.int64) - a] += np.asarray(xhi[i0:i1], dtype=np.int64) << 16
    return np.cumsum(d).tolist()
