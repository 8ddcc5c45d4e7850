"""Scanner tests on the real corpora. The tests on small trees made in tmp_path are in
tests/unit/sources/test_scan.py."""

from __future__ import annotations

import os
import unicodedata
from collections import Counter
from pathlib import Path

import pytest

from daemon.contract import (
    CONFIGURATION,
    MODULE_KINDS,
    type_folder,
)
from daemon.sources.files import read_text
from daemon.sources.scan import detect_export, module_identity, scan_export


def test_detect_designer_ru(ssl_ru):
    info = detect_export(ssl_ru)
    assert info.format == "designer"
    (p,) = info.projects
    assert p.path == "" and p.name == "БиблиотекаСтандартныхПодсистем"
    assert p.script_variant == "Russian" and p.version == "2.20" and not p.is_extension


def test_detect_designer_en(ssl_en):
    info = detect_export(ssl_en)
    assert info.format == "designer"
    (p,) = info.projects
    assert p.script_variant == "English" and p.version == "2.18"


def test_detect_edt_multi_project(yaxunit):
    info = detect_export(yaxunit)
    assert info.format == "edt"
    by_path = {p.path: p for p in info.projects}
    assert sorted(by_path) == ["exts/smoke", "exts/yaxunit", "fixtures/demo-configuration", "tests"]
    y = by_path["exts/yaxunit"]
    assert y.src == "exts/yaxunit/src" and y.name == "YAXUNIT"
    assert y.is_extension and y.name_prefix == "ЮТ" and y.purpose == "AddOn"
    t = by_path["tests"]
    assert t.is_extension and t.name_prefix == "Расш1_" and t.purpose == "Customization"
    d = by_path["fixtures/demo-configuration"]
    assert not d.is_extension and d.name == "ДемонстрационноеПриложение" and d.script_variant == "Russian"


@pytest.mark.parametrize("fixture", ["ssl_ru", "ssl_en", "yaxunit"])
def test_every_module_of_every_corpus_has_an_identity(fixture, request):
    root: Path = request.getfixturevalue(fixture)
    scan = scan_export(root)
    on_disk = sorted(
        unicodedata.normalize("NFC", os.path.relpath(os.path.join(dp, f), root).replace(os.sep, "/"))
        for dp, _dirs, files in os.walk(root)
        for f in files
        if f.endswith(".bsl")
    )
    listed = [m.path for m in scan.modules] + [s.path for s in scan.skipped if s.path.endswith(".bsl")]
    assert sorted(listed) == on_disk  # every .bsl is either a module or a reported skip
    fmt = scan.info.format
    for m in scan.modules:
        ident = module_identity(m.path, fmt)
        assert ident is not None, m.path
        assert ident == m.identity
        assert m.module_kind in MODULE_KINDS
        # every module of these real exports sits in a known layout
        assert m.module_kind != "other", m.path
        assert m.owner == m.object_type or m.owner.startswith(m.object_type + "."), m.path
        if m.object_type != CONFIGURATION:
            folder = type_folder(m.object_type)
            parts = m.path.split("/")
            assert folder in parts
            name = parts[parts.index(folder) + 1]
            assert m.owner.split(".")[1] == name
        if m.module_kind == "form" and m.object_type != "ОбщаяФорма":
            assert ".Форма." in m.owner, m.path
        if m.module_kind == "command" and m.object_type != "ОбщаяКоманда":
            assert ".Команда." in m.owner, m.path


def test_module_kind_counts_match_the_corpus_readme(ssl_ru, ssl_en, yaxunit):
    # File-name counts taken independently with os.walk (the per-name counts in
    # shared/corpora/README.md, e.g. "Module.bsl 1,235", do not match this subset: on disk
    # there are 1,212 Module.bsl, 301 ManagerModule, 145 ObjectModule, 134 CommandModule).
    names = Counter(f for _dp, _d, files in os.walk(ssl_ru) for f in files if f.endswith(".bsl"))
    assert names["Module.bsl"] == 1212 and names["ManagerModule.bsl"] == 301
    kinds = Counter(m.module_kind for m in scan_export(ssl_ru).modules)
    assert kinds["common"] + kinds["form"] + kinds["http_service"] + kinds["web_service"] == names["Module.bsl"]
    assert kinds["common"] == 561  # shared/corpora/README.md: all 561 CommonModules
    assert kinds["manager"] == names["ManagerModule.bsl"] and kinds["object"] == names["ObjectModule.bsl"]
    assert kinds["command"] == names["CommandModule.bsl"] and kinds["recordset"] == names["RecordSetModule.bsl"]
    assert kinds["value_manager"] == names["ValueManagerModule.bsl"]
    assert kinds["session"] == kinds["managed_application"] == kinds["external_connection"] == 1
    en = scan_export(ssl_en)
    assert len(en.modules) == 1097
    assert {m.owner for m in en.modules if m.path == "CommonModules/Common/Ext/Module.bsl"} == {"ОбщийМодуль.Common"}
    y = scan_export(yaxunit)
    projects = Counter(m.project for m in y.modules)
    # shared/corpora/README.md: 133 / 3 / 63 / 117 .bsl per project, minus the two .settings templates
    assert projects == {"exts/yaxunit": 132, "exts/smoke": 3, "tests": 62, "fixtures/demo-configuration": 117}


