"""Copies made without a constructor's per-field rebuild (speed) are the copies ``dataclasses.replace`` makes: the
same fields, the same values, the same refusals."""

from __future__ import annotations

import dataclasses

import pytest

from llmsizer.recommend import Option, _replace


def _option() -> Option:
    return Option("h100-sxm", "H100 SXM", "", "h100-sxm", "gpu", 2, 2, 1, "vllm", "bf16", "meets", ("fits",),
                  price_per_hour=4.5, memory_per_device=70 * 2**30)


def test_option_replace_is_dataclasses_replace() -> None:
    o = _option()
    for kw in ({}, {"status": "chosen", "reasons": ("cheapest", "fits")}, {"price_per_hour": None, "count": 4},
               {"run_cost": 12.0, "training_seconds": 3600.0, "device_hours": 2.0}):
        new, ref = _replace(o, **kw), dataclasses.replace(o, **kw)
        assert new == ref and new is not o
        assert list(new.__dict__.items()) == list(ref.__dict__.items())  # field order too (to_dict, repr)
        assert new.to_dict() == ref.to_dict()
    assert o == _option()  # the original is unchanged
    with pytest.raises(TypeError):
        _replace(o, colour="red")
    with pytest.raises(dataclasses.FrozenInstanceError):
        _replace(o).status = "x"  # type: ignore[misc]


def test_inference_workload_without_memory_is_replace() -> None:
    """The breakdown an inference estimate reuses for every memory size is composed from ``without_memory()``: the
    workload ``dataclasses.replace(w, memory=None)`` builds (which re-runs every check), with each field's value and
    type (the memo key reads both), ``given`` kept; and a changed field is never lost."""
    from llmsizer.specs.workload import InferenceWorkload

    cases = [InferenceWorkload(context=8192, concurrency=8, memory=80 * 2**30),
             InferenceWorkload(context=8192, concurrency=2, memory=24.0 * 2**30, headroom=0.1, engine="vLLM",  # type: ignore[arg-type]
                               weights="awq-int4", tensor_parallel=2),
             InferenceWorkload(context=4096, memory=64 * 2**30, engine="llamacpp", gpus=2, tensor_split=[1, 3],  # type: ignore[arg-type]
                               split_mode="row", n_cpu_moe=2, images=1, image_size=(896, 896)),
             InferenceWorkload(context=2048, concurrency=1, memory=2**34, device="cpu", kv_dtype="q8_0",
                               output_tokens=0),
             InferenceWorkload(context=2048)]
    for w in cases:
        fast, ref = w.without_memory(), dataclasses.replace(w, memory=None)
        assert fast == ref and fast.memory is None and fast.given == ref.given == w.given
        assert [(k, v, type(v)) for k, v in fast.__dict__.items()] == [(k, v, type(v)) for k, v in ref.__dict__.items()]
        assert w.memory is None or w.memory > 0  # the original keeps its memory
        with pytest.raises(dataclasses.FrozenInstanceError):
            fast.context = 1  # type: ignore[misc]
