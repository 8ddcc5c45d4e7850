"""Every bench report starts with the same header (bench, cpu_count, load_avg), checked on the
engine bench run as ``bsl-lens bench`` in a process (the percentile tests are in tests/unit/test_stats.py)."""

from __future__ import annotations


def test_every_bench_report_starts_with_the_same_header(sample_root):
    """``bsl-lens bench`` (the engine bench, lexical only on the sample export): the one
    report shape of every bench (daemon.cli.bench.print_report): bench, cpu_count, load_avg, then
    the measurements."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "daemon.cli",
            "bench",
            str(sample_root),
            "--embedder",
            "none",
            "--json",
            "--queries",
            "20",
        ],
        cwd=sample_root,
        env={**os.environ, "PYTHONPATH": str(repo)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    rep = json.loads(out.stdout)
    assert list(rep)[:4] == ["bench", "cpu_count", "load_avg", "run"] and rep["bench"] == "engine"
    assert rep["run"]["version"] and len(rep["run"]["load_avg_start"]) == 3  # daemon/cli/run_info.py
    assert len(rep["load_avg"]) == 3 and rep["cpu_count"] >= 1
    assert rep["scan_ms"] > 0 and rep["cold_lexical_index_s"] >= 0 and set(rep["symbol_lookup_ms"]) == {"p50", "p95"}
