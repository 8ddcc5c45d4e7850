"""Metadata chunking: object descriptors (Designer ``.xml``, EDT ``.mdo``) -> :class:`Chunk`.

One chunk per object (kind ``object``, symbol ``None``, id ``"<path>::"``) and one per field
(attribute, tabular section and its attributes, dimension, resource, enum value, addressing
attribute, command, form, template; symbol ``"<Вид>:<Имя>"``, id ``"<path>::<symbol>"``).
The symbol convention is the gold set's (``shared/eval/README.md``, "Metadata symbols"):
the kind prefix is always Russian, the name is ``Properties/Name`` of the child of
``<ChildObjects>`` (for ``Form``/``Template`` the element text), and attributes of a tabular
section are ``Реквизит:<ТЧ>.<Имя>``; ``shared/eval/validate_gold.py`` resolves them the same way.

Formats (``shared/corpora/QUIRKS.md`` §13-15):

* Designer: ``<MetaDataObject xmlns="http://v8.1c.ru/8.3/MDClasses">`` -> ``<Catalog>`` ->
  ``<Properties>`` (``<Name>``, ``<Synonym><v8:item><v8:lang>/<v8:content>``, …) and
  ``<ChildObjects>`` (``<Attribute>``/``<TabularSection>``/… with their own ``<Properties>``;
  ``<Form>Name</Form>`` and ``<Template>Name</Template>`` as bare names whose synonyms live in
  ``<Folder>/<Name>/Forms/<F>.xml`` / ``Templates/<T>.xml``).
* EDT: ``<mdclass:Catalog>`` with lower-camel children: ``<name>``,
  ``<synonym><key>/<value>`` (repeated per language), ``<attributes>``, ``<tabularSections>``,
  ``<forms>``, … each holding its own properties directly.

Parsing uses lxml with one parser per thread (no DTDs, no network, no entity expansion).
"""

from __future__ import annotations

import os
import stat
import threading
import unicodedata
from pathlib import Path

from lxml import etree

from ..contract import Chunk, Skip
from ..text.folding import fold, split_words
from ..contract import CONFIGURATION, OBJECT_TYPES, english_type, type_folder
from .files import SkipFile, SourceFile, read_regular_bytes

#: Namespace of Designer descriptors (``<MetaDataObject xmlns=…>`` and the object inside).
MD_NS = "http://v8.1c.ru/8.3/MDClasses"
#: Namespace of EDT ``.mdo`` root elements (``<mdclass:Catalog xmlns:mdclass=…>``).
EDT_NS = "http://g5.1c.ru/v8/dt/metadata/mdclass"

#: Designer ``<ChildObjects>`` element -> (chunk kind, Russian symbol prefix).
FIELD_KINDS: dict[str, tuple[str, str]] = {
    "Attribute": ("attribute", "Реквизит"),
    "TabularSection": ("tabular_section", "ТабличнаяЧасть"),
    "Dimension": ("dimension", "Измерение"),
    "Resource": ("resource", "Ресурс"),
    "EnumValue": ("enum_value", "ЗначениеПеречисления"),
    "AddressingAttribute": ("addressing_attribute", "РеквизитАдресации"),
    "Command": ("command", "Команда"),
    "Form": ("form", "Форма"),
    "Template": ("template", "Макет"),
}

#: EDT child collection element -> the Designer ``<ChildObjects>`` element name.
EDT_CHILDREN: dict[str, str] = {
    "attributes": "Attribute",
    "tabularSections": "TabularSection",
    "dimensions": "Dimension",
    "resources": "Resource",
    "enumValues": "EnumValue",
    "addressingAttributes": "AddressingAttribute",
    "commands": "Command",
    "forms": "Form",
    "templates": "Template",
    "urlTemplates": "URLTemplate",
    "methods": "Method",
    "operations": "Operation",
    "parameters": "Parameter",
    "columns": "Column",
    "accountingFlags": "AccountingFlag",
    "extDimensionAccountingFlags": "ExtDimensionAccountingFlag",
    "recalculations": "Recalculation",
}

