"""An MoE LoRA run's FLOP totals count eq. (4')'s per-micro-step term (formulas/training_time.py): the fused experts'
W + B A (formulas/lora.py eq. (3), D FLOPs per micro-step of T = micro_batch x seq_len tokens per device), which the
step time counts (T F + D) but `recommend --train`'s total_flops and the plan's "FLOPs per token" left out (the
reviewer's case: Qwen3-30B-A3B LoRA at seq 2048, D / T ~ 3.0e9 against F ~ 2.19e10 per token, totals ~14 % low).

Truth: eq. (4')'s parts computed here from the formulas' own pieces (exact parameter counts, the adapters' sizes and
the expert work of formulas/lora.py, whose per-micro-step FLOPs tests/training/test_moe_lora_flops.py checks against a
real PEFT step), not from the composed duration: tokens x (4N + 2N_e + 6N_a + 12 L d s + D / (micro_batch x seq)).
A dense model has no D: its totals are tokens x F as before."""

from __future__ import annotations

import pytest

from cli_capture import run_json
from llmsizer.estimate.speed import attention_width
from llmsizer.formulas.lora import expert_adapter_work, lora_params
from llmsizer.formulas.params import count_params
from llmsizer.models import load_model
from llmsizer.plan import make_plan
from llmsizer.request import parse_request

TOKENS, SEQ, MICRO = 100_000_000, 2048, 2
TARGETS = "all-linear"


def eq_4_prime(model: str) -> tuple[float, float]:
    """(F per token, D per micro-step) of eq. (4') for LoRA rank 16 on ``TARGETS``, no recomputation."""
    spec = load_model(model)
    lp = lora_params(spec, 16, TARGETS)
    work = expert_adapter_work(spec, 16, TARGETS) if lp.experts_total else None
    n, na = count_params(spec).active, lp.total - lp.experts_total
    n_e = work.grad_params if work is not None else 0.0
    f = 4 * n + 2 * n_e + 6 * na + 12 * spec.attention_layers * attention_width(spec) * SEQ
    return f, float(work.delta_flops_per_micro_step()) if work is not None else 0.0


def plan_flops_per_token(model: str) -> float:
    text = f"""\
version: 1
jobs:
  - name: ft
    kind: training
    model: {{name: {model}}}
    method: lora
    peft: {{rank: 16, targets: {TARGETS}}}
    settings: {{micro_batch: {MICRO}, seq_len: {SEQ}}}
    dataset: {{tokens: {TOKENS}}}
    resources: {{device: h100, count: 8}}
"""
    job = make_plan(parse_request(text, source="t.yaml"), alternatives=False).jobs[0].to_dict()
    return next(f["value"] for s in job["sections"] for f in s["figures"] if f["key"] == "flops_per_token")


@pytest.mark.parametrize("model, moe", [("qwen3-30b-a3b", True), ("qwen2.5-7b", False)])
def test_totals_count_the_per_micro_step_term(model: str, moe: bool) -> None:
    f, d = eq_4_prime(model)
    assert (d > 0) is moe
    expected = f + d / (MICRO * SEQ)
    _, rec = run_json("recommend", model, "--train", "--method", "lora", "--rank", "16", "--targets", TARGETS,
                      "--batch", str(MICRO), "--seq", str(SEQ), "--tokens", str(TOKENS))
    w = rec["workload"]
    assert w["flops_per_token"] == pytest.approx(expected, rel=1e-9)
    assert w["total_flops"] == pytest.approx(TOKENS * expected, rel=1e-9)
    assert plan_flops_per_token(model) == pytest.approx(expected, rel=1e-9)
    if moe:  # the step term is a visible share, and the formula says how it is spread
        assert d / (MICRO * SEQ) > 0.05 * f
        assert "D / T" in w["flops_formula"]
    else:
        assert w["flops_per_token"] == pytest.approx(f, rel=1e-9) and "D / T" not in w["flops_formula"]
