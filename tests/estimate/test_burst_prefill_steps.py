"""Eq. P1s (estimate/speed_result.py SpeedEstimate.prefill_batch_seconds): a burst's prompts prefilled in the
engine's steps of max_num_batched_tokens pay each step's fixed part (the Gated DeltaNet calls of formulas/speed.py
eq. 17, eq. 7's overhead), weight read and launches again. Checked from the formula's inputs (the prefill's parts and
efficiency.GDN_CHUNK_CALL_SECONDS), not from an earlier output: Qwen3.5-397B-A17B (45 Gated DeltaNet layers) on
8 x B200 under vLLM, 32 prompts of 8192 tokens (validation/moe_multigpu_decode.csv MD08's shape)."""

from __future__ import annotations

import math

import pytest

from llmsizer.catalog.models import find
from llmsizer.errors import InputError
from llmsizer.estimate import efficiency as E
from llmsizer.estimate import engines as ENG
from llmsizer.estimate.serving_load import under_load
from llmsizer.estimate.speed import estimate_speed
from llmsizer.formulas.serving_queue import burst_serving

PROMPT, C = 8192, 32


def _speed() -> object:
    return estimate_speed(find("qwen3.5-397b-a17b").spec(), "b200", count=8, prompt_tokens=PROMPT,
                          output_tokens=1024, concurrency=C, engine="vllm", weights_format="bf16")


def _step(sp: object, prompts: float) -> float:
    """One forward carrying ``prompts`` prompts' work, from the prefill's parts (eq. 3' plus eq. K1's overlap)."""
    p = sp.prefill  # type: ignore[attr-defined]
    device = (max(prompts * p.compute_seconds, p.memory_seconds)
              + prompts * (p.comm_seconds + p.attention_seconds + p.elementwise_seconds) + p.overhead_seconds)
    return max(device, p.host_seconds)


def test_one_prompt_per_step_pays_n_idle_prefills() -> None:
    """Chunk = prompt: N equal prompts take N steps, each one prompt's idle prefill with its fixed part."""
    sp = _speed()
    assert sp.prefill.overhead_seconds == pytest.approx(45 * E.GDN_CHUNK_CALL_SECONDS.expected)
    assert sp.prefill_batch_seconds(C, steps=C) == pytest.approx(C * sp.prefill.seconds)
    # the fixed part alone: N calls, not one (the once-per-burst count is N - 1 calls short)
    fixed = 45 * E.GDN_CHUNK_CALL_SECONDS.expected
    assert (sp.prefill_batch_seconds(C, steps=C) - C * (sp.prefill.seconds - fixed)) == pytest.approx(C * fixed)


def test_two_prompts_per_step_pay_half_the_calls() -> None:
    """Chunk = 2 prompts: ceil(N P / B) = 16 steps of two prompts' work, 16 fixed parts."""
    sp = _speed()
    steps = math.ceil(C * PROMPT / (2 * PROMPT))
    assert steps == 16
    assert sp.prefill_batch_seconds(C, steps=steps) == pytest.approx(steps * _step(sp, 2))
    assert sp.prefill_batch_seconds(C) == pytest.approx(_step(sp, C))  # one step: eq. P1 as before
    with pytest.raises(InputError):
        sp.prefill_batch_seconds(C, steps=0)


def test_burst_ttft_times_the_engine_steps() -> None:
    """under_load's burst (eq. Q8) takes the N steps' time: eq. Q8 fed N one-prompt steps of the idle prefill."""
    sp = _speed()
    load = under_load(sp, "vllm", PROMPT).load
    assert load["prefill_steps"] == C
    want = burst_serving(C, C * _step(sp, 1), C, sp.decode.seconds, 1024, ENG.API_SERVER_SECONDS["vllm"],
                         (PROMPT, PROMPT), ENG.API_SERVER_SERIAL_SHARE.get("vllm", 1.0))
    assert load["ttft_burst_seconds"] == pytest.approx(want["ttft_seconds"])
    # the mean prompt waits for (N + 1) / 2 steps, each at least one idle prefill
    assert load["ttft_burst_seconds"] > sp.prefill.seconds * (C + 1) / 2
