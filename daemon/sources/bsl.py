"""BSL chunker: one :class:`~daemon.contract.Chunk` per method plus one for module-level code.

Method boundaries come from two independent sources that are cross-checked:

* **tree-sitter** (grammar ``tree-sitter-hbk`` 0.1.11, chosen by measurement: see
  ``grammars/README.md`` and ``tools/grammar_survey.py``) with the query
  ``grammars/bsl/methods.scm``; it gives each definition's first and last row.
* **a careful line scan** (:mod:`daemon.sources.bsl_lines`, :func:`scan_method_headers`): a
  declaration header is a line whose first token (after optional same-line ``&Directive``
  prefixes) is ``[Асинх|Async] Процедура|Функция|Procedure|Function <Name>``, never inside a
  string or a comment; end keywords are searched in each line's code part.

The scan decides *which* methods exist (it never misses a header because of an ERROR node
elsewhere, and reads names from the source, which matters because both grammars truncate
identifiers at ``ё``/``Ё``: ``ПолучитьСчёт`` parses as ``ПолучитьСч``). The tree decides
*where* each one ends when its end row is a real end keyword before the next header;
otherwise the scan's first end keyword after the header is used, and failing that the method
runs up to the next header. A definition the tree finds on a line the scan does not (e.g.
``...; Процедура Б()`` after other code) is kept too, if no other method covers that line.

A method whose header is written in preprocessor branches (``#Если Клиент Тогда`` /
``#Иначе`` / ``#КонецЕсли`` around two headers, one body) is one method
(:func:`daemon.sources.bsl_lines.is_header_variant`); :func:`scan_method_headers` still
reports every header line. In extension modules, :func:`live_code` gives the text the indexes
see: the lines of ``#Удаление … #КонецУдаления`` left out.

Lines are split at ``"\\r\\n"``, ``"\\n"`` or a lone ``"\\r"``
(:func:`daemon.sources.bsl_lines.normalize`), so CRLF and LF give identical lines; a leading
BOM is stripped and is not a column.
"""

from __future__ import annotations

import bisect
import re
import threading
from pathlib import Path

import tree_sitter
import tree_sitter_hbk

from ..contract import Chunk
from ..text.folding import fold
from .bsl_lines import (
    LINE_BLANK,
    NAME_RE,
    Header,
    LineScan,
    classify_above,
    classify_above_branch,
    code_part,
    is_header_variant,
    normalize,
    parse_signature,
    same_line_annotations,
    split_annotations,
    utf16_len,
)

