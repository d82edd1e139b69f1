"""Megatron-Core's recompute module 'moe' (training_activations.py eq. R6, selective_checkpointing.py eq. M1).

NVIDIA/Megatron-LM @d98e8a64: ``MoELayer.forward`` runs its whole ``custom_forward`` (shared experts, router,
dispatch, experts, combine; moe/moe_layer.py:658-699) under ``te_checkpoint`` (fp8/fp4) or
``tensor_parallel.checkpoint`` (lines 701-717) when 'moe' is among the recompute modules (lines 247-251).
``CheckpointFunction`` (tensor_parallel/random.py:591-672) runs the function under no_grad and saves only its
arguments (line 628); its backward re-runs it with grad (line 659) and back-propagates through the re-run's output
(line 668). Megatron-Core needs CUDA and Transformer Engine, so the truth here is:

- memory: a torch analogue of the MoE forward (the one of tests/training/test_megatron_moe_saved.py, op for op from
  the lines it cites) under a reentrant Function written from random.py:600-672, measured with saved-tensor hooks:
  what the forward keeps, and what the backward's re-run keeps (with 'moe_act' still applying inside it);
- time: transformers' real Nemotron-H MoE mixer (its experts eager, one ``F.linear`` per expert, so the counter sees
  them) under ``torch.utils.checkpoint(use_reentrant=True)`` (the function Megatron's is adapted from), its
  forward + backward FLOPs counted by ``FlopCounterMode`` against the same without the checkpoint.
"""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")

from tests.training.test_megatron_moe_saved import _WeightedSwiGLU  # noqa: E402  (fused_bias_swiglu.py's stand-in)

from llmsizer.formulas.training_activations import (  # noqa: E402
    ActivationSetup,
    moe_checkpoint_terms,
    moe_recompute_bytes,
    moe_saved_terms,
)
from llmsizer.readers.hf_config import spec_from_config  # noqa: E402

T, TP, H, E, K, I_MOE = 256, 2, 64, 4, 2, 32
CFG = {"model_type": "qwen3_moe", "vocab_size": 1000, "hidden_size": H, "num_hidden_layers": 2,
       "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "num_experts": E,
       "num_experts_per_tok": K, "moe_intermediate_size": I_MOE, "mlp_only_layers": []}


class _RouterGatingLinear(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, inp: Any, weight: Any) -> Any:
        ctx.save_for_backward(inp, weight)  # moe_utils.py:1382: the input as it comes
        return torch.mm(inp, weight.t())

    @staticmethod
    def backward(ctx: Any, g: Any) -> Any:
        inp, weight = ctx.saved_tensors
        return g @ weight, g.t() @ inp


class _Tally:
    """Saved-tensor hooks that add up the distinct floating-point storages saved, less ``skip`` (weights, the
    probabilities' leaf); int64 routing indices are the router term's bookkeeping, not sized here."""

    def __init__(self, skip: set[int]) -> None:
        self.skip, self.saved = skip, {}

    def hooks(self) -> Any:
        def pack(t: Any) -> Any:
            if t.untyped_storage()._cdata not in self.skip and t.is_floating_point():
                self.saved[t.untyped_storage()._cdata] = t.untyped_storage().nbytes()
            return t
        return torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t)


class _ReentrantCheckpoint(torch.autograd.Function):
    """tensor_parallel/random.py CheckpointFunction: forward under no_grad, save the argument (line 628); backward
    re-runs the function with grad (line 659), its saves tallied, and back-propagates through its output (668)."""

    @staticmethod
    def forward(ctx: Any, run: Any, tally: Any, x: Any) -> Any:
        ctx.run, ctx.tally = run, tally
        with torch.no_grad():
            out = run(x)
        ctx.save_for_backward(x)
        return out

    @staticmethod
    def backward(ctx: Any, g: Any) -> Any:
        (x,) = ctx.saved_tensors
        xd = x.detach().requires_grad_(x.requires_grad)
        ctx.tally.skip.add(xd.untyped_storage()._cdata)  # the kept argument, counted by the forward
        with torch.enable_grad(), ctx.tally.hooks():
            out = ctx.run(xd)
        ctx.tally.saved[out.untyped_storage()._cdata] = out.untyped_storage().nbytes()  # held through line 668
        torch.autograd.backward(out, g)
        return None, None, xd.grad


