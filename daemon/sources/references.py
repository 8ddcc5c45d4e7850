"""References in BSL: the sites of one parsed module, and what each reference kind means.

A module's references are extracted from the tree-sitter tree the chunker already parsed
(:func:`extract_references`, given that tree and the chunker's chunks for the method spans)
or, standalone, from the text (:func:`module_references`, which parses once itself). What is
recorded is only what the text says: the calling method, the callee as written, the kind and
the exact range. Which method a site reaches is decided later, against every module's
definitions (:mod:`daemon.index.refgraph`), so an edit elsewhere never needs a re-parse here.
This module finds the calls; the methods named by a string or a handler reference are read by
:mod:`daemon.sources.ref_strings`, and the record they go into is :mod:`daemon.sources.ref_record`.

Kinds (:data:`daemon.contract.REF_KINDS`, each in one group of :data:`daemon.contract.REF_GROUPS`):

* calls: ``call`` (``Метод(…)``), ``member`` (``Модуль.Метод(…)`` or ``Переменная.Метод(…)``:
  the resolver decides whether the receiver is a common module), ``manager``
  (``Справочники.Валюты.Метод(…)``, ``Catalogs.X.Method(…)``), ``this`` (``ЭтотОбъект.Метод(…)``,
  ``ЭтаФорма``), ``proceed`` (``ПродолжитьВызов(…)`` inside an ``&Вместо`` method: the adopted one);
* methods named by a string or a handler reference: ``notify`` (``Новый ОписаниеОповещения("Имя", М)``),
  ``idle`` (``ПодключитьОбработчикОжидания("Имя", …)``), ``background`` (``ФоновыеЗадания.Выполнить("М.Метод")``),
  ``long_operation`` (SSL ``ДлительныеОперации.ВыполнитьФункцию`` and kin), ``by_name`` (SSL
  ``ОбщегоНазначения.ВыполнитьМетодКонфигурации`` and kin), ``handler`` (``ДобавитьОбработчик …, Метод``);
* metadata: ``subscription``, ``scheduled_job``, ``form_event``, ``form_item_event``, ``form_command``,
  ``http_handler``, ``web_operation`` (:mod:`daemon.sources.bindings`), ``platform_event`` (a handler the
  platform calls by its name, :data:`PLATFORM_EVENTS`) and ``extension`` (``&Перед``/``&После``/``&Вместо``/
  ``&ИзменениеИКонтроль`` linking an extension method to the adopted one);
* ``dynamic``: ``Выполнить(…)``/``Вычислить(…)`` and the helpers above given a computed name: a call nobody
  can resolve, which makes any "who calls" answer a lower bound.

Ranges follow the chunker: 0-based lines of the normalised text (``\\r\\n``, ``\\r`` and ``\\n`` all
end a line, a BOM is not a column), columns in UTF-16 code units. A call's range is its method name;
a string reference's range is the text inside the quotes; a platform event's is the method's name.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
import tree_sitter

from ..contract import METHOD_KINDS, Chunk, object_type_aliases
from ..text.folding import fold
from .bsl import chunk_module_parsed, language, parser
from .ref_record import KIND_CODES, MODULE_CALLER, SITE_DTYPE, FileRefs, MethodDef, SiteBuilder, pack_methods
from .ref_strings import DOTTED_RE, HELPER_NAMES, IDENT_RE, NOTIFY_NAMES, THIS_NAMES, StringRefs, compact

__all__ = [
    "MANAGER_COLLECTIONS",
    "PLATFORM_EVENTS",
    "extract_references",
    "module_references",
    "chunk_module_with_references",
    "normalize_text",
]

# ---------------------------------------------------------------------------------------
# vocabulary
# ---------------------------------------------------------------------------------------

#: Module kind -> {folded handler name: event} for the handlers the platform calls by their
#: name (forms are bound by their layout instead: :mod:`daemon.sources.bindings`). The event is
#: the English name Designer and EDT write in metadata.
_EVENT_PAIRS: dict[str, tuple[tuple[str, str], ...]] = {
    "object": (
        ("ПередЗаписью", "BeforeWrite"),
        ("ПриЗаписи", "OnWrite"),
        ("ОбработкаЗаполнения", "Filling"),
        ("ОбработкаПроверкиЗаполнения", "FillCheckProcessing"),
        ("ПриКопировании", "OnCopy"),
        ("ПередУдалением", "BeforeDelete"),
        ("ОбработкаПроведения", "Posting"),
        ("ОбработкаУдаленияПроведения", "UndoPosting"),
        ("ПриУстановкеНовогоНомера", "OnSetNewNumber"),
        ("ПриУстановкеНовогоКода", "OnSetNewCode"),
        ("ПриЧтенииПредставленийНаСервере", "OnReadPresentationsAtServer"),
        ("ПриКомпоновкеРезультата", "OnComposeResult"),
        ("ПередСтартом", "BeforeStart"),
        ("ПриСозданииЗадач", "OnCreateTasks"),
        ("ПередСозданиемЗадач", "BeforeCreateTasks"),
        ("ПриВыполнении", "OnExecute"),
        ("ОбработкаПолученияФормы", "FormGetProcessing"),
    ),
    "manager": (
        ("ОбработкаПолученияФормы", "FormGetProcessing"),
        ("ОбработкаПолученияДанныхВыбора", "ChoiceDataGetProcessing"),
        ("ОбработкаПолученияПредставления", "PresentationGetProcessing"),
        ("ОбработкаПолученияПолейПредставления", "PresentationFieldsGetProcessing"),
    ),
    "recordset": (
        ("ПередЗаписью", "BeforeWrite"),
        ("ПриЗаписи", "OnWrite"),
        ("ОбработкаПроверкиЗаполнения", "FillCheckProcessing"),
    ),
    "value_manager": (
        ("ПередЗаписью", "BeforeWrite"),
        ("ПриЗаписи", "OnWrite"),
        ("ОбработкаПроверкиЗаполнения", "FillCheckProcessing"),
    ),
    "command": (("ОбработкаКоманды", "CommandProcessing"),),
    "session": (("УстановкаПараметровСеанса", "SessionParametersSetting"),),
    "managed_application": (
        ("ПередНачаломРаботыСистемы", "BeforeStart"),
        ("ПриНачалеРаботыСистемы", "OnStart"),
        ("ПередЗавершениемРаботыСистемы", "BeforeExit"),
        ("ПриЗавершенииРаботыСистемы", "OnExit"),
        ("ОбработкаВнешнегоСобытия", "ExternalEventProcessing"),
        ("ОбработкаОтображенияОшибки", "ErrorDisplayProcessing"),
        ("ОбработкаПереходаПоНавигационнойСсылке", "NavigationByURLProcessing"),
        ("ПриГлобальномПоиске", "OnGlobalSearch"),
        ("ПриВыбореРезультатаГлобальногоПоиска", "OnGlobalSearchResultChoice"),
        ("ПриВыбореДействияРезультатаГлобальногоПоиска", "OnGlobalSearchResultActionChoice"),
        (
            "ОбработкаПолученияФормыВыбораПользователейСистемыВзаимодействия",
            "CollaborationSystemUsersChoiceFormGetProcessing",
        ),
    ),
    "external_connection": (("ПриНачалеРаботыСистемы", "OnStart"), ("ПриЗавершенииРаботыСистемы", "OnExit")),
}
_EVENT_PAIRS["ordinary_application"] = _EVENT_PAIRS["managed_application"]

#: Module kind -> {folded handler name (Russian or English): event}; see ``_EVENT_PAIRS``.
PLATFORM_EVENTS: dict[str, dict[str, str]] = {
    kind: {fold(n): en for ru, en in pairs for n in (ru, en)} for kind, pairs in _EVENT_PAIRS.items()
}

_PROCEED = frozenset(fold(w) for w in ("ПродолжитьВызов", "ProceedWithCall"))
_EVAL = frozenset(fold(w) for w in ("Вычислить", "Eval"))


def _plural_collections() -> frozenset[str]:
    """Folded plural collection names that hold managers in code: ``справочники``, ``catalogs`` …
    (every alias of an object type that is neither its Russian nor its English singular)."""
    from ..contract import OBJECT_TYPES

    singular = {fold(s) for ru, en in OBJECT_TYPES.values() for s in (ru, en)}
    return frozenset(
        a for a in object_type_aliases() if a not in singular and a not in ("конфигурация", "configuration")
    )


#: Folded plural collection names (``Справочники``, ``Catalogs`` …): ``<Коллекция>.<Имя>.Метод()``
#: is a manager call.
MANAGER_COLLECTIONS = _plural_collections()

# ---------------------------------------------------------------------------------------
# text and positions
# ---------------------------------------------------------------------------------------

#: An identifier's bytes at a node start: ASCII word bytes and any non-ASCII byte (the decoded
#: text is trimmed to ``\w``). Both grammars end identifiers at ``ё``: the name is re-read from
#: the source, never from the node.
_WORD_B = re.compile(rb"[0-9A-Za-z_\x80-\xff]+")
_WORD_RE = re.compile(r"\w+")
#: A receiver chain on one line read backwards (the bytes before a call's dot, reversed): blanks,
#: then identifiers joined by dots. Group 1 ends where the chain starts in the source.
_RECEIVER_REV_B = re.compile(rb"[ \t]*((?:[0-9A-Za-z_\x80-\xff]+[ \t]*\.[ \t]*)*[0-9A-Za-z_\x80-\xff]+)")
_RECEIVER_WINDOW = 512
#: What may stand right before a receiver chain that starts a value: a blank, an operator, an
#: opening bracket, a separator (not ``.``, ``)``, ``]``: a computed receiver; not ``/``: a comment).
_CHAIN_START_BYTES = frozenset(b" \t\n(=,;+-*<>?[!&|%")
#: Identifier bytes (as :data:`_WORD_B`), and the last identifier before a search's end.
_ID_BYTES = frozenset(c for c in range(256) if re.fullmatch(rb"[0-9A-Za-z_\x80-\xff]", bytes([c])))
_LAST_ID_B = re.compile(rb"[0-9A-Za-z_\x80-\xff]+$")
_BLANK_BYTES = frozenset(b" \t\r\n")
_ANNOT_RE = re.compile(
    r"&\s*(?P<kw>Перед|После|Вместо|ИзменениеИКонтроль|Before|After|Instead|ChangeAndValidate)"
    r'\s*\(\s*"(?P<name>[^"]*)"',
    re.IGNORECASE,
)
_INSTEAD = frozenset(("вместо", "instead"))
_DELETE_RE = re.compile(
    r"^[ \t]*#[ \t]*(?P<kw>Удаление|КонецУдаления|Delete|EndDelete)(?!\w)", re.IGNORECASE | re.MULTILINE
)
_SURROGATE_RE = re.compile("[\ud800-\udfff]")
#: The annotation of a method whose body may hold ``#Удаление``/``#Delete`` blocks (folded).
_CHANGES = frozenset(("изменениеиконтроль", "changeandvalidate"))

_QUERY_SRC = """
(method_call) @call
(new_expression) @new
(execute_statement) @exec
(add_handler_statement) @handler
(remove_handler_statement) @handler
"""
_query: tree_sitter.Query | None = None


def _query_obj() -> tree_sitter.Query:
    global _query
    if _query is None:
        _query = tree_sitter.Query(language(), _QUERY_SRC)
    return _query


def normalize_text(text: str) -> str:
    """The text as the chunker parses it: no BOM, ``\\n`` the only line break, lone
    surrogates replaced by U+FFFD (so every offset survives the UTF-8 encoding)."""
    if text.startswith("\ufeff"):
        text = text[1:]
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = _SURROGATE_RE.sub("\ufffd", text)
    return text


def _width(text: str) -> int:
    """UTF-16 length of ``text``."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


