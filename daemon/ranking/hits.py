"""A ranked chunk as a search hit: the hit record and its short preview (snippet)."""

from __future__ import annotations

from ..contract import Chunk, Hit

__all__ = ["chunk_hit", "snippet"]


def snippet(c: Chunk, max_chars: int = 300) -> str:
    """A short preview: doc comment and signature first for methods, the description for
    metadata; at most ``max_chars`` characters."""
    if c.is_code and c.kind != "module":
        body = "\n".join(x for x in (c.doc, c.signature) if x)
    else:
        body = c.text
    return body if len(body) <= max_chars else body[: max_chars - 1] + "…"


def chunk_hit(
    c: Chunk, score: float, ranks: dict[str, int], match: str, snippets: bool = True, test: bool = False
) -> Hit:
    """A ranked chunk as the :class:`~daemon.contract.Hit` a search answers with: its place, the
    fused ``score``, its rank in each channel, how its name matched, a :func:`snippet` unless
    ``snippets`` is False, and the ``test`` mark."""
    return Hit(
        id=c.id,
        path=c.path,
        symbol=(c.symbol if c.kind != "module" else None),
        kind=c.kind,
        name=c.name,
        owner=c.owner,
        object_type=c.object_type,
        module_kind=c.module_kind,
        export=c.export,
        signature=c.signature,
        start_line=c.start_line,
        end_line=c.end_line,
        name_range=c.name_range,
        score=round(score, 6),
        ranks=ranks,
        match=match,
        snippet=snippet(c) if snippets else "",
        anchor=c.properties.get("anchor", "") if c.is_docs else "",  # docs: path#anchor link
        test=test,
    )
