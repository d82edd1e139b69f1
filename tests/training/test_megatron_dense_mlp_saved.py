"""What a Megatron-Core dense MLP and shared expert keep for their backward (eq. S1 of ``training_activations``).

Megatron-Core and Transformer Engine do not run on a CPU, so the truth is a torch analogue of ``MLP.forward``
(NVIDIA/Megatron-LM @d98e8a64 megatron/core/transformer/mlp.py lines 257-349) built op for op from the cited lines and
measured with autograd's saved-tensor hooks:

- fc1, TE's column-parallel linear under sequence parallelism: saves its [t / tp, h] input shard and all-gathers it
  for the GEMM (TransformerEngine @d0067d0d transformer_engine/pytorch/module/linear.py line 372: ``inputmat = inp``,
  the tensor saved for backward, "maybe sharded");
- the fused activation, ``bias_swiglu_impl`` (mlp.py lines 308-317, Megatron-LM's default ``--bias-swiglu-fusion``):
  ``SwiGLUFunction`` saves only its input, fc1's output (fusions/fused_bias_swiglu.py lines 232-235);
- fc2, TE's row-parallel linear: saves its 16-bit input as it comes (linear.py lines 438-439, 619-621).

The unfused ``glu`` (mlp.py lines 320-334) is measured too, for the 5 t I the docstring states it would keep.
A shared expert is ``SharedExpertMLP``, whose forward is ``MLP.forward`` (moe/shared_experts.py line 202).
"""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

from llmsizer.formulas.training_activations import (  # noqa: E402
    ActivationSetup,
    layer_saved_terms,
    moe_saved_terms,
)
from llmsizer.readers.hf_config import spec_from_config  # noqa: E402
from oracle_utils import saved_storages  # noqa: E402

T, TP, H, I_DENSE = 256, 2, 64, 96
DENSE = {"model_type": "llama", "vocab_size": 1000, "hidden_size": H, "num_hidden_layers": 2,
         "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": I_DENSE}
MOE = {"model_type": "deepseek_v3", "vocab_size": 1000, "hidden_size": H, "num_hidden_layers": 2,
       "num_attention_heads": 4, "num_key_value_heads": 4, "intermediate_size": I_DENSE,
       "moe_intermediate_size": 32, "n_routed_experts": 4, "num_experts_per_tok": 2, "n_shared_experts": 1,
       "first_k_dense_replace": 0, "kv_lora_rank": 16, "q_lora_rank": 24, "qk_rope_head_dim": 8,
       "qk_nope_head_dim": 8, "v_head_dim": 16, "n_group": 1, "topk_group": 1}


class _ColumnParallelSP(torch.autograd.Function):
    """TE's column-parallel fc1 under SP: the GEMM reads the gathered input, the backward keeps the local shard."""

    @staticmethod
    def forward(ctx: Any, shard: Any, weight: Any) -> Any:
        ctx.save_for_backward(shard, weight)  # linear.py line 372: the (sharded) input is what is saved
        return torch.cat([shard] * TP) @ weight  # the all-gather over the TP group, then the GEMM

    @staticmethod
    def backward(ctx: Any, g: Any) -> Any:  # pragma: no cover - the forward is what is measured
        shard, weight = ctx.saved_tensors
        return torch.zeros_like(shard), torch.zeros_like(weight)


class _SwiGLU(torch.autograd.Function):
    """``SwiGLUFunction`` (fused_bias_swiglu.py lines 216-263): saves its input only."""

    @staticmethod
    def forward(ctx: Any, y: Any) -> Any:
        ctx.save_for_backward(y)  # line 235
        a, b = torch.chunk(y, 2, -1)
        return F.silu(a) * b

    @staticmethod
    def backward(ctx: Any, g: Any) -> Any:  # pragma: no cover
        (y,) = ctx.saved_tensors
        return torch.zeros_like(y)


def _measured(width: int, fused: bool) -> tuple[int, int]:
    """(bytes fc1's input keeps, bytes fc1's output, the activation and fc2's input keep) of one MLP forward on a rank
    of TP 2 with SP: t / tp input tokens, t tokens at width I / tp inside."""
    torch.manual_seed(0)
    dt = torch.bfloat16
    i_w = width // TP
    x0 = torch.randn(T // TP, H, dtype=dt, requires_grad=True)
    fc1 = torch.randn(H, 2 * i_w, dtype=dt, requires_grad=True)
    fc2 = torch.randn(i_w, H, dtype=dt, requires_grad=True)
    x = x0 * 1  # the norm's output (TE fuses the pre-MLP norm into fc1 in a dense layer)
    saved, hooks = saved_storages({p.untyped_storage()._cdata for p in (x0, fc1, fc2)})
    with hooks:
        y = _ColumnParallelSP.apply(x, fc1)
        inp = saved.pop(x.untyped_storage()._cdata)
        if fused:
            act = _SwiGLU.apply(y)
        else:  # mlp.py lines 320-334 with the default glu_linear_offset 0.0 and no clamp
            x_glu, x_linear = torch.chunk(y, 2, dim=-1)
            act = F.silu(x_glu) * (x_linear + 0.0)
        out = act @ fc2  # the row-parallel fc2 (its reduce-scatter keeps nothing)
    del out
    return inp, sum(saved.values())


def _setup() -> ActivationSetup:
    return ActivationSetup(batch=1, seq=T, residual=2, compute=2, expert=2, tp=TP, sp=True, megatron_te=True)


def test_megatron_dense_mlp_keeps_fc1_output_and_fc2_input() -> None:
    spec = spec_from_config(DENSE, name="tiny-megatron-dense")
    terms = {t.name: t.bytes for t in layer_saved_terms(spec, 0, _setup())}
    inp, inside = _measured(I_DENSE, fused=True)
    assert terms["mlp fc1 output (fused SwiGLU input), fc2 input"] == inside == 3 * T * (I_DENSE // TP) * 2
    assert terms["mlp input"] == inp  # the [t / tp, h] shard fc1 saves
    assert not any(name.startswith("mlp act input") for name in terms)  # the transformers count is not added


def test_megatron_shared_expert_keeps_fc1_output_and_fc2_input() -> None:
    spec = spec_from_config(MOE, name="tiny-megatron-moe-shared")
    assert spec.moe is not None
    width = spec.moe.shared_intermediate_size
    assert width == 32  # moe_intermediate_size x n_shared_experts
    terms = {t.name: t.bytes for t in moe_saved_terms(spec, _setup())}
    _, inside = _measured(width, fused=True)
    assert terms["shared expert fc1 output (fused SwiGLU input), fc2 input"] == inside
    assert "shared expert input" not in terms  # it reads the MoE block input, counted once (E2)


def test_unfused_megatron_glu_keeps_five_widths() -> None:
    """The docstring's figure for ``--no-bias-swiglu-fusion`` (not modelled): 5 t I / tp 16-bit elements."""
    _, inside = _measured(I_DENSE, fused=False)
    assert inside == 5 * T * (I_DENSE // TP) * 2
