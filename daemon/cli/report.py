"""``bsl-lens report``: the status page, one self-contained HTML file.

Where the index stands and how good the search is, for people who would rather look than
read: per export root the daemon's state, progress and ETA, freshness (stale and queued
files, change-to-searchable latency), skipped files with reasons, the last searches with
each channel's rank of their top hits, and the ``eval`` results as bar charts per intent
and per mode.

The page is static: :func:`collect_status` asks each root's running daemon over its socket
(never starts one), :func:`eval_via_daemon` runs a gold set through it, and
:func:`render_html` writes one HTML document with inline CSS and inline SVG charts, no
script and no external resource (its Content-Security-Policy forbids both). Every string
from the index or the user (paths, queries, error texts) is HTML-escaped. The renderer
reads the status as a plain dict and tolerates missing fields, so a page can be made from
an older or newer daemon's ``status``.
"""

from __future__ import annotations

import html
import json
import math
import time
from pathlib import Path
from typing import Any

from .. import __version__
from ..contract import SEARCH_MODES
from ..dev.evaluate import METRICS, evaluate
from ..stats import p50_p95

#: Bar colours (Okabe-Ito, readable for the common colour-vision deficiencies).
MODE_COLORS = {"lexical": "#0072B2", "vector": "#E69F00", "hybrid": "#009E73"}
METRIC_COLORS = {"ndcg@10": "#0072B2", "mrr@10": "#E69F00", "recall@10": "#009E73", "hit@1": "#CC79A7"}
CHANNEL_ORDER = ("names", "bm25", "meta", "dense")
#: Status fields that may hold file lists (other daemons' names included: the page shows
#: whichever the daemon sends).
FRESHNESS_LISTS = (
    ("stale_files", "stale"),
    ("pending_files", "pending"),
    ("pending_paths", "pending"),
    ("queued_files", "queued"),
)
#: Gold queries per mode are run with this many hits (the eval's cut-off is 10).
EVAL_TOP_K = 10


def e(value: Any) -> str:
    """``value`` as text safe inside HTML/SVG element content and quoted attributes."""
    return html.escape("" if value is None else str(value), quote=True)


# ------------------------------------------------------------------------------ collecting
def collect_status(root: str | Path, index_dir: str | Path | None = None, *, timeout: float = 15.0) -> dict:
    """The status of ``root``'s daemon as a plain dict, without starting one.

    Running: the daemon's ``Service.status()`` fields (whatever that daemon sends) plus
    ``"running": True`` and ``"daemon"`` (pid, socket, log, connections, ...). Not running:
    ``{"running": False, "root", "index_dir", "state": "not running" | "not answering" |
    "no such folder", "detail"?}`` (``not answering``: a process holds the daemon lock but does not reply:
    starting, stopping or hung). ``timeout``: seconds for the status request.
    """
    from ..server import runtime
    from ..client import DaemonError, DaemonNotRunning, connect

    paths = runtime.paths_for(root, index_dir)
    if not paths.root.is_dir():
        return {
            "running": False,
            "root": str(paths.root),
            "index_dir": str(paths.index_dir),
            "state": "no such folder",
            "detail": f"export root is not a directory: {paths.root}",
        }
    try:
        with connect(
            paths.root,
            index_dir=paths.index_dir,
            spawn=False,
            request_timeout=timeout,
            connect_timeout=5.0,
            client="report",
        ) as c:
            res = c.call("status", {})
    except DaemonError as exc:
        out: dict[str, Any] = {
            "running": False,
            "root": str(paths.root),
            "index_dir": str(paths.index_dir),
            "state": "not running",
        }
        holder = runtime.lock_holder(paths.lock)
        if holder is not None or runtime.lock_is_held(paths.lock):
            out["state"] = "not answering"
            out["detail"] = (
                f"pid {holder or '?'} holds {paths.lock} but does not answer ({exc}): starting, stopping or hung; "
                f"see {paths.log}"
            )
        elif not isinstance(exc, DaemonNotRunning):
            out["detail"] = str(exc)
        return out
    data = dict(res.get("service") or {})
    data["running"] = True
    data["daemon"] = res.get("daemon") or {}
    return data


def gold_for_root(entries: list[dict], root: str | Path, corpus: str | None = None) -> list[dict]:
    """The gold entries that belong to ``root``: ``corpus`` given, those with that
    ``corpus``; else those whose ``corpus`` is the root folder's name, plus entries
    without a ``corpus`` field."""
    if corpus is not None:
        return [x for x in entries if x.get("corpus") == corpus]
    name = Path(root).resolve().name
    return [x for x in entries if x.get("corpus", name) == name]


