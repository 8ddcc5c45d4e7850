"""Retrieval quality against a graded gold set, exactly as ``shared/eval/README.md`` defines.

Per query and level (``symbol``: key = (path, symbol); ``file``: key = path, grade = max over
the file's items): deduplicate the ranked hits before the cut, take the top 10,
gain = 2^grade − 1, DCG@10 = Σ gain_i / log2(i + 1) (1-based i), IDCG@10 over the gold items
sorted by grade; MRR@10 = 1 / rank of the first hit with grade ≥ 1; Recall@10 = distinct gold
keys in the top 10 / gold keys; Hit@1 = first hit has grade 3. Scores are macro-averaged
over queries, overall and per intent.
"""

from __future__ import annotations

import hashlib
import json
import math
import unicodedata
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

METRICS = ("ndcg@10", "mrr@10", "recall@10", "hit@1")
LEVELS = ("symbol", "file")
#: The two fixed folds of a gold set (:func:`fold_of`): tune on one, report the other, swap.
FOLDS = ("A", "B")


def _p(path: str) -> str:
    path = path.replace("\\", "/")
    while path.startswith("./"):
        path = path[2:]
    return unicodedata.normalize("NFC", path)


def _s(sym: str | None) -> str | None:
    return None if sym is None else unicodedata.normalize("NFC", sym).casefold()


def score(entry: dict, hits: Sequence[tuple[str, str | None]], level: str = "symbol", k: int = 10) -> dict[str, float]:
    """Score one gold entry against ranked hits ``[(path, symbol_or_None), ...]``.

    This is the reference implementation from ``shared/eval/README.md`` (kept verbatim in
    behaviour). Returns ``{"ndcg@10", "mrr@10", "recall@10", "hit@1"}``, each in [0, 1].
    Raises ``ValueError`` for an unknown level.
    """
    if level not in LEVELS:
        raise ValueError(f"level must be one of {LEVELS}, got {level!r}")
    key = (lambda p, s: (_p(p), _s(s))) if level == "symbol" else (lambda p, s: _p(p))
    grade: dict = {}
    for r in entry["relevant"]:
        kk = key(r["path"], r["symbol"])
        grade[kk] = max(grade.get(kk, 0), r["grade"])
    seen, ranked = set(), []
    for p, s in hits:
        kk = key(p, s)
        if kk not in seen:
            seen.add(kk)
            ranked.append(kk)
    ranked = ranked[:k]
    gains = [2 ** grade.get(kk, 0) - 1 for kk in ranked]
    dcg = sum(g / math.log2(i + 2) for i, g in enumerate(gains))
    ideal = sorted((2**g - 1 for g in grade.values()), reverse=True)[:k]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    first = next((i for i, kk in enumerate(ranked) if grade.get(kk, 0) >= 1), None)
    return {
        "ndcg@10": dcg / idcg if idcg else 0.0,
        "mrr@10": 0.0 if first is None else 1.0 / (first + 1),
        "recall@10": sum(1 for kk in ranked if kk in grade) / len(grade),
        "hit@1": 1.0 if ranked and grade.get(ranked[0], 0) == 3 else 0.0,
    }


def load_gold(path: Path, corpus: str | None = None) -> list[dict]:
    """Read a gold JSONL file; keep only entries whose ``corpus`` equals ``corpus`` if given.

    Raises ``ValueError`` naming the line for a line that is not a gold entry: a JSON object
    with a string ``query``, a string ``intent`` and a non-empty list ``relevant`` of
    ``{"path": str, "symbol": str | null, "grade": 0..3}``. ``OSError`` if it cannot be read.
    """
    out = []
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{path}: is a directory, not a gold JSONL file")
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{n}: not JSON: {exc}") from exc
            _heading_as_symbol(entry)
            _platform_item_keys(entry)
            problem = _entry_problem(entry)
            if problem:
                raise ValueError(f"{path}:{n}: {problem}")
            if corpus is None or entry.get("corpus") == corpus:
                out.append(entry)
    return out


def _heading_as_symbol(entry) -> None:
    """The documentation gold set names the answering heading ``heading`` where the code
    set has ``symbol`` (``shared/eval/README.md``, "Documentation gold set"); the score
    reads it as the symbol."""
    if isinstance(entry, dict) and isinstance(entry.get("relevant"), list):
        for r in entry["relevant"]:
            if isinstance(r, dict) and "heading" in r and "symbol" not in r:
                r["symbol"] = r["heading"]


#: The ``path`` of every platform gold item and hit key (:func:`platform_key`): a platform entry
#: has no file, its identity is its kind and qualified name.
PLATFORM_PATH = "platform"


def platform_key(kind: str, qualified: str) -> tuple[str, str]:
    """The gold key of a platform entry: ``("platform", "<entry kind>:<qualified name>")``
    (``function:СтрНайти``, ``constructor:Новый ТаблицаЗначений``); ``kind`` with or without the
    chunk prefix ``platform_``."""
    return PLATFORM_PATH, f"{kind.removeprefix('platform_')}:{qualified}"


def _platform_item_keys(entry) -> None:
    """The platform gold set (``tests/gold/platform_dev.jsonl``) names each answer by ``name``
    (the qualified Russian name) and ``kind``; the score reads it as :func:`platform_key`."""
    if isinstance(entry, dict) and isinstance(entry.get("relevant"), list):
        for r in entry["relevant"]:
            if isinstance(r, dict) and "name" in r and "kind" in r and "path" not in r:
                r["path"], r["symbol"] = platform_key(str(r["kind"]), str(r["name"]))


