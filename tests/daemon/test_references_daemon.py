"""Find usages through a real daemon process and its socket, on a private copy of part of ssl31-ru:
each binding kind on a real SSL case, answers that follow edits, renames and deletions seen by the
watcher and equal those of a graph built from scratch, through a restart and a ``kill -9``; bad
input (a broken binding named in status, a module that does not parse, recursion); the CLI.

Every wait polls with a deadline (tests/daemon_helpers.wait_until); nothing asserts a time.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from daemon_helpers import wait_until

from daemon.client import CommandError
from daemon.index.refgraph import RefGraph, read_references

SUBSET = [
    "Configuration.xml",
    "CommonModules/ВариантыОтчетов",
    "CommonModules/ВариантыОтчетов.xml",
    "CommonModules/РаботаСКурсамиВалют",
    "CommonModules/РаботаСКурсамиВалют.xml",
    "CommonModules/РаботаСКурсамиВалютЛокализация",
    "CommonModules/РаботаСКурсамиВалютЛокализация.xml",
    "CommonModules/СтроковыеФункцииКлиентСервер",
    "CommonModules/СтроковыеФункцииКлиентСервер.xml",
    "Catalogs/Валюты",
    "Catalogs/Валюты.xml",
    "EventSubscriptions/ВариантыОтчетовПриУдаленииПользователя.xml",
    "ScheduledJobs/ЗагрузкаКурсовВалют.xml",
]
WATCHED = ("--embedder", "none", "--watch", "auto")
STRINGS = "CommonModules/СтроковыеФункцииКлиентСервер"
PODSTAVIT = "СтроковыеФункцииКлиентСервер.ПодставитьПараметрыВСтроку"
FORM = "Catalogs/Валюты/Forms/ФормаЭлемента/Ext/Form/Module.bsl"
LIST_FORM = "Catalogs/Валюты/Forms/ФормаСписка/Ext/Form/Module.bsl"


def _sites(answer) -> list[tuple]:
    return [(r.path, r.line, r.col, r.end, r.kind, r.caller, r.target) for r in answer.references]


def _scratch(root: Path) -> RefGraph:
    records, _ = read_references(root)
    g = RefGraph()
    g.update(records)
    return g


def _same_as_scratch(c, root: Path, names: list[str]) -> None:
    """The daemon's answers for ``names`` (Модуль.Метод) equal a graph read from disk now."""
    g = _scratch(root)
    for name in names:
        want = [t for t in g.methods_named(name)]
        try:
            got = c.references(name, limit=10_000)
        except CommandError:
            assert not want, f"{name}: the daemon has no method, the files have {want}"
            continue
        assert [m.id for m in got.targets] == want, name
        expected = sorted(
            (r.path, r.line, r.col, r.end, r.kind, r.caller, r.target)
            for t in want
            for r in g.references(t, limit=10**6).references
        )
        assert sorted(_sites(got)) == expected, name


@pytest.fixture
def live(daemons, ssl_ru, tmp_path):
    from conftest import copy_corpus

    root = copy_corpus(ssl_ru, tmp_path / "export", *SUBSET, link=False)
    d = daemons.start(root, *WATCHED, wait_idle=True)
    with d.client() as c:
        wait_until(lambda: c.status().service.references.resolving == 0, what="references resolved")
        yield d, c


