"""The records the chunkers produce and the indexes key on: :class:`Chunk` (one searchable unit)
and :class:`Skip` (a file or object left out, and why). Their field conventions are in
:mod:`daemon.contract`."""

from __future__ import annotations

import msgspec

from .vocabulary import CODE_KINDS, DOCS_KINDS, PLATFORM_KINDS


class Chunk(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One searchable unit: a BSL method (or a part of a long one), a module's header code,
    a metadata object, one field of a metadata object, or a section of a documentation page
    (kind ``section``: how its fields are filled is in :mod:`daemon.sources.markdown`).

    ``id`` is unique within one export root and stable across re-indexing while the thing
    it names keeps its path and name:

    * method: ``"<path>::<Name>"``; a second method with the same name in the same module
      (``#Если`` branches) gets ``"<path>::<Name>@2"``; parts of a long method add
      ``"#<part>"`` (``"<path>::<Name>#2"``).
    * module-level code and variables: ``"<path>::<module>"``.
    * metadata object: ``"<path>::"``; field: ``"<path>::<symbol>"``.
    """

    id: str
    path: str
    kind: str  # one of CODE_KINDS, METADATA_KINDS, DOCS_KINDS or PLATFORM_KINDS
    name: str  # method name / object name / field name (for "Реквизит:Роли.Роль": "Роль")
    owner: str = ""  # "ОбщийМодуль.ОбщегоНазначения", "Справочник.Пользователи"
    object_type: str = ""  # Russian singular type of the owner: "ОбщийМодуль", "Справочник"
    module_kind: str = ""  # one of MODULE_KINDS for code chunks; "" for metadata
    symbol: str | None = None  # gold-set convention, see the docstring of daemon.contract
    # --- code chunks -------------------------------------------------------------------
    export: bool = False
    is_async: bool = False
    params: str = ""  # the parameter list as written, without parentheses
    directives: list[str] = []  # compilation directives: ["&НаСервере"]
    annotations: list[str] = []  # extension annotations: ['&Вместо("ОбработкаПроведения")']
    region: list[str] = []  # #Область nesting, outermost first
    doc: str = ""  # the // comment block directly above the method, comment markers kept
    signature: str = ""  # header as written, from the keyword to ")" and "Экспорт"
    part: int = 0  # 0 = whole method; 1..n = parts of a long method (each keeps the header)
    # --- metadata chunks ---------------------------------------------------------------
    synonym: dict[str, str] = {}  # language code -> synonym
    comment: str = ""
    types: list[str] = []  # field value types as written ("CatalogRef.Пользователи", "String(50)")
    properties: dict[str, str] = {}  # key properties of the object / field
    # --- location ------------------------------------------------------------------------
    start_line: int = 1  # 1-based, inclusive
    end_line: int = 1  # 1-based, inclusive
    name_range: tuple[int, int, int, int] = (0, 0, 0, 0)  # LSP: line0, utf16 col, line0, col
    # --- content -------------------------------------------------------------------------
    text: str = ""  # the method text incl. doc comment, as written; BM25 indexes daemon.sources.bsl.live_code(text)

    @property
    def is_code(self) -> bool:
        """True for BSL chunks (methods and module-level code)."""
        return self.kind in CODE_KINDS

    @property
    def is_docs(self) -> bool:
        """True for documentation sections (:data:`DOCS_KINDS`; fields: :mod:`daemon.sources.markdown`)."""
        return self.kind in DOCS_KINDS

    @property
    def is_platform(self) -> bool:
        """True for platform help entries (:data:`PLATFORM_KINDS`)."""
        return self.kind in PLATFORM_KINDS

    @property
    def is_metadata(self) -> bool:
        """True for metadata chunks (objects and their fields): neither code, docs nor platform help."""
        return self.kind not in CODE_KINDS and self.kind not in DOCS_KINDS and self.kind not in PLATFORM_KINDS


class Skip(msgspec.Struct, frozen=True):
    """A file (or metadata object) the scanner or a chunker did not index, and why.

    ``reason`` is a short stable code (``binary``, ``too_large``, ``undecodable``,
    ``unreadable``, ``symlink``, ``not_regular``, ``edt_template``, ``invalid_xml``,
    ``not_metadata``, ``missing_on_disk``, ``parse_failed``; in docs folders ``not_markdown``:
    an image or other file next to the pages, :mod:`daemon.sources.docs`; ``bad_binding``: a
    descriptor or form layout names a handler that is no method name, that binding is left
    out of the references, the rest of the file is indexed and current;
    ``bad_pattern``: a line of the root's ``.bsl-lens-ignore`` that is no gitignore pattern,
    left out while the other lines apply; the ignore file's other reasons mean it ignores
    nothing; ``ignored_project``: an EDT project's ``src`` folder the ignore file leaves out,
    named because nothing of that project is indexed);
    ``detail`` is a human sentence for logs and ``status``.
    """

    path: str
    reason: str
    detail: str = ""
