"""The time of Megatron's selective recompute by module (selective_checkpointing.py eq. M1): the backward runs the
recomputed modules' forward again, so a step's FLOPs grow by their forward FLOPs.

Truth: the real transformers modules of a tiny DeepSeek-V3 (MLA with a q LoRA rank, one dense layer, MoE layers)
and DeepSeek-V2 without a q LoRA rank, their forward counted by ``torch.utils.flop_counter.FlopCounterMode`` on a
CPU: 'mlp' re-runs a dense layer's whole MLP (Megatron-LM @d98e8a64 transformer_layer.py:537-539, :992-1010),
'mla_up_proj' the up projections ``qkv_up_proj_and_rope_apply`` runs (multi_latent_attention.py:855-875:
linear_q_up_proj, or linear_q_proj without a q LoRA rank, and linear_kv_up_proj).
"""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from llmsizer.estimate.duration import _matmul_setup, flops_per_token  # noqa: E402
from llmsizer.formulas.selective_checkpointing import module_recompute_flops  # noqa: E402
from llmsizer.readers.hf_config import spec_from_config  # noqa: E402
from oracle_utils import TINY_CONFIGS, build  # noqa: E402

TOKENS = 16


def _forward_flops(fn: Any, *shapes: int) -> float:
    """FLOPs per token PyTorch's counter sees in ``fn`` over TOKENS random rows of each input width."""
    from torch.utils.flop_counter import FlopCounterMode

    xs = [torch.randn(1, TOKENS, w) for w in shapes]
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        fn(*xs)
    return counter.get_total_flops() / TOKENS


@pytest.mark.parametrize("name", ["deepseek-v3-mla", "deepseek-v2-no-q-lora"])
def test_module_recompute_flops_are_the_modules_forward(name: str) -> None:
    cfg = TINY_CONFIGS[name]
    spec = spec_from_config(cfg, name=name)
    st = _matmul_setup(spec, "full", 16, ())
    torch.manual_seed(0)
    model = build(cfg, device="cpu", dtype=torch.float32)
    layers = model.model.layers
    attn = layers[0].self_attn
    if cfg.get("q_lora_rank"):
        q_up = _forward_flops(attn.q_b_proj, cfg["q_lora_rank"])
    else:
        q_up = _forward_flops(attn.q_proj, cfg["hidden_size"])
    mla = q_up + _forward_flops(attn.kv_b_proj, cfg["kv_lora_rank"])
    dense_mlp = _forward_flops(layers[0].mlp, cfg["hidden_size"])  # layer 0 < first_k_dense_replace: dense
    assert spec.moe_layers[1] and not spec.moe_layers[0]
    for layer in range(spec.num_layers):
        assert module_recompute_flops(spec, layer, st, frozenset({"mla_up_proj"})) == mla
        assert module_recompute_flops(spec, layer, st, frozenset({"mlp"})) == (0 if spec.moe_layers[layer] else
                                                                                dense_mlp)
        # element-wise modules and the attention core (counted with the attention term) add no matmul FLOPs here
        assert module_recompute_flops(spec, layer, st, frozenset({"moe_act", "layernorm", "core_attn"})) == 0
    # the step's FLOPs per token: the modules' forward once more in every layer
    base = flops_per_token(spec, "full", 64)
    more = flops_per_token(spec, "full", 64, modules=frozenset({"mla_up_proj", "mlp"}))
    dense_layers = sum(not m for m in spec.moe_layers)
    assert more.per_token - base.per_token == spec.num_layers * mla + dense_layers * dense_mlp
    assert more.forward == base.forward
