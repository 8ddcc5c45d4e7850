"""Metadata bindings (daemon.sources.bindings) on hand-written Designer and EDT files: subscriptions,
scheduled jobs, HTTP and web services, the Global flag, form events, item events and commands, and
broken files as named skips."""

from __future__ import annotations

import pytest

from daemon.sources.bindings import descriptor_references, form_layout_path, form_module_path, form_references

MD = 'xmlns="http://v8.1c.ru/8.3/MDClasses" xmlns:v8="http://v8.1c.ru/8.1/data/core"'
EDT = 'xmlns:mdclass="http://g5.1c.ru/v8/dt/metadata/mdclass"'


def desc(xml: str, object_type: str, path: str = "X.xml", owner: str = "Тип.X"):
    return descriptor_references(xml.encode("utf-8"), path=path, owner=owner, object_type=object_type)


def rows(rec):
    return [(s.kind, s.qualifier, s.name, s.detail) for s in rec.sites_list()]


def test_designer_event_subscription_with_its_event_and_position():
    xml = f"""<?xml version="1.0" encoding="UTF-8"?>
<MetaDataObject {MD} version="2.20">
	<EventSubscription uuid="1">
		<Properties>
			<Name>ПередЗаписью</Name>
			<Event>BeforeWrite</Event>
			<Handler>CommonModule.Подписки.ПередЗаписьюОбъекта</Handler>
		</Properties>
	</EventSubscription>
</MetaDataObject>"""
    rec = desc(xml, "ПодпискаНаСобытие")
    assert rows(rec) == [("subscription", "CommonModule.Подписки", "ПередЗаписьюОбъекта", "BeforeWrite")]
    s = rec.sites_list()[0]
    line = xml.split("\n")[s.line]
    assert line[s.col : s.end] == "ПередЗаписьюОбъекта"
    assert s.caller is None and rec.file_kind == "descriptor"


def test_edt_scheduled_job_http_and_web_services():
    job = (
        f"<mdclass:ScheduledJob {EDT}>\n  <name>Загрузка</name>\n"
        "  <methodName>CommonModule.М.Загрузить</methodName>\n</mdclass:ScheduledJob>"
    )
    assert rows(desc(job, "РегламентноеЗадание")) == [("scheduled_job", "CommonModule.М", "Загрузить", "Загрузка")]
    http = f"""<mdclass:HTTPService {EDT}>
  <name>Товары</name>
  <urlTemplates>
    <name>Путь</name>
    <template>/goods/{{id}}</template>
    <methods>
      <name>GET</name>
      <httpMethod>GET</httpMethod>
      <handler>ПутьGET</handler>
    </methods>
  </urlTemplates>
</mdclass:HTTPService>"""
    assert rows(desc(http, "HTTPСервис", owner="HTTPСервис.Товары")) == [
        ("http_handler", "HTTPСервис.Товары", "ПутьGET", "Путь.GET")
    ]
    ws = f"""<mdclass:WebService {EDT}>
  <name>Обмен</name>
  <operations>
    <name>Ping</name>
    <procedureName>Пинг</procedureName>
  </operations>
</mdclass:WebService>"""
    assert rows(desc(ws, "WebСервис", owner="WebСервис.Обмен")) == [
        ("web_operation", "WebСервис.Обмен", "Пинг", "Ping")
    ]


def test_designer_http_service_and_common_module_global_flag():
    http = f"""<MetaDataObject {MD}><HTTPService uuid="1"><Properties><Name>S</Name></Properties><ChildObjects>
<URLTemplate uuid="2"><Properties><Name>Версия</Name></Properties><ChildObjects>
<Method uuid="3"><Properties><Name>get</Name><HTTPMethod>GET</HTTPMethod>
<Handler>ВерсияGET</Handler></Properties></Method>
</ChildObjects></URLTemplate></ChildObjects></HTTPService></MetaDataObject>"""
    assert rows(desc(http, "HTTPСервис", owner="HTTPСервис.S")) == [
        ("http_handler", "HTTPСервис.S", "ВерсияGET", "Версия.GET")
    ]
    props = "<Properties><Name>Г</Name><Global>true</Global></Properties>"
    glob = f"<MetaDataObject {MD}><CommonModule>{props}</CommonModule></MetaDataObject>"
    assert desc(glob, "ОбщийМодуль").global_module
    edt = f"<mdclass:CommonModule {EDT}><name>Г</name><global>true</global></mdclass:CommonModule>"
    assert desc(edt, "ОбщийМодуль").global_module
    assert not desc(glob.replace("true", "false"), "ОбщийМодуль").global_module


def test_types_without_bindings_give_no_record():
    assert desc(f"<MetaDataObject {MD}><Catalog/></MetaDataObject>", "Справочник") is None


@pytest.mark.parametrize("broken", ["<MetaDataObject", "not xml at all", "<a><b></a>", ""])
def test_a_broken_descriptor_is_a_named_skip(broken):
    rec = desc(broken, "ПодпискаНаСобытие", path="EventSubscriptions/Сломанная.xml")
    assert rec.count == 0
    assert [(k.path, k.reason) for k in rec.skips] == [("EventSubscriptions/Сломанная.xml", "invalid_xml")]


