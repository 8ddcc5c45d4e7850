"""The front ends (LSP, MCP, the CLI's client side) must load none of the engine: no numpy,
tree-sitter, lxml or hnswlib, not even when they decode every kind of answer. Checked in a
fresh interpreter, so what other tests imported does not hide a heavy import. (The contract's
own tests are in tests/unit/test_contract.py.)"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
HEAVY = ("numpy", "tree_sitter", "lxml", "hnswlib", "daemon.engine", "daemon.service.service", "daemon.sources.scan")


def _loaded_after(code: str) -> list[str]:
    probe = code + f"\nimport json, sys\nprint(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))\n"
    out = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=REPO,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(
    "module", ["lsp.server", "mcp_bridge.server", "mcp_bridge.serve", "daemon.client", "daemon.server.protocol"]
)
def test_front_ends_load_none_of_the_engine(module):
    assert _loaded_after(f"import {module}") == []


def test_decoding_every_result_loads_none_of_the_engine():
    # A client decodes each method's result into its contract type (protocol.result_type);
    # a search answer and a status answer are decoded for real, not just looked up.
    code = """
import msgspec
import lsp.server, mcp_bridge.server
from daemon.server import protocol
for m in protocol.METHODS:
    protocol.result_type(m)
hit = dict(id="a::b", path="a", symbol="b", kind="function", name="b", owner="x", start_line=1, end_line=2, score=1.0)
res = dict(query="q", mode="hybrid", hits=[hit], total=1, dense_done=0, dense_total=0, took_ms=1.0)
msgspec.json.decode(msgspec.json.encode(res), type=protocol.result_type("search"))
"""
    assert _loaded_after(code) == []


def test_the_cli_parser_loads_no_front_end_framework_and_no_engine():
    code = """
import sys
import daemon.cli.main  # the entry point
from daemon.cli.parser import build_parser
build_parser()
bad = [m for m in ("pygls", "lsprotocol", "mcp", "pydantic", "lsp.server", "mcp_bridge.server") if m in sys.modules]
assert not bad, bad
"""
    assert _loaded_after(code) == []