#: Key object properties per class (Designer names; EDT names are matched case-insensitively).
OBJECT_PROPS: dict[str, tuple[str, ...]] = {
    "Catalog": (
        "Hierarchical",
        "HierarchyType",
        "CodeLength",
        "DescriptionLength",
        "CodeType",
        "Owners",
        "SubordinationUse",
    ),
    "Document": ("NumberType", "NumberLength", "NumberPeriodicity", "Posting", "RegisterRecords", "BasedOn"),
    "InformationRegister": ("InformationRegisterPeriodicity", "WriteMode", "MainFilterOnPeriod"),
    "AccumulationRegister": ("RegisterType",),
    "AccountingRegister": ("ChartOfAccounts", "Correspondence", "PeriodAdjustmentLength"),
    "CalculationRegister": ("ChartOfCalculationTypes", "Periodicity", "ActionPeriod", "Schedule"),
    "ChartOfCharacteristicTypes": (
        "Type",
        "Hierarchical",
        "CharacteristicExtValues",
        "CodeLength",
        "DescriptionLength",
    ),
    "ChartOfAccounts": ("ExtDimensionTypes", "MaxExtDimensionCount", "CodeMask", "CodeLength", "DescriptionLength"),
    "ChartOfCalculationTypes": ("DependenceOnCalculationTypes", "BaseCalculationTypes", "ActionPeriodUse"),
    "BusinessProcess": ("Task", "BasedOn"),
    "Task": ("Addressing", "MainAddressingAttribute", "CurrentPerformer", "BasedOn"),
    "ExchangePlan": ("DistributedInfoBase", "IncludeConfigurationExtensions", "CodeLength", "DescriptionLength"),
    "Constant": ("Type",),
    "SessionParameter": ("Type",),
    "DefinedType": ("Type",),
    "CommonAttribute": ("Type", "AutoUse", "DataSeparation", "SeparatedDataUse"),
    "FilterCriterion": ("Type",),
    "Report": ("MainDataCompositionSchema", "DefaultForm"),
    "DataProcessor": ("DefaultForm",),
    "DocumentJournal": ("RegisteredDocuments",),
    "CommonModule": (
        "Global",
        "ClientManagedApplication",
        "ClientOrdinaryApplication",
        "Server",
        "ExternalConnection",
        "ServerCall",
        "Privileged",
        "ReturnValuesReuse",
    ),
    "ScheduledJob": (
        "MethodName",
        "Use",
        "Predefined",
        "Key",
        "Description",
        "RestartCountOnFailure",
        "RestartIntervalOnFailure",
    ),
    "EventSubscription": ("Source", "Event", "Handler"),
    "HTTPService": ("RootURL", "ReuseSessions", "SessionMaxAge"),
    "WebService": ("Namespace", "XDTOPackages", "DescriptorFileName"),
    "WSReference": ("LocationURL",),
    "CommonCommand": ("Group", "CommandParameterType", "ParameterUseMode", "ModifiesData"),
    "CommonForm": ("FormType",),
    "CommonTemplate": ("TemplateType",),
    "FunctionalOption": ("Location", "PrivilegedGetMode", "Content"),
    "FunctionalOptionsParameter": ("Use",),
    "XDTOPackage": ("Namespace",),
    "Language": ("LanguageCode",),
    "StyleItem": ("Type",),
    "CommandGroup": ("Category", "Representation"),
    "Subsystem": ("IncludeInCommandInterface",),
    "DocumentNumerator": ("NumberType", "NumberLength", "NumberPeriodicity"),
    "Sequence": ("Documents", "RegisterRecords"),
    "IntegrationService": ("ExternalIntegrationServiceAddress",),
}

#: Key field properties per child class; values equal to a default in _FIELD_DEFAULTS are dropped.
FIELD_PROPS: dict[str, tuple[str, ...]] = {
    "Attribute": ("Indexing", "FillChecking", "Use"),
    "TabularSection": ("Use", "FillChecking"),
    "Dimension": ("Master", "MainFilter", "DenyIncompleteValues", "Indexing", "FillChecking"),
    "Resource": ("Indexing", "FillChecking", "Balance"),
    "AddressingAttribute": ("AddressingDimension", "Indexing"),
    "Command": ("Group", "CommandParameterType", "ParameterUseMode", "ModifiesData"),
    "Form": ("FormType",),
    "Template": ("TemplateType",),
}
_FIELD_DEFAULTS = {"false", "DontIndex", "DontCheck", "ForItem", ""}

#: Types whose ``Type`` property is a value type list (goes to ``Chunk.types``).
_TYPED_OBJECTS = {
    "Constant",
    "SessionParameter",
    "DefinedType",
    "CommonAttribute",
    "FilterCriterion",
    "ChartOfCharacteristicTypes",
}

TEXT_LABELS = {
    "ru": {
        "synonym": "Синоним",
        "comment": "Комментарий",
        "explanation": "Пояснение",
        "tooltip": "Подсказка",
        "type": "Тип",
        "properties": "Свойства",
        "handler": "Обработчик",
        "owner": "Владелец",
        "Attribute": "Реквизиты",
        "TabularSection": "Табличные части",
        "Dimension": "Измерения",
        "Resource": "Ресурсы",
        "EnumValue": "Значения",
        "AddressingAttribute": "Реквизиты адресации",
        "Command": "Команды",
        "Form": "Формы",
        "Template": "Макеты",
        "URLTemplate": "Шаблоны URL",
        "Operation": "Операции",
        "Column": "Графы",
        "AccountingFlag": "Признаки учета",
        "ExtDimensionAccountingFlag": "Признаки учета субконто",
        "Recalculation": "Перерасчеты",
        "Subsystem": "Подсистемы",
        "attribute": "Реквизит",
        "tabular_section": "Табличная часть",
        "dimension": "Измерение",
        "resource": "Ресурс",
        "enum_value": "Значение перечисления",
        "addressing_attribute": "Реквизит адресации",
        "command": "Команда",
        "form": "Форма",
        "template": "Макет",
        "procedure": "процедура",
        "url_template": "Шаблон URL",
        "operation": "Операция",
    },
    "en": {
        "synonym": "Synonym",
        "comment": "Comment",
        "explanation": "Explanation",
        "tooltip": "Tooltip",
        "type": "Type",
        "properties": "Properties",
        "handler": "Handler",
        "owner": "Owner",
        "Attribute": "Attributes",
        "TabularSection": "Tabular sections",
        "Dimension": "Dimensions",
        "Resource": "Resources",
        "EnumValue": "Values",
        "AddressingAttribute": "Addressing attributes",
        "Command": "Commands",
        "Form": "Forms",
        "Template": "Templates",
        "URLTemplate": "URL templates",
        "Operation": "Operations",
        "Column": "Columns",
        "AccountingFlag": "Accounting flags",
        "ExtDimensionAccountingFlag": "Extra dimension accounting flags",
        "Recalculation": "Recalculations",
        "Subsystem": "Subsystems",
        "attribute": "Attribute",
        "tabular_section": "Tabular section",
        "dimension": "Dimension",
        "resource": "Resource",
        "enum_value": "Enum value",
        "addressing_attribute": "Addressing attribute",
        "command": "Command",
        "form": "Form",
        "template": "Template",
        "procedure": "procedure",
        "url_template": "URL template",
        "operation": "Operation",
    },
}

