"""The language server's pure parts, without processes: lsp/convert.py (symbol kinds, container
names, workspace symbols, merge order, the outline, file URIs), lsp/wire.py's writer,
lsp/search.py's parameters and lsp/server.py's one-call-at-a-time rule for cancelled requests
(with a fake daemon client, so the order of events is exact). Settings: test_settings.py; the process on stdio:
tests/lsp/test_lsp_stdio.py."""

from __future__ import annotations

import asyncio
import json
import unicodedata
from types import SimpleNamespace

import msgspec
import pytest
from lsprotocol import types

from daemon.engine import Hit
from daemon.contract import Chunk
from lsp import convert
from lsp.settings import Folder, Settings

SK = types.SymbolKind
A = Folder(uri="file:///w/a", path="/w/a", name="a")
B = Folder(uri="file:///w/b", path="/w/b", name="b")


# ------------------------------------------------------------------------------ kinds, names
def _hit(**kw) -> Hit:
    base = dict(
        id="x",
        path="p.bsl",
        symbol=None,
        kind="function",
        name="Ф",
        owner="ОбщийМодуль.М",
        module_kind="common",
        object_type="ОбщийМодуль",
        start_line=1,
        end_line=2,
        name_range=(0, 8, 0, 9),
        score=0.5,
    )
    base.update(kw)
    return Hit(**base)


def test_symbol_kinds_and_fallbacks_for_old_clients():
    expect = {
        "procedure": SK.Method,
        "function": SK.Function,
        "module": SK.Module,
        "object": SK.Class,
        "attribute": SK.Field,
        "dimension": SK.Field,
        "resource": SK.Field,
        "tabular_section": SK.Field,
        "addressing_attribute": SK.Field,
        "enum_value": SK.EnumMember,
        "form": SK.Object,
        "command": SK.Event,
        "template": SK.File,
    }
    for kind, sk in expect.items():
        assert convert.symbol_kind(kind) == sk, kind
    base = convert.BASE_KINDS  # a client that declares no valueSet: File..Array only
    assert convert.symbol_kind("enum_value", base) == SK.Field
    assert convert.symbol_kind("form", base) == SK.Class
    assert convert.symbol_kind("command", base) == SK.Method
    assert convert.symbol_kind("function", base) == SK.Function
    assert convert.symbol_kind("something new") == SK.Variable


@pytest.mark.parametrize(
    "kw, container, name",
    [
        (
            dict(kind="function", owner="ОбщийМодуль.ОбщегоНазначения", module_kind="common"),
            "ОбщийМодуль.ОбщегоНазначения",
            "Ф",
        ),
        (
            dict(kind="procedure", owner="Справочник.Пользователи", module_kind="object"),
            "Справочник.Пользователи.МодульОбъекта",
            "Ф",
        ),
        (
            dict(kind="function", owner="Справочник.Пользователи", module_kind="manager"),
            "Справочник.Пользователи.МодульМенеджера",
            "Ф",
        ),
        (
            dict(kind="procedure", owner="РегистрСведений.Курсы", module_kind="recordset"),
            "РегистрСведений.Курсы.МодульНабораЗаписей",
            "Ф",
        ),
        (
            dict(kind="procedure", owner="Справочник.X.Форма.ФормаЭлемента", module_kind="form"),
            "Справочник.X.Форма.ФормаЭлемента",
            "Ф",
        ),
        (dict(kind="procedure", owner="ОбщаяКоманда.Y", module_kind="command"), "ОбщаяКоманда.Y.МодульКоманды", "Ф"),
        (dict(kind="procedure", owner="Конфигурация", module_kind="session"), "Конфигурация.МодульСеанса", "Ф"),
        (
            dict(kind="procedure", owner="Конфигурация", module_kind="managed_application"),
            "Конфигурация.МодульУправляемогоПриложения",
            "Ф",
        ),
        (
            dict(kind="module", name="<module>", owner="Справочник.Пользователи", module_kind="object"),
            "Справочник.Пользователи",
            "МодульОбъекта",
        ),
        (
            dict(kind="module", name="<module>", owner="ОбщийМодуль.ОбщегоНазначения", module_kind="common"),
            "ОбщийМодуль.ОбщегоНазначения",
            "ОбщегоНазначения",
        ),
        (
            dict(
                kind="object",
                name="Пользователи",
                owner="Справочник.Пользователи",
                object_type="Справочник",
                module_kind="",
            ),
            "Справочник",
            "Пользователи",
        ),
        (
            dict(
                kind="attribute",
                name="Роль",
                owner="Справочник.Пользователи",
                symbol="Реквизит:Роли.Роль",
                module_kind="",
            ),
            "Справочник.Пользователи.ТабличнаяЧасть.Роли",
            "Роль",
        ),
        (
            dict(
                kind="attribute",
                name="Комментарий",
                owner="Справочник.Пользователи",
                symbol="Реквизит:Комментарий",
                module_kind="",
            ),
            "Справочник.Пользователи",
            "Комментарий",
        ),
        (
            dict(
                kind="enum_value",
                name="Высокая",
                owner="Перечисление.Важность",
                symbol="ЗначениеПеречисления:Высокая",
                module_kind="",
            ),
            "Перечисление.Важность",
            "Высокая",
        ),
    ],
)
def test_container_names_carry_the_owner(kw, container, name):
    h = _hit(**kw)
    assert convert.container_name(h) == container
    assert convert.display_name(h) == name
    sym = convert.workspace_symbol(h, "file:///w/p.bsl")
    assert sym.container_name == container and sym.name == name


