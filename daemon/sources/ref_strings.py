"""Methods a BSL module names without calling them: by a string (``Новый ОписаниеОповещения("Имя",
Модуль)``, ``ПодключитьОбработчикОжидания("Имя", …)``, ``ФоновыеЗадания.Выполнить("М.Метод")``,
the SSL helpers that run a method by its name) or by a handler reference (``ДобавитьОбработчик
Источник.Событие, Обработчик``).

:class:`StringRefs` reads them for the extraction of one module (:mod:`daemon.sources.references`),
which finds the calls and hands the ones named here over: a literal name gives a site of the
helper's kind, a computed one a ``dynamic`` site. :func:`split_method_name` is the one reading of
a method named by a string, also for the metadata bindings (:mod:`daemon.sources.bindings`).
"""

from __future__ import annotations

import re

from ..text.folding import fold
from .ref_record import SiteBuilder

__all__ = [
    "DOTTED_RE",
    "HELPER_NAMES",
    "IDENT_RE",
    "NOTIFY_NAMES",
    "STRING_HELPERS",
    "THIS_NAMES",
    "StringRefs",
    "compact",
    "split_method_name",
]

#: Folded ``ЭтотОбъект``/``ЭтаФорма``: a receiver or a module argument that is the module itself.
THIS_NAMES = frozenset(fold(w) for w in ("ЭтотОбъект", "ThisObject", "ЭтаФорма", "ThisForm"))
#: Folded names of the notification type: ``Новый ОписаниеОповещения("Имя", Модуль)``.
NOTIFY_NAMES = frozenset(fold(w) for w in ("ОписаниеОповещения", "NotifyDescription", "CallbackDescription"))

IDENT_RE = re.compile(r"[^\W\d]\w*")
DOTTED_RE = re.compile(r"[^\W\d]\w*(?:\s*\.\s*[^\W\d]\w*)*")
_STRING_B = re.compile(rb'\s*"([^"\n]*)"\s*')
_WS_RE = re.compile(r"\s+")


def _pairs(*items: tuple[str, str, str, str, str, int, int]) -> dict[tuple[str, str], tuple[str, int, int]]:
    """Helper table rows ``(kind, qualifier ru, qualifier en, method ru, method en, arg, module arg)``
    keyed by the folded ``(qualifier, method)`` in both languages."""
    out: dict[tuple[str, str], tuple[str, int, int]] = {}
    for kind, q_ru, q_en, m_ru, m_en, arg, mod in items:
        for q in {q_ru, q_en}:
            for m in (m_ru, m_en):
                out[(fold(q), fold(m))] = (kind, arg, mod)
    return out


#: Calls that name a method by a string: folded ``(qualifier, method)`` -> ``(kind, index of the
#: name argument, index of the module argument or -1)``. A qualifier ``""`` is a global function.
#: A literal name gives a site of that kind; a computed one a ``dynamic`` site.
STRING_HELPERS: dict[tuple[str, str], tuple[str, int, int]] = _pairs(
    ("idle", "", "", "ПодключитьОбработчикОжидания", "AttachIdleHandler", 0, -1),
    ("idle", "", "", "ОтключитьОбработчикОжидания", "DetachIdleHandler", 0, -1),
    ("background", "ФоновыеЗадания", "BackgroundJobs", "Выполнить", "Execute", 0, -1),
    ("long_operation", "ДлительныеОперации", "TimeConsumingOperations", "ВыполнитьФункцию", "ExecuteFunction", 1, -1),
    (
        "long_operation",
        "ДлительныеОперации",
        "TimeConsumingOperations",
        "ВыполнитьПроцедуру",
        "ExecuteProcedure",
        1,
        -1,
    ),
    ("long_operation", "ДлительныеОперации", "TimeConsumingOperations", "ВыполнитьВФоне", "ExecuteInBackground", 0, -1),
    (
        "long_operation",
        "ДлительныеОперации",
        "TimeConsumingOperations",
        "ВыполнитьФункциюВНесколькоПотоков",
        "ExecuteFunctionInMultipleThreads",
        0,
        -1,
    ),
    (
        "long_operation",
        "ДлительныеОперации",
        "TimeConsumingOperations",
        "ВыполнитьПроцедуруВНесколькоПотоков",
        "ExecuteProcedureinMultipleThreads",
        0,
        -1,
    ),
    ("by_name", "ОбщегоНазначения", "Common", "ВыполнитьМетодКонфигурации", "ExecuteConfigurationMethod", 0, -1),
    ("by_name", "ОбщегоНазначения", "Common", "ВызватьФункциюКонфигурации", "CallConfigurationFunction", 0, -1),
    ("by_name", "ОбщегоНазначения", "Common", "ВыполнитьМетодОбъекта", "ExecuteObjectMethod", 1, 0),
    ("by_name", "ОбщегоНазначения", "Common", "ВызватьФункциюОбъекта", "CallObjectFunction", 1, 0),
    ("dynamic", "ОбщегоНазначения", "Common", "ВыполнитьВБезопасномРежиме", "ExecuteInSafeMode", -1, -1),
    ("dynamic", "ОбщегоНазначения", "Common", "ВычислитьВБезопасномРежиме", "CalculateInSafeMode", -1, -1),
)

