"""One page of the syntax assistant (an HTML file of a help book's ``FileStorage``) into its parts.

The pages the public readers document are flat: ``<h1 class="V8SH_pagetitle">Тип.Метод
(Type.Method)</h1>``, ``<p class="V8SH_title">`` (the owner), ``<p class="V8SH_heading">``
(the name, ``Русское (English)``), then chapters, each opened by ``<p class="V8SH_chapter">``
and running to the next one or to ``<hr>``: Синтаксис, Вариант синтаксиса: <имя>, Параметры
(one ``<div class="V8SH_rubric">&lt;Имя&gt; (необязательный)</div>`` per parameter, then
``Тип: <a>Строка</a>. описание``), Возвращаемое значение, Описание, Описание варианта
метода, Использование (``Только чтение.``), Доступность, Пример, См. также, Примечание,
Использование в версии (``<p class="V8SH_versionInfo">Доступен, начиная с версии
8.3.6.</p>``). The English book's chapter names are matched too (``Syntax``, ``Parameters``,
...); they were not seen in a real page, only guessed from the Russian layout.

:func:`decode_page` picks the charset (a BOM, else the page's ``<meta charset>``, else
UTF-8 with a CP1251 fallback, as the pages of older books are); :func:`parse_page` never
raises on markup and returns what it found. It runs libxml2's HTML parser (lxml) with a
target: linear in the page, where the standard library's ``html.parser`` took minutes on a
few MB of unclosed tags.
"""

from __future__ import annotations

import codecs
import re

import msgspec
from lxml import etree

from .entries import Param, Signature, availability_codes

__all__ = ["CHAPTERS", "Page", "PageError", "decode_page", "parse_page", "split_name"]

#: Chapter titles (folded, without the colon) -> the part of :class:`Page` they fill.
CHAPTERS = {
    "синтаксис": "syntax",
    "syntax": "syntax",
    "параметры": "params",
    "parameters": "params",
    "возвращаемое значение": "returns",
    "return value": "returns",
    "returned value": "returns",
    "описание": "description",
    "description": "description",
    "описание варианта метода": "variant_description",
    "method variant description": "variant_description",
    "description of method variant": "variant_description",
    "использование": "usage",
    "usage": "usage",
    "доступность": "availability",
    "availability": "availability",
    "пример": "example",
    "примеры": "example",
    "example": "example",
    "examples": "example",
    "см. также": "see_also",
    "see also": "see_also",
    "примечание": "note",
    "note": "note",
    "использование в версии": "version",
    "version usage": "version",
    "usage in version": "version",
    "use in version": "version",
    "значение": "value",
    "value": "value",
}
_VARIANT_PREFIXES = ("вариант синтаксиса:", "syntax variant:", "variant of syntax:")

