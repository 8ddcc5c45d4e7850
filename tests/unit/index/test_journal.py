"""Journals: frames, generations, torn tails; and the engine's snapshot + journal replay."""

from __future__ import annotations

import shutil

import pytest

from daemon.index import journal
from daemon.engine import CURRENT_FILE, JOURNAL_FILE, LEXICAL_DIR, Engine, EngineConfig


def test_frames_round_trip_and_generation(tmp_path):
    p = tmp_path / "j.bin"
    gen = journal.new_generation()
    journal.reset(p, gen)
    assert journal.read(p, gen) == []
    for payload in (b"one", b"", b"x" * 100_000):
        journal.append(p, payload)
    assert journal.read(p, gen) == [b"one", b"", b"x" * 100_000]
    assert journal.read(p, journal.new_generation()) == []  # another snapshot's journal
    journal.reset(p, gen)
    assert journal.read(p, gen) == []


def test_torn_and_damaged_frames_end_the_replay(tmp_path):
    p = tmp_path / "j.bin"
    gen = journal.new_generation()
    journal.reset(p, gen)
    journal.append(p, b"first")
    size = journal.append(p, b"second")
    data = p.read_bytes()
    p.write_bytes(data[: size - 3])  # a kill -9 in the middle of a write
    assert journal.read(p, gen) == [b"first"]
    damaged = bytearray(data)
    damaged[-1] ^= 0xFF
    p.write_bytes(bytes(damaged))
    assert journal.read(p, gen) == [b"first"]
    p.write_bytes(b"garbage")
    assert journal.read(p, gen) == []
    assert journal.read(tmp_path / "missing.bin", gen) == []
    with pytest.raises(FileNotFoundError):
        journal.append(tmp_path / "missing.bin", b"x")


def _state(e: Engine):
    return (
        {p: (r.hash, [c.id for c in e.file_chunks(p)]) for p, r in e.files.items()},
        {k: c for k, c in e.chunks.items()},
        [h.id for h in e.search("курс валюты", mode="lexical", top_k=20).hits],
        [h.id for h in e.search("ЗагрКурс", mode="lexical", top_k=5).hits],
    )


def test_snapshot_plus_journal_equals_the_live_engine(sample_root, tmp_path):
    """Batches applied after a snapshot are journaled; a restart (without a new snapshot)
    replays them and ends in the same state as the engine that applied them."""
    idx = tmp_path / "idx"
    e = Engine.open(sample_root, index_dir=idx, config=EngineConfig(stem=False))
    e.journal_on = True
    e.refresh()
    e.save()
    assert (idx / LEXICAL_DIR / CURRENT_FILE).exists() and journal.size(idx / JOURNAL_FILE) > 0
    mod = sample_root / "CommonModules/РегламентныеЗаданияДемо/Ext/Module.bsl"
    text = mod.read_text(encoding="utf-8-sig")
    mod.write_text(
        text.replace("Процедура ЗагрузитьКурсыВалют()", "Процедура ЗагрузитьКурсыВалютНовая()"), encoding="utf-8"
    )
    e.update_paths(["CommonModules/РегламентныеЗаданияДемо/Ext/Module.bsl"])
    shutil.rmtree(sample_root / "Catalogs/Валюты", ignore_errors=True)
    (sample_root / "Catalogs/Валюты.xml").unlink()
    e.update_paths(["Catalogs/Валюты.xml"], ["Catalogs/Валюты"])
    assert journal.size(idx / JOURNAL_FILE) > 44  # two batches appended, no snapshot written
    back = Engine.open(sample_root, index_dir=idx, config=EngineConfig(stem=False))
    assert _state(back) == _state(e)
    assert any("ЗагрузитьКурсыВалютНовая" in k for k in back.chunks)
    assert not any(k.startswith("Catalogs/Валюты.xml") for k in back.chunks)
    # a torn last frame loses only that batch; the reconcile with the disk redoes it
    data = (idx / JOURNAL_FILE).read_bytes()
    (idx / JOURNAL_FILE).write_bytes(data[:-5])
    torn = Engine.open(sample_root, index_dir=idx, config=EngineConfig(stem=False))
    assert any(k.startswith("Catalogs/Валюты.xml") for k in torn.chunks)
    torn.refresh()
    assert _state(torn)[:2] == _state(e)[:2]


def test_a_damaged_snapshot_is_rebuilt_and_its_journal_ignored(sample_root, tmp_path):
    idx = tmp_path / "idx"
    e = Engine.open(sample_root, index_dir=idx, config=EngineConfig(stem=False))
    e.journal_on = True
    e.refresh()
    e.save()
    gen = (idx / LEXICAL_DIR / CURRENT_FILE).read_text()
    (idx / LEXICAL_DIR / gen / "files.msgpack").write_bytes(b"\x00" * 100)
    back = Engine.open(sample_root, index_dir=idx, config=EngineConfig(stem=False))
    assert back.chunks == {} and back.generation == ""
    back.refresh()
    assert _state(back)[:2] == _state(e)[:2]
