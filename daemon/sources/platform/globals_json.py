"""The bundled global-context data set (``daemon/data/platform/bslGlobals.json.gz``, MIT; see the
README next to it) read into :class:`~.entries.Entry` records.

It is what platform help answers from on a machine without 1C:Enterprise installed (a fresh
machine, the demo, CI): global functions and properties, platform types with their
constructors, methods and properties, system enumerations with their values, and the
language keywords, in Russian and English. It has no platform versions and no availability.

The file's shape (``shared/corpora/README.md``): ``globalfunctions``/``globalvariables`` map a
name to ``{name, name_en, description, returns?, signature?}``; ``signature`` maps a variant
name (``default`` for the only one) to ``{СтрокаПараметров, Параметры}``, where
``СтрокаПараметров`` is ``(Имя: Тип, Необязательный?: Тип): ТипРезультата``; ``classes`` add
``methods``, ``properties`` and ``constructors`` (variant name -> ``{signature, params,
description}``); ``systemEnum`` adds ``values``; ``keywords`` lists ``ru`` and ``en`` words;
``structureMenu`` groups the names into the help's categories. A record that does not fit is
skipped with a :class:`daemon.contract.Skip` naming it; the rest loads.
"""

from __future__ import annotations

import gzip
import re
import time
from pathlib import Path
from typing import Any

import msgspec

from daemon.contract import Skip

from .entries import Entry, Param, Signature, split_top

__all__ = ["DATA_PATH", "SOURCE", "GlobalsResult", "load_globals", "parse_globals"]

#: The data set shipped with the package, gzip-compressed (3.2 MB of JSON in 0.36 MB).
DATA_PATH = Path(__file__).resolve().parents[2] / "data" / "platform" / "bslGlobals.json.gz"
#: ``Entry.source`` of its entries.
SOURCE = "bslGlobals.json"

_SIG_RE = re.compile(r"^\s*\((.*)\)\s*(?::\s*(.+?))?\s*$", re.S)
_TYPE_RE = re.compile(r"^\s*(?:Тип|Type):\s*(.+?)\.(?:\s|$)(.*)$", re.S)
_VARIADIC_RE = re.compile(r"^\s*([,.]*\.\.\.[,.]*)\s*(\?)?\s*:\s*(.*)$", re.S)
_DEFAULT_RE = re.compile(r"(?:Значение по умолчанию|Default value):\s*(.+?)\.?(?:\s*$|\.\s)", re.S)

#: The data set's keywords come as two unaligned lists; these are the pairs of the language
#: reference (statement and literal words of BSL).
_KEYWORD_PAIRS = {
    "Процедура": "Procedure",
    "Функция": "Function",
    "Экспорт": "Export",
    "Перем": "Var",
    "Неопределено": "Undefined",
    "Истина": "True",
    "Ложь": "False",
    "КонецПроцедуры": "EndProcedure",
    "КонецФункции": "EndFunction",
    "Прервать": "Break",
    "Продолжить": "Continue",
    "Возврат": "Return",
    "Использовать": "Use",
    "ВызватьИсключение": "Raise",
    "Если": "If",
    "Тогда": "Then",
    "ИначеЕсли": "ElsIf",
    "КонецЦикла": "EndDo",
    "Иначе": "Else",
    "Исключение": "Except",
    "КонецПопытки": "EndTry",
    "КонецЕсли": "EndIf",
    "Попытка": "Try",
    "Пока": "While",
    "Для": "For",
    "Каждого": "Each",
    "Из": "In",
    "По": "To",
    "Цикл": "Do",
    "НЕ": "NOT",
    "И": "AND",
    "ИЛИ": "OR",
    "NULL": "NULL",
}


class GlobalsResult(msgspec.Struct, kw_only=True):
    """What :func:`load_globals` read: the entries (in file order: global functions, global
    properties, then per type the type, its constructor, methods and properties, then per
    enumeration the enumeration and its values, then keywords), the records skipped,
    ``counts`` per entry kind, and ``seconds`` spent."""

    source: str
    entries: list[Entry]
    skips: list[Skip] = []
    counts: dict[str, int] = {}
    seconds: float = 0.0


