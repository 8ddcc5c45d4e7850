"""Scanner tests (daemon/sources/scan.py, daemon/sources/files.py) on small trees and files made in
tmp_path: layouts, module identity, encodings, links, FIFOs, unreadable folders, watcher batches."""

from __future__ import annotations

import os
import shutil
import unicodedata
from pathlib import Path

import pytest

from daemon.contract import (
    CONFIGURATION,
    OBJECT_TYPES,
    english_type,
    normalize_object_type,
    object_type_aliases,
    type_folder,
)
from daemon.sources.files import ModuleIdentity, SkipFile, content_hash, read_regular_bytes, read_text
from daemon.sources.scan import detect_export, module_identity, scan_export


def test_object_types_cover_the_brief_and_are_consistent():
    for folder in (
        "CommonModules",
        "Catalogs",
        "Documents",
        "InformationRegisters",
        "AccumulationRegisters",
        "AccountingRegisters",
        "CalculationRegisters",
        "ChartsOfCharacteristicTypes",
        "ChartsOfAccounts",
        "ChartsOfCalculationTypes",
        "BusinessProcesses",
        "Tasks",
        "ExchangePlans",
        "Enums",
        "Constants",
        "Reports",
        "DataProcessors",
        "DocumentJournals",
        "CommonForms",
        "CommonCommands",
        "CommonTemplates",
        "CommonPictures",
        "CommonAttributes",
        "EventSubscriptions",
        "ScheduledJobs",
        "SessionParameters",
        "FunctionalOptions",
        "FunctionalOptionsParameters",
        "DefinedTypes",
        "SettingsStorages",
        "FilterCriteria",
        "HTTPServices",
        "WebServices",
        "XDTOPackages",
        "Subsystems",
        "Roles",
        "Languages",
        "StyleItems",
        "CommandGroups",
        "DocumentNumerators",
        "Sequences",
        "ExternalDataSources",
        "IntegrationServices",
        "Bots",
        "WSReferences",
        "Styles",
        "Interfaces",
    ):
        assert folder in OBJECT_TYPES, folder
    assert OBJECT_TYPES["CommonModules"] == ("ОбщийМодуль", "CommonModule")
    assert OBJECT_TYPES["ChartsOfCharacteristicTypes"][0] == "ПланВидовХарактеристик"
    assert OBJECT_TYPES["DataProcessors"][0] == "Обработка"
    assert OBJECT_TYPES["EventSubscriptions"][0] == "ПодпискаНаСобытие"
    assert OBJECT_TYPES["ScheduledJobs"][0] == "РегламентноеЗадание"
    assert OBJECT_TYPES["HTTPServices"][0] == "HTTPСервис"
    assert OBJECT_TYPES["WebServices"][0] == "WebСервис"
    ru = [v[0] for v in OBJECT_TYPES.values()]
    en = [v[1] for v in OBJECT_TYPES.values()]
    assert len(set(ru)) == len(ru) and len(set(en)) == len(en)
    for folder, (r, e) in OBJECT_TYPES.items():
        assert normalize_object_type(folder) == r
        assert normalize_object_type(r) == r
        assert normalize_object_type(e) == r
        assert english_type(r) == e
        assert type_folder(r) == folder and type_folder(e) == folder


@pytest.mark.parametrize(
    "alias, expected",
    [
        ("Catalog", "Справочник"),
        ("catalogs", "Справочник"),
        ("CATALOG", "Справочник"),
        ("справочник", "Справочник"),
        ("Справочники", "Справочник"),
        ("  Document ", "Документ"),
        ("РегистрыСведений", "РегистрСведений"),
        ("informationregister", "РегистрСведений"),
        ("Отчёт", "Отчет"),  # ё typed for е
        ("ОТЧЕТЫ", "Отчет"),
        ("httpservice", "HTTPСервис"),
        ("ПакетXDTO", "ПакетXDTO"),
        ("Configuration", CONFIGURATION),
        ("Конфигурация", CONFIGURATION),
        ("Nonsense", None),
        ("", None),
    ],
)
def test_normalize_object_type(alias, expected):
    assert normalize_object_type(alias) == expected


def test_object_type_aliases_shape():
    aliases = object_type_aliases()
    assert aliases["catalog"] == "Справочник"
    assert all(k == k.casefold() for k in aliases)
    assert english_type(CONFIGURATION) == "Configuration"
    assert english_type("Нечто") is None


