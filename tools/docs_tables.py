"""Render the measured tables of docs/ from the JSON the measuring commands print.

The quality tables come from ``bsl-lens eval ROOT --gold FILE --fold both --json`` and the
speed and memory tables from ``bsl-lens bench ROOT [--daemon | --lsp] --json``; nothing in
them is typed by hand. Each table lives in a marked region of a markdown file::

    <!-- generated: quality ssl31-ru -->
    ... replaced by this script ...
    <!-- end -->

Usage::

    bsl-lens eval ROOT --gold GOLD --fold both --json > eval.json
    python tools/docs_tables.py quality ssl31-ru eval.json
    bsl-lens bench ROOT --index-dir DIR --json > bench.json
    python tools/docs_tables.py bench engine bench.json

``quality NAME`` writes the region ``quality NAME`` of docs/quality.md, ``bench NAME`` the region
``bench NAME`` of docs/performance.md (``--doc`` for another file). The caption says where and
when it was measured from the JSON's ``run`` (bsl-lens version, commit, date, load at the start
and the end: ``daemon/cli/run_info.py``); ``--source "..."`` replaces that phrase (for JSON
printed before ``run`` existed, or to say more). ``--print`` writes the rendered region to stdout
instead. Exit 2 for a region that the file lacks or a JSON of the wrong shape (the message
names it).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
END = "<!-- end -->"

#: The gold set's intents in the order the docs list them; others follow, sorted.
INTENT_ORDER = ("symbol", "semantic", "metadata", "crosslingual")
#: Search modes in the order the docs list them; others follow, sorted.
MODE_ORDER = ("lexical", "vector", "hybrid")
#: Levels of a score, as ``bsl-lens eval`` names them.
LEVEL_ORDER = ("symbol", "heading", "file")


class ShapeError(ValueError):
    """The JSON is not what the named command prints."""


def _ordered(keys: Iterable[str], order: tuple[str, ...]) -> list[str]:
    keys = list(keys)
    return [k for k in order if k in keys] + sorted(k for k in keys if k not in order)


def _f3(x: float | None) -> str:
    return "—" if x is None else f"{x:.3f}"


def _int(x: int | float) -> str:
    return f"{x:,}"


def _loads(xs) -> str:
    return " / ".join(str(x) for x in xs)


def provenance(data: dict, source: str | None = None) -> str | None:
    """The caption's "measured ..." phrase: ``source`` when given, else from the JSON's ``run``
    (``bsl-lens 0.1.0 at abc123def456, 2026-12-04 21:58 UTC, load average 1.2 / 1.3 / 1.4 at
    the start, 1.5 / 1.4 / 1.4 at the end (1 / 5 / 15 min)``); None when neither is there."""
    if source:
        return f"measured on {source}"
    run = data.get("run")
    if not isinstance(run, dict):
        return None
    what = f"bsl-lens {run.get('version', '?')}"
    commit = run.get("commit")
    if commit:
        what += f" at {commit[:-6]} with uncommitted changes" if commit.endswith("-dirty") else f" at {commit}"
    date = str(run.get("date") or "")
    if date:
        what += ", " + date.replace("T", " ")[:16] + (" UTC" if date.endswith("Z") else "")
    start, end = run.get("load_avg_start"), run.get("load_avg_end")
    if start and end:
        what += f", load average {_loads(start)} at the start, {_loads(end)} at the end (1 / 5 / 15 min)"
    elif start or end:
        what += f", load average {_loads(start or end)} (1 / 5 / 15 min)"
    return "measured with " + what


# ------------------------------------------------------------------------------ quality


def _levels(block: dict) -> list[str]:
    return _ordered((k for k in block if isinstance(block[k], dict)), LEVEL_ORDER)


def _ndcg(block: dict | None, levels: list[str]) -> str:
    if block is None:
        return "—"
    return " / ".join(_f3(block.get(lv, {}).get("ndcg@10")) for lv in levels)


def _row(label: str, part: dict, intents: list[str], levels: list[str]) -> str:
    first = part["overall"][levels[0]]
    cells = [label, _ndcg(part["overall"], levels)]
    cells += [_ndcg(part["by_intent"].get(i), levels) for i in intents]
    cells += [_f3(first.get("hit@1")), _f3(first.get("mrr@10")), _f3(first.get("recall@10"))]
    return "| " + " | ".join(cells) + " |"


def _index_caption(stats: dict) -> str:
    """The index part of a quality table's caption: chunks, the dense side, vectors, embedder."""
    parts = [f"{_int(stats['chunks'])} chunks"] if "chunks" in stats else []
    if "dense_total" in stats:
        parts.append(f"dense side {_int(stats.get('dense_done', 0))} / {_int(stats['dense_total'])} chunks")
    if "dense_vectors" in stats:
        parts.append(f"{_int(stats['dense_vectors'])} vectors")
    if stats.get("embedder"):
        parts.append(f"embedder `{stats['embedder']}`")
    return ", ".join(parts)


