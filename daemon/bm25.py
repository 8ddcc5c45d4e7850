"""Incremental BM25 (Okapi, Lucene idf) over chunk ids.

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

Why hand-written: the daemon changes the corpus on every file-watch batch. ``bm25s``
precomputes per-posting scores that depend on ``N``, ``df`` and ``avgdl``, so every change
would be a full rebuild. Here ``idf`` and ``avgdl`` are computed at query time from live
counters, so :meth:`BM25Index.add` and :meth:`BM25Index.remove` cost O(terms of that
document):

* postings: a frozen CSR block (one ``uint32`` array of interleaved ``(doc slot, tf)`` pairs,
  grouped by term, docs ascending, plus term offsets), and per term an append-only
  ``array('I')`` *tail* for documents added after the block was built;
* :meth:`BM25Index.add` only counts the document's terms and buffers the ``(term id, tf)``
  rows (C-level: ``Counter``, ``map``, ``array``); the buffer is merged before the next
  read (:meth:`BM25Index.flush`): a few documents go to the tails (O(their terms)), a large
  buffer (a bulk build) or large tails are merged into a new CSR block with one stable
  numpy sort (two 16-bit radix passes: ~0.1 s for ssl31-ru's 2.9 M postings);
* a removed document becomes a tombstone (its slot is marked dead and skipped when scoring;
  ``df``, ``N`` and the total length are decremented at once, so scores are exact at every
  moment); when dead slots outnumber half of the live ones, the index compacts itself
  (O(postings), amortised O(1) per removal);
* per document: its length and its distinct term ids (``array('I')``), needed to decrement
  ``df`` on removal; for documents loaded by :meth:`BM25Index.from_state` they are read
  from the CSR block (a scan of its doc column for the first 32 removals, ~3 ms each for
  ssl31-ru, then one sort for all, ~0.13 s). No token lists are kept.

:meth:`BM25Index.from_state` keeps the persisted posting bytes as the CSR block (no copy,
no per-term objects). Measured on ssl31-ru (38,570 chunks, 174,597 terms, 2.93 M postings;
CPU time on one core of the loaded 2-core dev box, garbage collector off): adding every
chunk 1.53 → 0.84 s plus 0.12 s for the merge at the first read (was one ``array`` per term,
appended per posting in Python), ``to_state`` 0.43 → 0.03 s, ``from_state`` 0.49 → 0.10 s;
query latency unchanged (p50 0.36-0.39 ms before and after, 300 doc-comment queries, top 100).

Not thread-safe: the daemon must serialise calls (a search may merge buffered additions,
and it holds buffer views of ``array`` objects that a concurrent ``add`` could not resize).
"""

from __future__ import annotations

import math
from array import array
from collections import Counter
from collections.abc import Callable, Iterable
from itertools import filterfalse

import msgspec
import numpy as np

__all__ = ["BM25Index", "BM25State"]

#: Buffered rows (or tail rows) that always go to a merge into a new CSR block.
_MERGE_MIN_ROWS = 4096
#: Removals of loaded documents that find their terms by a scan of the block before the
#: block's doc -> terms index is built.
_BLOCK_SCANS = 32
#: Compact when the number of dead slots exceeds this fraction of live documents ...
_COMPACT_DEAD_RATIO = 0.5
#: ... and at least this many slots are dead (small indexes never bother).
_COMPACT_MIN_DEAD = 1024


class BM25State(msgspec.Struct, frozen=True):
    """Persisted form of a :class:`BM25Index` (msgpack/JSON-encodable with ``msgspec``).

    Arrays are little-endian ``uint32`` bytes. Documents are numbered ``0..len(keys)-1`` in
    ``keys`` order; ``terms[i]``'s postings are ``postings[2*offsets[i] : 2*offsets[i+1]]``
    as interleaved ``(doc, tf)`` pairs, docs ascending. Only terms with ``df > 0`` appear.
    """

    k1: float
    b: float
    keys: list[str]
    lengths: bytes  # uint32[len(keys)]: document lengths in tokens
    terms: list[str]
    offsets: bytes  # uint32[len(terms) + 1]: posting offsets (in pairs)
    postings: bytes  # uint32[2 * offsets[-1]]: (doc, tf) pairs


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


