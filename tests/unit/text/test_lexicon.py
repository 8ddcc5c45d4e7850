"""The cross-lingual lexicon (daemon/text/lexicon.py, daemon/data/lexicon_1c.json), the query
translation in the engine, and the metadata-names channel (daemon/index/metanames.py): the shipped
file, a real in-process engine over the bundled sample export."""

from __future__ import annotations

import json

import numpy as np
import pytest

from daemon.cli.bench import sample_export_dir
from daemon.engine import Engine, EngineConfig
from daemon.index.metanames import MetadataNames
from daemon.ranking.cues import metadata_intent
from daemon.text.lexicon import LEXICON_PATH, Lexicon, default_lexicon, translated_query
from daemon.text.tokenize import tokenize_query


def test_shipped_lexicon_loads_with_attribution():
    lx = default_lexicon()
    assert len(lx.en_ru) > 1000 and len(lx.ru_en) > 1000
    assert "CC" in lx.attribution and "1C-Soft" in lx.attribution
    data = json.loads(LEXICON_PATH.read_text(encoding="utf-8"))
    assert data["license"] == "CC-BY-4.0"
    assert (LEXICON_PATH.parent / "README.md").read_text(encoding="utf-8").count("CC BY 4.0") >= 1


def test_translate_both_directions_in_index_tokens():
    lx = default_lexicon()
    ru = lx.translate(tokenize_query("get the file extension", stem=True), "ru")
    assert {"файл", "расширен"} <= set(ru)
    assert any(t.startswith("получ") for t in ru)
    assert "the" not in ru and len(ru) == len(set(ru))
    en = lx.translate(tokenize_query("курсы валют", stem=True), "en")
    assert {"rate", "currenc"} <= set(en)
    assert lx.translate(["нетакогослова"], "ru") == []
    with pytest.raises(ValueError):
        lx.translate(["file"], "de")


def test_translated_query_picks_the_corpus_language():
    toks = tokenize_query("user password", stem=True)
    ru = translated_query(toks, "ru")
    assert "парол" in ru and "пользовател" in ru
    en = translated_query(tokenize_query("пароль пользователя", stem=True), "en")
    assert {"password", "user"} <= set(en)
    assert translated_query(["zzqx"], "ru") == []  # nothing translates: the ranker gives no vote
    # a name typed into the question in the code's script stays, first
    mixed = translated_query(tokenize_query("how to call СуммаБезНДС in code", stem=True), "ru")
    assert "суммабезндс" in mixed and mixed.index("суммабезндс") < mixed.index("код")
    assert not any(t in mixed for t in ("call", "code", "how"))
    only_name = translated_query(tokenize_query("zzqx СуммаБезНДС", stem=True), "ru")
    assert "суммабезндс" in only_name and "zzqx" not in only_name


def test_translate_text_writes_the_question_as_words_of_the_other_language():
    lx = default_lexicon()
    ru = lx.translate_text("Get the file extension from a file name!", "ru")
    words = ru.split()
    # whole words as the names write them (the dense channel embeds this text), each once,
    # in the question's order; function words ("the", "from", "a") and punctuation are gone
    assert words[0] == "получить" and "расширений" in words and words.count("файла") == 1
    assert all(w.isalpha() and w == w.lower() for w in words)
    assert not any(w in ("the", "from", "a") for w in words)
    assert lx.translate_text("курсы валют", "en").split() == ["rates", "currency"]
    assert lx.translate_text("zzqx 42 ...", "ru") == ""
    # words already in the target script (names typed into the question) are kept as written
    assert lx.translate_text("how to call СуммаБезНДС in code", "ru").split() == ["вызов", "СуммаБезНДС", "код"]
    assert lx.translate_text("SendEmailMessage пример использования", "en").split()[0] == "SendEmailMessage"
    assert lx.translate_text("ОтправитьSMS from the server", "ru").split()[0] == "ОтправитьSMS"
    # a camelCase English name gives each of its words, as the same words written apart do
    assert lx.translate_text("getCurrencyRate", "ru") == lx.translate_text("get currency rate", "ru") != "получить"
    with pytest.raises(ValueError):
        lx.translate_text("file", "de")
    # every surface word stands for its token: folding and stemming it gives the token back
    from daemon.text.lexicon import name_words

    for lang in ("ru", "en"):
        assert len(lx.surface[lang]) > 1000
        assert all(name_words(word) == [tok] for tok, word in list(lx.surface[lang].items())[::50])


