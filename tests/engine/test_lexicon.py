"""tools/build_lexicon.py rebuilds the shipped lexicon (daemon/data/lexicon_1c.json) from the real SSL
corpora. The lexicon's own tests are in tests/unit/text/test_lexicon.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from daemon.text.lexicon import LEXICON_PATH

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_build_script_reproduces_the_shipped_lexicon(ssl_ru, ssl_en, tmp_path):
    out = tmp_path / "lex.json"
    subprocess.run(
        [sys.executable, str(REPO / "tools" / "build_lexicon.py"), str(ssl_ru), str(ssl_en), "--out", str(out)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    assert out.read_bytes() == LEXICON_PATH.read_bytes()
