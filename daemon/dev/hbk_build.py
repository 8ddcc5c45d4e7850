"""Builds ``.hbk`` help books to the published description, for the reader's tests and the bench
(``bsl-lens bench --platform``; ``tests/hbk_fixtures.py`` imports it).

No real platform help file exists on these machines, so these containers are the only ones
the reader has met; they follow what the public readers document (``docs/platform-help.md``):
a 16-byte container header, 31-byte ASCII block headers with hex sizes, chained blocks, an
entry table of 12-byte records, entry headers with 20 bytes of dates and attributes and a
UTF-16LE name plus 4 zero bytes, and the entries ``Book``, ``PackBlock`` (a ZIP whose member
is the brace-format table of contents), ``FileStorage`` (a ZIP of HTML pages) and the
index entries a real book has. Pages follow the syntax assistant's markup (``V8SH_*``
classes). :func:`book_from_entries` renders a book from platform entries (the bundled data
set) and returns what a reader should find, with synthetic availability and versions.
"""

from __future__ import annotations

import html
import io
import struct
import zipfile
import zlib
from dataclasses import dataclass, field

import msgspec

from daemon.sources.platform.entries import Entry, Signature

END = 0x7FFFFFFF
HEADER = 31
#: Availability sentences the builder cycles through, with the codes the reader must give.
AVAILABILITIES = (
    (
        "Тонкий клиент, веб-клиент, мобильный клиент, сервер, толстый клиент, внешнее соединение, "
        "мобильное приложение (клиент), мобильное приложение (сервер).",
        [
            "thin_client",
            "web_client",
            "mobile_client",
            "server",
            "thick_client",
            "external_connection",
            "mobile_app_client",
            "mobile_app_server",
        ],
    ),
    ("Сервер, толстый клиент, внешнее соединение.", ["server", "thick_client", "external_connection"]),
    ("Тонкий клиент, веб-клиент, толстый клиент.", ["thin_client", "web_client", "thick_client"]),
)
AVAILABILITIES_EN = (
    "Thin client, web client, mobile client, server, thick client, external connection, "
    "mobile application (client), mobile application (server).",
    "Server, thick client, external connection.",
    "Thin client, web client, thick client.",
)
VERSIONS = ("8.0", "8.1", "8.2", "8.3.1", "8.3.6", "8.3.10", "8.3.21", "8.3.24")


def block_header(payload: int, block: int, nxt: int = END) -> bytes:
    """A 31-byte block header."""
    return b"\r\n%08x %08x %08x \r\n" % (payload, block, nxt)


@dataclass
class Container:
    """A v8 container being laid out: documents placed one after another, each split into
    blocks of ``chunk`` bytes (``None``: one block; at least ``min_block``)."""

    default_block: int = 512
    end: int = END
    out: bytearray = field(default_factory=bytearray)
    #: name -> addresses of the blocks of its body, in chain order (for tests that corrupt them)
    chains: dict[str, list[int]] = field(default_factory=dict)

    def document(self, data: bytes, chunk: int | None = None, min_block: int = 0) -> list[int]:
        """Append ``data`` as a chain of blocks; the block addresses."""
        size = chunk or max(len(data), min_block, 1)
        pieces = [data[i : i + size] for i in range(0, len(data), size)] or [b""]
        base = len(self.out)
        addrs = [base + i * (HEADER + size) for i in range(len(pieces))]
        for i, piece in enumerate(pieces):
            nxt = addrs[i + 1] if i + 1 < len(pieces) else self.end
            self.out += block_header(len(data) if i == 0 else 0, size, nxt)
            self.out += piece.ljust(size, b"\x00")
        return addrs


def entry_header(name: bytes | str) -> bytes:
    """An entry header document: 8 + 8 bytes of dates, 4 of attributes, the UTF-16LE name
    (``bytes``: written as given, for a name that is not UTF-16) and 4 zero bytes."""
    raw = name.encode("utf-16-le") if isinstance(name, str) else name
    return struct.pack("<QQI", 0x01D5A3E0C1B2A000, 0x01D5A3E0C1B2A000, 0) + raw + b"\x00" * 4


