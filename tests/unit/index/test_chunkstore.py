"""The chunk store (daemon/index/chunkstore.py): slots, columns, blobs, masks, save/load, and the
engine's generation folders built on it (damage, staged first index), in process."""

from __future__ import annotations

import logging

import msgspec
import numpy as np
import pytest

from daemon.contract import Chunk, Filters
from daemon.engine import CURRENT_FILE, LEXICAL_DIR, Engine, EngineConfig
from daemon.index.chunkstore import ChunkStore, ChunkStoreError


def _full_chunk(i: int = 0, **kw) -> Chunk:
    """A chunk with every field set to a non-default value (Cyrillic, ё, emoji, CJK)."""
    text = f'// Ёлка {i}: 🎄 комментарий\nПроцедура Метод{i}(Знач А, Б = 1) Экспорт\n\tА = "漢字";\nКонецПроцедуры'
    base = dict(
        id=f"CommonModules/Общий/Ext/Module.bsl::Метод{i}",
        path="CommonModules/Общий/Ext/Module.bsl",
        kind="procedure",
        name=f"Метод{i}",
        owner="ОбщийМодуль.Общий",
        object_type="ОбщийМодуль",
        module_kind="common",
        symbol=f"ОбщийМодуль.Общий.Метод{i}",
        export=True,
        is_async=True,
        params="Знач А, Б = 1",
        directives=["&НаСервере"],
        annotations=['&Вместо("Ёжик")'],
        region=["ПрограммныйИнтерфейс", "Ёлки"],
        doc=f"// Ёлка {i}: 🎄 комментарий",
        signature=f"Процедура Метод{i}(Знач А, Б = 1) Экспорт",
        part=2,
        synonym={"ru": "Ёлка", "en": "Fir"},
        comment="примечание",
        types=["СправочникСсылка.Ёлки", "String(50)"],
        properties={"Индексирование": "Индексировать", "ё": "Ё"},
        start_line=10 + i,
        end_line=20 + i,
        name_range=(9 + i, 10, 9 + i, 16),
        text=text,
    )
    base.update(kw)
    return Chunk(**base)


def test_every_field_round_trips_through_add_save_and_load(tmp_path):
    chunks = [
        _full_chunk(0),
        _full_chunk(1, doc="// a doc that is not part of the text"),  # not a span of the text
        Chunk(id="Catalogs/Ё.xml::", path="Catalogs/Ё.xml", kind="object", name="Ё"),  # all defaults
        _full_chunk(2, text="x" * 5000, doc=""),  # compressed blob
        _full_chunk(3, symbol="Метод3"),  # the symbol is the name (stored once)
    ]
    for c in chunks:
        assert set(msgspec.structs.asdict(c)) == set(Chunk.__struct_fields__)
    s = ChunkStore()
    slots = [s.add(c) for c in chunks]
    assert slots == [0, 1, 2, 3, 4] and len(s) == 5
    assert [s.get(i) for i in slots] == chunks
    assert s.get_by_id(chunks[2].id) == chunks[2] and s.get_by_id("nope") is None
    s.save(tmp_path / "st")
    back = ChunkStore.load(tmp_path / "st")
    assert [back.get(i) for i in slots] == chunks and back.ids == s.ids
    # increments on a loaded (memory-mapped) store: replace, move, add
    changed = msgspec.structs.replace(chunks[0], text=chunks[0].text + "\n// ещё", export=False)
    assert back.add(changed) == 0
    back.set_position(1, 100, 120, (99, 1, 99, 5))
    assert back.get(0) == changed
    assert back.get(1) == msgspec.structs.replace(chunks[1], start_line=100, end_line=120, name_range=(99, 1, 99, 5))
    assert back.add(_full_chunk(7)) == 5 and back.get(5) == _full_chunk(7)
    assert back.head(4) == ("Метод3", "Метод3") and back.hit_key(4) == (chunks[4].path, "Метод3")
    back.save(tmp_path / "st2")
    again = ChunkStore.load(tmp_path / "st2", arena_file=False)
    assert [again.get(i) for i in range(6)] == [back.get(i) for i in range(6)]


