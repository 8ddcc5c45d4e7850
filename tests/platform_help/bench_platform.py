"""Bench of the platform help sources: the bundled data set, and the largest help book the test
builder makes (the data set's pages copied under new names to tens of thousands of pages).

Usage (from the repository root, with the repository on ``PYTHONPATH``)::

    python tests/platform_help/bench_platform.py [--copies 11] [--runs 3] [--keep PATH] [--no-book]

Prints one JSON object per measurement (the data set, BM25 alone on the dev gold set, the
big book). Numbers are wall and CPU seconds of this process on
whatever machine runs it; ``docs/platform-help.md`` records them with the machine's load.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import msgspec
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: hbk_fixtures

import hbk_fixtures as hf  # noqa: E402
from daemon.sources.platform.book import read_book  # noqa: E402
from daemon.sources.platform.entries import Entry, to_chunk  # noqa: E402
from daemon.sources.platform.globals_json import DATA_PATH, load_globals  # noqa: E402

GOLD = Path(__file__).resolve().parents[1] / "gold" / "platform_dev.jsonl"


def _rss() -> int:
    return psutil.Process().memory_info().rss


def _timed(fn, runs: int):
    best_wall = best_cpu = float("inf")
    result = None
    for _ in range(runs):
        gc.collect()
        w, c = time.perf_counter(), time.process_time()
        result = fn()
        best_wall = min(best_wall, time.perf_counter() - w)
        best_cpu = min(best_cpu, time.process_time() - c)
    return result, best_wall, best_cpu


def bench_data_set(runs: int) -> dict:
    """Load time, entry count and memory of the bundled data set (and of its index records)."""
    result, wall, cpu = _timed(load_globals, runs)
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    kept = load_globals()
    entries_bytes = tracemalloc.get_traced_memory()[0] - before
    peak = tracemalloc.get_traced_memory()[1] - before
    chunks = [to_chunk(e, version="bundled") for e in kept.entries]
    chunks_bytes = tracemalloc.get_traced_memory()[0] - before - entries_bytes
    tracemalloc.stop()
    return {
        "what": "bundled data set",
        "file_bytes": DATA_PATH.stat().st_size,
        "entries": len(result.entries),
        "counts": result.counts,
        "load_wall_s": round(wall, 3),
        "load_cpu_s": round(cpu, 3),
        "entries_heap_mb": round(entries_bytes / 1e6, 1),
        "load_peak_heap_mb": round(peak / 1e6, 1),
        "chunks_heap_mb": round(chunks_bytes / 1e6, 1),
        "chunk_text_mb": round(sum(len(c.text.encode()) for c in chunks) / 1e6, 2),
    }


def copies_of(entries: list[Entry], k: int) -> list[Entry]:
    """The entries under new names (``<name>К<k>``, ``<name_en>C<k>``) for copy ``k`` (0: as is)."""
    if k == 0:
        return entries
    out = []
    for e in entries:
        if e.kind == "keyword":
            continue
        renamed = {"name": f"{e.name}К{k}", "name_en": f"{e.name_en}C{k}" if e.name_en else ""}
        if e.owner:
            renamed.update(owner=f"{e.owner}К{k}", owner_en=f"{e.owner_en}C{k}" if e.owner_en else "")
            if e.kind != "constructor":
                renamed.update(name=e.name, name_en=e.name_en)
        out.append(msgspec.structs.replace(e, **renamed))
    return out


def bench_large_book(copies: int, runs: int, keep: Path | None) -> dict:
    """Build a book of ``copies`` copies of the data set's pages, then read and parse it."""
    base = hf.decorate(load_globals().entries)
    entries = [e for k in range(copies) for e in copies_of(base, k)]
    t0 = time.perf_counter()
    builder, want = hf.book_from_entries(entries)
    data = builder.build()
    build_s = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as tmp:
        path = keep or Path(tmp) / "shcntx_ru.hbk"
        path.write_bytes(data)
        del data, builder
        gc.collect()
        rss0 = _rss()
        res, wall, cpu = _timed(lambda: read_book(path), runs)
        rss1 = _rss()
        size = path.stat().st_size
    assert not res.error and len(res.entries) == len(want), (res.error, len(res.entries), len(want))
    return {
        "what": "largest built book",
        "copies": copies,
        "pages": res.pages,
        "entries": len(res.entries),
        "file_mb": round(size / 1e6, 1),
        "build_s": round(build_s, 1),
        "read_parse_wall_s": round(wall, 2),
        "read_parse_cpu_s": round(cpu, 2),
        "pages_per_s": round(res.pages / wall),
        "rss_growth_mb": round((rss1 - rss0) / 1e6, 1),
        "skips": len(res.skips),
    }


def bench_gold_bm25(gold: Path) -> dict:
    """nDCG@10 per intent of BM25 alone (the 1C tokenizer, stemmed) over ``entry_text`` of the
    bundled entries on the dev gold set: the floor the names channel, dense and fusion of step 2
    start from (no names channel, no translation of English words, no dense)."""
    from daemon.dev.evaluate import score
    from daemon.index.bm25 import BM25Index
    from daemon.sources.platform.entries import entry_text
    from daemon.text.tokenize import tokenize, tokenize_query

    entries = load_globals().entries
    index = BM25Index()
    for slot, e in enumerate(entries):
        index.add(slot, tokenize(entry_text(e), stem=True))
    by_intent: dict[str, list[float]] = {}
    for line in gold.read_text(encoding="utf-8").splitlines():
        g = json.loads(line)
        hits = index.search(tokenize_query(g["query"], stem=True), 10)
        ranked = [(entries[slot].kind, entries[slot].qualified) for slot, _ in hits]
        item = {"relevant": [{"path": r["kind"], "symbol": r["name"], "grade": r["grade"]} for r in g["relevant"]]}
        by_intent.setdefault(g["intent"], []).append(score(item, ranked)["ndcg@10"])
    return {
        "what": "dev gold set, BM25 alone over entry_text",
        **{f"ndcg@10 {k} ({len(v)})": round(sum(v) / len(v), 3) for k, v in sorted(by_intent.items())},
    }


def main() -> None:
    """Run both measurements and print them."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--copies", type=int, default=11, help="copies of the data set's pages in the big book")
    ap.add_argument("--runs", type=int, default=3, help="best of this many runs")
    ap.add_argument("--keep", type=Path, help="write the big book here (and keep it)")
    ap.add_argument("--gold", type=Path, default=GOLD, help="the dev gold set scored with BM25 alone")
    ap.add_argument("--no-book", action="store_true", help="skip the big book")
    args = ap.parse_args()
    print(json.dumps({"load_avg": os.getloadavg(), "cpus": os.cpu_count()}))
    print(json.dumps(bench_data_set(args.runs), ensure_ascii=False))
    print(json.dumps(bench_gold_bm25(args.gold), ensure_ascii=False))
    if not args.no_book:
        print(json.dumps(bench_large_book(args.copies, args.runs, args.keep), ensure_ascii=False))


if __name__ == "__main__":
    main()
