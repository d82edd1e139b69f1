"""Kernels of an MoE block by implementation (formulas/launch_overhead.py eq. K9), against real PyTorch.

Independent truth: transformers' own Qwen3-MoE sparse block (``Qwen3MoeSparseMoeBlock``, random weights, CPU) runs
forward and backward under a ``TorchDispatchMode`` that counts every aten op that launches a kernel (views, aliases
and pure allocations launch none; the backward seed is the test's), once with ``experts_implementation="eager"``
(the per-expert loop) and once with transformers' default ``grouped_mm``. The eager loop's count is checked against
the experts the routing actually hit; eq. K9a's expectation against routing drawn uniformly at random. The counts
must be equal, not close: each is an integer inventory.
"""

from __future__ import annotations

from typing import Any

import pytest

from llmsizer.errors import InputError
from llmsizer.formulas.launch_overhead import (
    HF_EAGER_MOE_FIXED,
    HF_EAGER_MOE_PER_HIT,
    HF_MOE_HALF_CASTS,
    expected_hit_experts,
    moe_layer_kernels,
)

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

NO_KERNEL = {"detach", "lift_fresh", "alias", "_unsafe_view", "empty", "empty_like", "empty_strided",
             "new_empty_strided"}
HIDDEN = 64


def _trace(implementation: str, experts: int, top_k: int, tokens: int, dtype: Any) -> tuple[int, int, int]:
    """(forward kernels, backward kernels, experts hit) of one Qwen3-MoE sparse block."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from transformers import Qwen3MoeConfig
    from transformers.models.qwen3_moe.modeling_qwen3_moe import Qwen3MoeSparseMoeBlock

    torch.manual_seed(0)
    cfg = Qwen3MoeConfig(hidden_size=HIDDEN, moe_intermediate_size=32, num_experts=experts,
                         num_experts_per_tok=top_k, norm_topk_prob=True)
    cfg._experts_implementation = implementation
    block = Qwen3MoeSparseMoeBlock(cfg).to(dtype)
    for p in block.parameters():
        torch.nn.init.normal_(p, std=0.02)
    x = torch.randn(1, tokens, HIDDEN, dtype=dtype, requires_grad=True)
    counts = [0, 0]
    phase = [0]

    class Count(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            out = func(*args, **(kwargs or {}))
            if not func.is_view and func.overloadpacket.__name__ not in NO_KERNEL:
                counts[phase[0]] += 1
            return out

    with Count():
        y = block(x)
    seed = torch.ones_like(y)
    phase[0] = 1
    with Count():
        y.backward(seed)
    with torch.no_grad():
        hit = len(set(block.gate(x.view(-1, HIDDEN))[2].flatten().tolist()))
    return counts[0], counts[1], hit


CASES = [(8, 2, 4), (8, 2, 64), (16, 4, 64), (64, 8, 512)]


@pytest.mark.parametrize("experts,top_k,tokens", CASES)
@pytest.mark.parametrize("half", [False, True])
def test_eager_loop_per_expert_hit(experts: int, top_k: int, tokens: int, half: bool) -> None:
    """The eager loop: a fixed router/mask part and the same kernels per expert hit (eq. K9)."""
    f, b, hit = _trace("eager", experts, top_k, tokens, torch.bfloat16 if half else torch.float32)
    cf, cb = HF_MOE_HALF_CASTS if half else (0, 0)
    assert (f, b) == (HF_EAGER_MOE_FIXED[0] + cf + HF_EAGER_MOE_PER_HIT[0] * hit,
                      HF_EAGER_MOE_FIXED[1] + cb + HF_EAGER_MOE_PER_HIT[1] * hit)
    if hit == experts:  # every expert hit: eq. K9 at its expectation, E (1 - (1 - k/E)^T) within 1e-3 of E here
        assert moe_layer_kernels("transformers-eager", experts, top_k, tokens, half=half) == \
            pytest.approx((f, b), abs=1e-3)


@pytest.mark.parametrize("experts,top_k,tokens", CASES)
@pytest.mark.parametrize("half", [False, True])
def test_grouped_mm_independent_of_tokens_and_experts(experts: int, top_k: int, tokens: int, half: bool) -> None:
    """transformers' default grouped_mm path: one count whatever E, k and T (T >= 2)."""
    f, b, _ = _trace("grouped_mm", experts, top_k, tokens, torch.bfloat16 if half else torch.float32)
    assert moe_layer_kernels("transformers-grouped-mm", experts, top_k, tokens, half=half) == (f, b)


def test_grouped_mm_is_transformers_default() -> None:
    """transformers 5.x picks 'grouped_mm' for a Qwen3-MoE model when none is requested (the rule
    estimate/launch.py moe_implementation states)."""
    from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM

    cfg = Qwen3MoeConfig(hidden_size=HIDDEN, moe_intermediate_size=32, num_experts=4, num_experts_per_tok=2,
                         intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1,
                         vocab_size=32)
    assert Qwen3MoeForCausalLM(cfg).config._experts_implementation == "grouped_mm"


