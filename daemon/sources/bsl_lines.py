"""Line-oriented reading of a BSL module: declaration headers, end keywords, ``#Область``
lines, the code part of a line, a header's signature, and the doc comment, directives and
annotations above a header.

All of it is read from the text, not the syntax tree: these constructs are line-oriented in
BSL and survive any parse error. A line inside a ``"`` string always starts with ``|`` (BSL has
no other way to continue a string over a line break) and a comment line starts with ``//``,
so neither can hold a header; end keywords are searched in the line's code part, with string
literals (``""`` escapes, ``|`` continuation lines) and ``//`` comments masked.
:mod:`daemon.sources.bsl` cross-checks these facts with tree-sitter's.
"""

from __future__ import annotations

import bisect
import re
from itertools import accumulate

from ..text.folding import fold

LINE_BLANK = "[ \\t\\f\\v\\r\\u00a0]"
#: A declaration header at the start of a line. Groups: ``async``, ``kw``, ``name``.
#: Same-line directives (``&НаСервере Процедура А()``) are allowed before the keyword, and
#: ``Асинх`` may sit on the previous line (any whitespace between it and the keyword).
_HEADER_RE = re.compile(
    rf"""^{LINE_BLANK}*
    (?:&\w+{LINE_BLANK}*(?:\([^()\n]*\))?{LINE_BLANK}*)*
    (?:(?P<async>Асинх|Async)\s+)?
    (?P<kw>Процедура|Функция|Procedure|Function){LINE_BLANK}+
    (?P<name>[^\W\d]\w*)
    (?=\s*\(|{LINE_BLANK}*$|{LINE_BLANK}*//)""",
    re.IGNORECASE | re.MULTILINE | re.VERBOSE,
)
_END_RE = re.compile(r"(?<!\w)(?:КонецПроцедуры|КонецФункции|EndProcedure|EndFunction)(?!\w)", re.IGNORECASE)
_REGION_RE = re.compile(
    rf"^{LINE_BLANK}*#{LINE_BLANK}*(?:(?P<open>Область|Region)(?!\w){LINE_BLANK}*(?P<name>\w*)|(?P<close>КонецОбласти|EndRegion)(?!\w))",
    re.IGNORECASE | re.MULTILINE,
)
_EXPORT_RE = re.compile(r"\s*(Экспорт|Export)(?!\w)", re.IGNORECASE)
NAME_RE = re.compile(r"\w+")
_STRING_OR_COMMENT_RE = re.compile(r'"|//')

#: Compilation directives (the execution context of a method or variable), folded.
#: Every other ``&Name`` before a method (``&Вместо("X")``, ``&After("X")``, ``&Тест``...)
#: is an annotation.
DIRECTIVES = frozenset(
    fold(d)
    for d in (
        "&НаКлиенте",
        "&НаСервере",
        "&НаСервереБезКонтекста",
        "&НаКлиентеНаСервереБезКонтекста",
        "&НаКлиентеНаСервере",
        "&AtClient",
        "&AtServer",
        "&AtServerNoContext",
        "&AtClientAtServerNoContext",
        "&AtClientAtServer",
    )
)


def code_part(line: str, keep_strings: bool = False) -> str:
    """``line`` with string literals blanked (same length) and any ``//`` comment cut off.

    With ``keep_strings`` the literals are kept as written (only the comment is cut).

    A line whose first non-blank character is ``|`` continues a string opened on an
    earlier line, so it starts inside a string. ``""`` inside a string is an
    escaped quote (handled by toggling twice).
    """
    stripped = line.lstrip()
    in_string = stripped.startswith("|")
    if not in_string and '"' not in line:
        k = line.find("//")
        return line if k < 0 else line[:k]
    out = []
    pos = 0
    n = len(line)
    if in_string:
        start = n - len(stripped) + 1
        out.append(line[:start] if keep_strings else " " * start)
        pos = start
    while pos < n:
        if in_string:
            k = line.find('"', pos)
            if k < 0:
                out.append(line[pos:] if keep_strings else " " * (n - pos))
                break
            out.append(line[pos : k + 1] if keep_strings else " " * (k - pos + 1))
            pos = k + 1
            in_string = False
        else:
            m = _STRING_OR_COMMENT_RE.search(line, pos)
            if m is None:
                out.append(line[pos:])
                break
            out.append(line[pos : m.start()])
            if m.group() == "//":
                break
            out.append('"' if keep_strings else " ")
            pos = m.end()
            in_string = True
    return "".join(out)