_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?([A-Za-z0-9_.:-]+)""", re.I)
_NAME_RE = re.compile(r"^(.*?)\s*\(([^()]*)\)\s*$", re.S)
_TYPE_RE = re.compile(r"^\s*(?:Тип|Type):\s*(.+?)\.(?:\s|$)(.*)$", re.S)
_DEFAULT_RE = re.compile(r"(?:Значение по умолчанию|Default value):\s*(.+?)\.?(?:\s*$|\.\s)", re.S)
_VERSION_RE = re.compile(r"\d+\.\d+(?:\.\d+){0,2}")
_RUBRIC_RE = re.compile(r"^\s*<?\s*([^<>()]*?)\s*>?\s*(?:\((.*)\))?\s*$", re.S)
_CYRILLIC = re.compile(r"[А-Яа-яЁё]")
_SPACES = re.compile(r"[ \t\r\f\v\xa0]+")


class PageError(ValueError):
    """A page that cannot be decoded: its declared charset is unknown or does not fit its
    bytes. The message names the charset."""


class Page(msgspec.Struct, kw_only=True, omit_defaults=True):
    """What a page says. ``name``/``name_en`` from the heading (else the page title),
    ``owner``/``owner_en`` from the title line when it names something else; the rest as in
    :class:`~.entries.Entry`. ``chapters``: the chapter kinds met (``unknown:<title>`` for a
    title not in :data:`CHAPTERS`), for diagnostics."""

    name: str = ""
    name_en: str = ""
    owner: str = ""
    owner_en: str = ""
    signatures: list[Signature] = []
    return_types: list[str] = []
    returns: str = ""
    value_types: list[str] = []
    readonly: bool = False
    description: str = ""
    availability: list[str] = []
    since: str = ""
    deprecated_since: str = ""
    example: str = ""
    note: str = ""
    see_also: list[str] = []
    chapters: list[str] = []


def decode_page(data: bytes) -> str:
    """The page as text: a UTF-8/UTF-16 BOM wins, then a ``<meta ... charset=...>`` in the
    first 2 KB, else UTF-8, falling back to CP1251 (the old books' charset) when the bytes
    are not UTF-8. :class:`PageError` when a declared charset is unknown or fails."""
    if data.startswith(codecs.BOM_UTF8):
        return data[3:].decode("utf-8", "replace")
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return data.decode("utf-16", "replace")
    m = _META_CHARSET.search(data, 0, 2048)
    if m:
        charset = m.group(1).decode("ascii").lower()
        try:
            codecs.lookup(charset)
        except LookupError:
            raise PageError(f"the page declares an unknown charset {charset!r}") from None
        try:
            return data.decode(charset)
        except UnicodeDecodeError as exc:
            raise PageError(f"the page is not {charset} as it declares: {exc.reason} at byte {exc.start}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("cp1251", "replace")


def split_name(text: str) -> tuple[str, str]:
    """``"СтрНайти (StrFind)"`` -> ``("СтрНайти", "StrFind")``; ``"По имени"`` -> ``("По
    имени", "")``. The Cyrillic one of the two is the Russian name whichever comes first
    (an English book may write ``StrFind (СтрНайти)``)."""
    text = _SPACES.sub(" ", text).strip()
    m = _NAME_RE.match(text)
    if m and m.group(1):
        first, second = m.group(1).strip(), m.group(2).strip()
        if _CYRILLIC.search(second) and not _CYRILLIC.search(first):
            return second, first
        return first, second
    return text, ""


class _Collector:
    """The parser's target (libxml2's HTML parser calls :meth:`start`, :meth:`end`, :meth:`data`
    in document order): flattens a page into the header lines and a list of chapters, each a
    list of events ``("t", text)``, ``("nl",)``, ``("rubric", text)``, ``("link", text)``,
    ``("ver", text)``."""

    _SPECIAL = {
        ("h1", "V8SH_pagetitle"): "pagetitle",
        ("p", "V8SH_title"): "title",
        ("p", "V8SH_heading"): "heading",
        ("p", "V8SH_chapter"): "chapter",
        ("div", "V8SH_rubric"): "rubric",
        ("p", "V8SH_versionInfo"): "ver",
        ("div", "__SINCE_SHOW_STYLE__"): "box",
        ("div", "__DEPRECATED_SHOW_STYLE__"): "box",
    }
    #: Elements whose start and end break a line (``br``: its start only).
    _BREAKS = frozenset(("p", "div", "li", "tr", "ul", "ol", "table", "h1", "h2", "h3", "h4", "pre"))

    def __init__(self) -> None:
        self.head: dict[str, list[str]] = {"pagetitle": [], "title": [], "heading": []}
        self.boxes: list[str] = []
        self.chapters: list[tuple[str, list[tuple]]] = []
        self.events: list[tuple] | None = None  # the open chapter's events
        self.mode: str | None = None
        self.mode_tag = ""
        self.mode_depth = 0
        self.buf: list[str] = []
        self.link: list[str] | None = None
        self.done = False

    def start(self, tag: str, attrib) -> None:
        """An element opens."""
        if self.done:
            return
        if tag == "hr":
            self._close_mode()
            self.done = True
            return
        if self.mode is not None:
            if tag == self.mode_tag:
                self.mode_depth += 1
            elif tag == "br":
                self.buf.append("\n")
            return
        special = self._SPECIAL.get((tag, attrib.get("class") or ""))
        if special is not None:
            self.mode, self.mode_tag, self.mode_depth, self.buf = special, tag, 1, []
            return
        if tag == "a":
            self.link = []
        if (tag == "br" or tag in self._BREAKS) and self.events is not None:
            self.events.append(("nl",))

    def end(self, tag: str) -> None:
        """An element closes (libxml2 closes unclosed ones itself)."""
        if self.done:
            return
        if self.mode is not None:
            if tag == self.mode_tag:
                self.mode_depth -= 1
                if self.mode_depth == 0:
                    self._close_mode()
            return
        if tag == "a" and self.link is not None:
            text = _SPACES.sub(" ", "".join(self.link)).strip()
            if text and self.events is not None:
                self.events.append(("link", text))
            self.link = None
        if tag in self._BREAKS and self.events is not None:
            self.events.append(("nl",))

    def data(self, data: str) -> None:
        """Text (entities already decoded)."""
        if self.done:
            return
        if self.mode is not None:
            self.buf.append(data)
            return
        if self.link is not None:
            self.link.append(data)
        if self.events is not None:
            self.events.append(("t", data))

    def _close_mode(self) -> None:
        mode, text = self.mode, "".join(self.buf)
        self.mode, self.buf = None, []
        if mode is None:
            return
        clean = _SPACES.sub(" ", text.replace("\n", " ")).strip()
        if mode in self.head:
            self.head[mode].append(clean)
        elif mode == "chapter":
            self.events = []
            self.chapters.append((clean, self.events))
        elif mode == "box":
            self.boxes.append(clean)
        elif self.events is not None:
            self.events.append((mode, clean))

    def close(self) -> None:
        """The end of the page."""
        self._close_mode()


def _text(events: list[tuple], keep_lines: bool = False) -> str:
    """The events' text: line breaks where the markup broke lines, spaces collapsed."""
    out: list[str] = []
    for ev in events:
        if ev[0] == "t":
            out.append(ev[1].replace("\r", " ").replace("\n", " "))  # source line breaks are spaces in HTML
        elif ev[0] == "nl":
            out.append("\n")
        elif ev[0] in ("rubric", "ver"):
            out.append("\n" + ev[1] + "\n")
    raw = "".join(out)
    lines = [
        _SPACES.sub(" ", line).strip() if not keep_lines else line.replace("\xa0", " ").rstrip()
        for line in raw.split("\n")
    ]
    if keep_lines:
        return "\n".join(lines).strip("\n")
    return "\n".join(line for line in lines if line)


def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def _types(text: str) -> tuple[list[str], str]:
    """``"Тип: Строка; Число. Описание"`` -> (["Строка", "Число"], "Описание")."""
    m = _TYPE_RE.match(text)
    if not m:
        return [], text.strip()
    types = [t for t in (p.strip() for p in re.split(r"[;,]", m.group(1))) if t]
    return types, m.group(2).strip()


def _params(events: list[tuple]) -> list[Param]:
    params: list[Param] = []
    current: tuple[str, list[tuple]] | None = None
    blocks: list[tuple[str, list[tuple]]] = []
    for ev in events:
        if ev[0] == "rubric":
            current = (ev[1], [])
            blocks.append(current)
        elif current is not None:
            current[1].append(ev)
    for rubric, body in blocks:
        m = _RUBRIC_RE.match(rubric)
        name = (m.group(1) if m else rubric).strip()
        flags = (m.group(2) or "").strip().lower() if m else ""
        if not name:
            continue
        types, desc = _types(_text(body))
        desc = _flat(desc)
        dm = _DEFAULT_RE.search(desc)
        params.append(
            Param(
                name=name,
                types=types,
                optional=flags.startswith(("необяз", "optional")),
                default=dm.group(1).strip() if dm else "",
                description=desc,
            )
        )
    return params


def parse_page(html: str) -> Page:
    """The parts of one help page (see the module doc); missing parts stay empty."""
    col = _Collector()
    parser = etree.HTMLParser(target=col, recover=True, no_network=True, remove_comments=True, remove_pis=True)
    try:
        parser.feed(html)
        parser.close()
    except etree.Error:  # nothing to parse (an empty page): what was collected stands
        col.close()
    page = Page()
    heading = col.head["heading"][0] if col.head["heading"] else ""
    title = col.head["title"][0] if col.head["title"] else ""
    pagetitle = col.head["pagetitle"][0] if col.head["pagetitle"] else ""
    page.name, page.name_en = split_name(heading or pagetitle)
    if heading and title and split_name(title) != (page.name, page.name_en):
        page.owner, page.owner_en = split_name(title)
    sigs: list[Signature] = []
    versions: list[str] = []

    def current() -> Signature:
        if not sigs:
            sigs.append(Signature())
        return sigs[-1]

    for title_text, events in col.chapters:
        key = title_text.rstrip(":").strip().lower()
        if key.startswith(_VARIANT_PREFIXES):
            sigs.append(Signature(name=title_text.split(":", 1)[1].strip()))
            page.chapters.append("variant")
            continue
        kind = CHAPTERS.get(key)
        page.chapters.append(kind or f"unknown:{title_text}")
        if kind == "syntax":
            sig = current()
            if sig.syntax:  # a second syntax without a variant title: a variant of its own
                sig = Signature()
                sigs.append(sig)
            sig.syntax = _flat(_text(events))
        elif kind == "params":
            current().params = _params(events)
        elif kind == "variant_description":
            current().description = _flat(_text(events))
        elif kind is not None:
            _page_chapter(page, kind, events, versions)
    page.signatures = [s for s in sigs if s.syntax or s.params or s.name]
    for line in versions + col.boxes:
        _version_note(page, line)
    return page


def _page_chapter(page: Page, kind: str, events: list, versions: list[str]) -> None:
    """Fill the page-level part a chapter of ``kind`` holds (its returns, description, usage,
    availability, example, see also, note, value); a version chapter's lines go to ``versions``."""
    if kind == "returns":
        page.return_types, rest = _types(_text(events))
        page.returns = _flat(rest)
    elif kind == "description":
        text = _text(events)
        page.value_types, rest = _types(text)
        page.description = _flat(rest if page.value_types else text)
    elif kind == "usage":
        usage = _flat(_text(events)).lower()
        page.readonly = usage.startswith(("только чтение", "read only", "read-only"))
    elif kind == "availability":
        page.availability = availability_codes(_text(events))
    elif kind == "example":
        page.example = _text(events, keep_lines=True)
    elif kind == "see_also":
        page.see_also = [ev[1] for ev in events if ev[0] == "link"]
    elif kind == "note":
        page.note = _flat(_text(events))
    elif kind == "version":
        versions.extend(ev[1] for ev in events if ev[0] in ("ver", "t") and ev[1].strip())
    elif kind == "value" and not page.description:
        page.description = _flat(_text(events))


def _version_note(page: Page, line: str) -> None:
    """Fill ``since``/``deprecated_since`` from one version line (the first of each wins)."""
    m = _VERSION_RE.search(line)
    if not m:
        return
    low = line.lower()
    if "не рекоменд" in low or "not recommended" in low or "deprecated" in low or "obsolete" in low:
        page.deprecated_since = page.deprecated_since or m.group()
    elif "изменен" in low or "changed" in low:
        return
    elif "начиная с" in low or "доступ" in low or "since" in low or "available" in low or "starting" in low:
        page.since = page.since or m.group()
