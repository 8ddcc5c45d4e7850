"""The saved references (``refs.bin``) are a function of the indexed content alone: the order the
files arrive in, deferred batches, and edits undone or replayed leave the same bytes as one build
from scratch, on the bundled sample export (real tree-sitter, the engine's own snapshot)."""

from __future__ import annotations

import random

from daemon.engine import CURRENT_FILE, LEXICAL_DIR, Engine
from daemon.index.refgraph import RefGraph, read_references
from daemon.index.snapshot import REFS_FILE

NEW_MODULE = "CommonModules/НовыйМодуль/Ext/Module.bsl"
CONTRACTORS = "CommonModules/РаботаСКонтрагентами/Ext/Module.bsl"
NEW_TEXT = "Процедура Новая() Экспорт\n\tРаботаСКонтрагентами.КонтрагентПоИНН(1);\n\tНовая();\nКонецПроцедуры\n"


def _records(root):
    """A fresh read of the export's records (a graph owns the records it is given)."""
    recs, _skips = read_references(root)
    assert len(recs) > 10 and sum(r.count for r in recs) > 50
    return recs


def test_the_bytes_do_not_depend_on_the_file_order_or_the_batches(sample_root):
    ref = RefGraph()
    ref.update(_records(sample_root))
    expected = ref.to_bytes()

    backwards = RefGraph()
    backwards.update(list(reversed(_records(sample_root))))
    assert backwards.to_bytes() == expected

    rnd = random.Random(3)
    recs = _records(sample_root)
    rnd.shuffle(recs)
    batched = RefGraph()
    for k in range(0, len(recs), 4):
        batched.update(recs[k : k + 4], defer=True)
    batched.update()
    assert batched.to_bytes() == expected

    assert RefGraph.from_bytes(expected).to_bytes() == expected  # a load saves what it read


def test_edits_leave_the_bytes_of_a_build_from_scratch(sample_root):
    g = RefGraph()
    g.update(_records(sample_root))
    recs = {r.path: r for r in _records(sample_root)}
    common = [p for p in sorted(recs) if p.startswith("CommonModules/")]
    assert len(common) > 1
    g.update(removed=common)  # their callers are resolved again, then once more on the way back
    g.update([recs[p] for p in reversed(common)])
    gone = next(p for p in sorted(recs) if p.endswith("ManagerModule.bsl"))
    g.update(removed=[gone])  # its file id stays taken in the graph
    scratch = RefGraph()
    scratch.update(r for r in _records(sample_root) if r.path != gone)
    assert g.state() == scratch.state()
    assert g.to_bytes() == scratch.to_bytes()


def _refs_bytes(index_dir) -> bytes:
    lex = index_dir / LEXICAL_DIR
    return (lex / (lex / CURRENT_FILE).read_text().strip() / REFS_FILE).read_bytes()


def _build(root, index_dir) -> Engine:
    e = Engine.open(root, index_dir=index_dir, embedder=None)
    e.refresh()
    e.resolve_references()
    e.save()
    return e


def test_a_snapshot_after_edits_equals_a_fresh_build(sample_root, tmp_path):
    _build(sample_root, tmp_path / "first")
    _build(sample_root, tmp_path / "again")
    assert _refs_bytes(tmp_path / "first") == _refs_bytes(tmp_path / "again")

    edited = _build(sample_root, tmp_path / "edited")
    (sample_root / NEW_MODULE).parent.mkdir(parents=True)
    (sample_root / NEW_MODULE).write_text(NEW_TEXT, encoding="utf-8")
    gone = next(p for p in sorted(sample_root.glob("Catalogs/*/Ext/ManagerModule.bsl")))
    gone.unlink()
    edited.refresh()
    edited.resolve_references()
    edited.save()
    called = edited.state.refs.references(f"{CONTRACTORS}::КонтрагентПоИНН")
    assert NEW_MODULE in {r.path for r in called.references}  # the edit was resolved before the save

    _build(sample_root, tmp_path / "fresh")
    assert _refs_bytes(tmp_path / "edited") == _refs_bytes(tmp_path / "fresh")
