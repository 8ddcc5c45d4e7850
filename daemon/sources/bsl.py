"""BSL chunker: one :class:`~daemon.contract.Chunk` per method plus one for module-level code.

Method boundaries come from two independent sources that are cross-checked:

* **tree-sitter** (grammar ``tree-sitter-hbk`` 0.1.11, chosen by measurement: see
  ``grammars/README.md`` and ``tools/grammar_survey.py``) with the query
  ``grammars/bsl/methods.scm``; it gives each definition's first and last row.
* **a careful line scan** (:func:`scan_method_headers`): a declaration header is a line whose
  first token (after optional same-line ``&Directive`` prefixes) is ``[Асинх|Async]
  Процедура|Функция|Procedure|Function <Name>``. A line inside a ``"`` string always starts
  with ``|`` (BSL has no other way to continue a string over a line break, QUIRKS §8) and a
  comment line starts with ``//``, so neither can match. End keywords
  (``КонецПроцедуры``/``КонецФункции``/``EndProcedure``/``EndFunction``) are searched in the
  line's code part, with string literals (``""`` escapes, ``|`` continuation lines) and
  ``//`` comments masked.

The scan decides *which* methods exist (it never misses a header because of an ERROR node
elsewhere, and reads names from the source, which matters because both grammars truncate
identifiers at ``ё``/``Ё``: ``ПолучитьСчёт`` parses as ``ПолучитьСч``). The tree decides
*where* each one ends when its end row is a real end keyword before the next header;
otherwise the scan's first end keyword after the header is used, and failing that the method
runs up to the next header. A definition the tree finds on a line the scan does not (e.g.
``...; Процедура Б()`` after other code) is kept too, if no other method covers that line.

A method whose header is written in preprocessor branches (``#Если Клиент Тогда`` /
``#Иначе`` / ``#КонецЕсли`` around two headers, one body) is one method (see
:func:`_is_header_variant`); :func:`scan_method_headers` still reports every header line.
In extension modules, :func:`live_code` gives the text the indexes see: the lines of
``#Удаление … #КонецУдаления`` left out.

Headers, doc comments, directives, annotations and regions are read from the text (they are
line-oriented in BSL and survive any parse error). Lines are split at ``"\\r\\n"``, ``"\\n"``
or a lone ``"\\r"`` (see :func:`_normalize`), so CRLF and LF give identical lines; a leading
BOM is stripped and is not a column (QUIRKS §1, §2).
"""

from __future__ import annotations

import bisect
import re
import threading
from itertools import accumulate
from pathlib import Path

import tree_sitter
import tree_sitter_hbk

from daemon.contract import Chunk
from daemon.text.folding import fold

__all__ = [
    "chunk_module",
    "scan_method_headers",
    "live_code",
    "load_query",
    "language",
    "parser",
    "DIRECTIVES",
]

# ---------------------------------------------------------------------------------------
# grammar and queries
# ---------------------------------------------------------------------------------------

_LANGUAGE = tree_sitter.Language(tree_sitter_hbk.language())
_tls = threading.local()
_queries: dict[str, tree_sitter.Query] = {}
_queries_lock = threading.Lock()


def language() -> tree_sitter.Language:
    """The BSL tree-sitter language (``tree-sitter-hbk`` 0.1.11), shared (immutable)."""
    return _LANGUAGE


def parser() -> tree_sitter.Parser:
    """This thread's BSL parser (tree-sitter parsers are not thread-safe: one per thread)."""
    p = getattr(_tls, "parser", None)
    if p is None:
        p = _tls.parser = tree_sitter.Parser(_LANGUAGE)
    return p


def grammar_dir() -> Path:
    """Folder holding the ``.scm`` queries.

    An installed wheel has them at ``daemon/_grammars/bsl`` (``pyproject.toml``
    force-includes ``grammars`` as ``daemon/_grammars``); a source checkout or an editable
    install reads ``<repo>/grammars/bsl``.
    """
    import daemon

    installed = Path(daemon.__file__).resolve().parent / "_grammars" / "bsl"
    if installed.is_dir():
        return installed
    return Path(__file__).resolve().parents[2] / "grammars" / "bsl"