def render_quality(data: dict, source: str | None = None, *, latency: bool = False) -> str:
    """The region body for one ``bsl-lens eval --fold both --json`` output: a caption (corpus,
    gold file name, index, :func:`provenance`) and one table, a row per mode and set (the full set,
    fold A, fold B), nDCG@10 per intent at each level, Hit@1 / MRR@10 / Recall@10 at the first
    level. Latency is left out unless ``latency`` (eval's latency is the machine's load as much
    as the code's; docs/performance.md has the bench's). :class:`ShapeError` for another shape."""
    try:
        modes = data["modes"]
        stats = data.get("stats", {})
        first_mode = next(iter(modes.values()))
        levels = _levels(first_mode["overall"])
        intents = _ordered(first_mode["by_intent"], INTENT_ORDER)
    except (KeyError, TypeError, StopIteration, AttributeError) as exc:
        raise ShapeError(f"not the JSON of `bsl-lens eval --json` (missing {exc})") from None
    if not levels:
        raise ShapeError("not the JSON of `bsl-lens eval --json` (no score levels in modes.*.overall)")
    folds = first_mode.get("folds") or {}
    gold = Path(str(data.get("gold", "?"))).name
    lines = []
    caption = f"Corpus `{data.get('corpus', '?')}`, gold set `{gold}`, {first_mode['n']} queries"
    index = _index_caption(stats)
    if index:
        caption += "; index: " + index
    measured = provenance(data, source)
    if measured:
        caption += f"; {measured}"
    lines.append(caption + ".")
    lines.append("")
    lv = " / ".join(levels)
    lines.append(
        f"nDCG@10 at {lv} level per intent; Hit@1, MRR@10 and Recall@10 at {levels[0]} level over all queries. "
        "Folds A and B as `--fold both` deals them."
    )
    lines.append("")

    def n_of(part: dict, intent: str) -> str:
        b = part["by_intent"].get(intent)
        return str(b["n"]) if b else "0"

    heads = []
    for i in intents:
        ns = n_of(first_mode, i)
        if folds:
            ns += ": " + " / ".join(n_of(folds[f], i) for f in sorted(folds))
        heads.append(f"{i} ({ns})")
    header = ["mode, set", "all", *heads, "Hit@1", "MRR@10", "Recall@10"]
    if latency:
        header.append("p50 / p95 ms")
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + "---|" * len(header))
    for mode in _ordered(modes, MODE_ORDER):
        m = modes[mode]
        sets = [(f"{mode}, all ({m['n']})", m)]
        sets += [(f"{mode}, fold {f} ({m['folds'][f]['n']})", m["folds"][f]) for f in sorted(m.get("folds") or {})]
        for k, (label, part) in enumerate(sets):
            row = _row(label, part, intents, levels)
            if latency:
                lat = m.get("latency_ms") or {}
                cell = f"{lat.get('p50', '—')} / {lat.get('p95', '—')}" if k == 0 and lat else ""
                row += f" {cell} |"
            lines.append(row)
    return "\n".join(lines)


