"""Megatron-Core context parallelism (formulas/context_parallel.py eqs. CP3-CP5; issue #12, PM1366).

Independent truth: a CPU stand-in of TransformerEngine's ``AttnFuncWithCPAndKVP2P`` (TransformerEngine @d0067d0
``transformer_engine/pytorch/attention/dot_product_attention/context_parallel.py``), its send / receive control
flow transcribed from the cited lines with the tensors replaced by their element counts: the forward loop of lines
1685-1717 (a new ``p2p_comm_buffers[i + 1]`` like the previous one for each step i < cp - 1, the send of
``p2p_comm_buffers[i]``), the 16-bit backward of lines 2393-2401 and 2459-2497 (two [2, K/V] buffers and a dq buffer
like q; step 0 sends the K/V half, the last step the dK/dV half, the steps between both); and Megatron-Core's rank
order tp-cp-ep-dp-pp (NVIDIA/Megatron-LM @d98e8a64 megatron/core/parallel_state.py line 617, ``RankGenerator``
line 465: the first named dimension varies fastest) for where a CP group's ranks sit."""

from __future__ import annotations

import pytest

from llmsizer.catalog.hardware import builtin_catalog
from llmsizer.errors import InputError
from llmsizer.estimate.duration import training_duration_for
from llmsizer.estimate.training.compose import training_context
from llmsizer.estimate.training.states import stage_states
from llmsizer.estimate.training.timeline import stage_timeline
from llmsizer.formulas.context_parallel import p2p_ring_backward_bytes, p2p_ring_exchange_bytes, p2p_ring_forward_bytes
from llmsizer.models import load_model
from llmsizer.readers.hf_config import spec_from_config
from llmsizer.specs.training import TrainingWorkload


def _te_p2p_forward(cp: int, kv_numel: int) -> tuple[int, int]:
    """(elements sent, elements held in p2p_comm_buffers at the loop's end) of one forward on one rank."""
    buffers: list[int | None] = [None] * cp
    buffers[0] = kv_numel  # torch.cat((k.view(-1), v.view(-1))), line 1690
    sent = 0
    for i in range(cp + 1):
        if i < cp and i < cp - 1:
            buffers[i + 1] = buffers[i]  # torch.empty_like(p2p_comm_buffers[i]), line 1706
            sent += buffers[i] or 0  # flash_attn_p2p_communicate(send p2p_comm_buffers[i]), lines 1707-1715
    return sent, sum(b or 0 for b in buffers)


def _te_p2p_backward(cp: int, kv_numel: int, q_numel: int) -> tuple[int, int]:
    """(elements sent, elements of the ring's own buffers) of one 16-bit backward on one rank."""
    buffers = [[kv_numel, kv_numel], [kv_numel, kv_numel]]  # two torch.empty((2, *kv.shape)), lines 2397-2400
    held = sum(map(sum, buffers)) + q_numel  # + dq_buffer = torch.empty_like(q), line 2396
    sent = 0
    for i in range(cp):
        send = buffers[i % 2]
        if i == 0:
            part = send[0]  # the K/V half only
        elif i == cp - 1:
            part = send[1]  # the dK/dV half only
        else:
            part = send[0] + send[1]  # [2, K/V]: K/V and dK/dV
        sent += part
    return sent, held


@pytest.mark.parametrize("cp", [2, 3, 4, 8])
def test_exchange_bytes_against_the_stand_in(cp: int) -> None:
    t, k, v, c, layers, again = 4096, 128, 128, 2, 16, 5
    fwd, _ = _te_p2p_forward(cp, t * (k + v))
    bwd, _ = _te_p2p_backward(cp, t * (k + v), t * 2048)
    f, b = p2p_ring_exchange_bytes(t, k, v, cp, c, layers, again)
    assert f == layers * fwd * c
    # a fully recomputed layer's forward runs its ring again inside the backward
    assert b == layers * bwd * c + again * fwd * c


