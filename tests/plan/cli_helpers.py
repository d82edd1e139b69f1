"""Run the CLI through ``llmsizer.cli.main.main`` with the plan/request commands registered (they are registered
there by the lead; until then this helper adds them to the real parser, keeping main's error handling)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from llmsizer.cli import main as cli_main
from llmsizer.cli import plan_cmd, request_cmd

_REAL_BUILD = cli_main.build_parser


def build_parser() -> argparse.ArgumentParser:
    p = _REAL_BUILD()
    sub = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
    if "plan" not in sub.choices:
        plan_cmd.register(sub)
    if "request" not in sub.choices:
        request_cmd.register(sub)
    return p


def run_cli(argv: Sequence[str], monkeypatch) -> int:
    monkeypatch.setattr(cli_main, "build_parser", build_parser)
    return cli_main.main(list(argv))
