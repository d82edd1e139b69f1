"""A request file's ``resources.headroom`` is `fit --headroom` (one rule: estimate/verdict.py): the plan's budget,
verdict and exit code equal fit's for the same headroom; the file is checked with the flag's own range and the
engine rule (SGLang keeps no headroom) and refused with the flag's words. Before, request files had no headroom:
the plan always used the default while fit took --headroom."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cli_capture import run
from llmsizer.plan import make_plan
from llmsizer.request import RequestError, parse_request
from llmsizer.request.schema import json_schema, published_schema_text

MODEL_SERVE, MODEL_TRAIN, DEVICE = "llama-3.1-8b", "llama-3.2-3b", "l4"


def _request(headroom: float | None, engine: str = "vllm") -> str:
    h = "" if headroom is None else f", headroom: {headroom}"
    return ("version: 1\njobs:\n"
            f"  - name: chat\n    kind: inference\n    model: {{name: {MODEL_SERVE}}}\n    engine: {engine}\n"
            f"    resources: {{device: {DEVICE}{h}}}\n"
            # bf16 pinned, as fit with no --weights (left out, the plan takes the format fit names where bf16
            # does not fit: fits_at)
            "    quantization: none\n"
            "    traffic:\n      concurrency: {typical: 2, peak: 2}\n      context: {typical: 4k, peak: 4k}\n"
            "      output: {typical: 256, peak: 256}\n"
            f"  - name: ft\n    kind: training\n    model: {{name: {MODEL_TRAIN}}}\n    method: lora\n"
            "    settings: {micro_batch: 1, seq_len: 2048}\n    dataset: {tokens: 10M tokens}\n"
            "    handover: {model_destination: s3://bucket/ft}\n"
            f"    resources: {{device: {DEVICE}{h}}}\n")


def _fit(headroom: float | str | None, *argv: str) -> tuple[int, dict[str, Any]]:
    code, out, _ = run("fit", *argv, "--device", DEVICE, *(("--headroom", str(headroom)) if headroom is not None
                                                           else ()), "--json")
    return code, json.loads(out)


@pytest.mark.parametrize("headroom", [None, 0.5])
def test_the_plan_of_a_request_headroom_is_fits_answer(headroom: float | None, tmp_path: Path) -> None:
    plan = make_plan(parse_request(_request(headroom), source="t.yaml"), alternatives=False)
    serve, train = plan.jobs
    fcode_s, fs = _fit(headroom, MODEL_SERVE, "--engine", "vllm", "--context", "4k", "--concurrency", "2",
                       "--output-tokens", "256")
    fcode_t, ft = _fit(headroom, MODEL_TRAIN, "--train", "--method", "lora", "--seq", "2048")
    for job, f in ((serve, fs), (train, ft)):
        mem = job.section("memory")
        assert f["headroom"] == (0.1 if headroom is None else headroom)
        assert mem.value("fits") is f["fits"]
    # training: device memory x (1 - headroom); vLLM: what its pool of gpu_memory_utilization = 1 - headroom offers
    assert train.section("memory").value("budget") == ft["budget_per_device"]
    assert serve.section("memory").value("budget") == fs["memory"]["details"]["workload_budget_bytes"]
    assert fs["memory"]["details"]["gpu_memory_utilization"] == 1 - fs["headroom"]
    # the headroom decides: both fit with the default, neither keeps half of an L4 free
    assert (fs["fits"], ft["fits"]) == ((True, True) if headroom is None else (False, False))
    req = tmp_path / "r.yaml"
    req.write_text(_request(headroom))
    code, _, _ = run("plan", str(req), "--no-alternatives")
    assert (fcode_s, fcode_t) == ((0, 0) if headroom is None else (1, 1)) and code == max(fcode_s, fcode_t)


def test_a_request_headroom_is_checked_as_the_flag() -> None:
    """Out of range: the flag's range and reason; on SGLang: fit's refusal, at the field's line."""
    _, _, flag = run("fit", MODEL_SERVE, "--device", DEVICE, "--headroom", "1.5")
    bound = flag.split("1.5 is out of range; ", 1)[1].split(" (see --help)")[0].strip()
    assert bound == "expected a number in [0, 0.99] (share of device memory kept free; 1 would leave nothing to use)"
    with pytest.raises(RequestError) as e:
        parse_request(_request(1.5), source="t.yaml")
    assert len(e.value.errors) == 2 and all(f"resources.headroom: 1.5 is out of range; {bound}" in x
                                            for x in e.value.errors)
    code, _, fit_err = run("fit", MODEL_SERVE, "--device", DEVICE, "--engine", "sglang", "--headroom", "0.2")
    assert code == 2
    with pytest.raises(RequestError) as e:
        parse_request(_request(0.2, engine="sglang"), source="t.yaml")
    assert e.value.errors == ["t.yaml:7: job 'chat' (inference): resources.headroom: "
                              + fit_err.strip().removeprefix("llmsizer: error: headroom ")]
    for kind in ("training_job", "inference_job"):  # the schema carries the flag's bounds (and is published so)
        h = json_schema()["$defs"][kind]["properties"]["resources"]["properties"]["headroom"]
        # a share: 0.1 or '10%', like the request's other shares; the bounds bind its number form
        assert (h["type"], h["minimum"], h["maximum"]) == (["string", "number"], 0, 0.99)
    assert json.loads(published_schema_text()) == json_schema()
    assert parse_request(_request(0.0), source="t.yaml").jobs[0].resources.headroom == 0.0


