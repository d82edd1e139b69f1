"""ModelOpt NVFP4 checkpoints that keep some layers in bf16 (formulas/modelopt_exclusions.py).

The matcher is checked against vLLM's own examples: tests/quantization/test_layer_skipped.py
(vllm-project/vllm@aaabd11923c5c0d0ed1489fe67324f50f1a0df54), the exact-match cases, since
``is_layer_excluded`` calls ``is_layer_skipped`` without ``skip_with_substr``. It is also checked against the
wildcard forms the ModelOpt code names (vllm 0.19.1 modelopt.py:222-236 ``module_path*``; ``model.layers.0.*`` and
``*.self_attn*`` as the DeepSeek / GLM / MiniMax NVFP4 releases write them).

The bytes are rebuilt here from the tensors vLLM 0.19.1 creates, not from llmsizer's inventory. An excluded linear
gets ``UnquantizedLinearMethod``, one bf16 weight of its full shape (modelopt.py:190-193). A quantized one gets
``ModelOptNvFp4LinearMethod.create_weights`` (modelopt.py:1079-1151): uint8 [N, K/2], fp8 [N, K/16] and two fp32
scalars per fused shard. The routed experts get ``ModelOptNvFp4FusedMoE.create_weights`` (:1227-1341). The shapes
come from deepseek_v2.py:860-917 (``fused_qkv_a_proj`` [q_lora + kv_lora + rope, H], ``q_b_proj``, ``kv_b_proj``,
``o_proj``), :200-222 (``gate_up_proj`` / ``down_proj``), :262-272 (router [E, H] bf16,
``e_score_correction_bias`` fp32 [E]) and :290-321 (shared and routed experts).
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from cli_capture import run
from llmsizer import estimate_inference
from llmsizer.catalog.models import find_spec
from llmsizer.errors import InputError
from llmsizer.formulas.modelopt_exclusions import modelopt_excluded
from llmsizer.formulas.weight_formats import stored_format, weight_bytes
from llmsizer.readers.hf_config import spec_from_config

U8 = FP8 = 1
FP32 = 4
BF16 = 2
QKV = {"qkv_proj": ("q_proj", "k_proj", "v_proj"), "gate_up_proj": ("gate_proj", "up_proj")}


# vLLM tests/quantization/test_layer_skipped.py, exact-match (default) cases, with is_layer_excluded's own answer
@pytest.mark.parametrize(("prefix", "listed", "excluded"), [
    ("model.layers.0.lm_head", ["model.layers.0.lm_head"], True),  # test_exact_match_full_path_hit
    ("model.layers.0.block_sparse_moe.experts.0.w1", ["model.layers.0.block_sparse_moe.experts.0.w1"], True),
    ("model.layers.0.mlp.experts", ["model.layers.0.mlp.experts.0.w1"], True),  # ..._child_ignored_legacy
    ("model.layers.0.lm_head", [], False),  # test_empty_ignored_layers
    # test_exact_match_short_pattern_misses: is_layer_skipped says False, but is_layer_excluded's substring test
    # (modelopt.py:165-175) then finds the entry inside the prefix
    ("language_model.model.layers.0.linear_attn.in_proj_qkv", ["linear_attn.in_proj_qkv"], True),
    ("model.layers.0.mlp.down_proj", ["linear_attn.in_proj_qkv"], False),  # test_substr_match_unrelated_misses
])
def test_vllm_own_examples(prefix: str, listed: list[str], excluded: bool) -> None:
    assert modelopt_excluded(prefix, listed) is excluded


def test_a_fused_layer_half_listed_is_refused_as_vllm_refuses_it() -> None:  # test_fused_mapping_partial_skip_raises
    with pytest.raises(InputError, match="same precision"):
        modelopt_excluded("model.layers.0.self_attn.qkv_proj", ["model.layers.0.self_attn.q_proj"], QKV)
    listed = [f"model.layers.0.self_attn.{p}_proj" for p in "qkv"]
    assert modelopt_excluded("model.layers.0.self_attn.qkv_proj", listed, QKV)


@pytest.mark.parametrize(("prefix", "pattern", "excluded"), [
    ("model.layers.0.self_attn.qkv_proj", "model.layers.0.*", True),
    ("model.layers.10.self_attn.qkv_proj", "model.layers.0.*", False),
    ("model.layers.5.self_attn.o_proj", "*.self_attn*", True),
    ("model.layers.5.mlp.experts", "*.self_attn*", False),
    ("model.layers.3.self_attn.indexer.wq_b", "model.layers.3.self_attn.indexer*", True),
    ("model.layers.3.mlp.shared_experts.gate_up_proj", "model.layers.3.mlp.shared_experts*", True),
    ("model.layers.3.mlp.experts", "model.layers.3.mlp.shared_experts*", False),
    # fnmatch has no notion of dotted names: 'model.layers.1*' also takes layers 10-19, as in vLLM
    ("model.layers.12.mlp.gate_up_proj", "model.layers.1*", True),
    # an entry inside the prefix is a match (the substring test): a layer path with no wildcard at all
    ("model.layers.2.self_attn.o_proj", "model.layers.2.self_attn", True),
])
def test_wildcards(prefix: str, pattern: str, excluded: bool) -> None:
    assert modelopt_excluded(prefix, [pattern], QKV) is excluded


def _linear(n: int, k: int, shards: int = 1) -> int:
    return n * (k // 2) * U8 + n * (k // 16) * FP8 + 2 * shards * FP32


TINY = {"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "hidden_size": 256, "head_dim": 64,
        "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 2, "num_experts": 8,
        "num_experts_per_tok": 2, "moe_intermediate_size": 128, "intermediate_size": 512, "vocab_size": 1024,
        "decoder_sparse_step": 1, "mlp_only_layers": [], "tie_word_embeddings": False, "torch_dtype": "bfloat16",
        "max_position_embeddings": 4096, "rms_norm_eps": 1e-6, "rope_theta": 1e6, "norm_topk_prob": True}


def _tiny_bytes(bf16_attention: set[int]) -> int:
    """Every tensor vLLM holds for TINY in NVFP4, the attention of the layers in ``bf16_attention`` unquantized."""
    h, hd, e, i = 256, 64, 8, 128
    q, kv = 4 * hd, 2 * hd
    total = (2 * 1024 * h + h) * BF16  # embedding, lm_head, final norm
    for layer in range(2):
        if layer in bf16_attention:
            total += ((q + 2 * kv) * h + h * q) * BF16
        else:
            total += _linear(q + 2 * kv, h, shards=3) + _linear(h, q)
        total += e * 2 * i * (h // 2) + e * 2 * i * (h // 16) + 4 * e * FP32  # w13, its scales and scalars
        total += e * h * (i // 2) + e * h * (i // 16) + 2 * e * FP32  # w2
        total += (e * h + 2 * hd + 2 * h) * BF16  # router, q/k norms, two layer norms
    return total


def _tiny(excluded: list[str]) -> Any:
    q = {"quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": "FP8", "group_size": 16,
                          "exclude_modules": excluded}}
    return spec_from_config({**TINY, "quantization_config": q}, name="tiny-qwen3-moe-nvfp4")


@pytest.mark.parametrize("excluded", [
    ["lm_head", "model.layers.0.self_attn*"],
    ["lm_head", "model.layers.0.self_attn.q_proj", "model.layers.0.self_attn.k_proj", "model.layers.0.self_attn.v_proj",
     "model.layers.0.self_attn.o_proj"],
])
def test_attention_of_layer_0_only_stays_bf16(excluded: list[str]) -> None:
    spec = _tiny(excluded)
    assert stored_format(spec)[0] == "nvfp4"
    wb = weight_bytes(spec, "nvfp4")
    assert wb.total == _tiny_bytes({0})
    assert wb.layer_bytes[0] - wb.layer_bytes[1] == _tiny_bytes({0}) - _tiny_bytes(set())


def test_no_per_layer_entry_sizes_every_layer_by_n1() -> None:
    assert weight_bytes(_tiny(["lm_head", "model.layers.0.mlp.gate"]), "nvfp4").total == _tiny_bytes(set())


def test_a_half_listed_fused_layer_exits_2_with_one_line(tmp_path: Path) -> None:
    cfg = {**TINY, "quantization_config": {"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16,
                                           "ignore": ["lm_head", "model.layers.0.self_attn.q_proj"]}}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg), "utf-8")
    code, out, err = run("infer", str(path), "--memory", "8GiB")
    assert code == 2 and out == "" and err.count("\n") == 1 and "same precision" in err


def _entry(name: str) -> dict[str, Any]:
    folder = resources.files("llmsizer.catalog.data").joinpath("models")
    return dict(json.loads(folder.joinpath(name + ".json").read_text("utf-8")))


def _deepseek_v3_nvfp4(c: dict[str, Any], bf16_mla: bool) -> int:
    """Every tensor vLLM holds for a DeepSeek-V3 NVFP4 checkpoint, the four MLA projections of each layer bf16
    (``bf16_mla``) or NVFP4, from the config's numbers."""
    h, n = c["hidden_size"], c["num_attention_heads"]
    ql, kvl, nope, rope, v = (c["q_lora_rank"], c["kv_lora_rank"], c["qk_nope_head_dim"], c["qk_rope_head_dim"],
                              c["v_head_dim"])
    e, mi, inter = c["n_routed_experts"], c["moe_intermediate_size"], c["intermediate_size"]
    shexp = c["n_shared_experts"] * mi
    mla = [(ql + kvl + rope, h, 2), (n * (nope + rope), ql, 1), (n * (nope + v), kvl, 1)]  # fused_qkv_a, q_b, kv_b
    attn = sum(o * i * BF16 if bf16_mla else _linear(o, i, s) for o, i, s in mla) + _linear(h, n * v)
    attn += (ql + kvl) * BF16  # q_a_layernorm, kv_a_layernorm
    dense = _linear(2 * inter, h, 2) + _linear(h, inter)
    moe = (e * 2 * mi * (h // 2) + e * 2 * mi * (h // 16) + 4 * e * FP32
           + e * h * (mi // 2) + e * h * (mi // 16) + 2 * e * FP32
           + _linear(2 * shexp, h, 2) + _linear(h, shexp)
           + e * h * BF16 + e * FP32)  # router weight, e_score_correction_bias
    k, layers = c["first_k_dense_replace"], c["num_hidden_layers"]
    per_layer = attn + 2 * h * BF16
    return layers * per_layer + k * dense + (layers - k) * moe + (2 * c["vocab_size"] * h + h) * BF16


def test_the_deepseek_v3_1_release_is_sized_as_vllm_holds_it() -> None:
    entry = _entry("nvidia-deepseek-v3.1-nvfp4")
    listed = entry["hf_quant_config"]["quantization"]["exclude_modules"]
    assert len(listed) == 1 + 4 * 61 + 1 and "model.layers.61*" in listed  # lm_head, 4 MLA x 61, the MTP layer
    want = _deepseek_v3_nvfp4(entry["config"], bf16_mla=True)
    spec = find_spec("nvidia/DeepSeek-V3.1-NVFP4")
    assert stored_format(spec)[:2] == ("nvfp4", 16)
    est = estimate_inference(spec, engine="vllm", memory=600 * 2**30)
    assert est.item("weights").bytes == want
    assert want == pytest.approx(386.38e9, rel=1e-3)
    # the same model with every MLA projection in NVFP4 (the bf16 entry sized --weights nvfp4): 6.1 GB less
    all_fp4 = estimate_inference("deepseek-v3.1", engine="vllm", weights="nvfp4", memory=600 * 2**30)
    assert all_fp4.item("weights").bytes == _deepseek_v3_nvfp4(entry["config"], bf16_mla=False)


def _minimax_m2_nvfp4(c: dict[str, Any], bf16_attention: bool) -> int:
    """Every tensor vLLM 0.19.1 holds for a MiniMax-M2 NVFP4 checkpoint (models/minimax_m2.py), from the config's
    numbers: self_attn.qkv_proj [(q + 2 kv), H] and o_proj (:182-198) bf16 (``bf16_attention``) or NVFP4; q_norm /
    k_norm over all heads (:221-226); the FusedMoE of num_local_experts (:99-110, ``mlp.experts``) in NVFP4; the router
    ``mlp.gate`` [E, H] and the e_score_correction_bias [E], both fp32 (:88-97, :113-120); two layer norms."""
    h, hd, e, i = c["hidden_size"], c["head_dim"], c["num_local_experts"], c["intermediate_size"]
    q, kv = c["num_attention_heads"] * hd, c["num_key_value_heads"] * hd
    attn = ((q + 2 * kv) * h + h * q) * BF16 if bf16_attention else _linear(q + 2 * kv, h, shards=3) + _linear(h, q)
    moe = (e * 2 * i * (h // 2) + e * 2 * i * (h // 16) + 4 * e * FP32  # w13, its scales and scalars
           + e * h * (i // 2) + e * h * (i // 16) + 2 * e * FP32  # w2
           + e * h * FP32 + e * FP32)  # router weight, e_score_correction_bias
    per_layer = attn + (q + kv) * BF16 + moe + 2 * h * BF16
    return c["num_hidden_layers"] * per_layer + (2 * c["vocab_size"] * h + h) * BF16


def test_the_minimax_m2_7_release_is_sized_as_vllm_holds_it() -> None:
    """nvidia/MiniMax-M2.7-NVFP4 lists lm_head, every router and model.layers.N.self_attn* (all 62 layers): vLLM's
    fnmatch keeps each layer's qkv_proj and o_proj bf16; its routers and experts sit at mlp.* in vLLM (the
    checkpoint's block_sparse_moe is built with the prefix mlp), so the block_sparse_moe.gate entries match nothing
    and the experts stay NVFP4."""
    entry = _entry("nvidia-minimax-m2.7-nvfp4")
    listed = entry["config"]["quantization_config"]["ignore"]
    assert len(listed) == 1 + 2 * 62 and "model.layers.61.self_attn*" in listed
    spec = find_spec("nvidia/MiniMax-M2.7-NVFP4")
    assert stored_format(spec)[:2] == ("nvfp4", 16)
    est = estimate_inference(spec, engine="vllm", memory=600 * 2**30)
    assert est.item("weights").bytes == _minimax_m2_nvfp4(entry["config"], bf16_attention=True)
    # the bf16 release sized --weights nvfp4: every attention projection in NVFP4
    all_fp4 = estimate_inference("minimax-m2.7", engine="vllm", weights="nvfp4", memory=600 * 2**30)
    assert all_fp4.item("weights").bytes == _minimax_m2_nvfp4(entry["config"], bf16_attention=False)
