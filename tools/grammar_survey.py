"""Measure candidate BSL grammars against the careful line scan, per corpus.

Usage::

    python -m tools.grammar_survey CORPUS_DIR [CORPUS_DIR ...] [--markdown]

For each candidate grammar (``tree-sitter-hbk``, ``tree-sitter-bsl``) and each corpus it
reports:

* ``modules``: ``.bsl`` files (EDT trees: only under a ``src`` folder; any folder starting
  with ``.``, e.g. ``.settings/`` with EDT code templates, is skipped: QUIRKS §15);
* ``with ERROR``: modules whose tree contains an ERROR or MISSING node;
* ``scan``: method headers found by :func:`daemon.sources.bsl.scan_method_headers`;
* ``grammar``: method definitions the raw grammar produces (query ``grammars/bsl/methods.scm``,
  anywhere in the tree, including inside ERROR nodes);
* ``matched``: grammar definitions starting on the line of a scanned header;
* ``names exact``: matched definitions whose name node text equals the name in the source
  (both grammars truncate identifiers at ``ё``/``Ё``);
* ``closed``: matched definitions whose last child is a real end keyword on the line the
  chunker uses as the method's end (i.e. the tree's boundary is right);
* ``missed``/``extra``: scanned headers with no definition / definitions on no scanned line;
* ``parse s``: wall time of ``Parser.parse`` alone.

Exit status 0; prints a plain or Markdown table to stdout. Reads files only.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import tree_sitter

from daemon.sources import bsl, bsl_lines


def candidate_grammars() -> dict[str, tree_sitter.Language]:
    """``{"name version": Language}`` for every importable candidate grammar."""
    from importlib.metadata import version

    out = {}
    for dist, mod_name in (("tree-sitter-hbk", "tree_sitter_hbk"), ("tree-sitter-bsl", "tree_sitter_bsl")):
        try:
            mod = __import__(mod_name)
        except ImportError:  # pragma: no cover - both are installed in the dev venv
            continue
        out[f"{dist} {version(dist)}"] = tree_sitter.Language(mod.language())
    return out


def corpus_modules(root: Path) -> list[Path]:
    """The ``.bsl`` modules of one corpus, sorted.

    Skips any path with a component starting with ``.``; if the tree has ``src`` folders
    (EDT projects), keeps only files under one of them.
    """
    files = [p for p in root.rglob("*.bsl") if not any(part.startswith(".") for part in p.relative_to(root).parts)]
    if any("src" in p.relative_to(root).parts for p in files):
        files = [p for p in files if "src" in p.relative_to(root).parts]
    return sorted(files)


@dataclass
class Row:
    """One (grammar, corpus) line of the survey table."""

    grammar: str
    corpus: str
    modules: int = 0
    with_error: int = 0
    scan: int = 0
    grammar_methods: int = 0
    matched: int = 0
    names_exact: int = 0
    closed: int = 0
    missed: int = 0
    extra: int = 0
    parse_s: float = 0.0
    missed_examples: list[str] = field(default_factory=list)


_END_TYPES = ("ENDPROCEDURE_KEYWORD", "ENDFUNCTION_KEYWORD")


def survey(corpora: list[Path]) -> list[Row]:
    """Run the survey; one :class:`Row` per grammar and corpus (grammar-major order)."""
    rows: list[Row] = []
    methods_src = (bsl.grammar_dir() / "methods.scm").read_text(encoding="utf-8")
    loaded = []
    for root in corpora:
        texts = []
        for p in corpus_modules(root):
            rel = p.relative_to(root).as_posix()
            text = p.read_bytes().decode("utf-8", "replace")
            norm = bsl_lines.normalize(text)
            heads = bsl.scan_method_headers(norm)
            chunks = bsl.chunk_module(norm, path=rel, max_lines=1 << 30)
            ends = {c.name_range[0]: c.end_line - 1 for c in chunks if c.kind != "module" and c.part <= 1}
            texts.append((rel, norm, heads, ends))
        loaded.append((root, texts))
    for gname, lang in candidate_grammars().items():
        parser = tree_sitter.Parser(lang)
        cursor = tree_sitter.QueryCursor(tree_sitter.Query(lang, methods_src))
        for root, texts in loaded:
            row = Row(gname, root.name)
            for rel, text, heads, ends in texts:
                data = text.encode("utf-8", "surrogatepass")
                t0 = time.perf_counter()
                tree = parser.parse(data)
                row.parse_s += time.perf_counter() - t0
                row.modules += 1
                if tree.root_node.has_error:
                    row.with_error += 1
                scanned = {line - 1: name for line, name in heads}
                row.scan += len(scanned)
                defs = cursor.captures(tree.root_node).get("method", [])
                row.grammar_methods += len(defs)
                seen_rows = set()
                for node in defs:
                    r = node.start_point.row
                    seen_rows.add(r)
                    if r not in scanned:
                        row.extra += 1
                        continue
                    row.matched += 1
                    name_node = node.child_by_field_name("name")
                    if name_node is not None and name_node.text.decode("utf-8", "replace") == scanned[r]:
                        row.names_exact += 1
                    last = node.child(node.child_count - 1)
                    if last is not None and last.type in _END_TYPES and not last.is_missing:
                        name_row = name_node.start_point.row if name_node is not None else r
                        if ends.get(name_row) == last.start_point.row:
                            row.closed += 1
                for r, name in scanned.items():
                    if r not in seen_rows:
                        row.missed += 1
                        if len(row.missed_examples) < 5:
                            row.missed_examples.append(f"{rel}:{r + 1} {name}")
            rows.append(row)
    return rows


_COLUMNS = [
    ("grammar", "grammar"),
    ("corpus", "corpus"),
    ("modules", "modules"),
    ("with_error", "with ERROR"),
    ("scan", "methods (scan)"),
    ("grammar_methods", "methods (grammar)"),
    ("matched", "matched"),
    ("names_exact", "names exact"),
    ("closed", "end right"),
    ("missed", "missed"),
    ("extra", "extra"),
    ("parse_s", "parse s"),
]


def format_table(rows: list[Row], markdown: bool = True) -> str:
    """Render rows as a Markdown (or aligned plain-text) table."""
    head = [title for _, title in _COLUMNS]
    body = []
    for r in rows:
        cells = []
        for attr, _ in _COLUMNS:
            v = getattr(r, attr)
            cells.append(f"{v:.2f}" if isinstance(v, float) else f"{v:,}" if isinstance(v, int) else str(v))
        body.append(cells)
    if markdown:
        out = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
        out += ["| " + " | ".join(c) + " |" for c in body]
        return "\n".join(out)
    widths = [max(len(x) for x in col) for col in zip(head, *body, strict=True)]
    return "\n".join("  ".join(c.rjust(w) for c, w in zip(line, widths, strict=True)) for line in [head, *body])


def main(argv: list[str] | None = None) -> int:
    """CLI entry point (see the module docstring)."""
    ap = argparse.ArgumentParser(prog="python -m tools.grammar_survey", description=__doc__.split("\n\n")[0])
    ap.add_argument("corpora", nargs="+", type=Path, help="corpus folders (e.g. shared/corpora/ssl31-ru)")
    ap.add_argument("--markdown", action="store_true", help="print a Markdown table")
    args = ap.parse_args(argv)
    rows = survey(args.corpora)
    print(format_table(rows, markdown=args.markdown))
    for r in rows:
        for ex in r.missed_examples:
            print(f"missed by {r.grammar} in {r.corpus}: {ex}", file=sys.stderr)
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