#: Folded method names of :data:`STRING_HELPERS` (a call of another name is no helper).
HELPER_NAMES = frozenset(m for _q, m in STRING_HELPERS)


def split_method_name(text: str) -> tuple[str, str] | None:
    """A method named by a string (``"Модуль.Метод"``, ``"Справочники.X.Метод"``, ``"Имя"``):
    ``(qualifier, name)`` with blanks removed, or ``None`` if it is not a dotted identifier."""
    parts = [p.strip() for p in text.split(".")]
    if not parts or not all(IDENT_RE.fullmatch(p) for p in parts):
        return None
    return ".".join(parts[:-1]), parts[-1]


def compact(text: str, limit: int = 80) -> str:
    """``text`` on one line, blanks collapsed, cut to ``limit`` characters (``…`` marks a cut)."""
    text = _WS_RE.sub(" ", text).strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _arguments(node) -> list:
    """The argument nodes of a call (``None`` for an omitted one)."""
    args_node = None
    for ch in node.children:
        if ch.type == "arguments":
            args_node = ch
            break
    if args_node is None:
        return []
    out: list = []
    for ch in args_node.children:
        t = ch.type
        if t == "expression":
            out.append(ch)
        elif t == "omitted_argument":
            out.append(None)
    return out


def _literal(data: bytes, arg) -> tuple[str, int, int] | None:
    """A one-line string literal argument: ``(text, start byte of the text, end byte)``."""
    if arg is None:
        return None
    m = _STRING_B.fullmatch(data, arg.start_byte, arg.end_byte)
    if m is None:
        return None
    return m.group(1).decode("utf-8", "replace"), m.start(1), m.end(1)


def _arg_text(data: bytes, arg) -> str:
    return "" if arg is None else data[arg.start_byte : arg.end_byte].decode("utf-8", "replace").strip()