def load_globals(path: Path | None = None) -> GlobalsResult:
    """Read the data set (default: the bundled :data:`DATA_PATH`; a ``.gz`` file is
    decompressed). Raises ``OSError`` when the file cannot be read and ``ValueError`` naming it
    when it is not a JSON object; records that do not fit are skipped (see
    :func:`parse_globals`)."""
    path = path or DATA_PATH
    t0 = time.perf_counter()
    raw = path.read_bytes()
    try:
        if path.suffix == ".gz":
            raw = gzip.decompress(raw)
        data = msgspec.json.decode(raw)
    except (msgspec.DecodeError, gzip.BadGzipFile, EOFError) as exc:
        raise ValueError(f"{path}: not JSON (or a damaged .gz): {exc}") from exc
    if not isinstance(data, dict):
        raise ValueError(f"{path}: not a JSON object (a global-context data set has globalfunctions, classes, ...)")
    result = parse_globals(data, source=path.name if path != DATA_PATH else SOURCE)
    result.seconds = time.perf_counter() - t0
    return result


def parse_globals(data: dict[str, Any], *, source: str = SOURCE) -> GlobalsResult:
    """Entries of a decoded data set (see the module doc). A record that is not an object,
    lacks its name or has a signature it cannot read gives a :class:`Skip` (``path`` the
    source, ``reason`` ``bad_entry``, ``detail`` the section and key) and is left out."""
    reader = _Reader(source, _categories(data.get("structureMenu")))
    reader.section(data, "globalfunctions", reader.function)
    reader.section(data, "globalvariables", reader.global_property)
    reader.section(data, "classes", reader.type_)
    reader.section(data, "systemEnum", reader.enum)
    reader.keywords(data.get("keywords"))
    counts: dict[str, int] = {}
    for e in reader.entries:
        counts[e.kind] = counts.get(e.kind, 0) + 1
    return GlobalsResult(source=source, entries=reader.entries, skips=reader.skips, counts=counts)


def _categories(menu: Any) -> dict[tuple[str, str], str]:
    """``{(section, name): category}`` from ``structureMenu`` (``global`` names functions and
    properties, ``classes`` names types)."""
    out: dict[tuple[str, str], str] = {}
    if not isinstance(menu, dict):
        return out
    for section in ("global", "classes"):
        groups = menu.get(section)
        if not isinstance(groups, dict):
            continue
        for category, names in groups.items():
            if isinstance(names, dict):
                for name in names:
                    out.setdefault((section, name), category)
    return out


def _text(value: Any) -> str:
    return re.sub(r"\s+", " ", value).strip() if isinstance(value, str) else ""


def _split_types(text: str) -> list[str]:
    return [t for t in (p.strip() for p in re.split(r"[,;|]", text)) if t]


def _returns(text: str) -> tuple[list[str], str]:
    """``"Тип: Число. Позиция ..."`` -> (["Число"], "Позиция ..."); text without a type
    statement is all description."""
    m = _TYPE_RE.match(text)
    if not m:
        return [], text
    return _split_types(m.group(1)), m.group(2).strip()


class _BadRecord(ValueError):
    pass


