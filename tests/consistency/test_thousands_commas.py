"""A comma in a number is a thousands separator or an error, on every surface. Before, the readers dropped every
comma: ``--context 8,5k --concurrency 1,5`` sized 87,040 tokens x 15 sequences (exit 0), and a request file's
``context: {peak: "8,5k"}`` and the web's ``"context": "8,5k"`` the same, while a size ('24,5GiB') was refused
(new-user probe). Truth: the digit-grouping convention (groups of three digits between commas, as Python's own
``format(1048576, ',')`` writes them); '8,5' is a decimal comma and '1,2,3,4' a list, neither a number here."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from cli_capture import run, run_json
from llmsizer import estimate_inference
from llmsizer.errors import InputError
from llmsizer.request import load_request

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "request"))
from helpers import job_yaml  # noqa: E402

MODEL = "qwen2.5-0.5b"


@pytest.mark.parametrize("text", ["8,5k", "1,2,3,4", "1,5", "1,0000", "0,500"])  # 0,500: a decimal comma
def test_a_comma_that_groups_no_thousands_is_refused_everywhere(tmp_path: Path, text: str) -> None:
    code, _, err = run("infer", MODEL, "--context", text)
    assert code == 2 and len(err.strip().splitlines()) == 1 and repr(text) in err
    with pytest.raises(InputError, match="cannot read"):
        estimate_inference(MODEL, context=text)
    with pytest.raises(InputError, match="cannot read"):
        estimate_inference(MODEL, concurrency=text)
    path = tmp_path / "req.yaml"
    path.write_text(job_yaml("inference", f"traffic: {{concurrency: {{peak: 2}}, context: {{peak: '{text}'}}}}"),
                    "utf-8")
    with pytest.raises(InputError):
        load_request(path)


@pytest.mark.parametrize(("flag", "field", "text", "meant"), [("--context", "context", "32,768", 32768),
                                                         ("--context", "context", "12,000", 12000),
                                                         ("--concurrency", "concurrency", "1,024", 1024)])
def test_thousands_separators_are_read_as_the_number(flag: str, field: str, text: str, meant: int) -> None:
    assert format(meant, ",") == text  # the grouping Python writes
    assert run_json("infer", MODEL, flag, text) == run_json("infer", MODEL, flag, str(meant))
    assert estimate_inference(MODEL, **{field: text}).to_dict() == estimate_inference(MODEL, **{field: meant}).to_dict()


def test_a_timeout_reads_seconds_or_a_duration_not_a_count() -> None:
    """``measure --timeout`` takes seconds: '5m' is no count of 5 x 10^6 seconds (review: the count reader made it
    that) but a duration whose 'm' could be minutes or months (request/quantities.py parse_duration refuses it);
    '30 min' is 1800 s, as a request file's durations read."""
    from llmsizer.cli.common import seconds_arg
    from llmsizer.numbers import SECONDS
    from llmsizer.request.quantities import parse_duration

    read = seconds_arg(SECONDS)
    assert read("1800") == 1800.0 and read("30 min") == parse_duration("30 min") == 1800.0
    with pytest.raises(Exception, match="minutes or months"):
        read("5m")


@pytest.mark.parametrize(("text", "meant"), [("$1,200", 1200.0), ("$1,2", None), ("$0,5", None)])
def test_money_reads_commas_by_the_same_rule(text: str, meant: float | None) -> None:
    """A request file's amounts (request/quantities.py) read digit separators by the counts' rule: '$1,2' was $12."""
    from llmsizer.request.quantities import parse_money

    if meant is None:
        with pytest.raises(InputError, match="comma separates thousands only"):
            parse_money(text)
    else:
        assert parse_money(text) == meant


def test_durations_read_commas_by_the_same_rule() -> None:
    """'1,5 days' was 15 days; '1,000 hours' stays 1000 hours (3.6 x 10^6 s, 3600 s per hour)."""
    from llmsizer.request.quantities import parse_duration

    with pytest.raises(InputError, match="comma separates thousands only"):
        parse_duration("1,5 days")
    assert parse_duration("1,000 hours") == 1000 * 3600
