"""``bsl-lens mcp``, ``bsl-lens lsp`` and ``bsl-lens report``: the servers for agents and editors,
and the status page. The MCP SDK and pygls are imported only when their command runs."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

log = logging.getLogger(__name__)


# ------------------------------------------------------------------------------ mcp
def looks_like_export(path: Path) -> bool:
    """True if ``path`` is a Designer dump (``Configuration.xml``) or holds EDT project(s)
    (:func:`daemon.sources.scan.detect_export`)."""
    from ..sources.scan import detect_export

    return path.is_dir() and detect_export(path).format != "unknown"


#: How deep below the current directory an EDT project's ``src`` may lie for ``bsl-lens mcp``
#: without ROOT to serve it (``exts/yaxunit/src``: 2); deeper, the folder holds exports rather
#: than being one.
CWD_PROJECT_DEPTH = 2


def _cwd_root(here: Path) -> Path:
    """The current directory ``here`` as the root ``bsl-lens mcp`` serves without ROOT: only
    when it is an export itself (a Designer dump, or EDT projects at most
    :data:`CWD_PROJECT_DEPTH` folders down), never the home folder, the file system's root or
    the temp folder, where MCP hosts start servers and unrelated projects live. ``ValueError``
    with a message for the user otherwise."""
    import tempfile

    from ..sources.scan import detect_export

    hint = (
        "pass the export root, e.g. bsl-lens mcp /path/to/export (a folder of markdown documentation "
        "is served when given as ROOT: bsl-lens mcp /path/to/docs)"
    )
    shared = {Path("/"), Path.home().resolve(), Path(tempfile.gettempdir()).resolve()}
    if here in shared:
        raise ValueError(f"no ROOT given and the current directory {here} is not served by default; {hint}")
    info = detect_export(here) if here.is_dir() else None
    near = info is not None and (
        info.format == "designer" or any(p.src.count("/") <= CWD_PROJECT_DEPTH for p in info.projects)
    )
    if not near:
        raise ValueError(
            f"no ROOT given and the current directory {here} is not a 1C export (no Configuration.xml, "
            f"no src/Configuration/Configuration.mdo within {CWD_PROJECT_DEPTH} folders down); {hint}"
        )
    return here


def resolve_roots(roots: list[str], *, cwd: Path | None = None) -> list[Path]:
    """The export roots ``bsl-lens mcp`` serves, resolved; the current directory when ``roots``
    is empty and it is an export itself (:func:`_cwd_root`). ``ValueError`` with a message for
    the user: a root that is not a directory or holds neither an export nor ``.bsl`` modules or
    markdown pages (:func:`daemon.server.runtime.export_problem`), no root given outside an
    export, a root given twice. A root with modules but no configuration is served, with a
    warning in the log."""
    from ..server import runtime

    if not roots:
        return [_cwd_root((cwd or Path.cwd()).resolve())]
    out: list[Path] = []
    for r in roots:
        p = runtime.resolve_root(r)
        if not p.is_dir():
            raise ValueError(f"export root is not a directory: {r}")
        if p in out:
            raise ValueError(f"export root given twice: {r}")
        if not looks_like_export(p):
            problem = runtime.export_problem(p)  # nothing to index at all: refuse before any daemon starts
            if problem:
                raise ValueError(problem)
            log.warning(
                "%s has no Configuration.xml or EDT project: only its .bsl modules and markdown pages "
                "(a docs root) will be indexed",
                p,
            )
        out.append(p)
    return out


def cmd_mcp(args) -> int:
    """MCP server for AI agents over the roots' daemons: stdio, or streamable HTTP with
    ``--http`` (:mod:`mcp_bridge.serve`). Exit 1 with a message on stderr for bad roots."""
    try:
        roots = resolve_roots(args.roots)
    except ValueError as exc:
        print(f"bsl-lens mcp: error: {exc}", file=sys.stderr)
        return 1
    from mcp_bridge.serve import run

    return run(args, roots)


# ------------------------------------------------------------------------------ lsp
def cmd_lsp(args) -> int:
    """The language server for editors on stdio (:mod:`lsp.server`). Does not return: the
    server leaves with ``os._exit``."""
    from lsp.server import serve_args

    return serve_args(args, configured=True)


# ------------------------------------------------------------------------------ report
def cmd_report(args) -> int:
    """Write the status page (:mod:`daemon.cli.report`): one self-contained HTML file from the
    roots' running daemons (never starts one), with eval charts from ``--gold`` (run through
    each running daemon) and ``--eval-json`` files. Exit 0 written (also when a root's daemon
    is not running: the page says so), 1 bad input or the file could not be written."""
    from ..dev.evaluate import load_gold
    from .report import collect_status, load_eval_json, render_html

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
        if args.gold:
            run = _report_eval(args, root, st, gold, idx, modes)
            if run is not None:
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
    roots = f"{len(statuses)} root{'s' if len(statuses) != 1 else ''}"
    print(f"wrote {out.resolve()} ({roots}, {len(evals)} eval run{'s' if len(evals) != 1 else ''})")
    return 0


def _report_eval(args, root: str, st: dict, gold: list, idx, modes) -> dict | None:
    """``--gold`` of ``report`` for one root: the eval run through its daemon, or None after a
    warning (no daemon, no gold entries, the eval stopped)."""
    from ..client import DaemonError
    from .report import eval_via_daemon, gold_for_root

    entries = gold_for_root(gold, st.get("root", root), args.corpus)
    if not st.get("running"):
        print(f"warning: {st.get('root', root)}: no daemon running; no eval for it", file=sys.stderr)
        return None
    if not entries:
        print(f"warning: no gold entries for {st.get('root', root)} in {args.gold} (use --corpus)", file=sys.stderr)
        return None
    try:
        run = eval_via_daemon(st["root"], entries, index_dir=idx, modes=modes)
    except DaemonError as exc:
        print(f"warning: {st['root']}: eval stopped: {exc}", file=sys.stderr)
        return None
    run["source"] = f"{args.gold} through the daemon"
    return run
