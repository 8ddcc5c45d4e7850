"""The references kept by the engine like every other channel: per file on each batch, in the
snapshot and the journal, after any sequence of edits equal to a graph built from scratch
(:func:`daemon.index.refgraph.read_references`), rebuilt when a snapshot has none or a damaged one.

A real engine (tree-sitter, lxml, the chunking pass) on a private copy of part of ssl31-ru; each
step changes files the way an editor or a checkout does and hands the changed paths to the engine
as the watcher would (``update_paths``), then compares the whole resolved graph with one read from
disk afresh.
"""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path

import pytest

from daemon.engine import Engine, EngineConfig, Target
from daemon.index.refgraph import RefGraph, read_references
from daemon.index.snapshot import CURRENT_FILE, LEXICAL_DIR, REFS_FILE

#: Part of ssl31-ru: common modules (one global), a catalog with forms and its modules,
#: subscriptions and a scheduled job naming methods of the modules copied.
SUBSET = [
    "Configuration.xml",
    "CommonModules/НапоминанияПользователяГлобальный",
    "CommonModules/НапоминанияПользователяГлобальный.xml",
    "CommonModules/НапоминанияПользователяКлиент",
    "CommonModules/НапоминанияПользователяКлиент.xml",
    "CommonModules/СтроковыеФункцииКлиентСервер",
    "CommonModules/СтроковыеФункцииКлиентСервер.xml",
    "CommonModules/ВариантыОтчетов",
    "CommonModules/ВариантыОтчетов.xml",
    "CommonModules/РаботаСКурсамиВалют",
    "CommonModules/РаботаСКурсамиВалют.xml",
    "Catalogs/Валюты",
    "Catalogs/Валюты.xml",
    "EventSubscriptions/ВариантыОтчетовПриУдаленииПользователя.xml",
    "EventSubscriptions/ВариантыОтчетовПередУдалениемИдентификатораОбъектаМетаданных.xml",
    "ScheduledJobs/ЗагрузкаКурсовВалют.xml",
]
STRINGS = "CommonModules/СтроковыеФункцииКлиентСервер/Ext/Module.bsl"
FORM = "Catalogs/Валюты/Forms/ФормаЭлемента/Ext/Form/Module.bsl"
LAYOUT = "Catalogs/Валюты/Forms/ФормаЭлемента/Ext/Form.xml"
GLOBAL_XML = "CommonModules/НапоминанияПользователяГлобальный.xml"
SUBSCRIPTION = "EventSubscriptions/ВариантыОтчетовПриУдаленииПользователя.xml"


def scratch(root: Path) -> dict:
    """The resolved graph of the files on disk now, built from nothing."""
    records, _skips = read_references(root)
    g = RefGraph()
    g.update(records)
    return g.state()


def same(eng: Engine, root: Path, what: str) -> None:
    """The engine's graph equals a from-scratch build (the first differing part named)."""
    with eng.lock:
        eng.state.refs.resolve_pending()
        got = eng.state.refs.state()
    want = scratch(root)
    diff = [k for k in want if got.get(k) != want[k]]
    assert not diff, f"{what}: the references differ from a build from scratch in {diff}"


def read(p: Path) -> str:
    return p.read_bytes().decode("utf-8-sig")


def write(p: Path, text: str) -> None:
    p.write_text(text, encoding="utf-8")


@pytest.fixture
def export(ssl_ru, tmp_path) -> Path:
    from conftest import copy_corpus

    return copy_corpus(ssl_ru, tmp_path / "export", *SUBSET, link=False)


# ------------------------------------------------------------------------------ the edits
def add_caller(root: Path, rng: random.Random) -> tuple[list[str], list[str]]:
    """A new method in the form module calling a common module's export and naming a handler."""
    p = root / FORM
    n = rng.randrange(1000)
    write(
        p,
        read(p)
        + f"\n&НаКлиенте\nПроцедура Добавленная{n}()\n"
        + '\tСтрока = СтроковыеФункцииКлиентСервер.ПодставитьПараметрыВСтроку("%1", 1);\n'
        + f'\tОписание = Новый ОписаниеОповещения("Добавленная{n}", ЭтотОбъект);\nКонецПроцедуры\n',
    )
    return [FORM], []