def test_freed_slots_are_reused_and_ids_stay_consistent(tmp_path):
    s = ChunkStore()
    a, b, c = (s.add(_full_chunk(i)) for i in range(3))
    assert s.remove(_full_chunk(1).id) == b and s.remove(_full_chunk(1).id) is None
    assert s.ids[b] is None and _full_chunk(1).id not in s and len(s) == 2
    with pytest.raises(KeyError):
        s.get(b)
    d = s.add(_full_chunk(9))
    assert d == b and s.ids[d] == _full_chunk(9).id and s.slot_of[_full_chunk(9).id] == d
    assert s.live_slots().tolist() == [a, b, c] and s.capacity == 3
    s.remove(_full_chunk(0).id)
    s.save(tmp_path / "st")
    back = ChunkStore.load(tmp_path / "st")
    assert back.ids == [None, _full_chunk(9).id, _full_chunk(2).id]
    assert back.add(_full_chunk(5)) == a  # the free list survives a save
    assert back.get(a) == _full_chunk(5)


def test_ids_of_a_loaded_store_follow_every_change_as_a_list_and_dict_would(tmp_path):
    """A loaded store's ids and slot_of are made on demand from the id columns (IdColumn,
    SlotMap): the same answers as the built store's list and dict through removals,
    re-additions of a saved id (in its old slot or another), new ids and slot reuse, and
    for ids that do not start with their path (stored whole)."""
    odd = [_full_chunk(20 + i, id=f"not-the-path::{i}") for i in range(3)]  # id without the path prefix
    chunks = [_full_chunk(i) for i in range(12)] + odd
    built = ChunkStore()
    for c in chunks:
        built.add(c)
    built.remove(chunks[3].id)  # a hole saved as a free slot
    built.save(tmp_path / "st")
    loaded = ChunkStore.load(tmp_path / "st")
    assert loaded.ids == built.ids and dict(loaded.slot_of) == built.slot_of and len(loaded) == len(built)
    for st in (built, loaded):  # the same operations on both
        st.remove(chunks[5].id)
        st.add(_full_chunk(50))  # reuses a free slot
        st.add(chunks[5])  # a saved id back, in another slot
        st.remove(odd[1].id)
        st.add(odd[1])
        st.add(_full_chunk(60))
        st.remove(chunks[0].id)
    assert loaded.ids == built.ids and len(loaded) == len(built) == len(loaded.slot_of)
    for cid in [c.id for c in chunks] + [_full_chunk(50).id, _full_chunk(60).id, "nope", chunks[0].id]:
        assert loaded.slot_of.get(cid) == built.slot_of.get(cid), cid
        assert (cid in loaded) == (cid in built)
    assert dict(loaded.slot_of) == built.slot_of
    assert [loaded.get(s) for s in loaded.live_slots().tolist()] == [built.get(s) for s in built.live_slots().tolist()]
    loaded.save(tmp_path / "st2")  # and a save of the loaded store loads as the same
    again = ChunkStore.load(tmp_path / "st2")
    assert again.ids == built.ids and dict(again.slot_of) == built.slot_of


def _old_allow(f: Filters, c: Chunk, otype, prefix) -> bool:
    """The per-chunk predicate the engine used before the chunk store (the masks of
    Ranker.allow must match it)."""
    if f.scope == "code" and not c.is_code or f.scope == "metadata" and c.is_code:
        return False
    if otype and c.object_type != otype:
        return False
    if f.module_kind and c.module_kind != f.module_kind:
        return False
    if prefix and not c.path.startswith(prefix):
        return False
    if f.export_only and not (c.export or not c.is_code):
        return False
    return True


