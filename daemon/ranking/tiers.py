"""The orders of a name query's first tier: the names channel's matches before the other hits
(:func:`names_first`, :func:`acronym_first`), test code after production code of the same match
kind (:func:`tier_order`), and the chunks a question asks for by name put first
(:func:`put_first`). Pure functions over the fused list of :func:`daemon.ranking.fusion.rrf`
(``(chunk id, score, {channel: rank})`` tuples)."""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["ACRONYM_TIER", "NAME_TIER", "acronym_first", "names_first", "put_first", "tier_order"]

#: Names-channel match kinds that put a hit in the first tier of a name query ("translated":
#: the name typed in the other language, :meth:`daemon.index.metanames.MetadataNames.translated_names`;
#: "part": an acronym that is a word of the name).
NAME_TIER = ("exact", "prefix", "camelhump", "translated", "part")
#: The names an acronym query puts first; the texts that hold it (BM25) follow, its CamelHump
#: expansions after them.
ACRONYM_TIER = ("exact", "prefix", "part")


def tier_order(first: list, match: dict[str, str], is_test: Callable[[str], bool] | None) -> None:
    """Sort a name tier in place: the names channel's own order (match kind, then the API
    boost), test code after the production code of the same match kind (``is_test``: of a
    chunk id; None keeps the channel's order)."""
    first.sort(key=lambda t: t[2]["names"])
    if is_test is None:
        return
    start = 0
    for end in range(1, len(first) + 1):  # each run of one match kind: production code first
        if end == len(first) or match[first[end][0]] != match[first[start][0]]:
            first[start:end] = sorted(first[start:end], key=lambda t: is_test(t[0]))
            start = end


def names_first(fused: list, match: dict[str, str], is_test: Callable[[str], bool] | None = None) -> list:
    """Order for a name query: hits the names channel matched as exact, prefix or CamelHump
    come first, in the names channel's own order (match kind, then the API boost; test code
    after production code of the same kind, see :func:`tier_order`); the rest follow by fused
    score (plain weighted RRF let BM25 lift callers and same-named copies over the definition)."""
    first = [t for t in fused if match.get(t[0]) in NAME_TIER]
    tier_order(first, match, is_test)
    rest = [t for t in fused if match.get(t[0]) not in NAME_TIER]
    return first + rest


def acronym_first(fused: list, match: dict[str, str], is_test: Callable[[str], bool] | None = None) -> list:
    """Order for an acronym query (``НДС``): it is first a word. The names that are it, start
    with it or hold it as a word part (:data:`ACRONYM_TIER`), in the names channel's order
    (:func:`tier_order`); then the chunks whose text holds it (BM25 found them) by fused
    score; then the rest, its CamelHump expansions among them."""
    first = [t for t in fused if match.get(t[0]) in ACRONYM_TIER]
    tier_order(first, match, is_test)
    texts = [t for t in fused if match.get(t[0]) not in ACRONYM_TIER and "bm25" in t[2]]
    rest = [t for t in fused if match.get(t[0]) not in ACRONYM_TIER and "bm25" not in t[2]]
    return first + texts + rest


def put_first(fused: list, head: list[str]) -> list:
    """``fused`` with the ids of ``head`` first, in that order; one that no channel found comes
    in with the best fused score and no channel ranks."""
    found = {t[0]: t for t in fused if t[0] in head}
    top = fused[0][1] if fused else 0.0
    first = [found.get(k) or (k, top, {}) for k in head]
    return first + [t for t in fused if t[0] not in found]
