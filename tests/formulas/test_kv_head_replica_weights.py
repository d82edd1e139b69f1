"""Per-GPU weights on vLLM / SGLang where tensor parallelism exceeds the KV heads, and GLM-4.5's fp32 router on vLLM,
by hand from config.json's numbers (formulas/tensor_parallel.py eq. TP3, weight_formats.py
``ENGINE_MODEL_TENSOR_BYTES``).

The rules, read from the engines' code (vllm 0.19.1 and sglang 0.5.6 PyPI wheels):

- ``QKVParallelLinear`` (vLLM layers/linear.py:1010-1027, SGLang layers/linear.py:817-834): with tp_size >=
  total_num_kv_heads each rank builds num_kv_heads = 1 (num_kv_head_replicas = tp / kv ranks hold the same head), so
  its K and V rows are head_dim x hidden each (and head_dim of bias), where tp < kv gives kv / tp heads. A rank holds
  max(1, kv // tp) / kv of each K/V projection, not 1 / tp.
- vLLM glm4_moe.py:143-148 builds GLM-4.5's router ``nn.Linear(hidden, n_routed_experts, bias=False,
  dtype=torch.float32)`` in every MoE layer (layers first_k_dense_replace .. num_hidden_layers - 1; the MTP layer is
  not loaded); SGLang glm4_moe.py:332-334 ``nn.Parameter(torch.empty((n_routed_experts, hidden)))`` in the model
  dtype. Both keep it whole on every rank.

Independent of llmsizer's tensor inventory: each expected number is the shapes above times their bytes per element,
and the rank's other bytes come from the estimate at TP sizes the rule leaves at 1 / tp (per-GPU = (T - R) / tp + R for
T the model's bytes and R those kept whole, two unknowns two estimates give).
"""

from __future__ import annotations

import pytest

from llmsizer import estimate_inference
from llmsizer.catalog.models import entries


def _weights(model: str, engine: str, tp: int, fmt: str = "bf16") -> int:
    e = estimate_inference(model, engine=engine, tensor_parallel=tp, context=4096, weights=fmt)
    return e.item("weights").bytes


def _kv_projection_bytes(cfg: dict, layers: int, size: int = 2) -> int:
    """K and V weights (+ their biases where attention_bias) of ``layers`` attention layers, whole."""
    width = cfg["num_key_value_heads"] * cfg["head_dim"]
    per = width * cfg["hidden_size"] + (width if cfg.get("attention_bias") else 0)
    return 2 * layers * per * size


@pytest.mark.parametrize(("model", "engine", "layers", "tp_split", "tp"),
                         [("qwen3-next-80b-a3b-thinking", "vllm", 12, 2, 8),  # 48 layers, every 4th full attention
                          ("qwen3-30b-a3b", "sglang", 48, 4, 8),
                          ("glm-4.5-air", "vllm", 46, 8, 16)])
