"""compressed-tensors checkpoints (formulas/compressed_tensors.py): the truth is compressed-tensors 0.20.1 itself. A
tiny Llama is built in bf16 by transformers, each config below is applied with ``apply_quantization_config`` (its
own target / ignore matching), compressed in memory with ``ModelCompressor.compress_model`` (the path llm-compressor
saves through), and the bytes of every tensor of the compressed state dict are summed: what the saved safetensors
hold. llmsizer's count, from the config.json alone, must equal it byte for byte."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from llmsizer.errors import InputError
from llmsizer.formulas.compressed_tensors import CTScheme, ct_matrix_bytes
from llmsizer.formulas.weight_formats import stored_format, weight_bytes
from llmsizer.readers.hf_config import spec_from_config

LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 512, "hidden_size": 256,
         "intermediate_size": 384, "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2,
         "tie_word_embeddings": False, "torch_dtype": "bfloat16", "max_position_embeddings": 2048,
         "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "hidden_act": "silu"}


def _group(weights: dict[str, Any], inputs: dict[str, Any] | None = None,
           targets: tuple[str, ...] = ("Linear",)) -> dict[str, Any]:
    return {"targets": list(targets), "weights": weights, "input_activations": inputs}


W4A16_G128 = {"num_bits": 4, "type": "int", "symmetric": True, "strategy": "group", "group_size": 128}
W8A16_CHANNEL = {"num_bits": 8, "type": "int", "symmetric": True, "strategy": "channel"}
FP8_TENSOR = {"num_bits": 8, "type": "float", "symmetric": True, "strategy": "tensor"}
FP8_CHANNEL = {"num_bits": 8, "type": "float", "symmetric": True, "strategy": "channel"}
STATIC_FP8_INPUT = {"num_bits": 8, "type": "float", "symmetric": True, "strategy": "tensor", "dynamic": False}
DYNAMIC_FP8_INPUT = {"num_bits": 8, "type": "float", "symmetric": True, "strategy": "token", "dynamic": True}
NVFP4 = {"num_bits": 4, "type": "float", "symmetric": True, "strategy": "tensor_group", "group_size": 16}
DYNAMIC_INT8_INPUT = {"num_bits": 8, "type": "int", "symmetric": True, "strategy": "token", "dynamic": True}

CASES: dict[str, dict[str, Any]] = {
    # RedHatAI *-quantized.w4a16: pack-quantized int4, group 128, lm_head kept
    "w4a16_g128": {"format": "pack-quantized", "config_groups": {"group_0": _group(W4A16_G128)}, "ignore": ["lm_head"]},
    # *-quantized.w8a16: pack-quantized int8, one scale per output channel
    "w8a16_channel": {"format": "pack-quantized", "config_groups": {"group_0": _group(W8A16_CHANNEL)},
                      "ignore": ["lm_head"]},
    # FP8 per-tensor weights with static per-tensor input scales; an ignore list with a re: entry (the down
    # projections kept bf16) and a plain name
    "fp8_tensor_ignore_re": {"format": "float-quantized",
                             "config_groups": {"group_0": _group(FP8_TENSOR, STATIC_FP8_INPUT)},
                             "ignore": ["lm_head", "re:.*mlp\\.down_proj$"]},
    # *-FP8-dynamic: per-channel fp8 weights, dynamic per-token activations (nothing stored for them)
    "fp8_dynamic": {"format": "float-quantized", "config_groups": {"group_0": _group(FP8_CHANNEL, DYNAMIC_FP8_INPUT)},
                    "ignore": ["lm_head"]},
    # *-quantized.w8a8: int8 per-channel weights, dynamic per-token int8 activations
    "w8a8_int": {"format": "int-quantized", "config_groups": {"group_0": _group(W8A16_CHANNEL, DYNAMIC_INT8_INPUT)},
                 "ignore": ["lm_head"]},
    # asymmetric int4 (a packed zero point per group) on layer 0's attention only, by a re: target; the rest W8A16
    "asym_w4_layer0_mixed": {"format": "pack-quantized", "config_groups": {
        "group_0": _group({**W4A16_G128, "symmetric": False}, targets=("re:model\\.layers\\.0\\.self_attn\\..*",)),
        "group_1": _group(W8A16_CHANNEL)}, "ignore": ["lm_head", "re:model\\.layers\\.2\\.mlp\\..*"]},
    # *-FP8-block (DeepSeek-style): fp8 weights, one bf16 scale per 128 x 128 block, dynamic group-128 activations
    "fp8_block": {"format": "float-quantized", "config_groups": {"group_0": _group(
        {**FP8_TENSOR, "strategy": "block", "block_structure": [128, 128]},
        {**FP8_TENSOR, "strategy": "group", "group_size": 128, "dynamic": True})}, "ignore": ["lm_head"]},
    # *-NVFP4: fp4 values, fp8 scales per 16, a global scale for the weights and one for the activations
    "nvfp4": {"format": "nvfp4-pack-quantized", "config_groups": {"group_0": _group(
        {**NVFP4, "dynamic": False}, {**NVFP4, "dynamic": "local"})}, "ignore": ["lm_head"]},
    # *-NVFP4A16: the same weights, activations left 16-bit (no input_global_scale)
    "nvfp4a16": {"format": "nvfp4-pack-quantized", "config_groups": {"group_0": _group({**NVFP4, "dynamic": False})},
                 "ignore": ["lm_head"]},
}


def _truth(config: dict[str, Any]) -> int:
    """Bytes of the state dict compressed-tensors writes for the tiny Llama under ``config``."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    ct = pytest.importorskip("compressed_tensors")
    from compressed_tensors.compressors import ModelCompressor
    from compressed_tensors.quantization import QuantizationConfig, apply_quantization_config

    cfg = transformers.LlamaConfig(**{k: v for k, v in LLAMA.items() if k not in ("architectures", "model_type")})
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(cfg).to(torch.bfloat16)
    apply_quantization_config(model, QuantizationConfig.model_validate(copy.deepcopy(config)))
    for name, p in model.named_parameters():  # stand-in calibration: the values do not change a tensor's bytes
        if name.endswith("_scale"):
            p.data.fill_(0.01)
        elif name.endswith("_zero_point"):
            p.data.zero_()
    ModelCompressor.from_pretrained_model(model, quantization_format=config["format"]).compress_model(model)
    assert ct.__version__.startswith("0.20.1")
    return sum(t.numel() * t.element_size() for t in model.state_dict().values())