_RU_BY_EN = {en: ru for ru, en in OBJECT_TYPES.values()}
_CLASS_BY_KIND = {kind: cls for cls, (kind, _prefix) in FIELD_KINDS.items()}
_XS_TYPES = {
    "string": "String",
    "decimal": "Number",
    "boolean": "Boolean",
    "dateTime": "Date",
    "base64Binary": "BinaryData",
}

# ----------------------------------------------------------------------------- parsing

_tls = threading.local()


def _parser() -> etree.XMLParser:
    p = getattr(_tls, "parser", None)
    if p is None:
        p = etree.XMLParser(
            resolve_entities=False,
            no_network=True,
            load_dtd=False,
            remove_comments=True,
            remove_pis=True,
            huge_tree=True,
        )
        _tls.parser = p
    return p


def _ln(el) -> str:
    """Local name of an element (``{ns}Name`` -> ``Name``); ``""`` for a node that is not an
    element (an entity reference, which the parser leaves unresolved: ``resolve_entities``
    is off, so a descriptor cannot pull in files or expand a DTD's text)."""
    tag = el.tag
    if not isinstance(tag, str):
        return ""
    return tag[tag.rfind("}") + 1 :] if tag[:1] == "{" else tag


def _text(el) -> str:
    return (el.text or "").strip() if el is not None else ""


class _Node:
    """A metadata object or child in either format, with properties keyed by lower-case
    local name (``"synonym"``, ``"type"``, ``"handler"``) and ordered children
    ``(DesignerKind, element)``."""

    __slots__ = ("el", "props", "children", "name", "name_el")

    def __init__(self, el, designer: bool):
        self.el = el
        self.props: dict[str, list] = {}
        self.children: list[tuple[str, object]] = []
        self.name = ""
        self.name_el = None
        if designer:
            props_el = None
            for ch in el:
                ln = _ln(ch)
                if ln == "Properties":
                    props_el = ch
                elif ln == "ChildObjects":
                    self.children = [(_ln(c), c) for c in ch]
            if props_el is None and len(el) == 0:  # <Form>Name</Form>
                self.name = _text(el)
                self.name_el = el
                return
            if props_el is not None:
                for ch in props_el:
                    self.props.setdefault(_ln(ch).lower(), []).append(ch)
        else:
            for ch in el:
                ln = _ln(ch)
                kind = EDT_CHILDREN.get(ln)
                if kind is not None and len(ch):
                    self.children.append((kind, ch))
                else:
                    self.props.setdefault(ln.lower(), []).append(ch)
        names = self.props.get("name")
        if names:
            self.name_el = names[0]
            self.name = _text(names[0])

    def get(self, key: str) -> list:
        return self.props.get(key.lower(), [])

    def first_text(self, key: str) -> str:
        els = self.props.get(key.lower())
        return _text(els[0]) if els else ""


def _ml(elements: list) -> dict[str, str]:
    """Multi-language string: Designer ``<v8:item><v8:lang>/<v8:content>`` items or EDT
    repeated ``<key>/<value>`` elements -> ``{lang: text}`` (empty texts dropped)."""
    out: dict[str, str] = {}
    for e in elements:
        key = None
        for ch in e:
            ln = _ln(ch)
            if ln == "item":
                lang = content = ""
                for x in ch:
                    xl = _ln(x)
                    if xl == "lang":
                        lang = _text(x)
                    elif xl == "content":
                        content = (x.text or "").strip()
                if content:
                    out[lang] = content
            elif ln == "key":
                key = _text(ch)
            elif ln == "value" and key is not None:
                value = (ch.text or "").strip()
                if value:
                    out[key] = value
    return out


def _strip_prefix(t: str) -> str:
    """``cfg:CatalogRef.X`` -> ``CatalogRef.X``; ``xs:string`` -> ``String``; ``v8:UUID`` -> ``UUID``."""
    if ":" in t:
        pfx, _, rest = t.partition(":")
        if pfx == "xs":
            return _XS_TYPES.get(rest, rest)
        return rest
    return t