def container_bytes(
    entries: list[tuple[str | bytes, bytes]],
    *,
    chunk: dict[str, int] | None = None,
    default_block: int = 512,
    end: int = END,
) -> tuple[bytes, Container]:
    """A container holding ``entries`` (name, body) in order; ``chunk`` splits the named
    bodies into blocks of that many bytes. Returns the bytes and the layout."""
    chunk = chunk or {}
    c = Container(default_block=default_block, end=end)
    n = len(entries)
    c.out += struct.pack("<iiii", END, default_block, n, 0)
    table_addr = len(c.out)
    table_size = max(12 * n, default_block)
    c.out += b"\x00" * (HEADER + table_size)  # the entry table, written once the addresses are known
    records = []
    for name, body in entries:
        header_addr = c.document(entry_header(name), min_block=0)[0]
        key = name if isinstance(name, str) else repr(name)
        chain = c.document(body, chunk.get(key), min_block=default_block if not chunk.get(key) else 0)
        c.chains[key] = chain
        records.append(struct.pack("<III", header_addr, chain[0], END))
    table = b"".join(records)
    c.out[table_addr : table_addr + HEADER + table_size] = block_header(len(table), table_size, end) + table.ljust(
        table_size, b"\x00"
    )
    return bytes(c.out), c


def zip_bytes(members: list[tuple[str, bytes]], *, compression: int = zipfile.ZIP_DEFLATED) -> bytes:
    """A ZIP archive of ``members`` (name, bytes) in order."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=compression, compresslevel=6) as zf:
        for name, data in members:
            zf.writestr(name, data)
    return buf.getvalue()


def _q(text: str) -> str:
    return '"' + text.replace('"', '""') + '"'


@dataclass
class Node:
    """A table-of-contents node (``titles``: language code -> title; ``path``: "" for a
    folder)."""

    id: int
    parent: int
    titles: dict[str, str]
    path: str = ""
    children: list[int] = field(default_factory=list)


def toc_text(nodes: list[Node]) -> str:
    """The brace-format table of contents of ``nodes`` (ids from 1; parent 0 is the root)."""
    lines = [f"{{{len(nodes)},"]
    for i, n in enumerate(nodes):
        kids = "".join(f"{c}," for c in n.children)
        names = ",".join(f"{{{_q(lang)},{_q(title)}}}" for lang, title in n.titles.items())
        tail = "," if i + 1 < len(nodes) else ""
        lines.append(f"{{{n.id},{n.parent},{len(n.children)},{kids}{{1,0,{{0,0,{names}}},{_q(n.path)}}}}}{tail}")
    lines.append("}")
    return "\n".join(lines)


class BookBuilder:
    """A help book being built: a tree of nodes and the pages behind them."""

    def __init__(self) -> None:
        self.nodes: list[Node] = []
        self.pages: dict[str, bytes] = {}

    def add(self, parent: int, titles: dict[str, str], path: str = "", page: bytes | None = None) -> int:
        """A node under ``parent`` (0: a root); ``page`` is stored at ``path``."""
        node = Node(len(self.nodes) + 1, parent, titles, path)
        self.nodes.append(node)
        if parent:
            self.nodes[parent - 1].children.append(node.id)
        if page is not None:
            self.pages[path.lstrip("/")] = page
        return node.id

    def pack_block(self) -> bytes:
        """``PackBlock``: a ZIP with the table of contents as its one member."""
        return zip_bytes([("PackBlock", ("\ufeff" + toc_text(self.nodes)).encode("utf-8"))])

    def file_storage(self) -> bytes:
        """``FileStorage``: a ZIP of the pages."""
        return zip_bytes(list(self.pages.items()))

    def entries(self) -> list[tuple[str | bytes, bytes]]:
        """The container entries of a help book, in the order a real one lists them."""
        return [
            ("Book", b'{"title":"Syntax helper"}'),
            ("FileStorage", self.file_storage()),
            ("IndexMainData", zlib.compress(b"index")),
            ("IndexPackBlock", zlib.compress(b"index")),
            ("MainData", b"\x00" * 64),
            ("PackBlock", self.pack_block()),
            ("PackLookup", b"\x00" * 16),
        ]

    def build(self, **kw) -> bytes:
        """The whole ``.hbk`` file."""
        return container_bytes(self.entries(), **kw)[0]


# ------------------------------------------------------------------------------ pages
_CHAPTERS = {
    "ru": {
        "variant": "Вариант синтаксиса: ",
        "syntax": "Синтаксис:",
        "params": "Параметры:",
        "returns": "Возвращаемое значение:",
        "description": "Описание:",
        "usage": "Использование:",
        "availability": "Доступность: ",
        "example": "Пример:",
        "see_also": "См. также:",
        "version": "Использование в версии:",
        "type": "Тип",
        "required": "обязательный",
        "optional": "необязательный",
        "since": "Доступен, начиная с версии {}.",
        "deprecated": "Не рекомендуется использовать, начиная с версии {}.",
        "readonly": "Только чтение.",
        "readwrite": "Чтение и запись.",
        "new": "Новый",
    },
    "en": {
        "variant": "Syntax variant: ",
        "syntax": "Syntax:",
        "params": "Parameters:",
        "returns": "Return value:",
        "description": "Description:",
        "usage": "Usage:",
        "availability": "Availability: ",
        "example": "Example:",
        "see_also": "See also:",
        "version": "Usage in version:",
        "type": "Type",
        "required": "required",
        "optional": "optional",
        "since": "Available since version {}.",
        "deprecated": "Not recommended since version {}.",
        "readonly": "Read only.",
        "readwrite": "Read and write.",
        "new": "New",
    },
}


def _e(text: str) -> str:
    return html.escape(text, quote=False)


def _pair(ru: str, en: str, lang: str) -> str:
    first, second = (ru, en) if lang == "ru" else (en, ru)
    return f"{first} ({second})" if first and second else first or second


def _type_links(types: list[str]) -> str:
    return "; ".join(f'<a href="v8help://SyntaxHelperLanguage/def_{abs(hash(t)) % 997}">{_e(t)}</a>' for t in types)


def syntax(entry: Entry, sig: Signature, lang: str = "ru") -> str:
    """The Синтаксис line a page shows for one signature (what the reader gives back)."""
    head = f"{_CHAPTERS[lang]['new']} {entry.owner}" if entry.kind == "constructor" else entry.name
    return f"{head}({', '.join('<' + p.name + '>' for p in sig.params)})"


def with_syntax(entry: Entry, lang: str = "ru") -> Entry:
    """``entry`` with each signature's syntax as its page writes it."""
    sigs = [msgspec.structs.replace(s, syntax=syntax(entry, s, lang)) for s in entry.signatures]
    return msgspec.structs.replace(entry, signatures=sigs)


