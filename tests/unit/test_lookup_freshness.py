"""The freshness of an indexed lookup answer (:meth:`Freshness.stamp_lookup`): what was pending
before the answer was computed counts with what is pending after, and the answer's own files are
named when they, or a folder above them, are stale."""

from __future__ import annotations

from daemon.contract import MethodInfo, ObjectDescription
from daemon.service.freshness import Freshness

MODULE = "CommonModules/М/Ext/Module.bsl"


def _fresh(known=()) -> Freshness:
    return Freshness(watcher=lambda: None, known_stale=lambda: list(known), watch_problem=lambda: None)


def _method() -> MethodInfo:
    return MethodInfo(
        id=f"{MODULE}::Метод", path=MODULE, name="Метод", kind="procedure", owner="ОбщийМодуль.М",
        module_kind="common", start_line=1, end_line=3, text="Процедура Метод()\nКонецПроцедуры",
    )  # fmt: skip


def test_a_change_applied_while_the_answer_was_computed_still_counts():
    f = _fresh()
    f.notice([MODULE], [], False)
    before = f.report()
    f.applied(full=False, paths=[MODULE], dirs=[], seq=f.mark())  # applied meanwhile: the answer may be older
    m = f.stamp_lookup(_method(), [MODULE], before)
    assert m.stale and m.stale_own == [MODULE] and m.stale_paths == [MODULE] and m.stale_count == 1
    again = f.stamp_lookup(_method(), [MODULE], f.report())
    assert not again.stale and again.stale_own == [] and again.stale_paths == [] and again.pending_count == 0


def test_own_files_under_a_stale_folder_or_known_stale_are_named_once():
    f = _fresh(known=["Catalogs/Т.xml"])
    f.notice(["Other/Module.bsl"], ["CommonModules/М"], False)
    d = ObjectDescription(owner="Справочник.Т", object_type="Справочник", name="Т", path="Catalogs/Т.xml")
    d = f.stamp_lookup(d, ["Catalogs/Т.xml", MODULE, MODULE, "Catalogs/Т/Ext/ObjectModule.bsl"], f.report())
    assert d.stale and d.stale_own == ["Catalogs/Т.xml", MODULE]
    assert d.stale_paths == ["CommonModules/М/", "Other/Module.bsl", "Catalogs/Т.xml"] and d.pending_count == 2
    m = f.stamp_lookup(_method(), [MODULE], f.report())
    assert m.stale_own == [MODULE]


def test_search_and_usages_answers_count_what_was_pending_before_them_too():
    from daemon.contract import Hit, References, SearchResult

    f = _fresh()
    f.notice([MODULE], [], False)
    before = f.report()
    f.applied(full=False, paths=[MODULE], dirs=[], seq=f.mark())  # applied while the answer was computed
    hit = Hit(
        id=f"{MODULE}::Метод", path=MODULE, symbol="Метод", kind="procedure", name="Метод", owner="ОбщийМодуль.М",
        start_line=1, end_line=3, score=1.0,
    )  # fmt: skip
    res = f.stamp(
        SearchResult(query="метод", mode="lexical", hits=[hit], total=1, dense_done=0, dense_total=0, took_ms=1.0),
        before,
    )
    assert res.stale and res.stale_paths == [MODULE] and res.hits[0].stale
    refs = f.stamp_usages(References(query="М.Метод"), before)
    assert refs.stale and refs.stale_paths == [MODULE]
    now = f.stamp(
        SearchResult(query="метод", mode="lexical", hits=[], total=0, dense_done=0, dense_total=0, took_ms=1.0),
        f.report(),
    )
    assert not now.stale and now.stale_paths == []