def test_rank_holds_one_whole_kv_head_beyond_the_kv_heads(model, engine, layers, tp_split, tp):
    cfg = entries()[model].config
    kv = cfg["num_key_value_heads"]
    assert tp > kv == tp_split
    total, split = _weights(model, engine, 1), _weights(model, engine, tp_split)
    sharded = tp_split * (total - split) / (tp_split - 1)  # T - R
    whole = total - sharded  # R
    kv_bytes = _kv_projection_bytes(cfg, layers)
    expected = sharded / tp + whole + kv_bytes * (max(1, kv // tp) / kv - 1 / tp)
    assert _weights(model, engine, tp) == pytest.approx(expected, abs=64)


def test_qwen3_next_tp8_the_issue_number():
    """Qwen3-Next at TP 8 on vLLM: 12 full-attention layers x K and V [2 x 256, 2048] bf16, 1/2 per rank instead of
    1/8: 18,874,368 B more per GPU than splitting them 8 ways."""
    cfg = entries()["qwen3-next-80b-a3b-thinking"].config
    kv = _kv_projection_bytes(cfg, 12)
    assert kv == 12 * 2 * 2 * 256 * 2048 * 2
    assert kv * (1 / 2 - 1 / 8) == 18_874_368
    total, two = _weights("qwen3-next-80b-a3b-thinking", "vllm", 1), _weights("qwen3-next-80b-a3b-thinking", "vllm", 2)
    without = 2 * (total - two) / 8 + total - 2 * (total - two)
    assert _weights("qwen3-next-80b-a3b-thinking", "vllm", 8) - without == pytest.approx(18_874_368, abs=64)


@pytest.mark.parametrize(("model", "moe_layers", "experts", "hidden"),
                         [("glm-4.5", 92 - 3, 160, 5120), ("glm-4.5-air", 46 - 1, 128, 4096)])
@pytest.mark.parametrize(("fmt", "tp"), [("bf16", 1), ("bf16", 8), ("fp8", 8)])
def test_glm_router_is_fp32_on_vllm_only(model, moe_layers, experts, hidden, fmt, tp):
    """vLLM's router at 4 B, SGLang's at 2 B (the model dtype; neither quantizes it): the per-GPU weights differ by
    2 B x the routers' elements at every TP size and weight format (GLM-4.5: 145,817,600 B; Air: 47,185,920 B)."""
    cfg = entries()[model].config
    assert (cfg["num_hidden_layers"] - cfg["first_k_dense_replace"], cfg["n_routed_experts"], cfg["hidden_size"]) \
        == (moe_layers, experts, hidden)
    router = moe_layers * experts * hidden
    assert _weights(model, "vllm", tp, fmt) - _weights(model, "sglang", tp, fmt) == (4 - 2) * router



def _mamba2_extra(cfg: dict, tp: int) -> float:
    """Bytes a rank holds beyond 1 / tp of Mamba-2's in_proj and conv1d with n_groups 1 (bf16): the B and C rows of
    the tp - 1 added groups, / tp, over hidden (in_proj) and d_conv (conv1d) columns, in every Mamba-2 layer."""
    assert cfg["mamba_n_groups"] == 1
    layers = (sum(1 for t in cfg["layer_types"] if t == "mamba") if cfg.get("layer_types")
              else cfg["num_hidden_layers"])  # Falcon-H1: a Mamba-2 mixer in every layer
    rows = 2 * (tp - 1) * cfg["mamba_d_state"] / tp
    return layers * rows * (cfg["hidden_size"] + cfg["mamba_d_conv"]) * 2


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_mamba2_single_group_is_copied_to_every_rank(engine):
    """Mamba-2 with n_groups 1 (Granite-4.0-H-Tiny: 36 Mamba-2 layers, hidden 1536, d_state 128, d_conv 4): vLLM
    mamba_mixer2.py:293-300, :332-348 and SGLang layers/attention/mamba/mamba.py:185-238 extend the groups to tp (one
    copy per rank) and build in_proj [d_inner + conv_dim + heads, hidden] and conv1d [conv_dim, 1, d_conv]
    column-parallel over the extended conv_dim = d_inner + 2 x tp x d_state. TP 2 and TP 4 stay within its 4 KV
    heads; per-GPU = (T - R) / tp + R + E_tp, T the TP 1 weights, E_tp by hand, R from TP 2, TP 4 predicted:
    21,288,960 B of E at TP 4."""
    model = "granite-4.0-h-tiny"
    cfg = entries()[model].config
    e2, e4 = _mamba2_extra(cfg, 2), _mamba2_extra(cfg, 4)
    assert e4 == 36 * 2 * 3 * 128 / 4 * (1536 + 4) * 2 == 21_288_960
    total, two = _weights(model, engine, 1), _weights(model, engine, 2)
    sharded = (total - (two - e2)) * 2  # T - R
    assert _weights(model, engine, 4) == pytest.approx(sharded / 4 + total - sharded + e4, abs=64)