def test_workspace_symbol_full_or_uri_only_location():
    from pygls.protocol import default_converter

    h = _hit(name_range=(12, 8, 12, 32))
    full = convert.workspace_symbol(h, "file:///w/x.bsl")
    assert full.location == types.Location(
        uri="file:///w/x.bsl", range=types.Range(types.Position(12, 8), types.Position(12, 32))
    )
    lazy = convert.workspace_symbol(h, "file:///w/x.bsl", uri_only=True, data={"id": "x"})
    assert lazy.location == types.LocationUriOnly(uri="file:///w/x.bsl") and lazy.data == {"id": "x"}
    # the JSON the server sends is exactly the lsprotocol objects' JSON
    conv = default_converter()
    for kw in ({}, {"uri_only": True, "data": {"id": "x"}}, {"kinds": convert.BASE_KINDS}):
        for hit in (h, _hit(kind="enum_value", name="В", owner="Перечисление.П", symbol="ЗначениеПеречисления:В")):
            assert convert.workspace_symbol_json(hit, "file:///w/x.bsl", **kw) == conv.unstructure(
                convert.workspace_symbol(hit, "file:///w/x.bsl", **kw)
            )


# ------------------------------------------------------------------------------ merge order
def test_merge_keeps_one_roots_order_and_interleaves_several_stably():
    one = [
        _hit(id=str(i), match=m, score=s)
        for i, (m, s) in enumerate([("exact", 0.1), ("", 0.9), ("prefix", 0.2), ("", 0.3)])
    ]
    assert [h.id for _, h in convert.merge_ranked([one], 10)] == ["0", "1", "2", "3"]  # never re-sorted
    a = [
        _hit(id="a-exact", match="exact"),
        _hit(id="a-prefix", match="prefix"),
        _hit(id="a-bm25", match="", score=0.02),
    ]
    b = [
        _hit(id="b-prefix", match="prefix"),
        _hit(id="b-camel", match="camelhump"),
        _hit(id="b-bm25", match="", score=0.03),
        _hit(id="b-bm25-tie", match="", score=0.02),
    ]
    merged = [(ri, h.id) for ri, h in convert.merge_ranked([a, b], 10)]
    assert merged == [
        (0, "a-exact"),
        (0, "a-prefix"),
        (1, "b-prefix"),
        (1, "b-camel"),
        (1, "b-bm25"),
        (0, "a-bm25"),
        (1, "b-bm25-tie"),
    ]
    assert convert.merge_ranked([a, b], 3) == convert.merge_ranked([a, b], 10)[:3]
    assert convert.merge_ranked([a, b], 10) == convert.merge_ranked([a, b], 10)


# ------------------------------------------------------------------------------ outline
def _chunk(name, start, end, region, kind="procedure", part=0, cid=None, line=None):
    line = start - 1 if line is None else line
    return Chunk(
        id=cid or f"m.bsl::{name}",
        path="m.bsl",
        kind=kind,
        name=name,
        region=region,
        start_line=start,
        end_line=end,
        name_range=(line, 10, line, 10 + len(name)),
        part=part,
        signature=f"Процедура {name}()",
    )


