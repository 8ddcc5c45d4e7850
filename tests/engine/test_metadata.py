"""Metadata chunker tests on the real corpora (truncated/invalid XML made in tmp_path)."""

from __future__ import annotations

import importlib.util
import json
import os
import time
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

import pytest
from shared_paths import EVAL_DIR

from daemon.contract import METADATA_KINDS, Chunk
from daemon.sources.files import SourceFile
from daemon.sources.metadata import FIELD_KINDS, chunk_metadata, chunk_metadata_bytes, missing_objects
from daemon.sources.scan import scan_export

_SCANS: dict[Path, object] = {}

_CHUNKS: dict[Path, tuple[list[Chunk], list]] = {}


def _scan(root: Path):
    if root not in _SCANS:
        _SCANS[root] = scan_export(root)
    return _SCANS[root]


def _all_chunks(root: Path) -> tuple[list[Chunk], list]:
    if root not in _CHUNKS:
        scan = _scan(root)
        chunks, skips = [], []
        for s in scan.metadata:
            c, k = chunk_metadata(root, s, scan.info.format)
            chunks += c
            skips += k
        _CHUNKS[root] = (chunks, skips)
    return _CHUNKS[root]


def _source(root: Path, rel: str) -> SourceFile:
    return next(s for s in _scan(root).metadata if s.path == rel)


def _chunk(root: Path, rel: str) -> dict[str | None, Chunk]:
    chunks, skips = chunk_metadata(root, _source(root, rel), _scan(root).info.format)
    assert skips == []
    return {c.symbol: c for c in chunks}


def _line(root: Path, rel: str, line1: int) -> str:
    data = (root / rel).read_bytes()
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    return data.decode("utf-8").split("\n")[line1 - 1]


def test_catalog_users_ru(ssl_ru):
    rel = "Catalogs/Пользователи.xml"
    by = _chunk(ssl_ru, rel)
    obj = by[None]
    assert obj.id == f"{rel}::" and obj.kind == "object" and obj.name == "Пользователи"
    assert obj.owner == "Справочник.Пользователи" and obj.object_type == "Справочник"
    assert obj.module_kind == "" and obj.synonym == {"ru": "Пользователи"}
    assert obj.comment.startswith("АПК:413")
    assert obj.properties["DescriptionLength"] == "100" and obj.properties["CodeLength"] == "0"
    assert obj.properties["Hierarchical"] == "false"
    assert obj.start_line == 3 and obj.end_line >= 1750
    assert _line(ssl_ru, rel, obj.name_range[0] + 1)[obj.name_range[1] : obj.name_range[3]] == "Пользователи"
    for word in (
        "Справочник",
        "Пользователи",
        "Недействителен",
        "ФизическоеЛицо",
        "Подразделение",
        "КонтактнаяИнформация",
        "ФормаЭлемента",
        "ПользователиИнформационнойБазы",
    ):
        assert word in obj.text, word

    attr = by["Реквизит:Недействителен"]
    assert attr.id == f"{rel}::Реквизит:Недействителен" and attr.kind == "attribute"
    assert (
        attr.name == "Недействителен" and attr.owner == "Справочник.Пользователи" and attr.object_type == "Справочник"
    )
    assert attr.types == ["Boolean"] and attr.synonym == {"ru": "Недействителен"}
    assert "<Attribute" in _line(ssl_ru, rel, attr.start_line)
    assert "</Attribute>" in _line(ssl_ru, rel, attr.end_line)
    assert "Пользователь больше не работает" in attr.text  # the tooltip

    assert by["Реквизит:Подразделение"].types == ["DefinedType.Подразделение"]
    assert by["Реквизит:Комментарий"].types == ["String"]  # length 0 = unlimited
    ts = by["ТабличнаяЧасть:КонтактнаяИнформация"]
    assert ts.kind == "tabular_section" and ts.name == "КонтактнаяИнформация"
    assert "<TabularSection" in _line(ssl_ru, rel, ts.start_line)
    assert "</TabularSection>" in _line(ssl_ru, rel, ts.end_line)
    ts_attr = by["Реквизит:КонтактнаяИнформация.Тип"]
    assert ts_attr.kind == "attribute" and ts_attr.name == "Тип"
    assert ts.start_line < ts_attr.start_line <= ts_attr.end_line < ts.end_line
    form = by["Форма:ФормаЭлемента"]
    assert form.kind == "form" and form.synonym == {"ru": "Форма элемента"}  # from Forms/ФормаЭлемента.xml
    assert form.properties == {"FormType": "Managed"}
    assert form.start_line == form.end_line and "<Form>ФормаЭлемента</Form>" in _line(ssl_ru, rel, form.start_line)
    cmd = by["Команда:ПользователиИнформационнойБазы"]
    assert cmd.kind == "command" and cmd.synonym == {"ru": "Пользователи информационной базы"}
    assert set(METADATA_KINDS) >= {c.kind for c in by.values()}


