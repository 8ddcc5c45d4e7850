"""BM25Index (daemon/index/bm25*.py) without corpora: scores against the bm25s oracle and against a
from-scratch rebuild after incremental updates, the exact pruning, persistence, edge cases."""

from __future__ import annotations

import random

import bm25s
import numpy as np
import pytest

from daemon.index import bm25 as bm25_mod
from daemon.index import bm25_postings, bm25_scoring, bm25_vocab
from daemon.index.bm25 import BM25Error, BM25Index

K1, B = 1.2, 0.75


def _oracle(docs: dict[str, list[str]], query: list[str]) -> dict[str, float]:
    """bm25s Lucene scores times (k1 + 1), which bm25s leaves out (see daemon/index/bm25.py)."""
    keys = list(docs)
    model = bm25s.BM25(method="lucene", k1=K1, b=B)
    model.index([docs[k] for k in keys], show_progress=False)
    if not any(t in model.vocab_dict for t in query):
        return {}
    scores = model.get_scores(query) * (K1 + 1)
    return {k: float(s) for k, s in zip(keys, scores, strict=True) if s > 0}


def _random_docs(rng: random.Random, n: int, vocab: int = 60) -> dict[str, list[str]]:
    words = [f"w{i}" for i in range(vocab)]
    return {
        f"doc{i:04d}": [rng.choice(words[: rng.randint(2, vocab)]) for _ in range(rng.randint(1, 50))] for i in range(n)
    }


def _assert_scores_equal(got: dict[str, float], want: dict[str, float], rel: float = 1e-5):
    assert got.keys() == want.keys()
    for k, v in want.items():
        assert got[k] == pytest.approx(v, rel=rel), k


QUERIES = [["w1"], ["w0", "w5", "w17"], ["w3", "w3", "w40"], ["w59", "nope"], ["w2", "w9", "w11", "w30", "w44", "w58"]]


def _key(slot: int) -> str:
    return f"doc{slot:04d}"


def _slot_docs(docs: dict[str, list[str]]) -> dict[int, list[str]]:
    return {int(k[3:]): toks for k, toks in docs.items()}


def _keyed(scores: dict[int, float]) -> dict[str, float]:
    return {_key(s): v for s, v in scores.items()}


def _build(docs: dict[int, list[str]], k1: float = K1, b: float = B) -> BM25Index:
    index = BM25Index(k1, b)
    for s, toks in docs.items():
        index.add(s, toks)
    return index


def test_scores_match_bm25s_oracle():
    docs = _random_docs(random.Random(1), 300)
    index = _build(_slot_docs(docs))
    for q in QUERIES:
        _assert_scores_equal(_keyed(index.scores(q)), _oracle(docs, q))


