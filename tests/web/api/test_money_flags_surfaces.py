"""A budget flag reads money as a request file does, and its range says what it refuses (new-user probe).

Before: `recommend --max-cost '$50'` said "cannot read '$50' as a number" though a request file's money field takes
'$20k' (request/quantities.py ``parse_money``, the one money reader); and `--max-cost 0` was refused "must be
positive" (recommend.Constraints) while bad text quoted the range "[0, ...]". Now the flag reads the request files'
money text and its range is (0, 10^15]; Constraints reads its fields with the same reader and range. The price of a
kWh is no budget: 0 is free power (tests/cli/test_kwh_price.py). The web takes the field through the same
parser: the same answer, the same 400."""

from __future__ import annotations

import json

import pytest
from web_api_helpers import cli_error_line, run_cli, run_cli_json, web_line

from llmsizer.errors import InputError
from llmsizer.recommend import Constraints
from llmsizer.request.quantities import parse_money

pytest.importorskip("httpx")
pytest.importorskip("fastapi")

TRAIN = ("recommend", "qwen2.5-0.5b", "--train", "--tokens", "1B")


@pytest.mark.parametrize(("flag", "text", "dollars"), [
    ("--max-cost", "$50", 50.0), ("--max-cost", "$20k", 20e3), ("--max-cost", "1.5k USD", 1.5e3),
    ("--max-cost-per-hour", "$2/h", 2.0), ("--kwh-price", "$0.15", 0.15)])
def test_a_budget_flag_reads_money_as_a_request_file_does(flag, text, dollars):
    assert parse_money(text, "h" if text.endswith("/h") else None) == dollars  # the request files' reading
    got = run_cli_json(*TRAIN, flag, text)
    want = run_cli_json(*TRAIN, flag, repr(dollars))
    assert got == want and got["constraints"][flag.removeprefix("--").replace("-", "_")] == dollars


@pytest.mark.parametrize("flag", ["--max-cost", "--max-cost-per-hour"])
def test_zero_is_refused_by_the_range_the_message_quotes(client, flag):
    field = flag.removeprefix("--").replace("-", "_")
    zero = cli_error_line(*TRAIN, flag, "0")
    word = cli_error_line(*TRAIN, flag, "abc")
    for value, line in ((0.0, zero), ("abc", word)):  # the Python API: the flag's reader, its words after the name
        with pytest.raises(InputError) as e:
            Constraints(**{field: value})
        said = line.removeprefix(f"argument {flag}: ").removesuffix(" (see --help)")
        assert str(e.value) == f"{field}: {said}", (str(e.value), line)
    assert zero.startswith(f"argument {flag}: 0 is out of range; expected a number in (0, "), zero
    assert "more than 0" in zero and "[0," not in zero + word, (zero, word)
    assert run_cli(*TRAIN, flag, "0.01").returncode in (0, 1)  # taken: an answer (1: nothing is that cheap)
    r = client.post("/api/v1/recommend", json={"model": "qwen2.5-0.5b", "train": True, "tokens": "1B", field: 0})
    assert r.status_code == 400 and r.json()["field"] == field and r.json()["detail"] == web_line(zero, field), r.text


def test_the_web_takes_money_text_as_the_cli_does(client):
    r = client.post("/api/v1/recommend", json={"model": "qwen2.5-0.5b", "train": True, "tokens": "1B",
                                               "max_cost": "$50"})
    assert r.status_code == 200, r.text
    assert json.loads(r.text) == run_cli_json(*TRAIN, "--max-cost", "$50")
