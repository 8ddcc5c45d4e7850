"""``bsl-lens bench --dense-synthetic N`` (daemon/dev/bench_dense.py): the report's shape and the
recall arithmetic, on a tiny N. No timing is asserted (the figures are in docs/dense-at-scale.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from daemon.dev.bench_dense import exact_topk, recall_at, synthetic_vectors

REPO = Path(__file__).resolve().parents[2]


def test_generator_is_clustered_unit_and_reproducible():
    a = synthetic_vectors(2000, 64, seed=5)
    assert a.shape == (2000, 64) and a.dtype == np.float32
    assert np.allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-5)
    assert np.array_equal(a, synthetic_vectors(2000, 64, seed=5))
    assert not np.array_equal(a, synthetic_vectors(2000, 64, seed=6))
    sims = a[:200] @ a.T
    np.fill_diagonal(sims[:, :200], -1.0)
    nearest = sims.max(axis=1).mean()
    random_pair = float((a[:200] * a[200:400]).sum(axis=1).mean())
    # clustered: a vector's nearest neighbour is a cluster mate (cos ~0.74), a random pair ~0;
    # iid Gaussian vectors in 64 dims would have a nearest neighbour at cos ~0.4
    assert nearest > 0.6 and abs(random_pair) < 0.2, (nearest, random_pair)


def test_exact_topk_and_recall():
    rng = np.random.default_rng(0)
    data = rng.standard_normal((70000, 8)).astype(np.float32)  # > one 65,536-row block
    qs = rng.standard_normal((5, 8)).astype(np.float32)
    truth = exact_topk(data, qs, 20)
    for q, t in zip(qs, truth, strict=True):
        assert t.tolist() == np.argsort(-(data @ q), kind="stable")[:20].tolist()
    assert recall_at([t.tolist() for t in truth], truth, 10) == 1.0
    assert recall_at([list(range(70000, 70020))] * 5, truth, 10) == 0.0
    half = [t[:5].tolist() + [-1] * 15 for t in truth]
    assert recall_at(half, truth, 10) == 0.5
    assert recall_at(half, truth, 20) == 0.25


def test_bench_dense_synthetic_through_the_cli(tmp_path):
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "daemon.cli",
            "bench",
            "--dense-synthetic",
            "1500",
            "--M",
            "8,16",
            "--ef",
            "16,64",
            "--queries",
            "30",
            "--json",
        ],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    rep = json.loads(out.stdout)
    assert list(rep)[:3] == ["bench", "cpu_count", "load_avg"] and rep["bench"] == "dense-synthetic"
    assert rep["synthetic"] is True and rep["vectors"] == 1500 and rep["dim"] == 384 and rep["k"] == 100
    for M in ("M8", "M16"):
        r = rep[M]
        assert r["build_s"] > 0 and r["index_file_mb"] > 0 and r["load_s"] >= 0
        # hnswlib's file holds one float32 copy of every vector plus the graph
        assert r["bytes_per_vector_in_file"] > 384 * 4
        for ef in ("ef16", "ef64"):
            assert set(r[ef]["query_ms"]) == {"p50", "p95"}
            assert r[ef]["effective_ef"] == 100  # max(ef, k)
            # 1500 vectors at ef 100: the graph search is (nearly) exact; a broken label
            # mapping or ground truth would give ~0
            assert 0.9 <= r[ef]["recall@10"] <= 1.0 and 0.8 <= r[ef]["recall@100"] <= 1.0
        for flt in ("allow_10pct", "allow_1pct"):
            assert r["filtered_ms"][flt]["wrong_or_short"] == 0
    cache = rep["embedding_cache"]
    assert cache["hnswlib_get_items_exact"] is True and cache["mmap_exact"] is True
    assert cache["file_mb"] >= cache["vectors_mb"]


def test_bench_without_root_or_dense_synthetic_is_an_error(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "daemon.cli", "bench", "--json"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode != 0 and "ROOT is required" in out.stderr
