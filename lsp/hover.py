"""Hover on platform names in BSL code: what is under the cursor, and the Markdown an editor shows.

:func:`hover_target` reads one line of a module (the daemon's text of the file: the server keeps
no editor buffers) around a UTF-16 position and says which platform help entry it may name:

* ``Новый Тип(`` / ``New Type(`` (the cursor on the type or on the keyword): the type's
  constructor, every form of it;
* ``Перечисление.Значение`` (the cursor on the value): a system enumeration's value; the cursor
  on ``Перечисление`` before a dot: the enumeration;
* a name with no dot before it: a global function when a ``(`` follows, else a global property
  or function (``ТекущаяДата``, ``Символы``);
* nothing inside a comment or a string literal (a line starting with ``|`` continues one), on a
  member call or after a dot that follows anything but a bare name (``Объект.Записать()``,
  ``Объект.Поле.Метод``: a value's members, unknown without types), on a keyword, or on the
  name a ``Процедура``/``Функция``/``Перем`` declaration gives.

:func:`hover_markdown` renders the daemon's entry (:class:`daemon.contract.PlatformEntry`): the
signature(s) in a ``bsl`` block, the parameters, the result, availability, "since" against the
platform version that answered, and that version. A method of the module with the same name
wins over a global function (the server checks the module's methods first,
:meth:`lsp.server.BslLensServer.hover`). Pure functions, no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["HoverTarget", "hover_markdown", "hover_target", "local_method_markdown"]

_IDENT = re.compile(r"[^\W\d]\w*")
_NEW = frozenset(("новый", "new"))
#: Words of the language that are never platform names under the cursor.
_KEYWORDS = frozenset(
    (
        "если тогда иначеесли иначе конецесли для каждого из по цикл конеццикла пока попытка исключение "
        "конецпопытки процедура функция конецпроцедуры конецфункции возврат продолжить прервать перем экспорт "
        "знач и или не истина ложь неопределено null вызватьисключение новый асинх ждать "
        "if then elsif else endif for each in to do enddo while try except endtry procedure function "
        "endprocedure endfunction return continue break var export val and or not true false undefined raise "
        "new async await"
    ).split()
)
#: Words after which a name is declared, not used.
_DECLARING = frozenset(("процедура", "функция", "перем", "procedure", "function", "var"))
#: Parameters listed in a hover (a longer list ends with "…").
HOVER_PARAMS = 12
#: Characters of a description in a hover.
HOVER_DESCRIPTION = 600


@dataclass(frozen=True)
class HoverTarget:
    """A platform name under the cursor: ``query`` for the daemon's ``platform_help``
    (``names_only``), the entry ``kinds`` it may be, the bare ``name`` (a module's own
    method of that name wins when ``local`` may), and the name's columns (UTF-16, end
    exclusive) on its line."""

    query: str
    kinds: tuple[str, ...]
    name: str
    start: int
    end: int
    local: bool = False


def _utf16_to_index(line: str, col: int) -> int:
    """The str index of UTF-16 column ``col`` in ``line`` (past the end: the end)."""
    units = 0
    for i, ch in enumerate(line):
        if units >= col:
            return i
        units += 2 if ord(ch) > 0xFFFF else 1
    return len(line)


def _utf16_len(text: str) -> int:
    return sum(2 if ord(ch) > 0xFFFF else 1 for ch in text)


def _code_end(line: str) -> tuple[int, list[tuple[int, int]]]:
    """Where the code of ``line`` ends (a ``//`` comment outside strings) and the spans of its
    string literals (a line starting with ``|`` is inside one from its start)."""
    strings: list[tuple[int, int]] = []
    i, n = 0, len(line)
    start = None
    stripped = line.lstrip()
    if stripped.startswith("|"):
        start = 0
        i = len(line) - len(stripped) + 1
    while i < n:
        ch = line[i]
        if start is not None:
            if ch == '"':
                if i + 1 < n and line[i + 1] == '"':  # "" inside a string
                    i += 2
                    continue
                strings.append((start, i + 1))
                start = None
        elif ch == '"':
            start = i
        elif line.startswith("//", i):
            return i, strings
        i += 1
    if start is not None:
        strings.append((start, n))
    return n, strings


def hover_target(line: str, character: int) -> HoverTarget | None:
    """The platform name at UTF-16 column ``character`` of ``line`` (see the module docstring),
    or None."""
    pos = _utf16_to_index(line, character)
    end_code, strings = _code_end(line)
    if pos >= end_code or any(a <= pos < b for a, b in strings):
        return None
    word = None
    for m in _IDENT.finditer(line, 0, end_code):
        if m.start() <= pos < m.end() or (m.end() == pos and pos == end_code):
            word = m
            break
    if word is None:
        return None
    name = word.group(0)
    before = line[: word.start()].rstrip()
    after = line[word.end() :].lstrip()
    start16, end16 = _utf16_len(line[: word.start()]), _utf16_len(line[: word.end()])
    low = name.lower()
    if low in _NEW:  # the cursor on Новый: the type after it
        nxt = _IDENT.match(after)
        if nxt is None:
            return None
        return HoverTarget(f"Новый {nxt.group(0)}", ("constructor",), nxt.group(0), start16, end16)
    prev = re.search(r"([^\W\d]\w*)\s*$", before)
    if prev is not None and prev.group(1).lower() in _NEW and not before[: prev.start()].rstrip().endswith("."):
        return HoverTarget(f"Новый {name}", ("constructor",), name, start16, end16)
    if low in _KEYWORDS or (prev is not None and prev.group(1).lower() in _DECLARING):
        return None  # a keyword, or the name a method or variable declaration gives
    if before.endswith("."):
        owner = re.search(r"(?:^|[^\w.])([^\W\d]\w*)\s*\.$", before)
        if owner is None or after.startswith("("):  # a member of a value (Объект.Метод()): its type is unknown
            return None
        return HoverTarget(f"{owner.group(1)}.{name}", ("enum_value",), name, start16, end16)
    if after.startswith("."):
        return HoverTarget(name, ("enum",), name, start16, end16)
    if after.startswith("("):
        return HoverTarget(name, ("function",), name, start16, end16, local=True)
    return HoverTarget(name, ("function", "global_property"), name, start16, end16, local=True)


_KIND_WORDS = {
    "function": "global function",
    "global_property": "global property",
    "event": "event",
    "type": "type",
    "constructor": "constructor",
    "method": "method",
    "property": "property",
    "enum": "system enumeration",
    "enum_value": "system enumeration value",
    "keyword": "keyword",
}


def _cut(text: str, limit: int) -> str:
    flat = " ".join((text or "").split())
    return flat if len(flat) <= limit else flat[: limit - 1].rsplit(" ", 1)[0] + "…"


def _render(e, sig) -> str:
    params = ", ".join(
        p.name + ("?" if p.optional else "") + (": " + "|".join(p.types) if p.types else "") for p in sig.params
    )
    head = f"Новый {e.owner or e.name}" if e.kind == "constructor" else e.name
    ret = ": " + "|".join(e.return_types) if e.return_types and e.kind != "constructor" else ""
    return f"{head}({params}){ret}"


def _version_key(v: str) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in v.split("."))
    except ValueError:
        return ()


def hover_markdown(entry, used) -> str:
    """The hover text of a platform help entry (``used``: the daemon's
    :class:`daemon.contract.PlatformUsed`, the help that answered)."""
    e = entry
    en = f" ({e.qualified_en})" if e.qualified_en else ""
    lines = [f"**{e.qualified}**{en} — {_KIND_WORDS.get(e.kind, e.kind)}"]
    sigs = [s for s in e.signatures] if e.kind in ("function", "method", "constructor", "event") else []
    if sigs:
        lines.append("\n".join(["```bsl", *(_render(e, s) for s in sigs), "```"]))
    elif e.kind in ("property", "global_property") and e.value_types:
        lines.append(f"Type: {' | '.join(e.value_types)}" + (" (read only)" if e.readonly else ""))
    if e.description:
        lines.append(_cut(e.description, HOVER_DESCRIPTION))
    for s in sigs:
        if not s.params:
            continue
        if len(sigs) > 1:
            lines.append(f"*{s.name or 'variant'}*")
        items = []
        for p in s.params[:HOVER_PARAMS]:
            types = f": {' | '.join(p.types)}" if p.types else ""
            opt = " (optional" + (f", default {p.default}" if p.default else "") + ")" if p.optional else ""
            desc = f" — {_cut(p.description, 160)}" if p.description else ""
            items.append(f"- `{p.name}`{types}{opt}{desc}")
        if len(s.params) > HOVER_PARAMS:
            items.append("- …")
        lines.append("\n".join(items))
    if e.return_types or e.returns:
        ret = " | ".join(e.return_types)
        lines.append("Returns: " + ": ".join(x for x in (ret, _cut(e.returns, 200)) if x))
    facts = []
    if e.availability:
        facts.append("available: " + ", ".join(e.availability))
    if e.since:
        newer = used.version and _version_key(e.since) > _version_key(used.version)
        facts.append(f"since {e.since}" + (f" (newer than {used.version})" if newer else ""))
    if e.deprecated_since:
        facts.append(f"not recommended since {e.deprecated_since}")
    if facts:
        lines.append("; ".join(facts))
    lines.append(f"*Platform help: {used.label}*")
    return "\n\n".join(lines)


def local_method_markdown(chunk) -> str:
    """The hover of a module's own method that has the name under the cursor (it wins over a
    global function of that name): its header and doc comment."""
    lines = [f"```bsl\n{chunk.signature or chunk.name}\n```"]
    doc = "\n".join(x.strip().lstrip("/").strip() for x in (chunk.doc or "").splitlines()).strip()
    if doc:
        lines.append(_cut(doc, HOVER_DESCRIPTION))
    lines.append("*This module's method*")
    return "\n\n".join(lines)
