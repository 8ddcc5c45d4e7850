"""The contract's platform vocabulary and the scopes: what the export's index reads for each
scope (``daemon.ranking.query.export_filters``), so that code search answers as before."""

from __future__ import annotations

import pytest

from daemon.contract import (
    DEFAULT_SCOPE,
    METADATA_KINDS,
    PLATFORM_KINDS,
    SCOPES,
    Chunk,
    Filters,
    PlatformEntry,
)
from daemon.ranking.query import export_filters
from daemon.server.protocol import WireFilters
from daemon.sources.platform.entries import ENTRY_KINDS, Entry


def test_vocabulary():
    assert DEFAULT_SCOPE == "workspace" and Filters().scope == DEFAULT_SCOPE
    assert set(SCOPES) == {"workspace", "code", "metadata", "docs", "platform", "all"}
    assert PLATFORM_KINDS == tuple("platform_" + k for k in ENTRY_KINDS)
    assert Entry is PlatformEntry  # the entry model is the wire's
    c = Chunk(id="p::function:X", path="platform/bundled/x", kind="platform_function", name="X")
    assert c.is_platform and not c.is_metadata and not c.is_code and not c.is_docs
    m = Chunk(id="a.xml::", path="a.xml", kind=METADATA_KINDS[0], name="A")
    assert m.is_metadata and not m.is_platform


def test_the_export_reads_workspace_and_all_as_its_whole_index():
    # no filter at all, as before the platform scopes existed (the ranker's fast path)
    assert export_filters(None) is None
    assert export_filters(Filters()) is None and export_filters(Filters(scope="all")) is None
    # other filters keep the scope the ranker knows for "everything"
    assert export_filters(Filters(object_type="Справочник")) == Filters(scope="all", object_type="Справочник")
    assert export_filters(Filters(scope="code")) == Filters(scope="code")
    # a daemon's wire filters stay what they were (the type decides the ranker's path)
    w = export_filters(WireFilters())
    assert type(w) is WireFilters and w.scope == "all"
    with pytest.raises(ValueError, match="platform help"):
        export_filters(Filters(scope="platform"))
