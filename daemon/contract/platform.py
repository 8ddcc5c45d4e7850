"""Platform help on the wire: an entry of the 1C:Enterprise help (:class:`PlatformEntry` with its
signatures and parameters), the help an answer comes from (:class:`PlatformUsed`), and the
sources and versions as ``status`` shows them (:class:`PlatformSource`, :class:`PlatformStatus`).
The ``platform_help`` answer is in :mod:`daemon.contract.search`."""

from __future__ import annotations

import msgspec

from .records import Skip


class PlatformParam(msgspec.Struct, kw_only=True, omit_defaults=True, gc=False):
    """One parameter of a platform help signature: its name, type(s) as the help names them,
    whether it may be left out, its default value when the help states one, and its description."""

    name: str
    types: list[str] = []
    optional: bool = False
    default: str = ""
    description: str = ""


class PlatformSignature(msgspec.Struct, kw_only=True, omit_defaults=True, gc=False):
    """One way to call a platform help entry. ``name`` is the help's variant name (``ПоИмени``,
    ``По умолчанию``; empty for the only one), ``syntax`` the call as the source writes it."""

    name: str = ""
    syntax: str = ""
    params: list[PlatformParam] = []
    description: str = ""


class PlatformEntry(msgspec.Struct, kw_only=True, omit_defaults=True, gc=False):
    """One platform help entry: a global function, global property, event, type, constructor,
    method, property, system enumeration, enumeration value or language keyword of
    1C:Enterprise (the model of :mod:`daemon.sources.platform.entries`, which names it
    ``Entry``). ``kind`` is one of its ``ENTRY_KINDS`` (:data:`PLATFORM_KINDS` without the
    ``platform_`` prefix).

    ``return_types``/``returns``: a function's or method's result types and what the result
    means; ``value_types``/``readonly``: a property's type and access; ``availability``: where
    it runs (codes: ``thin_client``, ``server``, ...; an unknown label is kept as written,
    lowercased); ``since`` / ``deprecated_since``: platform versions as the help states them
    (``8.3.6``; empty where the source has none); ``category``: the help's group (``Функции
    работы со значениями типа Строка``); ``source``: the file it came from
    (``bslGlobals.json``, ``shcntx_ru.hbk``); ``page``: the help page inside a book;
    ``description_en``: the English book's description when the two books were merged."""

    kind: str
    name: str
    name_en: str = ""
    owner: str = ""
    owner_en: str = ""
    signatures: list[PlatformSignature] = []
    return_types: list[str] = []
    returns: str = ""
    value_types: list[str] = []
    readonly: bool = False
    description: str = ""
    description_en: str = ""
    availability: list[str] = []
    since: str = ""
    deprecated_since: str = ""
    category: str = ""
    example: str = ""
    note: str = ""
    see_also: list[str] = []
    source: str = ""
    page: str = ""

    @property
    def qualified(self) -> str:
        """``Тип.Метод`` for members, ``Новый Тип`` for a constructor, the name for the rest."""
        if self.kind == "constructor":
            return f"Новый {self.owner or self.name}"
        return f"{self.owner}.{self.name}" if self.owner else self.name

    @property
    def qualified_en(self) -> str:
        """The English twin of :attr:`qualified` (``ValueTable.Insert``, ``New ValueTable``);
        empty when the source has no English name."""
        if self.kind == "constructor":
            owner = self.owner_en or self.name_en
            return f"New {owner}" if owner else ""
        if not self.name_en:
            return ""
        if self.owner:
            return f"{self.owner_en}.{self.name_en}" if self.owner_en else ""
        return self.name_en

    @property
    def key(self) -> str:
        """Unique within one source: ``<kind>:<qualified>`` (a type and its constructor, or a
        global function and a type of the same name, differ by kind)."""
        return f"{self.kind}:{self.qualified}"


class PlatformUsed(msgspec.Struct, kw_only=True, omit_defaults=True):
    """The platform help an answer comes from. ``source``: ``installed`` (a platform's help
    books) or ``bundled`` (the open data set shipped with bsl-lens, which has no versions);
    ``version``: the installed platform's version (``8.3.24.1467``; empty for the bundled data
    set); ``label``: both in words, what a front end prints; ``why``: how it was chosen
    (``--platform-version``, the configuration's compatibility mode, no platform installed);
    ``state``: ``ready``, or ``indexing`` (the answer is empty or from the bundled data set
    until it is built)."""

    source: str
    version: str = ""
    label: str
    why: str = ""
    state: str = "ready"


class PlatformSource(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One platform help source as ``status`` shows it: the bundled data set, or one installed
    platform version (its help books). ``state``: ``ready``, ``indexing``, ``available`` (found,
    not loaded: only the chosen version is), ``error`` (``error`` says why; the bundled data
    set answers instead). ``entries`` by ``kinds`` (entry kinds); ``vectors``: entries embedded
    for the dense channel; ``skipped``: pages or records left out, ``skips`` the first of them;
    ``build_s``: seconds the last build (read and lexical index) took, ``loaded_from_disk``:
    the index was built earlier (by any daemon of this machine) and loaded."""

    source: str
    version: str = ""
    label: str
    path: str = ""
    books: list[str] = []
    chosen: bool = False
    state: str = "available"
    entries: int = 0
    kinds: dict[str, int] = {}
    vectors: int = 0
    skipped: int = 0
    skips: list[Skip] = []
    build_s: float | None = None
    loaded_from_disk: bool = False
    error: str | None = None


class PlatformStatus(msgspec.Struct, kw_only=True, omit_defaults=True):
    """Platform help in ``status``: the configuration's ``CompatibilityMode`` as written (None
    when it has none), the ``--platform-version`` asked for, the source that answers
    (:class:`PlatformUsed`) and every source found (:class:`PlatformSource`)."""

    compatibility_mode: str | None = None
    requested: str = ""
    used: PlatformUsed
    sources: list[PlatformSource] = []