class Header:
    """One declaration header found by the line scan: where its first keyword and its name
    are (0-based lines, columns in code points, offsets into the normalised text)."""

    __slots__ = (
        "line",
        "name",
        "kw",
        "is_async",
        "name_line",
        "name_col",
        "kw_line",
        "kw_col",
        "sig_start",
        "name_off",
    )

    def __init__(self, line, name, kw, is_async, name_line, name_col, kw_line, kw_col, sig_start, name_off):
        self.line = line  # 0-based line where the header match starts
        self.name = name
        self.kw = kw
        self.is_async = is_async
        self.name_line = name_line  # 0-based
        self.name_col = name_col  # index into that line (code points)
        self.kw_line = kw_line  # 0-based line of the first keyword (Асинх or Процедура)
        self.kw_col = kw_col
        self.sig_start = sig_start  # offset in the text where the signature starts
        self.name_off = name_off  # offset in the text of the name


def normalize(text: str) -> str:
    """Strip a leading BOM and make ``"\\n"`` the only line break.

    A line break is ``"\\r\\n"``, ``"\\n"`` or a lone ``"\\r"`` (the LSP definition, also
    1C's and EDT's): CRLF and LF inputs give identical lines and columns, and a
    module saved with bare CR line ends (one in yaxunit-edt) still has one line per line
    instead of a few huge ones. The BOM is not a column.
    """
    if text.startswith("\ufeff"):
        text = text[1:]
    if "\r" in text:
        text = text.replace("\r\n", "\n")
        if "\r" in text:
            text = text.replace("\r", "\n")
    return text


class LineScan:
    """Line-oriented facts about one normalised module text (see :func:`normalize`)."""

    __slots__ = ("text", "low", "lines", "starts")

    def __init__(self, text: str):
        self.text = text
        low = text.lower()
        # str.lower() keeps offsets except for a few characters (e.g. "İ" -> "i̇")
        self.low = low if len(low) == len(text) else None
        self.lines = text.split("\n")
        self.starts = list(accumulate(map((1).__add__, map(len, self.lines[:-1])), initial=0))

    def row(self, offset: int) -> int:
        """0-based line of a text offset."""
        return bisect.bisect_right(self.starts, offset) - 1

    def _hits(self, words: tuple[str, ...], pattern: re.Pattern) -> list[int]:
        """Offsets of case-insensitive occurrences of ``words`` (candidates only)."""
        low = self.low
        if low is None:
            return sorted(m.start() for m in pattern.finditer(self.text))
        out: list[int] = []
        find = low.find
        for w in words:
            i = find(w)
            while i >= 0:
                out.append(i)
                i = find(w, i + 1)
        out.sort()
        return out

    def headers(self) -> list[Header]:
        """Declaration headers in file order (see :data:`_HEADER_RE`)."""
        text, starts = self.text, self.starts
        found: dict[int, re.Match] = {}
        rfind = text.rfind
        for pos in self._hits(_HEADER_WORDS, _HEADER_WORDS_RE):
            ls = rfind("\n", 0, pos) + 1
            m = _HEADER_RE.match(text, ls)
            if m is None:
                continue
            if m.start("kw") == pos or (m.group("async") and m.start("async") == pos):
                prev = found.get(m.start("kw"))
                if prev is None or not prev.group("async"):  # "Асинх\nПроцедура": Асинх wins
                    found[m.start("kw")] = m
        heads: list[Header] = []
        row = self.row
        for _, m in sorted(found.items()):
            kw_off = m.start("async") if m.group("async") else m.start("kw")
            kw_line = row(kw_off)
            name_off = m.start("name")
            name_line = row(name_off)
            heads.append(
                Header(
                    row(m.start()),
                    m.group("name"),
                    m.group("kw"),
                    bool(m.group("async")),
                    name_line,
                    name_off - starts[name_line],
                    kw_line,
                    kw_off - starts[kw_line],
                    kw_off,
                    name_off,
                )
            )
        return heads

    def ends(self) -> list[int]:
        """0-based lines holding an end keyword in code (not in a string or comment)."""
        text, lines, starts = self.text, self.lines, self.starts
        rows: list[int] = []
        n = len(text)
        for pos in self._hits(_END_WORDS, _END_RE):
            if pos > 0 and (text[pos - 1].isalnum() or text[pos - 1] == "_"):
                continue
            m = _END_RE.match(text, pos)
            if m is None:
                continue
            e = m.end()
            if e < n and (text[e].isalnum() or text[e] == "_"):
                continue
            row = self.row(pos)
            if rows and rows[-1] == row:
                continue
            code = code_part(lines[row])
            col = pos - starts[row]
            if code[col : col + 1] == text[pos]:
                rows.append(row)
        rows = sorted(set(rows))
        return rows

    def regions(self) -> list[tuple[int, str | None]]:
        """``[(line0, name, or None for a close)]`` for ``#Область``/``#КонецОбласти`` lines."""
        text = self.text
        out: list[tuple[int, str | None]] = []
        rfind = text.rfind
        last = -1
        for pos in self._hits(("#",), _HASH_RE):
            ls = rfind("\n", 0, pos) + 1
            if ls == last:
                continue
            m = _REGION_RE.match(text, ls)
            if m is None or m.end() < pos:
                continue
            last = ls
            out.append((self.row(ls), m.group("name") if m.group("open") else None))
        return out


