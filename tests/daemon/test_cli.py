"""The ``bsl-lens`` command line as a user runs it: a real subprocess per command, on a copy
of the bundled sample export, with its own index dir."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import daemon
from daemon.cli import run_info
from daemon.cli.bench import sample_export_dir

SAMPLE = sample_export_dir()


def run(*args: str, check: bool = True, env: dict | None = None) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [sys.executable, "-m", "daemon.cli", *args],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **(env or {})},
    )
    if check:
        assert proc.returncode == 0, (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    return proc


def test_index_search_json_and_eval(sample_root, tmp_path):
    idx = str(tmp_path / "idx")
    out = run("index", str(sample_root), "--index-dir", idx, "--no-dense")
    assert "15 modules, 68 methods" in out.stdout
    assert "missing_on_disk" in out.stdout

    res = json.loads(
        run(
            "search", str(sample_root), "ИННСоотв", "--index-dir", idx, "--mode", "lexical", "--json", "--standalone"
        ).stdout
    )
    top = res["hits"][0]
    assert (top["path"], top["symbol"], top["match"]) == (
        "CommonModules/РаботаСКонтрагентами/Ext/Module.bsl",
        "ИННСоответствуетТребованиям",
        "prefix",
    )
    assert top["ranks"]["names"] == 1
    meta = json.loads(
        run(
            "search",
            str(sample_root),
            "телефон контактного лица",
            "--index-dir",
            idx,
            "--mode",
            "lexical",
            "--json",
            "--scope",
            "metadata",
            "--standalone",
        ).stdout
    )
    assert meta["hits"][0]["symbol"] == "Реквизит:КонтактныеЛица.Телефон"
    assert all(h["path"].endswith(".xml") for h in meta["hits"])

    text = run(
        "search", str(sample_root), "ПолучитьСчетНаОплату", "--index-dir", idx, "--mode", "lexical", "--standalone"
    ).stdout
    assert text.splitlines()[0].startswith(" 1. Documents/РеализацияТоваров/Ext/ManagerModule.bsl:")
    assert "ПолучитьСчётНаОплату" in text.splitlines()[0]

    # the sample's query set has no "corpus" field: eval says so instead of scoring nothing
    block = (SAMPLE / "QUERIES.md").read_text(encoding="utf-8").split("```jsonl", 1)[1].split("```", 1)[0]
    gold = tmp_path / "gold.jsonl"
    gold.write_text(block.strip() + "\n", encoding="utf-8")
    rep = run(
        "eval",
        str(sample_root),
        "--gold",
        str(gold),
        "--index-dir",
        idx,
        "--modes",
        "lexical",
        "--embedder",
        "none",
        check=False,
    )
    assert rep.returncode == 1 and "no gold entries" in rep.stderr


def test_eval_on_gold_entries_with_corpus(sample_root, tmp_path):
    idx = str(tmp_path / "idx")
    block = (SAMPLE / "QUERIES.md").read_text(encoding="utf-8").split("```jsonl", 1)[1].split("```", 1)[0]
    rows = [dict(json.loads(line), corpus="export") for line in block.splitlines() if line.strip()]
    gold = tmp_path / "gold.jsonl"
    gold.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n", encoding="utf-8")
    rep = json.loads(
        run(
            "eval",
            str(sample_root),
            "--gold",
            str(gold),
            "--index-dir",
            idx,
            "--modes",
            "lexical",
            "--embedder",
            "none",
            "--json",
        ).stdout
    )
    lex = rep["modes"]["lexical"]
    assert lex["n"] == 10
    # where and when it ran (daemon/cli/run_info.py): what tools/docs_tables.py captions with
    ran = rep["run"]
    assert ran["version"] == daemon.__version__ and ran["date"].endswith("Z") and ran["cpu_count"] >= 1
    assert len(ran["load_avg_start"]) == 3 and len(ran["load_avg_end"]) == 3
    assert ran["commit"] == run_info.checkout_commit()  # the same checkout: None for an installed package
    assert lex["by_intent"]["symbol"]["symbol"]["hit@1"] == 1.0
    assert lex["overall"]["symbol"]["ndcg@10"] > 0.6

    # --fold both: the same run, plus each fold's averages (the folds partition the queries)
    both = json.loads(
        run(
            "eval",
            str(sample_root),
            "--gold",
            str(gold),
            "--index-dir",
            idx,
            "--modes",
            "lexical",
            "--embedder",
            "none",
            "--json",
            "--fold",
            "both",
            "--no-refresh",
        ).stdout
    )
    lexb = both["modes"]["lexical"]
    assert both["fold"] == "both" and lexb["overall"] == lex["overall"]
    assert lexb["folds"]["A"]["n"] + lexb["folds"]["B"]["n"] == 10
    # --fold A scores only fold A's queries, with the numbers --fold both reported for A
    a = json.loads(
        run(
            "eval",
            str(sample_root),
            "--gold",
            str(gold),
            "--index-dir",
            idx,
            "--modes",
            "lexical",
            "--embedder",
            "none",
            "--json",
            "--fold",
            "A",
            "--no-refresh",
        ).stdout
    )["modes"]["lexical"]
    assert a["n"] == lexb["folds"]["A"]["n"] and a["overall"] == lexb["folds"]["A"]["overall"]
    text = run(
        "eval",
        str(sample_root),
        "--gold",
        str(gold),
        "--index-dir",
        idx,
        "--modes",
        "lexical",
        "--embedder",
        "none",
        "--fold",
        "both",
        "--no-refresh",
    ).stdout
    assert "\nfold A: " in text and "\nfold B: " in text
    bad = run("eval", str(sample_root), "--gold", str(gold), "--embedder", "none", "--fold", "C", check=False)
    assert bad.returncode == 2 and "invalid choice" in bad.stderr


def test_clear_errors_never_tracebacks(sample_root, tmp_path):
    afile = tmp_path / "a-file"
    afile.write_text("x")
    empty = tmp_path / "empty"
    empty.mkdir()
    cases = [
        (["search", str(sample_root), "x", "--mode", "fuzzy"], 2, "invalid choice"),
        (["search", str(sample_root), "x", "--module-kind", "Manager"], 2, "invalid choice"),
        (["search", str(tmp_path / "nope"), "x", "--embedder", "none", "--standalone"], 1, "not a directory"),
        (["search", str(tmp_path / "nope"), "x", "--embedder", "none", "--no-spawn"], 1, "error"),
        (["index", str(sample_root), "--index-dir", str(afile), "--no-dense"], 1, "error"),
        (["index", str(empty), "--index-dir", str(tmp_path / "i2"), "--no-dense"], 1, "no 1C export"),
        (
            [
                "search",
                str(sample_root),
                "x",
                "--top-k",
                "0",
                "--embedder",
                "none",
                "--index-dir",
                str(tmp_path / "i3"),
            ],
            2,
            "1..1000",
        ),
        (
            [
                "search",
                str(sample_root),
                "x" * 5000,
                "--embedder",
                "none",
                "--index-dir",
                str(tmp_path / "i4"),
                "--standalone",
            ],
            1,
            "at most 4096",
        ),
        (["eval", str(sample_root), "--gold", str(tmp_path), "--embedder", "none"], 1, "directory"),
        (["eval", str(sample_root), "--gold", str(afile), "--embedder", "none"], 1, "not JSON"),
    ]
    for args, code, message in cases:
        proc = run(*args, check=False)
        assert proc.returncode == code, (args, proc.returncode, proc.stderr)
        assert message in proc.stderr, (args, proc.stderr)
        assert "Traceback" not in proc.stderr, (args, proc.stderr)


def test_demo_runs_on_the_bundled_sample(tmp_path):
    out = run("demo", "--index-dir", str(tmp_path / "idx")).stdout
    assert "15 modules, 68 methods" in out
    # every chunk's first vector and the exported methods' context vectors: more vectors than chunks
    n = int(out.split(" vectors embedded")[0].rsplit(", ", 1)[1])
    assert n > 68 + 51
    first = out.split("» где считается НДС с авансов", 1)[1].splitlines()[1]
    assert "НДССАвансаПолученного" in first


def test_search_goes_through_the_daemon_and_spawns_it(sample_root, tmp_path, daemons):
    """Without --standalone, search starts the root's daemon (waiting for its first index),
    and the next search reuses it; --no-spawn refuses when none runs."""
    idx = tmp_path / "idx-daemon"
    args = (
        "search",
        str(sample_root),
        "ИННСоотв",
        "--index-dir",
        str(idx),
        "--embedder",
        "none",
        "--mode",
        "lexical",
        "--json",
    )
    refused = run("search", str(sample_root), "x", "--index-dir", str(idx), "--no-spawn", check=False)
    assert refused.returncode == 1 and "no bsl-lens daemon" in refused.stderr
    try:
        first = json.loads(run(*args).stdout)
    finally:
        d = daemons.adopt(sample_root, idx)
    assert first["hits"][0]["name"] == "ИННСоответствуетТребованиям"
    assert d.alive()
    again = json.loads(run(*args, "--no-spawn").stdout)
    assert again["hits"] == first["hits"]
    with d.client() as c:
        assert c.hello.pid == d.pid


def test_output_is_utf8_whatever_the_locale_says(sample_root, tmp_path):
    """A pipe on Windows is cp1252 unless told otherwise (here: ``PYTHONIOENCODING=cp1252``, the
    same stream Python opens there): the Cyrillic names still print, as UTF-8, text and JSON."""
    idx = str(tmp_path / "idx")
    args = ("search", str(sample_root), "КонтрагентПоИНН", "--index-dir", idx, "--mode", "lexical", "--standalone")
    for extra in ((), ("--json",)):
        proc = subprocess.run(
            [sys.executable, "-m", "daemon.cli", *args, *extra],
            capture_output=True,
            timeout=600,
            env={**os.environ, "PYTHONIOENCODING": "cp1252"},
        )
        assert proc.returncode == 0, proc.stderr.decode("utf-8", "replace")
        assert "КонтрагентПоИНН" in proc.stdout.decode("utf-8")
