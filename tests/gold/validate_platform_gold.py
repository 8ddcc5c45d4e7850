"""Check the platform help gold set against the bundled data set.

Usage: ``python tests/gold/validate_platform_gold.py [GOLD.jsonl]`` (default: the
``platform_dev.jsonl`` next to this file); exit 1 with one line per problem.

A record (one JSON object per line, UTF-8), in the spirit of ``shared/eval/README.md``::

    {"id": "p001", "query": "как найти подстроку в строке", "lang": "ru", "corpus": "platform",
     "intent": "semantic", "relevant": [{"name": "СтрНайти", "kind": "function", "grade": 3}],
     "notes": "why these answers and grades"}

* ``id``: ``p`` + 3 digits, unique; ``lang``: ``ru`` | ``en``; ``corpus``: ``platform``;
* ``intent``: ``symbol`` (what a developer types into symbol search: ``form`` says which:
  ``exact``, ``exact_en``, ``qualified``, ``qualified_en``, ``prefix``, ``lowercase``, ``yo``
  (typed with ё where the name has е), ``camelhump``), ``semantic`` (a Russian question by
  meaning), ``crosslingual`` (an English question; the data set describes in Russian);
* ``relevant``: ``{name, kind, grade}``: ``name`` the qualified Russian name
  (``ТаблицаЗначений.Свернуть``, ``КодировкаТекста.UTF8``, ``Новый HTTPЗапрос`` for a
  constructor, the name for the global context, types and enumerations), ``kind`` an entry
  kind, ``grade`` 3 (the answer), 2 (a close alternative: the deprecated or asynchronous
  twin, the type whose method answers), 1 (related); at least one 3.

Checks: the schema; every answer exists in the data set; for symbol queries the answer set is
complete the way the names channel would find it: every entry whose Russian or English name
(folded, ё as е) equals the query (``exact``, ``exact_en``, ``lowercase``, ``yo``), starts
with it (``prefix``), matches its humps from the first word on (``camelhump``), or whose
qualified name equals it (``qualified``, ``qualified_en``), and the target of a qualified
query is grade 3.
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from daemon.index.names_words import humps  # noqa: E402
from daemon.sources.platform.entries import ENTRY_KINDS, Entry  # noqa: E402
from daemon.sources.platform.globals_json import load_globals  # noqa: E402
from daemon.text.folding import fold, split_words  # noqa: E402

GOLD = Path(__file__).with_name("platform_dev.jsonl")
INTENTS = ("symbol", "semantic", "crosslingual")
FORMS = ("exact", "exact_en", "qualified", "qualified_en", "prefix", "lowercase", "yo", "camelhump")
_ID = re.compile(r"^p\d{3}$")


def _f(text: str) -> str:
    return fold(text).replace("ё", "е")


def _hump_match(query: str, name: str) -> bool:
    q = humps(query)
    if len(q) < 2:
        return False
    for words in ([_f(w) for w in humps(name)], [_f(w) for w in split_words(name)]):
        if len(words) >= len(q) and all(w.startswith(h) for w, h in zip(words, q, strict=False)):
            return True
    return False


def expected_set(form: str, query: str, entries: list[Entry]) -> set[tuple[str, str]]:
    """``{(kind, qualified)}`` a complete answer of a symbol query must list."""
    q = _f(query)
    out: set[tuple[str, str]] = set()
    for e in entries:
        names = [_f(e.name), _f(e.name_en)] if e.name_en else [_f(e.name)]
        if form in ("exact", "exact_en", "lowercase", "yo"):
            hit = q in names
        elif form == "prefix":
            hit = any(n.startswith(q) for n in names)
        elif form == "camelhump":
            hit = _hump_match(query, e.name) or bool(e.name_en and _hump_match(query, e.name_en))
        else:
            hit = q in (_f(e.qualified), _f(e.qualified_en))
        if hit:
            out.add((e.kind, e.qualified))
    return out


def validate(path: Path = GOLD) -> tuple[list[str], list[dict]]:
    """``(problems, records)``: one sentence per problem, naming the line."""
    entries = load_globals().entries
    by_key = {(e.kind, e.qualified): e for e in entries}
    problems: list[str] = []
    records: list[dict] = []
    ids: set[str] = set()
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path.name}:{n}"
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as exc:
            problems.append(f"{where}: not JSON ({exc})")
            continue
        records.append(rec)
        rid = rec.get("id", "")
        where = f"{where} {rid}"
        if not isinstance(rid, str) or not _ID.match(rid) or rid in ids:
            problems.append(f"{where}: id must be p + 3 digits and unique")
        ids.add(rid)
        if not isinstance(rec.get("query"), str) or not rec["query"].strip():
            problems.append(f"{where}: empty query")
            continue
        if rec.get("lang") not in ("ru", "en") or rec.get("corpus") != "platform":
            problems.append(f"{where}: lang must be ru|en and corpus platform")
        intent = rec.get("intent")
        if intent not in INTENTS:
            problems.append(f"{where}: intent {intent!r} is not one of {INTENTS}")
        if intent == "symbol" and rec.get("form") not in FORMS:
            problems.append(f"{where}: a symbol query needs form, one of {FORMS}")
        if intent == "crosslingual" and rec.get("lang") != "en":
            problems.append(f"{where}: a crosslingual query is in English here")
        if not isinstance(rec.get("notes"), str):
            problems.append(f"{where}: notes must be a string")
        rel = rec.get("relevant")
        if not isinstance(rel, list) or not rel:
            problems.append(f"{where}: relevant must be a non-empty list")
            continue
        listed: dict[tuple[str, str], int] = {}
        for item in rel:
            if not isinstance(item, dict) or set(item) != {"name", "kind", "grade"}:
                problems.append(f"{where}: a relevant item is {{name, kind, grade}}: {item!r}")
                continue
            key = (item["kind"], item["name"])
            if item["kind"] not in ENTRY_KINDS:
                problems.append(f"{where}: kind {item['kind']!r} is not an entry kind")
            elif key not in by_key:
                problems.append(f"{where}: no {item['kind']} {item['name']!r} in the data set")
            if item["grade"] not in (1, 2, 3):
                problems.append(f"{where}: grade must be 1, 2 or 3: {item!r}")
            if key in listed:
                problems.append(f"{where}: {item['name']} listed twice")
            listed[key] = item["grade"]
        if 3 not in listed.values():
            problems.append(f"{where}: no grade-3 answer")
        if intent == "symbol" and rec.get("form") in FORMS:
            need = expected_set(rec["form"], rec["query"], entries)
            missing = sorted(f"{k} {q}" for k, q in need - set(listed))
            if missing:
                problems.append(f"{where}: the names channel would also find {', '.join(missing)}")
            if not need:
                problems.append(f"{where}: the query matches no name in the data set as a {rec['form']}")
            if rec["form"].startswith("qualified") and not any(listed.get(k) == 3 for k in need):
                problems.append(f"{where}: the qualified name's own entry must be grade 3")
    return problems, records


def main(argv: list[str] | None = None) -> int:
    """Validate and print a summary; the exit code is the verdict."""
    args = sys.argv[1:] if argv is None else argv
    path = Path(args[0]) if args else GOLD
    problems, records = validate(path)
    for p in problems:
        print(p)
    intents = Counter(r.get("intent") for r in records)
    forms = Counter(r.get("form") for r in records if r.get("intent") == "symbol")
    print(f"{len(records)} queries: " + ", ".join(f"{k} {v}" for k, v in sorted(intents.items())))
    print("symbol forms: " + ", ".join(f"{k} {v}" for k, v in sorted(forms.items())))
    print("OK" if not problems else f"{len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
