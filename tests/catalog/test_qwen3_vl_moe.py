"""Qwen3-VL-MoE (model_type qwen3_vl_moe): Qwen3-MoE's decoder under Qwen3-VL's vision tower.

Independent truth: the models transformers builds (models/qwen3_vl_moe/modeling_qwen3_vl_moe.py,
Qwen3VLMoeForConditionalGeneration) -- on the meta device for parameter counts (tiny variants here; the catalog
rows are also in test_params_match_transformers.py), on the CPU for the KV cache a real forward pass leaves
behind; the image processor itself (Qwen2VLImageProcessorPil, which Qwen3VLProcessor uses) for image tokens;
the transformers config object for the cache layout of the catalog rows.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from llmsizer.catalog.models import entries
from llmsizer.estimate.inference import estimate_inference
from llmsizer.formulas.kv_cache import kv_cache
from llmsizer.formulas.params import count_params
from llmsizer.formulas.vision_tokens import DELIMITERS
from llmsizer.readers.hf_config import spec_from_config
from oracle_utils import (
    build,
    cache_logical_bytes,
    experts_per_token,
    hf_config,
    random_ids,
    real_components,
    real_param_count,
    torch,
)

pytestmark = pytest.mark.slow

ROWS = ["qwen3-vl-30b-a3b-instruct", "qwen3-vl-235b-a22b-instruct"]
OMIT = object()
_TEXT = {"model_type": "qwen3_vl_moe_text", "vocab_size": 128, "hidden_size": 64, "intermediate_size": 96,
         "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
         "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 24}
# the published configs write the vision model_type as 'qwen3_vl_moe' (Qwen3VLMoeConfig.__post_init__ renames it)
_VISION = {"model_type": "qwen3_vl_moe", "depth": 3, "hidden_size": 32, "intermediate_size": 48, "num_heads": 4,
           "in_channels": 3, "out_hidden_size": 64, "patch_size": 16, "spatial_merge_size": 2,
           "temporal_patch_size": 2, "num_position_embeddings": 36, "deepstack_visual_indexes": [0, 2]}
_VARIANTS: list[dict[str, Any]] = [
    {}, {"attention_bias": True}, {"mlp_only_layers": [0, 3]}, {"decoder_sparse_step": 2},
    {"deepstack_visual_indexes": []}, {"text_tie": True}, {"top_tie": True}, {"top_tie": False},
    {"num_experts": OMIT, "num_experts_per_tok": OMIT, "moe_intermediate_size": OMIT},  # class defaults 60 / 4 / 1408
]


def _config(variant: dict[str, Any]) -> dict[str, Any]:
    text = {**_TEXT, **{k: v for k, v in variant.items() if k in _TEXT or k in ("attention_bias", "mlp_only_layers",
                                                                               "decoder_sparse_step")}}
    if "text_tie" in variant:
        text["tie_word_embeddings"] = variant["text_tie"]
    vision = {**_VISION, **{k: v for k, v in variant.items() if k in _VISION}}
    cfg: dict[str, Any] = {"model_type": "qwen3_vl_moe", "text_config": {k: v for k, v in text.items() if v is not OMIT},
                           "vision_config": vision}
    if "top_tie" in variant:
        cfg["tie_word_embeddings"] = variant["top_tie"]
    return cfg


@pytest.mark.parametrize("variant", _VARIANTS, ids=lambda v: "-".join(f"{k}" for k in v) or "plain")
def test_tiny_qwen3_vl_moe_counts_what_transformers_builds(variant):
    cfg = _config(variant)
    model = build(cfg)
    spec = spec_from_config(cfg, name="qwen3-vl-moe-tiny")
    ours = count_params(spec)
    total, comps = real_param_count(model), real_components(model)
    assert ours.total == total
    assert ours.by_component == comps
    k, e = experts_per_token(cfg)
    assert abs(ours.active - (total - comps["experts"] * (e - k) // e)) <= 1
    assert spec.vision is not None and spec.vision.token_rule == "qwen3_vl" and spec.vision.encoder == "qwen3_vl"


@pytest.mark.parametrize(("batch", "tokens"), [(1, 5), (2, 13)])
def test_kv_cache_bytes_equal_a_real_forward_pass(batch, tokens):
    """Every layer caches full-attention K/V (Qwen3VLMoeTextConfig has no sliding-window field), dense or MoE."""
    cfg = _config({"mlp_only_layers": [1]})
    torch.manual_seed(0)
    model = build(cfg, device="cpu", dtype=torch.bfloat16)
    with torch.no_grad():
        cache = model(input_ids=random_ids(128, batch, tokens), use_cache=True).past_key_values
    spec = spec_from_config(cfg, name="qwen3-vl-moe-tiny")
    assert cache_logical_bytes(cache) == kv_cache(spec, tokens, batch, "bf16").total_bytes


@pytest.mark.parametrize("name", ROWS)
def test_catalog_rows_cache_layout_is_the_transformers_config(name):
    """KV per token = 2 (K, V) x layers x kv_heads x head_dim x 2 bytes, each factor read by transformers."""
    entry = entries()[name]
    text = hf_config(entry.config).get_text_config()
    assert getattr(text, "sliding_window", None) is None
    per_token = 2 * text.num_hidden_layers * text.num_key_value_heads * text.head_dim * 2
    assert kv_cache(entry.spec(), 1000, 1, "bf16").total_bytes == 1000 * per_token
    assert entry.source and entry.retrieved


@pytest.mark.parametrize("name", ROWS)
def test_infer_with_images_counts_the_processor_tokens(name):
    from PIL import Image
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil
    spec = entries()[name].spec()
    v = spec.vision
    assert v is not None
    proc = Qwen2VLImageProcessorPil(min_pixels=v.min_pixels, max_pixels=v.max_pixels, patch_size=v.patch_size,
                                    merge_size=v.spatial_merge_size, temporal_patch_size=v.temporal_patch_size)
    grid = proc(images=[Image.new("RGB", (1024, 768))], return_tensors="np")["image_grid_thw"][0]
    per_image = int(np.prod(grid)) // v.spatial_merge_size**2 + DELIMITERS["qwen3_vl"]
    est = estimate_inference(spec, context=4096, images=3, image_size=(1024, 768))
    assert est.details["media_tokens"] == 3 * per_image
    kv = {i.name: i.bytes for i in est.items}["kv_cache"]
    assert kv == {i.name: i.bytes for i in estimate_inference(spec, context=4096 + 3 * per_image).items}["kv_cache"]



@pytest.mark.parametrize("name", ROWS)
def test_the_qwen3_vl_encoder_peak_is_vllms_profile_peak_with_many_large_images(name):
    """16 full-HD images in one request: vLLM's profile run still encodes one dummy image of the processor's largest
    size (vllm/multimodal/encoder_budget.py _get_max_items), not them; the Qwen3-VL tower's forward over every
    patch (eqs. 5-8 of formulas/vision_activations.py, checked against live tensors in test_vision_activations.py,
    DeepStack features held at the text width) is the activation peak, as for the dense Qwen3-VL."""
    from llmsizer.formulas.vision_activations import qwen_encoder_activation_bytes
    from llmsizer.formulas.vision_tokens import image_tokens
    spec = entries()[name].spec()
    assert spec.vision is not None
    est = estimate_inference(spec, context=256, images=16, image_size=(1920, 1080), engine="vllm")
    # the largest image: the processor's max_pixels as a square (vLLM get_image_size_with_most_features)
    side = math.isqrt(spec.vision.max_pixels)
    patches = image_tokens(spec.vision, side, side).encoder_patches
    assert patches == (side // spec.vision.patch_size) ** 2 and patches // 4 > 2048  # one item: max(B, T) // T = 1
    want = qwen_encoder_activation_bytes(spec.vision, patches, patches, spec.hidden_size, 2, "flash")
    assert est.item("activations").bytes == want.peak_bytes
