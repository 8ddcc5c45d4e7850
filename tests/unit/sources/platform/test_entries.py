"""The entry model and the bundled global-context data set."""

from __future__ import annotations

import json

import msgspec
import pytest

from daemon.contract import CODE_KINDS, DOCS_KINDS, METADATA_KINDS
from daemon.sources.platform.entries import (
    ENTRY_KINDS,
    PLATFORM_KINDS,
    Entry,
    Param,
    Signature,
    availability_codes,
    entry_text,
    render_signature,
    split_top,
    to_chunk,
)
from daemon.sources.platform.globals_json import DATA_PATH, load_globals, parse_globals


# ------------------------------------------------------------------------------ the model
def test_qualified_names_and_keys():
    m = Entry(kind="method", name="Свернуть", name_en="GroupBy", owner="ТаблицаЗначений", owner_en="ValueTable")
    assert (m.qualified, m.qualified_en, m.key) == (
        "ТаблицаЗначений.Свернуть",
        "ValueTable.GroupBy",
        "method:ТаблицаЗначений.Свернуть",
    )
    f = Entry(kind="function", name="СтрНайти", name_en="StrFind")
    assert (f.qualified, f.qualified_en) == ("СтрНайти", "StrFind")
    c = Entry(kind="constructor", name="Массив", name_en="Array", owner="Массив", owner_en="Array")
    assert (c.qualified, c.qualified_en, c.key) == ("Новый Массив", "New Array", "constructor:Новый Массив")
    assert Entry(kind="method", name="Х", owner="Т").qualified_en == ""  # no English names: none made up


def test_kinds_do_not_collide_with_the_index_kinds():
    assert PLATFORM_KINDS == tuple("platform_" + k for k in ENTRY_KINDS)
    assert not set(PLATFORM_KINDS) & set(CODE_KINDS + METADATA_KINDS + DOCS_KINDS)


def test_split_top_and_availability():
    assert split_top("А: Строка, Б?: Массив<Число, Строка>, (В, Г)") == [
        "А: Строка",
        "Б?: Массив<Число, Строка>",
        "(В, Г)",
    ]
    assert availability_codes("Сервер, толстый клиент, мобильное приложение (клиент).\nСериализуется.") == [
        "server",
        "thick_client",
        "mobile_app_client",
    ]
    assert availability_codes("Сервер, сервер, новый клиент") == ["server", "новый клиент"]


def test_render_signature_and_chunk():
    e = Entry(
        kind="function",
        name="СтрНайти",
        name_en="StrFind",
        signatures=[
            Signature(
                params=[
                    Param(name="Строка", types=["Строка"]),
                    Param(name="НачальнаяПозиция", types=["Число", "Неопределено"], optional=True),
                ]
            ),
            Signature(name="Второй"),
        ],
        return_types=["Число"],
        description="Находит подстроку.",
        availability=["server", "thin_client"],
        since="8.3.6",
        category="Функции работы со значениями типа Строка",
        source="shcntx_ru.hbk",
        page="/objects/Global context/methods/catalog1/StrFind.html",
    )
    assert (
        render_signature(e, e.signatures[0]) == "СтрНайти(Строка: Строка, НачальнаяПозиция?: Число|Неопределено): Число"
    )
    chunk = to_chunk(e, version="8.3.24.1467")
    assert chunk.id == "platform/8.3.24.1467/shcntx_ru.hbk::function:СтрНайти"
    assert (chunk.path, chunk.kind, chunk.name, chunk.owner, chunk.symbol) == (
        "platform/8.3.24.1467/shcntx_ru.hbk",
        "platform_function",
        "СтрНайти",
        "",
        "СтрНайти",
    )
    assert chunk.params == "Строка, НачальнаяПозиция?" and chunk.types == ["Число"]
    assert chunk.synonym == {"ru": "СтрНайти", "en": "StrFind"}
    assert chunk.properties == {
        "version": "8.3.24.1467",
        "source": "shcntx_ru.hbk",
        "name_en": "StrFind",
        "since": "8.3.6",
        "availability": "server,thin_client",
        "category": "Функции работы со значениями типа Строка",
        "page": "/objects/Global context/methods/catalog1/StrFind.html",
        "variants": "2",
    }
    text = chunk.text
    assert (
        text.splitlines()[0] == "СтрНайти (StrFind)" and "Находит подстроку." in text and "Второй: СтрНайти()" in text
    )
    msgspec.json.encode(chunk)  # an index record: serialisable as is


def test_entry_text_has_params_returns_and_both_languages():
    e = Entry(
        kind="method",
        name="Свернуть",
        name_en="GroupBy",
        owner="ТаблицаЗначений",
        owner_en="ValueTable",
        signatures=[Signature(params=[Param(name="Колонки", description="Колонки группировки.")])],
        returns="Ничего.",
        description_en="Collapses the table.",
    )
    text = entry_text(e)
    assert "ТаблицаЗначений.Свернуть (ValueTable.GroupBy)" in text
    assert "Колонки: Колонки группировки." in text and "Collapses the table." in text and "Возвращает: Ничего." in text


