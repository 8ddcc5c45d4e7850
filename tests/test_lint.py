"""The lint and type checks of pyproject.toml ([tool.ruff], [tool.mypy]) pass.

ruff: pyflakes (F) everywhere, docstrings on every public module, class, method and function of
the product (D100-D103), and no ``print`` (T20) in ``lsp/`` and ``mcp_bridge/``, whose
stdout is the LSP/MCP stream. mypy --strict: the modules the daemon and its clients share
(the ``daemon/contract/`` package, ``daemon/server/protocol.py``, ``daemon/stats.py``).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=REPO, input=stdin, capture_output=True, text=True, timeout=300
    )


def test_ruff_passes():
    out = _run("ruff", "check", "--no-cache", ".")
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.parametrize(
    ("path", "flagged"), [("lsp/new.py", True), ("mcp_bridge/new.py", True), ("daemon/new.py", False)]
)
def test_ruff_flags_print_in_the_stdio_processes(path, flagged):
    out = _run("ruff", "check", "--no-cache", "--stdin-filename", path, "-", stdin='"""Probe."""\n\nprint("hello")\n')
    assert (out.returncode != 0) == flagged, out.stdout + out.stderr
    assert ("T201" in out.stdout) == flagged


def test_mypy_passes_on_the_contract():
    out = _run("mypy", "--no-incremental")
    assert out.returncode == 0, out.stdout + out.stderr
    checked = _run("mypy", "--no-incremental", "-v").stderr  # the configured files were checked
    contract = sorted(p.relative_to(REPO).as_posix() for p in (REPO / "daemon" / "contract").glob("*.py"))
    assert contract and all(name in checked for name in contract), contract
