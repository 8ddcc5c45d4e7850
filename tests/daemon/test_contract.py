"""The contract module (daemon/contract.py): one home for the wire types, light to import.

The front ends (LSP, MCP, the CLI's client side) must load none of the engine: no numpy,
tree-sitter, lxml or hnswlib, not even when they decode every kind of answer. Checked in a
fresh interpreter, so what other tests imported does not hide a heavy import.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from daemon import contract
from daemon.server import protocol

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


def test_the_contract_imports_only_msgspec_and_the_standard_library():
    tree = ast.parse((REPO / "daemon" / "contract.py").read_text(encoding="utf-8"))
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add("." * node.level + (node.module or ""))
    assert imported == {"__future__", "msgspec", "unicodedata"}


def test_result_types_are_the_contract_structs():
    assert protocol.result_type("search") is contract.SearchResult
    assert protocol.result_type("symbols") is contract.SearchResult
    assert protocol.result_type("get_chunk") is contract.Chunk
    assert protocol.result_type("get_method") is contract.MethodInfo
    assert protocol.result_type("describe_object") is contract.ObjectDescription
    assert protocol.result_type("read_module") is contract.ModuleText
    assert protocol.result_type("document_symbols") == list[contract.Chunk]
    assert protocol.StatusResult.__annotations__["service"] in ("Status", contract.Status)


def test_one_top_k_bound_for_the_wire_and_the_engine():
    for params, field in ((protocol.SearchParams, "top_k"), (protocol.SymbolsParams, "limit")):
        ok = msgspec.convert({"query": "x", field: contract.MAX_TOP_K}, params)
        assert getattr(ok, field) == contract.MAX_TOP_K
        with pytest.raises(msgspec.ValidationError):
            msgspec.convert({"query": "x", field: contract.MAX_TOP_K + 1}, params)


def test_the_engine_and_the_service_reuse_the_contract_types():
    from daemon import engine
    from daemon.service import lookups, service

    assert engine.SearchResult is contract.SearchResult and engine.Filters is contract.Filters
    assert service.Status is contract.Status and lookups.MethodInfo is contract.MethodInfo


def test_the_cli_parser_loads_no_front_end_framework_and_no_engine():
    code = """
import sys
from daemon.cli import main as cli
cli.build_parser()
bad = [m for m in ("pygls", "lsprotocol", "mcp", "pydantic", "lsp.server", "mcp_bridge.server") if m in sys.modules]
assert not bad, bad
"""
    assert _loaded_after(code) == []
