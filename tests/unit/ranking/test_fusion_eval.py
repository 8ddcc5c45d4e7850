"""RRF fusion (daemon/ranking/fusion.py) and the gold-set scoring and folds (daemon/dev/evaluate.py,
shared/eval/README.md); the folds in a fresh process and of the real dev gold set are in
tests/engine/test_eval_folds.py."""

import json
import math

import pytest

from daemon.dev.evaluate import evaluate, fold_of, fold_results, load_gold, score
from daemon.ranking.fusion import rrf


def test_rrf_scores_follow_the_formula():
    fused = rrf({"a": ["x", "y", "z"], "b": ["y", "x"]}, k=60)
    got = {key: s for key, s, _ in fused}
    assert got["x"] == pytest.approx(1 / 61 + 1 / 62)
    assert got["y"] == pytest.approx(1 / 62 + 1 / 61)
    assert got["z"] == pytest.approx(1 / 63)
    assert [k for k, _, _ in fused][-1] == "z"
    ranks = {key: r for key, _, r in fused}
    assert ranks["y"] == {"a": 2, "b": 1}


def test_rrf_weights_and_zero_weight_channel():
    fused = rrf({"names": ["a"], "bm25": ["b", "a"]}, k=60, weights={"names": 4.0, "bm25": 1.0})
    assert fused[0][0] == "a"
    fused = rrf({"names": ["a"], "bm25": ["b"]}, k=60, weights={"names": 0.0})
    assert [k for k, _, _ in fused] == ["b"]  # a zero-weight channel casts no vote


def test_rrf_ignores_duplicates_and_orders_ties_stably():
    fused = rrf({"a": ["q", "q", "p"], "b": ["p", "q"]}, k=60)
    assert [k for k, _, _ in fused] == ["p", "q"]  # equal scores: tie broken by key
    assert fused[0][2] == {"a": 2, "b": 1}


ENTRY = {
    "query": "x",
    "intent": "symbol",
    "relevant": [
        {"path": "A/Module.bsl", "symbol": "Метод", "grade": 3},
        {"path": "B/Module.bsl", "symbol": "Метод", "grade": 1},
        {"path": "C.xml", "symbol": None, "grade": 2},
    ],
}


def test_score_perfect_and_dedup_before_cut():
    hits = [("A/Module.bsl", "метод"), ("A/Module.bsl", "Метод"), ("C.xml", None), ("B/Module.bsl", "Метод")]
    s = score(ENTRY, hits)
    assert s["ndcg@10"] == pytest.approx(1.0)
    assert s["hit@1"] == 1.0 and s["mrr@10"] == 1.0 and s["recall@10"] == 1.0


def test_score_by_hand():
    hits = [("Z.bsl", "Нет"), ("B/Module.bsl", "Метод")]
    s = score(ENTRY, hits)
    dcg = 1 / math.log2(3)
    idcg = 7 + 3 / math.log2(3) + 1 / 2
    assert s["ndcg@10"] == pytest.approx(dcg / idcg)
    assert s["mrr@10"] == pytest.approx(0.5)
    assert s["hit@1"] == 0.0
    assert s["recall@10"] == pytest.approx(1 / 3)
    f = score(ENTRY, [("./B/Module.bsl", "Другой")], level="file")
    assert f["mrr@10"] == 1.0  # file level: any hit in the file counts with the file's max grade


def test_null_symbol_matches_only_null():
    assert score(ENTRY, [("C.xml", "Реквизит:Х")])["ndcg@10"] == 0.0
    with pytest.raises(ValueError):
        score(ENTRY, [], level="bogus")


def test_load_gold_filters_by_corpus_and_rejects_garbage(tmp_path):
    p = tmp_path / "g.jsonl"
    rows = [dict(ENTRY, id="q1", corpus="a"), dict(ENTRY, id="q2", corpus="b")]
    p.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n\n", encoding="utf-8")
    assert [e["id"] for e in load_gold(p, "b")] == ["q2"]
    assert len(load_gold(p)) == 2
    p.write_text('{"query": "x"}\n', encoding="utf-8")
    with pytest.raises(ValueError, match="g.jsonl:1"):
        load_gold(p)


def test_evaluate_macro_averages_per_intent():
    e2 = dict(ENTRY, intent="semantic")
    r = evaluate([ENTRY, e2], lambda q: [("A/Module.bsl", "Метод")])
    assert r["n"] == 2
    assert set(r["by_intent"]) == {"symbol", "semantic"}
    assert r["overall"]["symbol"]["hit@1"] == 1.0


def _entries(n_per_intent: dict[str, int]) -> list[dict]:
    out = []
    k = 0
    for intent, n in n_per_intent.items():
        for _ in range(n):
            k += 1
            out.append(dict(ENTRY, id=f"q{k:03d}", query=f"запрос {k}", intent=intent, corpus="ssl31-ru"))
    return out


def test_folds_are_stratified_and_deterministic():
    entries = _entries({"symbol": 7, "semantic": 10, "metadata": 3, "crosslingual": 1})
    folds = fold_of(entries)
    assert set(folds) == {e["id"] for e in entries} and set(folds.values()) == {"A", "B"}
    for intent, n in (("symbol", 7), ("semantic", 10), ("metadata", 3), ("crosslingual", 1)):
        a = sum(1 for e in entries if e["intent"] == intent and folds[e["id"]] == "A")
        assert a == (n + 1) // 2  # an even split, A takes the odd one out
    # the same entries in another order give the same folds (a fresh process too:
    # tests/engine/test_eval_folds.py)
    assert fold_of(list(reversed(entries))) == folds
    # strata are intent x corpus: another corpus does not move the ssl31-ru entries
    extra = [dict(e, id="e" + e["id"], corpus="ssl31-en") for e in entries[:5]]
    assert {k: v for k, v in fold_of(entries + extra).items() if k in folds} == folds
    with pytest.raises(ValueError, match="twice"):
        fold_of(entries + entries[:1])


def test_fold_results_average_back_to_the_whole():
    entries = _entries({"symbol": 4, "semantic": 5})
    hits = {e["query"]: ([("A/Module.bsl", "Метод")] if i % 2 else []) for i, e in enumerate(entries)}
    r = evaluate(entries, lambda q: hits[q])
    folds = fold_of(entries)
    fr = fold_results(r, folds)
    assert fr["A"]["n"] + fr["B"]["n"] == r["n"]
    total = (
        fr["A"]["overall"]["symbol"]["ndcg@10"] * fr["A"]["n"] + fr["B"]["overall"]["symbol"]["ndcg@10"] * fr["B"]["n"]
    )
    assert math.isclose(total / r["n"], r["overall"]["symbol"]["ndcg@10"])
    assert fr["A"]["overall"] != fr["B"]["overall"]
