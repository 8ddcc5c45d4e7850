"""The platform help bench (``bsl-lens bench --platform``): what platform help costs and how fast
it answers, on the bundled data set and on the largest help book the test builder makes.

Measurements (each in a fresh subprocess where memory is measured, so the figures are not the
bench's own heap):

* ``data_set``: read and parse ``bslGlobals.json``; build its index (chunk store, BM25, the names
  channel) in memory; save it; load it back (a warm start);
* ``warm``: in a fresh process that has what a warm daemon has already (the query embedder, having
  embedded such questions; the lexicon), the RSS that opening the saved index and its dense side
  and answering the gold queries adds;
* ``queries``: latency of the dev gold set's questions, lexical and hybrid (p50 / p95 ms), with
  the vectors the platform cache holds (the first run embeds them: ``embed_s``);
* ``book``: a ``shcntx_ru.hbk`` of ``copies`` copies of the data set's pages under new names
  (11 copies: about 53,000 pages), read, parsed and indexed lexically, with the RSS growth.

The figures are this machine's; ``docs/platform-help.md`` records them with the machine's load.
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import msgspec

from ..stats import p50_p95

#: The platform gold set of the repository (tests/gold), when the bench runs from a checkout.
DEV_GOLD = Path(__file__).resolve().parents[2] / "tests" / "gold" / "platform_dev.jsonl"


def _rss() -> int:
    import psutil

    return psutil.Process().memory_info().rss


def _best(fn, runs: int):
    """(result, best wall seconds, best CPU seconds) of ``runs`` calls."""
    result, wall, cpu = None, float("inf"), float("inf")
    for _ in range(runs):
        gc.collect()
        w, c = time.perf_counter(), time.process_time()
        result = fn()
        wall, cpu = min(wall, time.perf_counter() - w), min(cpu, time.process_time() - c)
    return result, wall, cpu


def bench_data_set(runs: int) -> dict:
    """Load, index, save and load again the bundled data set (a cache folder of its own)."""
    from ..index.platform_index import PlatformIndex, file_digest, index_key
    from ..sources.platform.globals_json import DATA_PATH, load_globals

    loaded, load_wall, load_cpu = _best(load_globals, runs)
    key = index_key("bundled", [(DATA_PATH.name, file_digest(DATA_PATH))], stem=True, k1=1.2, b=0.3)

    def build():
        return PlatformIndex.build(
            loaded.entries, key=key, source="bundled", version="", label="bench", path="platform/bundled/x"
        )

    ix, build_wall, build_cpu = _best(build, runs)
    with tempfile.TemporaryDirectory(prefix="bsl-lens-bench-platform-") as tmp:
        t = time.perf_counter()
        folder = ix.save_atomically(Path(tmp))
        save_s = time.perf_counter() - t
        _, load_ix_wall, _ = _best(lambda: PlatformIndex.load(folder), runs)
        disk = sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())
    return {
        "entries": len(ix),
        "file_mb": round(DATA_PATH.stat().st_size / 1e6, 2),
        "read_parse_s": round(load_wall, 3),
        "read_parse_cpu_s": round(load_cpu, 3),
        "index_lexical_s": round(build_wall, 3),
        "index_lexical_cpu_s": round(build_cpu, 3),
        "save_s": round(save_s, 3),
        "load_warm_s": round(load_ix_wall, 4),
        "on_disk_mb": round(disk / 1e6, 1),
    }


def _gold_queries(gold: Path | None) -> list[str]:
    path = gold or DEV_GOLD
    if not path.is_file():
        return ["СтрНайти", "как найти подстроку в строке", "ValueTable.GroupBy", "how to split a string"]
    return [json.loads(line)["query"] for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def bench_queries(embedder_spec: str | None, gold: Path | None, rounds: int = 3) -> dict:
    """Latency of the gold questions against the bundled data set's saved index (the platform
    cache), lexical and, with an embedder, hybrid; the vectors missing from the cache are
    embedded first (``embed_s``: that time, 0 when they were all there)."""
    from ..index.embed import embedder_for
    from ..service.platform import BUNDLED, PlatformHelp

    ph = PlatformHelp(".", standard_roots=[])
    src = ph.ensure(ph.sources[BUNDLED])
    out: dict = {"source": src.label, "entries": len(src.index), "queries": 0}
    queries = _gold_queries(gold)
    out["queries"] = len(queries)
    emb = embedder_for(embedder_spec) if embedder_spec else None
    modes = ["lexical"]
    if emb is not None:
        t = time.perf_counter()
        n = ph.fill_dense(emb)
        out["embed_s"] = round(time.perf_counter() - t, 1)
        out["embedded_now"] = n
        out["vectors"] = len(src.index.dense)
        modes.append("hybrid")
        emb.encode_queries(["прогрев"])  # the model's first call loads it
    for mode in modes:
        lat: list[float] = []
        for _ in range(rounds):
            for q in queries:
                t = time.perf_counter()
                ph.search(q, mode=mode, top_k=10, version=BUNDLED, embedder=emb)
                lat.append((time.perf_counter() - t) * 1000)
        out[f"{mode}_ms"] = p50_p95(lat, 2)
    return out


def bench_warm_memory(embedder_spec: str | None, gold: Path | None) -> dict:
    """In a fresh process with the query embedder loaded and used (a warm daemon's state): the
    RSS that opening the bundled data set's saved index and dense side and answering the gold
    queries adds."""
    code = (
        "import json, sys\n"
        "from daemon.dev.bench_platform import _warm_child\n"
        "print(json.dumps(_warm_child(sys.argv[1] or None, sys.argv[2] or None)))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, embedder_spec or "", str(gold or "")],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    if proc.returncode != 0:
        return {"error": proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _warm_child(embedder_spec: str | None, gold: str | None) -> dict:
    """The body of :func:`bench_warm_memory`'s subprocess."""
    from ..index.embed import embedder_for
    from ..index.platform_index import PlatformIndex  # noqa: F401 - the modules a daemon has loaded
    from ..service.platform import BUNDLED, PlatformHelp

    from ..text.lexicon import default_lexicon
    from ..text.tokenize import tokenize_query

    emb = embedder_for(embedder_spec) if embedder_spec else None
    queries = _gold_queries(Path(gold) if gold else None)
    # what a warm daemon has already: the lexicon, the tokenizer's caches, the query model having
    # embedded questions like these (its buffers)
    default_lexicon()
    for q in queries:
        tokenize_query(q, stem=True)
    if emb is not None:
        emb.encode_queries(queries)
    gc.collect()
    before = _rss()
    ph = PlatformHelp(".", standard_roots=[])
    src = ph.ensure(ph.sources[BUNDLED])
    if emb is not None:
        src.index.load_dense(emb)
    opened = _rss()
    for q in queries:
        ph.search(q, mode="hybrid" if emb is not None else "lexical", top_k=10, embedder=emb)
    gc.collect()
    after = _rss()
    return {
        "loaded_from_disk": src.index.loaded_from_disk,
        "vectors": len(src.index.dense) if src.index.dense is not None else 0,
        "rss_open_mb": round((opened - before) / 1e6, 1),
        "rss_after_queries_mb": round((after - before) / 1e6, 1),
    }


def copies_of(entries: list, k: int) -> list:
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


def bench_book(copies: int) -> dict:
    """Build a ``shcntx_ru.hbk`` of ``copies`` copies of the data set's pages, then read, parse
    and index it lexically as a daemon does (:class:`daemon.service.platform.PlatformHelp`, its
    own cache folder), in a subprocess whose RSS growth is measured."""
    from ..sources.platform.globals_json import load_globals
    from .hbk_build import book_from_entries, decorate

    base = decorate(load_globals().entries)
    entries = [e for k in range(copies) for e in copies_of(base, k)]
    with tempfile.TemporaryDirectory(prefix="bsl-lens-bench-book-") as tmp:
        folder = Path(tmp) / "8.3.99.1" / "bin"
        folder.mkdir(parents=True)
        t = time.perf_counter()
        builder, want = book_from_entries(entries)
        (folder / "shcntx_ru.hbk").write_bytes(builder.build())
        build_s = time.perf_counter() - t
        pages = len(builder.pages)
        del builder, entries, base
        code = (
            "import json, sys\n"
            "from daemon.dev.bench_platform import _book_child\n"
            "print(json.dumps(_book_child(sys.argv[1], sys.argv[2])))\n"
        )
        proc = subprocess.run(
            [sys.executable, "-c", code, str(folder.parent.parent), str(Path(tmp) / "cache")],
            capture_output=True,
            text=True,
            timeout=1800,
        )
        size = (folder / "shcntx_ru.hbk").stat().st_size
    if proc.returncode != 0:
        return {"error": proc.stderr.strip()[-500:]}
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    return {"copies": copies, "pages": pages, "expected_entries": len(want), "file_mb": round(size / 1e6, 1),
            "build_book_s": round(build_s, 1), **out}  # fmt: skip


def _book_child(install: str, cache: str) -> dict:
    """The body of :func:`bench_book`'s subprocess: the version's index built by
    :class:`PlatformHelp` (read, merge, index, save, load)."""
    from ..service.platform import PlatformHelp

    gc.collect()
    rss0 = _rss()
    w, c = time.perf_counter(), time.process_time()
    ph = PlatformHelp(".", help_paths=[install], standard_roots=[], cache_dir=Path(cache))
    src = ph.ensure(ph.sources["8.3.99.1"])
    wall, cpu = time.perf_counter() - w, time.process_time() - c
    rss1 = _rss()
    if src.state != "ready":
        return {"error": src.error}
    t = time.perf_counter()
    hits = ph.search("СтрНайтиК7", mode="lexical", top_k=1, version="8.3.99.1")[0]
    q_ms = (time.perf_counter() - t) * 1000
    return {
        "entries": len(src.index),
        "skipped": src.index.meta.skipped,
        "read_and_index_lexical_s": round(wall, 1),
        "read_and_index_lexical_cpu_s": round(cpu, 1),
        "rss_growth_mb": round((rss1 - rss0) / 1e6, 1),
        "name_query_ms": round(q_ms, 2),
        "name_query_first": hits[0].symbol if hits else None,
    }


def run_platform_bench(args) -> dict:
    """``bsl-lens bench --platform``: every measurement of the module docstring (``--copies 0``
    leaves out the big book; ``--embedder none``: lexical only)."""
    embedder = args.embedder if args.embedder and args.embedder != "none" else None
    gold = Path(args.gold) if getattr(args, "gold", None) else None
    out = {"data_set": bench_data_set(runs=3)}
    out["queries"] = bench_queries(embedder, gold)
    out["warm"] = bench_warm_memory(embedder, gold)
    copies = getattr(args, "copies", 11)
    if copies:
        out["book"] = bench_book(copies)
    out["load_avg_after"] = [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None
    return out
