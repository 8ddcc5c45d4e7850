"""One syntax-assistant page into its parts, and the charset of a page."""

from __future__ import annotations

import pytest

from daemon.sources.platform.pages import PageError, decode_page, parse_page, split_name

HEAD = (
    '<html><head><meta http-equiv="Content-Type" content="text/html; charset=utf-8">'
    '<meta http-equiv="Content-Language" content="ru"></head><body>'
)

METHOD = (
    HEAD + '<h1 class="V8SH_pagetitle">ТаблицаЗначений.Найти (ValueTable.Find)</h1>'
    '<p class="V8SH_title">ТаблицаЗначений (ValueTable)</p><p class="V8SH_heading">Найти (Find)</p>'
    '<div class="__SINCE_SHOW_STYLE__"><p class="not_used">Доступен, начиная с версии 8.0.</p></div>'
    '<p class="V8SH_chapter">Вариант синтаксиса: По значению</p>'
    '<p class="V8SH_chapter">Синтаксис:</p>Найти(&lt;Значение&gt;, &lt;Колонки&gt;)'
    '<p class="V8SH_chapter">Параметры:</p>'
    '<div class="V8SH_rubric"> <p style="margin-top: 2px; margin-bottom: 1px">&lt;Значение&gt; (обязательный)</div>'
    'Тип: <a href="v8help://SyntaxHelperLanguage/def_Arbitrary">Произвольный</a>. <br>Искомое значение.'
    '<div class="V8SH_rubric"> <p style="margin-top: 2px">&lt;Колонки&gt; (необязательный)</div>'
    'Тип: <a href="x">Строка</a>; <a href="y">Массив</a>. <br>Имена колонок через запятую.'
    " Значение по умолчанию: Пустая строка."
    '<p class="V8SH_chapter">Описание варианта метода:</p>Ищет значение в колонках.'
    '<p class="V8SH_chapter">Вариант синтаксиса: По отбору</p>'
    '<p class="V8SH_chapter">Синтаксис:</p>Найти(&lt;Отбор&gt;)'
    '<p class="V8SH_chapter">Параметры:</p>'
    '<div class="V8SH_rubric">&lt;Отбор&gt; (обязательный)</div>Тип: <a href="z">Структура</a>. <br>Отбор.'
    '<p class="V8SH_chapter">Возвращаемое значение:</p>Тип: <a href="r">СтрокаТаблицыЗначений</a>; '
    '<a href="u">Неопределено</a>. <br>Найденная строка или Неопределено.'
    '<p class="V8SH_chapter">Описание:</p><p>Осуществляет поиск значения.</p><p>Второй абзац.</p>'
    '<p class="V8SH_chapter">Доступность: </p><p>Тонкий клиент, веб-клиент, сервер, мобильное приложение (сервер).'
    "<BR>Сериализуется.</p>"
    '<p class="V8SH_chapter">Пример:</p><TABLE><TR><TD><font face="Courier New">Стр = Т.Найти(1);<BR>'
    "Если Стр &lt;&gt; Неопределено Тогда<BR>&nbsp;&nbsp;Сообщить(1);<BR>КонецЕсли;</font></TD></TR></TABLE>"
    '<p class="V8SH_chapter">См. также:</p><a href="a">ТаблицаЗначений</a>, метод <a href="b">НайтиСтроки</a><br>'
    '<p class="V8SH_chapter">Примечание:</p>Поиск линейный.'
    '<p class="V8SH_chapter">Использование в версии:</p><p class="V8SH_versionInfo">Доступен, начиная с версии 8.0.</p>'
    '<p class="V8SH_versionInfo">Описание изменено в версии 8.3.24.</p>'
    '<HR><p><a href="http://www.1centerprise.com">Методическая информация</a></p></body></html>'
)