def render_page(entry: Entry, *, lang: str = "ru", charset: str = "utf-8") -> bytes:
    """A syntax-assistant page for ``entry`` in the markup the public readers document."""
    c = _CHAPTERS[lang]
    out = _page_head(entry, c, lang, charset) + _page_signatures(entry, c, lang) + _page_tail(entry, c, lang)
    out.append(
        '<HR><p>&nbsp;&nbsp;&nbsp;&nbsp; <a href=http://www.1centerprise.com/devlinks target="_blank">'
        "Методическая информация</a></p></body></html>"
    )
    return "".join(out).encode(charset, "xmlcharrefreplace")


def _page_head(entry: Entry, c: dict, lang: str, charset: str) -> list[str]:
    """The page's head, title, owner, heading, version boxes and a property's usage."""
    if entry.kind == "constructor":
        qualified = f"{entry.owner}.{entry.name}"
    else:
        qualified = _pair(entry.qualified, entry.qualified_en, lang)
    out = [
        f'<html><head><meta http-equiv="Content-Type" content="text/html; charset={charset}">'
        f'<meta http-equiv="Content-Language" content="{lang}"></head><body>',
        f'<h1 class="V8SH_pagetitle">{_e(qualified)}</h1>',
    ]
    if entry.owner:
        out.append(f'<p class="V8SH_title">{_e(_pair(entry.owner, entry.owner_en, lang))}</p>')
    elif entry.kind in ("function", "global_property", "event"):
        out.append(f'<p class="V8SH_title">{_e(_pair("Глобальный контекст", "Global context", lang))}</p>')
    if entry.kind not in ("type", "enum"):
        out.append(f'<p class="V8SH_heading">{_e(_pair(entry.name, entry.name_en, lang))}</p>')
    if entry.deprecated_since:
        out.append(
            f'<div class="__DEPRECATED_SHOW_STYLE__"><p class="not_used">'
            f"{c['deprecated'].format(entry.deprecated_since)}</p></div>"
        )
    if entry.since:
        out.append(f'<div class="__SINCE_SHOW_STYLE__"><p class="not_used">{c["since"].format(entry.since)}</p></div>')
    if entry.kind in ("property", "global_property"):
        out.append(f'<p class="V8SH_chapter">{c["usage"]}</p>{c["readonly"] if entry.readonly else c["readwrite"]}')
    return out


