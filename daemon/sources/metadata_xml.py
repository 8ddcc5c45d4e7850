"""Reading 1C object descriptors in both formats: Designer ``.xml`` and EDT ``.mdo``.

* Designer: ``<MetaDataObject xmlns="http://v8.1c.ru/8.3/MDClasses">`` -> ``<Catalog>`` ->
  ``<Properties>`` (``<Name>``, ``<Synonym><v8:item><v8:lang>/<v8:content>``, …) and
  ``<ChildObjects>`` (``<Attribute>``/``<TabularSection>``/… with their own ``<Properties>``;
  ``<Form>Name</Form>`` and ``<Template>Name</Template>`` as bare names whose synonyms live in
  ``<Folder>/<Name>/Forms/<F>.xml`` / ``Templates/<T>.xml``).
* EDT: ``<mdclass:Catalog>`` with lower-camel children: ``<name>``,
  ``<synonym><key>/<value>`` (repeated per language), ``<attributes>``, ``<tabularSections>``,
  ``<forms>``, … each holding its own properties directly.

:class:`Node` gives both the same shape; :class:`SourceLines` turns lxml's line numbers into
chunk positions. Parsing uses lxml with one parser per thread (no DTDs, no network, no
entity expansion).
"""

from __future__ import annotations

import threading

from lxml import etree

from ..contract import OBJECT_TYPES

#: Namespace of Designer descriptors (``<MetaDataObject xmlns=…>`` and the object inside).
MD_NS = "http://v8.1c.ru/8.3/MDClasses"
#: Namespace of EDT ``.mdo`` root elements (``<mdclass:Catalog xmlns:mdclass=…>``).
EDT_NS = "http://g5.1c.ru/v8/dt/metadata/mdclass"


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


#: English class name (``Catalog``) -> Russian object type (``Справочник``).
RU_BY_EN = {en: ru for ru, en in OBJECT_TYPES.values()}
_XS_TYPES = {
    "string": "String",
    "decimal": "Number",
    "boolean": "Boolean",
    "dateTime": "Date",
    "base64Binary": "BinaryData",
}


_tls = threading.local()


def xml_parser() -> etree.XMLParser:
    """This thread's lxml parser for descriptors: no entity expansion, no DTD, no network,
    comments and processing instructions dropped (lxml parsers are not shared by threads)."""
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


def local_name(el) -> str:
    """Local name of an element (``{ns}Name`` -> ``Name``); ``""`` for a node that is not an
    element (an entity reference, which the parser leaves unresolved: ``resolve_entities``
    is off, so a descriptor cannot pull in files or expand a DTD's text)."""
    tag = el.tag
    if not isinstance(tag, str):
        return ""
    return tag[tag.rfind("}") + 1 :] if tag[:1] == "{" else tag


def text_of(el) -> str:
    """The stripped text of an element, ``""`` for None or an empty one."""
    return (el.text or "").strip() if el is not None else ""


class Node:
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
                ln = local_name(ch)
                if ln == "Properties":
                    props_el = ch
                elif ln == "ChildObjects":
                    self.children = [(local_name(c), c) for c in ch]
            if props_el is None and len(el) == 0:  # <Form>Name</Form>
                self.name = text_of(el)
                self.name_el = el
                return
            if props_el is not None:
                for ch in props_el:
                    self.props.setdefault(local_name(ch).lower(), []).append(ch)
        else:
            for ch in el:
                ln = local_name(ch)
                kind = EDT_CHILDREN.get(ln)
                if kind is not None and len(ch):
                    self.children.append((kind, ch))
                else:
                    self.props.setdefault(ln.lower(), []).append(ch)
        names = self.props.get("name")
        if names:
            self.name_el = names[0]
            self.name = text_of(names[0])

    def get(self, key: str) -> list:
        """The property elements named ``key`` (any case), ``[]`` when there are none."""
        return self.props.get(key.lower(), [])

    def first_text(self, key: str) -> str:
        """The text of the first property element named ``key`` (any case), or ``""``."""
        els = self.props.get(key.lower())
        return text_of(els[0]) if els else ""


