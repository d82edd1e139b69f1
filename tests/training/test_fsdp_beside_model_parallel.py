"""FSDP2 beside tensor and pipeline parallelism (formulas/model_parallel_time.py eq. (P7), #12): the bytes the step
time's data-parallel collectives carry against what torch sends on a real 2 x 2 mesh of four gloo ranks on the CPU
(``tp_fsdp_step.py``, both cases in one launch), every all-gather and reduce-scatter recorded with its group
(ranks.py ``count_collectives``).

- TP 2 x FSDP 2 (``fully_shard`` over the data-parallel mesh dimension of the ``parallelize_module`` DTensors): each
  rank's units gather their tensor-parallel shard over its data-parallel pair, every micro-batch as plain FSDP (the
  forward gathers every unit, the backward the blocks again, the gradients reduce-scattered): the payloads of
  gather_units.py ``fsdp_collective_volume`` on the tensor-parallel stage states, which the memory side gathers.
- PP 2 x FSDP 2 (``torch.distributed.pipelining`` Schedule1F1B, two micro-batches, each stage's units
  ``reshard_after_forward=False`` as torchtitan wraps them under PP): each stage gathers each unit once per step
  and reduce-scatters once per step, whatever the micro-batches (torch's stage: no reshard after backward, no
  gradient sync until ``perform_reduce_grad``); the estimate reads each stage's payloads and times the larger.

Every collective of the data-parallel traffic runs on the data-parallel group (never the tensor-parallel pair: its
collectives are DTensor's functional ones), and the duration's bytes per device and step are the ring volumes, (d-1)/d
of each payload.
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from ranks import TINY_LLAMA, run_step  # noqa: E402

from llmsizer.catalog.hardware import builtin_catalog  # noqa: E402
from llmsizer.estimate.duration import Duration, fsdp_volume, reduced_grad_bytes, training_duration_for  # noqa: E402
from llmsizer.readers.hf_config import spec_from_config  # noqa: E402
from llmsizer.specs import TrainingWorkload  # noqa: E402

SPEC = spec_from_config(TINY_LLAMA, name="llama-tiny")
TP = dict(tp=2, micro_batch=2)
PP = dict(pp=2, micro_batch=2, grad_accumulation=2)  # two micro-batches of the step's four sequences


def duration(fields: dict[str, Any]) -> Duration:
    """The duration rule on four devices with a link (only the bytes are read), pure bf16 FSDP2."""
    dev = builtin_catalog().devices["h100-sxm"]
    return training_duration_for(SPEC, dev, 4, 1e6, dict(seq_len=64, fsdp="full", precision="bf16", **fields))


def workload(fields: dict[str, Any]) -> TrainingWorkload:
    return TrainingWorkload(gpus=4, seq_len=64, fsdp="full", precision="bf16", **fields)


def payloads(calls: list[list[Any]]) -> dict[str, int]:
    """Summed payloads by pass and op [bytes]."""
    out: dict[str, int] = {}
    for phase, op, n, _ in calls:
        key = op if op == "reduce_scatter" else f"{op}_{phase}"
        out[key] = out.get(key, 0) + n
    return out


@pytest.fixture(scope="module")
def measured() -> dict[str, Any]:
    return run_step("tp_fsdp_step.py", dict(config=TINY_LLAMA, batch=4, seq=64, microbatches=2), 4)


@pytest.mark.slow
def test_tensor_parallel_fsdp_gathers_its_shard_over_the_data_parallel_group(measured: dict[str, Any]) -> None:
    calls = measured["tp"]["collectives"]
    assert {tuple(g) for *_, g in calls} == {(0, 2)}  # rank 0's data-parallel pair on the (dp, tp) mesh
    sent = payloads(calls)
    d = duration(TP)
    notes = {a.name: a.value for a in d.assumptions}
    assert {"all_gather_forward": notes["fsdp_all_gather_forward_bytes"],
            "all_gather_backward": notes["fsdp_all_gather_backward_bytes"],
            "reduce_scatter": notes["fsdp_reduce_scatter_bytes"]} == sent
    assert notes["fsdp_beside_model_parallel"] == "every micro-batch"
    mp = d.step.model_parallel if d.step else None
    assert mp is not None and mp.dp_bytes == pytest.approx(sum(sent.values()) / 2, rel=1e-12)
    assert not any("all-gathers are not counted" in w for w in d.warnings)


@pytest.mark.slow
def test_pipeline_fsdp_gathers_and_reduces_once_per_step(measured: dict[str, Any]) -> None:
    ranks = measured["pp"]["ranks"]
    w = workload(PP)
    for rank, r in enumerate(ranks):
        calls = r["collectives"]
        assert all(sorted(g) == ([0, 1] if rank < 2 else [2, 3]) for *_, g in calls)  # its stage's dp pair
        vol = fsdp_volume(SPEC, w, r["stage"])
        assert payloads(calls) == {"all_gather_step": vol.forward,
                                   "reduce_scatter": vol.reduced_elements * reduced_grad_bytes(w)}, rank
    d = duration(PP)
    mp = d.step.model_parallel if d.step else None
    largest = max(sum(payloads(r["collectives"]).values()) for r in ranks)
    assert mp is not None and mp.dp_bytes == pytest.approx(largest / 2, rel=1e-12)  # per step, not per micro-batch
    notes = {a.name: a.value for a in d.assumptions}
    assert notes["fsdp_beside_model_parallel"] == "once per step" and notes["fsdp_all_gather_backward_bytes"] == 0