def _page_signatures(entry: Entry, c: dict, lang: str) -> list[str]:
    """Each signature's variant title, syntax, parameters and description."""
    out: list[str] = []
    for sig in entry.signatures:
        if len(entry.signatures) > 1 or sig.name:
            out.append(f'<p class="V8SH_chapter">{_e(c["variant"] + sig.name)}</p>')
        out.append(f'<p class="V8SH_chapter">{c["syntax"]}</p>{_e(syntax(entry, sig, lang))}')
        if sig.params:
            out.append(f'<p class="V8SH_chapter">{c["params"]}</p>')
            for p in sig.params:
                flag = c["optional"] if p.optional else c["required"]
                out.append(
                    '<div class="V8SH_rubric"> <p style="margin-top: 2px; margin-bottom: 1px">'
                    f"&lt;{_e(p.name)}&gt; ({flag})</div>"
                )
                body = _e(p.description)
                if p.types:
                    out.append(f"{c['type']}: {_type_links(p.types)}. <br>{body}")
                else:
                    out.append(body)
        if sig.description and entry.kind != "constructor":
            out.append(f'<p class="V8SH_chapter">Описание варианта метода:</p>{_e(sig.description)}')
    return out


def _page_tail(entry: Entry, c: dict, lang: str) -> list[str]:
    """The returns, description, availability, example, see-also and version chapters."""
    out: list[str] = []
    if entry.return_types or entry.returns:
        types = f"{c['type']}: {_type_links(entry.return_types)}. <br>" if entry.return_types else ""
        out.append(f'<p class="V8SH_chapter">{c["returns"]}</p>{types}{_e(entry.returns)}')
    description = entry.description
    if entry.kind == "constructor" and entry.signatures:
        description = entry.signatures[0].description
    if entry.value_types or description:
        prefix = f"{c['type']}: {_type_links(entry.value_types)}. <br>" if entry.value_types else ""
        out.append(f'<p class="V8SH_chapter">{c["description"]}</p>{prefix}<p>{_e(description)}</p>')
    if entry.availability:
        text = _availability_text(entry.availability, lang)
        out.append(f'<p class="V8SH_chapter">{c["availability"]}</p><p>{text}<BR>Сериализуется.</p>')
    if entry.example:
        lines = "<BR>".join(_e(line) for line in entry.example.split("\n"))
        out.append(
            f'<p class="V8SH_chapter">{c["example"]}</p><TABLE width="100%" bgColor="#f7f7f7"><TBODY><TR><TD>'
            f'<font face="Courier New">{lines}</font></TD></TR></TBODY></TABLE>'
        )
    if entry.see_also:
        links = ", ".join(
            f'<a href="v8help://SyntaxHelperContext/objects/{i}.html">{_e(s)}</a>' for i, s in enumerate(entry.see_also)
        )
        out.append(f'<p class="V8SH_chapter">{c["see_also"]}</p>{links}<br>')
    if entry.since or entry.deprecated_since:
        out.append(f'<p class="V8SH_chapter">{c["version"]}</p>')
        if entry.since:
            out.append(f'<p class="V8SH_versionInfo">{c["since"].format(entry.since)}</p>')
        if entry.deprecated_since:
            out.append(f'<p class="V8SH_versionInfo">{c["deprecated"].format(entry.deprecated_since)}</p>')
        out.append('<p class="V8SH_versionInfo">Описание изменено в версии 8.3.24.</p>')
    return out


