"""A service its named devices cannot run (fit refuses it: the 'cannot-fit' error) shows no per-device need
(s7probe): Llama-3.1-70B at awq-int4 on vLLM over 8 x V100 (vLLM refuses AWQ below compute capability 7.5) read
"memory 199.24 GiB per device at peak, budget 28.80 GiB (budget unknown)": the whole model's need at TP 1 printed
as per device of eight, next to a budget called unknown."""

from __future__ import annotations

from llmsizer.plan import make_plan
from llmsizer.render.plan_text import render_plan_text
from llmsizer.request import parse_request

REQUEST = ("version: 1\njobs:\n  - name: chat70\n    kind: inference\n    model: {name: llama-3.1-70b}\n"
           "    quantization: awq-int4\n    engine: vllm\n    resources: {device: v100-sxm2-32gb, count: 8}\n"
           "    traffic:\n      concurrency: {typical: 16, peak: 16}\n      context: {typical: 32k, peak: 32k}\n"
           "      output: {typical: 500, peak: 500}\n    service: {duration: 3 months}\n")


def test_no_need_per_device_for_a_workload_the_devices_cannot_run() -> None:
    plan = make_plan(parse_request(REQUEST, source="t.yaml"), alternatives=False)
    job = plan.jobs[0]
    assert any(c.id == "cannot-fit" and c.severity == "error" for c in plan.checks)
    mem = job.section("memory")
    assert mem.value("need_peak") is None and mem.value("fits") is None
    text = render_plan_text(plan)
    assert "not fitted: see the error above" in text and "budget unknown" not in text