def test_detect_edt_project_root_and_unknown(tmp_path):
    (tmp_path / "src" / "Configuration").mkdir(parents=True)
    (tmp_path / "src" / "Configuration" / "Configuration.mdo").write_text(
        '<?xml version="1.0" encoding="UTF-8"?>\n<mdclass:Configuration xmlns:mdclass="x">\n  <name>Demo</name>\n'
        "</mdclass:Configuration>\n",
        encoding="utf-8",
    )
    info = detect_export(tmp_path)
    assert info.format == "edt"
    assert [(p.path, p.src, p.name) for p in info.projects] == [("", "src", "Demo")]
    # the root may also be the src folder itself
    info = detect_export(tmp_path / "src")
    assert [(p.path, p.src) for p in info.projects] == [("", "")]
    assert module_identity("CommonModules/X/Module.bsl", "edt") == ModuleIdentity(
        "ОбщийМодуль.X", "ОбщийМодуль", "common"
    )
    empty = tmp_path / "empty"
    empty.mkdir()
    assert detect_export(empty).format == "unknown"


@pytest.mark.parametrize(
    "rel, fmt, expected",
    [
        (
            "CommonModules/ОбщегоНазначения/Ext/Module.bsl",
            "designer",
            ("ОбщийМодуль.ОбщегоНазначения", "ОбщийМодуль", "common"),
        ),
        ("Catalogs/Пользователи/Ext/ObjectModule.bsl", "designer", ("Справочник.Пользователи", "Справочник", "object")),
        (
            "Catalogs/Пользователи/Ext/ManagerModule.bsl",
            "designer",
            ("Справочник.Пользователи", "Справочник", "manager"),
        ),
        (
            "InformationRegisters/КурсыВалют/Ext/RecordSetModule.bsl",
            "designer",
            ("РегистрСведений.КурсыВалют", "РегистрСведений", "recordset"),
        ),
        (
            "Constants/ИспользоватьПочтовыйКлиент/Ext/ValueManagerModule.bsl",
            "designer",
            ("Константа.ИспользоватьПочтовыйКлиент", "Константа", "value_manager"),
        ),
        (
            "Catalogs/Пользователи/Forms/ФормаЭлемента/Ext/Form/Module.bsl",
            "designer",
            ("Справочник.Пользователи.Форма.ФормаЭлемента", "Справочник", "form"),
        ),
        ("CommonForms/Вопрос/Ext/Form/Module.bsl", "designer", ("ОбщаяФорма.Вопрос", "ОбщаяФорма", "form")),
        (
            "Catalogs/Пользователи/Commands/ПользователиИнформационнойБазы/Ext/CommandModule.bsl",
            "designer",
            ("Справочник.Пользователи.Команда.ПользователиИнформационнойБазы", "Справочник", "command"),
        ),
        (
            "CommonCommands/ИсторияИзменений/Ext/CommandModule.bsl",
            "designer",
            ("ОбщаяКоманда.ИсторияИзменений", "ОбщаяКоманда", "command"),
        ),
        ("Ext/SessionModule.bsl", "designer", (CONFIGURATION, CONFIGURATION, "session")),
        ("Ext/ManagedApplicationModule.bsl", "designer", (CONFIGURATION, CONFIGURATION, "managed_application")),
        ("Ext/OrdinaryApplicationModule.bsl", "designer", (CONFIGURATION, CONFIGURATION, "ordinary_application")),
        ("Ext/ExternalConnectionModule.bsl", "designer", (CONFIGURATION, CONFIGURATION, "external_connection")),
        (
            "HTTPServices/ОткрытаяАвторизацияПочтовогоСервиса/Ext/Module.bsl",
            "designer",
            ("HTTPСервис.ОткрытаяАвторизацияПочтовогоСервиса", "HTTPСервис", "http_service"),
        ),
        ("WebServices/Exchange/Ext/Module.bsl", "designer", ("WebСервис.Exchange", "WebСервис", "web_service")),
        (
            "CalculationRegisters/Начисления/Recalculations/Перерасчет1/Ext/RecordSetModule.bsl",
            "designer",
            ("РегистрРасчета.Начисления.Перерасчет.Перерасчет1", "РегистрРасчета", "recordset"),
        ),
        # English corpus: same folders, English names, Russian type in the owner
        ("CommonModules/Common/Ext/Module.bsl", "designer", ("ОбщийМодуль.Common", "ОбщийМодуль", "common")),
        (
            "Catalogs/Users/Forms/ItemForm/Ext/Form/Module.bsl",
            "designer",
            ("Справочник.Users.Форма.ItemForm", "Справочник", "form"),
        ),
        # EDT, multi-project prefixes
        ("exts/yaxunit/src/CommonModules/ЮТест/Module.bsl", "edt", ("ОбщийМодуль.ЮТест", "ОбщийМодуль", "common")),
        (
            "fixtures/demo-configuration/src/Catalogs/Контрагенты/ObjectModule.bsl",
            "edt",
            ("Справочник.Контрагенты", "Справочник", "object"),
        ),
        (
            "fixtures/demo-configuration/src/Catalogs/Контрагенты/Forms/ФормаЭлемента/Module.bsl",
            "edt",
            ("Справочник.Контрагенты.Форма.ФормаЭлемента", "Справочник", "form"),
        ),
        (
            "fixtures/demo-configuration/src/Configuration/SessionModule.bsl",
            "edt",
            (CONFIGURATION, CONFIGURATION, "session"),
        ),
        (
            "exts/yaxunit/src/Configuration/ManagedApplicationModule.bsl",
            "edt",
            (CONFIGURATION, CONFIGURATION, "managed_application"),
        ),
        (
            "exts/yaxunit/src/CommonForms/ЮТЗапускТестов/Module.bsl",
            "edt",
            ("ОбщаяФорма.ЮТЗапускТестов", "ОбщаяФорма", "form"),
        ),
        (
            "fixtures/demo-configuration/src/Catalogs/Товары/Commands/ПечатьШтрихкода/CommandModule.bsl",
            "edt",
            ("Справочник.Товары.Команда.ПечатьШтрихкода", "Справочник", "command"),
        ),
        ("tests/src/Documents/ПриходТовара/ObjectModule.bsl", "edt", ("Документ.ПриходТовара", "Документ", "object")),
        (
            "fixtures/demo-configuration/src/HTTPServices/ОписанияТоваров/Module.bsl",
            "edt",
            ("HTTPСервис.ОписанияТоваров", "HTTPСервис", "http_service"),
        ),
        # unknown layouts: still an identity, kind "other"
        ("Catalogs/X/Ext/Strange/ObjectModule.bsl", "designer", ("Справочник.X", "Справочник", "other")),
        ("Catalogs/X/Module.bsl", "designer", ("Справочник.X", "Справочник", "other")),
        ("scripts/build.bsl", "designer", ("", "", "other")),
        ("exts/yaxunit/.settings/templates/common_module.bsl", "edt", ("", "", "other")),
        ("Ext/Other.bsl", "designer", ("", "", "other")),
        ("exts/yaxunit/src/Configuration/Unknown.bsl", "edt", (CONFIGURATION, CONFIGURATION, "other")),
        # unknown format: Designer rules, then EDT rules
        ("CommonModules/X/Ext/Module.bsl", "unknown", ("ОбщийМодуль.X", "ОбщийМодуль", "common")),
        ("p/src/CommonModules/X/Module.bsl", "unknown", ("ОбщийМодуль.X", "ОбщийМодуль", "common")),
    ],
)
def test_module_identity_layouts(rel, fmt, expected):
    assert module_identity(rel, fmt) == ModuleIdentity(*expected)