# ------------------------------------------------------------------------------ the data set
def test_bundled_data_set_counts(globals_result):
    assert globals_result.skips == []
    assert globals_result.counts == {
        "function": 403,
        "global_property": 80,
        "type": 59,
        "constructor": 39,
        "method": 418,
        "property": 169,
        "enum": 600,
        "enum_value": 3079,
        "keyword": 33,
    }
    assert len({e.key for e in globals_result.entries}) == len(globals_result.entries)
    assert sum(len(e.signatures) for e in globals_result.entries if e.kind == "constructor") == 64


def test_bundled_data_set_entries(globals_result):
    by_key = {e.key: e for e in globals_result.entries}
    find = by_key["function:СтрНайти"]
    assert find.name_en == "StrFind" and find.return_types == ["Число"]
    assert find.returns.startswith("Позиция первого знака")
    params = find.signatures[0].params
    assert [(p.name, p.optional) for p in params] == [
        ("Строка", False),
        ("ПодстрокаПоиска", False),
        ("НаправлениеПоиска", True),
        ("НачальнаяПозиция", True),
        ("НомерВхождения", True),
    ]
    assert params[2].types == ["НаправлениеПоиска"] and params[2].default == "СНачала" and params[4].default == "1"
    assert find.category == "Функции работы со значениями типа Строка"
    http = by_key["constructor:Новый HTTPЗапрос"]
    assert [s.name for s in http.signatures] == [
        "По адресу ресурса и заголовкам",
        "Формирование неинициализированного объекта",
    ]
    assert http.signatures[0].syntax.startswith("Новый HTTPЗапрос(АдресРесурса: Строка")
    assert by_key["enum_value:КодировкаТекста.UTF8"].owner_en == "TextEncoding"
    assert by_key["method:ТаблицаЗначений.Свернуть"].name_en == "GroupBy"
    assert by_key["type:ТаблицаЗначений"].category == "Универсальные коллекции"
    assert by_key["global_property:Справочники"].category == "Свойства"
    variadic = by_key["function:ПродолжитьВызов"].signatures[0].params
    assert [(p.name, p.optional, p.types) for p in variadic] == [("...", True, ["Произвольный"])]
    assert by_key["keyword:КонецЕсли"].name_en == "EndIf" and by_key["keyword:НЕ"].name_en == "NOT"
    ret = by_key["method:ТаблицаЗначений.ВыбратьСтроку"]
    assert ret.return_types == ["СтрокаТаблицыЗначений", "Неопределено"]


def test_bundled_data_set_ships_with_its_license():
    folder = DATA_PATH.parent
    notice = (folder / "LICENSE.bslGlobals.md").read_text(encoding="utf-8")
    assert "MIT" in notice and "xDrivenDevelopment" in notice and "Permission is hereby granted" in notice
    readme = (folder / "README.md").read_text(encoding="utf-8")
    assert "LICENSE.bslGlobals.md" in readme and "nixel2007/vsc-language-1c-bsl" in readme


def test_records_that_do_not_fit_are_named_skips():
    data = {
        "globalfunctions": {
            "Хорошая": {"name": "Хорошая", "name_en": "Good", "signature": {"default": {"СтрокаПараметров": "()"}}},
            "БезИмени": {"name_en": "NoName"},
            "Кривая": {"name": "Кривая", "signature": {"default": {"СтрокаПараметров": "не подпись"}}},
            "Строка": "не объект",
        },
        "classes": {
            "Тип": {
                "name": "Тип",
                "methods": {"М": {"name": "М"}, "Плохой": 5},
                "constructors": {"Ок": {"signature": "(А: Число)"}, "Сломан": {"signature": "(: Число)"}},
            }
        },
        "systemEnum": {"Перечисление": {"name": "Перечисление", "values": [{"name": "А"}, {"name_en": "B"}]}},
        "keywords": ["not", "an", "object"],
        "structureMenu": "nonsense",
    }
    res = parse_globals(data, source="test.json")
    assert [e.key for e in res.entries] == [
        "function:Хорошая",
        "type:Тип",
        "constructor:Новый Тип",
        "method:Тип.М",
        "enum:Перечисление",
        "enum_value:Перечисление.А",
    ]
    details = sorted(s.detail for s in res.skips)
    assert all(s.path == "test.json" and s.reason == "bad_entry" for s in res.skips)
    assert details == [
        "classes.Тип.constructors.Сломан: a parameter without a name in '(: Число)'",
        "classes.Тип.methods.Плохой: not an object",
        "globalfunctions.БезИмени: no name",
        "globalfunctions.Кривая: cannot read the signature 'не подпись'",
        "globalfunctions.Строка: not an object",
        "keywords: not an object",
        "systemEnum.Перечисление.values.1: no name",
    ]


def test_unreadable_data_set(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2", encoding="utf-8")
    with pytest.raises(ValueError, match="bad.json: not JSON"):
        load_globals(bad)
    bad.write_text(json.dumps([1, 2]), encoding="utf-8")
    with pytest.raises(ValueError, match="not a JSON object"):
        load_globals(bad)
    with pytest.raises(OSError):
        load_globals(tmp_path / "missing.json")
