"""Developer documentation as a source of the daemon: docs folders, reading pages, and the
links from docs sections to the code they name.

* **Which files are docs.** A root without a configuration (:func:`daemon.sources.scan.detect_export`
  says ``"unknown"``) is a docs root: its markdown pages are documentation. A code root can
  name docs folders (``--docs DIR``, repeatable; the LSP ``docs`` and MCP ``--docs``
  settings): folders inside the root, given relative to it or absolute. Inside a docs folder
  ``.md``/``.markdown`` pages are indexed; images and other files are skipped with reason
  ``not_markdown`` (``.bsl``/``.xml``/``.mdo`` keep their code meaning).
* **Reading a page** (:func:`read_page`): a page over :data:`DOCS_MAX_BYTES` is ``too_large``;
  a NUL byte makes it ``binary``; text that is mostly UTF-8 with some invalid bytes (at most
  :data:`BROKEN_UTF8_SHARE` of the bytes, and fewer than its valid multi-byte characters) is
  read with U+FFFD for them and a logged warning naming the file; otherwise the decoding rules of
  :func:`daemon.sources.files.decode_bytes` (cp1251 for a page that is not UTF-8, with a logged
  warning naming the file and the decoding). Chunked by :func:`daemon.sources.markdown.chunk_markdown`.
* **Links** (:func:`code_identifiers`, :class:`DocLinks`): the BSL identifiers a section names
  (``ЮТест.ОжидаетЧто``, ``ЗначениеРеквизитаОбъекта()``, in code spans, code blocks and
  prose) resolved against the methods of the code the daemon serves.
"""

from __future__ import annotations

import logging
import os
import re
import unicodedata
from pathlib import Path
from typing import TYPE_CHECKING

from ..contract import Chunk, Skip, shown

if TYPE_CHECKING:
    from ..contract import DocRef

log = logging.getLogger(__name__)

#: Markdown page suffixes (compared case-insensitively).
PAGE_SUFFIXES = (".md", ".markdown")
#: Largest page read (bytes), far above any real documentation page; a larger "page" is
#: skipped as ``too_large``.
DOCS_MAX_BYTES = 2 * 2**20
#: Files that mark an MkDocs site (its anchors follow :func:`daemon.sources.markdown.slug` ``mkdocs``),
#: looked up in the docs folder and its parent; otherwise Docusaurus/GitHub anchors.
MKDOCS_MARKERS = ("mkdocs.yml", "mkdocs.yaml", "_config.yml")
#: Share of invalid bytes up to which a page is read as UTF-8 with replacement characters
#: (broken UTF-8) rather than as cp1251 text.
BROKEN_UTF8_SHARE = 0.01


def normalize_docs_dirs(root: Path, dirs) -> list[str]:
    """``--docs`` values as folders relative to ``root`` (NFC, ``/``, no trailing slash;
    ``""`` for the root itself), in the given order without repeats. ``ValueError`` for a
    folder outside the root (the daemon serves one root: copy or link the docs inside it),
    with ``..``, or that does not exist."""
    root = Path(root).resolve()
    out: list[str] = []
    for d in dirs or ():
        raw = str(d).replace("\\", "/").strip()
        p = Path(raw)
        full = (p if p.is_absolute() else root / p).resolve()
        try:
            rel = full.relative_to(root).as_posix()
        except ValueError:
            raise ValueError(f"docs folder {d!r} is outside the root {root}; name a folder inside it") from None
        if not full.is_dir():
            raise ValueError(f"docs folder {d!r} is not a folder under {root}")
        rel = "" if rel == "." else unicodedata.normalize("NFC", rel)
        if rel not in out:
            out.append(rel)
    return out