class StringRefs:
    """One module's methods named by a string or a handler reference: the sites go into ``out``.

    ``data``: the module's parsed UTF-8 bytes; ``folded``: the extraction's cache of folded names
    (:func:`daemon.sources.references.extract_references`; shared, never the extractor itself: a
    reference back to it would make a cycle that keeps every module's state alive while the
    chunking pass runs with the cyclic GC off). A ``caller`` of -1 is placed by the method spans
    when the sites are converted.
    """

    __slots__ = ("data", "out", "folded")

    def __init__(self, data: bytes, out: SiteBuilder, folded: dict[str, str]) -> None:
        self.data = data
        self.out = out
        self.folded = folded

    def fold(self, s: str) -> str:
        """``fold(s)``, cached."""
        f = self.folded.get(s)
        if f is None:
            f = self.folded[s] = fold(s)
        return f

    def string_ref(self, caller: int, kind: str, arg, module_arg, detail: str, at: tuple[int, int]) -> None:
        """A method named by the string ``arg`` (a dynamic site when it is not a literal name)."""
        data = self.data
        lit = _literal(data, arg)
        named = split_method_name(lit[0]) if lit else None
        if named is None:
            q, _, n = detail.rpartition(".")
            self.out.add_bytes(caller, "dynamic", n, q, detail, *at)
            return
        qual, name = named
        if module_arg is not None or kind == "notify":
            mod = _arg_text(data, module_arg)
            if not qual:
                if not mod or self.fold(mod) in THIS_NAMES:
                    qual = ""
                elif IDENT_RE.fullmatch(mod):
                    qual = mod
                else:
                    qual = "?" + compact(mod, 60)
        self.out.add_bytes(caller, kind, name, qual, detail, lit[1], lit[2])

    def helper_call(self, node, caller: int, key: tuple[str, str], name: str, qual: str, sb: int, eb: int) -> None:
        """The call ``node`` of ``qual.name`` (bytes ``sb``..``eb``), when it is a string helper:
        ``key`` is its folded ``(qualifier, method)`` (:data:`STRING_HELPERS`; the qualifier
        ``""`` unless the call is on a receiver)."""
        helper = STRING_HELPERS.get(key)
        if helper is None:
            return
        data = self.data
        hkind, arg_i, mod_i = helper
        detail = f"{qual}.{name}" if qual else name
        if hkind == "dynamic":
            self.out.add_bytes(caller, "dynamic", name, qual, detail, sb, eb)
            return
        args = _arguments(node)
        arg = args[arg_i] if arg_i < len(args) else None
        mod = (args[mod_i] if mod_i < len(args) else None) if mod_i >= 0 else None
        if hkind == "by_name" and mod_i >= 0:
            # a method of an object passed in: the receiver's type is unknown
            lit = _literal(data, arg)
            named = split_method_name(lit[0]) if lit else None
            if named is None or named[0]:
                self.string_ref(caller, hkind, arg, None, detail, (sb, eb))
                return
            text = _arg_text(data, mod) or "?"
            self.out.add_bytes(caller, hkind, named[1], "?" + compact(text, 60), detail, lit[1], lit[2])
            return
        self.string_ref(caller, hkind, arg, mod, detail, (sb, eb))

    def new_notify(self, node, caller: int, type_name: str, sb: int, eb: int) -> None:
        """``Новый ОписаниеОповещения("Имя", Модуль, …, "ИмяОшибки", МодульОшибки)``: up to two handlers."""
        args = _arguments(node)
        first = args[0] if args else None
        self.string_ref(caller, "notify", first, args[1] if len(args) > 1 else None, type_name, (sb, eb))
        if len(args) > 3 and args[3] is not None:
            self.string_ref(caller, "notify", args[3], args[4] if len(args) > 4 else None, type_name, (sb, eb))

    def handler(self, node, keyword: str, keb: int) -> None:
        """``ДобавитьОбработчик Источник.Событие, Обработчик`` (``keyword`` as written, ending at
        byte ``keb``): the handler is a method reference."""
        exprs = [ch for ch in node.children if ch.type == "expression"]
        if len(exprs) < 2:
            return
        h = exprs[1]
        data = self.data
        text = data[h.start_byte : h.end_byte].decode("utf-8", "replace").strip()
        if not DOTTED_RE.fullmatch(text):
            self.out.add_bytes(-1, "dynamic", keyword, "", keyword, node.start_byte, keb)
            return
        parts = [p.strip() for p in text.split(".")]
        qual = ".".join(parts[:-1])
        if qual and self.fold(qual) in THIS_NAMES:
            qual = ""
        name = parts[-1]
        raw = name.encode()
        last = data.rfind(raw, h.start_byte, h.end_byte)
        start = last if last >= 0 else h.start_byte
        self.out.add_bytes(-1, "handler", name, qual, keyword, start, start + len(raw))
