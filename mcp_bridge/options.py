"""The ``bsl-lens mcp`` options, kept apart from the server so that the CLI builds its parser
without loading the MCP SDK (argparse and the light :mod:`daemon.options` only)."""

from __future__ import annotations

import argparse

from daemon.contract import WATCH_MODES
from daemon.options import (
    EMBEDDER_HELP,
    SHARED_CACHE_HELP,
    SHARED_CACHE_MODE_HELP,
    embedder_arg,
    shared_cache_arg,
    shared_cache_mode_arg,
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add the ``mcp`` options to ``p``: roots, logging, the settings of a spawned daemon
    (``--index-dir``, ``--embedder``, ``--watch``, ``--reconcile-interval``, ``--shared-cache``,
    ``--shared-cache-mode``) and the HTTP
    transport (``--http``, ``--host``, ``--port``, ``--token``, ``--allow-origin``)."""
    p.add_argument("roots", nargs="*", metavar="ROOT", help="export root(s): Designer dumps or EDT project folders")
    p.add_argument("-v", "--verbose", action="count", default=0, help="more logging on stderr (-vv for debug)")
    p.add_argument(
        "--index-dir",
        action="append",
        metavar="DIR",
        help="index dir of a spawned daemon; repeat once per ROOT, in order",
    )
    p.add_argument("--embedder", type=embedder_arg, help="for a spawned daemon: " + EMBEDDER_HELP)
    p.add_argument("--watch", choices=WATCH_MODES, help="for a spawned daemon: auto (default), native, polling, off")
    p.add_argument(
        "--shared-cache", type=shared_cache_arg, metavar="DSN", help="for a spawned daemon: " + SHARED_CACHE_HELP
    )
    p.add_argument(
        "--shared-cache-mode",
        type=shared_cache_mode_arg,
        metavar="rw|ro",
        help="for a spawned daemon: " + SHARED_CACHE_MODE_HELP,
    )
    p.add_argument(
        "--docs",
        action="append",
        metavar="DIR",
        help="for a spawned daemon: a documentation folder inside the root (markdown; repeatable), "
        "searched with scope docs",
    )
    p.add_argument(
        "--reconcile-interval",
        type=float,
        metavar="SECONDS",
        help="for a spawned daemon: full re-check interval (default 120; 0 disables)",
    )
    p.add_argument(
        "--platform-help",
        action="append",
        metavar="DIR|FILE",
        help="for a spawned daemon: an installed 1C:Enterprise's help folder or .hbk file (repeatable)",
    )
    p.add_argument(
        "--platform-version",
        metavar="VERSION",
        help="for a spawned daemon: the platform version whose help answers (default: the configuration's "
        "CompatibilityMode picks the nearest installed one)",
    )
    p.add_argument("--http", action="store_true", help="serve streamable HTTP at http://HOST:PORT/mcp instead of stdio")
    p.add_argument("--host", default="127.0.0.1", help="HTTP bind address (default 127.0.0.1; any other needs --token)")
    p.add_argument(
        "--port", type=int, default=8765, help="HTTP port (default 8765; 0: any free port, printed on stderr)"
    )
    p.add_argument("--token", help="HTTP: require Authorization: Bearer TOKEN on every request")
    p.add_argument(
        "--allow-origin",
        action="append",
        metavar="ORIGIN",
        help="HTTP: a browser Origin to accept besides loopback ones (repeatable)",
    )