def eval_via_daemon(
    root: str | Path, entries: list[dict], *, index_dir: str | Path | None = None, modes: list[str] | None = None
) -> dict:
    """Run gold ``entries`` through ``root``'s running daemon (``search``, top 10) and score
    them with :func:`daemon.dev.evaluate.evaluate`.

    ``modes``: default lexical, plus vector and hybrid when the daemon has a dense side.
    Returns the ``bsl-lens eval --json`` shape: ``{"corpus", "gold", "root", "stats":
    {"dense_done", "dense_total"}, "modes": {mode: {"n", "overall", "by_intent",
    "latency_ms": {"p50", "p95"}}}}``; latencies are the daemon's ``took_ms`` (engine time,
    no socket). The queries are sent with ``remember: false`` (they stay out of the
    daemon's recent searches) when the daemon knows that parameter. Raises
    :class:`daemon.client.DaemonError` if no daemon answers, ``ValueError`` for an unknown mode.
    """
    from ..client import connect
    from ..server.protocol import result_type

    with connect(root, index_dir=index_dir, spawn=False, client="report") as c:
        st = c.call("status", {}).get("service") or {}
        dense = st.get("dense") or {}
        # a daemon that keeps recent queries takes remember=false: the gold run stays out of them
        forget = {"remember": False} if "recent_queries" in st else {}
        if modes is None:
            modes = ["lexical"] + (["vector", "hybrid"] if dense.get("enabled") else [])
        bad = [m for m in modes if m not in SEARCH_MODES]
        if bad:
            raise ValueError(f"unknown mode(s) {bad}; use lexical, vector, hybrid")
        results = {}
        for mode in modes:
            lat: list[float] = []

            def run(q: str, mode: str = mode, lat: list[float] = lat):
                res = c.call(
                    "search", {"query": q, "mode": mode, "top_k": EVAL_TOP_K, **forget}, result=result_type("search")
                )
                lat.append(res.took_ms)
                return [(h.path, h.symbol) for h in res.hits]

            r = evaluate(entries, run)
            r.pop("per_query", None)
            lat.sort()
            r["latency_ms"] = p50_p95(lat, 3) if lat else {}
            results[mode] = r
    return {
        "corpus": entries[0].get("corpus", Path(st.get("root", root)).name) if entries else "",
        "root": st.get("root", str(root)),
        "stats": {"dense_done": dense.get("done", 0), "dense_total": dense.get("total", 0)},
        "modes": results,
    }


