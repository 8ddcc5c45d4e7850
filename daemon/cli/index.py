"""``bsl-lens index`` and ``bsl-lens eval``: an export root's index in this process, no daemon.

:func:`open_engine` opens the root's index the way every in-process command does (``index``,
``eval``, ``search --standalone``, ``demo``, ``embed``, ``cache``).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from ..contract import NO_EMBEDDER
from ..server.runtime import export_problem
from ..stats import p50_p95

_PROGRESS = None


def progress(stage: str, done: int, total: int) -> None:
    """The progress callback of ``index`` and ``demo``: a bar per stage on a terminal, a
    line every few seconds otherwise (:class:`daemon.cli.progress.StageProgress`)."""
    global _PROGRESS
    if _PROGRESS is None:
        from .progress import StageProgress

        _PROGRESS = StageProgress()
    _PROGRESS(stage, done, total)


def progress_done() -> None:
    """End the bar of :func:`progress` (if one was drawn)."""
    if _PROGRESS is not None:
        _PROGRESS.close()


def open_engine(args, *, embedder: bool = True):
    """The :class:`daemon.engine.Engine` of ``args.root`` (``--index-dir``, ``--no-stem``,
    ``--docs``); with the ``--embedder`` model loaded unless ``embedder`` is False."""
    from ..engine import Engine, EngineConfig
    from ..index.embedder import embedder_for
    from ..sources.docs import normalize_docs_dirs

    config = EngineConfig(
        stem=getattr(args, "stem", True), docs=normalize_docs_dirs(Path(args.root), getattr(args, "docs", None))
    )
    emb = embedder_for(args.embedder) if embedder else None
    index_dir = Path(args.index_dir) if args.index_dir else None
    return Engine.open(Path(args.root), index_dir=index_dir, config=config, embedder=emb)


def attach_shared_cache(eng, args):
    """Give ``eng`` the ``--shared-cache`` client (hook: ``Engine.shared_cache``); None without one."""
    from ..index.shared_cache import for_embedder

    shared = for_embedder(
        getattr(args, "shared_cache", None),
        eng.embedder,
        getattr(args, "shared_cache_mode", None) or "rw",
        index_dir=eng.index_dir,
    )
    eng.shared_cache = shared
    if shared is not None:
        shared.drain()  # what an earlier run could not write goes first
    return shared


def shared_line(shared) -> str:
    """One line on what the shared embedding cache did (hits, misses, written, last error)."""
    st = shared.status()
    err = f"; last error: {st.last_error}" if st.last_error else ""
    unsent = f", {st.unsent} not written yet (kept in the index dir; sent by the next run)" if st.unsent else ""
    return (
        f"shared cache {st.url} ({st.mode}, {st.state}): {st.hits} hits, {st.misses} misses, "
        f"{st.written} written{unsent}, {st.unreached} not looked up{err}"
    )


# ------------------------------------------------------------------------------ index
def cmd_index(args) -> int:
    """Index (or bring up to date) an export root; lexical first, then the dense side.
    Exit 1 before anything is created for a root that is not an export (:func:`export_problem`)."""
    problem = export_problem(args.root)
    if problem:
        print(f"bsl-lens: error: {problem}", file=sys.stderr)
        return 1
    eng = open_engine(args, embedder=not args.no_dense)
    t0 = time.perf_counter()
    rep = eng.refresh(progress=progress)
    progress_done()
    from ..sources.scan import IGNORE_FILE

    hidden = [s.path for s in eng.skipped if s.reason == "ignored_project"]
    if not eng.files:
        why = f" ({IGNORE_FILE} leaves out {', '.join(hidden)})" if hidden else ""
        print(
            f"bsl-lens: error: no 1C export under {eng.root}: no Configuration.xml, no "
            f"src/Configuration/Configuration.mdo and no .bsl modules{why}",
            file=sys.stderr,
        )
        return 1
    if eng.format == "unknown" and hidden:
        print(
            f"warning: {IGNORE_FILE} leaves out every EDT project ({', '.join(hidden)}): "
            "their modules and metadata are not indexed",
            file=sys.stderr,
        )
    elif eng.format == "unknown" and any(r.kind != "docs" for r in eng.files.values()):
        why = f" (or its {IGNORE_FILE} leaves them out)" if (eng.root / IGNORE_FILE).is_file() else ""
        print(
            f"warning: neither a Designer dump nor an EDT project{why}; indexing the .bsl files found", file=sys.stderr
        )
    eng.resolve_references()  # saved resolved: a load need not resolve every file again
    eng.save()
    print(
        f"lexical: {rep.files_changed} files (re)chunked, {rep.files_removed} removed, "
        f"+{rep.chunks_added} ~{rep.chunks_changed} -{rep.chunks_removed} chunks in {rep.seconds:.1f}s",
        file=sys.stderr,
    )
    if not args.no_dense:
        _embed(eng, args)
    print(_index_summary(eng, args, time.perf_counter() - t0))
    if args.verbose:
        for s in eng.skipped:
            print(f"  skipped {s.path}: {s.reason} {s.detail}", file=sys.stderr)
    return 0


def _embed(eng, args) -> None:
    """The dense side of ``index``: embed what is missing (a Ctrl-C keeps what is done)."""
    shared = attach_shared_cache(eng, args)
    try:
        n = eng.embed_pending(progress=progress)
    except KeyboardInterrupt:
        progress_done()
        eng.save()  # keep every vector embedded so far; the next run resumes
        raise
    progress_done()
    eng.save()
    print(f"dense: {n} vectors set", file=sys.stderr)
    if shared is not None:
        print(shared_line(shared), file=sys.stderr)
        shared.close()


def _index_summary(eng, args, seconds: float) -> str:
    """The last line of ``index``: what the index holds, what was skipped, how long it took."""
    st = eng.stats()
    by_reason: dict[str, int] = {}
    for s in eng.skipped:
        by_reason[s.reason] = by_reason.get(s.reason, 0) + 1
    what = "docs root" if st["format"] == "docs" else st["format"] + " export"
    docs = f"{st['docs_pages']} docs pages ({st['docs_sections']} sections), " if st["docs_pages"] else ""
    skipped = ", ".join(f"{n} {r}" for r, n in sorted(by_reason.items())) or 0
    more = " (-v lists them)" if by_reason and not args.verbose else ""
    return (
        f"{what} {st['root']}: {st['modules']} modules, {st['methods']} methods, "
        f"{st['metadata_chunks']} metadata chunks, {docs}{st['bm25_terms']} BM25 terms, "
        f"dense {st['dense_done']}/{st['dense_total']}; skipped {skipped}{more}; "
        f"{seconds:.1f}s; index in {st['index_dir']}"
    )


# ------------------------------------------------------------------------------ eval
def cmd_eval(args) -> int:
    """nDCG@10 / MRR@10 / Recall@10 / Hit@1 per mode and intent (the gold set's README);
    ``--fold A|B`` scores one fixed fold of the gold set, ``--fold both`` reports the full set
    and both folds (:func:`daemon.dev.evaluate.fold_of`). ``--json`` also records where and when
    it ran (``run``: :mod:`daemon.cli.run_info`)."""
    from ..dev.evaluate import fold_of, load_gold
    from .run_info import run_finished, run_started

    run = run_started()
    if getattr(args, "scope", None) == "platform":
        return _eval_platform(args)
    if not args.root:
        print("bsl-lens: error: eval needs ROOT (or --scope platform)", file=sys.stderr)
        return 2
    corpus = args.corpus or Path(args.root).resolve().name
    try:
        folds = fold_of(load_gold(Path(args.gold))) if args.fold else {}
    except ValueError as exc:
        print(f"bsl-lens: error: {exc}", file=sys.stderr)
        return 1
    entries = load_gold(Path(args.gold), corpus)
    if args.fold in ("A", "B"):
        entries = [e for e in entries if folds[str(e.get("id") or e["query"])] == args.fold]
    if not entries:
        print(f"no gold entries for corpus {corpus!r} in {args.gold}", file=sys.stderr)
        return 1
    modes = args.modes.split(",")
    problem = _eval_modes_problem(modes, args.embedder)
    if problem:
        print(f"bsl-lens: error: {problem}", file=sys.stderr)
        return 1
    _warn_missing_gold_paths(Path(args.root), entries)
    eng = open_engine(args, embedder=any(m != "lexical" for m in modes))
    if not args.no_refresh:
        eng.refresh()
        eng.save()
    eng.resolve_references()  # the ranking's fan-in counts resolved files only, as the daemon's after its first resolve
    st = eng.stats()
    if st["dense_total"] and st["dense_done"] < st["dense_total"]:
        print(f"warning: dense index incomplete ({st['dense_done']}/{st['dense_total']})", file=sys.stderr)
    results = {mode: _eval_mode(eng, entries, mode, folds if args.fold == "both" else None) for mode in modes}
    if args.json:
        if not args.per_query:
            for r in results.values():
                r.pop("per_query", None)
        out = {"corpus": corpus, "gold": str(args.gold), "fold": args.fold or "all", "run": run_finished(run)}
        out.update(stats=st, modes=results)
        print(json.dumps(out, ensure_ascii=False, indent=2))
        return 0
    _print_eval(args, corpus, entries, st, results)
    return 0


def platform_help_of(args, root: str | None = None):
    """The :class:`daemon.service.platform.PlatformHelp` of the in-process commands: ROOT's
    compatibility mode (none without ROOT), ``--platform-help``, ``--platform-version``,
    ``--no-stem``."""
    from ..service.platform import PlatformHelp

    return PlatformHelp(
        Path(root or args.root or "."),
        help_paths=getattr(args, "platform_help", None) or (),
        version=getattr(args, "platform_version", None),
        stem=getattr(args, "stem", True),
    )


def _eval_platform(args) -> int:
    """``eval --scope platform``: the platform gold set (``tests/gold/platform_dev.jsonl``,
    corpus ``platform``) against the platform help that answers for ROOT (the bundled data set
    when no platform is installed), per mode; a hit's key is its entry kind and qualified name
    (:func:`daemon.dev.evaluate.platform_key`)."""
    from ..dev.evaluate import evaluate, fold_results, platform_key
    from ..index.embed import embedder_for

    gold = _platform_gold(args)
    if isinstance(gold, int):
        return gold
    entries, folds = gold
    modes = args.modes.split(",")
    problem = _eval_modes_problem(modes, args.embedder)
    if problem:
        print(f"bsl-lens: error: {problem}", file=sys.stderr)
        return 1
    ph = platform_help_of(args)
    src = ph.ensure(ph.sources[ph.chosen])
    if src.state != "ready":
        src = ph.ensure(ph.sources["bundled"])
    emb = embedder_for(args.embedder) if any(m != "lexical" for m in modes) else None
    if emb is not None:
        ph.fill_dense(emb, progress=lambda d, t: progress("embed platform", d, t))
        progress_done()
    results = {}
    for mode in modes:
        lat: list[float] = []

        def run(q, mode=mode, lat=lat):
            t = time.perf_counter()
            hits = ph.search(q, mode=mode, top_k=10, version=src.name, embedder=emb, snippets=False)[0]
            lat.append((time.perf_counter() - t) * 1000)
            return [platform_key(h.kind, h.symbol or h.name) for h in hits]

        r = evaluate(entries, run)
        r["latency_ms"] = p50_p95(lat, 3)
        if args.fold == "both":
            r["folds"] = fold_results(r, folds)
        results[mode] = r
    st = {"source": src.label, "entries": len(src.index), "vectors": len(src.index.dense or ()) if emb else 0}
    _print_platform_eval(args, len(entries), results, st)
    return 0


def _platform_gold(args) -> tuple[list[dict], dict] | int:
    """The platform gold set's entries of ``--fold`` and the fold of each, or an exit code
    after printing why there are none."""
    from ..dev.evaluate import fold_of, load_gold

    try:
        entries = load_gold(Path(args.gold), args.corpus or "platform")
        folds = fold_of(entries) if args.fold else {}
    except (OSError, ValueError) as exc:
        print(f"bsl-lens: error: {exc}", file=sys.stderr)
        return 1
    if args.fold in ("A", "B"):
        entries = [e for e in entries if folds[str(e.get("id") or e["query"])] == args.fold]
    if not entries:
        print(f"no gold entries for corpus {args.corpus or 'platform'!r} in {args.gold}", file=sys.stderr)
        return 1
    return entries, folds


def _print_platform_eval(args, n: int, results: dict, st: dict) -> None:
    """The platform eval's output: JSON (``--json``) or the tables per mode and fold."""
    if args.json:
        if not args.per_query:
            for r in results.values():
                r.pop("per_query", None)
        out = {"corpus": "platform", "gold": str(args.gold), "fold": args.fold or "all", "stats": st, "modes": results}
        print(json.dumps(out, ensure_ascii=False, indent=2))
        return
    print(f"platform help {st['source']}: {n} queries, {st['entries']} entries, {st['vectors']} vectors")
    print(format_eval_table(results))
    if args.fold == "both":
        for f in ("A", "B"):
            sub = {m: {**r["folds"][f], "latency_ms": r["latency_ms"]} for m, r in results.items()}
            print(f"\nfold {f}: {sub[next(iter(sub))]['n']} queries (latency: all queries)")
            print(format_eval_table(sub))
    if args.per_query:
        for mode, r in results.items():
            for row in r["per_query"]:
                print(f"{mode}\t{row['id']}\t{row['intent']}\t{row['symbol']['ndcg@10']:.3f}\t{row['query']}")


def _eval_modes_problem(modes: list[str], embedder: str | None) -> str | None:
    bad = [m for m in modes if m not in ("lexical", "vector", "hybrid")]
    if bad:
        return f"unknown mode(s) {bad}; use lexical, vector, hybrid"
    if embedder == NO_EMBEDDER and any(m != "lexical" for m in modes):
        return "vector and hybrid modes need an embedder; use --modes lexical with --embedder none"
    return None


def _warn_missing_gold_paths(root: Path, entries: list[dict]) -> None:
    missing = sorted({r["path"] for e in entries for r in e["relevant"] if not (root / r["path"]).exists()})
    if missing:
        print(
            f"warning: {len(missing)} gold paths do not exist under {root} (e.g. {missing[0]}); "
            "is this the right root for --corpus?",
            file=sys.stderr,
        )


def _eval_mode(eng, entries: list[dict], mode: str, folds: dict | None) -> dict:
    """One mode's scores (``evaluate``) with its latency; per fold too when ``folds`` is given.

    The documentation gold set is searched in the docs scope, 30 sections deep: the file level
    deduplicates the sections of one page before its cut at 10 (the gold set's README)."""
    from ..contract import Filters
    from ..dev.evaluate import docs_heading_key, evaluate, fold_results, is_docs_entry

    by_query = {e["query"]: e for e in entries}
    scope = Filters(scope="docs") if entries and all(is_docs_entry(e) for e in entries) else None
    lat: list[float] = []

    def run(q):
        t = time.perf_counter()
        res = eng.search(q, mode=mode, top_k=30 if scope is not None else 10, filters=scope)
        lat.append((time.perf_counter() - t) * 1000)
        entry = by_query.get(q)
        if entry is not None and is_docs_entry(entry):  # docs gold: heading-level keys
            return [(h.path, docs_heading_key(entry, h.path, _chain(eng, h))) for h in res.hits]
        return [(h.path, h.symbol) for h in res.hits]

    r = evaluate(entries, run)
    r["latency_ms"] = p50_p95(lat, 3)
    if folds is not None:
        r["folds"] = fold_results(r, folds)
    return r


def _chain(eng, hit) -> list[str]:
    """The heading chain of a docs hit (:attr:`daemon.contract.Chunk.region`), [] otherwise."""
    c = eng.get_chunk(hit.id)
    return list(c.region) if c is not None and c.is_docs else []


def _print_eval(args, corpus: str, entries: list[dict], st: dict, results: dict) -> None:
    fold_note = f" (fold {args.fold})" if args.fold in ("A", "B") else ""
    print(f"corpus {corpus}: {len(entries)} queries{fold_note}; dense {st['dense_done']}/{st['dense_total']}")
    print(format_eval_table(results))
    if args.fold == "both":
        for f in ("A", "B"):
            sub = {m: {**r["folds"][f], "latency_ms": r["latency_ms"]} for m, r in results.items()}
            print(f"\nfold {f}: {sub[next(iter(sub))]['n']} queries (latency: all queries)")
            print(format_eval_table(sub))
    if args.per_query:
        for mode, r in results.items():
            for row in r["per_query"]:
                symbol, file = row["symbol"]["ndcg@10"], row["file"]["ndcg@10"]
                print(f"{mode}\t{row['id']}\t{row['intent']}\t{symbol:.3f}\t{file:.3f}\t{row['query']}")


def format_eval_table(results: dict) -> str:
    """A Markdown table: nDCG@10 symbol/file level per mode, overall and per intent, plus
    Hit@1 and MRR@10 at symbol level and latency."""
    intents = sorted({i for r in results.values() for i in r["by_intent"]})
    head = "| mode (nDCG@10 symbol / file level) | all | " + " | ".join(
        f"{i} (n={results[next(iter(results))]['by_intent'][i]['n']})" for i in intents
    )
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