class DocsLayout:
    """Which scanned files are docs pages, for :func:`daemon.sources.scan._scan` (one per scan)."""

    def __init__(self, root: Path, info) -> None:
        self.root = Path(root)
        self.dirs = sorted(info.docs, key=len, reverse=True)
        if info.format == "unknown" and "" not in self.dirs:
            self.dirs.append("")
        self._flavor: dict[str, str] = {}

    def folder_of(self, raw_rel: str) -> str | None:
        """The docs folder (relative, on-disk spelling) holding ``raw_rel``, or None."""
        for d in self.dirs:
            if d == "" or raw_rel.startswith(d + "/"):
                return d
        return None

    def flavor(self, folder: str) -> str:
        """``mkdocs`` when the docs folder or its parent holds an MkDocs marker file
        (:data:`MKDOCS_MARKERS`), else ``docusaurus``."""
        if folder not in self._flavor:
            base = self.root / folder if folder else self.root
            cands = [base, base.parent] if folder else [base]
            mk = any((c / m).is_file() for c in cands for m in MKDOCS_MARKERS)
            self._flavor[folder] = "mkdocs" if mk else "docusaurus"
        return self._flavor[folder]

    def scan_page(
        self,
        e: os.DirEntry,
        rel: str,
        raw_rel: str,
        folder: str,
        is_file: bool,
        is_link: bool,
        pages: list,
        skipped: list,
    ) -> None:
        """Classify one non-code file of a docs folder: a page goes to ``pages`` (a
        :class:`daemon.sources.files.SourceFile`), anything else to ``skipped`` with a reason."""
        from .files import SourceFile, sniff_binary, special_kind, SkipFile

        if not e.name.lower().endswith(PAGE_SUFFIXES):
            if is_file and not e.name.startswith("."):
                skipped.append(
                    Skip(rel, "not_markdown", "an image or other file in a docs folder; only .md pages are indexed")
                )
            return
        if not is_file:
            skipped.append(Skip(rel, *special_kind(e, is_link)))
            return
        try:
            st = e.stat(follow_symlinks=False)
        except OSError as exc:
            skipped.append(Skip(rel, "unreadable", str(exc)))
            return
        if st.st_size > DOCS_MAX_BYTES:
            skipped.append(Skip(rel, "too_large", f"{st.st_size} bytes > docs page limit {DOCS_MAX_BYTES}"))
            return
        try:
            nul = sniff_binary(e.path)
        except SkipFile as exc:
            skipped.append(exc.to_skip(rel))
            return
        if nul >= 0:
            skipped.append(Skip(rel, "binary", f"NUL byte at offset {nul}; not a markdown page"))
            return
        pages.append(
            SourceFile(
                path=rel,
                size=st.st_size,
                mtime_ns=st.st_mtime_ns,
                ino=st.st_ino,
                ctime_ns=st.st_ctime_ns,
                disk_path=raw_rel if raw_rel != rel else "",
                flavor=self.flavor(folder),
            )
        )


def _replaced(data: bytes, path: str) -> tuple[str, str]:
    text = data.decode("utf-8", errors="replace")
    return text, "utf-8-replaced"


def log_notes(u) -> None:
    """Log, naming the file, what was odd about a docs page just read (a
    :class:`daemon.engine.FileUpdate`): ``properties["notes"]`` of its first chunk (broken
    UTF-8, an unclosed code fence, a huge heading). Runs in the daemon for pages chunked in
    worker processes too."""
    if u.kind == "docs" and u.chunks:
        notes = u.chunks[0].properties.get("notes")
        if notes:
            log.warning("docs page %s: %s", u.path, notes)