def _types(type_el) -> list[str]:
    """Value types of a ``<Type>`` / ``<type>`` element, compact, qualifiers appended:
    ``String(50)``, ``String`` (unlimited), ``Number(10,4)``, ``Number(15,2,nonnegative)``,
    ``Date`` / ``Date(Date)`` / ``Date(Time)``, ``CatalogRef.Пользователи``,
    ``DefinedType.Подразделение`` (a Designer ``v8:TypeSet``)."""
    names: list[str] = []
    quals: dict[str, dict[str, str]] = {}
    for ch in type_el:
        ln = _ln(ch)
        if ln in ("Type", "TypeSet", "TypeId", "types"):
            t = _text(ch)
            if t:
                names.append(_strip_prefix(t))
        elif ln.endswith("Qualifiers") or ln.endswith("qualifiers"):
            quals[ln[:-10].lower()] = {_ln(q).lower(): _text(q) for q in ch}
    out = []
    for t in names:
        if t == "String":
            q = quals.get("string", {})
            n = q.get("length", "")
            out.append(f"String({n})" if n and n != "0" else "String")
        elif t == "Number":
            q = quals.get("number", {})
            digits = q.get("digits") or q.get("precision") or ""
            frac = q.get("fractiondigits") or q.get("scale") or "0"
            nonneg = q.get("allowedsign") == "Nonnegative" or q.get("nonnegative") == "true"
            if digits:
                out.append(f"Number({digits},{frac}{',nonnegative' if nonneg else ''})")
            else:
                out.append("Number")
        elif t == "Date":
            q = quals.get("date", {})
            f = q.get("datefractions", "")
            out.append(f"Date({f})" if f and f != "DateTime" else "Date")
        else:
            out.append(t)
    return out


def _is_type_container(el) -> bool:
    for ch in el:
        if _ln(ch) in ("Type", "TypeSet", "types"):
            return True
    return False


def _value(elements: list) -> str:
    """A property value as one string: text; a type list (``, ``-joined); or the texts of
    the leaf descendants (``<Owners><xr:Item>…``; EDT repeated elements), ``, ``-joined."""
    parts: list[str] = []
    for e in elements:
        if len(e) == 0:
            t = _text(e)
            if t:
                parts.append(t)
        elif _is_type_container(e):
            parts.extend(_types(e))
        else:
            for d in e.iter():
                if len(d) == 0 and isinstance(d.tag, str):
                    t = _text(d)
                    if t:
                        parts.append(t)
    return ", ".join(parts)


def _handler_ru(ref: str) -> str:
    """``CommonModule.X.Method`` -> ``ОбщийМодуль.X.Method`` (text for search)."""
    head, dot, rest = ref.partition(".")
    ru = _RU_BY_EN.get(head)
    return f"{ru}.{rest}" if ru and dot else ref


# ----------------------------------------------------------------------------- positions


class _Lines:
    """Line lookup for positions: text lines split at ``\\n`` (as libxml2 counts them)."""

    def __init__(self, data: bytes):
        if data.startswith(b"\xef\xbb\xbf"):
            data = data[3:]
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            text = data.decode("cp1251", errors="replace")
        self.lines = text.split("\n")
        n = len(self.lines)
        while n > 1 and not self.lines[n - 1].strip():
            n -= 1
        self.last = n  # 1-based number of the last non-blank line
        self._end: dict[object, int] = {}

    def name_range(self, el, name: str) -> tuple[int, int, int, int]:
        """LSP range (0-based line, UTF-16 columns) of ``name`` inside element ``el``."""
        if el is None or not el.sourceline:
            return (0, 0, 0, 0)
        line0 = el.sourceline - 1
        if line0 >= len(self.lines) or not name:
            return (line0, 0, line0, 0)
        line = self.lines[line0]
        idx = line.find(">" + name + "<")
        idx = idx + 1 if idx >= 0 else line.find(name)
        if idx < 0:
            return (line0, 0, line0, 0)
        start = _utf16(line, 0, idx)
        return (line0, start, line0, start + _utf16(line, idx, idx + len(name)))

    def end_line(self, el) -> int:
        """1-based last line of ``el``: the line before the next sibling starts, or the line
        before its parent's end (pretty-printed exports put closing tags on their own line)."""
        cached = self._end.get(el)
        if cached is not None:
            return cached
        nxt = el.getnext()
        while nxt is not None and not isinstance(nxt.tag, str):
            nxt = nxt.getnext()
        if nxt is not None and nxt.sourceline:
            end = nxt.sourceline - 1
        else:
            parent = el.getparent()
            end = self.last if parent is None else self.end_line(parent) - 1
        end = max(end, el.sourceline or 1)
        self._end[el] = end
        return end


def _utf16(s: str, a: int, b: int) -> int:
    seg = s[a:b]
    return len(seg) + sum(1 for ch in seg if ord(ch) > 0xFFFF)


# ----------------------------------------------------------------------------- chunking


def _same_words(name: str, synonym: str) -> bool:
    """True when the synonym just spells the identifier's words (``ФизическоеЛицо`` /
    ``Физическое лицо``), so repeating it adds nothing to the text."""
    a = fold(" ".join(split_words(name)))
    b = fold(" ".join(split_words(synonym.replace(",", " "))))
    return a == b


def _named(name: str, syn: dict[str, str]) -> str:
    extra = [s for s in syn.values() if not _same_words(name, s)]
    return f"{name} ({'; '.join(extra)})" if extra else name


