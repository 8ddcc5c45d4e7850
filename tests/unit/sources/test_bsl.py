"""BSL chunker (:mod:`daemon.sources.bsl`) on inline sources: real tree-sitter, no mocks.

They cover every fault listed in the chunker brief (ё truncation, multi-line headers, mixed
keywords, async, extension annotations, ERROR bodies, headers in comments and strings, ``#Если``
in bodies, BOM/empty/garbage input). The tests on corpus files are in test_bsl_chunker.py."""

from __future__ import annotations

import msgspec
import pytest
import tree_sitter
import tree_sitter_hbk

# tree-sitter-bsl is only the rejected candidate grammar (grammars/README.md): not a project
# dependency, so the checks that pin its faults are skipped where it is not installed.
try:
    import tree_sitter_bsl
except ImportError:  # pragma: no cover
    tree_sitter_bsl = None

needs_bsl_grammar = pytest.mark.skipif(tree_sitter_bsl is None, reason="tree-sitter-bsl not installed")

from daemon.sources.bsl import chunk_module, scan_method_headers


def methods(text: str, **kw) -> list:
    return [c for c in chunk_module(text, path="m.bsl", **kw) if c.kind != "module"]


def by_name(text: str, **kw) -> dict:
    return {c.name: c for c in methods(text, **kw)}


def utf16(s: str) -> int:
    return len(s.encode("utf-16-le")) // 2


def raw_tree(mod, src: str):
    return tree_sitter.Parser(tree_sitter.Language(mod.language())).parse(src.encode("utf-8"))


@pytest.mark.parametrize(
    "mod", [tree_sitter_hbk, pytest.param(tree_sitter_bsl, marks=needs_bsl_grammar)], ids=["hbk", "bsl"]
)
def test_yo_truncation_in_both_grammars_names_from_source(mod):
    src = "Функция ПолучитьСчёт(Ёлка) Экспорт\n\tВозврат Ёлка;\nКонецФункции\n\nПроцедура Следующая()\nКонецПроцедуры\n"
    name_node = raw_tree(mod, src).root_node.child(0).child_by_field_name("name")
    assert name_node.text.decode() == "ПолучитьСч"  # the grammar fault this guards against
    got = by_name(src)
    c = got["ПолучитьСчёт"]
    assert c.id == "m.bsl::ПолучитьСчёт" and c.symbol == "ПолучитьСчёт"
    assert c.params == "Ёлка" and c.export
    assert c.name_range == (0, 8, 0, 8 + len("ПолучитьСчёт"))
    assert c.signature == "Функция ПолучитьСчёт(Ёлка) Экспорт"
    assert "Следующая" in got
    assert scan_method_headers(src) == [(1, "ПолучитьСчёт"), (5, "Следующая")]


def test_multiline_header_export_on_later_line():
    src = (
        "Асинх Функция ПодключитьКомпонентуИзМакетаАсинх(Идентификатор, ПолноеИмяМакета,\n"
        "\tПараметрыПодключения = Неопределено) Экспорт\n"
        "\tВозврат Неопределено;\n"
        "КонецФункции\n"
        "Процедура НекорректныйСостав(Элемент,\n"
        "\t\t\tНавигационнаяСсылка, // комментарий к параметру\n"
        "\t\t\tСтандартнаяОбработка)\n"
        "КонецПроцедуры\n"
    )
    got = by_name(src)
    f = got["ПодключитьКомпонентуИзМакетаАсинх"]
    assert f.export and f.is_async and f.kind == "function"
    assert f.params == "Идентификатор, ПолноеИмяМакета, ПараметрыПодключения = Неопределено"
    assert f.signature == (
        "Асинх Функция ПодключитьКомпонентуИзМакетаАсинх(Идентификатор, ПолноеИмяМакета, "
        "ПараметрыПодключения = Неопределено) Экспорт"
    )
    assert (f.start_line, f.end_line) == (1, 4)
    p = got["НекорректныйСостав"]
    assert not p.export
    assert p.params == "Элемент, НавигационнаяСсылка, СтандартнаяОбработка"
    assert (p.start_line, p.end_line) == (5, 8)