def test_lexicon_without_surface_forms_writes_tokens(tmp_path):
    old = tmp_path / "lex.json"
    old.write_text(json.dumps({"en_ru": {"file": [["файл", 1.0]]}, "ru_en": {}}), encoding="utf-8")
    assert Lexicon.load(old).translate_text("a file", "ru") == "файл"


def test_bad_lexicon_file_is_a_clear_error(tmp_path):
    bad = tmp_path / "lex.json"
    bad.write_text('{"en_ru": {"a": 1}}', encoding="utf-8")
    with pytest.raises(ValueError, match="not a lexicon"):
        Lexicon.load(bad)
    with pytest.raises(OSError):
        Lexicon.load(tmp_path / "missing.json")


@pytest.fixture(scope="module")
def sample_engine(tmp_path_factory):
    root = tmp_path_factory.mktemp("sample")
    import shutil

    shutil.copytree(sample_export_dir(), root / "export")
    eng = Engine.open(root / "export", index_dir=root / "idx", config=EngineConfig())
    eng.refresh()
    return eng


def test_english_question_over_russian_code_finds_the_method(sample_engine):
    # without the lexicon the lexical mode has no vote for a Latin query over Cyrillic names
    top = sample_engine.search("load bank statement from file", mode="lexical", top_k=3).hits[0]
    assert (top.path, top.symbol) == ("CommonModules/ОбменСБанкомСлужебный/Ext/Module.bsl", "ЗагрузитьВыпискуБанка")
    top = sample_engine.search("amount in words", mode="lexical", top_k=3).hits[0]
    assert top.symbol == "СуммаПрописью"


def test_russian_queries_are_not_translated(sample_engine):
    res = sample_engine.search("загрузка выписки из банка из файла", mode="lexical", top_k=3)
    assert res.hits[0].symbol == "ЗагрузитьВыпискуБанка"
    assert all(set(h.ranks) <= {"bm25", "names", "api", "meta"} for h in res.hits)


def test_metadata_question_gets_the_metadata_names_channel(sample_engine):
    res = sample_engine.search("в каком регистре хранятся курсы валют", mode="lexical", top_k=3)
    assert res.hits[0].path == "InformationRegisters/КурсыВалют.xml"
    assert "metanames" in res.hits[0].ranks
    # an English how-to question names a metadata type but asks about code: no metadata channels
    assert not metadata_intent("write the invoice total in words in the document currency").metadata
    assert metadata_intent("which information register stores exchange rates").metadata


def test_metadata_names_index_follows_edits(sample_engine):
    store = sample_engine.store
    toks = tokenize_query("курсы валют", stem=True)
    mn = MetadataNames()
    first = int(store.live_slots()[0])
    mn.add(store, first, store.get(first))  # before the first build: nothing to maintain
    assert mn.index is None
    slots = mn.search(store, toks, 5, None)
    assert slots and all(store.get(s).is_metadata for s in slots)
    target = slots[0]
    chunk = store.get(target)
    mn.remove(store, target)
    assert target not in mn.search(store, toks, 50, None)
    mn.add(store, target, chunk)
    assert target in mn.search(store, toks, 50, None)
    code = next(s for s in store.live_slots().tolist() if store.get(s).is_code)
    mn.add(store, code, store.get(code))
    assert code not in mn.index
    # docs sections and code are never documents of the metadata-names index
    assert all(store.get(s).is_metadata for s in mn.index.slots().tolist())
    # another store: the parts built for the first one are dropped, the new one is read
    from daemon.index.chunkstore import ChunkStore

    assert mn.search(ChunkStore(), toks, 5, None) == [] and len(mn.index) == 0


def test_name_typed_in_the_other_language_goes_through_the_names_channel(sample_engine):
    res = sample_engine.search("AmountInWords", mode="lexical", top_k=5)
    top = res.hits[0]
    assert (top.symbol, top.match) == ("СуммаПрописью", "translated")
    assert top.ranks.get("names") == 1
    # a Russian name over Russian code is not translated: the ordinary names channel answers
    assert sample_engine.search("СуммаПрописью", mode="lexical", top_k=1).hits[0].match == "exact"


