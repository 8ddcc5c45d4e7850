"""``bsl-lens``: the console entry point (``daemon.cli.main:main``, also ``python -m daemon.cli``).

The commands live in one module per group: :mod:`~daemon.cli.index` (index, eval),
:mod:`~daemon.cli.search`, :mod:`~daemon.cli.daemon_cmds` (daemon start|stop|restart|run,
status), :mod:`~daemon.cli.bench` (bench, demo), :mod:`~daemon.cli.servers` (mcp, lsp, report),
:mod:`~daemon.cli.cache` (embed, cache export|import); the parser is :mod:`~daemon.cli.parser`.

Everything the commands print for a human goes to stdout; progress and logs go to stderr.
Exit codes: 0 success, 1 a command failed (message on stderr), 2 bad usage (argparse, with
the subcommand's usage: also an empty query, ``--mode vector`` with no vectors to search, an
invalid ``BSL_LENS_EMBEDDER``), 3 ``status``: no daemon running for the root, 4 ``status``:
the daemon is starting, 130 interrupted.
"""

from __future__ import annotations

import logging
import os
import sys

from .parser import parse_args


def utf8_streams() -> None:
    """Make stdout and stderr write UTF-8 whatever the locale says: a configuration's names are
    Cyrillic, and a pipe or file on Windows (or a ``C`` locale elsewhere) would otherwise be
    cp1252 or ASCII and fail on the first name printed. A console that already writes UTF-8
    (Windows' console, a UTF-8 locale) is left alone."""
    for stream in (sys.stdout, sys.stderr):
        enc = (getattr(stream, "encoding", None) or "").lower().replace("-", "").replace("_", "")
        if enc != "utf8" and hasattr(stream, "reconfigure"):
            try:
                stream.reconfigure(encoding="utf-8", errors="replace")
            except (ValueError, OSError):
                pass


def main(argv: list[str] | None = None) -> int:
    """Console entry point. Returns the exit code: 0 success, 1 a command failed (message on
    stderr, no traceback for bad input or OS errors), 2 bad usage, 130 interrupted."""
    utf8_streams()
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
