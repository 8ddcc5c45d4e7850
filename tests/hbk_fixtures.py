"""The help-book builder of the platform help tests (:mod:`daemon.dev.hbk_build`, which ``bsl-lens
bench --platform`` builds its big book with too), under the name the tests import, and the platform
help tests' fixtures (the bundled data set, decorated entries, a deadline that turns a hang into a
failure); the conftest.py of each folder that has platform tests imports them.
"""

from __future__ import annotations

import signal
import sys
from contextlib import contextmanager

import pytest

from daemon.dev.hbk_build import *  # noqa: F403
from daemon.dev.hbk_build import decorate
from daemon.sources.platform.globals_json import load_globals


# ------------------------------------------------------------------------------ pytest fixtures
@contextmanager
def _deadline(seconds: float):
    """Raise ``TimeoutError`` in the main thread if the block runs longer than ``seconds``
    (SIGALRM: a pure-Python loop is interrupted; every capped operation returns in time)."""

    def fire(signum, frame):
        raise TimeoutError(f"took longer than {seconds} s (a hang)")

    old = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


@pytest.fixture()
def deadline():
    """``with deadline(5): ...`` fails the test with TimeoutError past 5 s."""
    if sys.platform == "win32":  # no SIGALRM
        pytest.skip("deadline needs SIGALRM")
    return _deadline


@pytest.fixture(scope="session")
def globals_result():
    """The bundled data set, loaded once."""
    return load_globals()


@pytest.fixture(scope="session")
def decorated(globals_result):
    """The data set's entries with availability, versions and the rest a real book has."""
    return decorate(globals_result.entries)


@pytest.fixture(scope="session")
def sample_entries(decorated):
    """A part of the decorated entries that still has every kind, every type's members and
    every enumeration's values: 12 types, 60 enumerations, 120 global functions, all 80
    global properties."""
    types = {e.name for e in decorated if e.kind == "type"}
    keep_types = set(sorted(types)[:6]) | {"ТаблицаЗначений", "HTTPЗапрос", "Массив", "ЧтениеJSON", "COMОбъект", "Файл"}
    enums = [e.name for e in decorated if e.kind == "enum"][:60]
    keep = set(enums) | keep_types
    funcs = [e.name for e in decorated if e.kind == "function"][:120] + ["СтрНайти", "ПродолжитьВызов"]
    out = []
    for e in decorated:
        if e.kind == "function" and e.name not in funcs:
            continue
        if e.kind in ("type", "enum") and e.name not in keep:
            continue
        if e.owner and e.owner not in keep:
            continue
        out.append(e)
    return out
