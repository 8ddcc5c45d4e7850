"""Honest freshness (issue 10, item 5) and named skips (item 6).

* In-process :class:`daemon.service.service.Service` with the real engine and watcher, where the
  writer's ``apply`` is held at a gate: an edit noticed while a job runs stays pending after
  that job, and every answer names it until its own job is applied.
* Real daemon processes over the socket, the CLI and the MCP bridge: a method appended to a
  module and searched for at once is found or the answer is ``stale`` and names the module;
  with ``fresh_timeout`` / ``search --fresh`` / ``wait_fresh`` it is found.
* Skipped files (binary ``.bsl``, a module over 8 MiB, undecodable, XML that does not parse,
  an entity-bomb XML that is no 1C descriptor, an object missing on disk): one WARNING line
  each in ``daemon.log``, listed by ``status --json``, ``status -v`` and MCP
  ``index_status``.

Every wait is bounded; nothing asserts on elapsed time.
"""

from __future__ import annotations

import asyncio
import json
import os
import queue
import subprocess
import threading
from pathlib import Path

import pytest
from daemon_helpers import TIMEOUT, copy_sample, run_cli, wait_until

from daemon.server import protocol
from daemon.client import CommandError
from daemon.service.service import Service

MODULE = "CommonModules/РаботаСКонтрагентами/Ext/Module.bsl"
NATIVE = ("--embedder", "none", "--watch", "native")


def _append_method(root: Path, name: str, rel: str = MODULE) -> None:
    with open(root / rel, "a", encoding="utf-8") as f:
        f.write(f"\n\nПроцедура {name}() Экспорт\n\tВозврат;\nКонецПроцедуры\n")


def _found(res, name: str) -> bool:
    return any(h.name == name for h in res.hits)


# ------------------------------------------------------------------------------ in-process
def test_a_change_noticed_while_a_job_runs_stays_pending_until_its_own_job(tmp_path):
    root = copy_sample(tmp_path / "root")
    s = Service(root, index_dir=tmp_path / "idx", embedder=None, watch="native", reconcile_interval=0)
    s.start()
    entered: queue.Queue[int] = queue.Queue()
    gate = threading.Semaphore(0)
    try:
        assert s.wait_idle(TIMEOUT)
        eng = s.engine
        real_apply = eng.apply

        def held_apply(cs, **kw):  # the job has read the disk; it waits here before applying
            entered.put(1)
            assert gate.acquire(timeout=TIMEOUT)
            return real_apply(cs, **kw)

        eng.apply = held_apply
        _append_method(root, "ПерваяПравка")
        entered.get(timeout=TIMEOUT)  # job 1 read the module with ПерваяПравка
        res = s.search("ПерваяПравка", mode="lexical")
        assert not _found(res, "ПерваяПравка")
        assert res.stale and MODULE in res.stale_paths and res.pending_count >= 1
        assert s.status().queued_paths >= 1 and MODULE in s.status().stale_files
        m = s.get_method("РаботаСКонтрагентами.ПроверитьКПП")  # the indexed text, said to be stale
        assert m.stale and m.stale_own == [MODULE] and MODULE in m.stale_paths and m.pending_count >= 1
        d = s.describe_object("ОбщийМодуль.РаботаСКонтрагентами")
        assert d.stale and d.stale_own == [MODULE] and d.path not in d.stale_own

        _append_method(root, "ВтораяПравка")  # noticed while job 1 is still running
        assert s.watcher.settle(TIMEOUT) is True
        gate.release()  # job 1 applies; the second edit is not in what it read
        entered.get(timeout=TIMEOUT)  # job 2 (the second edit's batch) is held
        res = s.search("ВтораяПравка", mode="lexical")
        assert _found(s.search("ПерваяПравка", mode="lexical"), "ПерваяПравка")
        assert not _found(res, "ВтораяПравка")
        assert res.stale and MODULE in res.stale_paths, "job 1 must not clear a change it did not read"
        hits = s.search("ПерваяПравка", mode="lexical").hits
        assert any(h.path == MODULE for h in hits)
        assert all(h.stale == (h.path == MODULE) for h in hits)

        eng.apply = real_apply
        gate.release()
        assert s.wait_fresh(TIMEOUT)
        res = s.search("ВтораяПравка", mode="lexical")
        assert _found(res, "ВтораяПравка") and not res.stale and res.stale_paths == [] and res.stale_count == 0
        assert not any(h.stale for h in res.hits)
        m = s.get_method("РаботаСКонтрагентами.ПроверитьКПП")
        assert not m.stale and m.stale_own == [] and m.stale_paths == [] and m.stale_count == 0
        assert s.status().queued_paths == 0
    finally:
        for _ in range(4):
            gate.release()
        s.close()


