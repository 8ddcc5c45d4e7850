"""The reference graph (daemon.index.refgraph) on a small hand-written export: resolution of every kind,
the honesty counts, callees and positions, a bounded call graph over cycles, and the property that
any sequence of per-file updates ends equal to a build from scratch (saved bytes included)."""

from __future__ import annotations

import random

import pytest

from daemon.index.refgraph import RefGraph
from daemon.sources.bindings import descriptor_references, form_references
from daemon.sources.references import module_references

COMMON = "CommonModules/Общий/Ext/Module.bsl"
GLOBAL = "CommonModules/Глобальный/Ext/Module.bsl"
GLOBAL_XML = "CommonModules/Глобальный.xml"
MANAGER = "Catalogs/Валюты/Ext/ManagerModule.bsl"
OBJECT = "DataProcessors/Загрузка/Ext/ObjectModule.bsl"
FORM = "Catalogs/Валюты/Forms/ФормаЭлемента/Ext/Form/Module.bsl"
LAYOUT = "Catalogs/Валюты/Forms/ФормаЭлемента/Ext/Form.xml"
SUBSCRIPTION = "EventSubscriptions/П.xml"
BASE = "base/src/Documents/Д/ObjectModule.bsl"
EXT = "ext/src/Documents/Д/ObjectModule.bsl"

MD = 'xmlns="http://v8.1c.ru/8.3/MDClasses"'


def common_text(export_main: bool = True, hidden: bool = True, extra: str = "") -> str:
    return f"""Процедура Экспортная() {"Экспорт" if export_main else ""}
КонецПроцедуры

{"Процедура Скрытая()" + chr(10) + "КонецПроцедуры" if hidden else ""}

Процедура Рекурсия(Н) Экспорт
	Рекурсия(Н - 1);
КонецПроцедуры

Процедура Пинг() Экспорт
	Понг();
КонецПроцедуры

Процедура Понг() Экспорт
	Пинг();
	Экспортная();
КонецПроцедуры
{extra}
"""


FORM_TEXT = """&НаКлиенте
Процедура ПриОткрытии(Отказ)
	Общий.Экспортная();
	Общий.Скрытая();
	Общий.НетТакого();
	ГлобальнаяФункция();
	Справочники.Валюты.Загрузить();
	Catalogs.Валюты.Загрузить();
	Неизвестный.Метод();
	Оповещение = Новый ОписаниеОповещения("ПослеВыбора", ЭтотОбъект);
	Выполнить(Алгоритм);
	ПослеВыбора(1, 2);
	Экспортная();
	ДлительныеОперации.ВыполнитьВФоне("Обработка.Загрузка.МодульОбъекта.Выполнить", П, П2);
	ДлительныеОперации.ВыполнитьФункцию(П, "Справочники.Валюты.Загрузить");
КонецПроцедуры

&НаКлиенте
Процедура ПослеВыбора(Результат, Параметры) Экспорт
	ЭтотОбъект.ПриОткрытии(Ложь);
КонецПроцедуры
"""


def layout(handler: str = "ПриОткрытии") -> bytes:
    return f"""<Form xmlns="http://v8.1c.ru/8.3/xcf/logform"><Events>
<Event name="OnOpen">{handler}</Event></Events></Form>""".encode()


def global_xml(flag: bool) -> bytes:
    props = f"<Properties><Global>{str(flag).lower()}</Global></Properties>"
    return f"<MetaDataObject {MD}><CommonModule>{props}</CommonModule></MetaDataObject>".encode()


def subscription_xml(handler: str = "CommonModule.Общий.Экспортная") -> bytes:
    return f"""<MetaDataObject {MD}><EventSubscription><Properties><Event>BeforeWrite</Event>
<Handler>{handler}</Handler></Properties></EventSubscription></MetaDataObject>""".encode()


def bsl(path: str, text: str, owner: str, kind: str, extension: bool = False):
    return module_references(text, path=path, owner=owner, module_kind=kind, extension=extension)