def _moe_forward(weights: tuple[Any, ...], moe_act: bool, freed: list[Any]) -> Any:
    """The MoE layer of one TP-2 rank with ETP 1 on its SP shard (as test_megatron_moe_saved.py): router gating,
    permute (index_select), per expert fc1, the weighted SwiGLU (under 'moe_act' its output's storage freed once fc2
    has saved it: CheckpointWithoutOutput, experts.py:1019-1030), fc2, scatter-add unpermute."""
    router_w, fc1, fc2, probs = weights
    ts = T // TP

    def run(x: Any) -> Any:
        _RouterGatingLinear.apply(x, router_w)
        idx = torch.arange(ts * K) % ts
        permuted = x.index_select(0, idx)
        permuted_probs = probs.index_select(0, torch.arange(ts * K))
        per = ts * K // E
        outs = []
        for e in range(E):
            rows = slice(e * per, (e + 1) * per)
            act = _WeightedSwiGLU.apply(permuted[rows] @ fc1[e], permuted_probs[rows].unsqueeze(-1))
            outs.append(act @ fc2[e])
            if moe_act:
                freed.append(act.untyped_storage()._cdata)
        return torch.zeros(ts, H, dtype=x.dtype).scatter_add(0, idx.unsqueeze(1).expand(-1, H), torch.cat(outs))
    return run


def _measured(moe_act: bool) -> tuple[int, int]:
    """(bytes the forward keeps, bytes the backward's re-run holds) of the MoE layer under a reentrant checkpoint."""
    torch.manual_seed(0)
    dt = torch.bfloat16
    ts = T // TP
    router_w = torch.randn(E, H, dtype=dt, requires_grad=True)
    fc1 = torch.randn(E, H, 2 * I_MOE, dtype=dt, requires_grad=True)
    fc2 = torch.randn(E, I_MOE, H, dtype=dt, requires_grad=True)
    probs = torch.rand(ts * K, dtype=dt, requires_grad=True)
    x0 = torch.randn(ts, H, dtype=dt, requires_grad=True)
    x = x0 * 1  # the pre-MLP norm's output: the MoE layer's input, [t / tp, h]
    skip = {p.untyped_storage()._cdata for p in (router_w, fc1, fc2, probs, x0)}
    freed: list[int] = []
    run = _moe_forward((router_w, fc1, fc2, probs), moe_act, freed)
    forward = _Tally(set(skip))
    recompute = _Tally(set(skip))
    with forward.hooks():
        out = _ReentrantCheckpoint.apply(run, recompute, x)
    kept = sum(forward.saved.values())
    assert set(forward.saved) == {x.untyped_storage()._cdata}  # the argument alone: the no_grad forward saves none
    freed.clear()
    out.sum().backward()
    for s in freed:  # 'moe_act' inside the re-run: the activation outputs' storage is freed after fc2 saved it
        recompute.saved.pop(s, None)
    return kept, sum(recompute.saved.values())


@pytest.mark.parametrize("moe_act", [False, True])
def test_moe_recompute_keeps_the_input_and_rebuilds_the_layer_in_its_backward(moe_act: bool) -> None:
    spec = spec_from_config(CFG, name="tiny-megatron-moe")
    others = {"moe_act"} if moe_act else set()
    st = ActivationSetup(batch=1, seq=T, residual=2, compute=2, expert=2, tp=TP, sp=True, etp=1, megatron_te=True,
                         checkpointing="selective", recompute=frozenset({"moe", *others}))
    kept, rebuilt = _measured(moe_act)
    assert sum(t.bytes for t in moe_checkpoint_terms(spec, st)) == kept == T // TP * H * 2
    # the re-run's terms as a plain MoE layer with the same other modules: the routed experts (eq. E3, measured),
    # the router's [t, E] term (probabilities and top-k bookkeeping the analogue does not build) and the block input,
    # which is the kept argument itself
    rerun = {t.name.split(" (")[0]: t.bytes
             for t in moe_saved_terms(spec, ActivationSetup(
                 batch=1, seq=T, residual=2, compute=2, expert=2, tp=TP, sp=True, etp=1, megatron_te=True,
                 checkpointing="selective", recompute=frozenset(others or {"core_attn"})))}
    assert set(rerun) == {"MoE block input", "router probabilities", "routed experts"}
    assert moe_recompute_bytes(spec, 1, st) - rerun["router probabilities"] == rebuilt


def test_moe_recompute_with_layernorm_keeps_nothing_and_rebuilds_the_norm_output() -> None:
    """transformer_layer.py:1088-1093: under 'layernorm' the pre-MLP norm's output, the checkpoint's argument, is
    discarded and rebuilt by the norm's hook before the MoE backward re-runs the layer."""
    spec = spec_from_config(CFG, name="tiny-megatron-moe")
    base = dict(batch=1, seq=T, residual=2, compute=2, expert=2, tp=TP, sp=True, etp=1, megatron_te=True,
                checkpointing="selective")
    with_norm = ActivationSetup(**base, recompute=frozenset({"moe", "layernorm"}))  # type: ignore[arg-type]
    alone = ActivationSetup(**base, recompute=frozenset({"moe"}))  # type: ignore[arg-type]
    assert moe_checkpoint_terms(spec, with_norm) == []
    assert moe_recompute_bytes(spec, 1, with_norm) - moe_recompute_bytes(spec, 1, alone) == T // TP * H * 2
    # a dense layer or a model without MoE: nothing to rebuild
    dense = spec_from_config({**CFG, "mlp_only_layers": [0]}, name="tiny-megatron-moe-dense0")
    assert moe_recompute_bytes(dense, 0, alone) == 0 and moe_recompute_bytes(dense, 1, alone) > 0


