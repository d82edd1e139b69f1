"""SGLang's default mem_fraction_static for a multimodal model (probe23 D4), against SGLang 0.5.23's own code.

sglang/srt/arg_groups/memory_hook.py (the 0.5.23 PyPI wheel; the same function at sgl-project/sglang @ 031ed82d):
``handle_gpu_memory_settings`` L281-337 computes ``round((gpu_mem - reserved_mem) / gpu_mem, 3)`` and, when
``is_vlm``, calls ``adjust_mem_fraction_for_vlm`` (L417-462)::

    base_mem_fraction_reduction_ratio = 0.95
    vit_num_layers = getattr(vision_config, "num_hidden_layers", 24)
    vit_hidden_size = getattr(vision_config, "hidden_size", 1024)
    complexity_ratio = vit_num_layers * vit_hidden_size**2 / (24 * 1024**2)
    dynamic_adjustment_factor = max(0.8, min(1.05, 1.0 - 0.1 * (complexity_ratio - 1.0)))
    return mem_fraction_static * base_mem_fraction_reduction_ratio * dynamic_adjustment_factor

The expected numbers are written from those lines and the model's config.json (the catalog's copy, read as JSON).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import llmsizer
from llmsizer.errors import InputError
from llmsizer.formulas.vlm_memory_fraction import vlm_fraction_factor, vlm_mem_fraction_static
from llmsizer.units import GiB

MODELS = Path(__file__).resolve().parents[2] / "src" / "llmsizer" / "catalog" / "data" / "models"


def _vision_config(name: str) -> dict:
    return json.loads((MODELS / f"{name}.json").read_text())["config"]["vision_config"]


def test_formula_baseline_and_clamps() -> None:
    assert vlm_fraction_factor(24, 1024) == pytest.approx(0.95)  # ViT-L/14: ratio 1, dynamic 1
    assert vlm_fraction_factor(24, 4096) == pytest.approx(0.95 * 0.8)  # ratio 16: 1 - 1.5 -> clamped to 0.8
    assert vlm_fraction_factor(6, 512) == pytest.approx(0.95 * 1.05)  # ratio 1/16: 1.09375 -> clamped to 1.05
    assert vlm_fraction_factor(48, 1024) == pytest.approx(0.95 * 0.9)  # ratio 2: 1 - 0.1
    with pytest.raises(InputError):  # the library's error (a ValueError too), as formulas/moe_router.py raises
        vlm_fraction_factor(0, 1024)


def test_qwen25_vl_7b_at_24_gib_has_no_token_pool() -> None:
    vc = _vision_config("qwen2.5-vl-7b-instruct")
    # the config names the depth "depth" (32): no num_hidden_layers, so SGLang's getattr reads 24 (L440)
    assert vc["depth"] == 32 and "num_hidden_layers" not in vc
    hidden = vc["hidden_size"]
    assert hidden == 1280
    # eq. (1) at 24 GiB = 24576 MiB (< 35 GiB tier: chunked_prefill_size 4096, decode max_bs 48 at TP 1):
    # 512 + 1.5 x 4096 + 1 x 1 / 8 x 1024 + 2 x 48 + 8 x 50 prefill graph sizes (4..32 by 4: 8, 48..256 by 16: 14,
    # 288..512 by 32: 8, 576..1024 by 64: 8, 1280..4096 by 256: 12) = 7280 MiB
    reserved = 512 + 1.5 * 4096 + 1024 / 8 + 2 * 48 + 8 * (8 + 14 + 8 + 8 + 12)
    base = round((24576 - reserved) / 24576, 3)
    assert base == 0.704
    factor = 0.95 * max(0.8, min(1.05, 1.0 - 0.1 * (24 * hidden ** 2 / (24 * 1024 ** 2) - 1.0)))
    assert factor == pytest.approx(0.8965625)
    expected = base * factor  # 0.63118
    assert vlm_mem_fraction_static(base, 24, hidden) == pytest.approx(expected)

    est = llmsizer.estimate_inference("qwen2.5-vl-7b-instruct", engine="sglang", memory=24 * GiB)
    d = est.details
    assert d["mem_fraction_static"] == pytest.approx(expected, abs=1e-6)
    factors = [a for a in est.assumptions if a.name == "sglang_vlm_mem_fraction_factor"]
    assert len(factors) == 1 and factors[0].value == pytest.approx(factor, abs=1e-6)
    # the 24 holds under SGLang 0.5.23's transformers pin (5.19.0: Qwen2_5_VLVisionConfig.attribute_map has only
    # num_attention_heads; 5.24.0 adds "num_hidden_layers": "depth", and 32 is read): the text names the version it
    # assumes (review34 N2)
    assert "transformers 5.19.0" in factors[0].why and "reads depth 32" in factors[0].why, factors[0].why
    # 0.63118 x (24 GiB - the CUDA context) < the 15.45 GiB of bf16 weights: SGLang refuses to start
    weights = est.item("weights").bytes
    assert expected * 24 * GiB < weights
    assert d["max_total_num_tokens"] == 0
    assert not d["fits"]


def test_given_fraction_is_not_reduced() -> None:
    est = llmsizer.estimate_inference("qwen2.5-vl-7b-instruct", engine="sglang", memory=24 * GiB,
                                      mem_fraction_static=0.9)
    assert est.details["mem_fraction_static"] == 0.9
    assert not any(a.name == "sglang_vlm_mem_fraction_factor" for a in est.assumptions)


def test_gemma4_reads_num_hidden_layers_and_gemma3_is_not_reduced() -> None:
    vc = _vision_config("gemma-4-e4b-it")
    ratio = vc["num_hidden_layers"] * vc["hidden_size"] ** 2 / (24 * 1024 ** 2)  # 16 x 768^2: 0.375
    factor = 0.95 * max(0.8, min(1.05, 1.0 - 0.1 * (ratio - 1.0)))  # 1.0625 clamped to 1.05: 0.9975
    assert factor == pytest.approx(0.9975)
    est = llmsizer.estimate_inference("gemma-4-e4b-it", engine="sglang", memory=24 * GiB)
    got = [a.value for a in est.assumptions if a.name == "sglang_vlm_mem_fraction_factor"]
    assert got == [pytest.approx(factor, abs=1e-6)]
    # Gemma 3: SGLang turns multimodal off by default (configs/model_config.py:690-702 mm_disabled_models)
    est = llmsizer.estimate_inference("gemma-3-4b-it", engine="sglang", memory=24 * GiB)
    assert not any(a.name == "sglang_vlm_mem_fraction_factor" for a in est.assumptions)