def _lang(syn: dict[str, str]) -> str:
    if not syn or "ru" in syn:
        return "ru"
    return "en" if "en" in syn else "ru"


def _syn_lines(L: dict, syn: dict[str, str]) -> list[str]:
    if len(syn) == 1:
        return [f"{L['synonym']}: {next(iter(syn.values()))}"]
    return [f"{L['synonym']} ({lang}): {text}" for lang, text in syn.items()]


def chunk_metadata(root: Path, source: SourceFile, fmt: str) -> tuple[list[Chunk], list[Skip]]:
    """Chunk one object descriptor.

    ``root``: the export root; ``source``: a :class:`daemon.sources.files.SourceFile` from
    :func:`daemon.sources.scan.scan_export` (``path``, ``owner``, ``object_type``); ``fmt``:
    ``"designer"`` or ``"edt"`` (anything else: guessed from the root element).

    Returns ``(chunks, skips)``: the object chunk first, then field chunks in document
    order. On a file that cannot be read or parsed (truncated, half-written, not XML) it
    returns ``([], [Skip(path, "invalid_xml" | "unreadable" | "parse_failed", detail)])``
    with the parser's message, never raising. Well-formed XML that is not a 1C object
    descriptor returns ``([], [Skip(path, "not_metadata", detail)])``: the root must be a
    Designer ``<MetaDataObject>`` of namespace :data:`MD_NS` whose first element is the
    object element in that namespace, or an EDT ``<mdclass:…>`` element of namespace
    :data:`EDT_NS`; the object element must be the class of ``source.object_type``
    (``<Catalog>`` for ``Справочник``), or any known class when ``object_type`` is empty.
    The file is read with :func:`daemon.sources.files.read_regular_bytes`: a symlink or a FIFO gives
    ``Skip(path, "symlink" | "not_regular")``. A broken Designer form/template descriptor
    only costs that form's synonym and adds an ``invalid_xml`` skip for it (``symlink`` /
    ``not_regular`` when it, or its ``Forms``/``Templates`` folder, is not a plain one).

    Lines are 1-based (lxml ``sourceline``); ``end_line`` is derived from the next
    sibling's start (exact for the pretty-printed files 1C tools write); ``name_range`` is
    the UTF-16 span of the ``<Name>`` text (0-based line).
    """
    root = Path(root)
    path = source.path
    try:
        data = read_regular_bytes(source.fs_path(root))
    except SkipFile as exc:
        return [], [exc.to_skip(path)]
    return chunk_metadata_bytes(data, source, fmt, root=root)


def chunk_metadata_bytes(
    data: bytes, source: SourceFile, fmt: str, *, root: Path | None = None
) -> tuple[list[Chunk], list[Skip]]:
    """:func:`chunk_metadata` on content already read (``root`` is needed only to read
    Designer form/template descriptors; without it forms get no synonyms)."""
    path = source.path
    try:
        doc = etree.fromstring(data, _parser())
    except etree.XMLSyntaxError as exc:
        return [], [Skip(path, "invalid_xml", str(exc))]
    except Exception as exc:  # ValueError on odd input, MemoryError …
        return [], [Skip(path, "invalid_xml", f"{type(exc).__name__}: {exc}")]
    try:
        obj_el, designer, problem = _checked_object(
            doc, english_type(source.object_type) if source.object_type else None
        )
    except Exception as exc:
        return [], [Skip(path, "parse_failed", f"{type(exc).__name__}: {exc}")]
    if obj_el is None:
        return [], [Skip(path, "not_metadata", problem)]
    try:
        return _chunk_doc(obj_el, designer, data, source, fmt, root)
    except Exception as exc:  # a chunker bug must not stop indexing
        return [], [Skip(path, "parse_failed", f"{type(exc).__name__}: {exc}")]


def _object_element(doc):
    """(object element, is_designer) or (None, _)."""
    if _ln(doc) == "MetaDataObject":
        for ch in doc:
            if isinstance(ch.tag, str):
                return ch, True
        return None, True
    return doc, False


def _ns(el) -> str:
    tag = el.tag
    return tag[1 : tag.index("}")] if tag[0] == "{" else ""


def _checked_object(doc, expected: str | None):
    """``(object element, is_designer, "")`` when ``doc`` is a 1C object descriptor whose
    object class is ``expected`` (English singular; any known class when ``None``), else
    ``(None, False, why)``."""
    root_ns, root_ln = _ns(doc), _ln(doc)
    if root_ln == "MetaDataObject" and root_ns == MD_NS:
        el = next((ch for ch in doc if isinstance(ch.tag, str)), None)
        if el is None:
            return None, False, "no metadata object inside <MetaDataObject>"
        designer = True
        where = f"<MetaDataObject> holds <{_ln(el)}>" + (f" of namespace {_ns(el)!r}" if _ns(el) != MD_NS else "")
        if _ns(el) != MD_NS:
            el = None
    elif root_ns == EDT_NS:
        el, designer = doc, False
        where = f"root element <mdclass:{root_ln}>"
    else:
        shown = f"<{root_ln}>" + (f" of namespace {root_ns!r}" if root_ns else " without a namespace")
        return (
            None,
            False,
            (
                f'root element {shown} is not a 1C metadata object: expected <MetaDataObject xmlns="{MD_NS}">'
                f" or an <mdclass:…> element of {EDT_NS}"
            ),
        )
    if el is not None:
        cls = _ln(el)
        if (cls == expected) if expected else (cls in _RU_BY_EN or cls == "Configuration"):
            return el, designer, ""
    want = f"<{expected}>" if expected else "a 1C metadata object class"
    return None, False, f"{where}, expected {want}"


