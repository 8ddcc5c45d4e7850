"""BM25Index (daemon/index/bm25.py) on the real ssl31-ru text: oracle scores, a full build, updates,
save and load. The tests without corpora are in tests/unit/index/test_bm25.py."""

from __future__ import annotations

import os

import bm25s
import pytest

from daemon.index.bm25 import BM25Index
from daemon.text.tokenize import tokenize, tokenize_query

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


def _assert_scores_equal(got: dict[str, float], want: dict[str, float], rel: float = 1e-5):
    assert got.keys() == want.keys()
    for k, v in want.items():
        assert got[k] == pytest.approx(v, rel=rel), k


def _build(docs: dict[int, list[str]], k1: float = K1, b: float = B) -> BM25Index:
    index = BM25Index(k1, b)
    for s, toks in docs.items():
        index.add(s, toks)
    return index


def _common_module_texts(root, limit=None):
    base = os.path.join(root, "CommonModules")
    names = sorted(os.listdir(base))[:limit]
    for name in names:
        path = os.path.join(base, name, "Ext", "Module.bsl")
        if os.path.exists(path):
            with open(path, encoding="utf-8-sig") as fh:
                yield f"CommonModules/{name}/Ext/Module.bsl", fh.read()


@pytest.mark.slow
def test_real_code_matches_oracle_and_finds_definition(ssl_ru):
    """150 real common modules of ssl31-ru, tokenized by daemon.text.tokenize: bm25s agrees, and
    a term that occurs in one module only finds exactly that module."""
    docs = {path: tokenize(text) for path, text in _common_module_texts(ssl_ru, 150)}
    paths = list(docs)
    index = _build(dict(enumerate(docs.values())))
    queries = [
        tokenize_query("ЗначениеРеквизитаОбъекта"),
        tokenize_query("Справочник.Пользователи"),
        tokenize_query("отправить письмо вложения"),
        tokenize_query("ВызватьИсключение НСтр"),
    ]
    for q in queries:
        got = {paths[s]: v for s, v in index.scores(q).items()}
        _assert_scores_equal(got, _oracle(docs, q), rel=2e-5)
    owner = {}
    for k, toks in docs.items():
        for t in set(toks):
            owner[t] = k if t not in owner else None
    rare = sorted(t for t, k in owner.items() if k is not None and "." in t)[:20]
    assert len(rare) == 20
    for t in rare:
        assert [paths[s] for s, _ in index.search([t], 5, key_of=paths)] == [owner[t]]


@pytest.mark.slow
def test_full_corpus_build_update_and_save_load(ssl_ru, tmp_path):
    """All 1,926 ssl31-ru modules: build, replace, column-file round trip (latency is
    measured by ``bsl-lens bench``, not here)."""
    docs = {}
    for dirpath, _dirs, files in os.walk(ssl_ru):
        for name in files:
            if name.endswith(".bsl"):
                full = os.path.join(dirpath, name)
                with open(full, encoding="utf-8-sig") as fh:
                    docs[os.path.relpath(full, ssl_ru)] = tokenize(fh.read())
    paths = list(docs)
    index = _build(dict(enumerate(docs.values())))
    queries = [
        tokenize_query(q)
        for q in [
            "ОбщегоНазначения.ЗначениеРеквизитаОбъекта",
            "как отправить письмо из кода",
            "Справочник.Пользователи",
            "записать событие в журнал регистрации",
            "ЗапуститьПрограмму",
        ]
    ]
    for q in queries:
        assert index.search(q, 10), q  # every real query finds something
    key = paths.index("CommonModules/ОбщегоНазначения/Ext/Module.bsl".replace("/", os.sep))
    query = ["значениереквизитаобъекта"]
    before = index.search(query, len(index), key_of=paths)
    assert key in [k for k, _ in before]
    index.add(key, ["совсем", "другой", "текст"])  # replace: gone from the results
    assert key not in [k for k, _ in index.search(query, len(index))]
    index.add(key, docs[paths[key]])  # and back, with the very same scores for everyone
    assert index.search(query, len(index), key_of=paths) == before
    index.save(tmp_path / "bm25")
    restored = BM25Index.load(tmp_path / "bm25", verify=True)
    for q in queries:
        assert restored.search(q, 10, key_of=paths) == index.search(q, 10, key_of=paths)
