"""A money error gives examples of what was asked (smalls3 #4): `--max-cost-per-hour abc` said "... e.g. '$12/h';
write e.g. '20000 USD', '$20k', '1.5M USD'" (totals, for a rate), and `--max-cost '$2/h'` only "cannot read as an
amount", not that a rate was given where a total is asked, nor where rates go. Each example an error offers must be
read back by the same reader at the same period, and a rate's examples are plain numbers or name their period."""

from __future__ import annotations

import re

import pytest

from cli_capture import run
from llmsizer.errors import InputError
from llmsizer.request import parse_request
from llmsizer.request import quantities as Q


def _examples(message: str) -> list[str]:
    return re.findall(r"'([^']*)'", message.split("write e.g.", 1)[1])


@pytest.mark.parametrize("period, words", [(None, ""), ("h", "per hour"), ("month", "per month"),
                                           ("kWh", "per kWh")])
def test_each_example_in_the_error_reads_back_at_its_period(period: str | None, words: str) -> None:
    with pytest.raises(InputError) as e:
        Q.parse_money("abc", period)
    message = str(e.value)
    assert f"as an amount{' ' + words if words else ''};" in message
    examples = _examples(message)
    assert len(examples) >= 2
    for text in examples:
        assert Q.parse_money(text, period) > 0
    if period is not None:  # the rate's examples say their period, or are plain numbers; no total's '$20k'
        assert all(re.fullmatch(r"[\d.]+", t) or "/" in t for t in examples)


@pytest.mark.parametrize("rate", ["$2/h", "2 USD per hour", "$5k/month", "$0.12/kWh"])
def test_a_rate_where_a_total_is_asked_is_named_as_one(rate: str) -> None:
    with pytest.raises(InputError, match=r"it is a rate \(per (hour|month|kWh)\), and this is a total"):
        Q.parse_money(rate)


def test_the_cli_points_a_rate_to_the_hourly_flag() -> None:
    code, _, err = run("recommend", "llama-3.1-8b", "--max-cost", "$2/h")
    assert code == 2 and "it is a rate (per hour)" in err and "--max-cost-per-hour" in err
    code, _, err = run("recommend", "llama-3.1-8b", "--max-cost-per-hour", "abc")
    assert code == 2 and "'$12.5/h'" in err and "20000 USD" not in err


def test_a_request_file_total_given_as_a_rate_names_the_rate_keys() -> None:
    text = ("version: 1\njobs:\n  - name: t\n    kind: training\n    model: {name: qwen2.5-0.5b}\n"
            "    dataset: {tokens: 1M}\n    budget: {total: $2/h}\n")
    with pytest.raises(InputError, match="it is a rate .*per_hour or per_month"):
        parse_request(text, source="t.yaml")
