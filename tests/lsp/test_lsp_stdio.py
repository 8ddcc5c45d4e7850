"""The language server as a process on stdio: the stdout guard, the ``bsl-lens lsp`` subcommand, and
the LSP bench against a real daemon (the pure parts are in tests/unit/lsp/)."""

from __future__ import annotations

import json
import subprocess
import sys

from daemon_helpers import REPO


def test_claim_stdout_sends_strays_to_stderr():
    code = (
        "import os, sys\n"
        "from lsp.wire import claim_stdout\n"
        "wire = claim_stdout()\n"
        "print('stray print')\n"
        "os.system('echo child process')\n"
        "os.write(1, b'raw fd write\\n')\n"
        "wire.write(b'FRAME'); wire.flush()\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, cwd=REPO, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == b"FRAME"
    for text in (b"stray print", b"child process", b"raw fd write"):
        assert text in proc.stderr


def test_bench_lsp_round_trip_and_quality_from_the_answers(daemons, sample_root, tmp_path):
    from daemon_helpers import run_cli

    d = daemons.start(sample_root, "--embedder", "none", "--watch", "off", wait_idle=True)
    gold = tmp_path / "gold.jsonl"
    rel = "CommonModules/РаботаСКонтрагентами/Ext/Module.bsl"
    entries = [
        {
            "id": "q1",
            "query": "ИННСоответствуетТребованиям",
            "intent": "symbol",
            "corpus": "export",
            "relevant": [{"path": rel, "symbol": "ИННСоответствуетТребованиям", "grade": 3}],
        },
        {
            "id": "q2",
            "query": "ИННСоотв",
            "intent": "symbol",
            "corpus": "export",
            "relevant": [{"path": rel, "symbol": "ИННСоответствуетТребованиям", "grade": 3}],
        },
        {
            "id": "q3",
            "query": "проверка ИНН контрагента",
            "intent": "semantic",
            "corpus": "export",
            "relevant": [{"path": rel, "symbol": "ИННСоответствуетТребованиям", "grade": 3}],
        },
    ]
    gold.write_text("\n".join(json.dumps(e, ensure_ascii=False) for e in entries), encoding="utf-8")
    r = run_cli(
        "bench",
        str(sample_root),
        "--lsp",
        "--index-dir",
        str(d.index_dir),
        "--gold",
        str(gold),
        "--rounds",
        "2",
        "--json",
    )
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout)
    assert out["workspace_symbol_ms"]["n"] == 4 and out["workspace_symbol_ms"]["p95"] > 0
    assert out["quality"] == {"ndcg@10": 1.0, "mrr@10": 1.0, "recall@10": 1.0, "hit@1": 1.0, "n": 2}
    assert out["typing_ms"]["n"] == 2 and out["natural_language_ms"]["n"] == 1
    assert out["daemon"]["pid"] == d.pid


def test_bsl_lens_lsp_subcommand_speaks_lsp_on_stdio():
    def frame(msg: dict) -> bytes:
        body = json.dumps(msg).encode("utf-8")
        return b"Content-Length: %d\r\n\r\n" % len(body) + body

    data = b"".join(
        frame(m)
        for m in (
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {"processId": None, "rootUri": None, "capabilities": {}},
            },
            {"jsonrpc": "2.0", "method": "initialized", "params": {}},
            {"jsonrpc": "2.0", "id": 3, "method": "shutdown"},
            {"jsonrpc": "2.0", "method": "exit"},
        )
    )
    proc = subprocess.run(
        [sys.executable, "-m", "daemon.cli", "lsp", "--stdio"], input=data, capture_output=True, cwd=REPO, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    bodies = [json.loads(part.split(b"\r\n\r\n", 1)[1]) for part in proc.stdout.split(b"Content-Length: ")[1:]]
    by_id = {b["id"]: b for b in bodies if "id" in b and "method" not in b}
    assert by_id[1]["result"]["serverInfo"]["name"] == "bsl-lens"
    assert by_id[3]["result"] is None
    assert b"no workspace folder" in proc.stderr
