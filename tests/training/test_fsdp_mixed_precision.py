"""FSDP2 mixed precision (``precision='fsdp-bf16-mixed'``) against real FSDP2 training steps on the CPU (#12).

``fsdp_step.py`` shards a small random-weight Llama with ``fully_shard`` and ``MixedPrecisionPolicy(param_dtype=
bf16, reduce_dtype=fp32)`` over two gloo ranks and measures with PyTorch's ``FSDPMemTracker``. FSDP2 keeps fp32
shards and gathers one bf16 unit at a time, freeing it after use: no bf16 copy of every weight is held (the
autocast recipe 'bf16-mixed' holds one per layer until its backward). The estimate must be within 10% of the
measured peak, and the autocast recipe must miss it by more than that.
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from ranks import TINY_LLAMA as LLAMA
from ranks import run_cases, run_step  # noqa: E402

from llmsizer.estimate.training import estimate_training  # noqa: E402
from llmsizer.readers.hf_config import spec_from_config  # noqa: E402

MiB = 2**20
TOLERANCE = 0.10
CASES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "llama FSDP2 bf16/fp32 over 2, seq 256": (
        dict(config=LLAMA, batch=2, seq=256),
        dict(micro_batch=2, seq_len=256)),
    "llama FSDP2 bf16/fp32 over 2, batch 4 x 512": (
        dict(config=LLAMA, batch=4, seq=512),
        dict(micro_batch=4, seq_len=512)),
}


@pytest.fixture(scope="module", autouse=True)
def _all_cases() -> None:
    """Both cases in one launch (ranks.run_cases: torch and transformers imported once per rank, a forked child per
    case); each test's run_step reads its case back."""
    run_cases("fsdp_step.py", [case for case, _ in CASES.values()], 2)


def _run(case: dict[str, Any], ranks: int = 2) -> dict[str, Any]:
    return run_step("fsdp_step.py", case, ranks)


@pytest.mark.parametrize("name", list(CASES))
def test_fsdp2_mixed_precision_peak(name: str) -> None:
    case, fields = CASES[name]
    m = _run(case)
    spec = spec_from_config(LLAMA, name="llama-tiny")
    common = dict(fields, gpus=2, fsdp="full", optimizer_impl="for-loop")
    est = estimate_training(spec, precision="fsdp-bf16-mixed", **common)
    autocast = estimate_training(spec, precision="bf16-mixed", **common).details["tensor_peak_bytes"]
    pred, meas = est.details["tensor_peak_bytes"], m["Total"]
    print(f"\n{name}: predicted {pred / MiB:.2f} MiB, measured {meas / MiB:.2f} MiB ({(pred - meas) / meas:+.2%}); "
          f"autocast recipe {(autocast - meas) / meas:+.1%}; measured by category "
          + str({k: round(v / MiB, 2) for k, v in m.items()}))
    assert est.details["model_states"]["weights"] == m["SHARDED_PARAM"]
    assert abs(pred - meas) / meas <= TOLERANCE
    assert abs(autocast - meas) / meas > TOLERANCE