def test_scan_counts_and_order(ssl_ru, ssl_en, yaxunit):
    ru = scan_export(ssl_ru)
    assert len(ru.modules) == 1926  # shared/corpora/README.md: .bsl files
    # shared/corpora/README.md: 2,503 top-level descriptors + 84 nested subsystems (87 subsystem
    # descriptors, 3 top-level)
    assert len(ru.metadata) == 2503 + 84
    assert ru.skipped == []
    assert [m.path for m in ru.modules] == sorted(m.path for m in ru.modules)
    assert [m.path for m in ru.metadata] == sorted(m.path for m in ru.metadata)
    paths = {m.path for m in ru.metadata}
    assert "Catalogs/Пользователи.xml" in paths
    assert "Subsystems/Администрирование/Subsystems/КонтрольРаботыПользователей.xml" in paths
    for bad in (
        "Configuration.xml",
        "Catalogs/Пользователи/Forms/ФормаЭлемента.xml",
        "Catalogs/Пользователи/Forms/ФормаЭлемента/Ext/Form.xml",
        "Roles/ПолныеПрава/Ext/Rights.xml",
    ):
        assert bad not in paths
    nested = next(
        m for m in ru.metadata if m.path == "Subsystems/Администрирование/Subsystems/КонтрольРаботыПользователей.xml"
    )
    assert nested.owner == "Подсистема.Администрирование.Подсистема.КонтрольРаботыПользователей"
    users = next(m for m in ru.metadata if m.path == "Catalogs/Пользователи.xml")
    assert (users.owner, users.object_type, users.module_kind) == ("Справочник.Пользователи", "Справочник", "")
    assert "Catalogs/Пользователи/Forms/ФормаЭлемента.xml" in users.deps
    assert all(m.size > 0 and m.mtime_ns > 0 for m in ru.modules[:50])

    en = scan_export(ssl_en)
    assert len(en.modules) == 1097 and len(en.metadata) == 1441

    y = scan_export(yaxunit)
    # shared/corpora/README.md: 456 .mdo = 429 top-level + 4 Configuration.mdo + 23 nested subsystems
    assert len(y.metadata) == 429 + 23
    kontr = next(
        m for m in y.metadata if m.path == "fixtures/demo-configuration/src/Catalogs/Контрагенты/Контрагенты.mdo"
    )
    assert kontr.owner == "Справочник.Контрагенты" and kontr.project == "fixtures/demo-configuration"
    assert not any(m.path.endswith("Configuration.mdo") for m in y.metadata)
    assert any(m.owner == "Подсистема.ТоварныеЗапасы.Подсистема.Цены" for m in y.metadata)


def test_scan_skips_edt_templates(yaxunit):
    scan = scan_export(yaxunit)
    templates = [s for s in scan.skipped if s.reason == "edt_template"]
    assert sorted(s.path for s in templates) == [
        "exts/yaxunit/.settings/templates/common_module.bsl",
        "tests/.settings/templates/common_module.bsl",
    ]
    assert not any("/.settings/" in m.path for m in scan.modules)
    assert len(scan.modules) == 316 - 2


def test_read_text_real_module(ssl_ru):
    text, enc = read_text(ssl_ru / "CommonModules/ОбщегоНазначения/Ext/Module.bsl", 8 * 2**20)
    assert enc == "utf-8-sig" and not text.startswith("\ufeff")
    assert "Функция ЗначениеРеквизитаОбъекта(" in text


@pytest.mark.parametrize("fixture", ["ssl_ru", "yaxunit"])
def test_scan_paths_agrees_with_a_full_scan(fixture, request):
    """A targeted scan of some files and folders classifies them exactly like a full scan
    (identity, deps of descriptors), and finds nothing outside what it was asked for."""
    from daemon.sources.scan import scan_paths

    root = request.getfixturevalue(fixture)
    full = scan_export(root)
    by_path = {s.path: s for s in full.modules + full.metadata}
    files = [s.path for s in full.modules[::97]] + [s.path for s in full.metadata[::131]]
    forms = [d for s in full.metadata for d in s.deps][:3]  # a form descriptor brings its owner
    dirs = sorted({s.path.rsplit("/", 2)[0] for s in full.modules[5::400]})
    part = scan_paths(root, full.info, files + forms + ["no/such/file.bsl"], dirs)
    got = {s.path: s for s in part.modules + part.metadata}
    expected = set(files) | {p for p in by_path if any(p.startswith(d + "/") for d in dirs)}
    expected |= {s.path for s in full.metadata if set(s.deps) & set(forms)}
    assert set(got) == expected
    for path, src in got.items():
        assert src == by_path[path], path