def read_page(data: bytes, src, config) -> list[Chunk]:
    """Decode and chunk one page (``src``: its :class:`daemon.sources.files.SourceFile`). Raises
    :class:`daemon.sources.files.SkipFile` (``too_large``, ``binary``, ``undecodable``)."""
    from .markdown import chunk_markdown
    from .files import SkipFile, decode_bytes

    if len(data) > DOCS_MAX_BYTES:
        raise SkipFile("too_large", f"{len(data)} bytes > docs page limit {DOCS_MAX_BYTES}")
    nul = data.find(b"\x00")
    if nul >= 0 and data[:2] not in (b"\xff\xfe", b"\xfe\xff"):
        raise SkipFile("binary", f"NUL byte at offset {nul}; not a markdown page")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        replaced = data.decode("utf-8", errors="replace")
        bad = replaced.count("\ufffd")
        # broken UTF-8 still holds valid multi-byte sequences (more of them than broken ones);
        # a page saved in Windows-1251 holds none, however little Cyrillic it has (English
        # prose with one Russian word, an em dash or guillemets in ASCII text)
        multibyte = len(replaced) - bad - sum(1 for ch in replaced if ch < "\x80")
        if bad <= max(1, len(data) * BROKEN_UTF8_SHARE) and multibyte > bad:
            text, _ = _replaced(data, src.path)
            chunks = chunk_markdown(text, path=src.path, flavor=src.flavor or "docusaurus")
            return _noted(chunks, f"{bad} invalid UTF-8 sequences replaced by U+FFFD")
        text, encoding = decode_bytes(data)
        chunks = chunk_markdown(text, path=src.path, flavor=src.flavor or "docusaurus")
        # a page saved in Windows-1251 reads right this way; one that is only badly broken
        # UTF-8 reads as mojibake: either way the log names the file and the decoding
        return _noted(chunks, f"not UTF-8 ({bad} invalid sequences in {len(data)} bytes): read as {encoding}")
    return chunk_markdown(text, path=src.path, flavor=src.flavor or "docusaurus")


def _noted(chunks: list[Chunk], note: str) -> list[Chunk]:
    """``chunks`` with ``note`` put first in their first chunk's ``properties["notes"]``
    (what :func:`log_notes` logs); unchanged when there are none."""
    if chunks:
        old = chunks[0].properties.get("notes")
        chunks[0].properties = {**chunks[0].properties, "notes": f"{note}; {old}" if old else note}
    return chunks


# ------------------------------------------------------------------------------ links to code

#: A BSL identifier: a letter or ``_``, then letters, digits, ``_`` (Cyrillic and Latin mixed).
_IDENT = r"[A-Za-zА-Яа-яЁё_][A-Za-zА-Яа-яЁё0-9_]*"
#: ``Module.Method`` chains and ``Method(`` calls; also bare CamelCase words of 2+ humps.
_QUALIFIED = re.compile(rf"(?<![\w.])({_IDENT}(?:\.{_IDENT})+)")
_CALL = re.compile(rf"(?<![\w.])({_IDENT})\s*\(")
_CODE_SPAN = re.compile(r"`([^`\n]+)`")
_HUMPS = re.compile(r"[A-ZА-ЯЁ][a-zа-яё0-9]+")
_LINK_TARGET = re.compile(r"\]\([^)\s]*(?:\s+\"[^\"]*\")?\)")
_URL = re.compile(r"\b(?:https?|ftp)://\S+")
_FILE_TAIL = re.compile(r"[a-z0-9]{1,5}")


def code_identifiers(text: str) -> list[str]:
    """Identifiers a docs section names, in order of first appearance, without repeats:
    every ``A.B`` chain (``ЮТест.ОжидаетЧто``; a longer chain ``A.B.C`` also as its pairs
    ``A.B``, ``B.C``), every ``Name(`` call not preceded by a dot, and every code span that
    is one identifier of at least two CamelCase humps (``ЗначениеРеквизитаОбъекта``).
    Link targets and URLs are left out, and so are chains ending in a short lower-case
    word (file names and domains: ``index.md``, ``github.com``). A method called on a
    value (``.Равно(``) is not named: which module it belongs to is not written there.
    Words are checked against the code index by :class:`DocLinks`."""
    text = _LINK_TARGET.sub("]", _URL.sub(" ", text))
    out: dict[str, None] = {}
    for m in _QUALIFIED.finditer(text):
        segs = m.group(1).split(".")
        if _FILE_TAIL.fullmatch(segs[-1]):
            continue
        out[".".join(segs)] = None
        if len(segs) > 2:
            for a, b in zip(segs, segs[1:], strict=False):
                out[f"{a}.{b}"] = None
    for m in _CALL.finditer(text):
        out[m.group(1)] = None
    for m in _CODE_SPAN.finditer(text):
        span = m.group(1).strip().rstrip("()")
        if re.fullmatch(_IDENT, span) and len(_HUMPS.findall(span)) >= 2:
            out[span] = None
    return list(out)


