"""Bench of find-usages: extraction, resolution and memory of the reference graph on an export.

``python -m daemon.dev.bench_refs ROOT [--scale N] [--json]`` reads every module, form layout
and binding descriptor once, then times, in this process:

* ``chunk_s``: :func:`daemon.sources.bsl.chunk_module` (what the chunking pass does today, its
  own parse included), for scale;
* ``parse_s``: one more tree-sitter parse (the bench's; the product reuses the chunker's tree);
* ``extract_s``: :func:`daemon.sources.references.extract_references` given that tree (the added
  cost per module in the chunking pass);
* ``bindings_s``: form layouts and binding descriptors read and parsed (:mod:`daemon.sources.bindings`);
* ``swap_s`` + ``resolve_s``: :meth:`daemon.index.refgraph.RefGraph.update` from scratch, the records
  swapped in batch by batch (``defer``), then resolved at once;
* ``edit_ms``: one module re-extracted (chunked, parsed: the three largest and ten others) and swapped
  in, p50/p95; ``update_ms``: the swap alone (:meth:`RefGraph.update` of that one record);
* ``query_ms``: :meth:`RefGraph.references` (50 listed) p50/p95 over the 50 most-called methods;
* ``saved_mb``, ``save_s``, ``load_s``: :meth:`RefGraph.to_bytes` / :meth:`RefGraph.from_bytes`.

``--scale N`` replicates the records N times in memory the way ``bsl-lens bench --scale`` replicates
the tree (object ``X`` of copy ``i`` is ``X_i``; the code is the same, so its calls still name the
originals). ``graph_mb``: RSS growth while every record is decoded afresh (as from the chunking
workers) and the graph is built, after ``gc``. Stage times are
``time.process_time`` of this one process; latencies are wall clock.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from pathlib import Path

from ..contract import OBJECT_TYPES
from ..stats import percentile


def _rss_mb() -> float:
    import psutil

    return psutil.Process().memory_info().rss / 2**20


def read_export(root: Path) -> dict:
    """Read and extract every file of ``root``; returns the records and the stage times."""
    from ..index.refgraph import read_binding_files
    from ..sources.bsl import chunk_module, parser
    from ..sources.files import SkipFile, decode_bytes, read_regular_bytes
    from ..sources.references import extract_references, normalize_text
    from ..sources.scan import scan_export

    scan = scan_export(root)
    ext = {p.path for p in scan.info.projects if p.is_extension}
    texts = []
    for src in scan.modules:
        try:
            text, _enc = decode_bytes(read_regular_bytes(src.fs_path(root)))
        except SkipFile:
            continue
        texts.append((src, normalize_text(text)))
    chunk_s = parse_s = extract_s = 0.0
    records = []
    for src, text in texts:
        t0 = time.process_time()
        chunks = chunk_module(
            text, path=src.path, owner=src.owner, object_type=src.object_type, module_kind=src.module_kind
        )
        t1 = time.process_time()
        data = text.encode("utf-8")
        tree = parser().parse(data)
        t2 = time.process_time()
        records.append(
            extract_references(
                tree,
                data,
                chunks,
                path=src.path,
                owner=src.owner,
                object_type=src.object_type,
                module_kind=src.module_kind,
                extension=src.project in ext,
            )
        )
        t3 = time.process_time()
        chunk_s += t1 - t0
        parse_s += t2 - t1
        extract_s += t3 - t2
    t0 = time.process_time()
    bound, _skips = read_binding_files(root, scan)
    bindings_s = time.process_time() - t0
    return {
        "texts": texts,
        "records": records + bound,
        "modules": len(texts),
        "chunk_s": chunk_s,
        "parse_s": parse_s,
        "extract_s": extract_s,
        "bindings_s": bindings_s,
    }


def _renamed(rec, i: int):
    """Copy ``i`` of a record, as ``build_scaled_tree`` names it (``Type/X`` -> ``Type/X_i``)."""
    import msgspec

    parts = rec.path.split("/")
    if len(parts) < 2 or parts[0] not in OBJECT_TYPES:
        return None
    first = parts[1]
    if first.endswith(".xml"):
        parts[1] = f"{first[:-4]}_{i}.xml"
    else:
        parts[1] = f"{first}_{i}"
    path = "/".join(parts)
    owner_parts = rec.owner.split(".")
    owner = rec.owner
    if len(owner_parts) >= 2:
        owner_parts[1] = f"{owner_parts[1]}_{i}"
        owner = ".".join(owner_parts)
    strings = [owner if s == rec.owner and rec.file_kind != "bsl" else s for s in rec.strings]
    # own bytes per copy, as a daemon decoding each copy's record would hold
    return msgspec.structs.replace(
        rec,
        path=path,
        owner=owner,
        strings=strings,
        names=list(rec.names),
        sites=bytes(bytearray(rec.sites)),
        methods=bytes(bytearray(rec.methods)),
    )


def scaled(records: list, n: int) -> list:
    """The records of a tree replicated ``n`` times (copy 1 keeps the names)."""
    out = list(records)
    for i in range(2, n + 1):
        for rec in records:
            r = _renamed(rec, i)
            if r is not None:
                out.append(r)
    return out


def run(root: Path, scale: int = 1) -> dict:
    """Every figure of the module docstring as a dict (seconds, milliseconds, MiB)."""
    from ..index.refgraph import RefGraph
    from ..sources.references import module_references

    got = read_export(root)
    records = got.pop("records")
    texts = got.pop("texts")
    out: dict = {"root": str(root), "scale": scale, **{k: round(v, 3) for k, v in got.items()}}
    out["sites"] = sum(len(r) for r in records)
    import msgspec

    from ..sources.ref_record import FileRefs

    gc.collect()
    rss0 = _rss_mb()
    # every record decoded afresh, in batches as the daemon receives them from its chunking
    # workers, swapped in deferred; then one resolution (as a first index would do it)
    enc, dec = msgspec.msgpack.Encoder(), msgspec.msgpack.Decoder(list[FileRefs])
    source = scaled(records, scale) if scale > 1 else records
    graph = RefGraph()
    swap_s = 0.0
    for k in range(0, len(source), 32):
        batch = dec.decode(enc.encode(source[k : k + 32]))
        t0 = time.process_time()
        graph.update(batch, defer=True)
        swap_s += time.process_time() - t0
    del source, batch
    t0 = time.process_time()
    graph.update()
    out["swap_s"] = round(swap_s, 3)
    out["resolve_s"] = round(time.process_time() - t0, 3)
    gc.collect()
    out["graph_mb"] = round(_rss_mb() - rss0, 1)
    out["files"] = len(graph)
    out["sites_scaled"] = out["sites"] * scale
    # queries: the most-called targets
    top = sorted(graph._callers.items(), key=lambda kv: -len(kv[1]))[:50]
    times = []
    for gid, _b in top:
        target = graph.method_id(gid)
        t = time.perf_counter()
        graph.references(target, limit=50)
        times.append((time.perf_counter() - t) * 1000)
    out["query_ms_p50"] = round(percentile(times, 0.5), 2)
    out["query_ms_p95"] = round(percentile(times, 0.95), 2)
    # edits: re-extract a module (its parse included) and swap it in
    big = sorted(texts, key=lambda st: -len(st[1]))[:3] + texts[:: max(len(texts) // 10, 1)][:10]
    edit, swap = [], []
    for src, text in big:
        t = time.perf_counter()
        rec = module_references(
            text + "\n", path=src.path, owner=src.owner, object_type=src.object_type, module_kind=src.module_kind
        )
        t1 = time.perf_counter()
        graph.update([rec])
        t2 = time.perf_counter()
        edit.append((t2 - t) * 1000)
        swap.append((t2 - t1) * 1000)
    out["edit_ms_p50"] = round(percentile(edit, 0.5), 1)
    out["edit_ms_p95"] = round(percentile(edit, 0.95), 1)
    out["update_ms_p50"] = round(percentile(swap, 0.5), 1)
    out["update_ms_p95"] = round(percentile(swap, 0.95), 1)
    t = time.perf_counter()
    saved = graph.to_bytes()
    out["save_s"] = round(time.perf_counter() - t, 2)
    out["saved_mb"] = round(len(saved) / 2**20, 1)
    t = time.perf_counter()
    RefGraph.from_bytes(saved)
    out["load_s"] = round(time.perf_counter() - t, 2)
    return out


def main(argv: list[str] | None = None) -> int:
    """The command line (see the module docstring)."""
    ap = argparse.ArgumentParser(prog="python -m daemon.dev.bench_refs", description=__doc__.split("\n")[0])
    ap.add_argument("root", type=Path)
    ap.add_argument("--scale", type=int, default=1)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    res = run(args.root, args.scale)
    if args.json:
        sys.stdout.write(json.dumps(res, ensure_ascii=False) + "\n")
    else:
        for k, v in res.items():
            sys.stdout.write(f"{k:>16}  {v}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
