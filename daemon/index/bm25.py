"""Incremental BM25 (Okapi, Lucene idf) over integer document slots.

Scoring, for a query given as a list of terms (a repeated term counts once per
occurrence, as in ``bm25s``) and a document ``d`` of length ``dl`` tokens::

    score(d) = Σ_t  idf(t) · tf(t,d)·(k1 + 1) / (tf(t,d) + k1·(1 − b + b·dl/avgdl))
    idf(t)   = ln(1 + (N − df(t) + 0.5) / (df(t) + 0.5))        # Lucene's idf, always > 0

with ``k1 = 1.2`` and ``b = 0.75`` by default (the Lucene / Elasticsearch defaults). ``N`` is
the number of live documents (documents with no tokens count too), ``avgdl`` their mean length
in tokens. This is ``bm25s.BM25(method="lucene")`` times the constant ``k1 + 1``, which
``bm25s`` (like Lucene ≥ 8) leaves out; rankings are identical, and the tests check the scores
against ``bm25s`` to float precision.

Documents are named by the caller's **slots** (non-negative ints: one slot per chunk shared by
every channel, assigned by the chunk store; a freed slot may be given to a later document).
The index keeps no chunk id strings: ties are broken by ``key_of(slot)`` given to
:meth:`BM25Index.search`, filters are a numpy bool mask indexed by slot.

Why hand-written: the daemon changes the corpus on every file-watch batch. ``bm25s``
precomputes per-posting scores that depend on ``N``, ``df`` and ``avgdl``, so every change
would be a full rebuild. Here ``idf`` and ``avgdl`` are computed at query time from live
counters, so :meth:`BM25Index.add` and :meth:`BM25Index.remove` cost O(terms of that
document):

* every added document gets an internal *doc number* (ascending, never reused until a
  compaction renumbers; ``slot -> doc`` and ``doc -> slot`` are two ``array`` columns), so a
  re-used slot never meets the postings of the document it held before;
* postings: a frozen CSR block (:mod:`daemon.index.bm25_postings`) and per term an
  append-only ``array('I')`` *tail* for documents added after the block was built;
* :meth:`BM25Index.add` only counts the document's terms and buffers the ``(term id, tf)``
  rows (C-level: ``Counter``, ``map``, ``array``); the buffer is merged before the next
  read (:meth:`BM25Index.flush`): a few documents go to the tails (O(their terms)), a large
  buffer (a bulk build) or large tails are merged into a new block by a counting sort in
  pieces, so a merge holds the old and the new postings plus a bounded working set;
* a removed document becomes a tombstone (its doc is marked dead and skipped when scoring;
  ``df``, ``N`` and the total length are exact at every read); when dead docs outnumber half
  of the live ones, the index compacts itself (O(postings), amortised O(1) per removal);
* the distinct term ids of a document (needed to decrement ``df`` on removal) are kept in
  RAM only while its postings sit in the tails (the buffer holds them anyway); documents
  saved or loaded find theirs in the saved doc -> terms index (memory-mapped, O(their
  terms)); documents merged into a block since then by one vectorised pass over the block's
  doc column for all removals buffered since the last read. No token lists, no per-document
  Python objects.

The vocabulary is :class:`daemon.index.bm25_vocab.Vocab`. Persistence: :meth:`BM25Index.save`
writes column files and a JSON header (:mod:`daemon.index.bm25_files`);
:meth:`BM25Index.load` memory-maps them read-only. Merges and compactions build new arrays, so
the mapped files are never written; increments after a load go to the tails and the buffer as
usual. Search: :meth:`BM25Index.search` scores exactly with pruning
(:mod:`daemon.index.bm25_scoring`), in work arrays kept between searches.

Not thread-safe: the daemon must serialise calls (a search may merge buffered additions,
it holds buffer views of ``array`` objects that a concurrent ``add`` could not resize, and
its work arrays are shared). Measured sizes and timings: ``docs/internals.md``, "BM25".
"""

from __future__ import annotations

import math
import operator
from array import array
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import numpy as np

from . import bm25_scoring
from .bm25_files import (
    FORMAT,
    FORMAT_VERSION,
    BM25Error,
    check_columns,
    check_doc_terms,
    mapped_columns,
    read_columns,
    same_dir,
    write_columns,
)
from .bm25_postings import decode_doc_terms, doc_csr, encode_doc_terms, merge_postings
from .bm25_vocab import Vocab

__all__ = ["BM25Error", "BM25Index"]

