"""QLoRA on MoE models: which parameters bitsandbytes quantizes (issue #12).

Independent truth: transformers' own bitsandbytes 4-bit quantizer run on the model transformers builds (tiny
configs, meta device): ``Bnb4BitHfQuantizer._process_model_before_weight_loading`` swaps modules through
``replace_with_bnb_linear`` (integrations/bitsandbytes.py @ 5.24.0 line 189: only ``type(module) is nn.Linear``),
and ``param_needs_quantization`` (quantizers/quantizer_bnb_4bit.py line 87) names each parameter the load
quantizes. In transformers 5 the routed experts are fused 3-D ``nn.Parameter``s and the router an ``nn.Parameter``,
so they stay in the model dtype. llmsizer's per-tensor decision (``weight_formats.bnb_quantizes``) must quantize
exactly the same elements -- for training's QLoRA base and for serving on transformers (``--weights nf4`` etc.: the
same ``replace_with_bnb_linear``), one rule (``nf4_quantization.fused_experts_kept``).
"""

from __future__ import annotations

from typing import Any

import pytest

from llmsizer import estimate_inference, estimate_training
from llmsizer.catalog.models import find
from llmsizer.formulas.params import count_params
from llmsizer.formulas.tensors import model_tensors
from llmsizer.formulas.weight_formats import bnb_quantizes, weight_bytes
from llmsizer.readers.hf_config import spec_from_config
from oracle_utils import TINY_CONFIGS, build, torch
from oracle_utils import TINY_JAMBA as _JAMBA
from oracle_utils import TINY_NEMOTRON_H as _NEMOTRON_H
from oracle_utils import TINY_QWEN3_NEXT as _QWEN3_NEXT

pytestmark = pytest.mark.slow

bnb = pytest.importorskip("bitsandbytes")

_LLAMA4 = {"model_type": "llama4_text", "vocab_size": 128, "hidden_size": 64, "num_hidden_layers": 8,
           "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 32,
           "intermediate_size_mlp": 96, "num_local_experts": 4, "num_experts_per_tok": 1,
           "attention_chunk_size": 16}

CASES: list[tuple[str, dict[str, Any]]] = [
    ("qwen3_next", _QWEN3_NEXT),
    ("jamba", _JAMBA),
    ("nemotron_h", _NEMOTRON_H),
    ("llama4", _LLAMA4),
    *((k, TINY_CONFIGS[k]) for k in ("mixtral-moe", "qwen3-moe", "qwen2-moe-shared", "deepseek-v3-mla",
                                     "gpt-oss-layer-types")),
]


def _bnb_split(cfg: dict[str, Any], totals: dict[str, int] | None = None) -> tuple[int, int]:
    """(quantized, kept) weight elements of 2-D-or-more parameters when transformers loads ``cfg`` in 4 bits;
    ``totals`` gets the model's parameter elements under "all", the largest quantized parameter's under "largest"."""
    from transformers import BitsAndBytesConfig
    from transformers.quantizers.quantizer_bnb_4bit import Bnb4BitHfQuantizer

    model = build(cfg, dtype=torch.bfloat16)
    q = Bnb4BitHfQuantizer(BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4",
                                              bnb_4bit_use_double_quant=True))
    # the model class's own fp32 parameters, read before the quantizer swaps in its Linear4bit modules
    fp32 = {name for name, p in model.named_parameters() if p.dtype == torch.float32}
    q._process_model_before_weight_loading(model, device_map=None)
    quantized = kept = 0
    if totals is not None:
        totals["all"] = sum(p.numel() for p in model.parameters())
    if totals is not None:  # the router's score-correction bias: a saved buffer, in the dtype the real class holds it
        totals["fp32_buffers"] = sum(b.numel() for name, b in model.named_buffers()
                                     if name.endswith("e_score_correction_bias") and b.dtype == torch.float32)
    if totals is not None:  # what transformers keeps in fp32 (``_keep_in_fp32_modules_strict``: routers), unquantized
        totals["fp32"] = sum(p.numel() for name, p in model.named_parameters()
                             if name in fp32 and not q.param_needs_quantization(model, name))
    for name, p in model.named_parameters():
        if q.param_needs_quantization(model, name):
            quantized += p.numel()
            if totals is not None:
                totals["largest"] = max(totals.get("largest", 0), p.numel())
        elif p.dim() >= 2 and min(p.shape[-2:]) > 1 and "embed" not in name and "lm_head" not in name:
            kept += p.numel()  # matrices left in bf16 (norms, biases, convs' depth-1 and embeddings aside)
    return quantized, kept


