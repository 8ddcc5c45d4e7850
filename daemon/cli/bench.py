"""``bsl-lens bench`` (speed, memory and answer sizes; the benches are :mod:`daemon.dev`) and
``bsl-lens demo`` (the sample export that ships in the package, indexed and queried)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..contract import DEFAULT_EMBEDDER, NO_EMBEDDER
from .index import open_engine, progress, progress_done
from .run_info import run_finished, run_started

#: The questions ``demo`` asks of the sample export.
DEMO_QUERIES = (
    "где считается НДС с авансов",
    "ИННСоотв",
    "ПолучитьСчетНаОплату",
    "Справочник.Контрагенты",
    "реквизит ИНН контрагента",
    "загрузка выписки из банка",
    "how are exchange rates loaded",
)
#: What ``demo`` asks the platform help (bundled when no 1C:Enterprise is installed): a name and a question.
DEMO_PLATFORM_QUERIES = ("СтрНайти", "как найти подстроку в строке")


def sample_export_dir() -> Path:
    """The small sample export that ships inside the package (``daemon/sample_export``)."""
    return Path(__file__).resolve().parents[1] / "sample_export"


def cmd_demo(args) -> int:
    """Index the bundled sample export (lexical and dense) and answer a few queries."""
    root = sample_export_dir()
    args.root = str(root)
    eng = open_engine(args)
    rep = eng.refresh()
    n = eng.embed_pending(progress=progress)
    progress_done()
    eng.save()
    st = eng.stats()
    print(
        f"Indexed the sample export {root}\n  {st['modules']} modules, {st['methods']} methods, "
        f"{st['metadata_chunks']} metadata chunks ({rep.seconds:.2f}s lexical, {n} vectors embedded); "
        f"skipped: {', '.join(f'{s.path} ({s.reason})' for s in eng.skipped) or 'none'}\n"
    )
    for q in DEMO_QUERIES:
        res = eng.search(q, mode="hybrid", top_k=3)
        print(f"» {q}")
        for i, h in enumerate(res.hits, 1):
            ranks = " ".join(f"{k}#{v}" for k, v in sorted(h.ranks.items()))
            print(f"   {i}. {h.owner} · {h.symbol or h.name}  ({h.path}:{h.name_range[0] + 1}; {ranks})")
        print()
    _demo_platform(args, root, eng.embedder)
    return 0


def _demo_platform(args, root: Path, embedder) -> None:
    """The demo's platform help: a name and a question, from the help that answers for the
    sample export (the bundled data set on a machine without 1C:Enterprise). Hybrid when the
    platform's vectors are there already (a daemon embeds them in the background), else lexical."""
    from .index import platform_help_of

    ph = platform_help_of(args, str(root))
    src = ph.ensure(ph.sources[ph.chosen])
    if src.state != "ready":
        src = ph.ensure(ph.sources["bundled"])
    mode = "lexical"
    if embedder is not None and src.index is not None:
        src.index.load_dense(embedder)
        mode = "hybrid" if not src.index.dense_pending() else "lexical"
    print(f"Platform help: {src.label} — {ph.why}; {len(src.index)} entries, {mode}\n")
    for q in DEMO_PLATFORM_QUERIES:
        ans = ph.help(q, mode=mode, top_k=3, version=src.name, embedder=embedder if mode == "hybrid" else None)
        print(f"» {q}" + ("  (a name)" if ans.exact else ""))
        for i, (entry, h) in enumerate(zip(ans.entries, ans.hits, strict=True), 1):
            ranks = " ".join(f"{k}#{v}" for k, v in sorted(h.ranks.items()))
            print(f"   {i}. {h.signature or entry.qualified}  [{entry.kind}]" + (f"  ({ranks})" if ranks else ""))
            if h.snippet:
                print(f"      {h.snippet}")
        print()