def load_eval_json(path: str | Path) -> dict:
    """A ``bsl-lens eval --json`` output file. ``ValueError`` naming the file if it is not
    JSON or has no ``modes`` object of per-mode results; ``OSError`` if unreadable."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not JSON: {exc}") from exc
    modes = data.get("modes") if isinstance(data, dict) else None
    if not isinstance(modes, dict) or not all(isinstance(r, dict) and "overall" in r for r in modes.values()):
        raise ValueError(f'{path}: not `bsl-lens eval --json` output (needs a "modes" object with per-mode results)')
    data.setdefault("source", str(path))
    return data


# ------------------------------------------------------------------------------ formatting
def _num(v: Any, spec: str = "") -> str:
    if v is None or v == "":
        return "?"
    try:
        return format(v, spec) if spec else f"{v:,}".replace(",", " ") if isinstance(v, int) else str(v)
    except (TypeError, ValueError):
        return str(v)


def _duration(s: Any) -> str:
    if not isinstance(s, (int, float)) or s < 0:
        return "?"
    s = int(s)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


def _bytes(n: Any) -> str:
    if not isinstance(n, (int, float)) or n <= 0:
        return "?"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def _when(ts: Any, now: float) -> str:
    if not isinstance(ts, (int, float)) or ts <= 0:
        return "never"
    return f"{time.strftime('%H:%M:%S', time.localtime(ts))} ({_duration(now - ts)} ago)"


def _ms(v: Any) -> str:
    return "?" if not isinstance(v, (int, float)) else (f"{v:.0f} ms" if v >= 10 else f"{v:.1f} ms")


def _bar(done: Any, total: Any, label: str) -> str:
    """A horizontal progress bar (pure CSS) with ``label`` beside it."""
    pct = 0.0
    if isinstance(done, (int, float)) and isinstance(total, (int, float)) and total > 0:
        pct = max(0.0, min(100.0, 100.0 * done / total))
    elif isinstance(done, (int, float)) and total == 0:
        pct = 100.0
    return (
        f'<div class="bar" role="progressbar" aria-valuenow="{pct:.0f}" aria-valuemin="0" aria-valuemax="100">'
        f'<div class="fill" style="width:{pct:.1f}%"></div></div><div class="barlabel">{e(label)}</div>'
    )


def _kv(rows: list[tuple[str, str]]) -> str:
    """A definition table; values are HTML already (callers escape)."""
    return "<table class=kv>" + "".join(f"<tr><th>{e(k)}</th><td>{v}</td></tr>" for k, v in rows) + "</table>"


# ------------------------------------------------------------------------------ charts
def bar_chart(
    title: str,
    groups: list[str],
    series: list[str],
    values: dict[tuple[str, str], float],
    colors: dict[str, str],
    *,
    attrs: str = "",
    group_notes: dict[str, str] | None = None,
) -> str:
    """A grouped vertical bar chart as an inline ``<svg>`` inside a ``<figure>``.

    ``groups`` along the x axis, one bar per ``series`` in each (``values[(group, series)]``
    in [0, 1]; a missing pair draws no bar). Each bar carries its value as a label and a
    ``<title>`` tooltip. ``attrs``: extra attributes for the figure (already escaped).
    """
    bar_w, gap, left, top, plot_h = 22, 26, 40, 34, 180
    # wide enough for the group label (~7 px a character at 12 px) and the bars
    group_w = max(len(series) * bar_w + gap, 14 + 7 * max((len(g) for g in groups), default=0))
    width = max(left + len(groups) * group_w + 10, 24 + sum(24 + 8 * len(s) for s in series))
    height = top + plot_h + 44
    out = [
        f'<figure class="chart" {attrs}><svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" role="img"><title>{e(title)}</title>'
    ]
    # legend
    x = left
    for s in series:
        out.append(f'<rect x="{x}" y="6" width="12" height="12" fill="{colors.get(s, "#777")}"/>')
        out.append(f'<text x="{x + 16}" y="16" class="legend">{e(s)}</text>')
        x += 24 + 8 * len(s)
    # axis and grid
    for i in range(5):
        v = i / 4
        y = top + plot_h - v * plot_h
        out.append(
            f'<line x1="{left}" x2="{width - 6}" y1="{y:.1f}" y2="{y:.1f}" class="{"axis" if i == 0 else "grid"}"/>'
        )
        out.append(f'<text x="{left - 6}" y="{y + 4:.1f}" class="tick" text-anchor="end">{v:.2f}</text>')
    for gi, g in enumerate(groups):
        gx = left + gi * group_w + (group_w - len(series) * bar_w) / 2
        for si, s in enumerate(series):
            v = values.get((g, s))
            if v is None or not isinstance(v, (int, float)) or math.isnan(v):
                continue
            v = max(0.0, min(1.0, float(v)))
            h = v * plot_h
            bx = gx + si * bar_w
            out.append(
                f'<rect x="{bx:.1f}" y="{top + plot_h - h:.1f}" width="{bar_w - 3}" height="{max(h, 0.5):.1f}" '
                f'fill="{colors.get(s, "#777")}"><title>{e(g)} · {e(s)}: {v:.3f}</title></rect>'
            )
            out.append(
                f'<text x="{bx + (bar_w - 3) / 2:.1f}" y="{top + plot_h - h - 3:.1f}" class="val" '
                f'text-anchor="middle">{v:.2f}</text>'
            )
        cx = gx + len(series) * bar_w / 2
        out.append(f'<text x="{cx:.1f}" y="{top + plot_h + 16}" class="group" text-anchor="middle">{e(g)}</text>')
        note = (group_notes or {}).get(g)
        if note:
            out.append(f'<text x="{cx:.1f}" y="{top + plot_h + 30}" class="note" text-anchor="middle">{e(note)}</text>')
    out.append(f"</svg><figcaption>{e(title)}</figcaption></figure>")
    return "".join(out)


def _eval_section(run: dict, idx: int) -> str:
    """Charts and a table for one eval result (the ``eval --json`` shape)."""
    modes = run.get("modes") or {}
    intents = sorted({i for r in modes.values() for i in (r.get("by_intent") or {})})
    groups = ["all", *intents]
    first = next(iter(modes.values()), {})
    notes = {"all": f"n={first.get('n', '?')}"}
    for i in intents:
        notes[i] = f"n={((first.get('by_intent') or {}).get(i) or {}).get('n', '?')}"

    def metric(r: dict, group: str, level: str, m: str):
        part = r.get("overall") if group == "all" else (r.get("by_intent") or {}).get(group)
        return ((part or {}).get(level) or {}).get(m)

    stats = run.get("stats") or {}
    where = run.get("source") or run.get("gold") or ""
    head = [f'<div class="evalrun" id="eval-{idx}" data-corpus="{e(run.get("corpus", ""))}">']
    head.append(
        f"<h3>{e(run.get('corpus') or '?')} <small>{len(first.get('by_intent') or {})} intents, "
        f"{e(first.get('n', '?'))} queries · {e(where)}</small></h3>"
    )
    if run.get("root"):
        head.append(f'<p class="muted">root {e(run["root"])}</p>')
    dt, dd = stats.get("dense_total"), stats.get("dense_done")
    if isinstance(dt, int) and dt and isinstance(dd, int) and dd < dt:
        head.append(
            f'<p class="warn">dense index incomplete during this run: {dd}/{dt} chunks embedded; '
            "vector and hybrid scores are low bounds.</p>"
        )
    series = list(modes)
    vals = {(g, m): metric(r, g, "symbol", "ndcg@10") for m, r in modes.items() for g in groups}
    charts = [
        bar_chart(
            "nDCG@10 (symbol level) by intent, per mode",
            groups,
            series,
            vals,
            {m: MODE_COLORS.get(m, "#777") for m in series},
            attrs='data-chart="by-intent"',
            group_notes=notes,
        )
    ]
    for mode, r in modes.items():
        mv = {(g, k): metric(r, g, "symbol", k) for k in METRICS for g in groups}
        lat = r.get("latency_ms") or {}
        tail = f" · p50 {_ms(lat.get('p50'))}, p95 {_ms(lat.get('p95'))}" if lat else ""
        charts.append(
            bar_chart(
                f"{mode}: symbol-level metrics per intent{tail}",
                groups,
                list(METRICS),
                mv,
                METRIC_COLORS,
                attrs=f'data-mode="{e(mode)}"',
                group_notes=notes,
            )
        )
    # the numbers, for those who read
    rows = [
        "<table class=grid><tr><th>mode</th><th>level</th>"
        + "".join(f"<th>{e(g)}</th>" for g in groups)
        + "<th>Hit@1</th><th>MRR@10</th><th>Recall@10</th></tr>"
    ]
    for mode, r in modes.items():
        for level in ("symbol", "file"):
            cells = "".join(f"<td>{_num(metric(r, g, level, 'ndcg@10'), '.3f')}</td>" for g in groups)
            o = (r.get("overall") or {}).get(level) or {}
            rows.append(
                f"<tr><td>{e(mode)}</td><td>{level} nDCG@10</td>{cells}"
                f"<td>{_num(o.get('hit@1'), '.3f')}</td><td>{_num(o.get('mrr@10'), '.3f')}</td>"
                f"<td>{_num(o.get('recall@10'), '.3f')}</td></tr>"
            )
    rows.append("</table>")
    return "".join(head) + '<div class="charts">' + "".join(charts) + "</div>" + "".join(rows) + "</div>"


# ------------------------------------------------------------------------------ root cards
#: A skipped-files table longer than this is folded under a ``<details>`` element.
SKIPPED_OPEN_ROWS = 8


def _skipped_list(st: dict) -> list[dict]:
    """Skipped files as ``[{"path", "reason", "detail"}]`` from whichever list field the
    daemon sends (``skipped_files`` and the like); [] when it sends only counts."""
    for key, val in st.items():
        if key.startswith("skipped") and isinstance(val, list):
            out = []
            for item in val:
                if isinstance(item, dict):
                    out.append(
                        {
                            "path": item.get("path", "?"),
                            "reason": item.get("reason", ""),
                            "detail": item.get("detail", ""),
                        }
                    )
                elif isinstance(item, (list, tuple)) and item:
                    out.append(
                        {
                            "path": item[0],
                            "reason": item[1] if len(item) > 1 else "",
                            "detail": item[2] if len(item) > 2 else "",
                        }
                    )
                else:
                    out.append({"path": item, "reason": "", "detail": ""})
            return out
    return []


def _root_section(st: dict, idx: int, now: float) -> str:
    """One root's section: its state, four cards (index, progress, freshness, daemon), the stale
    and queued files, the skipped files and the recent searches."""
    root = st.get("root") or "?"
    state = st.get("state") or ("running" if st.get("running") else "not running")
    out = [f'<section class="root" id="root-{idx}" data-root="{e(root)}" data-state="{e(state)}">']
    badge = f'<span class="badge s-{e(state.replace(" ", "-"))}">{e(state)}</span>'
    out.append(f'<h2>{badge} <span class="path">{e(root)}</span></h2>')
    if not st.get("running"):
        return "".join(out) + _not_running(st, root, state)
    daemon = st.get("daemon") or {}
    cards = [_index_card(st), _progress_card(st, state), _freshness_card(st, now), _daemon_card(st, daemon)]
    out.append('<div class="cards">' + "".join(cards) + "</div>")
    out.append(
        f'<p class="muted small">index dir <span class="path">{e(st.get("index_dir", "?"))}</span> · '
        f'log <span class="path">{e(daemon.get("log", "?"))}</span> · '
        f'socket <span class="path">{e(daemon.get("socket", "?"))}</span></p>'
    )
    out += _freshness_lists(st)
    out += _docs_block(st)
    out += _platform_block(st.get("platform"))
    out += _skipped_block(st)
    out.append(_recent_section(st.get("recent_queries"), now))
    out.append("</section>")
    return "".join(out)


def _not_running(st: dict, root: str, state: str) -> str:
    out = []
    if state != "no such folder":
        out.append(
            f"<p>No daemon answers for this root. Start it with <code>bsl-lens daemon start {e(root)}</code>.</p>"
        )
    if st.get("detail"):
        out.append(f'<p class="warn">{e(st["detail"])}</p>')
    out.append(f'<p class="muted">index dir {e(st.get("index_dir", "?"))}</p></section>')
    return "".join(out)


def _index_card(st: dict) -> str:
    rows = [
        ("format", e(st.get("format", "?"))),
        ("modules", f'<b class="n-modules">{_num(st.get("modules"))}</b>'),
        ("methods", _num(st.get("methods"))),
        ("metadata chunks", _num(st.get("metadata_chunks"))),
        ("files · chunks", f"{_num(st.get('files'))} · {_num(st.get('chunks'))}"),
        ("BM25 terms", _num(st.get("bm25_terms"))),
    ]
    return "<div class=card><h3>Index</h3>" + _kv(rows) + "</div>"


def _progress_card(st: dict, state: str) -> str:
    prog = st.get("progress") or {}
    dense = st.get("dense") or {}
    p = ["<div class=card><h3>Progress</h3>"]
    if prog.get("total"):
        label = f"{_num(prog.get('done'))}/{_num(prog.get('total'))}"
        p.append(
            f"<div class=sub>{e(prog.get('stage', 'job'))}</div>" + _bar(prog.get("done"), prog.get("total"), label)
        )
    else:
        p.append(f"<div class=sub>lexical</div>{_bar(1, 1, 'idle' if state == 'ready' else state)}")
    if dense.get("enabled"):
        done, total = dense.get("done") or 0, dense.get("total") or 0
        pct = f" ({100 * done / total:.0f}%)" if total else ""
        if done < total:
            rate = dense.get("rate_per_s") or 0
            eta = f"ETA {_duration(dense.get('eta_s'))} at {rate:g} chunks/s" if rate else "ETA unknown (no rate yet)"
        else:
            eta = "complete"
        p.append(f"<div class=sub>dense · {e(dense.get('embedder'))} ({e(dense.get('model'))})</div>")
        p.append(_bar(done, total, f"{_num(done)}/{_num(total)} embedded{pct}; {eta}"))
        if dense.get("pending"):
            p.append(f'<p class="muted">{_num(dense.get("pending"))} chunks queued for embedding</p>')
        sc = dense.get("shared_cache") or {}
        if sc:
            unsent = sc.get("unsent") or 0
            err = f"; last error: {sc['last_error']}" if sc.get("last_error") else ""
            p.append(
                f'<p class="shared {"warn" if unsent or sc.get("state") != "ok" else "muted"}">shared cache '
                f"{e(sc.get('url'))} ({e(sc.get('mode'))}, {e(sc.get('state'))}): {_num(sc.get('hits', 0))} hits, "
                f"{_num(sc.get('written', 0))} written"
                + (f", <b>{_num(unsent)} not written yet</b> (sent when it can take them)" if unsent else "")
                + f"{e(err)}</p>"
            )
    else:
        p.append("<div class=sub>dense</div><p class=muted>off (lexical only)</p>")
    if st.get("saving"):
        p.append("<p class=muted>writing a snapshot now</p>")
    p.append("</div>")
    return "".join(p)


def _freshness_card(st: dict, now: float) -> str:
    watcher = st.get("watcher") or {}
    lat = st.get("latency") or {}
    stale_count = st.get("stale_count", 0)
    degraded = f' <span class="warn">degraded: {e(watcher["degraded"])}</span>' if watcher.get("degraded") else ""
    fresh = watcher.get("freshness") or "live"
    if fresh not in ("live", "arming"):  # answers say stale, with this reason
        why = watcher.get("freshness_reason") or ("--watch off" if fresh == "off" else "")
        degraded += f' <span class="warn freshness">freshness {e(fresh)}{": " + e(why) if why else ""}</span>'
    rows = [
        ("watcher", e(watcher.get("mode", "?")) + degraded),
        ("pending events", _num(watcher.get("pending_events", 0))),
        ("queued paths", _num(st.get("queued_paths", 0))),
        ("stale files", f'<span class="{"warn" if stale_count else ""}">{_num(stale_count)}</span>'),
    ]
    if lat.get("samples"):
        p50, p95, last = _ms(lat.get("p50_ms")), _ms(lat.get("p95_ms")), _ms(lat.get("last_ms"))
        rows.append(("change → searchable", f"p50 {p50}, p95 {p95}, last {last} ({_num(lat['samples'])} changes)"))
    else:
        rows.append(("change → searchable", "no changes seen yet"))
    li = st.get("last_index") or {}
    if li.get("at"):
        took = f", {li['seconds']:.2f} s" if isinstance(li.get("seconds"), (int, float)) else ""
        rows.append(("last index", f"{_when(li.get('at'), now)}{took}"))
    rows.append(("last saved", _when(st.get("last_saved_at"), now)))
    return "<div class=card><h3>Freshness</h3>" + _kv(rows) + "</div>"


def _daemon_card(st: dict, daemon: dict) -> str:
    err = st.get("last_error")
    clients = (
        f"{_num(daemon.get('connections'))} connected, {_num(daemon.get('requests'))} requests "
        f"({_num(daemon.get('errors'))} errors)"
    )
    rows = [
        (
            "pid · version",
            f"{e(st.get('pid', daemon.get('pid')))} · bsl-lens {e(st.get('version', daemon.get('version')))}",
        ),
        ("up", _duration(st.get("uptime_s", daemon.get("uptime_s")))),
        ("memory", f"RSS {_bytes(st.get('rss_bytes'))}; index {_bytes(st.get('index_bytes'))}"),
        ("clients", clients),
        ("last error", f'<span class="warn">{e(err)}</span>' if err else "none"),
    ]
    return "<div class=card><h3>Daemon</h3>" + _kv(rows) + "</div>"


def _freshness_lists(st: dict) -> list[str]:
    out = []
    for key, label in FRESHNESS_LISTS:
        files = st.get(key)
        if isinstance(files, list) and files:
            items = "".join(
                f"<li class=path>{e(f if not isinstance(f, dict) else f.get('path', f))}</li>" for f in files
            )
            total = st.get("stale_count", 0) if key == "stale_files" else len(files)
            more = f" (first {len(files)} of {total})" if isinstance(total, int) and total > len(files) else ""
            out.append(f'<h3>{e(label.capitalize())} files{more}</h3><ul class="files {e(key)}">{items}</ul>')
    return out


def _docs_block(st: dict) -> list[str]:
    """The docs pages read with a problem (``docs_problems``: a code fence never closed hides the
    headings after it), when there are any."""
    n = st.get("docs_problem_count") or 0
    problems = st.get("docs_problems") if isinstance(st.get("docs_problems"), dict) else {}
    if not n:
        return []
    more = f" (first {len(problems)} of {n})" if n > len(problems) else ""
    rows = "".join(f"<tr><td class=path>{e(path)}</td><td>{e(what)}</td></tr>" for path, what in problems.items())
    return [
        f"<h3>Docs pages read with a problem <small>{_num(n)}</small>{more}</h3>",
        f'<table class="grid docs-problems"><tr><th>page</th><th>problem</th></tr>{rows}</table>',
    ]


def _platform_block(p: Any) -> list[str]:
    """Platform help: the source that answers and why, then one table row per source found
    (the bundled data set, each installed version): state, entries, vectors, skips, build time."""
    if not isinstance(p, dict):
        return []
    used = p.get("used") or {}
    mode = p.get("compatibility_mode")
    state = used.get("state", "ready")
    out = [
        "<h3>Platform help</h3>",
        f'<p class="platform-used"><b>{e(used.get("label", "?"))}</b> answers'
        + (f' <span class="warn">({e(state)})</span>' if state != "ready" else "")
        + f" · {e(used.get('why', ''))}"
        + (f" · CompatibilityMode <code>{e(mode)}</code>" if mode else "")
        + "</p>",
    ]
    rows = []
    for s in p.get("sources") or []:
        err = f' <span class="warn">{e(s["error"])}</span>' if s.get("error") else ""
        build = f"{s['build_s']:.2f} s" if isinstance(s.get("build_s"), (int, float)) else "-"
        loaded = " (loaded)" if s.get("loaded_from_disk") else ""
        rows.append(
            f"<tr><td>{e(s.get('version') or 'bundled')}{' ✓' if s.get('chosen') else ''}</td>"
            f"<td>{e(s.get('state', '?'))}{err}</td><td>{_num(s.get('entries', 0))}</td>"
            f"<td>{_num(s.get('vectors', 0))}</td><td>{_num(s.get('skipped', 0))}</td>"
            f"<td>{e(build)}{loaded}</td><td class=path>{e(', '.join(s.get('books') or []))}</td></tr>"
        )
    out.append(
        '<table class="grid platform"><tr><th>source</th><th>state</th><th>entries</th><th>vectors</th>'
        "<th>skipped</th><th>build</th><th>books</th></tr>" + "".join(rows) + "</table>"
    )
    return out


def _skipped_block(st: dict) -> list[str]:
    skipped = _skipped_list(st)
    counts = st.get("skipped") if isinstance(st.get("skipped"), dict) else {}
    if not counts and skipped:
        for s in skipped:
            counts[s["reason"]] = counts.get(s["reason"], 0) + 1
    n_skipped = sum(v for v in counts.values() if isinstance(v, int)) if counts else len(skipped)
    out = [f"<h3>Skipped files <small>{n_skipped}</small></h3>"]
    if counts:
        out.append(
            '<p class="reasons">'
            + " ".join(f'<span class="pill">{e(k)} <b>{e(v)}</b></span>' for k, v in sorted(counts.items()))
            + "</p>"
        )
    if skipped:
        table = (
            '<table class="grid skipped"><tr><th>file</th><th>reason</th><th>detail</th></tr>'
            + "".join(
                f"<tr><td class=path>{e(s['path'])}</td><td>{e(s['reason'])}</td><td>{e(s['detail'])}</td></tr>"
                for s in skipped
            )
            + "</table>"
        )
        if len(skipped) > SKIPPED_OPEN_ROWS:  # folded: a long list must not push the rest down
            table = f"<details><summary>the {len(skipped)} files listed by the daemon</summary>{table}</details>"
        out.append(table)
    elif counts:
        out.append(
            '<p class="muted">this daemon reports counts by reason only; '
            "<code>bsl-lens index ROOT -v</code> lists the files.</p>"
        )
    else:
        out.append("<p class=muted>none</p>")
    return out


def _recent_section(recent: Any, now: float) -> str:
    if not isinstance(recent, list):
        return '<h3>Recent searches</h3><p class="muted">this daemon does not report its recent searches.</p>'
    if not recent:
        return '<h3>Recent searches</h3><p class="muted">none since the daemon started.</p>'
    channels = [
        c for c in CHANNEL_ORDER if any(c in (h.get("ranks") or {}) for q in recent for h in q.get("hits") or [])
    ]
    extra = sorted({c for q in recent for h in q.get("hits") or [] for c in (h.get("ranks") or {})} - set(channels))
    channels += extra
    rows = [
        f"<h3>Recent searches <small>last {len(recent)}, newest first; rank of each hit in each channel</small></h3>"
        '<table class="grid recent"><tr><th>when</th><th>query</th><th>mode</th><th>#</th><th>hit</th>'
        + "".join(f"<th class=ch>{e(c)}</th>" for c in channels)
        + "</tr>"
    ]
    for q in reversed(recent):
        hits = q.get("hits") or []
        span = max(len(hits), 1)
        when = time.strftime("%H:%M:%S", time.localtime(q["at"])) if isinstance(q.get("at"), (int, float)) else "?"
        lead = (
            f'<td rowspan="{span}">{e(when)}</td><td rowspan="{span}" class="query">{e(q.get("query", ""))}'
            f'<div class="muted">{_num(q.get("total"))} candidates, {_ms(q.get("took_ms"))}</div></td>'
            f'<td rowspan="{span}">{e(q.get("mode", ""))}</td>'
        )
        if not hits:
            rows.append(
                f'<tr class="qstart">{lead}<td></td><td class="muted">no hits</td>'
                + "<td></td>" * len(channels)
                + "</tr>"
            )
            continue
        for i, h in enumerate(hits, 1):
            ranks = h.get("ranks") or {}
            # a method or field: its name, then its owner; a whole metadata object: the owner
            what, owner = (
                (h.get("symbol"), h.get("owner", "")) if h.get("symbol") else (h.get("owner") or "(object)", "")
            )
            cells = "".join(_rank_cell(ranks.get(c)) for c in channels)
            rows.append(
                f'<tr class="{"qstart" if i == 1 else ""}">{lead if i == 1 else ""}<td>{i}</td>'
                f'<td><b>{e(what)}</b> <span class="muted">{e(owner)}</span>'
                f'<div class="path small">{e(h.get("path", ""))}</div></td>{cells}</tr>'
            )
    rows.append("</table>")
    return "".join(rows)


def _rank_cell(rank: Any) -> str:
    if not isinstance(rank, int):
        return '<td class="rank none">–</td>'
    # rank 1 darkest; fades out towards 20
    alpha = max(0.12, 1.0 - (rank - 1) / 20)
    fg = "#fff" if alpha > 0.55 else "#102a43"
    return f'<td class="rank" style="background:rgba(0,114,178,{alpha:.2f});color:{fg}">{rank}</td>'


# ------------------------------------------------------------------------------ page
CSS = """
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;color:#1f2933;background:#fff;
margin:0;padding:24px 32px;max-width:1400px}
h1{font-size:24px;margin:0 0 4px}
h2{font-size:18px;margin:0 0 12px;display:flex;gap:10px;align-items:center;flex-wrap:wrap}
h3{font-size:15px;margin:18px 0 8px}
h3 small,h2 small{font-weight:normal;color:#52606d}
.muted{color:#52606d}
.warn{color:#b3261e}
.path{font-family:ui-monospace,"DejaVu Sans Mono",monospace;word-break:break-all}
.small{font-size:12px}
code{font-family:ui-monospace,"DejaVu Sans Mono",monospace;background:#f1f3f5;padding:1px 4px;border-radius:3px}
header{border-bottom:1px solid #d9e2ec;margin-bottom:16px;padding-bottom:8px}
nav ul{list-style:none;padding:0;margin:8px 0 0;display:flex;flex-wrap:wrap;gap:8px}
nav a{color:#0b5394;text-decoration:none}
section.root,section.quality{border:1px solid #d9e2ec;border-radius:8px;padding:16px 18px;margin:0 0 20px;
background:#fcfdfe}
.badge{display:inline-block;font-size:12px;font-weight:600;padding:2px 10px;border-radius:12px;background:#e4e7eb;
color:#1f2933;text-transform:uppercase;letter-spacing:.03em}
.s-ready{background:#d3f4e3;color:#0b6b3a}
.s-indexing,.s-loading,.s-starting{background:#fff1c2;color:#7a5200}
.s-not-running,.s-not-answering,.s-no-such-folder,.s-stopping{background:#fde2e1;color:#9b1c1c}
.cards{display:grid;grid-template-columns:repeat(auto-fit,minmax(260px,1fr));gap:12px}
.card{border:1px solid #e4e7eb;border-radius:6px;padding:10px 12px;background:#fff}
.card h3{margin:0 0 6px}
.sub{font-size:12px;color:#52606d;margin-top:6px}
.bar{height:14px;background:#e4e7eb;border-radius:7px;overflow:hidden;margin:3px 0 2px}
.bar .fill{height:100%;background:#0072B2}
.barlabel{font-size:12px}
table.kv{border-collapse:collapse;width:100%}
table.kv th{text-align:left;font-weight:normal;color:#52606d;padding:2px 10px 2px 0;vertical-align:top;
white-space:nowrap}
table.kv td{padding:2px 0}
table.grid{border-collapse:collapse;margin:4px 0 8px;font-size:13px}
table.grid th,table.grid td{border:1px solid #e4e7eb;padding:3px 8px;text-align:left;vertical-align:top}
table.grid th{background:#f5f7fa}
table.recent tr.qstart td{border-top:2px solid #bcccdc}
table.recent td.query{max-width:320px;word-break:break-word;font-weight:600}
table.recent td.query .muted{font-weight:normal;font-size:12px}
td.rank{text-align:center;font-weight:600;min-width:44px}
td.rank.none{color:#9aa5b1;font-weight:normal}
th.ch{text-align:center}
.pill{display:inline-block;border:1px solid #d9e2ec;border-radius:10px;padding:1px 8px;margin:0 6px 4px 0;
background:#fff}
ul.files{margin:0;padding-left:20px;columns:2;font-size:13px}
.charts{display:flex;flex-wrap:wrap;gap:12px 20px}
figure.chart{margin:0;border:1px solid #e4e7eb;border-radius:6px;padding:6px 8px;background:#fff}
figure.chart figcaption{font-size:12px;color:#52606d;text-align:center}
svg text{font-family:system-ui,"DejaVu Sans",sans-serif;fill:#1f2933}
svg .tick,svg .note{font-size:10px;fill:#52606d}
svg .val{font-size:9px;fill:#323f4b}
svg .group{font-size:12px}
svg .legend{font-size:12px}
svg .grid{stroke:#e4e7eb}
svg .axis{stroke:#7b8794}
footer{color:#7b8794;font-size:12px;margin-top:24px}
"""


def render_html(statuses: list[dict], evals: list[dict] | None = None, *, now: float | None = None) -> str:
    """The status page as one HTML document (str).

    ``statuses``: :func:`collect_status` dicts, one per root, in order; ``evals``: eval
    results in the ``bsl-lens eval --json`` shape (``{"corpus", "modes": {mode: {"n",
    "overall", "by_intent", "latency_ms"}}, "stats"?, "source"?, "root"?}``). ``now``:
    epoch seconds the ages are measured from (default: the current time).
    """
    now = time.time() if now is None else now
    evals = evals or []
    stamp = time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(now))
    parts = [
        "<!DOCTYPE html><html lang=en><head><meta charset=utf-8>",
        '<meta http-equiv="Content-Security-Policy" '
        "content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">",
        '<meta name=viewport content="width=device-width,initial-scale=1">',
        f"<title>bsl-lens status · {len(statuses)} root{'s' if len(statuses) != 1 else ''}</title>"
        f"<style>{CSS}</style></head><body>",
        f"<header><h1>bsl-lens status</h1><div class=muted>generated {e(stamp)} by bsl-lens {e(__version__)}; "
        "a snapshot: run <code>bsl-lens report</code> again to refresh</div>",
        "<nav><ul>",
    ]
    for i, st in enumerate(statuses):
        state = st.get("state") or "?"
        parts.append(
            f'<li><a href="#root-{i}"><span class="badge s-{e(state.replace(" ", "-"))}">{e(state)}</span> '
            f"<span class=path>{e(st.get('root', '?'))}</span></a></li>"
        )
    if evals:
        parts.append('<li><a href="#quality">search quality</a></li>')
    parts.append("</ul></nav></header>")
    for i, st in enumerate(statuses):
        parts.append(_root_section(st, i, now))
    if evals:
        parts.append('<section class="quality" id="quality"><h2>Search quality</h2>')
        parts.append(
            '<p class="muted">nDCG@10, MRR@10, Recall@10 and Hit@1 as <code>bsl-lens eval</code> defines them '
            "(shared/eval/README.md); symbol level: the hit must be the right method or field.</p>"
        )
        for i, run in enumerate(evals):
            parts.append(_eval_section(run, i))
        parts.append("</section>")
    parts.append("<footer>bsl-lens report · one self-contained file: no scripts, no network.</footer></body></html>\n")
    return "".join(parts)
