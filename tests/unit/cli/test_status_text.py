"""The ``bsl-lens status`` text says what the references hold and what is not settled yet."""

from __future__ import annotations

from daemon import notes

BASE = {"root": "/r", "state": "ready", "dense": {"enabled": False}, "watcher": {"mode": "off"}, "latency": {}}


def test_the_references_line_says_files_sites_and_what_is_pending():
    ready = notes.format_status({**BASE, "references": {"files": 567, "sites": 18771}})
    assert "  references: 567 files, 18771 sites" in ready.splitlines()
    pending = notes.format_status(
        {**BASE, "references": {"files": 3, "sites": 9, "resolving": 2, "building": True, "dynamic": 1}}
    )
    line = next(x for x in pending.splitlines() if x.startswith("  references:"))
    assert "being read from the files again" in line and "2 files resolving" in line and "lower bounds" in line


def test_no_references_line_from_a_daemon_without_them():
    assert "references" not in notes.format_status(BASE)