@pytest.mark.parametrize("cp", [2, 4, 8])
def test_buffers_against_the_stand_in(cp: int) -> None:
    t, q, k, v, c = 2048, 1024, 256, 256, 2
    _, held_f = _te_p2p_forward(cp, t * (k + v))
    _, held_b = _te_p2p_backward(cp, t * (k + v), t * q)
    assert p2p_ring_forward_bytes(t, k, v, cp, c) == held_f * c
    assert p2p_ring_backward_bytes(t, q, k, v, cp, c) == held_b * c
    assert p2p_ring_forward_bytes(t, k, v, 1, c) == p2p_ring_backward_bytes(t, q, k, v, 1, c) == 0


def _cp_groups(tp: int, cp: int, dp: int, pp: int) -> list[list[int]]:
    """Megatron-Core's CP groups under the order tp-cp-ep-dp-pp (ep 1): rank = tp_i + tp (cp_i + cp (dp_i + dp pp_i))."""
    return [[t + tp * (j + cp * (d + dp * p)) for j in range(cp)]
            for p in range(pp) for d in range(dp) for t in range(tp)]


RUN = dict(method="full", precision="megatron-bf16", optimizer="adamw", zero=1, micro_batch=1, seq_len=8192,
           pp=2, sequence_parallel=True, grad_accumulation=8, network="8x400 Gb/s")