_HEADER_WORDS = ("процедура", "функция", "procedure", "function", "асинх", "async")
_HEADER_WORDS_RE = re.compile("|".join(_HEADER_WORDS), re.IGNORECASE)
_END_WORDS = ("конецпроцедуры", "конецфункции", "endprocedure", "endfunction")
_HASH_RE = re.compile("#")


def parse_signature(text: str, h: Header, limit: int) -> tuple[str, str, bool, int]:
    """Read the header from ``h.sig_start``: ``(signature, params, export, end_offset)``.

    The parameter list is matched with string- and comment-awareness (a default value may
    be ``")"``; a comment may follow a parameter on a multi-line header). ``limit`` bounds
    the search (offset of the next header or end of text).
    """
    name_end = h.name_off + len(h.name)
    i = name_end
    n = min(len(text), limit)
    while i < n and text[i] in " \t\r\n\f\v\u00a0":
        i += 1
    if i >= n or text[i] != "(":  # no parameter list at all (broken header)
        sig = " ".join(text[h.sig_start : name_end].split())
        return sig, "", False, name_end
    open_pos = i
    simple = _SIMPLE_PARAMS_RE.match(text, i)
    if simple is not None and simple.end() <= n:
        # fast path: one-line list without strings, comments or nested parentheses
        close_pos = simple.end() - 1
        params = " ".join(simple.group(1).split())
        return _finish_signature(text, h, open_pos, close_pos, params, n)
    depth = 0
    in_string = False
    pieces: list[str] = []
    seg_start = i + 1
    close_pos = -1
    while i < n:
        c = text[i]
        if in_string:
            if c == '"':
                in_string = False
        elif c == '"':
            in_string = True
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                close_pos = i
                break
        elif c == "/" and text.startswith("//", i):
            pieces.append(text[seg_start:i])
            j = text.find("\n", i)
            if j < 0 or j >= n:
                break
            i = j
            seg_start = j
            continue
        i += 1
    if close_pos < 0:
        # unterminated parameter list: take the rest of the header line
        eol = text.find("\n", open_pos)
        eol = n if eol < 0 or eol > n else eol
        raw = text[open_pos + 1 : eol]
        k = raw.find("//")
        raw = raw if k < 0 else raw[:k]
        params = " ".join(raw.split())
        sig = " ".join((text[h.sig_start : open_pos] + "(" + raw).split())
        return sig, params, False, eol
    pieces.append(text[seg_start:close_pos])
    params = " ".join("".join(pieces).split())
    return _finish_signature(text, h, open_pos, close_pos, params, n)


_SIMPLE_PARAMS_RE = re.compile(r'\(([^()"/\n]*)\)')


def _finish_signature(text: str, h: Header, open_pos: int, close_pos: int, params: str, n: int):
    end = close_pos + 1
    export = False
    m = _EXPORT_RE.match(text, end)
    if m and m.end() <= n:
        export = True
        end = m.end()
    sig = " ".join(text[h.sig_start : open_pos].split()) + "(" + params + ")"
    if export:
        sig += " " + m.group(1)
    return sig, params, export, end


def utf16_len(s: str) -> int:
    """Length of ``s`` in UTF-16 code units (the LSP's columns)."""
    if s.isascii():
        return len(s)
    return len(s.encode("utf-16-le", "surrogatepass")) // 2


def classify_above(lines: list[str], header_line: int, floor: int) -> tuple[int, list[str], list[str], list[str]]:
    """Walk up from the header over ``//`` and ``&`` lines (no blank line in between).

    Returns ``(block_start0, doc_lines, directives, annotations)``. ``floor`` is the last
    line of the previous method (never crossed).
    """
    i = header_line - 1
    block = header_line
    while i > floor:
        s = lines[i].strip()
        if s.startswith("//") or s.startswith("&"):
            block = i
            i -= 1
        else:
            break
    doc: list[str] = []
    directives: list[str] = []
    annotations: list[str] = []
    for j in range(block, header_line):
        s = lines[j].strip()
        if s.startswith("//"):
            doc.append(lines[j])
        else:
            split_annotations(code_part(lines[j], True).strip(), directives, annotations)
    return block, doc, directives, annotations