class _Reader:
    def __init__(self, source: str, categories: dict[tuple[str, str], str]) -> None:
        self.source = source
        self.categories = categories
        self.entries: list[Entry] = []
        self.skips: list[Skip] = []
        self._keys: set[str] = set()

    def skip(self, where: str, why: str) -> None:
        self.skips.append(Skip(self.source, "bad_entry", f"{where}: {why}"))

    def add(self, entry: Entry, where: str) -> None:
        if entry.key in self._keys:
            self.skip(where, f"a second {entry.kind} {entry.qualified}")
            return
        self._keys.add(entry.key)
        self.entries.append(entry)

    def section(self, data: dict[str, Any], name: str, read) -> None:
        records = data.get(name)
        if records is None:
            return
        if not isinstance(records, dict):
            self.skip(name, "not an object")
            return
        for key, record in records.items():
            where = f"{name}.{key}"
            try:
                if not isinstance(record, dict):
                    raise _BadRecord("not an object")
                read(record, where)
            except _BadRecord as exc:
                self.skip(where, str(exc))

    # --- records --------------------------------------------------------------------------
    def _names(self, record: dict[str, Any]) -> tuple[str, str]:
        name = _text(record.get("name"))
        if not name:
            raise _BadRecord("no name")
        return name, _text(record.get("name_en"))

    def _signatures(self, record: dict[str, Any], where: str) -> tuple[list[Signature], list[str]]:
        """Variants and the result types the signature strings state."""
        raw = record.get("signature")
        if raw is None:
            return [], []
        if not isinstance(raw, dict):
            raise _BadRecord("signature is not an object")
        sigs: list[Signature] = []
        result: list[str] = []
        for variant, body in raw.items():
            if not isinstance(body, dict):
                raise _BadRecord(f"signature {variant!r} is not an object")
            params, ret = _parse_params(body.get("СтрокаПараметров"), body.get("Параметры"), f"{where} {variant}")
            for t in ret:
                if t not in result:
                    result.append(t)
            sigs.append(
                Signature(
                    name="" if variant == "default" else variant,
                    syntax=_text(body.get("СтрокаПараметров")),
                    params=params,
                )
            )
        return sigs, result

    def function(self, record: dict[str, Any], where: str) -> None:
        name, name_en = self._names(record)
        sigs, sig_types = self._signatures(record, where)
        types, returns = _returns(_text(record.get("returns")))
        self.add(
            Entry(
                kind="function",
                name=name,
                name_en=name_en,
                signatures=sigs,
                return_types=types or sig_types,
                returns=returns,
                description=_text(record.get("description")),
                category=self.categories.get(("global", name), ""),
                source=self.source,
            ),
            where,
        )

    def global_property(self, record: dict[str, Any], where: str) -> None:
        name, name_en = self._names(record)
        self.add(
            Entry(
                kind="global_property",
                name=name,
                name_en=name_en,
                description=_text(record.get("description")),
                category=self.categories.get(("global", name), ""),
                source=self.source,
            ),
            where,
        )

    def type_(self, record: dict[str, Any], where: str) -> None:
        name, name_en = self._names(record)
        category = self.categories.get(("classes", name), "")
        self.add(
            Entry(
                kind="type",
                name=name,
                name_en=name_en,
                description=_text(record.get("description")),
                category=category,
                source=self.source,
            ),
            where,
        )
        ctors = record.get("constructors")
        if isinstance(ctors, dict) and ctors:
            sigs = []
            for variant, body in ctors.items():
                if not isinstance(body, dict):
                    self.skip(f"{where}.constructors.{variant}", "not an object")
                    continue
                try:
                    params, _ = _parse_params(body.get("signature"), body.get("params"), f"{where} {variant}")
                except _BadRecord as exc:
                    self.skip(f"{where}.constructors.{variant}", str(exc))
                    continue
                sigs.append(
                    Signature(
                        name=variant,
                        syntax=f"Новый {name}{_text(body.get('signature'))}",
                        params=params,
                        description=_text(body.get("description")),
                    )
                )
            if sigs:
                self.add(
                    Entry(
                        kind="constructor",
                        name=name,
                        name_en=name_en,
                        owner=name,
                        owner_en=name_en,
                        signatures=sigs,
                        category=category,
                        source=self.source,
                    ),
                    f"{where}.constructors",
                )
        self._members(record, "methods", "method", name, name_en, where)
        self._members(record, "properties", "property", name, name_en, where)

    def _members(self, record: dict[str, Any], section: str, kind: str, owner: str, owner_en: str, where: str) -> None:
        members = record.get(section)
        if members is None:
            return
        if not isinstance(members, dict):
            self.skip(f"{where}.{section}", "not an object")
            return
        for key, m in members.items():
            mwhere = f"{where}.{section}.{key}"
            try:
                if not isinstance(m, dict):
                    raise _BadRecord("not an object")
                name, name_en = self._names(m)
                sigs, sig_types = self._signatures(m, mwhere) if kind == "method" else ([], [])
                types, returns = _returns(_text(m.get("returns")))
                description = _text(m.get("description"))
                value_types: list[str] = []
                if kind == "property":
                    value_types, rest = _returns(description)
                    description = rest if value_types else description
                self.add(
                    Entry(
                        kind=kind,
                        name=name,
                        name_en=name_en,
                        owner=owner,
                        owner_en=owner_en,
                        signatures=sigs,
                        return_types=types or sig_types,
                        returns=returns,
                        value_types=value_types,
                        description=description,
                        source=self.source,
                    ),
                    mwhere,
                )
            except _BadRecord as exc:
                self.skip(mwhere, str(exc))

    def enum(self, record: dict[str, Any], where: str) -> None:
        name, name_en = self._names(record)
        self.add(
            Entry(
                kind="enum",
                name=name,
                name_en=name_en,
                description=_text(record.get("description")),
                source=self.source,
            ),
            where,
        )
        values = record.get("values")
        if values is None:
            return
        if isinstance(values, dict):
            items = list(values.items())
        elif isinstance(values, list):
            items = [(str(i), v) for i, v in enumerate(values)]
        else:
            self.skip(f"{where}.values", "not an object")
            return
        for key, v in items:
            vwhere = f"{where}.values.{key}"
            try:
                if not isinstance(v, dict):
                    raise _BadRecord("not an object")
                vname, vname_en = self._names(v)
            except _BadRecord as exc:
                self.skip(vwhere, str(exc))
                continue
            self.add(
                Entry(
                    kind="enum_value",
                    name=vname,
                    name_en=vname_en,
                    owner=name,
                    owner_en=name_en,
                    description=_text(v.get("description")),
                    source=self.source,
                ),
                vwhere,
            )

    def keywords(self, words: Any) -> None:
        if words is None:
            return
        if not isinstance(words, dict):
            self.skip("keywords", "not an object")
            return
        ru_words = words.get("ru") or {}
        en_words = set(words.get("en") or ())
        paired: set[str] = set()
        for word in ru_words:
            en = _KEYWORD_PAIRS.get(word, "")
            if en in en_words:
                paired.add(en)
            self.add(
                Entry(kind="keyword", name=word, name_en=en if en in en_words else "", source=self.source),
                f"keywords.ru.{word}",
            )
        for word in en_words - paired:
            self.add(Entry(kind="keyword", name=word, name_en=word, source=self.source), f"keywords.en.{word}")


