"""The reference graph's symbol table and how a site resolves against it (:mod:`daemon.index.refgraph`).

:class:`SymbolTable` keeps each module's methods (:class:`ModuleSymbols`: folded names, export
flags), the modules by owner (``ОбщийМодуль.X``, ``Справочник.Y`` …) and the exported methods of
global common modules, swapped file by file. A site's resolution reads only entries under its own
keys (its folded name and the owner of the module it names): :meth:`SymbolTable.spec` turns a
site's kind and qualifier into what it looks up, :meth:`SymbolTable.lookup` finds the method
(a gid, ``fid << FID_SHIFT | method index``) or the reason it cannot, and
:meth:`SymbolTable.resolve_file` does a whole file, each distinct ``(kind, name, qualifier)`` once.

Resolution: a local call -> the same module, else an exported
method of a global common module; ``Модуль.Метод`` -> that common module's exported method (a
receiver that is no common module is a variable of unknown type: never guessed);
``Справочники.X.Метод`` -> the object's manager module; ``ЭтотОбъект.Метод`` -> the same module;
strings ``"М.Метод"``, ``"Справочники.X.Метод"``, ``"Обработка.X.МодульОбъекта.Метод"`` -> the
common module, the manager, the object module; bindings -> the module they name or belong to;
``&Вместо``/``ПродолжитьВызов`` -> the same module of the base configuration. Ties (an extension
adopting a module) go to the base configuration's module, then the first path.
"""

from __future__ import annotations

import bisect
from array import array
from collections.abc import Callable

import numpy as np

from ..contract import REASONS, REF_GROUPS, REF_KINDS, normalize_object_type
from ..sources.ref_record import KIND_CODES, KIND_NAMES, FileRefs
from ..text.folding import fold

_OBJECT_MODULE = frozenset(("модульобъекта", "objectmodule"))
#: The object type of common modules (their owner is ``ОбщийМодуль.<name>``).
COMMON = "ОбщийМодуль"
#: Binding kinds whose qualifier is the owner of the module holding the method, and the
#: module kind there (export not required).
_OWNER_KINDS = {
    "form_event": "form",
    "form_item_event": "form",
    "form_command": "form",
    "http_handler": "http_service",
    "web_operation": "web_service",
}
#: Kinds resolved in the same module only (``ЭтотОбъект``, a platform event).
_OWN_ONLY = frozenset(("this", "platform_event"))
#: Kinds resolved in the same module, else a global common module.
_OWN_THEN_GLOBAL = frozenset(("call", "idle", "handler"))
#: Kinds whose one-part qualifier may be a variable (else: a common module's name in a string).
_RECEIVER_KINDS = frozenset(("member", "notify", "handler"))
#: Reason code of an unresolved site: 1 + its index in :data:`daemon.contract.REASONS`.
REASON_CODE = {r: i + 1 for i, r in enumerate(REASONS)}
#: Kind code of a dynamic site (``Выполнить``/``Вычислить``, a computed name): never resolved.
DYNAMIC = KIND_CODES["dynamic"]
#: Group of a kind code: 0 call, 1 string, 2 metadata.
GROUP_OF = [REF_GROUPS.index(REF_KINDS[k]) for k in KIND_NAMES]
#: A method's gid is ``fid << FID_SHIFT | method index``.
FID_SHIFT = 20
METHOD_MASK = (1 << FID_SHIFT) - 1

# Lookup specs (symbol-independent: from the site's kind and qualifier only)
_OWN, _OWN_GLOBAL, _BASE, _MODS, _FAIL = range(5)