class _Positions:
    """UTF-8 byte offsets of one module -> 0-based lines and UTF-16 columns."""

    __slots__ = ("data", "_newlines")

    def __init__(self, data: bytes):
        self.data = data
        self._newlines: np.ndarray | None = None

    @property
    def newlines(self) -> np.ndarray:
        if self._newlines is None:
            self._newlines = np.flatnonzero(np.frombuffer(self.data, dtype=np.uint8) == 10)
        return self._newlines

    def row(self, byte: int) -> int:
        return int(np.searchsorted(self.newlines, byte))

    def at_byte(self, byte: int) -> tuple[int, int]:
        """``(line, UTF-16 column)`` of one byte offset."""
        row = self.row(byte)
        ls = int(self.newlines[row - 1]) + 1 if row else 0
        return row, _width(self.data[ls:byte].decode("utf-8", "replace"))

    def convert(self, rows, spans: "_Spans | None", deleted) -> np.ndarray:
        """Byte-positioned rows ``(caller, kind, name, qual, detail, start, end)`` -> :data:`SITE_DTYPE`:
        lines by the newline offsets, columns by a running count of UTF-16 units (a UTF-8 lead or
        ASCII byte is one unit, a 4-byte lead two), callers (-1) by the method spans, and the
        rows on ``deleted`` lines dropped."""
        a = np.array(rows, dtype=np.int64)
        start, end = a[:, 5], a[:, 6]
        nl = self.newlines
        line = np.searchsorted(nl, start)
        ls = np.where(line > 0, nl[np.maximum(line - 1, 0)] + 1, 0)
        u = np.frombuffer(self.data, dtype=np.uint8)
        hi = int(end.max()) if len(end) else 0
        u = u[:hi]
        units = (u & 0xC0) != 0x80  # a UTF-8 lead or ASCII byte: one UTF-16 unit
        cum = np.zeros(hi + 1, dtype=np.int32)
        np.cumsum(units, out=cum[1:], dtype=np.int32)
        if hi and int(u.max()) >= 0xF0:  # 4-byte sequences (rare): two units each
            cum[1:] += np.cumsum(u >= 0xF0, dtype=np.int32)
        col = cum[start] - cum[ls]
        endcol = cum[end] - cum[ls]
        caller = a[:, 0]
        if spans is not None:
            caller = np.where(caller < 0, spans.callers(line), caller)
        out = np.empty(len(a), dtype=SITE_DTYPE)
        out["caller"] = caller
        out["kind"] = a[:, 1]
        out["name"] = a[:, 2]
        out["qual"] = a[:, 3]
        out["detail"] = a[:, 4]
        out["line"] = line
        out["col"] = np.minimum(col, 0xFFFF)
        out["end"] = np.minimum(endcol, 0xFFFF)
        if deleted:
            keep = np.ones(len(a), dtype=bool)
            for lo, hi_row in deleted:
                keep &= ~((line >= lo) & (line <= hi_row))
            out = out[keep]
        return out