class DocLinks:
    """Links between docs sections and code methods.

    ``mentions[method chunk id]`` -> docs section ids that name it; ``resolved[section id]``
    -> method ids it names; ``qualified[method id]`` -> ``Модуль.Метод`` of each method
    linked. A name resolves when it is the name of an indexed method (case- and
    ``ё``-folded); ``Module.Method`` resolves only to that module's method (the owner's short
    name), a bare ``Method`` to every method of that name that is exported (an internal
    helper sharing a common word is not a link). ``Module.Method`` whose module is unknown
    does not resolve.

    Two ways to build it: ``DocLinks(chunks)`` from materialised chunks (tests, small
    indexes: one pass over all of them), and :meth:`from_store`, the daemon's, which
    materialises only the docs sections and the methods whose names they mention (looked
    up in the names channel), so its cost follows the docs, not the code (measured:
    ``docs/ranking.md``, "Figures moved out of the code")."""

    def __init__(self, chunks=(), *, docs=None, methods_named=None) -> None:
        from ..text.folding import fold

        if methods_named is None:  # from materialised chunks: index every method by name
            by_name: dict[str, list[Chunk]] = {}
            docs = []
            for c in chunks:
                if c.kind in ("procedure", "function") and c.part <= 1:
                    by_name.setdefault(fold(c.name), []).append(c)
                elif c.kind == "section":
                    docs.append(c)
            methods_named = lambda folded: by_name.get(folded, [])  # noqa: E731
        self.mentions: dict[str, list[str]] = {}
        self.resolved: dict[str, list[str]] = {}
        self.qualified: dict[str, str] = {}
        self.names_seen = 0
        self.names_resolved = 0
        cands_of: dict[str, list[Chunk]] = {}
        for d in docs or ():
            hits: dict[str, None] = {}
            for name in code_identifiers(d.text):
                self.names_seen += 1
                last = fold(name.rsplit(".", 1)[-1])
                if last not in cands_of:
                    cands_of[last] = methods_named(last)
                found = self._resolve(name, cands_of[last], fold)
                if found:
                    self.names_resolved += 1
                for m in found:
                    hits[m.id] = None
                    self.qualified[m.id] = f"{m.owner.split('.')[-1]}.{m.name}"
            if hits:
                self.resolved[d.id] = list(hits)
                for mid in hits:
                    self.mentions.setdefault(mid, []).append(d.id)

    @classmethod
    def from_store(cls, store, names) -> "DocLinks":
        """The links of an engine's index without materialising its code: ``store`` a
        :class:`daemon.index.chunkstore.ChunkStore`, ``names`` the names channel
        (:class:`daemon.index.names.SymbolIndex`, keyed by the store's slots). Only the docs
        sections (``store.mask(scope="docs")``) and, per distinct name they mention, the
        methods of that exact (folded) name (:meth:`daemon.index.names.SymbolIndex.exact_slots`)
        are read from the store."""
        import numpy as np

        method_kinds = [store.tables["kind"].find(k) for k in ("procedure", "function")]
        kinds, parts = store.col("kind"), store.col("part")

        def methods_named(folded: str) -> list[Chunk]:
            slots = names.exact_slots(folded)
            slots = slots[(slots < len(kinds))]
            if not slots.size:
                return []
            keep = np.isin(kinds[slots], [k for k in method_kinds if k >= 0]) & (parts[slots] <= 1)
            return [store.get(int(s)) for s in slots[keep]]

        docs = [store.get(int(s)) for s in np.flatnonzero(store.mask(scope="docs"))]
        return cls(docs=docs, methods_named=methods_named)

    @staticmethod
    def _resolve(name: str, cands: list[Chunk], fold) -> list[Chunk]:
        parts = name.split(".")
        if len(parts) >= 2:
            module = fold(parts[-2])
            return [c for c in cands if fold(c.owner.split(".")[-1]) == module]
        return [c for c in cands if c.export]


