"""``bsl-lens bench ROOT``: speed and memory of the engine on one export root, in one process.

The scan, a cold lexical index (as the daemon's first index builds it), its save and size, the
names channel's and BM25's latency, embedding throughput, each search mode's latency on the full
dense index (filled from the embedding cache of an existing index of the root), and a warm
process: its start, RSS and edit-to-searchable latency. ``--scale N`` measures an ERP-sized tree
made by replicating the root N times (lexical only). Every figure is listed in
``docs/frontends.md``; figures are only comparable on the same machine.
"""

from __future__ import annotations

import os
import random
import resource
import shutil
import tempfile
import time
from pathlib import Path

from ..text.folding import split_words
from ..stats import percentile as _pct


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def _dir_size_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20


def _link_or_copy(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def build_scaled_tree(root: Path, n: int, dest: Path) -> Path:
    """Replicate a Designer export ``n`` times under ``dest``: copy ``i`` renames every object
    folder and descriptor ``X`` to ``X_<i>`` (copy 1 keeps the names). Only what the engine
    reads is replicated (descriptors, ``.bsl`` modules and the form layouts their references
    come from); files are hard links where the file system allows (the scanner does not follow
    symlinks), copies otherwise. Returns ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    for entry in root.iterdir():
        if entry.is_file():
            _link_or_copy(entry, dest / entry.name)
    for f in (root / "Ext").glob("*.bsl"):
        _link_or_copy(f, dest / "Ext" / f.name)
    for type_dir in sorted(p for p in root.iterdir() if p.is_dir() and p.name != "Ext"):
        descriptors = sorted(type_dir.glob("*.xml"))
        for i in range(1, n + 1):
            suffix = "" if i == 1 else f"_{i}"
            for desc in descriptors:
                _link_or_copy(desc, dest / type_dir.name / f"{desc.stem}{suffix}.xml")
                obj = type_dir / desc.stem
                if obj.is_dir():
                    for f in [*obj.rglob("*.bsl"), *obj.glob("Forms/*/Ext/Form.xml")]:
                        _link_or_copy(f, dest / type_dir.name / f"{desc.stem}{suffix}" / f.relative_to(obj))
    return dest


#: Module edits timed by the warm child (edit -> searchable p50/p95).
EDITS = 20


def _hwm_mb() -> float:
    """Peak RSS of this process's own address space (``VmHWM``; ``ru_maxrss`` of a spawned
    child starts at its parent's RSS at the fork). 0 where /proc is missing."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _rss_mb() -> float:
    import psutil

    return psutil.Process().memory_info().rss / 2**20


def _warm_child(
    root: str,
    idx: str,
    config_raw: bytes,
    embedder_spec: tuple | None,
    sym_queries: list,
    nl_queries: list,
    modules: list,
) -> dict:
    """The warm-daemon measures (see the module docstring), run in a spawned process."""
    import gc

    import msgspec

    from ..engine import Engine, EngineConfig
    from ..text.tokenize import tokenize_query

    t0 = time.perf_counter()
    config = msgspec.msgpack.decode(config_raw, type=EngineConfig)
    embedder = None
    if embedder_spec is not None:
        from ..index.embedder import embedder_for

        embedder = embedder_for(embedder_spec[0])
    eng = Engine.open(Path(root), index_dir=Path(idx), config=config, embedder=embedder)
    load_s = time.perf_counter() - t0
    t = time.perf_counter()
    eng.search(sym_queries[0], mode="lexical", top_k=10)
    out: dict = {
        "warm_load_s": round(load_s, 2),
        "first_query_after_load_ms": round((time.perf_counter() - t) * 1000, 2),
        "warm_start_to_first_answer_s": round(time.perf_counter() - t0, 2),
        "warm_load_dense": f"{len(eng.embedded)} vectors",
        "warm_rss_after_load_mb": round(_rss_mb(), 1),
        # what the daemon builds after its first reconcile, before the warm query loop
        "warm_prewarm_s": round(eng.prewarm(), 2),
    }
    lat = []
    for q in sym_queries:
        t = time.perf_counter()
        eng.names.search(q, 50, key_of=eng.store.ids)
        lat.append((time.perf_counter() - t) * 1000)
    out["warm_symbol_lookup_ms"] = {"p50": round(_pct(lat, 0.5), 3), "p95": round(_pct(lat, 0.95), 3)}
    lat = []
    for q in nl_queries[:100]:
        t = time.perf_counter()
        eng.search(q, mode="lexical", top_k=10)
        lat.append((time.perf_counter() - t) * 1000)
    out["warm_query_ms"] = {"lexical": {"p50": round(_pct(lat, 0.5), 2), "p95": round(_pct(lat, 0.95), 2)}}
    for q in nl_queries[:100]:
        eng.bm25.search(tokenize_query(q, stem=config.stem), 100, key_of=eng.store.ids)
    gc.collect()
    out["warm_settled_rss_mb"] = round(_rss_mb(), 1)
    out["warm_refs"] = eng.refs_status().files
    # edit one module -> searchable (the daemon's watcher path: update_paths, journal on), and
    # its new method's references answered
    from ..engine import Target

    eng.journal_on = True
    lat = []
    refs_lat = []
    found = 0
    for i, rel in enumerate(modules):
        path = Path(root) / rel
        text = path.read_bytes()
        name = f"БенчПравка{i}Метод"
        path.unlink()  # a hard link of the scaled tree: write a file of its own
        t = time.perf_counter()
        path.write_bytes(text + f"\r\nПроцедура {name}() Экспорт\r\nКонецПроцедуры\r\n".encode("utf-8"))
        eng.update_paths([rel])
        res = eng.search(name, mode="lexical", top_k=5)
        lat.append((time.perf_counter() - t) * 1000)
        found += any(h.name == name for h in res.hits)
        if config.references:
            t = time.perf_counter()
            eng.references(Target(method=f"{rel}::{name}"))  # LookupError if the graph missed the edit
            refs_lat.append((time.perf_counter() - t) * 1000)
    if lat:
        out["edit_to_searchable_ms"] = {
            "p50": round(_pct(lat, 0.5), 1),
            "p95": round(_pct(lat, 0.95), 1),
            "n": len(lat),
            "found": found,
        }
        out["references_after_edit_ms"] = _p50_p95(refs_lat, 2)
    out["warm_peak_rss_mb"] = round(_hwm_mb(), 1)
    return out


def _p50_p95(lat: list[float], digits: int) -> dict:
    return {"p50": round(_pct(lat, 0.5), digits), "p95": round(_pct(lat, 0.95), digits)}


def _timed_ms(fn, queries) -> list[float]:
    lat = []
    for q in queries:
        t = time.perf_counter()
        fn(q)
        lat.append((time.perf_counter() - t) * 1000)
    return lat


def _mirror(root: Path, args, work: Path, out: dict) -> Path:
    """The tree measured: ``--scale N`` replicas, or a hard-linked mirror of ``root`` (the edit
    measure writes into it, never into the root given)."""
    if args.scale > 1:
        t = time.perf_counter()
        tree = build_scaled_tree(root, args.scale, work / "tree")
        out["scaled_tree_s"] = round(time.perf_counter() - t, 2)
        return tree
    return Path(
        shutil.copytree(root, work / "tree", symlinks=True, copy_function=lambda a, b: _link_or_copy(Path(a), Path(b)))
    )


def _scan_ms(root: Path) -> float:
    """The scan alone, warm OS cache: the median of 3 runs after a warm-up run."""
    from ..sources.scan import scan_export

    scan_export(root)
    runs = []
    for _ in range(3):
        t = time.perf_counter()
        scan_export(root)
        runs.append(time.perf_counter() - t)
    return round(sorted(runs)[1] * 1000, 1)


def _cold_index(root: Path, idx: Path, config, embedder, args, out: dict):
    """The cold lexical index as the daemon's first index builds it (chunking in a pool of
    ``FIRST_INDEX_WORKERS`` processes) unless ``--in-process``; then its save. Returns the engine."""
    from ..engine import Engine

    t = time.perf_counter()
    eng = Engine.open(root, index_dir=idx, config=config, embedder=embedder)
    pool = workers = None
    if not getattr(args, "in_process", False):
        from ..engine import make_pool
        from ..service.writer import FIRST_INDEX_WORKERS

        workers = FIRST_INDEX_WORKERS
        pool = eng.pool = make_pool(workers)
    try:
        rep = eng.refresh()
    finally:
        if pool is not None:
            eng.pool = None
            pool.shutdown(wait=True)
    out["cold_lexical_index_s"] = round(time.perf_counter() - t, 2)
    t = time.perf_counter()
    eng.resolve_references()  # the daemon resolves them after the index is ready
    out["refs_resolve_s"] = round(time.perf_counter() - t, 2)
    out["refs"] = eng.refs_status().files
    out["cold_workers"] = workers or 0
    out["cold_worker_peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1)
    t = time.perf_counter()
    eng.save()
    out["save_s"] = round(time.perf_counter() - t, 2)
    out["cold_peak_rss_mb"] = round(_peak_rss_mb(), 1)
    out["stats"] = {k: v for k, v in eng.stats().items() if k not in ("index_dir", "root")}
    out["files_skipped"] = len(rep.skipped)
    return eng


def _sample_queries(eng, rng: random.Random, n: int) -> tuple[list, list[str], list[str]]:
    """``(methods sampled, name queries, word queries)``: a name whole, two thirds of it or its
    CamelHump abbreviation; the doc comment's first words (else the name as words)."""
    methods = [c for c in eng.chunks.values() if c.kind in ("procedure", "function") and c.part <= 1]
    sample = rng.sample(methods, min(n, len(methods)))
    sym_queries = []
    for c in sample:
        words = split_words(c.name)
        form = rng.randrange(3)
        if form == 0 or len(words) < 2:
            sym_queries.append(c.name)
        elif form == 1:
            sym_queries.append(c.name[: max(3, len(c.name) * 2 // 3)])
        else:
            sym_queries.append("".join(w[:3] for w in words[:3]))
    nl_queries = []
    for c in sample:
        doc = " ".join(w for w in c.doc.replace("/", " ").split() if w.isalpha())[:60]
        nl_queries.append(doc or " ".join(split_words(c.name)).lower())
    return sample, sym_queries, nl_queries


def _embed_throughput(eng, embedder, config, rng: random.Random, n: int) -> dict:
    """The raw embedder vs the pipeline (embed text + cache + hnswlib upsert) on the same
    chunks, interleaved twice so machine noise hits both alike."""
    from ..index.dense import DenseIndex
    from ..index.embed import embed_chunks
    from ..index.embed_cache import EmbeddingCache
    from ..index.embed_text import embed_text

    pool = rng.sample(list(eng.chunks.values()), min(n, len(eng.chunks)))
    embedder.encode_passages([embed_text(c, config.embed_max_chars) for c in pool[:4]])  # load, warm up
    raw_t = pipe_t = 0.0
    for _ in range(2):
        t = time.perf_counter()
        texts = [embed_text(c, config.embed_max_chars) for c in pool]
        for i in range(0, len(texts), 32):
            embedder.encode_passages(texts[i : i + 32])
        raw_t += time.perf_counter() - t
        t = time.perf_counter()
        texts = [embed_text(c, config.embed_max_chars) for c in pool]
        vecs = embed_chunks(embedder, EmbeddingCache.for_embedder(embedder), texts, batch_size=32)
        DenseIndex(embedder.dim).upsert([c.id for c in pool], vecs)
        pipe_t += time.perf_counter() - t
    total = 2 * len(pool)
    return {
        "raw": round(total / raw_t, 2),
        "pipeline": round(total / pipe_t, 2),
        "ratio": round(raw_t / pipe_t, 3),
        "n": len(pool),
    }


def _fill_dense_from_cache(eng, src_root: Path, args, config, embedder, out: dict) -> bool:
    """The dense side from the embedding cache of an existing index of this root (``bsl-lens
    index ROOT`` once): only hnswlib work, no model calls. False when that cache is incomplete."""
    from ..engine import Engine
    from ..index.embed_cache import EmbeddingCache, text_hash
    from ..index.storage import default_index_dir

    src = Path(args.index_dir) if args.index_dir else default_index_dir(src_root)
    cache_file = Engine(src_root, src, config, embedder)._dense_paths()[2]
    eng.cache = EmbeddingCache.load(cache_file, embedder.fingerprint, embedder.dim)
    pending = eng.dense_pending()
    hashes = {text_hash(t) for t in (eng.vector_text(k) for k in pending) if t is not None}
    cached = sum(1 for h in hashes if h in eng.cache)
    out["dense_cache"] = {"source": str(src), "cached": cached, "needed": len(hashes)}
    if not hashes or cached / len(hashes) < 0.98:
        out["dense_note"] = (
            "vector/hybrid latency skipped: no complete embedding cache for this root (run `bsl-lens index ROOT` first)"
        )
        return False
    t = time.perf_counter()
    eng.embed_pending(save_every_s=1e9)
    out["dense_fill_from_cache_s"] = round(time.perf_counter() - t, 2)
    return True


def _query_ms(eng, sym_queries: list[str], nl_queries: list[str], dense: bool) -> dict:
    """Search latency per mode end to end (hybrid embeds the query); lexical only without vectors."""
    modes = ("lexical", "vector", "hybrid") if dense else ("lexical",)
    out = {
        mode: _p50_p95(_timed_ms(lambda q, m=mode: eng.search(q, mode=m, top_k=10), nl_queries[:100]), 2)
        for mode in modes
    }
    if dense:
        lat = _timed_ms(lambda q: eng.search(q, mode="hybrid", top_k=10), sym_queries)
        out["hybrid_name_queries"] = _p50_p95(lat, 2)
    return out


def run_bench(args) -> dict:
    """Run the benchmark described in the module docstring for ``args.root`` and return the
    measurements: a flat dict like every bench's (``bsl-lens bench`` prints it, one JSON
    object with ``--json``). Times are wall seconds or milliseconds as the key names say;
    RSS and sizes in MiB."""
    from ..engine import EngineConfig
    from ..index.embedder import embedder_for
    from ..text.tokenize import tokenize_query

    src_root = Path(args.root).resolve()
    work = Path(tempfile.mkdtemp(prefix="bsl-lens-bench-"))
    out: dict = {"root": str(src_root), "scale": args.scale}
    try:
        root = _mirror(src_root, args, work, out)
        embedder = None if args.scale > 1 else embedder_for(args.embedder)
        config = EngineConfig(stem=args.stem, references=getattr(args, "references", True))
        idx = work / "index"
        out["scan_ms"] = _scan_ms(root)
        eng = _cold_index(root, idx, config, embedder, args, out)
        rng = random.Random(42)
        _, sym_queries, nl_queries = _sample_queries(eng, rng, args.queries)
        lat = _timed_ms(lambda q: eng.names.search(q, 50, key_of=eng.store.ids), sym_queries)
        out["symbol_lookup_ms"] = _p50_p95(lat, 3)
        stem = config.stem
        lat = _timed_ms(lambda q: eng.bm25.search(tokenize_query(q, stem=stem), 100, key_of=eng.store.ids), nl_queries)
        out["bm25_ms"] = _p50_p95(lat, 3)
        if embedder is not None:
            out["embed_passages_per_s"] = _embed_throughput(eng, embedder, config, rng, args.embed_sample)
            if not _fill_dense_from_cache(eng, src_root, args, config, embedder, out):
                embedder = None
        out["query_ms"] = _query_ms(eng, sym_queries, nl_queries, dense=embedder is not None)
        if embedder is not None:
            out["dense_in_query_run"] = f"{len(eng.embedded)} of {len(eng.chunks)} chunks"
        eng.save()
        modules = sorted(p for p, r in eng.files.items() if r.kind == "bsl")
        modules = rng.sample(modules, min(EDITS, len(modules)))
        eng = None  # the engine's memory is freed before the sizes are taken
        out["index_size_mb"] = round(_dir_size_mb(idx), 1)
        out["peak_rss_mb"] = round(_peak_rss_mb(), 1)

        # a warm daemon in a fresh process: its memory is its own
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        import msgspec

        spec = (args.embedder,) if embedder is not None else None
        with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as ex:
            warm = ex.submit(
                _warm_child, str(root), str(idx), msgspec.msgpack.encode(config), spec, sym_queries, nl_queries, modules
            ).result()
        out.update(warm)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out