class ModuleSymbols:
    """A module in the symbol table: its file id, folded owner, kind, extension flag, and its
    methods as sorted folded names with ``method index << 1 | export`` beside them (the first
    of a repeated name)."""

    __slots__ = ("fid", "owner", "kind", "extension", "names", "info")

    def __init__(self, fid: int, rec: FileRefs, intern):
        self.fid = fid
        self.owner = intern(fold(rec.owner))
        self.kind = rec.module_kind
        self.extension = rec.extension
        exports = rec.method_info()["export"].tolist() if rec.names else []
        first: dict[str, int] = {}
        for i, n in enumerate(rec.names):
            first.setdefault(intern(fold(n)), i << 1 | exports[i])
        self.names = sorted(first)
        self.info = array("i", [first[n] for n in self.names])

    def get(self, fname: str) -> int:
        """``method index << 1 | export`` of a folded name, -1 if the module has none."""
        k = bisect.bisect_left(self.names, fname)
        if k < len(self.names) and self.names[k] == fname:
            return self.info[k]
        return -1

    def defs(self) -> dict[str, int]:
        """Folded name -> ``method index << 1 | export``, every name of the module."""
        return dict(zip(self.names, self.info, strict=True))

    def identity(self) -> tuple[str, str, bool]:
        """What the lookups read besides the methods: owner, module kind, extension flag."""
        return self.owner, self.kind, self.extension


def owner_key(object_type: str, name: str) -> str:
    """The folded owner of an object's modules (``Справочник.Валюты`` -> ``справочник.валюты``)."""
    return fold(f"{object_type}.{name}")


def distinct_sites(rec: FileRefs) -> list[tuple[int, int, int, int]]:
    """The record's distinct ``(kind, name, qualifier)`` with their site counts."""
    v = rec.columns()
    if not len(v):
        return []
    key = (v["kind"].astype(np.uint64) << 56) | (v["name"].astype(np.uint64) << 28) | v["qual"].astype(np.uint64)
    uniq, counts = np.unique(key, return_counts=True)
    return [
        (u >> 56, (u >> 28) & ((1 << 28) - 1), u & ((1 << 28) - 1), n)
        for u, n in zip(uniq.tolist(), counts.tolist(), strict=True)
    ]


def changed_names(olds: dict[int, ModuleSymbols], news: dict[int, ModuleSymbols], affected: set[str]) -> None:
    """Add to ``affected`` the keys whose symbol-table entries differ between the modules taken out
    (``olds``) and put in (``news``), by file id: every name and the owner of a module added,
    removed or changed in owner, kind or extension flag; else the names whose method or export
    flag changed."""
    for fid in set(olds) | set(news):
        a, b = olds.get(fid), news.get(fid)
        if a is None or b is None or a.identity() != b.identity():
            for m in (a, b):
                if m is not None:
                    affected.update(m.names)
                    affected.add(m.owner)
        else:
            da, db = a.defs(), b.defs()
            for n in set(da) | set(db):
                if da.get(n) != db.get(n):
                    affected.add(n)