def test_information_register_dimensions_and_resources(ssl_ru):
    by = _chunk(ssl_ru, "InformationRegisters/КурсыВалют.xml")
    obj = by[None]
    assert obj.object_type == "РегистрСведений" and obj.owner == "РегистрСведений.КурсыВалют"
    assert obj.properties["InformationRegisterPeriodicity"] == "Day"
    assert obj.properties["WriteMode"] == "Independent"
    dim = by["Измерение:Валюта"]
    assert dim.kind == "dimension" and dim.types == ["CatalogRef.Валюты"]
    assert dim.properties["Master"] == "true" and dim.properties["MainFilter"] == "true"
    res = by["Ресурс:Кратность"]
    assert res.kind == "resource" and res.types == ["Number(10,0,nonnegative)"]
    assert by["Ресурс:Курс"].types == ["DefinedType.КурсВалюты"]
    cal = _chunk(ssl_ru, "InformationRegisters/ДанныеПроизводственногоКалендаря.xml")
    assert cal["Ресурс:ВидДня"].kind == "resource"
    assert any(c.kind == "dimension" for c in cal.values())


def test_task_addressing_attributes_and_defined_type(ssl_ru):
    by = _chunk(ssl_ru, "Tasks/ЗадачаИсполнителя.xml")
    a = by["РеквизитАдресации:Исполнитель"]
    assert a.kind == "addressing_attribute" and a.types == ["CatalogRef.ВнешниеПользователи", "CatalogRef.Пользователи"]
    assert a.properties["AddressingDimension"] == "InformationRegister.ИсполнителиЗадач.Dimension.Исполнитель"
    assert by[None].properties["Addressing"] == "InformationRegister.ИсполнителиЗадач"
    dt = _chunk(ssl_ru, "DefinedTypes/КурсВалюты.xml")[None]
    assert dt.types == ["Number(10,4,nonnegative)"] and "Number(10,4,nonnegative)" in dt.text
    c = _chunk(ssl_ru, "Constants/ИспользоватьПочтовыйКлиент.xml")[None]
    assert c.types == ["Boolean"] and c.object_type == "Константа"
    cm = _chunk(ssl_ru, "CommonModules/ОбщегоНазначения.xml")[None]
    assert cm.properties["Server"] == "true" and cm.properties["ClientManagedApplication"] == "false"
    assert cm.properties["ExternalConnection"] == "true"


def test_scheduled_job_and_event_subscription_carry_their_handler(ssl_ru):
    job = _chunk(ssl_ru, "ScheduledJobs/ЗагрузкаКурсовВалют.xml")[None]
    assert job.object_type == "РегламентноеЗадание"
    assert job.properties["MethodName"] == "CommonModule.РаботаСКурсамиВалютЛокализация.ПриЗагрузкеАктуальныхКурсов"
    assert job.properties["Use"] == "false" and job.properties["Predefined"] == "true"
    assert "ОбщийМодуль.РаботаСКурсамиВалютЛокализация.ПриЗагрузкеАктуальныхКурсов" in job.text
    sub = _chunk(ssl_ru, "EventSubscriptions/ЗаписатьВерсиюОбъекта.xml")[None]
    assert sub.object_type == "ПодпискаНаСобытие"
    assert sub.properties["Event"] == "BeforeWrite"
    assert sub.properties["Source"] == "DefinedType.ВерсионируемыеДанныеОбъект"
    assert "ОбщийМодуль.ВерсионированиеОбъектовСобытия.ЗаписатьВерсиюОбъекта" in sub.text
    # every scheduled job / subscription of the corpus names its handler in the text
    chunks, _ = _all_chunks(ssl_ru)
    for c in chunks:
        if c.kind == "object" and c.object_type in ("РегламентноеЗадание", "ПодпискаНаСобытие"):
            ref = c.properties.get("MethodName") or c.properties.get("Handler")
            assert ref and ref.startswith("CommonModule."), c.path
            assert "ОбщийМодуль." + ref.split(".", 1)[1] in c.text, c.path