def _availability_text(codes: list[str], lang: str) -> str:
    for i, (text, known) in enumerate(AVAILABILITIES):
        if known == codes:
            return text if lang == "ru" else AVAILABILITIES_EN[i]
    raise ValueError(f"no availability sentence for {codes}")


def decorate(entries: list[Entry]) -> list[Entry]:
    """The entries with what a real book has and the data set lacks: availability, the
    version each appeared in, some deprecations, a property's access and examples; chosen
    deterministically from the entry's position."""
    out = []
    for i, e in enumerate(entries):
        avail = AVAILABILITIES[i % len(AVAILABILITIES)][1] if e.kind not in ("enum_value", "keyword") else []
        extra: dict = {"availability": list(avail), "since": VERSIONS[i % len(VERSIONS)]}
        if i % 17 == 3:
            extra["deprecated_since"] = "8.3.15"
        if e.kind in ("property", "global_property"):
            extra["readonly"] = i % 2 == 0
        if e.kind in ("function", "method") and i % 5 == 0:
            extra["example"] = f"Результат = {e.name}();\nСообщить(Результат);"
        if e.kind == "keyword":
            extra = {}
        out.append(msgspec.structs.replace(e, **extra))
    return out


def book_from_entries(
    entries: list[Entry], *, lang: str = "ru", charset: str = "utf-8"
) -> tuple[BookBuilder, list[Entry]]:
    """A ``shcntx`` book of ``entries`` (as :func:`decorate` returns them) laid out as the
    platform's: the global context page with its Свойства folder and per-category method
    folders, category folders of types with Свойства/Методы/Конструкторы group nodes, and the
    Системные перечисления folder of enumerations and their values. Returns the builder and
    the entries a reader should find: those of ``entries`` but keywords, with the page, the
    category the folders give and the syntax the pages show."""
    b = BookBuilder()
    t = (lambda ru, en: {"ru": ru, "en": en}) if lang == "ru" else (lambda ru, en: {"en": en, "ru": ru})
    folder_page = b"<html><body><h1 class='V8SH_pagetitle'>folder</h1></body></html>"
    expected: list[Entry] = []
    serial = 0

    def page(parent: int, e: Entry, folder: str, category: str = "", shown: Entry | None = None) -> str:
        nonlocal serial
        serial += 1
        path = f"{folder}/{_file(e.name_en, e.name)}{serial}.html"
        b.add(parent, t(e.name, e.name_en), path, render_page(shown or e, lang=lang, charset=charset))
        expected.append(msgspec.structs.replace(with_syntax(e, lang), page=path, category=category))
        return path

    members: dict[tuple[str, str], list[Entry]] = {}
    for e in entries:
        if e.owner and e.kind != "constructor":
            members.setdefault((e.kind, e.owner), []).append(e)
    ctors = {e.owner: e for e in entries if e.kind == "constructor"}
    gc = b.add(0, t("Глобальный контекст", "Global context"), "/objects/Global context.html", folder_page)
    props = b.add(gc, t("Свойства", "Properties"))
    folders: dict[tuple[int, str], tuple[int, str]] = {}

    def folder(parent: int, title: str, base: str) -> tuple[int, str]:
        if (parent, title) not in folders:
            path = f"{base}/catalog{len(folders) + 1}.html"
            folders[parent, title] = (b.add(parent, t(title, title), path, folder_page), path[: -len(".html")])
        return folders[parent, title]

    for e in entries:
        if e.kind == "global_property":
            page(props, e, "/objects/Global context/properties", "Свойства")
        elif e.kind == "function":
            cat = e.category or "Прочие процедуры и функции"
            node, base = folder(gc, cat, "/objects/Global context/methods")
            page(node, e, base, cat)
        elif e.kind in ("type", "enum"):
            cat = e.category or ("Системные перечисления" if e.kind == "enum" else "Прочее")
            node, base = folder(0, cat, "/objects")
            tpath = page(node, e, base, cat)
            tnode, tbase = len(b.nodes), tpath[: -len(".html")]
            if e.kind == "enum":
                for v in members.get(("enum_value", e.name), []):
                    page(tnode, v, f"{tbase}/properties")
                continue
            for group, en, kind, sub in (
                ("Свойства", "Properties", "property", "properties"),
                ("Методы", "Methods", "method", "methods"),
            ):
                items = members.get((kind, e.name), [])
                if items:
                    g = b.add(tnode, t(group, en))
                    for m in items:
                        page(g, m, f"{tbase}/{sub}")
            expected += _add_constructors(b, tnode, t, ctors.get(e.name), tbase, cat, lang=lang, charset=charset)
    return b, expected


