"""Helpers shared by command modules: unit-aware argument types and output."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ..errors import InputError
from ..units import parse_bytes, parse_count, parse_tokens


def bytes_arg(text: str) -> int:
    try:
        return parse_bytes(text)
    except InputError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def count_arg(text: str) -> int:
    try:
        return parse_count(text)
    except InputError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def emit_json(data: Any) -> None:
    json.dump(data, sys.stdout, indent=2, sort_keys=False, default=str)
    sys.stdout.write("\n")


def tokens_arg(text: str) -> int:
    try:
        return parse_tokens(text)
    except InputError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
