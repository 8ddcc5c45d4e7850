"""A help book's table of contents: the tree of page titles and page paths in ``PackBlock``.

The text is the platform's brace format (the one of ``.cf`` internals): nested ``{...}`` lists
of numbers and ``"quoted"`` strings (a quote inside a string is doubled), separated by commas.
As the public readers describe it, the root is ``{count, chunk, chunk, ...}`` and a chunk is
``{id, parent_id, child_count, child_id..., {n, n, {n, n, {"lang", "title"}...}, "page path"}}``;
a node with an empty path is a folder without a page. Only that much is relied on: anything
else in a chunk is ignored, and a chunk that does not fit is skipped and counted, never fatal.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import msgspec

__all__ = ["MAX_DEPTH", "Toc", "TocError", "TocNode", "parse_braces", "parse_toc"]

#: Deepest nesting of braces accepted (the table of contents needs 5).
MAX_DEPTH = 32

_TOKEN = re.compile(r'[{}]|"(?:[^"]|"")*"|[^\s{},"]+|"')


class TocError(ValueError):
    """The text is not a brace-format table of contents (unbalanced braces, an unterminated
    string, too deep); the message says where."""


class TocNode(msgspec.Struct, kw_only=True, gc=False):
    """One node: ``titles`` maps the language code of each title (``ru``, ``en``, or ``#``
    as some books write it) to the title; ``path`` is the page in ``FileStorage`` (``""``:
    a folder without a page); ``children`` are node ids in the book's order."""

    id: int
    parent: int
    titles: dict[str, str]
    path: str
    children: list[int] = []

    def title(self, lang: str = "ru") -> str:
        """The title in ``lang``, else the one marked ``#``, else the first."""
        t = self.titles.get(lang) or self.titles.get("#")
        if t:
            return t
        return next(iter(self.titles.values()), "")


class Toc(msgspec.Struct, kw_only=True):
    """The tree: ``nodes`` by id, ``roots`` the ids whose parent is not a node (0 in practice),
    ``skipped`` the chunks that did not fit the layout (count)."""

    nodes: dict[int, TocNode]
    roots: list[int]
    skipped: int = 0

    def walk(self, start: int | None = None) -> Iterator[tuple[TocNode, int]]:
        """``(node, depth)`` depth-first in the book's order, from the roots or below
        ``start``; each node once (a child listed twice or a cycle is not followed again)."""
        seen: set[int] = set()
        stack = [(i, 0) for i in reversed(self.roots if start is None else self.nodes[start].children)]
        while stack:
            nid, depth = stack.pop()
            node = self.nodes.get(nid)
            if node is None or nid in seen:
                continue
            seen.add(nid)
            yield node, depth
            stack.extend((c, depth + 1) for c in reversed(node.children))


def parse_braces(text: str) -> list:
    """The nested lists of a brace-format text: strings unquoted (``""`` -> ``"``), numbers and
    other bare words as ``str``. Iterative (no recursion limit); :class:`TocError` for an
    unterminated string, unbalanced braces, nothing at all, or nesting past :data:`MAX_DEPTH`."""
    root: list = []
    stack: list[list] = [root]
    for m in _TOKEN.finditer(text.lstrip("\ufeff")):
        tok = m.group()
        if tok == "{":
            if len(stack) > MAX_DEPTH:
                raise TocError(f"braces nested deeper than {MAX_DEPTH} at character {m.start()}")
            new: list = []
            stack[-1].append(new)
            stack.append(new)
        elif tok == "}":
            if len(stack) == 1:
                raise TocError(f"an unmatched '}}' at character {m.start()}")
            stack.pop()
        elif tok == '"':
            raise TocError(f"an unterminated string at character {m.start()}")
        elif tok[0] == '"':
            stack[-1].append(tok[1:-1].replace('""', '"'))
        else:
            stack[-1].append(tok)
    if len(stack) != 1:
        raise TocError(f"{len(stack) - 1} brace(s) left open at the end")
    if not root or not isinstance(root[0], list):
        raise TocError("no brace list")
    return root[0]


def _int(value: object) -> int | None:
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            return None
    return None


def _titles(names: object) -> dict[str, str]:
    out: dict[str, str] = {}
    if isinstance(names, list):
        for item in names:
            if isinstance(item, list) and len(item) >= 2 and isinstance(item[0], str) and isinstance(item[1], str):
                out.setdefault(item[0], item[1])
    return out


def parse_toc(text: str) -> Toc:
    """The tree of a ``PackBlock`` table of contents (see the module doc). :class:`TocError`
    when the text is not brace format; a chunk of another shape is counted in ``skipped``."""
    root = parse_braces(text)
    nodes: dict[int, TocNode] = {}
    skipped = 0
    for chunk in root[1:]:
        node = _node(chunk)
        if node is None or node.id in nodes:
            skipped += 1
            continue
        nodes[node.id] = node
    roots: list[int] = []
    for node in nodes.values():
        parent = nodes.get(node.parent)
        if parent is None or parent is node:
            roots.append(node.id)
        else:
            parent.children.append(node.id)
    return Toc(nodes=nodes, roots=roots, skipped=skipped)


def _node(chunk: object) -> TocNode | None:
    """A chunk ``{id, parent, n, child..., {n, n, {n, n, names...}, "path"}}`` or ``None``."""
    if not isinstance(chunk, list) or len(chunk) < 4:
        return None
    nid, parent, count = _int(chunk[0]), _int(chunk[1]), _int(chunk[2])
    if nid is None or parent is None or count is None or count < 0 or len(chunk) < 4 + count:
        return None
    props = chunk[3 + count]
    if not isinstance(props, list) or len(props) < 4:
        return None
    names, path = props[2], props[3]
    if not isinstance(names, list) or not isinstance(path, str):
        return None
    return TocNode(id=nid, parent=parent, titles=_titles(names[2:]), path=path)
