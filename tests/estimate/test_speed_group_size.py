"""The speed reads the weight bytes the memory estimate holds at a GPTQ/AWQ group size other than the default 128:
a group given (``group_size``, ``--group-size``) or stated by the checkpoint (its quantization_config). Before, the
speed sized the weights at formulas/weight_formats.py ``GROUP_SIZE_DEFAULT`` whatever the group, so at group 32 the
memory held 43.8 GB of llama-3.1-70b AWQ weights and the decode read 39.8 GB. The truth is the memory estimate's
own weight bytes per device (``weight_bytes`` of the format and group, sharded by tensor parallelism): a decode
step reads every weight once, so its weight bytes are those; and with the bytes the decode time of a memory-bound
step moves (smaller groups: more scales and zeros, a slower step)."""

from __future__ import annotations

import dataclasses

import pytest

from llmsizer import fit
from llmsizer.models import load_model
from llmsizer.recommend import best_option_on

MODEL, DEVICE = "llama-3.1-70b", "h100-sxm"  # 70B at 4 bits on one H100: a memory-bound decode


def _checkpoint(fmt: str, group: int) -> object:
    """The catalog model as if its checkpoint were ``fmt`` at ``group`` (its quantization_config)."""
    config = {"quant_method": fmt.split("-")[0], "bits": 4, "group_size": group}
    return dataclasses.replace(load_model(MODEL), quantization=tuple(config.items()))


@pytest.mark.parametrize("count", [1, 2])  # 2: tensor parallel 2, the bytes per device
@pytest.mark.parametrize("fmt", ["gptq-int4", "awq-int4"])
def test_the_decode_reads_the_weights_the_memory_holds_at_the_group_given(fmt: str, count: int) -> None:
    decode: dict[int, float] = {}
    held: dict[int, int] = {}
    for group in (32, 64, 128):
        r = fit(MODEL, DEVICE, count, engine="vllm", weights=fmt, group_size=group, tensor_parallel=count)
        assert r.estimate is not None and r.speed is not None and r.speed.decode is not None
        held[group] = int(r.estimate.details["weights_bytes"])  # per device (sharded at tensor parallel > 1)
        assert r.speed.details["weights_bytes_per_device"] == held[group], group
        assert r.speed.decode.bound == "memory"
        decode[group] = r.speed.decode.seconds
    assert held[32] > held[64] > held[128]
    assert decode[32] > decode[64] > decode[128]  # the decode time moves with the bytes


@pytest.mark.parametrize("fmt", ["gptq-int4", "awq-int4"])
def test_a_checkpoints_own_group_sizes_the_speed(fmt: str) -> None:
    spec = _checkpoint(fmt, 64)
    r = fit(spec, DEVICE, engine="vllm")
    assert r.weights_format == fmt and r.estimate is not None and r.speed is not None
    assert r.estimate.details["group_size"] == 64
    assert r.speed.details["weights_bytes_per_device"] == r.estimate.details["weights_bytes"]
    at_128 = fit(MODEL, DEVICE, engine="vllm", weights=fmt, group_size=128)
    assert r.estimate.details["weights_bytes"] > at_128.estimate.details["weights_bytes"]  # type: ignore[union-attr]
    assert r.speed.decode.seconds > at_128.speed.decode.seconds  # type: ignore[union-attr]


def test_recommend_passes_the_group_size_through() -> None:
    """recommend's option on a device is fit's (its memory and speed) at the group given."""
    for group in (32, 128):
        o = best_option_on(MODEL, DEVICE, engine="vllm", weights="awq-int4", group_size=group)
        r = fit(MODEL, DEVICE, engine="vllm", weights="awq-int4", group_size=group)
        assert r.speed is not None
        assert o.memory_per_device == r.memory_per_device
        assert o.tokens_per_second_per_user == r.speed.tokens_per_second_per_user
    assert best_option_on(MODEL, DEVICE, engine="vllm", weights="awq-int4", group_size=32).tokens_per_second_per_user \
        < best_option_on(MODEL, DEVICE, engine="vllm", weights="awq-int4", group_size=128).tokens_per_second_per_user


@pytest.mark.parametrize("fmt", ["gptq-int4", "awq-int4"])
def test_recommend_sizes_a_checkpoint_at_its_own_group(fmt: str) -> None:
    """No format named: recommend's first rung is the checkpoint's format, sized (memory and speed) as fit sizes the
    checkpoint, at its own group 64 (before: asked as a named format, at 128)."""
    spec = _checkpoint(fmt, 64)
    o = best_option_on(spec, DEVICE, engine="vllm")
    r = fit(spec, DEVICE, engine="vllm")
    assert o.weights_format == r.weights_format == fmt and r.speed is not None
    assert o.memory_per_device == r.memory_per_device
    assert o.tokens_per_second_per_user == r.speed.tokens_per_second_per_user
    at_128 = fit(MODEL, DEVICE, engine="vllm", weights=fmt, group_size=128).speed
    assert at_128 is not None and o.tokens_per_second_per_user < at_128.tokens_per_second_per_user  # type: ignore[operator]