@pytest.mark.parametrize("experts,top_k,tokens", [(8, 2, 3), (128, 8, 16), (64, 6, 1)])
def test_expected_hits_uniform_routing(experts: int, top_k: int, tokens: int) -> None:
    """Eq. K9a against routing drawn uniformly (k distinct experts per token): the mean hit count of 4000 draws
    within 4 standard errors."""
    g = torch.Generator().manual_seed(1)
    draws = 4000
    hits = torch.empty(draws)
    for i in range(draws):
        chosen = torch.rand(tokens, experts, generator=g).argsort(dim=-1)[:, :top_k]
        hits[i] = chosen.unique().numel()
    mean, se = hits.mean().item(), hits.std().item() / draws ** 0.5
    assert abs(expected_hit_experts(experts, top_k, tokens) - mean) <= 4 * se + 1e-9


def test_megatron_count_grows_with_local_experts_not_top_k() -> None:
    """Megatron-Core's TE GroupedLinear launches a GEMM per local expert: the count moves with E / ep only."""
    base = moe_layer_kernels("megatron-te", 128, 8, 4096, ep=16)
    assert moe_layer_kernels("megatron-te", 128, 2, 4096, ep=16) == base
    assert moe_layer_kernels("megatron-te", 128, 8, 64, ep=16) == base
    f8, b8 = moe_layer_kernels("megatron-te", 128, 8, 4096, ep=8)
    assert (f8 - base[0], b8 - base[1]) == (2 * 8, 4 * 8)


def test_moe_kernels_refuse_bad_input() -> None:
    with pytest.raises(InputError, match="implementation"):
        moe_layer_kernels("deepspeed", 8, 2, 16)
    with pytest.raises(InputError, match="divide"):
        moe_layer_kernels("megatron-te", 8, 2, 16, ep=3)
    with pytest.raises(InputError, match="top-k"):
        expected_hit_experts(8, 9, 16)


def _mixtral_step(layers: int) -> int:
    """Kernels of the forward + backward of a tiny transformers Mixtral (bf16, CPU, SDPA, default experts
    implementation) with ``layers`` decoder layers, every layer MoE."""
    from torch.utils._python_dispatch import TorchDispatchMode

    torch.manual_seed(0)
    cfg = transformers.MixtralConfig(**MIXTRAL, num_hidden_layers=layers, attn_implementation="sdpa")
    model = transformers.MixtralForCausalLM(cfg).to(torch.bfloat16).train()
    model.config.use_cache = False
    ids = torch.randint(0, MIXTRAL["vocab_size"], (1, 64), generator=torch.Generator().manual_seed(0))
    n = [0]

    class Count(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            out = func(*args, **(kwargs or {}))
            if not func.is_view and func.overloadpacket.__name__ not in NO_KERNEL | {
                    "_record_function_enter_new", "_record_function_exit"}:
                n[0] += 1
            return out

    with Count():
        model(input_ids=ids, labels=ids).loss.backward()
    return n[0]


# Mixtral's router takes the softmax of ``router_logits.float()`` and keeps the top-k weights in fp32
# (models/mixtral/modeling_mixtral.py L104-111 @5.24.0), where Qwen3-MoE's casts them back to the logits' dtype
# (L260-268): the same forward count, one cast more in Mixtral's backward (traced block against block)
MIXTRAL_ROUTER_CAST = 1
MIXTRAL = dict(hidden_size=64, intermediate_size=32, num_attention_heads=4, num_key_value_heads=2, vocab_size=128,
               num_local_experts=8, num_experts_per_tok=2, max_position_embeddings=256)


def test_mixtral_layer_equals_the_estimate_per_layer() -> None:
    """One Mixtral decoder layer of a real training step (2 layers less 1, transformers' default grouped_mm experts)
    against the estimate's per-layer count (estimate/duration.py kernels_per_micro_step: the attention and norms of
    eqs. K2/K3 with the MoE block of eq. K9 in place of the MLP), less the one backward cast by which Mixtral's router
    departs from Qwen3-MoE's, whose block eq. K9 counts."""
    from llmsizer.estimate.duration import kernels_per_micro_step
    from llmsizer.readers.hf_config import spec_from_config
    from llmsizer.specs import TrainingWorkload

    traced = _mixtral_step(2) - _mixtral_step(1)
    w = TrainingWorkload(method="full", micro_batch=1, seq_len=64, precision="bf16")
    est = [kernels_per_micro_step(spec_from_config(transformers.MixtralConfig(
        **MIXTRAL, num_hidden_layers=n).to_dict(), name=f"tiny-mixtral-{n}"), w) for n in (1, 2)]
    assert traced == est[1] - est[0] + MIXTRAL_ROUTER_CAST, (traced, est)
