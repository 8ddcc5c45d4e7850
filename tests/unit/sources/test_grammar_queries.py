"""Every query under ``grammars/bsl/`` compiles against the chosen grammar and captures what
it documents, on small inline sources; plus the loader's location rule."""

from __future__ import annotations

from pathlib import Path

import tree_sitter

from daemon.sources import bsl

SRC = """// Copyright
#Если Сервер Тогда
#Область ПрограммныйИнтерфейс
// Документация
&НаСервере
Асинх Процедура ПолучитьСчёт(А, Б = 1) Экспорт
	а = 1; // хвост
КонецПроцедуры
#Область Вложенная
&Вместо("Исходная")
Функция Ф()
	Возврат 1;
EndFunction
#КонецОбласти
#КонецОбласти
&AtClient
Procedure P(X)
EndProcedure
#КонецЕсли
"""


def captures(name: str, src: str = SRC) -> dict[str, list[tree_sitter.Node]]:
    tree = bsl.parser().parse(src.encode("utf-8"))
    return tree_sitter.QueryCursor(bsl.load_query(name)).captures(tree.root_node)


def texts(nodes) -> list[str]:
    return [n.text.decode("utf-8") for n in sorted(nodes, key=lambda n: n.start_byte)]


def test_every_query_file_is_known_and_compiles():
    files = sorted(p.stem for p in bsl.grammar_dir().glob("*.scm"))
    assert files == ["annotations", "comments", "methods", "regions"]
    for name in files:
        assert isinstance(bsl.load_query(name), tree_sitter.Query)
    assert bsl.load_query("methods") is bsl.load_query("methods")  # cached


def test_grammar_dir_source_checkout_or_installed():
    import daemon

    installed = Path(daemon.__file__).resolve().parent / "_grammars" / "bsl"
    expected = installed if installed.is_dir() else Path(__file__).resolve().parents[3] / "grammars" / "bsl"
    assert bsl.grammar_dir() == expected
    assert (bsl.grammar_dir() / "methods.scm").is_file()


def test_methods_query():
    c = captures("methods")
    assert [n.type for n in sorted(c["method"], key=lambda n: n.start_byte)] == [
        "procedure_definition",
        "function_definition",
        "procedure_definition",
    ]
    # ё truncation: the name node stops before "ё" (why the chunker reads names from text)
    assert texts(c["name"]) == ["ПолучитьСч", "Ф", "P"]
    assert texts(c["params"]) == ["(А, Б = 1)", "()", "(X)"]
    assert texts(c["export"]) == ["Экспорт"]
    assert texts(c["async"]) == ["Асинх"]


def test_regions_query():
    c = captures("regions")
    assert texts(c["name"]) == ["ПрограммныйИнтерфейс", "Вложенная"]
    outer, inner = sorted(c["region"], key=lambda n: n.start_byte)
    assert outer.start_byte < inner.start_byte and inner.end_byte <= outer.end_byte  # nesting


def test_annotations_query():
    c = captures("annotations")
    assert texts(c["annotation"]) == ["&НаСервере", "&Вместо", "&AtClient"]
    assert texts(c["argument"]) == ['"Исходная"']


def test_comments_query():
    c = captures("comments")
    assert texts(c["comment"]) == ["// Copyright", "// Документация", "// хвост"]


def test_comments_query_ignores_slashes_in_strings():
    c = captures("comments", 'а = "http://x"; // настоящий\nб = "\n|// в строке\n|";\n')
    assert texts(c["comment"]) == ["// настоящий"]
