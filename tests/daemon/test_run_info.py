"""The commit in the ``run`` of ``eval --json`` and ``bench --json`` (daemon/cli/run_info.py),
found by a real git in real repositories: clean, dirty, and no git at all."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from daemon.cli import run_info

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def _git(root, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    out = subprocess.run(
        ["git", "-C", str(root), *args],
        capture_output=True,
        text=True,
        check=True,
        env={"PATH": "/usr/bin:/bin", **env},
    )
    return out.stdout.strip()


def test_a_checkout_gives_its_commit_and_says_when_it_is_dirty(tmp_path):
    _git(tmp_path, "init", "-q")
    (tmp_path / "a.txt").write_text("one\n", encoding="utf-8")
    _git(tmp_path, "add", "a.txt")
    _git(tmp_path, "commit", "-q", "-m", "one")
    head = _git(tmp_path, "rev-parse", "--short=12", "HEAD")
    assert re.fullmatch(r"[0-9a-f]{12}", head)
    assert run_info.checkout_commit(tmp_path) == head
    (tmp_path / "new.txt").write_text("untracked\n", encoding="utf-8")
    assert run_info.checkout_commit(tmp_path) == head  # untracked files do not make it dirty
    (tmp_path / "a.txt").write_text("two\n", encoding="utf-8")
    assert run_info.checkout_commit(tmp_path) == head + "-dirty"


def test_no_commit_without_git_or_without_a_commit(tmp_path, monkeypatch):
    _git(tmp_path, "init", "-q")
    assert run_info.checkout_commit(tmp_path) is None  # no commit yet: rev-parse fails
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert run_info.checkout_commit(run_info.CHECKOUT) is None  # no git on PATH: None, no error


def test_this_checkout(tmp_path):
    if not (run_info.CHECKOUT / ".git").exists():
        pytest.skip("not run from a git checkout")
    head = _git(run_info.CHECKOUT, "rev-parse", "--short=12", "HEAD")
    assert run_info.checkout_commit() in (head, head + "-dirty")