def test_translated_names_both_directions_and_order():
    from daemon.contract import Chunk
    from daemon.index.chunkstore import ChunkStore

    def method(path, name):
        return Chunk(id=f"{path}::{name}", path=path, kind="function", name=name, symbol=name, module_kind="common")

    store = ChunkStore()
    en = [
        method("CommonModules/Common/Ext/Module.bsl", n)
        for n in ("ObjectAttributesValues", "ObjectAttributeValue", "AttributeValue")
    ]
    slots = [store.add(c) for c in en]
    mn = MetadataNames()
    got = mn.translated_names(store, "ЗначениеРеквизитаОбъекта", "en", 10)
    assert got[:2] == [slots[1], slots[0]]
    assert slots[2] not in got  # "Объекта" has no match there
    assert mn.translated_names(store, "Значение", "en", 10) == []  # one word alone: no name match
    assert mn.translated_names(store, "ЗначениеЗзщфыв", "en", 10) == []  # an untranslatable word
    allow = np.zeros(store.capacity, dtype=bool)
    allow[slots[0]] = True
    assert mn.translated_names(store, "ЗначениеРеквизитаОбъекта", "en", 10, allow=allow) == [slots[0]]
    # the API boost orders names with the same number of extra words
    # the API boost orders names with the same number of extra words (before the chunk id)
    assert mn.translated_names(store, "ЗначениеРеквизитаОбъекта", "en", 10, boost=lambda s: float(s == slots[0]))[
        :2
    ] == [slots[0], slots[1]]


def test_method_families_follow_edits(sample_engine):
    store = sample_engine.store
    mn = MetadataNames()
    target = next(s for s in store.live_slots().tolist() if store.get(s).name == "СуммаПрописью")
    assert target in mn.translated_names(store, "AmountInWords", "ru", 5)  # builds the families
    chunk = store.get(target)
    mn.remove(store, target)
    assert target not in mn.translated_names(store, "AmountInWords", "ru", 5)
    mn.add(store, target, chunk)  # back through the overlay of methods added since the build
    assert target in mn.translated_names(store, "AmountInWords", "ru", 5)
    assert mn.nbytes() > 0
    mn.reset()
    assert mn.index is None and mn.nbytes() < 100


def test_engine_edits_reach_the_name_words(tmp_path):
    """A real edit of the export through refresh: the engine's reconcile hooks keep both parts
    current (a renamed method leaves the translated names, a new one joins them)."""
    import shutil

    root = tmp_path / "export"
    shutil.copytree(sample_export_dir(), root)
    eng = Engine.open(root, index_dir=tmp_path / "idx", config=EngineConfig())
    eng.refresh()
    hit = eng.search("AmountInWords", mode="lexical", top_k=5).hits[0]
    assert (hit.symbol, hit.match) == ("СуммаПрописью", "translated")
    assert eng.search("где хранятся курсы валют", mode="lexical", top_k=3).hits[0].ranks.get("metanames")
    mod = root / "CommonModules/СтроковыеФункцииДемо/Ext/Module.bsl"
    mod.write_text(
        mod.read_text(encoding="utf-8-sig").replace("Функция СуммаПрописью(", "Функция НомерСловами("), encoding="utf-8"
    )
    eng.refresh()
    assert not any(h.symbol == "СуммаПрописью" for h in eng.search("AmountInWords", mode="lexical", top_k=5).hits)
    assert eng.search("NumberInWords", mode="lexical", top_k=5).hits[0].symbol == "НомерСловами"


def test_a_query_spelling_a_method_name_gets_no_metadata_names_channel(sample_engine):
    from daemon.index.metanames import spelled_name

    assert spelled_name("значение реквизита объекта") == "ЗначениеРеквизитаОбъекта"
    assert spelled_name("реквизит") is None and spelled_name("НФ-001 код") is None
    assert metadata_intent("реквизиты контрагента").metadata  # "реквизит" is a field cue
    res = sample_engine.search("реквизиты контрагента", mode="lexical", top_k=10)
    assert not any("metanames" in h.ranks for h in res.hits)
    # a metadata question that spells no method keeps the channel
    assert any(
        "metanames" in h.ranks for h in sample_engine.search("реквизит телефон контактного лица", mode="lexical").hits
    )


def test_documentation_searches_are_not_translated(sample_engine):
    """A docs search (scope docs) keeps its own cross-script handling (daemon.ranking.docs):
    no translation by the code's rule, no translated names, the cross-script lexical weight."""
    from daemon.contract import Filters
    from daemon.ranking.params import RankingParams

    params = RankingParams()

    def channels(query: str, docs: bool):
        cues = sample_engine.query_cues(query, Filters(scope="docs") if docs else None, mode="lexical")
        with sample_engine.lock:
            return sample_engine.ranker.channels(cues, "lexical", None)

    q = "load bank statement from file"
    ch, w, _ = channels(q, docs=False)
    assert w["bm25"] == params.translated_lexical_weight and ch["bm25"]
    ch, w, _ = channels(q, docs=True)
    assert w["bm25"] == params.cross_script_weight
    _, _, match = channels("AmountInWords", docs=True)
    assert "translated" not in match.values()