def is_platform_entry(entry: dict) -> bool:
    """True for an entry of the platform gold set (every item keyed by :func:`platform_key`)."""
    return bool(entry.get("relevant")) and all(r.get("path") == PLATFORM_PATH for r in entry["relevant"])


def is_docs_entry(entry: dict) -> bool:
    """True for an entry of the documentation gold set (its items have ``heading``)."""
    return any("heading" in r for r in entry.get("relevant", []))


def docs_heading_key(entry: dict, path: str, chain: Sequence[str]) -> str | None:
    """The heading-level key of a docs hit (``shared/eval/README.md``): the deepest heading
    of the hit's chain (H1 > H2 > ..., outermost first) that the gold lists for ``path``;
    else ``None`` when the gold has a whole-file (``null``) item for the path; else the
    nearest heading (grade 0). Headings compare after NFC, trimming and casefolding."""
    listed = {
        _s(r["symbol"].strip()) for r in entry["relevant"] if _p(r["path"]) == _p(path) and r["symbol"] is not None
    }
    for h in reversed(list(chain)):
        if _s(h.strip()) in listed:
            return h
    if any(_p(r["path"]) == _p(path) and r["symbol"] is None for r in entry["relevant"]):
        return None
    return chain[-1] if chain else None


def _entry_problem(entry) -> str | None:
    if not isinstance(entry, dict) or not {"query", "intent", "relevant"} <= entry.keys():
        return "a gold entry needs query, intent and relevant"
    if not isinstance(entry["query"], str) or not isinstance(entry["intent"], str):
        return "query and intent must be strings"
    rel = entry["relevant"]
    if not isinstance(rel, list) or not rel:
        return "relevant must be a non-empty list"
    for r in rel:
        if not isinstance(r, dict) or not isinstance(r.get("path"), str) or "symbol" not in r:
            return 'each relevant item needs "path" (string) and "symbol" (string or null)'
        if r["symbol"] is not None and not isinstance(r["symbol"], str):
            return '"symbol" must be a string or null'
        if not isinstance(r.get("grade"), int) or isinstance(r["grade"], bool) or not 0 <= r["grade"] <= 3:
            return '"grade" must be an integer 0..3'
    return None


def _fold_rank(entry_id: str) -> str:
    return hashlib.sha256(entry_id.encode("utf-8")).hexdigest()


def fold_of(entries: Iterable[dict]) -> dict[str, str]:
    """Assign each gold entry to fold ``"A"`` or ``"B"``: ``{id: fold}``.

    Deterministic and stratified: within each stratum (``intent`` × ``corpus``) the entries
    are ordered by the SHA-256 of their ``id`` and dealt alternately to A and B, starting
    with A. So every stratum splits evenly (A gets the odd one out) and an entry's fold
    depends only on the ids of its stratum: the same file always gives the same folds, on
    any machine and Python version (no ``hash()`` randomisation, no RNG). Entries without an
    ``id`` are keyed by their query text. The folds exist so that a tuned constant is
    checked on queries it was not tuned on; the split keeps no list
    of queries anywhere. Raises ``ValueError`` for two entries with the same id.
    """
    strata: dict[tuple[str, str], list[str]] = defaultdict(list)
    seen: set[str] = set()
    for e in entries:
        eid = str(e.get("id") or e["query"])
        if eid in seen:
            raise ValueError(f"gold id {eid!r} occurs twice; folds need unique ids")
        seen.add(eid)
        strata[(str(e.get("intent")), str(e.get("corpus")))].append(eid)
    out: dict[str, str] = {}
    for ids in strata.values():
        for i, eid in enumerate(sorted(ids, key=_fold_rank)):
            out[eid] = FOLDS[i % 2]
    return out


def summarize(per_query: Sequence[dict]) -> dict:
    """Macro-averages of :func:`evaluate`'s ``per_query`` rows (or any subset of them):
    ``{"n", "overall": {level: {metric: mean}}, "by_intent": {intent: {"n", level: {...}}}}``."""

    def mean(rows: Sequence[dict]) -> dict:
        return {
            level: {m: (sum(r[level][m] for r in rows) / len(rows) if rows else 0.0) for m in METRICS}
            for level in LEVELS
        }

    by_intent: dict[str, list[dict]] = defaultdict(list)
    for row in per_query:
        by_intent[row["intent"]].append(row)
    return {
        "n": len(per_query),
        "overall": mean(per_query),
        "by_intent": {i: {"n": len(rows), **mean(rows)} for i, rows in sorted(by_intent.items())},
    }


def fold_results(result: dict, folds: dict[str, str]) -> dict[str, dict]:
    """Split an :func:`evaluate` result by fold: ``{"A": summary, "B": summary}`` (see
    :func:`summarize`), from its ``per_query`` rows (no query is run again)."""
    return {
        f: summarize([row for row in result["per_query"] if folds.get(str(row.get("id") or row["query"])) == f])
        for f in FOLDS
    }


def evaluate(
    entries: Iterable[dict],
    run: Callable[[str], Sequence[tuple[str, str | None]]],
) -> dict:
    """Run every gold query through ``run(query) -> ranked [(path, symbol)]`` and average.

    Returns ``{"n": count, "overall": {level: {metric: mean}}, "by_intent": {intent: {"n":
    count, level: {metric: mean}}}, "per_query": [{"id", "intent", level: {...}}]}``.
    """
    per_query = []
    for entry in entries:
        hits = list(run(entry["query"]))
        row = {"id": entry.get("id"), "query": entry["query"], "intent": entry["intent"]}
        for level in LEVELS:
            row[level] = score(entry, hits, level)
        per_query.append(row)
    return {**summarize(per_query), "per_query": per_query}