def test_module_identity_normalises_paths():
    nfd = unicodedata.normalize("NFD", "CommonModules/Пользователи/Ext/Module.bsl")
    ident = module_identity(nfd, "designer")
    assert ident.owner == "ОбщийМодуль.Пользователи"
    assert unicodedata.is_normalized("NFC", ident.owner)
    assert module_identity("CommonModules\\X\\Ext\\Module.bsl", "designer").owner == "ОбщийМодуль.X"
    assert module_identity("Catalogs/X.xml", "designer") is None


def _designer_skeleton(root: Path) -> None:
    (root / "Configuration.xml").write_bytes(b'\xef\xbb\xbf<?xml version="1.0"?><MetaDataObject version="2.20"/>')
    for rel in ("CommonModules/A/Ext", "CommonModules/B/Ext", "Catalogs/C/Ext", ".git/objects", ".bsl-lens", "Ext"):
        (root / rel).mkdir(parents=True, exist_ok=True)


def test_scan_skip_reasons_and_ignored_folders(tmp_path):
    _designer_skeleton(tmp_path)
    (tmp_path / "CommonModules/A/Ext/Module.bsl").write_bytes(b"\xef\xbb\xbfProcedure A()\r\nEndProcedure\r\n")
    (tmp_path / "CommonModules/B/Ext/Module.bsl").write_bytes(b"Proc\x00edure")
    (tmp_path / "Catalogs/C/Ext/ObjectModule.bsl").write_bytes(b"x" * 2000)
    (tmp_path / ".git/objects/Module.bsl").write_text("ignored")
    (tmp_path / ".bsl-lens/Module.bsl").write_text("ignored")
    (tmp_path / "CommonModules/A.xml").write_text("<x/>")
    (tmp_path / "Ext/SessionModule.bsl").write_text("")
    scan = scan_export(tmp_path, max_file_bytes=1000)
    assert [m.path for m in scan.modules] == ["CommonModules/A/Ext/Module.bsl", "Ext/SessionModule.bsl"]
    assert [(s.path, s.reason) for s in scan.skipped] == [
        ("Catalogs/C/Ext/ObjectModule.bsl", "too_large"),
        ("CommonModules/B/Ext/Module.bsl", "binary"),
    ]
    assert [m.path for m in scan.metadata] == ["CommonModules/A.xml"]
    assert scan.modules[1].module_kind == "session"