def test_http_and_web_service_handlers(ssl_ru):
    http = _chunk(ssl_ru, "HTTPServices/exchange_dsl_1_0_0_1.xml")[None]
    assert http.properties["RootURL"] == "exchange_dsl_1_0_0_1"
    assert http.properties["URLTemplate.Версия"] == "/version [GET → ПолучитьВерсию_GET]"
    assert "ПолучитьВерсию_GET" in http.text
    ws = _chunk(ssl_ru, "WebServices/Exchange.xml")[None]
    assert ws.properties["Operation.Upload"] == "ВыполнитьВыгрузку" and "ВыполнитьВыгрузку" in ws.text


def test_nested_subsystem(ssl_ru):
    rel = "Subsystems/Администрирование/Subsystems/КонтрольРаботыПользователей.xml"
    obj = _chunk(ssl_ru, rel)[None]
    assert obj.owner == "Подсистема.Администрирование.Подсистема.КонтрольРаботыПользователей"
    assert obj.name == "КонтрольРаботыПользователей"
    parent = _chunk(ssl_ru, "Subsystems/Администрирование.xml")[None]
    assert "КонтрольРаботыПользователей" in parent.text


def test_catalog_users_en(ssl_en):
    by = _chunk(ssl_en, "Catalogs/Users.xml")
    obj = by[None]
    assert obj.owner == "Справочник.Users" and obj.object_type == "Справочник"  # Russian type
    assert obj.synonym == {"en": "Users"}
    assert obj.text.splitlines()[0] == "Справочник Users (Catalog)"
    assert "Attributes:" in obj.text  # English labels for an English configuration
    attr = by["Реквизит:IBUserID"]
    assert attr.kind == "attribute" and attr.name == "IBUserID" and attr.owner == "Справочник.Users"
    assert attr.synonym == {"en": "Infobase user ID"}
    assert by["Реквизит:ContactInformation.Type"].kind == "attribute"
    acc = _chunk(ssl_en, "Catalogs/EmailAccounts.xml")
    assert acc["Реквизит:OutgoingMailServer"].types and acc["Реквизит:OutgoingMailServerPort"].types


def _gold_metadata_items():
    gold = EVAL_DIR / "gold_dev.jsonl"
    if not gold.is_file():
        pytest.skip(f"gold set not found at {gold}")
    items = []
    for line in gold.read_text(encoding="utf-8").splitlines():
        if line.strip():
            q = json.loads(line)
            items += [(q["corpus"], r["path"], r["symbol"]) for r in q["relevant"] if r["path"].endswith(".xml")]
    return items


def test_every_gold_metadata_item_is_produced_with_its_exact_symbol(ssl_ru, ssl_en):
    """The key acceptance test: each (path, symbol) of a metadata answer in gold_dev.jsonl is
    the (path, symbol) of a chunk (symbol None = the object chunk)."""
    items = _gold_metadata_items()
    assert len(items) >= 60
    roots = {"ssl31-ru": ssl_ru, "ssl31-en": ssl_en}
    produced = {corpus: {(c.path, c.symbol) for c in _all_chunks(root)[0]} for corpus, root in roots.items()}
    missing = [(corpus, p, s) for corpus, p, s in items if (p, s) not in produced[corpus]]
    assert missing == []
    assert sum(1 for _c, _p, s in items if s is not None) >= 15  # fields, not only objects


