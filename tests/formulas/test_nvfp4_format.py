"""ModelOpt NVFP4 weights (formulas/weight_formats.py eq. N1), rebuilt here from the tensors vLLM creates for them,
not from llmsizer's inventory: vllm 0.19.1 (PyPI wheel) model_executor/layers/quantization/modelopt.py
``ModelOptNvFp4LinearMethod.create_weights`` :1079-1151 -- ``weight`` uint8 [N, K / 2], ``weight_scale`` float8_e4m3fn
[N, K / 16], ``input_scale`` and ``weight_scale_2`` float32 [one per fused shard] -- and
``ModelOptNvFp4FusedMoE.create_weights`` :1227-1341 -- w13_weight uint8 [E, 2 I, H / 2], w2_weight uint8 [E, H, I / 2],
w13_weight_scale fp8 [E, 2 I, H / 16], w2_weight_scale fp8 [E, H, I / 16], w13_weight_scale_2 and w13_input_scale
float32 [E, 2], w2_weight_scale_2 and w2_input_scale float32 [E]. vLLM fuses q/k/v into one QKVParallelLinear (three
shards: three of each fp32 scale); the router, norms, embedding and lm_head stay bf16 (the release's exclude_modules:
lm_head and every mlp.gate)."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

import pytest

from llmsizer import estimate_inference
from llmsizer.catalog.models import find_spec
from llmsizer.errors import InputError
from llmsizer.formulas.weight_formats import nvfp4_matrix_bytes, stored_format, weight_bytes
from llmsizer.readers.hf_config import spec_from_config

U8 = FP8 = 1
FP32 = 4
BF16 = 2


def _linear(n: int, k: int, shards: int = 1) -> int:
    """vLLM's NVFP4 linear of N outputs, K inputs, ``shards`` fused checkpoint matrices."""
    return n * (k // 2) * U8 + n * (k // 16) * FP8 + shards * FP32 + shards * FP32


def _qwen3_moe_nvfp4(c: dict[str, Any]) -> int:
    """Every tensor vLLM holds for a Qwen3-MoE NVFP4 checkpoint, from the config's numbers."""
    h, hd, e, i = c["hidden_size"], c["head_dim"], c["num_experts"], c["moe_intermediate_size"]
    q, kv = c["num_attention_heads"] * hd, c["num_key_value_heads"] * hd
    attn = _linear(q + 2 * kv, h, shards=3) + _linear(h, q)
    w13 = e * (2 * i) * (h // 2) + e * (2 * i) * (h // 16) + e * 2 * FP32 + e * 2 * FP32
    w2 = e * h * (i // 2) + e * h * (i // 16) + e * FP32 + e * FP32
    kept = (e * h + 2 * hd + 2 * h) * BF16  # router, q/k norms, the two layer norms
    layer = attn + w13 + w2 + kept
    outer = (2 * c["vocab_size"] * h + h) * BF16  # embedding, lm_head (untied), final norm
    return c["num_hidden_layers"] * layer + outer


def test_one_matrix_as_vllm_creates_it() -> None:
    # 256 x 512: weight [256, 256] uint8, weight_scale [256, 32] fp8, two fp32 scalars
    assert nvfp4_matrix_bytes(256, 512) == 256 * 256 + 256 * 32 + 8 == 73_736


TINY = {"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "hidden_size": 256, "head_dim": 64,
        "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 2, "num_experts": 8,
        "num_experts_per_tok": 2, "moe_intermediate_size": 128, "intermediate_size": 512, "vocab_size": 1024,
        "decoder_sparse_step": 1, "mlp_only_layers": [], "tie_word_embeddings": False, "torch_dtype": "bfloat16",
        "max_position_embeddings": 4096, "rms_norm_eps": 1e-6, "rope_theta": 1e6, "norm_topk_prob": True}


def test_a_small_moe_model_in_nvfp4() -> None:
    spec = spec_from_config(TINY, name="tiny-qwen3-moe")
    assert weight_bytes(spec, "nvfp4").total == _qwen3_moe_nvfp4(TINY)


def _entry(name: str) -> dict[str, Any]:
    folder = resources.files("llmsizer.catalog.data").joinpath("models")
    return dict(json.loads(folder.joinpath(name + ".json").read_text("utf-8")))


def test_the_catalog_release_is_sized_as_vllm_holds_it() -> None:
    cfg = _entry("nvidia-qwen3-235b-a22b-nvfp4")["config"]
    want = _qwen3_moe_nvfp4(cfg)
    spec = find_spec("nvidia/Qwen3-235B-A22B-NVFP4")
    assert stored_format(spec)[:2] == ("nvfp4", 16)
    est = estimate_inference(spec, engine="vllm", memory=400 * 2**30)
    assert est.item("weights").bytes == want
    assert want == pytest.approx(134.10e9, rel=1e-3)  # 4.5 bits a weight for the 231.9e9 quantized ones


BASE = {"quant_algo": "NVFP4", "kv_cache_quant_algo": "FP8", "group_size": 16, "exclude_modules": ["lm_head"]}
# a model type whose module paths formulas/modelopt_exclusions.py does not map (Phi-3's fused qkv_proj)
TINY_PHI3 = {"architectures": ["Phi3ForCausalLM"], "model_type": "phi3", "hidden_size": 256,
             "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 2,
             "intermediate_size": 512, "vocab_size": 1024, "torch_dtype": "bfloat16",
             "max_position_embeddings": 4096, "rms_norm_eps": 1e-5, "rope_theta": 1e4, "tie_word_embeddings": False}


@pytest.mark.parametrize(("base", "quantization", "said"), [
    (TINY, {"quant_algo": "NVFP4", "kv_cache_quant_algo": "FP8"}, "lacks group_size, exclude_modules"),  # vLLM too
    (TINY, {**BASE, "group_size": 32}, "group_size 32"),
    (TINY_PHI3, {**BASE, "exclude_modules": ["lm_head", "model.layers.0.self_attn*"]}, "per-layer exclusions"),
])
def test_configs_not_sized_as_published_are_refused(base: dict[str, Any], quantization: dict[str, Any],
                                                    said: str) -> None:
    spec = spec_from_config({**base, "quantization_config": {"quantization": quantization}}, name="tiny")
    with pytest.raises(InputError, match=said):
        stored_format(spec)


def test_config_json_shape_reads_ignore() -> None:  # ModelOpt >= 0.31: quant_method modelopt inside config.json
    q = {"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16, "ignore": ["lm_head", "*.mlp.gate"]}
    assert stored_format(spec_from_config({**TINY, "quantization_config": q}, name="tiny"))[0] == "nvfp4"
    assert stored_format(spec_from_config({**TINY_PHI3, "quantization_config": q}, name="tiny"))[0] == "nvfp4"
    q["ignore"] = ["lm_head", "model.layers.1.mlp.experts*"]
    with pytest.raises(InputError, match="per-layer exclusions"):
        stored_format(spec_from_config({**TINY_PHI3, "quantization_config": q}, name="tiny"))
    # on Qwen3-MoE the entry is matched as vLLM matches it: layer 1's routed experts stay bf16
    spec = spec_from_config({**TINY, "quantization_config": q}, name="tiny")
    h, e, i = TINY["hidden_size"], TINY["num_experts"], TINY["moe_intermediate_size"]
    fp4 = e * 2 * i * (h // 2) + e * 2 * i * (h // 16) + 4 * e * FP32 + e * h * (i // 2) + e * h * (i // 16) + 2 * e * FP32
    assert weight_bytes(spec, "nvfp4").total == _qwen3_moe_nvfp4(TINY) - fp4 + 3 * e * i * h * BF16
