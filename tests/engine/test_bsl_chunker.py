"""BSL chunker (:mod:`daemon.sources.bsl`) on the real corpora, read in place: real tree-sitter, no
mocks. The tests on inline sources are in tests/unit/sources/test_bsl.py."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest
import tree_sitter
import tree_sitter_hbk

# tree-sitter-bsl is only the rejected candidate grammar (grammars/README.md): not a project
# dependency, so the checks that pin its faults are skipped where it is not installed.
try:
    import tree_sitter_bsl
except ImportError:  # pragma: no cover
    tree_sitter_bsl = None

from daemon.sources.bsl import chunk_module, scan_method_headers


def methods(text: str, **kw) -> list:
    return [c for c in chunk_module(text, path="m.bsl", **kw) if c.kind != "module"]


_REF_HEADER = re.compile(
    r"^\s*(?:&\w+\s*(?:\([^()]*\))?\s*)*(?:(?:Асинх|Async)\s+)?(?:Процедура|Функция|Procedure|Function)\s+(\w+)",
    re.IGNORECASE,
)

_REF_TOKENS = re.compile(r'""|"|//')


def reference_scan(text: str) -> list[tuple[int, str]]:
    """An independent careful scanner: carries the string state across lines (``|``
    continuations, ``""`` escapes, ``//`` comments) and reports headers on lines that start
    outside a string and outside a comment. Written separately from daemon.sources.bsl on purpose.
    Line breaks: CRLF, LF or a lone CR (the LSP definition)."""
    if text.startswith("\ufeff"):
        text = text[1:]
    text = re.sub(r"\r\n?", "\n", text)
    out = []
    in_string = False
    for i, line in enumerate(text.split("\n")):
        stripped = line.lstrip()
        pos = 0
        if in_string:
            if stripped.startswith("|"):
                pos = len(line) - len(stripped) + 1
            elif stripped.startswith("//") or not stripped:
                continue
            else:  # malformed: the string was never closed; resync
                in_string = False
        if not in_string:
            m = _REF_HEADER.match(line)
            if m:
                out.append((i + 1, m.group(1)))
        for t in _REF_TOKENS.finditer(line, pos):
            tok = t.group()
            if in_string:
                if tok == '"':
                    in_string = False
            elif tok == "//":
                break
            elif tok == '"':
                in_string = True
            elif tok == '""':  # an empty string literal outside a string
                pass
    return out


def test_raise_without_semicolon_before_endtry_flattens_hbk_tree():
    """yaxunit-edt exts/smoke ДТОткрытиеФорм: ``ВызватьИсключение`` with no ``;`` right before
    ``КонецПопытки`` makes tree-sitter-hbk lose the definitions that follow; the scan recovers."""
    src = (
        "Процедура Первая()\n"
        "\tПопытка\n\t\tа = 1;\n\tИсключение\n\t\tВызватьИсключение\n\tКонецПопытки;\n"
        "\tЮТест.ОжидаетЧто(а)\n\t\t.НеРавно(Неопределено);\n"
        "КонецПроцедуры\n\n"
        'Функция Вторая(Форма)\n\tВозврат ТипЗнч(Форма) = Тип("УправляемаяФорма");\nКонецФункции\n'
    )
    assert [(c.name, c.start_line, c.end_line) for c in methods(src)] == [("Первая", 1, 9), ("Вторая", 11, 13)]


def read(p: Path) -> str:
    """The module as on disk (CRLF kept: ``Path.read_text`` would translate newlines)."""
    return p.read_bytes().decode("utf-8")


def test_corpus_common_module(ssl_ru):
    p = ssl_ru / "CommonModules/ОбщегоНазначения/Ext/Module.bsl"
    text = read(p)
    chunks = chunk_module(
        text,
        path="CommonModules/ОбщегоНазначения/Ext/Module.bsl",
        owner="ОбщийМодуль.ОбщегоНазначения",
        object_type="ОбщийМодуль",
        module_kind="common",
    )
    got = {c.name: c for c in chunks if c.part <= 1}
    c = got["СообщитьПользователю"]
    assert c.export and c.kind == "procedure"
    assert c.region[:2] == ["ПрограммныйИнтерфейс", "ОповещениеПользователя"]
    assert c.doc.startswith("//") and c.text.startswith(c.doc)
    lines = text.lstrip("\ufeff").split("\n")
    assert lines[c.end_line - 1].strip() == "КонецПроцедуры"
    assert re.match(r"\s*Процедура СообщитьПользователю\(", lines[c.name_range[0]])
    z = got["ЗначениеРеквизитаОбъекта"]
    assert z.kind == "function" and z.export and "ДанныеВБазе" in z.region
    assert all(ch.owner == "ОбщийМодуль.ОбщегоНазначения" for ch in chunks)
    assert len({ch.id for ch in chunks}) == len(chunks)
    # the #Если at column 0 inside СообщитьПользователю does not split it
    assert "#Иначе" in c.text and c.text.rstrip().endswith("КонецПроцедуры")


def test_corpus_form_module_directives(ssl_ru):
    text = read(ssl_ru / "Catalogs/Пользователи/Forms/ФормаЭлемента/Ext/Form/Module.bsl")
    got = {c.name: c for c in chunk_module(text, path="f.bsl", module_kind="form")}
    c = got["ПриЧтенииНаСервере"]
    assert c.directives == ["&НаСервере"] and c.params == "ТекущийОбъект"
    assert c.name_range[0] == 297  # 0-based line of "Процедура ПриЧтенииНаСервере" (line 298)
    assert sum(1 for ch in got.values() if "&НаКлиенте" in ch.directives) > 10


def test_corpus_async_function_at_line_1173(ssl_ru):
    text = read(ssl_ru / "CommonModules/ОбщегоНазначенияКлиент/Ext/Module.bsl")
    got = {c.name: c for c in chunk_module(text, path="c.bsl")}
    c = got["УстановитьКомпонентуИзМакетаАсинх"]
    assert c.is_async and c.export and c.kind == "function"
    assert c.name_range == (1172, 14, 1172, 14 + len("УстановитьКомпонентуИзМакетаАсинх"))
    assert c.signature == (
        "Асинх Функция УстановитьКомпонентуИзМакетаАсинх(ПолноеИмяМакета, ПараметрыУстановки = Неопределено) Экспорт"
    )
    m = got["ПодключитьКомпонентуИзМакетаАсинх"]
    assert m.is_async and m.export and m.signature.endswith(") Экспорт")


def test_corpus_yaxunit_mixed_keywords_and_after(yaxunit):
    text = read(yaxunit / "exts/yaxunit/src/Configuration/ManagedApplicationModule.bsl")
    got = {c.name: c for c in chunk_module(text, path="a.bsl", module_kind="managed_application")}
    a = got["ЮТПриНачалеРаботыСистемы"]
    assert a.annotations == ['&После("ПриНачалеРаботыСистемы")']
    assert a.doc == (
        "// Используется для перехвата управления расширением после отработки запуска приложения\n"
        "//@skip-check not-allowed-pragma"
    )
    assert a.start_line == 40 and a.text.startswith(a.doc + "\n&После(")
    e = got["ЮТOnStart"]
    assert e.annotations == ['&After("OnStart")'] and e.kind == "procedure"
    assert e.text.endswith("EndProcedure") and e.end_line == 54


def test_corpus_yaxunit_instead(yaxunit):
    text = read(yaxunit / "tests/src/Documents/ПриходТовара/ObjectModule.bsl")
    got = {c.name: c for c in chunk_module(text, path="o.bsl", module_kind="object")}
    c = got["Расш1_ОбработкаПроведения"]
    assert c.annotations == ['&Вместо("ОбработкаПроведения")']
    assert c.params == "Отказ, Режим" and c.name_range[0] == 19
    assert "ПродолжитьВызов(Отказ, Режим);" in c.text


def test_corpus_crlf_and_lf_identical(ssl_ru):
    text = read(ssl_ru / "CommonModules/ОбщегоНазначенияКлиент/Ext/Module.bsl")
    assert "\r\n" in text
    assert chunk_module(text, path="x") == chunk_module(text.replace("\r\n", "\n"), path="x")


def test_corpus_bare_cr_module(yaxunit):
    """fixtures/demo-configuration РасходТовара/ObjectModule.bsl ends its lines with a bare CR
    (326 CR, 2 CRLF): its methods are still found, one line per CR."""
    text = read(yaxunit / "fixtures/demo-configuration/src/Documents/РасходТовара/ObjectModule.bsl")
    assert text.count("\r") > 100 * max(text.count("\n"), 1)
    got = {c.name: c for c in chunk_module(text, path="o.bsl")}
    assert {"ОбработкаПроведения", "ОбработкаЗаполнения", "КонтрольОстатков", "ПечатнаяФорма"} <= set(got)
    c = got["ОбработкаПроведения"]
    assert c.text.startswith(("Процедура", "//", "&")) and c.text.endswith("КонецПроцедуры")
    assert c.end_line - c.start_line < 100


def test_corpus_hbk_flattened_module_recovered(yaxunit):
    text = read(yaxunit / "exts/smoke/src/CommonModules/ДТОткрытиеФорм/Module.bsl")
    tree = tree_sitter.Parser(tree_sitter.Language(tree_sitter_hbk.language())).parse(text.encode())
    raw = [
        n.child_by_field_name("name").text.decode()
        for n in tree.root_node.children
        if n.type in ("procedure_definition", "function_definition")
    ]
    assert "ОткрытьЗакрытьФорму" not in raw  # the grammar loses it
    got = {c.name: c for c in chunk_module(text, path="m.bsl")}
    lines = bsl_lines(text)
    for name, kw in (("ОткрытьЗакрытьФорму", "КонецПроцедуры"), ("ЭтоУправляемаяФорма", "КонецФункции")):
        c = got[name]
        assert lines[c.end_line - 1].strip() == kw
        assert lines[c.name_range[0]].lstrip().startswith(("Процедура " + name, "Функция " + name))


def bsl_lines(text: str) -> list[str]:
    return re.sub(r"\r\n?", "\n", text.lstrip("\ufeff")).split("\n")


def test_threads_give_the_same_chunks(ssl_ru):
    """One parser per thread: concurrent chunking equals sequential chunking."""
    from concurrent.futures import ThreadPoolExecutor

    files = sorted((ssl_ru / "CommonModules").glob("*/Ext/Module.bsl"))[:40]
    texts = [read(p) for p in files]
    want = [chunk_module(t, path=str(i)) for i, t in enumerate(texts)]
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda it: chunk_module(it[1], path=str(it[0])), enumerate(texts)))
    assert got == want


def _corpus_modules(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.bsl") if ".settings" not in p.parts)


@pytest.mark.slow
@pytest.mark.parametrize("corpus", ["ssl_ru", "ssl_en", "yaxunit"])
def test_whole_corpus_matches_careful_line_scan(corpus, request):
    root: Path = request.getfixturevalue(corpus)
    files = _corpus_modules(root)
    texts = [(p.relative_to(root).as_posix(), read(p)) for p in files]
    chunked = [(rel, chunk_module(text, path=rel)) for rel, text in texts]
    got: Counter = Counter()
    want: Counter = Counter()
    scanned: Counter = Counter()
    for (rel, text), (_, chunks) in zip(texts, chunked, strict=True):
        for c in chunks:
            if c.kind != "module" and c.part <= 1:
                got[(rel, c.name)] += 1
        for _line, name in reference_scan(text):
            want[(rel, name)] += 1
        for _line, name in scan_method_headers(text):
            scanned[(rel, name)] += 1
        ids = [c.id for c in chunks]
        assert len(ids) == len(set(ids)), rel
    assert got == want, (sorted((want - got).items())[:10], sorted((got - want).items())[:10])
    assert scanned == want
    if corpus == "ssl_ru":
        assert sum(want.values()) == 31577  # shared/eval/README.md: all method declarations
    elif corpus == "ssl_en":
        assert sum(want.values()) == 20500