def rename_export(root: Path, rng: random.Random) -> tuple[list[str], list[str]]:
    """Rename (or rename back) an exported method its callers call by name."""
    p = root / STRINGS
    text = read(p)
    if "ПодставитьПараметрыВСтрокуНовое(" in text:
        text = text.replace("ПодставитьПараметрыВСтрокуНовое(", "ПодставитьПараметрыВСтроку(")
    else:
        text = text.replace("Функция ПодставитьПараметрыВСтроку(", "Функция ПодставитьПараметрыВСтрокуНовое(")
    write(p, text)
    return [STRINGS], []


def unexport(root: Path, rng: random.Random) -> tuple[list[str], list[str]]:
    """Drop (or restore) the Экспорт of the callee: calls become ``not_exported``."""
    p = root / STRINGS
    text = read(p)
    head = "Функция СтрокаИзПодстрок("
    i = text.find(head)
    if i < 0:
        return [], []
    end = text.find("\n", i)
    line = text[i:end]
    line = line.replace(") Экспорт", ")") if "Экспорт" in line else line + " Экспорт"
    write(p, text[:i] + line + text[end:])
    return [STRINGS], []


def edit_layout(root: Path, rng: random.Random) -> tuple[list[str], list[str]]:
    """Bind (or unbind) a form event in the layout only: the module is re-read with it."""
    p = root / LAYOUT
    text = read(p)
    tag = '<Event name="OnClose">ПриЗакрытииДобавлено</Event>'
    text = text.replace(tag, "") if tag in text else text.replace("<Events>", "<Events>" + tag, 1)
    write(p, text)
    return [LAYOUT], []


def flip_global(root: Path, rng: random.Random) -> tuple[list[str], list[str]]:
    """A common module stops (or starts) being global: bare calls of its exports change."""
    p = root / GLOBAL_XML
    text = read(p)
    text = (
        text.replace("<Global>true</Global>", "<Global>false</Global>")
        if "<Global>true</Global>" in text
        else text.replace("<Global>false</Global>", "<Global>true</Global>")
    )
    write(p, text)
    return [GLOBAL_XML], []


def move_subscription(root: Path, rng: random.Random) -> tuple[list[str], list[str]]:
    """A subscription's handler moves to another method (and back)."""
    p = root / SUBSCRIPTION
    text = read(p)
    a, b = "ВариантыОтчетов.ПриУдаленииПользователя<", "ВариантыОтчетов.ПередУдалениемИдентификатораОбъектаМетаданных<"
    write(p, text.replace(a, b) if a in text else text.replace(b, a))
    return [SUBSCRIPTION], []


def rename_module_folder(root: Path, rng: random.Random) -> tuple[list[str], list[str]]:
    """Rename a common module (folder and descriptor), as a refactoring tool does."""
    old, new = "НапоминанияПользователяКлиент", "НапоминанияПользователяКлиентНовый"
    if not (root / "CommonModules" / old).exists():
        old, new = new, old
    os.rename(root / "CommonModules" / old, root / "CommonModules" / new)
    os.rename(root / "CommonModules" / f"{old}.xml", root / "CommonModules" / f"{new}.xml")
    return [f"CommonModules/{old}.xml", f"CommonModules/{new}.xml"], [f"CommonModules/{old}", f"CommonModules/{new}"]


def delete_form_module(root: Path, rng: random.Random) -> tuple[list[str], list[str]]:
    """Delete a form's module (its layout's bindings go with it), or put it back."""
    p = root / "Catalogs/Валюты/Forms/ФормаСписка/Ext/Form/Module.bsl"
    keep = p.with_name("Module.bsl.keep")
    if p.exists():
        shutil.move(p, keep)
    elif keep.exists():
        shutil.move(keep, p)
    return [str(p.relative_to(root))], []


def break_syntax(root: Path, rng: random.Random) -> tuple[list[str], list[str]]:
    """Add a method that does not parse in front of a good one: the good one keeps its calls."""
    p = root / "Catalogs/Валюты/Ext/ObjectModule.bsl"
    write(
        p,
        read(p)
        + "\nПроцедура Сломанная(\n\tЕсли Тогда ((\nКонецПроцедуры\n"
        + 'Процедура Целая()\n\tСтроковыеФункцииКлиентСервер.ПодставитьПараметрыВСтроку("%1", 2);\nКонецПроцедуры\n',
    )
    return ["Catalogs/Валюты/Ext/ObjectModule.bsl"], []


