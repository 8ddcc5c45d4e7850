"""Which folder ``bsl-lens mcp`` serves when no ROOT is given: the current directory only when it
is an export itself, never a folder that merely holds exports somewhere below it."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from daemon.cli.servers import resolve_roots


def _edt_project(src: Path) -> None:
    (src / "Configuration").mkdir(parents=True)
    (src / "Configuration" / "Configuration.mdo").write_text("<mdclass:Configuration/>", encoding="utf-8")


def test_the_current_directory_is_served_only_when_it_is_an_export_itself(tmp_path, monkeypatch):
    export = tmp_path / "export"
    _edt_project(export / "exts" / "yaxunit" / "src")  # a multi-project EDT export: projects 2 folders down
    assert resolve_roots([], cwd=export) == [export.resolve()]
    designer = tmp_path / "designer"
    designer.mkdir()
    (designer / "Configuration.xml").write_text("<MetaDataObject/>", encoding="utf-8")
    assert resolve_roots([], cwd=designer) == [designer.resolve()]
    # a folder of folders (a temp or work folder) with some project deep below: not an export
    deep = tmp_path / "work"
    _edt_project(deep / "someone" / "exts" / "smoke" / "src")
    with pytest.raises(ValueError, match="not a 1C export"):
        resolve_roots([], cwd=deep)
    assert resolve_roots([str(deep)]) == [deep.resolve()]  # named as ROOT it is served


@pytest.mark.parametrize("where", ["home", "temp"])
def test_the_home_and_temp_folders_are_never_served_by_default(tmp_path, monkeypatch, where):
    _edt_project(tmp_path / "src")  # even when they look like an export
    if where == "home":
        monkeypatch.setattr(Path, "home", classmethod(lambda cls: tmp_path))
    else:
        monkeypatch.setattr(tempfile, "gettempdir", lambda: str(tmp_path))
    with pytest.raises(ValueError, match="not served by default"):
        resolve_roots([], cwd=tmp_path)