# ------------------------------------------------------------------------------ channels

_KEY_IN_PARENS = re.compile(rf"\(\s*`?({_IDENT})`?\s*\)\s*$")
_SINGLE_SPAN = re.compile(rf"^`({_IDENT})(?:\(\))?`$")


def docs_name(c: Chunk) -> str:
    """The name a docs section has in the names channel: the key a heading carries in
    parentheses at its end (``Магические числа (MagicNumber)`` -> ``MagicNumber``: the
    BSL LS diagnostic pages) or a heading that is one code span (```ФикцияОбязательныхПолей()```
    -> ``ФикцияОбязательныхПолей``), else the plain heading (:attr:`Chunk.name`)."""
    raw = c.symbol or ""
    m = _KEY_IN_PARENS.search(raw) or _SINGLE_SPAN.match(raw.strip())
    return m.group(1) if m else c.name


def docs_tokens(c: Chunk, stem: bool) -> list[str]:
    """BM25 tokens of a docs section: the :mod:`daemon.text.tokenize` rules (CamelCase keys and
    ``Модуль.Метод`` names split into words, Snowball stems of the words) over the heading
    path and the section text. The heading path is counted once more than the text
    (it is also the text's first line): a section is about what its headings say."""
    from ..text.tokenize import tokenize

    return tokenize(f"{c.signature}\n{c.text}", stem=stem)


_FENCE_LINE = re.compile(r"^\s*(```|~~~|:::|!!!)")


def docs_embed_text(c: Chunk, max_chars: int) -> str:
    """The text embedded for a docs section (at most ``max_chars``): the heading path on
    the first line, then the section's lines with fence and admonition marker lines and
    blank lines dropped and whitespace collapsed; only whole lines after the first."""
    lines = c.text.split("\n")
    out = [lines[0]]
    size = len(lines[0])
    for line in lines[2:]:
        if not line.strip() or _FENCE_LINE.match(line) or line.lstrip().startswith("#"):
            continue
        line = " ".join(line.split())
        if size + 1 + len(line) > max_chars:
            break
        out.append(line)
        size += 1 + len(line)
    return "\n".join(out)[:max_chars]


#: Extra dense texts of a docs section, by name (:func:`docs_extra_texts`), each one more
#: vector per section in the dense index (the chunk counts by its best vector). Empty = one
#: vector per section. Baked into the dense index when sections are embedded; the choice was
#: measured on the docs dev set (``docs/ranking.md``, "Docs sections' extra vectors").
DOCS_EXTRA_TEXTS: tuple[str, ...] = ("clean",)
_EXTRA_KINDS = ("clean", "clean_body", "tail")

_IMAGE = re.compile(r"!\[([^\]]*)\]\([^)]*\)")
_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
_REF_LINK = re.compile(r"\[([^\]]+)\]\[[^\]]*\]")
_REF_DEF = re.compile(r"^\s*\[[^\]]+\]:\s*\S+")
_HTML = re.compile(r"<!--.*?-->|</?[A-Za-z][^>]*>")
_EMPHASIS = re.compile(r"(\*\*|__|\*|(?<![\w])_)(?=\S)(.+?)(?<=\S)\1")
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$")
_LIST_MARK = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")


def clean_markdown_line(line: str) -> str:
    """One markdown line as prose for the embedder: images dropped, links kept as their text
    (targets dropped), HTML tags and comments, backticks and emphasis marks dropped, a list
    mark at the start dropped, table pipes turned into spaces, whitespace collapsed; ``""``
    for a table rule (``|---|:--|``) or a link definition (``[x]: url``)."""
    if _TABLE_RULE.match(line) or _REF_DEF.match(line):
        return ""
    line = _IMAGE.sub("", line)
    line = _LINK.sub(r"\1", line)
    line = _REF_LINK.sub(r"\1", line)
    line = _HTML.sub(" ", line)
    line = line.replace("`", "")
    line = _EMPHASIS.sub(r"\2", line)
    line = _LIST_MARK.sub("", line)
    if line.lstrip().startswith("|"):
        line = line.replace("|", " ")
    return " ".join(line.split())