def same_line_annotations(lines: list[str], h: Header, directives: list[str], annotations: list[str]) -> None:
    """Directives and annotations written on the header's own line(s) before the keyword
    (``&НаСервере Процедура А()``)."""
    if h.line < h.kw_line or lines[h.line].lstrip().startswith("&"):
        split_annotations(
            code_part(lines[h.line], True)[: h.kw_col if h.kw_line == h.line else None], directives, annotations
        )


#: A conditional-compilation line: ``#Если … Тогда``, ``#ИначеЕсли … Тогда``, ``#Иначе``,
#: ``#КонецЕсли`` and the English ``#If``/``#ElsIf``/``#Else``/``#EndIf``, any case, blanks
#: allowed after ``#`` (1C accepts ``# Если``). Group ``kw``.
_PREPROC_IF_RE = re.compile(
    rf"^{LINE_BLANK}*#{LINE_BLANK}*(?P<kw>ИначеЕсли|КонецЕсли|Если|Иначе|ElsIf|EndIf|If|Else)(?!\w)", re.IGNORECASE
)
_BRANCH_KWS = frozenset(("иначеесли", "иначе", "elsif", "else"))


def is_header_variant(lines: list[str], ends: list[int], h: Header, sig_end_line: int, nxt: Header) -> bool:
    """True when ``h`` and the next header ``nxt`` are two headers of one method written in
    preprocessor branches::

        #Если Клиент Тогда
        Процедура А(П1)
        #Иначе
        Процедура А(П1, П2) Экспорт
        #КонецЕсли
            …body…
        КонецПроцедуры

    That is: the same name (:func:`daemon.text.folding.fold`), no end keyword from ``h`` up to
    ``nxt``, and between ``h``'s signature and ``nxt`` only blank, ``//`` and ``&`` lines and
    at least one ``#Иначе``/``#ИначеЕсли``/``#Else``/``#ElsIf`` line (an ``#Если`` or
    ``#КонецЕсли`` there means separate blocks, not branches of one header). Two complete
    methods in two branches each have an end keyword, so they stay two methods (``@2``).
    """
    if fold(h.name) != fold(nxt.name) or sig_end_line >= nxt.line:
        return False
    k = bisect.bisect_left(ends, h.kw_line)
    if k < len(ends) and ends[k] < nxt.kw_line:
        return False
    branch = False
    for j in range(sig_end_line + 1, nxt.line):
        s = lines[j].strip()
        if not s or s.startswith("//") or s.startswith("&"):
            continue
        m = _PREPROC_IF_RE.match(lines[j])
        if m is None or fold(m.group("kw")) not in _BRANCH_KWS:
            return False
        branch = True
    return branch


def classify_above_branch(
    lines: list[str], header_line: int, floor: int
) -> tuple[int, list[str], list[str], list[str]]:
    """:func:`classify_above` for the first header of a method written in preprocessor
    branches: its own ``&`` lines, then the ``#Если``/``#If`` line that opens the branches
    (part of the method), then the doc comment and directives above that line."""
    i = header_line - 1
    while i > floor and lines[i].lstrip().startswith("&"):
        i -= 1
    m = _PREPROC_IF_RE.match(lines[i]) if i > floor else None
    if m is None or fold(m.group("kw")) not in ("если", "if"):
        return classify_above(lines, header_line, floor)
    block, doc, directives, annotations = classify_above(lines, i, floor)
    for j in range(i + 1, header_line):
        split_annotations(code_part(lines[j], True).strip(), directives, annotations)
    return block, doc, directives, annotations


_ANNOT_RE = re.compile(r'&\w+(?:\s*\((?:[^()"]|"[^"]*")*\))?')


def split_annotations(code: str, directives: list[str], annotations: list[str]) -> None:
    """Append each ``&Name`` or ``&Name(...)`` of ``code`` to ``directives`` when it is a
    compilation directive (:data:`DIRECTIVES`), else to ``annotations``."""
    for m in _ANNOT_RE.finditer(code):
        a = m.group()
        name = a.split("(", 1)[0].rstrip()
        (directives if fold(name) in DIRECTIVES else annotations).append(a)