def record(path: str, variant: int):
    """Variant ``variant`` of the file at ``path`` (0 is the base export)."""
    if path == COMMON:
        return bsl(
            path,
            common_text(
                export_main=variant != 1,
                hidden=variant != 2,
                extra="Процедура Новая() Экспорт\nКонецПроцедуры" if variant == 3 else "",
            ),
            "ОбщийМодуль.Общий",
            "common",
        )
    if path == GLOBAL:
        text = "Процедура ГлобальнаяФункция() {}\nКонецПроцедуры\n".format("Экспорт" if variant != 1 else "")
        if variant == 2:
            text += "Процедура Экспортная() Экспорт\nКонецПроцедуры\n"
        return bsl(path, text, "ОбщийМодуль.Глобальный", "common")
    if path == GLOBAL_XML:
        return descriptor_references(
            global_xml(variant != 1), path=path, owner="ОбщийМодуль.Глобальный", object_type="ОбщийМодуль"
        )
    if path == MANAGER:
        text = "Функция Загрузить() {}\nКонецФункции\n\n"
        text += "Процедура ОбработкаПолученияДанныхВыбора(Д, П, С)\nКонецПроцедуры\n"
        return bsl(path, text.format("Экспорт" if variant != 1 else ""), "Справочник.Валюты", "manager")
    if path == OBJECT:
        return bsl(
            path,
            "Процедура Выполнить() Экспорт\nКонецПроцедуры\n" if variant != 1 else "",
            "Обработка.Загрузка",
            "object",
        )
    if path == FORM:
        text = FORM_TEXT if variant == 0 else FORM_TEXT.replace("ПослеВыбора(Результат", "ПослеВыбораНовое(Результат")
        return bsl(path, text, "Справочник.Валюты.Форма.ФормаЭлемента", "form")
    if path == LAYOUT:
        return form_references(layout("ПриОткрытии" if variant == 0 else "ПослеВыбора"), path=path, fmt="designer")
    if path == SUBSCRIPTION:
        h = "CommonModule.Общий.Экспортная" if variant == 0 else "CommonModule.Общий.Пинг"
        return descriptor_references(
            subscription_xml(h), path=path, owner="ПодпискаНаСобытие.П", object_type="ПодпискаНаСобытие"
        )
    if path == BASE:
        text = (
            "Процедура ОбработкаПроведения(Отказ, Режим)\nКонецПроцедуры\n"
            if variant == 0
            else "Процедура Другая()\nКонецПроцедуры\n"
        )
        return bsl(path, text, "Документ.Д", "object")
    if path == EXT:
        text = """&Вместо("ОбработкаПроведения")
Процедура Расш_ОбработкаПроведения(Отказ, Режим)
	ПродолжитьВызов(Отказ, Режим);
КонецПроцедуры
"""
        return bsl(
            path, text if variant == 0 else text.replace("&Вместо", "&После"), "Документ.Д", "object", extension=True
        )
    raise AssertionError(path)


PATHS = [COMMON, GLOBAL, GLOBAL_XML, MANAGER, OBJECT, FORM, LAYOUT, SUBSCRIPTION, BASE, EXT]
VARIANTS = {
    COMMON: 4,
    GLOBAL: 3,
    GLOBAL_XML: 2,
    MANAGER: 2,
    OBJECT: 2,
    FORM: 2,
    LAYOUT: 2,
    SUBSCRIPTION: 2,
    BASE: 2,
    EXT: 2,
}


@pytest.fixture()
def graph() -> RefGraph:
    g = RefGraph()
    g.update(record(p, 0) for p in PATHS)
    return g


def resolved(g: RefGraph, path: str) -> dict[tuple[str, str], tuple]:
    """(kind, callee) -> (target, reason) of every site of ``path`` (the first of a repeated pair)."""
    rec = g.file(path)
    out: dict = {}
    for s, r in zip(rec.sites_list(), g.resolve_all(path), strict=True):
        out.setdefault((s.kind, s.callee), r)
    return out


# --------------------------------------------------------------------------- resolution


def test_resolution_of_every_kind(graph):
    r = resolved(graph, FORM)
    assert r[("member", "Общий.Экспортная")] == (f"{COMMON}::Экспортная", None)
    assert r[("member", "Общий.Скрытая")] == (None, "not_exported")
    assert r[("member", "Общий.НетТакого")] == (None, "no_such_method")
    assert r[("call", "ГлобальнаяФункция")] == (f"{GLOBAL}::ГлобальнаяФункция", None)
    assert r[("manager", "Справочники.Валюты.Загрузить")] == (f"{MANAGER}::Загрузить", None)
    assert r[("manager", "Catalogs.Валюты.Загрузить")] == (f"{MANAGER}::Загрузить", None)
    assert r[("member", "Неизвестный.Метод")] == (None, "unknown_variable_type")
    assert r[("notify", "ПослеВыбора")] == (f"{FORM}::ПослеВыбора", None)
    assert r[("dynamic", "Выполнить")] == (None, "dynamic")
    assert r[("call", "ПослеВыбора")] == (f"{FORM}::ПослеВыбора", None)
    assert r[("call", "Экспортная")] == (None, "no_such_method")  # Общий is not global
    assert r[("this", "ЭтотОбъект.ПриОткрытии")] == (f"{FORM}::ПриОткрытии", None)
    assert r[("long_operation", "Обработка.Загрузка.МодульОбъекта.Выполнить")] == (f"{OBJECT}::Выполнить", None)
    assert r[("long_operation", "Справочники.Валюты.Загрузить")] == (f"{MANAGER}::Загрузить", None)
    assert resolved(graph, LAYOUT)[("form_event", "Справочник.Валюты.Форма.ФормаЭлемента.ПриОткрытии")] == (
        f"{FORM}::ПриОткрытии",
        None,
    )
    assert resolved(graph, SUBSCRIPTION)[("subscription", "CommonModule.Общий.Экспортная")] == (
        f"{COMMON}::Экспортная",
        None,
    )
    assert resolved(graph, MANAGER)[("platform_event", "ОбработкаПолученияДанныхВыбора")] == (
        f"{MANAGER}::ОбработкаПолученияДанныхВыбора",
        None,
    )
    ext = resolved(graph, EXT)
    assert ext[("extension", "ОбработкаПроведения")] == (f"{BASE}::ОбработкаПроведения", None)
    assert ext[("proceed", "ОбработкаПроведения")] == (f"{BASE}::ОбработкаПроведения", None)