# ---------------------------------------------------------------------------------------
# extraction
# ---------------------------------------------------------------------------------------


class _Spans:
    """The chunker's method spans: a 0-based line -> the index of the method holding it."""

    __slots__ = ("starts", "ends", "index")

    def __init__(self, spans: list[tuple[int, int, int]]):
        spans.sort()
        self.starts = np.array([s for s, _e, _i in spans], dtype=np.int64)
        self.ends = np.array([e for _s, e, _i in spans], dtype=np.int64)
        self.index = np.array([i for _s, _e, i in spans], dtype=np.int64)

    def callers(self, rows: np.ndarray) -> np.ndarray:
        """The method index of each row (:data:`MODULE_CALLER` outside every method)."""
        if not len(self.starts):
            return np.full(len(rows), MODULE_CALLER, dtype=np.int64)
        k = np.searchsorted(self.starts, rows, side="right") - 1
        kk = np.maximum(k, 0)
        inside = (k >= 0) & (rows <= self.ends[kk])
        return np.where(inside, self.index[kk], MODULE_CALLER)

    def caller(self, row: int) -> int:
        return int(self.callers(np.array([row]))[0])


def _methods_from_chunks(chunks: Sequence[Chunk]) -> tuple[list[MethodDef], list[Chunk], _Spans]:
    """Method definitions (one per method, parts merged), their first chunks, and the spans."""
    methods: list[MethodDef] = []
    firsts: list[Chunk] = []
    spans: dict[str, list[int]] = {}
    order: dict[str, int] = {}
    for c in chunks:
        if c.kind not in METHOD_KINDS:
            continue
        base = c.id.rsplit("#", 1)[0] if c.part else c.id
        span = spans.get(base)
        if span is None:
            order[base] = len(methods)
            spans[base] = [c.start_line - 1, c.end_line - 1]
            methods.append(MethodDef(c.name, base, c.export, c.name_range[0], c.name_range[1]))
            firsts.append(c)
        else:
            span[0] = min(span[0], c.start_line - 1)
            span[1] = max(span[1], c.end_line - 1)
    return methods, firsts, _Spans([(s, e, order[b]) for b, (s, e) in spans.items()])


