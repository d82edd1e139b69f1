"""The plan's training wall clock says what it sums (review32 N3). Its text said "tokens x FLOPs/token / (n devices x
peak x u utilization)", eq. (3), but the number is the duration estimate's: tokens over the step's tokens/s, each
optimizer step its micro-steps' compute and the communication compute does not hide, then the optimizer update, the
gradient accumulation and any paging (estimate/duration.py step_time). Checked here against arithmetic written out:
the parts the text names add up to the step it names (to their 3 significant figures), the step is the plan's own
"time per step" figure, and the wall clock is tokens / tokens per step optimizer steps of that time (a fraction of
the last one included), so the text cannot name a sum other than the number."""

from __future__ import annotations

import re

import pytest

from llmsizer.plan import make_plan
from llmsizer.request import parse_request
from request.helpers import job_yaml

CASES = {
    "one device, LoRA": """\
    settings: {micro_batch: 2, seq_len: 1024, grad_accumulation: 4}
    resources: {device: h100-sxm, count: 1}
    """,
    "DDP over 2 machines": """\
    method: full
    settings: {micro_batch: 1, seq_len: 2048, grad_accumulation: 2}
    resources: {device: h100-sxm, count: 8, nodes: 2, network: 100 Gb/s}
    """,
    "tensor parallel 2": """\
    method: full
    settings: {micro_batch: 1, seq_len: 2048, grad_accumulation: 2, tp: 2}
    resources: {device: h100-sxm, count: 2}
    """,
}
NUMBER = r"([0-9][0-9.,e+-]*) s\b"


@pytest.mark.parametrize("body", CASES.values(), ids=CASES.keys())
def test_the_wall_clock_text_names_the_sum_it_is(body: str) -> None:
    job = make_plan(parse_request(job_yaml("training", body), source="t.yaml"), alternatives=False).jobs[0]
    dur = job.section("duration")
    fig = dur.get("seconds")
    assert fig is not None and fig.value
    how = fig.formula
    assert "FLOPs/token /" not in how and "eq. (3)" not in fig.source, how
    step = dur.value("step_seconds")
    named = re.search(r"per optimizer step of ([0-9.e+-]+) s, (.*?); compute is", how)
    assert named is not None, how
    assert float(named.group(1)) == pytest.approx(step, rel=5e-3)
    parts = named.group(2)
    micro = re.match(r"(\d+) micro-steps? x \((.*?)\)", parts)
    if micro:  # data parallel: k x (compute + communication not hidden), then the per-step terms
        total = int(micro.group(1)) * sum(float(x) for x in re.findall(NUMBER, micro.group(2)))
        rest = parts[micro.end():]
    else:  # model parallel (tensor / pipeline): its step, eq. (P6)
        assert parts.startswith("model-parallel step ") and "(P6)" in parts, parts
        total = float(re.match(r"model-parallel step ([0-9.e+-]+) s", parts).group(1))  # type: ignore[union-attr]
        rest = parts[parts.index("eq. (P6))") + len("eq. (P6))"):]
    total += sum(float(x) for x in re.findall(NUMBER, rest))
    assert total == pytest.approx(step, rel=1e-2), (how, step)
    # the wall clock: tokens / (tokens per step) steps of that time; and the tokens/s the text names
    steps = dur.value("tokens") / dur.value("tokens_per_step")
    assert fig.value == pytest.approx(steps * step, rel=1e-9)
    rate = float(re.match(r"tokens / ([0-9,]+) tokens/s", how).group(1).replace(",", ""))  # type: ignore[union-attr]
    assert fig.value == pytest.approx(dur.value("tokens") / rate, rel=1e-3)