def test_scan_nfd_names_are_reported_in_nfc(tmp_path):
    _designer_skeleton(tmp_path)
    nfd_name = unicodedata.normalize("NFD", "Йогурт")
    d = tmp_path / "CommonModules" / nfd_name / "Ext"
    d.mkdir(parents=True)
    (d / "Module.bsl").write_text("// x", encoding="utf-8")
    scan = scan_export(tmp_path)
    m = next(m for m in scan.modules if "Ext/Module.bsl" in m.path and "Йогурт" in unicodedata.normalize("NFC", m.path))
    assert m.path == "CommonModules/Йогурт/Ext/Module.bsl"
    assert m.owner == "ОбщийМодуль.Йогурт"
    assert m.fs_path(tmp_path).is_file()


_CATALOG_XML = (
    '<?xml version="1.0" encoding="UTF-8"?>\n'
    '<MetaDataObject xmlns="http://v8.1c.ru/8.3/MDClasses" version="2.20">\n'
    "<Catalog><Properties><Name>{name}</Name></Properties><ChildObjects>{children}</ChildObjects></Catalog>\n"
    "</MetaDataObject>\n"
)


def test_scan_never_follows_symlinks(tmp_path):
    root = tmp_path / "export"
    outside = tmp_path / "outside"
    (outside / "Lib/Ext").mkdir(parents=True)
    (outside / "secret.txt").write_text("Процедура Секрет() КонецПроцедуры", encoding="utf-8")
    (outside / "Чужой.xml").write_text(_CATALOG_XML.format(name="Чужой", children=""), encoding="utf-8")
    (outside / "Lib/Ext/Module.bsl").write_text("Процедура Чужая() КонецПроцедуры", encoding="utf-8")
    root.mkdir()
    _designer_skeleton(root)
    (root / "CommonModules/A/Ext/Module.bsl").write_text("// ok", encoding="utf-8")
    links = {
        "CommonModules/A/Ext/Link.bsl": "/etc/passwd",
        "CommonModules/B/Ext/Module.bsl": str(outside / "secret.txt"),
        "Catalogs/Валюты.xml": str(outside / "Чужой.xml"),
        "Catalogs/Висячий.xml": str(outside / "nowhere.xml"),  # dangling
        "CommonModules/Lib": str(outside / "Lib"),  # a folder
        "CommonModules/Рядом.bsl": "A/Ext/Module.bsl",  # relative, inside the root: still not followed
    }
    for rel, target in links.items():
        os.symlink(target, root / rel)
    (root / "Catalogs/C/Forms").mkdir(parents=True)
    (root / "Catalogs/C.xml").write_text(_CATALOG_XML.format(name="C", children="<Form>Ф</Form>"), encoding="utf-8")
    os.symlink(outside / "Чужой.xml", root / "Catalogs/C/Forms/Ф.xml")  # a form descriptor (dependency)

    scan = scan_export(root)
    assert [m.path for m in scan.modules] == ["CommonModules/A/Ext/Module.bsl"]
    assert [m.path for m in scan.metadata] == ["Catalogs/C.xml"]
    assert scan.metadata[0].deps == []
    by = {s.path: s for s in scan.skipped}
    assert {p: s.reason for p, s in by.items()} == {
        **{p: "symlink" for p in links},
        "Catalogs/C/Forms/Ф.xml": "symlink",
    }
    for rel, target in links.items():
        assert target in by[rel].detail, rel  # where it points
    assert scan.unreadable_dirs == []
    # reading through the public helpers does not follow a link either
    with pytest.raises(SkipFile) as e:
        read_text(root / "CommonModules/A/Ext/Link.bsl", 1000)
    assert e.value.reason == "symlink" and "/etc/passwd" in e.value.detail
    with pytest.raises(SkipFile) as e:
        read_regular_bytes(root / "Catalogs/Валюты.xml")
    assert e.value.reason == "symlink"