def _add_constructors(
    b: BookBuilder, tnode: int, t, ctor: Entry | None, tbase: str, category: str, *, lang: str, charset: str
) -> list[Entry]:
    """A type's Конструкторы node under ``tnode`` with one page per variant of ``ctor`` (``t``:
    a node's title in both languages); the entry a reader should find, none without ``ctor``."""
    if ctor is None:
        return []
    group = b.add(tnode, t("Конструкторы", "Constructors"))
    for k, sig in enumerate(ctor.signatures, 1):
        one = msgspec.structs.replace(
            ctor, name=sig.name, name_en="", signatures=[msgspec.structs.replace(sig, name="")]
        )
        b.add(group, t(sig.name, sig.name), f"{tbase}/ctors/ctor{k}.html", render_page(one, lang=lang, charset=charset))
    return [msgspec.structs.replace(with_syntax(ctor, lang), page=f"{tbase}/ctors/ctor1.html", category=category)]


def _file(en: str, ru: str) -> str:
    """A page file name from an entry's English name (as the platform's pages are named)."""
    return "".join(ch if ch.isascii() and ch.isalnum() else "_" for ch in (en or ru))[:60] or "page"


def language_book(entries: list[Entry]) -> tuple[BookBuilder, list[Entry]]:
    """A ``shlang`` book: the primitive types (``def_*`` pages) and the keywords of ``entries``
    (kinds ``type`` and ``keyword``), one page each under two folders."""
    b = BookBuilder()
    expected = []
    types = b.add(0, {"ru": "Примитивные типы", "en": "Primitive types"})
    words = b.add(0, {"ru": "Операторы и ключевые слова", "en": "Statements and keywords"})
    for i, e in enumerate(entries):
        if e.kind == "type":
            path = f"/def_{_file(e.name_en, e.name)}"
            b.add(types, {"ru": e.name, "en": e.name_en}, path, render_page(e))
        else:
            path = f"/kw{i}_{_file(e.name_en, e.name)}.html"
            b.add(words, {"ru": e.name, "en": e.name_en}, path, render_page(e))
        expected.append(msgspec.structs.replace(with_syntax(e), page=path))
    return b, expected