def _deleted_rows(text: str) -> list[tuple[int, int]]:
    """0-based row ranges inside ``#Удаление … #КонецУдаления`` (removed base code in an extension)."""
    out: list[tuple[int, int]] = []
    start = -1
    for row, line in enumerate(text.split("\n")):
        if "#" not in line:
            continue
        m = _DELETE_RE.match(line)
        if m is None:
            continue
        if fold(m.group("kw")) in ("удаление", "delete"):
            start = row
        elif start >= 0:
            out.append((start, row))
            start = -1
    return out


#: What an identifier's or a receiver's bytes read as (``name_at``/``word``, ``receiver``) and
#: folded names: the same for every module, so kept across modules (a worker extracts a whole
#: export; the same names recur), cleared past :data:`_CACHE_MAX` entries.
_WORDS: dict[bytes, tuple[str, int, str]] = {}
_RECEIVERS: dict[bytes, tuple[str, str, str]] = {}
_FOLDED: dict[str, str] = {}
_CACHE_MAX = 300_000


class _Extractor:
    """One module's extraction state (see :func:`extract_references`)."""

    def __init__(self, data: bytes, pos: _Positions, spans: _Spans, instead: dict[int, str], out: SiteBuilder):
        self.data = data
        self.pos = pos
        self.spans = spans
        self.instead = instead  # method index -> the adopted name of its &Вместо
        self.out = out
        if len(_WORDS) + len(_RECEIVERS) + len(_FOLDED) > _CACHE_MAX:
            _WORDS.clear()
            _RECEIVERS.clear()
            _FOLDED.clear()
        self.folded = _FOLDED
        self.words = _WORDS
        self.receivers = _RECEIVERS
        self.strings = StringRefs(data, out, _FOLDED)  # methods named by a string

    def fold(self, s: str) -> str:
        f = self.folded.get(s)
        if f is None:
            f = self.folded[s] = fold(s)
        return f

    def name_at(self, start: int) -> tuple[str, int, str]:
        """The identifier at a byte offset, re-read from the source: ``(name, end byte, folded)``."""
        m = _WORD_B.match(self.data, start)
        if m is None:
            return "", start, ""
        raw = m.group()
        got = self.words.get(raw)
        if got is None:
            got = self.word(raw)
        return got[0], start + got[1], got[2]

    def receiver_before(self, dot: int, sb: int, node) -> tuple[str, str, str] | None:
        """The receiver of the call named at byte ``sb`` whose ``.`` is at byte ``dot``. A chain of
        identifiers on the name's line is read backwards from the source; anything else (a chain
        over lines, a computed value ``Ф(…).М()`` / ``А[0].М()``) is asked of the tree, whose node
        parent costs a descent from the root. ``None``: no receiver (the dot ended a comment)."""
        data = self.data
        if sb == dot + 1 and dot > 0 and data[dot - 1] in _ID_BYTES:
            # the common case, one identifier right before the dot: found by one forward search
            # of the line up to the dot (the last identifier run)
            lo = max(data.rfind(b"\n", 0, dot) + 1, dot - _RECEIVER_WINDOW)
            start = _LAST_ID_B.search(data, lo, dot).start()
            k = start - 1
            while k >= 0 and data[k] in b" \t":
                k -= 1
            if (k < 0 or data[k] != 0x2E) and dot - start < _RECEIVER_WINDOW:
                if start == 0 or data[start - 1] in _CHAIN_START_BYTES:
                    return self.receiver(data[start : dot + 1])
        if b"\n" not in data[dot:sb]:
            lo = max(0, dot - _RECEIVER_WINDOW, data.rfind(b"\n", max(0, dot - _RECEIVER_WINDOW), dot))
            m = _RECEIVER_REV_B.match(data[lo:dot][::-1])
            if m is not None:
                start = dot - m.end(1)
                if start == 0 or (start > lo and data[start - 1] in _CHAIN_START_BYTES):
                    return self.receiver(data[start : dot + 1])
        parent = node.parent
        if parent is not None and parent.start_byte < sb and parent.type in ("call_expression", "access"):
            return self.receiver(data[parent.start_byte : sb])
        return None

    def receiver(self, raw: bytes) -> tuple[str, str, str]:
        """``(kind, qualifier, folded qualifier)`` of a call from its receiver's bytes (up to the
        method name)."""
        got = self.receivers.get(raw)
        if got is not None:
            return got
        text = raw.decode("utf-8", "replace").rstrip()
        recv = text[:-1].rstrip() if text.endswith(".") else ""
        if recv and DOTTED_RE.fullmatch(recv):
            parts = [p.strip() for p in recv.split(".")]
            if len(parts) == 1:
                kind, qual = ("this" if self.fold(parts[0]) in THIS_NAMES else "member", parts[0])
            elif len(parts) == 2 and self.fold(parts[0]) in MANAGER_COLLECTIONS:
                kind, qual = ("manager", f"{parts[0]}.{parts[1]}")
            else:
                kind, qual = ("member", ".".join(parts))
        else:
            kind, qual = ("member", "?" + compact(recv or text, 60))
        got = self.receivers[raw] = (kind, qual, self.fold(qual))
        return got

    def calls(self, nodes) -> None:
        """Every ``method_call`` node: the common cases (a plain call, a call on a receiver) in a
        tight loop with their string ids cached per spelling; the rest through :meth:`call`."""
        data = self.data
        match = _WORD_B.match
        words = self.words
        blank = _BLANK_BYTES
        special = _SPECIAL_LOCAL | HELPER_NAMES
        append = self.out.at_bytes.append
        ids = self.out.ids
        plain: dict[bytes, tuple] = {}
        for node in nodes:
            sb = node.start_byte
            m = match(data, sb)
            if m is None:
                continue
            raw = m.group()
            got = words.get(raw)
            if got is None:
                got = self.word(raw)
            name, nlen, fname = got
            if not name or fname in special:
                self.call(node)
                continue
            j = sb - 1
            while j >= 0 and data[j] in blank:
                j -= 1
            if j >= 0 and data[j] == 0x2E:  # "." before the name (or ending a comment line): a receiver?
                recv = self.receiver_before(j, sb, node)
                if recv is not None:
                    kind, qual, _f = recv
                    key = (kind, name, qual, "")
                    t = ids.get(key)
                    if t is None:
                        t = ids[key] = (KIND_CODES[kind], self.out.s(name), self.out.s(qual), 0)
                    append((-1, *t, sb, sb + nlen))
                    continue
            t = plain.get(raw)
            if t is None:
                t = plain[raw] = (-1, _CALL_CODE, self.out.s(name), 0, 0)
            append((*t, sb, sb + nlen))

    def word(self, raw: bytes) -> tuple[str, int, str]:
        """``(name, its UTF-8 length, folded)`` of an identifier's bytes (cached)."""
        w = _WORD_RE.match(raw.decode("utf-8", "replace"))
        name = w.group() if w else ""
        got = self.words[raw] = (name, len(name.encode("utf-8")), fold(name))
        return got

    def call(self, node) -> None:
        data = self.data
        sb = node.start_byte
        name, eb, fname = self.name_at(sb)
        if not name:
            return
        qual = fqual = ""
        kind = "call"
        j = sb - 1
        while j >= 0 and data[j] in _BLANK_BYTES:
            j -= 1
        if j >= 0 and data[j] == 0x2E:  # "." before the name (or ending a comment line): a receiver?
            parent = node.parent
            if parent is not None and parent.start_byte < sb and parent.type in ("call_expression", "access"):
                kind, qual, fqual = self.receiver(data[parent.start_byte : sb])
        caller = -1
        if kind == "call" and fname in _SPECIAL_LOCAL:
            caller = self.spans.caller(self.pos.row(sb))
            if fname in _PROCEED and caller in self.instead:
                self.out.add_bytes(caller, "proceed", self.instead[caller], "", name, sb, eb)
                return
            if fname in NOTIFY_NAMES:  # `Новый ОписаниеОповещения(...)` that error recovery split
                self.strings.new_notify(node, caller, name, sb, eb)
                return
            if fname in _EVAL:
                self.out.add_bytes(caller, "dynamic", name, "", name, sb, eb)
        self.out.add_bytes(caller, kind, name, qual, "", sb, eb)
        if fname in HELPER_NAMES:
            self.strings.helper_call(node, caller, (fqual if kind == "member" else "", fname), name, qual, sb, eb)

    def new(self, node) -> None:
        """A ``new_expression``: its handlers when it makes an ``ОписаниеОповещения``."""
        for ch in node.children:
            if ch.type == "identifier":
                name, eb, fname = self.name_at(ch.start_byte)
                if fname in NOTIFY_NAMES:
                    self.strings.new_notify(node, -1, name, ch.start_byte, eb)
                return

    def handler(self, node) -> None:
        """``ДобавитьОбработчик``/``УдалитьОбработчик``: its handler, a method reference
        (:meth:`daemon.sources.ref_strings.StringRefs.handler`)."""
        keyword, keb, _f = self.name_at(node.start_byte)
        self.strings.handler(node, keyword, keb)

    def execute(self, node) -> None:
        """``Выполнить(…)``: code nobody can resolve, a ``dynamic`` site."""
        name, eb, _f = self.name_at(node.start_byte)
        self.out.add_bytes(-1, "dynamic", name, "", name, node.start_byte, eb)


