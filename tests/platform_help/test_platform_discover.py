"""The compatibility mode of the real exports (ssl31-ru: Designer, yaxunit-edt: EDT) picks the
nearest installed platform version (the rest of discovery: tests/unit/sources/platform/test_discover.py)."""

from __future__ import annotations

from daemon.sources.platform.discover import (
    nearest_version,
    read_compatibility_mode,
)


def test_compatibility_mode_of_the_real_exports(ssl_ru, yaxunit):
    assert read_compatibility_mode(ssl_ru) == "Version8_3_24"
    assert read_compatibility_mode(yaxunit) == "8.3.10"
    assert nearest_version(read_compatibility_mode(ssl_ru), ["8.3.23.1", "8.3.24.1467"]) == "8.3.24.1467"
