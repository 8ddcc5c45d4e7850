"""The ranking of issue 28 on a few hand-made chunks (no corpus, no model): test code below
production code that matches as well, and its ``test`` mark."""

from __future__ import annotations

from dataclasses import replace

import msgspec

from daemon.contract import Chunk
from daemon.ranking.params import RankingParams
from daemon.ranking.ranker import Ranker
from daemon.sources.scan import ExportInfo, ProjectInfo, in_test_folder, projects_of_test_code

from .test_ranker import ROOT, _rank, _state

TEXT = "Процедура {n}()\n// упаковка результатов прогона в отчет junit\nКонецПроцедуры"


def _proc(path: str, owner: str, name: str, text: str | None = None) -> Chunk:
    return Chunk(
        id=f"{path}::{name}",
        path=path,
        kind="procedure",
        name=name,
        owner=owner,
        object_type="ОбщийМодуль",
        module_kind="common",
        symbol=name,
        text=text or TEXT.format(n=name),
    )


PROD = "src/CommonModules/ОтчетJUnit/Module.bsl"
IN_TESTS = "tests/src/CommonModules/ОМ_ОтчетJUnit/Module.bsl"
DECLARING = "src/CommonModules/ДымовыеТесты/Module.bsl"


def test_test_code_ranks_below_production_code_that_matches_as_well_and_is_marked():
    st = _state(
        [
            # test code that matches a little better (the words twice)
            _proc(IN_TESTS, "ОбщийМодуль.ОМ_ОтчетJUnit", "УпаковкаОтчета", TEXT.format(n="УпаковкаОтчета") * 2),
            _proc(PROD, "ОбщийМодуль.ОтчетJUnit", "УпаковкаОтчета"),
            _proc(DECLARING, "ОбщийМодуль.ДымовыеТесты", "УпаковкаОтчета"),
            _proc(DECLARING, "ОбщийМодуль.ДымовыеТесты", "ИсполняемыеСценарии", "Процедура ИсполняемыеСценарии()"),
        ]
    )
    q = "упаковка результатов прогона в отчет junit"
    off = Ranker(st, root=ROOT, params=replace(RankingParams(), test_code_factor=1.0))
    hits = _rank(off, q)
    assert hits[0].path == IN_TESTS
    assert {h.path: h.test for h in hits} == {IN_TESTS: True, PROD: False, DECLARING: True}
    hits = _rank(Ranker(st, root=ROOT), q)
    assert hits[0].path == PROD and not hits[0].test
    # a name query keeps its names-first order: test code is found by name as before
    assert _rank(Ranker(st, root=ROOT), "ИсполняемыеСценарии")[0].path == DECLARING


def test_test_folders_and_test_projects():
    assert in_test_folder("tests/src/CommonModules/X/Module.bsl")
    assert in_test_folder("fixtures/demo/src/Catalogs/Y/Y.mdo")
    assert not in_test_folder("src/CommonModules/Tests/Module.bsl".replace("Tests", "Тест"))
    assert not in_test_folder("src/CommonModules/test.bsl")  # a file name is not a folder
    info = ExportInfo(
        format="edt",
        projects=[
            ProjectInfo(path="", name="Основная"),
            ProjectInfo(path="ext/unit", name="ТестыБСП"),
            ProjectInfo(path="exts/smoke", name="Smoke"),
        ],
    )
    assert projects_of_test_code(info) == ("ext/unit/",)
    assert projects_of_test_code(None) == ()


def test_an_acronym_is_first_a_word_part_then_a_camelhump():
    from daemon.index.names import SymbolIndex

    idx = SymbolIndex()
    for slot, name in enumerate(("НовыеДанныеСообщения", "СуммаНДС", "СтавкаНДСПоУмолчанию", "НДССАванса")):
        idx.add(slot, name, kind="function")
    res = idx.search("НДС", 10)
    assert [m for _, _, m in res] == ["prefix", "part", "part", "camelhump"]
    assert {s for s, _, m in res if m == "part"} == {1, 2}
    # not an acronym: CamelHump as before, no part tier
    assert [m for _, _, m in idx.search("НоДаС", 10)] == ["camelhump"]


