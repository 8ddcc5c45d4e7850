"""Metadata chunking: object descriptors (Designer ``.xml``, EDT ``.mdo``) -> :class:`Chunk`.

One chunk per object (kind ``object``, symbol ``None``, id ``"<path>::"``) and one per field
(attribute, tabular section and its attributes, dimension, resource, enum value, addressing
attribute, command, form, template; symbol ``"<Вид>:<Имя>"``, id ``"<path>::<symbol>"``).
The symbol convention is the gold set's: the kind prefix is always Russian, the name is
``Properties/Name`` of the child of ``<ChildObjects>`` (for ``Form``/``Template`` the element
text), and attributes of a tabular section are ``Реквизит:<ТЧ>.<Имя>``.

The text of each chunk lists what the descriptor says in words a search can match (labels in
the configuration's language: :data:`TEXT_LABELS`). Reading the two formats is
:mod:`daemon.sources.metadata_xml`'s job; :func:`missing_objects` reports the objects a
configuration lists but whose descriptor is not on disk.
"""

from __future__ import annotations

import os
import stat
import unicodedata
from pathlib import Path

from lxml import etree

from ..contract import OBJECT_TYPES, Chunk, Skip, english_type, type_folder
from ..text.folding import fold, split_words
from .files import SkipFile, SourceFile, read_regular_bytes
from .metadata_xml import (
    RU_BY_EN,
    Node,
    SourceLines,
    checked_object,
    local_name,
    multilang,
    object_element,
    prop_value,
    text_of,
    value_types,
    xml_parser,
)

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

_CLASS_BY_KIND = {kind: cls for cls, (kind, _prefix) in FIELD_KINDS.items()}


