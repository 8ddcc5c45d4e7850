"""The ranker on its own: a few hand-made chunks put straight into an index state (no scan,
no reconcile, no snapshot, no corpus, no model; hand-made vectors for the dense channel), and
the query cues as pure functions."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from daemon.contract import Chunk, Filters
from daemon.index.names import api_boost
from daemon.index.state import IndexState
from daemon.ranking.cues import read_cues
from daemon.ranking.params import RankingParams
from daemon.ranking.ranker import Ranker
from daemon.text.tokenize import tokenize

MODULE = "CommonModules/Валюты/Ext/Module.bsl"
SERVICE = "CommonModules/ВалютыСлужебный/Ext/Module.bsl"
REGISTER = "InformationRegisters/КурсыВалют.xml"
ROOT = Path("/export")  # the ranker reads no file: absolute path prefixes are made relative to it


def _method(path: str, owner: str, name: str, text: str, *, export: bool, region: tuple[str, ...] = ()) -> Chunk:
    return Chunk(
        id=f"{path}::{name}",
        path=path,
        kind="function",
        name=name,
        owner=owner,
        object_type="ОбщийМодуль",
        module_kind="common",
        symbol=name,
        export=export,
        region=list(region),
        signature=f"Функция {name}()" + (" Экспорт" if export else ""),
        text=text,
    )


CHUNKS = [
    _method(
        MODULE,
        "ОбщийМодуль.Валюты",
        "КурсВалюты",
        "Функция КурсВалюты(Валюта, Дата) Экспорт\n// курс валюты на дату из регистра курсов\nКонецФункции",
        export=True,
        region=("ПрограммныйИнтерфейс",),
    ),
    _method(
        SERVICE,
        "ОбщийМодуль.ВалютыСлужебный",
        "КурсВалютыНаДату",
        "Функция КурсВалютыНаДату(Валюта, Дата)\n// курс валюты на дату: курс валюты, курс\nКонецФункции",
        export=False,
    ),
    _method(
        SERVICE,
        "ОбщийМодуль.ВалютыСлужебный",
        "ОбновитьКурсы",
        "Функция ОбновитьКурсы()\nКурсВалюты(Валюта, Дата);\n// загрузка курсов валют\nКонецФункции",
        export=False,
    ),
    Chunk(
        id=f"{REGISTER}::",
        path=REGISTER,
        kind="object",
        name="КурсыВалют",
        owner="РегистрСведений.КурсыВалют",
        object_type="РегистрСведений",
        symbol=None,
        text="РегистрСведений КурсыВалют\nСиноним: Курсы валют",
    ),
    Chunk(
        id=f"{REGISTER}::Ресурс:Курс",
        path=REGISTER,
        kind="resource",
        name="Курс",
        owner="РегистрСведений.КурсыВалют",
        object_type="РегистрСведений",
        symbol="Ресурс:Курс",
        text="Ресурс Курс регистра сведений КурсыВалют: курс валюты, хранится по дням",
    ),
]


def _state(chunks: list[Chunk], *, dim: int | None = None) -> IndexState:
    """An index state filled by hand: each chunk in the store, BM25, the names channel."""
    st = IndexState(bm25_k1=1.2, bm25_b=0.3, dim=dim)
    for c in chunks:
        slot = st.store.add(c)
        tokens = tokenize(f"{c.owner}\n{c.text}" if c.is_code else f"\n{c.text}", stem=True)
        st.bm25.add(slot, tokens)
        boost = 0.0
        if c.is_code:
            boost = api_boost(export=c.export, module_kind=c.module_kind, owner=c.owner, region=c.region)
        else:
            st.meta_bm25.add(slot, tokens)
        st.names.add(slot, c.name, container=[c.owner.split(".")[-1]], kind=c.kind, boost=boost)
    st.bm25.flush()
    st.meta_bm25.flush()
    st.names.flush()
    return st


@pytest.fixture
def state() -> IndexState:
    return _state(CHUNKS)


def _rank(ranker: Ranker, query: str, mode: str = "lexical", top_k: int = 10, filters=None, **kw):
    cues = ranker.cues(query, filters)
    return ranker.rank(cues, mode, top_k, filters, **kw)[0]


def test_a_name_query_is_answered_by_the_names_channel_first(state):
    ranker = Ranker(state, root=ROOT)
    hits = _rank(ranker, "КурсВалюты")
    assert hits[0].id == f"{MODULE}::КурсВалюты" and hits[0].match == "exact"
    assert hits[1].match == "prefix"  # КурсВалютыНаДату: a prefix match before the caller BM25 finds
    assert all(h.ranks.get("names") for h in hits[:2])
    # CamelHump and a qualified name
    assert _rank(ranker, "КурВалНа")[0].name == "КурсВалютыНаДату"
    assert _rank(ranker, "Валюты.КурсВалюты")[0].id == f"{MODULE}::КурсВалюты"


def test_a_question_gets_bm25_and_the_api_channel(state):
    ranker = Ranker(state, root=ROOT)
    hits = _rank(ranker, "курс валюты на дату")
    by_id = {h.id: h for h in hits}
    assert {f"{MODULE}::КурсВалюты", f"{SERVICE}::КурсВалютыНаДату"} <= set(by_id)
    # the api channel orders the candidates by the public-API boost: the exported one first
    assert by_id[f"{MODULE}::КурсВалюты"].ranks["api"] == 1
    assert by_id[f"{SERVICE}::КурсВалютыНаДату"].ranks["api"] > 1
    off = Ranker(state, root=ROOT, params=replace(RankingParams(), api_prior_weight=0.0))
    assert all("api" not in h.ranks for h in _rank(off, "курс валюты на дату"))


def test_a_metadata_question_rolls_fields_up_to_their_object(state):
    ranker = Ranker(state, root=ROOT)
    q = "в каком регистре хранится курс валюты"
    hits = _rank(ranker, q)
    ids = [h.id for h in hits]
    assert ids.index(f"{REGISTER}::") < ids.index(f"{REGISTER}::Ресурс:Курс")  # the object above its field
    assert any("meta" in h.ranks for h in hits)
    lists, weights, _ = ranker.channels(ranker.cues(q), "lexical", None)
    assert weights["meta"] == RankingParams().meta_weight * weights["bm25"]
    flat = Ranker(state, root=ROOT, params=replace(RankingParams(), object_rollup=False))
    flat_ids = [h.id for h in _rank(flat, q)]
    assert flat_ids.index(f"{REGISTER}::Ресурс:Курс") < flat_ids.index(f"{REGISTER}::")  # the field alone ranks higher


def test_filters_and_params_change_the_answer(state):
    ranker = Ranker(state, root=ROOT)
    code = Filters(scope="code")
    assert all(h.path.endswith(".bsl") for h in _rank(ranker, "курс валюты", filters=code))
    assert _rank(ranker, "курс валюты", filters=Filters(scope="metadata"))[0].path == REGISTER
    with pytest.raises(ValueError):
        ranker.allow(Filters(scope="nonsense"))
    # every weight comes from the params: RRF k and the names weight show in the scores
    a = _rank(ranker, "КурсВалюты")[0].score
    b = _rank(Ranker(state, root=ROOT, params=replace(RankingParams(), rrf_k=10)), "КурсВалюты")
    assert b[0].score > a


def test_the_dense_channel_with_hand_made_vectors():
    st = _state(CHUNKS, dim=4)
    vecs = np.eye(4, dtype=np.float32)[[0, 1, 2, 3, 3]]
    st.dense.upsert([c.id for c in CHUNKS], vecs)
    ranker = Ranker(st, root=ROOT)
    q = np.array([0.0, 1.0, 0.1, 0.0], dtype=np.float32)
    hits = _rank(ranker, "zzqx wwqy", mode="vector", qvec=q)
    assert hits[0].id == f"{SERVICE}::КурсВалютыНаДату" and set(hits[0].ranks) == {"dense"}
    hybrid = _rank(ranker, "курс валюты на дату", mode="hybrid", qvec=q)
    assert "dense" in hybrid[0].ranks and "bm25" in hybrid[0].ranks
    # a metadata question in hybrid mode also reads the metadata part of the dense ranking
    lists, weights, _ = ranker.channels(ranker.cues("в каком регистре хранится курс"), "hybrid", None, qvec=vecs[3])
    assert lists["meta_dense"][0].startswith(REGISTER) and weights["meta_dense"] == RankingParams().meta_dense_weight


def test_query_cues_are_pure_and_read_once():
    name = read_cues("ОбщегоНазначения.Сообщ", corpus_cyrillic=0.9, docs=False)
    assert name.identifier and name.kind == "name" and name.intent is None and not name.uncued
    meta = read_cues("в каком регистре хранятся курсы валют", corpus_cyrillic=0.9, docs=False)
    assert meta.metadata and meta.object_types[0] == "РегистрСведений" and meta.kind == "metadata"
    howto = read_cues("получить курс валюты на дату", corpus_cyrillic=0.9, docs=False)
    assert howto.howto and not howto.metadata and howto.kind == "semantic" and not howto.uncued
    uncued = read_cues("кратность курса валюты", corpus_cyrillic=0.9, docs=False)
    assert uncued.uncued and not uncued.howto
    assert not read_cues("кратность курса валюты", corpus_cyrillic=0.9, docs=True).uncued  # docs: never
    english = read_cues("load bank statement from file", corpus_cyrillic=0.9, docs=False)
    assert english.cross_script and english.to == "ru" and english.kind == "cross_script"
    assert not read_cues("load bank statement", corpus_cyrillic=0.1, docs=False).cross_script
    assert read_cues("load bank statement", corpus_cyrillic=0.1, docs=False).to == "en"