def test_a_handler_that_names_no_method_is_a_named_skip():
    props = "<Properties><Handler>Просто Текст</Handler></Properties>"
    xml = f"<MetaDataObject {MD}><EventSubscription>{props}</EventSubscription></MetaDataObject>"
    rec = desc(xml, "ПодпискаНаСобытие", path="EventSubscriptions/П.xml")
    assert rec.count == 0
    assert rec.skips[0].reason == "bad_binding" and "Просто Текст" in rec.skips[0].detail


DESIGNER_FORM = """<?xml version="1.0" encoding="UTF-8"?>
<Form xmlns="http://v8.1c.ru/8.3/xcf/logform" version="2.20">
	<Events>
		<Event name="OnOpen">ПриОткрытии</Event>
		<Event name="OnCreateAtServer" callType="After">Расш_ПриСозданииНаСервере</Event>
	</Events>
	<ChildItems>
		<InputField name="Наименование" id="1">
			<Events>
				<Event name="OnChange">НаименованиеПриИзменении</Event>
			</Events>
		</InputField>
	</ChildItems>
	<Commands>
		<Command name="Обновить" id="2">
			<Action>ОбновитьВыполнить</Action>
		</Command>
	</Commands>
</Form>"""

EDT_FORM = """<?xml version="1.0" encoding="UTF-8"?>
<form:Form xmlns:form="http://g5.1c.ru/v8/dt/form" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">
  <items xsi:type="form:FormField">
    <name>Таблица</name>
    <extInfo xsi:type="form:SpreadSheetDocFieldExtInfo">
      <handlers>
        <event>OnChangeAreaContent</event>
        <name>ТаблицаПриИзменении</name>
      </handlers>
    </extInfo>
  </items>
  <handlers>
    <event>OnOpen</event>
    <name>ПриОткрытии</name>
  </handlers>
  <formCommands>
    <name>Печать</name>
    <action xsi:type="form:FormCommandHandlerContainer">
      <handler>
        <name>ПечатьВыполнить</name>
      </handler>
    </action>
  </formCommands>
</form:Form>"""


def test_designer_form_events_item_events_and_commands():
    path = "Catalogs/Валюты/Forms/ФормаЭлемента/Ext/Form.xml"
    rec = form_references(DESIGNER_FORM.encode(), path=path, fmt="designer")
    owner = "Справочник.Валюты.Форма.ФормаЭлемента"
    assert rec.owner == owner and rec.file_kind == "form"
    assert rows(rec) == [
        ("form_event", owner, "ПриОткрытии", "OnOpen"),
        ("form_event", owner, "Расш_ПриСозданииНаСервере", "OnCreateAtServer (After)"),
        ("form_item_event", owner, "НаименованиеПриИзменении", "Наименование.OnChange"),
        ("form_command", owner, "ОбновитьВыполнить", "Обновить"),
    ]
    s = rec.sites_list()[0]
    assert DESIGNER_FORM.split("\n")[s.line][s.col : s.end] == "ПриОткрытии"


def test_edt_form_handlers_and_commands():
    path = "src/Documents/Д/Forms/Ф/Form.form"
    rec = form_references(EDT_FORM.encode(), path=path, fmt="edt")
    owner = "Документ.Д.Форма.Ф"
    assert rows(rec) == [
        ("form_item_event", owner, "ТаблицаПриИзменении", "Таблица.OnChangeAreaContent"),
        ("form_event", owner, "ПриОткрытии", "OnOpen"),
        ("form_command", owner, "ПечатьВыполнить", "Печать"),
    ]


def test_a_broken_form_layout_is_a_named_skip():
    path = "CommonForms/Ф/Ext/Form.xml"
    rec = form_references(DESIGNER_FORM[:200].encode(), path=path, fmt="designer")
    assert rec.count == 0 and [(k.path, k.reason) for k in rec.skips] == [(path, "invalid_xml")]


@pytest.mark.parametrize(
    "module,layout",
    [
        ("Catalogs/В/Forms/Ф/Ext/Form/Module.bsl", "Catalogs/В/Forms/Ф/Ext/Form.xml"),
        ("CommonForms/Ф/Ext/Form/Module.bsl", "CommonForms/Ф/Ext/Form.xml"),
        ("p/src/Catalogs/В/Forms/Ф/Module.bsl", "p/src/Catalogs/В/Forms/Ф/Form.form"),
        ("src/CommonForms/Ф/Module.bsl", "src/CommonForms/Ф/Form.form"),
    ],
)
def test_form_layout_and_module_paths(module, layout):
    assert form_layout_path(module) == layout
    assert form_module_path(layout) == module


def test_other_modules_have_no_layout():
    assert form_layout_path("CommonModules/М/Ext/Module.bsl") is None
    assert form_layout_path("src/CommonModules/М/Module.bsl") is None
    assert form_module_path("Catalogs/В.xml") is None
