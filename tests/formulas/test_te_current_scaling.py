"""TransformerEngine's FP8 current scaling (float8_recipe 'transformer-engine-current', formulas/float8_training.py
eq. F3c; Megatron-Bridge's ``fp8_cs``).

TE does not run on a CPU. What current scaling adds over delayed scaling is one pass that reads a tensor to take its
amax before the cast (TransformerEngine @d0067d0d pytorch/csrc/quantizer.cpp ``Float8CurrentScalingQuantizer::
quantize_impl`` lines 980-1033: ``nvte_compute_amax_with_config``, then the scale, then ``nvte_quantize_v2``), except
where the kernel that makes the tensor takes the amax itself (the fused norm: csrc/extensions/normalization.cpp
``FUSED_NORM_AMAX_FP8``, LayerNorm lines 114-118, RMSNorm 351-355). The bytes of that pass are checked against
torch's own compiler: inductor's byte count of the same reduction, ``amax(abs(x))`` over a bf16 tensor, compiled on
CPU. The element counts of the estimate-level check come from Llama-3.1-8B's config.json numbers written out here.
"""

from __future__ import annotations

from typing import Any

import pytest

from llmsizer.catalog.hardware import builtin_catalog
from llmsizer.errors import InputError
from llmsizer.estimate.duration import training_duration_for
from llmsizer.estimate.training import estimate_training
from llmsizer.formulas.float8_training import float8_cast_bytes
from llmsizer.readers.hf_config import spec_from_config
from llmsizer.specs.training import FLOAT8_RECIPES, TrainingWorkload

# meta-llama/Llama-3.1-8B config.json
H, HEADS, KV, HEAD_DIM, FFN, LAYERS, V = 4096, 32, 8, 128, 14336, 32, 128256
LLAMA_8B = dict(architectures=["LlamaForCausalLM"], model_type="llama", hidden_size=H, num_attention_heads=HEADS,
                num_key_value_heads=KV, intermediate_size=FFN, num_hidden_layers=LAYERS, vocab_size=V,
                max_position_embeddings=131072, rms_norm_eps=1e-5, tie_word_embeddings=False,
                torch_dtype="bfloat16", hidden_act="silu", rope_theta=500000.0)
MEGATRON = dict(method="full", precision="megatron-bf16", optimizer="adamw", zero=1, micro_batch=1, seq_len=4096,
                float8=True, fp8_param_gather=False)  # the forward casts the bf16 weight (eq. T3 apart)


def _inductor_amax_bytes(rows: int, cols: int) -> int:
    """Bytes inductor's kernels move for ``amax(abs(x))`` of a bf16 [rows, cols] tensor, compiled on CPU."""
    torch = pytest.importorskip("torch")
    from inductor_nodes import inductor_nodes

    x = torch.randn(rows, cols, dtype=torch.bfloat16)
    f = torch.compile(lambda x: torch.amax(torch.abs(x)).float())
    return sum(n for _, n in inductor_nodes(lambda: f(x)))


@pytest.mark.parametrize("norm_fed", [False, True], ids=["o-or-down", "qkv-or-gate-up"])
def test_current_scaling_adds_one_amax_read_per_cast_against_inductor(norm_fed: bool) -> None:
    t, i, o = 512, 256, 688
    delayed = sum(float8_cast_bytes(t, i, o, 2, "transformer-engine"))
    current = sum(float8_cast_bytes(t, i, o, 2, "transformer-engine-current", norm_fed=norm_fed))
    # the reductions TE runs before the casts of one linear: its input (unless the norm took it), its weight
    # [o, i], its grad_output [t, o]
    passes = [(o, i), (t, o)] + ([] if norm_fed else [(t, i)])
    measured = sum(_inductor_amax_bytes(r, c) for r, c in passes)
    assert current - delayed == pytest.approx(measured, rel=0.002)
    # the pass reads the tensor and writes no copy: c of a cast's c + 2 bytes per element
    assert current - delayed <= delayed * 2 / (2 + 2)


def test_fsdp_float8_gather_shares_the_weight_amax_pass_too() -> None:
    t, i, o = 1000, 300, 700
    full = float8_cast_bytes(t, i, o, 2, "transformer-engine-current", weight_share=1.0)
    eighth = float8_cast_bytes(t, i, o, 2, "transformer-engine-current", weight_share=0.125)
    # the weight's cast (c + 2) and its amax pass (c) both on 1/8 of it
    assert full[0] - eighth[0] == pytest.approx((2 + 2 + 2) * i * o * 0.875)
    assert full[1] == eighth[1]


def test_estimate_adds_the_hand_counted_amax_bytes_and_keeps_the_memory() -> None:
    spec = spec_from_config(LLAMA_8B, name="llama-3.1-8b-hand")
    dev = builtin_catalog().devices["h100-sxm"]
    d = training_duration_for(spec, dev, 8, 1e6, dict(MEGATRON, float8_recipe="transformer-engine"))
    c = training_duration_for(spec, dev, 8, 1e6, dict(MEGATRON, float8_recipe="transformer-engine-current"))

    def per_token(r: Any) -> int:
        return next(a.value for a in r.assumptions if a.name == "float8_cast_bytes_per_token")

    tokens = MEGATRON["seq_len"]
    q, kv = HEADS * HEAD_DIM, KV * HEAD_DIM
    # per layer and token: the inputs of o and down (q and up's come from the fused norm), every grad_output, and
    # every weight once per micro-batch of `tokens` tokens; 2 B per element read
    weights = H * q + 2 * H * kv + q * H + 3 * H * FFN
    per_layer = 2 * (q + FFN + (q + 2 * kv + H + 2 * FFN + H) + weights / tokens)
    assert per_token(c) - per_token(d) == pytest.approx(LAYERS * per_layer, abs=2)
    assert "(F3c)" in next(a.why for a in c.assumptions if a.name == "float8_cast_bytes_per_token")
    assert c.tokens_per_second is not None and d.tokens_per_second is not None
    assert c.tokens_per_second < d.tokens_per_second
    # no amax history to size and the same float8 copies (quantizer.cpp: create_tensor's rule is delayed scaling's)
    md = estimate_training(spec, **dict(MEGATRON, float8_recipe="transformer-engine"), gpus=8)
    mc = estimate_training(spec, **dict(MEGATRON, float8_recipe="transformer-engine-current"), gpus=8)
    assert [(i.name, i.bytes) for i in mc.items] == [(i.name, i.bytes) for i in md.items]


def test_recipe_needs_float8_and_is_offered_everywhere() -> None:
    assert "transformer-engine-current" in FLOAT8_RECIPES
    with pytest.raises(InputError, match="give float8 too"):
        TrainingWorkload(method="full", float8_recipe="transformer-engine-current")
    with pytest.raises(InputError, match="transformer-engine-current"):
        float8_cast_bytes(10, 4, 8, 2, "transformer-engine-curent")


def test_cli_and_request_schema_take_the_recipe() -> None:
    import json
    from importlib import resources

    from llmsizer.cli.main import build_parser

    ns = build_parser(["train"]).parse_args(["train", "llama-3.1-8b", "--float8", "--float8-recipe",
                                    "transformer-engine-current"])
    assert ns.float8_recipe == "transformer-engine-current"
    schema = json.loads(resources.files("llmsizer.request").joinpath("request.schema.json").read_text())
    assert "transformer-engine-current" in json.dumps(schema)
