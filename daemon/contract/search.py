"""The query messages: search :class:`Filters`, a :class:`Hit`, and the answers built of hits,
:class:`SearchResult` (``search``, ``symbols``) and :class:`PlatformAnswer` (``platform_help``)."""

from __future__ import annotations

import msgspec

from .platform import PlatformEntry, PlatformUsed
from .vocabulary import DEFAULT_SCOPE


class Filters(msgspec.Struct, kw_only=True, omit_defaults=True):
    """Search filters. ``scope``: one of :data:`SCOPES`; ``object_type`` accepts Russian,
    English or folder names (``Справочник``, ``Catalog``, ``Catalogs``); ``path_prefix`` is
    relative to the root. The other filters apply to the export root's chunks only (platform
    help entries have no object type, module or path under the root).
    """

    scope: str = DEFAULT_SCOPE
    object_type: str | None = None
    module_kind: str | None = None
    path_prefix: str | None = None
    export_only: bool = False


class Hit(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One search result. ``ranks`` gives the 1-based rank in each channel that found it."""

    id: str
    path: str
    symbol: str | None
    kind: str
    name: str
    owner: str
    object_type: str = ""
    module_kind: str = ""
    export: bool = False
    signature: str = ""
    start_line: int
    end_line: int
    name_range: tuple[int, int, int, int] = (0, 0, 0, 0)
    score: float
    ranks: dict[str, int] = {}
    # names channel match kind: exact, prefix, camelhump, substring; translated (a name typed in
    # the other language)
    match: str = ""
    snippet: str = ""
    # docs sections: the heading's fragment; the link is f"{path}#{anchor}" (signature: the heading path)
    anchor: str = ""
    stale: bool = False  # its file changed on disk and is not re-indexed yet (set by the daemon)
    # docs sections: what is wrong with the page (an unclosed code fence swallows the headings
    # after it: Status.docs_problems; set by the daemon)
    page_problem: str = ""
    # test or fixture code: a tests/test/fixtures folder, a test project, or a module declaring a
    # test framework's registration method (ИсполняемыеСценарии, ...); ranked below production code
    test: bool = False


class SearchResult(msgspec.Struct, kw_only=True):
    """Hits plus what a caller needs to judge them: how complete the dense side is, and
    (filled by the daemon, :meth:`daemon.service.service.Service.freshness`) what could change the
    answer: ``stale`` while any change is noticed and not yet applied, or a file is known to
    be indexed older than the disk; ``stale_paths`` names the first 20 of them (folders end
    in ``/``), ``stale_count`` counts them all, ``pending_count`` the noticed changes among
    them; ``full_reconcile_pending``: events were lost and the whole export is re-checked;
    ``unread_events``: the watcher had not caught up with the kernel when the answer left;
    ``stale_reason``: file watching is off or degraded (not by choice), so a change may not
    be noticed at all: why (``stale`` is then always set).
    An in-process search (``--standalone``) leaves them empty."""

    query: str
    mode: str
    hits: list[Hit]
    total: int  # fused candidates before the top-k cut
    dense_done: int
    dense_total: int
    took_ms: float
    stale: bool = False
    stale_paths: list[str] = []
    stale_count: int = 0
    pending_count: int = 0
    full_reconcile_pending: bool = False
    unread_events: bool = False
    stale_reason: str | None = None
    #: the platform help that took part (scope ``platform`` or ``all``), else None
    platform: PlatformUsed | None = None


class PlatformAnswer(msgspec.Struct, kw_only=True, omit_defaults=True):
    """The ``platform_help`` answer. ``exact``: the query named entries (``СтрНайти``,
    ``ТаблицаЗначений.Свернуть``, ``Новый HTTPЗапрос``, ``КодировкаТекста.UTF8``, in Russian or
    English, case- and ``ё``-insensitive) and ``entries`` are they; else ``entries`` are the
    ranked answers to a question. ``hits[i]`` is ``entries[i]`` as a search hit (kind,
    signature, snippet, channel ranks). ``total``: candidates before the cut."""

    query: str
    platform: PlatformUsed
    exact: bool = False
    entries: list[PlatformEntry] = []
    hits: list[Hit] = []
    total: int = 0
    took_ms: float = 0.0
