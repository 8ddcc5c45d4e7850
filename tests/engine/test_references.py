"""Call-site extraction (daemon.sources.references) on hand-written BSL: kinds, ranges, callers,
strings naming methods, dynamic code, platform events, extension annotations, broken modules."""

from __future__ import annotations

import numpy as np
import pytest

from daemon.sources.bsl import chunk_module, parser
from daemon.sources.ref_record import MODULE_CALLER, SITE_DTYPE, pack_sites, unpack_sites
from daemon.sources.references import extract_references, module_references, normalize_text

PATH = "CommonModules/М/Ext/Module.bsl"


def refs(src: str, **kw):
    kw.setdefault("path", PATH)
    kw.setdefault("owner", "ОбщийМодуль.М")
    kw.setdefault("module_kind", "common")
    return module_references(src, **kw)


def sites(src: str, **kw) -> list[tuple[str, str, str]]:
    """(kind, qualifier, name) of every site, in order."""
    return [(s.kind, s.qualifier, s.name) for s in refs(src, **kw).sites_list()]


def one(src: str, kind: str, **kw):
    got = [s for s in refs(src, **kw).sites_list() if s.kind == kind]
    assert len(got) == 1, got
    return got[0]


# --------------------------------------------------------------------------- call kinds


def test_local_qualified_manager_this_and_variable_calls():
    src = """Процедура А() Экспорт
	Б(1);
	ОбщегоНазначенияКлиентСервер.СообщитьПользователю("х");
	Справочники.Валюты.НайтиПоКоду("1");
	РегистрыСведений.КурсыВалют.СоздатьНаборЗаписей();
	ЭтотОбъект.Метод();
	ЭтаФорма.Закрыть();
	Запрос.Выполнить().Выгрузить();
	Х = Ждать ОбщийКлиент.ФункцияАсинх();
КонецПроцедуры
"""
    assert sites(src) == [
        ("call", "", "Б"),
        ("member", "ОбщегоНазначенияКлиентСервер", "СообщитьПользователю"),
        ("manager", "Справочники.Валюты", "НайтиПоКоду"),
        ("manager", "РегистрыСведений.КурсыВалют", "СоздатьНаборЗаписей"),
        ("this", "ЭтотОбъект", "Метод"),
        ("this", "ЭтаФорма", "Закрыть"),
        ("member", "Запрос", "Выполнить"),
        ("member", "?Запрос.Выполнить()", "Выгрузить"),
        ("member", "ОбщийКлиент", "ФункцияАсинх"),
    ]


def test_english_keywords_and_collections():
    src = """Procedure A() Export
	B();
	Catalogs.Currencies.FindByCode("1");
	InformationRegisters.ExchangeRates.CreateRecordSet();
	ThisObject.Method();
	Notification = New NotifyDescription("AfterClose", ThisObject);
	Callback = New CallbackDescription("AfterQuestion", ThisObject);
	AttachIdleHandler("Tick", 1, True);
	TimeConsumingOperations.ExecuteFunction(Parameters, "Common.Compute");
	Execute("B()");
	X = Eval(Expression);
EndProcedure
"""
    got = sites(src, path="CommonModules/M/Ext/Module.bsl", owner="ОбщийМодуль.M")
    assert ("manager", "Catalogs.Currencies", "FindByCode") in got
    assert ("manager", "InformationRegisters.ExchangeRates", "CreateRecordSet") in got
    assert ("this", "ThisObject", "Method") in got
    assert ("notify", "", "AfterClose") in got
    assert ("notify", "", "AfterQuestion") in got
    assert ("idle", "", "Tick") in got
    assert ("long_operation", "Common", "Compute") in got
    assert [k for k, _q, n in got if k == "dynamic"] == ["dynamic", "dynamic"]


def test_singular_type_name_is_a_variable_not_a_manager():
    # `Документ.Товары.Добавить()`: a variable named like a type, not `Документы.X`
    assert sites("Процедура А()\n\tДокумент.Товары.Добавить();\nКонецПроцедуры\n") == [
        ("member", "Документ.Товары", "Добавить")
    ]


def test_comments_strings_and_query_text_make_no_sites():
    src = """// ОбщийМодуль.ВКомментарии()
Процедура А()
	С = "ОбщийМодуль.ВСтроке()"; // Б()
	Т = "ВЫБРАТЬ
	|	Ф(Поле) // не вызов
	|ИЗ Таблица";
	В();
КонецПроцедуры
"""
    assert sites(src) == [("call", "", "В")]


def test_names_with_yo_are_read_from_the_source():
    # both grammars end identifiers at ё; the name comes from the text
    s = one("Процедура А()\n\tПолучитьСчёт(1);\n\tМодульЁ.ПриёмДанных();\nКонецПроцедуры\n", "call")
    assert s.name == "ПолучитьСчёт"
    m = one("Процедура А()\n\tМодульЁ.ПриёмДанных();\nКонецПроцедуры\n", "member")
    assert (m.qualifier, m.name) == ("МодульЁ", "ПриёмДанных")


