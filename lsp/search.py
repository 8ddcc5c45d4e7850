"""The ``bsl-lens/search`` request: search by meaning for the editors' own UI (a symbol picker
re-filters results by name, so it cannot show them), over every ready folder or one.

Params ``{query, mode?, topK?, filters?, folder?, freshTimeout?}`` (:class:`SearchParams`);
result ``{query, mode, stale, hits: [...], folders: [...]}``: the folders' hits merged in a
stable order (:func:`lsp.convert.merge_ranked`, hit fields in :func:`lsp.convert.search_hit`),
and per folder its state, counts and freshness (``stalePaths``/``staleCount``).
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any, Protocol

import msgspec
from pygls.exceptions import JsonRpcInvalidParams

from daemon.contract import DEFAULT_SCOPE, MAX_TOP_K, SEARCH_MODES

from . import convert
from .roots import Root
from .settings import Settings

#: Custom request: search by meaning (see the module docstring).
SEARCH_REQUEST = "bsl-lens/search"


class SearchServer(Protocol):
    """What the search request needs of the language server (``lsp.server.BslLensServer``).
    A protocol, so that this module does not import the server that registers it."""

    settings: Settings
    roots: list[Root]
    symbol_kinds: frozenset[int] | None

    def ready_roots(self, folder: str | None = None) -> list[Root]: ...  # noqa: D102

    async def call_daemon(self, root: Root, method: str, *args: Any, serial: bool = False, **kw: Any) -> Any: ...  # noqa: D102


class SearchFilters(msgspec.Struct, kw_only=True, rename="camel", forbid_unknown_fields=True, omit_defaults=True):
    """``filters`` of ``bsl-lens/search`` (the daemon's ``Filters``, camelCase)."""

    scope: str = DEFAULT_SCOPE  # workspace | code | metadata | docs | platform | all
    object_type: str | None = None  # Справочник | Catalog | Catalogs
    module_kind: str | None = None  # common | object | manager | form | ...
    path_prefix: str | None = None  # relative to the folder
    export_only: bool = False


class SearchParams(msgspec.Struct, kw_only=True, rename="camel", forbid_unknown_fields=True):
    """Params of ``bsl-lens/search``: ``query``; ``mode`` hybrid (default) | lexical |
    vector; ``topK`` 1..1000 (default: the ``searchTopK`` setting); ``filters``;
    ``folder``: a workspace folder URI or path to search alone (default: all);
    ``freshTimeout``: seconds (0..10) to wait first for file changes the daemons have
    noticed to be indexed."""

    query: str
    mode: str = "hybrid"
    top_k: int | None = None
    filters: SearchFilters | None = None
    folder: str | None = None
    fresh_timeout: Annotated[float, msgspec.Meta(ge=0, le=10)] = 0.0


def _search_params(params: Any, default_top_k: int) -> SearchParams:
    params = convert.plain(params) if params is not None else {}
    try:
        p = msgspec.convert(params, SearchParams)
    except msgspec.ValidationError as exc:
        raise JsonRpcInvalidParams.of(ValueError(f"{SEARCH_REQUEST}: {exc}")) from None
    if p.mode not in SEARCH_MODES:
        raise JsonRpcInvalidParams.of(ValueError(f"{SEARCH_REQUEST}: mode must be one of {', '.join(SEARCH_MODES)}"))
    if p.top_k is None:
        p.top_k = default_top_k
    if not 1 <= p.top_k <= MAX_TOP_K:
        raise JsonRpcInvalidParams.of(ValueError(f"{SEARCH_REQUEST}: topK must be in 1..{MAX_TOP_K}"))
    return p


async def search(server: SearchServer, params: Any) -> dict:
    """The ``bsl-lens/search`` request (see :class:`SearchParams`); bad params are
    ``InvalidParams``, a folder whose daemon fails is named in ``folders`` with an ``error``."""
    p = _search_params(params, server.settings.search_top_k)
    roots = server.ready_roots(p.folder)
    filters = None
    if p.filters is not None:  # the daemon's Filters: snake_case, defaults left out
        filters = {k: v for k, v in msgspec.structs.asdict(p.filters).items() if v not in (None, False, DEFAULT_SCOPE)}
    fresh = {"fresh_timeout": p.fresh_timeout} if p.fresh_timeout else {}
    results = await asyncio.gather(
        *(
            server.call_daemon(r, "search", p.query, mode=p.mode, top_k=p.top_k, filters=filters, serial=True, **fresh)
            for r in roots
        )
    )
    merged = convert.merge_ranked([res.hits if res is not None else [] for res in results], p.top_k)
    hits = []
    for ri, hit in merged:
        root = roots[ri]
        uri = "" if hit.kind.startswith("platform_") else root.uri_for(hit.path)  # platform help: no file
        hits.append(convert.search_hit(hit, uri, root.folder.uri, kinds=server.symbol_kinds))
    folders = []
    for r in server.roots:
        if p.folder and p.folder not in (r.folder.uri, r.folder.path):
            continue
        entry: dict[str, Any] = {"folder": r.folder.uri, "name": r.name, "state": r.state}
        if r in roots:
            res = results[roots.index(r)]
            if res is not None:
                entry.update(
                    denseDone=res.dense_done,
                    denseTotal=res.dense_total,
                    total=res.total,
                    tookMs=round(res.took_ms, 3),
                )
                entry.update(stale=res.stale, stalePaths=list(res.stale_paths), staleCount=res.stale_count)
            else:
                entry["error"] = "the daemon did not answer (see the log)"
        elif r.error:
            entry["error"] = r.error
        folders.append(entry)
    stale = any(res is not None and res.stale for res in results)
    return {"query": p.query, "mode": p.mode, "stale": stale, "hits": hits, "folders": folders}
