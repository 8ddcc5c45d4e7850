"""Metadata bindings: the methods metadata names, in Designer and EDT files.

* object descriptors (:func:`descriptor_references`): an event subscription's ``Handler``
  (``CommonModule.X.Метод``, with its ``Event``), a scheduled job's ``MethodName``, an HTTP
  service's URL-template method ``Handler`` and a web service operation's ``ProcedureName``
  (methods of the service's own module), and a common module's ``Global`` flag (its exported
  methods are callable without the module name);
* form layouts (:func:`form_references`): Designer ``…/Forms/F/Ext/Form.xml`` and
  ``CommonForms/F/Ext/Form.xml`` (``<Events><Event name="OnOpen">ПриОткрытии</Event>``, item
  ``<Events>``, ``<Commands><Command name="X"><Action>Обработчик</Action>``) and EDT
  ``Forms/F/Form.form`` (``<handlers><event>OnOpen</event><name>ПриОткрытии</name>``,
  ``<formCommands>…<action><handler><name>``): methods of the form's module.

Each binding becomes a site (:mod:`daemon.sources.references`) of the file it is written in:
line and UTF-16 columns of the method name inside the element. A file that is not XML, or a
binding whose value is not a method name, is a :class:`~daemon.contract.Skip` with the reason
(``invalid_xml``, ``bad_binding``) in :attr:`FileRefs.skips`, never an exception.
"""

from __future__ import annotations

import threading
from pathlib import Path

from lxml import etree

from ..contract import Skip
from .files import SkipFile, read_regular_bytes
from .ref_record import MODULE_CALLER, FileRefs, file_refs_from_sites
from .ref_strings import split_method_name
from .scan import module_identity

__all__ = [
    "BINDING_TYPES",
    "descriptor_references",
    "form_references",
    "read_form_layout",
    "form_layout_path",
    "form_module_path",
]

#: Object types whose descriptor may hold a binding or the ``Global`` flag.
BINDING_TYPES = frozenset(("ОбщийМодуль", "ПодпискаНаСобытие", "РегламентноеЗадание", "HTTPСервис", "WebСервис"))

_tls = threading.local()


def _parser() -> etree.XMLParser:
    """This thread's XML parser: no DTD, no network, no entity expansion (as the metadata chunker)."""
    p = getattr(_tls, "parser", None)
    if p is None:
        p = _tls.parser = etree.XMLParser(
            resolve_entities=False,
            no_network=True,
            load_dtd=False,
            remove_comments=True,
            remove_pis=True,
            huge_tree=True,
        )
    return p


def _ln(el) -> str:
    tag = el.tag
    if not isinstance(tag, str):
        return ""
    return tag[tag.rfind("}") + 1 :].lower()


def _text(el) -> str:
    return (el.text or "").strip() if el is not None else ""


def _child(el, name: str):
    """The first child of ``el`` whose local name is ``name`` (any case), or ``None``."""
    for ch in el:
        if _ln(ch) == name:
            return ch
    return None


def _props(el):
    """Where an object's or child's properties are: Designer ``<Properties>``, EDT the element itself."""
    p = _child(el, "properties")
    return el if p is None else p


def _children(el, designer_name: str, edt_name: str) -> list:
    """Child objects: Designer ``<ChildObjects><X>``, EDT ``<x>`` repeated."""
    co = _child(el, "childobjects")
    if co is not None:
        return [c for c in co if _ln(c) == designer_name]
    return [c for c in el if _ln(c) == edt_name]


