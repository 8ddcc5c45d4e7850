"""daemon/cli/run_info.py: the ``run`` object of ``eval --json`` and ``bench --json`` (the git
lookup itself runs in tests/daemon/test_run_info.py, since it starts git)."""

from __future__ import annotations

import json
import re

from daemon import __version__
from daemon.cli import bench, run_info


def test_the_run_records_version_commit_date_and_load(monkeypatch):
    monkeypatch.setattr(run_info, "checkout_commit", lambda root=run_info.CHECKOUT: "abc123def456")
    run = run_info.run_started()
    assert list(run) == ["version", "commit", "date", "cpu_count", "load_avg_start", "load_avg_end"]
    assert run["version"] == __version__ and run["commit"] == "abc123def456"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", run["date"])
    assert len(run["load_avg_start"]) == 3 and run["load_avg_end"] is None
    assert len(run_info.run_finished(run)["load_avg_end"]) == 3


def test_no_checkout_means_no_commit_and_no_git(tmp_path):
    # the unit tier refuses processes: a None without starting git
    assert run_info.checkout_commit(tmp_path) is None


def test_every_bench_report_carries_the_run(monkeypatch, capsys):
    monkeypatch.setattr(run_info, "checkout_commit", lambda root=run_info.CHECKOUT: None)
    run = run_info.run_started()
    assert bench.print_report({"x_ms": 1.5}, True, bench="mcp", run=run) == 0
    rep = json.loads(capsys.readouterr().out)
    assert list(rep) == ["bench", "cpu_count", "load_avg", "run", "x_ms"]
    assert rep["run"]["commit"] is None and rep["run"]["load_avg_end"] == rep["load_avg"]
