"""The reference graph: every file's sites resolved against every module's methods, kept per file.

Input: one :class:`~daemon.sources.ref_record.FileRefs` per file (a module's calls and string
references, a descriptor's or a form layout's bindings), as the chunking pass extracts them.
:meth:`RefGraph.update` swaps files in and out; the graph keeps

* the symbol table: each module's methods (folded names, export flags), modules by owner
  (``ОбщийМодуль.X``, ``Справочник.Y`` …) and the exported methods of global common modules;
* the **key index**: folded name or module owner -> the files whose sites read it, with how many
  of their sites under that name stayed unresolved (the "possible callers" count);
* the **reverse index**: target method -> the other files referencing it, with the sites per group
  (a method's own module and its form layout are always looked at directly, so the index holds
  only the references that cross files).

A site's resolution reads only symbol-table entries under its own keys (its folded name and the
owner of the module it names), so an update re-resolves the changed files plus the files holding a
key whose entries changed (a method added, removed, exported or not; a module added, removed, moved,
made global): the graph after any sequence of updates equals one built from scratch
(``tests/engine/test_refgraph.py`` checks it on random edits).

The symbol table and the resolution rules: :mod:`daemon.index.refgraph_symbols`; the saved form
(:meth:`RefGraph.to_bytes`): :mod:`daemon.index.refgraph_files`.

Memory: records keep their sites compressed; indexes are ``bytes`` of packed ``int64`` per key or
target, rebuilt once per key per update (an update touching many files filters each key once).
"""

from __future__ import annotations

import heapq
import itertools
from collections import deque
from collections.abc import Iterable

import numpy as np

from ..contract import REASONS, REF_GROUPS, REF_KINDS, CallGraph, GraphEdge, RefAnswer, RefCounts, Reference, Skip
from ..sources.bindings import form_layout_path, form_module_path
from ..sources.ref_record import KIND_NAMES, FileRefs
from ..text.folding import fold
from .refgraph_files import GraphParts, decode_graph, encode_graph
from .refgraph_symbols import (
    COMMON,
    DYNAMIC,
    FID_SHIFT,
    GROUP_OF,
    METHOD_MASK,
    ModuleSymbols,
    SymbolTable,
    changed_names,
    distinct_sites,
    owner_key,
)

__all__ = ["RefGraph", "method_of_chunk", "read_references", "read_binding_files"]

_M13 = (1 << 13) - 1
_M14 = (1 << 14) - 1
_M32 = (1 << 32) - 1


def method_of_chunk(chunk_id: str) -> str:
    """The method id of a method chunk: its id without a part suffix (``<path>::<Name>#2`` ->
    ``<path>::<Name>``)."""
    path, sep, tail = chunk_id.rpartition("::")
    return f"{path}{sep}{tail.split('#', 1)[0]}" if sep else chunk_id


def _pack_group(counts: list[int]) -> int:
    """Sites per group (call, string, metadata) -> ``call << 26 | string << 13 | metadata``, saturated."""
    return min(counts[0], _M14) << 26 | min(counts[1], _M13) << 13 | min(counts[2], _M13)


def _i64(b: bytes) -> np.ndarray:
    return np.frombuffer(b, dtype=np.int64)


# ---------------------------------------------------------------------------------------
# the graph
# ---------------------------------------------------------------------------------------


