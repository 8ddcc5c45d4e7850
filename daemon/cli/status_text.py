"""Human text of the daemon's answers: the ``bsl-lens status`` page and its progress line.

Shared by the CLI and the MCP bridge (its ``get_index_status`` summary), so it lives here in
the daemon package and not in :mod:`daemon.cli.main`. Input is the ``status --json`` dict
(:class:`daemon.contract.Status` fields plus ``daemon``); standard library only.
"""

from __future__ import annotations

from .progress import duration as _duration
from .progress import progress_line


def _bytes(n: int | None) -> str:
    if not n:
        return "0 B"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def format_status(d: dict, *, verbose: int = 0) -> str:
    """The human ``status`` text from the ``--json`` dict (``Service.status()`` fields plus
    ``daemon``); missing fields print as ``?`` so an older daemon still formats."""
    g = d.get
    dense = g("dense") or {}
    watcher = g("watcher") or {}
    lat = g("latency") or {}
    daemon = g("daemon") or {}
    lines = [
        f"bsl-lens daemon for {g('root')}: running, {g('state', '?')} "
        f"(pid {g('pid')}, bsl-lens {g('version')}, up {_duration(g('uptime_s'))})",
        f"  export:   {g('format', '?') if g('chunks') or g('state') == 'ready' else 'not indexed yet'}: {g('modules', '?')} modules, {g('methods', '?')} methods, "
        f"{g('metadata_chunks', '?')} metadata chunks, "
        + (f"{g('docs_pages')} docs pages ({g('docs_sections')} sections), " if g("docs_pages") else "")
        + f"{g('bm25_terms', '?')} BM25 terms "
        f"({g('files', '?')} files, {g('chunks', '?')} chunks)",
    ]
    prog = g("progress") or {}
    if prog.get("stage"):
        lines.append("  " + format_progress(prog, first=not g("chunks")))
    if dense.get("enabled"):
        total, done = dense.get("total") or 0, dense.get("done") or 0
        pct = f" ({100 * done / total:.0f}%)" if total else ""
        rate = dense.get("rate_per_s") or 0
        eta = dense.get("eta_s")
        tail = (
            f", {rate:g} chunks/s, ETA {_duration(eta)}"
            if done < total and rate
            else (", complete" if done >= total else "")
        )
        vec = dense.get("vectors") or 0
        vecs = f" ({vec} vectors)" if vec > done else ""
        lines.append(
            f"  dense:    {dense.get('embedder')} ({dense.get('model')}): {done}/{total} embedded{pct}{vecs}{tail}"
        )
        sc = dense.get("shared_cache")
        if sc:
            err = f"; last error: {sc.get('last_error')}" if sc.get("last_error") else ""
            retry = f"; retry in {_duration(sc.get('retry_in_s'))}" if sc.get("retry_in_s") is not None else ""
            lines.append(
                f"  shared:   {sc.get('url')} ({sc.get('mode')}, {sc.get('state')}): {sc.get('hits', 0)} hits, "
                f"{sc.get('misses', 0)} misses, {sc.get('written', 0)} written{err}{retry}"
            )
    else:
        lines.append("  dense:    off (lexical only)")
    mode = watcher.get("mode", "?")
    wstate = watcher.get("state")
    if wstate and wstate not in ("off", {"native": "watching"}.get(mode, mode)):
        mode = f"{mode} ({wstate})" if mode != "off" else wstate
    deg = f"; degraded: {watcher['degraded']}" if watcher.get("degraded") else ""
    lines.append(
        f"  watcher:  {mode}{deg}; {watcher.get('pending_events', 0)} pending events, {g('queued_paths', 0)} queued paths"
    )
    if lat.get("samples"):
        lines.append(
            f"  latency:  change to searchable p50 {lat.get('p50_ms')} ms, p95 {lat.get('p95_ms')} ms "
            f"(last {lat.get('last_ms')} ms, {lat['samples']} changes)"
        )
    else:
        lines.append("  latency:  no changes seen yet")
    stale = g("stale_files") or []
    lines.append(
        f"  stale:    {g('stale_count', 0)} files"
        + (f" ({', '.join(stale[:5])}{', ...' if len(stale) > 5 else ''})" if stale else "")
    )
    lines.append(f"  error:    {g('last_error') or 'none'}")
    lines.append(
        f"  memory:   RSS {_bytes(g('rss_bytes'))}; index on disk {_bytes(g('index_bytes'))} in {g('index_dir')}"
    )
    skipped = g("skipped") or {}
    if skipped and not verbose:  # the totals per reason; -v lists the files
        lines.append("  skipped:  " + ", ".join(f"{k} {v}" for k, v in sorted(skipped.items())) + " (-v lists them)")
    if verbose:
        lines.append(f"  socket:   {daemon.get('socket', '?')}")
        lines.append(f"  log:      {daemon.get('log', '?')}")
        lines.append("  skipped:  " + (", ".join(f"{k} {v}" for k, v in sorted(skipped.items())) or "none"))
        listed = g("skipped_files") or []
        for k in listed:
            detail = f" ({k.get('detail')})" if k.get("detail") else ""
            lines.append(f"    {k.get('path')}: {k.get('reason')}{detail}")
        total = g("skipped_count", len(listed)) or 0
        if total > len(listed):
            lines.append(
                f"    ... {total - len(listed)} more (status --json lists the same {len(listed)}; totals per reason above)"
            )
        li = g("last_index") or {}
        if li:
            lines.append("  last index: " + ", ".join(f"{k} {v}" for k, v in li.items() if k != "at"))
        counters = g("counters") or {}
        if counters:
            lines.append("  counters: " + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in counters.items()))
        lines.append(
            f"  clients:  {daemon.get('connections', '?')} connected, {daemon.get('requests', '?')} requests "
            f"({daemon.get('errors', '?')} errors), protocol {daemon.get('protocol', '?')}"
        )
    return "\n".join(lines)


def format_progress(p: dict, *, first: bool = False) -> str:
    """The ``status`` line for the running job (``Status.progress``): ``indexing: <stage>:
    done/total (pct), rate/s, ETA``; ``first``: a first index, whose counts above stay 0
    until it is applied."""
    text = progress_line(
        str(p.get("stage")), int(p.get("done") or 0), int(p.get("total") or 0), p.get("rate_per_s"), p.get("eta_s")
    )
    if p.get("elapsed_s") is not None:
        text += f" (stage running {_duration(p['elapsed_s'])})"
    if first:
        text += "; first index: the counts above fill in when it is applied"
    return "indexing: " + text
