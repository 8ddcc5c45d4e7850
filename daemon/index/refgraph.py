"""The reference graph: every file's sites resolved against every module's methods, kept per file.

Input: one :class:`~daemon.sources.references.FileRefs` per file (a module's calls and string
references, a descriptor's or a form layout's bindings), as the chunking pass extracts them.
:meth:`RefGraph.update` swaps files in and out; the graph keeps

* the symbol table: each module's methods (folded name -> method id, export), modules by owner
  (``ОбщийМодуль.X``, ``Справочник.Y`` …) and the exported methods of global common modules;
* per file, what its sites resolved to (the distinct target methods) and its **keys**: the folded
  names and module owners its resolution read, with how many of its sites stayed unresolved
  under each name;
* the reverse index: target method -> {file: sites}; and key -> {file: unresolved sites}.

A site's resolution reads only symbol-table entries under its own keys, so an update re-resolves
the changed files plus the files holding a key whose entries changed (a method added, removed,
exported or not; a module added, removed, moved, made global): the graph after any sequence of
updates equals one built from scratch (``tests/engine/test_refgraph.py`` checks it on random edits).

Resolution (:meth:`RefGraph.resolve_site`): a local call -> the same module, else an exported
method of a global common module; ``Модуль.Метод`` -> that common module's exported method (a
receiver that is no common module is a variable of unknown type: never guessed);
``Справочники.X.Метод`` -> the object's manager module; ``ЭтотОбъект.Метод`` -> the same module;
strings ``"М.Метод"``, ``"Справочники.X.Метод"``, ``"Обработка.X.МодульОбъекта.Метод"`` -> the
common module, the manager, the object module; bindings -> the module they name or belong to;
``&Вместо``/``ПродолжитьВызов`` -> the same module of the base configuration. Ties (an extension
adopting a module) go to the base configuration's module, then the first path.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

import msgspec
import numpy as np

from ..contract import normalize_object_type
from ..sources.references import (
    KIND_NAMES,
    REASONS,
    REF_GROUPS,
    REF_KINDS,
    FileRefs,
)
from ..text.folding import fold

__all__ = [
    "RefGraph",
    "Reference",
    "RefCounts",
    "RefAnswer",
    "GraphEdge",
    "CallGraph",
]

# ---------------------------------------------------------------------------------------
# answers
# ---------------------------------------------------------------------------------------


class Reference(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One reference: where (``path``, 0-based ``line``, UTF-16 ``col``..``end``), from which
    method (``caller``: a method id; ``None`` for module-level code, metadata or the platform),
    the ``kind``, the callee as written, the ``detail`` (event, helper, annotation), and what it
    resolved to (``target``) or why not (``reason``, one of :data:`REASONS`)."""

    path: str
    line: int
    col: int
    end: int
    caller: str | None = None
    kind: str
    callee: str
    detail: str = ""
    target: str | None = None
    reason: str | None = None


class RefCounts(msgspec.Struct, kw_only=True):
    """How complete an answer is, counted apart: ``resolved`` calls, ``string`` references (a
    method named by a string or a handler reference), ``metadata`` bindings (subscriptions, jobs,
    forms, services, platform events, extensions), ``possible`` callers (unresolved sites with the
    same method name), and the configuration's ``dynamic`` sites (``Выполнить``/``Вычислить`` and
    computed names: any of them may call the method, so the answer is a lower bound when > 0)."""

    resolved: int = 0
    string: int = 0
    metadata: int = 0
    possible: int = 0
    dynamic: int = 0


class RefAnswer(msgspec.Struct, kw_only=True):
    """Who references ``target``: ``references`` (sorted by path and position, at most ``limit``),
    ``possible`` (unresolved sites with the same name, on request), the counts, ``total``
    (references before the cut), ``truncated``, and ``lower_bound`` (dynamic sites exist)."""

    target: str
    references: list[Reference]
    possible: list[Reference] = []
    counts: RefCounts
    total: int
    truncated: bool = False
    lower_bound: bool = False


class GraphEdge(msgspec.Struct, array_like=True):
    """``source`` calls ``dest`` (method ids; for a binding the source is ``<path>#<kind>:<detail>``) in
    ``count`` sites of ``kind`` (the first site's kind)."""

    source: str
    dest: str
    kind: str
    count: int