def test_mixed_russian_and_english_keywords():
    src = (
        '&После("ПриНачалеРаботыСистемы")\n'
        "Процедура ЮТПриНачалеРаботыСистемы()\n"
        "\tа = 1;\n"
        "КонецПроцедуры\n"
        "\n"
        '&After("OnStart")\n'
        "Procedure ЮТOnStart()\n"
        "\tЮТПриНачалеРаботыСистемы();\n"
        "EndProcedure\n"
        "function F(x) export\n"
        "  return x;\n"
        "endfunction\n"
        "ФУНКЦИЯ Г() КОНЕЦФУНКЦИИ\n"
    )
    got = by_name(src)
    assert list(got) == ["ЮТПриНачалеРаботыСистемы", "ЮТOnStart", "F", "Г"]
    assert got["ЮТOnStart"].annotations == ['&After("OnStart")']
    assert (got["ЮТOnStart"].start_line, got["ЮТOnStart"].end_line) == (6, 9)
    assert got["F"].kind == "function" and got["F"].export and got["F"].signature == "function F(x) export"
    assert (got["Г"].start_line, got["Г"].end_line) == (13, 13)


def test_async_methods():
    src = (
        "&НаКлиенте\n"
        "Асинх Процедура ПослеЧтения(Результат, ДополнительныеПараметры) Экспорт\n"
        "\tСвойства = Ждать Получить(Результат);\n"
        "КонецПроцедуры\n"
        "Async Function InstallAsync(Name, Parameters = Undefined) Export\n"
        "\tReturn Await Install(Name);\n"
        "EndFunction\n"
        "Процедура НеАсинх()\nКонецПроцедуры\n"
    )
    got = by_name(src)
    a = got["ПослеЧтения"]
    assert a.is_async and a.export and a.directives == ["&НаКлиенте"] and a.kind == "procedure"
    assert a.signature.startswith("Асинх Процедура ПослеЧтения(")
    assert (a.start_line, a.end_line) == (1, 4)
    assert a.name_range == (1, len("Асинх Процедура "), 1, len("Асинх Процедура ПослеЧтения"))
    b = got["InstallAsync"]
    assert b.is_async and b.kind == "function" and b.params == "Name, Parameters = Undefined"
    assert not got["НеАсинх"].is_async


def test_extension_annotations_and_directives():
    src = (
        "// Документация\n"
        "&НаСервере\n"
        '&Вместо("ОбработкаПроведения")\n'
        "Процедура Расш1_ОбработкаПроведения(Отказ, Режим)\n"
        "\tПродолжитьВызов(Отказ, Режим);\n"
        "КонецПроцедуры\n"
        '&Перед("А")\nПроцедура Расш1_А()\nКонецПроцедуры\n'
        '&ИзменениеИКонтроль("Б")\nФункция Расш1_Б()\nКонецФункции\n'
        '&AtServer\n&Instead("C")\nProcedure Ext_C()\nEndProcedure\n'
        '&ChangeAndValidate("D")\nFunction Ext_D()\nEndFunction\n'
        "&Тест\n&НаКлиентеНаСервереБезКонтекста\nПроцедура ТестовыйМетод() Экспорт\nКонецПроцедуры\n"
        "&НаКлиенте Процедура НаОднойСтроке() КонецПроцедуры\n"
    )
    got = by_name(src)
    a = got["Расш1_ОбработкаПроведения"]
    assert a.directives == ["&НаСервере"]
    assert a.annotations == ['&Вместо("ОбработкаПроведения")']
    assert a.doc == "// Документация" and a.start_line == 1
    assert got["Расш1_А"].annotations == ['&Перед("А")']
    assert got["Расш1_Б"].annotations == ['&ИзменениеИКонтроль("Б")']
    assert got["Ext_C"].directives == ["&AtServer"] and got["Ext_C"].annotations == ['&Instead("C")']
    assert got["Ext_D"].annotations == ['&ChangeAndValidate("D")']
    t = got["ТестовыйМетод"]
    assert t.annotations == ["&Тест"] and t.directives == ["&НаКлиентеНаСервереБезКонтекста"]
    o = got["НаОднойСтроке"]
    assert o.directives == ["&НаКлиенте"] and o.signature == "Процедура НаОднойСтроке()"
    assert o.name_range[1] == len("&НаКлиенте Процедура ")


