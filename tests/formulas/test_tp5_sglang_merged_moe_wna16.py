"""Eq. TP5's SGLang merged-layer rule and MoeWNA16's halved-group bytes (formulas/tensor_parallel.py
``quant_block_refusal``, ``_merged_partitions``, ``moe_wna16_group``, ``moe_wna16_extra_bytes``, eq. TP5b).

Truth, written out here from the engines' source and applied to each checkpoint's own config.json (the catalog rows'
``config``, not llmsizer's tensors):

- sglang 0.5.23 (PyPI wheel) srt/layers/quantization/fp8.py:600-610 ``validate_block_quant_shapes``: every output
  partition of a merged layer (``len(output_partition_sizes) > 1``) a multiple of block_n, at any degree; the
  partitions of QKVParallelLinear (srt/layers/linear.py:1137-1158: q heads / tp x head_dim; max(1, kv / tp) K and V
  heads x head_dim) and MergedColumnParallelLinear (:485-488: each output size / tp). vllm 0.19.1's fp8-block lets
  such a layer through (layers/linear.py:502-521).
- vllm 0.19.1 quantization/moe_wna16.py:237-330 ``MoeWNA16Method.create_weights``: the group halved while
  I / tp or hidden is not a multiple of it; w13_qweight [E, 2 I/tp, H / pack8] uint8, w2_qweight [E, H, I/tp / pack8],
  w13_scales [E, 2 I/tp, H / g], w2_scales [E, H, I/tp / g] in the model dtype, qzeros (``has_zp``: AWQ zero_point)
  [E, 2 I/tp / pack8, H / g] and [E, H / pack8, I/tp / g] uint8; empty g_idx. Marlin MoE takes the experts instead
  when hidden % 128 == 0 and I/tp % max(64, g) == 0 (utils/marlin_utils.py:229-245).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llmsizer.formulas.tensor_parallel import (
    moe_wna16_extra_bytes,
    moe_wna16_group,
    quant_block_refusal,
    serving_tensor_parallel_refusal,
    shard_weights,
)
from llmsizer.formulas.weight_formats import weight_bytes
from llmsizer.models import load_model

MODELS = Path(__file__).resolve().parents[2] / "src/llmsizer/catalog/data/models"


def config(name: str) -> dict:
    return json.loads((MODELS / f"{name}.json").read_text())["config"]


def sglang_qkv_loads(cfg: dict, tp: int, block_n: int = 128) -> bool:
    """SGLang's merged check on qkv_proj and gate_up_proj of a dense Llama-shaped model, from config.json."""
    heads, kv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = cfg.get("head_dim") or cfg["hidden_size"] // heads
    parts = [heads // tp * hd, max(1, kv // tp) * hd, cfg["intermediate_size"] // tp]
    return all(p % block_n == 0 for p in parts)


@pytest.mark.parametrize("name", ["llama-3.2-1b", "llama-3.1-8b", "llama-3.2-3b", "qwen2.5-0.5b"])
def test_sglang_checks_every_merged_partition(name: str) -> None:
    cfg, spec = config(name), load_model(name)
    seen = set()
    for tp in (1, 2, 4, 8, 16):
        if serving_tensor_parallel_refusal(spec, tp, "sglang") is not None:
            continue
        loads = sglang_qkv_loads(cfg, tp)
        seen.add(loads)
        assert (quant_block_refusal(spec, tp, "sglang", "fp8-block") is None) == loads, (name, tp)
        assert quant_block_refusal(spec, tp, "vllm", "fp8-block") is None or tp > 1  # vLLM: row-parallel only
    assert seen


def test_the_known_merged_cases() -> None:
    # Llama-3.2-1B at TP 8: one of its 8 KV heads per rank, 64 rows of k_proj, not a block of 128
    why = str(quant_block_refusal(load_model("llama-3.2-1b"), 8, "sglang", "fp8-block"))
    assert "attn_k" in why and "64 output rows" in why and "tensor_parallel 8" in why and "Llama-3.2-1B" in why
    assert quant_block_refusal(load_model("llama-3.2-1b"), 8, "vllm", "fp8-block") is None
    # DeepSeek-V2-Lite's dense layer 0 (intermediate 10944 = 85.5 blocks): SGLang refuses it even at TP 1
    why = str(quant_block_refusal(load_model("deepseek-v2-lite"), 1, "sglang", "fp8-block"))
    assert "10944 output rows" in why and "no degree" in why and "vLLM lets" in why
    assert quant_block_refusal(load_model("deepseek-v2-lite"), 1, "vllm", "fp8-block") is None


QWEN3_NEXT_SMALL = {
    "architectures": ["Qwen3NextForCausalLM"], "model_type": "qwen3_next", "vocab_size": 151936, "hidden_size": 2048,
    "intermediate_size": 5120, "moe_intermediate_size": 1024, "shared_expert_intermediate_size": 1024,
    "num_experts": 16, "num_experts_per_tok": 4, "decoder_sparse_step": 1, "mlp_only_layers": [],
    "norm_topk_prob": True, "num_hidden_layers": 4, "full_attention_interval": 4, "num_attention_heads": 16,
    "num_key_value_heads": 2, "head_dim": 256, "linear_num_key_heads": 4, "linear_num_value_heads": 32,
    "linear_key_head_dim": 128, "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4, "partial_rotary_factor": 0.25,
    "rope_theta": 10000000, "max_position_embeddings": 32768, "rms_norm_eps": 1e-6, "tie_word_embeddings": False,
    "torch_dtype": "bfloat16", "hidden_act": "silu", "attention_bias": False}


def test_gated_deltanet_in_proj_qkvz_partitions() -> None:
    """in_proj_qkvz's partitions [key, key, value, value] / tp (sglang qwen3_next.py:355-366): 4 key heads of 128
    give 512 / tp rows, whole blocks at TP 1-4, 64 at TP 8; vLLM (fp8-block) lets the merged layer through and its
    row-parallel out_proj (4096 / 8 = 512 inputs) is whole."""
    from llmsizer.readers.hf_config import spec_from_config

    spec = spec_from_config(QWEN3_NEXT_SMALL, name="qwen3-next-small")
    assert [tp for tp in (1, 2, 4, 8) if quant_block_refusal(spec, tp, "sglang", "fp8-block") is None] == [1, 2, 4]
    assert "ssm_in" in str(quant_block_refusal(spec, 8, "sglang", "fp8-block"))
    assert quant_block_refusal(spec, 8, "vllm", "fp8-block") is None


def vllm_moe_wna16_rank_bytes(cfg: dict, tp: int, group: int, zero_points: bool, layers: int) -> int | None:
    """MoeWNA16's experts bytes per rank (create_weights' shapes, 4-bit, bf16 scales), or None where Marlin takes them."""
    hidden, inter, experts = cfg["hidden_size"], cfg.get("moe_intermediate_size") or cfg["intermediate_size"], (
        cfg.get("num_experts") or cfg["num_local_experts"])
    per = inter // tp
    if hidden % 128 == 0 and per % max(64, group) == 0:
        return None
    g = group
    while per % g or hidden % g:
        g //= 2
    pack8 = 2
    w13 = 2 * per * hidden // pack8 + 2 * per * (hidden // g) * 2 + (2 * per // pack8 * (hidden // g) if zero_points else 0)
    w2 = hidden * per // pack8 + hidden * (per // g) * 2 + (hidden // pack8 * (per // g) if zero_points else 0)
    return experts * (w13 + w2) * layers


@pytest.mark.parametrize(("name", "tp"), [("minimax-m2.7", 8), ("minimax-m2.7", 16), ("qwen3-30b-a3b", 4),
                                          ("qwen3-30b-a3b", 8), ("qwen3-30b-a3b", 2)])
def test_moe_wna16_experts_bytes_per_rank(name: str, tp: int) -> None:
    """The experts' bytes per rank on vLLM at the halved group are MoeWNA16's own layout (AWQ: zero points), not
    the checkpoint's bytes / tp; where Marlin MoE takes them (Qwen3-30B-A3B at TP 2: 384 per rank), / tp."""
    cfg, spec = config(name), load_model(name)
    layers = cfg["num_hidden_layers"]
    wb = weight_bytes(spec, "awq-int4", 128, 2)
    dev = shard_weights(spec, wb, tp, 2.0, "vllm", 128)
    want = vllm_moe_wna16_rank_bytes(cfg, tp, 128, True, layers)
    if want is None:
        assert moe_wna16_group(spec, tp, "vllm", "awq-int4") is None
        assert abs(dev.by_component["experts"] - wb.by_component["experts"] / tp) <= 1
    else:
        assert abs(dev.by_component["experts"] - want) <= 2, (dev.by_component["experts"], want)
        assert dev.by_component["experts"] > wb.by_component["experts"] / tp  # the halved group's extra scales
        assert abs(dev.total - (shard_weights(spec, wb, tp, 2.0, "transformers", 128).total
                                + sum(moe_wna16_extra_bytes(spec, "vllm", "awq-int4", 128, 2, tp)[1].values()))) \
            <= abs(dev.total) * 0.02  # the rest as before (transformers keeps other matrices whole: within 2 %)


def test_gptq_symmetric_experts_drop_zero_points_and_g_idx() -> None:
    """GPTQ sym (the default): MoeWNA16 builds no zero points and empty g_idx (moe_wna16.py:307-343)."""
    cfg, spec = config("minimax-m2.7"), load_model("minimax-m2.7")
    wb = weight_bytes(spec, "gptq-int4", 128, 2)
    dev = shard_weights(spec, wb, 8, 2.0, "sglang", 128)
    want = vllm_moe_wna16_rank_bytes(cfg, 8, 128, False, cfg["num_hidden_layers"])
    assert want is not None and abs(dev.by_component["experts"] - want) <= 2


W4A16_CT = {"quant_method": "compressed-tensors", "format": "pack-quantized", "quantization_status": "compressed",
            "config_groups": {"group_0": {"targets": ["Linear"], "weights": {
                "num_bits": 4, "type": "int", "symmetric": True, "strategy": "group", "group_size": 128}}},
            "ignore": ["lm_head"]}


def test_compressed_tensors_experts_take_no_moe_wna16_refusal() -> None:
    """review41 D6: MoeWNA16's group halving is the gptq/awq experts' path (vllm 0.19.1 moe_wna16.py:237-247,
    taking quant_method gptq/awq); compressed-tensors experts go through its own MoE methods
    (compressed_tensors_moe.py), so a pack-quantized CT MoE is not refused in MoeWNA16's words. Mixtral-8x22B's
    experts are 16384 wide (config.json), 16384 / 24 not whole: the gptq rung is refused there with that message."""
    import dataclasses
    cfg = config("mixtral-8x22b-v0.1")
    assert cfg["intermediate_size"] % 24 and cfg["num_attention_heads"] % 24 == 0
    spec = load_model("mixtral-8x22b-v0.1")
    ct = dataclasses.replace(spec, quantization=tuple(sorted(W4A16_CT.items())))
    why = quant_block_refusal(ct, 24, "vllm", "compressed-tensors") or ""
    assert "MoeWNA16" not in why
    assert "MoeWNA16" in (quant_block_refusal(spec, 24, "vllm", "gptq-int4") or "")