def test_linked_docs_folders_and_link_loops_are_named_skips_not_silence(tmp_path):
    """A folder linked into a docs folder is not followed, but listed (``symlink``, naming its
    target) like a linked folder of code; so is a link that leads nowhere (a loop, a missing target)."""
    root = tmp_path / "export"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "page.md").write_text("# Чужая страница\n", encoding="utf-8")
    root.mkdir()
    _designer_skeleton(root)
    docs = root / "documentation/docs"
    docs.mkdir(parents=True)
    (docs / "own.md").write_text("# Своя страница\n", encoding="utf-8")
    os.symlink(elsewhere, docs / "bslls")
    os.symlink(root / "Ext/B", root / "Ext/A")  # a loop: A -> B -> A
    os.symlink(root / "Ext/A", root / "Ext/B")
    os.symlink(tmp_path / "gone", docs / "old")  # a missing target

    scan = scan_export(root, docs=["documentation/docs"])
    assert [p.path for p in scan.docs] == ["documentation/docs/own.md"]
    by = {s.path: s for s in scan.skipped}
    assert {p: by[p].reason for p in ("documentation/docs/bslls", "Ext/A", "Ext/B", "documentation/docs/old")} == {
        "documentation/docs/bslls": "symlink",
        "Ext/A": "symlink",
        "Ext/B": "symlink",
        "documentation/docs/old": "symlink",
    }
    assert (
        by["documentation/docs/bslls"].detail.startswith("folder ")
        and str(elsewhere) in by["documentation/docs/bslls"].detail
    )
    assert "loop" in by["Ext/A"].detail and str(root / "Ext/B") in by["Ext/A"].detail
    assert str(tmp_path / "gone") in by["documentation/docs/old"].detail


def test_symlinked_configuration_is_not_followed(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "Configuration.xml").write_bytes(b'<MetaDataObject version="2.20"/>')
    root = tmp_path / "export"
    (root / "CommonModules/A/Ext").mkdir(parents=True)
    (root / "CommonModules/A/Ext/Module.bsl").write_text("// ok", encoding="utf-8")
    os.symlink(outside / "Configuration.xml", root / "Configuration.xml")
    assert detect_export(root).format == "unknown"
    edt = tmp_path / "edt"
    (edt / "p/src").mkdir(parents=True)
    (outside / "Configuration").mkdir()
    (outside / "Configuration/Configuration.mdo").write_text("<mdclass:Configuration/>")
    os.symlink(outside / "Configuration", edt / "p/src/Configuration")
    assert detect_export(edt).format == "unknown"


def _fifo(path: Path, payload: bytes) -> int:
    """A FIFO at ``path`` with ``payload`` waiting in it; returns a read-write fd that keeps
    it open, so that code which wrongly opens and reads it gets data instead of hanging."""
    os.mkfifo(path)
    fd = os.open(path, os.O_RDWR | os.O_NONBLOCK)
    os.write(fd, payload)
    return fd


