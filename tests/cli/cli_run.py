"""Running the CLI in-process for the tests of this folder: exit code, stdout and stderr (argparse's SystemExit
included), and the JSON answer of a command that answered (exit 0 or 1)."""

from __future__ import annotations

import json

import pytest

from llmsizer.cli.main import main


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    try:
        code = main(argv)
    except SystemExit as e:  # argparse
        code = int(e.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def answer(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, dict]:
    code, out, err = run([*argv, "--json"], capsys)
    assert code in (0, 1), err
    return code, json.loads(out)


def totals(est: dict) -> dict[str, int]:
    """Expected bytes per location of an Estimate.to_dict()."""
    return {where: int(t["bytes"]) for where, t in est["totals"].items()}