_SPECIAL_LOCAL = _PROCEED | NOTIFY_NAMES | _EVAL
_CALL_CODE = KIND_CODES["call"]


def extract_references(
    tree: tree_sitter.Tree,
    data: bytes,
    chunks: Sequence[Chunk],
    *,
    path: str,
    owner: str = "",
    object_type: str = "",
    module_kind: str = "other",
    extension: bool = False,
) -> FileRefs:
    """The references of one module from the chunker's parse.

    ``tree``: the tree-sitter tree of ``data``; ``data``: the normalised text (:func:`normalize_text`)
    encoded as UTF-8, exactly what was parsed; ``chunks``: :func:`daemon.sources.bsl.chunk_module`'s
    output for the same text (method spans, names, export flags, annotations). Sites outside every
    method belong to module-level code (:data:`MODULE_CALLER`). Error recovery keeps the calls of
    the methods that parse: every call node the tree has is read, inside ERROR nodes too, and
    ``partial`` says the module has syntax errors. Never raises on odd input.
    """
    methods, firsts, spans = _methods_from_chunks(chunks)
    out = SiteBuilder()
    instead: dict[int, str] = {}
    lines: list[str] | None = None
    changes = False
    for i, c in enumerate(firsts):
        for a in c.annotations:
            m = _ANNOT_RE.search(a)
            if m is None:
                continue
            kw, target = m.group("kw"), m.group("name").strip()
            changes = changes or fold(kw) in _CHANGES
            if not IDENT_RE.fullmatch(target):
                continue
            if fold(kw) in _INSTEAD:
                instead[i] = target
            if lines is None:
                lines = data.decode("utf-8", "replace").split("\n")
            row, col, end = _annotation_range(lines, c, target)
            out.add(i, "extension", target, "", kw, row, col, end)
    events = PLATFORM_EVENTS.get(module_kind)
    if events:
        for md in methods:
            ev = events.get(fold(md.name))
            if ev is not None:
                out.add(MODULE_CALLER, "platform_event", md.name, "", ev, md.line, md.col, md.col + _width(md.name))
    deleted: list[tuple[int, int]] = []
    # 1C accepts #Удаление only in an &ИзменениеИКонтроль method: other modules are not searched
    if changes and b"#" in data and _DELETE_RE.search(data.decode("utf-8", "replace")) is not None:
        deleted = _deleted_rows(data.decode("utf-8", "replace"))
    pos = _Positions(data)
    x = _Extractor(data, pos, spans, instead, out)
    caps = tree_sitter.QueryCursor(_query_obj()).captures(tree.root_node)
    x.calls(caps.get("call", ()))
    for node in caps.get("new", ()):
        x.new(node)
    for node in caps.get("exec", ()):
        x.execute(node)
    for node in caps.get("handler", ()):
        x.handler(node)
    broken = tree.root_node.has_error
    return out.record(
        path,
        pos.convert(out.at_bytes, spans, deleted) if out.at_bytes else None,
        [(m.line, m.col) for m in methods] if broken else (),
        owner=owner,
        object_type=object_type,
        module_kind=module_kind,
        extension=extension,
        names=[m.name for m in methods],
        methods=pack_methods([(m.export, _nth(m.id), m.line, m.col) for m in methods]),
        partial=broken,
    )


