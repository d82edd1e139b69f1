"""Shared by the browser tests and their fixtures (a module name of its own: several test folders have a conftest)."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
CHROMIUM = Path(os.environ.get("LLMSIZER_CHROMIUM", "/usr/bin/chromium"))
SKIP = (f"{CHROMIUM} is absent: install Debian's chromium (apt-get install -y chromium; .ci/run does) to run the "
        "browser tests of the web pages")


def cli_env() -> dict[str, str]:
    """The environment of a child llmsizer: this tree's code first."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT / "src") + os.pathsep + env.get("PYTHONPATH", "")
    return env