def test_an_acronym_query_puts_the_texts_that_hold_it_before_its_camelhump_expansions():
    st = _state(
        [
            _proc("CommonModules/Сообщения/Module.bsl", "ОбщийМодуль.Сообщения", "НовыеДанныеСообщения", "Процедура"),
            _proc("CommonModules/Налоги/Module.bsl", "ОбщийМодуль.Налоги", "Рассчитать", "Сумма НДС с авансов"),
            _proc("CommonModules/Налоги/Module.bsl", "ОбщийМодуль.Налоги", "СуммаНДС", "Процедура СуммаНДС()"),
        ]
    )
    hits = _rank(Ranker(st, root=ROOT), "НДС")
    assert [h.name for h in hits] == ["СуммаНДС", "Рассчитать", "НовыеДанныеСообщения"]
    assert [h.match for h in hits] == ["part", "", "camelhump"]


def _obj(path: str, typ: str, name: str, synonym: str) -> Chunk:
    return Chunk(
        id=f"{path}::",
        path=path,
        kind="object",
        name=name,
        owner=f"{typ}.{name}",
        object_type=typ,
        symbol=None,
        synonym={"ru": synonym},
        text=f"{typ} {name}\nСиноним: {synonym}",
    )


def _handler(path: str, owner: str, name: str, module_kind: str, text: str) -> Chunk:
    return msgspec.structs.replace(
        _proc(path, owner, name, text), object_type=owner.partition(".")[0], module_kind=module_kind
    )


NAMED = [
    _obj("Documents/Анкета.xml", "Документ", "Анкета", "Анкета"),
    _obj("Catalogs/Пользователи.xml", "Справочник", "Пользователи", "Пользователи"),
    _obj("InformationRegisters/СведенияОПользователях.xml", "РегистрСведений", "СведенияОПользователях", "Сведения"),
    _handler("Documents/Анкета/Ext/ObjectModule.bsl", "Документ.Анкета", "ОбработкаПроведения", "object", "Процедура"),
    _handler(
        "Documents/Встреча/Ext/ObjectModule.bsl",
        "Документ.Встреча",
        "ОбработкаПроведения",
        "object",
        "обработка проведения документа: движения по регистрам анкета",
    ),
    _handler(
        "Catalogs/Пользователи/Forms/ФормаСписка/Ext/Form/Module.bsl",
        "Справочник.Пользователи.Форма.ФормаСписка",
        "ПриСозданииНаСервере",
        "form",
        "Процедура",
    ),
    _handler(
        "Catalogs/Пользователи/Forms/ФормаЭлемента/Ext/Form/Module.bsl",
        "Справочник.Пользователи.Форма.ФормаЭлемента",
        "ПриСозданииНаСервере",
        "form",
        "Процедура",
    ),
    _proc("CommonModules/ОбщегоНазначения/Module.bsl", "ОбщийМодуль.ОбщегоНазначения", "ЗначениеРеквизитаОбъекта"),
    _proc("CommonModules/Реквизиты/Module.bsl", "ОбщийМодуль.Реквизиты", "Прочитать", "значение реквизита объекта"),
]


def test_the_handler_of_a_named_object_and_the_stored_object_come_first():
    st = _state(NAMED)
    ranker = Ranker(st, root=ROOT)
    off = Ranker(st, root=ROOT, params=replace(RankingParams(), named_object_first=False))
    q = "обработка проведения документа анкета"
    handler = "Documents/Анкета/Ext/ObjectModule.bsl::ОбработкаПроведения"
    assert _rank(off, q)[0].id != handler  # the object and the other document's handler (its text) rank higher
    assert _rank(ranker, q)[0].id == handler
    form = _rank(ranker, "при создании на сервере формы списка пользователей")
    assert form[0].owner == "Справочник.Пользователи.Форма.ФормаСписка"
    assert _rank(ranker, "где хранятся данные о пользователях")[0].id == "Catalogs/Пользователи.xml::"
    # filters still hold: a handler they leave out is not put first
    from daemon.contract import Filters

    hits = _rank(ranker, q, filters=Filters(scope="metadata"))
    assert all(h.kind == "object" for h in hits)


def test_a_question_that_spells_a_method_name_is_answered_by_that_method():
    st = _state(NAMED)
    q = "значение реквизита объекта"
    off = Ranker(st, root=ROOT, params=replace(RankingParams(), spelled_name_first=False))
    assert _rank(off, q)[0].name == "Прочитать"  # its text is the question
    assert _rank(Ranker(st, root=ROOT), q)[0].name == "ЗначениеРеквизитаОбъекта"


