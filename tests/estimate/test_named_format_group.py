"""A GPTQ/AWQ format named by the user (``--weights awq-int4``) on a checkpoint stored in that format at its own group
size (its quantization_config ``group_size``, here 64) is sized at that group, as the format ladder (recommend, the
plan: estimate/formats.py ``rung_group_size``) sizes it (issue #12/#16). Before, ``infer --weights awq-int4`` sized
it at the default group 128 while recommend sized the same rung at 64: two weight bytes for one checkpoint. A group
given (``group_size``) still wins, and another format than the stored one keeps the default group."""

from __future__ import annotations

import dataclasses

import pytest

from llmsizer import estimate_inference, fit
from llmsizer.estimate.formats import rung_bytes
from llmsizer.models import load_model
from llmsizer.recommend import best_option_on
from llmsizer.specs.model import ModelSpec

MODEL, DEVICE = "llama-3.1-8b", "h100-sxm"


def _checkpoint(method: str, group: int) -> ModelSpec:
    """The catalog model as if published as ``method`` 4-bit at ``group`` (its quantization_config)."""
    config = {"quant_method": method, "bits": 4, "group_size": group}
    return dataclasses.replace(load_model(MODEL), quantization=tuple(config.items()))


@pytest.mark.parametrize("method", ["awq", "gptq"])
def test_a_named_stored_format_is_sized_at_the_checkpoints_group(method: str) -> None:
    fmt = f"{method}-int4"
    spec = _checkpoint(method, 64)
    named = estimate_inference(spec, engine="vllm", weights=fmt)
    own = estimate_inference(spec, engine="vllm")  # no format named: the stored one, at its own group
    assert named.details["group_size"] == own.details["group_size"] == 64
    assert named.details["weights_bytes"] == own.details["weights_bytes"] == rung_bytes(spec, fmt, 64)
    # recommend's option for that format is fit's, at the same bytes
    o = best_option_on(spec, DEVICE, engine="vllm", weights=fmt)
    r = fit(spec, DEVICE, engine="vllm", weights=fmt)
    assert r.estimate is not None and r.estimate.details["weights_bytes"] == named.details["weights_bytes"]
    assert o.memory_per_device == r.memory_per_device
    # group 64 stores twice the scales and zeros of group 128: more bytes than the default group
    assert named.details["weights_bytes"] > rung_bytes(spec, fmt, 128)


def test_sglangs_vllm_comparison_sizes_the_same_group() -> None:
    """SGLang's estimate compares its pool with vLLM's on the same card (a nested vLLM estimate): at the same group."""
    spec, memory = _checkpoint("awq", 64), 80 * 2**30
    s = estimate_inference(spec, engine="sglang", weights="awq-int4", memory=memory)
    v = estimate_inference(spec, engine="vllm", weights="awq-int4", memory=memory)
    assert s.details["group_size"] == v.details["group_size"] == 64
    assert s.details["vllm_kv_tokens"] == v.details["kv_tokens"]


def test_a_given_group_or_another_format_keeps_its_own_rule() -> None:
    spec = _checkpoint("awq", 64)
    given = estimate_inference(spec, engine="vllm", weights="awq-int4", group_size=128)
    assert given.details["group_size"] == 128
    other = estimate_inference(spec, engine="vllm", weights="gptq-int4")  # not the stored format: the default group
    assert other.details["group_size"] == 128
