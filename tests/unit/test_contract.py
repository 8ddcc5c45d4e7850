"""The contract package (daemon/contract/): one home for the wire types, light to import (that the
front ends load none of the engine is checked in fresh interpreters:
tests/daemon/test_front_end_imports.py)."""

from __future__ import annotations

import ast
from pathlib import Path

import msgspec
import pytest

from daemon import contract
from daemon.server import protocol

REPO = Path(__file__).resolve().parents[2]


def test_the_contract_imports_only_msgspec_and_the_standard_library():
    package = REPO / "daemon" / "contract"
    own = {"." + p.stem for p in package.glob("*.py") if p.stem != "__init__"}
    imported = set()
    for path in package.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                imported |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                imported.add("." * node.level + (node.module or ""))
    assert own and own <= imported  # the package face imports its submodules
    assert imported - own == {"__future__", "msgspec", "unicodedata"}


def test_the_package_face_exports_every_public_name_of_the_submodules():
    import importlib

    for path in (REPO / "daemon" / "contract").glob("*.py"):
        if path.stem == "__init__":
            continue
        module = importlib.import_module(f"daemon.contract.{path.stem}")
        for name, value in vars(module).items():
            if name.startswith("_") or getattr(value, "__module__", module.__name__) != module.__name__:
                continue  # private, or imported from elsewhere (msgspec, a sibling)
            if isinstance(value, type) or callable(value) or name.isupper():
                assert getattr(contract, name) is value and name in contract.__all__, name


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
    from daemon.service import lookups, service, status

    assert engine.SearchResult is contract.SearchResult and engine.Filters is contract.Filters
    assert service.Status is contract.Status and lookups.MethodInfo is contract.MethodInfo
    assert status.DenseStatus is contract.DenseStatus and status.WatchStatus is contract.WatchStatus


def test_error_messages_echo_a_long_user_value_only_as_a_prefix():
    from daemon.contract import ECHO_CHARS, clip_echoes, shown

    short, long = "Справочник.Валюты", "Ж" * 100_000
    assert shown(short) == repr(short)
    assert shown(long).startswith("'ЖЖЖ") and shown(long).endswith("… (100000 characters)") and len(shown(long)) < 100
    msg = f"no method named {long!r}; also {long} and {short!r}"
    clipped = clip_echoes(msg, [long, short, 5, None])
    assert long[: ECHO_CHARS + 1] not in clipped and repr(short) in clipped and len(clipped) < 300
    assert clip_echoes("nothing long here", [long]) == "nothing long here"