def _chunk_doc(obj_el, designer: bool, data: bytes, source: SourceFile, fmt: str, root: Path | None):
    path = source.path
    cls = _ln(obj_el)
    node = _Node(obj_el, designer)
    lines = _Lines(data)
    skips: list[Skip] = []

    object_type = source.object_type or _RU_BY_EN.get(cls, cls)
    name = node.name or path.rsplit("/", 1)[-1].rsplit(".", 1)[0]
    owner = source.owner or f"{object_type}.{name}"
    syn = _ml(node.get("Synonym"))
    L = TEXT_LABELS[_lang(syn)]
    comment = node.first_text("Comment")
    explanation = _ml(node.get("Explanation"))

    props: dict[str, str] = {}
    for key in OBJECT_PROPS.get(cls, ()):
        els = node.get(key)
        if els:
            v = _value(els)
            if v:
                props[key] = v
    belonging = node.first_text("ObjectBelonging")  # extensions: "Adopted" (borrowed) objects
    if belonging:
        props["ObjectBelonging"] = belonging
    types = _types(node.get("Type")[0]) if cls in _TYPED_OBJECTS and node.get("Type") else []

    # sibling descriptors of Designer forms/templates (synonym, FormType/TemplateType)
    sibling_dir = None
    if designer and root is not None and path.endswith(".xml"):
        sibling_dir = source.fs_path(root).with_suffix("")

    fields: list[Chunk] = []
    groups: dict[str, list[str]] = {}  # Designer kind -> "Name (synonym)" for the object text
    handler_lines: list[str] = []
    ts_lines: list[str] = []  # one line per tabular section with its attributes
    for kind, el in node.children:
        child = _Node(el, designer)
        if not child.name:
            continue
        csyn = _ml(child.get("Synonym"))
        extra_props: dict[str, str] = {}
        if designer and kind in ("Form", "Template") and sibling_dir is not None:
            csyn, extra_props = _sibling_descriptor(sibling_dir, kind, child.name, path, skips)
        if kind not in ("URLTemplate", "Operation", "TabularSection"):
            groups.setdefault(kind, []).append(_named(child.name, csyn))
        if kind == "URLTemplate":
            line, value = _url_template(child, designer)
            props[f"URLTemplate.{child.name}"] = value
            handler_lines.append(f"{L['url_template']} {child.name}: {line}")
            continue
        if kind == "Operation":
            proc = child.first_text("ProcedureName")
            if proc:
                props[f"Operation.{child.name}"] = proc
                handler_lines.append(f"{L['operation']} {_named(child.name, csyn)} → {L['procedure']} {proc}")
            continue
        if kind not in FIELD_KINDS:
            continue
        fields.extend(
            _field_chunks(kind, child, csyn, extra_props, designer, path, owner, object_type, name, syn, lines, L)
        )
        if kind == "TabularSection":
            sub = [_named(c.name, _ml(c.get("Synonym"))) for c in _sub_attributes(child, designer)]
            ts_lines.append(
                f"{L['tabular_section']} {_named(child.name, csyn)}" + (": " + ", ".join(sub) if sub else "")
            )

    if not designer:  # EDT lists nested subsystems by name: <subsystems>Банк</subsystems>
        nested = [_text(e) for e in node.get("subsystems") if len(e) == 0 and _text(e)]
        if nested:
            groups.setdefault("Subsystem", []).extend(nested)

    # text
    en = OBJECT_TYPES.get(type_folder(object_type) or "", ("", ""))[1]
    head = f"{object_type} {name}" + (f" ({en})" if en else "")
    text = [head, *_syn_lines(L, syn)]
    if comment:
        text.append(f"{L['comment']}: {comment}")
    for t in explanation.values():
        text.append(f"{L['explanation']}: {t}")
    for key in ("MethodName", "Handler"):
        if key in props:
            ref = props[key]
            ru = _handler_ru(ref)
            text.append(f"{L['handler']}: {ru}" + (f" ({ref})" if ru != ref else ""))
    if types:
        text.append(f"{L['type']}: {', '.join(types)}")
    hidden = {"MethodName", "Handler", "Type"} if types else {"MethodName", "Handler"}
    shown = {k: v for k, v in props.items() if k not in hidden and "." not in k}
    if shown:
        text.append(f"{L['properties']}: " + "; ".join(f"{k}={v}" for k, v in shown.items()))
    text.extend(handler_lines)
    for kind, items in groups.items():
        text.append(f"{L.get(kind, kind)}: " + ", ".join(items))
        if kind == "Attribute":
            text.extend(ts_lines)
            ts_lines = []
    text.extend(ts_lines)

    start = obj_el.sourceline or 1
    obj_chunk = Chunk(
        id=f"{path}::",
        path=path,
        kind="object",
        name=name,
        owner=owner,
        object_type=object_type,
        symbol=None,
        synonym=syn,
        comment=comment,
        types=types,
        properties=props,
        start_line=start,
        end_line=lines.end_line(obj_el),
        name_range=lines.name_range(node.name_el, name),
        text="\n".join(text),
    )
    return [obj_chunk, *fields], skips