@pytest.mark.parametrize("text,value", [("'10%'", 0.1), ("10%", 0.1), ("'55%'", 0.55), ("0%", 0.0)])
def test_a_request_headroom_takes_a_percentage_as_the_other_shares(text: str, value: float, tmp_path: Path) -> None:
    """`resources.headroom: 10%` was refused ("must be a number") while `pricing.reserved_discount: '35%'` and the
    other shares were read; one parser (request/quantities.py parse_share) now reads every share, the headroom with
    its flag's range. The plan is the one of the number: same verdict and budget as headroom 0.1 / 0.55."""
    pct = parse_request(_request(None).replace(f"{{device: {DEVICE}}}", f"{{device: {DEVICE}, headroom: {text}}}"),
                        source="t.yaml")
    assert [j.resources.headroom for j in pct.jobs] == [pytest.approx(value)] * 2
    num = parse_request(_request(value), source="t.yaml")
    a, b = make_plan(pct, alternatives=False), make_plan(num, alternatives=False)
    for ja, jb in zip(a.jobs, b.jobs, strict=True):
        assert ja.section("memory").value("budget") == jb.section("memory").value("budget")
        assert ja.section("memory").value("fits") == jb.section("memory").value("fits")
    req = tmp_path / "r.yaml"
    req.write_text(_request(None).replace(f"{{device: {DEVICE}}}", f"{{device: {DEVICE}, headroom: '99.5%'}}"))
    code, _, err = run("request", "check", str(req))
    assert code == 2 and len(err.strip().splitlines()) == 2  # one line per job, each with the flag's range
    assert all("resources.headroom: 0.995 is out of range; expected a number in [0, 0.99]" in x
               for x in err.strip().splitlines())


@pytest.mark.parametrize("text,value", [("10%", 0.1), ("55%", 0.55), ("0%", 0.0)])
def test_the_flag_reads_a_percentage_as_the_request_file_does(text: str, value: float) -> None:
    """`--headroom 10%` was refused ("cannot read '10%' as a number") while a request's `headroom: 10%` was read: the
    flag now parses with the same request/quantities.py parse_share and the headroom's range. Truth: 10% is 0.1 by
    definition; the training budget is the L4's catalog memory x (1 - headroom)."""
    code, pct = _fit(text, MODEL_TRAIN, "--train", "--method", "lora", "--seq", "2048")
    code_num, num = _fit(value, MODEL_TRAIN, "--train", "--method", "lora", "--seq", "2048")
    assert code == code_num and pct["headroom"] == pytest.approx(value)
    assert pct["budget_per_device"] == num["budget_per_device"]
    from llmsizer.catalog.hardware import load_catalog
    memory = load_catalog().find(DEVICE).memory_bytes  # NVIDIA's 23,034 MiB (catalog row with its source)
    assert pct["budget_per_device"] == pytest.approx(memory * (1 - value), abs=1)
    _, _, flag = run("fit", MODEL_SERVE, "--device", DEVICE, "--headroom", "99.5%")
    with pytest.raises(RequestError) as e:
        parse_request(_request(None).replace(f"{{device: {DEVICE}}}", f"{{device: {DEVICE}, headroom: '99.5%'}}"),
                      source="t.yaml")
    said = flag.split("argument --headroom: ", 1)[1].split(" (see --help)")[0]
    assert said == "0.995 is out of range; expected a number in [0, 0.99] (share of device memory kept free; 1 would " \
                   "leave nothing to use)" and all(said in x for x in e.value.errors)
