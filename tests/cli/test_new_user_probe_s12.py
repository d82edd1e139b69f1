"""Bad input found by probing the CLI as a new user (session 12). Each case failed before its fix: a value silently
changed, help printed on standard output for a usage error, spurious errors, or an exit 1 for bad input. The
expected messages come from the rule each surface must share (the Python API's own refusal, the CLI flag's range),
never from the surface under test."""

from __future__ import annotations

import pytest

from cli_capture import run
from llmsizer import estimate_inference
from llmsizer.errors import InputError


def _one_line(argv: tuple[str, ...]) -> str:
    code, out, err = run(*argv)
    assert code == 2 and out == "" and err.count("\n") == 1 and "Traceback" not in err, (code, out[-200:], err)
    return err.removeprefix("llmsizer: error: ").rstrip("\n")


@pytest.mark.parametrize(("argv", "flag", "value"), [
    (("infer", "qwen3-8b", "--concurrency", "2.7"), "--concurrency", "2.7"),
    (("infer", "qwen3-8b", "--context", "4096.7"), "--context", "4096.7"),
    (("train", "qwen3-8b", "--batch", "1.5"), "--batch/--micro-batch", "1.5"),
])
def test_a_fraction_where_a_whole_number_is_needed_is_refused_as_the_python_api_refuses_it(argv, flag, value):
    """`--concurrency 2.7` was rounded to 3 sequences without a word (exit 0) while `estimate_inference(
    concurrency=2.7)` and `--count 1.5` refuse a fraction."""
    line = _one_line(argv)
    assert line.startswith(f"argument {flag}: must be a whole number, got {value}; expected an integer in"), line
    if flag == "--concurrency":
        with pytest.raises(InputError) as e:
            estimate_inference("qwen3-8b", concurrency=2.7)
        assert str(e.value).removeprefix("concurrency: ") in line


def test_a_scaled_amount_is_still_rounded_to_whole_tokens():
    """'8.5k' names a rounded amount: 8.5 x 1024 = 8704 tokens, as before."""
    code, out, _ = run("infer", "qwen3-8b", "--context", "8.5k", "--json")
    assert code == 0 and (code, out) == run("infer", "qwen3-8b", "--context", "8704", "--json")[:2]


REQUEST = """version: 1
jobs:
  - name: chat
    kind: {kind}
    model: {{name: qwen3-8b}}
    traffic: {{concurrency: {concurrency}, context: 4k}}
    resources: {{device: h100, count: 1}}
"""


@pytest.mark.parametrize(("concurrency", "said"), [
    ("2.7", ": must be a whole number, got 2.7"), ("0", ": 0 is out of range"), ("-4", ": -4 is out of range"),
    ("100000000000000", ": 100000000000000 is out of range"),
    ("{typical: 4, peak: 1e9}", ".peak: 1000000000 is out of range")])
def test_a_request_concurrency_is_checked_with_the_flags_range_at_its_line(tmp_path, concurrency, said):
    """`traffic.concurrency: 100000000000000` passed the reader (a count of up to 10^15 "people, examples or
    parameters") and the plan exited 1 with an ERROR check "Cannot be fitted"; now it is bad input at its line,
    with --concurrency's range and reason."""
    p = tmp_path / "r.yaml"
    p.write_text(REQUEST.format(kind="inference", concurrency=concurrency))
    line = _one_line(("plan", str(p)))
    # the range and reason are the flag's own (what --concurrency says of the same bad value)
    flag = _one_line(("infer", "qwen3-8b", "--concurrency", "100000000000000"))
    expected = flag[flag.index("expected "):].removesuffix(" (see --help)")
    assert expected.startswith("expected an integer in [1, "), flag
    assert line == f"{p}:6: job 'chat' (inference): traffic.concurrency{said}; {expected}", line


def test_a_mistyped_job_kind_is_one_error_not_the_other_kinds_required_fields(tmp_path):
    """`kind: inferance` also reported "method: is required" and "dataset: is required" (a training job's fields)."""
    p = tmp_path / "r.yaml"
    p.write_text(REQUEST.format(kind="inferance", concurrency="4"))
    code, out, err = run("plan", str(p))
    assert code == 2 and out == ""
    assert err.splitlines() == [f"llmsizer: error: {p}:4: job 'chat': kind: unknown value 'inferance'; choose one of: "
                                "training, inference; did you mean 'inference'?"], err


@pytest.mark.parametrize(("group", "subcommands"), [("request", "new, check, schema"), ("measure", "infer, train")])
def test_a_command_group_without_its_subcommand_is_one_line(group, subcommands):
    """`llmsizer request` printed the group's help on standard output and exited 2."""
    line = _one_line((group,))
    assert line == f"`llmsizer {group}` needs a subcommand: {subcommands} (see `llmsizer {group} --help`)"


def test_a_zero_budget_names_the_flag():
    """Refused by the flag's range, (0, 10^15]: the words of recommend.Constraints' "must be positive"."""
    line = _one_line(("recommend", "qwen3-8b", "--max-cost-per-hour", "0"))
    assert line.startswith("argument --max-cost-per-hour: 0 is out of range; expected a number in (0, "), line


def test_what_fits_with_a_gpu_engine_on_a_cpu_is_refused_once_as_fit_refuses_it():
    """`models --fits-on cpu --memory 16GiB --engine vllm` listed 73 models each "no: the vllm profile models GPU
    serving, not device cpu" and exited 1 ("none fits"); `fit` refuses the same engine and device in one line."""
    fit_line = _one_line(("fit", "qwen3-8b", "--device", "cpu", "--memory", "16GiB", "--engine", "vllm"))
    assert _one_line(("models", "--fits-on", "cpu", "--memory", "16GiB", "--engine", "vllm")) == fit_line


def test_what_fits_for_a_search_that_matches_no_model_is_bad_input():
    """`models zzzz --fits-on h100` answered "0 of 0 models fit", exit 1 (as if none fitted); the plain listing
    `models zzzz` now refuses the search the same way (issue #16, exit 2: catalog.search_some). The web answers the
    CLI's line with a 400."""
    line = _one_line(("models", "zzzz", "--fits-on", "h100"))
    assert line == "no catalog model matches 'zzzz' (list them with `llmsizer models`)"
    assert _one_line(("models", "zzzz")) == line
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from llmsizer.web.app import create_app

    with TestClient(create_app(), raise_server_exceptions=False) as client:
        r = client.get("/api/v1/models/fits-on", params={"fits_on": "h100", "query": "zzzz"})
    assert r.status_code == 400 and r.json()["detail"] == line