def test_every_binding_kind_through_the_daemon(live):
    d, c = live
    cases = {
        "ВариантыОтчетов.ПриУдаленииПользователя": (
            "subscription",
            "EventSubscriptions/ВариантыОтчетовПриУдаленииПользователя.xml",
        ),
        "РаботаСКурсамиВалютЛокализация.ПриЗагрузкеАктуальныхКурсов": (
            "scheduled_job",
            "ScheduledJobs/ЗагрузкаКурсовВалют.xml",
        ),
        "РаботаСКурсамиВалют.ОбновитьКурсВалюты": ("long_operation", "Catalogs/Валюты/Ext/ObjectModule.bsl"),
    }
    for name, want in cases.items():
        res = c.references(name)
        assert want in {(r.kind, r.path) for r in res.references}, (name, _sites(res))
    form = c.references(target=f"{FORM}::ПриЗавершенииРедактированияФормулы", context=True)
    notify = [r for r in form.references if r.kind == "notify"]
    assert [(r.path, r.line + 1) for r in notify] == [(FORM, 284)]
    assert 'Новый ОписаниеОповещения("ПриЗавершенииРедактированияФормулы"' in notify[0].context
    layout = "Catalogs/Валюты/Forms/ФормаСписка/Ext/Form.xml"
    cmd = c.references(target=f"{LIST_FORM}::ПодборИзКлассификатора")
    assert ("form_command", layout, 326) in {(r.kind, r.path, r.line + 1) for r in cmd.references}
    events = {r.kind for m in ("ПриСозданииНаСервере", "ПриОткрытии") for r in c.references(m).references}
    assert "form_event" in events
    # go to definition on the string: the handler in the same module
    d_ = c.definition(FORM, notify[0].line, notify[0].col + 3)
    assert d_.site.kind == "notify" and [m.id for m in d_.targets] == [f"{FORM}::ПриЗавершенииРедактированияФормулы"]
    st = c.status().service.references
    assert st.files >= 20 and st.sites > 1000 and st.resolving == 0 and not st.building


def test_edits_renames_and_deletions_reach_the_answers_and_survive_restarts(live, daemons):
    d, c = live
    root = d.root
    names = [PODSTAVIT, "РаботаСКурсамиВалют.ОбновитьКурсВалюты", "ПриЗавершенииРедактированияФормулы"]
    _same_as_scratch(c, root, names)
    before = c.references(PODSTAVIT).total
    # an edit: a new caller in the form module
    p = root / FORM
    p.write_text(
        p.read_bytes().decode("utf-8-sig")
        + '\n&НаКлиенте\nПроцедура НовыйВызов()\n\tСтроковыеФункцииКлиентСервер.ПодставитьПараметрыВСтроку("%1", 1);\n'
        + "КонецПроцедуры\n",
        encoding="utf-8",
    )
    wait_until(lambda: c.references(PODSTAVIT).total == before + 1, what="the new call in the answer")
    assert c.wait_idle(60)
    _same_as_scratch(c, root, names + ["НовыйВызов"])
    # a rename of the callee's module: the calls by the old name are no longer its references
    os.rename(root / STRINGS, root / "CommonModules/СтроковыеФункцииНовые")
    os.rename(root / f"{STRINGS}.xml", root / "CommonModules/СтроковыеФункцииНовые.xml")
    renamed = "СтроковыеФункцииНовые.ПодставитьПараметрыВСтроку"

    def moved() -> bool:
        try:
            return c.references(renamed).counts.resolved == 0
        except CommandError:
            return False

    wait_until(moved, what="the renamed module in the answers")
    assert c.wait_idle(60)
    with pytest.raises(CommandError):
        c.references(PODSTAVIT)
    assert c.references("ПодставитьПараметрыВСтроку", possible=True).counts.possible >= before + 1
    # a deletion: the form module and its layout's bindings go
    (root / FORM).unlink()
    wait_until(
        lambda: FORM not in {r.path for r in c.references(renamed, possible=True).possible}, what="deleted module"
    )
    assert c.wait_idle(60)
    names = [renamed, "РаботаСКурсамиВалют.ОбновитьКурсВалюты", "ПриСозданииНаСервере"]
    _same_as_scratch(c, root, names)
    # a restart loads the snapshot and replays the journal
    c.close()
    d.stop()
    d2 = daemons.start(root, *WATCHED, index_dir=d.index_dir, wait_idle=True)
    with d2.client() as c2:
        _same_as_scratch(c2, root, names)
        # an edit, then kill -9 before any snapshot: the journal has it
        p = root / LIST_FORM
        p.write_text(p.read_bytes().decode("utf-8-sig").replace("ПодборИзКлассификатора(", "Подбор2("), "utf-8")
        wait_until(
            lambda: (
                "Подбор2" in {m.name for m in c2.references(f"{LIST_FORM}::Подбор2").targets}
                if _has(c2, f"{LIST_FORM}::Подбор2")
                else False
            ),
            what="the renamed handler",
        )
        assert c2.wait_idle(60)
    d2.kill()
    d3 = daemons.start(root, *WATCHED, index_dir=d.index_dir, wait_idle=True)
    with d3.client() as c3:
        _same_as_scratch(c3, root, names + ["Подбор2", "ПодборИзКлассификатора"])