def test_scan_skips_fifos_and_other_special_files_without_opening_them(tmp_path):
    _designer_skeleton(tmp_path)
    (tmp_path / "CommonModules/A/Ext/Module.bsl").write_text("// ok", encoding="utf-8")
    fds = [
        _fifo(tmp_path / "CommonModules/B/Ext/Module.bsl", b"x" * 9000),
        _fifo(tmp_path / "Catalogs/Труба.xml", _CATALOG_XML.format(name="Труба", children="").encode()),
    ]
    try:
        scan = scan_export(tmp_path)
        assert [m.path for m in scan.modules] == ["CommonModules/A/Ext/Module.bsl"]
        assert [m.path for m in scan.metadata] == []
        assert [(s.path, s.reason) for s in scan.skipped] == [
            ("Catalogs/Труба.xml", "not_regular"),
            ("CommonModules/B/Ext/Module.bsl", "not_regular"),
        ]
        assert all("FIFO" in s.detail for s in scan.skipped)
        # the FIFO was not opened and read: its content is still there
        assert len(os.read(fds[0], 20000)) == 9000
        with pytest.raises(SkipFile) as e:
            read_text(tmp_path / "CommonModules/B/Ext/Module.bsl", 20000)
        assert e.value.reason == "not_regular"
        with pytest.raises(SkipFile) as e:
            read_regular_bytes(tmp_path / "CommonModules")  # a folder is not a regular file either
        assert e.value.reason == "not_regular"
    finally:
        for fd in fds:
            os.close(fd)


def test_scan_fifo_without_a_writer_does_not_hang(tmp_path):
    # the case the tester hit: opening this FIFO for reading would block forever
    _designer_skeleton(tmp_path)
    os.mkfifo(tmp_path / "CommonModules/A/Ext/Module.bsl")
    os.mkfifo(tmp_path / "Configuration.xml.tmp")
    os.mkfifo(tmp_path / "CommonModules/A.xml")
    scan = scan_export(tmp_path)
    assert scan.modules == [] and scan.metadata == []
    assert {(s.path, s.reason) for s in scan.skipped} == {
        ("CommonModules/A/Ext/Module.bsl", "not_regular"),
        ("CommonModules/A.xml", "not_regular"),
    }


def test_scan_unlistable_folder_is_a_skip_and_listed(tmp_path, monkeypatch):
    _designer_skeleton(tmp_path)
    for rel in ("CommonModules/A/Ext/Module.bsl", "CommonModules/B/Ext/Module.bsl"):
        (tmp_path / rel).write_text("// ok", encoding="utf-8")
    blocked = str(tmp_path / "CommonModules" / "B")
    real_scandir = os.scandir

    def scandir(path="."):
        if os.fspath(path) == blocked:
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    scan = scan_export(tmp_path)
    assert [m.path for m in scan.modules] == ["CommonModules/A/Ext/Module.bsl"]
    assert [(s.path, s.reason) for s in scan.skipped] == [("CommonModules/B", "unreadable")]
    assert "Permission denied" in scan.skipped[0].detail
    assert scan.unreadable_dirs == ["CommonModules/B"]


def test_scan_unlistable_root(tmp_path, monkeypatch):
    _designer_skeleton(tmp_path)
    real_scandir = os.scandir

    def scandir(path="."):
        if os.fspath(path) == str(tmp_path):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    scan = scan_export(tmp_path)
    assert scan.modules == [] and scan.unreadable_dirs == [""]
    assert [(s.path, s.reason) for s in scan.skipped] == [("", "unreadable")]


class _FailingScandir:
    """Wraps a real ``os.scandir`` iterator; raises ``exc`` after ``n`` entries (as reading
    ``/proc/1`` does: the folder opens, ``readdir`` fails on ``map_files``)."""

    def __init__(self, it, n: int, exc: OSError):
        self.it, self.n, self.exc = it, n, exc

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.it.close()

    def close(self):
        self.it.close()

    def __iter__(self):
        return self

    def __next__(self):
        if self.n == 0:
            raise self.exc
        self.n -= 1
        return next(self.it)