def test_method_page_with_variants():
    page = parse_page(METHOD)
    assert (page.name, page.name_en, page.owner, page.owner_en) == ("Найти", "Find", "ТаблицаЗначений", "ValueTable")
    assert [s.name for s in page.signatures] == ["По значению", "По отбору"]
    first, second = page.signatures
    assert first.syntax == "Найти(<Значение>, <Колонки>)"
    assert [(p.name, p.types, p.optional) for p in first.params] == [
        ("Значение", ["Произвольный"], False),
        ("Колонки", ["Строка", "Массив"], True),
    ]
    assert first.params[1].default == "Пустая строка"
    assert first.params[1].description.startswith("Имена колонок через запятую.")
    assert first.description == "Ищет значение в колонках."
    assert second.syntax == "Найти(<Отбор>)" and second.params[0].types == ["Структура"]
    assert page.return_types == ["СтрокаТаблицыЗначений", "Неопределено"]
    assert page.returns == "Найденная строка или Неопределено."
    assert page.description == "Осуществляет поиск значения. Второй абзац."
    assert page.availability == ["thin_client", "web_client", "server", "mobile_app_server"]
    assert page.example == "Стр = Т.Найти(1);\nЕсли Стр <> Неопределено Тогда\n  Сообщить(1);\nКонецЕсли;"
    assert page.see_also == ["ТаблицаЗначений", "НайтиСтроки"]
    assert page.note == "Поиск линейный."
    assert page.since == "8.0" and page.deprecated_since == ""
    assert "Методическая" not in page.description  # after <hr>: not the page's content


def test_property_page_type_and_access():
    html = (
        HEAD + '<h1 class="V8SH_pagetitle">Глобальный контекст.ФабрикаXDTO (Global context.XDTOFactory)</h1>'
        '<p class="V8SH_title">Глобальный контекст (Global context)</p>'
        '<p class="V8SH_heading">ФабрикаXDTO (XDTOFactory)</p>'
        '<p class="V8SH_chapter">Использование:</p>Только чтение.'
        '<p class="V8SH_chapter">Описание:</p>Тип: <a href="t">ФабрикаXDTO</a>. <br>Фабрика XDTO, содержащая:<ul>'
        "<li>пакеты для клиента</li><li>все пакеты для сервера.</li></ul>"
        '<p class="V8SH_chapter">Доступность: </p><p>Сервер, толстый клиент, внешнее\n        соединение.</p>'
        "<HR></body></html>"
    )
    page = parse_page(html)
    assert (page.name, page.name_en) == ("ФабрикаXDTO", "XDTOFactory")
    assert page.readonly is True
    assert page.value_types == ["ФабрикаXDTO"]
    assert page.description == "Фабрика XDTO, содержащая: пакеты для клиента все пакеты для сервера."
    assert page.availability == ["server", "thick_client", "external_connection"]


def test_deprecated_and_since_from_the_boxes_alone():
    html = (
        HEAD + '<h1 class="V8SH_pagetitle">Т.Старый (T.Old)</h1><p class="V8SH_heading">Старый (Old)</p>'
        '<div class="__DEPRECATED_SHOW_STYLE__"><p class="not_used">Не рекомендуется использовать, начиная с версии'
        ' 8.3.15.</p></div><div class="__SINCE_SHOW_STYLE__"><p class="not_used">Доступен, начиная с версии 8.3.11.'
        "</p></div><HR></body></html>"
    )
    page = parse_page(html)
    assert (page.since, page.deprecated_since) == ("8.3.11", "8.3.15")


def test_enum_page_without_heading_and_constructor_page():
    enum = parse_page(
        HEAD + '<h1 class="V8SH_pagetitle">КодировкаТекста (TextEncoding)</h1>'
        '<p class="V8SH_chapter">Описание:</p>Определяет набор кодировок.<HR></body></html>'
    )
    assert (enum.name, enum.name_en, enum.owner, enum.description) == (
        "КодировкаТекста",
        "TextEncoding",
        "",
        "Определяет набор кодировок.",
    )
    ctor = parse_page(
        HEAD + '<h1 class="V8SH_pagetitle">Виджет.По имени</h1><p class="V8SH_title">Виджет (Widget)</p>'
        '<p class="V8SH_heading">По имени</p><p class="V8SH_chapter">Синтаксис:</p>Новый Виджет(&lt;Имя&gt;)'
        '<p class="V8SH_chapter">Параметры:</p><div class="V8SH_rubric">&lt;Имя&gt; (обязательный)</div>'
        'Тип: <a href="s">Строка</a>. <br>Имя.<HR></body></html>'
    )
    assert (ctor.name, ctor.name_en, ctor.owner) == ("По имени", "", "Виджет")
    assert ctor.signatures[0].syntax == "Новый Виджет(<Имя>)" and ctor.signatures[0].params[0].name == "Имя"