def _sub_attributes(ts: _Node, designer: bool) -> list[_Node]:
    out = []
    for kind, el in ts.children:
        if kind == "Attribute":
            n = _Node(el, designer)
            if n.name:
                out.append(n)
    return out


def _url_template(child: _Node, designer: bool) -> tuple[str, str]:
    """(text line, property value) of an HTTP service URL template with its methods."""
    template = child.first_text("Template")
    methods = []
    for kind, el in child.children:
        if kind != "Method":
            continue
        m = _Node(el, designer)
        verb = m.first_text("HTTPMethod") or m.name
        handler = m.first_text("Handler")
        methods.append(f"{verb} → {handler}" if handler else verb)
    value = template + (" [" + ", ".join(methods) + "]" if methods else "")
    return value, value


def _is_real_dir(p: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(p).st_mode)
    except OSError:
        return False


def _sibling_descriptor(sdir: Path, kind: str, name: str, owner_path: str, skips: list[Skip]):
    """Synonym and FormType/TemplateType from ``<Folder>/<Name>/Forms/<F>.xml``; read only
    through real folders (no symlinked object or ``Forms`` folder) and never through a
    link or from a FIFO."""
    sub = "Forms" if kind == "Form" else "Templates"
    if not (_is_real_dir(sdir) and _is_real_dir(sdir / sub)):
        return {}, {}
    f = sdir / sub / f"{name}.xml"
    rel = owner_path[: -len(".xml")] + f"/{sub}/{name}.xml"
    try:
        data = read_regular_bytes(f)
    except SkipFile as exc:
        if exc.reason != "unreadable":  # absent is normal; links and FIFOs are noted
            skips.append(exc.to_skip(rel))
        return {}, {}
    try:
        doc = etree.fromstring(data, _parser())
    except Exception as exc:
        skips.append(Skip(rel, "invalid_xml", str(exc)))
        return {}, {}
    el, designer, _problem = _checked_object(doc, kind)
    if el is None:
        return {}, {}
    n = _Node(el, designer)
    key = "FormType" if kind == "Form" else "TemplateType"
    v = n.first_text(key)
    return _ml(n.get("Synonym")), ({key: v} if v else {})


def _field_chunks(kind, child, csyn, extra_props, designer, path, owner, object_type, obj_name, obj_syn, lines, L):
    chunk_kind, prefix = FIELD_KINDS[kind]
    out = [
        _field_chunk(
            chunk_kind,
            prefix,
            child.name,
            child,
            csyn,
            extra_props,
            path,
            owner,
            object_type,
            obj_name,
            obj_syn,
            lines,
            L,
        )
    ]
    if kind == "TabularSection":
        for a in _sub_attributes(child, designer):
            out.append(
                _field_chunk(
                    "attribute",
                    prefix="Реквизит",
                    sym_name=f"{child.name}.{a.name}",
                    node=a,
                    syn=_ml(a.get("Synonym")),
                    extra_props={},
                    path=path,
                    owner=owner,
                    object_type=object_type,
                    obj_name=obj_name,
                    obj_syn=obj_syn,
                    lines=lines,
                    L=L,
                    ts=(child.name, csyn),
                )
            )
    return out


def _field_chunk(
    chunk_kind, prefix, sym_name, node, syn, extra_props, path, owner, object_type, obj_name, obj_syn, lines, L, ts=None
) -> Chunk:
    cls = _CLASS_BY_KIND[chunk_kind]
    symbol = f"{prefix}:{sym_name}"
    comment = node.first_text("Comment")
    tooltip = _ml(node.get("ToolTip"))
    type_els = node.get("Type")
    if cls == "Command":
        type_els = []
    types = _types(type_els[0]) if type_els else []
    props: dict[str, str] = {}
    for key in FIELD_PROPS.get(cls, ()):
        els = node.get(key)
        if els:
            v = _value(els)
            if v not in _FIELD_DEFAULTS:
                props[key] = v
    props.update(extra_props)
    label = L[chunk_kind]
    text = [f"{label} {node.name}" + (f": {'; '.join(syn.values())}" if syn else "")]
    if ts is not None:
        ts_name, ts_syn = ts
        text.append(f"{L['tabular_section']} {ts_name}" + (f": {'; '.join(ts_syn.values())}" if ts_syn else ""))
    if types:
        text.append(f"{L['type']}: {', '.join(types)}")
    for t in tooltip.values():
        if t not in syn.values():
            text.append(f"{L['tooltip']}: {t}")
    if comment:
        text.append(f"{L['comment']}: {comment}")
    if props:
        text.append(f"{L['properties']}: " + "; ".join(f"{k}={v}" for k, v in props.items()))
    text.append(f"{object_type} {obj_name}" + (f": {'; '.join(obj_syn.values())}" if obj_syn else ""))
    el = node.el
    return Chunk(
        id=f"{path}::{symbol}",
        path=path,
        kind=chunk_kind,
        name=node.name,
        owner=owner,
        object_type=object_type,
        symbol=symbol,
        synonym=syn,
        comment=comment,
        types=types,
        properties=props,
        start_line=el.sourceline or 1,
        end_line=lines.end_line(el),
        name_range=lines.name_range(node.name_el, node.name),
        text="\n".join(text),
    )


