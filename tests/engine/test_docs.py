"""Documentation pages as a source: the markdown chunker (real markdown-it-py), anchors,
docs roots and ``--docs`` folders through the real scanner and engine, bad pages, links
from docs sections to methods, and ``read_document``."""

from __future__ import annotations

import logging
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from daemon.contract import Filters
from daemon.sources.docs import (
    DOCS_MAX_BYTES,
    DocLinks,
    code_identifiers,
    docs_name,
    normalize_docs_dirs,
    read_document,
)
from daemon.engine import Engine, EngineConfig
from daemon.ranking.params import RankingParams
from daemon.sources.markdown import (
    MAX_HEADING_CHARS,
    MAX_PAGE_BLOCKS,
    MAX_PAGE_HEADINGS,
    chunk_markdown,
    page_cut,
    slug,
)

SAMPLE = Path(__file__).resolve().parents[2] / "daemon" / "sample_export"

PAGE = """---
sidebar_position: 2
tags: [Начало]
---

# Базовые утверждения

Вступление со ссылкой на `ЮТест.ОжидаетЧто` и вызовом ЗагрузитьВыпискуБанка(Файл).

:::tip
Docusaurus admonition text
:::

## Доступные методы

| Метод | Назначение |
| --- | --- |
| `ИмеетТип` | проверка типа |

### Проверка типа значения

```bsl
# not a heading inside a fence
Процедура Тест() Экспорт
КонецПроцедуры
```

!!! warning "MkDocs admonition"
    indented body

## Доступные методы

Второй раздел с тем же заголовком.
"""


def chunks_of(text: str, path: str = "features/page.md", flavor: str = "docusaurus"):
    return chunk_markdown(text, path=path, flavor=flavor)


# ------------------------------------------------------------------------------ chunker
def test_sections_carry_the_heading_chain_and_front_matter_is_stripped():
    cs = chunks_of(PAGE)
    assert [c.symbol for c in cs] == [
        "Базовые утверждения",
        "Доступные методы",
        "Проверка типа значения",
        "Доступные методы",
    ]
    assert cs[2].region == ["Базовые утверждения", "Доступные методы", "Проверка типа значения"]
    assert cs[2].signature == "Базовые утверждения > Доступные методы > Проверка типа значения"
    assert cs[2].text.startswith(
        "Базовые утверждения > Доступные методы > Проверка типа значения\n\n### Проверка типа значения"
    )
    assert all("sidebar_position" not in c.text for c in cs)
    assert cs[0].start_line == 6  # line numbers of the file, front matter counted
    assert all(c.kind == "section" and c.is_docs and not c.is_metadata and not c.is_code for c in cs)
    assert cs[0].owner == "Базовые утверждения"


def test_fences_are_not_headings_and_admonitions_tables_stay_as_text():
    cs = chunks_of(PAGE)
    assert not any(c.symbol and "not a heading" in c.symbol for c in cs)
    typ = cs[2].text
    assert "# not a heading inside a fence" in typ and "КонецПроцедуры" in typ
    assert '!!! warning "MkDocs admonition"' in typ and "indented body" in typ
    assert ":::tip" in cs[0].text and "Docusaurus admonition text" in cs[0].text
    assert "| `ИмеетТип` | проверка типа |" in cs[1].text


def test_anchors_docusaurus_and_mkdocs_with_cyrillic_and_duplicates():
    cs = chunks_of(PAGE)
    assert [c.properties["anchor"] for c in cs] == [
        "базовые-утверждения",
        "доступные-методы",
        "проверка-типа-значения",
        "доступные-методы-1",
    ]
    assert len({c.id for c in cs}) == len(cs)  # same heading twice: two ids
    mk = chunks_of(PAGE, flavor="mkdocs")
    assert mk[3].properties["anchor"] == "доступные-методы_1"
    assert (
        slug("Отдельный MCP-сервер (команда `mcp`)", "mkdocs") == "отдельныи-mcp-сервер-команда-mcp"
    )  # NFKD drops the breve of й
    assert slug("Отдельный MCP-сервер (команда `mcp`)", "docusaurus") == "отдельный-mcp-сервер-команда-mcp"
    assert slug("Проверка наличия свойств/реквизитов") == "проверка-наличия-свойствреквизитов"
    assert slug("Custom {#my-id}") == "my-id"
    with pytest.raises(ValueError):
        slug("x", "hugo")