NEMOTRON_H = dict(model_type="nemotron_h", vocab_size=512, hidden_size=256, num_attention_heads=4,
                  num_key_value_heads=2, head_dim=64, mamba_num_heads=8, mamba_head_dim=32, ssm_state_size=16,
                  n_groups=1, n_routed_experts=8, num_experts_per_tok=2, moe_intermediate_size=128,
                  moe_shared_expert_intermediate_size=192, n_group=1, topk_group=1, intermediate_size=384,
                  max_position_embeddings=1024, tie_word_embeddings=False, hybrid_override_pattern="E",
                  num_hidden_layers=1)
TOKENS = 32


@pytest.mark.parametrize("latent", [0, 64])
def test_moe_recompute_flops_are_the_moe_layers_forward_again(latent: int) -> None:
    transformers = pytest.importorskip("transformers")
    from torch.utils.checkpoint import checkpoint
    from torch.utils.flop_counter import FlopCounterMode

    from llmsizer.estimate.duration import _matmul_setup
    from llmsizer.formulas.selective_checkpointing import module_recompute_flops

    cfg = {**NEMOTRON_H, **({"moe_latent_size": latent} if latent else {})}
    spec = spec_from_config(cfg, name="tiny-nemotron-h-moe")
    assert spec.moe_layers[0] and (spec.moe is not None and spec.moe.latent_size == latent)
    transformers.logging.set_verbosity_error()
    torch.manual_seed(0)
    conf = transformers.AutoConfig.for_model(**cfg)
    conf._experts_implementation = "eager"  # one F.linear per expert: the counter sees the routed experts
    model = transformers.AutoModelForCausalLM.from_config(conf, dtype=torch.float32)
    moe = model.model.layers[0].mixer

    def backward_flops(wrap: bool) -> int:  # the backward alone (the counter's module hooks need a grad forward)
        torch.manual_seed(1)
        x = torch.randn(1, TOKENS, cfg["hidden_size"], requires_grad=True)
        y = checkpoint(moe, x, use_reentrant=True) if wrap else moe(x)
        with FlopCounterMode(display=False) as c:
            y.sum().backward()
        return c.get_total_flops()

    st = _matmul_setup(spec, "full", 16, ())
    again = backward_flops(True) - backward_flops(False)
    assert again == TOKENS * module_recompute_flops(spec, 0, st, frozenset({"moe"}))
    assert module_recompute_flops(spec, 0, st, frozenset({"moe_act", "layernorm", "mlp"})) == 0


def test_the_backward_peak_holds_one_moe_layers_rebuild(monkeypatch: pytest.MonkeyPatch) -> None:
    """The estimate's backward peak at an MoE layer holds the kept inputs of the layers below and that layer's re-run
    (moe_recompute_bytes, measured above), not every layer's MoE activations."""
    import llmsizer.estimate.training.timeline as timeline
    from llmsizer.estimate.inference.common import Acc
    from llmsizer.estimate.training import estimate_training
    from llmsizer.estimate.training.setup import resolve
    from llmsizer.specs import TrainingWorkload

    cfg = {**CFG, "hidden_size": 256, "num_hidden_layers": 4, "head_dim": 64, "num_experts": 16,
           "num_experts_per_tok": 8, "moe_intermediate_size": 512}
    w = TrainingWorkload(method="full", precision="megatron-bf16", micro_batch=1, seq_len=4096,
                         grad_checkpointing="selective", recompute_modules=("moe",))

    def activations(name: str) -> tuple[int, str]:
        est = estimate_training(spec_from_config(cfg, name=name), w)
        return next(i.bytes for i in est.items if i.name == "activations"), est.details["peak_phase"]

    with_rebuild, phase = activations("tiny-moe-rebuilt")
    monkeypatch.setattr(timeline, "moe_recompute_bytes", lambda *a: 0)
    without, _ = activations("tiny-moe-not-rebuilt")
    spec = spec_from_config(cfg, name="tiny-moe")
    act = resolve(spec, w, Acc()).act
    assert phase.startswith("backward layer")
    assert with_rebuild - without == moe_recompute_bytes(spec, int(phase.split()[-1]), act) > 0
