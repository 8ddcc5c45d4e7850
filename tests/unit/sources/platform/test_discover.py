"""Installed platforms' help books in fake install trees, versions, and the compatibility mode."""

from __future__ import annotations

from pathlib import Path, PureWindowsPath

import pytest

from daemon.sources.platform.discover import (
    UNKNOWN,
    find_help,
    mode_version,
    nearest_version,
    parse_version,
    read_compatibility_mode,
    standard_roots,
    version_key,
)


def _touch(path: Path, data: bytes = b"hbk") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def _windows_tree(base: Path) -> tuple[Path, Path]:
    """``Program Files/1cv8`` and ``Program Files (x86)/1cv8`` as an installer leaves them."""
    pf, pf86 = base / "Program Files" / "1cv8", base / "Program Files (x86)" / "1cv8"
    for v in ("8.3.24.1467", "8.3.9.2170", "8.3.25.1257"):
        for book in ("shcntx_ru.hbk", "shcntx_en.hbk", "shlang_ru.hbk", "shquery_ru.hbk", "1cv8.hbk"):
            _touch(pf / v / "bin" / book)
        _touch(pf / v / "bin" / "1cv8.exe")
    _touch(pf86 / "8.3.24.1467" / "bin" / "shcntx_ru.hbk", b"x86")  # the same version, 32-bit
    _touch(pf86 / "8.3.18.1208" / "bin" / "shcntx_ru.hbk")
    (pf / "common").mkdir()  # not a version folder
    _touch(pf / "conf" / "conf.cfg")
    return pf, pf86


def test_windows_layout(tmp_path):
    pf, pf86 = _windows_tree(tmp_path)
    found = find_help(roots=[pf, pf86])
    assert list(found) == ["8.3.9.2170", "8.3.18.1208", "8.3.24.1467", "8.3.25.1257"]  # by number, not by text
    assert [f.name for f in found["8.3.24.1467"]] == ["shcntx_en.hbk", "shcntx_ru.hbk", "shlang_ru.hbk"]
    assert found["8.3.24.1467"][1].read_bytes() == b"hbk"  # the first root wins for the same version and book
    assert found["8.3.18.1208"] == [pf86 / "8.3.18.1208" / "bin" / "shcntx_ru.hbk"]
    every = find_help(roots=[pf], books=None)
    assert [f.name for f in every["8.3.25.1257"]] == [
        "1cv8.hbk",
        "shcntx_en.hbk",
        "shcntx_ru.hbk",
        "shlang_ru.hbk",
        "shquery_ru.hbk",
    ]


def test_linux_layouts(tmp_path):
    new = tmp_path / "opt" / "1cv8" / "x86_64"
    for v in ("8.3.22.1709", "8.3.23.1865"):
        _touch(new / v / "shcntx_ru.hbk")
        _touch(new / v / "shlang_ru.hbk")
    old = tmp_path / "opt" / "1C" / "v8.3" / "x86_64"
    _touch(old / "shcntx_ru.hbk")
    _touch(old / "libv8.so")
    found = find_help(roots=[new, old, tmp_path / "opt" / "1cv8" / "i386"])  # a missing root is passed over
    assert list(found) == [UNKNOWN, "8.3.22.1709", "8.3.23.1865"]
    assert found[UNKNOWN] == [old / "shcntx_ru.hbk"]
    assert [f.name for f in found["8.3.23.1865"]] == ["shcntx_ru.hbk", "shlang_ru.hbk"]


def test_explicit_paths_win_and_name_their_version(tmp_path):
    pf, _ = _windows_tree(tmp_path / "c")
    mine = _touch(tmp_path / "help" / "8.3.24.1467" / "shcntx_ru.hbk", b"mine")
    loose = _touch(tmp_path / "loose" / "custom_book.hbk", b"loose")
    folder_of_versions = tmp_path / "versions"
    _touch(folder_of_versions / "8.3.26.1000" / "bin" / "shcntx_ru.hbk")
    found = find_help([mine, str(loose), folder_of_versions, tmp_path / "absent"], roots=[pf])
    assert found["8.3.24.1467"][1] == mine and mine.read_bytes() == b"mine"  # explicit first, then the install
    assert found[UNKNOWN] == [loose]  # an explicit file is never filtered by name
    assert list(found)[-1] == "8.3.26.1000"
    assert find_help([mine], roots=[]) == {"8.3.24.1467": [mine]}  # explicit paths only
    assert find_help([], roots=[]) == {}


