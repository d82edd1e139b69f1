"""--kwh-price has one range (numbers.KWH_PRICE) on fit, recommend, the web API and recommend.Constraints, and
Constraints reads money and limits as recommend's flags do.

Before: `recommend --kwh-price 0` was refused "out of range ... (US dollars, more than 0; 10^15 is past any budget)"
(the budget range) while `fit --kwh-price 0` was taken (the money range); and ``Constraints(max_cost='$5k')`` or
``max_cost='abc'`` raised a bare TypeError ('<=' between str and int)."""

from __future__ import annotations

import pytest
from web_api_helpers import cli_error_line, run_cli, run_cli_json, web_line

import llmsizer
from llmsizer.errors import FieldError, InputError
from llmsizer.recommend import Constraints

FIT = ("fit", "llama-3.2-1b", "--device", "rtx-4090")
RECOMMEND = ("recommend", "qwen2.5-0.5b", "--train", "--tokens", "1B")


def test_free_power_is_a_price_on_both_commands():
    """0 USD/kWh: owned hardware priced at $0/h (formulas/cost.py eq. 3: energy x price), on fit and recommend."""
    data = run_cli_json(*FIT, "--kwh-price", "0")
    assert data["cost"]["price_per_hour"] == 0 and "at $0.0/kWh" in data["cost"]["basis"], data["cost"]
    assert run_cli(*RECOMMEND, "--kwh-price", "0").returncode in (0, 1)
    assert Constraints(kwh_price=0).kwh_price == 0


@pytest.mark.parametrize("value", ["-1", "2000", "abc"])
def test_fit_and_recommend_refuse_a_kwh_price_in_the_same_words(value):
    fit = cli_error_line(*FIT, "--kwh-price", value)
    rec = cli_error_line(*RECOMMEND, "--kwh-price", value)
    assert fit == rec and fit.startswith("argument --kwh-price: "), (fit, rec)
    if value != "abc":
        assert "expected a number in [0, 1,000] (US dollars per kWh" in fit, fit
    with pytest.raises(FieldError) as e:  # the Python API: the same reader and range, named by its field
        Constraints(kwh_price=value if value == "abc" else float(value))
    said = fit.removeprefix("argument --kwh-price: ").removesuffix(" (see --help)")
    assert e.value.field == "kwh_price" and str(e.value) == f"kwh_price: {said}", (str(e.value), fit)
    for call in (llmsizer.fit, llmsizer.fit_training):  # Python's fits: the same reader (a bare TypeError on 'abc')
        with pytest.raises(FieldError) as e:
            call("llama-3.2-1b", "rtx-4090", kwh_price=value if value == "abc" else float(value))
        assert e.value.field == "kwh_price" and str(e.value) == f"kwh_price: {said}", (call, str(e.value), fit)


def test_a_kwh_price_reads_money_text_per_kwh():
    assert Constraints(kwh_price="$0.12/kWh").kwh_price == 0.12
    assert llmsizer.fit("llama-3.2-1b", "rtx-4090", kwh_price="$0.3/kWh").cost == llmsizer.fit(
        "llama-3.2-1b", "rtx-4090", kwh_price=0.3).cost
    assert run_cli_json(*FIT, "--kwh-price", "$0.3/kWh") == run_cli_json(*FIT, "--kwh-price", "0.3")


@pytest.mark.parametrize(("field", "text", "value"), [
    ("max_cost", "$5k", 5000.0), ("max_cost_per_hour", "$2/h", 2.0), ("deadline", "3 days", 3 * 86400.0),
    ("max_ttft", "2s", 2.0), ("tokens_per_second", 50, 50.0)])
def test_constraints_read_text_as_the_flags_do(field, text, value):
    assert getattr(Constraints(**{field: text}), field) == value


@pytest.mark.parametrize(("field", "flag", "value"), [
    ("max_cost", "--max-cost", "abc"), ("max_cost", "--max-cost", "5 EUR"), ("deadline", "--deadline", "soon"),
    ("tokens_per_second", "--tokens-per-second", "0"), ("user_tokens_per_second", "--user-tokens-per-second", "-3")])
def test_bad_constraints_are_one_line_naming_the_field_in_the_clis_words(field, flag, value):
    train = ("--train", "--tokens", "1B") if field in ("max_cost", "deadline") else ()
    line = cli_error_line("recommend", "qwen2.5-0.5b", *train, flag, value)
    assert line.startswith(f"argument {flag}: "), line
    py = value if not value.lstrip("-").isdigit() else float(value)
    with pytest.raises(InputError) as e:
        Constraints(**{field: py})
    assert str(e.value) == f"{field}: " + line.removeprefix(f"argument {flag}: ").removesuffix(" (see --help)"), (
        str(e.value), line)


def test_the_web_takes_and_refuses_a_kwh_price_as_the_cli_does(client):
    r = client.post("/api/v1/fit", json={"model": "llama-3.2-1b", "device": "rtx-4090", "kwh_price": 0})
    assert r.status_code == 200 and r.json()["cost"]["price_per_hour"] == 0, r.text
    for command, body in (("fit", {"device": "rtx-4090"}), ("recommend", {"train": True, "tokens": "1B"})):
        r = client.post(f"/api/v1/{command}", json={"model": "llama-3.2-1b", **body, "kwh_price": -1})
        assert r.status_code == 400 and r.json()["field"] == "kwh_price", r.text
        assert r.json()["detail"] == web_line(cli_error_line(*FIT, "--kwh-price", "-1"), "kwh_price"), r.text