def _validate_gold_module():
    path = EVAL_DIR / "validate_gold.py"
    if not path.is_file():
        pytest.skip(f"validate_gold.py not found at {path}")
    spec = importlib.util.spec_from_file_location("validate_gold", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _reference_symbols(full: Path) -> set[str]:
    """Every field symbol of a Designer descriptor, enumerated with the standard library the
    way shared/eval/validate_gold.py resolves them (independent of daemon.sources.metadata)."""
    md = "{http://v8.1c.ru/8.3/MDClasses}"
    obj = next(iter(ET.parse(full).getroot()))
    prefix_by_tag = {tag: prefix for tag, (_kind, prefix) in FIELD_KINDS.items()}
    out = set()

    def names(parent, tag):
        co = parent.find(md + "ChildObjects")
        for el in co.findall(md + tag) if co is not None else []:
            n = el.find(md + "Properties/" + md + "Name")
            yield el, (n.text if n is not None and n.text else (el.text or "")).strip()

    for tag, prefix in prefix_by_tag.items():
        for el, name in names(obj, tag):
            if name:
                out.add(f"{prefix}:{name}")
            if tag == "TabularSection":
                for _a, aname in names(el, "Attribute"):
                    out.add(f"Реквизит:{name}.{aname}")
    return out


@pytest.mark.parametrize("fixture", ["ssl_ru", "ssl_en"])
def test_field_symbols_match_the_gold_resolver_on_every_descriptor(fixture, request):
    root = request.getfixturevalue(fixture)
    vg = _validate_gold_module()
    chunks, skips = _all_chunks(root)
    assert skips == []
    mine: dict[str, set[str]] = {}
    for c in chunks:
        mine.setdefault(c.path, set())
        if c.symbol is not None:
            mine[c.path].add(c.symbol)
    for s in _scan(root).metadata:
        assert mine.get(s.path) == _reference_symbols(root / s.path), s.path
    # and the gold validator itself accepts every field symbol we produce (sampled: all of a
    # few field-rich objects, to keep the run short)
    for rel in (
        "Catalogs/Пользователи.xml",
        "Catalogs/Users.xml",
        "Tasks/ЗадачаИсполнителя.xml",
        "InformationRegisters/КурсыВалют.xml",
        "Documents/ЭлектронноеПисьмоИсходящее.xml",
    ):
        if rel in mine:
            for sym in mine[rel]:
                assert vg.md_symbol_error(str(root / rel), sym) is None, (rel, sym)


@pytest.mark.slow
def test_full_corpus_scan_and_chunking_ru(ssl_ru):
    t0 = time.perf_counter()
    scan = scan_export(ssl_ru)
    t1 = time.perf_counter()
    chunks, skips = [], []
    for s in scan.metadata:
        c, k = chunk_metadata(ssl_ru, s, scan.info.format)
        chunks += c
        skips += k
    t2 = time.perf_counter()
    kinds = Counter(c.kind for c in chunks)
    print(
        f"\nssl31-ru: scan {t1 - t0:.2f}s, metadata chunking {t2 - t1:.2f}s; {len(scan.metadata)} objects, "
        f"{len(chunks) - kinds['object']} field chunks {dict(kinds)}"
    )
    assert skips == []
    assert kinds["object"] == len(scan.metadata) == 2587
    assert len({c.id for c in chunks}) == len(chunks)  # ids unique within the export


@pytest.mark.parametrize("fixture", ["ssl_ru", "ssl_en", "yaxunit"])
def test_positions_point_at_the_names(fixture, request):
    """For every chunk: lines are inside the file, start <= end, and name_range (0-based line,
    UTF-16 columns) covers exactly the name text in the file."""
    root = request.getfixturevalue(fixture)
    chunks, skips = _all_chunks(root)
    assert skips == []
    cache: dict[str, list[str]] = {}
    for c in chunks:
        if c.path not in cache:
            data = (root / c.path).read_bytes()
            cache[c.path] = data.decode("utf-8-sig").split("\n")
        lines = cache[c.path]
        assert 1 <= c.start_line <= c.end_line <= len(lines), c.id
        l0, a, l1, b = c.name_range
        assert l0 == l1, c.id
        line = lines[l0]
        assert line.encode("utf-16-le")[2 * a : 2 * b].decode("utf-16-le") == c.name, c.id


def test_edt_catalog_kontragenty(yaxunit):
    rel = "fixtures/demo-configuration/src/Catalogs/Контрагенты/Контрагенты.mdo"
    by = _chunk(yaxunit, rel)
    obj = by[None]
    assert obj.id == f"{rel}::" and obj.owner == "Справочник.Контрагенты" and obj.object_type == "Справочник"
    assert obj.synonym == {"ru": "Контрагенты"}
    assert obj.properties["Hierarchical"] == "true" and obj.properties["CodeLength"] == "9"
    assert "договорные отношения" in obj.text  # <explanation>
    assert obj.start_line == 2
    region = by["Реквизит:Регион"]
    assert region.kind == "attribute" and region.types == ["CatalogRef.Регионы"]
    assert "Регион контрагента" in region.text  # <toolTip>
    assert by["Реквизит:Индекс"].types == ["String(10)"]
    assert by["Реквизит:Широта"].types == ["Number(10,6)"]
    assert "<attributes" in _line(yaxunit, rel, region.start_line)
    assert "</attributes>" in _line(yaxunit, rel, region.end_line)
    form = by["Форма:ФормаЭлемента"]
    assert form.kind == "form" and form.synonym == {"ru": "Форма элемента"}
    assert {s for s in by if s} >= {"Реквизит:ВидЦен", "Форма:ФормаСписка", "Форма:ФормаГруппы"}


def test_edt_document_register_and_services(yaxunit):
    d = _chunk(yaxunit, "fixtures/demo-configuration/src/Documents/РасходТовара/РасходТовара.mdo")
    assert "AccumulationRegister.Продажи" in d[None].properties["RegisterRecords"]
    assert d["ТабличнаяЧасть:Товары"].kind == "tabular_section"
    assert d["Реквизит:Товары.Цена"].kind == "attribute" and d["Реквизит:Товары.Цена"].name == "Цена"
    assert any(s and s.startswith("Макет:") for s in d)
    assert any(s and s.startswith("Команда:") for s in d)
    reg = _chunk(yaxunit, "fixtures/demo-configuration/src/AccumulationRegisters/ТоварныеЗапасы/ТоварныеЗапасы.mdo")
    assert reg["Измерение:Товар"].kind == "dimension" and reg["Ресурс:Количество"].kind == "resource"
    job = _chunk(yaxunit, "fixtures/demo-configuration/src/ScheduledJobs/СлияниеИндексаППД/СлияниеИндексаППД.mdo")[None]
    assert "ОбщийМодуль.РаботаСПолнотекстовымПоиском.СлияниеИндексаПолнотекстовогоПоиска" in job.text
    sub = _chunk(
        yaxunit, "fixtures/demo-configuration/src/EventSubscriptions/ПередЗаписьюДокумента/ПередЗаписьюДокумента.mdo"
    )[None]
    assert (
        sub.properties["Source"] == "DocumentObject"
        and "ОбщийМодуль.ПодпискиНаСобытия.ПередЗаписьюДокумента" in sub.text
    )
    http = _chunk(yaxunit, "fixtures/demo-configuration/src/HTTPServices/ОписанияТоваров/ОписанияТоваров.mdo")[None]
    assert http.properties["URLTemplate.V1_ВызовМетода"] == "/v1/{ИмяМетода} [POST → ВызовМетодаPOST]"
    cm = _chunk(yaxunit, "exts/yaxunit/src/CommonModules/ЮТест/ЮТест.mdo")[None]
    assert cm.properties["ClientManagedApplication"] == "true" and cm.properties["Server"] == "true"
    assert cm.synonym == {"ru": "Тест"}
    adopted = _chunk(yaxunit, "tests/src/Catalogs/Встречи/Встречи.mdo")[None]
    assert adopted.properties["ObjectBelonging"] == "Adopted"  # QUIRKS §6: borrowed into an extension
    chunks, skips = _all_chunks(yaxunit)
    assert skips == []
    assert Counter(c.kind for c in chunks)["object"] == 452


def test_truncated_and_invalid_xml_become_skips(ssl_ru, tmp_path):
    src = (ssl_ru / "Catalogs/Пользователи.xml").read_bytes()
    (tmp_path / "Catalogs").mkdir()
    cases = {
        "Catalogs/Половина.xml": src[: len(src) // 2],  # half-written
        "Catalogs/Пусто.xml": b"",
        "Catalogs/Мусор.xml": b"\x00\x01\x02 not xml",
        "Catalogs/Текст.xml": "Справочник, но не XML".encode(),
    }
    for rel, data in cases.items():
        (tmp_path / rel).write_bytes(data)
        source = SourceFile(path=rel, size=len(data), mtime_ns=1, owner="Справочник.X", object_type="Справочник")
        chunks, skips = chunk_metadata(tmp_path, source, "designer")
        assert chunks == []
        assert [s.reason for s in skips] == ["invalid_xml"], rel
        assert skips[0].path == rel and skips[0].detail  # the parser's message
    empty_obj = b'<?xml version="1.0"?><MetaDataObject xmlns="http://v8.1c.ru/8.3/MDClasses"/>'
    chunks, skips = chunk_metadata_bytes(empty_obj, SourceFile(path="Catalogs/E.xml", size=1, mtime_ns=1), "designer")
    assert chunks == [] and skips[0].reason == "not_metadata"  # well-formed, but no object inside
    missing = SourceFile(path="Catalogs/Нет.xml", size=1, mtime_ns=1)
    chunks, skips = chunk_metadata(tmp_path, missing, "designer")
    assert chunks == [] and skips[0].reason == "unreadable"


def test_broken_form_descriptor_costs_only_its_synonym(ssl_ru, tmp_path):
    (tmp_path / "Catalogs/Пользователи/Forms").mkdir(parents=True)
    (tmp_path / "Catalogs/Пользователи.xml").write_bytes((ssl_ru / "Catalogs/Пользователи.xml").read_bytes())
    (tmp_path / "Catalogs/Пользователи/Forms/ФормаЭлемента.xml").write_bytes(b"<?xml version='1.0'?><MetaDataObj")
    source = SourceFile(
        path="Catalogs/Пользователи.xml", size=1, mtime_ns=1, owner="Справочник.Пользователи", object_type="Справочник"
    )
    chunks, skips = chunk_metadata(tmp_path, source, "designer")
    by = {c.symbol: c for c in chunks}
    assert by["Форма:ФормаЭлемента"].synonym == {}
    assert [(s.path, s.reason) for s in skips] == [("Catalogs/Пользователи/Forms/ФормаЭлемента.xml", "invalid_xml")]


_MD = "http://v8.1c.ru/8.3/MDClasses"


def test_descriptor_reads_do_not_follow_links_or_open_fifos(ssl_ru, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    form = (
        f'<MetaDataObject xmlns="{_MD}"><Form><Properties><Name>ФормаЭлемента</Name><Synonym>'
        '<v8:item xmlns:v8="http://v8.1c.ru/8.1/data/core"><v8:lang>ru</v8:lang><v8:content>Чужой синоним</v8:content>'
        "</v8:item></Synonym></Properties></Form></MetaDataObject>"
    )
    (outside / "form.xml").write_text(form, encoding="utf-8")
    (outside / "users.xml").write_bytes((ssl_ru / "Catalogs/Пользователи.xml").read_bytes())
    root = tmp_path / "export"
    (root / "Catalogs/Пользователи/Forms").mkdir(parents=True)
    (root / "Catalogs/Пользователи.xml").write_bytes((ssl_ru / "Catalogs/Пользователи.xml").read_bytes())
    os.symlink(outside / "form.xml", root / "Catalogs/Пользователи/Forms/ФормаЭлемента.xml")
    users = SourceFile(
        path="Catalogs/Пользователи.xml", size=1, mtime_ns=1, owner="Справочник.Пользователи", object_type="Справочник"
    )
    chunks, skips = chunk_metadata(root, users, "designer")
    assert {c.symbol: c for c in chunks}["Форма:ФормаЭлемента"].synonym == {}
    assert [(s.path, s.reason) for s in skips] == [("Catalogs/Пользователи/Forms/ФормаЭлемента.xml", "symlink")]
    # a linked Forms folder is not entered either
    os.unlink(root / "Catalogs/Пользователи/Forms/ФормаЭлемента.xml")
    os.rmdir(root / "Catalogs/Пользователи/Forms")
    (outside / "Forms").mkdir()
    (outside / "Forms/ФормаЭлемента.xml").write_text(form, encoding="utf-8")
    os.symlink(outside / "Forms", root / "Catalogs/Пользователи/Forms")
    chunks, skips = chunk_metadata(root, users, "designer")
    assert {c.symbol: c for c in chunks}["Форма:ФормаЭлемента"].synonym == {}
    # the descriptor itself: a link is a skip, a FIFO is not opened
    (root / "Catalogs/Валюты.xml").symlink_to(outside / "users.xml")
    link = SourceFile(
        path="Catalogs/Валюты.xml", size=1, mtime_ns=1, owner="Справочник.Валюты", object_type="Справочник"
    )
    chunks, skips = chunk_metadata(root, link, "designer")
    assert chunks == [] and [s.reason for s in skips] == ["symlink"] and str(outside / "users.xml") in skips[0].detail
    os.mkfifo(root / "Catalogs/Труба.xml")
    fifo = SourceFile(path="Catalogs/Труба.xml", size=1, mtime_ns=1, owner="Справочник.Труба", object_type="Справочник")
    chunks, skips = chunk_metadata(root, fifo, "designer")
    assert chunks == [] and [s.reason for s in skips] == ["not_regular"]


def test_missing_objects_ru(ssl_ru):
    notes = missing_objects(ssl_ru)
    assert {s.reason for s in notes} == {"missing_on_disk"}
    paths = {s.path for s in notes}
    # shared/corpora/README.md: 104 of 107 roles and 32 of 78 data processors were dropped
    assert Counter(p.split("/")[0] for p in paths) == {"Roles": 104, "DataProcessors": 32}
    assert all(not (ssl_ru / p).exists() for p in paths)
    excluded = Path(ssl_ru.parent / "ssl31-ru.EXCLUDED.tsv")
    if excluded.is_file():
        dropped = {
            line.split("\t", 1)[0]
            for line in excluded.read_text(encoding="utf-8").splitlines()[1:]
            if line.count("/") == 1 and line.split("\t", 1)[0].endswith(".xml")
        }
        assert paths == dropped
    assert "Roles/ПолныеПрава.xml" not in paths
    assert any("Role." in s.detail for s in notes)


def test_missing_objects_en_and_edt(ssl_en, yaxunit):
    en = missing_objects(ssl_en)
    # the English subset left out whole object types (shared/corpora/README.md): they are listed but absent
    assert {p.split("/")[0] for p in (s.path for s in en)} >= {
        "InformationRegisters",
        "Roles",
        "Reports",
        "DataProcessors",
    }
    assert not any(s.path.startswith("Catalogs/") for s in en)
    assert missing_objects(yaxunit) == []


def test_entity_references_are_left_unresolved_not_a_parse_failure(ssl_ru):
    """A descriptor with a DTD entity (never in a real dump) keeps its object; the entity is
    not expanded (``resolve_entities`` off), so its text is simply absent."""
    rel = "FunctionalOptions/ИспользоватьЗаметки.xml"
    src = (ssl_ru / rel).read_text(encoding="utf-8-sig")
    head, sep, rest = src.partition("?>")
    assert sep and "<Location>" in rest
    start, end = rest.index("<Location>") + len("<Location>"), rest.index("</Location>")
    data = (
        head
        + sep
        + '\n<!DOCTYPE MetaDataObject [ <!ENTITY loc "Constant.ИспользоватьЗаметки"> ]>'
        + rest[:start]
        + "&loc;"
        + rest[end:]
    ).encode()
    chunks, skips = chunk_metadata_bytes(data, SourceFile(path=rel, size=len(data), mtime_ns=1), "designer")
    assert skips == [] and chunks and chunks[0].name == "ИспользоватьЗаметки"
    assert chunks[0].properties.get("Location", "") == ""