def test_a_comment_ending_with_a_dot_is_no_receiver():
    src = "Процедура А()\n\t// Запускаем обмен.\n\tВыполнитьОбмен(1);\nКонецПроцедуры\n"
    assert sites(src) == [("call", "", "ВыполнитьОбмен")]


# --------------------------------------------------------------------------- strings naming methods


def test_notification_handlers_with_this_object_a_common_module_and_an_error_handler():
    src = """Процедура А()
	О1 = Новый ОписаниеОповещения("ПослеВыбора", ЭтотОбъект);
	О2 = Новый ОписаниеОповещения("ПослеВопроса", ОбщегоНазначенияКлиент, Параметры, "ПриОшибке", ЭтотОбъект);
	О3 = Новый ОписаниеОповещения("ВФорме", Контекст.Форма);
	О4 = Новый ОписаниеОповещения(ИмяПроцедуры, ЭтотОбъект);
КонецПроцедуры
"""
    got = [(s.kind, s.qualifier, s.name) for s in refs(src).sites_list() if s.kind in ("notify", "dynamic")]
    assert got == [
        ("notify", "", "ПослеВыбора"),
        ("notify", "ОбщегоНазначенияКлиент", "ПослеВопроса"),
        ("notify", "", "ПриОшибке"),
        ("notify", "?Контекст.Форма", "ВФорме"),
        ("dynamic", "", "ОписаниеОповещения"),
    ]


def test_long_operations_background_jobs_and_call_by_name():
    src = """Процедура А()
	ДлительныеОперации.ВыполнитьФункцию(П, "Справочники.Валюты.Загрузить", 1);
	ДлительныеОперации.ВыполнитьПроцедуру(П, "РаботаСКурсами.Обновить");
	ДлительныеОперации.ВыполнитьВФоне("Обработка.Загрузка.МодульОбъекта.Выполнить", П, П2);
	ФоновыеЗадания.Выполнить("Модуль.Метод", Параметры);
	ОбщегоНазначения.ВыполнитьМетодКонфигурации("Модуль.Процедура", Параметры);
	ОбщегоНазначения.ВыполнитьМетодКонфигурации(Обработчик.Процедура, Параметры);
	ОбщегоНазначения.ВыполнитьМетодОбъекта(Объект, "Заполнить");
	ОбщегоНазначения.ВыполнитьВБезопасномРежиме(Алгоритм);
КонецПроцедуры
"""
    got = [(s.kind, s.qualifier, s.name) for s in refs(src).sites_list() if s.kind not in ("member",)]
    assert got == [
        ("long_operation", "Справочники.Валюты", "Загрузить"),
        ("long_operation", "РаботаСКурсами", "Обновить"),
        ("long_operation", "Обработка.Загрузка.МодульОбъекта", "Выполнить"),
        ("background", "Модуль", "Метод"),
        ("by_name", "Модуль", "Процедура"),
        ("dynamic", "ОбщегоНазначения", "ВыполнитьМетодКонфигурации"),
        ("by_name", "?Объект", "Заполнить"),
        ("dynamic", "ОбщегоНазначения", "ВыполнитьВБезопасномРежиме"),
    ]
    s = one(src, "background")
    assert s.detail == "ФоновыеЗадания.Выполнить"


def test_idle_handlers_and_handler_statements():
    src = """Процедура А()
	ПодключитьОбработчикОжидания("Обновить", 1, Истина);
	ОтключитьОбработчикОжидания("Обновить");
	ДобавитьОбработчик Объект.ПриИзменении, ОбработатьИзменение;
	ДобавитьОбработчик Объект.ПриИзменении, Модуль.Обработать;
КонецПроцедуры
"""
    got = [(s.kind, s.qualifier, s.name) for s in refs(src).sites_list() if s.kind in ("idle", "handler")]
    assert got == [("idle", "", "Обновить"), ("idle", "", "Обновить"), ("handler", "", "ОбработатьИзменение")] + [
        ("handler", "Модуль", "Обработать")
    ]


def test_execute_and_eval_are_dynamic():
    src = 'Процедура А()\n\tВыполнить(Алгоритм);\n\tХ = Вычислить("1");\nКонецПроцедуры\n'
    dyn = [s for s in refs(src).sites_list() if s.kind == "dynamic"]
    assert [(s.name, s.line) for s in dyn] == [("Выполнить", 1), ("Вычислить", 2)]


# --------------------------------------------------------------------------- callers and ranges


