"""Find usages over one root's index: the answers of ``references``, ``callees``, ``call_graph`` and
``definition`` from the reference graph (:attr:`daemon.index.state.IndexState.refs`), the chunk
store (where each method is) and the names channel (which methods a name stands for).

:class:`Usages` holds no state of its own; the engine calls it with its lock held, like the ranker.
A name is ``Модуль.Метод``, a bare method name, a metadata object (``Справочник.Валюты``,
``Catalog.Валюты``: every method of its modules), a common module's name, or a method id
(``<path>::<Name>``); a position is a path relative to the root, a 0-based line and a UTF-16
column (LSP).
"""

from __future__ import annotations

import numpy as np

from ..contract import (
    GRAPH_DIRECTIONS,
    MAX_GRAPH_DEPTH,
    MAX_GRAPH_FAN_OUT,
    MAX_REF_LIMIT,
    MAX_REF_TARGETS,
    METHOD_KINDS,
    Callees,
    CallGraph,
    Definition,
    MethodRef,
    RefCounts,
    Reference,
    References,
    RefsStatus,
    normalize_object_type,
)
from ..text.folding import fold
from .refgraph import method_of_chunk
from .state import IndexState

__all__ = ["Usages", "Target"]


class Target:
    """What a question is about: a ``name``, a method id (``method``) or a position
    (``path``, 0-based ``line``, UTF-16 ``character``). Exactly one of the three."""

    __slots__ = ("name", "method", "path", "line", "character")

    def __init__(
        self,
        *,
        name: str | None = None,
        method: str | None = None,
        path: str | None = None,
        line: int | None = None,
        character: int | None = None,
    ) -> None:
        given = (name is not None) + (method is not None) + (path is not None)
        if given != 1:
            raise ValueError("give exactly one of name, target (a method id) or path with line and character")
        if path is not None and (line is None or character is None or line < 0 or character < 0):
            raise ValueError("a position needs path, line (0-based) and character (UTF-16, 0-based)")
        if name is not None and not name.strip():
            raise ValueError("the name is empty: give Модуль.Метод, a method name or a metadata object")
        self.name, self.method, self.path, self.line, self.character = name, method, path, line, character

    def describe(self) -> str:
        """The question as a short string (the answers' ``query``)."""
        if self.name is not None:
            return self.name.strip()
        if self.method is not None:
            return self.method
        return f"{self.path}:{self.line + 1}:{self.character + 1}"