EDITS = [
    add_caller,
    rename_export,
    unexport,
    edit_layout,
    flip_global,
    move_subscription,
    rename_module_folder,
    delete_form_module,
    break_syntax,
]


# ------------------------------------------------------------------------------ tests
def test_edits_keep_the_references_equal_to_a_build_from_scratch(export, tmp_path):
    eng = Engine.open(export, index_dir=tmp_path / "idx")
    eng.journal_on = True
    eng.refresh()
    eng.save()  # a generation for the journal to extend
    same(eng, export, "first index")
    rng = random.Random(27)
    steps = EDITS + [rng.choice(EDITS) for _ in range(8)]
    for edit in steps:
        paths, dirs = edit(export, rng)
        eng.update_paths(paths, dirs)
        same(eng, export, edit.__name__)
    # a fresh engine loads the snapshot and replays the journal: the same graph
    again = Engine.open(export, index_dir=tmp_path / "idx")
    assert again.refs_status().building is False
    same(again, export, "snapshot + journal")
    # and after a snapshot of the edited state
    eng.save()
    same(Engine.open(export, index_dir=tmp_path / "idx"), export, "the snapshot after the edits")


def test_the_answers_follow_an_edit(export, tmp_path):
    eng = Engine.open(export, index_dir=tmp_path / "idx")
    eng.refresh()
    name = "СтроковыеФункцииКлиентСервер.ПодставитьПараметрыВСтроку"
    before = eng.references(Target(name=name), limit=10_000)
    assert before.total > 10 and before.counts.resolved == before.total and not before.truncated
    paths, _ = add_caller(export, random.Random(1))
    eng.update_paths(paths)
    after = eng.references(Target(name=name), limit=10_000)
    assert after.total == before.total + 1
    new = [r for r in after.references if r.caller and "Добавленная" in r.caller]
    assert [(r.path, r.kind) for r in new] == [(FORM, "member")]
    # the new method is named by a string in its own module
    mine = eng.references(Target(method=new[0].caller))
    assert [r.kind for r in mine.references] == ["notify"]
    # go to definition on the call: the exported function
    d = eng.definition(FORM, new[0].line, new[0].col + 1)
    assert d.site is not None and [m.id for m in d.targets] == [after.targets[0].id]
    assert d.method is not None and d.method.id == new[0].caller


def test_a_snapshot_without_references_is_rebuilt_by_the_next_reconcile(export, tmp_path):
    idx = tmp_path / "idx"
    eng = Engine.open(export, index_dir=idx)
    eng.refresh()
    eng.save()
    gen = (idx / LEXICAL_DIR / CURRENT_FILE).read_text().strip()
    part = idx / LEXICAL_DIR / gen / REFS_FILE
    assert part.is_file()
    part.unlink()  # a generation written before the references existed
    old = Engine.open(export, index_dir=idx)
    st = old.refs_status()
    assert st.building and st.files == 0
    assert old.references(Target(name="ПодставитьПараметрыВСтроку")).building
    report = old.refresh()
    assert report.files_changed == 0  # the chunks did not change: only the references were read
    assert not old.refs_status().building
    same(old, export, "rebuilt after a snapshot without references")
    old.save()
    part = idx / LEXICAL_DIR / (idx / LEXICAL_DIR / CURRENT_FILE).read_text().strip() / REFS_FILE
    part.write_bytes(b"BSLREFS1 damaged")  # a damaged part: logged, rebuilt the same way
    damaged = Engine.open(export, index_dir=idx)
    assert damaged.refs_status().building
    damaged.refresh()
    same(damaged, export, "rebuilt after a damaged part")


