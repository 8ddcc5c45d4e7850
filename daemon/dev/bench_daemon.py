"""``bsl-lens bench ROOT --daemon`` and ``--lifecycle``: the daemon's targets, through its socket.

On a hard-linked copy of ROOT (edits replace files atomically, so the corpus is never written) and
a copy of an existing index: warm start, edit latency (lexical and dense), query latency idle and
under a checkout-sized storm of edits, RSS (full index; cold first index vs warm restart); and the
lifecycle figures (stop and SIGTERM latency mid first index, warm start to the first answer and to
an armed watcher) at several scales. Every figure is listed in ``docs/frontends.md``; nothing here
asserts a target.
"""

from __future__ import annotations

import os
import shutil
import statistics
import tempfile
import threading
import time
from pathlib import Path

from ..contract import DEFAULT_EMBEDDER
from ..stats import percentile as _pct

QUERIES = [
    "как отправить письмо",
    "значение реквизита объекта",
    "проверка прав доступа к объекту",
    "получение курса валюты на дату",
    "запись в журнал регистрации",
    "формирование печатной формы",
    "обновление информационной базы",
    "сообщить пользователю об ошибке",
    "чтение файла в двоичные данные",
    "настройки программы по умолчанию",
    "ЗначениеРеквизитаОбъекта",
    "ОбщегоНазначения.СообщитьПользователю",
]


def _atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.bench.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _pick_module(root: Path, target: int = 1_000_000) -> Path:
    mods = [(abs(p.stat().st_size - target), p) for p in root.rglob("Module.bsl")]
    return min(mods)[1]


def _insert_statement(text: str, token: str) -> str:
    """Insert ``token = 1;`` as the first statement of the first exported method."""
    for nl in ("\r\n", "\n"):
        key = f") Экспорт{nl}"
        i = text.find(key)
        if i >= 0:
            j = i + len(key)
            return text[:j] + f"\t{token} = 1;{nl}" + text[j:]
    raise ValueError("no exported method found")


