"""The gold-set folds (daemon/dev/evaluate.py) outside one process: a fresh interpreter gives the
same folds (no hash seed in them), and the real dev gold set splits every intent evenly. The
pure fold tests are in tests/unit/ranking/test_fusion_eval.py."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from shared_paths import EVAL_DIR
from daemon.dev.evaluate import fold_of, load_gold


def test_folds_are_the_same_in_a_fresh_process():
    entries = [
        {"id": f"q{k:03d}", "query": f"запрос {k}", "intent": intent, "corpus": "ssl31-ru", "relevant": []}
        for k, intent in enumerate(["symbol"] * 7 + ["semantic"] * 10 + ["metadata"] * 3 + ["crosslingual"])
    ]
    code = (
        "import json,sys; from daemon.dev.evaluate import fold_of; "
        "print(json.dumps(fold_of(json.loads(sys.stdin.read())), sort_keys=True))"
    )
    other = subprocess.run(
        [sys.executable, "-c", code], input=json.dumps(entries), capture_output=True, text=True, check=True
    )
    assert json.loads(other.stdout) == fold_of(entries)


def test_dev_gold_folds_split_every_intent():
    gold = EVAL_DIR / "gold_dev.jsonl"
    if not gold.exists():
        pytest.skip(f"{gold} not found")
    entries = load_gold(gold)
    folds = fold_of(entries)
    for intent in {e["intent"] for e in entries}:
        a = sum(1 for e in entries if e["intent"] == intent and folds[e["id"]] == "A")
        b = sum(1 for e in entries if e["intent"] == intent and folds[e["id"]] == "B")
        assert abs(a - b) <= 2, (intent, a, b)  # at most one odd entry per corpus