@pytest.mark.parametrize(("tp", "crosses"), [(8, True), (4, False)])
def test_the_ring_runs_where_the_rank_order_puts_it(tp: int, crosses: bool) -> None:
    """tp 8 x cp 2 on 8-GPU machines: each CP group's two ranks are 8 apart, on two machines, so the ring runs at a
    device's share of its machine's network (8 x 400 Gb/s / 8 = 50 GB/s); tp 4 x cp 2 keeps them in one machine."""
    gpus, cp = 64, 2
    groups = _cp_groups(tp, cp, gpus // (tp * cp * 2), 2)
    assert sorted(r for g in groups for r in g) == list(range(gpus))
    assert all((len({r // 8 for r in g}) > 1) == crosses for g in groups)
    spec, h100 = load_model("llama-3.1-70b-instruct"), builtin_catalog().devices["h100-sxm"]
    d = training_duration_for(spec, h100, gpus, 1e9, dict(RUN, gpus=gpus, tp=tp, context_parallel=cp))
    a = {x.name: x for x in d.assumptions}
    why = a["ring_attention_exposed_seconds"].why
    assert ("50 GB/s" in why and "network" in why) if crosses else "the link inside a machine" in why
    # the exchange's bytes: 80 / 2 = 40 layers a stage, t = 8192 / 2 tokens, K and V 8 heads x 128 / tp wide, bf16
    t, kv = 4096, 2 * 8 * 128 // tp
    assert a["ring_attention_exchange_bytes"].value == 40 * t * kv * 2 * 3


def test_each_rank_runs_its_share_of_every_sequence() -> None:
    """The batch split (Megatron utils.py get_batch_on_this_cp_rank: 2 x cp chunks, two a rank) gives each rank
    seq / cp tokens: its micro-step's tensor-parallel collectives and pipeline sends carry half those of CP 1."""
    spec, h100 = load_model("llama-3.1-70b-instruct"), builtin_catalog().devices["h100-sxm"]
    one = training_duration_for(spec, h100, 32, 1e9, dict(RUN, gpus=32, tp=8))
    two = training_duration_for(spec, h100, 32, 1e9, dict(RUN, gpus=32, tp=8, context_parallel=2))
    assert one.step is not None and two.step is not None
    assert two.step.tokens_per_device_micro * 2 == one.step.tokens_per_device_micro
    mp1, mp2 = one.step.model_parallel, two.step.model_parallel
    assert mp1 is not None and mp2 is not None
    assert mp2.tp_bytes * 2 == pytest.approx(mp1.tp_bytes) and mp2.p2p_bytes * 2 == pytest.approx(mp1.p2p_bytes)


TINY = {"model_type": "llama", "vocab_size": 4096, "hidden_size": 256, "intermediate_size": 512,
        "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 32,
        "max_position_embeddings": 8192, "tie_word_embeddings": False}


def test_the_memory_holds_the_p2p_buffers() -> None:
    """The forward moment holds cp x t x (k + v) x 2 B of receive buffers (K/V 2 heads x 32 wide, t = 4096 / 2)."""
    spec = spec_from_config(TINY, name="tiny-llama")
    w = TrainingWorkload(method="full", precision="megatron-bf16", zero=1, micro_batch=1, seq_len=4096, gpus=2,
                         context_parallel=2, grad_checkpointing="full")
    ctx = training_context(spec, w)
    phases = {p.name: p.parts for p in stage_timeline(ctx, stage_states(ctx, 0)).phases}
    assert phases["forward, last layer attention"]["ring_attention_forward"] == 2 * 2048 * (64 + 64) * 2


def test_refusals() -> None:
    base = dict(method="full", micro_batch=1, seq_len=4096, gpus=4, context_parallel=2)
    TrainingWorkload(**base, precision="megatron-bf16", zero=1)  # type: ignore[arg-type]
    TrainingWorkload(**base, precision="megatron-fp16")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="Megatron-Core's, beside its DDP"):
        TrainingWorkload(**base, precision="megatron-bf16", fsdp="full", fsdp_version=2)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="give fsdp"):
        TrainingWorkload(**base, precision="bf16-mixed")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="attention 'eager' does not apply"):
        TrainingWorkload(**base, precision="megatron-bf16", attention="eager")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="multiple of 2 x context_parallel"):
        TrainingWorkload(**dict(base, seq_len=4098), precision="megatron-bf16")  # type: ignore[arg-type]


@pytest.mark.parametrize(("checkpointing", "modules", "again"), [
    ("none", None, 0),
    ("selective", None, 16),  # Megatron's default recompute module, core_attn: the attention core and its ring re-run
    ("selective", ("layernorm",), 0),
    ("full", None, 16),
])
def test_a_recomputed_attention_core_runs_its_ring_again(checkpointing: str, modules: tuple[str, ...] | None,
                                                         again: int) -> None:
    """review19 D2/D3: TransformerEngine's ring runs inside the attention core (AttnFuncWithCPAndKVP2P, called from
    Megatron-LM @d98e8a64 megatron/core/transformer/attention.py lines 392, 495, 1555), so a layer whose core is recomputed (Megatron's selective 'core_attn', or full
    recomputation) sends its K/V around the ring once more in the backward; counted on the busiest pipeline stage:
    Llama 3.1 405B's 126 layers over pp 8 give the first stages 16 (Megatron's even split, the remainder first).
    By hand: t = 8192 / 2 tokens, K and V 8 heads x 128 / tp 8 each, bf16, cp - 1 = 1 round: (3 x 16 + again) x
    t x 256 x 2 bytes."""
    spec, h100 = load_model("llama-3.1-405b"), builtin_catalog().devices["h100-sxm"]
    fields = dict(RUN, gpus=256, tp=8, pp=8, context_parallel=2, grad_checkpointing=checkpointing)
    if modules:
        fields["recompute_modules"] = modules
    d = training_duration_for(spec, h100, 256, 1e9, fields)
    a = {x.name: x for x in d.assumptions}
    t, kv = 4096, 2 * 8 * 128 // 8
    assert a["ring_attention_exchange_bytes"].value == (3 * 16 + again) * t * kv * 2


def test_torchtitans_selective_checkpointing_runs_no_ring_again() -> None:
    """torchtitan's selective activation checkpointing is op-level and saves the attention op's output (its
    _save_list holds aten._scaled_dot_product_flash_attention / efficient_attention), so its ring attention does not
    run again in the backward: the ring's bytes under selective equal those with no checkpointing (review20 D6)."""
    spec, h100 = load_model("llama-3.1-8b"), builtin_catalog().devices["h100-sxm"]
    base = dict(method="full", precision="bf16-mixed", optimizer="adamw", micro_batch=1, seq_len=8192, gpus=8,
                fsdp="full", fsdp_version=2, context_parallel=2)
    got = {}
    for ckpt in ("none", "selective"):
        d = training_duration_for(spec, h100, 8, 1e9, dict(base, grad_checkpointing=ckpt))
        got[ckpt] = {x.name: x.value for x in d.assumptions}["ring_attention_exchange_bytes"]
    assert got["selective"] == got["none"] > 0
