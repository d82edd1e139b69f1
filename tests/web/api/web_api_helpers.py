"""Helpers of the web API tests: the real CLI in a subprocess, to compare the API with."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from cli_capture import run_cli  # the real CLI in a subprocess (re-exported)

ROOT = Path(__file__).resolve().parents[3]
SRC = str(ROOT / "src")
sys.path.insert(0, str(ROOT / "tests" / "readers"))  # readers_helpers: tiny real GGUF / safetensors files


def run_cli_json(*args: str) -> dict:
    """``llmsizer ARGS --json``, which must answer (exit 0), parsed."""
    done = run_cli(*args, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def cli_error_line(*args: str) -> str:
    """The one line ``llmsizer ARGS`` refuses bad input with (exit 2, no traceback), without its prefix."""
    done = run_cli(*args)
    assert done.returncode == 2, (args, done.returncode, done.stdout[-300:])
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    return lines[0].removeprefix("llmsizer: error: ").removesuffix(" (see --help)")  # the web says no --help


def command_flags(command: str) -> list:
    """The flag actions of ``llmsizer COMMAND`` as the CLI parses them (the whole CLI's parser)."""
    import argparse

    from llmsizer.cli.main import build_parser

    p = build_parser(all_commands=True)
    sub = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
    return [a for a in sub.choices[command]._actions if a.option_strings]


def fed_page(client, parser):
    """``parser`` (an html.parser.HTMLParser) fed the calculator page as the web app serves it."""
    page = client.get("/")
    assert page.status_code == 200
    parser.feed(page.text)
    return parser