def test_symbols_with_fresh_timeout_find_each_new_method(tmp_path):
    root = copy_sample(tmp_path / "root")
    s = Service(root, index_dir=tmp_path / "idx", embedder=None, watch="native", reconcile_interval=0)
    s.start()
    try:
        assert s.wait_idle(TIMEOUT)
        for i in range(5):
            name = f"СвежийМетод{i}"
            _append_method(root, name)
            res = s.symbols(name, fresh_timeout=TIMEOUT)
            assert _found(res, name) and not res.stale, res
        assert not s.freshness()["stale"]
    finally:
        s.close()


def _rewrite_keeping_size_and_mtime(root: Path, rel: str, old: str, new: str) -> None:
    """What ``cp -p`` (also ``rsync -a``, a ``tar`` restore) does to a file: new content of the
    same size, the old mtime put back. Done with the real ``cp -p``."""
    dst = root / rel
    data = dst.read_bytes()
    changed = data.replace(old.encode(), new.encode(), 1)
    assert changed != data and len(changed) == len(data)
    src = root.parent / "cp-p-source.bsl"
    src.write_bytes(changed)
    st = dst.stat()
    os.utime(src, ns=(st.st_atime_ns, st.st_mtime_ns))
    subprocess.run(["cp", "-p", str(src), str(dst)], check=True)
    after = dst.stat()
    assert (after.st_size, after.st_mtime_ns) == (st.st_size, st.st_mtime_ns) and dst.read_bytes() == changed


@pytest.mark.parametrize("watch", ["native", "off"])
def test_a_rewrite_that_keeps_size_and_mtime_is_seen(tmp_path, watch):
    """``cp -p`` of a same-size module: seen by the watcher path (native) and by the reconcile
    (off), through ctime and the inode; it was never picked up and answers said stale: false."""
    root = copy_sample(tmp_path / "root")
    s = Service(root, index_dir=tmp_path / "idx", embedder=None, watch=watch, reconcile_interval=0)
    s.start()
    try:
        assert s.wait_idle(TIMEOUT)
        assert _found(s.search("ПроверитьКПП", mode="lexical"), "ПроверитьКПП")
        _rewrite_keeping_size_and_mtime(root, MODULE, "ПроверитьКПП", "ПроверитьБИК")
        if watch == "off":
            s.reindex(full=True)
            assert s.wait_idle(TIMEOUT)
        res = s.search("ПроверитьБИК", mode="lexical", fresh_timeout=TIMEOUT)
        assert _found(res, "ПроверитьБИК") and not res.stale, res
        assert not _found(s.search("ПроверитьКПП", mode="lexical"), "ПроверитьКПП")
    finally:
        s.close()


def test_the_hash_sweep_finds_a_change_nothing_else_looks_for(tmp_path):
    """No watcher, no periodic reconcile: only the content-hash sweep reads the files again, and
    it brings the change in as a re-index of that module."""
    root = copy_sample(tmp_path / "root")
    s = Service(
        root, index_dir=tmp_path / "idx", embedder=None, watch="off", reconcile_interval=0, hash_sweep_interval=0.5
    )
    s.start()
    try:
        assert s.wait_idle(TIMEOUT)
        _append_method(root, "НайденПроходомПоХешам")
        wait_until(lambda: _found(s.search("НайденПроходомПоХешам", mode="lexical"), "НайденПроходомПоХешам"))
        counters = s.status().counters
        assert counters["hash_sweep_changed"] >= 1 and counters["hash_sweeps"] >= 1
        assert s.sweep.last.complete and s.sweep.last.files == len(s.engine.files) and s.sweep.last.bytes > 0
    finally:
        s.close()


