"""The answers of the read-only lookups: a method with its text (:class:`MethodInfo`), a module's
lines (:class:`ModuleText`), a metadata object and its fields (:class:`ObjectDescription`,
:class:`Field`), a docs page or section (:class:`DocumentText`) and the docs naming a thing
(:class:`DocRef`)."""

from __future__ import annotations

import msgspec


class DocRef(msgspec.Struct, kw_only=True, omit_defaults=True):
    """A documentation section that names something (:class:`daemon.sources.docs.DocLinks`):
    ``link`` is ``path#anchor`` (``path`` alone for the text before the first heading),
    ``heading_path`` the heading chain joined with `` > ``, ``line`` the heading's line."""

    path: str
    anchor: str = ""
    link: str
    heading_path: str = ""
    line: int = 1


class DocumentText(msgspec.Struct, kw_only=True, omit_defaults=True):
    """A docs page or one section of it (with its sub-sections) from ``read_document``.

    ``heading``: the section asked for (None: the whole page); ``heading_path``: its chain
    (`` > ``); ``anchor``/``link``: ``path#anchor``; lines 1-based inclusive of the part
    returned; ``truncated`` with a ``note`` when the text was cut to
    :data:`daemon.sources.docs.MAX_DOC_CHARS`; ``headings``: every heading of the page
    (``"## Title"`` form, in order) to pick another section; ``mentions``: code methods the
    section names that resolve in the served code (``Модуль.Метод``)."""

    path: str
    heading: str | None = None
    heading_path: str = ""
    anchor: str = ""
    link: str
    start_line: int
    end_line: int
    total_lines: int
    text: str
    truncated: bool = False
    note: str = ""
    lang: str = ""
    headings: list[str] = []
    mentions: list[str] = []


class MethodInfo(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One method with its full text (all parts of a long method joined); ``docs``: the
    documentation sections that mention it (:class:`DocRef`, the first 20), ``docs_total``:
    how many there are (more than ``len(docs)`` when the list was cut).

    The text and lines are the index's: the freshness fields (``stale`` … ``stale_reason``, as
    in :class:`daemon.contract.SearchResult`, filled by the daemon) say what may be newer on
    disk, and ``stale_own`` is ``[path]`` when the method's own module is among it."""

    id: str
    path: str
    name: str
    kind: str
    owner: str
    module_kind: str
    export: bool = False
    is_async: bool = False
    params: str = ""
    directives: list[str] = []
    annotations: list[str] = []
    region: list[str] = []
    doc: str = ""
    signature: str = ""
    start_line: int
    end_line: int
    text: str
    docs: list[DocRef] = []
    docs_total: int = 0
    stale: bool = False
    stale_paths: list[str] = []
    stale_count: int = 0
    pending_count: int = 0
    full_reconcile_pending: bool = False
    unread_events: bool = False
    stale_reason: str | None = None
    stale_own: list[str] = []


class ModuleText(msgspec.Struct, kw_only=True):
    """Lines ``start_line..end_line`` (1-based, inclusive) of a module; ``truncated`` when
    the request was cut to :data:`daemon.service.lookups.MAX_READ_LINES` or to the end of the file."""

    path: str
    start_line: int
    end_line: int
    total_lines: int
    text: str
    truncated: bool = False
    note: str = ""


class Field(msgspec.Struct, kw_only=True, omit_defaults=True):
    """A field of a metadata object: attribute, tabular section (with its attributes),
    dimension, resource, enum value, form, command, template."""

    kind: str
    name: str
    symbol: str | None = None
    synonym: dict[str, str] = {}
    types: list[str] = []
    comment: str = ""
    fields: list["Field"] = []  # attributes of a tabular section


class ObjectDescription(msgspec.Struct, kw_only=True, omit_defaults=True):
    """A metadata object: synonym, fields by kind, and its modules (path -> module kind).

    ``path`` is the descriptor of its own definition when several projects define it (a
    configuration's before an extension's adopted copy, then by path); ``also_in``: the other
    definitions' descriptors. Freshness fields as in :class:`MethodInfo`; ``stale_own``: the
    descriptor and modules among the stale files."""

    owner: str  # "Справочник.Пользователи"
    object_type: str
    name: str
    path: str
    synonym: dict[str, str] = {}
    comment: str = ""
    properties: dict[str, str] = {}
    attributes: list[Field] = []
    tabular_sections: list[Field] = []
    dimensions: list[Field] = []
    resources: list[Field] = []
    enum_values: list[Field] = []
    forms: list[Field] = []
    commands: list[Field] = []
    templates: list[Field] = []
    other_fields: list[Field] = []
    modules: dict[str, str] = {}
    stale: bool = False
    stale_paths: list[str] = []
    stale_count: int = 0
    pending_count: int = 0
    full_reconcile_pending: bool = False
    unread_events: bool = False
    stale_reason: str | None = None
    stale_own: list[str] = []
    also_in: list[str] = []