# ----------------------------------------------------------------------------- missing objects


def missing_objects(root: Path) -> list[Skip]:
    """Objects the configuration lists but whose descriptor is not on disk.

    Designer: each child of ``Configuration.xml`` ``<ChildObjects>`` (``<Catalog>Name</Catalog>``)
    must have ``<Folder>/<Name>.xml``. EDT: each reference ``<catalogs>Catalog.Name</catalogs>``
    in ``<project>/src/Configuration/Configuration.mdo`` must have
    ``src/<Folder>/<Name>/<Name>.mdo``. A missing one becomes
    ``Skip(expected_path, "missing_on_disk", detail)``, a note, not an error (a trimmed
    export such as the ssl31-ru subset lists 104 dropped roles and 32 data processors).
    Unknown element names are ignored; an unreadable or invalid configuration descriptor
    returns ``[Skip(path, "invalid_xml" | "unreadable", detail)]``. Sorted by path.

    Names are compared in NFC: an object whose folder or file is named in NFD on disk is
    found (and an EDT project in an NFD-named folder is read). A descriptor that is a
    symlink counts as present (the scanner reports it as a ``symlink`` skip).
    """
    from .scan import detect_export

    root = Path(root)
    info = detect_export(root)
    out: list[Skip] = []
    disk = _DiskNames(root)
    if info.format == "designer":
        cfg = root / "Configuration.xml"
        doc = _parse_file(cfg, "Configuration.xml", out)
        if doc is None:
            return out
        obj, _ = _object_element(doc)
        co = None if obj is None else next((c for c in obj if _ln(c) == "ChildObjects"), None)
        for ch in co if co is not None else ():
            folder = type_folder(_ln(ch))
            name = _text(ch)
            if not folder or not name:
                continue
            rel = f"{folder}/{name}.xml"
            if disk.find(rel) is None:
                out.append(
                    Skip(rel, "missing_on_disk", f"Configuration.xml lists {_ln(ch)}.{name}; {rel} is not on disk")
                )
    elif info.format == "edt":
        collections = {f.lower(): f for f in OBJECT_TYPES}
        for proj in info.projects:
            src = proj.src
            cfg_rel = f"{src}/Configuration/Configuration.mdo" if src else "Configuration/Configuration.mdo"
            doc = _parse_file(disk.find(cfg_rel) or root / cfg_rel, cfg_rel, out)
            if doc is None:
                continue
            for ch in doc:
                if not isinstance(ch.tag, str) or len(ch) or _ln(ch).lower() not in collections:
                    continue
                ref = _text(ch)
                cls, _, name = ref.partition(".")
                folder = type_folder(cls)
                if not folder or not name or "." in name:
                    continue
                rel = f"{src}/{folder}/{name}/{name}.mdo" if src else f"{folder}/{name}/{name}.mdo"
                if disk.find(rel) is None:
                    out.append(Skip(rel, "missing_on_disk", f"{cfg_rel} lists {ref}; {rel} is not on disk"))
    out.sort(key=lambda s: s.path)
    return out


class _DiskNames:
    """Finds a relative NFC path on disk whatever normalisation its names have there (Linux
    file systems keep names as written; an NFD folder is not found under its NFC name).
    Tries the path as given and in NFD, then walks it component by component comparing
    NFC forms (folder listings cached: only missing paths pay for it)."""

    def __init__(self, root: Path):
        self.root = root
        self._listings: dict[Path, dict[str, str]] = {}

    def _listing(self, d: Path) -> dict[str, str]:
        names = self._listings.get(d)
        if names is None:
            names = {}
            try:
                with os.scandir(d) as it:
                    for e in it:
                        names.setdefault(unicodedata.normalize("NFC", e.name), e.name)
            except OSError:
                pass
            self._listings[d] = names
        return names

    def find(self, rel: str) -> Path | None:
        """The on-disk path of ``rel`` (exists, as a link too), or ``None``."""
        p = self.root / rel
        if os.path.lexists(p):
            return p
        nfd = unicodedata.normalize("NFD", rel)
        if nfd != rel and os.path.lexists(self.root / nfd):
            return self.root / nfd
        cur = self.root
        for part in unicodedata.normalize("NFC", rel).split("/"):
            actual = self._listing(cur).get(part)
            if actual is None:
                return None
            cur = cur / actual
        return cur


def _parse_file(full: Path, rel: str, out: list[Skip]):
    try:
        data = read_regular_bytes(full)
    except SkipFile as exc:
        out.append(exc.to_skip(rel))
        return None
    try:
        return etree.fromstring(data, _parser())
    except Exception as exc:
        out.append(Skip(rel, "invalid_xml", str(exc)))
        return None


__all__ = [
    "CONFIGURATION",
    "EDT_CHILDREN",
    "FIELD_KINDS",
    "FIELD_PROPS",
    "OBJECT_PROPS",
    "chunk_metadata",
    "chunk_metadata_bytes",
    "missing_objects",
]