# Bodies (and one header) that tree-sitter-bsl 0.1.6 and/or tree-sitter-hbk 0.1.11 mis-parse.
BROKEN_BODIES = {
    "bare_raise": "\tВызватьИсключение;",
    "paren_return": "\tВозврат (1 + 2) * 3;",
    "double_semicolon": "\tа = 1;;",
    "new_call_form": '\tа = Новый("Структура");',
    "date_literal": "\tа = '2017.03.23 10:45:25';",
    "indexed_call": "\tПланыОбмена[Имя].Метод(1, 2);",
    "unbalanced_if": "\tЕсли а Тогда\n\t\tб = 1;",
    "garbage": "\t@@@ ??? %%% ) ( ]]",
    "stray_end": "\tКонецЕсли;\n\tКонецЦикла;",
}


@pytest.mark.parametrize("body", list(BROKEN_BODIES.values()), ids=list(BROKEN_BODIES))
def test_broken_body_never_hides_neighbours(body):
    src = (
        "Процедура Перед()\n\tа = 1;\nКонецПроцедуры\n\n"
        "// Сломанная\n"
        "Функция СломанныйМетодЁ(П) Экспорт\n" + body + "\nКонецФункции\n\n"
        "Процедура После() Экспорт\n\tб = 2;\nКонецПроцедуры\n"
    )
    got = by_name(src)
    assert list(got) == ["Перед", "СломанныйМетодЁ", "После"]
    broken = got["СломанныйМетодЁ"]
    n_body = body.count("\n") + 1
    assert (broken.start_line, broken.end_line) == (5, 7 + n_body)
    assert broken.doc == "// Сломанная" and broken.export
    assert broken.text.endswith("КонецФункции")
    after = got["После"]
    assert (after.start_line, after.end_line) == (9 + n_body, 11 + n_body)


def test_a_broken_module_chunks_the_same_whatever_the_capture_order(monkeypatch):
    """A broken module's definitions come from a query whose captures arrive in no fixed order
    (py-tree-sitter collects them in a set); of two definitions starting on one line the first
    in the file gives the method's end, so the chunks do not depend on that order."""
    from daemon.sources import bsl

    real = bsl._query_cursor
    src = "Процедура А() КонецПроцедуры Процедура Б()\n\tа = ((;\nКонецПроцедуры\n"
    got = []
    for reverse in (False, True):

        class Ordered:
            def __init__(self, name, reverse=reverse):
                self.cursor, self.reverse = real(name), reverse

            def captures(self, node):
                caps = self.cursor.captures(node)
                return {k: sorted(v, key=lambda n: n.start_byte, reverse=self.reverse) for k, v in caps.items()}

        monkeypatch.setattr(bsl, "_query_cursor", Ordered)
        got.append([(c.name, c.start_line, c.end_line) for c in chunk_module(src, path="m.bsl")])
    assert got[0] == got[1]
    assert got[0][0] == ("А", 1, 1)


def test_grammar_faults_still_present_and_handled():
    """Documents which inputs break which grammar, and that the chunker does not care."""
    cases = {
        "Процедура А()\n\tВызватьИсключение;\nКонецПроцедуры\n": (True, True),
        "Процедура А(П = -1)\nКонецПроцедуры\n": (True, True),
        "&Тест\nПроцедура А()\nКонецПроцедуры\n": (True, True),
        "Функция А()\n\tВозврат (1 + 2) * 3;\nКонецФункции\n": (False, True),
        "Процедура А()\n\tа = 1;;\nКонецПроцедуры\n": (False, True),
        'Процедура А()\n\tа = Новый("Структура");\nКонецПроцедуры\n': (False, True),
        "Процедура А()\n\tа = '2017.03.23 10:45:25';\nКонецПроцедуры\n": (False, True),
    }
    for src, (hbk_err, bsl_err) in cases.items():
        assert raw_tree(tree_sitter_hbk, src).root_node.has_error is hbk_err, src
        if tree_sitter_bsl is not None:
            assert raw_tree(tree_sitter_bsl, src).root_node.has_error is bsl_err, src
        full = src + "Процедура Б()\nКонецПроцедуры\n"
        assert [c.name for c in methods(full)] == ["А", "Б"], src
    a = by_name('Процедура А(П = -1, Т = ")") Экспорт\nКонецПроцедуры\n')["А"]
    assert a.params == 'П = -1, Т = ")"' and a.export


def test_unterminated_method_stops_before_next_doc():
    src = "// Д1\nПроцедура А()\n\tа = 1;\n\n// Д2\n&НаКлиенте\nПроцедура Б()\nКонецПроцедуры\n"
    got = methods(src)
    assert [(c.name, c.start_line, c.end_line) for c in got] == [("А", 1, 3), ("Б", 5, 8)]
    assert got[1].doc == "// Д2" and got[1].directives == ["&НаКлиенте"]


