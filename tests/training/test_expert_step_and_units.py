"""Expert parallelism in the optimizer step and in torchtitan's FSDP units.

Independent truth:

- the parameters of the real Qwen3-30B-A3B model (transformers built on the meta device, shapes only:
  ``oracle_utils.build``): the routed experts are the ``.mlp.experts.`` tensors; 1-D tensors and the router
  (``.mlp.gate.weight``) stay whole on every TP rank, every other matrix is split tp ways;
- Megatron-Core's groups (NVIDIA/Megatron-LM @d98e8a64 megatron/core/parallel_state.py:871-880): dp = world / (tp x pp),
  expert dp = world / (tp x ep x pp); the distributed optimizer (ZeRO-1) shards states, not gradients;
- torchtitan's placement of routed experts under EP (pytorch/torchtitan @b5bcd76
  torchtitan/models/common/moe_sharding.py:29-47, :208-216): Shard(0) over EP only, whole on every TP rank.
"""

from __future__ import annotations

import pytest

from llmsizer.catalog.models import entries
from llmsizer.estimate.duration import _trained_per_device
from llmsizer.estimate.training.compose import training_context
from llmsizer.estimate.training.gather_units import fsdp_gather_units
from llmsizer.estimate.training.states import stage_states
from llmsizer.estimate.training.timeline import stage_timeline
from llmsizer.models import load_model
from llmsizer.specs.training import TrainingWorkload


def _shares(tp: int, layer: int | None = None) -> tuple[float, float, float]:
    """(dense elements after TP, expert elements before EP, all elements) of the real Qwen3-30B-A3B, or of one of
    its decoder layers."""
    from oracle_utils import build

    dense = expert = total = 0.0
    for name, p in build(entries()["qwen3-30b-a3b"].config).named_parameters():
        if layer is not None and f".layers.{layer}." not in name:
            continue
        total += p.numel()
        if ".mlp.experts." in name:
            expert += p.numel()
        else:
            dense += p.numel() if p.dim() == 1 or name.endswith(".mlp.gate.weight") else p.numel() / tp
    return dense, expert, total


MEGATRON = dict(method="full", micro_batch=1, seq_len=4096, optimizer="adamw", gpus_per_node=8, zero=1,
                grad_checkpointing="full", precision="megatron-bf16", sequence_parallel=True)


def test_optimizer_step_elements_follow_the_expert_groups() -> None:
    """64 GPUs, TP 4, EP 8, distributed optimizer: a GPU steps the fp32 states of dense / 16 + experts / (4 x 8) / 2
    elements and accumulates unsharded gradients of dense + experts / (4 x 8): all 30.5 B parameters are trained,
    not the 3.3 B a token activates, and the experts are split over EP."""
    gpus, tp, ep = 64, 4, 8
    _, expert, total = _shares(tp)
    dense_all = total - expert  # _trained_per_device splits every element over tp x pp (the 1-D ones too)
    w = TrainingWorkload(**{**MEGATRON, "gpus": gpus, "tp": tp, "ep": ep})  # type: ignore[arg-type]
    spec = load_model("qwen3-30b-a3b")
    from llmsizer.estimate.duration import flops_per_token

    trained = flops_per_token(spec, "full", 4096).trained_params
    assert trained == pytest.approx(total, rel=1e-9)
    states, grads = _trained_per_device(spec, w, trained)
    assert grads == pytest.approx(dense_all / tp + expert / (tp * ep), rel=1e-9)
    assert states == pytest.approx(dense_all / tp / (gpus // tp) + expert / (tp * ep) / (gpus // (tp * ep)), rel=1e-9)


def test_foreach_step_temporaries_are_sharded_like_the_states() -> None:
    """torch's foreach AdamW makes one state-sized list of temporaries (torch/optim/adam.py _multi_tensor_adam): on a
    GPU it is one fp32 moment of its shards, dense / 16 + experts / (4 x 8) / 2 elements x 4 B."""
    gpus, tp, ep = 64, 4, 8
    dense, expert, _ = _shares(tp)
    spec = load_model("qwen3-30b-a3b")
    w = TrainingWorkload(**{**MEGATRON, "gpus": gpus, "tp": tp, "ep": ep,  # type: ignore[arg-type]
                            "optimizer_impl": "foreach"})
    ctx = training_context(spec, w)
    st = stage_states(ctx, 0)
    want = 4 * (dense / (gpus // tp) + expert / (tp * ep) / (gpus // (tp * ep)))
    assert st.optimizer == pytest.approx(2 * want, rel=1e-6)
    phases = {p.name: p.parts for p in stage_timeline(ctx, st).phases}
    assert phases["optimizer step"]["optimizer_step_temporaries"] == pytest.approx(want, rel=1e-6)


def test_torchtitan_unit_gathers_experts_over_ep_only() -> None:
    """torchtitan, 16 GPUs, TP 2, EP 4 (efsdp = 8 x 2 / 4 = 4): one MoE layer's FSDP unit gathers its dense matrices
    / 2 (router and norms whole) and its experts / 4, not / (2 x 4), in bf16."""
    tp, ep = 2, 4
    dense, expert, _ = _shares(tp, layer=0)
    spec = load_model("qwen3-30b-a3b")
    w = TrainingWorkload(method="full", precision="bf16", fsdp="full", framework="torchtitan", gpus=16, tp=tp,
                         ep=ep, micro_batch=1, seq_len=2048, grad_checkpointing="full")
    ctx = training_context(spec, w)
    blocks = fsdp_gather_units(ctx, stage_states(ctx, 0)).blocks
    assert blocks[0] == pytest.approx(2 * (dense + expert / ep), rel=1e-6)


def test_expert_gradients_reduce_over_the_expert_data_parallel_ranks() -> None:
    """Megatron's expert DDP buffers reduce over intra_expt_dp_group (distributed_data_parallel.py:285-289): 8 GPUs,
    EP 8 leaves one expert data-parallel rank, so only the dense gradients cross the data-parallel ring; 64 GPUs, no
    TP, EP 8 (dp 64, expert dp 8): the experts / 8 move (7/8) / (63/64) of the dense ring's share."""
    from llmsizer.estimate.duration import _dp_reduced_elements, dp_ring_shares

    _, expert, total = _shares(1)
    spec = load_model("qwen3-30b-a3b")
    for gpus, ratio in ((8, 0.0), (64, (7 / 8) / (63 / 64))):
        w = TrainingWorkload(**{**MEGATRON, "gpus": gpus, "ep": 8, "sequence_parallel": False})  # type: ignore[arg-type]
        got = _dp_reduced_elements(w, int(total), dp_ring_shares(spec, w, int(total)))
        assert got == pytest.approx(total - expert + expert / 8 * ratio, rel=1e-9), gpus
