"""A whole help book (``shcntx_ru.hbk``, ``shcntx_en.hbk``, ``shlang_ru.hbk``) into entries.

The table of contents says what each page is, as the public readers use it:

* the page ``.../Global context.html`` (or a node titled Глобальный контекст) holds the
  global context: below it, pages under ``/properties/`` are global properties, under
  ``/methods/`` global functions, under ``/events/`` application events;
* a page whose file is ``catalogNNN.html`` (or a node without a page) is a folder: walked;
* any other page is a type or, when its children are value pages (``/properties/``) with no
  Свойства/Методы/... group nodes, or it sits in the Системные перечисления folder, a system
  enumeration; a type's group nodes (Свойства, Методы, Конструкторы, События, or their
  English titles; else the ``/properties/``, ``/methods/``, ``/ctors/``, ``/events/`` part
  of the member's path) give its members. All constructor pages of a type make one
  ``constructor`` entry with one signature each;
* in a language book (``shlang_*``) every page is an entry: ``def_*`` pages are the
  primitive types (Строка, Число, ...), the rest keywords and statements.

Names come from the page (``СтрНайти (StrFind)``), else from the table of contents. A page
that is missing, too large, undecodable or nameless is a :class:`daemon.contract.Skip`
naming ``<book>:<page>``; the book goes on.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import msgspec

from daemon.contract import Skip

from .entries import Entry, Signature
from .hbk import HbkError, HelpBook, Limits
from .pages import Page, PageError, decode_page, parse_page
from .toc import Toc, TocError, TocNode, parse_toc

__all__ = ["BookResult", "read_book"]

_GROUPS = {
    "свойства": "property",
    "properties": "property",
    "методы": "method",
    "methods": "method",
    "конструкторы": "constructor",
    "constructors": "constructor",
    "события": "event",
    "events": "event",
}
_PATH_KINDS = (("/properties/", "property"), ("/methods/", "method"), ("/ctors/", "constructor"), ("/events/", "event"))
_GLOBAL_TITLES = {"глобальный контекст", "global context"}
_ENUM_FOLDERS = {"системные перечисления", "системные наборы значений", "system enumerations", "system value sets"}
_CATALOG_RE = re.compile(r"(?:^|/)catalog\d+\.html$", re.I)


class BookResult(msgspec.Struct, kw_only=True):
    """What :func:`read_book` read from one book: ``entries``; ``skips`` (the container's,
    the pages'); ``pages`` parsed; ``counts`` per entry kind; ``seconds`` spent; ``error``
    when the book could not be read at all (then ``entries`` is empty and ``skips`` holds
    the same error as a skip of the whole book)."""

    source: str
    entries: list[Entry] = []
    skips: list[Skip] = []
    pages: int = 0
    counts: dict[str, int] = {}
    seconds: float = 0.0
    error: str = ""


def read_book(path: Path, limits: Limits | None = None) -> BookResult:
    """Read one help book into entries (see the module doc); never raises for a bad file:
    an unreadable book gives a result with ``error`` set."""
    t0 = time.perf_counter()
    source = path.name
    try:
        book = HelpBook.open(path, limits)
    except HbkError as exc:
        return BookResult(source=source, skips=[exc.skip()], error=str(exc), seconds=time.perf_counter() - t0)
    try:
        try:
            toc = parse_toc(book.toc_text)
        except TocError as exc:
            err = HbkError(source, "bad_toc", f"the table of contents: {exc}")
            return BookResult(source=source, skips=[*book.skips, err.skip()], error=str(err))
        walker = _Walker(book, toc, source, t0 + book.limits.max_seconds)
        walker.walk()
        if walker.unread:
            detail = f"{walker.unread} pages not read: the book took longer than {book.limits.max_seconds} s"
            book.skips.append(Skip(source, "time_budget", detail))
        counts: dict[str, int] = {}
        for e in walker.entries:
            counts[e.kind] = counts.get(e.kind, 0) + 1
        if toc.skipped:
            book.skips.append(Skip(source, "toc_chunk", f"{toc.skipped} table-of-contents chunks of another shape"))
        return BookResult(
            source=source,
            entries=walker.entries,
            skips=book.skips,
            pages=walker.pages,
            counts=counts,
            seconds=time.perf_counter() - t0,
        )
    finally:
        book.close()


def _lower_titles(node: TocNode) -> set[str]:
    return {t.strip().lower() for t in node.titles.values()}


def _group(node: TocNode) -> str | None:
    """The member kind a group node (Свойства, Методы, ...) holds; ``None`` for any other
    node. A group is a folder (children, or no page): an enumeration value that happens to
    be named Свойства is a page without children."""
    if node.path and not node.children:
        return None
    return next((_GROUPS[t] for t in _lower_titles(node) if t in _GROUPS), None)


class _Walker:
    def __init__(self, book: HelpBook, toc: Toc, source: str, deadline: float) -> None:
        self.book = book
        self.deadline = deadline
        self.unread = 0
        self.toc = toc
        self.source = source
        self.entries: list[Entry] = []
        self.pages = 0
        self._keys: set[str] = set()
        self._done: set[int] = set()

    # --- pages --------------------------------------------------------------------------
    def page(self, node: TocNode) -> Page | None:
        """The parsed page of ``node`` (``None``: a folder, or skipped with a reason)."""
        if not node.path:
            return None
        if time.perf_counter() > self.deadline:
            self.unread += 1
            return None
        data = self.book.page(node.path)
        if data is None:
            return None
        where = f"{self.source}:{node.path.lstrip('/')}"
        try:
            page = parse_page(decode_page(data))
        except PageError as exc:
            self.book.skips.append(Skip(where, "page_undecodable", str(exc)))
            return None
        except Exception as exc:  # the parser is lenient; anything else is a page we cannot use
            self.book.skips.append(Skip(where, "page_unparsable", f"{type(exc).__name__}: {exc}"))
            return None
        self.pages += 1
        if not page.name:
            page.name, page.name_en = node.title("ru"), node.titles.get("en", "")
        if not page.name:
            self.book.skips.append(Skip(where, "page_unnamed", "neither the page nor the table of contents names it"))
            return None
        return page

    def add(self, entry: Entry) -> None:
        if entry.key in self._keys:
            self.book.skips.append(Skip(f"{self.source}:{entry.page}", "duplicate_entry", f"a second {entry.key}"))
            return
        self._keys.add(entry.key)
        self.entries.append(entry)

    def entry(
        self, kind: str, page: Page, node: TocNode, owner: tuple[str, str] = ("", ""), category: str = ""
    ) -> Entry:
        return Entry(
            kind=kind,
            name=page.name,
            name_en=page.name_en,
            owner=owner[0],
            owner_en=owner[1],
            signatures=page.signatures,
            return_types=page.return_types,
            returns=page.returns,
            value_types=page.value_types,
            readonly=page.readonly,
            description=page.description,
            availability=page.availability,
            since=page.since,
            deprecated_since=page.deprecated_since,
            example=page.example,
            note=page.note,
            see_also=page.see_also,
            category=category,
            source=self.source,
            page=node.path,
        )

    # --- the tree -----------------------------------------------------------------------
    def walk(self) -> None:
        if self.source.lower().startswith("shlang"):
            for node, _depth in self.toc.walk():
                self._language_page(node)
            return
        for nid in self.toc.roots:
            self._node(self.toc.nodes[nid], in_enum_folder=False, category="")

    def _children(self, node: TocNode) -> list[TocNode]:
        return [self.toc.nodes[c] for c in node.children if c in self.toc.nodes]

    def _node(self, node: TocNode, in_enum_folder: bool, category: str, depth: int = 0) -> None:
        """Walk ``node``; ``category`` is the title of the folder it sits in."""
        if node.id in self._done or depth > 64:
            return
        self._done.add(node.id)
        titles = _lower_titles(node)
        if node.path.endswith("Global context.html") or titles & _GLOBAL_TITLES:
            self._global(node, "", depth + 1)
            return
        if not node.path or _CATALOG_RE.search(node.path):
            enum_folder = in_enum_folder or bool(titles & _ENUM_FOLDERS)
            for child in self._children(node):
                self._node(child, enum_folder, node.title("ru"), depth + 1)
            return
        children = self._children(node)
        has_groups = any(_group(c) for c in children)
        values = [c for c in children if "/properties/" in c.path]
        if not has_groups and (in_enum_folder or (values and len(values) == len(children))):
            self._enum(node, children, category)
        else:
            self._type(node, children, in_enum_folder, category, depth)

    def _global(self, node: TocNode, category: str, depth: int) -> None:
        """The global context below ``node``: properties, functions and events by their path;
        a folder's title is the category of what it holds."""
        for child in self._children(node):
            if child.id in self._done or depth > 64:
                continue
            self._done.add(child.id)
            if not child.path or _CATALOG_RE.search(child.path):
                self._global(child, child.title("ru"), depth + 1)
                continue
            kind = _path_kind(child.path)
            kind = {"property": "global_property", "method": "function"}.get(kind or "", kind)
            if kind is not None and kind != "constructor":
                page = self.page(child)
                if page is not None:
                    self.add(self.entry(kind, page, child, category=category))
            self._global(child, category, depth + 1)

    def _enum(self, node: TocNode, children: list[TocNode], category: str) -> None:
        page = self.page(node)
        if page is None:
            return
        self.add(self.entry("enum", page, node, category=category))
        for child in children:
            self._done.add(child.id)
            if "/properties/" not in child.path:
                continue
            value = self.page(child)
            if value is not None:
                self.add(self.entry("enum_value", value, child, (page.name, page.name_en)))

    def _type(self, node: TocNode, children: list[TocNode], in_enum_folder: bool, category: str, depth: int) -> None:
        page = self.page(node)
        if page is None:
            for child in children:  # a type we cannot name: its members cannot be named either
                self._done.add(child.id)
            return
        self.add(self.entry("type", page, node, category=category))
        owner = (page.name, page.name_en)
        ctors: list[tuple[Page, TocNode]] = []
        for child in children:
            group = _group(child)
            if group is not None:
                self._done.add(child.id)
                members = self._children(child)
            elif _path_kind(child.path) is not None:
                members = [child]
            else:
                self._node(child, in_enum_folder, category, depth + 1)  # a nested page of its own
                continue
            for member in members:
                if member.id in self._done:
                    continue
                self._done.add(member.id)
                kind = group or _path_kind(member.path) or "method"
                mpage = self.page(member)
                if mpage is None:
                    continue
                if kind == "constructor":
                    ctors.append((mpage, member))
                else:
                    self.add(self.entry(kind, mpage, member, owner))
        if ctors:
            sigs = []
            for cpage, _cnode in ctors:
                for sig in cpage.signatures or [Signature()]:
                    sigs.append(
                        Signature(
                            name=cpage.name if not sig.name else sig.name,
                            syntax=sig.syntax,
                            params=sig.params,
                            description=sig.description or cpage.description,
                        )
                    )
            sinces = [c.since for c, _ in ctors if c.since]
            deprecated = [c.deprecated_since for c, _ in ctors]
            self.add(
                Entry(
                    kind="constructor",
                    name=page.name,
                    name_en=page.name_en,
                    owner=page.name,
                    owner_en=page.name_en,
                    signatures=sigs,
                    availability=next((c.availability for c, _ in ctors if c.availability), page.availability),
                    since=min(sinces, key=_version_key) if sinces else "",
                    deprecated_since=min(deprecated, key=_version_key) if all(deprecated) else "",
                    category=category,
                    source=self.source,
                    page=ctors[0][1].path,
                )
            )

    def _language_page(self, node: TocNode) -> None:
        if node.id in self._done or not node.path or _CATALOG_RE.search(node.path):
            return
        self._done.add(node.id)
        page = self.page(node)
        if page is None:
            return
        stem = node.path.rsplit("/", 1)[-1]
        self.add(self.entry("type" if stem.lower().startswith("def_") else "keyword", page, node))


def _path_kind(path: str) -> str | None:
    for part, kind in _PATH_KINDS:
        if part in path:
            return kind
    return None


def _version_key(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in v.split(".") if x.isdigit())
