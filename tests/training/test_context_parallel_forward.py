"""Where the estimate holds ring attention's forward buffers (issue #12): the timeline's "forward, last layer
attention" moment, while the last layer's attention runs, one layer at a time (estimate/training/timeline.py). The
byte count is ``ring_attention_forward_bytes``, itself measured on torch's own ring attention over gloo
(tests/training/test_context_parallel.py); here the widths come from the model's config.json-style fields, not from
the estimate: a tiny Llama with grouped K/V (8 query heads, 2 K/V heads of 32) and a 4096-token vocabulary.

The forward moment is not bounded by the backward ones: for grouped K/V the forward's whole-q merge (t o (16 + c))
outgrows the backward's ring extra (t q 4 + (cp + 1) t (k + v) c + ..., e.g. Llama-3.1-8B's widths at cp 4: 90,112
B against 73,728 B per token), so only the layer's plain backward transient can cover it, and a narrow-MLP model
with one K/V head peaked in the forward until review33 A3 counted the flash backward's own buffers (fp32 dq_accum,
expanded dk/dv): since then torch's ring peaks in the backward for every shape tried (the last test). Megatron-Core's
P2P ring can peak in the forward, on a real catalog model at its own context (test_it_can_be_the_peak_under_...):
its forward keeps the whole sequence's K/V, which does not shrink with cp as the rest of a rank's bytes do."""

from __future__ import annotations

from llmsizer.estimate.training.compose import estimate_training, training_context
from llmsizer.estimate.training.states import stage_states
from llmsizer.estimate.training.timeline import stage_timeline
from llmsizer.formulas.context_parallel import p2p_ring_forward_bytes, ring_attention_forward_bytes
from llmsizer.readers.hf_config import spec_from_config
from llmsizer.specs.training import TrainingWorkload

TINY = {"model_type": "llama", "vocab_size": 4096, "hidden_size": 256, "intermediate_size": 512,
        "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 32,
        "max_position_embeddings": 8192, "tie_word_embeddings": False}
SEQ = 4096
KW = dict(method="full", precision="fsdp-bf16-mixed", fsdp="full", fsdp_version=2, micro_batch=1, seq_len=SEQ, grad_checkpointing="full",
          loss="cut-ce")


def _phases(cp: int, **kw: object) -> dict[str, dict[str, int]]:
    spec = spec_from_config(TINY, name="tiny-llama")
    ctx = training_context(spec, TrainingWorkload(**{**KW, "gpus": cp, "context_parallel": cp,  # type: ignore[arg-type]
                                                     **kw}))
    return {p.name: p.parts for p in stage_timeline(ctx, stage_states(ctx, 0)).phases}


def test_the_forward_moment_holds_the_ring_forward_buffers() -> None:
    t = SEQ // 2  # a rank's tokens (torchtitan cp_shard)
    q = o = 8 * 32  # 8 query heads of 32 (o_proj's input width)
    kv = 2 * 32
    phases = _phases(2)
    fwd = phases["forward, last layer attention"]
    assert fwd["ring_attention_forward"] == ring_attention_forward_bytes(t, kv, kv, o, 2, 2)
    # beside what the forward has made by then: under full checkpointing forward end's checkpoint inputs and the
    # last layer's q, k, v in bf16; the head's parts not yet
    end = phases["forward end"]
    assert fwd["activations"] == end["activations"] + t * (q + kv + kv) * 2
    rest = {k: v for k, v in fwd.items() if k not in ("ring_attention_forward", "activations")}
    assert rest == {k: v for k, v in end.items() if k not in ("head_activations", "logits_and_loss", "activations")}


def test_absent_without_context_parallelism() -> None:
    assert "forward, last layer attention" not in _phases(1)
    assert all("ring_attention_forward" not in p for p in _phases(1).values())