def run_daemon_bench(
    root: Path,
    index_dir: Path | None,
    *,
    embedder: str = DEFAULT_EMBEDDER,
    edits: int = 20,
    queries: int = 200,
    storm_files: int = 2000,
    rss_scale: int = 1,
) -> dict:
    """Run the measurements in the module docstring and return them (the CLI prints them).
    Times in ms unless the key says s; RSS and sizes in MiB. ``rss_cold_vs_warm``:
    :func:`measure_rss_cold_warm` on ``root`` replicated ``rss_scale`` times (lexical only),
    after the rest, with no other daemon of the bench running."""
    from ..client import connect, daemon_args

    out: dict = {"root": str(root), "embedder": embedder}
    work = Path(tempfile.mkdtemp(prefix="bsl-lens-bench-"))
    tree = work / root.name
    idx = work / "index"
    client = None
    try:
        shutil.copytree(root, tree, copy_function=os.link)
        if index_dir is not None:
            shutil.copytree(index_dir, idx)
        args = daemon_args(embedder=embedder, watch="auto")

        def start():
            t0 = time.perf_counter()
            c = connect(tree, index_dir=idx, args=args, timeout=600, client="bench")
            c.search("ЗначениеРеквизитаОбъекта", mode="lexical", top_k=1)
            return c, time.perf_counter() - t0

        client, first = start()
        if not client.wait_idle(1800):
            raise RuntimeError("the daemon did not finish its first index")
        starts = []
        for _ in range(3):
            _shutdown(client, tree, idx)
            client, s = start()
            starts.append(s)
        out["first_start_s"] = round(first, 2)
        out["warm_start_s"] = {"median": round(statistics.median(starts), 2), "max": round(max(starts), 2)}
        client.wait_idle(600)
        _wait_dense(client, 3600)

        # --- edit latency
        mod = _pick_module(tree)
        out["edit_module"] = {"path": str(mod.relative_to(tree)), "bytes": mod.stat().st_size}
        lex, dense = [], []
        for i in range(edits):
            token = f"БенчПеременная{os.getpid()}x{i}"
            data = mod.read_bytes()
            bom = data.startswith(b"\xef\xbb\xbf")
            text = data.decode("utf-8-sig")
            new = _insert_statement(text, token).encode("utf-8")
            t0 = time.perf_counter()
            _atomic_write(mod, (b"\xef\xbb\xbf" if bom else b"") + new)
            while not _found(client, token):
                time.sleep(0.002)
            lex.append((time.perf_counter() - t0) * 1000)
            if embedder != "none":
                _wait_dense(client, 60, poll=0.02)  # status walks every chunk: do not poll it flat out
                dense.append((time.perf_counter() - t0) * 1000)
            time.sleep(0.5)
        out["edit_lexical_ms"] = {
            "p50": round(_pct(lex, 0.5), 1),
            "p95": round(_pct(lex, 0.95), 1),
            "max": round(max(lex), 1),
        }
        if dense:
            out["edit_dense_ms"] = {
                "p50": round(_pct(dense, 0.5), 1),
                "p95": round(_pct(dense, 0.95), 1),
                "max": round(max(dense), 1),
            }
        client.wait_idle(600)

        # --- query latency idle vs during a 2,000-file reindex
        mode = "hybrid" if embedder != "none" else "lexical"
        idle = _query_loop(client, mode, n=queries)
        idle_lex = _query_loop(client, "lexical", n=queries)
        mods = sorted(tree.rglob("*.bsl"))[:storm_files]
        before = client.status().service.counters
        loaded: list[float] = []
        stop = threading.Event()
        qclient = connect(tree, index_dir=idx, spawn=False, client="bench-queries")  # one client per thread
        q = threading.Thread(target=lambda: loaded.extend(_query_loop(qclient, mode, stop=stop)), daemon=True)
        q.start()
        t0 = time.perf_counter()
        for p in mods:
            _atomic_write(p, p.read_bytes() + b"\r\n// bench\r\n")
        while client.status().service.counters["full_reconciles"] == before["full_reconciles"]:
            time.sleep(0.01)
        busy_ok = client.wait_idle(600)
        reindex_s = time.perf_counter() - t0
        stop.set()
        q.join(60)
        qclient.close()
        out["query_idle_ms"] = {
            "mode": mode,
            "n": len(idle),
            "p50": round(_pct(idle, 0.5), 2),
            "p95": round(_pct(idle, 0.95), 2),
        }
        out["query_during_reindex_ms"] = {
            "files": len(mods),
            "n": len(loaded),
            "p50": round(_pct(loaded, 0.5), 2),
            "p95": round(_pct(loaded, 0.95), 2),
            "reindex_s": round(reindex_s, 1),
            "finished": busy_ok,
        }
        out["loaded_over_idle_p95"] = round(_pct(loaded, 0.95) / _pct(idle, 0.95), 2)
        # the same with lexical queries, during a second checkout (back to the first state)
        before = client.status().service.counters
        loaded_lex: list[float] = []
        stop = threading.Event()
        qclient = connect(tree, index_dir=idx, spawn=False, client="bench-queries")
        q = threading.Thread(target=lambda: loaded_lex.extend(_query_loop(qclient, "lexical", stop=stop)), daemon=True)
        q.start()
        for p in mods:
            _atomic_write(p, p.read_bytes()[: -len(b"\r\n// bench\r\n")])
        while client.status().service.counters["full_reconciles"] == before["full_reconciles"]:
            time.sleep(0.01)
        client.wait_idle(600)
        stop.set()
        q.join(60)
        qclient.close()
        out["lexical_idle_ms"] = {"p50": round(_pct(idle_lex, 0.5), 2), "p95": round(_pct(idle_lex, 0.95), 2)}
        out["lexical_during_reindex_ms"] = {
            "n": len(loaded_lex),
            "p50": round(_pct(loaded_lex, 0.5), 2),
            "p95": round(_pct(loaded_lex, 0.95), 2),
        }
        out["lexical_loaded_over_idle_p95"] = round(_pct(loaded_lex, 0.95) / _pct(idle_lex, 0.95), 2)
        st = client.status().service
        out["rss_mb"] = round(st.rss_bytes / 2**20, 1)
        out["index_mb"] = round(st.index_bytes / 2**20, 1)
        out["chunks"] = st.chunks
        out["dense"] = f"{st.dense.done}/{st.dense.total}"
        out["latency_status"] = {
            "p50_ms": st.latency.p50_ms,
            "p95_ms": st.latency.p95_ms,
            "samples": st.latency.samples,
        }
    finally:
        if client is not None:
            try:
                _shutdown(client, tree, idx)
            except Exception:
                pass
        shutil.rmtree(work, ignore_errors=True)
    out["rss_cold_vs_warm"] = measure_rss_cold_warm(root, scale=rss_scale)
    return out