def test_async_keyword_on_its_own_line():
    src = "Асинх\nПроцедура А(П) Экспорт\nКонецПроцедуры\n"
    (c,) = chunk_module(src, path="m.bsl")
    assert c.is_async and c.export and c.signature == "Асинх Процедура А(П) Экспорт"
    assert (c.start_line, c.end_line) == (1, 3) and c.name_range == (1, 10, 1, 11)
    assert scan_method_headers(src) == [(1, "А")]


def test_bare_cr_line_ends_are_line_breaks():
    lf = "// Д\nПроцедура А()\n\tа = 1;\nКонецПроцедуры\nФункция Б()\nКонецФункции\n"
    for variant in (lf.replace("\n", "\r"), lf.replace("\n", "\r\n"), "\ufeff" + lf):
        assert chunk_module(variant, path="m.bsl") == chunk_module(lf, path="m.bsl")
    assert scan_method_headers(lf.replace("\n", "\r")) == [(2, "А"), (5, "Б")]


def test_headers_in_comments_and_strings_are_not_methods():
    src = (
        "Процедура Настоящая()\n"
        "\t// Процедура ВКомментарии()\n"
        '\tТекст = "\n'
        "\t|Процедура ВСтроке()\n"
        "\t|Функция ЕщеВСтроке() КонецФункции\n"
        "\t|КонецПроцедуры\n"
        '\t|""КонецПроцедуры"" // не комментарий\n'
        '\t|";\n'
        '\tСообщить("КонецПроцедуры"); // КонецПроцедуры\n'
        "КонецПроцедуры\n"
        "//Функция Закомментированная()\n"
        "//КонецФункции\n"
        "Функция Вторая()\nКонецФункции\n"
    )
    got = methods(src)
    assert [c.name for c in got] == ["Настоящая", "Вторая"]
    assert (got[0].start_line, got[0].end_line) == (1, 10)
    assert got[1].doc == "//Функция Закомментированная()\n//КонецФункции"
    assert scan_method_headers(src) == [(1, "Настоящая"), (13, "Вторая")]


def test_preprocessor_inside_body_column0_and_indented():
    src = (
        "Процедура А() Экспорт\n"
        "#Если НЕ МобильныйАвтономныйСервер Тогда\n"
        "\tЕсли Условие()\n"
        "\t   И Не ТранзакцияАктивна() Тогда\n"
        "#Иначе\n"
        "\t\tСообщение.Сообщить();\n"
        "#КонецЕсли\n"
        "КонецПроцедуры\n"
        "Процедура ПроверитьПочту(Параметры) Экспорт\n"
        "\t\n"
        "\t#Если Не ВебКлиент И Не МобильныйКлиент Тогда\n"
        "\tПроверить();\n"
        "\t#КонецЕсли\n"
        "КонецПроцедуры\n"
    )
    got = methods(src)
    assert [(c.name, c.start_line, c.end_line) for c in got] == [("А", 1, 8), ("ПроверитьПочту", 9, 14)]
    assert all(c.kind == "procedure" for c in chunk_module(src, path="m.bsl"))  # no module chunk


def test_empty_bom_only_and_whitespace():
    assert chunk_module("", path="m.bsl") == []
    assert chunk_module("\ufeff", path="m.bsl") == []
    assert chunk_module(b"\xef\xbb\xbf".decode("utf-8"), path="m.bsl") == []
    assert chunk_module("\ufeff\r\n  \r\n", path="m.bsl") == []
    assert scan_method_headers("") == [] and scan_method_headers("\ufeff") == []


def test_comments_and_regions_only_give_no_module_chunk():
    src = "// Copyright\n\n#Область ПрограммныйИнтерфейс\n// пусто\n#КонецОбласти\n"
    assert chunk_module(src, path="m.bsl") == []


