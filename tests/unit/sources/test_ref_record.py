"""A file's references record is a pure function of its sites: the same sites added in another
order (tree-sitter hands the extraction its query captures in no fixed order) give the same
string table, the same packed sites and so the same saved bytes."""

from __future__ import annotations

import random

import tree_sitter

from daemon.sources import references
from daemon.sources.ref_record import KIND_NAMES, MODULE_CALLER, file_refs_from_sites
from daemon.sources.references import module_references

MODULE = """Процедура Первая() Экспорт
	Вторая(1);
	ОбщийМодуль.Метод(Вторая());
	Справочники.Валюты.Загрузить();
	Оповещение = Новый ОписаниеОповещения("ПослеВыбора", ЭтотОбъект);
	ДобавитьОбработчик Источник.Событие, Обработчик;
	Выполнить("Вторая()");
	ЗапуститьФоновоеЗадание("ОбщийМодуль.Фоновый");
КонецПроцедуры

Функция Вторая(А = 0)
	Возврат Первая() + Модуль.Третья(А) + Вторая();
КонецФункции
"""


def _record(order):
    """The module's record with each capture list put in ``order`` (a function of the list)."""

    saved = tree_sitter.QueryCursor

    class Cursor:
        def __init__(self, query):
            self.cursor = saved(query)

        def captures(self, node):
            return {k: order(v) for k, v in self.cursor.captures(node).items()}

    references.tree_sitter.QueryCursor = Cursor
    try:
        return module_references(MODULE, path="CommonModules/М/Ext/Module.bsl", owner="ОбщийМодуль.М")
    finally:
        references.tree_sitter.QueryCursor = saved


def test_the_capture_order_does_not_reach_the_record():
    forward = _record(lambda nodes: sorted(nodes, key=lambda n: (n.start_byte, n.end_byte)))
    backward = _record(lambda nodes: sorted(nodes, key=lambda n: (n.start_byte, n.end_byte), reverse=True))
    assert forward.count > 8
    assert forward.strings == backward.strings == sorted(forward.strings)
    assert forward.sites == backward.sites
    assert [s.callee for s in forward.sites_list()] == [s.callee for s in backward.sites_list()]


def test_sites_in_any_order_make_one_record():
    sites = [
        (0, "call", "Б", "", "", 3, 4, 5),
        (0, "call", "А", "", "", 3, 4, 5),  # two sites at one position: ordered by their strings
        (0, "member", "А", "Модуль", "", 3, 4, 5),
        (MODULE_CALLER, "dynamic", "Выполнить", "", "Выполнить", 1, 0, 9),
        (1, "background", "Метод", "ОбщийМодуль", "ЗапуститьФоновоеЗадание", 7, 2, 30),
    ]
    first = file_refs_from_sites("М.bsl", sites)
    rnd = random.Random(5)
    for _ in range(10):
        other = file_refs_from_sites("М.bsl", rnd.sample(sites, len(sites)))
        assert (other.strings, other.sites, other.count) == (first.strings, first.sites, first.count)
    assert first.strings[0] == "" and first.strings == sorted(first.strings)
    v = first.view()
    kinds = [KIND_NAMES[k] for k in v["kind"].tolist()]
    names = [first.strings[i] for i in v["name"].tolist()]
    assert list(zip(v["line"].tolist(), kinds, names, strict=True)) == [
        (1, "dynamic", "Выполнить"),
        (3, "call", "А"),
        (3, "call", "Б"),
        (3, "member", "А"),
        (7, "background", "Метод"),
    ]
