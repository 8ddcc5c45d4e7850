"""The engine (lexical side) on the three real corpora, read in place: formats, counts, and
retrieval quality on the dev gold set as a regression guard (the measured numbers and the
full hybrid table are in docs/quality.md; these floors sit a little below them)."""

from __future__ import annotations

from pathlib import Path

import pytest

from daemon.engine import Engine
from daemon.dev.evaluate import evaluate, load_gold

from shared_paths import EVAL_DIR


def _engine(root: Path, tmp_path_factory) -> Engine:
    eng = Engine.open(root, index_dir=tmp_path_factory.mktemp(f"idx-{root.name}"))
    eng.refresh()
    return eng


@pytest.fixture(scope="module")
def ru_engine(ssl_ru, tmp_path_factory):
    return _engine(ssl_ru, tmp_path_factory)


def _gold(corpus: str) -> list[dict]:
    path = EVAL_DIR / "gold_dev.jsonl"
    if not path.is_file():
        pytest.skip(f"gold set not found at {path}")
    return load_gold(path, corpus)


def _run(eng: Engine, mode: str = "lexical"):
    return lambda q: [(h.path, h.symbol) for h in eng.search(q, mode=mode, top_k=10).hits]


def test_ssl_ru_counts(ru_engine):
    st = ru_engine.stats()
    assert st["format"] == "designer"
    assert st["modules"] == 1926
    assert st["methods"] == 31577  # every method a careful line scan finds
    reasons = {s.reason for s in ru_engine.skipped}
    assert reasons == {"missing_on_disk"}  # dropped roles and data processors, nothing else


def test_ssl_ru_dev_gold_lexical(ru_engine):
    res = evaluate(_gold("ssl31-ru"), _run(ru_engine))
    sym = res["by_intent"]["symbol"]["symbol"]
    assert sym["hit@1"] >= 0.9, sym
    assert res["overall"]["symbol"]["ndcg@10"] >= 0.45, res["overall"]
    assert res["by_intent"]["metadata"]["file"]["ndcg@10"] >= 0.6, res["by_intent"]["metadata"]


def test_ssl_ru_update_one_method_in_the_largest_module(ssl_ru, tmp_path, tmp_path_factory, corpus_subset):
    """Edit one method of the 3.5 MB УправлениеДоступомСлужебный in a copy of its module:
    only that module is re-chunked and only the changed method re-indexed."""

    rel = "CommonModules/УправлениеДоступомСлужебный"
    root = corpus_subset(ssl_ru, "Configuration.xml", rel, f"{rel}.xml", link=False)  # edited below: a real copy
    eng = Engine.open(root, index_dir=tmp_path / "idx")
    eng.refresh()
    mod = root / rel / "Ext/Module.bsl"
    text = mod.read_bytes().decode("utf-8-sig")
    target = "Процедура ОбновитьОтображениеНеиспользуемыхВидовДоступа("
    assert target in text
    mod.write_bytes(
        b"\xef\xbb\xbf" + text.replace(target, target.replace("(", "(ПараметрРедкийХХ, "), 1).encode("utf-8")
    )
    rep = eng.refresh()
    assert (rep.files_changed, rep.chunks_changed, rep.chunks_added, rep.chunks_removed) == (1, 1, 0, 0)
    hit = eng.search("ПараметрРедкийХХ", mode="lexical").hits[0]
    assert hit.name == "ОбновитьОтображениеНеиспользуемыхВидовДоступа"


def test_ssl_en_gold_symbols_and_english_types(ssl_en, tmp_path_factory):
    eng = _engine(ssl_en, tmp_path_factory)
    assert eng.stats()["methods"] == 20500
    gold = [g for g in _gold("ssl31-en") if g["intent"] == "symbol"]
    res = evaluate(gold, _run(eng))
    assert res["overall"]["symbol"]["hit@1"] == 1.0, res["per_query"]
    top = eng.search("Catalog.Users", top_k=1).hits[0]
    assert (top.path, top.symbol, top.owner) == ("Catalogs/Users.xml", None, "Справочник.Users")
    common = eng.search("Common.SubsystemExists", top_k=1).hits[0]
    assert (common.owner, common.module_kind) == ("ОбщийМодуль.Common", "common")


def test_yaxunit_edt_projects(yaxunit, tmp_path_factory):
    eng = _engine(yaxunit, tmp_path_factory)
    st = eng.stats()
    assert st["format"] == "edt"
    assert st["methods"] == 3098
    assert {s.path for s in eng.skipped if s.reason == "edt_template"} == {
        "exts/yaxunit/.settings/templates/common_module.bsl",
        "tests/.settings/templates/common_module.bsl",
    }
    instead = [c for c in eng.chunks.values() if any(a.startswith("&Вместо") for a in c.annotations)]
    assert instead and all(c.path.startswith("tests/src/") for c in instead)
    top = eng.search("ЮТест", top_k=1).hits[0]
    assert top.owner == "ОбщийМодуль.ЮТест"