def measure_rss_cold_warm(
    root: Path, *, scale: int = 1, embedder: str = "none", work: Path | None = None, settle_s: float = 5.0
) -> dict:
    """Daemon RSS after a cold first index of ``root`` and after a warm restart.

    On a hard-linked copy of ``root`` in ``work`` (a fresh temp dir by default, removed
    afterwards; ``scale`` > 1: :func:`daemon.dev.bench.build_scaled_tree`, the root replicated
    under renamed objects) and an empty index dir: ``daemon run`` is spawned, the first index runs to
    idle (``wait_idle``), then after ``settle_s`` seconds the daemon's RSS is read from its
    status (psutil ``rss``, the whole process); the daemon is stopped, started again on the
    saved snapshot, waited idle again, and its RSS read the same way. The worker process
    that chunks big reconciles is not counted (it is a separate process). Returns
    ``{"scale", "cold_index_s", "rss_cold_mb", "rss_warm_mb", "cold_over_warm"}`` (MiB,
    seconds; the target is in docs/frontends.md). ``embedder`` other than
    ``"none"`` also counts the dense side (a model and vectors), which a warm start loads
    too.
    """
    from .bench import build_scaled_tree
    from ..client import connect, daemon_args

    own = work is None
    work = Path(tempfile.mkdtemp(prefix="bsl-lens-rss-")) if own else Path(work)
    tree = work / root.name
    idx = work / "index-rss"
    args = daemon_args(embedder=embedder, watch="auto")
    out: dict = {"scale": scale}
    client = None
    try:
        if not tree.exists():
            if scale > 1:
                build_scaled_tree(root, scale, tree)
            else:
                shutil.copytree(root, tree, copy_function=os.link)
        shutil.rmtree(idx, ignore_errors=True)
        rss = []
        for run in ("cold", "warm"):
            t0 = time.perf_counter()
            client = connect(tree, index_dir=idx, args=args, timeout=600, client="bench-rss")
            if not client.wait_idle(3600):
                raise RuntimeError(f"the daemon did not settle ({run} start)")
            if run == "cold":
                out["cold_index_s"] = round(time.perf_counter() - t0, 1)
            time.sleep(settle_s)
            rss.append(client.status().service.rss_bytes / 2**20)
            _shutdown(client, tree, idx)
            client = None
        out["rss_cold_mb"] = round(rss[0], 1)
        out["rss_warm_mb"] = round(rss[1], 1)
        out["cold_over_warm"] = round(rss[0] / rss[1], 2) if rss[1] else None
    finally:
        if client is not None:
            try:
                _shutdown(client, tree, idx)
            except Exception:
                pass
        if own:
            shutil.rmtree(work, ignore_errors=True)
    return out


def _found(client, token: str) -> bool:
    """True once the method holding ``token`` is in the index with it (BM25 splits the
    identifier into words, so an earlier edit's ``...x1`` would match ``...x2``: check the
    text)."""
    for h in client.search(token, mode="lexical", top_k=3).hits:
        if token in client.get_chunk(h.id).text:
            return True
    return False