def _spec(config: dict[str, Any]) -> Any:
    return spec_from_config({**LLAMA, "quantization_config": {**config, "quant_method": "compressed-tensors",
                                                               "quantization_status": "compressed"}}, name="tiny-ct")


@pytest.mark.parametrize("case", sorted(CASES))
def test_bytes_equal_what_compressed_tensors_writes(case: str) -> None:
    config = CASES[case]
    spec = _spec(config)
    assert stored_format(spec)[0] == "compressed-tensors"
    assert weight_bytes(spec, "compressed-tensors").total == _truth(config)


def test_one_w4a16_matrix_by_hand() -> None:
    # 4096 x 4096, int4 group 128: int32 [4096, 512], bf16 scales [4096, 32], int64 weight_shape [2]
    s = CTScheme("g", ("Linear",), "pack-quantized", 4, "int", True, "group", 128, None, False, None, False, False,
                 False)
    assert ct_matrix_bytes(s, 4096, 4096, 2) == 4096 * 512 * 4 + 4096 * 32 * 2 + 16


def test_kimi_k2_thinking_int4_experts_only() -> None:
    """Kimi-K2-Thinking's recipe (int4 group 32, ignore lm_head, attention, shared experts and the dense MLPs): only
    the routed experts are int4; each expert matrix [2048, 7168] is int32 [2048, 896] + bf16 [2048, 224] + 16 B."""
    from llmsizer.catalog.models import find_spec

    base = find_spec("kimi-k2-instruct")
    q = {"quant_method": "compressed-tensors", "format": "pack-quantized", "config_groups": {"group_0": _group(
        {"num_bits": 4, "type": "int", "symmetric": True, "strategy": "group", "group_size": 32})},
        "ignore": ["lm_head", "re:.*self_attn.*", "re:.*shared_experts.*", "re:.*mlp\\.(gate|up|gate_up|down)_proj.*"]}
    import dataclasses
    spec = dataclasses.replace(base, quantization=tuple(sorted(q.items())))
    wb = weight_bytes(spec, "compressed-tensors")
    bf16 = weight_bytes(base, "bf16")
    moe_layers = sum(spec.moe_layers)
    e, h, i = spec.moe.num_experts, spec.hidden_size, spec.moe.expert_intermediate_size
    expert_int4 = 3 * (i * (h // 8) * 4 + i * (h // 32) * 2 + 16)  # gate, up [i, h]; down [h, i] is the same size
    assert 2048 * 896 * 4 + 2048 * 224 * 2 + 16 == i * (h // 8) * 4 + i * (h // 32) * 2 + 16
    assert wb.by_component["experts"] == moe_layers * e * expert_int4
    assert wb.total - wb.by_component["experts"] == bf16.total - bf16.by_component["experts"]


@pytest.mark.parametrize(("change", "field"), [
    ({"format": "mxfp4-pack-quantized"}, "format"),
    ({"ignore": []}, "lm_head"),
    ({"config_groups": {"group_0": _group(W4A16_G128, targets=("Embedding",))}}, "targets"),
    ({"config_groups": {"group_0": _group({**W4A16_G128, "strategy": "token"})}}, "strategy"),
    ({"config_groups": {}}, "config_groups"),
])
def test_unsupported_configs_are_refused_in_one_line(change: dict[str, Any], field: str) -> None:
    spec = _spec({**CASES["w4a16_g128"], **change})
    with pytest.raises(InputError) as e:
        weight_bytes(spec, "compressed-tensors")
    assert field in str(e.value) and "\n" not in str(e.value)


def test_the_format_needs_the_checkpoints_config() -> None:
    spec = spec_from_config(LLAMA, name="plain")
    with pytest.raises(InputError, match="quantization_config"):
        weight_bytes(spec, "compressed-tensors")


def test_engines_hold_the_compressed_bytes_and_transformers_the_decompressed() -> None:
    """vLLM loads the compressed tensors as stored; transformers decompresses them on the first forward pass
    (transformers 5.24.0 quantizer_compressed_tensors.py:40-49, compressed-tensors add_decompress_hook), so it holds
    the checkpoint's dtype."""
    from llmsizer import estimate_inference

    spec = _spec(CASES["w4a16_g128"])
    vllm = estimate_inference(spec, engine="vllm", memory=8 * 2**30)
    assert vllm.item("weights").bytes == weight_bytes(spec, "compressed-tensors").total
    hf = estimate_inference(spec, engine="transformers", memory=8 * 2**30)
    assert hf.item("weights").bytes == weight_bytes(spec, "bf16").total
    assert any("decompresses a compressed-tensors" in w for w in hf.warnings)


def test_vllm_gates_compressed_tensors_at_turing() -> None:
    """vLLM 0.19.1 asks compute capability 7.5 of every scheme sized here (estimate/formats.py VLLM_MIN_CAPABILITY):
    a T4 (7.5) loads the W4A16 checkpoint, a V100 (7.0) is refused."""
    from llmsizer.catalog.hardware import builtin_catalog
    from llmsizer.estimate.formats import engine_refuses

    spec, cat = _spec(CASES["w4a16_g128"]), builtin_catalog()
    assert engine_refuses("vllm", "compressed-tensors", cat.device("t4"), spec) is None
    why = engine_refuses("vllm", "compressed-tensors", cat.device("v100"), spec)
    assert why is not None and "7.5" in why
