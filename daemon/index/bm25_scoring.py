"""Scoring a query against :class:`daemon.index.bm25.BM25Index`'s postings, exactly, with
pruning decided up front.

A term contributes at most ``idf·(k1 + 1)`` to a doc (``tf / (tf + norm) < 1``). The terms
are scored rarest first into partial sums; before a common term, if the bounds of it and every
commoner one add up to less than the ``k``-th best partial score so far (a lower bound of the
final ``k``-th score), no doc those terms alone match can reach the top ``k``: the candidates
are the docs of the rarer terms, and the common terms are only read for them. The final scores
are then summed again in query order, so every score is bit for bit the one full scoring gives.
Queries of fewer than :data:`PRUNE_MIN_POSTINGS` postings, or whose rarer terms would exceed
:data:`PRUNE_BUDGET` of them before the bound holds, are scored in full. Why it pays:
``docs/internals.md``, "BM25".
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

#: Queries of fewer postings are scored in full ...
PRUNE_MIN_POSTINGS = 1 << 16
#: ... the bound is checked before a term of at least this many documents ...
PRUNE_CHECK_DF = 1024
#: ... the rarer terms scored before the bound holds may hold at most this share of the
#: query's postings (beyond it the rest is scored in full, reusing what was scored) ...
PRUNE_BUDGET = 0.35
#: ... a skipped term is read for its candidates by binary searches when it has more than
#: this many postings per candidate (else by one gather per posting) ...
PRUNE_SEARCH_RATIO = 16
#: ... and the bound of the skipped terms, times this, must stay below the k-th score
#: (float rounding of the sums is ~1e-15 relative).
PRUNE_MARGIN = 1.0 + 1e-9

#: ``(docs, contributions)`` of one term: ``intp`` doc numbers and their ``float64`` scores.
Scored = tuple[np.ndarray, np.ndarray]


def contributions(tf: np.ndarray, docs: np.ndarray, c: float, norm: np.ndarray, alive: np.ndarray | None) -> np.ndarray:
    """``c·tf / (tf + norm[docs])`` (times ``alive[docs]`` when given), computed in place in
    ``tf`` (``float64``, one per posting of ``docs``): the same float operations in the same
    order as full scoring (:meth:`daemon.index.bm25.BM25Index.scores`), so pruned and full
    scoring agree bit for bit."""
    den = norm.take(docs)
    np.add(tf, den, out=den)
    np.multiply(tf, c, out=tf)
    np.divide(tf, den, out=tf)
    if alive is not None:
        tf *= alive[docs]
    return tf


def term_scores(pairs: np.ndarray, c: float, norm: np.ndarray, alive: np.ndarray | None) -> Scored:
    """(docs as ``intp``, contributions ``float64``) of the postings ``pairs`` (``(m, 2)``
    doc, tf) of a term whose ``idf·(k1 + 1)`` is ``c``."""
    docs = pairs[:, 0].astype(np.intp)
    return docs, contributions(pairs[:, 1].astype(np.float64), docs, c, norm, alive)


def candidate_scores(
    pairs: np.ndarray, mark: np.ndarray, cand: np.ndarray, c: float, norm: np.ndarray, alive: np.ndarray | None
) -> Scored:
    """:func:`term_scores` of the postings ``pairs`` whose doc is one of ``cand`` (ascending
    docs, marked in ``mark``, ``bool[docs]``). Few candidates for many postings
    (:data:`PRUNE_SEARCH_RATIO`): a binary search of each in the term's doc column (ascending:
    block, then tails, docs numbered in the order they were added); else one gather of
    ``mark`` per posting (a boolean row selection of the ``(m, 2)`` pairs was 2-3x slower).
    Then only the kept postings are scored."""
    col = pairs[:, 0]
    if cand.size * PRUNE_SEARCH_RATIO < col.size:
        pos = np.searchsorted(col, cand.astype(col.dtype))
        pos[pos == col.size] = col.size - 1
        hit = col[pos] == cand
        sel = pos[hit]
        docs = cand[hit]
    else:
        docs = col.astype(np.intp)
        sel = np.flatnonzero(mark[docs])
        docs = docs[sel]
    return docs, contributions(pairs[:, 1].take(sel).astype(np.float64), docs, c, norm, alive)


def allowed(mask: np.ndarray, doc_slot: np.ndarray, docs: np.ndarray) -> np.ndarray:
    """Bool per doc of ``docs``: its slot (``doc_slot[doc]``) is allowed by ``mask``, a bool
    array by slot (slots at or beyond its length are not allowed)."""
    slots = doc_slot[docs]
    ok = slots < mask.size
    ok[ok] = mask[slots[ok]]
    return ok


def _kth(values: np.ndarray, k: int) -> float:
    """The ``k``-th largest of ``values`` (``values.size >= k``)."""
    return float(np.partition(values, values.size - k)[values.size - k])


class _Query:
    """One query's matching terms and what scoring them needs: ``occ`` (term id, df) per term
    in query order, ``cs`` each term's ``idf·(k1 + 1)``, ``pairs_of(term id)`` its postings,
    ``doc_slot`` (``<u4`` per doc), the length norms and the live flags (None: all live)."""

    __slots__ = ("alive", "cs", "doc_slot", "norm", "occ", "pairs_of")

    def __init__(self, pairs_of, doc_slot, occ, cs, norm, alive) -> None:
        self.pairs_of, self.doc_slot, self.occ, self.cs = pairs_of, doc_slot, occ, cs
        self.norm, self.alive = norm, alive

    def pairs(self, i: int) -> np.ndarray:
        """The postings of term ``i`` (query position) as ``(m, 2)`` doc, tf."""
        return self.pairs_of(self.occ[i][0]).reshape(-1, 2)

    def full(self, i: int) -> Scored:
        """Every posting of term ``i`` scored."""
        return term_scores(self.pairs(i), self.cs[i], self.norm, self.alive)


class _Bound:
    """Where the pruning stopped scoring in full: the terms rarest first (``order``), the bound
    of the terms ``order[j:]`` (``rest[j]``), the first term only read for the candidates
    (``skip_from``), the ``k``-th partial score then (``kth``) and the docs scored so far
    (``touched``)."""

    __slots__ = ("kth", "order", "rest", "skip_from", "touched")

    def __init__(self, order: list[int], rest: list[float], skip_from: int, kth: float, touched: np.ndarray) -> None:
        self.order, self.rest, self.skip_from, self.kth, self.touched = order, rest, skip_from, kth, touched


def top_candidates(
    pairs_of: Callable[[int], np.ndarray],
    doc_slot: np.ndarray,
    occ: list[tuple[int, int]],
    cs: list[float],
    k: int,
    mask: np.ndarray | None,
    norm: np.ndarray,
    alive: np.ndarray | None,
    bufs: tuple[np.ndarray, np.ndarray, np.ndarray],
) -> Scored:
    """``(docs, scores)`` of a set of docs that holds every doc of the top ``k`` (of those
    ``mask`` allows, or all) with its ties, each score exactly the full sum over the query's
    terms in query order. ``bufs``: the zeroed work arrays (score accumulator, partial
    scores, candidate mark; one entry per doc), zeroed again on return. ``k`` 0: no pruning."""
    acc, part, mark = bufs
    q = _Query(pairs_of, doc_slot, occ, cs, norm, alive)
    cache: dict[int, Scored] = {}  # term position -> what was scored in full
    total = sum(df for _, df in occ)
    if len(occ) > 1 and total >= PRUNE_MIN_POSTINGS and k > 0:
        bound = _score_rarest_first(q, k, mask, total, part, mark, cache)
        if bound is not None:
            return _score_candidates(q, k, mask, bound, acc, part, mark, cache)
    for i in range(len(occ)):
        hit = cache.get(i)
        docs, c = hit if hit is not None else q.full(i)
        acc[docs] += c
    cand = np.flatnonzero(acc != 0.0)  # (flatnonzero of the float array itself is ~5x slower)
    vals = acc[cand]
    acc[cand] = 0.0
    return cand, vals


def _score_rarest_first(
    q: _Query,
    k: int,
    mask: np.ndarray | None,
    total: int,
    part: np.ndarray,
    mark: np.ndarray,
    cache: dict[int, Scored],
) -> _Bound | None:
    """Score the terms rarest first into ``part`` (their docs marked in ``mark``, their scores
    kept in ``cache``) until the bound of the remaining terms falls below the ``k``-th partial
    score (returned as a :class:`_Bound`, ``part`` and ``mark`` holding the scored docs) or the
    budget is spent (None, ``part`` and ``mark`` zeroed again)."""
    occ, cs = q.occ, q.cs
    order = sorted(range(len(occ)), key=lambda i: occ[i][1])
    rest = [0.0] * (len(order) + 1)  # rest[j]: bound of the terms order[j:]
    for j in range(len(order) - 1, -1, -1):
        rest[j] = rest[j + 1] + cs[order[j]]
    done = 0.0  # bound of the terms scored so far (>= any partial score)
    budget = PRUNE_BUDGET * total
    used = 0
    scored = False  # some terms were scored into `part` (and their docs marked)
    for j, i in enumerate(order):
        if scored and occ[i][1] >= PRUNE_CHECK_DF and rest[j] * PRUNE_MARGIN < done:
            touched = np.flatnonzero(mark)  # the docs of the terms scored so far
            ok = touched if mask is None else touched[allowed(mask, q.doc_slot, touched)]
            if ok.size >= k:
                kth = _kth(part[ok], k)
                if rest[j] * PRUNE_MARGIN < kth:
                    return _Bound(order, rest, j, kth, touched)
        if used > budget:
            break
        docs, c = cache[i] = q.full(i)
        part[docs] += c
        mark[docs] = True
        scored = True
        done += cs[i]
        used += docs.size
    if scored:
        touched = np.flatnonzero(mark)
        part[touched] = 0.0
        mark[touched] = False
    return None


def _score_candidates(
    q: _Query,
    k: int,
    mask: np.ndarray | None,
    bound: _Bound,
    acc: np.ndarray,
    part: np.ndarray,
    mark: np.ndarray,
    cache: dict[int, Scored],
) -> Scored:
    """The candidates after :func:`_score_rarest_first` stopped: of the docs scored so far,
    those whose partial score plus the bound of the terms not yet read reaches the ``k``-th
    partial score (a lower bound of the final ``k``-th score); no other doc can be in the top
    ``k``. The skipped terms are read rarest first for the candidates, and each one read
    raises the partial scores and lowers the bound, so the candidates only shrink. Their
    final scores are summed in query order."""
    order, rest, kth, touched = bound.order, bound.rest, bound.kth, bound.touched
    cp = part[touched]  # the candidates' partial scores
    part[touched] = 0.0
    cand = touched
    ok_cand = None if mask is None else allowed(mask, q.doc_slot, cand)
    read: dict[int, Scored] = {}
    for jj in range(bound.skip_from, len(order) + 1):
        keep = (cp + rest[jj]) * PRUNE_MARGIN >= kth
        if not keep.all():
            mark[cand[~keep]] = False  # `mark` holds the candidates
            cand, cp = cand[keep], cp[keep]
            if ok_cand is not None:
                ok_cand = ok_cand[keep]
        if jj == len(order):
            break
        i = order[jj]
        docs, c = read[i] = candidate_scores(q.pairs(i), mark, cand, q.cs[i], q.norm, q.alive)
        cp[np.searchsorted(cand, docs)] += c  # docs: ascending, all candidates
        kth = max(kth, _kth(cp if ok_cand is None else cp[ok_cand], k))
    for i in range(len(q.occ)):
        docs, c = read[i] if i in read else cache[i]
        acc[docs] += c  # in query order: each candidate's sum as in full scoring
    mark[cand] = False
    vals = acc[cand]
    acc[touched] = 0.0
    live = vals != 0.0
    return cand[live], vals[live]