class BM25Index:
    """BM25 Okapi index keyed by strings (``Chunk.id``), updatable one document at a time.

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
        self._term_id: dict[str, int] = {}
        self._terms: list[str] = []
        self._df = array("I")  # term id -> live document frequency (exact after _flush)
        # postings: CSR block + per-term tails (see the module docstring)
        self._base = np.zeros(0, dtype="<u4")  # interleaved (slot, tf), grouped by term
        self._base_off = np.zeros(1, dtype=np.int64)  # term id -> offset in pairs; len = block terms + 1
        self._tail: dict[int, array] = {}  # term id -> interleaved (slot, tf) after the block
        self._tail_pairs = 0
        # buffered additions: per document its slot and number of distinct terms; per row
        # the term id and tf
        self._p_docs = array("I")
        self._p_nterms = array("I")
        self._p_tids = array("I")
        self._p_tfs = array("I")
        self._slot: dict[str, int] = {}  # key -> slot
        self._keys: list[str | None] = []  # slot -> key (None: dead)
        self._dl = array("I")  # slot -> length in tokens
        self._alive = bytearray()  # slot -> 1 live / 0 dead
        self._doc_terms: list[array | None] = []  # slot -> distinct term ids (None: in the block)
        self._block_docs: tuple[np.ndarray, np.ndarray] | None = None  # lazy doc -> terms of the block
        self._block_scans = 0
        self._n_live_terms = 0
        self._total_len = 0
        self._dead = 0
        self._dead_at_merge = 0  # the block holds postings of dead slots iff _dead differs

    # --- size ----------------------------------------------------------------------------
    def __len__(self) -> int:
        """Number of live documents."""
        return len(self._slot)

    def __contains__(self, key: object) -> bool:
        return key in self._slot

    @property
    def n_terms(self) -> int:
        """Number of distinct terms that occur in at least one live document."""
        self._flush()
        return self._n_live_terms

    def df(self, term: str) -> int:
        """Number of live documents containing ``term`` (0 if unknown). With the tokenizer's
        pair tokens, ``df("модуль.метод")`` counts the chunks that call ``Модуль.Метод``."""
        tid = self._term_id.get(term)
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
        if not distinct or not self._slot:
            return 0.0
        known = sum(1 for t in distinct if self.df(t) > 0)
        return known / len(distinct)

    def keys(self) -> list[str]:
        """Live document keys, in insertion order (after compaction: still that order)."""
        return [k for k in self._keys if k is not None]

    # --- updates -------------------------------------------------------------------------
    def add(self, key: str, tokens: Iterable[str]) -> None:
        """Index document ``key`` with its tokens (order irrelevant, repeats = term frequency).

        Replaces the document if ``key`` is already indexed. An empty token list is a valid,
        unmatchable document that still counts in ``N`` and ``avgdl``. Cost: O(len(tokens)),
        all of it in C; the postings are written by the next :meth:`flush` (any read does it).
        """
        if key in self._slot:
            self.remove(key)
        counts = Counter(tokens)
        term_id = self._term_id
        new = list(filterfalse(term_id.__contains__, counts))
        if new:
            start = len(self._terms)
            self._terms.extend(new)
            term_id.update(zip(new, range(start, start + len(new))))
            self._df.frombytes(bytes(4 * len(new)))
        tids = array("I", map(term_id.__getitem__, counts))
        slot = len(self._keys)
        self._slot[key] = slot
        self._keys.append(key)
        length = sum(counts.values())
        self._dl.append(length)
        self._alive.append(1)
        self._total_len += length
        self._doc_terms.append(tids)
        self._p_docs.append(slot)
        self._p_nterms.append(len(tids))
        self._p_tids.extend(tids)
        self._p_tfs.extend(counts.values())

    def flush(self) -> None:
        """Write buffered additions into the postings (searching and every other read do
        this by themselves; call it to take the cost at a chosen moment, e.g. after a bulk
        build). A few documents are appended to the per-term tails; a buffer of more than
        1/16 of the block's postings (or 4,096) is merged into a new block."""
        n_rows = len(self._p_tids)
        if not n_rows:
            return
        if n_rows >= max(_MERGE_MIN_ROWS, self._base.size // 32):
            self._merge()
            return
        df, tail = self._df, self._tail
        p_tids, p_tfs = self._p_tids, self._p_tfs
        row = 0
        for slot, nt in zip(self._p_docs, self._p_nterms):
            for j in range(row, row + nt):
                tid = p_tids[j]
                t = tail.get(tid)
                if t is None:
                    t = tail[tid] = array("I")
                t.append(slot)
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
        if self._p_tids:
            self.flush()

    def _merge(self) -> None:
        """One new CSR block from the block, the tails and the buffer (dead documents'
        postings dropped); updates ``df`` for the buffered rows."""
        n_terms = len(self._terms)
        p_tids = np.frombuffer(self._p_tids, dtype=np.uint32)
        if p_tids.size:
            df = np.frombuffer(self._df, dtype=np.uint32).astype(np.int64)
            df += np.bincount(p_tids, minlength=n_terms)
            self._df = array("I", df.astype(np.uint32).tobytes())
            self._n_live_terms = int(np.count_nonzero(df))
        pairs = [self._base.reshape(-1, 2)]
        tids = [np.repeat(np.arange(self._base_off.size - 1, dtype=np.uint32), np.diff(self._base_off))]
        for tid, t in self._tail.items():
            pairs.append(np.frombuffer(t, dtype=np.uint32).reshape(-1, 2))
            tids.append(np.full(len(t) // 2, tid, dtype=np.uint32))
        if p_tids.size:
            slots = np.repeat(np.frombuffer(self._p_docs, dtype=np.uint32), np.frombuffer(self._p_nterms, dtype=np.uint32))
            pairs.append(np.column_stack((slots, np.frombuffer(self._p_tfs, dtype=np.uint32))))
            tids.append(p_tids)
        all_pairs = np.concatenate(pairs)
        all_tids = np.concatenate(tids)
        if self._dead:
            keep = np.frombuffer(self._alive, dtype=np.uint8)[all_pairs[:, 0]] == 1
            all_pairs, all_tids = all_pairs[keep], all_tids[keep]
        # block, tails and buffer are each in slot order and hold increasing slots, so a
        # stable sort by term keeps every term's docs ascending
        order = _stable_argsort(all_tids)
        rows = np.ascontiguousarray(all_pairs, dtype="<u4").view("<u8").ravel()  # one (slot, tf) row each
        self._base = rows[order].view("<u4")
        self._base_off = np.concatenate(([0], np.cumsum(np.bincount(all_tids, minlength=n_terms)))).astype(np.int64)
        self._tail = {}
        self._tail_pairs = 0
        self._dead_at_merge = self._dead
        self._clear_pending()

    def _pairs(self, tid: int) -> np.ndarray:
        """All postings of term ``tid`` (flushed), interleaved (slot, tf)."""
        off = self._base_off
        if tid + 1 < off.size:
            block = self._base[2 * off[tid] : 2 * off[tid + 1]]
        else:
            block = self._base[:0]
        t = self._tail.get(tid)
        if t is None:
            return block
        return np.concatenate((block, np.frombuffer(t, dtype=np.uint32)))

    def _terms_of(self, slot: int) -> array | np.ndarray:
        """Distinct term ids of live document ``slot``."""
        tids = self._doc_terms[slot]
        if tids is not None:
            return tids
        # loaded by from_state: its postings are in the block (merges keep live ones there).
        # The first few removals scan the block's doc column (~3 ms each for ssl31-ru: an
        # edit after a warm load touches a handful of chunks); after that, one sort gives
        # every loaded document's terms (~0.13 s)
        if self._block_docs is None and self._block_scans < _BLOCK_SCANS:
            self._block_scans += 1
            pos = np.flatnonzero(self._base[0::2] == slot)
            return np.searchsorted(self._base_off, pos, side="right") - 1
        if self._block_docs is None:
            docs = self._base[0::2]
            term_of = np.repeat(np.arange(self._base_off.size - 1, dtype=np.uint32), np.diff(self._base_off))
            order = np.argsort(docs, kind="stable")
            bounds = np.concatenate(([0], np.cumsum(np.bincount(docs, minlength=len(self._keys)))))
            self._block_docs = (term_of[order], bounds)
        by_doc, bounds = self._block_docs
        return by_doc[bounds[slot] : bounds[slot + 1]]

    def remove(self, key: str) -> bool:
        """Remove document ``key``; returns False if it was not indexed.

        Cost: O(distinct terms of the document); occasionally triggers a compaction
        (O(all postings), amortised over at least ``N/2`` removals).
        """
        slot = self._slot.get(key)
        if slot is None:
            return False
        self._flush()
        del self._slot[key]
        if not self._slot:
            self._reset()
            return True
        df = self._df
        for tid in self._terms_of(slot).tolist():
            df[tid] -= 1
            if df[tid] == 0:
                self._n_live_terms -= 1
        self._total_len -= self._dl[slot]
        self._keys[slot] = None
        self._doc_terms[slot] = None
        self._alive[slot] = 0
        self._dead += 1
        if self._dead >= _COMPACT_MIN_DEAD and self._dead > _COMPACT_DEAD_RATIO * len(self._slot):
            self.compact()
        return True

    def compact(self) -> None:
        """Drop tombstones and unused terms, renumbering slots. O(all postings).

        Called automatically by :meth:`remove`; scores and results do not change.
        """
        self._flush()
        if self._dead or len(self._terms) != self._n_live_terms:
            self._load(self.to_state())

    # --- search --------------------------------------------------------------------------
    def scores(self, query_tokens: list[str]) -> dict[str, float]:
        """BM25 score of every live document matching at least one query term (for tests
        and diagnostics; :meth:`search` is the fast path)."""
        acc = self._accumulate(query_tokens)
        if acc is None:
            return {}
        return {self._keys[s]: float(acc[s]) for s in np.flatnonzero(acc)}  # type: ignore[misc]

    def _accumulate(self, query_tokens: list[str]) -> np.ndarray | None:
        """Score array over slots (0 = no match or dead), or None if nothing can match."""
        n = len(self._slot)
        if n == 0 or self._total_len == 0:
            return None
        self._flush()
        k1, b = self.k1, self.b
        avgdl = self._total_len / n
        dl = _u32(self._dl)
        alive = np.frombuffer(self._alive, dtype=np.uint8) if self._dead else None
        acc: np.ndarray | None = None
        for term in query_tokens:
            tid = self._term_id.get(term)
            if tid is None:
                continue
            df = self._df[tid]
            if df == 0:
                continue
            if acc is None:
                acc = np.zeros(len(self._keys), dtype=np.float64)
            pairs = self._pairs(tid).reshape(-1, 2)
            slots = pairs[:, 0]
            tf = pairs[:, 1].astype(np.float64)
            idf = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
            contrib = (idf * (k1 + 1.0)) * tf / (tf + k1 * (1.0 - b + b * dl[slots] / avgdl))
            if alive is not None:
                contrib *= alive[slots]
            acc[slots] += contrib
        return acc

    def search(
        self,
        query_tokens: list[str],
        k: int,
        *,
        allow: Callable[[str], bool] | None = None,
    ) -> list[tuple[str, float]]:
        """Top ``k`` live documents for the query terms: ``[(key, score), ...]``.

        Scores are descending; equal scores are ordered by key (stable across runs and
        rebuilds). Terms not in the index contribute nothing; an empty query, ``k <= 0`` or an
        empty index give ``[]``. ``allow(key)`` filters documents (it is called lazily, on
        candidates in rank order, until ``k`` are accepted).
        """
        if k <= 0:
            return []
        acc = self._accumulate(query_tokens)
        if acc is None:
            return []
        cand = np.flatnonzero(acc)
        if cand.size == 0:
            return []
        if allow is None:
            return self._top(acc, cand, k)
        out: list[tuple[str, float]] = []
        verdict: dict[int, bool] = {}
        want = max(4 * k, 64)
        while True:
            out.clear()
            for key, score in self._top(acc, cand, want):
                slot = self._slot[key]
                ok = verdict.get(slot)
                if ok is None:
                    ok = verdict[slot] = bool(allow(key))
                if ok:
                    out.append((key, score))
                    if len(out) == k:
                        return out
            if want >= cand.size:
                return out
            want *= 4

    def _top(self, acc: np.ndarray, cand: np.ndarray, k: int) -> list[tuple[str, float]]:
        """The best ``k`` of ``cand`` by (-score, key), ties at the cut-off resolved by key."""
        vals = acc[cand]
        if cand.size > k:
            kth = np.partition(vals, cand.size - k)[cand.size - k]
            keep = vals >= kth
            cand, vals = cand[keep], vals[keep]
        keys = self._keys
        ranked = sorted(zip(vals.tolist(), (keys[s] for s in cand.tolist())), key=lambda x: (-x[0], x[1]))
        return [(key, score) for score, key in ranked[:k]]  # type: ignore[misc]

    # --- persistence ---------------------------------------------------------------------
    def to_state(self) -> BM25State:
        """A compacted snapshot (live documents and terms only), encodable with ``msgspec``.

        Deterministic: documents keep their relative insertion order, terms their first-seen
        order, so ``from_state(s).to_state() == s``. Merges buffered additions and tails
        into the block first (see :meth:`flush`).
        """
        if len(self._p_tids) or self._tail or self._dead != self._dead_at_merge:
            self._merge()
        live = np.flatnonzero(np.frombuffer(self._alive, dtype=np.uint8))
        counts = np.diff(self._base_off)
        keep = np.flatnonzero(counts)  # terms with live postings (the block holds no dead ones)
        pairs = self._base.reshape(-1, 2)
        if self._dead:
            remap = np.full(len(self._keys), -1, dtype=np.int64)
            remap[live] = np.arange(live.size)
            pairs = np.column_stack((remap[pairs[:, 0]].astype("<u4"), pairs[:, 1]))
        terms = self._terms
        return BM25State(
            k1=self.k1,
            b=self.b,
            keys=[self._keys[s] for s in live.tolist()],  # type: ignore[misc]
            lengths=_u32(self._dl)[live].astype("<u4").tobytes(),
            terms=[terms[t] for t in keep.tolist()],
            offsets=np.concatenate(([0], np.cumsum(counts[keep]))).astype("<u4").tobytes(),
            postings=pairs.astype("<u4", copy=False).tobytes(),
        )

    @classmethod
    def from_state(cls, state: BM25State) -> BM25Index:
        """Rebuild an index from :meth:`to_state` output.

        Raises ``ValueError`` if the arrays are inconsistent (wrong lengths, doc ids out of
        range, duplicate keys or terms) -- a corrupt or foreign state file.
        """
        index = cls(state.k1, state.b)
        index._load(state)
        return index

    def _load(self, state: BM25State) -> None:
        n = len(state.keys)
        lengths = _u32(state.lengths)
        offsets = _u32(state.offsets).astype(np.int64)
        post = _u32(state.postings)
        if (
            lengths.size != n
            or offsets.size != len(state.terms) + 1
            or (offsets.size and offsets[0] != 0)
            or np.any(np.diff(offsets) <= 0)
            or post.size != 2 * int(offsets[-1])
        ):
            raise ValueError("BM25 state is inconsistent (array lengths or offsets)")
        self._reset()
        self._keys = list(state.keys)
        self._slot = dict(zip(self._keys, range(n)))
        self._terms = list(state.terms)
        self._term_id = dict(zip(self._terms, range(len(self._terms))))
        if len(self._slot) != n or len(self._term_id) != len(self._terms):
            self._reset()
            raise ValueError("BM25 state is inconsistent (duplicate keys or terms)")
        docs = post[0::2]
        if docs.size and int(docs.max()) >= n:
            self._reset()
            raise ValueError("BM25 state is inconsistent (doc id out of range)")
        # tf sums must equal the document lengths
        if not np.array_equal(np.bincount(docs, weights=post[1::2], minlength=n), lengths):
            self._reset()
            raise ValueError("BM25 state is inconsistent (lengths do not match postings)")
        self._base = post  # a read-only view of the state's bytes: never written in place
        self._base_off = offsets
        self._df = array("I", np.diff(offsets).astype(np.uint32).tobytes())
        self._dl = array("I", lengths.tobytes())
        self._alive = bytearray(b"\x01" * n)
        self._doc_terms = [None] * n
        self._n_live_terms = len(self._terms)
        self._total_len = int(lengths.sum(dtype=np.int64))
        self._dead = 0
