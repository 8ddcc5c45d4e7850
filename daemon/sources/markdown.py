"""Markdown chunker for developer documentation: one :class:`daemon.contract.Chunk` per section.

A section is a heading and the blocks up to the next heading of any level; the text before
the first heading (or a page without headings) is a section with an empty heading. Blocks
come from markdown-it-py (CommonMark + tables), so ``#`` lines inside fenced or indented
code are never headings, and a fenced code block is never cut. Everything else is kept as
written: tables, MkDocs admonitions (``!!! warning "..."`` plus the indented body, which
CommonMark reads as an indented code block) and Docusaurus admonitions (``:::tip`` ...
``:::``, plain paragraphs to CommonMark), HTML comments.

How a docs chunk fills the :class:`~daemon.contract.Chunk` fields (no new fields, so the
chunk store keeps one layout for every kind):

* ``kind``: ``"section"`` (:data:`daemon.contract.DOCS_KINDS`);
* ``id``: ``"<path>::<anchor>"``, ``"<path>::"`` for the text before the first heading;
  parts of a long section add ``"#<part>"`` (as long methods do);
* ``name``: the heading as plain text (markdown markup removed: what the names channel
  matches); ``symbol``: the heading as written without the ``#`` marks (the gold sets'
  convention, backticks kept), ``None`` before the first heading;
* ``owner``: the page title (its first H1, else the file name without ``.md``);
* ``region``: the heading chain, outermost first (H1, H2, ...: the gold set's "chain of
  headings that enclose it"); ``signature``: the same chain joined with ``" > "``;
* ``properties``: ``anchor`` (the fragment a site generator gives the heading: :func:`slug`),
  ``lang`` (``ru``/``en``: :func:`page_language`), ``level`` (1..6, ``0`` before the first
  heading);
* ``part``: 0, or 1..n for the parts of a section longer than :data:`MAX_SECTION_CHARS`;
* ``start_line``/``end_line``: the section's lines (1-based, inclusive); ``name_range``: the
  heading line;
* ``text``: the heading chain on the first line, a blank line, then the section as written.
"""

from __future__ import annotations

import logging
import re
import unicodedata
from functools import lru_cache

from ..contract import Chunk

log = logging.getLogger(__name__)

#: A section longer than this (characters of its body) is split between blocks (paragraphs,
#: lists, tables, code blocks), each part repeating the heading chain. 2,000 characters is
#: ~1.5 screens of prose and about what the embedder reads (the dense side embeds the head).
MAX_SECTION_CHARS = 2000
#: Headings are cut to this many characters for ``name``/``symbol``/``anchor`` (a 10,000
#: character "heading" is a paste accident; the full line stays in ``text``).
MAX_HEADING_CHARS = 200
#: A page is chunked up to its MAX_PAGE_HEADINGS-th heading or MAX_PAGE_BLOCKS-th block
#: (paragraph, list, table, code block...), whichever comes first; the rest of the page is
#: not indexed (noted, and logged naming the file). The parser's time grows with the blocks,
#: so the cap bounds the time one page can take; the real pages stay far below it
#: (``docs/internals.md``, "Markdown pages").
MAX_PAGE_HEADINGS = 1000
MAX_PAGE_BLOCKS = 5000
#: Site-generator flavours for anchors (:func:`slug`).
FLAVORS = ("mkdocs", "docusaurus")

_EXPLICIT_ID = re.compile(r"\s*\{\s*#([\w\-.:]+)[^}]*\}\s*$")
_MD_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_MD_MARKS = re.compile(r"[`*_~]|<[^>]+>")
_CYR = re.compile(r"[а-яёА-ЯЁ]")
_LAT = re.compile(r"[a-zA-Z]")


@lru_cache(maxsize=1)
def _parser():
    from markdown_it import MarkdownIt

    # only block structure is needed (headings, fences, tables, paragraphs and their lines):
    # inline parsing, half of the parse time, is off (a heading's text is its raw content)
    md = MarkdownIt("commonmark", {"html": True}).enable("table")
    md.core.ruler.disable(["inline", "text_join"], ignoreInvalid=True)
    return md


def strip_front_matter(text: str) -> tuple[str, int]:
    """Blank out a YAML front matter block (``---`` on the first line up to the next ``---``
    or ``...`` line); returns ``(text, lines blanked)``. Line numbers are kept (the lines
    become empty). An unclosed block is not front matter (nothing is blanked)."""
    if not text.startswith("---"):
        return text, 0
    lines = text.split("\n")
    if lines[0].rstrip() != "---":
        return text, 0
    for i in range(1, min(len(lines), 500)):
        if lines[i].rstrip() in ("---", "..."):
            return "\n" * (i + 1) + "\n".join(lines[i + 1 :]), i + 1
    return text, 0


