"""What a search may ask: the query's length and the part of it that is embedded, its mode and
``top_k``, and the filters as the export's index reads them. :meth:`daemon.engine.Engine.search`
checks every query here before it reads the query's cues.
"""

from __future__ import annotations

import msgspec

from ..contract import DEFAULT_SCOPE, MAX_QUERY_CHARS, MAX_TOP_K, SEARCH_MODES, Filters

__all__ = ["MAX_QUERY_CHARS", "QUERY_EMBED_CHARS", "clean_query", "export_filters"]

#: The part of a query (at most :data:`daemon.contract.MAX_QUERY_CHARS` characters) that is
#: embedded: the model reads a few hundred tokens, and a very long query would hold the query
#: embedder for seconds.
QUERY_EMBED_CHARS = 512


def export_filters(filters: Filters | None) -> Filters | None:
    """``filters`` as the export's index reads them: the scopes ``workspace`` (the default)
    and ``all`` are every chunk of the export (the platform's part of ``all`` is the daemon's,
    :mod:`daemon.service.platform`), spelled ``all`` as the ranking knows it, and None when
    nothing else is filtered. ``ValueError`` for ``platform``: the export's index holds no
    platform help."""
    if filters is None:
        return None
    if filters.scope == "platform":
        raise ValueError("scope platform is answered by the daemon's platform help, not by the export's index")
    if filters.scope in (DEFAULT_SCOPE, "all"):
        filters = msgspec.structs.replace(filters, scope="all")
        return None if filters == Filters(scope="all") else filters
    return filters


def clean_query(query: str, mode: str, top_k: int) -> str:
    """The query as searched: stripped, ``""`` when it has no letter or digit. ``ValueError``
    for a bad mode, a query over :data:`MAX_QUERY_CHARS` or a ``top_k`` out of range."""
    if mode not in SEARCH_MODES:
        raise ValueError(f"mode must be one of {SEARCH_MODES}, got {mode!r}")
    if len(query) > MAX_QUERY_CHARS:
        raise ValueError(f"query is {len(query)} characters long; at most {MAX_QUERY_CHARS}")
    if not 1 <= int(top_k) <= MAX_TOP_K:
        raise ValueError(f"top_k must be in 1..{MAX_TOP_K}, got {top_k}")
    query = query.strip()
    return query if any(ch.isalnum() for ch in query) else ""
