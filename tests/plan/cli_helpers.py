"""Run the CLI through ``llmsizer.cli.main.main`` (the real parser and error handling)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from llmsizer.cli import main as cli_main


def build_parser() -> argparse.ArgumentParser:
    return cli_main.build_parser(all_commands=True)


def run_cli(argv: Sequence[str], monkeypatch=None) -> int:
    return cli_main.main(list(argv))