def _parse_params(signature: Any, described: Any, where: str) -> tuple[list[Param], list[str]]:
    """Parameters of ``(Имя: Тип, Необязательный?: Тип): Результат`` with their descriptions
    from ``{Имя: описание}``; also the result types. ``_BadRecord`` for a string that is not
    of that shape."""
    if signature is None or signature == "":
        return [], []
    if not isinstance(signature, str):
        raise _BadRecord("the signature is not a string")
    m = _SIG_RE.match(signature)
    if not m:
        raise _BadRecord(f"cannot read the signature {signature!r}")
    descriptions = described if isinstance(described, dict) else {}
    params: list[Param] = []
    inner = m.group(1)
    variadic = _VARIADIC_RE.match(inner)
    if variadic:  # ПродолжитьВызов(<,...,>): any number of parameters, described under ",...,"
        desc = _text(descriptions.get(variadic.group(1)))
        param = Param(
            name="...", types=_split_types(variadic.group(3)), optional=bool(variadic.group(2)), description=desc
        )
        return [param], _split_types(m.group(2) or "")
    for part in split_top(inner):
        pname, _, ptype = part.partition(":")
        pname = pname.strip()
        optional = pname.endswith("?")
        pname = pname.rstrip("?").strip()
        if not pname:
            raise _BadRecord(f"a parameter without a name in {signature!r}")
        desc = _text(descriptions.get(pname))
        dm = _DEFAULT_RE.search(desc)
        params.append(
            Param(
                name=pname,
                types=_split_types(ptype),
                optional=optional,
                default=dm.group(1).strip() if dm else "",
                description=desc,
            )
        )
    return params, _split_types(m.group(2) or "")
