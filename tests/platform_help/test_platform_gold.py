"""The platform help gold set's validator runs as a script (its checks are in
tests/unit/sources/platform/test_gold.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_validator_runs_as_a_script():
    out = subprocess.run(
        [sys.executable, str(REPO / "tests" / "gold" / "validate_platform_gold.py")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.strip().endswith("OK")