# microsoft/Phi-3.5-mini-instruct's config.json (catalog/data/models/phi-3.5-mini-instruct.json): 32 query and 32 K/V
# heads (MHA) of hidden_size 3072 / 32 = 96, max_position_embeddings 131072
PHI35_WIDTH = 32 * 96
MEGATRON = dict(method="full", precision="megatron-bf16", micro_batch=1, seq_len=131072, grad_checkpointing="full")


def test_it_can_be_the_peak_under_megatron_cores_p2p_ring() -> None:
    """A real catalog model at its own context: Phi-3.5-mini (MHA, 128k), Megatron-Core context parallelism
    (TransformerEngine's P2P ring, eq. CP4), full recomputation, 32 ranks. The P2P forward keeps every rank's
    received K/V to the end of the layer's attention, cp x t x (k + v) x c = seq x (k + v) x c: the whole sequence's
    K/V, the same bytes at any cp, while every other buffer of a rank (its activations, the layer's backward
    transient, the backward's P2P buffers 4 t (k + v) c + t q c, eq. CP5) holds its seq / cp tokens. So above some
    cp the forward moment outgrows every backward moment: at cp 32 it is the step's peak, at cp 16 it is not."""
    t = 131072 // 32  # a rank's tokens
    est = estimate_training("phi-3.5-mini-instruct", gpus=32, context_parallel=32, **MEGATRON)  # type: ignore[arg-type]
    assert est.details["peak_phase"] == "forward, last layer attention"
    ring = p2p_ring_forward_bytes(t, PHI35_WIDTH, PHI35_WIDTH, 32, 2)
    assert ring == 131072 * 2 * PHI35_WIDTH * 2  # the whole sequence's K/V in bf16, 1.5 GiB
    assert est.item("ring_attention_forward").bytes == ring
    half = estimate_training("phi-3.5-mini-instruct", gpus=16, context_parallel=16, **MEGATRON)  # type: ignore[arg-type]
    assert p2p_ring_forward_bytes(2 * t, PHI35_WIDTH, PHI35_WIDTH, 16, 2) == ring  # the same bytes at cp 16 ...
    assert half.details["peak_phase"] != "forward, last layer attention"  # ... under twice the seq / cp rest


def test_torchs_ring_peaks_in_the_backward() -> None:
    """torch's ring (torchtitan) on the same shapes: its backward holds the gathered K/V too ((cp + 1) t (k + v) c
    against the forward's cp t (k + v) c, eq. of ring_attention_backward_bytes), so the K/V never make the forward
    the larger; and the forward's whole-q merge (t o (16 + c)) stays under the last layer's backward, which holds
    the fp32 dq accumulator and flash's own fp32 dq_accum and expanded dk/dv (flash-attn mha_bwd @ 0251105a L926,
    L937-938, review33 A3). No catalog shape tried peaks in the forward under it (report trres: every catalog decoder at cp 2 and 8,
    seq 8k and 64k, no or full recomputation; three at cp 16 and 32, seq 128k); for the narrow-MLP one-K/V-head shape built to favour the forward, the step's largest
    backward moment is above the forward one."""
    mqa = {**TINY, "num_attention_heads": 32, "num_key_value_heads": 1, "head_dim": 128, "intermediate_size": 128}
    spec = spec_from_config(mqa, name="tiny-mqa")
    ctx = training_context(spec, TrainingWorkload(**{**KW, "grad_checkpointing": "none", "gpus": 4,  # type: ignore[arg-type]
                                                     "context_parallel": 4}))
    phases = {p.name: p.total for p in stage_timeline(ctx, stage_states(ctx, 0)).phases}
    fwd = phases.pop("forward, last layer attention")
    assert max(v for k, v in phases.items() if k.startswith("backward layer")) > fwd
    est = estimate_training(spec, gpus=4, context_parallel=4, **{**KW, "grad_checkpointing": "none"})  # type: ignore[arg-type]
    assert est.details["peak_phase"] != "forward, last layer attention"
