"""Metadata objects read out of one root's chunk store: an object with its fields and the
modules that belong to it (its own, its forms' and commands'), and the objects of one type.
What the daemon's ``get_metadata_object`` lookup answers (:class:`daemon.service.lookups.Lookups`).
"""

from __future__ import annotations

from ..contract import Chunk
from ..text.folding import fold
from .state import IndexState


def metadata_object(
    state: IndexState, object_type: str, name: str
) -> tuple[Chunk, list[Chunk], dict[str, str], list[str]]:
    """The metadata object ``<object_type>.<name>`` (Russian singular type; the name is matched
    case- and ``ё``-insensitively): its ``object`` chunk, its field chunks (in index order), its
    modules (path -> module kind) and the descriptors of its other definitions (paths).

    Several projects of an export may define one object (a configuration and an extension that
    adopts it): the answer is the first by :func:`definition_order`, so it does not depend on the
    order the files were indexed in. The engine's lock held. ``LookupError`` if no such object is
    indexed; the message lists up to 10 similar names."""
    owner_key = fold(f"{object_type}.{name}")
    store = state.store
    objects = [store.get(s) for s in store.slots_where(kind="object", object_type=object_type).tolist()]
    match = [c for c in objects if fold(c.owner) == owner_key]
    if not match:
        close = sorted(c.owner for c in objects if fold(name) in fold(c.name))[:10]
        hint = f"; similar: {', '.join(close)}" if close else ""
        raise LookupError(f"no metadata object {object_type}.{name} in the index{hint}")
    extensions = _extension_srcs(state)
    match.sort(key=lambda c: definition_order(c, extensions))
    o = match[0]
    rec = state.files.get(o.path)
    fields = [store.get(s) for s in (rec.slot_list() if rec else []) if store.ids[s] not in (None, o.id)]
    return o, fields, _modules_of(state, o.owner), [c.path for c in match[1:]]


def definition_order(o: Chunk, extension_srcs: tuple[str, ...]) -> tuple[bool, bool, str]:
    """Sort key of one definition of a metadata object (its ``object`` chunk): the object's own
    definition first (not ``ObjectBelonging`` ``Adopted``, not in an extension project, whose
    ``src`` folders are ``extension_srcs``: ``""`` for the root itself), then by path."""
    adopted = o.properties.get("ObjectBelonging", "").casefold() == "adopted"
    in_extension = any(src == "" or o.path.startswith(src + "/") for src in extension_srcs)
    return adopted, in_extension, o.path


def _extension_srcs(state: IndexState) -> tuple[str, ...]:
    """The ``src`` folders of the export's extension projects (``ExportInfo.projects``; none
    before the first scan)."""
    info = state.info
    return tuple(p.src for p in info.projects if p.is_extension) if info is not None else ()


def _modules_of(state: IndexState, owner: str) -> dict[str, str]:
    """Path -> module kind of every module of ``owner`` (``Тип.Имя``) and of its forms and
    commands (owners that start with ``Тип.Имя.``)."""
    store = state.store
    prefix = owner + "."
    modules = {}
    owners, kinds = store.tables["owner"].values, store.tables["module_kind"].values
    owner_col, kind_col = store.col("owner"), store.col("module_kind")
    for r in state.files.values():
        if r.kind != "bsl" or not r.slots:
            continue
        first = r.slot_list()[0]
        if store.ids[first] is None:
            continue
        o = owners[owner_col[first]]
        if o == owner or o.startswith(prefix):
            modules[r.path] = kinds[kind_col[first]]
    return modules


def object_names(state: IndexState, object_type: str) -> dict[str, str]:
    """``{owner: name}`` of every indexed metadata object of ``object_type`` (Russian singular),
    in index order. The engine's lock held."""
    store = state.store
    objects = [store.get(s) for s in store.slots_where(kind="object", object_type=object_type).tolist()]
    return {c.owner: c.name for c in objects if c is not None}