def test_a_rebuild_reads_the_references_of_files_touched_but_not_changed(export, tmp_path):
    """While the references are rebuilt, a file whose stat changed but whose text did not (a
    copy of the export, a checkout) is read for its references too: the graph is whole."""
    idx = tmp_path / "idx"
    eng = Engine.open(export, index_dir=idx)
    eng.refresh()
    eng.save()
    gen = (idx / LEXICAL_DIR / CURRENT_FILE).read_text().strip()
    (idx / LEXICAL_DIR / gen / REFS_FILE).unlink()  # a generation without references
    later = os.stat(export).st_mtime + 100
    for p in export.rglob("*"):
        if p.is_file():
            os.utime(p, (later, later))
    old = Engine.open(export, index_dir=idx)
    report = old.refresh()
    assert report.files_changed == 0  # the same texts: no chunk changed
    assert not old.refs_status().building
    same(old, export, "rebuilt with every file touched")


def test_an_in_process_search_resolves_the_pending_references_its_fan_in_reads(export, tmp_path):
    eng = Engine.open(export, index_dir=tmp_path / "idx")
    eng.refresh()
    assert eng.state.refs.pending  # a first index leaves the resolution for later
    eng.search("ПодставитьПараметрыВСтроку", mode="lexical", top_k=3)
    assert eng.state.refs.pending == 0  # names_fanin_weight orders equal matches by resolved callers
    eng.save()
    assert Engine.open(export, index_dir=tmp_path / "idx").state.refs.pending == 0  # saved resolved


def test_the_lines_of_code_from_the_index_are_the_files_lines(export, tmp_path):
    """A reference's line of code comes from the indexed method that holds it (no file read):
    every line given is the file's line, and most lines of a module are given."""
    eng = Engine.open(export, index_dir=tmp_path / "idx")
    eng.refresh()
    given = total = 0
    for rel in sorted(p for p in eng.files if p.endswith(".bsl")):
        text = (export / rel).read_bytes().decode("utf-8-sig")
        lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        got = eng.source_lines(rel, set(range(len(lines) + 3)))
        assert all(got[i] == lines[i] for i in got), rel
        given, total = given + len(got), total + len(lines)
    assert total > 1000 and given > total // 2, (given, total)


def test_the_cost_switch_leaves_the_chunks_and_reads_no_references(export, tmp_path):
    """``EngineConfig(references=False)`` (``bench --no-references``): the same chunks, no
    references read; a different lexical fingerprint, so such an index is never mistaken for one
    with references."""
    with_refs = Engine.open(export, index_dir=tmp_path / "a")
    with_refs.refresh()
    without = Engine.open(export, index_dir=tmp_path / "b", config=EngineConfig(references=False))
    without.refresh()
    assert sorted(without.chunks) == sorted(with_refs.chunks)
    assert with_refs.refs_status().sites > 0 and without.refs_status().sites == 0
    assert EngineConfig(references=False).lexical_fingerprint() != EngineConfig().lexical_fingerprint()


def test_a_broken_binding_is_a_named_skip_and_the_rest_stays(export, tmp_path):
    p = export / SUBSCRIPTION
    write(p, read(p).replace("CommonModule.ВариантыОтчетов.ПриУдаленииПользователя", "это не метод!"))
    eng = Engine.open(export, index_dir=tmp_path / "idx")
    eng.refresh()
    skips = [k for k in eng.skipped_files() if k.path == SUBSCRIPTION]
    assert [k.reason for k in skips] == ["bad_binding"] and "names no method" in skips[0].detail
    assert SUBSCRIPTION in eng.files  # the descriptor itself is indexed
    assert SUBSCRIPTION not in eng.skipped_indexed()  # and not reported stale
    other = "CommonModules/ВариантыОтчетов/Ext/Module.bsl::ПередУдалениемИдентификатораОбъектаМетаданных"
    assert [r.kind for r in eng.references(Target(method=other)).references] == ["subscription"]


def test_fan_in_counts_the_sites_in_other_files(export, tmp_path):
    eng = Engine.open(export, index_dir=tmp_path / "idx")
    eng.refresh()
    method = f"{STRINGS}::ПодставитьПараметрыВСтроку"
    refs = eng.references(Target(method=method), limit=10_000).references
    foreign = [r for r in refs if r.path != STRINGS]
    assert len(foreign) > 5
    chunk = next(c.id for c in eng.file_chunks(STRINGS) if c.name == "ПодставитьПараметрыВСтроку")
    never = next(c.id for c in eng.file_chunks(FORM) if c.kind == "procedure")
    assert eng.fan_in([chunk, never, "нет::такого"]) == [len(foreign), 0, 0]