def test_document_symbols_nest_regions_and_join_parts():
    chunks = [
        Chunk(id="m.bsl::<module>", path="m.bsl", kind="module", name="<module>", start_line=1, end_line=3),
        _chunk("Первая", 5, 9, ["ПрограммныйИнтерфейс"], kind="function"),
        _chunk("Вторая", 11, 20, ["ПрограммныйИнтерфейс", "Внутренняя"]),
        _chunk("Длинная", 22, 400, ["СлужебныеПроцедурыИФункции"], part=1, cid="m.bsl::Длинная#1"),
        _chunk("Длинная", 401, 700, ["СлужебныеПроцедурыИФункции"], part=2, cid="m.bsl::Длинная#2", line=21),
        _chunk("ВнеОбластей", 702, 704, []),
    ]
    out = convert.document_symbols(chunks)
    assert [(s.name, s.kind) for s in out] == [
        ("ПрограммныйИнтерфейс", SK.Namespace),
        ("СлужебныеПроцедурыИФункции", SK.Namespace),
        ("ВнеОбластей", SK.Method),
    ]
    api = out[0]
    assert [(c.name, c.kind) for c in api.children] == [("Первая", SK.Function), ("Внутренняя", SK.Namespace)]
    assert api.children[1].children[0].name == "Вторая"
    assert (api.range.start.line, api.range.end.line) == (4, 20)  # spans its methods
    long = out[1].children[0]
    assert (long.range.start.line, long.range.end.line) == (21, 700) and len(out[1].children) == 1
    assert long.selection_range == types.Range(types.Position(21, 10), types.Position(21, 17))
    assert long.detail == "Процедура Длинная()"
    flat = convert.flat_symbols(out, "file:///m.bsl")
    assert [(s.name, s.container_name) for s in flat] == [
        ("ПрограммныйИнтерфейс", None),
        ("Первая", "ПрограммныйИнтерфейс"),
        ("Внутренняя", "ПрограммныйИнтерфейс"),
        ("Вторая", "Внутренняя"),
        ("СлужебныеПроцедурыИФункции", None),
        ("Длинная", "СлужебныеПроцедурыИФункции"),
        ("ВнеОбластей", None),
    ]
    # a client without Namespace in its kinds gets Module for regions
    assert convert.document_symbols(chunks, kinds=frozenset({1, 2, 5, 6, 12}))[0].kind == SK.Module


# ------------------------------------------------------------------------------ URIs
def test_file_uris_are_percent_encoded_on_the_folders_uri(tmp_path):
    uri = convert.file_uri("file:///w/ssl%2031/", "/nonexistent", "CommonModules/ОбщегоНазначения/Ext/Module.bsl")
    assert (
        uri
        == "file:///w/ssl%2031/CommonModules/%D0%9E%D0%B1%D1%89%D0%B5%D0%B3%D0%BE%D0%9D%D0%B0%D0%B7%D0%BD%D0%B0%D1%87%D0%B5%D0%BD%D0%B8%D1%8F/Ext/Module.bsl"
    )
    assert convert.relative_path("/w/a", "/w/a/X/Ext/Module.bsl") == "X/Ext/Module.bsl"
    assert convert.relative_path("/w/a", "/w/b/X.bsl") is None
    nfd = unicodedata.normalize("NFD", "ЖурналРегистрацииКлиент")
    assert (
        convert.relative_path("/w/a", f"/w/a/{nfd}/Module.bsl") == "ЖурналРегистрацииКлиент/Module.bsl"
    )  # NFC, as the daemon


def test_file_uri_finds_a_decomposed_spelling_on_disk(tmp_path):
    nfc = "ОбщийМодульСЁжиком"
    nfd = unicodedata.normalize("NFD", nfc)
    assert nfd != nfc
    (tmp_path / nfd / "Ext").mkdir(parents=True)
    (tmp_path / nfd / "Ext" / "Module.bsl").write_text("")
    if (tmp_path / nfc).exists():
        pytest.skip("this file system normalises names")
    uri = convert.file_uri(tmp_path.as_uri(), str(tmp_path), f"{nfc}/Ext/Module.bsl")
    path = convert.uri_to_path(uri)
    assert path is not None and (tmp_path / nfd / "Ext" / "Module.bsl").samefile(path)
    missing = convert.file_uri(tmp_path.as_uri(), str(tmp_path), "Нет/Ёлка.bsl")  # not on disk: as given, no error
    assert missing.endswith("/%D0%9D%D0%B5%D1%82/%D0%81%D0%BB%D0%BA%D0%B0.bsl")