class _Lines:
    """Positions of a value inside the file's lines (lxml gives the element's line only). The
    lines are split as bytes and only those asked about are decoded (a form layout runs to
    megabytes; a few dozen of its lines hold bindings)."""

    def __init__(self, data: bytes):
        if data.startswith(b"\xef\xbb\xbf"):
            data = data[3:]
        self._raw = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
        self._text: dict[int, str] = {}

    def line(self, row: int) -> str:
        """Line ``row`` (0-based) decoded."""
        text = self._text.get(row)
        if text is None:
            text = self._text[row] = self._raw[row].decode("utf-8", "replace")
        return text

    def find(self, el, value: str) -> tuple[int, int, int]:
        """``(line0, start, end)``: ``value`` inside ``el``'s text on its line (UTF-16 columns)."""
        row = max((el.sourceline or 1) - 1, 0)
        n = len(self._raw)
        if row >= n:
            return row, 0, 0
        line = self.line(row)
        k = line.find(">" + value)
        k = k + 1 if k >= 0 else line.find(value)
        if k < 0:
            # the text may start on a later line (pretty-printed long values)
            for r in range(row + 1, min(row + 4, n)):
                k = self.line(r).find(value)
                if k >= 0:
                    row, line = r, self.line(r)
                    break
        if k < 0:
            return row, 0, 0
        col = len(line[:k].encode("utf-16-le", "surrogatepass")) // 2
        return row, col, col + len(value.encode("utf-16-le", "surrogatepass")) // 2


def _parse(data: bytes, path: str):
    """``(root element, None)`` or ``(None, Skip)`` for a file that is not well-formed XML."""
    try:
        return etree.fromstring(data, _parser()), None
    except etree.XMLSyntaxError as exc:
        return None, Skip(path, "invalid_xml", str(exc))
    except Exception as exc:  # ValueError on odd input, MemoryError …
        return None, Skip(path, "invalid_xml", f"{type(exc).__name__}: {exc}")


def _object(doc):
    """The object element: Designer ``<MetaDataObject><Catalog>``, EDT the root itself."""
    if _ln(doc) == "metadataobject":
        for ch in doc:
            if isinstance(ch.tag, str):
                return ch
        return None
    return doc


class _MethodRefs:
    """The bindings of one descriptor as they are read: sites and the skips of values that name
    no method."""

    def __init__(self, path: str, lines: _Lines) -> None:
        self.path = path
        self.lines = lines
        self.sites: list[tuple] = []
        self.skips: list[Skip] = []

    def add(self, kind: str, el, detail: str, qual_default: str | None) -> None:
        """The method element ``el`` names, a site of ``kind``: ``Модуль.Метод`` (a value without
        the module is a skip) or, given ``qual_default`` (the service's own module), ``Метод``.
        An empty value is no binding."""
        value = _text(el)
        if not value:
            return
        named = split_method_name(value)
        if named is None or (qual_default is None and not named[0]):
            self.skips.append(
                Skip(self.path, "bad_binding", f"<{el.tag.rpartition('}')[2]}> {value!r} names no method")
            )
            return
        qual, name = named
        if qual_default is not None and not qual:
            qual = qual_default
        row, col, end = self.lines.find(el, value)
        # the range covers the method name, the last part of the value
        start = end - len(name.encode("utf-16-le", "surrogatepass")) // 2
        self.sites.append((MODULE_CALLER, kind, name, qual, detail, row, start, end))


def _subscription(obj, props, owner: str, refs: _MethodRefs) -> None:
    """An event subscription's ``Handler`` (``CommonModule.X.Метод``), with its ``Event``."""
    h = _child(props, "handler")
    if h is not None:
        refs.add("subscription", h, _text(_child(props, "event")), None)


def _scheduled_job(obj, props, owner: str, refs: _MethodRefs) -> None:
    """A scheduled job's ``MethodName``, with the job's name."""
    h = _child(props, "methodname")
    if h is not None:
        refs.add("scheduled_job", h, _text(_child(props, "name")), None)


def _http_service(obj, props, owner: str, refs: _MethodRefs) -> None:
    """Every URL-template method's ``Handler`` (a method of the service's module), with
    ``<template>.<HTTP method>``."""
    for tmpl in _children(obj, "urltemplate", "urltemplates"):
        tname = _text(_child(_props(tmpl), "name"))
        for meth in _children(tmpl, "method", "methods"):
            mp = _props(meth)
            h = _child(mp, "handler")
            if h is not None:
                verb = _text(_child(mp, "httpmethod")) or _text(_child(mp, "name"))
                refs.add("http_handler", h, f"{tname}.{verb}" if verb else tname, owner)