def test_english_page():
    html = (
        '<html><head><meta http-equiv="Content-Language" content="en"></head><body>'
        '<h1 class="V8SH_pagetitle">ValueTable.Insert (ТаблицаЗначений.Вставить)</h1>'
        '<p class="V8SH_title">ValueTable (ТаблицаЗначений)</p><p class="V8SH_heading">Insert (Вставить)</p>'
        '<p class="V8SH_chapter">Syntax:</p>Insert(&lt;Index&gt;)'
        '<p class="V8SH_chapter">Parameters:</p><div class="V8SH_rubric">&lt;Index&gt; (optional)</div>'
        'Type: <a href="n">Number</a>. <br>Row index. Default value: 0.'
        '<p class="V8SH_chapter">Return value:</p>Type: <a href="r">ValueTableRow</a>. <br>The row.'
        '<p class="V8SH_chapter">Description:</p>Inserts a row.'
        '<p class="V8SH_chapter">Availability:</p>Thin client, server, mobile application (client).'
        '<p class="V8SH_chapter">Usage in version:</p><p class="V8SH_versionInfo">Available since version 8.3.6.</p>'
        "<HR></body></html>"
    )
    page = parse_page(html)
    assert (page.name, page.name_en, page.owner, page.owner_en) == (
        "Вставить",
        "Insert",
        "ТаблицаЗначений",
        "ValueTable",
    )
    p = page.signatures[0].params[0]
    assert (p.name, p.types, p.optional, p.default) == ("Index", ["Number"], True, "0")
    assert page.return_types == ["ValueTableRow"] and page.returns == "The row."
    assert page.availability == ["thin_client", "server", "mobile_app_client"]
    assert page.since == "8.3.6"


def test_unknown_chapters_are_noted_and_broken_markup_parses():
    page = parse_page(HEAD + '<p class="V8SH_heading">X (Y)</p><p class="V8SH_chapter">Странное:</p>text<div><p>')
    assert page.name == "X" and page.chapters == ["unknown:Странное:"]
    assert parse_page("").name == "" and parse_page("<<<>>>&&&").signatures == []


def test_split_name():
    assert split_name("СтрНайти (StrFind)") == ("СтрНайти", "StrFind")
    assert split_name("StrFind (СтрНайти)") == ("СтрНайти", "StrFind")
    assert split_name("По имени") == ("По имени", "")
    assert split_name("  UTF8   (UTF8) ") == ("UTF8", "UTF8")


# ------------------------------------------------------------------------------ charsets
def test_decode_utf8_and_bom():
    assert decode_page("<p>Привет</p>".encode()) == "<p>Привет</p>"
    assert decode_page(b"\xef\xbb\xbf<p>" + "Ы".encode()) == "<p>Ы"
    assert decode_page("<p>Ж</p>".encode("utf-16")) == "<p>Ж</p>"


def test_decode_cp1251_with_a_meta_charset():
    html = '<html><head><meta http-equiv="Content-Type" content="text/html; charset=windows-1251"></head>'
    html += '<body><p class="V8SH_heading">СтрНайти (StrFind)</p></body></html>'
    page = parse_page(decode_page(html.encode("cp1251")))
    assert (page.name, page.name_en) == ("СтрНайти", "StrFind")


def test_decode_cp1251_without_a_meta_falls_back():
    assert decode_page("<p>Строка</p>".encode("cp1251")) == "<p>Строка</p>"


def test_declared_charset_that_does_not_fit_is_a_page_error():
    html = '<meta charset="utf-8"><p>Строка</p>'.encode("cp1251")
    with pytest.raises(PageError, match="not utf-8 as it declares"):
        decode_page(html)
    with pytest.raises(PageError, match="unknown charset 'x-nonsense'"):
        decode_page(b'<meta charset="x-nonsense"><p>a</p>')


@pytest.mark.parametrize("html", ["<a " * (1 << 20), "<" * (4 << 20), "<!--" + "x" * (4 << 20), "<p>" * (1 << 18)])
def test_hostile_markup_parses_in_bounded_time(html, deadline):
    """Megabytes of unclosed tags, lone brackets or an endless comment: linear, no hang."""
    with deadline(30):
        page = parse_page(html)
    assert page.name == "" and page.signatures == []
