"""The real CLI entry point run in-process with its output captured: one helper for the tests that compare what
the CLI prints with the other surfaces (argparse's own ``SystemExit`` becomes the exit code)."""

from __future__ import annotations

import contextlib
import io

from llmsizer.cli.main import main


def run(*argv: str) -> tuple[int, str, str]:
    """Exit code, stdout and stderr of ``llmsizer *argv``."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(argv))
        except SystemExit as e:  # argparse
            code = int(e.code or 0)
    return code, out.getvalue(), err.getvalue()
