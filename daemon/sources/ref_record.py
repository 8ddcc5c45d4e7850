"""One file's references as a record: :class:`FileRefs`, its sites packed column by column
(:data:`SITE_DTYPE`, :func:`pack_sites`), the methods it defines (:data:`METHOD_DTYPE`), and the
builder that makes one (:class:`SiteBuilder`).

The reference graph (:mod:`daemon.index.refgraph`) keeps one record per file of an export in
memory and in the snapshot, so the sites are numpy columns compressed with zstd, their strings
interned in a per-file table. Who fills a record: the BSL extraction
(:mod:`daemon.sources.references`) and the metadata bindings (:mod:`daemon.sources.bindings`).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

import msgspec
import numpy as np

from ..contract import REF_KINDS, Skip

_tls = threading.local()

#: Kind -> the ``uint8`` code stored in :data:`SITE_DTYPE` (the order of :data:`daemon.contract.REF_KINDS`).
KIND_CODES: dict[str, int] = {k: i for i, k in enumerate(REF_KINDS)}
KIND_NAMES: tuple[str, ...] = tuple(REF_KINDS)

#: ``caller`` of a site outside every method (module-level code) or of a binding, which
#: metadata or the platform makes, not a method.
MODULE_CALLER = 0xFFFF

#: One site, packed: the caller (index into :attr:`FileRefs.methods` or :data:`MODULE_CALLER`),
#: the kind code, the callee name, qualifier and detail (indices into :attr:`FileRefs.strings`;
#: 0 is ``""``), and the range (0-based line, UTF-16 start and end columns, capped at 65535).
SITE_DTYPE = np.dtype(
    [
        ("caller", "<u2"),
        ("kind", "u1"),
        ("name", "<u4"),
        ("qual", "<u4"),
        ("detail", "<u4"),
        ("line", "<u4"),
        ("col", "<u2"),
        ("end", "<u2"),
    ]
)


class MethodDef(msgspec.Struct, array_like=True, frozen=True):
    """A method a module defines: ``name`` as written, ``id`` its chunk id without a part
    suffix (``<path>::<Name>``, ``@2`` for a repeated name), ``export``, and the name's
    position (0-based line, UTF-16 column)."""

    name: str
    id: str
    export: bool
    line: int
    col: int


#: A module's methods, packed beside their names: export flag, ``nth`` (1 for the first
#: method of that folded name, 2 for the second: the chunk id's ``@2``), the name's position.
METHOD_DTYPE = np.dtype([("export", "u1"), ("nth", "<u2"), ("line", "<u4"), ("col", "<u2")])


class FileRefs(msgspec.Struct, kw_only=True, array_like=True):
    """What one file says about calls: the methods it defines and its sites (packed).

    * ``file_kind``: ``bsl`` (a module), ``descriptor`` (an object descriptor: subscriptions,
      scheduled jobs, HTTP and web services, a common module's ``Global`` flag) or ``form``
      (a form layout: ``Form.xml`` / ``Form.form``);
    * ``owner`` / ``object_type`` / ``module_kind``: the module identity (:mod:`daemon.contract`;
      a form layout has its form's owner and ``module_kind`` ``form``);
    * ``extension``: the file belongs to a configuration extension (its ``&Вместо`` methods link
      to the base configuration's);
    * ``names`` / ``methods``: the methods it defines, names as written and :data:`METHOD_DTYPE`
      records (:meth:`method`, :meth:`method_id`);
    * ``strings``: the sites' string table (``strings[0] == ""``); ``sites``: ``count`` sites
      (:data:`SITE_DTYPE`, in file order) stored column by column and compressed (:meth:`view`);
    * ``global_module``: a common module's descriptor says ``Global``;
    * ``partial``: the module has syntax errors: the calls of its broken part may be missing
      (those of the methods that parse are there);
    * ``skips``: what could not be read (a broken form layout or descriptor, with the reason).
    """

    path: str
    file_kind: str = "bsl"
    owner: str = ""
    object_type: str = ""
    module_kind: str = ""
    extension: bool = False
    names: list[str] = []
    methods: bytes = b""
    strings: list[str] = msgspec.field(default_factory=lambda: [""])
    sites: bytes = b""
    count: int = 0
    global_module: bool = False
    partial: bool = False
    skips: tuple[Skip, ...] = ()

    def view(self) -> np.ndarray:
        """The sites as a structured array (:data:`SITE_DTYPE`), decompressed."""
        return unpack_sites(self.sites, self.count)

    def columns(self) -> dict[str, np.ndarray]:
        """The sites column by column (cheaper than :meth:`view` when a few columns are read)."""
        return unpack_columns(self.sites, self.count)

    def __len__(self) -> int:
        return self.count

    def method_info(self) -> np.ndarray:
        """The methods' :data:`METHOD_DTYPE` records."""
        return np.frombuffer(self.methods, dtype=METHOD_DTYPE)

    def method_id(self, i: int, nth: int | None = None) -> str:
        """The id of method ``i``: its chunk id without a part suffix."""
        if nth is None:
            nth = int(self.method_info()[i]["nth"])
        return f"{self.path}::{self.names[i]}" + (f"@{nth}" if nth > 1 else "")

    def method(self, i: int) -> MethodDef:
        """Method ``i`` unpacked."""
        r = self.method_info()[i]
        return MethodDef(
            self.names[i], self.method_id(i, int(r["nth"])), bool(r["export"]), int(r["line"]), int(r["col"])
        )

    def methods_list(self) -> list[MethodDef]:
        """Every method unpacked, in file order."""
        return [self.method(i) for i in range(len(self.names))]

    def site(self, i: int, view=None) -> "SiteView":
        """Site ``i`` unpacked (``view``: :meth:`view` or :meth:`columns` already read, to reuse)."""
        v = self.columns() if view is None else view
        s = self.strings
        c = int(v["caller"][i])
        return SiteView(
            index=i,
            caller=None if c == MODULE_CALLER else self.method_id(c),
            kind=KIND_NAMES[int(v["kind"][i])],
            name=s[int(v["name"][i])],
            qualifier=s[int(v["qual"][i])],
            detail=s[int(v["detail"][i])],
            line=int(v["line"][i]),
            col=int(v["col"][i]),
            end=int(v["end"][i]),
        )

    def sites_list(self) -> list["SiteView"]:
        """Every site unpacked, in file order."""
        v = self.columns()
        return [self.site(i, v) for i in range(self.count)]


class SiteView(msgspec.Struct, kw_only=True, frozen=True):
    """One site unpacked: ``caller`` (a method id, ``None`` for module-level code or a
    binding), ``kind``, the callee ``name`` and ``qualifier`` as written (``callee``), the
    ``detail`` (the event, the helper, the annotation) and the range."""

    index: int
    caller: str | None
    kind: str
    name: str
    qualifier: str
    detail: str
    line: int
    col: int
    end: int

    @property
    def callee(self) -> str:
        """The callee as written: ``Модуль.Метод`` or ``Метод``."""
        return f"{self.qualifier}.{self.name}" if self.qualifier else self.name


_NARROW = ("<u2", "u1", "<u2", "<u2", "<u2", "<i4", "<u2", "<u2")
_WIDE = ("<u2", "u1", "<u4", "<u4", "<u4", "<i4", "<u2", "<u2")


def pack_sites(arr: np.ndarray, nstrings: int) -> bytes:
    """:data:`SITE_DTYPE` records -> bytes: one format byte, then the columns one after the other
    (line as the difference from the previous site's), zstd-compressed (about 4x smaller than
    the records: the graph keeps every site of an export in memory)."""
    if not len(arr):
        return b""
    import zstandard

    wide = nstrings > 0xFFFF
    cols = []
    for field, dt in zip(SITE_DTYPE.names, _WIDE if wide else _NARROW, strict=True):
        col = arr[field]
        if field == "line":
            col = np.diff(col.astype(np.int64), prepend=0)
        cols.append(col.astype(dt).tobytes())
    zc = getattr(_tls, "zc", None)
    if zc is None:
        zc = _tls.zc = zstandard.ZstdCompressor(level=1)  # what zstandard.compress(…, 1) makes per call
    return (b"w" if wide else b"n") + zc.compress(b"".join(cols))


def unpack_columns(blob: bytes, count: int) -> dict[str, np.ndarray]:
    """The columns of :func:`pack_sites` (field name -> array; read-only views but ``line``)."""
    if not count:
        return {f: np.empty(0, dtype=SITE_DTYPE[f]) for f in SITE_DTYPE.names}
    zd = getattr(_tls, "zd", None)
    if zd is None:
        import zstandard

        zd = _tls.zd = zstandard.ZstdDecompressor()
    raw = zd.decompress(blob[1:])
    out: dict[str, np.ndarray] = {}
    pos = 0
    for field, dt in zip(SITE_DTYPE.names, _WIDE if blob[:1] == b"w" else _NARROW, strict=True):
        d = np.dtype(dt)
        col = np.frombuffer(raw, dtype=d, count=count, offset=pos)
        pos += d.itemsize * count
        out[field] = np.cumsum(col, dtype=np.int64) if field == "line" else col
    return out


def unpack_sites(blob: bytes, count: int) -> np.ndarray:
    """The inverse of :func:`pack_sites`: :data:`SITE_DTYPE` records."""
    out = np.empty(count, dtype=SITE_DTYPE)
    for field, col in unpack_columns(blob, count).items():
        out[field] = col
    return out


def pack_methods(rows: list[tuple[bool, int, int, int]]) -> bytes:
    """``[(export, nth, line, col)]`` -> :data:`METHOD_DTYPE` bytes."""
    return np.array(rows, dtype=METHOD_DTYPE).tobytes() if rows else b""


class SiteBuilder:
    """Accumulates the sites of one file: the string table and two kinds of rows, placed
    (line and columns known) and byte-positioned (converted in one vectorised pass)."""

    __slots__ = ("strings", "index", "placed", "at_bytes", "ids")

    def __init__(self) -> None:
        self.strings: list[str] = [""]
        self.index: dict[str, int] = {"": 0}
        self.ids: dict[tuple[str, str, str, str], tuple[int, int, int, int]] = {}
        self.placed: list[tuple[int, int, int, int, int, int, int, int]] = []
        self.at_bytes: list[tuple[int, int, int, int, int, int, int]] = []

    def s(self, text: str) -> int:
        """The index of ``text`` in the file's string table (added on first use)."""
        i = self.index.get(text)
        if i is None:
            i = self.index[text] = len(self.strings)
            self.strings.append(text)
        return i

    def add(self, caller: int, kind: str, name: str, qual: str, detail: str, line: int, col: int, end: int) -> None:
        """A site whose position is known (0-based line, UTF-16 columns)."""
        self.placed.append(
            (
                caller,
                KIND_CODES[kind],
                self.s(name),
                self.s(qual),
                self.s(detail),
                line,
                min(col, 0xFFFF),
                min(end, 0xFFFF),
            )
        )

    def add_bytes(self, caller: int, kind: str, name: str, qual: str, detail: str, start: int, end: int) -> None:
        """A site at UTF-8 byte offsets ``start``..``end`` of the parsed text; ``caller`` -1: the
        method whose span holds the line (both placed by the extraction, which converts
        :attr:`at_bytes` in one vectorised pass)."""
        key = (kind, name, qual, detail)
        ids = self.ids.get(key)
        if ids is None:
            ids = self.ids[key] = (KIND_CODES[kind], self.s(name), self.s(qual), self.s(detail))
        self.at_bytes.append((caller, *ids, start, end))

    def packed(self, converted: np.ndarray | None = None, headers=()) -> np.ndarray:
        """The sites as :data:`SITE_DTYPE` records, in the order they were added: the placed ones
        and ``converted`` (:attr:`at_bytes` placed by the caller); ``headers``: ``(line, col)`` of
        method names, where no local call can be (error recovery in a module with syntax errors
        may read a header ``Имя(…)`` as one)."""
        parts = []
        if self.placed:
            parts.append(np.array(self.placed, dtype=SITE_DTYPE))
        if converted is not None:
            parts.append(converted)
        if not parts:
            return np.empty(0, dtype=SITE_DTYPE)
        arr = np.concatenate(parts) if len(parts) > 1 else parts[0]
        if len(headers):
            at = arr["line"].astype(np.int64) << 16 | arr["col"]
            names = np.array([line << 16 | col for line, col in headers], dtype=np.int64)
            arr = arr[~((arr["kind"] == KIND_CODES["call"]) & np.isin(at, names))]
        return arr

    def record(self, path: str, converted: np.ndarray | None = None, headers=(), **fields) -> FileRefs:
        """The file's record with these sites (``converted``, ``headers``: see :meth:`packed`), in
        the canonical form of :func:`canonical_sites`: the same sites give the same record in
        whatever order they were added (tree-sitter hands the extraction its captures in no fixed
        order)."""
        strings, arr = canonical_sites(self.strings, self.packed(converted, headers))
        return FileRefs(path=path, strings=strings, sites=pack_sites(arr, len(strings)), count=len(arr), **fields)


def canonical_sites(strings: list[str], arr: np.ndarray) -> tuple[list[str], np.ndarray]:
    """``(table, sites)``: the strings the sites use, sorted (``""`` first, always there), and the
    sites (:data:`SITE_DTYPE`, string ids into ``strings``) renumbered into that table and sorted
    by position (line, column, kind), then by every other field (ties: sites at one position).
    A pure function of the sites as a multiset, so the saved references of one content are the
    same bytes however the extraction visited them."""
    if not len(arr):
        return [""], arr
    used = np.unique(np.concatenate((arr["name"], arr["qual"], arr["detail"], [0])))
    texts = [strings[i] for i in used.tolist()]
    by_text = sorted(range(len(texts)), key=texts.__getitem__)
    remap = np.zeros(len(strings), dtype=np.uint32)
    remap[used[by_text]] = np.arange(len(texts), dtype=np.uint32)
    name, qual, detail = remap[arr["name"]], remap[arr["qual"]], remap[arr["detail"]]
    order = np.lexsort((detail, qual, name, arr["end"], arr["caller"], arr["kind"], arr["col"], arr["line"]))
    out = arr[order]
    out["name"], out["qual"], out["detail"] = name[order], qual[order], detail[order]
    return [texts[k] for k in by_text], out


def file_refs_from_sites(
    path: str,
    sites: Iterable[tuple[int, str, str, str, str, int, int, int]],
    **fields,
) -> FileRefs:
    """A :class:`FileRefs` from unpacked sites ``(caller, kind, name, qualifier, detail, line, col, end)``
    (the binding readers and tests build records this way)."""
    b = SiteBuilder()
    for caller, kind, name, qual, detail, line, col, end in sites:
        b.add(caller, kind, name, qual, detail, line, col, end)
    return b.record(path, **fields)