def plain_heading(raw: str) -> str:
    """A heading as plain text: links reduced to their text, backticks, emphasis marks and
    HTML tags removed, an explicit ``{#id}`` dropped, whitespace collapsed."""
    s = _EXPLICIT_ID.sub("", raw)
    s = _MD_LINK.sub(r"\1", s)
    s = _MD_MARKS.sub("", s)
    return " ".join(s.split())


def slug(heading: str, flavor: str = "docusaurus") -> str:
    """The anchor a site generator makes for a heading (before de-duplication).

    * ``docusaurus`` (github-slugger, also GitHub's own rendering): lower case, characters
      other than letters, digits, ``_``, ``-`` and space removed, each space becomes ``-``;
      Cyrillic is kept (``"Проверка типа значения"`` -> ``"проверка-типа-значения"``).
    * ``mkdocs`` (Python-Markdown ``toc.slugify_unicode``): NFKD, the same removal, trimmed,
      lower case, runs of spaces and ``-`` become one ``-``. NFKD splits ``й`` into ``и`` plus
      a combining breve that the removal drops, as MkDocs does (``"Настройки"`` keeps its
      letters, ``"Пример использования й"`` ends in ``-и``).

    An explicit ``{#id}`` at the end of the heading wins in both. ``ValueError`` for an
    unknown flavour.
    """
    m = _EXPLICIT_ID.search(heading)
    if m:
        return m.group(1)
    text = plain_heading(heading)
    if flavor == "docusaurus":
        s = re.sub(r"[^\w\- ]", "", text.lower())
        return s.replace(" ", "-")
    if flavor == "mkdocs":
        s = unicodedata.normalize("NFKD", text)
        s = re.sub(r"[^\w\s-]", "", s).strip().lower()
        return re.sub(r"[-\s]+", "-", s)
    raise ValueError(f"flavor must be one of {FLAVORS}, got {flavor!r}")


def _dedupe(anchor: str, used: dict[str, int], flavor: str) -> str:
    """MkDocs appends ``_1``, ``_2``; github-slugger ``-1``, ``-2`` to a repeated anchor."""
    if anchor not in used:
        used[anchor] = 0
        return anchor
    while True:
        used[anchor] += 1
        cand = f"{anchor}{'_' if flavor == 'mkdocs' else '-'}{used[anchor]}"
        if cand not in used:
            used[cand] = 0
            return cand


def page_language(path: str, text: str) -> str:
    """``en`` for a page under an ``en/`` folder (the BSL LS translations), else by script:
    ``ru`` when at least a quarter of the letters outside code are Cyrillic, else ``en``."""
    if path.startswith("en/") or "/en/" in path:
        return "en"
    prose = re.sub(r"```.*?```", " ", text, flags=re.S)
    cyr, lat = len(_CYR.findall(prose)), len(_LAT.findall(prose))
    return "ru" if cyr + lat and cyr / (cyr + lat) >= 0.25 else "en"