# ------------------------------------------------------------------------------ real daemon
def test_an_appended_method_is_found_or_the_answer_names_the_module(daemons, sample_root):
    d = daemons.start(sample_root, *NATIVE, wait_idle=True)
    named = found_at_once = 0
    with d.client() as c:
        assert c.status().service.watcher.mode == "native"
        for i in range(15):
            name = f"ДобавленныйМетод{i}"
            _append_method(sample_root, name)
            res = c.search(name, mode="lexical", top_k=5)  # at once: no wait
            if _found(res, name):
                found_at_once += 1
            else:
                assert res.stale, f"round {i}: not found and not stale: {res}"
                assert MODULE in res.stale_paths or res.unread_events, res
                named += MODULE in res.stale_paths
            res = c.search(name, mode="lexical", top_k=5, fresh_timeout=30)
            assert _found(res, name) and not res.stale, res
        with pytest.raises(CommandError) as e:
            c.search("x", fresh_timeout=61)
        assert e.value.code == protocol.INVALID_PARAMS and "fresh_timeout" in e.value.message

    # the CLI: --fresh waits, and --json carries the freshness fields
    _append_method(sample_root, "МетодИзКоманднойСтроки")
    out = d.cli(
        "search", "МетодИзКоманднойСтроки", "--mode", "lexical", "--json", "--no-spawn", "--fresh", "30", check=True
    )
    data = json.loads(out.stdout)
    assert [h["name"] for h in data["hits"]][:1] == ["МетодИзКоманднойСтроки"]
    assert data["stale"] is False and data["stale_paths"] == [] and data["stale_count"] == 0

    # MCP search / find_symbol with wait_fresh
    from mcp import Client

    from mcp_bridge.links import RootLink
    from mcp_bridge.models import FindSymbolOutput, SearchOutput
    from mcp_bridge.server import build_server

    _append_method(sample_root, "МетодДляАгента")
    link = RootLink(d.root, "demo", index_dir=d.index_dir, spawn_args=list(NATIVE))

    async def main():
        async with Client(build_server([link], connect_wait=30.0)) as mc:
            s = await mc.call_tool(
                "search", {"query": "МетодДляАгента", "mode": "lexical", "wait_fresh": 10, "detail": True}
            )
            f = await mc.call_tool("find_symbol", {"query": "МетодДляАгента", "wait_fresh": 10, "detail": True})
            return SearchOutput.model_validate(s.structured_content), FindSymbolOutput.model_validate(
                f.structured_content
            )

    s_out, f_out = asyncio.run(asyncio.wait_for(main(), TIMEOUT))
    assert s_out.hits[0].name == "МетодДляАгента" and not s_out.stale and s_out.stale_paths == []
    assert f_out.symbols[0].name == "МетодДляАгента" and not f_out.stale
    print(f"found at once {found_at_once}/15, stale with the module named {named}")


def test_a_degraded_watch_is_said_by_status_the_cli_and_mcp(daemons, sample_root):
    """Folders beyond PATH_MAX cannot be watched: ``status`` text says the freshness is degraded
    and why, the CLI's stale line says changes may go unnoticed and why (no file is pending), and
    the MCP answers carry ``stale_reason``."""
    from daemon_helpers import make_chain, remove_chain

    chain = make_chain(sample_root, 2100)  # 4,200 characters of path: past PATH_MAX
    try:
        d = daemons.start(sample_root, *NATIVE, wait_idle=True)
        wait_until(
            lambda: json.loads(d.cli("status", "--json", check=True).stdout)["watcher"]["freshness"] == "degraded",
            TIMEOUT,
            "the watch to say degraded",
        )
        reason = json.loads(d.cli("status", "--json", check=True).stdout)["watcher"]["freshness_reason"]
        assert reason
        assert f"freshness degraded: {reason}" in d.cli("status", check=True).stdout
        out = d.cli("search", "КонтрагентПоИНН", "--mode", "lexical", "--no-spawn", check=True)
        assert f"(stale: changes may go unnoticed: {reason}" in out.stderr, out.stderr

        from mcp import Client

        from mcp_bridge.links import RootLink
        from mcp_bridge.models import FindSymbolOutput, SearchOutput
        from mcp_bridge.server import build_server

        link = RootLink(d.root, "demo", index_dir=d.index_dir, spawn_args=list(NATIVE))

        async def main():
            async with Client(build_server([link], connect_wait=30.0)) as mc:
                s = await mc.call_tool("search", {"query": "КонтрагентПоИНН", "mode": "lexical"})
                f = await mc.call_tool("find_symbol", {"query": "КонтрагентПоИНН"})
                return SearchOutput.model_validate(s.structured_content), FindSymbolOutput.model_validate(
                    f.structured_content
                )

        s_out, f_out = asyncio.run(asyncio.wait_for(main(), TIMEOUT))
        for out in (s_out, f_out):
            assert out.stale and out.stale_reason == reason and "changes may go unnoticed" in out.note
        d.stop()
    finally:
        remove_chain(chain)


