"""The training duration's optimizer step and gradient accumulation run over the trained elements one device holds,
partitioned as the memory estimate partitions them (formulas/parallelism.py ``zero_shards`` over
``TrainingWorkload.shard_group``). Truth: PyTorch FSDP's ``ShardingStrategy.HYBRID_SHARD`` "shards within a node and
replicates across nodes" (torch/distributed/fsdp/api.py ShardingStrategy docstring; FSDP2 ``fully_shard`` over a 2-D
mesh likewise), so a hybrid run on 2 nodes of 8 GPUs steps an 8-way shard, as one node of full sharding does. Before,
the duration divided by every data-parallel rank (16) and halved the step while the memory estimate held the 8-way
shard's optimizer states."""

from __future__ import annotations

import pytest

from llmsizer.catalog.hardware import builtin_catalog
from llmsizer.catalog.models import find
from llmsizer.estimate.duration import training_duration_for
from llmsizer.estimate.training import estimate_training

BASE = dict(method="full", precision="bf16-mixed", micro_batch=1, seq_len=2048, optimizer="adamw", gpus_per_node=8)
CONFIGS = [dict(gpus=1), dict(zero=1, gpus=8), dict(zero=2, gpus=8), dict(fsdp="full", gpus=8),
           dict(fsdp="full", gpus=16), dict(fsdp="hybrid", gpus=16), dict(fsdp="hybrid", gpus=32),
           dict(fsdp="grad_op", gpus=16), dict(fsdp="hybrid", gpus=16, tp=2)]


def _step_and_states(fields: dict[str, object]) -> tuple[float, int]:
    spec = find("llama-3.1-8b").spec()
    dev = builtin_catalog().devices["a100-sxm-80gb"]
    d = training_duration_for(spec, dev, int(fields["gpus"]), 1e9, {**BASE, **fields})  # type: ignore[call-overload]
    m = estimate_training(spec, **BASE, **fields)  # type: ignore[arg-type]
    assert d.step is not None
    return d.step.optimizer_seconds, next(i.bytes for i in m.items if i.name == "optimizer_states")


@pytest.mark.parametrize("fields", CONFIGS[1:], ids=str)
def test_the_step_is_over_the_states_the_device_holds(fields: dict[str, object]) -> None:
    """Against the same settings on tp GPUs (nothing partitioned): the step shrinks as the device's states do."""
    ref_seconds, ref_states = _step_and_states({**fields, "gpus": fields.get("tp", 1)})
    seconds, states = _step_and_states(fields)
    assert seconds / ref_seconds == pytest.approx(states / ref_states, rel=1e-6)


def test_hybrid_steps_one_nodes_shard() -> None:
    hybrid, _ = _step_and_states(dict(fsdp="hybrid", gpus=32))
    one_node, _ = _step_and_states(dict(fsdp="full", gpus=8))
    assert hybrid == pytest.approx(one_node, rel=1e-12)