class RefGraph:
    """References of a whole export, resolved, with the reverse index (see the module docstring).

    Not thread-safe: the owner serialises :meth:`update` with the queries (the engine lock). Records
    handed to :meth:`update` belong to the graph afterwards (their strings are interned in place)."""

    def __init__(self) -> None:
        self._paths: list[str | None] = []
        self._fid: dict[str, int] = {}
        self._files: dict[int, FileRefs] = {}
        self._symbols = SymbolTable(self._paths, self._intern)
        self._callers: dict[int, bytes] = {}  # target gid -> int64[fid << 40 | group counts]
        self._keys: dict[str, bytes] = {}  # key -> int64[fid << 32 | unresolved sites]
        self._targets: dict[int, bytes] = {}  # fid -> int64[foreign target gids]
        self._dyn: dict[int, int] = {}  # fid -> dynamic sites (only files with some)
        self._dynamic = 0
        self._strings: dict[str, str] = {}
        self._rank: np.ndarray | None = None
        self._pending: set[int] = set()  # files swapped in by a deferred update, not resolved yet
        self._sites = 0  # sites of every record
        self._skipped: dict[int, tuple[Skip, ...]] = {}  # fid -> the record's skips (records with some)

    def _intern(self, s: str) -> str:
        return self._strings.setdefault(s, s)

    def _fid_of(self, path: str) -> int:
        fid = self._fid.get(path)
        if fid is None:
            fid = self._fid[path] = len(self._paths)
            self._paths.append(path)
        return fid

    # ----------------------------------------------------------------- basics

    def __len__(self) -> int:
        return len(self._files)

    def __contains__(self, path: str) -> bool:
        fid = self._fid.get(path)
        return fid is not None and fid in self._files

    def file(self, path: str) -> FileRefs | None:
        """The record of ``path`` (``None`` if the graph has none)."""
        fid = self._fid.get(path)
        return None if fid is None else self._files.get(fid)

    def paths(self) -> list[str]:
        """Every file with a record, sorted."""
        return sorted(self._paths[f] for f in self._files)  # type: ignore[misc]

    def method_id(self, gid: int) -> str:
        """The method id (chunk id) of a target gid."""
        return self._files[gid >> FID_SHIFT].method_id(gid & METHOD_MASK)

    def gid(self, method: str) -> int | None:
        """The gid of a method id (``<path>::<Name>[@n]``), ``None`` if the graph has no such method."""
        path, _, rest = method.partition("::")
        rec = self.file(path)
        if rec is None:
            return None
        name, _, nth = rest.partition("@")
        want = int(nth) if nth.isdigit() else 1
        info = rec.method_info()
        for i, n in enumerate(rec.names):
            if n == name and int(info[i]["nth"]) == want:
                return self._fid[path] << FID_SHIFT | i
        fname = fold(name)
        for i, n in enumerate(rec.names):
            if fold(n) == fname and int(info[i]["nth"]) == want:
                return self._fid[path] << FID_SHIFT | i
        return None

    # ----------------------------------------------------------------- updates

    def update(self, records: Iterable[FileRefs] = (), removed: Iterable[str] = (), *, defer: bool = False) -> int:
        """Swap in ``records`` (a file's new record replaces its old one) and drop ``removed``
        paths; re-resolve what the change can reach. Returns the number of files re-resolved.

        ``defer``: only swap (records, symbols) and remember what needs resolving; the next
        update without ``defer`` resolves it all at once (a first index feeds its batches this
        way: strings are interned as each batch arrives, the resolution runs once). Until then
        answers cover only the files already resolved."""
        new: dict[int, FileRefs] = {}
        for r in records:
            self._intern_record(r)
            new[self._fid_of(r.path)] = r
        gone = [self._fid[p] for p in removed if p in self and self._fid[p] not in new]
        changed = set(new) | set(gone)
        self._retract({f for f in changed if f in self._files and f not in self._pending})
        affected = self._swap(new, gone, changed)
        self._mark_pending(affected, changed)
        self._pending.update(new)
        self._pending.difference_update(gone)
        if defer:
            return 0
        todo = sorted(self._pending, key=self._paths.__getitem__)
        self._pending = set()
        self._contribute(todo)
        return len(todo)

    def _swap(self, new: dict[int, FileRefs], gone: list[int], changed: set[int]) -> set[str]:
        """Replace the changed files' records and their symbols; returns the keys whose
        symbol-table entries changed (their readers must be resolved again)."""
        symbols = self._symbols
        affected: set[str] = set()
        olds: dict[int, ModuleSymbols] = {}
        for fid in changed:
            old = self._files.get(fid)
            if old is not None:
                symbols.unindex(fid, old, olds, affected)
                self._sites -= old.count
                self._skipped.pop(fid, None)
        for fid in gone:
            del self._files[fid]
        self._files.update(new)
        for fid, rec in new.items():
            self._sites += rec.count
            if rec.skips:
                self._skipped[fid] = rec.skips
        news: dict[int, ModuleSymbols] = {}
        for fid, rec in new.items():
            symbols.index(fid, rec, news, affected)
        changed_names(olds, news, affected)
        return affected

    def _mark_pending(self, affected: set[str], changed: set[int]) -> None:
        """Retract the unchanged files that read an ``affected`` key and mark them pending."""
        dependents: set[int] = set()
        for k in affected:
            b = self._keys.get(k)
            if b:
                dependents.update((_i64(b) >> 32).tolist())
        dependents = {f for f in dependents if f not in changed and f not in self._pending}
        self._retract(dependents)
        self._pending.update(dependents)

    @property
    def pending(self) -> int:
        """Files swapped in by a deferred update and not resolved yet: answers miss their
        references until :meth:`resolve_pending` (or an update without ``defer``) ran."""
        return len(self._pending)

    def resolve_pending(self, limit: int | None = None) -> int:
        """Resolve up to ``limit`` of the deferred files (all when None); returns how many are
        left. The owner can resolve a first index in steps, releasing its lock between them: a
        file's contribution depends only on the symbols, so any order and any steps give the
        graph one full resolution gives."""
        if not self._pending:
            return 0
        todo = list(self._pending) if limit is None else list(itertools.islice(self._pending, max(limit, 1)))
        self._pending.difference_update(todo)
        self._contribute(todo)
        return len(self._pending)

    def _intern_record(self, rec: FileRefs) -> None:
        intern = self._intern
        rec.strings = [intern(x) for x in rec.strings]
        rec.names = [intern(x) for x in rec.names]
        rec.owner = intern(rec.owner)

    # ----------------------------------------------------------------- per-file contributions

    def _local(self, fid: int) -> tuple[int, int]:
        """A file and the file paired with it (a form module and its layout), whose references
        to each other are looked at directly instead of through the reverse index."""
        path = self._paths[fid] or ""
        other = form_module_path(path) or form_layout_path(path)
        pid = self._fid.get(other) if other else None
        return fid, (fid if pid is None else pid)

    def _retract(self, fids: set[int]) -> None:
        """Take the files' keys, reverse-index entries and dynamic counts out, one pass per key."""
        if not fids:
            return
        by_key: dict[str, list[int]] = {}
        by_target: dict[int, list[int]] = {}
        for fid in fids:
            rec = self._files.get(fid)
            if rec is None:
                continue
            for k in self._symbols.file_keys(rec):
                by_key.setdefault(k, []).append(fid)
            t = self._targets.pop(fid, None)
            if t:
                for g in _i64(t).tolist():
                    by_target.setdefault(g, []).append(fid)
            self._dynamic -= self._dyn.pop(fid, 0)
        for k, lst in by_key.items():
            self._filter(self._keys, k, lst, 32)
        for g, lst in by_target.items():
            self._filter(self._callers, g, lst, 40)

    @staticmethod
    def _filter(index: dict, key, fids: list[int], shift: int) -> None:
        b = index.get(key)
        if b is None:
            return
        a = _i64(b)
        keep = a[~np.isin(a >> shift, fids)]
        if len(keep):
            index[key] = keep.tobytes()
        else:
            del index[key]

    def _contribute(self, fids: list[int], batch: int = 256) -> None:
        """Resolve the files and add what they contribute, ``batch`` files at a time (bounds the
        temporary lists: the peak of a first build, not only its result, is resident memory)."""
        for k in range(0, len(fids), batch):
            self._contribute_batch(fids[k : k + batch])

    def _contribute_batch(self, fids: list[int]) -> None:
        add_keys: dict[str, list[int]] = {}
        add_callers: dict[int, list[int]] = {}
        for fid in fids:
            rec = self._files.get(fid)
            if rec is None:
                continue
            keys, targets, dynamic = self._symbols.resolve_file(fid, rec, self._local(fid))
            for k, n in keys.items():
                add_keys.setdefault(k, []).append(fid << 32 | min(n, _M32))
            if targets:
                self._targets[fid] = np.array(list(targets), dtype=np.int64).tobytes()
                for g, counts in targets.items():
                    add_callers.setdefault(g, []).append(fid << 40 | _pack_group(counts))
            if dynamic:
                self._dyn[fid] = dynamic
                self._dynamic += dynamic
        for k, lst in add_keys.items():
            self._keys[k] = self._keys.get(k, b"") + np.array(lst, dtype=np.int64).tobytes()
        for g, lst in add_callers.items():
            self._callers[g] = self._callers.get(g, b"") + np.array(lst, dtype=np.int64).tobytes()

    def resolve_site(self, path: str, index: int) -> tuple[str | None, str | None]:
        """``(target method id, None)`` or ``(None, reason)`` for site ``index`` of ``path``."""
        fid = self._fid[path]
        rec = self._files[fid]
        s = rec.site(index)
        gid, reason = self._symbols.resolve(fid, rec, s.kind, s.name, s.qualifier)
        return (self.method_id(gid), None) if gid >= 0 else (None, REASONS[reason - 1])

    def resolve_all(self, path: str) -> list[tuple[str | None, str | None]]:
        """:meth:`resolve_site` for every site of ``path``, in order."""
        fid = self._fid[path]
        rec = self._files[fid]
        out = []
        for s in rec.sites_list():
            gid, reason = self._symbols.resolve(fid, rec, s.kind, s.name, s.qualifier)
            out.append((self.method_id(gid), None) if gid >= 0 else (None, REASONS[reason - 1]))
        return out

    # ----------------------------------------------------------------- queries

    def methods_named(self, name: str) -> list[str]:
        """Method ids for ``Метод``, ``Модуль.Метод`` (a common module; or any owner ending with
        that name: ``Валюты.Метод`` finds the catalog's manager method), or an owner
        (``Справочник.Валюты``, ``ОбщийМодуль.X`` or a bare common module name: every method of its
        modules). Sorted. A bare method name scans every module (milliseconds at ERP size; the
        engine's names channel is the fast way to it)."""
        key = fold(name.strip())
        out: set[str] = set()
        owned = self.owner_methods(key)
        if owned is not None:
            return owned
        head, dot, fn = key.rpartition(".")
        mods = self._symbols.mods.values()
        if dot:
            own = self._symbols.by_owner.get(owner_key(COMMON, head), [])
            mods = [self._symbols.mods[f] for f in own] or [
                m for m in self._symbols.mods.values() if m.owner == head or m.owner.endswith("." + head)
            ]
        for mod in mods:
            v = mod.get(fn)
            if v >= 0:
                out.add(self._files[mod.fid].method_id(v >> 1))
        return sorted(out)

    def _sites_named(self, rec: FileRefs, fname: str, v: np.ndarray, spelling: str = "") -> list[int]:
        """Indices of ``rec``'s sites whose folded name is ``fname``; with ``spelling``, only the
        sites written exactly so (one C-level lookup in the string table, no folding)."""
        if spelling:
            try:
                k = rec.strings.index(spelling)
            except ValueError:
                return []
            return np.flatnonzero(v["name"] == k).tolist()
        else:
            n = len(fname)
            idx = [i for i, s in enumerate(rec.strings) if len(s) == n and fold(s) == fname]
        if not idx:
            return []
        return np.flatnonzero(np.isin(v["name"], idx)).tolist()

    def _ranked(self, fids: list[int], limit: int) -> list[int]:
        """The first ``limit`` files by path."""
        if len(fids) <= limit:
            return sorted(fids, key=self._paths.__getitem__)
        rank = self._path_rank()
        a = np.asarray(fids, dtype=np.int64)
        part = a[np.argpartition(rank[a], limit - 1)[:limit]]
        return sorted(part.tolist(), key=self._paths.__getitem__)

    def _path_rank(self) -> np.ndarray:
        """Each file id's rank in path order (recomputed after new paths appeared)."""
        if self._rank is None or len(self._rank) != len(self._paths):
            order = sorted(range(len(self._paths)), key=lambda f: self._paths[f] or "")
            rank = np.empty(len(order), dtype=np.int64)
            rank[order] = np.arange(len(order))
            self._rank = rank
        return self._rank

    def _reference(self, rec: FileRefs, i: int, v, target: str | None, reason: str | None) -> Reference:
        s = rec.site(i, v)
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

    def _refs_in(
        self, fid: int, gid: int, fname: str, limit: int, out: list[Reference], counts: list[int], spelling: str = ""
    ) -> int:
        """The sites of file ``fid`` resolving to ``gid`` (only those written as ``spelling`` if given):
        counted per group into ``counts``, listed into ``out`` up to ``limit``; returns how many."""
        rec = self._files.get(fid)
        if rec is None:
            return 0
        v = rec.columns()
        target = None
        found = 0
        specs: dict[tuple[int, int], tuple] = {}
        for i in self._sites_named(rec, fname, v, spelling):
            kind = int(v["kind"][i])
            if kind == DYNAMIC:
                continue
            qi = int(v["qual"][i])
            spec = specs.get((kind, qi))
            if spec is None:
                spec = specs[(kind, qi)] = self._symbols.spec(rec, KIND_NAMES[kind], rec.strings[qi])
            g, _r = self._symbols.lookup(fid, spec, fname)
            if g != gid:
                continue
            found += 1
            counts[GROUP_OF[kind]] += 1
            if len(out) < limit:
                target = target or self.method_id(gid)
                out.append(self._reference(rec, i, v, target, None))
        return found

    def references(self, target: str, *, limit: int = 1000, possible: bool = False) -> RefAnswer:
        """Who references the method ``target`` (a method id), with the honesty counts.

        ``limit`` caps ``references`` (and ``possible``); ``possible``: list the unresolved sites
        with the same name too (they are always counted). References are ordered by path, then
        position; the counts are over all of them (the other files' from the reverse index, so a
        short answer reads only the files it lists)."""
        gid = self.gid(target)
        counts = [0, 0, 0]
        refs: list[Reference] = []
        name = target.rpartition("::")[2].split("@", 1)[0]
        fname = fold(name)
        if gid is not None:
            own = gid >> FID_SHIFT
            name = self._files[own].names[gid & METHOD_MASK]
            entries = _i64(self._callers.get(gid, b""))
            packed = entries & ((1 << 40) - 1)
            counts = [
                int(((packed >> 26) & _M14).sum()),
                int(((packed >> 13) & _M13).sum()),
                int((packed & _M13).sum()),
            ]
            listed: list[Reference] = []
            for fid in sorted(set(self._local(own)), key=self._paths.__getitem__):
                self._refs_in(fid, gid, fname, limit, listed, counts)
            expected = dict(
                zip(
                    (entries >> 40).tolist(),
                    (packed >> 26 & _M14) + (packed >> 13 & _M13) + (packed & _M13),
                    strict=True,
                )
            )
            foreign: list[Reference] = []
            ignore = [0, 0, 0]
            for fid in self._ranked(list(expected), limit):
                if len(foreign) >= limit:
                    break
                mark = len(foreign)
                got = self._refs_in(fid, gid, fname, limit, foreign, ignore, spelling=name)
                if got < expected[fid]:  # written in another case: read the file's names folded
                    del foreign[mark:]
                    self._refs_in(fid, gid, fname, limit, foreign, ignore)
            listed.sort(key=lambda r: (r.path, r.line, r.col))
            foreign.sort(key=lambda r: (r.path, r.line, r.col))
            refs = list(heapq.merge(listed, foreign, key=lambda r: (r.path, r.line, r.col)))[:limit]
        answer_counts = RefCounts(resolved=counts[0], string=counts[1], metadata=counts[2], dynamic=self._dynamic)
        maybe: list[Reference] = []
        entries = _i64(self._keys.get(fname, b""))
        if len(entries):
            unresolved = entries & _M32
            answer_counts.possible = int(unresolved.sum())
            if possible:
                with_some = (entries[unresolved > 0] >> 32).tolist()
                for fid in self._ranked(with_some, limit):
                    if len(maybe) >= limit:
                        break
                    rec = self._files[fid]
                    v = rec.columns()
                    for i in self._sites_named(rec, fname, v):
                        kind = KIND_NAMES[int(v["kind"][i])]
                        g, r = self._symbols.resolve(
                            fid, rec, kind, rec.strings[int(v["name"][i])], rec.strings[int(v["qual"][i])]
                        )
                        if g < 0 and kind != "dynamic" and len(maybe) < limit:
                            maybe.append(self._reference(rec, i, v, None, REASONS[r - 1]))
        total = sum(counts)
        return RefAnswer(
            target=target,
            references=refs,
            possible=maybe,
            counts=answer_counts,
            total=total,
            truncated=total > len(refs),
            lower_bound=self._dynamic > 0,
        )

    def possible_count(self, target: str) -> int:
        """The unresolved call sites with the name of the method ``target`` (a method id): the
        ``possible`` count of :meth:`references`, without reading any file."""
        entries = _i64(self._keys.get(fold(target.rpartition("::")[2].split("@", 1)[0]), b""))
        return int((entries & _M32).sum()) if len(entries) else 0

    def method_at(self, path: str, line: int, col: int) -> str | None:
        """The method id whose name is at the position (0-based line, UTF-16 column) in module
        ``path``: what LSP "find references" on a method's header asks about."""
        rec = self.file(path)
        if rec is None or not rec.names:
            return None
        info = rec.method_info()
        for i in np.flatnonzero(info["line"] == line).tolist():
            start = int(info["col"][i])
            name = rec.names[i]
            width = len(name.encode("utf-16-le", "surrogatepass")) // 2
            if start <= col <= start + width:
                return rec.method_id(i)
        return None

    def fan_in(self, methods: Iterable[str]) -> list[int]:
        """For each method id, how many sites in other files reach it (calls, strings and
        metadata bindings, from the reverse index: no file is read). A method's own module and
        its form layout are not counted; an unknown id counts 0. For ranking priors."""
        out = []
        for m in methods:
            gid = self.gid(m)
            b = self._callers.get(gid) if gid is not None else None
            if not b:
                out.append(0)
                continue
            packed = _i64(b) & ((1 << 40) - 1)
            out.append(int(((packed >> 26) & _M14).sum() + ((packed >> 13) & _M13).sum() + (packed & _M13).sum()))
        return out

    def skips(self) -> list[Skip]:
        """What the binding readers could not read (a broken form layout, a binding that names
        no method), from every record, by path."""
        out = [k for ks in self._skipped.values() for k in ks]
        return sorted(out, key=lambda k: (k.path, k.reason))

    @property
    def dynamic(self) -> int:
        """Dynamic sites (``Выполнить``/``Вычислить``, computed names) of the resolved files."""
        return self._dynamic

    def totals(self) -> dict[str, int]:
        """``files`` with a record, their ``sites``, ``resolving`` (deferred files) and ``dynamic``
        sites of the resolved files: for ``status``."""
        return {
            "files": len(self._files),
            "sites": self._sites,
            "resolving": len(self._pending),
            "dynamic": self._dynamic,
        }

    def owner_methods(self, owner: str) -> list[str] | None:
        """The method ids of every module of an owner (``Справочник.Валюты``,
        ``ОбщийМодуль.X``, a bare common module name), sorted; None when no module has it."""
        key = fold(owner.strip())
        if key not in self._symbols.by_owner and "." not in key and owner_key(COMMON, key) in self._symbols.by_owner:
            key = owner_key(COMMON, key)
        fids = self._symbols.by_owner.get(key)
        if not fids:
            return None
        out: set[str] = set()
        for fid in fids:
            rec = self._files[fid]
            out.update(rec.method_id(i) for i in range(len(rec.names)))
        return sorted(out)

    def callees(self, method: str) -> list[Reference]:
        """What the method ``method`` (a method id) references, resolved or not, in file order."""
        gid = self.gid(method)
        if gid is None:
            return []
        fid, idx = gid >> FID_SHIFT, gid & METHOD_MASK
        rec = self._files[fid]
        v = rec.columns()
        out: list[Reference] = []
        for i in np.flatnonzero(v["caller"] == idx).tolist():
            kind = KIND_NAMES[int(v["kind"][i])]
            g, r = self._symbols.resolve(fid, rec, kind, rec.strings[int(v["name"][i])], rec.strings[int(v["qual"][i])])
            t = self.method_id(g) if g >= 0 else None
            out.append(self._reference(rec, i, v, t, None if g >= 0 else REASONS[r - 1]))
        return out

    def site_at(self, path: str, line: int, col: int) -> Reference | None:
        """The site whose range holds the position (0-based line, UTF-16 column), resolved: what
        LSP "go to definition" on a call or a string naming a method needs."""
        fid = self._fid.get(path)
        rec = self._files.get(fid) if fid is not None else None
        if rec is None:
            return None
        v = rec.columns()
        hit = np.flatnonzero((v["line"] == line) & (v["col"] <= col) & (v["end"] >= col))
        if not len(hit):
            return None
        i = int(hit[0])
        kind = KIND_NAMES[int(v["kind"][i])]
        g, r = self._symbols.resolve(fid, rec, kind, rec.strings[int(v["name"][i])], rec.strings[int(v["qual"][i])])
        return self._reference(rec, i, v, self.method_id(g) if g >= 0 else None, None if g >= 0 else REASONS[r - 1])

    def call_graph(self, start: str, direction: str = "callers", depth: int = 3, fan_out: int = 20) -> CallGraph:
        """A breadth-first walk from the method ``start`` over callers or callees, at most
        ``depth`` levels and ``fan_out`` neighbours per node (the most-referenced first). A node
        is expanded once, so recursion and mutual calls end the walk (counted in ``revisited``).
        Bindings and module-level code are leaves (``<path>#<kind>:<detail>``, ``<path>::<module>``)."""
        if direction not in ("callers", "callees"):
            raise ValueError("direction must be 'callers' or 'callees'")
        nodes: dict[str, int] = {start: 0}
        edges: list[GraphEdge] = []
        truncated = False
        revisited = 0
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
                    revisited += 1
                    continue
                nodes[other] = level + 1
                queue.append(other)
        return CallGraph(
            start=start, direction=direction, nodes=nodes, edges=edges, truncated=truncated, revisited=revisited
        )

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

    # ----------------------------------------------------------------- persistence

    def to_bytes(self) -> bytes:
        """The whole graph as zstd-compressed msgpack: paths, records and the resolved indexes
        (:meth:`from_bytes` loads it without resolving anything), and which files a deferred
        update left unresolved (they stay so after a load: :meth:`resolve_pending`). Reads the
        graph only, so it may run beside queries (never beside an update). The format:
        :mod:`daemon.index.refgraph_files`; the bytes depend on the content only (files
        numbered by path, every index sorted), not on the order of the updates that made it."""
        return encode_graph(
            GraphParts(
                self._paths, self._files, self._keys, self._callers, self._targets, self._dyn, sorted(self._pending)
            )
        )

    @classmethod
    def from_bytes(cls, data: bytes) -> "RefGraph":
        """A graph from :meth:`to_bytes`; ``ValueError`` for another format or version,
        ``msgspec.DecodeError`` or ``zstandard.ZstdError`` for damaged data."""
        g = cls()
        parts = decode_graph(data, g._intern)
        g._paths.extend(parts.paths)  # the symbol table holds this list
        g._fid = {p: f for f, p in enumerate(parts.paths) if p is not None}
        g._files = parts.files
        ignore: set[str] = set()
        for fid, rec in g._files.items():
            g._symbols.index(fid, rec, {}, ignore)
        g._keys = parts.keys
        g._callers = parts.callers
        g._targets = parts.targets
        g._dyn = parts.dyn
        g._sites = sum(r.count for r in g._files.values())
        g._skipped = {f: r.skips for f, r in g._files.items() if r.skips}
        g._dynamic = sum(parts.dyn.values())
        g._pending = {f for f in parts.pending if f in g._files}
        return g

    # ----------------------------------------------------------------- totals and checks

    def stats(self) -> dict[str, int]:
        """Totals: files, modules, methods, sites; resolved sites by group; unresolved sites by
        reason; modules with syntax errors (``partial``). Resolves every site: for reports and tests."""
        out = {"files": len(self._files), "modules": len(self._symbols.mods), "sites": 0, "partial": 0}
        out["methods"] = sum(len(m.names) for m in self._symbols.mods.values())
        for g in REF_GROUPS[:3]:
            out[f"resolved_{g}"] = 0
        for r in REASONS:
            out[f"unresolved_{r}"] = 0
        for fid, rec in self._files.items():
            out["sites"] += len(rec)
            out["partial"] += rec.partial
            strings = rec.strings
            specs: dict = {}
            for kind, ni, qi, n in distinct_sites(rec):
                name = KIND_NAMES[kind]
                if kind == DYNAMIC:
                    out["unresolved_dynamic"] += n
                    continue
                spec = specs.get((kind, qi))
                if spec is None:
                    spec = specs[(kind, qi)] = self._symbols.spec(rec, name, strings[qi])
                g, r = self._symbols.lookup(fid, spec, fold(strings[ni]))
                if g >= 0:
                    out[f"resolved_{REF_KINDS[name]}"] += n
                else:
                    out[f"unresolved_{REASONS[r - 1]}"] += n
        return out

    def state(self) -> dict:
        """A canonical picture of the resolved graph (every index by paths and method ids, sorted)
        to compare two graphs: one updated step by step must equal one built from scratch."""
        path = self._paths.__getitem__

        def entries(b: bytes, shift: int) -> dict[str, int]:
            return dict(sorted((path(e >> shift), e & ((1 << shift) - 1)) for e in _i64(b).tolist()))

        return {
            "callers": dict(sorted((self.method_id(g), entries(b, 40)) for g, b in self._callers.items())),
            "keys": {k: entries(b, 32) for k, b in sorted(self._keys.items())},
            "by_owner": {k: [path(f) for f in v] for k, v in sorted(self._symbols.by_owner.items())},
            "global_names": {k: [path(f) for f in v] for k, v in sorted(self._symbols.global_names.items())},
            "dynamic": self._dynamic,
            "files": self.paths(),
            "resolved": {p: self.resolve_all(p) for p in self.paths()},
        }


