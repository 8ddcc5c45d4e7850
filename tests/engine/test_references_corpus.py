"""Find-usages on the real corpora: an independent oracle for qualified calls of exported
common-module methods on ssl31-ru (precision and recall >= 0.99, misses listed), every binding kind
on a real SSL or YAxUnit case, English SSL, extensions both ways, broken files and modules, cycles."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from daemon.index.refgraph import RefGraph, read_references
from daemon.sources.bindings import descriptor_references
from daemon.sources.references import module_references
from daemon.text.folding import fold

_GRAPHS: dict[Path, tuple[RefGraph, list]] = {}


def _graph(root: Path) -> tuple[RefGraph, list]:
    if root not in _GRAPHS:
        records, skips = read_references(root)
        g = RefGraph()
        g.update(records)
        _GRAPHS[root] = (g, skips)
    return _GRAPHS[root]


@pytest.fixture(scope="module")
def ru(ssl_ru) -> RefGraph:
    return _graph(ssl_ru)[0]


@pytest.fixture(scope="module")
def en(ssl_en) -> RefGraph:
    return _graph(ssl_en)[0]


@pytest.fixture(scope="module")
def yax(yaxunit) -> RefGraph:
    return _graph(yaxunit)[0]


def refs_to(g: RefGraph, target: str) -> list[tuple[str, str, int, str]]:
    """(kind, path, 1-based line, detail) of every reference to ``target``."""
    return [(r.kind, r.path, r.line + 1, r.detail) for r in g.references(target, limit=10**6).references]


# --------------------------------------------------------------------------- the oracle


def _mask(text: str) -> str:
    """The text with string literals and ``//`` comments blanked (newlines kept): a character
    scan of its own, sharing nothing with the chunker or the tree."""
    out: list[str] = []
    i, n, in_string = 0, len(text), False
    while i < n:
        c = text[i]
        if in_string:
            if c == '"':
                if i + 1 < n and text[i + 1] == '"':
                    out.append("  ")
                    i += 2
                    continue
                in_string = False
            out.append("\n" if c == "\n" else " ")
            i += 1
        elif c == '"':
            in_string = True
            out.append(" ")
            i += 1
        elif c == "/" and text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


_ORACLE_HEADER = re.compile(
    r"(?im)^[ \t]*(?:&\w+[ \t]*)*(?:(?:Асинх|Async)\s+)?(?:Процедура|Функция|Procedure|Function)\s+(\w+)\s*\("
)
_ORACLE_CALL = re.compile(r"(?<![\w.])(\w+)\s*\.\s*(\w+)\s*\(")


def oracle(root: Path) -> set[tuple[str, int, str, str]]:
    """``(path, line, module, method)`` of every ``Модуль.Метод(`` outside strings and comments
    where ``Модуль`` is a common module and ``Метод`` one of its exported methods (the export
    keyword after the balanced parameter list, which may span lines)."""
    masked = {
        p.relative_to(root).as_posix(): _mask(
            p.read_text(encoding="utf-8-sig").replace("\r\n", "\n").replace("\r", "\n")
        )
        for p in root.rglob("*.bsl")
    }
    exported: dict[str, set[str]] = {}
    for rel, text in masked.items():
        parts = rel.split("/")
        if parts[0] != "CommonModules" or parts[-1] != "Module.bsl":
            continue
        names: set[str] = set()
        for h in _ORACLE_HEADER.finditer(text):
            depth, j = 1, h.end()
            while j < len(text) and depth:
                depth += {"(": 1, ")": -1}.get(text[j], 0)
                j += 1
            if re.match(r"\s*(?:Экспорт|Export)\b", text[j:], re.IGNORECASE):
                names.add(fold(h.group(1)))
        exported[fold(parts[1])] = names
    found = set()
    for rel, text in masked.items():
        for m in _ORACLE_CALL.finditer(text):
            module, method = fold(m.group(1)), fold(m.group(2))
            if method in exported.get(module, ()):
                found.add((rel, text.count("\n", 0, m.start(2)) + 1, module, method))
    return found


def test_qualified_calls_of_exported_common_module_methods_match_the_oracle(ssl_ru, ru):
    expected = oracle(ssl_ru)
    got = set()
    for path in ru.paths():
        rec = ru.file(path)
        for s, (target, _reason) in zip(rec.sites_list(), ru.resolve_all(path), strict=True):
            if s.kind == "member" and target and target.startswith("CommonModules/"):
                got.add((path, s.line + 1, fold(s.qualifier), fold(s.name)))
    hit = len(got & expected)
    precision, recall = hit / max(len(got), 1), hit / max(len(expected), 1)
    missed, extra = sorted(expected - got)[:30], sorted(got - expected)[:30]
    assert len(expected) > 30_000
    assert precision >= 0.99 and recall >= 0.99, f"P={precision:.4f} R={recall:.4f} missed={missed} extra={extra}"


# --------------------------------------------------------------------------- bindings on real cases


def test_event_subscription(ru):
    target = "CommonModules/ВариантыОтчетов/Ext/Module.bsl::ПередУдалениемИдентификатораОбъектаМетаданных"
    assert (
        "subscription",
        "EventSubscriptions/ВариантыОтчетовПередУдалениемИдентификатораОбъектаМетаданных.xml",
        18,
        "BeforeDelete",
    ) in refs_to(ru, target)


def test_scheduled_job(ru):
    target = "CommonModules/РаботаСКурсамиВалютЛокализация/Ext/Module.bsl::ПриЗагрузкеАктуальныхКурсов"
    assert ("scheduled_job", "ScheduledJobs/ЗагрузкаКурсовВалют.xml", 13, "ЗагрузкаКурсовВалют") in refs_to(ru, target)


def test_form_event_item_event_and_form_command(ru):
    form = "Catalogs/Пользователи/Forms/ФормаЭлемента/Ext/Form/Module.bsl"
    layout = "Catalogs/Пользователи/Forms/ФормаЭлемента/Ext/Form.xml"
    assert refs_to(ru, f"{form}::ПриОткрытии") == [("form_event", layout, 117, "OnOpen")]
    assert refs_to(ru, f"{form}::СменитьПароль") == [("form_command", layout, 2260, "СменитьПароль")]
    assert ("form_item_event", layout, 418, "Наименование.OnChange") in refs_to(ru, f"{form}::НаименованиеПриИзменении")


def test_long_operations_named_by_strings(ru):
    manager = "Catalogs/УчетныеЗаписиЭлектроннойПочты/Ext/ManagerModule.bsl::ОпределитьНастройкиУчетнойЗаписи"
    caller = "Catalogs/УчетныеЗаписиЭлектроннойПочты/Forms/ПомощникНастройкиУчетнойЗаписи/Ext/Form/Module.bsl"
    assert ("long_operation", caller, 1060, "ДлительныеОперации.ВыполнитьФункцию") in refs_to(ru, manager)
    common = "CommonModules/РаботаСКурсамиВалют/Ext/Module.bsl::ОбновитьКурсВалюты"
    assert (
        "long_operation",
        "Catalogs/Валюты/Ext/ObjectModule.bsl",
        207,
        "ДлительныеОперации.ВыполнитьВФоне",
    ) in refs_to(ru, common)


def test_notification_idle_and_background_handlers(ru):
    form = "Catalogs/Валюты/Forms/ФормаЭлемента/Ext/Form/Module.bsl"
    assert ("notify", form, 284, "ОписаниеОповещения") in refs_to(ru, f"{form}::ПриЗавершенииРедактированияФормулы")
    bp = "BusinessProcesses/Задание/Forms/ФормаБизнесПроцесса/Ext/Form/Module.bsl"
    assert ("idle", bp, 141, "ПодключитьОбработчикОжидания") in refs_to(ru, f"{bp}::ОбновитьФорму")
    target = (
        "CommonModules/СтандартныеПодсистемыСервер/Ext/Module.bsl::ОбновитьДатуПоследнегоИспользованияВерсииРасширений"
    )
    assert (
        "background",
        "Catalogs/ВерсииРасширений/Ext/ManagerModule.bsl",
        339,
        "ФоновыеЗадания.Выполнить",
    ) in refs_to(ru, target)


def test_services_commands_and_platform_events(ru):
    assert refs_to(ru, "HTTPServices/exchange_dsl_1_0_0_1/Ext/Module.bsl::ПолучитьВерсию_GET") == [
        ("http_handler", "HTTPServices/exchange_dsl_1_0_0_1.xml", 42, "Версия.GET")
    ]
    web = [r for r in refs_to(ru, "WebServices/Exchange/Ext/Module.bsl::ВыполнитьВыгрузку") if r[0] == "web_operation"]
    assert web == [("web_operation", "WebServices/Exchange.xml", 33, "Upload")]
    cmd = "Catalogs/ВариантыОтчетов/Commands/Изменить/Ext/CommandModule.bsl"
    assert refs_to(ru, f"{cmd}::ОбработкаКоманды") == [("platform_event", cmd, 12, "CommandProcessing")]
    doc = "Documents/Анкета/Ext/ObjectModule.bsl"
    assert refs_to(ru, f"{doc}::ОбработкаПроведения") == [("platform_event", doc, 23, "Posting")]


def test_idle_handlers_in_global_common_modules(ru):
    # ПодключитьОбработчикОжидания("Имя") outside the module: an exported method of a global module
    target = "CommonModules/НапоминанияПользователяГлобальный/Ext/Module.bsl::ПроверитьТекущиеНапоминания"
    others = [
        r
        for r in refs_to(ru, target)
        if r[0] == "idle" and not r[1].startswith("CommonModules/НапоминанияПользователяГлобальный/")
    ]
    assert len(others) >= 3


def test_every_binding_kind_mostly_resolves(ru):
    st = ru.stats()
    assert st["resolved_metadata"] > 6000 and st["resolved_string"] > 2000
    assert st["modules"] == 1926 and st["partial"] == 47


def test_edt_bindings_extensions_both_ways_and_a_global_module(yax):
    demo = "fixtures/demo-configuration/src"
    sub = f"{demo}/EventSubscriptions/ПередЗаписьюДокумента/ПередЗаписьюДокумента.mdo"
    target = f"{demo}/CommonModules/ПодпискиНаСобытия/Module.bsl::ПередЗаписьюДокумента"
    kinds = {(k, p) for k, p, _line, _d in refs_to(yax, target)}
    assert ("subscription", sub) in kinds
    # the `tests` extension intercepts it (&Вместо) and calls the original (ПродолжитьВызов)
    ext = "tests/src/CommonModules/ПодпискиНаСобытия/Module.bsl"
    assert {("extension", ext), ("proceed", ext)} <= kinds
    callees = {(r.kind, r.target) for r in yax.callees(f"{ext}::Расш1_ПередЗаписьюДокумента")}
    assert ("extension", target) in callees
    form = f"{demo}/Catalogs/Контрагенты/Forms/ФормаЭлемента"
    assert ("form_event", f"{form}/Form.form", "OnOpen") in {
        (k, p, d) for k, p, _line, d in refs_to(yax, f"{form}/Module.bsl::ПриОткрытии")
    }
    job = f"{demo}/CommonModules/РаботаСПолнотекстовымПоиском/Module.bsl::ОбновлениеИндексаПолнотекстовогоПоиска"
    assert "scheduled_job" in {k for k, *_ in refs_to(yax, job)}
    # &После in the extension's application module links to the base configuration's handler
    app = "exts/yaxunit/src/Configuration/ManagedApplicationModule.bsl"
    base = f"{demo}/Configuration/ManagedApplicationModule.bsl::ПриНачалеРаботыСистемы"
    assert ("extension", app) in {(k, p) for k, p, _line, _d in refs_to(yax, base)}


def test_english_ssl(en):
    target = "Catalogs/EmailAccounts/Ext/ManagerModule.bsl::DefineAccountSettings"
    got = refs_to(en, target)
    assert any(k == "long_operation" and d == "TimeConsumingOperations.ExecuteFunction" for k, _p, _l, d in got), got
    sub = [r for r in refs_to(en, "CommonModules/ReportsOptions/Ext/Module.bsl::BeforeDeleteMetadataObjectID")]
    assert any(k == "subscription" for k, *_ in sub), sub
    st = en.stats()
    assert st["resolved_string"] > 1000 and st["resolved_metadata"] > 3000 and st["resolved_call"] > 40_000
    # the World edition writes New CallbackDescription (the English name of ОписаниеОповещения)
    form = "Catalogs/AccessGroupProfiles/Forms/ItemForm/Ext/Form/Module.bsl"
    assert ("notify", form, 446, "CallbackDescription") in refs_to(en, f"{form}::RolesMarkOnChangeAfterConfirm")


# --------------------------------------------------------------------------- bad input, cycles


def test_a_broken_method_in_a_real_module_keeps_the_others(ssl_ru):
    path = "CommonModules/ОбщегоНазначенияКлиентСервер/Ext/Module.bsl"
    text = (ssl_ru / path).read_text(encoding="utf-8-sig")
    whole = module_references(text, path=path, owner="ОбщийМодуль.ОбщегоНазначенияКлиентСервер", module_kind="common")
    lines = text.replace("\r\n", "\n").split("\n")
    broken_at = next(i for i, line in enumerate(lines) if line.startswith("Функция СкопироватьРекурсивно("))
    lines.insert(broken_at + 2, "\tЕсли Тогда ((( Иначе ;;; Цикл")
    broken = module_references(
        "\n".join(lines), path=path, owner="ОбщийМодуль.ОбщегоНазначенияКлиентСервер", module_kind="common"
    )
    assert broken.partial and not whole.partial

    def others(rec):
        return {
            (s.caller, s.kind, s.callee)
            for s in rec.sites_list()
            if s.caller and not s.caller.endswith("::СкопироватьРекурсивно")
        }

    before, after = others(whole), others(broken)
    assert len(before) > 400
    assert len(before & after) / len(before) > 0.99, sorted(before - after)[:20]


def test_broken_binding_files_are_named_skips(ssl_ru, tmp_path):
    root = tmp_path / "export"
    root.mkdir()
    shutil.copy(ssl_ru / "Configuration.xml", root)
    for rel in (
        "CommonModules/ВариантыОтчетов.xml",
        "CommonModules/ВариантыОтчетов/Ext/Module.bsl",
        "Catalogs/Валюты.xml",
        "Catalogs/Валюты/Forms/ФормаЭлемента/Ext/Form/Module.bsl",
        "Catalogs/Валюты/Forms/ФормаЭлемента/Ext/Form.xml",
    ):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ssl_ru / rel, root / rel)
    sub = "EventSubscriptions/ВариантыОтчетовПередУдалениемИдентификатораОбъектаМетаданных.xml"
    (root / sub).parent.mkdir(parents=True)
    data = (ssl_ru / sub).read_bytes()
    (root / sub).write_bytes(data[: len(data) // 2])  # half-written
    layout = root / "Catalogs/Валюты/Forms/ФормаЭлемента/Ext/Form.xml"
    layout.write_bytes(layout.read_bytes()[:-200])
    records, skips = read_references(root)
    reasons = {(s.path, s.reason) for s in skips}
    assert (sub, "invalid_xml") in reasons
    assert ("Catalogs/Валюты/Forms/ФормаЭлемента/Ext/Form.xml", "invalid_xml") in reasons
    g = RefGraph()
    g.update(records)
    module = "Catalogs/Валюты/Forms/ФормаЭлемента/Ext/Form/Module.bsl"
    assert g.references(f"{module}::ПриЗавершенииРедактированияФормулы").counts.string == 1  # the module still counts
    assert descriptor_references(data[:100], path=sub, owner="x", object_type="ПодпискаНаСобытие").skips[0].path == sub


def test_call_graph_ends_on_real_mutual_recursion(ru):
    start = "CommonModules/ОбщегоНазначения/Ext/Module.bsl::СкопироватьРекурсивно"
    cg = ru.call_graph(start, "callees", depth=6, fan_out=50)
    assert "CommonModules/ОбщегоНазначения/Ext/Module.bsl::СкопироватьМассив" in cg.nodes
    assert cg.revisited >= 1  # СкопироватьМассив calls СкопироватьРекурсивно back
    up = ru.call_graph("CommonModules/ОбщегоНазначения/Ext/Module.bsl::СообщитьПользователю", "callers", 3, 5)
    assert up.truncated and max(up.nodes.values()) <= 3


# --------------------------------------------------------------------------- the index builds the same graph


def _indexed_graph(root: Path, idx: Path, workers: int) -> RefGraph:
    """The graph the index keeps after a first index (chunked in ``workers`` worker processes,
    as the daemon's first index; 0: in this process), resolved."""
    from daemon.engine import Engine, make_pool

    eng = Engine.open(root, index_dir=idx)
    pool = eng.pool = make_pool(workers) if workers else None
    try:
        eng.refresh()
    finally:
        if pool is not None:
            eng.pool = None
            pool.shutdown(wait=True)
    eng.resolve_references()
    return eng.state.refs


@pytest.mark.parametrize("corpus,workers", [("ssl_ru", 2), ("yaxunit", 0)])
def test_the_index_keeps_the_graph_read_references_builds(corpus, workers, request, tmp_path):
    """The daemon's path (the chunking pass in worker processes, the layouts and descriptors read
    with their files, extension projects) gives the graph the oracle and binding tests check."""
    root = request.getfixturevalue(corpus)
    want = _graph(root)[0]
    got = _indexed_graph(root, tmp_path / "idx", workers)
    a, b = got.state(), want.state()
    assert [k for k in b if a[k] != b[k]] == []
