"""DeepSpeed ZeRO-3's fixed buffers against real DeepSpeed training steps on the CPU (#12).

``deepspeed_step.py`` runs ``deepspeed.initialize`` with ZeRO-3 and bf16 (DeepSpeed's defaults otherwise) on a
small random-weight Llama, one process per rank over gloo, and follows every live tensor storage. Checked:

- the IPG bucket (``formulas/deepspeed_zero.ipg_bucket_bytes``): the live bytes after initialisation differ, between
  the default ``reduce_bucket_size`` (5e8) and 1e6, by the difference in elements x 2 B (bf16 gradients);
- the whole step's peak on one and on two ranks within 5%, and on two ranks the part beside the bucket within 10%
  (the gradient partition buffer held through the forward, modules held gathered through the loss);
- the persistent parameters (``persistent_param_bytes``, eq. Z4): on two ranks the live bytes after the last step,
  default ``stage3_param_persistence_threshold`` minus 0 (nothing persists), are the persistent parameters whole.
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("deepspeed")

from ranks import TINY_LLAMA as LLAMA
from ranks import run_cases, run_step  # noqa: E402

from llmsizer.estimate.training import estimate_training  # noqa: E402
from llmsizer.formulas.deepspeed_zero import REDUCE_BUCKET_SIZE, ipg_bucket_bytes  # noqa: E402
from llmsizer.readers.hf_config import spec_from_config  # noqa: E402

MiB = 2**20
CASE = dict(config=LLAMA, batch=2, seq=256)
# DeepSpeed builds torch.optim.AdamW(fused=False) for torch_adam; on CPU tensors torch picks the for-loop kernel
FIELDS = dict(precision="deepspeed-bf16", micro_batch=2, seq_len=256, zero=3, optimizer_impl="for-loop")


def _run(case: dict[str, Any], ranks: int = 1) -> dict[str, Any]:
    return run_step("deepspeed_step.py", case, ranks, local_rank_zero=True)


# the live-window case (test_prefetch_keeps_max_live_parameters_gathered) and the persistence threshold's
# (test_persistent_parameters_stay_whole_on_every_rank)
PREFETCH_CONFIG = dict(LLAMA, hidden_size=512, intermediate_size=1024, num_hidden_layers=8, num_attention_heads=8,
                       num_key_value_heads=8)
LIVE = (4_000_000, 8_000_000)


def _prefetch_case(live: int) -> dict[str, Any]:
    zero = {"stage3_max_live_parameters": live, "stage3_prefetch_bucket_size": 500_000,
            "stage3_max_reuse_distance": 100_000, "reduce_bucket_size": 1_000_000}
    return dict(config=PREFETCH_CONFIG, batch=1, seq=32, steps=3, freeze_base=True, zero=zero)


SMALL_BUCKET = dict(CASE, zero={"reduce_bucket_size": 1_000_000})
NOT_PERSISTENT = dict(CASE, zero={"reduce_bucket_size": 1_000_000, "stage3_param_persistence_threshold": 0})


@pytest.fixture(scope="module", autouse=True)
def _steps() -> None:
    """This module's real steps, one launch per number of ranks (ranks.py ``run_cases``: one child process per case,
    forked after the imports); each test's ``_run`` then reads its case's result."""
    run_cases("deepspeed_step.py", [CASE, SMALL_BUCKET], 1, local_rank_zero=True, preload=("deepspeed",))
    run_cases("deepspeed_step.py", [CASE, *map(_prefetch_case, LIVE), SMALL_BUCKET, NOT_PERSISTENT], 2,
              local_rank_zero=True, preload=("deepspeed",))


@pytest.fixture(scope="module")
def one_rank() -> dict[str, Any]:
    return _run(CASE)


def test_ipg_bucket_is_reduce_bucket_size_elements_of_the_gradient_dtype(one_rank: dict[str, Any]) -> None:
    small = _run(SMALL_BUCKET)
    delta = one_rank["init_bytes"] - small["init_bytes"]
    expected = ipg_bucket_bytes(2) - ipg_bucket_bytes(2, 1_000_000)
    print(f"\nIPG bucket: measured difference {delta / MiB:.1f} MiB, predicted {expected / MiB:.1f} MiB")
    assert REDUCE_BUCKET_SIZE == 500_000_000
    assert abs(delta - expected) / expected < 0.005


def _check(measured: dict[str, Any], gpus: int) -> tuple[int, int]:
    spec = spec_from_config(LLAMA, name="llama-tiny")
    est = estimate_training(spec, gpus=gpus, **FIELDS)
    pred, meas = est.details["tensor_peak_bytes"], measured["peak_bytes"]
    print(f"\nZeRO-3 over {gpus}: predicted {pred / MiB:.1f} MiB at {est.details['peak_phase']}, measured "
          f"{meas / MiB:.1f} MiB ({(pred - meas) / meas:+.2%}); parts "
          + str({k: round(v / MiB, 2) for k, v in est.details["peak_parts"].items()}))
    assert abs(pred - meas) / meas <= 0.05
    return pred, meas


def test_zero3_step_peak_one_rank(one_rank: dict[str, Any]) -> None:
    _check(one_rank, 1)


def test_zero3_step_peak_two_ranks() -> None:
    pred, meas = _check(_run(CASE, ranks=2), 2)
    bucket = ipg_bucket_bytes(2)  # checked against DeepSpeed above
    rest_pred, rest_meas = pred - bucket, meas - bucket
    print(f"beside the IPG bucket: predicted {rest_pred / MiB:.2f} MiB, measured {rest_meas / MiB:.2f} MiB")
    assert abs(rest_pred - rest_meas) / rest_meas <= 0.10


def test_default_precision_under_zero3_is_deepspeeds_bf16(one_rank: dict[str, Any]) -> None:
    """``train --zero 3`` with the default precision (bf16-mixed): the measured run is DeepSpeed's own bf16 (the
    ``bf16`` config section, no torch.autocast), so the default must size the same step as deepspeed-bf16 and
    match the measured peak; before DeepSpeed's semantics were modelled it counted fp32 weights plus autocast
    copies of every linear weight."""
    spec = spec_from_config(LLAMA, name="llama-tiny")
    fields = {k: v for k, v in FIELDS.items() if k != "precision"}
    est = estimate_training(spec, gpus=1, **fields)
    pred, meas = est.details["tensor_peak_bytes"], one_rank["peak_bytes"]
    print(f"\ndefault precision under ZeRO-3: predicted {pred / MiB:.1f} MiB, measured {meas / MiB:.1f} MiB")
    assert "autocast_weight_copies" not in {i.name for i in est.items}
    assert any(a.name == "precision_semantics" and a.value == "deepspeed-bf16" for a in est.assumptions)
    assert abs(pred - meas) / meas <= 0.05


def test_prefetch_keeps_max_live_parameters_gathered() -> None:
    """The live window (formulas/deepspeed_zero.live_window_elements): with a complete trace, the forward and
    backward peak grows by stage3_max_live_parameters x the parameter bytes. Scaled down so that a small model
    exceeds the window: a frozen base (only the norms train, as under LoRA), two ranks, bf16 parameters; the peak
    with a window of 8e6 elements minus that with 4e6 is 4e6 elements x 2 B gathered beyond the rank's partition.

    The peaks do not depend on when the other rank or gloo's worker thread runs (probe20 C: +7.08 MiB beside 8
    busy processes, +7.56 alone): the step script completes each gather where DeepSpeed launches it, so no gathered
    parameter is freed off the rank's own thread; only the norms' gradient reduce-scatter (17 KB) may be, less than
    the smallest gathered parameter (a 512 x 512 projection, 512 KiB in bf16)."""
    from llmsizer.formulas.deepspeed_zero import live_window_elements

    units = [2000 * 512] + [4 * 512 * 512 + 3 * 512 * 1024 + 2 * 512] * 8 + [2000 * 512 + 512]
    peaks, windows = {}, {}
    for live in LIVE:
        run = _run(_prefetch_case(live), ranks=2)
        assert run["fb_off_thread_max_bytes"] < 512 * 512 * 2, run
        peaks[live] = run["fb_peak_bytes"]
        windows[live] = live_window_elements(units, True, max_live=live)[0]
    measured = peaks[8_000_000] - peaks[4_000_000]
    predicted = (windows[8_000_000] - windows[4_000_000]) * 2
    print(f"\nlive window 4e6 -> 8e6: peak +{measured / MiB:.2f} MiB measured, +{predicted / MiB:.2f} MiB predicted")
    assert abs(measured - predicted) / predicted <= 0.05


def test_persistent_parameters_stay_whole_on_every_rank() -> None:
    """Eq. Z4: parameters of at most stage3_param_persistence_threshold (1e5) elements stay gathered on every rank
    beside their partitions: in the tiny Llama (hidden 256) the norms, q/k/v/o (256 x 256, 128 x 256) persist, the
    MLP (512 x 256), embedding and lm_head do not. The difference in live bytes after the step between the default
    threshold and 0 equals the estimate's persistent_params, which reads the same rule as the collective volume."""
    kept = _run(SMALL_BUCKET, ranks=2)["end_bytes"]
    none = _run(NOT_PERSISTENT, ranks=2)["end_bytes"]
    spec = spec_from_config(LLAMA, name="llama-tiny")
    est = estimate_training(spec, gpus=2, **FIELDS)
    predicted = next(i.bytes for i in est.items if i.name == "persistent_params")
    print(f"\npersistent parameters: measured {(kept - none) / MiB:.3f} MiB, predicted {predicted / MiB:.3f} MiB")
    assert kept - none == predicted
