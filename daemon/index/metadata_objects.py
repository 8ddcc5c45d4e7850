"""Metadata objects read out of one root's chunk store: an object with its fields and the
modules that belong to it (its own, its forms' and commands'), and the objects of one type.
What the daemon's ``get_metadata_object`` lookup answers (:class:`daemon.service.lookups.Lookups`).
"""

from __future__ import annotations

from ..contract import Chunk
from ..text.folding import fold
from .state import IndexState


def metadata_object(state: IndexState, object_type: str, name: str) -> tuple[Chunk, list[Chunk], dict[str, str]]:
    """The metadata object ``<object_type>.<name>`` (Russian singular type; the name is matched
    case- and ``ё``-insensitively): its ``object`` chunk, its field chunks (in index order) and
    its modules (path -> module kind). The engine's lock held. ``LookupError`` if no such object
    is indexed; the message lists up to 10 similar names."""
    owner_key = fold(f"{object_type}.{name}")
    store = state.store
    objects = [store.get(s) for s in store.slots_where(kind="object", object_type=object_type).tolist()]
    match = [c for c in objects if fold(c.owner) == owner_key]
    if not match:
        close = sorted(c.owner for c in objects if fold(name) in fold(c.name))[:10]
        hint = f"; similar: {', '.join(close)}" if close else ""
        raise LookupError(f"no metadata object {object_type}.{name} in the index{hint}")
    o = match[0]
    rec = state.files.get(o.path)
    fields = [store.get(s) for s in (rec.slot_list() if rec else []) if store.ids[s] not in (None, o.id)]
    return o, fields, _modules_of(state, o.owner)


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
