"""Dense upkeep: which chunks need a vector, their texts, embedding them and setting the
vectors, dropping the vectors of chunks that are gone.

A chunk has one or more dense texts (:func:`daemon.index.embed.vector_texts`), each a dense
key (:func:`daemon.index.embed.vector_key`: the chunk id for its first text). A vector counts as
done while the text it was made from (by hash, ``state.embedded``) is the chunk's current text.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

import numpy as np

from ..contract import DOCS_KINDS, Chunk
from .state import IndexState

log = logging.getLogger(__name__)

#: A first dense index is built in one multi-threaded hnswlib build when the local embedding
#: cache holds at least this many of its texts (:meth:`DenseUpkeep.first_fill`); fewer go the
#: usual way, a batch of upserts at a time.
FIRST_FILL_MIN = 1024


class DenseUpkeep:
    """Keeps the dense side of ``state`` current.

    ``embed_max_chars``: the size of a chunk's embedded head; ``embedder``: the query-time
    model (its dimension and fingerprint key the vectors); ``lock``: the engine's lock, held
    only to read texts and to set vectors, never while the model runs; ``on_vectors(live, mat)``:
    called with the lock held after vectors were set (the engine journals them).
    """

    def __init__(
        self,
        state: IndexState,
        *,
        embed_max_chars: int,
        embedder,
        lock,
        on_vectors: Callable[[list, np.ndarray], None] | None = None,
    ) -> None:
        self.state = state
        self.embed_max_chars = embed_max_chars
        self.embedder = embedder
        self.lock = lock
        self.on_vectors = on_vectors
        self._pending_hashes: tuple = (None, {})  # (content key, {dense key: text hash}) of pending()
        self._extra_counts: tuple = (None, 0, 0)

    # ------------------------------------------------------------------ texts
    def chunk_texts(self, c: Chunk) -> list[tuple[str, str]]:
        """``[(dense key, text)]`` of chunk ``c`` (:func:`daemon.index.embed.vector_texts`)."""
        from .embed import vector_texts

        return vector_texts(c, self.embed_max_chars)

    def vector_text(self, key: str) -> str | None:
        """The current text of dense key ``key``: a chunk id is its first text; None when the
        chunk is gone or has fewer texts now. Lock held."""
        from .embed import vector_chunk
        from .embed_text import embed_text

        cid = vector_chunk(key)
        c = self.state.store.get_by_id(cid)
        if c is None:
            return None
        if cid == key:
            return embed_text(c, self.embed_max_chars)
        for k, t in self.chunk_texts(c):
            if k == key:
                return t
        return None

    def vector_texts_of(self, ids: Iterable[str]) -> dict[str, str]:
        """``{dense key: current text}`` of ``ids`` (chunk ids and/or dense keys): a chunk id
        stands for all its texts, a dense key of an extra text for that text. Chunks that are
        gone, or texts a chunk no longer has, give nothing. Order kept, duplicates dropped.
        Takes the lock."""
        from .embed import VECTOR_SEP

        out: dict[str, str] = {}
        with self.lock:
            for key in ids:
                if key in out:
                    continue
                if VECTOR_SEP in key:
                    t = self.vector_text(key)
                    if t is not None:
                        out[key] = t
                    continue
                c = self.state.store.get_by_id(key)
                if c is not None:
                    for k, t in self.chunk_texts(c):
                        out.setdefault(k, t)
        return out

    # ------------------------------------------------------------------ progress
    def done(self) -> int:
        """Chunks whose (first) vector was made from their current text. A chunk's extra
        vectors are not counted; counting them is a pass over the keys, made only once an
        extra vector was ever set and then only when keys changed since the last count."""
        st = self.state
        if not st.extra_vectors:
            return len(st.embedded) - len(st.stale_vectors)
        from .embed import VECTOR_SEP

        with self.lock:  # the counts and their key are read in one hold (a batch mutates both)
            key = (st.dense_gen, st.version, id(st.embedded), len(st.embedded), len(st.stale_vectors))
            known, n_emb, n_stale = self._extra_counts
            if known != key:
                n_emb = sum(1 for k in st.embedded if VECTOR_SEP in k)
                n_stale = sum(1 for k in st.stale_vectors if VECTOR_SEP in k)
                self._extra_counts = (key, n_emb, n_stale)
            return (len(st.embedded) - n_emb) - (len(st.stale_vectors) - n_stale)

    def pending(self) -> list[str]:
        """Dense keys whose vector is missing or was made from another text; also refreshes
        ``state.stale_vectors``. The texts are hashed outside the lock (a chunk batch at a
        time), so queries are not held up."""
        from .embed import vector_texts
        from .embed_cache import text_hash

        st = self.state
        with self.lock:
            slots = st.store.live_slots().tolist()
            embedded = dict(st.embedded)
            key = st.content_key()
        out = []
        hashes: dict[str, str] = {}
        step = 2048  # chunks materialised per hold of the lock
        for i in range(0, len(slots), step):
            with self.lock:
                store = st.store
                items = [(store.ids[s], store.get(s)) for s in slots[i : i + step] if store.ids[s] is not None]
            for _, c in items:
                for k, t in vector_texts(c, self.embed_max_chars):
                    h = text_hash(t)
                    if embedded.get(k) != h:
                        out.append(k)
                        hashes[k] = h
        with self.lock:
            st.stale_vectors = {cid for cid in out if cid in st.embedded}
            st.dense_gen += 1
            # the pending texts' hashes, valid while no batch changes the chunks (text_hashes)
            self._pending_hashes = (key, hashes) if key == st.content_key() else (None, {})
        return out

    def text_hashes(self, ids: list[str]) -> tuple[tuple, list[tuple[str, str]]]:
        """``(content key, [(dense key, hash of its text)])`` for the live dense keys of
        ``ids``: from the last :meth:`pending` when no batch changed the chunks since (one
        pass over the texts instead of one per caller), else read and hashed now under the
        lock. Compare the key with ``state.content_key()`` later to know whether the hashes
        still hold."""
        from .embed_cache import text_hash

        with self.lock:
            key = self.state.content_key()
            known_key, known = self._pending_hashes
            if known_key == key and all(cid in known for cid in ids):
                return key, [(cid, known[cid]) for cid in ids]
            out = []
            for cid in ids:
                t = self.vector_text(cid)
                if t is not None:
                    out.append((cid, text_hash(t)))
            return key, out

    # ------------------------------------------------------------------ setting vectors
    def first_fill_due(self, pending: list[str]) -> bool:
        """True when a first dense index (the dense index is empty) of ``pending`` might be
        built in one go from the embedding cache (:meth:`first_fill`)."""
        dense = self.state.dense
        return dense is not None and not len(dense) and len(pending) >= FIRST_FILL_MIN

    def first_fill(self, pending: list[str]) -> int:
        """A first dense index whose texts the local embedding cache already holds (a second
        developer's, filled from the team's shared cache, or one rebuilt after ``cache
        import``) is built in one multi-threaded hnswlib build outside the lock
        (:meth:`daemon.index.dense.DenseIndex.rebuild_from`), then swapped in. Returns the
        vectors set (0 when the dense index is not empty or fewer than :data:`FIRST_FILL_MIN`
        are cached). Chunks that changed while the graph was built are left pending. The
        embedding cache must be loaded."""
        from .dense import DenseIndex
        from .embed import VECTOR_SEP
        from .embed_cache import text_hash

        st = self.state
        if not self.first_fill_due(pending):
            return 0
        key, todo = self.text_hashes(pending)
        found = st.cache.get_many([h for _, h in todo])
        hits = [(cid, h) for cid, h in todo if h in found]
        if len(hits) < FIRST_FILL_MIN:
            return 0
        fresh = DenseIndex(self.embedder.dim)
        fresh.rebuild_from([cid for cid, _ in hits], np.stack([found[h] for _, h in hits]), num_threads=-1)
        with self.lock:
            if len(st.dense):  # another batch got there first: keep it, the upserts follow
                return 0
            gone = []
            if st.content_key() != key:  # a batch changed chunks while the graph was built
                for cid, h in hits:
                    now = self.vector_text(cid)
                    if now is None or text_hash(now) != h:
                        gone.append(cid)
            if gone:
                fresh.remove(gone)
            st.dense = fresh
            dead = set(gone)
            for cid, h in hits:
                if cid not in dead:
                    st.embedded[cid] = h
                    st.stale_vectors.discard(cid)
                    if VECTOR_SEP in cid:
                        st.extra_vectors = True
            st.dense_gen += 1
            st.dense_dirty = True
            st.dense_compact_due = True  # one dense snapshot, not a journal of every vector
        log.info("dense index built from the embedding cache: %d vectors", len(hits) - len(gone))
        return len(hits) - len(gone)

    def embed_ids(self, ids: Iterable[str], *, batch_size: int = 32, model=None, shared=None) -> int:
        """Embed these chunks (those that still exist and whose vector is missing or stale)
        and set their vectors; returns how many were set. ``ids``: chunk ids (each stands for
        all its texts) or dense keys. ``model``: the embedder that computes the passages
        (default: the query-time one); ``shared``: the team's shared cache, or None. Texts the
        local cache holds are set without the model. The embedding cache must be loaded."""
        from .embed import embed_chunks
        from .embed_cache import text_hash

        st = self.state
        model = model or self.embedder
        with self.lock:
            todo = []
            for cid, t in self.vector_texts_of(ids).items():
                h = text_hash(t)
                if st.embedded.get(cid) != h:
                    todo.append((cid, t, h))
            # the texts the local cache already has are set now, in this hold of the lock
            # (their chunks cannot change meanwhile): no second read and hash of the chunk
            found = st.cache.get_many([h for _, _, h in todo]) if todo else {}
            cached = [(cid, h, found[h]) for cid, _, h in todo if h in found]
            todo = [x for x in todo if x[2] not in found]
            n = self.set_vectors(cached)
        if not todo:
            return n
        vecs = embed_chunks(model, st.cache, [t for _, t, _ in todo], batch_size=batch_size, shared=shared)
        with self.lock:
            live = []
            for (cid, _text, h), v in zip(todo, vecs, strict=False):
                now = self.vector_text(cid)
                # the chunk may have changed or gone while the model ran: then its new text
                # is (or will be) queued again
                if now is not None and text_hash(now) == h:
                    live.append((cid, h, v))
            return n + self.set_vectors(live)

    def set_vectors(self, live: list) -> int:
        """Upsert ``live`` (``[(dense key, text hash, (dim,) vector)]``) into the dense index,
        record them as embedded and hand them to ``on_vectors``; returns ``len(live)``. Lock held."""
        if not live:
            return 0
        from .embed import VECTOR_SEP

        st = self.state
        mat = np.stack([x[2] for x in live]).astype(np.float32)
        st.dense.upsert([x[0] for x in live], mat)
        for cid, h, _ in live:
            st.embedded[cid] = h
            st.stale_vectors.discard(cid)
            if VECTOR_SEP in cid:
                st.extra_vectors = True
        st.dense_gen += 1
        st.dense_dirty = True
        if self.on_vectors is not None:
            self.on_vectors(live, mat)
        return len(live)

    def prune(self, ids: Iterable[str] | None = None) -> None:
        """Drop vectors of chunks that no longer exist, and extra vectors a chunk no longer
        has a text for (a method that lost its ``Экспорт`` loses its context vector). ``ids``:
        only these chunks' vectors are checked (an incremental batch: its added and changed
        chunks; the removed ones took their vectors with them); None: every vector (a load, a
        swapped-in first index). Whether a code or metadata chunk has an extra text is read
        off the store's columns (:func:`daemon.index.embed_text.has_context_text`); only a docs
        section's texts are computed. Lock held."""
        st = self.state
        if st.dense is None:
            return
        from .embed import VECTOR_SEP, vector_key
        from .embed_text import MAX_TEXTS

        if ids is None:
            keys: Iterable[str] = list(st.embedded)
        else:
            keys = [
                k
                for cid in dict.fromkeys(ids)
                for k in (vector_key(cid, i) for i in range(MAX_TEXTS))
                if k in st.embedded
            ]
        gone = []
        extra_of: dict[str, set[str]] = {}
        for k in keys:
            if VECTOR_SEP not in k:
                if k not in st.store:
                    gone.append(k)
            elif k not in self._valid_extra(k, extra_of):
                gone.append(k)
        if gone:
            st.dense.remove(gone)
            for k in gone:
                del st.embedded[k]
            st.dense_dirty = True

    def _valid_extra(self, key: str, memo: dict[str, set[str]]) -> set[str]:
        """The extra dense keys the chunk of ``key`` has texts for now (memoised per chunk)."""
        from .embed import vector_chunk, vector_key
        from .embed_text import has_context_text

        cid = vector_chunk(key)
        valid = memo.get(cid)
        if valid is None:
            store = self.state.store
            slot = store.slot_of.get(cid)
            if slot is None:
                valid = set()
            elif store.kind_of(slot) in DOCS_KINDS:
                valid = {x for x, _ in self.chunk_texts(store.get(slot))}
            else:
                part, export = store.part_export(slot)
                valid = {vector_key(cid, 1)} if has_context_text(store.kind_of(slot), part, export) else set()
            memo[cid] = valid
        return valid