# ------------------------------------------------------------------------------ skips
BOMB = (
    '<?xml version="1.0"?>\n<!DOCTYPE lolz [<!ENTITY lol "lol">'
    '<!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">'
    '<!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">]>\n'
    "<MetaDataObject><Catalog><Properties><Name>&lol3;</Name></Properties></Catalog></MetaDataObject>\n"
)

#: path -> reason of every file made unindexable by _spoil (plus the sample's own missing object)
SKIPS = {
    "CommonModules/ДвоичныйМодуль/Ext/Module.bsl": "binary",
    "CommonModules/ОгромныйМодуль/Ext/Module.bsl": "too_large",
    "CommonModules/ПлохаяКодировка/Ext/Module.bsl": "undecodable",
    "Catalogs/Номенклатура.xml": "invalid_xml",
    "Catalogs/Бомба.xml": "not_metadata",
    "Catalogs/УдаленныйСправочник.xml": "missing_on_disk",
}


def _spoil(root: Path) -> None:
    def put(rel: str, data: bytes) -> None:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)

    put("CommonModules/ДвоичныйМодуль/Ext/Module.bsl", b"\x00\x01\x02binary" * 100)
    put("CommonModules/ОгромныйМодуль/Ext/Module.bsl", ("// " + "x" * 1000 + "\n").encode() * 9000)  # 9 MB > 8 MiB
    put("CommonModules/ПлохаяКодировка/Ext/Module.bsl", b"\xef\xbb\xbf\xff\xfe not UTF-8 after a UTF-8 BOM")
    text = (root / "Catalogs/Номенклатура.xml").read_bytes()
    put("Catalogs/Номенклатура.xml", text[: len(text) // 2])  # half-written
    put("Catalogs/Бомба.xml", BOMB.encode())


def test_skipped_files_are_logged_once_and_listed_by_status_and_mcp(daemons, sample_root):
    _spoil(sample_root)
    d = daemons.start(sample_root, *NATIVE, wait_idle=True)
    with d.client() as c:
        c.reindex(full=True)  # a second full reconcile meets the same skips: not logged again
        assert c.wait_idle(TIMEOUT)
        st = c.status()
    log_path = Path(st.daemon.log)
    lines = [ln for ln in log_path.read_text(encoding="utf-8").splitlines() if " skipped " in ln]
    for rel, reason in SKIPS.items():
        mine = [ln for ln in lines if f"skipped {rel}: {reason}" in ln]
        assert len(mine) == 1, (rel, mine)
        assert " WARNING daemon.index.reconcile: " in mine[0]

    svc = st.service
    assert {(k.path, k.reason) for k in svc.skipped_files} == set(SKIPS.items())
    assert svc.skipped == {r: list(SKIPS.values()).count(r) for r in set(SKIPS.values())}
    assert svc.skipped_count == len(SKIPS)
    assert all(k.detail for k in svc.skipped_files)
    assert svc.stale_files == []  # never indexed before: nothing older than the disk is kept

    js = json.loads(d.cli("status", "--json", check=True).stdout)
    assert {(k["path"], k["reason"]) for k in js["skipped_files"]} == set(SKIPS.items())
    verbose = d.cli("status", "-v", check=True).stdout
    for rel, reason in SKIPS.items():
        assert f"    {rel}: {reason} (" in verbose

    from mcp import Client

    from mcp_bridge.links import RootLink
    from mcp_bridge.models import StatusOutput
    from mcp_bridge.server import build_server

    link = RootLink(d.root, "demo", index_dir=d.index_dir, spawn_args=list(NATIVE))

    async def main():
        async with Client(build_server([link], connect_wait=30.0)) as mc:
            return StatusOutput.model_validate(
                (await mc.call_tool("index_status", {"detail": True})).structured_content
            )

    (root_st,) = asyncio.run(asyncio.wait_for(main(), TIMEOUT)).roots
    assert {(k.path, k.reason) for k in root_st.skipped_files} == set(SKIPS.items())
    assert root_st.skipped_count == len(SKIPS) and root_st.skipped["binary"] == 1

    # a fixed file leaves the list; spoiling it again names it in the log again
    (sample_root / "CommonModules/ДвоичныйМодуль/Ext/Module.bsl").write_text(
        "Процедура Починили() Экспорт\nКонецПроцедуры\n", encoding="utf-8"
    )
    with d.client() as c:
        wait_until(
            lambda: c.search("Починили", mode="lexical", fresh_timeout=5).hits, TIMEOUT, "the fixed module indexed"
        )
        assert "binary" not in c.status().service.skipped
        (sample_root / "CommonModules/ДвоичныйМодуль/Ext/Module.bsl").write_bytes(b"\x00again")
        wait_until(lambda: c.status().service.skipped.get("binary") == 1, TIMEOUT, "the binary skip back")
    text = log_path.read_text(encoding="utf-8")
    assert text.count("skipped CommonModules/ДвоичныйМодуль/Ext/Module.bsl: binary") == 2


def test_the_status_sample_keeps_every_reason():
    from daemon.contract import Skip
    from daemon.service.status import skip_sample

    skips = [Skip(f"Catalogs/X{i:03}.xml", "missing_on_disk") for i in range(136)] + [
        Skip("A.bsl", "binary"),
        Skip("B.bsl", "too_large"),
    ]
    got = skip_sample(skips, 50)
    assert len(got) == 50
    assert {k.reason for k in got} == {"missing_on_disk", "binary", "too_large"}
    assert skip_sample(skips[:3], 50) == sorted(skips[:3], key=lambda k: (k.reason, k.path))


def test_search_fresh_option_parses():
    from daemon.cli.parser import build_parser

    p = build_parser()
    assert p.parse_args(["search", "R", "q"]).fresh == 0.0
    assert p.parse_args(["search", "R", "q", "--fresh"]).fresh == 1.0
    assert p.parse_args(["search", "R", "q", "--fresh", "2.5"]).fresh == 2.5
    bad = run_cli("search", "R", "q", "--fresh", "61")
    assert bad.returncode == 2 and "0..60" in bad.stderr


def test_the_cli_stale_line_names_the_files_and_the_way_out():
    from daemon.cli.search import stale_note
    from daemon.engine import SearchResult

    res = SearchResult(
        query="q",
        mode="lexical",
        hits=[],
        total=0,
        dense_done=0,
        dense_total=0,
        took_ms=1.0,
        stale=True,
        stale_paths=[MODULE, "Catalogs/"],
        stale_count=7,
        pending_count=7,
    )
    line = stale_note(res, waited=0)
    assert line.startswith("(stale: 7 changed files not indexed yet (") and MODULE in line and ", ..." in line
    assert "--fresh waits for them" in line
    assert "after waiting 2 s" in stale_note(res, waited=2.0)
    lost = SearchResult(
        query="q",
        mode="lexical",
        hits=[],
        total=0,
        dense_done=0,
        dense_total=0,
        took_ms=1.0,
        stale=True,
        full_reconcile_pending=True,
    )
    assert "whole export is being re-checked" in stale_note(lost, waited=0)
    blind = SearchResult(
        query="q",
        mode="lexical",
        hits=[],
        total=0,
        dense_done=0,
        dense_total=0,
        took_ms=1.0,
        stale=True,
        stale_reason="file watching stopped",
    )
    assert stale_note(blind, waited=0) == "(stale: changes may go unnoticed: file watching stopped)"