def test_incremental_ops_match_rebuild_and_oracle(monkeypatch):
    """Adds, replaces and removals on reused slots (as the chunk store hands them out)
    across several compactions: scores identical to a fresh index, and to a fresh index whose
    slots are numbered differently when ties go by ``key_of``."""
    monkeypatch.setattr(bm25_mod, "_COMPACT_MIN_DEAD", 20)
    rng = random.Random(7)
    index = BM25Index(K1, B)
    live: dict[int, list[str]] = {}
    fresh = list(_random_docs(random.Random(8), 400).values())
    for step in range(1500):
        op = rng.random()
        if op < 0.45 or not live:
            s = rng.randrange(250)
            toks = fresh[rng.randrange(400)]
            index.add(s, toks)  # add or replace
            live[s] = toks
        elif op < 0.9:
            s = rng.choice(sorted(live))
            assert index.remove(s)
            del live[s]
        else:
            assert not index.remove(1000 + step)
    rebuilt = _build(live)
    assert len(index) == len(live) == len(rebuilt)
    assert index.n_terms == rebuilt.n_terms == len({t for toks in live.values() for t in toks})
    # the same documents under other slot numbers: slot 2s+7 holds document s
    moved = _build({2 * s + 7: toks for s, toks in live.items()})

    def moved_key(slot: int) -> str:
        return _key((slot - 7) // 2)

    for q in QUERIES:
        got = index.scores(q)
        # same integer statistics -> identical floats, not just close
        assert got == rebuilt.scores(q)
        _assert_scores_equal(_keyed(got), _oracle({_key(s): t for s, t in live.items()}, q))
        want = index.search(q, 10, key_of=_key)
        assert want == rebuilt.search(q, 10, key_of=_key)
        assert [(_key(s), v) for s, v in want] == [(moved_key(s), v) for s, v in moved.search(q, 10, key_of=moved_key)]


@pytest.mark.parametrize(
    ("merge_min", "save_every", "piece"),
    [(1, 0.05, 1 << 21), (64, 0.05, 1 << 21), (10**9, 0.05, 1 << 21), (64, 0.0, 1 << 21), (1, 0.05, 7), (64, 0.05, 64)],
)
def test_block_tails_buffer_and_loaded_docs_agree_with_rebuild(monkeypatch, tmp_path, merge_min, save_every, piece):
    """The posting layouts (CSR block, per-term tails, the add buffer, removals waiting for
    a block scan; documents loaded from memory-mapped column files) give the scores of a
    fresh index at every step: merge_min 1 merges on every read, 10**9 never (tails only);
    ``piece`` 7 / 64: the merge's and the doc -> terms index's counting sorts run in many
    pieces (one term's postings or one document's rows split across pieces)."""
    monkeypatch.setattr(bm25_mod, "_MERGE_MIN_ROWS", merge_min)
    monkeypatch.setattr(bm25_postings, "MERGE_PIECE", piece)
    monkeypatch.setattr(bm25_mod, "_COMPACT_MIN_DEAD", 30)
    rng = random.Random(11)
    fresh = list(_random_docs(random.Random(12), 300).values())
    index = BM25Index(K1, B)
    live: dict[int, list[str]] = {}
    checks = saves = 0
    for step in range(1200):
        op = rng.random()
        if op < 0.5 or not live:
            s = rng.randrange(200)
            toks = fresh[rng.randrange(300)]
            index.add(s, toks)  # add or replace
            live[s] = toks
        elif op < 0.85:
            s = rng.choice(sorted(live))
            assert index.remove(s)
            del live[s]
        elif op < 0.85 + save_every:
            saves += 1
            index.save(tmp_path / f"g{saves}")
            index = BM25Index.load(tmp_path / f"g{saves}", mmap=bool(saves % 2))
        else:
            checks += 1
            rebuilt = _build(live)
            q = rng.choice(QUERIES)
            assert index.scores(q) == rebuilt.scores(q), step
            assert index.search(q, 20) == rebuilt.search(q, 20), step
            assert index.n_terms == rebuilt.n_terms and index.df("w1") == rebuilt.df("w1")
            assert sorted(index.slots().tolist()) == sorted(live)
    assert checks > 50 and (saves > 20 or not save_every)


def test_stable_argsort_of_wide_keys():
    rng = np.random.default_rng(4)
    for high in (50, 70_000, 2**32 - 1):
        keys = rng.integers(0, high, 5000, endpoint=True).astype(np.uint32)
        assert np.array_equal(bm25_postings.stable_argsort(keys), np.argsort(keys, kind="stable"))
    assert bm25_postings.stable_argsort(np.zeros(0, dtype=np.uint32)).size == 0


def test_remove_all_then_reuse():
    index = _build(_slot_docs(_random_docs(random.Random(3), 50)))
    for s in index.slots().tolist():
        assert index.remove(s)
    assert len(index) == 0 and index.n_terms == 0
    assert index.search(["w1"], 10) == []
    index.add(5, ["x", "y"])
    index.add(2, ["y"])
    assert [s for s, _ in index.search(["x", "y"], 5)] == [5, 2]


def test_reused_slot_does_not_see_its_old_document():
    index = BM25Index()
    index.add(0, ["alpha", "beta"])
    index.add(1, ["beta"])
    index.flush()  # the first document's postings are in the block
    assert index.remove(0)
    index.add(0, ["gamma"])  # the chunk store gave slot 0 to another chunk
    assert index.df("alpha") == 0 and index.df("beta") == 1 and index.df("gamma") == 1
    assert [s for s, _ in index.search(["alpha"], 5)] == []
    assert index.scores(["beta", "gamma"]) == _build({1: ["beta"], 0: ["gamma"]}).scores(["beta", "gamma"])


def test_empty_query_unknown_terms_and_k():
    index = BM25Index()
    index.add(0, ["alpha", "beta"])
    assert index.search([], 10) == []
    assert index.search(["gamma", "delta"], 10) == []
    assert index.search(["alpha"], 0) == []
    assert index.scores([]) == {}
    # an unknown term next to a known one changes nothing
    assert index.search(["alpha", "zzz"], 10) == index.search(["alpha"], 10)


def test_empty_document_counts_in_n_and_avgdl():
    docs = {"doc0000": ["x", "y", "x"], "doc0001": [], "doc0002": ["y"]}
    index = _build(_slot_docs(docs))
    assert 1 in index and len(index) == 3 and 3 not in index and "doc0001" not in index
    _assert_scores_equal(_keyed(index.scores(["x", "y"])), _oracle(docs, ["x", "y"]))


def test_ties_are_ordered_by_key_of_and_cut_stably():
    index = BM25Index()
    keys = {0: "k5", 1: "k3", 2: "k9", 3: "k1", 4: "k7", 5: "other"}
    for s in range(5):
        index.add(s, ["same", "words"])
    index.add(5, ["same", "different", "words", "here"])
    hits = index.search(["same"], 3, key_of=keys.__getitem__)
    assert [keys[s] for s, _ in hits] == ["k1", "k3", "k5"]
    assert hits[0][1] == hits[1][1] == hits[2][1]
    seq = [keys[s] for s in range(6)]
    assert index.search(["same"], 3, key_of=seq) == hits  # a sequence is indexed
    assert [s for s, _ in index.search(["same"], 3)] == [0, 1, 2]  # no key_of: by slot
    assert [keys[s] for s, _ in index.search(["same"], 10, key_of=seq)][-1] == "other"


def test_allow_mask_and_predicate_equal_filtered_full_ranking():
    index = _build(_slot_docs(_random_docs(random.Random(11), 500)))
    q = ["w1", "w4"]
    full = index.search(q, 1000)
    assert len(full) > 100
    mask = np.array([s % 7 == 0 for s in range(500)])
    want = [h for h in full if mask[h[0]]][:25]
    assert index.search(q, 25, allow=mask) == want
    assert index.search(q, 25, allow=lambda s: s % 7 == 0) == want
    assert index.search(q, 5, allow=np.zeros(500, dtype=bool)) == []
    short = mask[:300]  # slots beyond the mask are not allowed
    assert index.search(q, 1000, allow=short) == [h for h in full if h[0] < 300 and mask[h[0]]]


def test_term_ids_path_equals_tokens():
    docs = _slot_docs(_random_docs(random.Random(21), 200))
    want = _build(docs)
    index = BM25Index(K1, B)
    vocab = sorted({t for toks in docs.values() for t in toks})
    tids = index.term_ids(vocab)
    tid_of = dict(zip(vocab, tids.tolist(), strict=True))
    for s, toks in docs.items():
        index.add_term_ids(s, np.array([tid_of[t] for t in toks], dtype=np.uint32))
    for q in QUERIES:
        assert index.scores(q) == want.scores(q)
        assert index.search(q, 20) == want.search(q, 20)
    assert index.n_terms == want.n_terms
    with pytest.raises(ValueError):
        index.add_term_ids(1, [len(vocab) + 5])


def _files(folder) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


@pytest.mark.parametrize("mmap", [True, False])
def test_save_load_round_trip_then_increments(tmp_path, mmap):
    rng = random.Random(5)
    docs = _slot_docs(_random_docs(rng, 300))
    docs[77] = ["ёлка", "Ärger", "日本", "\U0001f600", "w1"]  # non-ASCII terms through the blob
    index = _build(docs, 1.5, 0.6)
    for s in rng.sample(sorted(docs), 100):
        index.remove(s)  # tombstones: saved compacted
        docs.pop(s)
    index.add(1, ["w1", "w1", "w2"])  # replace
    docs[1] = ["w1", "w1", "w2"]
    index.save(tmp_path / "a")
    files = _files(tmp_path / "a")
    assert set(files) >= {"header.json", "postings.npy", "vocab_blob.npy"}
    restored = BM25Index.load(tmp_path / "a", mmap=mmap, verify=True)
    assert restored.k1 == 1.5 and restored.b == 0.6
    assert len(restored) == len(index) and restored.n_terms == index.n_terms
    for q in QUERIES + [["ёлка", "日本"], ["\U0001f600"]]:
        assert restored.scores(q) == index.scores(q)
        assert restored.search(q, 20) == index.search(q, 20)
    assert restored.df("ärger") == 0 and restored.df("Ärger") == (1 if 77 in docs else 0)
    # increments on the loaded index: tails, merges, removals of loaded documents, new terms
    ops = random.Random(6)
    fresh = list(_random_docs(random.Random(9), 400, vocab=90).values())
    for step in range(600):
        if ops.random() < 0.5:
            s = ops.randrange(400)
            docs[s] = fresh[ops.randrange(400)]
            restored.add(s, docs[s])
        elif docs:
            s = ops.choice(sorted(docs))
            assert restored.remove(s)
            del docs[s]
        if step % 100 == 0:
            rebuilt = _build(docs, 1.5, 0.6)
            for q in QUERIES + [["w70", "w88"]]:
                assert restored.scores(q) == rebuilt.scores(q)
                assert restored.search(q, 30) == rebuilt.search(q, 30)
    assert _files(tmp_path / "a") == files  # the mapped files were never written
    restored.save(tmp_path / "b")  # and a loaded, changed index saves again
    again = BM25Index.load(tmp_path / "b")
    rebuilt = _build(docs, 1.5, 0.6)
    for q in QUERIES:
        assert again.scores(q) == rebuilt.scores(q)


@pytest.mark.parametrize("remap", [True, False])
def test_saved_index_keeps_working_and_removes_by_its_doc_index(tmp_path, remap):
    """After save() the same object (its block then memory-mapped from the files with
    ``remap``) takes removals of saved documents through the saved doc -> terms index (no
    block scan) and new documents, and equals a fresh index."""
    rng = random.Random(41)
    docs = _slot_docs(_random_docs(rng, 400))
    index = _build(docs)
    index.save(tmp_path / "s", remap=remap)
    assert isinstance(index._base, np.memmap) == remap
    for s in rng.sample(sorted(docs), 120):
        assert index.remove(s)
        del docs[s]
        assert not remap or not index._rm_block  # remapped: resolved at once from doc_terms
    for s in range(400, 450):
        docs[s] = [f"w{rng.randrange(70)}" for _ in range(rng.randint(1, 20))]
        index.add(s, docs[s])
    rebuilt = _build(docs)
    for q in QUERIES + [["w65", "w69"]]:
        assert index.scores(q) == rebuilt.scores(q)
        assert index.search(q, 25) == rebuilt.search(q, 25)
    assert index.n_terms == rebuilt.n_terms


def test_save_refuses_the_folder_it_is_mapped_from(tmp_path):
    index = _build({0: ["x"], 1: ["y"]})
    index.save(tmp_path / "g1")
    loaded = BM25Index.load(tmp_path / "g1")
    with pytest.raises(ValueError, match="memory-mapped"):
        loaded.save(tmp_path / "g1")
    loaded.save(tmp_path / "g2")  # a new generation folder is fine
    assert BM25Index.load(tmp_path / "g2").scores(["x"]) == index.scores(["x"])
    # the generation it maps was renamed (g2.tmp -> g2) and the old one deleted: still works
    (tmp_path / "g3.tmp").mkdir()
    loaded.save(tmp_path / "g3.tmp" / "bm25")
    (tmp_path / "g3.tmp").rename(tmp_path / "g3")
    for p in (tmp_path / "g1").iterdir():
        p.unlink()
    (tmp_path / "g1").rmdir()
    loaded.add(2, ["x", "z"])
    loaded.save(tmp_path / "g4")
    assert loaded.scores(["x"]) == _build({0: ["x"], 1: ["y"], 2: ["x", "z"]}).scores(["x"])


def test_empty_index_saves_and_loads(tmp_path):
    BM25Index().save(tmp_path / "e")
    index = BM25Index.load(tmp_path / "e")
    assert len(index) == 0 and index.search(["x"], 5) == []
    index.add(3, ["x"])
    assert index.search(["x"], 5)[0][0] == 3


def test_vocabulary_lookup_survives_hash_collisions(monkeypatch, tmp_path):
    """Every term hashing alike (a degenerate hash) still finds the right term ids."""
    real = bm25_vocab.hash_spans
    monkeypatch.setattr(bm25_vocab, "hash_spans", lambda blob, off: real(blob, off) & np.uint64(3))
    docs = _slot_docs(_random_docs(random.Random(2), 100))
    index = _build(docs)
    index.save(tmp_path / "c")
    loaded = BM25Index.load(tmp_path / "c")
    for q in QUERIES:
        assert loaded.scores(q) == index.scores(q)
    loaded.add(500, ["w1", "w2", "brand-new"])
    assert loaded.df("brand-new") == 1 and loaded.df("w1") == index.df("w1") + 1


def test_hash_spans_deterministic_and_spread():
    terms = [f"t{i}" for i in range(5000)] + ["", "ё", "ёё"]
    blob, off = bm25_vocab._encode_terms(terms)
    h = bm25_vocab.hash_spans(blob, off)
    assert np.unique(h).size == len(terms)
    one = [int(bm25_vocab.hash_spans(*bm25_vocab._encode_terms([t]))[0]) for t in terms[:50]]
    assert one == h[:50].tolist()
    monkey = bm25_vocab.HASH_PIECE
    try:
        bm25_vocab.HASH_PIECE = 7  # many pieces
        assert np.array_equal(bm25_vocab.hash_spans(blob, off), h)
    finally:
        bm25_vocab.HASH_PIECE = monkey


def _damage(folder, name, fn):
    path = folder / name
    path.write_bytes(fn(path.read_bytes()))


def test_damaged_or_foreign_files_raise_bm25error(tmp_path):
    index = _build(_slot_docs(_random_docs(random.Random(4), 50)))
    good = tmp_path / "good"
    index.save(good)
    cases = {
        "truncated postings": ("postings.npy", lambda b: b[:-8]),
        "header garbage": ("header.json", lambda b: b"{not json"),
        "other format": ("header.json", lambda b: b.replace(b"bsl-lens.bm25", b"other")),
        "count mismatch": ("header.json", lambda b: b.replace(b'"docs": 50', b'"docs": 51')),
        "not npy": ("offsets.npy", lambda b: b"garbage" * 10),
    }
    for label, (name, fn) in cases.items():
        bad = tmp_path / label.replace(" ", "_")
        bad.mkdir()
        for p in good.iterdir():
            (bad / p.name).write_bytes(p.read_bytes())
        _damage(bad, name, fn)
        with pytest.raises(BM25Error, match=str(bad.name)):
            BM25Index.load(bad)
    missing = tmp_path / "missing"
    missing.mkdir()
    for p in good.iterdir():
        if p.name != "lengths.npy":
            (missing / p.name).write_bytes(p.read_bytes())
    with pytest.raises(BM25Error):
        BM25Index.load(missing)
    with pytest.raises(BM25Error):
        BM25Index.load(tmp_path / "nowhere")
    # a flipped posting byte: same sizes, caught by verify (CRC-32)
    flip = tmp_path / "flip"
    flip.mkdir()
    for p in good.iterdir():
        (flip / p.name).write_bytes(p.read_bytes())
    _damage(flip, "postings.npy", lambda b: b[:-3] + bytes([b[-3] ^ 0x40]) + b[-2:])
    BM25Index.load(flip)  # cheap checks pass
    with pytest.raises(BM25Error, match="CRC"):
        BM25Index.load(flip, verify=True)


def test_df_and_coverage_follow_live_documents():
    index = BM25Index()
    index.add(0, ["x", "y", "x"])
    index.add(1, ["y"])
    assert index.df("x") == 1 and index.df("y") == 2 and index.df("zzz") == 0
    assert index.coverage(["x", "zzz"]) == 0.5
    assert index.coverage(["x", "x", "y"]) == 1.0  # distinct tokens
    assert index.coverage([]) == 0.0
    index.remove(0)
    assert index.df("x") == 0 and index.df("y") == 1
    assert index.coverage(["x", "y"]) == 0.5
    index.remove(1)
    assert index.coverage(["y"]) == 0.0


def test_invalid_parameters_and_slots():
    with pytest.raises(ValueError):
        BM25Index(k1=0)
    with pytest.raises(ValueError):
        BM25Index(b=1.5)
    with pytest.raises(ValueError):
        BM25Index().add(-1, ["x"])
    with pytest.raises(TypeError):
        BM25Index().add(1.5, ["x"])  # type: ignore[arg-type]
    index = _build({0: ["x"]})
    with pytest.raises(TypeError):  # slots only: the string-key path is gone
        index.add("doc0000", ["x"])  # type: ignore[arg-type]
    assert "doc0000" not in index and not index.remove("doc0000")  # type: ignore[arg-type]
    assert index.search(["x"], 5) == [(0, index.scores(["x"])[0])]


def test_doc_terms_encoding_round_trips_wide_gaps(monkeypatch):
    """The saved doc -> terms index (16-bit deltas, wide deltas completed by the exception
    columns) gives back every document's term ids, also across pieces and for gaps of
    2**16 and more."""
    monkeypatch.setattr(bm25_postings, "MERGE_PIECE", 5)
    rng = np.random.default_rng(9)
    docs = [np.unique(rng.integers(0, high, size=rng.integers(0, 12))) for high in [3, 70_000, 2**31, 2**32 - 1] * 10]
    off = np.zeros(len(docs) + 1, dtype="<i8")
    np.cumsum([d.size for d in docs], out=off[1:])
    tids = np.concatenate(docs).astype("<u4")
    lo, xpos, xhi = bm25_postings.encode_doc_terms(off, tids)
    assert lo.dtype == np.dtype("<u2") and lo.size == tids.size and xpos.size == xhi.size > 0
    for i, d in enumerate(docs):
        assert bm25_postings.decode_doc_terms(off, lo, xpos, xhi, i) == d.tolist()


def _zipf_docs(rng: random.Random, n: int, vocab: int = 400) -> dict[int, list[str]]:
    """Documents whose words follow Zipf's law (a few words in most documents, many rare
    ones), as in code: the shape the pruning of :meth:`BM25Index._scored` works on."""
    words = [f"z{i}" for i in range(vocab)]
    weights = [1.0 / (i + 1) for i in range(vocab)]
    return {s: rng.choices(words, weights, k=rng.randint(3, 60)) for s in range(n)}


def _full_top(index: BM25Index, q: list[str], k: int, key_of, mask=None) -> list[tuple[int, float]]:
    """The top k by the unpruned algorithm: every posting scored (:meth:`BM25Index.scores`,
    the reference accumulation), sorted by (-score, key)."""
    got = [(s, v) for s, v in index.scores(q).items() if mask is None or (s < mask.size and mask[s])]
    got.sort(key=lambda x: (-x[1], key_of(x[0])))
    return got[:k]


@pytest.mark.parametrize("search_ratio", [0, 10**9])
def test_pruned_search_equals_full_scoring(monkeypatch, search_ratio):
    """The exact pruning (common terms read only for the candidates among the rarer terms'
    docs) gives the same (slot, score) lists, bit for bit, as scoring every posting: ties,
    masks, dead docs (block and tails), repeated query terms, several k; the skipped terms
    read by binary searches (``search_ratio`` 0) or by a gather per posting (10**9). The
    pruned path must actually run (and also the fall-back to full scoring when the bound
    never holds)."""
    monkeypatch.setattr(bm25_scoring, "PRUNE_MIN_POSTINGS", 0)
    monkeypatch.setattr(bm25_scoring, "PRUNE_SEARCH_RATIO", search_ratio)
    monkeypatch.setattr(bm25_scoring, "PRUNE_CHECK_DF", 1)
    monkeypatch.setattr(bm25_mod, "_COMPACT_MIN_DEAD", 10**9)
    calls = {"pruned": 0}
    real = bm25_scoring.candidate_scores

    def counted(*a, **kw):
        calls["pruned"] += 1
        return real(*a, **kw)

    monkeypatch.setattr(bm25_scoring, "candidate_scores", counted)
    rng = random.Random(31)
    docs = _zipf_docs(rng, 1500)
    for s in range(1500, 1540):  # exact duplicates: ties at every cut-off
        docs[s] = list(docs[s - 1500])
    index = _build(docs)
    index.flush()
    for s in rng.sample(sorted(docs), 200):  # dead docs in the block
        index.remove(s)
    for s in range(1600, 1700):  # documents in the tails after the block
        index.add(
            s, rng.choices([f"z{i}" for i in range(400)], [1.0 / (i + 1) for i in range(400)], k=rng.randint(3, 60))
        )
    index.remove(1650)
    keys = {s: f"k{(s * 7919) % 10007:05d}" for s in range(2000)}
    key_of = keys.__getitem__
    mask = np.array([s % 3 != 0 for s in range(1800)])
    queries = [
        [f"z{rng.randrange(150, 400)}"] + [f"z{rng.randrange(0, 12)}" for _ in range(rng.randint(1, 6))]
        for _ in range(60)
    ]
    queries += [["z0", "z1", "z2", "z3"], ["z0", "z0", "z200"], ["z399", "z1", "z398", "z0"], ["z5", "nope", "z300"]]
    for q in queries:
        for k in (1, 10, 50):
            assert index.search(q, k, key_of=key_of) == _full_top(index, q, k, key_of), (q, k)
            assert index.search(q, k, key_of=key_of, allow=mask) == _full_top(index, q, k, key_of, mask), (q, k)
    assert calls["pruned"] > 50  # the pruned path ran
    # k beyond the rarer terms' docs: no k-th score to bound by -> full scoring, same list
    calls["pruned"] = 0
    q = ["z300", "z0", "z1"]
    assert index.search(q, 2000, key_of=key_of) == _full_top(index, q, 2000, key_of)
    assert calls["pruned"] == 0


def test_search_work_arrays_stay_zero_and_follow_growth(monkeypatch):
    """The per-search work arrays (:meth:`BM25Index._buffers`) are all zero after every
    search (pruned or not), are replaced when documents are added, and are dropped when a
    search fails half-way; results stay those of full scoring."""
    monkeypatch.setattr(bm25_scoring, "PRUNE_MIN_POSTINGS", 0)
    monkeypatch.setattr(bm25_scoring, "PRUNE_CHECK_DF", 1)
    rng = random.Random(5)
    docs = _zipf_docs(rng, 800)
    index = _build(docs)
    for q in (["z300", "z0", "z1"], ["z2"], ["z0", "z1", "z2", "z3"]):
        index.search(q, 10)
        acc, part, mark = index._bufs
        assert not acc.any() and not part.any() and not mark.any()
    n = index._bufs[0].size
    index.add(900, ["z300", "z0"])
    assert index.search(["z300", "z0"], 5, key_of=_key) == _full_top(index, ["z300", "z0"], 5, _key)
    assert index._bufs[0].size == n + 1

    def boom(*a, **kw):
        raise IndexError("damaged postings")

    monkeypatch.setattr(bm25_scoring, "term_scores", boom)
    with pytest.raises(IndexError):
        index.search(["z300", "z0"], 5)
    assert index._bufs is None