# ------------------------------------------------------------------------------ bench


def _get(data: dict, path: str):
    cur = data
    for key in path.split("."):
        if not isinstance(cur, dict) or key not in cur:
            return None
        cur = cur[key]
    return cur


def _num(x) -> str:
    """A measured number as the command printed it (the benches round already; nothing is
    re-rounded here), with thousands separators."""
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        return f"{x:,}"
    return str(x)


def _p(unit: str) -> Callable[[dict], str]:
    def fmt(v: dict) -> str:
        out = f"{_num(v['p50'])} / {_num(v['p95'])} {unit}"
        extra = [f"{k} {_num(v[k])}" for k in ("max", "n") if k in v]
        return out + (f" ({', '.join(extra)})" if extra else "")

    return fmt


def _v(unit: str) -> Callable[[object], str]:
    return lambda v: f"{_num(v)} {unit}".strip()


def _mb(v) -> str:
    return f"{_num(v)} MiB"


#: Rows per bench: (label, key path in the JSON, formatter). Rows whose key is absent are left out.
BENCH_ROWS: dict[str, list[tuple[str, str, Callable]]] = {
    "engine": [
        ("cold lexical index (scan, chunk, BM25, names), wall", "cold_lexical_index_s", _v("s")),
        ("… chunking worker processes", "cold_workers", _v("")),
        ("the scan alone (warm OS cache, median of 3)", "scan_ms", _v("ms")),
        ("writing the snapshot after the cold index", "save_s", _v("s")),
        ("symbol lookup (names channel, in-process), p50 / p95", "symbol_lookup_ms", _p("ms")),
        ("BM25 alone, p50 / p95", "bm25_ms", _p("ms")),
        ("query end to end, lexical, p50 / p95", "query_ms.lexical", _p("ms")),
        ("query end to end, vector (incl. query embedding), p50 / p95", "query_ms.vector", _p("ms")),
        ("query end to end, hybrid (incl. query embedding), p50 / p95", "query_ms.hybrid", _p("ms")),
        ("… hybrid, name queries, p50 / p95", "query_ms.hybrid_name_queries", _p("ms")),
        (
            "embed throughput, raw embedder / the pipeline (text, cache, hnswlib)",
            "embed_passages_per_s",
            lambda v: (
                f"{_num(v['raw'])} / {_num(v['pipeline'])} passages/s "
                f"(ratio {_num(v['ratio'])}, {_num(v['n'])} passages)"
            ),
        ),
        ("filling hnswlib from the embedding cache", "dense_fill_from_cache_s", _v("s")),
        ("dense side in the query run", "dense_in_query_run", _v("")),
        ("warm load (lexical + dense), fresh process", "warm_load_s", _v("s")),
        ("… vectors loaded", "warm_load_dense", _v("")),
        ("… first query after the load", "first_query_after_load_ms", _v("ms")),
        ("warm start to the first answer", "warm_start_to_first_answer_s", _v("s")),
        ("prewarm (what the daemon builds after its first reconcile)", "warm_prewarm_s", _v("s")),
        ("symbol lookup, warm process, p50 / p95", "warm_symbol_lookup_ms", _p("ms")),
        ("lexical query, warm process, p50 / p95", "warm_query_ms.lexical", _p("ms")),
        (
            "edit one module → searchable (`update_paths` + search, journal on), p50 / p95",
            "edit_to_searchable_ms",
            lambda v: f"{_num(v['p50'])} / {_num(v['p95'])} ms ({v.get('found', '?')} of {v.get('n', '?')} found)",
        ),
        ("peak RSS of the bench process (full lexical + dense index)", "peak_rss_mb", _mb),
        ("peak RSS after the cold index and its snapshot", "cold_peak_rss_mb", _mb),
        ("peak RSS of a chunking worker", "cold_worker_peak_rss_mb", _mb),
        ("warm process RSS after the load", "warm_rss_after_load_mb", _mb),
        ("warm process RSS settled (after queries, `gc.collect`)", "warm_settled_rss_mb", _mb),
        ("warm process peak RSS", "warm_peak_rss_mb", _mb),
        ("index size on disk", "index_size_mb", _mb),
        ("note", "dense_note", _v("")),
    ],
    "daemon": [
        ("first start (spawn to the first answered query)", "first_start_s", _v("s")),
        (
            "warm start: spawn to the first answered query, median / max",
            "warm_start_s",
            lambda v: f"{_num(v['median'])} / {_num(v['max'])} s",
        ),
        ("edit one method → found by the lexical channel, p50 / p95", "edit_lexical_ms", _p("ms")),
        ("… → the changed method re-embedded, p50 / p95", "edit_dense_ms", _p("ms")),
        ("query idle, p50 / p95", "query_idle_ms", _p("ms")),
        ("query while the modules are rewritten and re-indexed, p50 / p95", "query_during_reindex_ms", _p("ms")),
        ("… loaded p95 over idle p95", "loaded_over_idle_p95", _v("×")),
        ("lexical query idle, p50 / p95", "lexical_idle_ms", _p("ms")),
        ("lexical query during the re-index, p50 / p95", "lexical_during_reindex_ms", _p("ms")),
        ("daemon RSS with the full index", "rss_mb", _mb),
        ("index on disk", "index_mb", _mb),
        (
            "daemon RSS after a first lexical index vs after a warm restart",
            "rss_cold_vs_warm",
            lambda v: f"{_num(v['rss_cold_mb'])} vs {_num(v['rss_warm_mb'])} MiB ({_num(v['cold_over_warm'])}×)",
        ),
    ],
    "lsp": [
        ("`initialize` answered, from starting the process", "initialize_ms", _v("ms")),
        ("server started to the first folder ready", "ready_after_s", _v("s")),
        ("`workspace/symbol` round trip, p50 / p95", "workspace_symbol_ms", _p("ms")),
        (
            "results per query, mean / max",
            "results_per_query",
            lambda v: f"{_num(v['mean'])} / {_num(v['max'])}",
        ),
        (
            "quality from the LSP answers (symbol queries)",
            "quality",
            lambda v: ", ".join(f"{k} {_num(x)}" for k, x in v.items()),
        ),
        ("a query typed one letter at a time: last answer after the last key, p50 / p95", "typing_ms", _p("ms")),
        (
            "… superseded requests",
            "typing_superseded",
            lambda v: f"{_num(v['cancelled'])} cancelled, {_num(v['answered_before_the_cancel'])} answered first",
        ),
        ("several words through `workspace/symbol` (hybrid), p50 / p95", "natural_language_ms", _p("ms")),
    ],
}


