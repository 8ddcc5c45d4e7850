"""The ``bsl-lens lsp`` / ``python -m lsp`` options, kept apart from the server so that the
CLI builds its parser without loading pygls (argparse only)."""

from __future__ import annotations

import argparse


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add the ``lsp`` options to ``p``: ``--stdio``, ``-v`` (counted), ``--log-file``."""
    p.add_argument("--stdio", action="store_true", help="talk LSP on stdin/stdout (the default and only transport)")
    p.add_argument(
        "-v", "--verbose", action="count", default=0, help="more logging on stderr (-vv: pygls' own debug too)"
    )
    p.add_argument("--log-file", help="also log to this file")