def load_query(name: str) -> tree_sitter.Query:
    """Compile (once, then cached) the query ``grammars/bsl/<name>.scm``.

    ``name`` is one of ``methods``, ``regions``, ``annotations``, ``comments``. Raises
    ``FileNotFoundError`` if the file is missing and ``tree_sitter.QueryError`` if it does
    not compile against the grammar.
    """
    q = _queries.get(name)
    if q is None:
        with _queries_lock:
            q = _queries.get(name)
            if q is None:
                src = (grammar_dir() / f"{name}.scm").read_text(encoding="utf-8")
                q = _queries[name] = tree_sitter.Query(_LANGUAGE, src)
    return q


def _query_cursor(name: str) -> tree_sitter.QueryCursor:
    """This thread's cursor for the query ``name`` (cursors hold state: one per thread)."""
    cursors = getattr(_tls, "cursors", None)
    if cursors is None:
        cursors = _tls.cursors = {}
    c = cursors.get(name)
    if c is None:
        c = cursors[name] = tree_sitter.QueryCursor(load_query(name))
    return c


# ---------------------------------------------------------------------------------------
# line scanner
# ---------------------------------------------------------------------------------------

_WS = "[ \\t\\f\\v\\r\\u00a0]"
#: A declaration header at the start of a line. Groups: ``async``, ``kw``, ``name``.
#: Same-line directives (``&НаСервере Процедура А()``) are allowed before the keyword, and
#: ``Асинх`` may sit on the previous line (any whitespace between it and the keyword).
_HEADER_RE = re.compile(
    rf"""^{_WS}*
    (?:&\w+{_WS}*(?:\([^()\n]*\))?{_WS}*)*
    (?:(?P<async>Асинх|Async)\s+)?
    (?P<kw>Процедура|Функция|Procedure|Function){_WS}+
    (?P<name>[^\W\d]\w*)
    (?=\s*\(|{_WS}*$|{_WS}*//)""",
    re.IGNORECASE | re.MULTILINE | re.VERBOSE,
)
_END_RE = re.compile(r"(?<!\w)(?:КонецПроцедуры|КонецФункции|EndProcedure|EndFunction)(?!\w)", re.IGNORECASE)
_REGION_RE = re.compile(
    rf"^{_WS}*#{_WS}*(?:(?P<open>Область|Region)(?!\w){_WS}*(?P<name>\w*)|(?P<close>КонецОбласти|EndRegion)(?!\w))",
    re.IGNORECASE | re.MULTILINE,
)
_EXPORT_RE = re.compile(r"\s*(Экспорт|Export)(?!\w)", re.IGNORECASE)
_NAME_RE = re.compile(r"\w+")
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


def _code_part(line: str, keep_strings: bool = False) -> str:
    """``line`` with string literals blanked (same length) and any ``//`` comment cut off.

    With ``keep_strings`` the literals are kept as written (only the comment is cut).

    A line whose first non-blank character is ``|`` continues a string opened on an
    earlier line (QUIRKS §8), so it starts inside a string. ``""`` inside a string is an
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


class _Header:
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


def _normalize(text: str) -> str:
    """Strip a leading BOM and make ``"\\n"`` the only line break.

    A line break is ``"\\r\\n"``, ``"\\n"`` or a lone ``"\\r"`` (the LSP definition, also
    1C's and EDT's): CRLF and LF inputs give identical lines and columns (QUIRKS §1-2), and a
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


