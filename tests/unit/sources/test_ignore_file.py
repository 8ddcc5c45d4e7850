"""The root's .bsl-lens-ignore (gitignore syntax): the scanner leaves its files and folders out,
a full scan and a scan of named paths alike, and an engine drops what it had indexed there."""

from __future__ import annotations

from daemon.engine import Engine
from daemon.sources.scan import IgnoreRules, detect_export, scan_export, scan_paths


def test_ignore_rules_are_gitignore_patterns(tmp_path):
    rules = IgnoreRules(["# comment", "tests/", "*.tmp.bsl", "!keep.tmp.bsl", "fixtures/**/Catalogs"])
    assert rules.ignored("tests", folder=True) and rules.ignored("tests/src/CommonModules/X/Module.bsl")
    assert rules.ignored("src/tests/a.bsl")  # no leading slash: at any depth
    assert rules.ignored("a.tmp.bsl") and not rules.ignored("keep.tmp.bsl")
    assert rules.ignored("fixtures/demo/src/Catalogs", folder=True)
    assert not rules.ignored("src/CommonModules/X/Module.bsl")
    assert not IgnoreRules.read(tmp_path)  # no file: nothing is ignored


def test_the_scanner_leaves_ignored_files_out_and_the_engine_drops_them(sample_root, tmp_path):
    eng = Engine.open(sample_root, index_dir=tmp_path / "idx", embedder=None)
    eng.refresh()
    before = {r for r in eng.files}
    assert any(p.startswith("Catalogs/Контрагенты") for p in before)
    (sample_root / ".bsl-lens-ignore").write_text("Catalogs/Контрагенты*\n/Documents/\n", encoding="utf-8")
    res = scan_export(sample_root)
    found = {f.path for f in (*res.modules, *res.metadata)}
    assert found and not any(p.startswith(("Catalogs/Контрагенты", "Documents/")) for p in found)
    assert not any(k.path.startswith("Catalogs/Контрагенты") for k in res.skipped)  # left out, not skipped
    named = scan_paths(sample_root, detect_export(sample_root), files=["Catalogs/Контрагенты.xml"], dirs=["Documents"])
    assert not named.metadata and not named.modules
    eng.refresh()
    after = set(eng.files)
    assert after == {p for p in before if not p.startswith(("Catalogs/Контрагенты", "Documents/"))}
    assert not eng.search("Контрагенты", mode="lexical").hits or all(
        not h.path.startswith("Catalogs/Контрагенты") for h in eng.search("Контрагенты", mode="lexical").hits
    )


def _skips(root):
    return [(k.reason, k.detail) for k in scan_export(root).skipped if k.path == ".bsl-lens-ignore"]


def test_a_bad_line_is_left_out_and_named_the_other_lines_apply(sample_root):
    (sample_root / ".bsl-lens-ignore").write_text("Catalogs/Контрагенты*\n!\n/Documents/\n", encoding="utf-8")
    rules = IgnoreRules.read(sample_root)
    assert rules.ignored("Documents", folder=True) and rules.ignored("Catalogs/Контрагенты.xml")
    [(reason, detail)] = _skips(sample_root)
    assert reason == "bad_pattern" and detail.startswith("line 2: ") and "other lines apply" in detail
    found = {f.path for f in scan_export(sample_root).modules}
    assert found and not any(p.startswith("Documents/") for p in found)


def test_the_ignore_file_is_read_in_the_encodings_modules_are(tmp_path):
    for data in (
        "tests/\r\nfixtures/\r\n".encode("utf-16"),  # Notepad's "Unicode": a BOM, then UTF-16
        "# тесты\ntests/\nfixtures/\n".encode("cp1251"),
        b"\xef\xbb\xbftests/\rfixtures/\r",  # UTF-8 BOM, bare CR
    ):
        (tmp_path / ".bsl-lens-ignore").write_bytes(data)
        rules = IgnoreRules.read(tmp_path)
        assert not rules.problems and rules.ignored("tests", folder=True) and rules.ignored("fixtures", folder=True)


def test_an_ignore_file_that_cannot_be_read_ignores_nothing_and_says_why(tmp_path):
    import os

    path = tmp_path / ".bsl-lens-ignore"
    cases = {
        "binary": lambda: path.write_bytes(b"tests/\n\x00\x01\x02"),
        "too_large": lambda: path.write_text("# " + "x" * (300 * 1024) + "\ntests/\n"),
        "symlink": lambda: path.symlink_to(tmp_path / "elsewhere"),
        "not_regular": lambda: os.mkfifo(path),  # a FIFO: never blocks the scan
    }
    (tmp_path / "elsewhere").write_text("tests/\n")
    for reason, make in cases.items():
        if path.is_symlink() or path.exists():
            path.unlink()
        make()
        rules = IgnoreRules.read(tmp_path)
        assert not rules and [p.reason for p in rules.problems] == [reason]
        assert rules.problems[0].path == ".bsl-lens-ignore" and "nothing is ignored" in rules.problems[0].detail


def test_ignored_edt_projects_are_named_and_their_templates_stay_templates(tmp_path):
    """An ignore file that hides every project's ``src`` leaves a root with no configuration:
    the hidden projects are listed as skips (not silently an empty export) and the EDT code
    templates under ``.settings`` are not taken for loose modules."""
    for project in ("main", "tests"):
        src = tmp_path / project / "src"
        (src / "Configuration").mkdir(parents=True)
        (src / "Configuration" / "Configuration.mdo").write_text("<mdclass:Configuration/>")
        (src / "CommonModules" / "М").mkdir(parents=True)
        (src / "CommonModules" / "М" / "Module.bsl").write_text("Процедура П() Экспорт\nКонецПроцедуры\n")
        (tmp_path / project / ".settings" / "templates").mkdir(parents=True)
        (tmp_path / project / ".settings" / "templates" / "common_module.bsl").write_text("// ${cursor}\n")
    (tmp_path / "loose.bsl").write_text("Процедура Л()\nКонецПроцедуры\n")
    (tmp_path / ".bsl-lens-ignore").write_text("tests/src/\n")
    info = detect_export(tmp_path)
    assert info.format == "edt" and [p.src for p in info.projects] == ["main/src"] and info.hidden == ["tests/src"]
    (tmp_path / ".bsl-lens-ignore").write_text("**/src/\n")
    info = detect_export(tmp_path)
    assert info.format == "unknown" and info.hidden == ["main/src", "tests/src"]
    scan = scan_export(tmp_path)
    assert [m.path for m in scan.modules] == ["loose.bsl"]
    assert {(s.path, s.reason) for s in scan.skipped} == {
        ("main/src", "ignored_project"),
        ("tests/src", "ignored_project"),
        ("main/.settings/templates/common_module.bsl", "edt_template"),
        ("tests/.settings/templates/common_module.bsl", "edt_template"),
    }