def _ours(cfg: dict[str, Any], fused: bool) -> tuple[int, int]:
    spec = spec_from_config(cfg, name="tiny")
    quantized = kept = 0
    for t in model_tensors(spec):
        if bnb_quantizes(t, fused):
            quantized += t.numel
        elif t.matrix and t.component in ("experts", "router"):
            kept += t.numel
    return quantized, kept


@pytest.mark.parametrize(("label", "cfg"), CASES, ids=[c[0] for c in CASES])
def test_bnb_quantizes_what_transformers_quantizes(label: str, cfg: dict[str, Any]) -> None:
    real_q, real_kept = _bnb_split(cfg)
    ours_q, ours_kept = _ours(cfg, fused=True)
    assert ours_q == real_q, f"{label}: quantized elements {ours_q} vs transformers {real_q}"
    assert ours_kept <= real_kept, f"{label}: experts/router kept {ours_kept} > bf16 matrices {real_kept}"
    # counting the fused experts as NF4 (the rule before issue #12) would not match transformers
    assert _ours(cfg, fused=False)[0] != real_q


def test_weight_bytes_keep_fused_experts_in_base_dtype() -> None:
    spec = spec_from_config(TINY_CONFIGS["mixtral-moe"], name="tiny")
    nf4 = weight_bytes(spec, "nf4-dq", other_bytes=2)
    kept = weight_bytes(spec, "nf4-dq", other_bytes=2, fused_experts=True)
    experts = sum(t.numel for t in model_tensors(spec) if t.component == "experts")
    assert kept.by_component["experts"] == 2 * experts
    assert nf4.by_component["experts"] < kept.by_component["experts"]


@pytest.mark.parametrize(("label", "cfg"), CASES, ids=[c[0] for c in CASES])
def test_transformers_serving_quantizes_what_transformers_quantizes(label: str, cfg: dict[str, Any]) -> None:
    """``infer --engine transformers --weights nf4-dq``: the elements its weights hold in bf16 / fp32 are exactly those
    transformers' quantizer leaves unquantized (every parameter but the ones ``param_needs_quantization`` names), in
    the dtype the real model class holds them (its ``_keep_in_fp32_modules_strict`` routers in fp32), and
    its prefill dequantization buffer is the largest parameter that quantizer takes, in bf16."""
    totals: dict[str, int] = {}
    real_q, _ = _bnb_split(cfg, totals)
    est = estimate_inference(spec_from_config(cfg, name="tiny"), engine="transformers", weights="nf4-dq",
                             dtype="bf16", context=64, output_tokens=1)
    # the rest in bf16, but the modules the real model class holds in fp32 (its routers), 4 B each
    fp32 = totals["fp32"]
    assert est.details["weights_by_storage"]["bf16/fp16"] == 2 * (totals["all"] - real_q - fp32), label
    # + the routers' score-correction bias buffers (DeepSeek-V3, Nemotron-H: fp32, counted since moeparams)
    assert est.details["weights_by_storage"].get("fp32", 0) == 4 * (fp32 + totals["fp32_buffers"]), label
    # prefill dequantizes one Linear4bit weight at a time (hf_transformers.py): the largest the quantizer made
    assert est.item("dequant_buffer").bytes == 2 * totals["largest"], label
    assert any(a.name == "fused_experts" and a.value == "bf16" for a in est.assumptions), label


def test_serving_and_qlora_agree_on_an_moe_base() -> None:
    """Qwen3-30B-A3B: serving it in NF4 on transformers holds the same base weights as QLoRA training counts (the
    same load), its routed experts in bf16 (2 B x the expert parameters, counted by formulas/params.py); vLLM's
    bitsandbytes MoE method quantizes them (estimate/formats.py serving_fused_experts), so its weights are smaller."""
    serve = estimate_inference("qwen3-30b-a3b", engine="transformers", weights="nf4-dq", dtype="bf16")
    # before PEFT's prepare_model_for_kbit_training casts the unquantized tensors to fp32 (the training default,
    # tests/training/test_kbit_prep_upcast.py): the load itself
    train = estimate_training("qwen3-30b-a3b", method="qlora", base_dtype="bf16")
    assert serve.item("weights").bytes == train.item("weights").bytes
    experts = count_params(find("qwen3-30b-a3b").spec()).by_component["experts"]
    assert serve.details["weights_by_storage"]["bf16/fp16"] > 2 * experts
    nf4 = estimate_inference("qwen3-30b-a3b", engine="transformers", weights="nf4", dtype="bf16")
    assert nf4.details["weights_by_storage"]["bf16/fp16"] > 2 * experts
    vllm = estimate_inference("qwen3-30b-a3b", engine="vllm", weights="nf4", dtype="bf16")
    assert vllm.details["weights_by_storage"]["bf16/fp16"] < experts
    assert not any(a.name == "fused_experts" for a in vllm.assumptions)