def test_masks_equal_the_old_per_chunk_predicate(sample_root, tmp_path):
    eng = Engine.open(sample_root, index_dir=tmp_path / "idx")
    eng.refresh()
    # holes in the slot range: removed chunks must never pass
    gone = [cid for cid in list(eng.chunks)[::7]]
    for cid in gone:
        eng.store.remove(cid)
    chunks = {cid: eng.store.get_by_id(cid) for cid in eng.chunks}
    assert len(chunks) > 50
    cases = [
        Filters(scope=scope, object_type=ot, module_kind=mk, path_prefix=pp, export_only=ex)
        for scope in ("all", "code", "metadata")
        for ot in (None, "Справочник", "Catalog", "ОбщийМодуль")
        for mk in (None, "common", "object")
        for pp in (None, "CommonModules/", "Catalogs/Валюты", "Nope/")
        for ex in (False, True)
    ]
    from daemon.contract import normalize_object_type

    for f in cases:
        mask = eng.ranker.allow(f)
        otype = normalize_object_type(f.object_type) if f.object_type else None
        want = {cid for cid, c in chunks.items() if _old_allow(f, c, otype, f.path_prefix)}
        if mask is None:
            assert f == Filters()
            continue
        got = {eng.store.ids[s] for s in np.flatnonzero(mask).tolist()}
        assert got == want, f
    meta = eng.ranker.metadata_filter(("Справочник",))
    assert {eng.store.ids[s] for s in np.flatnonzero(meta)} == {
        cid for cid, c in chunks.items() if not c.is_code and c.object_type == "Справочник"
    }


def test_metadata_mask_is_cached_per_store_version(sample_root, tmp_path):
    """The metadata channels' mask (Ranker.metadata_filter) is read once per store version:
    the same read-only array while nothing changes, a new one after a chunk is removed or
    added (and after the store is replaced), always equal to a fresh ``store.mask``; an
    ``allow`` combines into a new array and never writes into the cached one."""
    eng = Engine.open(sample_root, index_dir=tmp_path / "idx")
    eng.refresh()

    def fresh(types):
        return eng.store.mask(scope="metadata", object_types=types or None)

    types = ("Справочник",)
    a = eng.ranker.metadata_filter(types)
    assert not a.flags.writeable and np.array_equal(a, fresh(types)) and a.any()
    assert eng.ranker.metadata_filter(types) is a  # cached
    every = eng.ranker.metadata_filter(())
    assert np.array_equal(every, fresh(())) and every.sum() > a.sum()
    allow = np.zeros(eng.store.capacity, dtype=bool)
    first = int(np.flatnonzero(a)[0])
    allow[first] = True
    both = eng.ranker.metadata_filter(types, allow)
    assert np.flatnonzero(both).tolist() == [first] and np.array_equal(eng.ranker.metadata_filter(types), fresh(types))
    # a metadata chunk removed: the next read sees it gone
    cid = eng.store.ids[first]
    chunk = eng.store.get(first)
    eng.store.remove(cid)
    b = eng.ranker.metadata_filter(types)
    assert b is not a and not b[first] and np.array_equal(b, fresh(types))
    # ... and back (a slot of its own again)
    slot = eng.store.add(chunk)
    c = eng.ranker.metadata_filter(types)
    assert c[slot] and np.array_equal(c, fresh(types))
    # a replaced store (a rebuild or a load) is never answered from the old one's masks
    eng.store = ChunkStore()
    assert not eng.ranker.metadata_filter(types).any()


def _current(idx) -> str:
    return (idx / LEXICAL_DIR / CURRENT_FILE).read_text()