def _web_service(obj, props, owner: str, refs: _MethodRefs) -> None:
    """Every operation's ``ProcedureName`` (a method of the service's module), with the operation's name."""
    for op in _children(obj, "operation", "operations"):
        opp = _props(op)
        h = _child(opp, "procedurename")
        if h is not None:
            refs.add("web_operation", h, _text(_child(opp, "name")), owner)


#: Object type -> the reader of its descriptor's bindings (a common module has none, only ``Global``).
_DESCRIPTOR_READERS = {
    "ПодпискаНаСобытие": _subscription,
    "РегламентноеЗадание": _scheduled_job,
    "HTTPСервис": _http_service,
    "WebСервис": _web_service,
}


def descriptor_references(
    data: bytes, *, path: str, owner: str, object_type: str, extension: bool = False
) -> FileRefs | None:
    """The bindings of one object descriptor (Designer ``.xml`` or EDT ``.mdo``).

    ``owner`` / ``object_type``: the descriptor's identity (:func:`daemon.sources.scan.scan_export`).
    Returns ``None`` for an object type that binds nothing (:data:`BINDING_TYPES`); a record with a
    skip for a file that is not XML or a binding that names no method.
    """
    if object_type not in BINDING_TYPES:
        return None
    base = dict(file_kind="descriptor", owner=owner, object_type=object_type, extension=extension)
    doc, skip = _parse(data, path)
    if doc is None:
        return FileRefs(path=path, skips=(skip,), **base)
    obj = _object(doc)
    if obj is None:
        return FileRefs(path=path, skips=(Skip(path, "not_metadata", "no object element"),), **base)
    props = _props(obj)
    refs = _MethodRefs(path, _Lines(data))
    global_module = False
    if object_type == "ОбщийМодуль":
        global_module = _text(_child(props, "global")).lower() == "true"
    else:
        _DESCRIPTOR_READERS[object_type](obj, props, owner, refs)
    return file_refs_from_sites(path, refs.sites, global_module=global_module, skips=tuple(refs.skips), **base)


def form_module_path(layout_path: str) -> str | None:
    """The module of a form layout: ``…/Ext/Form.xml`` -> ``…/Ext/Form/Module.bsl`` (Designer),
    ``…/Form.form`` -> ``…/Module.bsl`` (EDT); ``None`` for any other path."""
    if layout_path.endswith("/Ext/Form.xml"):
        return layout_path[: -len(".xml")] + "/Module.bsl"
    if layout_path.endswith("/Form.form"):
        return layout_path[: -len("Form.form")] + "Module.bsl"
    return None


def form_layout_path(module_path: str) -> str | None:
    """The layout of a form module (the inverse of :func:`form_module_path`), ``None`` if the
    path is not a form module's."""
    if module_path.endswith("/Ext/Form/Module.bsl"):
        return module_path[: -len("/Module.bsl")] + ".xml"
    parts = module_path.split("/")
    if len(parts) >= 4 and parts[-1] == "Module.bsl" and (parts[-3] == "Forms" or parts[-3] == "CommonForms"):
        return module_path[: -len("Module.bsl")] + "Form.form"
    return None


def form_references(data: bytes, *, path: str, fmt: str = "", extension: bool = False) -> FileRefs:
    """The bindings of one form layout: form events, item events and form commands.

    ``path``: the layout's path (``…/Forms/F/Ext/Form.xml`` or ``…/Forms/F/Form.form``); the owner
    is the form's (``Справочник.X.Форма.F``) and the handlers are methods of the form's module.
    A layout that is not XML gives a record with an ``invalid_xml`` skip and no site.
    """
    module = form_module_path(path) or path
    ident = module_identity(module, fmt or ("edt" if path.endswith(".form") else "designer"))
    owner = ident.owner if ident is not None else ""
    base = dict(file_kind="form", owner=owner, object_type=ident.object_type if ident else "", module_kind="form")
    doc, skip = _parse(data, path)
    if doc is None:
        return FileRefs(path=path, extension=extension, skips=(skip,), **base)
    lines = _Lines(data)
    sites: list[tuple] = []
    skips: list[Skip] = []

    def add(kind: str, el, value: str, detail: str) -> None:
        if not value:
            return
        if split_method_name(value) is None or "." in value:
            skips.append(Skip(path, "bad_binding", f"{detail}: {value!r} names no method of the form"))
            return
        row, col, end = lines.find(el, value)
        sites.append((MODULE_CALLER, kind, value, owner, detail, row, col, end))

    if _is_designer_form(doc):
        _designer_form(doc, add)
    else:
        _edt_form(doc, add)
    return file_refs_from_sites(path, sites, extension=extension, skips=tuple(skips), **base)