def test_callers_are_method_ids_and_module_code_has_none():
    src = """Перем Х;
Процедура А()
	Б();
КонецПроцедуры

Функция Б()
	Возврат В();
КонецФункции

Процедура А()
	Г();
КонецПроцедуры

Инициализация();
"""
    got = [(s.caller, s.name) for s in refs(src).sites_list()]
    assert got == [
        (f"{PATH}::А", "Б"),
        (f"{PATH}::Б", "В"),
        (f"{PATH}::А@2", "Г"),
        (None, "Инициализация"),
    ]
    assert refs(src).view()["caller"][-1] == MODULE_CALLER


def test_a_long_method_split_into_parts_is_one_caller():
    body = "\n".join(f"\tВызов{i}();" for i in range(30))
    src = f"Процедура Длинная()\n{body}\nКонецПроцедуры\n"
    chunks = chunk_module(normalize_text(src), path=PATH, module_kind="common", max_lines=10)
    assert len([c for c in chunks if c.part]) > 1
    r = refs(src, chunks=chunks)
    assert {s.caller for s in r.sites_list()} == {f"{PATH}::Длинная"}
    assert len(r.methods_list()) == 1


def test_ranges_are_utf16_columns_and_line_ends_do_not_matter():
    src = 'Процедура А()\n\tС = "😀" + Б(1); ОбщийМодуль.Ц();\nКонецПроцедуры\n'
    lf = refs(src).sites_list()
    crlf = refs("\ufeff" + src.replace("\n", "\r\n")).sites_list()
    assert lf == crlf
    line = src.split("\n")[1]
    b = lf[0]
    assert (b.name, b.line) == ("Б", 1)
    # the emoji is two UTF-16 units: the column counts them
    assert b.col == len(line[: line.index("Б(")].encode("utf-16-le")) // 2
    assert b.end == b.col + 1
    c = lf[1]
    assert c.col == len(line[: line.index("Ц(")].encode("utf-16-le")) // 2


def test_string_reference_range_is_the_text_inside_the_quotes():
    src = 'Процедура А()\n\tПодключитьОбработчикОжидания("Обновить", 1);\nКонецПроцедуры\n'
    s = one(src, "idle")
    line = src.split("\n")[1]
    assert (s.line, s.col, s.end) == (1, line.index("Обновить"), line.index("Обновить") + len("Обновить"))


# --------------------------------------------------------------------------- platform events, extensions


@pytest.mark.parametrize(
    "kind,name,event",
    [
        ("object", "ОбработкаПроведения", "Posting"),
        ("object", "BeforeWrite", "BeforeWrite"),
        ("manager", "ОбработкаПолученияДанныхВыбора", "ChoiceDataGetProcessing"),
        ("recordset", "ПередЗаписью", "BeforeWrite"),
        ("command", "ОбработкаКоманды", "CommandProcessing"),
        ("command", "CommandProcessing", "CommandProcessing"),
        ("session", "УстановкаПараметровСеанса", "SessionParametersSetting"),
        ("managed_application", "ПриНачалеРаботыСистемы", "OnStart"),
    ],
)
def test_platform_event_handlers_by_module_kind(kind, name, event):
    src = f"Процедура {name}(Отказ)\nКонецПроцедуры\n\nПроцедура Своя()\nКонецПроцедуры\n"
    got = [s for s in refs(src, module_kind=kind).sites_list() if s.kind == "platform_event"]
    assert [(g.name, g.detail, g.caller) for g in got] == [(name, event, None)]


def test_no_platform_events_in_common_modules_or_forms():
    src = "Процедура ПередЗаписью(Отказ)\nКонецПроцедуры\nПроцедура ПриСозданииНаСервере()\nКонецПроцедуры\n"
    assert sites(src) == []
    assert sites(src, module_kind="form") == []  # forms are bound by their layout


def test_extension_annotations_and_proceed_with_call():
    src = """&НаСервере
&Вместо("ОбработкаПроведения")
Процедура Расш1_ОбработкаПроведения(Отказ, Режим)
	ПродолжитьВызов(Отказ, Режим);
КонецПроцедуры

&После("ПриНачалеРаботыСистемы")
Процедура Расш1_ПриНачале()
	ПродолжитьВызов();
КонецПроцедуры
"""
    r = refs(src, path="Documents/Д/Ext/ObjectModule.bsl", owner="Документ.Д", module_kind="object", extension=True)
    got = [(s.kind, s.name, s.detail, s.caller) for s in r.sites_list()]
    p = "Documents/Д/Ext/ObjectModule.bsl"
    assert ("extension", "ОбработкаПроведения", "Вместо", f"{p}::Расш1_ОбработкаПроведения") in got
    assert ("proceed", "ОбработкаПроведения", "ПродолжитьВызов", f"{p}::Расш1_ОбработкаПроведения") in got
    assert ("extension", "ПриНачалеРаботыСистемы", "После", f"{p}::Расш1_ПриНачале") in got
    # ПродолжитьВызов outside an &Вместо method is a plain (platform) call
    assert ("call", "ПродолжитьВызов", "", f"{p}::Расш1_ПриНачале") in got
    ext = [s for s in r.sites_list() if s.kind == "extension"][0]
    lines = src.split("\n")
    assert (ext.line, ext.col) == (1, lines[1].index("ОбработкаПроведения"))