def test_a_global_module_stops_being_global():
    g = RefGraph()
    g.update(record(p, 0) for p in PATHS)
    g.update([record(GLOBAL_XML, 1)])
    assert resolved(g, FORM)[("call", "ГлобальнаяФункция")] == (None, "no_such_method")
    g.update(removed=[GLOBAL_XML])
    assert resolved(g, FORM)[("call", "ГлобальнаяФункция")] == (None, "no_such_method")
    g.update([record(GLOBAL_XML, 0)])
    assert resolved(g, FORM)[("call", "ГлобальнаяФункция")] == (f"{GLOBAL}::ГлобальнаяФункция", None)


# --------------------------------------------------------------------------- answers


def test_references_with_counts_both_ways_for_extensions(graph):
    a = graph.references(f"{COMMON}::Экспортная", possible=True)
    kinds = sorted((r.kind, r.path) for r in a.references)
    assert kinds == [("call", COMMON), ("member", FORM), ("subscription", SUBSCRIPTION)]
    assert (a.counts.resolved, a.counts.string, a.counts.metadata) == (2, 0, 1)
    # the form's bare `Экспортная()` does not resolve: a possible caller, counted and listed
    assert a.counts.possible == 1 and [(r.path, r.reason) for r in a.possible] == [(FORM, "no_such_method")]
    assert graph.possible_count(f"{COMMON}::Экспортная") == 1  # the same count, for call_graph's start
    assert a.counts.dynamic == 1 and a.lower_bound
    base = graph.references(f"{BASE}::ОбработкаПроведения")
    assert sorted((r.kind, r.caller or "") for r in base.references) == [
        ("extension", f"{EXT}::Расш_ОбработкаПроведения"),
        ("platform_event", ""),  # the platform calls it by its name: Posting
        ("proceed", f"{EXT}::Расш_ОбработкаПроведения"),
    ]
    outgoing = graph.callees(f"{EXT}::Расш_ОбработкаПроведения")
    assert {(r.kind, r.target) for r in outgoing} == {
        ("extension", f"{BASE}::ОбработкаПроведения"),
        ("proceed", f"{BASE}::ОбработкаПроведения"),
    }


def test_limit_truncates_but_counts_everything(graph):
    a = graph.references(f"{MANAGER}::Загрузить", limit=1)
    assert a.total == 3 and len(a.references) == 1 and a.truncated
    assert (a.counts.resolved, a.counts.string) == (2, 1)


def test_callees_and_site_at(graph):
    out = graph.callees(f"{FORM}::ПриОткрытии")
    assert [r.callee for r in out][:3] == ["Общий.Экспортная", "Общий.Скрытая", "Общий.НетТакого"]
    first = out[0]
    hit = graph.site_at(FORM, first.line, first.col + 2)
    assert hit is not None and hit.target == f"{COMMON}::Экспортная"
    assert graph.site_at(FORM, 0, 0) is None


def test_methods_named(graph):
    assert graph.methods_named("Общий.Пинг") == [f"{COMMON}::Пинг"]
    assert graph.methods_named("загрузить") == [f"{MANAGER}::Загрузить"]
    assert graph.methods_named("Валюты.Загрузить") == [f"{MANAGER}::Загрузить"]
    assert f"{MANAGER}::Загрузить" in graph.methods_named("Справочник.Валюты")
    assert graph.methods_named("Общий") == graph.methods_named("ОбщийМодуль.Общий")
    assert f"{COMMON}::Пинг" in graph.methods_named("Общий")


