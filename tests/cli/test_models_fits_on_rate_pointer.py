"""probe33 D6: `models --fits-on h100 --request-rate 5` took 5 as the name query and died with argparse's bare
"unrecognized arguments: --request-rate". models --fits-on sizes sequences at once (--concurrency), not a rate, so
the one line (exit 2, no traceback) now names --request-rate and points to the commands that take one, `recommend
--request-rate` and `fit --request-rate` (their parsers are asked here that they do); a prefix of it is read the same,
and the web's 400 is the same line naming the field."""

from __future__ import annotations

import argparse

import pytest

from cli_capture import run_cli
from llmsizer.cli.main import build_parser

POINTER = ("models --fits-on takes sequences at once (--concurrency), not a request rate: `llmsizer recommend MODEL "
           "--request-rate R` (or `llmsizer fit MODEL --device NAME --request-rate R`) sizes one")


def _options(command: str) -> set[str]:
    sub = next(a for a in build_parser([command])._actions if isinstance(a, argparse._SubParsersAction))
    return {o for a in sub.choices[command]._actions for o in a.option_strings}


def test_the_pointed_commands_take_a_rate() -> None:
    assert "--request-rate" in _options("recommend") and "--request-rate" in _options("fit")
    assert "--request-rate" not in _options("models")  # the premise: models takes none


@pytest.mark.parametrize("argv", [
    ("models", "--fits-on", "h100", "--request-rate", "5"),   # 5 read as the query: the flag alone is unknown
    ("models", "qwen", "--fits-on", "h100", "--request-rate=5"),
    ("models", "--fits-on", "h100", "--request-rat", "5"),     # a prefix of it
])
def test_models_request_rate_points_to_recommend(argv: tuple[str, ...]) -> None:
    done = run_cli(*argv)
    assert done.returncode == 2, (done.returncode, done.stdout[-300:])
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert lines[0].startswith("llmsizer: error: unrecognized arguments: --request-rat"), lines[0]
    assert POINTER in lines[0], lines[0]


def test_another_unknown_option_keeps_its_did_you_mean() -> None:
    done = run_cli("models", "--fits-on", "h100", "--concurency", "5")
    assert done.returncode == 2 and "did you mean '--concurrency'?" in done.stderr and POINTER not in done.stderr


def test_the_web_says_the_same_line() -> None:
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from llmsizer.web.app import create_app
    with TestClient(create_app(), raise_server_exceptions=False) as client:
        r = client.get("/api/v1/models/fits-on", params={"fits_on": "h100", "request_rate": "5"})
    assert r.status_code == 400 and r.json()["field"] == "request_rate", r.text
    assert r.json()["detail"] == f"unrecognized arguments: --request-rate 5; {POINTER}"