def test_scan_folder_failing_while_listed_is_a_skip_not_a_traceback(tmp_path, monkeypatch):
    _designer_skeleton(tmp_path)
    for name in ("A", "B", "C", "D"):
        (tmp_path / f"CommonModules/{name}/Ext").mkdir(parents=True, exist_ok=True)
        (tmp_path / f"CommonModules/{name}/Ext/Module.bsl").write_text("// ok", encoding="utf-8")
    target = str(tmp_path / "CommonModules")
    real_scandir = os.scandir

    def scandir(path="."):
        it = real_scandir(path)
        if os.fspath(path) == target:
            return _FailingScandir(it, 2, PermissionError(13, "Permission denied", target + "/map_files"))
        return it

    monkeypatch.setattr(os, "scandir", scandir)
    scan = scan_export(tmp_path)
    assert len(scan.modules) == 2  # the two folders listed before the error
    assert [(s.path, s.reason) for s in scan.skipped] == [("CommonModules", "unreadable")]
    assert "map_files" in scan.skipped[0].detail
    assert scan.unreadable_dirs == ["CommonModules"]


def test_scan_over_long_path_is_an_unreadable_skip(tmp_path):
    _designer_skeleton(tmp_path)
    # nest 250-character folders with dir_fd until the path is longer than PATH_MAX (4096)
    names = ["d" * 250] * 18
    fd = os.open(tmp_path / "CommonModules", os.O_RDONLY | os.O_DIRECTORY)
    try:
        for n in names:
            os.mkdir(n, dir_fd=fd)
            nfd = os.open(n, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = nfd
        os.close(os.open("Module.bsl", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd))
    finally:
        os.close(fd)
    try:
        scan = scan_export(tmp_path)
    finally:
        shutil.rmtree(tmp_path / "CommonModules" / names[0])  # fd-based, copes with the depth
    assert scan.modules == []
    [skip] = scan.skipped
    assert skip.reason == "unreadable" and "too long" in skip.detail.lower()
    assert skip.path.startswith("CommonModules/ddd") and len(str(tmp_path / skip.path)) > 4000
    assert scan.unreadable_dirs == [skip.path]


def test_scan_nfd_folder_carries_its_disk_path(tmp_path):
    from daemon.sources.metadata import chunk_metadata

    nfd = unicodedata.normalize("NFD", "Йогурт")
    nfc = "Йогурт"
    assert nfd != nfc
    _designer_skeleton(tmp_path)
    (tmp_path / "CommonModules" / nfd / "Ext").mkdir(parents=True)
    (tmp_path / "CommonModules" / nfd / "Ext/Module.bsl").write_text("Процедура П() КонецПроцедуры", encoding="utf-8")
    (tmp_path / "CommonModules" / f"{nfd}.xml").write_text(
        '<MetaDataObject xmlns="http://v8.1c.ru/8.3/MDClasses"><CommonModule><Properties><Name>Йогурт</Name>'
        "</Properties></CommonModule></MetaDataObject>",
        encoding="utf-8",
    )
    (tmp_path / "Catalogs" / nfd / "Forms").mkdir(parents=True)
    (tmp_path / "Catalogs" / f"{nfd}.xml").write_text(
        _CATALOG_XML.format(name=nfc, children="<Form>Ф</Form>"), encoding="utf-8"
    )
    (tmp_path / "Catalogs" / nfd / "Forms/Ф.xml").write_text(
        '<MetaDataObject xmlns="http://v8.1c.ru/8.3/MDClasses"><Form><Properties><Name>Ф</Name><Synonym>'
        '<v8:item xmlns:v8="http://v8.1c.ru/8.1/data/core"><v8:lang>ru</v8:lang><v8:content>Форма йогурта</v8:content>'
        "</v8:item></Synonym></Properties></Form></MetaDataObject>",
        encoding="utf-8",
    )
    scan = scan_export(tmp_path)
    assert scan.skipped == []
    files = scan.modules + scan.metadata
    assert sorted(f.path for f in files) == [
        "Catalogs/Йогурт.xml",
        "CommonModules/Йогурт.xml",
        "CommonModules/Йогурт/Ext/Module.bsl",
    ]
    for f in files:
        assert unicodedata.is_normalized("NFC", f.path)
        assert f.disk_path == f.path.replace(nfc, nfd)  # the on-disk spelling, relative
        assert (tmp_path / f.disk_path).is_file() and f.fs_path(tmp_path) == tmp_path / f.disk_path
        assert not (tmp_path / f.path).exists()  # the NFC path alone would not open
    cat = next(f for f in scan.metadata if f.path == "Catalogs/Йогурт.xml")
    assert cat.deps == ["Catalogs/Йогурт/Forms/Ф.xml"]  # NFC, like every path
    chunks, skips = chunk_metadata(tmp_path, cat, scan.info.format)
    assert skips == [] and chunks[0].path == "Catalogs/Йогурт.xml"
    assert {c.symbol: c for c in chunks}["Форма:Ф"].synonym == {"ru": "Форма йогурта"}


def test_read_text_utf8_bom_and_crlf(tmp_path):
    f = tmp_path / "a.bsl"
    f.write_bytes(b"\xef\xbb\xbf" + "#Область X\r\n\r\n#КонецОбласти\r\n".encode("utf-8"))
    text, enc = read_text(f, 1000)
    assert enc == "utf-8-sig"
    assert text.startswith("#Область X\r\n")  # BOM stripped, CRLF kept
    assert text.splitlines() == ["#Область X", "", "#КонецОбласти"]


def test_read_text_plain_utf8_bom_only_and_empty(tmp_path):
    f = tmp_path / "b.bsl"
    f.write_bytes("Процедура А()\nКонецПроцедуры\n".encode())
    assert read_text(f, 1000) == ("Процедура А()\nКонецПроцедуры\n", "utf-8")
    f.write_bytes(b"\xef\xbb\xbf")  # 117 ru modules are BOM-only
    assert read_text(f, 1000) == ("", "utf-8-sig")
    f.write_bytes(b"")
    assert read_text(f, 1000) == ("", "utf-8")


def test_read_text_cp1251(tmp_path):
    f = tmp_path / "c.bsl"
    f.write_bytes("Процедура Тест() Экспорт\r\nКонецПроцедуры".encode("cp1251"))
    text, enc = read_text(f, 1000)
    assert enc == "cp1251"
    assert text.startswith("Процедура Тест() Экспорт")


def test_read_text_utf16_with_bom(tmp_path):
    f = tmp_path / "d.bsl"
    f.write_bytes("Процедура П()".encode("utf-16"))
    assert read_text(f, 1000) == ("Процедура П()", "utf-16")


def test_read_text_errors(tmp_path):
    f = tmp_path / "e.bsl"
    f.write_bytes(b"abc\x00def")
    with pytest.raises(SkipFile) as e:
        read_text(f, 1000)
    assert e.value.reason == "binary" and "offset 3" in e.value.detail
    f.write_bytes(b"x" * 1001)
    with pytest.raises(SkipFile) as e:
        read_text(f, 1000)
    assert e.value.reason == "too_large"
    assert e.value.to_skip("e.bsl").reason == "too_large"
    f.write_bytes(b"\xd0\x98\x98 ok")  # invalid UTF-8 and 0x98 is unassigned in cp1251
    with pytest.raises(SkipFile) as e:
        read_text(f, 1000)
    assert e.value.reason == "undecodable"
    f.write_bytes(b"\xef\xbb\xbf\xff\xfe")  # BOM promises UTF-8, content is not
    with pytest.raises(SkipFile) as e:
        read_text(f, 1000)
    assert e.value.reason == "undecodable"
    with pytest.raises(SkipFile) as e:
        read_text(tmp_path / "missing.bsl", 1000)
    assert e.value.reason == "unreadable"


def test_content_hash():
    h = content_hash(b"abc")
    assert len(h) == 32 and int(h, 16) >= 0
    assert h == content_hash(b"abc") != content_hash(b"abd")


def test_scan_paths_resolves_nfd_folders(tmp_path):
    from daemon.sources.scan import scan_paths

    root = tmp_path / "root"
    (root / "CommonModules").mkdir(parents=True)
    (root / "Configuration.xml").write_text("<MetaDataObject/>", encoding="utf-8")
    nfd = unicodedata.normalize("NFD", "Общий")  # "й" decomposes
    mod = root / "CommonModules" / nfd / "Ext"
    mod.mkdir(parents=True)
    (mod / "Module.bsl").write_text("Процедура А() КонецПроцедуры\n", encoding="utf-8")
    info = detect_export(root)
    res = scan_paths(root, info, ["CommonModules/Общий/Ext/Module.bsl"])
    assert [s.path for s in res.modules] == ["CommonModules/Общий/Ext/Module.bsl"]
    assert res.modules[0].fs_path(root).exists()
    res = scan_paths(root, info, [], ["CommonModules/Общий"])
    assert [s.owner for s in res.modules] == ["ОбщийМодуль.Общий"]