#: Buffered rows (or tail rows) that always go to a merge into a new CSR block.
_MERGE_MIN_ROWS = 4096
#: Compact when the number of dead docs exceeds this fraction of live documents ...
_COMPACT_DEAD_RATIO = 0.5
#: ... and at least this many docs are dead (small indexes never bother).
_COMPACT_MIN_DEAD = 1024


def _u32(data: bytes | array) -> np.ndarray:
    return np.frombuffer(data, dtype="<u4")


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
        self._vocab = Vocab()
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
        self._dt_lo: np.ndarray = np.zeros(0, dtype=np.uint16)  # see bm25_postings.encode_doc_terms
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
        whatever few tokens happen to match adds noise.
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
        for doc, nt in zip(self._p_docs, self._p_nterms, strict=True):
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
        """One new CSR block from the block, the tails and the buffer, dead documents'
        postings dropped (:func:`daemon.index.bm25_postings.merge_postings`); updates ``df``
        for the buffered rows. Every live document's postings are in the block afterwards,
        so their term lists are dropped."""
        if self._rm_block:
            self._apply_block_removals()
        n_terms = len(self._vocab)
        p_tids = np.frombuffer(self._p_tids, dtype=np.uint32)
        buffer = (
            np.frombuffer(self._p_docs, dtype=np.uint32),
            np.frombuffer(self._p_nterms, dtype=np.uint32),
            p_tids,
            np.frombuffer(self._p_tfs, dtype=np.uint32),
        )
        alive = np.frombuffer(self._alive, dtype=np.uint8) if self._dead else None
        base, base_off = merge_postings(
            n_terms, np.asarray(self._base), np.asarray(self._base_off), self._tail, buffer, alive
        )
        if p_tids.size:
            df = np.frombuffer(self._df, dtype=np.uint32).astype(np.int64)
            df += np.bincount(p_tids, minlength=n_terms)
            self._df = array("I", df.astype(np.uint32).tobytes())
            self._n_live_terms = int(np.count_nonzero(df))
            del df
        del buffer, p_tids
        self._base = base
        self._base_off = base_off
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
            tids = decode_doc_terms(self._dt_off, self._dt_lo, self._dt_xpos, self._dt_xhi, doc)
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
        vocab: Vocab,
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
        return dict(zip(slots, vals, strict=True))

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
        three arrays over every doc per query is measurable at ERP size): the score
        accumulator and the partial scores of the pruning (``float64[n]``) and the candidate
        mark (``bool[n]``). All zero between searches: :meth:`_scored` zeroes what it
        touched before it returns, and drops them if it is interrupted."""
        bufs = self._bufs
        if bufs is None or bufs[0].size != n:
            bufs = self._bufs = (np.zeros(n, dtype=np.float64), np.zeros(n, dtype=np.float64), np.zeros(n, dtype=bool))
        return bufs

    def _scored(self, query_tokens: list[str], k: int, mask: np.ndarray | None) -> tuple[np.ndarray, np.ndarray] | None:
        """``(docs, scores)`` of the candidates for the top ``k``: the same scores, bit for
        bit, as :meth:`_accumulate` (each doc's terms summed in query order), for a set of
        docs that holds every doc of the top ``k`` (of those ``mask`` allows, a bool array
        by slot, or all) with its ties; None if nothing can match. ``k`` 0 scores every
        posting; else :func:`daemon.index.bm25_scoring.top_candidates` prunes."""
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
        bufs = self._buffers(len(self._doc_slot))
        try:
            return bm25_scoring.top_candidates(self._pairs, _u32(self._doc_slot), occ, cs, k, mask, norm, alive, bufs)
        except BaseException:
            self._bufs = None  # possibly dirty
            raise

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
        # score to bound by, and the pruning then costs more than it saves)
        prune = allow is None or (mask is not None and np.count_nonzero(mask) * 2 >= mask.size)
        got = self._scored(query_tokens, k if prune else 0, mask)
        if got is None:
            return []
        cand, vals = got
        if cand.size and mask is not None:
            ok = bm25_scoring.allowed(mask, _u32(self._doc_slot), cand)
            cand, vals = cand[ok], vals[ok]
            allow = None
        if cand.size == 0:
            return []
        if allow is None:
            return self._top(vals, cand, k, key_of)
        return self._top_allowed(vals, cand, k, key_of, allow)

    def _top_allowed(
        self, vals: np.ndarray, cand: np.ndarray, k: int, key_of: Callable | None, allow: Callable[[int], bool]
    ) -> list[tuple[int, float]]:
        """:meth:`_top` of the docs whose slot ``allow`` accepts, asking ``allow`` in rank
        order and about as few slots as it can (4k, then 4 times more while short)."""
        out: list[tuple[int, float]] = []
        verdict: dict[int, bool] = {}
        want = max(4 * k, 64)
        while True:
            out.clear()
            for slot, score in self._top(vals, cand, want, key_of):
                ok = verdict.get(slot)
                if ok is None:
                    ok = verdict[slot] = bool(allow(slot))
                if ok:
                    out.append((slot, score))
                    if len(out) == k:
                        break
            if len(out) == k or want >= cand.size:
                return out
            want *= 4

    def _top(self, vals: np.ndarray, cand: np.ndarray, k: int, key_of: Callable | None) -> list[tuple[int, float]]:
        """The best ``k`` of ``cand`` (docs, with their scores ``vals``) as ``(slot, score)``
        by (-score, key), ties at the cut-off resolved by key."""
        if cand.size > k:
            kth = np.partition(vals, cand.size - k)[cand.size - k]
            keep = vals >= kth
            cand, vals = cand[keep], vals[keep]
        slots = _u32(self._doc_slot)[cand].tolist()
        if key_of is None:
            ranked = sorted(zip(vals.tolist(), slots, strict=True), key=lambda x: (-x[0], x[1]))
        else:
            ranked = sorted(zip(vals.tolist(), slots, strict=True), key=lambda x: (-x[0], key_of(x[1])))
        return [(slot, score) for score, slot in ranked[:k]]

    # --- persistence: column files -------------------------------------------------------
    def save(self, folder: Path | str, *, remap: bool = True) -> None:
        """Write the index as column files into ``folder`` (created if missing; files of the
        same names are replaced; the layout: :mod:`daemon.index.bm25_files`). Compacts first
        (see :meth:`compact`); each array is written straight from memory and fsynced, the
        header last. The caller makes the folder's appearance atomic (a new generation
        folder: ``ValueError`` for the folder this index is mapped from). The saved doc ->
        terms index makes removals of saved documents O(their terms). With ``remap`` the
        index then reads its block, vocabulary and that doc index from the written files
        (memory-mapped; their RAM copies are freed, so a cold build ends with the footprint
        of a warm load).
        """
        self.compact()
        folder = Path(folder)
        v = self._vocab
        for arr in (self._base, self._base_off, v.blob, v.off, v.hsort, v.hperm, self._dt_off, self._dt_lo):
            mapped = getattr(arr, "filename", None)
            if mapped and folder.exists() and same_dir(Path(mapped).parent, folder):
                # rewriting a file that is mapped would pull the pages from under this index
                raise ValueError(f"cannot save a BM25 index into {folder}: it is memory-mapped from there")
        doc_off, doc_terms = doc_csr(np.asarray(self._base), np.asarray(self._base_off), len(self._doc_slot))
        lo, xpos, xhi = encode_doc_terms(doc_off, doc_terms)
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
        header = {
            "format": FORMAT,
            "version": FORMAT_VERSION,
            "k1": self.k1,
            "b": self.b,
            "docs": len(self._doc_slot),
            "terms": len(v),
            "postings": int(self._base_off[-1]),
            "total_len": self._total_len,
        }
        write_columns(folder, cols, header)
        del cols, doc_off, lo, xpos, xhi
        if remap:
            m = mapped_columns(folder)
            self._base, self._base_off = m["postings"], m["offsets"]
            self._vocab = Vocab(m["vocab_blob"], m["vocab_off"], m["vocab_hash"], m["vocab_perm"])
            self._dt_n, self._dt_off = len(self._doc_slot), m["doc_off"]
            self._dt_lo, self._dt_xpos, self._dt_xhi = m["doc_terms"], m["doc_terms_xpos"], m["doc_terms_xhi"]

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
        header, cols = read_columns(folder, mmap=mmap, verify=verify)
        check_columns(folder, header, cols, verify=verify)
        try:
            index = cls(header["k1"], header["b"])
        except ValueError as exc:
            raise BM25Error(f"BM25 index in {folder}: {exc}") from exc
        n_docs, n_terms = int(header["docs"]), int(header["terms"])
        if verify and int(header["postings"]):
            check_doc_terms(folder, cols, n_docs, n_terms)
        off = cols["offsets"]
        vocab = Vocab(cols["vocab_blob"], cols["vocab_off"], cols["vocab_hash"], cols["vocab_perm"])
        index._install(
            vocab, np.diff(off), cols["postings"], off, np.asarray(cols["slots"]), np.asarray(cols["lengths"])
        )
        index._dt_n, index._dt_off = n_docs, cols["doc_off"]
        index._dt_lo, index._dt_xpos, index._dt_xhi = cols["doc_terms"], cols["doc_terms_xpos"], cols["doc_terms_xhi"]
        return index
