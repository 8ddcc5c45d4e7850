"""Dense embeddings of chunks: the batch embedding through the cache (:func:`embed_chunks`) and
the keys of a chunk's vectors in the dense index (:func:`vector_key`).

The parts live in their own modules, and importers take them from there: the models in
:mod:`daemon.index.embedder`, the text a chunk embeds in :mod:`daemon.index.embed_text`, the
cache of vectors in :mod:`daemon.index.embed_cache`. This module ties them together.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from ..contract import Chunk
from .embed_cache import EmbeddingCache, text_hash
from .embed_text import DEFAULT_MAX_CHARS, embed_texts
from .embedder import Embedder, pin_blas_threads

if TYPE_CHECKING:
    from .shared_cache import SharedCache

#: Separates a chunk id from the number of its extra vector in a dense key (``<id>\x1f1``);
#: never part of a chunk id (ids are paths and symbols: no control characters).
VECTOR_SEP = "\x1f"


def vector_key(chunk_id: str, i: int) -> str:
    """The dense-index key of text ``i`` of a chunk: the chunk id itself for the first text
    (so a chunk with one text is keyed by its id), ``<id>\x1f<i>`` for the others."""
    return chunk_id if i == 0 else f"{chunk_id}{VECTOR_SEP}{i}"


def vector_chunk(key: str) -> str:
    """The chunk id of a dense-index key (:func:`vector_key`'s inverse for the id)."""
    cut = key.find(VECTOR_SEP)
    return key if cut < 0 else key[:cut]


def vector_texts(chunk: Chunk, max_chars: int = DEFAULT_MAX_CHARS) -> list[tuple[str, str]]:
    """``[(dense key, text)]`` of a chunk: :func:`embed_texts` keyed by :func:`vector_key`."""
    return [(vector_key(chunk.id, i), t) for i, t in enumerate(embed_texts(chunk, max_chars))]


def embed_chunks(
    embedder: Embedder,
    cache: EmbeddingCache,
    texts: list[str],
    batch_size: int = 32,
    progress: Callable[[int, int], None] | None = None,
    shared: SharedCache | None = None,
) -> np.ndarray:
    """Passage vectors for ``texts``: ``(len(texts), dim)`` float32, unit rows, row i for
    ``texts[i]``.

    Only texts whose :func:`text_hash` is not in ``cache`` are embedded (each distinct text
    once, even if repeated in ``texts``), in batches of ``batch_size``; each batch is stored
    in ``cache`` as soon as it is done, so an interrupted run keeps its progress.
    ``progress(done, total)`` is called after each batch with the number of texts embedded
    so far and the number of misses (not called when everything is cached).

    ``shared``: a :class:`daemon.index.shared_cache.SharedCache` of the same model, or None. The
    texts missing from ``cache`` are looked up there first (found ones go into ``cache``);
    what the model embeds is written back to it batch by batch. Its faults never raise here
    (the texts are then embedded locally).

    Raises ``ValueError`` if the cache belongs to another fingerprint or dim, or for
    ``batch_size < 1``.
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
    missing: dict[str, str] = {}  # hash -> text, each distinct text once
    for h, t in zip(hashes, texts, strict=True):
        if h not in found and h not in missing:
            missing[h] = t
    if shared is not None and missing:
        _fill_from_shared(shared, cache, found, missing)
    todo = list(missing.items())
    for start in range(0, len(todo), batch_size):
        batch = todo[start : start + batch_size]
        vectors = embedder.encode_passages([t for _, t in batch])
        keys = [h for h, _ in batch]
        cache.put_many(keys, vectors)
        if shared is not None:
            shared.store(keys, vectors)
        found.update(zip(keys, vectors, strict=True))
        if progress is not None:
            progress(start + len(batch), len(todo))
    out = np.empty((len(texts), cache.dim), dtype=np.float32)
    for i, h in enumerate(hashes):
        out[i] = found[h]
    return out


def _fill_from_shared(
    shared: SharedCache, cache: EmbeddingCache, found: dict[str, np.ndarray], missing: dict[str, str]
) -> None:
    """Look the ``missing`` hashes up in the shared cache: the vectors found go into ``cache``
    and ``found``, and their hashes leave ``missing``."""
    got = shared.lookup(list(missing))
    if got:
        keys = list(got)
        cache.put_many(keys, np.stack([got[k] for k in keys]))
        found.update(got)
        for k in keys:
            missing.pop(k, None)
