"""Every query under ``grammars/bsl/`` compiles against the chosen grammar and captures what
it documents, on small inline sources; plus the loader's location rule and the equivalence
of the chunker's fast tree walk with ``methods.scm``."""

from __future__ import annotations

from pathlib import Path

import pytest
import tree_sitter

from daemon.sources import bsl, bsl_lines

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
    expected = installed if installed.is_dir() else Path(__file__).resolve().parents[2] / "grammars" / "bsl"
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


def test_tree_walk_equals_methods_query(ssl_ru, yaxunit):
    """The chunker walks only root/preprocessor/ERROR children for speed; on real modules
    (a huge one, one with ERROR nodes) it must find exactly the definitions the query finds."""
    for p in (
        ssl_ru / "CommonModules/ОбщегоНазначения/Ext/Module.bsl",
        ssl_ru / "CommonModules/ОбщегоНазначенияКлиент/Ext/Module.bsl",
        yaxunit / "exts/smoke/src/CommonModules/ДТОткрытиеФорм/Module.bsl",
        yaxunit / "exts/yaxunit/src/Configuration/ManagedApplicationModule.bsl",
    ):
        text = bsl_lines.normalize(p.read_bytes().decode("utf-8"))
        data = text.encode("utf-8")
        walked = {(n.start_byte, n.end_byte) for _, _, n in bsl._tree_methods(data).values()}
        # the plain walk (used for clean trees) must agree with the query on these files too
        stack, plain = [bsl.parser().parse(data).root_node], set()
        while stack:
            for n in stack.pop().children:
                if n.type in bsl._METHOD_TYPES:
                    plain.add((n.start_byte, n.end_byte))
                elif n.type in bsl._CONTAINER_TYPES:
                    stack.append(n)
        c = captures("methods", text)
        queried = {(n.start_byte, n.end_byte) for n in c["method"]}
        assert walked == queried == plain, p
        assert walked


@pytest.mark.parametrize("name", ["methods", "regions", "annotations", "comments"])
def test_queries_run_on_a_corpus_module(ssl_en, name):
    text = (ssl_en / "Catalogs/Users/Forms/ItemForm/Ext/Form/Module.bsl").read_bytes().decode("utf-8")
    c = captures(name, bsl_lines.normalize(text))
    assert sum(len(v) for v in c.values()) > 10
