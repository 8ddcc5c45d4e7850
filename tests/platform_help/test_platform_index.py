"""The platform help index (``daemon/index/platform_index.py``) and its ranking
(``daemon/ranking/platform.py``) on the bundled data set: built in memory, saved, loaded
memory-mapped; the bilingual names channel; exact names first; scope ``all``'s fusion."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from daemon.contract import Hit
from daemon.index.platform_index import (
    BilingualNames,
    PlatformIndex,
    PlatformIndexError,
    embed_text,
    entry_boost,
    index_key,
    platform_cache_dir,
)
from daemon.ranking.platform import PlatformRanker, first_sentence, fuse_all

GOLD = Path(__file__).resolve().parents[1] / "gold" / "platform_dev.jsonl"


@pytest.fixture(scope="module")
def bundled(globals_result, tmp_path_factory):
    """The bundled data set's index, saved and loaded back (as a daemon has it)."""
    ix = PlatformIndex.build(
        globals_result.entries,
        key=index_key("bundled", [("bslGlobals.json", "x")], stem=True, k1=1.2, b=0.3),
        source="bundled",
        version="",
        label="bundled data set (no version)",
        path="platform/bundled/bslGlobals.json",
    )
    folder = ix.save_atomically(tmp_path_factory.mktemp("platform"))
    return PlatformIndex.load(folder)


def _top(ix, query: str, k: int = 5, mode: str = "lexical") -> list[str]:
    r = PlatformRanker(ix)
    hits, _, _ = r.rank(r.cues(query, translate=False), mode, k)
    return [f"{h.kind.removeprefix('platform_')}:{h.symbol}" for h in hits]


def test_every_entry_is_a_chunk_and_reads_back(bundled, globals_result):
    assert len(bundled) == len(globals_result.entries) == 4880
    assert bundled.loaded_from_disk and bundled.meta.kinds["enum_value"] == 3079
    first, last = globals_result.entries[0], globals_result.entries[-1]
    assert bundled.entry(0) == first and bundled.entry(len(bundled) - 1) == last
    c = bundled.chunk(0)
    assert c.is_platform and not c.is_metadata and not c.is_code
    assert c.path == "platform/bundled/bslGlobals.json" and c.id == f"{c.path}::{first.key}"
    with pytest.raises(IndexError):
        bundled.entry(len(bundled))


@pytest.mark.parametrize(
    ("query", "first"),
    [
        ("СтрНайти", "function:СтрНайти"),
        ("StrFind", "function:СтрНайти"),
        ("стрнайти", "function:СтрНайти"),
        ("ТаблицаЗначений.Свернуть", "method:ТаблицаЗначений.Свернуть"),
        ("ValueTable.GroupBy", "method:ТаблицаЗначений.Свернуть"),
        ("ValueTable.Свернуть", "method:ТаблицаЗначений.Свернуть"),
        ("КодировкаТекста.UTF8", "enum_value:КодировкаТекста.UTF8"),
        ("ТаблицаЗначений", "type:ТаблицаЗначений"),
        ("Найти", "function:Найти"),
        ("Отчёты", "global_property:Отчеты"),
        ("СтрЧВх", "function:СтрЧислоВхождений"),
    ],
)
def test_a_name_gives_that_entry_first(bundled, query, first):
    assert _top(bundled, query)[0] == first


def test_same_names_order_by_kind_members_and_constructors_after(bundled):
    top = _top(bundled, "Найти", 5)
    assert top[0] == "function:Найти" and all(t.startswith("method:") and t.endswith(".Найти") for t in top[1:])
    assert _top(bundled, "ТаблицаЗначений", 2) == ["type:ТаблицаЗначений", "constructor:Новый ТаблицаЗначений"]
    assert _top(bundled, "КодировкаТекста", 1) == ["enum:КодировкаТекста"]


def test_names_channel_rows_are_slots_once(bundled):
    res = bundled.names.search("Найти", 50, key_of=bundled.store.ids)
    slots = [s for s, _, _ in res]
    assert len(slots) == len(set(slots)) and all(0 <= s < len(bundled) for s in slots)
    allow = bundled.kind_mask(["method"])
    only = bundled.names.search("Найти", 10, allow=allow, key_of=bundled.store.ids)
    assert only and all(bundled.entry(s).kind == "method" for s, _, _ in only)


def test_every_symbol_question_of_the_dev_set_has_its_answer_first(bundled):
    """The names target on the dev gold set: an exact name, English name or Тип.Метод first
    (every symbol question whose grade-3 answer the name spells out)."""
    rows = [json.loads(x) for x in GOLD.read_text(encoding="utf-8").splitlines() if x.strip()]
    exact = [r for r in rows if r["intent"] == "symbol" and r.get("form", "").startswith(("exact", "qualified"))]
    assert len(exact) >= 15
    for r in exact:
        first = _top(bundled, r["query"], 1)[0]
        best = {f"{x['kind']}:{x['name']}" for x in r["relevant"] if x["grade"] == 3}
        assert first in best, (r["query"], first, best)


