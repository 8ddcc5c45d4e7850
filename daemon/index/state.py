"""The index of one export root as data: the chunk store, its channels, the dense side and
what is known about the files.

:class:`IndexState` holds no logic beyond small reads every part needs; the parts that change
it (:class:`daemon.index.reconcile.Reconciler`, :class:`daemon.index.snapshot.Snapshotter`,
:class:`daemon.index.dense_upkeep.DenseUpkeep`) and the one that reads it for queries
(:class:`daemon.ranking.ranker.Ranker`) each take it in their constructor. The engine's lock
guards it: a part changes it only with the lock held (or before anyone else can see it).
"""

from __future__ import annotations

from typing import Any

import msgspec
import numpy as np

from ..contract import DOCS_KINDS, Skip
from .bm25 import BM25Index
from .chunkstore import ChunkStore
from .metanames import MetadataNames
from .names import SymbolIndex
from .refgraph import RefGraph, method_of_chunk


class FileRecord(msgspec.Struct, kw_only=True):
    """What the index knows about one indexed file (module, metadata descriptor or docs page).

    ``slots``: the file's chunks in index order, as their :class:`daemon.index.chunkstore.ChunkStore`
    slots (``int32`` little-endian; :meth:`slot_list`): no second copy of the chunk ids."""

    path: str
    kind: str  # "bsl" | "metadata" | "docs"
    hash: str
    size: int
    mtime_ns: int
    slots: bytes = b""
    encoding: str = "utf-8"
    deps: str = ""  # descriptors: signature of their form/template descriptors
    ino: int = 0  # with ctime_ns: what a rewrite keeping size and mtime cannot keep (0: unknown)
    ctime_ns: int = 0

    def slot_list(self) -> list[int]:
        """The file's chunk slots in index order."""
        return np.frombuffer(self.slots, dtype="<i4").tolist()


class IndexState:
    """Chunks, channels and bookkeeping of one export root.

    Lexical side: ``store`` (every chunk, by slot), ``files`` (path -> :class:`FileRecord`),
    ``skipped`` (the files the last look at the disk did not index), ``format`` and ``info``
    (the export's, from the last full scan), ``bm25``, ``meta_bm25`` (metadata chunks only),
    ``names`` (the names channel) and ``meta_names`` (built on first use from the store).
    References (find usages): ``refs`` (:class:`daemon.index.refgraph.RefGraph`: every module's,
    form layout's and binding descriptor's references, kept per file like the channels) and
    ``refs_complete`` (False while a loaded snapshot had none: the next full reconcile reads
    every file's references again).
    Dense side: ``dense`` (None without an embedder), ``cache`` (the local embedding cache,
    loaded with the dense side), ``embedded`` (dense key -> hash of the text its vector was
    made from), ``stale_vectors`` (chunks whose text changed since their vector was made: the
    old vector answers until it is replaced, but does not count as done).

    Versions: ``version`` is bumped by every applied batch; ``generation`` and
    ``dense_generation`` name the snapshots on disk; ``dirty`` / ``dense_dirty``: changes no
    snapshot holds yet; ``compact_due`` / ``dense_compact_due``: a journal grew big (or a batch
    was not journaled), a snapshot is due. ``dense_gen`` is bumped whenever dense keys are added
    or ``stale_vectors`` is rebuilt; ``extra_vectors`` is True once a chunk's extra text got a
    vector; ``dense_journal_vectors`` counts the vectors journaled since the dense snapshot.
    """

    def __init__(self, *, bm25_k1: float, bm25_b: float, dim: int | None = None, spill_dir=None) -> None:
        self.store = ChunkStore(spill_dir=spill_dir) if spill_dir is not None else ChunkStore()
        self.files: dict[str, FileRecord] = {}
        self.skipped: list[Skip] = []
        self.format = "unknown"
        self.info: Any = None  # daemon.sources.scan.ExportInfo of the last full scan
        self.bm25 = BM25Index(bm25_k1, bm25_b)
        self.meta_bm25 = BM25Index(bm25_k1, bm25_b)
        self.names = SymbolIndex()
        self.meta_names = MetadataNames()
        self.refs = RefGraph()
        self.refs_complete = True
        self.dense: Any = None
        if dim is not None:
            from .dense import DenseIndex

            self.dense = DenseIndex(dim)
        self.cache: Any = None  # daemon.index.embed_cache.EmbeddingCache, loaded with the dense side
        self.embedded: dict[str, str] = {}
        self.stale_vectors: set[str] = set()
        self.version = 0
        self.generation = ""
        self.dense_generation = ""
        self.dirty = False
        self.dense_dirty = False
        self.compact_due = False
        self.dense_compact_due = False
        self.dense_gen = 0
        self.extra_vectors = False
        self.dense_journal_vectors = 0
        self._share: tuple[Any, float] = (None, 0.5)

    def reset_lexical(self, bm25_k1: float, bm25_b: float) -> None:
        """Forget the lexical side (empty store and channels, no file records; the vectors
        stay, keyed by text hash): the next reconcile reads every file again."""
        self.store = ChunkStore()
        self.bm25 = BM25Index(bm25_k1, bm25_b)
        self.meta_bm25 = BM25Index(bm25_k1, bm25_b)
        self.names = SymbolIndex()
        self.refs = RefGraph()
        self.refs_complete = True  # every file is read again, references too
        self.files = {}
        self.generation = ""
        self.version += 1
        self.dirty = True

    def content_key(self) -> tuple:
        """Changes whenever a chunk is added, changed or removed."""
        return (id(self.store), self.store.version, self.version)

    def cyrillic_share(self) -> float:
        """Share of Cyrillic letters in the method and object names (0..1; 0.5 for none),
        summed over the store's letter columns and cached per store version."""
        n = (id(self.store), self.store.version)
        if self._share[0] != n:
            cyr, lat = self.store.name_letters()
            self._share = (n, cyr / (cyr + lat) if cyr + lat else 0.5)
        return self._share[1]

    def set_cyrillic_share(self, share: float) -> None:
        """Take the share a snapshot recorded for the current store (no pass over the names)."""
        self._share = ((id(self.store), self.store.version), float(share))

    def entry_name(self, slot: int) -> str | None:
        """The name the names channel holds for ``slot`` (in memory: no arena page is read),
        None without an entry or for a docs section (its entry is a heading key)."""
        e = self.names.get(slot)
        return e[0] if e is not None and e[2] not in DOCS_KINDS else None

    def name_boost(self, slot: int) -> float:
        """The names channel's API boost of the entry at ``slot`` (0 without an entry)."""
        e = self.names.get(slot)
        return e[3] if e is not None else 0.0

    def fan_in(self, chunk_ids) -> list[int]:
        """For each method chunk id (a part's id too), how many places in other files call or
        name the method: calls, strings and metadata bindings resolved to it
        (:meth:`daemon.index.refgraph.RefGraph.fan_in`, no file read); 0 for other chunks and
        while the references are not resolved yet. A prior for the ranking
        (:class:`daemon.ranking.params.RankingParams`)."""
        return self.refs.fan_in(method_of_chunk(c) for c in chunk_ids)