def _flatten(data: dict, prefix: str = "") -> list[tuple[str, object]]:
    out: list[tuple[str, object]] = []
    for k, v in data.items():
        if isinstance(v, dict):
            out += _flatten(v, f"{prefix}{k}.")
        else:
            out.append((f"{prefix}{k}", v))
    return out


def render_bench(data: dict, source: str | None = None) -> str:
    """The region body for one ``bsl-lens bench --json`` output: a caption (which bench, the
    root, the machine's cores, :func:`provenance`) and a table of its
    measurements (named rows for the engine, daemon and LSP benches; every field for the
    others). :class:`ShapeError` for a JSON without the report head every bench prints."""
    if not isinstance(data, dict) or "bench" not in data:
        raise ShapeError("not the JSON of `bsl-lens bench --json` (no 'bench' field)")
    kind = data["bench"]
    caption = f"`bsl-lens bench` ({kind})"
    if data.get("root"):
        caption += f" on `{Path(str(data['root'])).name}`"
    if data.get("scale") and data["scale"] != 1:
        caption += f" at `--scale {data['scale']}`"
    stats = data.get("stats") or {}
    if "chunks" in stats:
        caption += f" ({_int(stats['chunks'])} chunks"
        caption += f", {_int(stats['methods'])} methods)" if "methods" in stats else ")"
    if "cpu_count" in data:
        caption += f"; {data['cpu_count']} CPUs"
    if data.get("load_avg") and (source or not isinstance(data.get("run"), dict)):
        caption += f", load average {_loads(data['load_avg'])} (1 / 5 / 15 min) as it finished"
    measured = provenance(data, source)
    if measured:
        caption += f"; {measured}"
    lines = [caption + ".", "", "| what | measured |", "|---|---|"]
    rows = BENCH_ROWS.get(kind)
    if rows is None:
        skip = {"bench", "cpu_count", "load_avg", "root", "run"}
        lines += [f"| `{k}` | {_num(v)} |" for k, v in _flatten(data) if k not in skip and not k.startswith("run.")]
    else:
        for label, path, fmt in rows:
            value = _get(data, path)
            if value is None:
                continue
            try:
                cell = fmt(value)
            except (KeyError, TypeError) as exc:
                raise ShapeError(f"bench {kind}: field {path!r} has an unexpected shape ({exc})") from None
            lines.append(f"| {label} | {cell} |")
    return "\n".join(lines)


