"""Shared fixtures: where the real corpora live.

The corpora are read in place from ``../shared/corpora`` next to the repository (CI lays a
copy of ``shared/`` beside the clone); ``BSL_LENS_CORPORA`` overrides the location. Tests
that need a corpus are skipped with a clear reason when it is absent (a developer machine
without ``shared/``); CI always has it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
CORPORA = Path(os.environ.get("BSL_LENS_CORPORA", REPO.parent / "shared" / "corpora"))
EVAL_DIR = Path(os.environ.get("BSL_LENS_EVAL", REPO.parent / "shared" / "eval"))


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
