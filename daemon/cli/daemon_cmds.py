"""``bsl-lens daemon start|stop|restart|run`` and ``bsl-lens status``: the per-root daemon's life."""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path

import msgspec

from .. import notes
from ..contract import DEFAULT_WATCH
from ..server.runtime import export_problem
from .search import follow_index

log = logging.getLogger(__name__)

#: ``bsl-lens status`` exit code when no daemon answers for the root.
EXIT_NOT_RUNNING = 3
#: ``bsl-lens status`` exit code while the daemon is starting: its process holds the root
#: lock (or a client is spawning it) but it does not answer yet.
EXIT_STARTING = 4
#: ``daemon start --wait`` without a number, and on a terminal: follow the first index this long (s).
START_WAIT_S = 600.0


def daemon_spawn_args(args) -> list[str]:
    """The ``daemon run`` arguments of the daemon ``daemon start`` spawns."""
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
        transport=args.transport,
        platform_help=getattr(args, "platform_help", None) or (),
        platform_version=getattr(args, "platform_version", None),
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
            args.root, index_dir=args.index_dir, args=daemon_spawn_args(args), timeout=args.timeout, client="cli"
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


def _start_wait(c, args) -> None:
    """``daemon start --wait`` (default on a terminal): show the daemon's first-index
    progress until the lexical side is ready; Ctrl-C stops watching, not the daemon."""
    wait = args.wait if args.wait is not None else (START_WAIT_S if sys.stderr.isatty() else 0.0)
    if not wait:
        return
    st = c.status().service
    if st.state == "ready":
        return
    print(
        f"bsl-lens: the daemon {notes.daemon_activity(st)} (Ctrl-C stops watching; the daemon keeps running)",
        file=sys.stderr,
    )
    try:
        if follow_index(c, wait):
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
    (``args._explicit``, set by :func:`daemon.cli.parser.parse_args`), not from the environment."""
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
        if opts.watch != DEFAULT_WATCH:
            kept.append(f"--watch {opts.watch}")
    if args.reconcile_interval is None and opts.reconcile_interval is not None:
        args.reconcile_interval = opts.reconcile_interval
        kept.append(f"--reconcile-interval {opts.reconcile_interval:g}")
    if args.log_file is None and opts.log_file:
        args.log_file = opts.log_file
        kept.append(f"--log-file {opts.log_file}")
    if "transport" not in explicit and opts.transport and opts.transport != args.transport:
        args.transport = opts.transport
        kept.append(f"--transport {opts.transport}")
    if not getattr(args, "platform_help", None) and opts.platform_help:
        args.platform_help = list(opts.platform_help)
        kept += [f"--platform-help {p}" for p in opts.platform_help]
    if not getattr(args, "platform_version", None) and opts.platform_version:
        args.platform_version = opts.platform_version
        kept.append(f"--platform-version {opts.platform_version}")
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
    _log_to_file(log_path, args.verbose)
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
            transport=args.transport,
            platform_help=args.platform_help,
            platform_version=args.platform_version,
        )
    except AlreadyRunning as exc:
        log.warning("%s", exc)
        print(f"bsl-lens: {exc}", file=sys.stderr)
        return runtime.EXIT_ALREADY_RUNNING
    _exit_now(rc)
    return rc  # pragma: no cover - _exit_now does not return


def _log_to_file(log_path: Path, verbose: int) -> None:
    """The daemon's log: the root logger at INFO (DEBUG with ``-v``), also into ``log_path``
    (created 0600: it names the export's files) unless stderr already is that file."""
    root_logger = logging.getLogger()
    root_logger.setLevel(logging.DEBUG if verbose else logging.INFO)
    if _same_file(sys.stderr, log_path):
        return
    log_path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.close(os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600))
    fh = logging.FileHandler(log_path, encoding="utf-8")
    fh.setFormatter(logging.Formatter("%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s"))
    root_logger.addHandler(fh)


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


# ------------------------------------------------------------------------------ status
def cmd_status(args) -> int:
    """Report the root's daemon, found by the root lock whatever ``--index-dir`` says (a
    note says when it differs); never starts one. Exit 0 running, 4 starting (its process
    is up, or a client is spawning it, but it does not answer yet), 3 not running (or
    stopping, or not answering). ``--json``: the daemon's ``Status`` fields plus
    ``"running": true`` and a ``"daemon"`` object (pid, socket, log, connections, ...);
    starting: ``{"running": false, "state": "starting", "pid", "root", "index_dir",
    "log"}``; not running ``{"running": false, "root", "index_dir"}`` (+ ``"state"`` and
    ``"detail"`` if a process holds the root lock)."""
    from ..client import DaemonError, connect
    from ..server import runtime

    paths = runtime.paths_for(args.root, args.index_dir)
    note = None
    owner = runtime.root_owner(paths)
    if owner is not None and owner.index_dir and owner.index_dir != str(paths.index_dir):
        note = f"note: the daemon of this root uses the index dir {owner.index_dir}, not {paths.index_dir}"
        paths = runtime.paths_for(args.root, owner.index_dir)
    try:
        with connect(
            paths.root, index_dir=paths.index_dir, spawn=False, request_timeout=15.0, connect_timeout=5.0, client="cli"
        ) as c:
            res = c.status()
    except DaemonError as exc:
        return _status_not_answering(args, paths, exc, note)
    data = msgspec.to_builtins(res.service)
    data["running"] = True
    data["daemon"] = msgspec.to_builtins(res.daemon)
    if note:
        data["note"] = note
    if args.json:
        print(json.dumps(data, ensure_ascii=False, indent=2))
    else:
        print(notes.format_status(data, verbose=args.verbose))
        if note:
            print(f"  {note}")
    return 0


def _status_not_answering(args, paths, exc, note: str | None) -> int:
    """``status`` when no daemon answered: starting (exit 4), or not running / stopping / not
    answering (exit 3), told from the root lock and the spawn lock."""
    from ..client import DaemonNotRunning
    from ..server import runtime

    owner = runtime.root_owner(paths)
    state = detail = None
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
        _print_starting(args, paths, owner, pid, note)
        return EXIT_STARTING
    if args.json:
        out = {"running": False, "root": str(paths.root), "index_dir": str(paths.index_dir)}
        out.update({k: v for k, v in (("state", state), ("detail", detail), ("note", note)) if v})
        print(json.dumps(out, ensure_ascii=False, indent=2))
        return EXIT_NOT_RUNNING
    print(f"bsl-lens daemon for {paths.root}: not running" + (f"\n  {detail}" if detail else ""))
    if note:
        print(f"  {note}")
    if args.verbose:
        print(f"  index dir: {paths.index_dir}\n  log:       {paths.log}")
    return EXIT_NOT_RUNNING


def _print_starting(args, paths, owner, pid, note: str | None) -> None:
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
        return
    if owner is not None:
        who = f"pid {pid or '?'}, index dir {owner.index_dir or paths.index_dir}"
    else:  # the spawning client has not told which index dir yet
        who = f"being spawned by client pid {pid or '?'}"
    print(f"bsl-lens daemon for {paths.root}: starting ({who}); it answers once its snapshot is loaded")
    if note:
        print(f"  {note}")
    if args.verbose:
        print(f"  log:       {paths.log}")
