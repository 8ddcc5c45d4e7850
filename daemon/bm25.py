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

* postings: one ``array('I')`` per term, interleaved ``(doc slot, tf)`` pairs, append-only;
* a removed document becomes a tombstone (its slot is marked dead and skipped when scoring;
  ``df``, ``N`` and the total length are decremented at once, so scores are exact at every
  moment); when dead slots outnumber half of the live ones, the index compacts itself
  (O(postings), amortised O(1) per removal);
* per document: its length and its distinct term ids (``array('I')``), needed to decrement
  ``df`` on removal. No token lists are kept.

Not thread-safe: the daemon must serialise calls (searching holds buffer views of the
posting arrays, which an ``add`` running concurrently could not resize).
"""

from __future__ import annotations

import math
from array import array
from collections import Counter
from collections.abc import Callable, Iterable

import msgspec
import numpy as np

__all__ = ["BM25Index", "BM25State"]

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
        self._post: list[array] = []  # term id -> interleaved (slot, tf)
        self._df = array("I")  # term id -> live document frequency
        self._slot: dict[str, int] = {}  # key -> slot
        self._keys: list[str | None] = []  # slot -> key (None: dead)
        self._dl = array("I")  # slot -> length in tokens
        self._alive = bytearray()  # slot -> 1 live / 0 dead
        self._doc_terms: list[array | None] = []  # slot -> distinct term ids
        self._n_live_terms = 0
        self._total_len = 0
        self._dead = 0

    # --- size ----------------------------------------------------------------------------
    def __len__(self) -> int:
        """Number of live documents."""
        return len(self._slot)

    def __contains__(self, key: object) -> bool:
        return key in self._slot

    @property
    def n_terms(self) -> int:
        """Number of distinct terms that occur in at least one live document."""
        return self._n_live_terms

    def df(self, term: str) -> int:
        """Number of live documents containing ``term`` (0 if unknown). With the tokenizer's
        pair tokens, ``df("модуль.метод")`` counts the chunks that call ``Модуль.Метод``."""
        tid = self._term_id.get(term)
        return 0 if tid is None else self._df[tid]

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
        unmatchable document that still counts in ``N`` and ``avgdl``. Cost: O(len(tokens)).
        """
        if key in self._slot:
            self.remove(key)
        counts = Counter(tokens)
        slot = len(self._keys)
        self._slot[key] = slot
        self._keys.append(key)
        length = sum(counts.values())
        self._dl.append(length)
        self._alive.append(1)
        self._total_len += length
        tids = array("I")
        term_id, post, df = self._term_id, self._post, self._df
        for term, tf in counts.items():
            tid = term_id.get(term)
            if tid is None:
                tid = len(self._terms)
                term_id[term] = tid
                self._terms.append(term)
                post.append(array("I"))
                df.append(0)
            p = post[tid]
            p.append(slot)
            p.append(tf)
            if df[tid] == 0:
                self._n_live_terms += 1
            df[tid] += 1
            tids.append(tid)
        self._doc_terms.append(tids)

    def remove(self, key: str) -> bool:
        """Remove document ``key``; returns False if it was not indexed.

        Cost: O(distinct terms of the document); occasionally triggers a compaction
        (O(all postings), amortised over at least ``N/2`` removals).
        """
        slot = self._slot.pop(key, None)
        if slot is None:
            return False
        if not self._slot:
            self._reset()
            return True
        df = self._df
        for tid in self._doc_terms[slot]:
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
            pairs = _u32(self._post[tid]).reshape(-1, 2)
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
        order, so ``from_state(s).to_state() == s``.
        """
        live = np.flatnonzero(np.frombuffer(self._alive, dtype=np.uint8))
        remap = np.full(len(self._keys), -1, dtype=np.int64)
        remap[live] = np.arange(live.size)
        terms: list[str] = []
        offsets = [0]
        chunks: list[np.ndarray] = []
        df = self._df
        for tid, term in enumerate(self._terms):
            if df[tid] == 0:
                continue
            pairs = _u32(self._post[tid]).reshape(-1, 2)
            if self._dead:
                new = remap[pairs[:, 0]]
                keep = new >= 0
                pairs = np.column_stack((new[keep].astype("<u4"), pairs[keep, 1]))
            terms.append(term)
            chunks.append(pairs.astype("<u4", copy=False).ravel())
            offsets.append(offsets[-1] + pairs.shape[0])
        postings = np.concatenate(chunks) if chunks else np.zeros(0, dtype="<u4")
        return BM25State(
            k1=self.k1,
            b=self.b,
            keys=[self._keys[s] for s in live.tolist()],  # type: ignore[misc]
            lengths=_u32(self._dl)[live].astype("<u4").tobytes(),
            terms=terms,
            offsets=np.asarray(offsets, dtype="<u4").tobytes(),
            postings=postings.tobytes(),
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
            or len(set(state.keys)) != n
            or len(set(state.terms)) != len(state.terms)
        ):
            raise ValueError("BM25 state is inconsistent (array lengths, offsets or duplicates)")
        pairs = post.reshape(-1, 2)
        docs = pairs[:, 0].astype(np.int64)
        if docs.size and (docs.max() >= n):
            raise ValueError("BM25 state is inconsistent (doc id out of range)")
        term_of = np.repeat(np.arange(len(state.terms), dtype=np.uint32), np.diff(offsets))
        # tf sums must equal the document lengths
        if not np.array_equal(np.bincount(docs, weights=pairs[:, 1], minlength=n), lengths):
            raise ValueError("BM25 state is inconsistent (lengths do not match postings)")
        self._reset()
        self._terms = list(state.terms)
        self._term_id = {t: i for i, t in enumerate(self._terms)}
        self._post = [
            array("I", post[2 * offsets[i] : 2 * offsets[i + 1]].tobytes())
            for i in range(len(self._terms))
        ]
        self._df = array("I", np.diff(offsets).astype("<u4").tobytes())
        self._keys = list(state.keys)
        self._slot = {key: i for i, key in enumerate(self._keys)}
        self._dl = array("I", lengths.tobytes())
        self._alive = bytearray(b"\x01" * n)
        order = np.argsort(docs, kind="stable")
        by_doc = term_of[order]
        bounds = np.concatenate(([0], np.cumsum(np.bincount(docs, minlength=n)))).tolist()
        self._doc_terms = [array("I", by_doc[bounds[i] : bounds[i + 1]].tobytes()) for i in range(n)]
        self._n_live_terms = len(self._terms)
        self._total_len = int(lengths.sum(dtype=np.int64))
        self._dead = 0
