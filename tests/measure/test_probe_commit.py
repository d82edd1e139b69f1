"""The commit a measured record carries (versions()["llmsizer_commit"]) against git's own answer, in a clone and in a
git worktree (whose .git is a file naming the real git directory: records measured there carried no commit)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from llmsizer.measure.probe import _git_commit, versions

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(not (ROOT / ".git").exists() or shutil.which("git") is None, reason="not a git checkout")
def test_record_names_the_checkout_commit() -> None:
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short=12", "HEAD"], capture_output=True,
                          text=True, check=True).stdout.strip()
    assert _git_commit() == head
    assert versions(())["llmsizer_commit"] == head