# ---------------------------------------------------------------------------------------
# reading an export
# ---------------------------------------------------------------------------------------


def read_references(root, *, max_file_bytes: int = 8 * 2**20, max_lines: int = 400) -> tuple[list[FileRefs], list]:
    """Every file's references of an export, read from disk: ``(records, skips)``.

    Modules (chunked and parsed here) and the binding files (:func:`read_binding_files`). The
    daemon gets the same records from its chunking pass instead; this is the from-scratch build
    for tests, tools and the bench.
    """
    from pathlib import Path

    from ..sources.files import SkipFile, decode_bytes, read_regular_bytes
    from ..sources.references import module_references
    from ..sources.scan import scan_export

    root = Path(root)
    scan = scan_export(root, max_file_bytes=max_file_bytes)
    ext_projects = {p.path for p in scan.info.projects if p.is_extension}
    out: list[FileRefs] = []
    skips: list = list(scan.skipped)
    for src in scan.modules:
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
                extension=src.project in ext_projects,
                max_lines=max_lines,
            )
        )
    bound, more = read_binding_files(root, scan, max_file_bytes=max_file_bytes)
    return out + bound, skips + more


def read_binding_files(root, scan, *, max_file_bytes: int = 8 * 2**20) -> tuple[list[FileRefs], list]:
    """The binding files of a scanned export: the layout of every form module
    (:func:`daemon.sources.bindings.form_layout_path`; a form module without one has none) and the
    descriptors of :data:`daemon.sources.bindings.BINDING_TYPES`. ``(records, skips)``: a broken
    file is a record with its skip (and the skip in the list), never an exception."""
    from pathlib import Path

    from ..sources.bindings import BINDING_TYPES, descriptor_references, read_form_layout
    from ..sources.files import SkipFile, read_regular_bytes

    root = Path(root)
    info = scan.info
    ext_projects = {p.path for p in info.projects if p.is_extension}
    out: list[FileRefs] = []
    skips: list = []
    for src in scan.modules:
        if src.module_kind != "form":
            continue
        rec = read_form_layout(
            root, src, info.format, extension=src.project in ext_projects, max_file_bytes=max_file_bytes
        )
        if rec is not None:
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
