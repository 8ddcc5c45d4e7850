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