def test_long_sections_split_between_blocks_and_a_fence_is_never_cut():
    fence = "```bsl\n" + "\n".join(f"Строка{i} = {i};" for i in range(300)) + "\n```"
    paras = "\n\n".join(f"Абзац {i} " + "слово " * 60 for i in range(12))
    cs = chunks_of(f"# Заголовок\n\n{paras}\n\n{fence}\n\nПосле кода.\n")
    assert len(cs) > 2 and [c.part for c in cs] == list(range(1, len(cs) + 1))
    assert all(c.text.startswith("Заголовок\n\n") for c in cs)  # the heading path in every part
    holding = [c for c in cs if "Строка0 = 0;" in c.text]
    assert len(holding) == 1 and "Строка299 = 299;" in holding[0].text
    assert cs[0].id.endswith("::заголовок") and cs[1].id.endswith("::заголовок#2")
    # consecutive parts cover the section without overlap
    assert all(a.end_line < b.start_line for a, b in zip(cs, cs[1:], strict=False))


def test_language_and_names_channel_key():
    en = chunks_of("# Magic numbers (MagicNumber)\n\nText.\n", path="en/diagnostics/MagicNumber.md")
    ru = chunks_of("# Магические числа (MagicNumber)\n\nТекст.\n", path="diagnostics/MagicNumber.md")
    assert en[0].properties["lang"] == "en" and ru[0].properties["lang"] == "ru"
    assert docs_name(en[0]) == docs_name(ru[0]) == "MagicNumber"
    span = chunks_of("# X\n\n## `ФикцияОбязательныхПолей()`\n\nТекст.\n")
    assert docs_name(span[1]) == "ФикцияОбязательныхПолей"


def test_a_page_without_headings_is_one_section():
    cs = chunks_of("Просто текст.\n\nВторой абзац.\n", path="notes.md")
    assert len(cs) == 1 and cs[0].id == "notes.md::" and cs[0].symbol is None and cs[0].owner == "notes"


def test_unclosed_fence_and_huge_heading_are_handled_and_noted():
    cs = chunks_of("# A\n\ntext\n\n```bsl\n## inside the open fence\nКод();\n", path="open.md")
    assert [c.symbol for c in cs] == ["A"] and "## inside the open fence" in cs[0].text
    assert "line 5 is never closed" in cs[0].properties["notes"]
    assert "notes" not in chunks_of("# A\n\n```\nx\n```\n")[0].properties
    long = "Я" * 10_000
    cs = chunks_of(f"# {long}\n\nтекст\n", path="long.md")
    assert len(cs[0].symbol) == MAX_HEADING_CHARS and len(cs[0].properties["anchor"]) <= MAX_HEADING_CHARS
    assert "10000 characters long" in cs[0].properties["notes"]


def test_a_page_over_the_section_cap_is_cut_at_a_heading_with_a_note():
    fence = "```bsl\n" + "# не заголовок\n" * (2 * MAX_PAGE_HEADINGS) + "```\n\n"  # one block, no headings
    body = "".join(f"## Раздел {i}\n\nТекст {i}.\n\n" for i in range(MAX_PAGE_HEADINGS + 500))
    text = "# Страница\n\n" + fence + body
    cs = chunks_of(text, path="many.md")
    assert len(cs) == MAX_PAGE_HEADINGS  # the H1 and the first 999 H2: the fence's lines did not count
    assert cs[-1].symbol == f"Раздел {MAX_PAGE_HEADINGS - 2}"
    note = cs[0].properties["notes"]
    assert f"over {MAX_PAGE_HEADINGS} headings" in note and f"of {text.count(chr(10)) + 1} are indexed" in note
    lines = text.split("\n")
    assert lines[page_cut(lines)] == f"## Раздел {MAX_PAGE_HEADINGS - 1}"
    paragraphs = "# Т\n\n" + "абзац\n\n" * (MAX_PAGE_BLOCKS + 10)  # many blocks, one heading
    assert page_cut(paragraphs.split("\n")) == 2 * MAX_PAGE_BLOCKS  # the block past the cap (the H1 is block 1)
    assert page_cut(PAGE.split("\n")) is None and "notes" not in chunks_of(PAGE)[0].properties