class CallGraph(msgspec.Struct, kw_only=True):
    """A bounded walk from ``start``: ``direction`` ``callers`` or ``callees``; ``nodes`` with
    their depth (the start has 0); ``edges``; ``truncated`` when a fan-out cap or the depth cut
    something; ``cycles``: edges back to a node already reached (recursion, mutual calls)."""

    start: str
    direction: str
    nodes: dict[str, int]
    edges: list[GraphEdge]
    truncated: bool = False
    cycles: int = 0


# ---------------------------------------------------------------------------------------
# symbol table
# ---------------------------------------------------------------------------------------

_OBJECT_MODULE = frozenset(("модульобъекта", "objectmodule"))
_COMMON = "ОбщийМодуль"
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
_RESOLVED = 0
_REASON = {r: i + 1 for i, r in enumerate(REASONS)}


class _Mod:
    """A module in the symbol table: folded owner, kind, extension flag, methods
    (folded name -> (method id, export); the first of a repeated name)."""

    __slots__ = ("owner", "kind", "extension", "defs")

    def __init__(self, rec: FileRefs):
        self.owner = fold(rec.owner)
        self.kind = rec.module_kind
        self.extension = rec.extension
        defs: dict[str, tuple[str, bool]] = {}
        for m in rec.methods:
            defs.setdefault(fold(m.name), (m.id, m.export))
        self.defs = defs

    def identity(self) -> tuple[str, str, bool]:
        return self.owner, self.kind, self.extension


class _FileState:
    """What a file's resolution contributed: its target methods with their site counts, its keys
    with unresolved-site counts, and its dynamic sites (for removal and for the totals)."""

    __slots__ = ("targets", "keys", "dynamic")

    def __init__(self, targets: dict[str, int], keys: dict[str, int], dynamic: int):
        self.targets = targets
        self.keys = keys
        self.dynamic = dynamic


def _owner_key(object_type: str, name: str) -> str:
    return fold(f"{object_type}.{name}")


# ---------------------------------------------------------------------------------------
# the graph
# ---------------------------------------------------------------------------------------