@pytest.mark.parametrize(
    "text",
    [
        bytes(range(256)).decode("latin-1"),
        (bytes(range(256)) * 7).decode("utf-8", "replace"),
        "\x00\x00Процедура\x00 А(\n",
        "Процедура",
        "Процедура А(",
        'Процедура А("',
        'Функция Ф(П = "\n|\n',
        "КонецПроцедуры\nКонецФункции\n",
        "&\n&&&(\nПроцедура Б()",
        "#Область\n#КонецОбласти\n#КонецОбласти\n#Область Х",
        "\ud800 Процедура Суррогат() КонецПроцедуры",
        "İİİ\nПроцедура А()\nКонецПроцедуры\n",
        "\r\r\r\n\r",
        "#Если Клиент Тогда\nПроцедура А()\n#Иначе\nПроцедура А() Экспорт\n#КонецЕсли\n\tа = 1;\nКонецПроцедуры\n",
        "Процедура А() КонецПроцедуры Процедура Б() КонецПроцедуры",
    ],
)
def test_garbage_never_raises(text):
    chunks = chunk_module(text, path="g.bsl")
    for c in chunks:
        msgspec.json.encode(c)  # serialisable (no lone surrogates break the socket)
    scan_method_headers(text)


def test_lowercase_length_change_fallback():
    """str.lower() lengthens "İ": the offset-based fast path must fall back, not misplace."""
    src = '// İİİİ\nПроцедура А() // İ\nКонецПроцедуры\nФункция Б()\n\tВозврат "İ";\nКонецФункции\n'
    got = methods(src)
    assert [(c.name, c.start_line, c.end_line) for c in got] == [("А", 1, 3), ("Б", 4, 6)]


def test_duplicate_names_get_suffix():
    src = (
        "#Если Сервер Тогда\n"
        "Процедура Дубль() Экспорт\nКонецПроцедуры\n"
        "#Иначе\n"
        "Процедура дубль() Экспорт\nКонецПроцедуры\n"
        "#КонецЕсли\n"
        "Процедура ДУБЛЬ()\nКонецПроцедуры\n"
    )
    ids = [c.id for c in methods(src)]
    assert ids == ["m.bsl::Дубль", "m.bsl::дубль@2", "m.bsl::ДУБЛЬ@3"]


def test_header_variants_in_preprocessor_branches_are_one_method():
    """``#Если`` choosing between two headers of one method (two parameter lists, one body):
    one method whose lines span both headers and the body, both signatures and parameter
    lists, the directives of both branches, exported if either header is, and the doc
    comment above the ``#Если``. documentSymbol lists it once (one chunk)."""
    src = (
        "// Описание метода.\n"
        "//\n"
        "// Параметры:\n"
        "//   П1 - Строка\n"
        "#Если Клиент Тогда\n"
        "&НаКлиенте\n"
        "Процедура А(П1)\n"
        "#Иначе\n"
        "&НаСервере\n"
        "Процедура А(П1, П2 = Неопределено) Экспорт\n"
        "#КонецЕсли\n"
        "\tа = П1;\n"
        "КонецПроцедуры\n"
        "\n"
        "Процедура Следующая()\n"
        "КонецПроцедуры\n"
    )
    got = methods(src)
    assert [(c.id, c.start_line, c.end_line) for c in got] == [("m.bsl::А", 1, 13), ("m.bsl::Следующая", 15, 16)]
    a = got[0]
    assert a.signature == "Процедура А(П1) | Процедура А(П1, П2 = Неопределено) Экспорт"
    assert a.params == "П1 | П1, П2 = Неопределено"
    assert a.export and a.directives == ["&НаКлиенте", "&НаСервере"]
    assert a.doc.startswith("// Описание метода.") and a.doc.endswith("//   П1 - Строка")
    assert a.name_range == (6, 10, 6, 11)  # the first header's name
    assert a.text.startswith("// Описание метода.") and a.text.endswith("КонецПроцедуры")
    assert "#Если Клиент Тогда" in a.text and "#Иначе" in a.text
    assert [c.kind for c in chunk_module(src, path="m.bsl")] == ["procedure", "procedure"]  # no module chunk
    # the line scan reports the declaration lines as written: both headers
    assert scan_method_headers(src) == [(7, "А"), (10, "А"), (15, "Следующая")]