def _is_designer_form(doc) -> bool:
    return isinstance(doc.tag, str) and doc.tag.startswith("{http://v8.1c.ru/8.3/xcf/logform}")


def _designer_form(doc, add) -> None:
    """Designer ``Form.xml``: ``<Events>`` of the form and of every item (items carry ``name=``),
    ``<Commands><Command name=…><Action>``. A ``callType`` (extension forms) goes into the detail."""
    for events in doc.iter("{*}Events"):
        holder = events.getparent()
        item = None if holder is doc else holder.get("name")
        for ev in events:
            if _ln(ev) != "event":
                continue
            name = ev.get("name") or ""
            call = ev.get("callType")
            detail = (f"{item}.{name}" if item else name) + (f" ({call})" if call else "")
            add("form_item_event" if item else "form_event", ev, _text(ev), detail)
    commands = _child(doc, "commands")
    if commands is not None:
        for cmd in commands:
            if _ln(cmd) != "command":
                continue
            cname = cmd.get("name") or ""
            for act in cmd:
                if _ln(act) == "action":
                    call = act.get("callType")
                    add("form_command", act, _text(act), cname + (f" ({call})" if call else ""))


def _edt_form(doc, add) -> None:
    """EDT ``Form.form``: ``<handlers><event/><name/>`` of the form (root children) and of items
    (the nearest ancestor with a ``<name>``), ``<formCommands><name/>…<action><handler><name/>``."""
    for h in doc.iter("{*}handlers"):
        ev = _text(_child(h, "event"))
        name_el = _child(h, "name")
        holder = h.getparent()
        while holder is not None and holder is not doc and _child(holder, "name") is None:
            holder = holder.getparent()
        item = None if holder is None or holder is doc else _text(_child(holder, "name"))
        call = _text(_child(h, "calltype"))
        detail = (f"{item}.{ev}" if item else ev) + (f" ({call})" if call else "")
        if name_el is not None:
            add("form_item_event" if item else "form_event", name_el, _text(name_el), detail)
    for cmd in doc:
        if _ln(cmd) != "formcommands":
            continue
        cname = _text(_child(cmd, "name"))
        for act in cmd:
            if _ln(act) != "action":
                continue
            for handler in act.iter("{*}handler"):
                n = _child(handler, "name")
                if n is not None:
                    call = _text(_child(act, "calltype"))
                    add("form_command", n, _text(n), cname + (f" ({call})" if call else ""))


def read_form_layout(
    root, src, fmt: str, *, extension: bool = False, max_file_bytes: int = 8 * 2**20
) -> FileRefs | None:
    """The bindings of the layout of form module ``src`` (a :class:`daemon.sources.files.SourceFile`),
    read from disk under ``root``: :func:`form_references` of its ``Form.xml`` / ``Form.form``.
    None when ``src`` is no form module or its layout does not exist; a layout that cannot be
    read (a link, too large) is a record with the skip and no site."""
    layout = form_layout_path(src.path)
    disk = form_layout_path(src.disk_path) if src.disk_path else layout
    if layout is None or disk is None:
        return None
    try:
        data = read_regular_bytes(Path(root) / disk, max_file_bytes)
    except SkipFile as exc:
        if exc.reason == "unreadable":  # absent: a form module without a layout file
            return None
        return FileRefs(
            path=layout, file_kind="form", module_kind="form", extension=extension, skips=(exc.to_skip(layout),)
        )
    return form_references(data, path=layout, fmt=fmt, extension=extension)