def _query_loop(client, mode: str, *, n: int | None = None, stop: threading.Event | None = None) -> list[float]:
    times = []
    i = 0
    while (n is None or i < n) and not (stop is not None and stop.is_set()):
        q = QUERIES[i % len(QUERIES)]
        t0 = time.perf_counter()
        client.search(q, mode=mode, top_k=10)
        times.append((time.perf_counter() - t0) * 1000)
        i += 1
    return times


def _wait_dense(client, timeout: float, poll: float = 0.5) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        d = client.status().service.dense
        if not d.enabled or (d.pending == 0 and d.done == d.total):
            return
        time.sleep(poll)
    raise RuntimeError("the dense side did not catch up")


def _shutdown(client, tree: Path, idx: Path) -> None:
    """Ask the bench's daemon to stop, close ``client`` and wait until the daemon is gone."""
    client.shutdown()
    client.close()
    _wait_gone(tree, idx)


def _wait_gone(tree: Path, idx: Path, timeout: float = 60) -> None:
    from ..server import runtime

    paths = runtime.paths_for(tree, idx)
    deadline = time.monotonic() + timeout
    while runtime.lock_is_held(paths.root_lock):  # released last, after the final save
        if time.monotonic() > deadline:
            raise RuntimeError("the daemon did not stop")
        time.sleep(0.02)


