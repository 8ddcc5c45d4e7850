"""The sentences every front end says about an index's state: progress, the status page, and the
notes an answer carries while the index is being built, embedded or is out of date.

One home so that ``bsl-lens search``/``status``, the MCP tools and the LSP progress bars say the
same thing in the same words; each front end adds only how *it* waits or looks closer (``--fresh``
or ``wait_fresh=1``). Input: the daemon's answers (:class:`daemon.contract.Status`,
:class:`daemon.contract.SearchResult`) or the ``status --json`` dict; standard library only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .contract import SearchResult, Status

# ------------------------------------------------------------------------------ progress of a job
#: stage -> (label, unit) as shown.
STAGES: dict[str, tuple[str, str]] = {
    "starting": ("daemon: starting", ""),
    "loading": ("lexical: loading the index", ""),
    "scan": ("lexical: scanning the export", ""),
    "chunk": ("lexical: reading and chunking", "files"),
    "apply": ("lexical: building the indexes", "files"),
    "load_dense": ("dense: loading the vectors", "chunks"),
    "embed": ("dense: embedding", "chunks"),
}

#: Stages whose ``done`` does not move (one step): shown with their size and elapsed time only.
UNCOUNTED = {"starting", "loading", "scan", "apply"}


def duration(s: float | None) -> str:
    """``42s``, ``3m 07s``, ``1h 05m``; ``?`` for None."""
    if s is None:
        return "?"
    s = int(s)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m {s % 60:02d}s"
    return f"{s // 3600}h {s % 3600 // 60:02d}m"


def progress_line(
    stage: str,
    done: int,
    total: int,
    rate: float | None = None,
    eta_s: float | None = None,
    *,
    percent: bool = True,
) -> str:
    """One progress line: label, ``done/total unit``, percent (unless ``percent=False``: a
    progress bar shows its own), rate and ETA when known."""
    label, unit = STAGES.get(stage, (stage, ""))
    if stage in UNCOUNTED:
        return f"{label} ({total} {unit})..." if total else f"{label}..."
    if not total:
        return f"{label}..." if not done else f"{label}: {done} {unit}".rstrip()
    text = f"{label}: {done}/{total} {unit}".rstrip()
    if percent:
        text += f" ({100 * done / total:.0f}%)"
    if rate:
        text += f", {rate:.1f}/s"
    if eta_s is not None and done < total:
        text += f", ETA {duration(eta_s)}"
    return text


def format_progress(p: dict, *, first: bool = False) -> str:
    """The status page's line for the running job (``Status.progress``): ``indexing: <stage>:
    done/total (pct), rate/s, ETA``; ``first``: a first index, whose counts stay 0 until it is
    applied."""
    text = progress_line(
        str(p.get("stage")), int(p.get("done") or 0), int(p.get("total") or 0), p.get("rate_per_s"), p.get("eta_s")
    )
    if p.get("elapsed_s") is not None:
        text += f" (stage running {duration(p['elapsed_s'])})"
    if first:
        text += "; first index: the counts above fill in when it is applied"
    return "indexing: " + text


# ------------------------------------------------------------------------------ warming
def lexical_warming(st: Status) -> bool:
    """The lexical index is being loaded, built or brought up to date with the disk."""
    return st.state in ("loading", "indexing")


def dense_warming(st: Status) -> bool:
    """Embeddings are still being computed (semantic search covers part of the chunks)."""
    return bool(st.dense.enabled and st.dense.done < st.dense.total)


def index_progress(st: Status) -> str:
    """What a warming index is doing, in one line (``""`` when nothing is): the job's stage and
    counts, and how many chunks are embedded."""
    parts = []
    if st.state != "ready":
        p = st.progress or {}
        stage = (
            f"{p.get('stage')} {p.get('done')}/{p.get('total')}" if p.get("total") else str(p.get("stage") or st.state)
        )
        if p.get("eta_s") is not None:
            stage += f", ETA {float(p['eta_s']):.0f} s"
        parts.append(f"{st.state}: {stage}")
    d = st.dense
    if dense_warming(st):
        eta = f", ETA {d.eta_s:.0f} s" if d.eta_s else ""
        rate = f" ({d.rate_per_s:g}/s{eta})" if d.rate_per_s else ""
        parts.append(f"dense chunks embedded {d.done}/{d.total}{rate}")
    return "; ".join(parts)


def lexical_note(st: Status) -> str:
    """What an answer may miss while the lexical index is loaded, built or brought up to date
    (``""`` once it is complete)."""
    if not lexical_warming(st):
        return ""
    if st.chunks:  # a warm start: the saved index answers while the daemon checks the disk
        return (
            f"the index is being brought up to date with the disk ({index_progress(st)}): results come from the "
            "saved index, files changed since it was saved may be missing or out of date"
        )
    return f"the index is still being built ({index_progress(st)}): results cover only the files indexed so far"


def dense_note(done: int, total: int, how: str = "embedding continues in the background") -> str:
    """How much of the export semantic search covers while embeddings are computed; ``how``:
    what completes them."""
    return f"semantic search covers {done} of {total} chunks so far ({how}); names and words still match everywhere"


def daemon_activity(st: Any) -> str:
    """What a daemon that is not ready is doing, to follow "the daemon ...": ``is starting``,
    ``is loading its index of R``, ``is indexing R for the first time``, ``is bringing its
    index of R up to date (N modules indexed so far)``."""
    if st.state == "starting":
        return "is starting"
    if st.state == "loading":
        return f"is loading its index of {st.root}"
    if not st.chunks and not st.files:
        return f"is indexing {st.root} for the first time"
    if getattr(st, "format", "") == "docs":  # a docs root has pages, no modules
        return f"is bringing its index of {st.root} up to date ({getattr(st, 'docs_pages', 0)} pages indexed so far)"
    return f"is bringing its index of {st.root} up to date ({st.modules} modules indexed so far)"


# ------------------------------------------------------------------------------ freshness
def stale_note(res: SearchResult, *, waited: float, wait_hint: str, status_hint: str) -> str:
    """What an answer with ``res.stale`` may miss: changes noticed and not indexed yet (waiting
    helps: ``wait_hint`` says how, e.g. ``--fresh waits for them``), files that keep their
    last good state because they do not read now (``status_hint`` says where the reason is;
    waiting does not help), and why a change may not be noticed at all (``res.stale_reason``:
    the watch is off or degraded). ``waited``: seconds the caller already waited for them."""
    shown = res.stale_paths[:5]
    more = ", ..." if res.stale_count > len(shown) else ""
    pending = getattr(res, "pending_count", res.stale_count)
    kept = max(res.stale_count - pending, 0)
    parts = []
    if pending:
        parts.append(f"{pending} changed files not indexed yet")
    if kept:
        parts.append(f"{kept} files keep their last good state (they do not read now: {status_hint})")
    reason = getattr(res, "stale_reason", None)
    what = "; ".join(parts) or ("" if reason else "changes not indexed yet")
    if shown:
        what += f" ({', '.join(shown)}{more})"
    if reason:  # the watch is off or degraded: a change may not be noticed at all
        what = (what + "; " if what else "") + f"changes may go unnoticed: {reason}"
    if res.full_reconcile_pending:
        what += "; events were lost and the whole export is being re-checked"
    if pending or res.full_reconcile_pending or getattr(res, "unread_events", False):
        what += f"; still so after waiting {waited:g} s" if waited else f"; {wait_hint}"
    return what


# ------------------------------------------------------------------------------ the status page
def _bytes(n: float | None) -> str:
    if not n:
        return "0 B"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def _export_line(d: dict) -> str:
    g = d.get
    what = g("format", "?") if g("chunks") or g("state") == "ready" else "not indexed yet"
    docs = f"{g('docs_pages')} docs pages ({g('docs_sections')} sections), " if g("docs_pages") else ""
    return (
        f"  export:   {what}: {g('modules', '?')} modules, {g('methods', '?')} methods, "
        f"{g('metadata_chunks', '?')} metadata chunks, {docs}{g('bm25_terms', '?')} BM25 terms "
        f"({g('files', '?')} files, {g('chunks', '?')} chunks)"
    )


def _dense_lines(dense: dict) -> list[str]:
    if not dense.get("enabled"):
        return ["  dense:    off (lexical only)"]
    total, done = dense.get("total") or 0, dense.get("done") or 0
    pct = f" ({100 * done / total:.0f}%)" if total else ""
    rate = dense.get("rate_per_s") or 0
    if done < total and rate:
        tail = f", {rate:g} chunks/s, ETA {duration(dense.get('eta_s'))}"
    else:
        tail = ", complete" if done >= total else ""
    vec = dense.get("vectors") or 0
    vecs = f" ({vec} vectors)" if vec > done else ""
    lines = [f"  dense:    {dense.get('embedder')} ({dense.get('model')}): {done}/{total} embedded{pct}{vecs}{tail}"]
    sc = dense.get("shared_cache")
    if sc:
        err = f"; last error: {sc.get('last_error')}" if sc.get("last_error") else ""
        retry = f"; retry in {duration(sc.get('retry_in_s'))}" if sc.get("retry_in_s") is not None else ""
        unsent = f", {sc['unsent']} not written yet (sent when it can take them)" if sc.get("unsent") else ""
        lines.append(
            f"  shared:   {sc.get('url')} ({sc.get('mode')}, {sc.get('state')}): {sc.get('hits', 0)} hits, "
            f"{sc.get('misses', 0)} misses, {sc.get('written', 0)} written{unsent}{err}{retry}"
        )
    return lines


def _platform_lines(p: dict | None, verbose: int = 0) -> list[str]:
    """``platform:`` (the help that answers, and why) and one line per source found:
    ``bundled: ready, 4880 entries, 4880 vectors``, ``8.3.24.1467: indexing``."""
    if not p:
        return []
    used = p.get("used") or {}
    state = f" ({used['state']})" if used.get("state", "ready") != "ready" else ""
    why = used.get("why", "")
    mode = p.get("compatibility_mode")
    if mode and mode not in why:
        why += f"; CompatibilityMode {mode}"
    lines = [f"  platform: {used.get('label', '?')}{state} — {why}"]
    for s in p.get("sources") or []:
        name = s.get("version") or "bundled"
        parts = [s.get("state", "?")]
        if s.get("entries"):
            parts.append(f"{s['entries']} entries")
        if s.get("vectors"):
            parts.append(f"{s['vectors']} vectors")
        if s.get("skipped"):
            parts.append(f"{s['skipped']} skipped")
        if s.get("error"):
            parts.append(f"error: {s['error']}")
        where = f" in {s['path']}" if verbose and s.get("path") else ""
        chosen = " (answers)" if s.get("chosen") else ""
        lines.append(f"    {name}{chosen}: {', '.join(parts)}{where}")
        if verbose:
            kinds = s.get("kinds") or {}
            if kinds:
                lines.append("      " + ", ".join(f"{k} {v}" for k, v in kinds.items()))
            for k in s.get("skips") or []:
                lines.append(f"      skipped {k.get('path')}: {k.get('reason')} {k.get('detail', '')}".rstrip())
    return lines


def _watcher_line(d: dict) -> str:
    watcher = d.get("watcher") or {}
    mode = watcher.get("mode", "?")
    wstate = watcher.get("state")
    if wstate and wstate not in ("off", {"native": "watching"}.get(mode, mode)):
        mode = f"{mode} ({wstate})" if mode != "off" else wstate
    deg = f"; degraded: {watcher['degraded']}" if watcher.get("degraded") else ""
    fresh = watcher.get("freshness") or "live"
    if fresh not in ("live", "arming"):  # off by choice, or degraded: answers say stale with the reason
        why = watcher.get("freshness_reason") or (
            "--watch off: changes are seen by the periodic reconcile" if fresh == "off" else ""
        )
        deg += f"; freshness {fresh}" + (f": {why}" if why else "")
    return (
        f"  watcher:  {mode}{deg}; {watcher.get('pending_events', 0)} pending events, "
        f"{d.get('queued_paths', 0)} queued paths"
    )


def _docs_lines(d: dict, verbose: int) -> list[str]:
    """The docs pages read with a problem (``docs_problems``): their count and the first paths;
    ``verbose``: every listed page with what is wrong."""
    n = d.get("docs_problem_count") or 0
    problems = d.get("docs_problems") or {}
    if not n:
        return []
    pages = f"{n} docs page{'s' if n != 1 else ''} read with a problem"
    if verbose:
        more = f" (the first {len(problems)} listed)" if n > len(problems) else ""
        return [f"  docs:     {pages}{more}:"] + [f"    {path}: {what}" for path, what in problems.items()]
    paths = list(problems)[:3]
    listed = ", ".join(paths) + (", ..." if n > len(paths) else "")
    return [f"  docs:     {pages} ({listed}; -v says what)"]


def _references_lines(r: dict | None) -> list[str]:
    """``references:`` (find usages): files and sites held, and what is not settled yet (files
    still resolving, a rebuild from the files, dynamic calls that make answers lower bounds);
    nothing from a daemon without references."""
    if not r:
        return []
    parts = [f"{r.get('files', 0)} files, {r.get('sites', 0)} sites"]
    if r.get("building"):
        parts.append("being read from the files again")
    if r.get("resolving"):
        parts.append(f"{r['resolving']} files resolving")
    if r.get("dynamic"):
        parts.append(f"{r['dynamic']} dynamic calls (Выполнить/Вычислить: answers are lower bounds)")
    return ["  references: " + "; ".join(parts)]


def _freshness_lines(d: dict) -> list[str]:
    lat = d.get("latency") or {}
    if lat.get("samples"):
        latency = (
            f"  latency:  change to searchable p50 {lat.get('p50_ms')} ms, p95 {lat.get('p95_ms')} ms "
            f"(last {lat.get('last_ms')} ms, {lat['samples']} changes)"
        )
    else:
        latency = "  latency:  no changes seen yet"
    stale = d.get("stale_files") or []
    listed = f" ({', '.join(stale[:5])}{', ...' if len(stale) > 5 else ''})" if stale else ""
    return [latency, f"  stale:    {d.get('stale_count', 0)} files{listed}"]


def _verbose_lines(d: dict) -> list[str]:
    daemon = d.get("daemon") or {}
    skipped = d.get("skipped") or {}
    lines = [
        f"  socket:   {daemon.get('socket', '?')}",
        f"  log:      {daemon.get('log', '?')}",
        "  skipped:  " + (", ".join(f"{k} {v}" for k, v in sorted(skipped.items())) or "none"),
    ]
    listed = d.get("skipped_files") or []
    for k in listed:
        detail = f" ({k.get('detail')})" if k.get("detail") else ""
        lines.append(f"    {k.get('path')}: {k.get('reason')}{detail}")
    total = d.get("skipped_count", len(listed)) or 0
    if total > len(listed):
        lines.append(
            f"    ... {total - len(listed)} more (status --json lists the same {len(listed)}; totals per reason above)"
        )
    li = d.get("last_index") or {}
    if li:
        lines.append("  last index: " + ", ".join(f"{k} {v}" for k, v in li.items() if k != "at"))
    counters = d.get("counters") or {}
    if counters:
        lines.append("  counters: " + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in counters.items()))
    lines.append(
        f"  clients:  {daemon.get('connections', '?')} connected, {daemon.get('requests', '?')} requests "
        f"({daemon.get('errors', '?')} errors), protocol {daemon.get('protocol', '?')}"
    )
    return lines


def format_status(d: dict, *, verbose: int = 0) -> str:
    """The ``bsl-lens status`` text from the ``status --json`` dict (:class:`daemon.contract.Status`
    fields plus ``daemon``); a missing field prints as ``?`` so an older daemon still formats.
    ``verbose``: also the socket, log, every skipped file listed, counters and clients."""
    g = d.get
    lines = [
        f"bsl-lens daemon for {g('root')}: running, {g('state', '?')} "
        f"(pid {g('pid')}, bsl-lens {g('version')}, up {duration(g('uptime_s'))})",
        _export_line(d),
    ]
    prog = g("progress") or {}
    if prog.get("stage"):
        lines.append("  " + format_progress(prog, first=not g("chunks")))
    lines += _dense_lines(g("dense") or {})
    lines += _platform_lines(g("platform"), verbose)
    lines += _references_lines(g("references"))
    lines.append(_watcher_line(d))
    lines += _freshness_lines(d)
    lines += _docs_lines(d, verbose)
    lines.append(f"  error:    {g('last_error') or 'none'}")
    lines.append(
        f"  memory:   RSS {_bytes(g('rss_bytes'))}; index on disk {_bytes(g('index_bytes'))} in {g('index_dir')}"
    )
    skipped = g("skipped") or {}
    if verbose:
        lines += _verbose_lines(d)
    elif skipped:  # the totals per reason; -v lists the files
        lines.append("  skipped:  " + ", ".join(f"{k} {v}" for k, v in sorted(skipped.items())) + " (-v lists them)")
    return "\n".join(lines)