class RefGraph:
    """References of a whole export, resolved, with the reverse index (see the module docstring).

    Not thread-safe: the owner serialises :meth:`update` with the queries (the engine lock)."""

    def __init__(self) -> None:
        self._files: dict[str, FileRefs] = {}
        self._state: dict[str, _FileState] = {}
        self._mods: dict[str, _Mod] = {}
        self._by_owner: dict[str, list[str]] = {}
        self._global_desc: dict[str, set[str]] = {}  # owner key -> descriptors saying Global
        self._global_names: dict[str, list[str]] = {}  # folded name -> global modules exporting it
        self._callers: dict[str, dict[str, int]] = {}  # target -> {path: sites}
        self._keys: dict[str, dict[str, int]] = {}  # key -> {path: unresolved sites}
        self._dynamic = 0
        self._pending_old: dict[str, _Mod] = {}  # modules replaced or removed by the running update
        self._pending_new: dict[str, _Mod] = {}  # modules added by it

    # ----------------------------------------------------------------- updates

    def __len__(self) -> int:
        return len(self._files)

    def __contains__(self, path: str) -> bool:
        return path in self._files

    def file(self, path: str) -> FileRefs | None:
        """The record of ``path`` (``None`` if the graph has none)."""
        return self._files.get(path)

    def paths(self) -> list[str]:
        """Every file with a record, sorted."""
        return sorted(self._files)

    def update(self, records: Iterable[FileRefs] = (), removed: Iterable[str] = ()) -> int:
        """Swap in ``records`` (a file's new record replaces its old one) and drop ``removed``
        paths; re-resolve what the change can reach. Returns the number of files re-resolved."""
        new = {r.path: r for r in records}
        gone = [p for p in removed if p in self._files and p not in new]
        changed = set(new) | set(gone)
        for p in changed:
            self._retract(p)
        affected: set[str] = set()
        for p in gone:
            old = self._files.pop(p)
            self._unindex_symbols(old, affected)
        for p, rec in new.items():
            old = self._files.get(p)
            if old is not None:
                self._unindex_symbols(old, affected)
            self._files[p] = rec
        for rec in new.values():
            self._index_symbols(rec, affected)
        self._touched_by_symbols(affected)
        dependents: set[str] = set()
        for k in affected:
            holders = self._keys.get(k)
            if holders:
                dependents.update(holders)
        dependents -= changed
        for p in dependents:
            self._retract(p)
        todo = sorted(dependents | set(new))
        for p in todo:
            self._contribute(p)
        return len(todo)

    def _unindex_symbols(self, rec: FileRefs, affected: set[str]) -> None:
        """Take a record's symbols out (its keys go to ``affected`` in :meth:`_touched_by_symbols`)."""
        p = rec.path
        if rec.file_kind == "bsl":
            mod = self._mods.pop(p, None)
            if mod is not None:
                self._pending_old[p] = mod
                lst = self._by_owner.get(mod.owner)
                if lst is not None:
                    lst.remove(p)
                    if not lst:
                        del self._by_owner[mod.owner]
                if self._is_global(mod):
                    self._drop_global(p, mod)
        elif rec.global_module:
            key = fold(rec.owner)
            was = self._global_now(key)
            s = self._global_desc.get(key)
            if s is not None:
                s.discard(p)
                if not s:
                    del self._global_desc[key]
            if was and not self._global_now(key):
                self._regloball(key, False, affected)

    def _index_symbols(self, rec: FileRefs, affected: set[str]) -> None:
        p = rec.path
        if rec.file_kind == "bsl":
            mod = _Mod(rec)
            self._mods[p] = mod
            self._pending_new[p] = mod
            lst = self._by_owner.setdefault(mod.owner, [])
            lst.append(p)
            lst.sort(key=self._order)
            if self._is_global(mod):
                self._add_global(p, mod)
        elif rec.global_module:
            key = fold(rec.owner)
            was = self._global_now(key)
            self._global_desc.setdefault(key, set()).add(p)
            if not was:
                self._regloball(key, True, affected)

    def _touched_by_symbols(self, affected: set[str]) -> None:
        """The keys whose symbol entries changed between the old and new modules of this update."""
        olds, news = self._pending_old, self._pending_new
        for p in set(olds) | set(news):
            a, b = olds.get(p), news.get(p)
            if a is None or b is None or a.identity() != b.identity():
                for m in (a, b):
                    if m is not None:
                        affected.update(m.defs)
                        affected.add(m.owner)
            else:
                for n in set(a.defs) | set(b.defs):
                    if a.defs.get(n) != b.defs.get(n):
                        affected.add(n)
        olds.clear()
        news.clear()

    def _order(self, p: str) -> tuple[bool, str]:
        return self._mods[p].extension, p

    def _global_now(self, owner_key: str) -> bool:
        return bool(self._global_desc.get(owner_key))

    def _is_global(self, mod: _Mod) -> bool:
        return mod.kind == "common" and self._global_now(mod.owner)

    def _add_global(self, p: str, mod: _Mod) -> None:
        for n, (_id, export) in mod.defs.items():
            if export:
                lst = self._global_names.setdefault(n, [])
                lst.append(p)
                lst.sort(key=self._order)

    def _drop_global(self, p: str, mod: _Mod) -> None:
        for n, (_id, export) in mod.defs.items():
            if export:
                lst = self._global_names.get(n)
                if lst is not None and p in lst:
                    lst.remove(p)
                    if not lst:
                        del self._global_names[n]

    def _regloball(self, owner_key: str, now_global: bool, affected: set[str]) -> None:
        """A common module owner became global (or stopped being): its exports enter (leave) the
        global names; every name it defines and the owner are affected."""
        for p in self._by_owner.get(owner_key, ()):
            mod = self._mods[p]
            if mod.kind != "common":
                continue
            if now_global:
                self._add_global(p, mod)
            else:
                self._drop_global(p, mod)
            affected.update(mod.defs)
        affected.add(owner_key)

    # ----------------------------------------------------------------- per-file contributions

    def _retract(self, p: str) -> None:
        st = self._state.pop(p, None)
        if st is None:
            return
        for t in st.targets:
            d = self._callers.get(t)
            if d is not None:
                d.pop(p, None)
                if not d:
                    del self._callers[t]
        for k in st.keys:
            d = self._keys.get(k)
            if d is not None:
                d.pop(p, None)
                if not d:
                    del self._keys[k]
        self._dynamic -= st.dynamic

    def _contribute(self, p: str) -> None:
        rec = self._files.get(p)
        if rec is None:
            return
        st = self._resolve_file(rec)
        self._state[p] = st
        for t, n in st.targets.items():
            self._callers.setdefault(t, {})[p] = n
        for k, n in st.keys.items():
            self._keys.setdefault(k, {})[p] = n
        self._dynamic += st.dynamic

    def _resolve_file(self, rec: FileRefs) -> _FileState:
        v = rec.view()
        if not len(v):
            return _FileState({}, {}, 0)
        key = (v["kind"].astype(np.uint64) << 56) | (v["name"].astype(np.uint64) << 28) | v["qual"].astype(np.uint64)
        uniq, inverse, counts = np.unique(key, return_inverse=True, return_counts=True)
        strings = rec.strings
        folded: dict[int, str] = {}
        targets: dict[str, int] = {}
        keys: dict[str, int] = {}
        dynamic = 0
        mask = (1 << 28) - 1
        for u, n in zip(uniq.tolist(), counts.tolist()):
            kind = KIND_NAMES[u >> 56]
            ni, qi = (u >> 28) & mask, u & mask
            if kind == "dynamic":
                dynamic += n
                continue
            fname = folded.get(ni)
            if fname is None:
                fname = folded[ni] = fold(strings[ni])
            target, reason, owner_key = self._resolve(rec, kind, fname, strings[qi])
            if target is not None:
                targets[target] = targets.get(target, 0) + n
                keys.setdefault(fname, 0)
            else:
                keys[fname] = keys.get(fname, 0) + n
            if owner_key:
                keys.setdefault(owner_key, 0)
        del inverse
        return _FileState(targets, keys, dynamic)

    # ----------------------------------------------------------------- resolution

    def resolve_site(self, path: str, index: int) -> tuple[str | None, str | None]:
        """``(target method id, None)`` or ``(None, reason)`` for site ``index`` of ``path``."""
        rec = self._files[path]
        s = rec.site(index)
        if s.kind == "dynamic":
            return None, "dynamic"
        target, reason, _key = self._resolve(rec, s.kind, fold(s.name), s.qualifier)
        return target, (None if target is not None else REASONS[reason - 1])

    def _resolve(self, rec: FileRefs, kind: str, fname: str, qual: str) -> tuple[str | None, int, str]:
        """``(target, reason code, owner key read)`` of one site; code 0 when resolved."""
        if kind in _OWN_ONLY or (kind == "notify" and not qual):
            return self._in_own(rec, fname)
        if kind in _OWN_THEN_GLOBAL and not qual:
            t, r, _k = self._in_own(rec, fname)
            if t is not None:
                return t, r, ""
            for p in self._global_names.get(fname, ()):
                return self._mods[p].defs[fname][0], _RESOLVED, ""
            return None, _REASON["no_such_method"], ""
        if kind in ("proceed", "extension"):
            return self._in_base(rec, fname)
        mk = _OWNER_KINDS.get(kind)
        if mk is not None:
            key = fold(qual)
            return self._in_modules(key, mk, fname, False, "unknown_module")
        if kind == "manager":
            coll, _, obj = qual.partition(".")
            t = normalize_object_type(coll)
            if t is None or not obj:
                return None, _REASON["unknown_variable_type"], ""
            return self._in_modules(_owner_key(t, obj), "manager", fname, True, "unknown_module")
        # a qualified reference in code or in a string: "М", "Тип.Объект", "Тип.Объект.МодульОбъекта"
        if not qual or qual[0] == "?":
            return None, _REASON["unknown_variable_type"], ""
        parts = qual.split(".")
        if len(parts) == 1:
            miss = "unknown_variable_type" if kind in _RECEIVER_KINDS else "unknown_module"
            return self._in_modules(_owner_key(_COMMON, parts[0]), "common", fname, True, miss)
        if kind == "member":  # a deeper chain in code: a property of something
            return None, _REASON["unknown_variable_type"], ""
        t = normalize_object_type(parts[0])
        if t is None:
            return None, _REASON["unknown_module"], ""
        if len(parts) == 2:
            mk = "common" if t == _COMMON else "manager"
            return self._in_modules(_owner_key(t, parts[1]), mk, fname, True, "unknown_module")
        if len(parts) == 3 and fold(parts[2]) in _OBJECT_MODULE:
            return self._in_modules(_owner_key(t, parts[1]), "object", fname, True, "unknown_module")
        return None, _REASON["unknown_module"], ""

    def _in_own(self, rec: FileRefs, fname: str) -> tuple[str | None, int, str]:
        mod = self._mods.get(rec.path)
        if mod is not None:
            d = mod.defs.get(fname)
            if d is not None:
                return d[0], _RESOLVED, ""
        return None, _REASON["no_such_method"], ""

    def _in_modules(
        self, owner_key: str, kind: str, fname: str, export: bool, miss: str
    ) -> tuple[str | None, int, str]:
        found = False
        hidden = False
        for p in self._by_owner.get(owner_key, ()):
            mod = self._mods[p]
            if mod.kind != kind:
                continue
            found = True
            d = mod.defs.get(fname)
            if d is None:
                continue
            if export and not d[1]:
                hidden = True
                continue
            return d[0], _RESOLVED, owner_key
        if not found:
            return None, _REASON[miss], owner_key
        return None, _REASON["not_exported" if hidden else "no_such_method"], owner_key

    def _in_base(self, rec: FileRefs, fname: str) -> tuple[str | None, int, str]:
        """The adopted method: the same owner and module kind in the base configuration."""
        own = self._mods.get(rec.path)
        owner = own.owner if own is not None else fold(rec.owner)
        kind = own.kind if own is not None else rec.module_kind
        found = False
        for p in self._by_owner.get(owner, ()):
            mod = self._mods[p]
            if p == rec.path or mod.extension or mod.kind != kind:
                continue
            found = True
            d = mod.defs.get(fname)
            if d is not None:
                return d[0], _RESOLVED, owner
        return None, _REASON["no_such_method" if found else "unknown_module"], owner

    # ----------------------------------------------------------------- queries

    def methods_named(self, name: str) -> list[str]:
        """Method ids for ``Метод``, ``Модуль.Метод`` (a common module; or any owner ending with
        that name: ``Валюты.Метод`` finds the catalog's manager method), or an owner
        (``Справочник.Валюты``, ``ОбщийМодуль.X``: every method of its modules). Sorted."""
        name = name.strip()
        out: set[str] = set()
        key = fold(name)
        if key in self._by_owner:
            for p in self._by_owner[key]:
                out.update(i for i, _e in self._mods[p].defs.values())
            return sorted(out)
        head, dot, last = key.rpartition(".")
        fn = last if dot else key
        for p, mod in self._mods.items():
            d = mod.defs.get(fn)
            if d is None:
                continue
            if dot and not (mod.owner == head or mod.owner.endswith("." + head)):
                continue
            out.add(d[0])
        return sorted(out)

    def _sites_named(self, rec: FileRefs, fname: str) -> np.ndarray:
        """Indices of ``rec``'s sites whose folded name is ``fname``."""
        idx = [i for i, s in enumerate(rec.strings) if len(s) == len(fname) and fold(s) == fname]
        if not idx:
            return np.empty(0, dtype=np.int64)
        return np.flatnonzero(np.isin(rec.view()["name"], idx))

    def _reference(self, rec: FileRefs, i: int, target: str | None, reason: str | None) -> Reference:
        s = rec.site(i)
        return Reference(
            path=rec.path,
            line=s.line,
            col=s.col,
            end=s.end,
            caller=s.caller,
            kind=s.kind,
            callee=s.callee,
            detail=s.detail,
            target=target,
            reason=reason,
        )

    def references(self, target: str, *, limit: int = 1000, possible: bool = False) -> RefAnswer:
        """Who references the method ``target`` (a method id), with the honesty counts.

        ``limit`` caps ``references`` (and ``possible``); ``possible``: list the unresolved sites
        with the same name too (they are always counted)."""
        fname = fold(target.rpartition("::")[2].split("@", 1)[0])
        holders = self._callers.get(target, {})
        refs: list[Reference] = []
        counts = RefCounts(dynamic=self._dynamic)
        for p in sorted(holders):
            rec = self._files[p]
            for i in self._sites_named(rec, fname).tolist():
                s = rec.site(i)
                if s.kind == "dynamic":
                    continue
                t, _r, _k = self._resolve(rec, s.kind, fname, s.qualifier)
                if t != target:
                    continue
                group = REF_KINDS[s.kind]
                if group == "call":
                    counts.resolved += 1
                elif group == "string":
                    counts.string += 1
                else:
                    counts.metadata += 1
                if len(refs) < limit:
                    refs.append(self._reference(rec, i, t, None))
        total = counts.resolved + counts.string + counts.metadata
        maybe: list[Reference] = []
        for p, n in sorted(self._keys.get(fname, {}).items()):
            if not n:
                continue
            counts.possible += n
            if not possible or len(maybe) >= limit:
                continue
            rec = self._files[p]
            for i in self._sites_named(rec, fname).tolist():
                s = rec.site(i)
                if s.kind == "dynamic":
                    continue
                t, r, _k = self._resolve(rec, s.kind, fname, s.qualifier)
                if t is None and len(maybe) < limit:
                    maybe.append(self._reference(rec, i, None, REASONS[r - 1]))
        return RefAnswer(
            target=target,
            references=refs,
            possible=maybe,
            counts=counts,
            total=total,
            truncated=total > len(refs),
            lower_bound=self._dynamic > 0,
        )

    def callees(self, method: str) -> list[Reference]:
        """What the method ``method`` (a method id) references, resolved or not, in file order."""
        path = method.partition("::")[0]
        rec = self._files.get(path)
        if rec is None:
            return []
        idx = next((i for i, m in enumerate(rec.methods) if m.id == method), None)
        if idx is None:
            return []
        v = rec.view()
        out: list[Reference] = []
        for i in np.flatnonzero(v["caller"] == idx).tolist():
            s = rec.site(i)
            if s.kind == "dynamic":
                out.append(self._reference(rec, i, None, "dynamic"))
                continue
            t, r, _k = self._resolve(rec, s.kind, fold(s.name), s.qualifier)
            out.append(self._reference(rec, i, t, None if t is not None else REASONS[r - 1]))
        return out

    def site_at(self, path: str, line: int, col: int) -> Reference | None:
        """The site whose range holds the position (0-based line, UTF-16 column), resolved: what
        LSP "go to definition" on a call or a string naming a method needs."""
        rec = self._files.get(path)
        if rec is None:
            return None
        v = rec.view()
        hit = np.flatnonzero((v["line"] == line) & (v["col"] <= col) & (v["end"] >= col))
        if not len(hit):
            return None
        i = int(hit[0])
        s = rec.site(i)
        if s.kind == "dynamic":
            return self._reference(rec, i, None, "dynamic")
        t, r, _k = self._resolve(rec, s.kind, fold(s.name), s.qualifier)
        return self._reference(rec, i, t, None if t is not None else REASONS[r - 1])

    def call_graph(self, start: str, direction: str = "callers", depth: int = 3, fan_out: int = 20) -> CallGraph:
        """A breadth-first walk from the method ``start`` over callers or callees, at most
        ``depth`` levels and ``fan_out`` neighbours per node (the most-referenced first). A node
        is expanded once, so recursion and mutual calls end the walk (counted in ``cycles``).
        Bindings and module-level code are leaves (``<path>#<kind>:<detail>``, ``<path>::<module>``)."""
        if direction not in ("callers", "callees"):
            raise ValueError("direction must be 'callers' or 'callees'")
        nodes: dict[str, int] = {start: 0}
        edges: list[GraphEdge] = []
        truncated = False
        cycles = 0
        queue: deque[str] = deque([start])
        while queue:
            node = queue.popleft()
            level = nodes[node]
            if "::" not in node or node.endswith("::<module>"):
                continue  # a binding or module-level code: nothing to expand
            if level >= depth:
                truncated = truncated or bool(self._neighbours(node, direction))
                continue
            nb = self._neighbours(node, direction)
            if len(nb) > fan_out:
                truncated = True
            for other, kind, count in nb[:fan_out]:
                edges.append(
                    GraphEdge(node, other, kind, count)
                    if direction == "callees"
                    else GraphEdge(other, node, kind, count)
                )
                if other in nodes:
                    cycles += 1
                    continue
                nodes[other] = level + 1
                queue.append(other)
        return CallGraph(start=start, direction=direction, nodes=nodes, edges=edges, truncated=truncated, cycles=cycles)

    def _neighbours(self, node: str, direction: str) -> list[tuple[str, str, int]]:
        """``[(other node, kind, sites)]``, most sites first, then by id."""
        agg: dict[str, list] = {}
        if direction == "callees":
            refs = [r for r in self.callees(node) if r.target is not None]
            for r in refs:
                a = agg.setdefault(r.target, [r.kind, 0])
                a[1] += 1
        else:
            for r in self.references(node, limit=1 << 30).references:
                if r.caller is not None:
                    src = r.caller
                elif REF_KINDS[r.kind] == "metadata":
                    src = f"{r.path}#{r.kind}:{r.detail}"
                else:
                    src = f"{r.path}::<module>"
                a = agg.setdefault(src, [r.kind, 0])
                a[1] += 1
        return sorted(((o, k, n) for o, (k, n) in agg.items()), key=lambda x: (-x[2], x[0]))

    # ----------------------------------------------------------------- totals and checks

    def stats(self) -> dict[str, int]:
        """Totals: files, modules, methods, sites; resolved sites by group; unresolved sites by
        reason; dynamic sites; modules with syntax errors (``partial``)."""
        out = {"files": len(self._files), "modules": len(self._mods), "sites": 0, "partial": 0}
        out["methods"] = sum(len(m.defs) for m in self._mods.values())
        for g in REF_GROUPS[:3]:
            out[f"resolved_{g}"] = 0
        for r in REASONS:
            out[f"unresolved_{r}"] = 0
        for p, rec in self._files.items():
            out["sites"] += len(rec)
            out["partial"] += rec.partial
            for i in range(len(rec)):
                t, reason = self.resolve_site(p, i)
                if t is not None:
                    out[f"resolved_{REF_KINDS[rec.site(i).kind]}"] += 1
                else:
                    out[f"unresolved_{reason}"] += 1
        return out

    def state(self) -> dict:
        """A canonical picture of the resolved graph (every index, sorted) to compare two graphs:
        one updated step by step must equal one built from scratch."""
        return {
            "callers": {t: dict(sorted(d.items())) for t, d in sorted(self._callers.items())},
            "keys": {k: dict(sorted(d.items())) for k, d in sorted(self._keys.items())},
            "by_owner": {k: list(v) for k, v in sorted(self._by_owner.items())},
            "global_names": {k: list(v) for k, v in sorted(self._global_names.items())},
            "dynamic": self._dynamic,
            "files": sorted(self._files),
        }


