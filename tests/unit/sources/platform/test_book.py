"""Whole help books built from the bundled data set read back into the same entries; bad pages
are named skips and the rest of the book is read."""

from __future__ import annotations

import re

import msgspec
import pytest

import hbk_fixtures as hf
from daemon.sources.platform.book import read_book
from daemon.sources.platform.entries import Entry, merge_languages
from daemon.sources.platform.hbk import Limits


def _same(got: list[Entry], want: list[Entry], source: str) -> None:
    """Every expected entry read back field for field, nothing more."""
    by_key = {e.key: e for e in got}
    assert len(by_key) == len(got), "duplicate keys"
    want_by_key = {e.key: msgspec.structs.replace(e, source=source) for e in want}
    assert sorted(by_key) == sorted(want_by_key)
    diffs = [
        (k, f)
        for k, w in want_by_key.items()
        for f, v in msgspec.to_builtins(w).items()
        if msgspec.to_builtins(by_key[k]).get(f) != v
    ]
    assert not diffs, diffs[:10]


def test_russian_book_of_the_whole_data_set(tmp_path, decorated, deadline):
    builder, want = hf.book_from_entries(decorated)
    path = tmp_path / "shcntx_ru.hbk"
    path.write_bytes(builder.build(chunk={"FileStorage": 64 << 10}))
    with deadline(120):
        res = read_book(path)
    assert res.error == "" and res.skips == []
    assert res.counts == {
        "global_property": 80,
        "function": 403,
        "type": 59,
        "constructor": 39,
        "property": 169,
        "method": 418,
        "enum": 600,
        "enum_value": 3079,
    }
    folders = [p for p in builder.pages if re.search(r"(catalog\d+|Global context)\.html$", p)]
    assert res.pages == len(builder.pages) - len(folders) == 4872  # a page per entry, one per constructor form
    _same(res.entries, want, "shcntx_ru.hbk")
    by_key = {e.key: e for e in res.entries}
    find = by_key["function:СтрНайти"]
    assert find.category == "Функции работы со значениями типа Строка" and find.since and find.availability
    assert [p.name for p in find.signatures[0].params][:2] == ["Строка", "ПодстрокаПоиска"]
    assert len(by_key["constructor:Новый HTTPЗапрос"].signatures) == 2


@pytest.mark.parametrize(("lang", "charset"), [("en", "utf-8"), ("ru", "windows-1251")])
def test_english_book_and_a_cp1251_book(tmp_path, sample_entries, lang, charset):
    builder, want = hf.book_from_entries(sample_entries, lang=lang, charset=charset)
    path = tmp_path / f"shcntx_{lang}.hbk"
    path.write_bytes(builder.build())
    res = read_book(path)
    assert res.error == "" and res.skips == []
    _same(res.entries, want, path.name)
    if lang == "en":  # names stay Russian first whichever language the page leads with
        e = {x.key: x for x in res.entries}["method:ТаблицаЗначений.Свернуть"]
        assert (e.name, e.name_en, e.owner_en) == ("Свернуть", "GroupBy", "ValueTable")


def test_language_book(tmp_path):
    entries = [
        Entry(kind="type", name="Строка", name_en="String", description="Строковый тип, Unicode.", since="8.0"),
        Entry(kind="type", name="Число", name_en="Number", description="Числовой тип.", since="8.0"),
        Entry(kind="keyword", name="Если", name_en="If", description="Условное выполнение.", since="8.0"),
        Entry(kind="keyword", name="Неопределено", name_en="Undefined", description="Значение не задано."),
    ]
    builder, want = hf.language_book(entries)
    path = tmp_path / "shlang_ru.hbk"
    path.write_bytes(builder.build())
    res = read_book(path)
    assert res.counts == {"type": 2, "keyword": 2}
    _same(res.entries, want, "shlang_ru.hbk")