class _Scan:
    """Line-oriented facts about one normalised module text (see :func:`_normalize`)."""

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

    def headers(self) -> list[_Header]:
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
        heads: list[_Header] = []
        row = self.row
        for _, m in sorted(found.items()):
            kw_off = m.start("async") if m.group("async") else m.start("kw")
            kw_line = row(kw_off)
            name_off = m.start("name")
            name_line = row(name_off)
            heads.append(
                _Header(
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
            code = _code_part(lines[row])
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
_SURROGATE_RE = re.compile("[\ud800-\udfff]")


def scan_method_headers(text: str) -> list[tuple[int, str]]:
    """Careful line scan for method declarations: ``[(line, name), ...]`` in file order.

    ``line`` is the 1-based line of the declaration keyword (``Асинх`` if present), ``name``
    the method name exactly as written (with ``ё`` intact). ``text`` is the decoded module
    (a leading BOM is ignored; CRLF or LF). Headers inside ``//`` comments or inside
    ``|``-continued string literals are not reported. A header written twice in ``#Если``
    branches is reported twice (two declaration lines; :func:`chunk_module` makes them one
    method). Never raises for any ``str``.
    """
    scan = _Scan(_normalize(text))
    return [(h.kw_line + 1, h.name) for h in scan.headers()]


# ---------------------------------------------------------------------------------------
# extension modules: #Удаление / #Вставка
# ---------------------------------------------------------------------------------------

#: The change markers of an ``&ИзменениеИКонтроль``/``&ChangeAndValidate`` method in an
#: extension module: ``#Удаление … #КонецУдаления`` (``#Delete … #EndDelete``) hold base-
#: configuration lines the extension removes, ``#Вставка … #КонецВставки`` (``#Insert …
#: #EndInsert``) lines it adds. Any case, blanks allowed after ``#``. Group ``kw``.
_CHANGE_MARK_RE = re.compile(
    rf"^{_WS}*#{_WS}*(?P<kw>КонецУдаления|Удаление|КонецВставки|Вставка|EndDelete|Delete|EndInsert|Insert)(?!\w)",
    re.IGNORECASE | re.MULTILINE,
)
_DELETE_OPEN = frozenset(("удаление", "delete"))
_DELETE_CLOSE = frozenset(("конецудаления", "enddelete"))


def live_code(text: str) -> str:
    """``text`` (a chunk's text, lines joined by ``"\n"``) as the indexes see it: the lines
    inside ``#Удаление … #КонецУдаления`` / ``#Delete … #EndDelete`` left out, and the four
    change-marker lines themselves; ``#Вставка``/``#Insert`` content stays (it is the code
    that runs). BM25 tokens and the dense text are made from this, while the chunk's text,
    ``read_module`` and ``get_method`` keep every line as written.

    An ``#Удаление`` with no ``#КонецУдаления`` before the end of ``text`` deletes nothing
    (its lines stay indexed: a broken marker must not hide code). Returns ``text`` itself
    when it has no marker (the common case: one ``in`` test and, for texts holding a
    ``#``, one regex search). Never raises.
    """
    if "#" not in text or _CHANGE_MARK_RE.search(text) is None:
        return text
    out: list[str] = []
    held: list[str] = []  # content of an open #Удаление, put back if it never closes
    deleting = False
    for line in text.split("\n"):
        m = _CHANGE_MARK_RE.match(line)
        if m is None:
            (held if deleting else out).append(line)
            continue
        kw = fold(m.group("kw"))
        if kw in _DELETE_OPEN and not deleting:
            deleting, held = True, []
        elif kw in _DELETE_CLOSE and deleting:
            deleting, held = False, []
        # every marker line is left out (a nested #Удаление or a stray #КонецУдаления too)
    if deleting:
        out.extend(held)
    return "\n".join(out)


# ---------------------------------------------------------------------------------------
# header parsing
# ---------------------------------------------------------------------------------------


def _parse_signature(text: str, h: _Header, limit: int) -> tuple[str, str, bool, int]:
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


def _finish_signature(text: str, h: _Header, open_pos: int, close_pos: int, params: str, n: int):
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


def _utf16_len(s: str) -> int:
    if s.isascii():
        return len(s)
    return len(s.encode("utf-16-le", "surrogatepass")) // 2


# ---------------------------------------------------------------------------------------
# tree
# ---------------------------------------------------------------------------------------

_END_TYPES = frozenset(("ENDPROCEDURE_KEYWORD", "ENDFUNCTION_KEYWORD"))


def _tree_methods(data: bytes) -> dict[int, tuple[int, bool, object]]:
    """``{first_row: (end_row, closed, node)}`` for every method definition in the tree.

    ``closed`` is true when the definition's last child is a real (not MISSING) end keyword.
    A clean tree is walked through the root's children and, recursively, ``preprocessor``
    nodes (regions and ``#Если`` blocks nest their content in tree-sitter-hbk): that finds the
    same definitions as ``grammars/bsl/methods.scm`` (asserted by the tests) at ~1/10 of the
    cost. A tree with an ERROR anywhere is searched with the ``methods`` query itself, which
    also finds definitions that error recovery tucked into unexpected nodes.
    """
    tree = parser().parse(data)
    root = tree.root_node
    if root.has_error:
        nodes = _query_cursor("methods").captures(root).get("method", [])
    else:
        nodes = []
        stack = [root]
        while stack:
            for node in stack.pop().children:
                ty = node.type
                if ty in _METHOD_TYPES:
                    nodes.append(node)
                elif ty in _CONTAINER_TYPES:
                    stack.append(node)
    out: dict[int, tuple[int, bool, object]] = {}
    for node in nodes:
        last = node.child(node.child_count - 1)
        closed = last is not None and last.type in _END_TYPES and not last.is_missing
        row = node.start_point.row
        end_row = last.start_point.row if closed else node.end_point.row
        prev = out.get(row)
        if prev is None or (closed and not prev[1]):
            out[row] = (end_row, closed, node)
    return out


_METHOD_TYPES = frozenset(("procedure_definition", "function_definition"))
_CONTAINER_TYPES = frozenset(("preprocessor", "ERROR"))


# ---------------------------------------------------------------------------------------
# chunking
# ---------------------------------------------------------------------------------------


class _Method:
    """One method found in a module: its header, 0-based line span (doc comment included)
    and what was read around the header."""

    __slots__ = (
        "h",
        "start",
        "end",
        "doc",
        "directives",
        "annotations",
        "sig",
        "params",
        "export",
        "is_async",
        "sig_end_line",
    )


def _classify_above(lines: list[str], header_line: int, floor: int) -> tuple[int, list[str], list[str], list[str]]:
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
            _split_annotations(_code_part(lines[j], True).strip(), directives, annotations)
    return block, doc, directives, annotations


def _same_line_annotations(lines: list[str], h: _Header, directives: list[str], annotations: list[str]) -> None:
    """Directives and annotations written on the header's own line(s) before the keyword
    (``&НаСервере Процедура А()``)."""
    if h.line < h.kw_line or lines[h.line].lstrip().startswith("&"):
        _split_annotations(
            _code_part(lines[h.line], True)[: h.kw_col if h.kw_line == h.line else None], directives, annotations
        )


#: A conditional-compilation line: ``#Если … Тогда``, ``#ИначеЕсли … Тогда``, ``#Иначе``,
#: ``#КонецЕсли`` and the English ``#If``/``#ElsIf``/``#Else``/``#EndIf``, any case, blanks
#: allowed after ``#`` (1C accepts ``# Если``). Group ``kw``.
_PREPROC_IF_RE = re.compile(
    rf"^{_WS}*#{_WS}*(?P<kw>ИначеЕсли|КонецЕсли|Если|Иначе|ElsIf|EndIf|If|Else)(?!\w)", re.IGNORECASE
)
_BRANCH_KWS = frozenset(("иначеесли", "иначе", "elsif", "else"))


def _is_header_variant(lines: list[str], ends: list[int], h: _Header, sig_end_line: int, nxt: _Header) -> bool:
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


def _classify_above_branch(
    lines: list[str], header_line: int, floor: int
) -> tuple[int, list[str], list[str], list[str]]:
    """:func:`_classify_above` for the first header of a method written in preprocessor
    branches: its own ``&`` lines, then the ``#Если``/``#If`` line that opens the branches
    (part of the method), then the doc comment and directives above that line."""
    i = header_line - 1
    while i > floor and lines[i].lstrip().startswith("&"):
        i -= 1
    m = _PREPROC_IF_RE.match(lines[i]) if i > floor else None
    if m is None or fold(m.group("kw")) not in ("если", "if"):
        return _classify_above(lines, header_line, floor)
    block, doc, directives, annotations = _classify_above(lines, i, floor)
    for j in range(i + 1, header_line):
        _split_annotations(_code_part(lines[j], True).strip(), directives, annotations)
    return block, doc, directives, annotations


_ANNOT_RE = re.compile(r'&\w+(?:\s*\((?:[^()"]|"[^"]*")*\))?')


def _split_annotations(code: str, directives: list[str], annotations: list[str]) -> None:
    for m in _ANNOT_RE.finditer(code):
        a = m.group()
        name = a.split("(", 1)[0].rstrip()
        (directives if fold(name) in DIRECTIVES else annotations).append(a)


def chunk_module(
    text: str,
    *,
    path: str,
    owner: str = "",
    object_type: str = "",
    module_kind: str = "other",
    max_lines: int = 400,
) -> list[Chunk]:
    """Split one BSL module into method chunks plus one module-level chunk.

    ``text``: the decoded module (``str``; a leading ``"\\ufeff"`` is stripped and is not a
    column; CRLF and LF give identical results). ``path``/``owner``/``object_type``/
    ``module_kind`` are copied into every chunk (conventions: :mod:`daemon.contract`).
    ``max_lines``: a method longer than this (lines, doc comment included) is split into parts
    ``1..n``, each repeating the doc comment, directives and signature before its slice.

    Returns the chunks in file order: one per method (kind ``"procedure"``/``"function"``,
    id ``"<path>::<Name>"``, ``@2``… for repeated names (compared with :func:`fold`),
    ``#<part>`` for parts), then, if there is any code outside methods other than comments
    and preprocessor lines, one ``"module"`` chunk (name ``"<module>"``, symbol ``None``)
    whose text is every non-blank line outside methods (less the leading copyright comment
    block, when a blank line separates it). Empty or BOM-only text gives ``[]``.
    Never raises on odd input (binary-ish text yields whatever headers can be found).
    """
    text = _normalize(text)
    if not text.strip():
        return []
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        # lone surrogates (e.g. from a surrogateescape decode): U+FFFD keeps every offset
        text = _SURROGATE_RE.sub("\ufffd", text)
        data = text.encode("utf-8")
    scan = _Scan(text)
    lines, starts = scan.lines, scan.starts
    nlines = len(lines)

    heads = scan.headers()
    ends = scan.ends()
    try:
        tree = _tree_methods(data)
    except Exception:  # pragma: no cover - tree-sitter never raises on input text
        tree = {}

    # tree-only definitions (a header the line scan cannot see, e.g. after other code)
    scanned_rows = {h.kw_line for h in heads}
    extra: list[_Header] = []
    for row, (_end_row, _closed, node) in tree.items():
        if row in scanned_rows:
            continue
        h = _header_from_node(node, lines, starts)
        if h is not None:
            extra.append(h)
    if extra:
        heads = sorted(heads + extra, key=lambda h: (h.kw_line, h.kw_col))

    methods: list[_Method] = []
    prev_end = -1
    # header variants: the earlier headers of one method written in preprocessor branches
    # (see _is_header_variant), waiting for the header that owns the body
    variants: list[tuple[_Header, str, str, bool, int]] = []
    for idx, h in enumerate(heads):
        if h.kw_line <= prev_end:  # inside the previous method (tree-only duplicate)
            continue
        nxt = heads[idx + 1].kw_line if idx + 1 < len(heads) else nlines
        limit = starts[nxt] if nxt < nlines else len(text)
        sig, params, export, sig_end_off = _parse_signature(text, h, limit)
        sig_end_line = bisect.bisect_right(starts, max(sig_end_off - 1, h.sig_start)) - 1
        if idx + 1 < len(heads) and _is_header_variant(lines, ends, h, sig_end_line, heads[idx + 1]):
            variants.append((h, sig, params, export, sig_end_line))
            continue
        # end line: tree first, then scanned end keyword, then up to the next header
        end = -1
        t = tree.get(h.kw_line)
        if t is not None and t[1] and sig_end_line <= t[0] < nxt:
            k = bisect.bisect_left(ends, t[0])
            if k < len(ends) and ends[k] == t[0]:
                end = t[0]
        if end < 0:
            k = bisect.bisect_left(ends, sig_end_line if sig_end_line < nxt else h.kw_line)
            if k < len(ends) and ends[k] < nxt:
                end = ends[k]
        if end < 0:
            end = nxt - 1
            while end > sig_end_line:
                s = lines[end].strip()
                if not s or s.startswith("//") or s.startswith("&") or s.startswith("#"):
                    end -= 1
                else:
                    break
        m = _Method()
        if variants:
            # one method: its lines from the first header's #Если (and the doc comment and
            # directives above it) to the body's end; every header's signature, parameter
            # list, directives and annotations, the name and range of the first header
            group = variants + [(h, sig, params, export, sig_end_line)]
            variants = []
            h0 = group[0][0]
            block, doc, directives, annotations = _classify_above_branch(lines, h0.line, prev_end)
            _same_line_annotations(lines, h0, directives, annotations)
            for (_pv, _s, _p, _e, prev_sig_end), (hv, *_rest) in zip(group, group[1:]):
                for j in range(prev_sig_end + 1, hv.line):
                    if lines[j].lstrip().startswith("&"):
                        _split_annotations(_code_part(lines[j], True).strip(), directives, annotations)
                _same_line_annotations(lines, hv, directives, annotations)
            m.h = h0
            m.sig = " | ".join(dict.fromkeys(g[1] for g in group))
            m.params = " | ".join(dict.fromkeys(g[2] for g in group))
            m.export = any(g[3] for g in group)
            m.is_async = any(g[0].is_async for g in group)
            directives, annotations = list(dict.fromkeys(directives)), list(dict.fromkeys(annotations))
        else:
            block, doc, directives, annotations = _classify_above(lines, h.line, prev_end)
            _same_line_annotations(lines, h, directives, annotations)
            m.h, m.sig, m.params, m.export, m.is_async = h, sig, params, export, h.is_async
        m.start, m.end = block, max(end, sig_end_line)
        m.doc, m.directives, m.annotations = doc, directives, annotations
        m.sig_end_line = sig_end_line
        methods.append(m)
        prev_end = m.end

    # regions
    region_events = scan.regions()
    chunks: list[Chunk] = []
    seen: dict[str, int] = {}
    stack: list[str] = []
    ev = 0
    for m in methods:
        while ev < len(region_events) and region_events[ev][0] < m.h.kw_line:
            row, name = region_events[ev]
            if name is None:
                if stack:
                    stack.pop()
            else:
                stack.append(name)
            ev += 1
        h = m.h
        key = fold(h.name)
        seen[key] = seen.get(key, 0) + 1
        base_id = f"{path}::{h.name}" + (f"@{seen[key]}" if seen[key] > 1 else "")
        name_line = lines[h.name_line]
        c0 = _utf16_len(name_line[: h.name_col])
        name_range = (h.name_line, c0, h.name_line, c0 + _utf16_len(h.name))
        kind = "function" if h.kw[:1] in "ФфFf" else "procedure"
        common = dict(
            path=path,
            kind=kind,
            name=h.name,
            owner=owner,
            object_type=object_type,
            module_kind=module_kind,
            symbol=h.name,
            export=m.export,
            is_async=m.is_async,
            params=m.params,
            directives=m.directives,
            annotations=m.annotations,
            region=list(stack),
            doc="\n".join(m.doc),
            signature=m.sig,
            name_range=name_range,
        )
        total = m.end - m.start + 1
        if total <= max_lines:
            chunks.append(
                Chunk(
                    id=base_id, start_line=m.start + 1, end_line=m.end + 1, text=_join(lines, m.start, m.end), **common
                )
            )
            continue
        prefix_end = min(m.sig_end_line, m.end)
        prefix = lines[m.start : prefix_end + 1]
        body_start = prefix_end + 1
        size = max(max_lines - len(prefix), max(max_lines // 4, 1))
        part = 0
        pos = body_start
        while pos <= m.end:
            part += 1
            stop = min(pos + size - 1, m.end)
            if stop < m.end:
                stop = _soft_break(lines, pos, stop)
            if part == 1:
                txt = _join(lines, m.start, stop)
                s_line = m.start
            else:
                txt = "\n".join(prefix) + "\n" + _join(lines, pos, stop)
                s_line = pos
            chunks.append(
                Chunk(
                    id=f"{base_id}#{part}",
                    part=part,
                    start_line=s_line + 1,
                    end_line=stop + 1,
                    text=txt,
                    **_own_lists(common),
                )
            )
            pos = stop + 1

    module = _module_chunk(lines, methods, path, owner, object_type, module_kind)
    if module is not None:
        chunks.append(module)
    return chunks


def _own_lists(common: dict) -> dict:
    """A copy of the shared keyword arguments whose list values are not shared between parts."""
    return {k: (list(v) if isinstance(v, list) else v) for k, v in common.items()}


def _soft_break(lines: list[str], pos: int, stop: int) -> int:
    """Move a part boundary back to a blank line in the last fifth of the slice, if any."""
    floor = stop - max((stop - pos) // 5, 1)
    for j in range(stop, floor, -1):
        if not lines[j].strip():
            return j
    return stop


def _join(lines: list[str], a: int, b: int) -> str:
    return "\n".join(lines[a : b + 1])


def _header_from_node(node, lines: list[str], starts: list[int]) -> _Header | None:
    """A header for a definition found only by the tree (name re-read from the source)."""
    name_node = node.child_by_field_name("name")
    if name_node is None or name_node.is_missing:
        return None
    first = node.child(0)
    kw_node = first
    is_async = first is not None and first.type == "ASYNC_KEYWORD"
    if is_async:
        kw_node = node.child(1)
    if kw_node is None or kw_node.type not in ("PROCEDURE_KEYWORD", "FUNCTION_KEYWORD"):
        return None
    row = first.start_point.row
    if row >= len(lines):
        return None
    line = lines[row]
    col = len(line.encode("utf-8", "replace")[: first.start_point.column].decode("utf-8", "replace"))
    nrow = name_node.start_point.row
    nline = lines[nrow]
    ncol = len(nline.encode("utf-8", "replace")[: name_node.start_point.column].decode("utf-8", "replace"))
    mm = _NAME_RE.match(nline, ncol)
    if mm is None:
        return None
    kw_row = kw_node.start_point.row
    kline = lines[kw_row]
    kcol = len(kline.encode("utf-8", "replace")[: kw_node.start_point.column].decode("utf-8", "replace"))
    km = _NAME_RE.match(kline, kcol)
    kw = km.group() if km else ("Функция" if kw_node.type == "FUNCTION_KEYWORD" else "Процедура")
    return _Header(row, mm.group(), kw, is_async, nrow, ncol, row, col, starts[row] + col, starts[nrow] + ncol)


def _module_chunk(lines, methods, path, owner, object_type, module_kind) -> Chunk | None:
    """The module-level chunk: every non-blank line outside methods except the leading
    copyright comment block, or ``None`` when those lines are only comments and
    preprocessor lines (``#Область``, ``#Если``...)."""
    kept: list[int] = []
    has_code = False
    # the module's leading comment block, when a blank line ends it, is the copyright/licence
    # header (QUIRKS §16): boilerplate repeated in every module, left out of the text
    pos = 0
    while pos < len(lines) and lines[pos].lstrip().startswith("//"):
        pos += 1
    if pos == 0 or pos >= len(lines) or lines[pos].strip():
        pos = 0
    bounds = [(m.start, m.end) for m in methods] + [(len(lines), len(lines))]
    for start, end in bounds:
        for i in range(pos, start):
            s = lines[i].strip()
            if not s:
                continue
            kept.append(i)
            if not has_code and not s.startswith("//") and not s.startswith("#"):
                has_code = True
        pos = max(pos, end + 1)
    if not has_code:
        return None
    text = "\n".join(lines[i] for i in kept)
    first = kept[0]
    return Chunk(
        id=f"{path}::<module>",
        path=path,
        kind="module",
        name="<module>",
        owner=owner,
        object_type=object_type,
        module_kind=module_kind,
        symbol=None,
        start_line=first + 1,
        end_line=kept[-1] + 1,
        name_range=(first, 0, first, 0),
        text=text,
    )
