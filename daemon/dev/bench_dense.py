"""``bsl-lens bench --dense-synthetic N``: the dense side (hnswlib through :class:`DenseIndex`) at a
given size, on SYNTHETIC unit vectors, without a model or a corpus.

Synthetic because hnswlib's memory, build time and latency depend on the number of vectors, their
dimension and how clustered they are, not on what they mean, and embedding an ERP-sized
configuration takes days on a small machine. :func:`synthetic_vectors` draws a clustered mixture
(closer to real embeddings than iid Gaussians) with a fixed seed; every figure is labelled
``synthetic``. What is measured (build, memory, query latency and recall per ``M`` and ``ef``,
filtered search, save/load, the embedding cache's memory) is listed in ``docs/frontends.md``.
"""

from __future__ import annotations

import hashlib
import os
import random
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from ..ranking.params import RankingParams
from ..stats import percentile as _pct

#: Rows per upsert, as :meth:`daemon.engine.Engine.embed_pending` (8 model batches of 32).
UPSERT_BATCH = 256
#: ``k`` of a dense search in the engine (:attr:`daemon.ranking.params.RankingParams.channel_depth`).
SEARCH_K = RankingParams().channel_depth


def synthetic_vectors(
    n: int, dim: int, *, seed: int = 42, noise: float = 0.6, centroids: int | None = None
) -> np.ndarray:
    """``(n, dim)`` float32 unit vectors from the clustered mixture of the module docstring:
    ``centroids`` (default ``max(16, n // 250)``) uniform unit centroids, each row a random
    centroid + Gaussian noise of expected norm ``noise``, normalised. Deterministic for a
    ``seed``. Generated in blocks of 65,536 rows (peak = the result + one block)."""
    if n < 0 or dim < 1:
        raise ValueError("n >= 0 and dim >= 1 required")
    rng = np.random.default_rng(seed)
    c = centroids or max(16, n // 250)
    cent = rng.standard_normal((c, dim), dtype=np.float32)
    cent /= np.linalg.norm(cent, axis=1, keepdims=True)
    out = np.empty((n, dim), dtype=np.float32)
    scale = np.float32(noise / np.sqrt(dim))
    for start in range(0, n, 65536):
        m = min(65536, n - start)
        block = cent[rng.integers(0, c, m)] + scale * rng.standard_normal((m, dim), dtype=np.float32)
        block /= np.linalg.norm(block, axis=1, keepdims=True)
        out[start : start + m] = block
    return out


def synthetic_keys(n: int) -> list[str]:
    """Chunk-id-like keys (~50 characters, the length of a real ``Chunk.id``), so the key
    map's memory is realistic."""
    return [f"CommonModules/Синтетический{i // 40}/Ext/Module.bsl#Метод{i}" for i in range(n)]


def _status() -> dict[str, float]:
    """``/proc/self/status`` memory lines in MiB (Linux; empty elsewhere)."""
    out: dict[str, float] = {}
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith(("VmRSS", "VmHWM", "RssAnon", "RssFile")):
                    name, value = line.split(":", 1)
                    out[name] = int(value.split()[0]) / 1024
    except OSError:
        pass
    return out


def _reset_peak() -> None:
    """Reset ``VmHWM`` to the current RSS (Linux ``clear_refs`` 5); no-op elsewhere."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as fh:
            fh.write("5")
    except OSError:
        pass


def _anon() -> float:
    return _status().get("RssAnon", 0.0)


def _ms(lat: list[float]) -> dict[str, float]:
    return {"p50": round(_pct(lat, 0.5), 3), "p95": round(_pct(lat, 0.95), 3)}


def exact_topk(data: np.ndarray, queries: np.ndarray, k: int) -> list[np.ndarray]:
    """Row indices of the ``k`` largest inner products of each query with ``data``, best
    first: the ground truth for recall (blocks of 65,536 rows, so ``n x len(queries)``
    similarities are never held at once)."""
    best_s = np.full((len(queries), 0), -np.inf, dtype=np.float32)
    best_i = np.zeros((len(queries), 0), dtype=np.int64)
    for start in range(0, len(data), 65536):
        sims = queries @ data[start : start + 65536].T  # (q, block)
        idx = np.arange(start, start + sims.shape[1], dtype=np.int64)
        cat_s = np.concatenate([best_s, sims], axis=1)
        cat_i = np.concatenate([best_i, np.broadcast_to(idx, sims.shape)], axis=1)
        kk = min(k, cat_s.shape[1])
        part = np.argpartition(-cat_s, kk - 1, axis=1)[:, :kk]
        best_s = np.take_along_axis(cat_s, part, axis=1)
        best_i = np.take_along_axis(cat_i, part, axis=1)
    order = np.argsort(-best_s, axis=1, kind="stable")
    return list(np.take_along_axis(best_i, order, axis=1))


def recall_at(found: list[list[int]], truth: list[np.ndarray], k: int) -> float:
    """Mean over queries of ``|found[:k] & truth[:k]| / k`` (``k`` capped at the truth's
    length); 1.0 means the approximate search returned the exact top ``k``."""
    scores = []
    for f, t in zip(found, truth, strict=True):
        kk = min(k, len(t))
        if kk:
            scores.append(len(set(f[:kk]) & set(t[:kk].tolist())) / kk)
    return round(float(np.mean(scores)), 4) if scores else 0.0


def _build(keys: list[str], data: np.ndarray, dim: int, M: int, ef_construction: int, ef: int):
    from ..index.dense import DenseIndex

    index = DenseIndex(dim, M=M, ef_construction=ef_construction, ef=ef)
    t = time.perf_counter()
    for start in range(0, len(keys), UPSERT_BATCH):
        index.upsert(keys[start : start + UPSERT_BATCH], data[start : start + UPSERT_BATCH])
    return index, time.perf_counter() - t


def _query_runs(
    index, keys: list[str], data: np.ndarray, queries: np.ndarray, truth: list[np.ndarray], ef_list: list[int]
) -> dict:
    """Latency and recall of ``index.search(q, SEARCH_K)`` per ``ef``."""
    row_of = {k: i for i, k in enumerate(keys)}
    out = {}
    n_recall = len(truth)
    for ef in ef_list:
        index.ef = ef
        lat, found = [], []
        for i, q in enumerate(queries):
            t = time.perf_counter()
            res = index.search(q, SEARCH_K)
            lat.append((time.perf_counter() - t) * 1000)
            if i < n_recall:
                found.append([row_of[k] for k, _ in res])
        out[f"ef{ef}"] = {
            "effective_ef": max(ef, SEARCH_K),
            "query_ms": _ms(lat),
            "recall@10": recall_at(found, truth, 10),
            "recall@100": recall_at(found, truth, 100),
        }
    return out


def _filtered_runs(index, keys: list[str], queries: np.ndarray, ef: int) -> dict:
    """p50/p95 of ``search(q, SEARCH_K, allow=...)`` at 10% and 1% of the keys allowed."""
    index.ef = ef
    out = {}
    rng = random.Random(7)
    for share in (0.10, 0.01):
        allowed = set(rng.sample(keys, max(1, int(len(keys) * share))))
        lat, short = [], 0
        for q in queries[:50]:
            t = time.perf_counter()
            res = index.search(q, SEARCH_K, allow=allowed.__contains__)
            lat.append((time.perf_counter() - t) * 1000)
            short += len(res) < min(SEARCH_K, len(allowed)) or not all(k in allowed for k, _ in res)
        out[f"allow_{int(share * 100)}pct"] = {**_ms(lat), "allowed": len(allowed), "wrong_or_short": short}
    return out


def _cache_runs(index, data: np.ndarray, work: Path) -> dict:
    """The embedding cache's second copy of the vectors, and the two ways to avoid it."""
    from ..index.embed_cache import HASH_BYTES, EmbeddingCache

    n, dim = data.shape
    hashes = [hashlib.blake2b(str(i).encode(), digest_size=HASH_BYTES).hexdigest() for i in range(n)]
    out: dict = {}
    base = _anon()
    cache = EmbeddingCache("synthetic", dim)
    for start in range(0, n, UPSERT_BATCH):
        cache.put_many(hashes[start : start + UPSERT_BATCH], data[start : start + UPSERT_BATCH])
    out["heap_rss_mb"] = round(_anon() - base, 1)
    out["vectors_mb"] = round(n * dim * 4 / 2**20, 1)
    path = work / "embeddings.bin"
    _reset_peak()
    before = _status().get("VmRSS", 0.0)
    t = time.perf_counter()
    cache.save(path)
    out["save_s"] = round(time.perf_counter() - t, 2)
    out["save_peak_extra_mb"] = round(_status().get("VmHWM", 0.0) - before, 1)
    out["file_mb"] = round(path.stat().st_size / 2**20, 1)
    del cache
    base = _anon()
    _reset_peak()
    before = _status().get("VmRSS", 0.0)
    t = time.perf_counter()
    cache = EmbeddingCache.load(path, "synthetic", dim)
    out["load_s"] = round(time.perf_counter() - t, 2)
    out["load_peak_extra_mb"] = round(_status().get("VmHWM", 0.0) - before, 1)
    out["load_settled_rss_mb"] = round(_anon() - base, 1)
    assert len(cache) == n, "the cache did not load back"
    del cache

    # option A: read the vectors back from hnswlib instead of keeping a copy
    rng = np.random.default_rng(3)
    labels = rng.choice(n, size=min(n, 1024), replace=False).tolist()
    t = time.perf_counter()
    got = np.asarray(index._index.get_items(labels, return_type="numpy"), dtype=np.float32)
    per = (time.perf_counter() - t) / len(labels)
    out["hnswlib_get_items_us_per_vector"] = round(per * 1e6, 2)
    out["hnswlib_get_items_exact"] = bool(np.array_equal(got, data[labels]))
    # option B: the cache file memory-mapped (its blob is the file's tail)
    offset = path.stat().st_size - n * dim * 4
    base_anon, base_file = _anon(), _status().get("RssFile", 0.0)
    t = time.perf_counter()
    mm = np.memmap(path, dtype="<f4", mode="r", offset=offset, shape=(n, dim))
    out["mmap_open_ms"] = round((time.perf_counter() - t) * 1000, 3)
    t = time.perf_counter()
    rows = np.asarray(mm[np.sort(np.asarray(labels))])
    out["mmap_read_us_per_vector"] = round((time.perf_counter() - t) / len(labels) * 1e6, 2)
    out["mmap_exact"] = bool(np.array_equal(rows, data[np.sort(np.asarray(labels))]))
    st = _status()
    out["mmap_rss_after_reading_1024_rows_mb"] = {
        "anon": round(st.get("RssAnon", 0.0) - base_anon, 1),
        "file": round(st.get("RssFile", 0.0) - base_file, 1),
    }
    del mm
    return out


def run_dense_bench(
    n: int,
    *,
    dim: int = 384,
    M_list: tuple[int, ...] = (16,),
    ef_construction: int = 200,
    ef_list: tuple[int, ...] = (64, 128),
    queries: int = 200,
    recall_queries: int = 100,
    cache: bool = True,
    seed: int = 42,
) -> dict:
    """Run the synthetic dense bench of the module docstring on ``n`` vectors of ``dim``
    floats, one hnswlib build per ``M`` in ``M_list`` (``ef_construction`` for all) and
    one query run per ``ef`` in ``ef_list``; ``queries`` latency queries, the first
    ``recall_queries`` of them also checked against the exact top 100. ``cache``: measure
    the embedding cache options (first ``M`` only). Returns the flat report dict (times in
    s or ms as named, memory in MiB). Raises ``ValueError`` for ``n < 1``."""
    if n < 1:
        raise ValueError("--dense-synthetic needs N >= 1 vectors")
    from ..index.embedder import pin_blas_threads

    pin_blas_threads()
    out: dict = {
        "synthetic": True,
        "vectors": n,
        "dim": dim,
        "generator": f"clustered mixture: {max(16, n // 250)} unit centroids + Gaussian noise (norm 0.6), "
        f"normalised; seed {seed}",
        "upsert_batch": UPSERT_BATCH,
        "k": SEARCH_K,
        "ef_construction": ef_construction,
    }
    t = time.perf_counter()
    data = synthetic_vectors(n + queries, dim, seed=seed)
    qs, data = data[n:], data[:n]
    keys = synthetic_keys(n)
    out["generate_s"] = round(time.perf_counter() - t, 2)
    t = time.perf_counter()
    truth = exact_topk(data, qs[:recall_queries], SEARCH_K)
    out["exact_scan_ms_per_query"] = round((time.perf_counter() - t) * 1000 / max(1, min(recall_queries, len(qs))), 2)
    work = Path(tempfile.mkdtemp(prefix="bsl-lens-bench-dense-"))
    try:
        for j, M in enumerate(M_list):
            rep: dict = {}
            base = _anon()
            _reset_peak()
            peak_before = _status().get("VmRSS", 0.0)
            cpu = time.process_time()
            index, build_s = _build(keys, data, dim, M, ef_construction, ef_list[0])
            rep["build_s"] = round(build_s, 2)
            rep["build_cpu_s"] = round(time.process_time() - cpu, 2)
            rep["build_ms_per_vector"] = round(build_s * 1000 / n, 3)
            rep["index_rss_mb"] = round(_anon() - base, 1)
            rep["build_peak_extra_mb"] = round(_status().get("VmHWM", 0.0) - peak_before, 1)
            rep["capacity"] = index.capacity
            d = work / f"M{M}"
            t = time.perf_counter()
            index.save(d)
            rep["save_s"] = round(time.perf_counter() - t, 2)
            rep["index_file_mb"] = round((d / "index.hnsw").stat().st_size / 2**20, 1)
            rep["keys_file_mb"] = round((d / "keys.msgpack").stat().st_size / 2**20, 1)
            rep["bytes_per_vector_in_file"] = round((d / "index.hnsw").stat().st_size / n)
            rep["float32_vectors_mb"] = round(n * dim * 4 / 2**20, 1)
            rep.update(_query_runs(index, keys, data, qs, truth, list(ef_list)))
            rep["filtered_ms"] = _filtered_runs(index, keys, qs, ef_list[0])
            if j == 0 and cache:
                out["embedding_cache"] = _cache_runs(index, data, work)
            del index
            from ..index.dense import DenseIndex

            base = _anon()
            _reset_peak()
            peak_before = _status().get("VmRSS", 0.0)
            t = time.perf_counter()
            loaded = DenseIndex.load(d, dim)
            rep["load_s"] = round(time.perf_counter() - t, 2)
            rep["load_rss_mb"] = round(_anon() - base, 1)
            rep["load_peak_extra_mb"] = round(_status().get("VmHWM", 0.0) - peak_before, 1)
            if len(loaded) != n:
                raise RuntimeError(f"loaded {len(loaded)} vectors of {n}")
            del loaded
            shutil.rmtree(d, ignore_errors=True)
            out[f"M{M}"] = rep
        out["process_rss_mb"] = round(_status().get("VmRSS", 0.0), 1)
        out["process_peak_rss_mb_since_last_reset"] = round(_status().get("VmHWM", 0.0), 1)
        out["cpu_s"] = round(time.process_time(), 1)
        out["pid_nice"] = os.nice(0)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out
