"""Megatron-Core's data-parallel gradient reduction in the step time (review23a D2, D3, D4, D8).

Truth: NVIDIA/Megatron-LM @d98e8a64.

- The schedules run every micro-batch but the last under the DDP's ``no_sync`` (pipeline_parallel/schedules.py
  lines 814-830; distributed/distributed_data_parallel.py lines 589-600), then ``finalize_model_grads`` finishes the
  reduction (schedules.py lines 863-870): once per optimizer step, at zero 1 and zero 2 alike (one distributed
  optimizer; the memory keeps the whole grad buffer at both, test_megatron_grad_buffer.py).
- The reduction runs in place on the grad buffer's bucket views (core/distributed/param_and_grad_buffer.py lines
  708-733): a reduce-scatter with the distributed optimizer, else an all-reduce, in the buffer's dtype ``torch.float
  if grad_reduce_in_fp32 else param.dtype`` (line 924): fp32 under --bf16 by default (training/arguments.py lines
  1204-1216), fp16 under --fp16.
- The distributed optimizer then all-gathers the updated parameters in their own dtype (bf16 / fp16) into the param
  buffer (param_and_grad_buffer.py lines 507-525).

The bytes are counted by hand: the buffer's elements are the real model's parameter count (transformers'
LlamaForCausalLM on the meta device; every Llama 3.1 8B tensor is a multiple of 64 elements, so the distributed
optimizer's padding adds none), each ring moving (n - 1) / n of its payload, an all-reduce twice that.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llmsizer.catalog.hardware import builtin_catalog
from llmsizer.catalog.models import find
from llmsizer.errors import InputError
from llmsizer.estimate.duration import training_duration_for
from llmsizer.estimate.training.compose import training_context
from llmsizer.models import load_model
from llmsizer.specs.training import TrainingWorkload

MODELS = Path(__file__).resolve().parents[2] / "src/llmsizer/catalog/data/models"
RUN = dict(method="full", micro_batch=1, seq_len=4096, grad_checkpointing="full", grad_accumulation=4, gpus=8)


@pytest.fixture(scope="module")
def numel() -> int:
    from oracle_utils import build

    cfg = json.loads((MODELS / "llama-3.1-8b.json").read_text())["config"]
    return sum(p.numel() for p in build(cfg).parameters())


def _duration(**kw: object):
    fields = {**RUN, **kw}
    return training_duration_for(find("llama-3.1-8b").spec(), builtin_catalog().devices["h100-sxm"],
                                 int(fields["gpus"]), 1e9, fields)  # type: ignore[call-overload]


def _notes(d) -> dict[str, object]:
    return {a.name: a.value for a in d.assumptions}


@pytest.mark.parametrize("precision, grad_b, param_b", [("megatron-bf16", 4, 2), ("megatron-fp16", 2, 2)])
def test_distributed_optimizer_bytes_per_step(numel: int, precision: str, grad_b: int, param_b: int) -> None:
    """Zero 1 and 2: one reduce-scatter of the buffer in its dtype and one all-gather of the updated parameters per
    optimizer step, whatever the gradient accumulation."""
    n = 8
    want = (n - 1) / n * numel * grad_b + (n - 1) / n * numel * param_b
    for zero in (1, 2):
        d = _duration(precision=precision, zero=zero)
        assert d.step.comm_bytes_per_step == pytest.approx(want, rel=1e-12)
        assert d.step.sharding == "megatron-distopt" and d.step.grad_sync == "optimizer-step"
        notes = _notes(d)
        assert notes["grad_reduce_dtype"] == ("fp32" if grad_b == 4 else "fp16")
        assert notes["overlap_grad_reduce"] is False
        assert "deepspeed_overlap_comm" not in notes


@pytest.mark.parametrize("precision, grad_b", [("megatron-bf16", 4), ("megatron-fp16", 2)])
def test_zero_0_all_reduces_the_buffer_once_per_step(numel: int, precision: str, grad_b: int) -> None:
    """Without the distributed optimizer: one all-reduce of the buffer per step (megatron-fp16: its fp16 buffer, the
    fp32 main grads being copies made after it)."""
    d = _duration(precision=precision, zero=0)
    assert d.step.comm_bytes_per_step == pytest.approx(2 * 7 / 8 * numel * grad_b, rel=1e-12)
    assert d.step.sharding == "megatron-ddp" and d.step.grad_sync == "optimizer-step"


@pytest.mark.parametrize("precision", ["megatron-bf16", "megatron-fp16"])
def test_zero_2_is_zero_1(precision: str) -> None:
    one, two = _duration(precision=precision, zero=1), _duration(precision=precision, zero=2)
    assert two.step == one.step
    assert two.tokens_per_second == one.tokens_per_second
    assert [(a.name, a.value, a.why) for a in two.assumptions] == [(a.name, a.value, a.why) for a in one.assumptions]


def test_the_reduction_is_not_overlapped() -> None:
    """overlap_grad_reduce off (Megatron-LM's default): the once-per-step collectives add to the compute, so the
    exposed time per step is all of them."""
    d = _duration(precision="megatron-bf16", zero=1)
    k = RUN["grad_accumulation"]
    assert d.step.exposed_comm_seconds * k == pytest.approx(d.step.comm_seconds_per_step, rel=1e-9)


@pytest.fixture(scope="module")
def tp2_rank_elements() -> int:
    """One TP-2 rank's parameters of Llama 3.1 8B, counted from the modules transformers builds: the RMSNorm weights
    whole on every rank (Megatron-Core's TENorm is a whole hidden_size norm per rank, megatron/core/extensions/
    transformer_engine.py:1048-1100 @d98e8a64), every other weight (the column/row-parallel linears, the
    vocab-parallel embedding and output layer) halved."""
    from oracle_utils import build

    cfg = json.loads((MODELS / "llama-3.1-8b.json").read_text())["config"]
    mods = list(build(cfg).modules())
    norms = sum(p.numel() for m in mods if type(m).__name__.endswith("RMSNorm") for p in m.parameters(recurse=False))
    split = sum(p.numel() for m in mods if not type(m).__name__.endswith("RMSNorm")
                for p in m.parameters(recurse=False))
    assert split % 2 == 0
    return split // 2 + norms


def test_model_parallel_reduces_the_buffer_dtype(numel: int, tp2_rank_elements: int) -> None:
    """tp 2 on 8 GPUs: dp 4; each rank reduce-scatters its part of the fp32 buffer (its half of the split weights
    and the whole norms) and all-gathers its part of the bf16 parameters once per step (review24 D6: the norms
    counted whole per rank, not numel / tp)."""
    d = _duration(precision="megatron-bf16", zero=1, tp=2, sequence_parallel=True)
    mp = d.step.model_parallel
    assert mp is not None
    assert tp2_rank_elements > numel / 2
    assert mp.dp_bytes == pytest.approx(3 / 4 * tp2_rank_elements * (4 + 2), rel=1e-12)
    assert not any("ZeRO-1/2 / SHARD_GRAD_OP beside" in w for w in d.warnings)
    assert _notes(d)["grad_reduce_dtype"] == "fp32"


def test_deepspeed_unchanged(numel: int) -> None:
    """DeepSpeed ZeRO-2 (not Megatron): its bf16 all-reduce every micro-step and the weights' all-gather per step."""
    d = _duration(precision="deepspeed-bf16", zero=2)
    k = RUN["grad_accumulation"]
    assert d.step.comm_bytes_per_step == pytest.approx(k * 2 * 7 / 8 * numel * 2 + 7 / 8 * numel * 2, rel=1e-12)
    assert d.step.sharding == "zero2"
    assert _notes(d)["deepspeed_overlap_comm"] is False
    assert "overlap_grad_reduce" not in _notes(d)


def test_attention_assumptions_name_transformer_engine() -> None:
    """D4: the estimate's attention assumptions under Megatron name TEDotProductAttention's backend choice, the one
    the duration times; other precisions keep SDPA's dispatch."""
    from llmsizer import estimate_training

    est = estimate_training(load_model("llama-3.1-8b"), TrainingWorkload(precision="megatron-bf16", zero=1, **RUN))
    why = {a.name: a.why for a in est.assumptions}
    assert "TEDotProductAttention" in why["attention_kernel"] and "SDPA's dispatch" not in why["attention_kernel"]
    assert "TEDotProductAttention" in why["attention"]
    other = estimate_training(load_model("llama-3.1-8b"), TrainingWorkload(precision="bf16-mixed", **RUN))
    assert "SDPA's dispatch" in {a.name: a.why for a in other.assumptions}["attention_kernel"]


def test_zero_3_refusal_keeps_the_grad_buffer_whole() -> None:
    """D8: the refusal no longer says the distributed optimizer shards the gradients."""
    w = TrainingWorkload(precision="megatron-bf16", zero=3, **RUN)
    with pytest.raises(InputError) as e:
        training_context(load_model("llama-3.1-8b"), w)
    assert "whole grad buffer" in str(e.value) and "and gradients" not in str(e.value)


def test_grad_sync_micro_step_is_refused() -> None:
    """Megatron's schedules always reduce once per step (no_sync): a per-micro-step reduction is not a Megatron run."""
    with pytest.raises(InputError, match="no_sync"):
        TrainingWorkload(precision="megatron-bf16", zero=0, grad_sync="micro-step", **RUN)
    TrainingWorkload(precision="megatron-bf16", zero=0, grad_sync="optimizer-step", **RUN)  # what it does anyway