def _section_lines(c: Chunk, clean: bool) -> list[str]:
    """The section's lines after the heading chain and the heading line, as
    :func:`docs_embed_text` takes them (blank, fence, admonition and ``#`` lines dropped,
    whitespace collapsed), cleaned with :func:`clean_markdown_line` when ``clean``."""
    out = []
    for line in c.text.split("\n")[2:]:
        if not line.strip() or _FENCE_LINE.match(line) or line.lstrip().startswith("#"):
            continue
        line = clean_markdown_line(line) if clean else " ".join(line.split())
        if line:
            out.append(line)
    return out


def _fill(head: list[str], lines: list[str], max_chars: int) -> str:
    """``head`` then whole ``lines`` while they fit in ``max_chars``; when not even the
    first of ``lines`` fits, its start is kept (cut to the budget), so the text never
    holds the head alone while there are lines."""
    out = list(head)
    size = sum(len(x) + 1 for x in out) - 1 if out else -1
    for i, line in enumerate(lines):
        if size + 1 + len(line) > max_chars:
            if i == 0:
                out.append(line[: max(max_chars - size - 1, 0)])
            break
        out.append(line)
        size += 1 + len(line)
    return "\n".join(out)[:max_chars]


def docs_extra_texts(c: Chunk, max_chars: int, kinds: tuple[str, ...] | None = None) -> list[str]:
    """The extra dense texts of a docs section (each at most ``max_chars``), one per name in
    ``kinds`` (default :data:`DOCS_EXTRA_TEXTS`), in that order:

    * ``clean``: the heading chain, then the section's lines cleaned for prose
      (:func:`clean_markdown_line`: link targets, images, HTML, backticks, emphasis, table
      rules and list marks dropped), so more prose fits in the budget;
    * ``clean_body``: the cleaned lines without the heading chain (a vector of the content
      alone);
    * ``tail``: for a section longer than its first text (:func:`docs_embed_text`), the
      heading chain then the lines that did not fit there; nothing for a short section.

    :func:`daemon.index.embed_text.embed_texts` drops a text equal to an earlier one. Raises
    ``ValueError`` for an unknown name."""
    kinds = DOCS_EXTRA_TEXTS if kinds is None else kinds
    if not kinds:
        return []
    head = c.text.split("\n", 1)[0]
    out = []
    for kind in kinds:
        if kind == "clean":
            out.append(_fill([head], _section_lines(c, True), max_chars))
        elif kind == "clean_body":
            body = _section_lines(c, True)
            if body:
                out.append(_fill([], body, max_chars))
        elif kind == "tail":
            first = docs_embed_text(c, max_chars)
            used = first.count("\n")  # lines of the section the first text holds
            rest = _section_lines(c, False)[used:]
            if rest:
                out.append(_fill([head], rest, max_chars))
        else:
            raise ValueError(f"unknown docs extra text {kind!r}: use one of {_EXTRA_KINDS}")
    return out


# ------------------------------------------------------------------------------ lookups

#: ``read_document`` returns at most this many characters (cut at a line end; the note says
#: how to read on): a few thousand tokens, enough for all but the longest settings tables.
MAX_DOC_CHARS = 20_000
#: At most this many doc sections are listed per method (``get_method``, ``doc_mentions``).
MAX_DOC_REFS = 20


def doc_ref(c: Chunk) -> "DocRef":
    """The :class:`daemon.contract.DocRef` of a docs section."""
    from ..contract import DocRef

    anchor = c.properties.get("anchor", "")
    return DocRef(
        path=c.path,
        anchor=anchor,
        link=f"{c.path}#{anchor}" if anchor else c.path,
        heading_path=c.signature,
        line=c.start_line,
    )


def _level(c: Chunk) -> int:
    try:
        return int(c.properties.get("level", "0"))
    except ValueError:
        return 0