@pytest.mark.parametrize(
    "branches",
    [
        # three branches with #ИначеЕсли, English keywords, odd spacing and case
        ("#Если Клиент Тогда", "#ИначеЕсли Сервер Тогда", "#Иначе", "#КонецЕсли"),
        ("#If Client Then", "#ElsIf Server Then", "#Else", "#EndIf"),
        ("# если   ВебКлиент   тогда", "#  ИНАЧЕЕСЛИ Сервер ТОГДА", "#иначе", "# КонецЕсли"),
    ],
    ids=["ru", "en", "odd-spacing-case"],
)
def test_header_variants_three_branches_and_english(branches):
    b_if, b_elsif, b_else, b_end = branches
    src = (
        f"{b_if}\nФункция Ф(А)\n{b_elsif}\nФункция Ф(А, Б)\n{b_else}\nFunction Ф(А, Б, В) Export\n{b_end}\n"
        "\tВозврат А;\nКонецФункции\n"
    )
    (f,) = methods(src)
    assert (f.id, f.kind, f.start_line, f.end_line) == ("m.bsl::Ф", "function", 1, 9)
    assert f.signature == "Функция Ф(А) | Функция Ф(А, Б) | Function Ф(А, Б, В) Export"
    assert f.export


def test_two_complete_methods_in_branches_stay_two():
    """Each branch with its own end keyword: two methods (``@2``), not header variants; and
    a header-only line followed by other code is not merged either."""
    src = (
        "#Если Сервер Тогда\n"
        "Процедура Д(А) Экспорт\nКонецПроцедуры\n"
        "#Иначе\n"
        "Процедура Д(А, Б) Экспорт\nКонецПроцедуры\n"
        "#КонецЕсли\n"
        "Процедура Е()\n"
        "#КонецЕсли\n"
        "#Если Клиент Тогда\n"
        "Процедура Е(А)\n"
        "\tа = 1;\n"
        "КонецПроцедуры\n"
    )
    got = [(c.id, c.start_line, c.end_line) for c in methods(src)]
    assert got == [("m.bsl::Д", 2, 3), ("m.bsl::Д@2", 5, 6), ("m.bsl::Е", 8, 8), ("m.bsl::Е@2", 11, 13)]


def test_regions_inside_a_method_body():
    """``#Область`` inside a body (54 in ssl31-ru, e.g. СравнениеТабличныхДокументов):
    the method keeps its lines and the outer regions; the next method's region is not
    changed by it."""
    src = (
        "#Область Служебные\n"
        "Процедура А()\n"
        "#Область Сравнение\n"
        "\tа = 1;\n"
        "#КонецОбласти\n"
        "\t#Region Inner\n"
        "\tб = 2;\n"
        "\t#EndRegion\n"
        "КонецПроцедуры\n"
        "Процедура Б()\nКонецПроцедуры\n"
        "#КонецОбласти\n"
        "Процедура В()\nКонецПроцедуры\n"
    )
    got = by_name(src)
    assert (got["А"].start_line, got["А"].end_line, got["А"].region) == (2, 9, ["Служебные"])
    assert got["Б"].region == ["Служебные"] and got["В"].region == []


EXTENSION_MODULE = (
    '&ИзменениеИКонтроль("ПередЗаписью")\n'
    "Процедура Расш1_ПередЗаписью(Отказ)\n"
    "\tЕсли Отказ Тогда\n"
    "\t\tВозврат;\n"
    "\tКонецЕсли;\n"
    "#Удаление\n"
    "\tКракозябрум(Отказ);\n"
    "#КонецУдаления\n"
    "#Вставка\n"
    "\tЧебурашкин(Отказ);\n"
    "#КонецВставки\n"
    "КонецПроцедуры\n"
    "\n"
    '&ChangeAndValidate("BeforeWrite")\n'
    "Procedure Ext1_BeforeWrite(Cancel)\n"
    "\t# Delete\n"
    "\tSnarkle(Cancel);\n"
    "\t#enddelete\n"
    "\t#Insert\n"
    "\tBloopix(Cancel);\n"
    "\t#EndInsert\n"
    "EndProcedure\n"
)


def test_extension_change_markers_live_code():
    from daemon.sources.bsl import live_code

    ru, en = methods(EXTENSION_MODULE)
    assert ru.annotations == ['&ИзменениеИКонтроль("ПередЗаписью")'] and en.annotations == [
        '&ChangeAndValidate("BeforeWrite")'
    ]
    # the chunk keeps every line as written (get_method shows them) ...
    assert "Кракозябрум" in ru.text and "Snarkle" in en.text
    # ... the indexed text does not: deleted lines and the markers left out, inserts kept
    live = live_code(ru.text)
    assert "Кракозябрум" not in live and "#" not in live
    assert "\tЧебурашкин(Отказ);" in live and live.endswith("КонецПроцедуры")
    live_en = live_code(en.text)
    assert "Snarkle" not in live_en and "Bloopix(Cancel);" in live_en and "Delete" not in live_en
    # no marker: the very same object; an #Удаление that never closes deletes nothing
    plain = "Процедура А()\n#Если Клиент Тогда\nа = 1;\n#КонецЕсли\nКонецПроцедуры"
    assert live_code(plain) is plain
    assert live_code("а = 1;\n#Удаление\nб = 2;\nКонецПроцедуры") == "а = 1;\nб = 2;\nКонецПроцедуры"