# ------------------------------------------------------------------------------ wire
def test_writer_sends_utf8_bodies_with_byte_lengths():
    from lsp.server import BslLensServer

    server = BslLensServer()
    sent = []
    server.protocol.set_writer(SimpleNamespace(write=sent.append, close=lambda: None))
    sym = convert.workspace_symbol(
        _hit(name="ЗначениеРеквизитаОбъекта", name_range=(3, 8, 3, 32)), "file:///w/Модуль.bsl"
    )
    server.protocol._send_data(types.WorkspaceSymbolResponse(id=7, result=[sym]))
    server.protocol._send_data(
        types.ShowMessageNotification(params=types.ShowMessageParams(type=types.MessageType.Warning, message="ё"))
    )
    assert len(sent) == 2
    for frame in sent:
        head, _, body = frame.partition(b"\r\n\r\n")
        length = int(head.split(b"\r\n")[0].split(b": ")[1])
        assert length == len(body)
    body = json.loads(sent[0].partition(b"\r\n\r\n")[2])
    assert body == {
        "jsonrpc": "2.0",
        "id": 7,
        "result": [
            {
                "name": "ЗначениеРеквизитаОбъекта",
                "kind": 12,
                "containerName": "ОбщийМодуль.М",
                "location": {
                    "uri": "file:///w/Модуль.bsl",
                    "range": {"start": {"line": 3, "character": 8}, "end": {"line": 3, "character": 32}},
                },
            }
        ],
    }
    assert json.loads(sent[1].partition(b"\r\n\r\n")[2])["params"] == {"type": 2, "message": "ё"}
    # a handler's pre-encoded JSON (workspace/symbol) goes out inline
    server.protocol._send_data(types.WorkspaceSymbolResponse(id=8, result=msgspec.Raw('[{"name":"Ёж"}]'.encode())))
    assert json.loads(sent[2].partition(b"\r\n\r\n")[2]) == {"jsonrpc": "2.0", "id": 8, "result": [{"name": "Ёж"}]}


# ------------------------------------------------------------------------------ cancellation
class FakeClient:
    """Answers ``symbols`` when its gate opens; records what reached "the daemon"."""

    def __init__(self):
        self.calls: list[str] = []
        self.gate = asyncio.Event()

    async def call(self, method, params, *, result, timeout):
        from lsp.server import SymbolHit

        assert method == "symbols"
        self.calls.append(params["query"])
        await self.gate.wait()
        hit = msgspec.convert(
            msgspec.to_builtins(_hit(id=params["query"], name=params["query"], path="X.bsl")), SymbolHit
        )
        return result(hits=[hit])


def test_superseded_requests_never_reach_the_daemon():
    from lsp.roots import Root
    from lsp.server import BslLensServer

    async def main():
        server = BslLensServer()
        root = Root(server, A, Settings())
        fake = root.client = FakeClient()
        server.roots = [root]
        tasks = [asyncio.create_task(server.workspace_symbols(q)) for q in ("З", "Зн", "Зна", "Знач")]
        for _ in range(5):
            await asyncio.sleep(0)
        assert fake.calls == ["З"]  # one call at a time per root
        for t in tasks[:3]:
            t.cancel()  # the client's $/cancelRequest for the superseded ones
        for _ in range(5):
            await asyncio.sleep(0)
        assert server.inflight == 1  # the first call still runs (shielded), its answer unused
        fake.gate.set()
        last = await tasks[3]
        for t in tasks[:3]:
            with pytest.raises(asyncio.CancelledError):
                await t
        assert fake.calls == ["З", "Знач"]  # "Зн" and "Зна" were cancelled while waiting
        assert [s["name"] for s in last] == ["Знач"]
        assert server.inflight == 0 and server.cancelled == 3

    asyncio.run(asyncio.wait_for(main(), 30))


def test_search_params_validation():
    from pygls.exceptions import JsonRpcInvalidParams

    from lsp.convert import plain
    from lsp.search import SearchParams, _search_params

    Obj = __import__("collections").namedtuple("Object", ["query", "filters"])
    Flt = __import__("collections").namedtuple("Object", ["scope", "exportOnly"])
    p = _search_params(Obj("где НДС", Flt("code", True)), 20)
    assert p == SearchParams(
        query="где НДС", top_k=20, filters=msgspec.convert({"scope": "code", "exportOnly": True}, type(p.filters))
    )
    assert plain({"a": [Flt("code", False)]}) == {"a": [{"scope": "code", "exportOnly": False}]}
    for bad in (
        {"query": "x", "mode": "fuzzy"},
        {"query": "x", "topK": 0},
        {"query": "x", "filters": {"scopee": "code"}},
        {},
    ):
        with pytest.raises(JsonRpcInvalidParams):
            _search_params(bad, 20)


# ------------------------------------------------------------------------------ bench


def test_bench_hit_keys():
    from daemon.dev.bench_lsp import hit_key

    root = "file:///w/%D1%8D%D0%BA%D1%81%D0%BF%D0%BE%D1%80%D1%82"
    sym = {"name": "Ф", "kind": 12, "location": {"uri": root + "/CommonModules/%D0%9C/Ext/Module.bsl"}}
    assert hit_key(sym, root) == ("CommonModules/М/Ext/Module.bsl", "Ф")
    assert hit_key({**sym, "kind": 5, "location": {"uri": root + "/Catalogs/%D0%9C.xml"}}, root) == (
        "Catalogs/М.xml",
        None,
    )
