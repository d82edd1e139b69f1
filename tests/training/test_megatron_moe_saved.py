"""What a Megatron-Core MoE layer keeps for its backward (eqs. E2, E3 of ``training_activations.moe_saved_terms``).

Megatron-Core itself does not run on a CPU (Transformer Engine, CUDA process groups), so the truth here is a torch
analogue built op for op from its source (NVIDIA/Megatron-LM @d98e8a64), measured with autograd's saved-tensor hooks:

- the router's gating linear, ``RouterGatingLinearFunction`` (moe/moe_utils.py:1357-1402): saves ``inp`` as it
  comes and casts to the router dtype inside its forward (the input's dtype under the default ``moe_router_dtype``
  None, router.py:106-111), so the probabilities (``probs.type_as(logits)``, moe_utils.py:936) are bf16 here;
- the all-to-all dispatcher's permute (moe_utils.py ``permute``: an index_select of the rank's SP shard) and
  unpermute (``unpermute`` :497: a scatter-add, no probabilities, they were applied in the experts);
- TEGroupedMLP (moe/experts.py): fc1 per local expert (line 932), the fused ``weighted_bias_swiglu_impl``
  (line 966; ``WeightedSwiGLUFunction`` saves its input and the probabilities, fusions/fused_bias_swiglu.py:266-270),
  fc2 (line 1028); under 'moe_act' ``CheckpointWithoutOutput`` runs the activation and frees its output once fc2
  has saved it (lines 1019-1030), so fc2's input is not kept.

The token count is the rank's sequence-parallel shard (moe_layer.py:636-663): the block input is [t / tp, h].
"""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

from llmsizer.formulas.training_activations import ActivationSetup, moe_saved_terms  # noqa: E402
from llmsizer.readers.hf_config import spec_from_config  # noqa: E402
from oracle_utils import saved_storages  # noqa: E402

T, TP, H, E, K, I_MOE = 256, 2, 64, 4, 2, 32
CFG = {"model_type": "qwen3_moe", "vocab_size": 1000, "hidden_size": H, "num_hidden_layers": 2,
       "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "num_experts": E,
       "num_experts_per_tok": K, "moe_intermediate_size": I_MOE}


class _RouterGatingLinear(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, inp: Any, weight: Any) -> Any:
        ctx.save_for_backward(inp, weight)  # moe_utils.py:1382: the input as it comes
        # router.py:106-111: router_dtype = input.dtype (moe_router_dtype None, the default); moe_utils.py:1396
        return torch.mm(inp.to(inp.dtype), weight.to(inp.dtype).t())

    @staticmethod
    def backward(ctx: Any, g: Any) -> Any:  # pragma: no cover - the forward is what is measured
        inp, weight = ctx.saved_tensors
        return (g @ weight.float()).to(inp.dtype), (g.t() @ inp.float()).to(weight.dtype)


class _WeightedSwiGLU(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: Any, w: Any) -> Any:
        ctx.save_for_backward(x, w)  # fused_bias_swiglu.py:270
        a, b = torch.chunk(x, 2, dim=-1)
        return (F.silu(a.float()) * b.float() * w).to(x.dtype)

    @staticmethod
    def backward(ctx: Any, g: Any) -> Any:  # zeros: what is measured is what the forward saves
        x, w = ctx.saved_tensors
        return torch.zeros_like(x), torch.zeros_like(w)


def _measured(moe_act: bool) -> tuple[int, int]:
    """(bytes the routed experts keep, bytes the router keeps beyond the shared block input) of one MoE layer's
    forward on a rank of TP 2 with ETP 1 (its shard's t / 2 x k routed copies at the full I)."""
    torch.manual_seed(0)
    dt = torch.bfloat16
    ts = T // TP
    x0 = torch.randn(ts, H, dtype=dt, requires_grad=True)
    router_w = torch.randn(E, H, dtype=dt, requires_grad=True)
    fc1 = torch.randn(E, H, 2 * I_MOE, dtype=dt, requires_grad=True)
    fc2 = torch.randn(E, I_MOE, H, dtype=dt, requires_grad=True)
    skip = {p.untyped_storage()._cdata for p in (x0, router_w, fc1, fc2)}
    x = x0 * 1  # the pre-MLP norm's output: the block input, [t / tp, h]
    skip.add(x.untyped_storage()._cdata)
    saved, hooks = saved_storages(skip)
    with hooks:
        logits = _RouterGatingLinear.apply(x, router_w)
    router = sum(saved.values())
    # balanced top-k (the routing tensors are the router term's, sized separately); measure the experts alone
    idx = torch.arange(ts * K) % ts
    expert_of = torch.arange(ts * K) // (ts * K // E)
    probs = torch.softmax(logits.detach(), -1).gather(1, expert_of.view(ts, K) % E).reshape(-1).requires_grad_()
    skip.add(probs.untyped_storage()._cdata)
    saved: dict[int, int] = {}

    def pack(t: Any) -> Any:  # the permutes' int64 indices are the router term's bookkeeping, not sized here
        if t.untyped_storage()._cdata not in skip and t.is_floating_point():
            saved[t.untyped_storage()._cdata] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        permuted = x.index_select(0, idx)  # permute: the dispatched tokens
        permuted_probs = probs.index_select(0, torch.arange(ts * K))  # the probabilities permuted alongside
        per = ts * K // E
        outs = []
        for e in range(E):
            rows = slice(e * per, (e + 1) * per)
            h1 = permuted[rows] @ fc1[e]
            w = permuted_probs[rows].unsqueeze(-1)
            if moe_act:  # CheckpointWithoutOutput: the activation's output is freed after fc2 saved it
                act = _WeightedSwiGLU.apply(h1, w)
                y = act @ fc2[e]
                saved.pop(act.untyped_storage()._cdata, None)
            else:
                y = _WeightedSwiGLU.apply(h1, w) @ fc2[e]
            outs.append(y)
        # unpermute (moe_utils.py:614-616): a scatter-add of the experts' outputs, no probabilities
        out = torch.zeros(ts, H, dtype=dt).scatter_add(0, idx.unsqueeze(1).expand(-1, H), torch.cat(outs))
    del out
    return sum(saved.values()), router


@pytest.mark.parametrize("moe_act", [False, True])
def test_megatron_routed_experts_and_router_keep_what_the_terms_say(moe_act: bool) -> None:
    spec = spec_from_config(CFG, name="tiny-megatron-moe")
    st = ActivationSetup(batch=1, seq=T, residual=2, compute=2, expert=2, tp=TP, sp=True, etp=1, megatron_te=True,
                         recompute=frozenset({"moe_act"} if moe_act else {"core_attn"}))
    terms = {t.name.split(" (")[0]: t.bytes for t in moe_saved_terms(spec, st)}
    experts, router = _measured(moe_act)
    assert terms["routed experts"] == experts
    assert router == 0  # no fp32 copy of the router's input: it shares the block input
    assert "router fp32 input copy" not in terms
    assert terms["MoE block input"] == T // TP * H * 2
