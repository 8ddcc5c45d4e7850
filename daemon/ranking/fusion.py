"""Reciprocal Rank Fusion of ranked channel lists.

RRF (Cormack, Clarke & Büttcher, SIGIR 2009): ``score(d) = Σ_c w_c / (k + rank_c(d))`` with
1-based ranks. The ranker passes its ``k`` and the channel weights ``w_c``
(:class:`daemon.ranking.params.RankingParams`): a channel that has little to say about a query
gets a low weight, so it does not cast a full vote with noise.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence


def rrf(
    channels: Mapping[str, Sequence[str]],
    *,
    k: int,
    weights: Mapping[str, float] | None = None,
) -> list[tuple[str, float, dict[str, int]]]:
    """Fuse ranked lists of keys.

    Args:
        channels: channel name -> keys, best first (duplicates after the first are ignored).
        k: the RRF constant (the paper's is 60).
        weights: channel name -> weight (missing: 1.0; 0 drops the channel's vote, its ranks
            are still reported for keys other channels found).

    Returns:
        ``[(key, fused_score, {channel: 1-based rank})]`` sorted by score descending; ties
        keep the order of the best single-channel rank, then the key, so output is stable.
    """
    weights = weights or {}
    scores: dict[str, float] = {}
    ranks: dict[str, dict[str, int]] = {}
    for name, keys in channels.items():
        w = weights.get(name, 1.0)
        seen: set[str] = set()
        rank = 0
        for key in keys:
            if key in seen:
                continue
            seen.add(key)
            rank += 1
            ranks.setdefault(key, {})[name] = rank
            if w:
                scores[key] = scores.get(key, 0.0) + w / (k + rank)
    out = [(key, scores.get(key, 0.0), r) for key, r in ranks.items() if scores.get(key, 0.0) > 0]
    out.sort(key=lambda t: (-t[1], min(t[2].values()), t[0]))
    return out
