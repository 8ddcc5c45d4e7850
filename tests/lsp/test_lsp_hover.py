"""Hover on platform names (``textDocument/hover``): the language server (``python -m lsp``) over
stdio, driven by pytest-lsp, against a real lexical daemon on the sample export with one more
module that calls platform functions; plus the line reading of :mod:`lsp.hover` without a server.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time

import pytest
from daemon_helpers import REPO
from lsprotocol import types
from pytest_lsp import client_capabilities

from daemon.contract import PlatformEntry, PlatformParam, PlatformSignature, PlatformUsed
from lsp.hover import hover_markdown, hover_target

SERVER_ENV = {**os.environ, "PYTHONPATH": str(REPO)}
MODULE = "CommonModules/ПодсказкиПлатформы/Ext/Module.bsl"
TEXT = """Процедура Проверить(Текст) Экспорт
	Позиция = СтрНайти(Текст, "а");
	Запрос = Новый HTTPЗапрос("/путь");
	Кодировка = КодировкаТекста.UTF8;
	// СтрНайти в комментарии
	Стр = "СтрНайти в строке";
	Пусто = ПустаяСтрока(Текст);
	Длина = Объект.СтрДлина(Текст);
КонецПроцедуры

// Своя проверка на пустоту.
Функция ПустаяСтрока(Значение)
	Возврат Значение = "";
КонецФункции
"""


def _col(line: str, word: str, offset: int = 1) -> int:
    return line.index(word) + offset


# ------------------------------------------------------------------------------ the line, no server
@pytest.mark.parametrize(
    ("line", "word", "query", "kinds"),
    [
        ('\tПозиция = СтрНайти(Текст, "а");', "СтрНайти", "СтрНайти", ("function",)),
        ('\tЗапрос = Новый HTTPЗапрос("/путь");', "HTTPЗапрос", "Новый HTTPЗапрос", ("constructor",)),
        ('\tЗапрос = Новый HTTPЗапрос("/путь");', "Новый", "Новый HTTPЗапрос", ("constructor",)),
        ("\tЗапрос = New HTTPRequest();", "HTTPRequest", "Новый HTTPRequest", ("constructor",)),
        ("\tКодировка = КодировкаТекста.UTF8;", "UTF8", "КодировкаТекста.UTF8", ("enum_value",)),
        ("\tКодировка = КодировкаТекста.UTF8;", "КодировкаТекста", "КодировкаТекста", ("enum",)),
        ("\tДата = ТекущаяДата;", "ТекущаяДата", "ТекущаяДата", ("function", "global_property")),
    ],
)
def test_what_is_under_the_cursor(line, word, query, kinds):
    t = hover_target(line, _col(line, word))
    assert t is not None and (t.query, t.kinds) == (query, kinds)


@pytest.mark.parametrize(
    ("line", "word"),
    [
        ("\t// СтрНайти в комментарии", "СтрНайти"),
        ('\tСтр = "СтрНайти в строке";', "СтрНайти"),
        ('\t|СтрНайти продолжение строки";', "СтрНайти"),
        ("\tДлина = Объект.СтрДлина(Текст);", "СтрДлина"),
        ("\tДлина = Объект.Поле.Метод();", "Метод"),
        ("\tЕсли Истина Тогда", "Если"),
        ("\tА = 1;  ", "  "),
        ("Функция ПустаяСтрока(Значение)", "ПустаяСтрока"),
        ("\tПерем ТекущаяДата;", "ТекущаяДата"),
    ],
)
def test_nothing_in_comments_strings_members_or_keywords(line, word):
    assert hover_target(line, _col(line, word)) is None


def test_columns_are_utf16():
    line = "\t𝔸 = СтрНайти(Т, 1);"  # a character outside the BMP takes two UTF-16 units
    col16 = len(line[: line.index("СтрНайти")].encode("utf-16-le")) // 2
    t = hover_target(line, col16 + 2)
    assert t is not None and t.name == "СтрНайти" and (t.start, t.end) == (col16, col16 + 8)


def test_markdown_names_the_version_and_a_newer_entry():
    e = PlatformEntry(
        kind="function",
        name="Ф",
        name_en="F",
        signatures=[PlatformSignature(params=[PlatformParam(name="А", types=["Число"], optional=True, default="1")])],
        return_types=["Строка"],
        description="Делает.",
        since="8.3.25",
        availability=["server"],
    )
    md = hover_markdown(e, PlatformUsed(source="installed", version="8.3.24.1467", label="1C:Enterprise 8.3.24.1467"))
    assert "```bsl\nФ(А?: Число): Строка\n```" in md and "- `А`: Число (optional, default 1)" in md
    assert "since 8.3.25 (newer than 8.3.24.1467)" in md and md.endswith("*Platform help: 1C:Enterprise 8.3.24.1467*")


# ------------------------------------------------------------------------------ through the server
async def _wait_ready(lsp, timeout: float = 120.0) -> None:
    """Poll ``bsl-lens.status`` until the folder's daemon is connected and ready."""
    deadline = time.monotonic() + timeout
    while True:
        st = await lsp.workspace_execute_command_async(types.ExecuteCommandParams(command="bsl-lens.status"))
        f = st["folders"][0]
        if f["state"] == "ready" and (f.get("daemon") or {}).get("state") == "ready":
            return
        assert time.monotonic() < deadline, f"the folder's daemon is not ready after {timeout:g} s: {f}"
        await asyncio.sleep(0.1)


