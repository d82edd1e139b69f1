"""Eq. TP6 (formulas/tensor_parallel.py ``width_refusal``): vLLM and SGLang build no feed-forward layer whose split
width the degree does not divide, in any weight format (bf16 included).

Truth, written out from the engines' code (not from llmsizer's): vllm 0.19.1 (PyPI wheel)
vllm/distributed/utils.py:53-64 ``divide`` asserts ``numerator % denominator == 0`` (sglang 0.5.23
srt/distributed/utils.py:68-79 the same); gate_up_proj (MergedColumnParallelLinear) divides each output partition
(vllm model_executor/layers/linear.py:451-457), down_proj (RowParallelLinear) its input (linear.py:1417); the fused
routed experts ``assert intermediate_size % self.tp_size == 0`` (fused_moe/layer.py:425, the MoE layer's tp: 1 under
expert parallelism, fused_moe/config.py:1116-1131; sglang srt/layers/moe/fused_moe_triton/layer.py:427). The widths
are read from each catalog entry's config.json as the engines' model files read them (vllm models/llama.py,
qwen2.py: intermediate_size; mixtral.py: intermediate_size per expert; glm4_moe.py: moe_intermediate_size, the
shared experts moe_intermediate_size x n_shared_experts, the first_k_dense_replace dense layers intermediate_size;
qwen3_moe.py: moe_intermediate_size, every layer sparse; granitemoehybrid.py: intermediate_size per expert,
shared_intermediate_size). The heads' rule is the one tests/cli/test_fit_tensor_parallel_choice.py checks.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llmsizer import load_model
from llmsizer.formulas.tensor_parallel import heads_refusal, serving_tensor_parallel_refusal, width_refusal

CATALOG = Path(__file__).resolve().parents[2] / "src" / "llmsizer" / "catalog" / "data" / "models"


def config(name: str) -> dict:
    return json.loads((CATALOG / f"{name}.json").read_text())["config"]


def divide(numerator: int, denominator: int) -> int:
    """vllm/distributed/utils.py:53-64, an exception for its assert."""
    if numerator % denominator:
        raise ArithmeticError(f"{numerator} is not divisible by {denominator}")
    return numerator // denominator


# (dense widths, shared-expert widths, routed-expert widths) of each model, from its config.json
def widths(name: str) -> tuple[list[int], list[int], list[int]]:
    c = config(name)
    if name in ("llama-3.1-70b-instruct", "qwen2.5-1.5b-instruct"):
        return [c["intermediate_size"]], [], []
    if name == "mixtral-8x22b-v0.1":
        return [], [], [c["intermediate_size"]]
    if name == "glm-4.5-air":
        assert c["first_k_dense_replace"] >= 1
        return [c["intermediate_size"]], [c["moe_intermediate_size"] * c["n_shared_experts"]], [c["moe_intermediate_size"]]
    if name == "qwen3-coder-480b-a35b-instruct":
        assert c["shared_expert_intermediate_size"] == 0  # and every layer an MoE layer
        return [], [], [c["moe_intermediate_size"]]
    if name == "granite-4.0-h-tiny":
        return [], [c["shared_intermediate_size"]], [c["intermediate_size"]]
    raise KeyError(name)


def engine_builds(name: str, tp: int, expert_tp: int) -> bool:
    dense, shared, experts = widths(name)
    try:
        for w in dense + shared:
            divide(w, tp), divide(w, tp)  # gate_up's two partitions, then down_proj's input
        for w in experts:
            divide(w, expert_tp)  # FusedMoE's assert
    except ArithmeticError:
        return False
    return True


MODELS = ["llama-3.1-70b-instruct", "qwen2.5-1.5b-instruct", "mixtral-8x22b-v0.1", "glm-4.5-air",
          "qwen3-coder-480b-a35b-instruct", "granite-4.0-h-tiny"]


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_the_refusal_is_the_engines_divide(name: str, engine: str) -> None:
    spec = load_model(name)
    checked = 0
    for tp in range(1, 65):
        if heads_refusal(spec, tp, engine) is not None:
            continue
        checked += 1
        assert (width_refusal(spec, tp, engine) is None) == engine_builds(name, tp, tp), (name, tp)
        # expert parallelism: each device holds whole experts (the MoE layer's tp 1), the dense layers stay split
        assert (width_refusal(spec, tp, engine, expert_tp=1) is None) == engine_builds(name, tp, 1), (name, tp)
    assert checked >= 3


def test_the_catalog_models_newly_refused_and_one_unchanged() -> None:
    """The degrees the heads allow and eq. TP6 refuses: none at 2, 4 or 8 in the catalog (the list in the branch's
    report); these at the others."""
    refused = {name: [t for t in range(2, 65) if heads_refusal(load_model(name), t) is None
                      and width_refusal(load_model(name), t) is not None] for name in MODELS}
    assert refused == {"llama-3.1-70b-instruct": [], "qwen2.5-1.5b-instruct": [6, 12], "mixtral-8x22b-v0.1": [24, 48],
                       "glm-4.5-air": [24, 48], "qwen3-coder-480b-a35b-instruct": [24, 48],
                       "granite-4.0-h-tiny": [12]}
    assert serving_tensor_parallel_refusal(load_model("llama-3.1-70b-instruct"), 8, "vllm") is None


def test_a_bf16_moe_under_data_parallel_splits_experts_over_every_rank() -> None:
    """vLLM without expert parallelism flattens the MoE layer's tp over the data-parallel ranks
    (fused_moe/config.py:993-1001): Mixtral's 16384 at TP 8 x DP 3 is 24 ways."""
    spec = load_model("mixtral-8x22b-v0.1")
    assert width_refusal(spec, 8, "vllm") is None
    why = width_refusal(spec, 8, "vllm", expert_tp=24)
    assert why is not None and "tensor_parallel 8 x data_parallel 3" in why and "682.667 per device" in why


def test_other_engines_are_not_held_to_it() -> None:
    spec = load_model("qwen2.5-1.5b-instruct")
    assert "8960-wide dense MLP" in str(width_refusal(spec, 6, "vllm"))
    assert width_refusal(spec, 6, "transformers") is None and width_refusal(spec, 6, "llamacpp") is None