def multilang(elements: list) -> dict[str, str]:
    """Multi-language string: Designer ``<v8:item><v8:lang>/<v8:content>`` items or EDT
    repeated ``<key>/<value>`` elements -> ``{lang: text}`` (empty texts dropped)."""
    out: dict[str, str] = {}
    for e in elements:
        key = None
        for ch in e:
            ln = local_name(ch)
            if ln == "item":
                lang = content = ""
                for x in ch:
                    xl = local_name(x)
                    if xl == "lang":
                        lang = text_of(x)
                    elif xl == "content":
                        content = (x.text or "").strip()
                if content:
                    out[lang] = content
            elif ln == "key":
                key = text_of(ch)
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


def value_types(type_el) -> list[str]:
    """Value types of a ``<Type>`` / ``<type>`` element, compact, qualifiers appended:
    ``String(50)``, ``String`` (unlimited), ``Number(10,4)``, ``Number(15,2,nonnegative)``,
    ``Date`` / ``Date(Date)`` / ``Date(Time)``, ``CatalogRef.Пользователи``,
    ``DefinedType.Подразделение`` (a Designer ``v8:TypeSet``)."""
    names: list[str] = []
    quals: dict[str, dict[str, str]] = {}
    for ch in type_el:
        ln = local_name(ch)
        if ln in ("Type", "TypeSet", "TypeId", "types"):
            t = text_of(ch)
            if t:
                names.append(_strip_prefix(t))
        elif ln.endswith("Qualifiers") or ln.endswith("qualifiers"):
            quals[ln[:-10].lower()] = {local_name(q).lower(): text_of(q) for q in ch}
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
        if local_name(ch) in ("Type", "TypeSet", "types"):
            return True
    return False


def prop_value(elements: list) -> str:
    """A property value as one string: text; a type list (``, ``-joined); or the texts of
    the leaf descendants (``<Owners><xr:Item>…``; EDT repeated elements), ``, ``-joined."""
    parts: list[str] = []
    for e in elements:
        if len(e) == 0:
            t = text_of(e)
            if t:
                parts.append(t)
        elif _is_type_container(e):
            parts.extend(value_types(e))
        else:
            for d in e.iter():
                if len(d) == 0 and isinstance(d.tag, str):
                    t = text_of(d)
                    if t:
                        parts.append(t)
    return ", ".join(parts)


class SourceLines:
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


def object_element(doc):
    """(object element, is_designer) or (None, _)."""
    if local_name(doc) == "MetaDataObject":
        for ch in doc:
            if isinstance(ch.tag, str):
                return ch, True
        return None, True
    return doc, False


def _ns(el) -> str:
    tag = el.tag
    return tag[1 : tag.index("}")] if tag[0] == "{" else ""


def checked_object(doc, expected: str | None):
    """``(object element, is_designer, "")`` when ``doc`` is a 1C object descriptor whose
    object class is ``expected`` (English singular; any known class when ``None``), else
    ``(None, False, why)``."""
    root_ns, root_ln = _ns(doc), local_name(doc)
    if root_ln == "MetaDataObject" and root_ns == MD_NS:
        el = next((ch for ch in doc if isinstance(ch.tag, str)), None)
        if el is None:
            return None, False, "no metadata object inside <MetaDataObject>"
        designer = True
        where = f"<MetaDataObject> holds <{local_name(el)}>" + (
            f" of namespace {_ns(el)!r}" if _ns(el) != MD_NS else ""
        )
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
        cls = local_name(el)
        if (cls == expected) if expected else (cls in RU_BY_EN or cls == "Configuration"):
            return el, designer, ""
    want = f"<{expected}>" if expected else "a 1C metadata object class"
    return None, False, f"{where}, expected {want}"