def test_standard_roots():
    win = standard_roots("win32", {"ProgramFiles": "D:\\Apps", "ProgramFiles(x86)": "D:\\Apps (x86)"})
    assert [PureWindowsPath(str(p)) for p in win] == [
        PureWindowsPath("D:\\Apps\\1cv8"),
        PureWindowsPath("D:\\Apps (x86)\\1cv8"),
        PureWindowsPath("C:\\Program Files\\1cv8"),
        PureWindowsPath("C:\\Program Files (x86)\\1cv8"),
    ]
    linux = standard_roots("linux", {})
    assert Path("/opt/1cv8/x86_64") in linux and Path("/opt/1C/v8.3/x86_64") in linux


def test_versions():
    assert parse_version("8.3.24.1467") == (8, 3, 24, 1467)
    assert parse_version("8.3") == (8, 3)
    assert parse_version("unknown") is None and parse_version("8.3.x") is None and parse_version("1.2.3.4.5") is None
    assert sorted(["8.3.10.1", "8.3.9.9", UNKNOWN, "8.3.10.0"], key=version_key) == [
        UNKNOWN,
        "8.3.9.9",
        "8.3.10.0",
        "8.3.10.1",
    ]
    assert mode_version("Version8_3_24") == (8, 3, 24) and mode_version("8.3.10") == (8, 3, 10)
    assert mode_version("Version8_1") == (8, 1)
    assert mode_version("DontUse") is None and mode_version("") is None and mode_version(None) is None


@pytest.mark.parametrize(
    ("mode", "installed", "want"),
    [
        ("Version8_3_24", ["8.3.23.1865", "8.3.24.1467", "8.3.25.1257"], "8.3.24.1467"),  # the mode's own
        ("Version8_3_24", ["8.3.22.1", "8.3.25.1257", "8.3.27.1"], "8.3.25.1257"),  # the lowest above it
        ("Version8_3_24", ["8.3.24.1", "8.3.24.9"], "8.3.24.1"),  # the lowest build of the mode's release
        ("Version8_3_27", ["8.3.22.1", "8.3.25.1257"], "8.3.25.1257"),  # all older: the highest
        ("8.3.10", ["8.3.9.1", "8.3.10.2", "8.3.11.1"], "8.3.10.2"),  # EDT spelling
        ("DontUse", ["8.3.22.1", "8.3.25.1"], "8.3.25.1"),  # no mode: the highest
        (None, ["8.3.22.1", UNKNOWN], "8.3.22.1"),  # a known version beats an unknown one
        ("Version8_3_24", [UNKNOWN], UNKNOWN),
        ("Version8_3_24", [], None),
    ],
)
def test_nearest_version(mode, installed, want):
    assert nearest_version(mode, installed) == want


def test_compatibility_mode_designer_and_edt(tmp_path):
    designer = tmp_path / "designer"
    _touch(
        designer / "Configuration.xml",
        b'<?xml version="1.0"?><MetaDataObject><Configuration><Properties>'
        b"<ConfigurationExtensionCompatibilityMode>Version8_3_27</ConfigurationExtensionCompatibilityMode>"
        b"<InterfaceCompatibilityMode>TaxiEnableVersion8_2</InterfaceCompatibilityMode>"
        b"<CompatibilityMode>Version8_3_24</CompatibilityMode></Properties></Configuration></MetaDataObject>",
    )
    assert read_compatibility_mode(designer) == "Version8_3_24"
    assert read_compatibility_mode(designer / "Configuration.xml") == "Version8_3_24"
    edt = tmp_path / "edt"
    _touch(
        edt / "src" / "Configuration" / "Configuration.mdo",
        b"<mdclass:Configuration><configurationExtensionCompatibilityMode>8.3.10</configurationExtensionCompatibilityMode>"
        b"<compatibilityMode>8.3.21</compatibilityMode></mdclass:Configuration>",
    )
    assert read_compatibility_mode(edt) == "8.3.21"
    assert read_compatibility_mode(tmp_path / "nothing") is None


def test_compatibility_mode_of_a_repository_of_projects(tmp_path):
    """Several EDT projects: the configuration's mode wins over an extension's."""
    _touch(
        tmp_path / "exts" / "ext" / "src" / "Configuration" / "Configuration.mdo",
        b"<x><configurationExtensionCompatibilityMode>8.3.10</configurationExtensionCompatibilityMode></x>",
    )
    assert read_compatibility_mode(tmp_path) == "8.3.10"  # only an extension: its mode
    _touch(
        tmp_path / "fixtures" / "demo" / "src" / "Configuration" / "Configuration.mdo",
        b"<x><compatibilityMode>8.3.18</compatibilityMode></x>",
    )
    assert read_compatibility_mode(tmp_path) == "8.3.18"