def test_fan_in_reorders_the_api_channel_only_when_weighted():
    from .test_ranker import CHUNKS, MODULE, SERVICE

    st = _state(CHUNKS)
    q = "курс валюты на дату"
    plain = Ranker(st, root=ROOT)
    by_id = {h.id: h.ranks.get("api") for h in _rank(plain, q)}
    assert by_id[f"{MODULE}::КурсВалюты"] == 1
    callers = {f"{SERVICE}::КурсВалютыНаДату": 1000}
    st.fan_in = lambda ids: [callers.get(i, 0) for i in ids]  # what the reference graph would count
    assert {h.id: h.ranks.get("api") for h in _rank(plain, q)} == by_id  # weight 0: fan-in is not asked
    weighted = Ranker(st, root=ROOT, params=replace(RankingParams(), api_fanin_weight=1.0))
    assert {h.id: h.ranks.get("api") for h in _rank(weighted, q)}[f"{SERVICE}::КурсВалютыНаДату"] == 1


def test_a_field_named_with_its_object_comes_first_also_when_stemmed_differently():
    prof = "Catalogs/ПрофилиГруппДоступа.xml"
    chunks = [
        _obj(prof, "Справочник", "ПрофилиГруппДоступа", "Профили групп доступа"),
        Chunk(
            id=f"{prof}::ТабличнаяЧасть:Роли",
            path=prof,
            kind="tabular_section",
            name="Роли",
            owner="Справочник.ПрофилиГруппДоступа",
            object_type="Справочник",
            symbol="ТабличнаяЧасть:Роли",
            text="ТабличнаяЧасть Роли",
        ),
        _proc(
            "CommonModules/Доступ/Module.bsl", "ОбщийМодуль.Доступ", "Роли", "роли профиля групп доступа перечислены"
        ),
    ]
    st = _state(chunks)
    q = "где в профиле групп доступа перечислены роли"  # "профиле" stems to профил, "Профили" to проф
    off = Ranker(st, root=ROOT, params=replace(RankingParams(), named_field_first=False))
    assert _rank(off, q)[0].id != f"{prof}::ТабличнаяЧасть:Роли"
    hits = _rank(Ranker(st, root=ROOT), q)
    assert [h.id for h in hits[:2]] == [f"{prof}::ТабличнаяЧасть:Роли", f"{prof}::"]
    exact_stems = Ranker(st, root=ROOT, params=replace(RankingParams(), object_word_variants=False))
    assert _rank(exact_stems, q)[0].id != f"{prof}::ТабличнаяЧасть:Роли"


def test_a_latin_acronym_spelled_in_cyrillic_finds_the_latin_name():
    st = _state(
        [
            _proc("CommonModules/Сообщения/Module.bsl", "ОбщийМодуль.Сообщения", "ОтправитьSMS", "ОтправитьSMS(), SMS"),
            _proc("CommonModules/Почта/Module.bsl", "ОбщийМодуль.Почта", "Отправить", "отправить письмо"),
        ]
    )
    q = "отправить смс"
    assert _rank(Ranker(st, root=ROOT), q)[0].name == "ОтправитьSMS"
    off = Ranker(st, root=ROOT, params=replace(RankingParams(), latin_acronyms=False))
    assert _rank(off, q)[0].name == "Отправить"


def test_a_where_how_question_gets_half_the_uncued_metadata_share_and_no_api_prior():
    from .test_ranker import CHUNKS

    ranker = Ranker(_state(CHUNKS), root=ROOT)
    where = ranker.cues("где пересчитывается кратность курса")
    noun = ranker.cues("кратность курса валюты")
    assert where.where_how and where.uncued and noun.uncued and not noun.where_how
    _, w_where, _ = ranker.channels(where, "lexical", None)
    _, w_noun, _ = ranker.channels(noun, "lexical", None)
    p = RankingParams()
    assert w_where["meta"] == w_noun["meta"] * p.where_how_uncued_share
    assert w_where["api"] == p.api_prior_weight * p.api_where_how_share and w_noun["api"] == p.api_prior_weight