class SymbolTable:
    """Every module's methods by file id, the modules by owner and the global names (see the
    module docstring); ``paths`` is the graph's list of paths by file id (read for the order of
    modules sharing an owner), ``intern`` the graph's string interning."""

    def __init__(self, paths: list[str | None], intern: Callable[[str], str]) -> None:
        self.mods: dict[int, ModuleSymbols] = {}
        self.by_owner: dict[str, list[int]] = {}
        self.global_desc: dict[str, set[int]] = {}  # owner key -> descriptors saying Global
        self.global_names: dict[str, list[int]] = {}  # folded name -> global modules exporting it
        self._paths = paths
        self._intern = intern

    def unindex(self, fid: int, rec: FileRefs, olds: dict, affected: set[str]) -> None:
        """Take a record's symbols out (the modules replaced go to ``olds``)."""
        if rec.file_kind == "bsl":
            mod = self.mods.pop(fid, None)
            if mod is None:
                return
            olds[fid] = mod
            lst = self.by_owner.get(mod.owner)
            if lst is not None:
                lst.remove(fid)
                if not lst:
                    del self.by_owner[mod.owner]
            if self._is_global(mod):
                self._drop_global(mod)
        elif rec.global_module:
            key = self._intern(fold(rec.owner))
            s = self.global_desc.get(key)
            if s is not None:
                s.discard(fid)
                if not s:
                    del self.global_desc[key]
                    self._regloball(key, False, affected)

    def index(self, fid: int, rec: FileRefs, news: dict, affected: set[str]) -> None:
        """Put a record's symbols in (its module goes to ``news``; a descriptor making a common
        module global adds the keys that changes to ``affected``)."""
        if rec.file_kind == "bsl":
            mod = ModuleSymbols(fid, rec, self._intern)
            self.mods[fid] = mod
            news[fid] = mod
            lst = self.by_owner.setdefault(mod.owner, [])
            lst.append(fid)
            lst.sort(key=self._order)
            if self._is_global(mod):
                self._add_global(mod)
        elif rec.global_module:
            key = self._intern(fold(rec.owner))
            s = self.global_desc.setdefault(key, set())
            s.add(fid)
            if len(s) == 1:
                self._regloball(key, True, affected)

    def _order(self, fid: int) -> tuple[bool, str]:
        return self.mods[fid].extension, self._paths[fid]  # type: ignore[return-value]

    def _is_global(self, mod: ModuleSymbols) -> bool:
        return mod.kind == "common" and bool(self.global_desc.get(mod.owner))

    def _add_global(self, mod: ModuleSymbols) -> None:
        for n, v in zip(mod.names, mod.info, strict=True):
            if v & 1:
                lst = self.global_names.setdefault(n, [])
                lst.append(mod.fid)
                lst.sort(key=self._order)

    def _drop_global(self, mod: ModuleSymbols) -> None:
        for n, v in zip(mod.names, mod.info, strict=True):
            if v & 1:
                lst = self.global_names.get(n)
                if lst is not None and mod.fid in lst:
                    lst.remove(mod.fid)
                    if not lst:
                        del self.global_names[n]

    def _regloball(self, key: str, now_global: bool, affected: set[str]) -> None:
        """A common module owner (``key``) became global (or stopped being): its exports enter
        (leave) the global names; every name it defines and the owner are affected."""
        for fid in self.by_owner.get(key, ()):
            mod = self.mods[fid]
            if mod.kind != "common":
                continue
            if now_global:
                self._add_global(mod)
            else:
                self._drop_global(mod)
            affected.update(mod.names)
        affected.add(key)

    def file_keys(self, rec: FileRefs) -> set[str]:
        """The keys a record's resolution reads (independent of the symbol table)."""
        out: set[str] = set()
        strings = rec.strings
        names: set[int] = set()
        quals: set[tuple[int, int]] = set()
        for kind, ni, qi, _n in distinct_sites(rec):
            if kind != DYNAMIC:
                names.add(ni)
                quals.add((kind, qi))
        for ni in names:
            out.add(self._intern(fold(strings[ni])))
        for kind, qi in quals:
            spec = self.spec(rec, KIND_NAMES[kind], strings[qi])
            if spec[0] in (_BASE, _MODS):
                out.add(spec[1])
        return out

    def resolve_file(self, fid: int, rec: FileRefs, local: tuple[int, int]):
        """``(keys -> unresolved sites, foreign target gid -> sites per group, dynamic sites)``."""
        keys: dict[str, int] = {}
        targets: dict[int, list[int]] = {}
        dynamic = 0
        strings = rec.strings
        specs: dict[tuple[int, int], tuple] = {}
        folded: dict[int, str] = {}
        for kind, ni, qi, n in distinct_sites(rec):
            if kind == DYNAMIC:
                dynamic += n
                continue
            fname = folded.get(ni)
            if fname is None:
                fname = folded[ni] = self._intern(fold(strings[ni]))
            spec = specs.get((kind, qi))
            if spec is None:
                spec = specs[(kind, qi)] = self.spec(rec, KIND_NAMES[kind], strings[qi])
            if spec[0] in (_BASE, _MODS):
                keys.setdefault(spec[1], 0)
            gid, _reason = self.lookup(fid, spec, fname)
            if gid < 0:
                keys[fname] = keys.get(fname, 0) + n
                continue
            keys.setdefault(fname, 0)
            if gid >> FID_SHIFT not in local:
                targets.setdefault(gid, [0, 0, 0])[GROUP_OF[kind]] += n
        return keys, targets, dynamic

    # ----------------------------------------------------------------- resolution

    def spec(self, rec: FileRefs, kind: str, qual: str) -> tuple:
        """What a site looks up, from its kind and qualifier alone (see :meth:`lookup`)."""
        if kind in _OWN_ONLY or (kind == "notify" and not qual):
            return (_OWN,)
        if kind in _OWN_THEN_GLOBAL and not qual:
            return (_OWN_GLOBAL,)
        if kind in ("proceed", "extension"):
            return (_BASE, self._intern(fold(rec.owner)), rec.module_kind)
        mk = _OWNER_KINDS.get(kind)
        if mk is not None:
            return (_MODS, self._intern(fold(qual)), mk, False, REASON_CODE["unknown_module"])
        if kind == "manager":
            coll, _, obj = qual.partition(".")
            t = normalize_object_type(coll)
            if t is None or not obj:
                return (_FAIL, REASON_CODE["unknown_variable_type"])
            return (_MODS, self._intern(owner_key(t, obj)), "manager", True, REASON_CODE["unknown_module"])
        if not qual or qual[0] == "?":
            return (_FAIL, REASON_CODE["unknown_variable_type"])
        parts = qual.split(".")
        if len(parts) == 1:
            miss = "unknown_variable_type" if kind in _RECEIVER_KINDS else "unknown_module"
            return (_MODS, self._intern(owner_key(COMMON, parts[0])), "common", True, REASON_CODE[miss])
        if kind == "member":  # a deeper chain in code: a property of something
            return (_FAIL, REASON_CODE["unknown_variable_type"])
        t = normalize_object_type(parts[0])
        if t is None:
            return (_FAIL, REASON_CODE["unknown_module"])
        if len(parts) == 2:
            mk = "common" if t == COMMON else "manager"
            return (_MODS, self._intern(owner_key(t, parts[1])), mk, True, REASON_CODE["unknown_module"])
        if len(parts) == 3 and fold(parts[2]) in _OBJECT_MODULE:
            return (_MODS, self._intern(owner_key(t, parts[1])), "object", True, REASON_CODE["unknown_module"])
        return (_FAIL, REASON_CODE["unknown_module"])

    def lookup(self, fid: int, spec: tuple, fname: str) -> tuple[int, int]:
        """``(target gid, 0)`` or ``(-1, reason code)``."""
        op = spec[0]
        if op == _OWN or op == _OWN_GLOBAL:
            mod = self.mods.get(fid)
            v = mod.get(fname) if mod is not None else -1
            if v >= 0:
                return fid << FID_SHIFT | v >> 1, 0
            if op == _OWN_GLOBAL:
                for g in self.global_names.get(fname, ()):
                    return g << FID_SHIFT | self.mods[g].get(fname) >> 1, 0
            return -1, REASON_CODE["no_such_method"]
        if op == _FAIL:
            return -1, spec[1]
        if op == _BASE:
            found = False
            for g in self.by_owner.get(spec[1], ()):
                mod = self.mods[g]
                if g == fid or mod.extension or mod.kind != spec[2]:
                    continue
                found = True
                v = mod.get(fname)
                if v >= 0:
                    return g << FID_SHIFT | v >> 1, 0
            return -1, REASON_CODE["no_such_method" if found else "unknown_module"]
        _op, owner, mk, export, miss = spec
        found = hidden = False
        for g in self.by_owner.get(owner, ()):
            mod = self.mods[g]
            if mod.kind != mk:
                continue
            found = True
            v = mod.get(fname)
            if v < 0:
                continue
            if export and not v & 1:
                hidden = True
                continue
            return g << FID_SHIFT | v >> 1, 0
        if not found:
            return -1, miss
        return -1, REASON_CODE["not_exported" if hidden else "no_such_method"]

    def resolve(self, fid: int, rec: FileRefs, kind: str, name: str, qual: str) -> tuple[int, int]:
        """``(target gid, 0)`` or ``(-1, reason code)`` for one site of file ``fid``, from its kind,
        name and qualifier as written."""
        if kind == "dynamic":
            return -1, REASON_CODE["dynamic"]
        return self.lookup(fid, self.spec(rec, kind, qual), fold(name))
