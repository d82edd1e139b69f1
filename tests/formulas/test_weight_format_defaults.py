"""The format catalog's defaults (formulas/weight_formats.py ``GROUP_SIZE_DEFAULT``, ``OTHER_BYTES_DEFAULT``) against
their sources, and the format ladder (estimate/formats.py ``format_ladder`` / ``rung_bytes``) against the sizes the
estimates hold: before, the ladder wrote its own 128 and 2 B, free to drift from both."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from llmsizer import estimate_inference
from llmsizer.estimate.formats import format_ladder, rung_bytes, weights_asked
from llmsizer.formulas.weight_formats import GROUP_SIZE_DEFAULT, OTHER_BYTES_DEFAULT, stored_format
from llmsizer.models import load_model
from llmsizer.specs import InferenceWorkload, ModelSpec


def test_the_group_size_default_is_transformers_and_the_workloads() -> None:
    transformers = pytest.importorskip("transformers")
    for config in (transformers.GPTQConfig, transformers.AwqConfig):
        assert inspect.signature(config.__init__).parameters["group_size"].default == GROUP_SIZE_DEFAULT
    # the workload's default is written in specs/ (a floor below formulas/): the same number
    assert InferenceWorkload.group_size == GROUP_SIZE_DEFAULT


def test_the_unquantized_tensors_default_is_a_16_bit_dtype() -> None:
    torch = pytest.importorskip("torch")
    assert OTHER_BYTES_DEFAULT == torch.bfloat16.itemsize == torch.float16.itemsize


def _awq(spec_name: str, group: int) -> ModelSpec:
    """A catalog model as if its checkpoint were AutoAWQ 4-bit with ``group`` (its quantization_config)."""
    config = {"quant_method": "awq", "bits": 4, "group_size": group}
    return dataclasses.replace(load_model(spec_name), quantization=tuple(config.items()))


@pytest.mark.parametrize("model, engine", [("qwen2.5-7b", "vllm"), ("qwen2.5-7b", "llamacpp"),
                                           ("phi-2", "vllm"),  # a float16 checkpoint
                                           ("gpt-oss-20b", "vllm"), ("gpt-oss-20b", "llamacpp"),  # MXFP4 experts
                                           ("awq-64", "vllm"),  # the checkpoint alone, at its own group size
                                           ("awq-64", "llamacpp")])  # no GGUF counterpart: rungs below its bytes
def test_each_rung_is_ranked_by_the_bytes_its_estimate_holds(model: str, engine: str) -> None:
    """Every rung of the ladder, asked of ``estimate_inference`` with no group size or dtype (as recommend asks
    it; the checkpoint's own format with no format named), holds the weight bytes the ladder ranked it by
    (llama.cpp: device + host parts)."""
    spec = _awq("qwen2.5-7b", 64) if model == "awq-64" else load_model(model)
    stored, group, _ = stored_format(spec)
    ladder = format_ladder(spec, engine)
    assert len(ladder) >= (1 if model == "awq-64" and engine == "vllm" else 2)
    for fmt in ladder:
        own = fmt == stored
        est = estimate_inference(spec, engine=engine, weights=None if own else weights_asked(fmt))
        assert est.details["weights_format"] == fmt
        held = sum(item.bytes for item in est.items if item.name in ("weights", "weights_host"))
        # ranked on the engine it runs on, as format_ladder and recommend ask (vLLM's MXFP4 scales, eq. X1)
        assert rung_bytes(spec, fmt, group if own else GROUP_SIZE_DEFAULT, engine) == held, fmt
    if model == "awq-64":  # ranked at the checkpoint's group size, 64, not the default
        assert rung_bytes(spec, "awq-int4", 64) != rung_bytes(spec, "awq-int4")
        if engine == "llamacpp":
            assert all(rung_bytes(spec, f) <= rung_bytes(spec, "awq-int4", 64) for f in ladder)
