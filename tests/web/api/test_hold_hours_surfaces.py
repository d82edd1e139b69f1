"""`capacity book --hold-hours` and the web's ``hold_hours``: one range (numbers.HOLD_HOURS) and one default
(numbers.DEFAULT_HOLD_HOURS, which provider/store.py DEFAULT_HOLD is) on both surfaces (review32 D1).

Before: the CLI read any float (`--hold-hours -5` booked a hold that had already lapsed, exit 0; `nan` and `1e9`
ended in a traceback, exit 1) while the web refused the same values with a range of its own."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from web_api_helpers import ROOT, cli_error_line, run_cli, web_line

pytest.importorskip("fastapi")
pytest.importorskip("sqlalchemy")

REQUEST = ROOT / "examples" / "cpu-internal-tool.yaml"
INVENTORY = ROOT / "examples" / "provider" / "inventory.yaml"


@pytest.fixture()
def client(tmp_path):
    from fastapi.testclient import TestClient

    from llmsizer.web.api_capacity import ProviderConfig
    from llmsizer.web.app import create_app
    cfg = ProviderConfig(inventory=str(INVENTORY), db=str(tmp_path / "web.db"))
    with TestClient(create_app(provider=cfg), raise_server_exceptions=False) as c:
        yield c


@pytest.mark.parametrize("value", ["nan", "-5", "1e9", "inf", "8785"])
def test_a_bad_hold_is_one_line_on_the_cli_and_the_same_400_on_the_web(tmp_path, client, value):
    line = cli_error_line("capacity", "book", str(REQUEST), "--inventory", str(INVENTORY), "--db",
                          f"sqlite:///{tmp_path / 'cli.db'}", "--tentative", f"--hold-hours={value}")
    assert line.startswith("argument --hold-hours: ") and "expected a number in [0, 8,784]" in line, line
    number = float(value) if value in ("nan", "inf") else json.loads(value)  # -5 a JSON int, as a client sends it
    for given in (number, value):  # a JSON number (NaN, Infinity as Python's json writes them) and text
        body = json.dumps({"request": REQUEST.read_text(), "tentative": True, "hold_hours": given})
        r = client.post("/api/v1/capacity/book", content=body, headers={"Content-Type": "application/json"})
        assert r.status_code == 400 and r.json()["detail"] == web_line(line, "hold_hours"), (given, r.text)
        assert r.json()["field"] == "hold_hours", r.text


@pytest.mark.parametrize("value", ["1k", "abc", "24h"])
def test_hours_are_no_count_so_no_suffix_is_read_or_offered(tmp_path, client, value):
    """Hours are not counts: '1k' is no way to write 1,000 hours, and the message offers no "'7B' = 7 x 10^9" hint
    (review34 N3: before, '1k' booked a 1,000-hour hold and 'abc' was told that decimal suffixes are read)."""
    line = cli_error_line("capacity", "book", str(REQUEST), "--inventory", str(INVENTORY), "--db",
                          f"sqlite:///{tmp_path / 'cli.db'}", "--tentative", f"--hold-hours={value}")
    assert line.startswith(f"argument --hold-hours: cannot read '{value}' as a number; "), line
    assert "suffix" not in line and "10^9" not in line, line
    body = json.dumps({"request": REQUEST.read_text(), "tentative": True, "hold_hours": value})
    r = client.post("/api/v1/capacity/book", content=body, headers={"Content-Type": "application/json"})
    assert r.status_code == 400 and r.json()["detail"] == web_line(line, "hold_hours"), r.text


def test_the_default_hold_is_one_value_on_every_surface(tmp_path):
    from llmsizer.cli.main import build_parser
    from llmsizer.numbers import DEFAULT_HOLD_HOURS, HOLD_HOURS
    from llmsizer.provider.store import DEFAULT_HOLD
    assert DEFAULT_HOLD == dt.timedelta(hours=DEFAULT_HOLD_HOURS)
    book = build_parser(all_commands=True).parse_args(["capacity", "book", "r.yaml", "--inventory", "i.yaml"])
    assert book.hold_hours == DEFAULT_HOLD_HOURS
    assert HOLD_HOURS.low <= DEFAULT_HOLD_HOURS <= HOLD_HOURS.high
    # the booked hold lasts the default: the CLI's held booking expires DEFAULT_HOLD after it was made
    done = run_cli("capacity", "book", str(REQUEST), "--inventory", str(INVENTORY), "--db",
                   f"sqlite:///{tmp_path / 'b.db'}", "--tentative", "--json")
    assert done.returncode == 0, done.stderr
