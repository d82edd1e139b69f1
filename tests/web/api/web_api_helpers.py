"""Helpers of the web API tests: the real CLI in a subprocess, to compare the API with; the calculator page read as
HTML."""

from __future__ import annotations

import json
import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

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


def web_line(line: str, field: str) -> str:
    """The web's ``detail`` for the CLI's ``line`` (probe24 C4): argparse's where-prefix ``argument --FLAG: `` (every
    spelling of the option, ``--tp/--tensor-parallel``) becomes ``field 'FIELD': ``, the field the request gave; the
    reason after it is the CLI's word for word; a line without that prefix, or whose option is not the field's, is
    the CLI's."""
    if not line.startswith("argument --") or not field:
        return line
    where, reason = line.split(": ", 1)
    if "--" + field.replace("_", "-") not in where.removeprefix("argument ").split("/"):
        return line
    return f"field '{field}': {reason}"


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


class TrainPanelParser(HTMLParser):
    """An HTML parser of the calculator page that knows where each tag sits: ``stack`` the ids of the open div /
    details elements, ``where()`` whether the tag is in the training tab's panel and in its <details
    id=train-advanced>. Subclasses read the tags in ``start`` (after the tag's own div/details is open) and ``end``
    (after it is closed); ``handle_data`` as HTMLParser's."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag in ("div", "details"):
            self.stack.append(a.get("id") or "")
        self.start(tag, a)

    def handle_endtag(self, tag: str) -> None:
        if tag in ("div", "details") and self.stack:
            self.stack.pop()
        self.end(tag)

    def where(self) -> dict[str, bool]:
        return {"train": "panel-train" in self.stack, "advanced": "train-advanced" in self.stack}

    def start(self, tag: str, a: dict[str, Any]) -> None:
        pass

    def end(self, tag: str) -> None:
        pass
