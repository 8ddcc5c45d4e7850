"""The platform help dev gold set is valid against the bundled data set, and its validator
catches what it promises to catch."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "gold"))

import validate_platform_gold as vg  # noqa: E402


def test_the_dev_gold_set_is_valid():
    problems, records = vg.validate()
    assert problems == []
    assert 60 <= len(records) <= 80
    intents = Counter(r["intent"] for r in records)
    assert intents["symbol"] >= 20 and intents["semantic"] >= 30 and intents["crosslingual"] >= 10
    forms = Counter(r["form"] for r in records if r["intent"] == "symbol")
    assert {"exact", "exact_en", "qualified", "qualified_en", "prefix"} <= set(forms)
    assert len({r["query"] for r in records}) == len(records)


def _line(**kw) -> str:
    rec = {"id": "p001", "query": "q", "lang": "ru", "corpus": "platform", "intent": "semantic", "notes": ""}
    rec.update(kw)
    return json.dumps(rec, ensure_ascii=False)


def test_the_validator_catches_bad_records(tmp_path):
    lines = [
        _line(relevant=[{"name": "СтрНайтиВсе", "kind": "function", "grade": 3}]),  # no such entry
        _line(
            id="p002",
            intent="symbol",
            form="exact",
            query="ТаблицаЗначений",
            relevant=[{"name": "ТаблицаЗначений", "kind": "type", "grade": 3}],
        ),  # the constructor is missing
        _line(
            id="p003",
            intent="symbol",
            form="qualified",
            query="Структура.Свойство",
            relevant=[
                {"name": "Структура.Свойство", "kind": "method", "grade": 2},
                {"name": "ФиксированнаяСтруктура.Свойство", "kind": "method", "grade": 3},
            ],
        ),
        _line(id="p003", relevant=[{"name": "СтрНайти", "kind": "function", "grade": 2}]),  # repeated id, no 3
        _line(id="p005", intent="symbol", query="Х", relevant=[{"name": "СтрНайти", "kind": "function", "grade": 3}]),
        _line(id="p006", intent="crosslingual", relevant=[{"name": "СтрНайти", "kind": "function", "grade": 3}]),
        "{not json",
    ]
    path = tmp_path / "gold.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    problems, _ = vg.validate(path)
    text = "\n".join(problems)
    assert "p001: no function 'СтрНайтиВсе' in the data set" in text
    assert "p002: the names channel would also find constructor Новый ТаблицаЗначений" in text
    assert "p003: the qualified name's own entry must be grade 3" in text
    assert "id must be p + 3 digits and unique" in text and "no grade-3 answer" in text
    assert "p005: a symbol query needs form" in text
    assert "p006: a crosslingual query is in English here" in text
    assert "gold.jsonl:7: not JSON" in text