def test_extension_deleted_lines_not_in_bm25_or_dense_text(tmp_path):
    """Through the engine (real chunker, tokenizer, BM25) and the dense text builder: a word
    only in ``#Удаление`` lines finds nothing, a word in ``#Вставка`` lines finds the
    method; the chunk text still holds the deleted line."""
    import shutil

    from daemon.cli.bench import sample_export_dir
    from daemon.engine import Engine
    from daemon.index.embed_text import embed_text

    root = tmp_path / "ext"
    shutil.copytree(sample_export_dir(), root)
    mod = next(root.rglob("CommonModules/*/Ext/Module.bsl"))
    mod.write_text(mod.read_text(encoding="utf-8-sig") + "\n" + EXTENSION_MODULE, encoding="utf-8")
    eng = Engine.open(root, index_dir=tmp_path / "idx")
    eng.refresh()
    rel = mod.relative_to(root).as_posix()
    ru, en = f"{rel}::Расш1_ПередЗаписью", f"{rel}::Ext1_BeforeWrite"
    assert [eng.bm25.df(w) for w in ("кракозябрум", "snarkle", "чебурашкин", "bloopix")] == [0, 0, 1, 1]
    assert [h.id for h in eng.search("Чебурашкин", mode="lexical", top_k=3).hits][:1] == [ru]
    assert ru not in [h.id for h in eng.search("Кракозябрум", mode="lexical", top_k=5).hits]
    assert en in eng.chunks
    chunk = eng.get_chunk(f"{rel}::Расш1_ПередЗаписью")
    assert "Кракозябрум" in chunk.text
    dense = embed_text(chunk)
    assert "Чебурашкин" in dense and "Кракозябрум" not in dense


def test_doc_comment_rules():
    src = (
        "// Copyright (c) 2025, ООО 1С-Софт\n"
        "// CC BY 4.0\n"
        "\n"
        "Процедура БезДокументации()\nКонецПроцедуры\n"
        "\n"
        "// Описание.\n"
        "//\n"
        "// Параметры:\n"
        "//   П - Строка\n"
        "//@skip-check not-allowed-pragma\n"
        "&НаСервере\n"
        "Процедура СДокументацией(П)\nКонецПроцедуры\n"
        "\n"
        "// отделено пустой строкой\n"
        "\n"
        "&НаКлиенте\n"
        "Процедура ДокументацияОтделена()\nКонецПроцедуры\n"
    )
    got = by_name(src)
    assert got["БезДокументации"].doc == "" and got["БезДокументации"].start_line == 4
    d = got["СДокументацией"]
    assert d.doc == "// Описание.\n//\n// Параметры:\n//   П - Строка\n//@skip-check not-allowed-pragma"
    assert d.start_line == 7 and d.text.startswith("// Описание.\n")
    e = got["ДокументацияОтделена"]
    assert e.doc == "" and e.start_line == 18 and e.directives == ["&НаКлиенте"]


def test_regions_nest_and_open_inside_if():
    src = (
        "#Область ПрограммныйИнтерфейс\n"
        "#Область ОповещениеПользователя\n"
        "Процедура А() Экспорт\nКонецПроцедуры\n"
        "#КонецОбласти\n"
        "#Если НЕ МобильныйАвтономныйСервер Тогда\n"
        "#Область ДанныеВБазе\n"
        "Процедура Б() Экспорт\nКонецПроцедуры\n"
        "#КонецОбласти\n"
        "#КонецЕсли\n"
        "#КонецОбласти\n"
        "#Region Private\n"
        "Procedure C()\nEndProcedure\n"
        "#EndRegion\n"
        "Процедура Вне()\nКонецПроцедуры\n"
    )
    got = by_name(src)
    assert got["А"].region == ["ПрограммныйИнтерфейс", "ОповещениеПользователя"]
    assert got["Б"].region == ["ПрограммныйИнтерфейс", "ДанныеВБазе"]
    assert got["C"].region == ["Private"]
    assert got["Вне"].region == []