class Usages:
    """The find-usages answers over ``state`` (see the module docstring). Every method expects the
    engine's lock held; ``LookupError`` for a name or method id that names no indexed method,
    ``ValueError`` for bad arguments."""

    def __init__(self, state: IndexState) -> None:
        self.state = state

    # ------------------------------------------------------------------ source lines
    def source_lines(self, rel: str, lines: set[int]) -> dict[int, str]:
        """The indexed text of ``lines`` (0-based) of the module ``rel``, from the chunk store:
        each from the narrowest method chunk that holds it and whose text is the file's lines
        one for one (a method split into parts repeats its header in each part: not used).
        A line no such chunk holds is left out (the caller reads the file). No file is read,
        and the lines are those the references were read from."""
        rec = self.state.files.get(rel)
        if rec is None or rec.kind != "bsl" or not lines:
            return {}
        store = self.state.store
        slots = np.asarray([s for s in rec.slot_list() if store.ids[s] is not None], dtype=np.int64)
        if not len(slots):
            return {}
        starts = store.col("start_line")[slots].astype(np.int64)  # 1-based, inclusive
        ends = store.col("end_line")[slots].astype(np.int64)
        out: dict[int, str] = {}
        texts: dict[int, list[str] | None] = {}
        for line in sorted(lines):
            held = np.flatnonzero((starts <= line + 1) & (ends >= line + 1))
            for i in held[np.argsort(ends[held] - starts[held], kind="stable")].tolist():
                slot = int(slots[i])
                if slot not in texts:
                    c = store.get(slot)
                    split = c.text.split("\n")
                    exact = c.kind in METHOD_KINDS and len(split) == c.end_line - c.start_line + 1
                    texts[slot] = split if exact else None
                text = texts[slot]
                if text is not None:
                    out[line] = text[line + 1 - int(starts[i])]
                    break
        return out

    # ------------------------------------------------------------------ targets
    def methods_named(self, name: str) -> list[str]:
        """The method ids ``name`` stands for (see the module docstring), sorted; [] for none."""
        st = self.state
        text = name.strip()
        if "::" in text:
            return [text] if st.refs.gid(text) is not None or not st.refs_complete else []
        owner = self._owner(text)
        if owner is not None:
            return st.refs.owner_methods(owner) or []
        head, dot, method = text.rpartition(".")
        if not method:
            return []
        fhead = fold(head)
        owner_head = self._owner(head) if "." in head else None
        store, names = st.store, st.names
        out: set[str] = set()
        owners, owner_col = store.tables["owner"].values, store.col("owner")
        for slot in names.exact_slots(method).tolist():
            e = names.get(slot)
            if e is None or e[2] not in METHOD_KINDS:
                continue
            if dot:
                if owner_head is not None:
                    if fold(owners[owner_col[slot]]) != fold(owner_head):
                        continue
                elif not any(fold(c) == fhead for c in e[1]):
                    continue
            cid = store.ids[slot]
            if cid is not None:
                out.add(method_of_chunk(cid))
        if not st.refs_complete:  # being rebuilt: the graph may not hold the method yet
            return sorted(out)
        return sorted(m for m in out if st.refs.gid(m) is not None)

    def _owner(self, text: str) -> str | None:
        """``text`` as a module owner the graph knows (``Справочник.Валюты``; English and
        folder type names normalised; a bare common module name), else None."""
        refs = self.state.refs
        if refs.owner_methods(text) is not None:
            return text
        typ, dot, rest = text.partition(".")
        if dot and rest:
            ru = normalize_object_type(typ)
            if ru is not None and refs.owner_methods(f"{ru}.{rest}") is not None:
                return f"{ru}.{rest}"
        return None

    def targets(self, t: Target) -> tuple[list[str], Reference | None]:
        """``(method ids, site)``: what the question is about, and for a position the call or
        string under it (its target, when resolved, is the method asked about; else the method
        whose name is there). ``LookupError`` for a name or method id that is not indexed."""
        refs = self.state.refs
        if t.method is not None:
            if refs.gid(t.method) is None and self.state.refs_complete:
                raise LookupError(f"no indexed method with id {t.method!r}")
            return [t.method], None
        if t.name is not None:
            ids = self.methods_named(t.name)
            if not ids:
                raise LookupError(
                    f"no indexed method or module named {t.name.strip()!r} "
                    "(give Модуль.Метод, a method name, a metadata object like Справочник.Валюты, or a module's name)"
                )
            return ids, None
        site = refs.site_at(t.path, t.line, t.character)
        if site is not None:
            return ([site.target] if site.target else []), site
        m = refs.method_at(t.path, t.line, t.character)
        return ([m] if m else []), None

    # ------------------------------------------------------------------ answers
    def references(self, t: Target, *, limit: int = 100, possible: bool = False, locate: bool = False) -> References:
        """Who references the methods of ``t``: every target's references merged by path and
        position (at most ``limit``), the counts over all of them (:class:`References`)."""
        if not 1 <= limit <= MAX_REF_LIMIT:
            raise ValueError(f"limit must be in 1..{MAX_REF_LIMIT}, got {limit}")
        refs = self.state.refs
        ids, site = self.targets(t)
        shown = ids[:MAX_REF_TARGETS]
        listed: list[Reference] = []
        maybe: dict[tuple[str, int, int], Reference] = {}
        counts = [0, 0, 0]
        possible_by_name: dict[str, int] = {}
        total = 0
        for mid in shown:
            a = refs.references(mid, limit=limit, possible=possible)
            listed.extend(a.references)
            total += a.total
            counts[0] += a.counts.resolved
            counts[1] += a.counts.string
            counts[2] += a.counts.metadata
            # the unresolved sites of one name are the same for every method of that name
            possible_by_name[fold(mid.rpartition("::")[2].split("@", 1)[0])] = a.counts.possible
            for r in a.possible:
                maybe.setdefault((r.path, r.line, r.col), r)
        listed.sort(key=lambda r: (r.path, r.line, r.col))
        listed = listed[:limit]
        dynamic = refs.dynamic
        out = References(
            query=t.describe(),
            targets=[self.method_ref(m) for m in shown],
            targets_total=len(ids),
            site=site,
            references=listed,
            possible=sorted(maybe.values(), key=lambda r: (r.path, r.line, r.col))[:limit],
            counts=RefCounts(
                resolved=counts[0],
                string=counts[1],
                metadata=counts[2],
                possible=sum(possible_by_name.values()),
                dynamic=dynamic,
            ),
            total=total,
            truncated=total > len(listed),
            lower_bound=dynamic > 0,
        )
        if locate:
            out.callers = {c: self.method_ref(c) for c in sorted({r.caller for r in listed if r.caller})}
        return self.mark(out)

    def callees(self, t: Target, *, locate: bool = False) -> Callees:
        """What the (first) method of ``t`` references, in file order, resolved or not."""
        ids, _site = self.targets(t)
        if not ids:
            raise LookupError(f"no method at {t.describe()}")
        refs = self.state.refs
        out = Callees(method=self.method_ref(ids[0]), references=refs.callees(ids[0]))
        if locate:
            out.targets = {m: self.method_ref(m) for m in sorted({r.target for r in out.references if r.target})}
        return self.mark(out)

    def call_graph(self, t: Target, *, direction: str = "callers", depth: int = 2, fan_out: int = 10) -> CallGraph:
        """A bounded walk from the (first) method of ``t`` (:meth:`daemon.index.refgraph.RefGraph.call_graph`):
        recursion and mutual calls end it, ``depth`` and ``fan_out`` cap it. ``possible``: the start's
        unresolved sites by name (as :meth:`references` counts them), which the walk cannot follow."""
        if direction not in GRAPH_DIRECTIONS:
            raise ValueError(f"direction must be one of {', '.join(GRAPH_DIRECTIONS)}, got {direction!r}")
        if not 1 <= depth <= MAX_GRAPH_DEPTH:
            raise ValueError(f"depth must be in 1..{MAX_GRAPH_DEPTH}, got {depth}")
        if not 1 <= fan_out <= MAX_GRAPH_FAN_OUT:
            raise ValueError(f"fan_out must be in 1..{MAX_GRAPH_FAN_OUT}, got {fan_out}")
        ids, _site = self.targets(t)
        if not ids:
            raise LookupError(f"no method at {t.describe()}")
        refs = self.state.refs
        g = refs.call_graph(ids[0], direction, depth, fan_out)
        g.starts = ids[1:MAX_REF_TARGETS]
        g.lower_bound = refs.dynamic > 0
        g.possible = refs.possible_count(ids[0])
        g.methods = {n: self.method_ref(n) for n in g.nodes if "::" in n and not n.endswith("::<module>")}
        return self.mark(g)

    def definition(self, path: str, line: int, character: int) -> Definition:
        """What is at a position: the call or string naming a method there and its target, and
        the method whose header or body holds it."""
        refs = self.state.refs
        site = refs.site_at(path, line, character)
        out = Definition(site=site, resolving=refs.pending)
        if site is not None and site.target:
            out.targets = [self.method_ref(site.target)]
        method = refs.method_at(path, line, character) or self._enclosing(path, line)
        if method is not None:
            out.method = self.method_ref(method)
        return out

    def mark(self, out):
        """Fill what may be missing from an answer: files still resolving, references being rebuilt."""
        out.resolving = self.state.refs.pending
        out.building = not self.state.refs_complete
        return out

    def status(self) -> RefsStatus:
        """The references for ``status``: files, sites, files resolving, being rebuilt, dynamic sites."""
        t = self.state.refs.totals()
        return RefsStatus(
            files=t["files"],
            sites=t["sites"],
            resolving=t["resolving"],
            building=not self.state.refs_complete,
            dynamic=t["dynamic"],
        )

    # ------------------------------------------------------------------ where methods are
    def _enclosing(self, path: str, line: int) -> str | None:
        """The method whose lines (doc comment included) hold the 0-based ``line`` of ``path``."""
        st = self.state
        rec = st.files.get(path)
        if rec is None or rec.kind != "bsl":
            return None
        store = st.store
        kinds, start, end = store.tables["kind"].values, store.col("start_line"), store.col("end_line")
        kind_col = store.col("kind")
        for slot in rec.slot_list():
            if kinds[kind_col[slot]] in METHOD_KINDS and start[slot] - 1 <= line <= end[slot] - 1:
                cid = store.ids[slot]
                if cid is not None:
                    return method_of_chunk(cid)
        return None

    def method_ref(self, method: str) -> MethodRef:
        """Where the method ``method`` (an id) is, from the chunk store's columns (no blob is
        inflated); its id and path alone when the store has no chunk of it."""
        store = self.state.store
        path = method.rpartition("::")[0]
        first = store.slot_of.get(method)
        last = first
        if first is None:
            first = last = store.slot_of.get(method + "#1")
            k = 2
            while first is not None:
                nxt = store.slot_of.get(f"{method}#{k}")
                if nxt is None:
                    break
                last, k = nxt, k + 1
        if first is None:
            name = method.rpartition("::")[2].split("@", 1)[0]
            return MethodRef(id=method, path=path, name=name)
        t = store.tables

        def val(table: str, slot: int) -> str:
            return t[table].values[store.col(table)[slot]]

        _part, export = store.part_export(first)
        nr = tuple(int(store.col(f"nr{i}")[first]) for i in range(4))
        return MethodRef(
            id=method,
            path=val("path", first),
            name=store.head(first)[0],
            owner=val("owner", first),
            module_kind=val("module_kind", first),
            kind=val("kind", first),
            export=export,
            start_line=int(store.col("start_line")[first]),
            end_line=int(store.col("end_line")[last]),
            name_range=nr,  # type: ignore[arg-type]
        )
