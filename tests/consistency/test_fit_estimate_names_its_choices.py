"""fit's memory estimate says whose each value is, as the answer's own assumptions do (estimate/fit.py
``as_fit_chose``). fit sizes each layout by passing estimate_inference its degree and one replica's share of the load,
which the estimate records as given; the reviewer's case (`fit qwen2.5-7b --device h100 --count 4 --json`) had the
top level say tensor_parallel 4 was fit's choice while ``memory.assumptions`` said the user gave it, and with
``--tp 1 --concurrency 16`` the top level said 16 given while the estimate said 4 given.

Truth: what the command line (the request, the Python call) gave: a degree not given is fit's (default), one given is
given; the estimate's concurrency is ceil(16 / replicas) sequences, the fullest replica's share of the 16 given."""

from __future__ import annotations

import math

from cli_capture import run_json
from llmsizer import fit
from llmsizer.plan import make_plan
from llmsizer.request import parse_request

MODEL, DEVICE, COUNT = "qwen2.5-7b", "h100", 4


def named(assumptions: list[dict], name: str) -> dict | None:
    return next((a for a in assumptions if a["name"] == name), None)


def test_a_degree_fit_chose_is_its_default_in_the_estimate_too() -> None:
    _, d = run_json("fit", MODEL, "--device", DEVICE, "--count", str(COUNT))
    top, inner = named(d["assumptions"], "tensor_parallel"), named(d["memory"]["assumptions"], "tensor_parallel")
    assert d["tensor_parallel"] > 1 and top is not None and inner is not None  # (the case: fit shards)
    assert (inner["value"], inner["default"]) == (top["value"], top["default"]) == (d["tensor_parallel"], True)
    assert inner["why"].startswith("fit's choice")
    # the Python API's estimate: the same
    py = {a.name: a for a in fit(MODEL, DEVICE, COUNT).estimate.assumptions}
    assert (py["tensor_parallel"].value, py["tensor_parallel"].default) == (d["tensor_parallel"], True)


def test_a_replicas_share_of_the_given_load_is_given_as_that_load() -> None:
    _, d = run_json("fit", MODEL, "--device", DEVICE, "--count", str(COUNT), "--tp", "1", "--concurrency", "16")
    assert d["replicas"] == COUNT
    top, inner = named(d["assumptions"], "concurrency"), named(d["memory"]["assumptions"], "concurrency")
    assert (top["value"], top["default"]) == (16, False)
    assert (inner["value"], inner["default"]) == (math.ceil(16 / COUNT), False)
    assert inner["why"].startswith("given as 16;")
    assert named(d["assumptions"], "tensor_parallel")["default"] is False  # --tp 1 given
    py = {a.name: a for a in fit(MODEL, DEVICE, COUNT, tensor_parallel=1, concurrency=16).estimate.assumptions}
    assert (py["concurrency"].value, py["concurrency"].default) == (4, False)
    assert py["concurrency"].why.startswith("given as 16;")


def test_a_pinned_degree_stays_given() -> None:
    _, d = run_json("fit", MODEL, "--device", DEVICE, "--count", str(COUNT), "--tp", "2", "--concurrency", "16")
    inner = d["memory"]["assumptions"]
    assert (named(inner, "tensor_parallel")["value"], named(inner, "tensor_parallel")["default"]) == (2, False)
    assert named(inner, "tensor_parallel")["why"] == "given"
    assert named(inner, "concurrency")["value"] == math.ceil(16 / (COUNT // 2))


def plan_estimate(extra: str = "") -> dict:
    text = f"""\
version: 1
jobs:
  - name: chat
    kind: inference
    model: {{name: {MODEL}}}
    engine: vllm
{extra}    traffic: {{concurrency: {{typical: 12, peak: 40}}, context: {{typical: 3k, peak: 8k}}, output: {{typical: 300, peak: 800}}}}
    resources: {{device: {DEVICE}, count: {COUNT}}}
"""
    job = make_plan(parse_request(text, source="t.yaml"), alternatives=False).jobs[0]
    return job.to_dict()


def test_the_plans_estimate_names_fits_choices() -> None:
    j = plan_estimate()
    tp = named(j["memory_estimate"]["assumptions"], "tensor_parallel")
    assert j["hardware"]["tensor_parallel"] > 1
    assert (tp["value"], tp["default"]) == (j["hardware"]["tensor_parallel"], True)
    pinned = plan_estimate("    tensor_parallel: 1\n")
    inner = pinned["memory_estimate"]["assumptions"]
    # the plan's estimate is fit's (`fit --tp 1`'s names no degree for one device): the degree given is fit's own
    # assumption, which the plan lists
    top = named(pinned["assumptions"], "tensor_parallel")
    assert (top["value"], top["default"]) == (1, False)
    assert named(inner, "tensor_parallel") is None or named(inner, "tensor_parallel")["default"] is False
    conc = named(inner, "concurrency")
    assert (conc["value"], conc["default"]) == (math.ceil(40 / COUNT), False) and conc["why"].startswith("given as 40;")


def test_the_plans_estimate_names_vllms_own_defaults_as_defaults() -> None:
    """The plan's estimate is fit's on the device, with the batch limits vLLM takes there (its max_num_seqs /
    max_num_batched_tokens defaults); the request gives neither, so neither is 'given'."""
    inner = plan_estimate()["memory_estimate"]["assumptions"]
    for name in ("max_num_seqs", "max_num_batched_tokens"):
        assert named(inner, name)["default"] is True, named(inner, name)