def test_module_chunk_holds_variables_and_raise():
    src = (
        "// Copyright\n"
        "\n"
        "#Если Сервер Или ТолстыйКлиентОбычноеПриложение Тогда\n"
        "&НаКлиенте\n"
        "Перем ПолучательПеретаскиваемогоЗначения, АдресПараметров;\n"
        "Процедура А()\nКонецПроцедуры\n"
        "#Иначе\n"
        "ВызватьИсключение НСтр(\"ru = 'Недопустимый вызов объекта на клиенте.'\");\n"
        "#КонецЕсли\n"
    )
    chunks = chunk_module(src, path="m.bsl", owner="Справочник.Х", object_type="Справочник", module_kind="object")
    mod = chunks[-1]
    assert mod.kind == "module" and mod.id == "m.bsl::<module>" and mod.name == "<module>"
    assert mod.owner == "Справочник.Х" and mod.module_kind == "object"
    assert "Перем ПолучательПеретаскиваемогоЗначения" in mod.text and "&НаКлиенте" in mod.text
    assert "ВызватьИсключение НСтр" in mod.text
    assert "Процедура А" not in mod.text
    assert (mod.start_line, mod.end_line) == (3, 10)
    assert "Copyright" not in mod.text  # the module header comment is boilerplate
    a = chunks[0]
    assert a.name == "А" and a.start_line == 6  # "&НаКлиенте" belongs to Перем, not to А
    assert a.directives == [] and a.owner == "Справочник.Х" and a.object_type == "Справочник"


def test_long_method_split_into_parts():
    body = "\n".join(f"\tа{i} = {i};" for i in range(1, 31))
    src = (
        "Процедура Короткая()\nКонецПроцедуры\n"
        "// Док\n&НаСервере\nФункция Длинная(А,\n\tБ) Экспорт\n" + body + "\nКонецФункции\n"
    )
    chunks = methods(src, max_lines=12)
    assert chunks[0].part == 0 and chunks[0].id == "m.bsl::Короткая"
    parts = chunks[1:]
    n = len(parts)
    assert n >= 3
    assert [p.id for p in parts] == [f"m.bsl::Длинная#{i}" for i in range(1, n + 1)]
    assert [p.part for p in parts] == list(range(1, n + 1))
    prefix = "// Док\n&НаСервере\nФункция Длинная(А,\n\tБ) Экспорт\n"
    for p in parts:
        assert p.text.startswith(prefix)
        assert p.name == "Длинная" and p.signature == "Функция Длинная(А, Б) Экспорт"
        assert len(p.text.split("\n")) <= 12
    assert parts[0].start_line == 3
    for a, b in zip(parts, parts[1:], strict=False):
        assert b.start_line == a.end_line + 1
    assert parts[-1].end_line == 3 + 4 + 30
    assert parts[-1].text.endswith("КонецФункции")
    # every body line appears in exactly one part
    all_lines = [ln for p in parts for ln in p.text.split("\n")[4:]]
    assert all_lines == src.split("\n")[6:-1]
    # a method of exactly max_lines is not split
    assert [c.part for c in methods(src, max_lines=36)] == [0, 0]


def test_utf16_name_range_cyrillic_astral_and_bom():
    src = '\ufeffПроцедура Первая()\nКонецПроцедуры\n&Вместо("😀Ё") Функция Вторая()\nКонецФункции\n'
    got = by_name(src)
    assert got["Первая"].name_range == (0, 10, 0, 16)  # the BOM is not a column
    prefix = '&Вместо("😀Ё") Функция '
    assert utf16(prefix) == len(prefix) + 1  # the emoji is two UTF-16 units
    assert got["Вторая"].name_range == (2, utf16(prefix), 2, utf16(prefix) + 6)


def test_crlf_and_lf_give_identical_chunks():
    src = (
        '// Док\r\n&НаСервере\r\nПроцедура А(П1,\r\n\tП2) Экспорт\r\n\tТекст = "\r\n\t|ВЫБРАТЬ";\r\n'
        "КонецПроцедуры\r\nПерем Х;\r\n"
    )
    assert chunk_module(src, path="m.bsl") == chunk_module(src.replace("\r\n", "\n"), path="m.bsl")
    assert all("\r" not in c.text for c in chunk_module(src, path="m.bsl"))