__all__ = [
    "chunk_module",
    "chunk_module_parsed",
    "grammar_dir",
    "language",
    "live_code",
    "load_query",
    "parser",
    "scan_method_headers",
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


def scan_method_headers(text: str) -> list[tuple[int, str]]:
    """Careful line scan for method declarations: ``[(line, name), ...]`` in file order.

    ``line`` is the 1-based line of the declaration keyword (``Асинх`` if present), ``name``
    the method name exactly as written (with ``ё`` intact). ``text`` is the decoded module
    (a leading BOM is ignored; CRLF or LF). Headers inside ``//`` comments or inside
    ``|``-continued string literals are not reported. A header written twice in ``#Если``
    branches is reported twice (two declaration lines; :func:`chunk_module` makes them one
    method). Never raises for any ``str``.
    """
    scan = LineScan(normalize(text))
    return [(h.kw_line + 1, h.name) for h in scan.headers()]


# ---------------------------------------------------------------------------------------
# extension modules: #Удаление / #Вставка
# ---------------------------------------------------------------------------------------

#: The change markers of an ``&ИзменениеИКонтроль``/``&ChangeAndValidate`` method in an
#: extension module: ``#Удаление … #КонецУдаления`` (``#Delete … #EndDelete``) hold base-
#: configuration lines the extension removes, ``#Вставка … #КонецВставки`` (``#Insert …
#: #EndInsert``) lines it adds. Any case, blanks allowed after ``#``. Group ``kw``.
_CHANGE_MARK_RE = re.compile(
    rf"^{LINE_BLANK}*#{LINE_BLANK}*(?P<kw>КонецУдаления|Удаление|КонецВставки|Вставка|EndDelete|Delete|EndInsert|Insert)(?!\w)",
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
# tree
# ---------------------------------------------------------------------------------------

_END_TYPES = frozenset(("ENDPROCEDURE_KEYWORD", "ENDFUNCTION_KEYWORD"))
_SURROGATE_RE = re.compile("[\ud800-\udfff]")


def _tree_methods(data: bytes, tree: tree_sitter.Tree | None = None) -> dict[int, tuple[int, bool, object]]:
    """``{first_row: (end_row, closed, node)}`` for every method definition in the tree of
    ``data`` (``tree``: that tree, parsed already; None: parsed here).

    ``closed`` is true when the definition's last child is a real (not MISSING) end keyword.
    A clean tree is walked through the root's children and, recursively, ``preprocessor``
    nodes (regions and ``#Если`` blocks nest their content in tree-sitter-hbk): that finds the
    same definitions as ``grammars/bsl/methods.scm`` (asserted by the tests) at ~1/10 of the
    cost. A tree with an ERROR anywhere is searched with the ``methods`` query itself, which
    also finds definitions that error recovery tucked into unexpected nodes.
    """
    if tree is None:
        tree = parser().parse(data)
    root = tree.root_node
    if root.has_error:
        # in file order: the captures come through a set, and the first of a row's definitions wins
        nodes = sorted(
            _query_cursor("methods").captures(root).get("method", []), key=lambda n: (n.start_byte, n.end_byte)
        )
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


#: One header as read: the header, its signature, parameter list, export flag and the line
#: its signature ends on.
_Signed = tuple[Header, str, str, bool, int]


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
    return chunk_module_parsed(
        text, path=path, owner=owner, object_type=object_type, module_kind=module_kind, max_lines=max_lines
    )[0]


def chunk_module_parsed(
    text: str,
    *,
    path: str,
    owner: str = "",
    object_type: str = "",
    module_kind: str = "other",
    max_lines: int = 400,
) -> tuple[list[Chunk], bytes, tree_sitter.Tree | None]:
    """:func:`chunk_module`, also handing over what it parsed: ``(chunks, data, tree)``, where
    ``data`` is the normalised text as UTF-8 (no BOM, ``\\n`` line ends, lone surrogates as
    U+FFFD) and ``tree`` its tree-sitter tree (None for an empty text), so that the references
    of the module are read from the same parse
    (:func:`daemon.sources.references.chunk_module_with_references`)."""
    text = normalize(text)
    if not text.strip():
        return [], b"", None
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        # lone surrogates (e.g. from a surrogateescape decode): U+FFFD keeps every offset
        text = _SURROGATE_RE.sub("\ufffd", text)
        data = text.encode("utf-8")
    scan = LineScan(text)
    parsed = None
    try:
        parsed = parser().parse(data)
        tree = _tree_methods(data, parsed)
    except Exception:  # pragma: no cover - tree-sitter never raises on input text
        tree = {}
    methods = _find_methods(scan, _all_headers(scan, tree), scan.ends(), tree)
    chunks: list[Chunk] = []
    seen: dict[str, int] = {}  # folded name -> methods of that name so far
    region_events = scan.regions()
    stack: list[str] = []  # the #Область path at the current method
    ev = 0
    for m in methods:
        while ev < len(region_events) and region_events[ev][0] < m.h.kw_line:
            _, name = region_events[ev]
            if name is not None:
                stack.append(name)
            elif stack:
                stack.pop()
            ev += 1
        key = fold(m.h.name)
        seen[key] = seen.get(key, 0) + 1
        base_id = f"{path}::{m.h.name}" + (f"@{seen[key]}" if seen[key] > 1 else "")
        common = _common_fields(m, scan.lines, stack, path, owner, object_type, module_kind)
        chunks.extend(_method_chunks(m, scan.lines, base_id, common, max_lines))
    module = _module_chunk(scan.lines, methods, path, owner, object_type, module_kind)
    if module is not None:
        chunks.append(module)
    return chunks, data, parsed


def _all_headers(scan: LineScan, tree: dict[int, tuple[int, bool, object]]) -> list[Header]:
    """The scanned headers plus the definitions only the tree finds (a header the line scan
    cannot see, e.g. after other code on its line), in file order."""
    heads = scan.headers()
    scanned_rows = {h.kw_line for h in heads}
    extra: list[Header] = []
    for row, (_end_row, _closed, node) in tree.items():
        if row in scanned_rows:
            continue
        h = _header_from_node(node, scan.lines, scan.starts)
        if h is not None:
            extra.append(h)
    if extra:
        heads = sorted(heads + extra, key=lambda h: (h.kw_line, h.kw_col))
    return heads


def _find_methods(
    scan: LineScan, heads: list[Header], ends: list[int], tree: dict[int, tuple[int, bool, object]]
) -> list[_Method]:
    """The methods of a module from its headers (file order), the end keyword lines and the
    tree's definitions. Headers of one method written in preprocessor branches
    (:func:`daemon.sources.bsl_lines.is_header_variant`) wait for the header that owns the body
    and become one method with it."""
    text, lines, starts = scan.text, scan.lines, scan.starts
    nlines = len(lines)
    methods: list[_Method] = []
    prev_end = -1
    variants: list[_Signed] = []
    for idx, h in enumerate(heads):
        if h.kw_line <= prev_end:  # inside the previous method (tree-only duplicate)
            continue
        nxt = heads[idx + 1].kw_line if idx + 1 < len(heads) else nlines
        limit = starts[nxt] if nxt < nlines else len(text)
        sig, params, export, sig_end_off = parse_signature(text, h, limit)
        sig_end_line = bisect.bisect_right(starts, max(sig_end_off - 1, h.sig_start)) - 1
        signed = (h, sig, params, export, sig_end_line)
        if idx + 1 < len(heads) and is_header_variant(lines, ends, h, sig_end_line, heads[idx + 1]):
            variants.append(signed)
            continue
        end = _method_end(lines, ends, tree.get(h.kw_line), h, sig_end_line, nxt)
        m = (
            _method_from_variants(lines, variants + [signed], prev_end)
            if variants
            else _method(lines, signed, prev_end)
        )
        variants = []
        m.end = max(end, sig_end_line)
        m.sig_end_line = sig_end_line
        methods.append(m)
        prev_end = m.end
    return methods


def _method_end(
    lines: list[str], ends: list[int], t: tuple[int, bool, object] | None, h: Header, sig_end_line: int, nxt: int
) -> int:
    """The 0-based last line of the method of header ``h`` (the next header is on line
    ``nxt``): the tree's end row when it is a real end keyword the scan saw too, else the
    scan's first end keyword after the signature, else the last code line before ``nxt``."""
    if t is not None and t[1] and sig_end_line <= t[0] < nxt:
        k = bisect.bisect_left(ends, t[0])
        if k < len(ends) and ends[k] == t[0]:
            return t[0]
    k = bisect.bisect_left(ends, sig_end_line if sig_end_line < nxt else h.kw_line)
    if k < len(ends) and ends[k] < nxt:
        return ends[k]
    end = nxt - 1
    while end > sig_end_line:
        s = lines[end].strip()
        if not s or s.startswith("//") or s.startswith("&") or s.startswith("#"):
            end -= 1
        else:
            break
    return end


def _method(lines: list[str], signed: _Signed, prev_end: int) -> _Method:
    """A method of one header: its doc comment, directives and annotations read above it."""
    h, sig, params, export, _ = signed
    block, doc, directives, annotations = classify_above(lines, h.line, prev_end)
    same_line_annotations(lines, h, directives, annotations)
    m = _Method()
    m.h, m.sig, m.params, m.export, m.is_async = h, sig, params, export, h.is_async
    m.start, m.doc, m.directives, m.annotations = block, doc, directives, annotations
    return m


def _method_from_variants(lines: list[str], group: list[_Signed], prev_end: int) -> _Method:
    """One method written with several headers in preprocessor branches: its lines from the
    first header's ``#Если`` (and the doc comment and directives above it) to the body's end;
    every header's signature, parameter list, directives and annotations; the name and range
    of the first header."""
    h0 = group[0][0]
    block, doc, directives, annotations = classify_above_branch(lines, h0.line, prev_end)
    same_line_annotations(lines, h0, directives, annotations)
    for (_pv, _s, _p, _e, prev_sig_end), (hv, *_rest) in zip(group, group[1:], strict=False):
        for j in range(prev_sig_end + 1, hv.line):
            if lines[j].lstrip().startswith("&"):
                split_annotations(code_part(lines[j], True).strip(), directives, annotations)
        same_line_annotations(lines, hv, directives, annotations)
    m = _Method()
    m.h = h0
    m.sig = " | ".join(dict.fromkeys(g[1] for g in group))
    m.params = " | ".join(dict.fromkeys(g[2] for g in group))
    m.export = any(g[3] for g in group)
    m.is_async = any(g[0].is_async for g in group)
    m.start, m.doc = block, doc
    m.directives, m.annotations = list(dict.fromkeys(directives)), list(dict.fromkeys(annotations))
    return m


def _common_fields(
    m: _Method, lines: list[str], region: list[str], path: str, owner: str, object_type: str, module_kind: str
) -> dict:
    """The fields every chunk of method ``m`` shares (its parts too), as ``Chunk`` keyword
    arguments; ``region``: the ``#Область`` path around it (copied)."""
    h = m.h
    c0 = utf16_len(lines[h.name_line][: h.name_col])
    return dict(
        path=path,
        kind="function" if h.kw[:1] in "ФфFf" else "procedure",
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
        region=list(region),
        doc="\n".join(m.doc),
        signature=m.sig,
        name_range=(h.name_line, c0, h.name_line, c0 + utf16_len(h.name)),
    )


def _method_chunks(m: _Method, lines: list[str], base_id: str, common: dict, max_lines: int) -> list[Chunk]:
    """The chunk of method ``m``, or its parts ``1..n`` when it is longer than ``max_lines``
    (each part repeats the doc comment, directives and signature before its slice; ids
    ``<base_id>#<part>``; a part ends on a blank line near its end when there is one)."""
    if m.end - m.start + 1 <= max_lines:
        return [
            Chunk(id=base_id, start_line=m.start + 1, end_line=m.end + 1, text=_join(lines, m.start, m.end), **common)
        ]
    prefix_end = min(m.sig_end_line, m.end)
    prefix = lines[m.start : prefix_end + 1]
    size = max(max_lines - len(prefix), max(max_lines // 4, 1))
    out = []
    part = 0
    pos = prefix_end + 1
    while pos <= m.end:
        part += 1
        stop = min(pos + size - 1, m.end)
        if stop < m.end:
            stop = _soft_break(lines, pos, stop)
        if part == 1:
            txt, s_line = _join(lines, m.start, stop), m.start
        else:
            txt, s_line = "\n".join(prefix) + "\n" + _join(lines, pos, stop), pos
        fields = _own_lists(common)
        out.append(
            Chunk(id=f"{base_id}#{part}", part=part, start_line=s_line + 1, end_line=stop + 1, text=txt, **fields)
        )
        pos = stop + 1
    return out


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


def _header_from_node(node, lines: list[str], starts: list[int]) -> Header | None:
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
    mm = NAME_RE.match(nline, ncol)
    if mm is None:
        return None
    kw_row = kw_node.start_point.row
    kline = lines[kw_row]
    kcol = len(kline.encode("utf-8", "replace")[: kw_node.start_point.column].decode("utf-8", "replace"))
    km = NAME_RE.match(kline, kcol)
    kw = km.group() if km else ("Функция" if kw_node.type == "FUNCTION_KEYWORD" else "Процедура")
    return Header(row, mm.group(), kw, is_async, nrow, ncol, row, col, starts[row] + col, starts[nrow] + ncol)


def _module_chunk(lines, methods, path, owner, object_type, module_kind) -> Chunk | None:
    """The module-level chunk: every non-blank line outside methods except the leading
    copyright comment block, or ``None`` when those lines are only comments and
    preprocessor lines (``#Область``, ``#Если``...)."""
    kept: list[int] = []
    has_code = False
    # the module's leading comment block, when a blank line ends it, is the copyright/licence
    # header: boilerplate repeated in every module, left out of the text
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