def _has(c, method: str) -> bool:
    try:
        c.references(target=method)
        return True
    except CommandError:
        return False


def test_bad_input_through_the_daemon(live):
    d, c = live
    root = d.root
    sub = root / "EventSubscriptions/ВариантыОтчетовПриУдаленииПользователя.xml"
    sub.write_text(
        sub.read_bytes()
        .decode("utf-8-sig")
        .replace("CommonModule.ВариантыОтчетов.ПриУдаленииПользователя", "не метод"),
        "utf-8",
    )
    broken = root / "CommonModules/СломанныйМодуль/Ext/Module.bsl"
    broken.parent.mkdir(parents=True)
    broken.write_text(
        "Процедура Сломанная(\n\tЕсли Тогда ((\nКонецПроцедуры\n\n"
        "Процедура Целая() Экспорт\n\tВзаимная();\nКонецПроцедуры\n\n"
        "Процедура Взаимная() Экспорт\n\tЦелая();\n\tВзаимная();\nКонецПроцедуры\n",
        "utf-8",
    )

    def seen() -> bool:
        st = c.status().service
        return st.skipped.get("bad_binding") == 1 and _has(c, "CommonModules/СломанныйМодуль/Ext/Module.bsl::Целая")

    wait_until(seen, what="the broken binding and the broken module indexed")
    st = c.status().service
    assert [(k.path, k.reason) for k in st.skipped_files if k.reason == "bad_binding"] == [
        ("EventSubscriptions/ВариантыОтчетовПриУдаленииПользователя.xml", "bad_binding")
    ]
    assert not st.stale_files  # a partial skip is not a stale file
    # the module that does not parse keeps the calls of the methods that do
    res = c.references(target="CommonModules/СломанныйМодуль/Ext/Module.bsl::Целая")
    assert [(r.kind, r.caller.rpartition("::")[2]) for r in res.references] == [("call", "Взаимная")]
    # a call cycle ends the walk
    g = c.call_graph(target="CommonModules/СломанныйМодуль/Ext/Module.bsl::Целая", direction="callees", depth=10)
    assert set(g.nodes.values()) == {0, 1} and g.revisited >= 2 and not g.truncated
    with pytest.raises(CommandError) as exc:
        c.references("Нет.ТакогоМетода")
    assert exc.value.code == -32001
    with pytest.raises(CommandError) as exc:
        c.call("references", {"name": "Целая", "path": "x.bsl"})
    assert exc.value.code == -32602


def test_cli_refs(live):
    d, _c = live
    out = d.cli("refs", PODSTAVIT, "--json", "--no-spawn", "--limit", "5", check=True)
    data = json.loads(out.stdout)
    assert data["total"] > 5 and data["truncated"] and len(data["references"]) == 5
    first = data["references"][0]
    assert set(first) >= {"path", "line", "caller", "kind", "resolved"} and first["resolved"] is True
    line = (d.root / first["path"]).read_bytes().decode("utf-8-sig").splitlines()[first["line"] - 1]
    assert "ПодставитьПараметрыВСтроку" in line  # path relative to the root, line 1-based
    text = d.cli("refs", PODSTAVIT, "--no-spawn", check=True).stdout
    assert f"{data['total']} references: {data['counts']['resolved']} calls" in text
    callees = json.loads(d.cli("refs", "РаботаСКурсамиВалют.ОбновитьКурсВалюты", "--callees", "--json").stdout)
    assert callees["method"]["name"] == "ОбновитьКурсВалюты" and callees["references"]
    missing = d.cli("refs", "Нет.ТакогоМетода", "--no-spawn")
    assert missing.returncode == 1 and "no indexed method" in missing.stderr
