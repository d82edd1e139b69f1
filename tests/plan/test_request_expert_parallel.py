"""A serving job's ``data_parallel`` / ``expert_parallel`` (request/fields.py) make each replica tensor_parallel x
data_parallel devices with the routed experts split over them, as `fit --tp T --dp D --enable-expert-parallel` does
(estimate/fit.py ``ServingLayout.replicas``, the one home of the devices per replica); left out, the plan takes
fit's own layout (``with_pipeline_layouts``, which tries expert parallelism where eq. TP5 refuses a degree).

Truth, apart from the plan: the CLI's `fit` answers for the same model, devices, engine and peak load; devices per
replica by hand (8 / 1 replica).
"""

from __future__ import annotations

import pytest

from cli.cli_run import answer
from llmsizer.errors import InputError
from llmsizer.plan import make_plan
from llmsizer.request import parse_request
from request.helpers import job_yaml

MODEL = "minimax-m2.7"


def body(extra: str, resources: str = "resources: {device: h100-sxm, count: 8}") -> str:
    return "\n".join([f"model: {{name: {MODEL}}}", "engine: vllm", resources,
                      "traffic: {concurrency: {typical: 32, peak: 64}, context: {typical: 2k, peak: 4k}, "
                      "output: {typical: 256, peak: 256}}", extra])


def plan_of(text: str):
    return make_plan(parse_request(text, source="t.yaml"), alternatives=False).jobs[0]


@pytest.mark.parametrize("extra,flags", [
    ("tensor_parallel: 1\ndata_parallel: 8\nexpert_parallel: true", ["--tp", "1", "--dp", "8",
                                                                      "--enable-expert-parallel"]),
    ("", []),  # fit's own layout: the same rule the plan reads through fit
])
def test_the_plan_lays_out_what_fit_answers(capsys: pytest.CaptureFixture[str], extra: str, flags: list[str]) -> None:
    hw = plan_of(job_yaml("inference", body(extra))).hardware
    _, f = answer(["fit", MODEL, "--device", "h100-sxm", "--count", "8", "--engine", "vllm", *flags,
                   "--context", "4096", "--output-tokens", "256", "--concurrency", "64"], capsys)
    assert (hw.tensor_parallel, hw.data_parallel, hw.expert_parallel, hw.replicas) == (
        f["tensor_parallel"], f.get("data_parallel", 1), f.get("expert_parallel", False), f["replicas"])
    assert f.get("data_parallel", 1) > 1  # eq. TP5 refuses TP 8: an expert-parallel layout either way
    assert hw.count // hw.replicas == hw.tensor_parallel * hw.data_parallel == 8  # a replica is T x D devices
    assert hw.to_dict()["data_parallel"] == hw.data_parallel


def test_without_resources_refused_naming_the_field() -> None:
    with pytest.raises(InputError, match="data_parallel"):
        parse_request(job_yaml("inference", body("data_parallel: 8", resources="")), source="t.yaml")