# --------------------------------------------------------------------------- call graph


def test_call_graph_ends_on_recursion_and_mutual_calls(graph):
    cg = graph.call_graph(f"{COMMON}::Пинг", "callees", depth=10, fan_out=10)
    assert cg.nodes == {f"{COMMON}::Пинг": 0, f"{COMMON}::Понг": 1, f"{COMMON}::Экспортная": 2}
    assert cg.revisited == 1 and not cg.truncated
    rec = graph.call_graph(f"{COMMON}::Рекурсия", "callers", depth=10)
    assert rec.nodes == {f"{COMMON}::Рекурсия": 0} and rec.revisited == 1
    back = graph.call_graph(f"{COMMON}::Экспортная", "callers", depth=10, fan_out=10)
    assert back.nodes[f"{COMMON}::Понг"] == 1 and back.nodes[f"{COMMON}::Пинг"] == 2
    assert f"{SUBSCRIPTION}#subscription:BeforeWrite" in back.nodes


def test_call_graph_depth_and_fan_out_caps(graph):
    cg = graph.call_graph(f"{COMMON}::Экспортная", "callers", depth=1, fan_out=10)
    assert max(cg.nodes.values()) == 1 and cg.truncated  # Понг has callers beyond depth 1
    narrow = graph.call_graph(f"{COMMON}::Экспортная", "callers", depth=3, fan_out=1)
    assert narrow.truncated and len([e for e in narrow.edges if e.dest == f"{COMMON}::Экспортная"]) == 1
    with pytest.raises(ValueError):
        graph.call_graph(f"{COMMON}::Пинг", "sideways")


# --------------------------------------------------------------------------- upkeep


def scratch(current: dict) -> RefGraph:
    g = RefGraph()
    g.update(record(p, v) for p, v in current.items())
    return g


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_any_sequence_of_updates_equals_a_build_from_scratch(seed):
    rnd = random.Random(seed)
    current = {p: 0 for p in PATHS}
    g = scratch(current)
    assert g.state() == scratch(current).state()
    for step in range(40):
        changed, removed = [], []
        for p in rnd.sample(PATHS, rnd.randint(1, 3)):
            if p in current and rnd.random() < 0.25:
                del current[p]
                removed.append(p)
            else:
                current[p] = rnd.randrange(VARIANTS[p])
                changed.append(record(p, current[p]))
        g.update(changed, removed)
        fresh = scratch(current)
        assert g.state() == fresh.state(), f"seed {seed} step {step}"
        assert g.to_bytes() == fresh.to_bytes(), f"seed {seed} step {step}"  # the saved form too


def test_a_saved_graph_loads_equal_and_keeps_updating(graph):
    back = RefGraph.from_bytes(graph.to_bytes())
    assert back.state() == graph.state()
    graph.update([record(FORM, 1), record(GLOBAL_XML, 1)], removed=[EXT])
    back.update([record(FORM, 1), record(GLOBAL_XML, 1)], removed=[EXT])
    assert back.state() == graph.state()
    current = {p: 0 for p in PATHS if p != EXT}
    current.update({FORM: 1, GLOBAL_XML: 1})
    assert back.state() == scratch(current).state()
    with pytest.raises(ValueError):
        RefGraph.from_bytes(b"not a graph")


def test_deferred_updates_resolve_at_the_next_update():
    g = RefGraph()
    for p in PATHS:
        g.update([record(p, 0)], defer=True)
    # the other files are not resolved yet (the method's own module is always read directly)
    assert g.references(f"{COMMON}::Экспортная").counts.metadata == 0
    g.update([record(FORM, 1)], removed=[EXT], defer=True)
    assert g.update() > 0
    current = {p: 0 for p in PATHS if p != EXT}
    current[FORM] = 1
    assert g.state() == scratch(current).state()


def test_pending_files_resolve_in_steps_and_survive_a_save():
    g = RefGraph()
    for p in PATHS:
        g.update([record(p, 0)], defer=True)
    assert g.pending == len(PATHS)
    # saved and loaded while pending: the load keeps them pending, resolves nothing
    back = RefGraph.from_bytes(g.to_bytes())
    assert back.pending == len(PATHS)
    left = [back.resolve_pending(2)]
    while left[-1]:
        left.append(back.resolve_pending(2))
    assert left == sorted(left, reverse=True) and len(left) > 2
    # an update arriving mid-way defers too, and the steps finish it
    g.resolve_pending(3)
    g.update([record(FORM, 1)], defer=True)
    g.resolve_pending()
    current = {p: 0 for p in PATHS}
    assert back.state() == scratch(current).state()
    current[FORM] = 1
    assert g.state() == scratch(current).state()