def find_section(sections: list[Chunk], heading: str) -> Chunk | None:
    """The first section (part <= 1) whose heading matches ``heading``: the heading as
    written, as plain text, its anchor, or its heading path (``A > B``), compared after
    NFC, trimming, ``#`` marks dropped and casefolding (a heading cut at
    :data:`daemon.sources.markdown.MAX_HEADING_CHARS` when indexed also by its first that many
    characters); then a heading that contains it."""
    from ..text.folding import fold
    from .markdown import MAX_HEADING_CHARS

    raw = heading.strip().lstrip("#").strip()
    heads = [c for c in sections if c.part <= 1 and c.symbol]
    # a heading over MAX_HEADING_CHARS was indexed cut to that length: as written, it is
    # looked up the same way
    for want in dict.fromkeys((fold(raw), fold(raw[:MAX_HEADING_CHARS]))):
        for c in heads:
            keys = {fold(c.symbol or ""), fold(c.name), fold(c.properties.get("anchor", "")), fold(c.signature)}
            if want in keys:
                return c
    want = fold(raw)
    return next((c for c in heads if want and want in fold(c.name)), None)


def read_document(
    sections: list[Chunk], rel: str, lines: list[str], heading: str | None, links: "DocLinks | None" = None
):
    """A page (``heading`` None) or one section with its sub-sections as a
    :class:`daemon.contract.DocumentText`, cut to :data:`MAX_DOC_CHARS` at a line end.

    ``sections``: the page's indexed chunks; ``lines``: the page on disk now. ``LookupError``
    naming the page's headings when no heading matches (:func:`find_section`)."""
    from ..contract import DocumentText

    sections = sorted(sections, key=lambda c: (c.start_line, c.part))
    total = len(lines)
    headings = [f"{'#' * _level(c)} {c.symbol}" for c in sections if c.part <= 1 and c.symbol]
    lang = sections[0].properties.get("lang", "") if sections else ""
    if heading is None or not heading.strip():
        start, end, sec = 1, total, None
    else:
        sec = find_section(sections, heading)
        if sec is None:
            listed = "; ".join(headings[:40])
            # the argument is echoed only in part: a huge one would flood the caller's answer
            asked = shown(heading)
            raise LookupError(f"no heading {asked} in {rel}; its headings: {listed}")
        start, level = sec.start_line, _level(sec)
        nxt = [c for c in sections if c.part <= 1 and c.start_line > start and 0 < _level(c) <= level]
        end = (nxt[0].start_line - 1) if nxt else total
    body = lines[start - 1 : end]
    text = "\n".join(body)
    truncated, note = False, ""
    if len(text) > MAX_DOC_CHARS:
        cut = text.rfind("\n", 0, MAX_DOC_CHARS)
        text = text[: cut if cut > 0 else MAX_DOC_CHARS]
        shown_end = start + text.count("\n")
        truncated = True
        note = (
            f"cut after line {shown_end} of lines {start}-{end} ({MAX_DOC_CHARS} characters at most); "
            f"read a sub-section by its heading, or the rest with "
            f"read_module(path={rel!r}, start_line={shown_end + 1}, end_line={end})"
        )
        end = shown_end
    anchor = sec.properties.get("anchor", "") if sec is not None else ""
    mentions: list[str] = []
    if links is not None:
        ids = [c.id for c in sections if sec is None or sec.start_line <= c.start_line <= end]
        seen: dict[str, None] = {}
        for cid in ids:
            for m in links.resolved.get(cid, []):
                seen[links.qualified.get(m, m)] = None
        mentions = list(seen)[:50]
    return DocumentText(
        path=rel,
        heading=sec.symbol if sec is not None else None,
        heading_path=sec.signature if sec is not None else "",
        anchor=anchor,
        link=f"{rel}#{anchor}" if anchor else rel,
        start_line=start,
        end_line=max(start, end),
        total_lines=total,
        text=text,
        truncated=truncated,
        note=note,
        lang=lang,
        headings=headings,
        mentions=mentions,
    )
