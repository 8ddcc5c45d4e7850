"""A real kill -9 of a process writing a snapshot leaves a consistent index (the chunk store's
generation folders). The chunk store's in-process tests are in tests/unit/index/test_chunkstore.py."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from daemon.engine import CURRENT_FILE, LEXICAL_DIR, Engine, EngineConfig

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _current(idx) -> str:
    return (idx / LEXICAL_DIR / CURRENT_FILE).read_text()


_CHILD = r"""
import sys, time
from pathlib import Path
from daemon.index import snapshot as persist
from daemon.engine import Engine, EngineConfig

root, idx, marker, stage = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4]
eng = Engine.open(root, index_dir=idx, config=EngineConfig(stem=False))
eng.journal_on = True
mod = root / "CommonModules/РегламентныеЗаданияДемо/Ext/Module.bsl"
old, new = "Процедура ЗагрузитьКурсыВалют()", "Процедура ЗагрузитьКурсыВалютУбит()"
mod.write_text(mod.read_text(encoding="utf-8-sig").replace(old, new), encoding="utf-8")
eng.update_paths(["CommonModules/РегламентныеЗаданияДемо/Ext/Module.bsl"])
eng.state.dirty = True

def pause(*a, **kw):
    marker.write_text("paused")
    time.sleep(60)

if stage == "names":       # generation folder half written
    persist._save_names = pause
elif stage == "current":   # generation complete, CURRENT not yet replaced
    persist.atomic_write_bytes = pause
elif stage == "journal":   # CURRENT replaced, the journal still of the old generation
    import daemon.index.journal as j
    j.reset = pause
eng.save_lexical()
"""


@pytest.mark.parametrize("stage", ["names", "current", "journal"])
def test_kill_9_mid_snapshot_leaves_a_consistent_index(sample_root, tmp_path, stage):
    """A real ``kill -9`` of a process writing a snapshot, at three points: the next open
    finds the old or the new generation, complete, with the journal replayed on top; both
    are the state of the engine that had applied the edit."""
    idx = tmp_path / "idx"
    eng = Engine.open(sample_root, index_dir=idx, config=EngineConfig(stem=False))
    eng.journal_on = True
    eng.refresh()
    eng.save()
    old_gen = _current(idx)
    marker = tmp_path / "marker"
    env = dict(os.environ, PYTHONPATH=REPO)
    child = subprocess.Popen([sys.executable, "-c", _CHILD, str(sample_root), str(idx), str(marker), stage], env=env)
    try:
        for _ in range(1200):
            if marker.exists() or child.poll() is not None:
                break
            time.sleep(0.05)
        assert marker.exists(), "the child never reached the pause"
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.kill()
        child.wait()
    back = Engine.open(sample_root, index_dir=idx, config=EngineConfig(stem=False))
    assert (_current(idx) == old_gen) == (stage != "journal")
    assert any("ЗагрузитьКурсыВалютУбит" in k for k in back.chunks)  # from the journal or the new generation
    assert not any(k.endswith("::ЗагрузитьКурсыВалют") for k in back.chunks)
    fresh = Engine.open(sample_root, index_dir=tmp_path / "fresh", config=EngineConfig(stem=False))
    fresh.refresh()
    assert back.chunks == fresh.chunks
    for q in ("курс валюты", "ЗагрКурс"):
        assert back.search(q, mode="lexical").hits == fresh.search(q, mode="lexical").hits
    back.refresh()
    back.state.dirty = True  # (nothing changed since the kill: force the next snapshot)
    back.save()  # the next snapshot clears leftovers of the killed one
    assert sorted(p.name for p in (idx / LEXICAL_DIR).iterdir()) == sorted([CURRENT_FILE, _current(idx)])
