"""plan/inference.py ``_smaller`` (is the quantized alternative's format smaller than the plan's?) ranks formats by
the format ladder's one rule: ``rung_bytes`` at ``rung_group_size``, the checkpoint's own GPTQ/AWQ group for its
stored format (issue #12/#16). Before, it sized every format at the default group (128), so an AWQ checkpoint
quantized at group 32 (more scales and zeros than at 128) read as smaller than GPTQ int4 at 128, the opposite of the
bytes each estimate holds."""

from __future__ import annotations

import dataclasses

import pytest

from llmsizer import estimate_inference
from llmsizer.estimate.formats import weights_asked
from llmsizer.formulas.weight_formats import stored_format
from llmsizer.models import load_model
from llmsizer.plan.inference import _smaller
from llmsizer.specs import ModelSpec


def _checkpoint(method: str, group: int) -> ModelSpec:
    """Qwen2.5 7B as if published as ``method`` 4-bit at ``group`` (its quantization_config, as AutoAWQ / AutoGPTQ
    write it; group -1: one group per column)."""
    config = {"quant_method": method, "bits": 4, "group_size": group}
    return dataclasses.replace(load_model("qwen2.5-7b"), quantization=tuple(config.items()))


def _held(spec: ModelSpec, fmt: str) -> int:
    """The weight bytes an estimate of ``fmt`` holds, asked as recommend asks a rung: the checkpoint's own format with
    no format named (its own group size), any other by name (the default group)."""
    own = fmt == stored_format(spec)[0]
    est = estimate_inference(spec, engine="vllm", weights=None if own else weights_asked(fmt))
    assert est.details["weights_format"] == fmt
    return sum(item.bytes for item in est.items if item.name == "weights")


@pytest.mark.parametrize("method, group", [("awq", 32), ("gptq", -1)])
def test_smaller_agrees_with_the_bytes_each_estimate_holds(method: str, group: int) -> None:
    spec = _checkpoint(method, group)
    formats = ("bf16", "fp8", "awq-int4", "gptq-int4")
    held = {f: _held(spec, f) for f in formats}
    for fmt in formats:
        for than in formats:
            assert _smaller(spec, fmt, than, "vllm") == (held[fmt] < held[than]), (fmt, than, held)


def test_smaller_ranks_formats_on_the_engine_as_its_estimates_hold_them() -> None:
    """transformers keeps an MoE model's fused experts in the compute dtype under a bitsandbytes format
    (estimate/formats.py ``serving_fused_experts``): Qwen3-30B-A3B in nf4 there holds about 55.7 GiB, more than
    fp8's 29 GiB. Before, ``_smaller`` sized every rung with no engine (4-bit experts, about 16 GiB), so a plan in
    fp8 on transformers read nf4 as the smaller format."""
    spec = load_model("qwen3-30b-a3b")
    for engine in ("transformers", "vllm"):  # vLLM refuses an MoE model in llm.int8 (formats.py bnb_moe_refused)
        formats = ("bf16", "fp8", "nf4", "awq-int4") + (("llm.int8",) if engine == "transformers" else ())
        held = {}
        for f in formats:
            est = estimate_inference(spec, engine=engine, weights=f)
            held[f] = sum(item.bytes for item in est.items if item.name == "weights")
        for fmt in formats:
            for than in formats:
                assert _smaller(spec, fmt, than, engine) == (held[fmt] < held[than]), (engine, fmt, than, held)
