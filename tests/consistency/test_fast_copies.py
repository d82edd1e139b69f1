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


def test_usable_memory_without_assumptions_is_the_same_number() -> None:
    """A catalog search reads only the bytes of ``usable_memory`` (``record=False``: no assumptions written): the
    same bytes as with them, for every catalog device (Apple GPUs' working-set share included), given a memory or
    not; a device of unknown memory stays None."""
    from llmsizer.catalog.hardware import load_catalog
    from llmsizer.estimate.device import usable_memory

    devices = list(load_catalog().devices.values())
    assert any(d.kind == "apple" for d in devices)
    for d in devices:
        for memory in (None, 24 * 2**30):
            full, notes = usable_memory(d, memory)
            bare, none = usable_memory(d, memory, record=False)
            assert bare == full and none == [] and (notes or full is None), (d.id, memory)


def test_memory_basis_text_is_made_once_and_follows_the_device() -> None:
    """``Device.memory_basis_text`` is kept on the device after the first ask: the same text as made afresh, and a
    device copied with another memory figure (dataclasses.replace) says its own."""
    from llmsizer.catalog.hardware import load_catalog

    for d in load_catalog().devices.values():
        assert d.memory_basis_text() == d._memory_basis_text() == d.memory_basis_text()
    h100 = load_catalog().devices["h100-sxm"]
    before = h100.memory_basis_text()
    assert h100.memory is not None and h100.memory_usable is not None
    other = dataclasses.replace(h100, memory_usable=dataclasses.replace(h100.memory_usable, source="test-source"))
    assert "test-source" in other.memory_basis_text() and "test-source" not in before
    assert other == other and dataclasses.asdict(other).keys() == dataclasses.asdict(h100).keys()
