"""What ``status`` reports (the ``bsl-lens status --json`` schema; fields are only added):
:class:`Status` with the dense side, the shared embedding cache, the watcher, change-to-searchable
latency, recent queries and the references."""

from __future__ import annotations

import msgspec

from .platform import PlatformStatus
from .records import Skip


class SharedCacheStatus(msgspec.Struct, kw_only=True):
    """The shared embedding cache (PostgreSQL + pgvector, :mod:`daemon.index.shared_cache`) as this
    daemon sees it. ``url``: the DSN with its password masked; ``mode``: ``rw`` | ``ro``;
    ``state``: ``not connected`` | ``ok`` | ``down`` | ``incompatible``; ``hits`` / ``misses``:
    text hashes found / not found there since start; ``written``: vectors sent back;
    ``unreached``: hashes not looked up because it was not usable (embedded locally);
    ``unsent``: vectors embedded here while it could not take them, kept in the index dir
    and written once it can (a read-write client); ``retry_in_s``: seconds to the next try
    after a fault; ``last_error`` is the fault of a cache that is not ``ok`` (cleared when
    it recovers)."""

    url: str
    mode: str
    state: str
    reachable: bool = False
    hits: int = 0
    misses: int = 0
    written: int = 0
    unreached: int = 0
    unsent: int = 0
    last_error: str | None = None
    last_error_at: float | None = None  # unix time
    retry_in_s: float | None = None
    server: str | None = None  # "PostgreSQL 18, pgvector 0.8.1"
    vector_type: str | None = None  # "halfvec(384)"


class DenseStatus(msgspec.Struct, kw_only=True):
    """Dense side: ``done``/``total`` chunks embedded, ``rate_per_s`` over the last minute,
    ``eta_s`` at that rate (None when unknown). ``vectors``: vectors made from current
    texts, a chunk's first vector plus the context vector of an exported method
    (:func:`daemon.index.embed_text.embed_texts`), so it exceeds ``done`` and is what
    ``counters.vectors_embedded`` counts against."""

    enabled: bool
    embedder: str | None = None
    model: str | None = None
    done: int = 0
    total: int = 0
    vectors: int = 0  # current vectors, extra ones included (>= done)
    pending: int = (
        0  # texts (vectors to be) queued for embedding, changed ones and the backlog: counted like vectors, not chunks
    )
    rate_per_s: float = 0.0
    eta_s: float | None = None
    shared_cache: SharedCacheStatus | None = None  # None: no --shared-cache


class WatchStatus(msgspec.Struct, kw_only=True):
    """Watcher: ``mode`` native | polling | off; ``degraded``: why native watching is not
    used; ``pending_events``: events not yet handed over. ``state``: ``arming`` (being set
    up in the background while queries are already answered; changes made meanwhile are
    caught by the reconcile that follows), ``watching`` (native events), ``polling``,
    ``overflowed`` (events were lost; a full reconcile is queued or running), ``off``.
    ``freshness``: ``live`` (every change is noticed), ``arming``, ``off`` (``--watch off``:
    the periodic reconcile and ``reindex`` only) or ``degraded`` (the watcher fell back, stopped
    or skips folders: answers say ``stale`` with ``freshness_reason``)."""

    mode: str
    state: str = "off"
    degraded: str | None = None
    pending_events: int = 0
    last_error: str | None = None
    freshness: str = "live"
    freshness_reason: str | None = None


class Latency(msgspec.Struct, kw_only=True):
    """Change-to-searchable latency over the last :data:`daemon.service.service.LATENCY_SAMPLES` watcher batches:
    from the first file event of a batch to the moment its result is visible to queries
    (milliseconds)."""

    samples: int = 0
    p50_ms: float | None = None
    p95_ms: float | None = None
    last_ms: float | None = None


class RecentHit(msgspec.Struct, kw_only=True):
    """One of the top hits of a remembered search: where it is and its 1-based rank in each
    channel that found it (``names``, ``bm25``, ``meta``, ``dense``; :attr:`Hit.ranks`)."""

    path: str
    symbol: str | None
    owner: str = ""
    ranks: dict[str, int] = {}


class RecentQuery(msgspec.Struct, kw_only=True):
    """A ``search`` the daemon answered (``symbols`` calls from editors are not kept: one per
    keystroke). ``at``: epoch seconds; ``took_ms``: the engine's time; ``total``: fused
    candidates; ``hits``: the first :data:`daemon.service.service.RECENT_HITS`."""

    at: float
    query: str
    mode: str
    took_ms: float
    total: int
    hits: list[RecentHit] = []


class RefsStatus(msgspec.Struct, kw_only=True):
    """The references (find usages) as the daemon holds them: ``files`` with references
    (modules, form layouts, binding descriptors), ``sites`` in them, ``resolving`` files whose
    references are not resolved yet, ``building``: being read from the files again (after an
    upgrade or a damaged snapshot part), ``dynamic`` sites (``Выполнить``/``Вычислить``: every
    answer is a lower bound while there is one)."""

    files: int = 0
    sites: int = 0
    resolving: int = 0
    building: bool = False
    dynamic: int = 0


class Status(msgspec.Struct, kw_only=True):
    """Everything ``bsl-lens status`` shows (the ``--json`` schema; fields are only added)."""

    running: bool = True
    state: str  # loading | indexing | ready | stopping
    pid: int
    version: str
    started_at: float  # unix time
    uptime_s: float
    root: str
    index_dir: str
    format: str  # designer, edt, docs (a root of markdown pages only) or unknown
    files: int
    modules: int
    methods: int
    metadata_chunks: int
    chunks: int
    docs_pages: int = 0  # markdown pages indexed (daemon.sources.docs)
    docs_sections: int = 0  # their sections (chunks of kind "section")
    # docs pages read with a problem (path -> what: a code fence never closed swallows the
    # headings after it, broken UTF-8, a cut page or heading), the first 50; the count is complete
    docs_problems: dict[str, str] = {}
    docs_problem_count: int = 0
    bm25_terms: int
    dense: DenseStatus
    watcher: WatchStatus
    latency: Latency
    queued_paths: int  # changed paths (and folders) noticed and not yet applied by the writer
    stale_files: list[
        str
    ]  # files whose indexed state is known to be older than the disk (first 50): pending ones first
    stale_count: int
    skipped: dict[str, int]  # skipped files by reason: the totals
    skipped_files: list[
        Skip
    ] = []  # the skipped files themselves (path, reason, detail), at most 50, every reason represented
    skipped_count: int = 0
    full_reconcile_pending: bool = False  # events were lost (overflow, storm): the whole export is re-checked
    last_index: dict[str, float | int] = {}
    # since start: jobs, full_reconciles, storms, vectors_embedded (the export's, by the model),
    # platform_vectors_embedded (platform help's entries)
    counters: dict[str, int] = {}
    # the running job: {"stage": "chunk", "done": n, "total": m, "elapsed_s": s, "rate_per_s": r,
    # "eta_s": s}; stage scan | chunk (files read and chunked) | apply (into the indexes);
    # rate and ETA over the stage so far (absent until measurable); {} when idle
    progress: dict[str, str | int | float] = {}
    saving: bool = False  # a snapshot is being written right now
    last_saved_at: float | None = None
    last_error: str | None = None
    rss_bytes: int = 0
    index_bytes: int = 0
    recent_queries: list[RecentQuery] = []  # the last daemon.service.service.RECENT_QUERIES searches, oldest first
    references: RefsStatus | None = None  # find usages: None from a daemon without them
    platform: PlatformStatus | None = None  # platform help: sources, versions, counts (None: a daemon without it)
