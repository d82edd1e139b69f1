"""The real CLI entry point with its output captured, for the tests that compare what the CLI prints with the other
surfaces: in-process (``run``, ``run_json``: argparse's own ``SystemExit`` becomes the exit code) or in a new process,
as a user runs it (``run_cli``)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from llmsizer.cli.main import main

SRC = str(Path(__file__).resolve().parents[1] / "src")


def run(*argv: str) -> tuple[int, str, str]:
    """Exit code, stdout and stderr of ``llmsizer *argv``."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(argv))
        except SystemExit as e:  # argparse
            code = int(e.code or 0)
    return code, out.getvalue(), err.getvalue()



def run_json(*argv: str) -> tuple[int, Any]:
    """Exit code and parsed ``--json`` output of ``llmsizer *argv`` (in-process)."""
    code, out, _ = run(*argv, "--json")
    return code, json.loads(out)

def run_cli(*argv: str, stdin: str | None = None, cwd: str | Path | None = None, env: dict[str, str] | None = None,
            timeout: float = 300) -> subprocess.CompletedProcess:
    """``llmsizer *argv`` through its real entry point in a new process (this checkout's src/ on PYTHONPATH, ``env``
    added to the environment): exit code, stdout and stderr as text."""
    return subprocess.run([sys.executable, "-m", "llmsizer.cli.main", *argv], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=SRC, **(env or {})), timeout=timeout, input=stdin, cwd=cwd)
