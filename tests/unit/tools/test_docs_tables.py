"""tools/docs_tables.py: the docs' tables rendered from small eval and bench JSON samples (no corpus)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]


def _load():
    spec = importlib.util.spec_from_file_location("docs_tables", REPO / "tools" / "docs_tables.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


dt = _load()


def _score(nd_sym: float, nd_file: float, hit: float = 0.5) -> dict:
    return {
        "symbol": {"ndcg@10": nd_sym, "mrr@10": 0.75, "recall@10": 0.625, "hit@1": hit},
        "file": {"ndcg@10": nd_file, "mrr@10": 0.8, "recall@10": 0.9, "hit@1": 0.7},
    }


def _part(n: int, base: float) -> dict:
    return {
        "n": n,
        "overall": _score(base, base + 0.1),
        "by_intent": {
            "semantic": {"n": n - 1, **_score(base - 0.2, base)},
            "symbol": {"n": 1, **_score(1.0, 1.0, hit=1.0)},
        },
    }


EVAL = {
    "corpus": "tiny",
    "gold": "/somewhere/gold_tiny.jsonl",
    "fold": "both",
    "stats": {"chunks": 1234, "dense_done": 1234, "dense_total": 1234, "dense_vectors": 1500, "embedder": "m:q4"},
    "modes": {
        "hybrid": {
            **_part(4, 0.6),
            "latency_ms": {"p50": 21.5, "p95": 30.25},
            "folds": {"A": _part(2, 0.7), "B": _part(2, 0.5)},
        },
        "lexical": {
            **_part(4, 0.4),
            "latency_ms": {"p50": 2.0, "p95": 3.0},
            "folds": {"A": _part(2, 0.45), "B": _part(2, 0.35)},
        },
    },
}

BENCH = {
    "bench": "engine",
    "cpu_count": 2,
    "load_avg": [1.2, 1.3, 1.4],
    "root": "/data/tiny",
    "scale": 1,
    "stats": {"chunks": 38570, "methods": 31577},
    "cold_lexical_index_s": 14.8,
    "query_ms": {"lexical": {"p50": 4.0, "p95": 5.7}, "hybrid": {"p50": 21.7, "p95": 37.2}},
    "edit_to_searchable_ms": {"p50": 10.3, "p95": 17.0, "n": 20, "found": 20},
    "peak_rss_mb": 772.4,
    "index_size_mb": 254.0,
}


def test_quality_table_has_a_row_per_mode_and_fold_in_the_docs_order():
    body = dt.render_quality(EVAL, "main abc1234")
    lines = body.splitlines()
    assert lines[0].startswith("Corpus `tiny`, gold set `gold_tiny.jsonl`, 4 queries; index: 1,234 chunks")
    assert "/somewhere" not in body  # no machine paths in the docs
    assert "measured on main abc1234" in lines[0]
    header = next(line for line in lines if line.startswith("| mode"))
    # intents in the docs' order (symbol before semantic), with their n: full set, then per fold
    assert header == "| mode, set | all | symbol (1: 1 / 1) | semantic (3: 1 / 1) | Hit@1 | MRR@10 | Recall@10 |"
    rows = [line for line in lines if line.startswith("| lexical") or line.startswith("| hybrid")]
    assert [r.split(" | ")[0] for r in rows] == [
        "| lexical, all (4)",
        "| lexical, fold A (2)",
        "| lexical, fold B (2)",
        "| hybrid, all (4)",
        "| hybrid, fold A (2)",
        "| hybrid, fold B (2)",
    ]
    assert rows[3] == "| hybrid, all (4) | 0.600 / 0.700 | 1.000 / 1.000 | 0.400 / 0.600 | 0.500 | 0.750 | 0.625 |"
    assert "21.5" not in body  # eval's latency is left out by default


def test_quality_latency_only_on_request():
    body = dt.render_quality(EVAL, latency=True)
    assert "| hybrid, all (4) |" in body and "21.5 / 30.25 |" in body


def test_quality_rejects_other_json():
    with pytest.raises(dt.ShapeError, match="bsl-lens eval"):
        dt.render_quality({"bench": "engine"})


def test_bench_table_names_the_machine_and_skips_what_was_not_measured():
    body = dt.render_bench(BENCH, "main abc1234, load 0.6 at the start")
    first = body.splitlines()[0]
    assert first.startswith("`bsl-lens bench` (engine) on `tiny` (38,570 chunks, 31,577 methods); 2 CPUs")
    assert "load average 1.2 / 1.3 / 1.4" in first and "main abc1234" in first
    assert "| cold lexical index (scan, chunk, BM25, names), wall | 14.8 s |" in body
    assert "| query end to end, hybrid (incl. query embedding), p50 / p95 | 21.7 / 37.2 ms |" in body
    assert "| edit one module → searchable (`update_paths` + search, journal on), p50 / p95 | 10.3 / 17.0 ms" in body
    assert "| index size on disk | 254.0 MiB |" in body
    assert "vector" not in body  # no row for a mode the JSON lacks


def test_bench_without_named_rows_lists_every_field():
    body = dt.render_bench({"bench": "lifecycle", "cpu_count": 2, "scales": {"1": {"stop_s": 0.22}}})
    assert "| `scales.1.stop_s` | 0.22 |" in body


def test_region_is_replaced_and_the_rest_kept():
    text = "# t\n\nbefore\n<!-- generated: quality tiny -->\nold\n<!-- end -->\nafter\n"
    new = dt.replace_region(text, "quality tiny", "NEW")
    assert new == "# t\n\nbefore\n<!-- generated: quality tiny -->\n\nNEW\n\n<!-- end -->\nafter\n"
    assert dt.replace_region(new, "quality tiny", "NEW") == new
    with pytest.raises(dt.ShapeError, match="no region"):
        dt.replace_region(text, "quality other", "x")
    with pytest.raises(dt.ShapeError, match="not closed"):
        dt.replace_region("<!-- generated: quality tiny -->\n", "quality tiny", "x")


def test_main_writes_the_region_of_the_file(tmp_path, capsys):
    doc = tmp_path / "quality.md"
    doc.write_text("x\n<!-- generated: quality tiny -->\n<!-- end -->\n", encoding="utf-8")
    src = tmp_path / "eval.json"
    src.write_text(json.dumps(EVAL), encoding="utf-8")
    assert dt.main(["quality", "tiny", str(src), "--doc", str(doc), "--source", "main abc1234"]) == 0
    text = doc.read_text(encoding="utf-8")
    assert "| hybrid, fold B (2) |" in text and text.endswith("<!-- end -->\n")
    assert dt.main(["quality", "missing", str(src), "--doc", str(doc)]) == 2
    assert "no region '<!-- generated: quality missing -->'" in capsys.readouterr().err


RUN = {
    "version": "0.1.0",
    "commit": "abc123def456",
    "date": "2026-12-04T21:58:56Z",
    "cpu_count": 2,
    "load_avg_start": [0.5, 0.6, 0.7],
    "load_avg_end": [1.5, 0.9, 0.8],
}


def test_the_caption_says_where_and_when_from_the_run():
    body = dt.render_quality({**EVAL, "run": RUN})
    first = body.splitlines()[0]
    assert first.endswith(
        "; measured with bsl-lens 0.1.0 at abc123def456, 2026-12-04 21:58 UTC, load average 0.5 / 0.6 / 0.7 "
        "at the start, 1.5 / 0.9 / 0.8 at the end (1 / 5 / 15 min)."
    )
    bench = dt.render_bench({**BENCH, "run": RUN}).splitlines()[0]
    assert "; 2 CPUs; measured with bsl-lens 0.1.0 at abc123def456, 2026-12-04 21:58 UTC" in bench
    assert "as it finished" not in bench  # the run has the load at both ends: said once
    dirty = dt.render_quality({**EVAL, "run": {**RUN, "commit": "abc123def456-dirty"}}).splitlines()[0]
    assert "at abc123def456 with uncommitted changes," in dirty
    installed = dt.render_quality({**EVAL, "run": {**RUN, "commit": None}}).splitlines()[0]
    assert "measured with bsl-lens 0.1.0, 2026-12-04 21:58 UTC" in installed


def test_source_overrides_the_run_and_old_json_needs_it():
    body = dt.render_quality({**EVAL, "run": RUN}, "main abc1234, 2026-12-03")
    assert body.splitlines()[0].endswith("; measured on main abc1234, 2026-12-03.") and "abc123def456" not in body
    assert "measured" not in dt.render_quality(EVAL).splitlines()[0]  # no run, no --source: nothing claimed
    bench = dt.render_bench({**BENCH, "run": RUN}, "a scratch run").splitlines()[0]
    assert "load average 1.2 / 1.3 / 1.4 (1 / 5 / 15 min) as it finished; measured on a scratch run." in bench
    every = dt.render_bench({"bench": "lifecycle", "run": RUN, "scales": {"1": {"stop_s": 0.22}}})
    assert "run." not in every and "| `scales.1.stop_s` | 0.22 |" in every


def test_main_takes_the_run_without_source(tmp_path):
    doc = tmp_path / "performance.md"
    doc.write_text("<!-- generated: bench engine -->\n<!-- end -->\n", encoding="utf-8")
    src = tmp_path / "bench.json"
    src.write_text(json.dumps({**BENCH, "run": RUN}), encoding="utf-8")
    assert dt.main(["bench", "engine", str(src), "--doc", str(doc)]) == 0
    assert "measured with bsl-lens 0.1.0 at abc123def456" in doc.read_text(encoding="utf-8")