def test_a_question_gets_bm25_answers_and_an_english_one_its_translation(bundled):
    r = PlatformRanker(bundled)
    hits, _, total = r.rank(r.cues("как найти подстроку в строке", translate=False), "lexical", 10)
    assert total > 10 and "СтрНайти" in [h.symbol for h in hits[:5]]
    assert all(h.snippet and h.kind.startswith("platform_") for h in hits)
    cues = r.cues("how to split a string by a delimiter", translate=False)
    assert cues.cross_script
    lists, weights, _ = r.channels(cues, "lexical", None, None)
    assert "bm25_tr" in lists and weights["bm25_tr"] > 0
    hits, _, _ = r.rank(cues, "lexical", 10)
    assert "СтрРазделить" in [h.symbol for h in hits]


def test_saved_index_is_checked_on_load(bundled, tmp_path):
    import shutil

    copy = tmp_path / bundled.meta.key
    shutil.copytree(bundled.folder, copy)
    (copy / "entries.bin").write_bytes(b"\x00" * 10)
    with pytest.raises(PlatformIndexError):
        PlatformIndex.load(copy)
    other = tmp_path / "bundled-000000000000000000000000"
    shutil.copytree(bundled.folder, other)
    with pytest.raises(PlatformIndexError):  # a folder whose name is not its key
        PlatformIndex.load(other)


def test_keys_follow_content_and_settings():
    a = index_key("bundled", [("bslGlobals.json", "aa")], stem=True, k1=1.2, b=0.3)
    assert a == index_key("bundled", [("bslGlobals.json", "aa")], stem=True, k1=1.2, b=0.3)
    assert a != index_key("bundled", [("bslGlobals.json", "ab")], stem=True, k1=1.2, b=0.3)
    assert a != index_key("bundled", [("bslGlobals.json", "aa")], stem=False, k1=1.2, b=0.3)
    assert a.startswith("bundled-")


def test_cache_dir_from_the_environment(tmp_path):
    assert platform_cache_dir({"BSL_LENS_PLATFORM_CACHE": str(tmp_path)}) == tmp_path
    assert platform_cache_dir({}).name == "platform"


def test_boosts_and_embedded_text(globals_result):
    by = {e.key: e for e in globals_result.entries}
    f, m, c = by["function:Найти"], by["method:Массив.Найти"], by["constructor:Новый ТаблицаЗначений"]
    assert entry_boost(f) > entry_boost(m) > entry_boost(c)
    t = embed_text(by["function:СтрНайти"])
    assert t.startswith("СтрНайти (StrFind). функция глобального контекста") and len(t) <= 300


def test_bilingual_rows_skip_an_english_name_equal_to_the_russian(globals_result):
    names = BilingualNames()
    e = next(e for e in globals_result.entries if e.name == e.name_en)
    names.add(0, e)
    assert len(names) == 1 and names.search(e.name, 3)[0][0] == 0


def test_first_sentence():
    assert first_sentence("Ищет подстроку. Возвращает позицию.") == "Ищет подстроку."
    assert len(first_sentence("слово " * 100)) == 200


def _hit(i: str, kind: str = "function", match: str = "") -> Hit:
    return Hit(id=i, path="p", symbol=i, kind=kind, name=i, owner="", start_line=1, end_line=1, score=0, match=match)


def test_scope_all_puts_the_platform_entry_a_name_names_first_then_code_names():
    code = [_hit("a", match="exact"), _hit("b"), _hit("c")]
    plat = [_hit("P", "platform_function", "exact"), _hit("Q", "platform_method")]
    hits, total = fuse_all(code, plat, 4)
    assert [h.id for h in hits] == ["P", "a", "Q", "b"] and total == 5  # b and Q tie: by id
    hits, _ = fuse_all([_hit("b"), _hit("c")], [_hit("Q", "platform_method")], 3)
    assert [h.id for h in hits] == ["Q", "b", "c"]  # a question: plain RRF, one vote each (ties by id)
    assert all(h.score > 0 for h in hits)


def test_an_entrys_qualified_name_gives_it_first(bundled):
    """The names target on the data set itself (questions nobody wrote): every fourth entry's
    qualified Russian and English name (``Тип.Метод``, ``Type.Method``, a global name) puts that
    entry first (all 9,682 names do: docs/platform-help.md, "Quality")."""
    from daemon.index.names_words import is_identifier_query

    r = PlatformRanker(bundled)
    asked = misses = 0
    for slot in range(0, len(bundled), 4):
        e = bundled.entry(slot)
        for q in (e.qualified, e.qualified_en):
            if q and is_identifier_query(q):
                asked += 1
                hits, _, _ = r.rank(r.cues(q, translate=False), "lexical", 1, snippets=False)
                misses += not hits or hits[0].symbol != e.qualified
    assert asked > 2000 and misses == 0
