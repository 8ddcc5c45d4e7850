"""Where and when a measurement ran: the ``run`` object of ``bsl-lens eval --json`` and
``bsl-lens bench --json``, which ``tools/docs_tables.py`` writes into the docs' captions.

``{"version", "commit", "date", "cpu_count", "load_avg_start", "load_avg_end"}``: the bsl-lens
version; the git commit of the checkout the code was imported from (12 hex digits, ``-dirty``
when tracked files differ from it; None for an installed package or when git cannot tell);
the UTC start time (ISO 8601, seconds); the CPU count; the 1/5/15-minute load averages at the
start and at the end (None where the OS has none). Finding the commit never fails a command.
"""

from __future__ import annotations

import os
import subprocess
from datetime import UTC, datetime
from pathlib import Path

from .. import __version__

#: The folder above the ``daemon`` package: a checkout's root when run from one.
CHECKOUT = Path(__file__).resolve().parents[2]
#: Seconds a git call may take before the commit is given up.
GIT_TIMEOUT_S = 5.0


def _load_avg() -> list[float] | None:
    if not hasattr(os, "getloadavg"):
        return None
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def checkout_commit(root: Path = CHECKOUT) -> str | None:
    """The commit ``root`` has checked out (``-dirty`` appended when a tracked file differs),
    or None: not a git checkout (no ``.git`` there, e.g. an installed package), no ``git``
    on ``PATH``, or git failed or took longer than :data:`GIT_TIMEOUT_S`."""
    if not (root / ".git").exists():  # a folder in a checkout, or a worktree's .git file
        return None
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0"}  # `git status` must not take the index lock
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"],
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT_S,
            env=env,
        )
        if head.returncode != 0 or not head.stdout.strip():
            return None
        status = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT_S,
            env=env,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    commit = head.stdout.strip()
    return commit + "-dirty" if status.returncode == 0 and status.stdout.strip() else commit


def run_started() -> dict:
    """The ``run`` object at the start of a measurement (``load_avg_end`` still None)."""
    return {
        "version": __version__,
        "commit": checkout_commit(),
        "date": datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        "cpu_count": os.cpu_count(),
        "load_avg_start": _load_avg(),
        "load_avg_end": None,
    }


def run_finished(run: dict) -> dict:
    """``run`` with the load averages at the end; returns it."""
    run["load_avg_end"] = _load_avg()
    return run