@pytest.mark.parametrize(
    "damage",
    [
        "flags.npy",
        "ids_blob.npy",
        "ids_off.npy",
        "id_hash.npy",
        "id_hash_slot.npy",
        "arena.bin",
        "store.json",
        "tables.msgpack",
        "name_range.npy",
        "missing",
    ],
)
def test_damaged_column_files_mean_a_logged_rebuild(sample_root, tmp_path, caplog, damage):
    idx = tmp_path / "idx"
    eng = Engine.open(sample_root, index_dir=idx, config=EngineConfig(stem=False))
    eng.refresh()
    eng.save()
    d = idx / LEXICAL_DIR / _current(idx) / "chunks"
    if damage == "missing":
        (d / "owner.npy").unlink()
    elif damage == "arena.bin":
        with open(d / damage, "ab") as fh:
            fh.write(b"\x00")  # one byte more than store.json says
    else:
        data = (d / damage).read_bytes()
        (d / damage).write_bytes(data[: len(data) // 2])
    with pytest.raises(ChunkStoreError):
        ChunkStore.load(d)
    with caplog.at_level(logging.WARNING, logger="daemon"):
        back = Engine.open(sample_root, index_dir=idx, config=EngineConfig(stem=False))
    assert len(back.chunks) == 0 and back.generation == ""
    assert any("lexical snapshot unusable" in r.getMessage() and "rebuilding" in r.getMessage() for r in caplog.records)
    back.refresh()
    assert back.chunks == eng.chunks


def test_a_snapshot_of_the_old_single_file_format_is_a_logged_rebuild(sample_root, tmp_path, caplog):
    idx = tmp_path / "idx"
    idx.mkdir()
    (idx / "snapshot.msgpack").write_bytes(msgspec.msgpack.encode({"manifest": {"schema": 5}}))
    with caplog.at_level(logging.WARNING, logger="daemon"):
        eng = Engine.open(sample_root, index_dir=idx)
    assert len(eng.chunks) == 0
    assert any("older format" in r.getMessage() for r in caplog.records)
    eng.refresh()
    eng.save()
    assert not (idx / "snapshot.msgpack").exists() and len(Engine.open(sample_root, index_dir=idx).chunks) == len(
        eng.chunks
    )


def test_a_damaged_current_pointer_is_a_logged_rebuild_and_unfinished_snapshots_go(sample_root, tmp_path, caplog):
    idx = tmp_path / "idx"
    eng = Engine.open(sample_root, index_dir=idx, config=EngineConfig())
    eng.refresh()
    eng.save()
    n = len(eng.chunks)
    lex = idx / LEXICAL_DIR
    (lex / "0123abcd.tmp").mkdir()  # what a kill -9 during a snapshot leaves
    (lex / "0123abcd.tmp" / "part.npy").write_bytes(b"x" * 100)
    (lex / CURRENT_FILE).write_text("garbage!!\n", encoding="ascii")
    with caplog.at_level(logging.INFO, logger="daemon"):
        again = Engine.open(sample_root, index_dir=idx)
    assert len(again.chunks) == 0 and not (lex / "0123abcd.tmp").exists()
    msgs = [r.getMessage() for r in caplog.records]
    assert any(
        "does not name a snapshot generation" in m and r.levelno == logging.WARNING
        for m, r in zip(msgs, caplog.records, strict=True)
    )
    again.refresh()
    assert len(again.chunks) == n


def test_a_staged_first_index_equals_the_batch_apply_and_is_all_or_nothing(sample_root, tmp_path, monkeypatch):
    """A first index is built aside and swapped in (daemon.index.apply.StagedIndex); the same
    export applied as one ChangeSet of every file (the path before, and of every later
    reconcile) gives the same chunks, slots, BM25 column files and rankings. Cancelled half
    way, the engine stays empty."""
    from daemon.engine import Cancelled
    from daemon.index import reconcile

    staged = Engine.open(sample_root, index_dir=tmp_path / "a")
    rep_s = staged.refresh()
    real = reconcile.StagedIndex
    monkeypatch.setattr(reconcile, "StagedIndex", lambda config, index_dir, embedded: None)
    batch = Engine.open(sample_root, index_dir=tmp_path / "b")
    rep_b = batch.refresh()
    monkeypatch.setattr(reconcile, "StagedIndex", real)
    assert (rep_s.chunks_added, rep_s.files_changed, sorted(rep_s.changed_ids)) == (
        rep_b.chunks_added,
        rep_b.files_changed,
        sorted(rep_b.changed_ids),
    )
    assert staged.store.ids == batch.store.ids and staged.chunks == batch.chunks
    for name in ("bm25", "meta_bm25"):
        getattr(staged, name).save(tmp_path / "sa" / name)
        getattr(batch, name).save(tmp_path / "sb" / name)
        for f in sorted((tmp_path / "sa" / name).glob("*.npy")):
            assert f.read_bytes() == (tmp_path / "sb" / name / f.name).read_bytes(), f
    for q in ("курс валюты", "ЗагрКурс", "Справочник.Валюты", "сумма прописью"):
        assert staged.search(q, mode="lexical").hits == batch.search(q, mode="lexical").hits
    assert staged.compact_due  # never journaled: a snapshot is due

    seen = []

    def cancel() -> bool:
        seen.append(1)
        return len(seen) > 10  # after ten files

    fresh = Engine.open(sample_root, index_dir=tmp_path / "c")
    with pytest.raises(Cancelled):
        fresh.prepare(cancel=cancel)
    assert len(fresh.chunks) == 0 and fresh.files == {} and len(fresh.bm25) == 0
    fresh.refresh()
    assert fresh.chunks == staged.chunks


def test_a_query_on_damaged_postings_drops_and_rebuilds_the_lexical_side(sample_root, tmp_path, caplog):
    """Bytes of a saved column file overwritten in place (same size: nothing to notice at a
    memory-mapped load): the first query that reads them gets a clear IndexDamaged, the engine
    drops its lexical side and asks for a full reconcile, which rebuilds the same answers."""
    from daemon.ranking.ranker import IndexDamaged

    idx = tmp_path / "idx"
    eng = Engine.open(sample_root, index_dir=idx)
    eng.refresh()
    eng.save()
    q = "сумма прописью"
    want = [h.id for h in eng.search(q, mode="lexical").hits]
    gen = (idx / LEXICAL_DIR / CURRENT_FILE).read_text().strip()
    postings = idx / LEXICAL_DIR / gen / "bm25" / "postings.npy"
    raw = bytearray(postings.read_bytes())
    raw[128:] = np.random.default_rng(7).integers(0, 256, len(raw) - 128, dtype=np.uint8).tobytes()
    postings.write_bytes(bytes(raw))
    damaged = Engine.open(sample_root, index_dir=idx)
    calls = []
    damaged.on_damaged = lambda: calls.append(1)
    with caplog.at_level(logging.ERROR, logger="daemon"), pytest.raises(IndexDamaged):
        damaged.search(q, mode="lexical")
    assert calls == [1] and len(damaged.chunks) == 0
    assert any("damaged" in r.getMessage() and str(idx) in r.getMessage() for r in caplog.records)
    damaged.refresh()
    assert [h.id for h in damaged.search(q, mode="lexical").hits] == want


def test_blobs_after_the_first_samples_use_the_trained_zstd_dictionary(tmp_path, monkeypatch):
    """The store trains a zstd dictionary on its first ZDICT_SAMPLES blob bodies (LZ4
    before): every chunk reads back the same through add, save, load, increments on the
    loaded store (compressed with the saved dictionary) and a second save; a store saved
    before it trained keeps LZ4; a missing dictionary is damage."""
    import daemon.index.chunk_blobs as blobs

    monkeypatch.setattr(blobs, "ZDICT_SAMPLES", 40)
    monkeypatch.setattr(blobs, "ZDICT_BYTES", 4096)
    chunks = [
        _full_chunk(
            i, text=f"Процедура Метод{i}()\n" + "\n".join(f"\tА{j} = Б{i} * {j}; // шаг {j}" for j in range(i % 17 + 5))
        )
        for i in range(150)
    ]
    s = ChunkStore()
    for c in chunks:
        s.add(c)
    flags = s.col("flags")
    assert not (flags[:39] & blobs.FLAG_ZSTD).any() and (flags[40:] & blobs.FLAG_ZSTD).all()
    assert [s.get(i) for i in range(150)] == chunks
    s.save(tmp_path / "st")
    back = ChunkStore.load(tmp_path / "st")
    assert [back.get(i) for i in range(150)] == chunks and back._codec.zdict == s._codec.zdict and back._codec.zdict
    more = _full_chunk(500, text="Функция Ещё()\n" + "\tВозврат 1;\n" * 30)
    assert back.add(more) == 150 and back.get(150) == more and back.col("flags")[150] & blobs.FLAG_ZSTD
    back.save(tmp_path / "st2")
    again = ChunkStore.load(tmp_path / "st2")
    assert [again.get(i) for i in range(151)] == chunks + [more]
    small = ChunkStore()
    for c in chunks[:10]:
        small.add(c)
    small.save(tmp_path / "small")
    loaded = ChunkStore.load(tmp_path / "small")
    loaded.add(chunks[20])
    assert not (loaded.col("flags") & blobs.FLAG_ZSTD).any() and loaded.get(10) == chunks[20]
    (tmp_path / "st2" / "zdict.bin").write_bytes(b"")
    with pytest.raises(ChunkStoreError):
        ChunkStore.load(tmp_path / "st2")