# ---------------------------------------------------------------------------------------
# reading an export
# ---------------------------------------------------------------------------------------


def read_references(root, *, max_file_bytes: int = 8 * 2**20, max_lines: int = 400) -> tuple[list[FileRefs], list]:
    """Every file's references of an export, read from disk: ``(records, skips)``.

    Modules (chunked and parsed here), the layouts of form modules, and the descriptors of
    :data:`daemon.sources.bindings.BINDING_TYPES`. The daemon gets the same records from its
    chunking pass instead; this is the from-scratch build for tests, tools and the bench.
    """
    from pathlib import Path

    from ..sources.bindings import BINDING_TYPES, descriptor_references, form_layout_path, form_references
    from ..sources.files import SkipFile, decode_bytes, read_regular_bytes
    from ..sources.references import module_references
    from ..sources.scan import scan_export

    root = Path(root)
    scan = scan_export(root, max_file_bytes=max_file_bytes)
    info = scan.info
    ext_projects = {p.path for p in info.projects if p.is_extension}
    out: list[FileRefs] = []
    skips: list = list(scan.skipped)
    for src in scan.modules:
        extension = src.project in ext_projects
        try:
            text, _enc = decode_bytes(read_regular_bytes(src.fs_path(root), max_file_bytes))
        except SkipFile as exc:
            skips.append(exc.to_skip(src.path))
            continue
        out.append(
            module_references(
                text,
                path=src.path,
                owner=src.owner,
                object_type=src.object_type,
                module_kind=src.module_kind,
                extension=extension,
                max_lines=max_lines,
            )
        )
        if src.module_kind != "form":
            continue
        layout = form_layout_path(src.path)
        disk = form_layout_path(src.disk_path) if src.disk_path else layout
        if layout is None or disk is None:
            continue
        try:
            data = read_regular_bytes(root / disk, max_file_bytes)
        except SkipFile as exc:
            if exc.reason != "unreadable":  # absent: a form module without a layout file
                skips.append(exc.to_skip(layout))
            continue
        rec = form_references(data, path=layout, fmt=info.format, extension=extension)
        skips.extend(rec.skips)
        out.append(rec)
    for src in scan.metadata:
        if src.object_type not in BINDING_TYPES:
            continue
        try:
            data = read_regular_bytes(src.fs_path(root), max_file_bytes)
        except SkipFile as exc:
            skips.append(exc.to_skip(src.path))
            continue
        rec = descriptor_references(
            data, path=src.path, owner=src.owner, object_type=src.object_type, extension=src.project in ext_projects
        )
        if rec is not None:
            skips.extend(rec.skips)
            out.append(rec)
    return out, skips
