"""The router's score-correction bias (DeepSeek-V3's auxiliary-loss-free balancing, arXiv 2412.19437 eq. 16): a buffer
in transformers, a parameter in vLLM and SGLang, fp32 [n_routed_experts] per MoE layer on every engine that builds it,
counted in the weights beside the parameters (formulas/weight_formats.py ``correction_bias_bytes``).

Independent truth: transformers 5.24's own model classes built on the meta device (parameters and persistent buffers,
each at its own element size, after ``_keep_in_fp32_modules_strict``), and for the serving engines the bytes written
from the cited lines: vllm 0.19.1 models/deepseek_v2.py:268-273 (``topk_method == "noaux_tc"`` only),
glm4_moe.py:149-151, nemotron_h.py:159-161; sglang 0.5.6 models/deepseek_v2.py:526-538, glm4_moe.py:335-337,
nemotron_h.py:149-151: ``nn.Parameter(torch.empty(config.n_routed_experts, dtype=torch.float32))``; MiniMax-M2 where
config.use_routing_bias: vllm 0.19.1 models/minimax_m2.py:88-97, sglang 0.5.23 models/minimax_m2.py:525-534 (fp32
[num_local_experts]). transformers builds MiniMax-M2's in the load dtype (modeling_minimax_m2.py L114).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from llmsizer.formulas.tensor_parallel import shard_weights
from llmsizer.formulas.weight_formats import weight_bytes
from llmsizer.models import load_model
from llmsizer.readers.hf_config import spec_from_config
from oracle_utils import TINY_CONFIGS, TINY_NEMOTRON_H, build, torch

_GLM4_MOE = {"model_type": "glm4_moe", "vocab_size": 128, "hidden_size": 64, "intermediate_size": 96,
             "max_position_embeddings": 512, "num_hidden_layers": 3, "num_attention_heads": 4,
             "num_key_value_heads": 2, "head_dim": 16, "n_routed_experts": 8, "num_experts_per_tok": 2, "n_group": 1,
             "topk_group": 1, "moe_intermediate_size": 24, "n_shared_experts": 1, "first_k_dense_replace": 1}

CASES: list[tuple[str, dict[str, Any]]] = [
    ("deepseek_v3", TINY_CONFIGS["deepseek-v3-mla"]), ("deepseek_v32", TINY_CONFIGS["deepseek-v32-dsa"]),
    ("glm4_moe", _GLM4_MOE), ("nemotron_h", TINY_NEMOTRON_H), ("deepseek_v2", TINY_CONFIGS["deepseek-v2-no-q-lora"]),
    ("minimax_m2", TINY_CONFIGS["minimax-m2"]),
]
# the bias's bytes per element in a bf16 load: fp32 where the class lists it in _keep_in_fp32_modules_strict, else the
# load dtype (MiniMax-M2: modeling_minimax_m2.py L114, no fp32 list)
_ELEMENT = {"minimax_m2": 2}


@pytest.mark.slow
@pytest.mark.parametrize(("name", "cfg"), CASES, ids=[c[0] for c in CASES])
def test_transformers_weights_hold_the_buffer_as_the_model_class_does(name: str, cfg: dict[str, Any]) -> None:
    """transformers' bf16 model: its parameters' and persistent buffers' bytes are llmsizer's transformers weights,
    the correction bias (a buffer) included; DeepSeek-V2's router has none."""
    model = build(cfg, dtype=torch.bfloat16)
    params = dict(model.named_parameters())
    buffers = {n: b for n, b in model.state_dict().items() if n not in params}  # persistent buffers only
    assert all(n.endswith("e_score_correction_bias") for n in buffers), sorted(buffers)
    bias = sum(b.numel() * b.element_size() for b in buffers.values())
    real = sum(p.numel() * p.element_size() for p in params.values()) + bias
    spec = spec_from_config(cfg, name=name)
    wb = weight_bytes(spec, "bf16", 128, 2, False, "transformers")
    assert wb.total == real
    moe = spec.moe
    assert moe is not None
    n_moe = sum(spec.moe_layers)
    element = _ELEMENT.get(name, 4)
    assert bias == (0 if name == "deepseek_v2" else n_moe * moe.num_experts * element)
    assert all(b.element_size() == element for b in buffers.values())
    # the parameters alone are still the parameter count's (the bias is no parameter)
    assert wb.total - bias == weight_bytes(spec, "bf16", 128, 2, False, None).total + sum(
        p.numel() * 2 for n, p in params.items() if p.dtype == torch.float32)


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
@pytest.mark.parametrize(("model", "extra"), [("deepseek-v3", 58 * 256 * 4), ("deepseek-v2-lite", 0),
                                              ("glm-4.5", 89 * 160 * 4), ("kimi-k2-instruct", 60 * 384 * 4),
                                              ("minimax-m2.7", 62 * 256 * 4)])
def test_serving_engines_allocate_it_where_the_config_routes_with_it(engine: str, model: str, extra: int) -> None:
    """DeepSeek-V3 (config.json topk_method 'noaux_tc', n_routed_experts 256, first_k_dense_replace 3 of 61 layers):
    58 x 256 x 4 B = 59,392 B beside its parameters, on every tensor-parallel rank (a whole parameter, no TP split);
    Kimi-K2 (noaux_tc, 384 experts, first_k_dense_replace 1 of 61): 92,160 B; DeepSeek-V2-Lite (topk_method
    'greedy'): none (vLLM sets it None, SGLang too); GLM-4.5 (160 experts, first_k_dense_replace 3 of 92 layers, no
    topk_method: Glm4MoeGate builds it always): 89 x 160 x 4 = 56,960 B."""
    spec = load_model(model)
    moe = spec.moe
    assert moe is not None and moe.score_correction_bias == (extra > 0)
    plain = dataclasses.replace(spec, moe=dataclasses.replace(moe, score_correction_bias=False))
    wb, wp = (weight_bytes(s, "bf16", 128, 2, False, engine) for s in (spec, plain))
    assert wb.total - wp.total == extra
    assert wb.by_component["router"] - wp.by_component["router"] == extra
    assert wb.by_storage.get("fp32", 0) - wp.by_storage.get("fp32", 0) == extra
    assert sum(wb.layer_bytes) - sum(wp.layer_bytes) == extra
    for tp in (2, 8):
        on, off = (shard_weights(s, w, tp, 2, engine, 128, False) for s, w in ((spec, wb), (plain, wp)))
        assert on.total - off.total == extra  # whole on every rank
        assert on.by_component["router"] - off.by_component["router"] == extra


def test_training_and_llamacpp_from_a_config_do_not_count_it() -> None:
    """Only an engine that builds it is charged: a training run's weights (engine None) and llama.cpp from a config
    (the GGUF's exp_probs_b is counted where the file is read) hold the parameters alone."""
    spec = load_model("deepseek-v3")
    moe = spec.moe
    assert moe is not None
    plain = dataclasses.replace(spec, moe=dataclasses.replace(moe, score_correction_bias=False))
    for engine in (None, "llamacpp"):
        assert weight_bytes(spec, "q4_k_m" if engine else "bf16", 128, 2, False, engine).total == weight_bytes(
            plain, "q4_k_m" if engine else "bf16", 128, 2, False, engine).total