def test_deleted_lines_of_change_and_control_make_no_sites():
    src = """&ИзменениеИКонтроль("Заполнить")
Процедура Расш_Заполнить()
	Оставить();
#Удаление
	Удалить();
#КонецУдаления
#Вставка
	Вставить();
#КонецВставки
КонецПроцедуры
"""
    got = [(s.kind, s.name) for s in refs(src, extension=True).sites_list()]
    assert got == [("extension", "Заполнить"), ("call", "Оставить"), ("call", "Вставить")]


# --------------------------------------------------------------------------- bad input, packing


def test_a_module_that_does_not_parse_keeps_the_calls_of_the_methods_that_do():
    src = """Процедура Хорошая()
	Первый();
КонецПроцедуры

Процедура Сломанная(
	Если Тогда Иначе ;;; )) КонецЕсли Цикл
	Потерянный(
КонецПроцедуры

Функция ТожеХорошая()
	Возврат Второй() + Модуль.Третий();
КонецФункции
"""
    r = refs(src)
    assert r.partial
    got = {(s.caller.rpartition("::")[2] if s.caller else None, s.name) for s in r.sites_list()}
    assert ("Хорошая", "Первый") in got
    assert ("ТожеХорошая", "Второй") in got
    assert ("ТожеХорошая", "Третий") in got
    assert [m.name for m in r.methods_list()] == ["Хорошая", "Сломанная", "ТожеХорошая"]


def test_a_header_after_a_broken_method_is_no_call():
    # error recovery reads "Процедура Целая()" after an unclosed header as a call of Целая
    src = (
        "Процедура Сломанная(\n\tЕсли Тогда ((\nКонецПроцедуры\n\n"
        "Процедура Целая() Экспорт\n\tДругая();\nКонецПроцедуры\n"
    )
    r = refs(src)
    assert r.partial
    assert [(s.kind, s.name, s.line) for s in r.sites_list()] == [("call", "Другая", 5)]


def test_odd_input_never_raises():
    for src in ("", "\ufeff", "\x00\x01", "Процедура", ")))(((", "А.Б.В.", "Новый ОписаниеОповещения(", '"' * 7):
        r = refs(src)
        assert r.count == len(r.sites_list())


def test_the_chunker_tree_gives_the_same_record_as_the_text():
    src = 'Процедура А()\n\tБ();\n\tМ.В("Г");\nКонецПроцедуры\n'
    text = normalize_text(src)
    chunks = chunk_module(text, path=PATH, module_kind="common")
    data = text.encode("utf-8")
    direct = extract_references(parser().parse(data), data, chunks, path=PATH, module_kind="common")
    assert direct.sites_list() == refs(src).sites_list()


def test_extraction_leaves_no_reference_cycles():
    """The chunking pass runs with the cyclic GC off: a module's extraction state (its text, the
    positions, the sites being built) must be freed by reference counting alone."""
    import gc

    src = (
        "Процедура А() Экспорт\n"
        '\tО = Новый ОписаниеОповещения("Б", ЭтотОбъект);\n'
        '\tДлительныеОперации.ВыполнитьФункцию(П, "М.В", 1);\n'
        "\tДобавитьОбработчик Объект.ПриИзменении, Б;\n"
        "\tМ.Г(1).Д();\n"
        "КонецПроцедуры\n"
    )
    gc.collect()
    was_on = gc.isenabled()
    gc.disable()
    try:
        for _ in range(3):
            assert refs(src).count
        assert gc.collect() == 0
    finally:
        if was_on:
            gc.enable()


@pytest.mark.parametrize("n", [0, 1, 7, 70_000])
def test_site_packing_round_trips(n):
    rng = np.random.default_rng(n)
    arr = np.zeros(n, dtype=SITE_DTYPE)
    nstrings = 70_001 if n > 10 else 5  # more strings than 16 bits index: the wide format
    for f in SITE_DTYPE.names:
        hi = {"kind": 20, "caller": 0xFFFF, "col": 0xFFFF, "end": 0xFFFF, "line": 10**6}.get(f, nstrings)
        arr[f] = rng.integers(0, hi, n)
    arr["line"] = np.sort(arr["line"])
    back = unpack_sites(pack_sites(arr, nstrings), n)
    assert back.tobytes() == arr.tobytes()
