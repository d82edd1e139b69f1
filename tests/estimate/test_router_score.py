"""review35 N2: Megatron's unfused router (formulas/moe_router.py eq. E19, softmax top-k) was charged wherever the
config has no score-correction bias, so Llama 4's sigmoid top-1 router (no bias) was counted as a softmax one. The
rule now keys on the router's score function (``MoESpec.router_score``), read per model type as transformers
@5.24.0 scores it: Llama4Router.forward's sigmoid (modeling_llama4.py L151), DeepSeek-V3's / GLM-4.5's /
Nemotron-H's ``router_logits.sigmoid()`` (modeling_deepseek_v3.py L136, modeling_glm4_moe.py L285,
modeling_nemotron_h.py L775), DeepSeek-V2's softmax (modeling_deepseek_v2.py L101), Mixtral's and Qwen-MoE's
softmax; the catalog's DeepSeek configs say the same in their own ``scoring_func``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llmsizer.errors import InputError
from llmsizer.estimate.launch import megatron_router_unfused
from llmsizer.models import load_model
from llmsizer.specs import MoESpec, TrainingWorkload

MODELS = Path(__file__).resolve().parents[2] / "src" / "llmsizer" / "catalog" / "data" / "models"
MEGATRON = TrainingWorkload(method="full", precision="megatron-bf16", optimizer="adamw", zero=1, gpus=8, ep=8)


@pytest.mark.parametrize("name, score", [
    ("llama-4-scout", "sigmoid"), ("llama-4-maverick-17b-128e-instruct", "sigmoid"),
    ("glm-4.5-air", "sigmoid"), ("nvidia-nemotron-3-nano-30b-a3b-bf16", "sigmoid"),
    ("qwen3-30b-a3b", "softmax"), ("mixtral-8x7b-v0.1", "softmax")])
def test_score_function_per_model_type(name: str, score: str) -> None:
    moe = load_model(name).moe
    assert moe is not None and moe.router_score == score


@pytest.mark.parametrize("name", ["deepseek-v3", "deepseek-r1", "kimi-k2-instruct", "deepseek-v2-lite"])
def test_deepseek_scores_as_its_config_says(name: str) -> None:
    cfg = json.loads((MODELS / f"{name}.json").read_text())["config"]
    moe = load_model(name).moe
    assert moe is not None and moe.router_score == cfg["scoring_func"]


def test_llama4_sigmoid_router_is_not_charged_eq_e19() -> None:
    scout = load_model("llama-4-scout")
    assert scout.moe is not None and not scout.moe.score_correction_bias  # no bias: the old key took it as softmax
    assert not megatron_router_unfused(scout, MEGATRON)
    assert megatron_router_unfused(load_model("qwen3-30b-a3b"), MEGATRON)
    assert not megatron_router_unfused(load_model("glm-4.5-air"), MEGATRON)


def test_unknown_score_function_refused() -> None:
    with pytest.raises(InputError, match="router_score"):
        MoESpec(8, 2, 1024, router_score="relu")  # type: ignore[arg-type]
