"""recommend's "weights alone fit" pre-check sizes a rung as the estimate of that rung holds it (issues #12/#16):
transformers keeps an MoE model's fused experts and router in the compute dtype under a bitsandbytes format
(estimate/formats.py ``serving_fused_experts``, formulas/nf4_quantization.py ``fused_experts_kept``), vLLM quantizes
them. Before, ``rung_bytes`` took no engine and sized every bitsandbytes MoE rung with 4-bit experts (Qwen3-30B-A3B
in nf4: about 16 GiB instead of the 55.66 GiB transformers holds), so the pre-check passed cards the full estimate
then refused."""

from __future__ import annotations

import pytest

import llmsizer
from llmsizer.estimate.formats import rung_bytes
from llmsizer.models import load_model
from llmsizer.units import format_bytes

MOE = "qwen3-30b-a3b"


def _weights(engine: str, fmt: str) -> int:
    est = llmsizer.estimate_inference(MOE, engine=engine, weights=fmt)
    return next(i.bytes for i in est.items if i.name == "weights")


@pytest.mark.parametrize(("engine", "fmt"), [("transformers", "nf4"), ("transformers", "llm.int8"),
                                             ("vllm", "nf4"), ("transformers", "awq-int4")])
def test_rung_bytes_on_an_engine_is_the_estimates_weights(engine: str, fmt: str) -> None:
    assert rung_bytes(load_model(MOE), fmt, engine=engine) == _weights(engine, fmt)


def test_transformers_keeps_the_experts_so_its_nf4_rung_is_larger_than_vllms() -> None:
    spec = load_model(MOE)
    assert rung_bytes(spec, "nf4", engine="transformers") > 3 * rung_bytes(spec, "nf4", engine="vllm")


def test_recommend_rejects_by_the_weights_the_estimate_holds() -> None:
    rec = llmsizer.recommend_inference(MOE, weights="nf4", engine="transformers")
    card = next(o for o in rec.rejected if o.name == "NVIDIA GeForce RTX 4090 24GB" and o.count == 1)
    need = format_bytes(_weights("transformers", "nf4"))
    assert card.reasons[0].startswith(f"does not fit: the weights alone at the smallest format tried (nf4) need {need}")
