"""Megatron-Core's routed experts as TEGroupedMLP runs them (estimate/duration.py ``megatron_expert_gemms``,
formulas/gemm_shapes.py eqs. (6)-(7)): one GEMM per local expert of M_e rows, and, under a TransformerEngine float8
recipe, in float8 (TransformerEngine @d0067d0d pytorch/module/grouped_linear.py lines 814-886).

Independent truth: the FLOPs and row counts written out from the models' published configs (Qwen3-30B-A3B
config.json: hidden 2048, 32 heads of 128, 4 KV heads, 48 layers, 128 experts, top 8, moe_intermediate_size 768;
gpt-oss-120b: hidden 2880, 128 experts, top 4, intermediate 2880), not from the code under test."""

from __future__ import annotations

from typing import Any

import pytest

from llmsizer.catalog.hardware import builtin_catalog
from llmsizer.estimate.duration import training_duration_for
from llmsizer.models import load_model

_MB = dict(method="full", precision="megatron-bf16", optimizer="adamw", zero=1, micro_batch=1, seq_len=4096,
           grad_accumulation=8, etp=1)


def _note(d: Any, name: str) -> Any:
    return next(a for a in d.assumptions if a.name == name)


def _run(model: str, gpus: int, **fields: Any) -> Any:
    h100 = builtin_catalog().devices["h100-sxm"]
    return training_duration_for(load_model(model), h100, gpus, 1e6, dict(_MB, **fields))


def test_megatron_float8_runs_the_routed_experts_in_float8() -> None:
    """Qwen3-30B-A3B, FP8 current scaling, EP 16 (PM1362's layout): every layer's q, k, v, o and its 8 routed
    experts' gate, up and down in float8, three GEMMs each per token (forward, input and weight gradients)."""
    d = _run("qwen3-30b-a3b", 16, ep=16, float8=True, float8_recipe="transformer-engine-current")
    attention = 2048 * 32 * 128 + 2 * 2048 * 4 * 128 + 32 * 128 * 2048
    experts = 8 * 3 * 2048 * 768
    assert _note(d, "float8_gemm_flops_per_token").value == 48 * 3 * 2 * (attention + experts)
    # torchao's convert_to_float8_training leaves grouped experts alone: the same run outside Megatron, attention only
    t = _run("qwen3-30b-a3b", 16, ep=16, precision="bf16", framework="torchtitan", etp=None, zero=3,
             float8=True, float8_recipe="torchao")
    assert _note(t, "float8_gemm_flops_per_token").value == 48 * 3 * 2 * attention


def test_expert_rows_and_local_experts_in_the_shape_note() -> None:
    """gpt-oss-120b at EP 8 (PM1361's layout): 128 / 8 = 16 local experts, each of 4096 x 8 x 4 / 128 = 1024 rows
    per micro-batch; fc1 2880 -> 2 x 2880 (gate and up fused, Megatron's TEGroupedMLP), on the H100's 132 SMs."""
    d = _run("gpt-oss-120b", 64, ep=8, pp=4)
    why = _note(d, "gemm_shape_efficiency").why
    assert "16 local experts of M_e = 1024 rows" in why
    assert "fc1 2880 -> 5760, fc2 2880 -> 2880" in why and "132 SMs" in why


def _expert_rate(d: Any) -> float:
    import re
    return float(re.search(r"([0-9.]+) of their rate", _note(d, "gemm_shape_efficiency").why).group(1))


@pytest.mark.parametrize(("model", "gpus", "fields", "rows", "experts", "shapes"), [
    # gpt-oss-20b (config.json: hidden 2880, 32 experts, top 4, intermediate 2880, gated), 1 GPU, seq 128:
    # 128 x 4 / 32 = 16 rows on each of the 32 experts
    ("gpt-oss-20b", 1, dict(seq_len=128), 16.0, 32, ((2880, 5760), (2880, 2880))),
    # Qwen3-30B-A3B (hidden 2048, 128 experts, top 8, moe_intermediate 768), EP 8, seq 1: 8 rows reach rank 0's
    # 16 experts; 16 (1 - (15/16)^8) = 6.45 of them get a row -> 6 GEMMs of 8 / 6 rows
    ("qwen3-30b-a3b", 8, dict(seq_len=1, ep=8), 8 / 6, 6, ((2048, 1536), (768, 2048))),
])
def test_expert_gemms_below_the_tile_are_memory_bound_not_tile_penalised(model: str, gpus: int, fields: Any,
                                                                          rows: float, experts: int,
                                                                          shapes: Any) -> None:
    """Below 128 rows an expert GEMM is memory-bound (eq. (2): the weight read), and its idle tile slots cost no
    memory time (a smaller cuBLAS tile, eq. (6a)): the experts' rate is eq. (2)'s memory bound, written here from
    the shapes above, the H100 SXM's 3.35 TB/s and the duration's own sustained math rate -- not the tile-penalised
    rate of a 256 x 128 tile (integ40 gave gpt-oss-20b 0.0114 of the step's rate, Qwen3 EP 8 seq 1 0.0)."""
    d = _run(model, gpus, **fields)
    if experts != (32 if model == "gpt-oss-20b" else 16):
        assert f"of which {experts} get a row" in _note(d, "gemm_shape_efficiency").why
    b, bw = 2.0, 3.35e12
    flops = sum(2 * rows * k * n for k, n in shapes)  # one pass; the three GEMMs per linear share F and bytes
    seconds = sum(b * (rows * k + k * n + rows * n) / bw for k, n in shapes)
    rate = d.peak_flops * d.utilization
    assert _expert_rate(d) == pytest.approx(flops / (rate * seconds), abs=1e-4)