@pytest.mark.asyncio
async def test_hover_on_platform_names_and_a_local_method_wins(daemons, sample_root):
    from pytest_lsp.client import make_test_lsp_client

    path = sample_root / MODULE
    path.parent.mkdir(parents=True)
    path.write_text(TEXT, encoding="utf-8")
    d = daemons.start(sample_root, "--embedder", "none", "--watch", "off", wait_idle=True)
    lsp = make_test_lsp_client()
    await lsp.start_io(sys.executable, "-m", "lsp", env=SERVER_ENV)
    lines = TEXT.splitlines()

    async def hover(n: int, word: str, offset: int = 1):
        pos = types.Position(n, _col(lines[n], word, offset))
        return await lsp.text_document_hover_async(
            types.HoverParams(text_document=types.TextDocumentIdentifier(uri=path.as_uri()), position=pos)
        )

    try:
        res = await lsp.initialize_session(
            types.InitializeParams(
                capabilities=client_capabilities("visual-studio-code"),
                workspace_folders=[types.WorkspaceFolder(uri=sample_root.as_uri(), name="demo")],
                initialization_options={"indexDir": str(d.index_dir), "spawn": False},
            )
        )
        assert res.capabilities.hover_provider
        await _wait_ready(lsp)
        h = await hover(1, "СтрНайти")
        assert h.contents.kind == types.MarkupKind.Markdown
        md = h.contents.value
        assert md.startswith("**СтрНайти** (StrFind) — global function") and "```bsl\nСтрНайти(Строка: Строка" in md
        assert "- `ПодстрокаПоиска`: Строка" in md and "Returns: Число" in md
        assert md.endswith("*Platform help: bundled data set (no version)*")
        start = lines[1].index("СтрНайти")
        assert h.range == types.Range(types.Position(1, start), types.Position(1, start + len("СтрНайти")))
        ctor = (await hover(2, "HTTPЗапрос")).contents.value
        assert (
            ctor.startswith("**Новый HTTPЗапрос** (New HTTPRequest) — constructor")
            and ctor.count("Новый HTTPЗапрос(") >= 2
        )
        enum = (await hover(3, "UTF8")).contents.value
        assert enum.startswith("**КодировкаТекста.UTF8** (TextEncoding.UTF8) — system enumeration value")
        local = (await hover(6, "ПустаяСтрока")).contents.value
        assert local.startswith("```bsl\nФункция ПустаяСтрока(Значение)") and "Своя проверка на пустоту." in local
        for n, word in ((4, "СтрНайти"), (5, "СтрНайти"), (7, "СтрДлина"), (0, "Проверить"), (11, "ПустаяСтрока")):
            assert await hover(n, word) is None, (n, word)
    finally:
        try:
            await asyncio.wait_for(lsp.shutdown_session(), 30)
        finally:
            await lsp.stop()