def chunk_markdown(
    text: str, *, path: str, flavor: str = "docusaurus", max_chars: int = MAX_SECTION_CHARS
) -> list[Chunk]:
    """Chunk one markdown page into sections (see the module docstring for the fields).

    ``text``: the decoded page; ``path``: relative to the root, NFC; ``flavor``: how anchors
    are made (:func:`slug`). A code fence that is never closed (the rest of the page is then
    one code block, as every renderer shows it) and a heading over :data:`MAX_HEADING_CHARS`
    are noted in the first chunk's ``properties["notes"]``, which the engine logs naming the
    file (:func:`daemon.sources.docs.log_notes`: also when the page was chunked in a worker
    process). Never raises for content.
    """
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    body_text, _ = strip_front_matter(text)
    lines = body_text.split("\n")
    notes: list[str] = []
    cut = page_cut(lines)
    if cut is not None:
        notes.append(
            f"over {MAX_PAGE_HEADINGS} headings or {MAX_PAGE_BLOCKS} blocks:"
            f" only lines 1-{cut} of {len(lines)} are indexed"
        )
        lines = lines[:cut]
        body_text = "\n".join(lines)
    tokens = _parser().parse(body_text)
    # top-level blocks: (start0, end0 exclusive, type, heading level, heading raw)
    blocks: list[tuple[int, int, str, int, str]] = []
    for i, t in enumerate(tokens):
        if t.level != 0 or t.map is None or t.nesting == -1:
            continue
        s, e = t.map
        if t.type == "heading_open":
            raw = tokens[i + 1].content if i + 1 < len(tokens) else ""
            blocks.append((s, e, "heading", int(t.tag[1]), raw))
        else:
            blocks.append((s, e, t.type, 0, ""))
            if t.type == "fence" and not (e - 1 > s and _closes(lines[e - 1], t.markup)):
                notes.append(f"code fence opened at line {s + 1} is never closed; the rest of the page is read as code")
    lang = page_language(path, body_text)
    title = next((b[4] for b in blocks if b[2] == "heading" and b[3] == 1), "")
    owner = plain_heading(title)[:MAX_HEADING_CHARS] if title else path.rsplit("/", 1)[-1].rsplit(".", 1)[0]
    # sections: heading block index (or -1 for the intro) and its content blocks
    sections: list[tuple[tuple[int, int, str, int, str] | None, list[tuple[int, int, str, int, str]]]] = [(None, [])]
    for b in blocks:
        if b[2] == "heading":
            sections.append((b, []))
        else:
            sections[-1][1].append(b)
    chain: list[tuple[int, str]] = []  # (level, raw heading)
    used: dict[str, int] = {}
    out: list[Chunk] = []
    for head, content in sections:
        if head is None:
            if not content:
                continue
            level, raw, anchor = 0, "", ""
            start0 = content[0][0]
        else:
            level, raw = head[3], head[4].strip()
            if len(raw) > MAX_HEADING_CHARS:
                notes.append(f"heading at line {head[0] + 1} is {len(raw)} characters long; cut to {MAX_HEADING_CHARS}")
                raw = raw[:MAX_HEADING_CHARS]
            while chain and chain[-1][0] >= level:
                chain.pop()
            chain.append((level, raw))
            anchor = _dedupe(slug(raw, flavor), used, flavor)
            start0 = head[0]
        region = [h for _, h in chain] if head is not None else []
        heading_path = " > ".join(plain_heading(h) for h in region) or owner
        body_start = head[1] if head is not None else start0
        parts = _split(content, body_start, lines, max_chars)
        end0 = (content[-1][1] if content else (head[1] if head else start0)) - 1
        base_id = f"{path}::{anchor}"
        props = {"anchor": anchor, "lang": lang, "level": str(level)}
        name = plain_heading(raw) if raw else owner
        for k, (ps, pe) in enumerate(parts, 1):
            part = 0 if len(parts) == 1 else k
            s0 = start0 if k == 1 else ps
            e0 = end0 if k == len(parts) else pe - 1
            section_text = "\n".join(lines[s0 : e0 + 1]).strip("\n")
            out.append(
                Chunk(
                    id=base_id if part <= 1 else f"{base_id}#{part}",
                    path=path,
                    kind="section",
                    name=name,
                    owner=owner,
                    symbol=raw or None,
                    region=region,
                    signature=heading_path,
                    properties=props,
                    part=part,
                    start_line=s0 + 1,
                    end_line=max(s0, e0) + 1,
                    name_range=(start0, 0, start0, len(lines[start0].encode("utf-16-le")) // 2)
                    if head is not None
                    else (0, 0, 0, 0),
                    text=f"{heading_path}\n\n{section_text}",
                )
            )
    if notes and out:  # what was odd about the page: logged by the daemon (daemon.sources.docs.log_notes)
        out[0].properties = {**out[0].properties, "notes": "; ".join(notes)}
    return out


_FENCE_OPEN = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_ATX = re.compile(r"^ {0,3}#{1,6}(?:[ \t]|$)")


def page_cut(lines: list[str], max_headings: int = MAX_PAGE_HEADINGS, max_blocks: int = MAX_PAGE_BLOCKS) -> int | None:
    """Where a page is cut before parsing (:data:`MAX_PAGE_HEADINGS`,
    :data:`MAX_PAGE_BLOCKS`): the 0-based index of the line that starts the first heading
    or block over a cap, or None when the page is under both. A quick line scan, not the
    parser: ATX headings and runs of non-blank lines outside fenced code (so ``#`` lines
    in a fence count as neither, and a cut never falls inside a fence)."""
    headings = blocks = 0
    fence = ""
    prev_blank = True
    for i, line in enumerate(lines):
        if fence:
            s = line.strip()
            if s.startswith(fence) and not s.strip(fence[0]):
                fence = ""
            prev_blank = False
            continue
        m = _FENCE_OPEN.match(line)
        heading = bool(_ATX.match(line))
        if heading or m or (prev_blank and line.strip()):
            headings += heading
            blocks += 1
            if headings > max_headings or blocks > max_blocks:
                return i
        if m:
            fence = m.group(1)
        prev_blank = not line.strip() or heading
    return None


def _closes(line: str, markup: str) -> bool:
    s = line.strip()
    return bool(markup) and s.startswith(markup[0] * len(markup)) and not s.strip(markup[0])


def _split(content, body_start: int, lines: list[str], max_chars: int) -> list[tuple[int, int]]:
    """Line ranges ``[start0, end0)`` of the parts of one section's body: blocks are packed
    until adding the next one would pass ``max_chars``; a block is never cut (a 300-line
    code fence stays whole)."""
    if not content:
        return [(body_start, body_start)]
    parts: list[tuple[int, int]] = []
    cur_start, cur_len = content[0][0], 0
    prev_end = content[0][0]
    for s, e, _typ, _lvl, _raw in content:
        size = sum(len(x) + 1 for x in lines[s:e])
        if cur_len and cur_len + size > max_chars:
            parts.append((cur_start, prev_end))
            cur_start, cur_len = s, 0
        cur_len += size
        prev_end = e
    parts.append((cur_start, prev_end))
    return parts