def print_report(out: dict, as_json: bool, *, bench: str = "engine", run: dict | None = None) -> int:
    """Print a benchmark's measurements, the one report shape of every bench: ``bench`` (which
    one: engine, daemon, lifecycle, lsp, mcp, dense-synthetic), the machine (``cpu_count``,
    ``load_avg``: 1/5/15-min load averages as it finished, to judge the figures by), ``run``
    (version, commit, date, load at the start and the end: :mod:`daemon.cli.run_info`; ``run``
    is what :func:`~daemon.cli.run_info.run_started` gave as the bench began) and the bench's
    own measurements; one JSON object (``--json``: what docs tables are generated from), or the
    same keys as ``key: value`` lines. Returns 0."""
    run = run_finished(run if run is not None else run_started())
    head: dict = {"bench": bench, "cpu_count": os.cpu_count()}
    if run["load_avg_end"] is not None:
        head["load_avg"] = run["load_avg_end"]
    head["run"] = run
    out = {**head, **out}
    if as_json:
        print(json.dumps(out, ensure_ascii=False, indent=2))
    else:
        for k, v in out.items():
            print(f"{k}: {v}")
    return 0


def cmd_bench(args) -> int:
    """Speed and memory on one root (:mod:`daemon.dev.bench`); ``--daemon``/``--lifecycle``:
    :mod:`daemon.dev.bench_daemon`; ``--lsp``: :mod:`daemon.dev.bench_lsp`, the LSP round trip;
    ``--mcp``: :mod:`daemon.dev.bench_mcp`, the size of each MCP answer; ``--dense-synthetic N``:
    :mod:`daemon.dev.bench_dense`, no root; ``--platform``: :mod:`daemon.dev.bench_platform`, no root."""
    run = run_started()
    if getattr(args, "dense_synthetic", None) is not None:
        return _dense_bench(args, run)
    if getattr(args, "platform", False):
        from ..dev.bench_platform import run_platform_bench

        return print_report(run_platform_bench(args), args.json, bench="platform", run=run)
    if args.root is None:
        raise SystemExit("bsl-lens bench: ROOT is required (except with --dense-synthetic N or --platform)")
    if getattr(args, "mcp", False):
        from ..dev.bench_mcp import run_mcp_bench

        return print_report(run_mcp_bench(args), args.json, bench="mcp", run=run)
    if getattr(args, "lsp", False):
        from ..dev.bench_lsp import run_lsp_bench

        return print_report(run_lsp_bench(args), args.json, bench="lsp", run=run)
    if getattr(args, "refs", False):
        from ..dev.bench_daemon import run_refs_bench

        return print_report(
            run_refs_bench(Path(args.root), scale=args.scale, queries=args.queries), args.json, bench="refs", run=run
        )
    if args.daemon or getattr(args, "lifecycle", False):
        return _daemon_bench(args, run)
    from ..dev.bench import run_bench

    return print_report(run_bench(args), args.json, run=run)


def _dense_bench(args, run: dict) -> int:
    from ..dev.bench_dense import run_dense_bench

    out = run_dense_bench(
        args.dense_synthetic,
        dim=args.dim,
        M_list=tuple(args.M),
        ef_construction=args.ef_construction,
        ef_list=tuple(args.ef),
        queries=args.queries,
        cache=args.dense_cache,
    )
    return print_report(out, args.json, bench="dense-synthetic", run=run)


def _daemon_bench(args, run: dict) -> int:
    from ..dev.bench_daemon import run_daemon_bench, run_lifecycle_bench

    scales = (1, 3) if args.scale == 1 else (args.scale,)
    if getattr(args, "lifecycle", False):
        return print_report(
            run_lifecycle_bench(Path(args.root), scales=scales, embedder=args.embedder or NO_EMBEDDER),
            args.json,
            bench="lifecycle",
            run=run,
        )
    out = run_daemon_bench(
        Path(args.root),
        Path(args.index_dir) if args.index_dir else None,
        embedder=args.embedder or DEFAULT_EMBEDDER,
        queries=args.queries,
        rss_scale=args.scale,
    )
    out["lifecycle"] = run_lifecycle_bench(Path(args.root), scales=scales)
    return print_report(out, args.json, bench="daemon", run=run)