# ------------------------------------------------------------------------------ lifecycle
class _Lifecycle:
    """One tree and index dir of the lifecycle bench: spawns its daemon and times its exits."""

    def __init__(self, tree: Path, idx: Path) -> None:
        from ..server import runtime

        self.tree, self.idx = tree, idx
        self.paths = runtime.paths_for(tree, idx)

    def gone(self) -> bool:
        """The daemon has exited and released the root lock."""
        from ..server import runtime

        return not runtime.lock_is_held(self.paths.root_lock)

    def spawn(self, embedder: str):
        """A client of a daemon spawned for the tree (watching on)."""
        from ..client import connect, daemon_args

        args = daemon_args(embedder=embedder, watch="auto")
        return connect(self.tree, index_dir=self.idx, args=args, timeout=600, client="bench")

    @staticmethod
    def mid_chunk(c, timeout: float = 600) -> bool:
        """Wait for the chunk stage of a first index to have started; False if it ended first."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            st = c.status().service
            if st.state == "indexing" and st.progress.get("stage") == "chunk" and st.progress.get("done", 0) > 0:
                return True
            if st.state == "ready":
                return False
            time.sleep(0.01)
        return False

    def timed_exit(self, t0: float) -> float:
        """Seconds from ``t0`` until the daemon is gone."""
        while not self.gone():
            time.sleep(0.005)
        return round(time.perf_counter() - t0, 3)

    def stop(self) -> None:
        """Stop a daemon still running for the tree (cleanup; errors ignored)."""
        from ..client import connect

        try:
            if not self.gone():
                with connect(self.tree, index_dir=self.idx, spawn=False, client="bench") as c:
                    c.shutdown()
                _wait_gone(self.tree, self.idx)
        except Exception:  # noqa: BLE001 - best effort: the tree is removed next
            pass


def _stops_mid_first_index(lc: _Lifecycle, res: dict) -> None:
    """A stop and a SIGTERM during the first index (each drops it: the next resumes)."""
    for key in ("stop_mid_first_index_s", "sigterm_mid_first_index_s"):
        c = lc.spawn("none")
        caught = lc.mid_chunk(c)
        pid = c.hello.pid
        t0 = time.perf_counter()
        if key.startswith("stop"):
            c.shutdown()
        else:
            os.kill(pid, 15)
        c.close()
        took = lc.timed_exit(t0)  # also when the first index ended first: the next spawn needs the lock
        res[key] = took if caught else None


def _first_index(lc: _Lifecycle, embedder: str, n: int, res: dict) -> None:
    """The first index to its end; with an embedder (scale 1) a stop during the dense backlog."""
    c = lc.spawn(embedder)
    t0 = time.perf_counter()
    if not c.wait_idle(3600):
        raise RuntimeError("the daemon did not finish its first index")
    res["first_index_s"] = round(time.perf_counter() - t0, 1)
    st = c.status().service
    res["modules"], res["chunks"] = st.modules, st.chunks
    if embedder != "none" and n == 1:
        deadline = time.monotonic() + 600
        while c.status().service.dense.done == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        t0 = time.perf_counter()
        c.shutdown()
        c.close()
        res["stop_mid_embedding_s"] = lc.timed_exit(t0)
    else:
        c.shutdown()
        c.close()
        lc.timed_exit(time.perf_counter())


def _warm_starts(lc: _Lifecycle, starts: int, res: dict) -> None:
    """Warm starts to the first answer and to an armed watcher, and idle stops."""
    warm, armed, stops = [], [], []
    first_state = None
    for _ in range(starts):
        t0 = time.perf_counter()
        c = lc.spawn("none")
        c.search("ЗначениеРеквизитаОбъекта", mode="lexical", top_k=1)
        warm.append(time.perf_counter() - t0)
        first_state = c.status().service.watcher.state
        while c.status().service.watcher.state == "arming":
            time.sleep(0.01)
        armed.append(time.perf_counter() - t0)
        c.wait_idle(600)
        t1 = time.perf_counter()
        c.shutdown()
        c.close()
        stops.append(lc.timed_exit(t1))
    res["warm_start_s"] = {"median": round(statistics.median(warm), 2), "max": round(max(warm), 2)}
    res["watch_armed_s"] = {"median": round(statistics.median(armed), 2), "max": round(max(armed), 2)}
    res["watcher_state_at_first_answer"] = first_state
    res["stop_idle_s"] = {"median": round(statistics.median(stops), 3), "max": round(max(stops), 3)}


def run_lifecycle_bench(
    root: Path,
    *,
    scales: tuple[int, ...] = (1, 3),
    embedder: str = "none",
    starts: int = 3,
    work_dir: Path | None = None,
) -> dict:
    """The daemon's lifecycle figures per scale ``n`` in ``scales`` (the root replicated ``n``
    times like ``bsl-lens bench --scale``; 1: a hard-linked copy):

    * ``stop_mid_first_index_s``: ``shutdown`` request during the chunking of a first index,
      until the root lock is free (the daemon has exited and released everything);
      ``sigterm_mid_first_index_s``: the same with SIGTERM;
    * ``stop_mid_embedding_s`` (only with an ``embedder``, scale 1): during the dense backlog;
    * ``warm_start_s``: ``daemon run`` spawned by the client until the first answered lexical
      search (median and max of ``starts``), ``watch_armed_s``: until ``status`` shows the
      watcher armed, ``stop_idle_s``: a stop when idle (final save included).

    Seconds; lexical unless ``embedder``. A temporary tree and index dir under ``work_dir``
    (default the system temp dir) are removed afterwards.
    """
    from .bench import _link_or_copy, build_scaled_tree

    out: dict = {"root": str(root), "embedder": embedder, "load_avg_start": [round(x, 2) for x in os.getloadavg()]}
    for n in scales:
        work = Path(tempfile.mkdtemp(prefix="bsl-lens-lifecycle-", dir=work_dir))
        tree, idx = work / "tree", work / "index"
        res: dict = {}
        lc = _Lifecycle(tree, idx)
        try:
            if n > 1:
                build_scaled_tree(root, n, tree)
            else:
                shutil.copytree(root, tree, copy_function=lambda s, d: _link_or_copy(Path(s), Path(d)))
            _stops_mid_first_index(lc, res)
            _first_index(lc, embedder, n, res)
            _warm_starts(lc, starts, res)
        finally:
            lc.stop()
            shutil.rmtree(work, ignore_errors=True)
        out[f"scale_{n}"] = res
    out["load_avg_end"] = [round(x, 2) for x in os.getloadavg()]
    return out


# ------------------------------------------------------------------------------ find usages
def run_refs_bench(root: Path, *, scale: int = 1, queries: int = 200, edits: int = 10) -> dict:
    """``bsl-lens bench ROOT --refs [--scale N]``: find usages through a lexical daemon on ROOT
    (replicated ``scale`` times, :func:`daemon.dev.bench.build_scaled_tree`).

    The first index (time to idle, then to resolved references), the daemon's RSS then and after
    a warm restart; ``references`` latency through the socket over exported common-module
    methods (as ``find_references`` asks: 20 listed, with their lines of code, and without);
    ``call_graph`` (callers, depth 2, fan-out 10); an edit that adds a call to a method: until
    ``references`` lists it, and until ``search`` finds the edited line (the same batch). Times in
    ms unless the key says s; RSS in MiB."""
    import random

    from ..client import connect, daemon_args
    from .bench import build_scaled_tree

    out: dict = {"root": str(root), "scale": scale}
    work = Path(tempfile.mkdtemp(prefix="bsl-lens-refs-"))
    tree, idx = work / root.name, work / "index"
    args = daemon_args(embedder="none", watch="auto")
    client = None
    try:
        if scale > 1:
            build_scaled_tree(root, scale, tree)
        else:
            shutil.copytree(root, tree, copy_function=os.link)
        t0 = time.perf_counter()
        client = connect(tree, index_dir=idx, args=args, timeout=600, client="bench-refs")
        if not any(client.wait_idle(3600) for _ in range(2)):
            raise RuntimeError("the daemon did not finish its first index")
        out["first_index_s"] = round(time.perf_counter() - t0, 1)
        while client.status().service.references.resolving:
            time.sleep(0.05)
        out["first_index_resolved_s"] = round(time.perf_counter() - t0, 1)
        st = client.status().service
        out["references"] = {"files": st.references.files, "sites": st.references.sites}
        out["rss_cold_mb"] = round(st.rss_bytes / 2**20, 1)
        _shutdown(client, tree, idx)
        t0 = time.perf_counter()
        client = connect(tree, index_dir=idx, args=args, timeout=600, client="bench-refs")
        client.wait_idle(3600)
        out["warm_start_to_idle_s"] = round(time.perf_counter() - t0, 1)
        out["rss_warm_mb"] = round(client.status().service.rss_bytes / 2**20, 1)

        names = _exported_common_methods(tree)
        sample = random.Random(27).sample(names, min(queries, len(names)))
        out.update(_refs_latency(client, sample))
        # an edit adds a call: until references lists it, until search finds the line
        target = (
            "ОбщегоНазначения.ЗначениеРеквизитаОбъекта"
            if "ОбщегоНазначения.ЗначениеРеквизитаОбъекта" in names
            else sample[0]
        )
        mod = _pick_module(tree, 200_000)
        refs_ms, search_ms = _refs_edits(client, mod, target, edits)
        out["edit_module"] = {"path": str(mod.relative_to(tree)), "bytes": mod.stat().st_size}
        out["edit_to_references_ms"] = {"p50": round(_pct(refs_ms, 0.5), 1), "p95": round(_pct(refs_ms, 0.95), 1)}
        out["edit_to_searchable_ms"] = {"p50": round(_pct(search_ms, 0.5), 1), "p95": round(_pct(search_ms, 0.95), 1)}
        _shutdown(client, tree, idx)
        client = None
        out["warm_load_rss_delta"] = _refs_rss_delta(tree, idx)
    finally:
        if client is not None:
            try:
                _shutdown(client, tree, idx)
            except Exception:
                pass
        shutil.rmtree(work, ignore_errors=True)
    return out


def _exported_common_methods(tree: Path) -> list[str]:
    """``Модуль.Метод`` of every exported method of the common modules of the first copy of a
    scaled tree (every copy calls those)."""
    import re

    names = []
    export = re.compile(r"^\s*(?:Функция|Процедура)\s+(\w+)\s*\([^)]*\)\s*Экспорт", re.M | re.I)
    for mod in sorted((tree / "CommonModules").glob("*/Ext/Module.bsl")):
        if re.search(r"_\d+$", mod.parent.parent.name):
            continue
        text = mod.read_bytes().decode("utf-8-sig", "replace")
        names += [f"{mod.parent.parent.name}.{m}" for m in export.findall(text)]
    return names


def _refs_latency(client, sample: list[str]) -> dict:
    """``references`` (20 listed, with and without their lines of code) and ``call_graph``
    (depth 2, fan-out 10) latency over ``sample``, ms; the most references of one name."""
    out: dict = {}
    for key, kw in (("references_ms", {"limit": 20}), ("references_context_ms", {"limit": 20, "context": True})):
        lat = []
        for name in sample:
            t = time.perf_counter()
            client.references(name, **kw)
            lat.append((time.perf_counter() - t) * 1000)
        out[key] = {"p50": round(_pct(lat, 0.5), 2), "p95": round(_pct(lat, 0.95), 2), "n": len(lat)}
    totals = sorted(client.references(n, limit=1).total for n in sample[:50])
    out["references_total_max"] = totals[-1] if totals else 0
    lat = []
    for name in sample[:50]:
        t = time.perf_counter()
        client.call_graph(name, depth=2, fan_out=10)
        lat.append((time.perf_counter() - t) * 1000)
    out["call_graph_ms"] = {"p50": round(_pct(lat, 0.5), 2), "p95": round(_pct(lat, 0.95), 2), "n": len(lat)}
    return out


def _refs_edits(client, mod: Path, target: str, edits: int) -> tuple[list[float], list[float]]:
    """``edits`` edits of ``mod`` that each add a call of ``target``: ms until ``references``
    lists it and until ``search`` finds the edited line. RuntimeError past 120 s."""
    refs_ms, search_ms = [], []
    for i in range(edits):
        base = client.references(target, limit=1).total
        token = f"БенчСсылка{os.getpid()}x{i}"
        data = mod.read_bytes()
        text = data.decode("utf-8-sig")
        call = f'{token} = {target}(Неопределено, "Ссылка")'
        new = _insert_statement(text, call).replace(f"{call} = 1;", f"{call};").encode("utf-8")
        t0 = time.perf_counter()
        _atomic_write(mod, (b"\xef\xbb\xbf" if data.startswith(b"\xef\xbb\xbf") else b"") + new)
        seen_refs = seen_search = None
        while seen_refs is None or seen_search is None:
            if seen_refs is None and client.references(target, limit=1).total > base:
                seen_refs = time.perf_counter() - t0
            if seen_search is None and _found(client, token):
                seen_search = time.perf_counter() - t0
            if time.perf_counter() - t0 > 120:
                raise RuntimeError("the edit was not seen in 120 s")
        refs_ms.append(seen_refs * 1000)
        search_ms.append(seen_search * 1000)
    return refs_ms, search_ms


def _refs_rss_delta(tree: Path, idx: Path) -> dict:
    """The engine's RSS after a warm load with its references and with the references part set
    aside (the load of a release without them), each in a fresh process: what the references
    cost a warm daemon."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from ..index.snapshot import CURRENT_FILE, LEXICAL_DIR, REFS_FILE

    part = idx / LEXICAL_DIR / (idx / LEXICAL_DIR / CURRENT_FILE).read_text().strip() / REFS_FILE
    out = {}
    for key in ("with_refs_mb", "without_refs_mb"):
        if key == "without_refs_mb":
            part.rename(part.with_name(REFS_FILE + ".aside"))
        with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as ex:
            out[key] = ex.submit(_warm_load_rss, str(tree), str(idx)).result()
    out["delta_mb"] = round(out["with_refs_mb"] - out["without_refs_mb"], 1)
    return out


def _warm_load_rss(tree: str, idx: str) -> float:
    """RSS (MiB) of a fresh process after ``Engine.open`` of ``idx`` and a collection."""
    import gc

    import psutil

    from ..engine import Engine

    eng = Engine.open(Path(tree), index_dir=Path(idx))
    gc.collect()
    rss = psutil.Process().memory_info().rss / 2**20
    del eng
    return round(rss, 1)