# ------------------------------------------------------------------------------ regions


def replace_region(text: str, key: str, body: str) -> str:
    """``text`` with the region ``<!-- generated: KEY -->`` … ``<!-- end -->`` holding ``body``
    (markers kept, one blank line around the body). :class:`ShapeError` if the region is
    missing or not closed."""
    start = f"<!-- generated: {key} -->"
    i = text.find(start)
    if i < 0:
        raise ShapeError(f"no region {start!r} in the file: add it, and {END!r} after it")
    j = text.find(END, i + len(start))
    if j < 0:
        raise ShapeError(f"region {start!r} is not closed by {END!r}")
    return text[: i + len(start)] + "\n\n" + body.rstrip("\n") + "\n\n" + text[j:]


DEFAULT_DOCS = {"quality": REPO / "docs" / "quality.md", "bench": REPO / "docs" / "performance.md"}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("kind", choices=("quality", "bench"), help="quality: eval JSON; bench: bench JSON")
    ap.add_argument("name", help="the region's name: <!-- generated: KIND NAME -->")
    ap.add_argument("json", type=Path, help="the command's --json output")
    ap.add_argument("--doc", type=Path, help="the markdown file (default docs/quality.md or docs/performance.md)")
    ap.add_argument(
        "--source", help="where and when it was measured (commit, date, machine load), instead of the JSON's run"
    )
    ap.add_argument("--latency", action="store_true", help="quality: also show eval's latency column")
    ap.add_argument("--print", action="store_true", help="print the region instead of writing the file")
    args = ap.parse_args(argv)
    try:
        data = json.loads(args.json.read_text(encoding="utf-8"))
        if args.kind == "quality":
            body = render_quality(data, args.source, latency=args.latency)
        else:
            body = render_bench(data, args.source)
        if args.print:
            print(body)
            return 0
        doc = args.doc or DEFAULT_DOCS[args.kind]
        text = doc.read_text(encoding="utf-8")
        new = replace_region(text, f"{args.kind} {args.name}", body)
    except (OSError, json.JSONDecodeError, ShapeError) as exc:
        print(f"docs_tables: {exc}", file=sys.stderr)
        return 2
    if new != text:
        doc.write_text(new, encoding="utf-8")
        print(f"{doc}: region '{args.kind} {args.name}' rewritten", file=sys.stderr)
    else:
        print(f"{doc}: region '{args.kind} {args.name}' unchanged", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