def _nth(method_id: str) -> int:
    """``@2`` in a chunk id -> 2; 1 without it."""
    tail = method_id.rpartition("::")[2]
    _, at, n = tail.rpartition("@")
    return int(n) if at and n.isdigit() else 1


def _annotation_range(lines: list[str], c: Chunk, target: str) -> tuple[int, int, int]:
    """Where the annotation's name string is: searched on the lines from the method's first line
    (doc comment included) to its name; the name's position when it is not found."""
    needle = '"' + target + '"'
    for row in range(max(c.start_line - 1, 0), min(c.name_range[0] + 1, len(lines))):
        line = lines[row]
        if "&" not in line:
            continue
        k = line.find(needle)
        if k >= 0:
            col = _width(line[: k + 1])
            return row, col, col + _width(target)
    return c.name_range[0], c.name_range[1], c.name_range[3]


def chunk_module_with_references(
    text: str,
    *,
    path: str,
    owner: str = "",
    object_type: str = "",
    module_kind: str = "other",
    extension: bool = False,
    max_lines: int = 400,
) -> tuple[list[Chunk], FileRefs]:
    """A module's chunks (:func:`daemon.sources.bsl.chunk_module`) and its references
    (:func:`extract_references`) from one parse: what the chunking pass of the index calls.
    An empty text gives no chunks and a record without sites."""
    chunks, data, tree = chunk_module_parsed(
        text, path=path, owner=owner, object_type=object_type, module_kind=module_kind, max_lines=max_lines
    )
    ident = dict(path=path, owner=owner, object_type=object_type, module_kind=module_kind, extension=extension)
    if tree is None:
        return chunks, FileRefs(**ident)
    return chunks, extract_references(tree, data, chunks, **ident)


def module_references(
    text: str,
    *,
    path: str,
    owner: str = "",
    object_type: str = "",
    module_kind: str = "other",
    extension: bool = False,
    chunks: Sequence[Chunk] | None = None,
    max_lines: int = 400,
) -> FileRefs:
    """:func:`extract_references` for a module text, parsed once: with the chunker's own parse
    (:func:`chunk_module_with_references`, the index's record exactly) unless ``chunks`` are
    given (then the text is parsed here). For tests, tools and :func:`daemon.index.refgraph.read_references`."""
    if chunks is None:
        return chunk_module_with_references(
            text,
            path=path,
            owner=owner,
            object_type=object_type,
            module_kind=module_kind,
            extension=extension,
            max_lines=max_lines,
        )[1]
    text = normalize_text(text)
    data = text.encode("utf-8")
    tree = parser().parse(data)
    return extract_references(
        tree,
        data,
        chunks,
        path=path,
        owner=owner,
        object_type=object_type,
        module_kind=module_kind,
        extension=extension,
    )
