"""``bsl-lens refs ROOT NAME``: find usages through the root's daemon (started in the background if
none runs), or in this process with ``--standalone``.

NAME is ``Модуль.Метод``, a bare method name, a metadata object (``Справочник.Валюты``: every method
of its modules) or a common module's name. The text lists each reference as ``path:line kind
caller`` with the counts that say how complete the answer is; ``--json`` gives one object with
``references: [{path, line, caller, kind, resolved}]`` (``path`` relative to the root, ``line``
1-based, ``resolved`` false for a possible caller: an unresolved call with the same name).
"""

from __future__ import annotations

import sys
from pathlib import Path

import msgspec

from ..contract import References
from .search import _connect, _settle, stale_note, usage_error


def cmd_refs(args) -> int:
    """Who references NAME (``--callees``: what it calls). Exit 0 with an answer (also an empty
    one), 1 when NAME names no indexed method or the daemon fails, 2 for an empty NAME."""
    if not args.name.strip():
        usage_error(args, "the name is empty: give Модуль.Метод, a method name or a metadata object")
    res = _standalone(args) if args.standalone else _via_daemon(args)
    if res is None:
        return 1
    if args.json:
        data = callees_json(res) if args.callees else references_json(res)
        sys.stdout.write(msgspec.json.encode(data).decode("utf-8") + "\n")
        return 0
    for line in callees_text(res) if args.callees else references_text(res):
        print(line)
    if getattr(res, "stale", False):
        print(stale_note(res, waited=args.fresh), file=sys.stderr)
    return 0


def _ask(target, args, engine_like):
    """The question, to an engine (``--standalone``) or a daemon client."""
    if args.callees:
        return engine_like.callees(target, locate=True)
    return engine_like.references(target, limit=args.limit, possible=args.possible, locate=True)


def _standalone(args):
    from ..engine import Target
    from ..server.runtime import export_problem
    from .index import open_engine

    problem = export_problem(args.root)
    if problem:
        print(f"bsl-lens: error: {problem}", file=sys.stderr)
        return None
    eng = open_engine(args, embedder=False)
    if not args.no_refresh:
        eng.refresh()
        eng.save()
    try:
        return _ask(Target(name=args.name), args, eng)
    except LookupError as exc:
        print(f"bsl-lens: error: {exc.args[0] if exc.args else exc}", file=sys.stderr)
        return None


def _via_daemon(args):
    from ..client import CommandError, DaemonError

    if not Path(args.root).is_dir():
        print(f"bsl-lens: error: export root is not a directory: {args.root}", file=sys.stderr)
        return None
    c = _connect(args)
    if c is None:
        return None
    with c:
        try:
            _settle(c, args)
            timeout = max(c.timeout, args.fresh + 30.0)
            if args.callees:
                return c.callees(args.name, locate=True, timeout=timeout)
            return c.references(
                args.name,
                limit=args.limit,
                possible=args.possible,
                locate=True,
                fresh_timeout=args.fresh,
                timeout=timeout,
            )
        except CommandError as exc:
            print(f"bsl-lens: error: {exc.message}", file=sys.stderr)
        except DaemonError as exc:
            print(f"bsl-lens: error: {exc}", file=sys.stderr)
        return None


# ------------------------------------------------------------------------------ output
def _method_name(method_id: str | None) -> str | None:
    """``<path>::<Name>`` -> ``Name`` (the caller's file is the reference's)."""
    return method_id.rpartition("::")[2] if method_id else None


def _ref_json(r, resolved: bool) -> dict:
    out = {
        "path": r.path,
        "line": r.line + 1,
        "caller": _method_name(r.caller),
        "kind": r.kind,
        "resolved": resolved,
        "callee": r.callee,
    }
    if r.target:
        out["target"] = r.target
    if r.reason:
        out["reason"] = r.reason
    if r.detail:
        out["detail"] = r.detail
    return out


def _target_json(m) -> dict:
    return {"id": m.id, "path": m.path, "line": m.name_range[0] + 1, "name": m.name, "owner": m.owner}


def _honesty(res) -> dict:
    return {
        "resolving": res.resolving,
        "building": res.building,
        "stale": res.stale,
        "stale_paths": list(res.stale_paths),
    }


def references_json(res: References) -> dict:
    """The ``--json`` object of a references answer: the targets, ``references`` (resolved,
    ``resolved: true``), ``possible`` callers (``resolved: false``), the counts, ``total``,
    ``truncated``, ``lower_bound``, and what may be missing (``resolving``, ``building``, ``stale``)."""
    return {
        "query": res.query,
        "targets": [_target_json(m) for m in res.targets],
        "targets_total": res.targets_total,
        "references": [_ref_json(r, True) for r in res.references] + [_ref_json(r, False) for r in res.possible],
        "counts": msgspec.to_builtins(res.counts),
        "total": res.total,
        "truncated": res.truncated,
        "lower_bound": res.lower_bound,
        **_honesty(res),
    }


def callees_json(res) -> dict:
    """The ``--json`` object of a ``--callees`` answer: the method and what it references
    (``resolved``: the call reaches a known method, ``target``; else ``reason``)."""
    return {
        "method": _target_json(res.method),
        "references": [_ref_json(r, r.target is not None) for r in res.references],
        **_honesty(res),
    }


def counts_line(res: References) -> str:
    """The counts as one sentence: resolved, string and metadata references apart, possible
    callers, and the lower-bound warning."""
    c = res.counts
    text = f"{res.total} references: {c.resolved} calls, {c.string} by string, {c.metadata} by metadata"
    if c.possible:
        text += f"; {c.possible} possible callers (unresolved calls with the same name)"
    if res.lower_bound:
        text += f"; a lower bound: {c.dynamic} dynamic sites (Выполнить/Вычислить) may call it too"
    return text


def _incomplete(res) -> list[str]:
    out = []
    if res.resolving:
        out.append(f"(the references of {res.resolving} files are still being resolved: ask again in a moment)")
    if res.building:
        out.append("(the references are being read from the files again: files not read yet are missing)")
    return out


def references_text(res: References) -> list[str]:
    """The human lines of a references answer."""
    lines = []
    for m in res.targets:
        lines.append(f"{m.owner}.{m.name}  {m.path}:{m.name_range[0] + 1}" if m.owner else f"{m.name}  {m.path}")
    if res.targets_total > len(res.targets):
        lines.append(f"(and {res.targets_total - len(res.targets)} more methods of that name)")
    lines.append(counts_line(res))
    for r in res.references:
        lines.append(f"  {r.path}:{r.line + 1}  {r.kind}  {_method_name(r.caller) or '-'}  {r.detail}".rstrip())
    if res.truncated:
        lines.append(f"({len(res.references)} of {res.total} shown; --limit N for more)")
    if res.possible:
        lines.append("possible callers:")
        for r in res.possible:
            lines.append(f"  {r.path}:{r.line + 1}  {r.callee}  ({r.reason})")
    return lines + _incomplete(res)


def callees_text(res) -> list[str]:
    """The human lines of a ``--callees`` answer."""
    m = res.method
    lines = [f"{m.owner}.{m.name}  {m.path}:{m.name_range[0] + 1} calls:"]
    for r in res.references:
        where = r.target or f"unresolved: {r.reason}"
        lines.append(f"  {r.line + 1}  {r.kind}  {r.callee}  -> {where}")
    if not res.references:
        lines.append("  nothing")
    return lines + _incomplete(res)