# ------------------------------------------------------------------------------ roots through the engine
def _docs_tree(root: Path) -> Path:
    d = root / "docs"
    (d / "images").mkdir(parents=True)
    (d / "page.md").write_text(PAGE, encoding="utf-8")
    (d / "bank.md").write_text(
        "# Обмен с банком\n\nЗагрузка: `ОбменСБанкомСлужебный.ЗагрузитьВыпискуБанка` читает файл.\n\n"
        "## Разбор\n\nСтроки разбирает `РазобратьСтрокиВыписки`, а `НеизвестныйМетод` не существует.\n",
        encoding="utf-8",
    )
    (d / "images" / "shot.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    return d


@pytest.fixture
def code_and_docs(tmp_path) -> Path:
    root = tmp_path / "export"
    shutil.copytree(SAMPLE, root)
    _docs_tree(root)
    return root


def _engine(root: Path, tmp_path: Path, docs=()) -> Engine:
    cfg = EngineConfig(docs=normalize_docs_dirs(root, docs))
    eng = Engine.open(root, index_dir=tmp_path / "idx", config=cfg)
    eng.refresh()
    return eng


def test_a_code_root_names_docs_folders(code_and_docs, tmp_path):
    plain = _engine(code_and_docs, tmp_path / "a")
    assert not any(c.is_docs for c in plain.chunks.values())  # README.md of the sample is not docs by itself
    eng = _engine(code_and_docs, tmp_path / "b", docs=["docs"])
    docs = [c for c in eng.chunks.values() if c.is_docs]
    assert {c.path for c in docs} == {"docs/page.md", "docs/bank.md"}
    assert ("docs/images/shot.png", "not_markdown") in {(k.path, k.reason) for k in eng.skipped}
    res = eng.search("проверка типа значения", mode="lexical", filters=Filters(scope="docs"))
    assert res.hits and all(h.kind == "section" for h in res.hits)
    assert res.hits[0].anchor == "проверка-типа-значения" and res.hits[0].signature.endswith("> Проверка типа значения")
    code = eng.search("ЗагрузитьВыпискуБанка", mode="lexical", filters=Filters(scope="code"))
    assert code.hits and all(h.kind in ("procedure", "function", "module") for h in code.hits)
    meta = eng.search("Контрагенты", mode="lexical", filters=Filters(scope="metadata"))
    assert meta.hits and not any(h.kind == "section" for h in meta.hits)
    assert eng.stats()["metadata_chunks"] == plain.stats()["metadata_chunks"]


def test_docs_folder_outside_the_root_is_refused(code_and_docs, tmp_path):
    with pytest.raises(ValueError, match="outside the root"):
        normalize_docs_dirs(code_and_docs, [str(tmp_path)])
    with pytest.raises(ValueError, match="not a folder"):
        normalize_docs_dirs(code_and_docs, ["no-such-dir"])
    assert normalize_docs_dirs(code_and_docs, [str(code_and_docs / "docs"), "docs/"]) == ["docs"]


def test_a_folder_of_markdown_is_a_docs_root_and_updates_by_hash(tmp_path):
    root = tmp_path / "site"
    _docs_tree(root)
    eng = _engine(root, tmp_path)
    assert eng.format == "unknown" and {c.path for c in eng.chunks.values()} == {"docs/page.md", "docs/bank.md"}
    assert eng.stats()["format"] == "docs"  # status says what the root is, not "unknown"
    before = {c.id: c for c in eng.chunks.values()}
    slots = dict(eng.store.slot_of)
    (root / "docs" / "bank.md").write_text("# Обмен с банком\n\nНовый текст про выгрузку платежей.\n", encoding="utf-8")
    rep = eng.update_paths(["docs/bank.md"])
    assert rep.files_changed == 1
    assert eng.search("выгрузку платежей", mode="lexical").hits[0].path == "docs/bank.md"
    # the untouched page kept: same chunks in the same slots (not re-indexed)
    kept = [i for i, c in before.items() if c.path == "docs/page.md"]
    assert kept and all(eng.chunks[i] == before[i] and eng.store.slot_of[i] == slots[i] for i in kept)


def test_bad_pages_are_skipped_or_read_with_a_logged_reason(tmp_path, caplog):
    caplog.set_level(logging.WARNING)
    root = tmp_path / "site"
    _docs_tree(root)
    d = root / "docs"
    with open(d / "huge.md", "wb") as fh:  # 20 MB
        fh.write(b"# Big\n\n" + b"text " * (4 * 2**20))
    (d / "binary.md").write_bytes(b"\x7fELF\x02\x01\x01\x00\x00\x00" + bytes(range(256)) * 10)
    (d / "broken.md").write_bytes(
        "# Сломанный UTF-8\n\nтекст ".encode("utf-8") + b"\xd0\x28 " + "дальше текст\n".encode("utf-8")
    )
    (d / "win.md").write_bytes("# Страница в Windows-1251\n\nтекст про выгрузку\n".encode("cp1251"))
    (d / "heading.md").write_text("# " + "Заголовок" * 1200 + "\n\nтекст\n", encoding="utf-8")
    (d / "open.md").write_text("# Открытый блок\n\n```bsl\n# Внутри\nКод();\n", encoding="utf-8")
    (d / "many.md").write_text(
        "".join(f"# Раздел {i}\n\nтекст\n\n" for i in range(3 * MAX_PAGE_HEADINGS)), encoding="utf-8"
    )
    eng = _engine(root, tmp_path)
    skips = {k.path: k.reason for k in eng.skipped}
    assert skips["docs/huge.md"] == "too_large" and (d / "huge.md").stat().st_size > DOCS_MAX_BYTES
    assert skips["docs/binary.md"] == "binary"
    broken = eng.file_chunks("docs/broken.md")
    assert broken and "\ufffd" in broken[0].text and "дальше текст" in broken[0].text
    assert any("docs/broken.md" in r.getMessage() and "invalid UTF-8" in r.getMessage() for r in caplog.records)
    assert eng.file_chunks("docs/win.md")[0].symbol == "Страница в Windows-1251"  # read as cp1251, said so
    assert any("docs/win.md" in r.getMessage() and "read as cp1251" in r.getMessage() for r in caplog.records)
    assert any("docs/heading.md" in r.getMessage() and "characters long" in r.getMessage() for r in caplog.records)
    assert eng.file_chunks("docs/heading.md")[0].symbol.startswith("Заголовок")
    assert [c.symbol for c in eng.file_chunks("docs/open.md")] == ["Открытый блок"]
    assert any("docs/open.md" in r.getMessage() and "never closed" in r.getMessage() for r in caplog.records)
    assert len(eng.file_chunks("docs/many.md")) == MAX_PAGE_HEADINGS
    assert any(
        "docs/many.md" in r.getMessage() and f"over {MAX_PAGE_HEADINGS} headings" in r.getMessage()
        for r in caplog.records
    )
    assert eng.search("проверка типа значения", mode="lexical").hits  # the rest is served


# ------------------------------------------------------------------------------ links
def test_code_identifiers_in_prose_spans_and_calls():
    ids = code_identifiers("Вызов `ЮТест.ОжидаетЧто()` и ЗначениеРеквизитаОбъекта(Ссылка); слово `обычное`; `ИмеетТип`")
    assert ids[0] == "ЮТест.ОжидаетЧто" and "ОжидаетЧто" not in ids
    assert "ЗначениеРеквизитаОбъекта" in ids and "ИмеетТип" in ids and "обычное" not in ids


def test_docs_sections_link_to_the_methods_they_name(code_and_docs, tmp_path):
    eng = _engine(code_and_docs, tmp_path, docs=["docs"])
    links = DocLinks(list(eng.chunks.values()))
    load = next(c for c in eng.chunks.values() if c.name == "ЗагрузитьВыпискуБанка" and c.kind == "function")
    parse = next(c for c in eng.chunks.values() if c.name == "РазобратьСтрокиВыписки")
    assert "docs/bank.md::обмен-с-банком" in links.mentions[load.id]
    assert "docs/page.md::базовые-утверждения" in links.mentions[load.id]  # a bare call in prose
    assert links.mentions[parse.id] == ["docs/bank.md::разбор"]
    assert not any("НеизвестныйМетод" in m for m in links.qualified.values())


def test_doc_links_from_the_store_read_only_docs_and_the_methods_they_name(code_and_docs, tmp_path, monkeypatch):
    eng = _engine(code_and_docs, tmp_path, docs=["docs"])
    full = DocLinks(list(eng.chunks.values()))
    read: list[int] = []
    get = eng.store.get
    monkeypatch.setattr(eng.store, "get", lambda slot: read.append(slot) or get(slot))
    links = DocLinks.from_store(eng.store, eng.names)
    seen = list(read)  # the slots from_store materialised (the asserts below read more)
    assert (links.mentions, links.resolved, links.qualified) == (full.mentions, full.resolved, full.qualified)
    assert links.mentions and (links.names_seen, links.names_resolved) == (full.names_seen, full.names_resolved)
    docs = {eng.store.slot_of[c.id] for c in eng.chunks.values() if c.is_docs}
    methods = [s for s in seen if s not in docs]
    assert docs <= set(seen) and methods  # every section, and some methods ...
    assert all(get(s).kind in ("procedure", "function") for s in methods)
    n_methods = sum(1 for c in eng.chunks.values() if c.kind in ("procedure", "function"))
    assert len(set(methods)) < n_methods / 4  # ... only those named in the docs, not the code
    assert DocLinks.from_store(_engine(code_and_docs, tmp_path / "plain").store, eng.names).mentions == {}


def test_read_document_returns_a_section_with_its_subsections_bounded(code_and_docs, tmp_path):
    eng = _engine(code_and_docs, tmp_path, docs=["docs"])
    secs = eng.file_chunks("docs/page.md")
    lines = (code_and_docs / "docs/page.md").read_text(encoding="utf-8").split("\n")
    d = read_document(secs, "docs/page.md", lines, "Доступные методы")
    assert d.link == "docs/page.md#доступные-методы" and "### Проверка типа значения" in d.text
    assert "Второй раздел" not in d.text and not d.truncated
    assert read_document(secs, "docs/page.md", lines, "проверка-типа-значения").heading == "Проверка типа значения"
    whole = read_document(secs, "docs/page.md", lines, None)
    assert whole.heading is None and whole.end_line == whole.total_lines and "## Доступные методы" in whole.headings
    with pytest.raises(LookupError, match="its headings"):
        read_document(secs, "docs/page.md", lines, "Нет такого")
    big = ["# Big", ""] + ["строка " * 20] * 400
    bsecs = chunk_markdown("\n".join(big), path="big.md")
    cut = read_document(bsecs, "big.md", big, None)
    assert cut.truncated and "read_module" in cut.note and len(cut.text) <= 20_000


def test_the_cross_language_rule_looks_at_the_pages_languages_not_the_headings_script(tmp_path):
    import daemon.ranking.docs as D

    ru = tmp_path / "ru"
    _docs_tree(ru)  # Russian pages only
    both = tmp_path / "both"
    _docs_tree(both)
    (both / "en").mkdir()
    for name in ("page.md", "bank.md", "more.md"):  # a translated site: English pages under en/
        (both / "en" / name).write_text("# Bank exchange\n\n## Parsing\n\nThe statement is parsed.\n", encoding="utf-8")
    e_ru, e_both = _engine(ru, tmp_path / "i1"), _engine(both, tmp_path / "i2")
    assert D.docs_language_shares(e_ru.store) == {"ru": 1.0}
    assert 0.4 < D.docs_language_shares(e_both.store)["en"] < 0.7
    off = RankingParams()  # the rule is off (1.0) ...
    w = {"names": 4.0, "bm25": 1.0, "dense": off.docs_dense_weight}
    assert D.docs_weights(w, "how do I parse a bank statement", e_ru.store, off) == w
    on = replace(off, docs_cross_script_weight=0.0)  # ... and when on:
    assert D.docs_weights(w, "how do I parse a bank statement", e_ru.store, on) == {
        "names": 0.0,
        "bm25": 0.0,
        "dense": on.docs_dense_weight,
    }
    assert D.docs_weights(w, "how do I parse a bank statement", e_both.store, on) == w  # English pages exist
    assert D.docs_weights(w, "как разобрать выписку", e_both.store, on) == w  # a Russian question, a bilingual site
    assert D.docs_weights(w, "параметр ignoredAuthors", e_ru.store, on) == w  # Russian with a Latin key
    assert D.docs_weights({"bm25": 1.0}, "how do I parse", e_ru.store, on) == {"bm25": 1.0}  # no dense: BM25 stays


def test_the_docs_query_is_translated_only_for_a_question_in_the_other_language(tmp_path):
    import daemon.ranking.docs as D

    ru = tmp_path / "ru"
    _docs_tree(ru)  # Russian pages only
    both = tmp_path / "both"
    _docs_tree(both)
    (both / "en").mkdir()
    for name in ("page.md", "bank.md", "more.md"):
        (both / "en" / name).write_text("# Bank exchange\n\n## Parsing\n\nThe statement is parsed.\n", encoding="utf-8")
    e_ru, e_both = _engine(ru, tmp_path / "i1"), _engine(both, tmp_path / "i2")
    p = RankingParams()
    q = "load a statement file from the bank"
    toks = ["load", "statement", "file", "from", "the", "bank"]
    assert D.docs_foreign_target(q, e_ru.store, p) == "ru" and D.docs_foreign_target(q, e_both.store, p) is None
    assert D.docs_foreign_target("загрузить выписку", e_ru.store, p) is None
    got, w = D.docs_query_tokens(toks, q, e_ru.store, p)
    assert {"банк", "файл"} <= set(got) and "bank" not in got and w == p.translated_lexical_weight
    assert D.docs_query_tokens(toks, q, e_both.store, p) == (toks, 1.0)  # English pages exist: untouched
    assert D.docs_query_tokens(["выписк"], "загрузить выписку", e_ru.store, p) == (["выписк"], 1.0)
    assert D.docs_query_tokens(["zzzqqq"], "zzzqqq", e_ru.store, p) == (["zzzqqq"], 1.0)  # nothing translates
    on = e_ru.search(q, mode="lexical", filters=Filters(scope="docs"))
    assert on.hits and on.hits[0].path == "docs/bank.md"
    # with no vote for the translation the English words match nothing in Russian pages
    e_ru.params = replace(p, translated_lexical_weight=0.0)
    off = e_ru.search(q, mode="lexical", filters=Filters(scope="docs"))
    assert "docs/bank.md" not in [h.path for h in off.hits]
    both_hits = e_both.search(q, mode="lexical", filters=Filters(scope="docs"))
    assert both_hits.hits and both_hits.hits[0].path.startswith("en/")  # a bilingual site: the English pages answer


def test_a_windows_1251_page_of_mostly_latin_text_is_read_as_cp1251_not_as_broken_utf8(tmp_path, caplog):
    # a page saved in Windows-1251 whose Cyrillic is under 1 % of its bytes (English prose,
    # code listings) has no valid multi-byte UTF-8 at all: it must not be taken for broken
    # UTF-8 and lose its Russian words to U+FFFD
    caplog.set_level(logging.WARNING)
    root = tmp_path / "site"
    _docs_tree(root)
    d = root / "docs"
    text = (
        "# Mixed page\n\n"
        + "Mostly English prose about running the tests. " * 250
        + "\n\nРусское слово: Мокирование — «так».\n"
    )
    (d / "mixed.md").write_bytes(text.encode("cp1251"))
    (d / "dash.md").write_bytes("# Dashes\n\nan em dash \u2014 in plain text\n".encode("cp1251"))
    eng = _engine(root, tmp_path)
    body = "\n".join(c.text for c in eng.file_chunks("docs/mixed.md"))
    assert "\ufffd" not in body and "Русское слово: Мокирование — «так»." in body
    assert any("docs/mixed.md" in r.getMessage() and "read as cp1251" in r.getMessage() for r in caplog.records)
    assert "\u2014" in eng.file_chunks("docs/dash.md")[0].text  # one cp1251 byte in ASCII text: cp1251's em dash


def test_read_document_finds_a_cut_heading_as_written_and_never_echoes_a_huge_heading(tmp_path):
    long = "Оченьдлинныйзаголовок " * 460  # 10,120 characters: indexed cut to MAX_HEADING_CHARS
    page = ["# " + long, "", "текст под ним", "", "## Короткий", "", "ещё"]
    secs = chunk_markdown("\n".join(page), path="long.md")
    d = read_document(secs, "long.md", page, long)  # the heading as written in the page
    assert d.start_line == 1 and "текст под ним" in d.text and d.heading == long.strip()[:MAX_HEADING_CHARS]
    with pytest.raises(LookupError) as err:
        read_document(secs, "long.md", page, "H" * 1_000_000)
    msg = str(err.value)
    assert "its headings" in msg and "1000000 characters" in msg and len(msg) < 2_000


def test_words_the_lexicon_cannot_translate_keep_their_vote_in_a_translated_docs_query(tmp_path):
    # an English question over Russian pages names a product or an identifier the pages
    # write in Latin letters: the translation must not drop it (main before this fix:
    # "ADO RecordSet" lost docs-yaxunit's ADO.RecordSet page from the top 10)
    import daemon.ranking.docs as D

    ru = tmp_path / "ru"
    d = _docs_tree(ru)
    (d / "ado.md").write_text(
        "# Заглушка ADO.RecordSet\n\nРеализация свойств и методов `ADO.RecordSet` для тестов.\n", encoding="utf-8"
    )
    for i in range(6):  # pages about records and settings: what "record set" translates to
        (d / f"rec{i}.md").write_text(
            f"# Запись {i}\n\nЗапись и установка настроек записи, набор записей номер {i}.\n", encoding="utf-8"
        )
    eng = _engine(ru, tmp_path / "i")
    q = "ADO RecordSet"
    got, w = D.docs_query_tokens(["ado", "recordset", "record", "set"], q, eng.store, RankingParams())
    assert w > 1 and "ado" in got and "recordset" in got  # kept beside the translations of record/set
    res = eng.search(q, mode="lexical", filters=Filters(scope="docs"))
    assert res.hits and res.hits[0].path == "docs/ado.md"


def test_the_daemon_logs_images_of_a_docs_folder_at_info_and_bad_pages_at_warning(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="daemon")
    root = tmp_path / "site"
    d = _docs_tree(root)
    (d / "binary.md").write_bytes(b"\x7fELF\x00\x01" * 40)
    eng = Engine.open(root, index_dir=tmp_path / "idx", config=EngineConfig())
    eng.log_skips = True  # as the daemon sets it
    eng.refresh()
    lines = {r.getMessage(): r.levelno for r in caplog.records if r.getMessage().startswith("skipped ")}
    image = next(m for m in lines if "docs/images/shot.png" in m and "not_markdown" in m)
    binary = next(m for m in lines if "docs/binary.md" in m and "binary" in m)
    assert lines[image] == logging.INFO and lines[binary] == logging.WARNING
