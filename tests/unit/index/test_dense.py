"""Tests of daemon.index.dense.DenseIndex on real hnswlib with synthetic vectors."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from daemon.index.dense import INDEX_FILE, META_FILE, DenseIndex, DenseIndexError

DIM = 32


def unit(n: int, dim: int = DIM, seed: int = 0) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def filled(n: int, dim: int = DIM, seed: int = 0, **kw) -> tuple[DenseIndex, list[str], np.ndarray]:
    index = DenseIndex(dim, **kw)
    keys = [f"k{i}" for i in range(n)]
    vectors = unit(n, dim, seed)
    index.upsert(keys, vectors)
    return index, keys, vectors


def recall(index: DenseIndex, queries: np.ndarray, k: int, allow=None) -> float:
    hit = total = 0
    for q in queries:
        exact = {key for key, _ in index.search_exact(q, k, allow=allow)}
        approx = index.search(q, k, allow=allow)
        assert len(approx) == len(exact)
        hit += len(exact & {key for key, _ in approx})
        total += len(exact)
    return hit / total if total else 1.0


def test_empty_index():
    index = DenseIndex(DIM)
    q = unit(1)[0]
    assert len(index) == 0 and "k0" not in index
    assert index.search(q, 10) == [] and index.search_exact(q, 10) == []
    assert index.search(q, 5, allow=lambda k: True) == []
    assert index.remove(["k0"]) == 0


def test_k_larger_than_live_count_returns_all_best_first():
    index, keys, vectors = filled(3)
    res = index.search(vectors[1], 10)
    assert [k for k, _ in res][0] == "k1" and sorted(k for k, _ in res) == keys
    sims = [s for _, s in res]
    assert sims == sorted(sims, reverse=True)
    assert sims[0] == pytest.approx(1.0, abs=1e-5)  # 1 - ip distance of a unit vector to itself
    expected = {k: float(vectors[int(k[1:])] @ vectors[1]) for k in keys}
    for key, sim in res:
        assert sim == pytest.approx(expected[key], abs=1e-5)
    assert index.search(vectors[0], 0) == [] and index.search(vectors[0], -1) == []


def test_k_larger_than_live_count_with_deletions():
    # hnswlib alone raises "Cannot return the results in a contiguous 2D array" here.
    index, keys, vectors = filled(50)
    index.remove(keys[:45])
    res = index.search(vectors[0], 10)
    assert sorted(k for k, _ in res) == keys[45:]


class _FailingKnn:
    """Delegates to the real hnswlib index but makes knn_query fail the way hnswlib does when
    it cannot fill k (a graph cut off by deletions)."""

    def __init__(self, real):
        self.real = real

    def knn_query(self, *args, **kwargs):
        raise RuntimeError("Cannot return the results in a contiguous 2D array. Probably ef or M is too small")

    def __getattr__(self, name):
        return getattr(self.real, name)


def test_search_falls_back_to_exact_when_hnswlib_cannot_fill_k():
    index, keys, vectors = filled(3000)
    q = unit(1, seed=21)[0]
    expected = index.search_exact(q, 10)
    index._index = _FailingKnn(index._index)
    assert index.search(q, 10) == expected
    allowed = set(keys[::3])  # 33%: would go through hnswlib's filter
    assert index.search(q, 10, allow=allowed.__contains__) == index.search_exact(q, 10, allow=allowed.__contains__)


class _FailingAdd:
    def __init__(self, real):
        self.real = real

    def add_items(self, *args, **kwargs):
        raise RuntimeError("simulated hnswlib failure")

    def __getattr__(self, name):
        return getattr(self.real, name)


def test_failed_add_leaves_the_map_consistent(tmp_path):
    index, keys, vectors = filled(50)
    index.remove(keys[:5])
    real = index._index
    index._index = _FailingAdd(real)
    with pytest.raises(RuntimeError, match="simulated"):
        index.upsert(["new1", "new2", "k10"] + [f"x{i}" for i in range(10)], unit(13, seed=30))
    index._index = real
    assert len(index) == 45 and "new1" not in index and "k10" in index
    index.save(tmp_path)
    loaded = DenseIndex.load(tmp_path, DIM)
    assert len(loaded) == 45
    loaded.upsert(["new1"], unit(1, seed=31))
    assert loaded.slots == 50 and loaded.search(unit(1, seed=31)[0], 1)[0][0] == "new1"


def test_input_validation():
    index, _, _ = filled(5)
    with pytest.raises(ValueError):
        index.search(np.zeros(DIM + 1, np.float32), 3)
    with pytest.raises(ValueError):
        index.upsert(["a", "b"], unit(3))
    bad = unit(1)
    bad[0, 0] = np.nan
    with pytest.raises(ValueError):
        index.upsert(["a"], bad)
    with pytest.raises(ValueError):
        DenseIndex(DIM, space="euclid")
    assert len(index) == 5 and "a" not in index


def test_upsert_replaces_and_duplicate_keys_keep_the_last_vector():
    index, keys, vectors = filled(20)
    new = unit(2, seed=5)
    index.upsert(["k3", "k3"], new)
    assert len(index) == 20 and index.slots == 20
    assert index.search(new[1], 1)[0] == ("k3", pytest.approx(1.0, abs=1e-5))
    assert index.search(vectors[3], 1)[0][0] != "k3" or index.search(vectors[3], 1)[0][1] < 0.99


def test_deleting_the_entry_point_and_most_items_keeps_search_exact():
    index, keys, vectors = filled(400, seed=1)
    queries = unit(20, seed=2)
    # Delete in insertion order: the first item is the initial entry point, and at some
    # step every remaining top-level node (the later entry points) goes too.
    for step in range(0, 380, 20):
        index.remove(keys[step : step + 20])
        assert len(index) == 400 - step - 20
        assert recall(index, queries, 10) >= 0.95
        for _, key in zip(range(3), index.keys(), strict=False):
            assert index.search(vectors[int(key[1:])], 1)[0][0] == key
    assert all(k in keys[380:] for k, _ in index.search(queries[0], 50))


def test_delete_everything_then_add_again():
    index, keys, vectors = filled(100)
    assert index.remove(keys) == 100
    assert len(index) == 0 and index.search(vectors[0], 5) == [] and index.slots == 0
    fresh = unit(10, seed=9)
    index.upsert([f"n{i}" for i in range(10)], fresh)
    res = index.search(fresh[4], 10)
    assert res[0][0] == "n4" and {k for k, _ in res} == {f"n{i}" for i in range(10)}
    assert "k0" not in index


def test_thousands_of_replaces_of_one_key_do_not_grow_the_index():
    index, keys, _ = filled(50)
    last = None
    for i in range(3000):
        last = unit(1, seed=1000 + i)
        index.upsert(["hot"], last)
    assert len(index) == 51 and index.slots == 51
    assert index.search(last[0], 1)[0] == ("hot", pytest.approx(1.0, abs=1e-5))
    assert recall(index, unit(10, seed=3), 10) >= 0.95


def test_remove_and_add_churn_reuses_deleted_slots():
    index, _, _ = filled(100)
    for i in range(1500):
        index.remove([f"k{i}" if i < 100 else f"c{i - 1}"])
        index.upsert([f"c{i}"], unit(1, seed=5000 + i))
    assert len(index) == 100 and index.slots <= 101
    v = unit(1, seed=5000 + 1499)[0]
    assert index.search(v, 1)[0][0] == "c1499"


def test_growth_past_the_initial_capacity():
    index = DenseIndex(DIM, initial_capacity=8)
    vectors = unit(300, seed=4)
    for start in range(0, 300, 7):
        index.upsert([f"g{i}" for i in range(start, min(start + 7, 300))], vectors[start : start + 7])
    assert len(index) == 300 and index.capacity >= 300
    for i in range(0, 300, 17):
        assert index.search(vectors[i], 1)[0][0] == f"g{i}"


def test_filter_rejecting_most_items_still_returns_k_allowed():
    index, keys, vectors = filled(5000, seed=6)
    index._index = counting = _CountingKnn(index._index)
    allowed = set(keys[::500])  # 10 of 5000 (0.2%): hnswlib's filtered search would fail
    q = unit(1, seed=7)[0]
    res = index.search(q, 5, allow=allowed.__contains__)
    assert counting.filtered == 0  # went straight to the exact scan
    assert len(res) == 5 and all(k in allowed for k, _ in res)
    assert res == index.search_exact(q, 5, allow=allowed.__contains__)
    # Fewer allowed than k: all of them, best first.
    few = set(keys[:3])
    assert sorted(k for k, _ in index.search(q, 10, allow=few.__contains__)) == sorted(few)
    assert index.search(q, 10, allow=lambda k: False) == []


class _CountingKnn:
    def __init__(self, real):
        self.real = real
        self.filtered = 0

    def knn_query(self, *args, **kwargs):
        self.filtered += kwargs.get("filter") is not None
        return self.real.knn_query(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.real, name)


def test_filter_through_hnswlib_path_returns_k_allowed_with_good_recall():
    index, keys, _ = filled(5000, seed=8)
    index._index = counting = _CountingKnn(index._index)
    allowed = set(keys[::4])  # 25%: hnswlib's native filter is used
    queries = unit(10, seed=9)
    for q in queries:
        res = index.search(q, 10, allow=allowed.__contains__)
        assert len(res) == 10 and all(k in allowed for k, _ in res)
    assert counting.filtered == 10
    assert recall(index, queries, 10, allow=allowed.__contains__) >= 0.95


def test_filter_on_a_small_index_and_exceptions_propagate():
    index, keys, vectors = filled(30)
    res = index.search(vectors[2], 3, allow=lambda k: k != "k2")
    assert "k2" not in {k for k, _ in res} and len(res) == 3

    def boom(key: str) -> bool:
        raise KeyError(key)

    big, _, _ = filled(3000)
    with pytest.raises(KeyError):
        big.search(vectors[0], 5, allow=boom)
    assert len(big.search(vectors[0], 5)) == 5  # still usable


@pytest.mark.parametrize("space", ["cosine", "l2"])
def test_other_spaces_agree_with_exact(space):
    rng = np.random.default_rng(11)
    vectors = rng.standard_normal((500, DIM)).astype(np.float32) * 3
    index = DenseIndex(DIM, space=space)
    index.upsert([f"v{i}" for i in range(500)], vectors)
    queries = rng.standard_normal((10, DIM)).astype(np.float32)
    assert recall(index, queries, 10) >= 0.95
    top = index.search(queries[0], 3)
    exact = index.search_exact(queries[0], 3)
    assert [k for k, _ in top] == [k for k, _ in exact]
    for (_, a), (_, b) in zip(top, exact, strict=True):
        assert a == pytest.approx(b, rel=1e-4, abs=1e-4)


def test_rebuild_from():
    index, _, _ = filled(20)
    vectors = unit(100, seed=12)
    index.rebuild_from([f"r{i}" for i in range(100)], vectors)
    assert len(index) == 100 and "k0" not in index and index.slots == 100
    assert index.search(vectors[42], 1)[0][0] == "r42"
    with pytest.raises(ValueError):
        index.rebuild_from(["a", "a"], unit(2))
    index.rebuild_from([], np.zeros((0, DIM), np.float32))
    assert len(index) == 0


def test_concurrent_writes_and_reads_are_serialised():
    index, _, _ = filled(200)
    errors: list[BaseException] = []

    def writer():
        try:
            for i in range(300):
                index.upsert([f"w{i % 50}"], unit(1, seed=20000 + i))
                if i % 3 == 0:
                    index.remove([f"w{(i + 25) % 50}"])
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    def reader():
        try:
            q = unit(5, seed=13)
            for i in range(300):
                res = index.search(q[i % 5], 10, allow=(lambda k: k.startswith("w")) if i % 2 else None)
                assert len(res) <= 10
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer), threading.Thread(target=reader), threading.Thread(target=reader)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert index.slots <= 250


def test_save_load_round_trip(tmp_path):
    index, keys, vectors = filled(300, ef=80)
    index.remove(keys[:10])
    index.save(tmp_path / "dense")
    assert sorted(p.name for p in (tmp_path / "dense").iterdir()) == [INDEX_FILE, META_FILE]
    loaded = DenseIndex.load(tmp_path / "dense", DIM)
    assert len(loaded) == 290 and "k0" not in loaded and "k10" in loaded and loaded.ef == 80
    for q in unit(5, seed=14):
        assert loaded.search(q, 10) == index.search(q, 10)
    # The freed labels survive the round trip and are reused.
    loaded.upsert([f"n{i}" for i in range(10)], unit(10, seed=15))
    assert loaded.slots == 300 and len(loaded) == 300
    assert loaded.search(unit(10, seed=15)[3], 1)[0][0] == "n3"
    # Saving over an existing save works and leaves no temporary files behind.
    loaded.save(tmp_path / "dense")
    assert len(list((tmp_path / "dense").iterdir())) == 2
    assert len(DenseIndex.load(tmp_path / "dense", DIM)) == 300


def test_empty_index_round_trip(tmp_path):
    DenseIndex(DIM).save(tmp_path)
    loaded = DenseIndex.load(tmp_path, DIM)
    assert len(loaded) == 0 and loaded.search(unit(1)[0], 3) == []
    loaded.upsert(["a"], unit(1))
    assert loaded.search(unit(1)[0], 3)[0][0] == "a"


@pytest.mark.parametrize("damage", ["flip_index", "truncate_index", "garbage_meta", "missing_index", "missing_meta"])
def test_damaged_index_raises_dense_index_error(tmp_path, damage):
    index, _, _ = filled(200)
    index.save(tmp_path)
    ipath, mpath = tmp_path / INDEX_FILE, tmp_path / META_FILE
    if damage == "flip_index":
        data = bytearray(ipath.read_bytes())
        data[len(data) // 2] ^= 0xFF
        ipath.write_bytes(bytes(data))
    elif damage == "truncate_index":
        ipath.write_bytes(ipath.read_bytes()[:1000])
    elif damage == "garbage_meta":
        mpath.write_bytes(b"\xc1not msgpack")
    elif damage == "missing_index":
        ipath.unlink()
    else:
        mpath.unlink()
    with pytest.raises(DenseIndexError):
        DenseIndex.load(tmp_path, DIM)


def test_mismatched_files_and_dim_raise_dense_index_error(tmp_path):
    a, _, _ = filled(100, seed=1)
    b, _, _ = filled(120, seed=2)
    a.save(tmp_path / "a")
    b.save(tmp_path / "b")
    with pytest.raises(DenseIndexError, match="dim"):
        DenseIndex.load(tmp_path / "a", DIM * 2)
    # A crash between the two renames leaves a new index file next to an old key map.
    (tmp_path / "a" / INDEX_FILE).write_bytes((tmp_path / "b" / INDEX_FILE).read_bytes())
    with pytest.raises(DenseIndexError, match="does not match"):
        DenseIndex.load(tmp_path / "a", DIM)