def test_merge_of_the_two_books(tmp_path, sample_entries):
    ru_builder, _ = hf.book_from_entries(sample_entries)
    english = [msgspec.structs.replace(e, description=f"EN: {e.description}") for e in sample_entries]
    en_builder, _ = hf.book_from_entries(english, lang="en")
    (tmp_path / "shcntx_ru.hbk").write_bytes(ru_builder.build())
    (tmp_path / "shcntx_en.hbk").write_bytes(en_builder.build())
    ru = read_book(tmp_path / "shcntx_ru.hbk").entries
    en = read_book(tmp_path / "shcntx_en.hbk").entries
    merged = merge_languages(ru, en)
    assert len(merged) == len(ru)
    find = {e.key: e for e in merged}["function:СтрНайти"]
    assert find.description.startswith("Находит") and find.description_en.startswith("EN: Находит")
    only_en = Entry(kind="function", name="НоваяФункция", name_en="NewFunction", source="shcntx_en.hbk")
    assert merge_languages(ru, [*en, only_en])[-1] is only_en


def test_bad_pages_are_named_skips_and_the_rest_is_read(tmp_path, sample_entries):
    builder, want = hf.book_from_entries(sample_entries[:40])
    paths = [p for p in builder.pages if "/methods/catalog" in p and p.endswith(".html") and p.count("/") > 3]
    wrong_charset, bomb, gone = paths[0], paths[1], paths[2]
    builder.pages[wrong_charset] = (
        '<meta http-equiv="Content-Type" content="text/html; charset=utf-8">'
        '<p class="V8SH_heading">Кириллица (Cyrillic)</p>'.encode("cp1251")
    )
    builder.pages[bomb] = b"<html>" + b" " * (8 << 20) + b"</html>"
    del builder.pages[gone]
    path = tmp_path / "shcntx_ru.hbk"
    path.write_bytes(builder.build())
    res = read_book(path)
    reasons = {s.path.split(":", 1)[1]: s.reason for s in res.skips}
    assert reasons == {wrong_charset: "page_undecodable", bomb: "zip_bomb", gone: "page_missing"}
    skipped = {"/" + p for p in (wrong_charset, bomb, gone)}
    assert sorted(e.key for e in res.entries) == sorted(e.key for e in want if e.page not in skipped)
    undecodable = next(s for s in res.skips if s.reason == "page_undecodable")
    assert undecodable.path == f"shcntx_ru.hbk:{wrong_charset}" and "utf-8" in undecodable.detail


def test_nameless_page_falls_back_to_the_table_of_contents(tmp_path):
    b = hf.BookBuilder()
    gc = b.add(0, {"ru": "Глобальный контекст"}, "/objects/Global context.html", b"<html></html>")
    b.add(gc, {"ru": "СтрДлина", "en": "StrLen"}, "/objects/Global context/methods/a.html", b"<html>plain</html>")
    b.add(gc, {}, "/objects/Global context/methods/b.html", b"<html>plain</html>")
    path = tmp_path / "shcntx_ru.hbk"
    path.write_bytes(b.build())
    res = read_book(path)
    assert [(e.kind, e.name, e.name_en) for e in res.entries] == [("function", "СтрДлина", "StrLen")]
    assert [s.reason for s in res.skips] == ["page_unnamed"]


def test_unreadable_book_is_a_result_not_an_exception(tmp_path):
    path = tmp_path / "shcntx_ru.hbk"
    path.write_bytes(b"\x00" * 100)
    res = read_book(path)
    assert res.error.startswith("shcntx_ru.hbk: ") and res.entries == [] and res.skips[0].reason.startswith("hbk_")
    missing = read_book(tmp_path / "nowhere.hbk")
    assert missing.skips[0].reason == "hbk_unreadable"


def test_time_budget_stops_a_slow_book_with_a_named_skip(tmp_path, sample_entries):
    builder, _ = hf.book_from_entries(sample_entries)
    path = tmp_path / "shcntx_ru.hbk"
    path.write_bytes(builder.build())
    res = read_book(path, Limits(max_seconds=0.0))
    assert res.entries == [] and res.error == ""
    assert [s.reason for s in res.skips] == ["time_budget"] and "pages not read" in res.skips[0].detail