def _handler_ru(ref: str) -> str:
    """``CommonModule.X.Method`` -> ``ОбщийМодуль.X.Method`` (text for search)."""
    head, dot, rest = ref.partition(".")
    ru = RU_BY_EN.get(head)
    return f"{ru}.{rest}" if ru and dot else ref


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
        doc = etree.fromstring(data, xml_parser())
    except etree.XMLSyntaxError as exc:
        return [], [Skip(path, "invalid_xml", str(exc))]
    except Exception as exc:  # ValueError on odd input, MemoryError …
        return [], [Skip(path, "invalid_xml", f"{type(exc).__name__}: {exc}")]
    try:
        obj_el, designer, problem = checked_object(
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


class _Object:
    """The object a descriptor describes, as the text of its chunks needs it: its format,
    path, owner, Russian type, name and synonyms, the descriptor's lines and the labels of
    its language (a dict of :data:`TEXT_LABELS`)."""

    __slots__ = ("designer", "labels", "lines", "name", "object_type", "owner", "path", "syn")

    def __init__(self, designer, path, owner, object_type, name, syn, lines, labels) -> None:
        self.designer, self.path, self.owner, self.object_type = designer, path, owner, object_type
        self.name, self.syn, self.lines, self.labels = name, syn, lines, labels


class _Children:
    """What the object text lists of the children of an object: per Designer kind the
    ``Name (synonym)`` items, the URL template and operation lines, one line per tabular
    section with its attributes."""

    __slots__ = ("groups", "handler_lines", "ts_lines")

    def __init__(self) -> None:
        self.groups: dict[str, list[str]] = {}
        self.handler_lines: list[str] = []
        self.ts_lines: list[str] = []


def _chunk_doc(obj_el, designer: bool, data: bytes, source: SourceFile, fmt: str, root: Path | None):
    """``(chunks, skips)`` of a checked object element: the object chunk, then the field
    chunks in document order."""
    path = source.path
    cls = local_name(obj_el)
    node = Node(obj_el, designer)
    lines = SourceLines(data)
    skips: list[Skip] = []
    object_type = source.object_type or RU_BY_EN.get(cls, cls)
    name = node.name or path.rsplit("/", 1)[-1].rsplit(".", 1)[0]
    syn = multilang(node.get("Synonym"))
    labels = TEXT_LABELS[_lang(syn)]
    obj = _Object(designer, path, source.owner or f"{object_type}.{name}", object_type, name, syn, lines, labels)
    props = _object_props(node, cls)
    types = value_types(node.get("Type")[0]) if cls in _TYPED_OBJECTS and node.get("Type") else []
    # sibling descriptors of Designer forms/templates (synonym, FormType/TemplateType)
    sibling_dir = None
    if designer and root is not None and path.endswith(".xml"):
        sibling_dir = source.fs_path(root).with_suffix("")
    fields: list[Chunk] = []
    children = _Children()
    for kind, el in node.children:
        child = Node(el, designer)
        if child.name:
            fields.extend(_child(obj, kind, child, sibling_dir, props, children, skips))
    if not designer:  # EDT lists nested subsystems by name: <subsystems>Банк</subsystems>
        nested = [text_of(e) for e in node.get("subsystems") if len(e) == 0 and text_of(e)]
        if nested:
            children.groups.setdefault("Subsystem", []).extend(nested)
    comment = node.first_text("Comment")
    text = _object_text(obj, comment, multilang(node.get("Explanation")), props, types, children)
    obj_chunk = Chunk(
        id=f"{path}::",
        path=path,
        kind="object",
        name=name,
        owner=obj.owner,
        object_type=object_type,
        symbol=None,
        synonym=syn,
        comment=comment,
        types=types,
        properties=props,
        start_line=obj_el.sourceline or 1,
        end_line=lines.end_line(obj_el),
        name_range=lines.name_range(node.name_el, name),
        text="\n".join(text),
    )
    return [obj_chunk, *fields], skips


def _object_props(node: Node, cls: str) -> dict[str, str]:
    """The key properties of an object of class ``cls`` (:data:`OBJECT_PROPS`) that have a
    value, and ``ObjectBelonging`` of an extension's object."""
    props: dict[str, str] = {}
    for key in OBJECT_PROPS.get(cls, ()):
        els = node.get(key)
        if els:
            v = prop_value(els)
            if v:
                props[key] = v
    belonging = node.first_text("ObjectBelonging")  # extensions: "Adopted" (borrowed) objects
    if belonging:
        props["ObjectBelonging"] = belonging
    return props


def _child(
    obj: _Object,
    kind: str,
    child: Node,
    sibling_dir: Path | None,
    props: dict[str, str],
    children: _Children,
    skips: list[Skip],
) -> list[Chunk]:
    """One child of the object (Designer kind ``kind``): noted in ``children`` (and an URL
    template's or operation's handler in ``props``); returns its field chunks (with a tabular
    section's attributes), ``[]`` for a child that is no field."""
    L = obj.labels
    csyn = multilang(child.get("Synonym"))
    extra_props: dict[str, str] = {}
    if obj.designer and kind in ("Form", "Template") and sibling_dir is not None:
        csyn, extra_props = _sibling_descriptor(sibling_dir, kind, child.name, obj.path, skips)
    if kind not in ("URLTemplate", "Operation", "TabularSection"):
        children.groups.setdefault(kind, []).append(_named(child.name, csyn))
    if kind == "URLTemplate":
        line, value = _url_template(child, obj.designer)
        props[f"URLTemplate.{child.name}"] = value
        children.handler_lines.append(f"{L['url_template']} {child.name}: {line}")
        return []
    if kind == "Operation":
        proc = child.first_text("ProcedureName")
        if proc:
            props[f"Operation.{child.name}"] = proc
            children.handler_lines.append(f"{L['operation']} {_named(child.name, csyn)} → {L['procedure']} {proc}")
        return []
    if kind not in FIELD_KINDS:
        return []
    chunk_kind, prefix = FIELD_KINDS[kind]
    out = [_field_chunk(obj, chunk_kind, prefix, child.name, child, csyn, extra_props)]
    if kind == "TabularSection":
        subs = _sub_attributes(child, obj.designer)
        for a in subs:
            syn = multilang(a.get("Synonym"))
            out.append(
                _field_chunk(obj, "attribute", "Реквизит", f"{child.name}.{a.name}", a, syn, {}, (child.name, csyn))
            )
        sub = [_named(c.name, multilang(c.get("Synonym"))) for c in subs]
        children.ts_lines.append(
            f"{L['tabular_section']} {_named(child.name, csyn)}" + (": " + ", ".join(sub) if sub else "")
        )
    return out


def _object_text(
    obj: _Object,
    comment: str,
    explanation: dict[str, str],
    props: dict[str, str],
    types: list[str],
    children: _Children,
) -> list[str]:
    """The lines of the object chunk's text: head, synonyms, comment, explanation, handler,
    types, properties, then what it holds (tabular sections after the attributes)."""
    L = obj.labels
    en = OBJECT_TYPES.get(type_folder(obj.object_type) or "", ("", ""))[1]
    head = f"{obj.object_type} {obj.name}" + (f" ({en})" if en else "")
    text = [head, *_syn_lines(L, obj.syn)]
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
    text.extend(children.handler_lines)
    ts_lines = children.ts_lines
    for kind, items in children.groups.items():
        text.append(f"{L.get(kind, kind)}: " + ", ".join(items))
        if kind == "Attribute":
            text.extend(ts_lines)
            ts_lines = []
    text.extend(ts_lines)
    return text


def _sub_attributes(ts: Node, designer: bool) -> list[Node]:
    out = []
    for kind, el in ts.children:
        if kind == "Attribute":
            n = Node(el, designer)
            if n.name:
                out.append(n)
    return out


def _url_template(child: Node, designer: bool) -> tuple[str, str]:
    """(text line, property value) of an HTTP service URL template with its methods."""
    template = child.first_text("Template")
    methods = []
    for kind, el in child.children:
        if kind != "Method":
            continue
        m = Node(el, designer)
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
        doc = etree.fromstring(data, xml_parser())
    except Exception as exc:
        skips.append(Skip(rel, "invalid_xml", str(exc)))
        return {}, {}
    el, designer, _problem = checked_object(doc, kind)
    if el is None:
        return {}, {}
    n = Node(el, designer)
    key = "FormType" if kind == "Form" else "TemplateType"
    v = n.first_text(key)
    return multilang(n.get("Synonym")), ({key: v} if v else {})


def _field_chunk(
    obj: _Object,
    chunk_kind: str,
    prefix: str,
    sym_name: str,
    node: Node,
    syn: dict[str, str],
    extra_props: dict[str, str],
    ts: tuple[str, dict[str, str]] | None = None,
) -> Chunk:
    """The chunk of one field of ``obj``: symbol ``<prefix>:<sym_name>``; ``ts``: the name and
    synonyms of the tabular section an attribute belongs to."""
    cls = _CLASS_BY_KIND[chunk_kind]
    symbol = f"{prefix}:{sym_name}"
    comment = node.first_text("Comment")
    type_els = [] if cls == "Command" else node.get("Type")
    types = value_types(type_els[0]) if type_els else []
    props: dict[str, str] = {}
    for key in FIELD_PROPS.get(cls, ()):
        els = node.get(key)
        if els:
            v = prop_value(els)
            if v not in _FIELD_DEFAULTS:
                props[key] = v
    props.update(extra_props)
    el = node.el
    return Chunk(
        id=f"{obj.path}::{symbol}",
        path=obj.path,
        kind=chunk_kind,
        name=node.name,
        owner=obj.owner,
        object_type=obj.object_type,
        symbol=symbol,
        synonym=syn,
        comment=comment,
        types=types,
        properties=props,
        start_line=el.sourceline or 1,
        end_line=obj.lines.end_line(el),
        name_range=obj.lines.name_range(node.name_el, node.name),
        text="\n".join(_field_text(obj, chunk_kind, node, syn, ts, types, comment, props)),
    )


def _field_text(
    obj: _Object,
    chunk_kind: str,
    node: Node,
    syn: dict[str, str],
    ts: tuple[str, dict[str, str]] | None,
    types: list[str],
    comment: str,
    props: dict[str, str],
) -> list[str]:
    """The lines of a field chunk's text: kind and name with synonyms, its tabular section,
    types, tooltips, comment, properties, and last the object's head line."""
    L = obj.labels
    text = [f"{L[chunk_kind]} {node.name}" + (f": {'; '.join(syn.values())}" if syn else "")]
    if ts is not None:
        ts_name, ts_syn = ts
        text.append(f"{L['tabular_section']} {ts_name}" + (f": {'; '.join(ts_syn.values())}" if ts_syn else ""))
    if types:
        text.append(f"{L['type']}: {', '.join(types)}")
    for t in multilang(node.get("ToolTip")).values():
        if t not in syn.values():
            text.append(f"{L['tooltip']}: {t}")
    if comment:
        text.append(f"{L['comment']}: {comment}")
    if props:
        text.append(f"{L['properties']}: " + "; ".join(f"{k}={v}" for k, v in props.items()))
    text.append(f"{obj.object_type} {obj.name}" + (f": {'; '.join(obj.syn.values())}" if obj.syn else ""))
    return text


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
        obj, _ = object_element(doc)
        co = None if obj is None else next((c for c in obj if local_name(c) == "ChildObjects"), None)
        for ch in co if co is not None else ():
            folder = type_folder(local_name(ch))
            name = text_of(ch)
            if not folder or not name:
                continue
            rel = f"{folder}/{name}.xml"
            if disk.find(rel) is None:
                out.append(
                    Skip(
                        rel, "missing_on_disk", f"Configuration.xml lists {local_name(ch)}.{name}; {rel} is not on disk"
                    )
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
                if not isinstance(ch.tag, str) or len(ch) or local_name(ch).lower() not in collections:
                    continue
                ref = text_of(ch)
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
        return etree.fromstring(data, xml_parser())
    except Exception as exc:
        out.append(Skip(rel, "invalid_xml", str(exc)))
        return None


__all__ = [
    "FIELD_KINDS",
    "FIELD_PROPS",
    "OBJECT_PROPS",
    "chunk_metadata",
    "chunk_metadata_bytes",
    "missing_objects",
]