def test_fan_in_orders_a_name_querys_equal_matches_only_when_weighted():
    from daemon.sources.references import chunk_module_with_references

    fn = "Функция Представление() Экспорт\n\tВозврат 1;\nКонецФункции\n"
    modules = {  # two equal public copies; the longer path is the one the export calls
        "CommonModules/Т/Module.bsl": ("Т", fn),
        "CommonModules/Общий/Module.bsl": ("Общий", fn),
        "CommonModules/Клиент/Module.bsl": (
            "Клиент",
            "Процедура Показать() Экспорт\n\tА = Общий.Представление();\n"
            "\tБ = Общий.Представление();\nКонецПроцедуры\n",
        ),
    }
    chunks, records = [], []
    for path, (name, text) in modules.items():
        got, refs = chunk_module_with_references(
            text, path=path, owner=f"ОбщийМодуль.{name}", object_type="ОбщийМодуль", module_kind="common"
        )
        chunks += got
        records.append(refs)
    st = _state(chunks)
    st.refs.update(records)
    called = "CommonModules/Общий/Module.bsl::Представление"
    assert st.fan_in([called, "CommonModules/Т/Module.bsl::Представление"]) == [2, 0]
    asked = []
    real = st.fan_in
    st.fan_in = lambda ids: asked.append(list(ids)) or real(ids)

    def order(ranker: Ranker, q: str) -> list[str]:
        return [st.store.ids[s] for s, _, _ in ranker.name_hits(ranker.cues(q, None), 10, None)]

    plain = Ranker(st, root=ROOT, params=replace(RankingParams(), names_fanin_weight=0.0))
    assert order(plain, "Представление")[0] == "CommonModules/Т/Module.bsl::Представление"  # the shorter key
    assert asked == []  # weight 0: the graph is not asked
    weighted = Ranker(st, root=ROOT, params=replace(RankingParams(), names_fanin_weight=0.1))
    assert order(weighted, "Представление")[0] == called
    assert _rank(weighted, "Представление")[0].id == called
    # a qualified name keeps the channel's order (its container's match kind is not in the hits)
    asked.clear()
    assert order(weighted, "Т.Представление") == order(plain, "Т.Представление")
    assert asked == []


def test_a_questions_finite_verb_finds_the_name_that_uses_its_noun():
    catch = "CommonModules/Методы/Module.bsl"
    st = _state(
        [
            _proc(catch, "ОбщийМодуль.Методы", "ВыполнитьСПерехватомОшибки", "Процедура ВыполнитьСПерехватомОшибки()"),
            _proc("CommonModules/Тесты/Module.bsl", "ОбщийМодуль.Тесты", "ВыполнитьТест", "Процедура ВыполнитьТест()"),
        ]
    )
    q = "где выполняется тест и перехватывает ошибки"
    off = Ranker(st, root=ROOT, params=replace(RankingParams(), russian_word_forms=False))
    assert _rank(off, q)[0].name == "ВыполнитьТест"
    assert _rank(Ranker(st, root=ROOT), q)[0].name == "ВыполнитьСПерехватомОшибки"


def test_a_name_query_puts_production_code_before_test_code_of_the_same_match_kind():
    st = _state(
        [
            msgspec.structs.replace(
                _proc(IN_TESTS, "ОбщийМодуль.ОМ_ОтчетJUnit", "ЗаписатьОбъект", "Процедура ЗаписатьОбъект() Экспорт"),
                export=True,
            ),
            _proc(PROD, "ОбщийМодуль.ОтчетJUnit", "ЗаписатьОбъект", "Процедура ЗаписатьОбъект()"),
            _proc(PROD, "ОбщийМодуль.ОтчетJUnit", "ЗаписатьОбъектыПакетом", "Процедура ЗаписатьОбъектыПакетом()"),
        ]
    )
    off = Ranker(st, root=ROOT, params=replace(RankingParams(), test_code_factor=1.0))
    assert [h.path for h in _rank(off, "ЗаписатьОбъект")][:2] == [IN_TESTS, PROD]  # the exported copy first
    hits = _rank(Ranker(st, root=ROOT), "ЗаписатьОбъект")
    assert [(h.path, h.name) for h in hits] == [
        (PROD, "ЗаписатьОбъект"),
        (IN_TESTS, "ЗаписатьОбъект"),  # an exact match still comes before a prefix match
        (PROD, "ЗаписатьОбъектыПакетом"),
    ]
