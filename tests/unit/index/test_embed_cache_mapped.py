"""daemon.index.embed_cache.EmbeddingCache keeps the rows of its file memory-mapped, not on the heap.

The cache is the second copy of every vector (hnswlib holds the first): ~1.1 GiB at ERP size
(``bsl-lens bench --dense-synthetic 769435``). These tests check that a loaded cache reads
its rows from the file (values exact, no heap copy), that writes after the load (new texts,
overwrites) never touch the file it maps, and that ``save`` onto the mapped file itself
works and leaves the cache usable after a failure.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from daemon.index.embed_cache import EmbeddingCache, text_hash

DIM = 384


def _vectors(n: int, seed: int = 1) -> tuple[list[str], np.ndarray]:
    rng = np.random.default_rng(seed)
    return [text_hash(f"t{seed}-{i}") for i in range(n)], rng.standard_normal((n, DIM)).astype(np.float32)


def _saved(tmp_path: Path, n: int = 300) -> tuple[Path, list[str], np.ndarray]:
    cache = EmbeddingCache("fp", DIM)
    hashes, vectors = _vectors(n)
    cache.put_many(hashes, vectors)
    path = tmp_path / "embeddings.bin"
    cache.save(path)
    return path, hashes, vectors


def _rss_anon_mb() -> float:
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no RssAnon line")


def test_loaded_rows_are_mapped_and_exact(tmp_path):
    path, hashes, vectors = _saved(tmp_path)
    cache = EmbeddingCache.load(path, "fp", DIM)
    assert len(cache) == 300 and cache.mapped_rows == 300
    got = cache.get_many(hashes)
    assert all(np.array_equal(got[h], vectors[i]) for i, h in enumerate(hashes))
    got[hashes[0]][:] = 7.0  # a copy: the cache is not changed through it
    assert np.array_equal(cache.get_many([hashes[0]])[hashes[0]], vectors[0])


def test_writes_after_load_go_to_memory_not_to_the_mapped_file(tmp_path):
    path, hashes, vectors = _saved(tmp_path)
    before = path.read_bytes()
    cache = EmbeddingCache.load(path, "fp", DIM)
    new_hashes, new_vectors = _vectors(2000, seed=2)  # grows the heap part past 1024 rows
    cache.put_many(new_hashes, new_vectors)
    cache.put_many([hashes[3], new_hashes[5]], np.ones((2, DIM)))  # overwrite one mapped, one heap row
    assert path.read_bytes() == before  # copy-on-write: the file is untouched
    assert len(cache) == 2300 and cache.mapped_rows == 300
    got = cache.get_many([hashes[3], hashes[4], new_hashes[5], new_hashes[1999]])
    assert np.array_equal(got[hashes[3]], np.ones(DIM, np.float32)) and np.array_equal(
        got[new_hashes[5]], np.ones(DIM, np.float32)
    )
    assert np.array_equal(got[hashes[4]], vectors[4]) and np.array_equal(got[new_hashes[1999]], new_vectors[1999])
    # another cache loaded from the same file sees the file, not this process's writes
    other = EmbeddingCache.load(path, "fp", DIM)
    assert len(other) == 300 and np.array_equal(other.get_many([hashes[3]])[hashes[3]], vectors[3])


def test_save_onto_the_mapped_file_then_everything_is_mapped(tmp_path):
    path, hashes, vectors = _saved(tmp_path)
    cache = EmbeddingCache.load(path, "fp", DIM)
    new_hashes, new_vectors = _vectors(50, seed=3)
    cache.put_many(new_hashes, new_vectors)
    cache.put_many([hashes[0]], np.full((1, DIM), 2.0))
    cache.save(path)  # the file this cache maps is replaced
    assert cache.mapped_rows == 350
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    expect = {**{h: vectors[i] for i, h in enumerate(hashes)}, **{h: new_vectors[i] for i, h in enumerate(new_hashes)}}
    expect[hashes[0]] = np.full(DIM, 2.0, np.float32)
    for c in (cache, EmbeddingCache.load(path, "fp", DIM)):
        got = c.get_many(list(expect))
        assert len(c) == 350 and all(np.array_equal(got[h], v) for h, v in expect.items())
    assert cache.retain(hashes[:10]) == 340  # compacts onto the heap
    assert cache.mapped_rows == 0 and np.array_equal(cache.get_many([hashes[9]])[hashes[9]], vectors[9])
    cache.save(path)
    assert len(EmbeddingCache.load(path, "fp", DIM)) == 10


def test_failed_save_leaves_the_cache_and_its_file_usable(tmp_path):
    path, hashes, vectors = _saved(tmp_path)
    cache = EmbeddingCache.load(path, "fp", DIM)
    new_hashes, new_vectors = _vectors(5, seed=4)
    cache.put_many(new_hashes, new_vectors)
    target = tmp_path / "a-directory"
    (target / "inside").mkdir(parents=True)  # os.replace onto a non-empty directory fails
    with pytest.raises(OSError):
        cache.save(target)
    assert cache.mapped_rows == 300  # the old file is mapped again
    got = cache.get_many(hashes + new_hashes)
    assert np.array_equal(got[hashes[299]], vectors[299]) and np.array_equal(got[new_hashes[4]], new_vectors[4])
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    cache.save(path)
    assert len(EmbeddingCache.load(path, "fp", DIM)) == 305


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="RSS from /proc (Linux)")
def test_load_adds_no_heap_copy_of_the_rows(tmp_path):
    """40k vectors = 59 MiB of float32: the old loader held them (and, while loading, twice
    that) as anonymous memory; mapped, only the keys (~5 MiB of Python strings) are."""
    cache = EmbeddingCache("fp", DIM)
    hashes, vectors = _vectors(40_000, seed=5)
    cache.put_many(hashes, vectors)
    path = tmp_path / "big.bin"
    cache.save(path)
    del cache, vectors
    base = _rss_anon_mb()
    loaded = EmbeddingCache.load(path, "fp", DIM)
    grown = _rss_anon_mb() - base
    assert len(loaded) == 40_000 and loaded.mapped_rows == 40_000
    assert grown < 25, f"loading added {grown:.1f} MiB of anonymous memory (the rows are 59 MiB)"
