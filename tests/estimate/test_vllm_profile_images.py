"""vLLM's profile run encodes dummy images of the processor's largest size, not the request's.

Rule: vllm-project/vllm@042a4d3e vllm/multimodal/encoder_budget.py ``MultiModalBudget._get_max_items`` and
vllm/v1/core/encoder_cache_manager.py ``compute_mm_encoder_budget``: n = max(1, min(max(B, T) // T, S x max(1,
max_model_len // T))) items of T embeddings, B = max_num_batched_tokens. T for Qwen2.5-VL from its published
preprocessor_config.json (max_pixels 12845056 = 3584^2, patch 14, merge 2): (3584/14)^2 = 65,536 patches,
/ 4 = 16,384 tokens; written out here, not read from llmsizer.
"""

from __future__ import annotations

import llmsizer
from llmsizer.formulas.vision_activations import qwen_encoder_activation_bytes

MODEL, PATCHES, TOKENS = "qwen2.5-vl-7b-instruct", (3584 // 14) ** 2, (3584 // 14) ** 2 // 4


def _est(**kw):
    return llmsizer.estimate_inference(MODEL, engine="vllm", context=24576, device="l40s", **kw)


def _item(est, name):
    return next(i for i in est.items if i.name == name)


def test_profile_does_not_follow_the_request_images() -> None:
    """The pool is sized at start-up: one small image, four small images and no image give the same activation
    item (before: 1.41 / 1.41 GiB with small images, 11.36 GiB with four 3584x3584 ones)."""
    acts = {_item(_est(**kw), "activations").bytes for kw in (
        {}, {"images": 1, "image_size": (1024, 768)}, {"images": 4, "image_size": (1024, 768)},
        {"images": 4, "image_size": (3584, 3584)})}
    assert len(acts) == 1


def test_profile_items_follow_the_encoder_budget() -> None:
    """B = 2048 (L40S default): max(2048, 16384) // 16384 = 1 item; B = 65536: 4 items, packed in one tower
    forward (eqs. 5-8, checked against live tensors in tests/formulas)."""
    spec = llmsizer.load_model(MODEL)
    v = spec.vision
    for mnbt, n in ((2048, 1), (65536, 4)):
        enc = qwen_encoder_activation_bytes(v, n * PATCHES, PATCHES, spec.hidden_size, 2, "flash").peak_bytes
        est = _est(max_num_batched_tokens=mnbt)
        act = _item(est, "activations")
        assert act.bytes >= enc and f"{n} dummy image(s)" in act.formula and f"{TOKENS} tokens each" in act.formula


def test_request_images_still_add_context_tokens() -> None:
    """The request's images are context: 4 images of 1024x768 (smart_resize to 1036x756 = 74x54 patches / 4 =
    999 tokens + 2 delimiters each) lengthen every sequence's KV by 4 x 1001 tokens, in 16-token blocks; Qwen2.5-VL-7B
    (config.json: 28 layers, 4 KV heads of 128) keeps 28 x 2 x 4 x 128 x 2 B = 57,344 B per token."""
    plain = _est().details["kv_bytes_per_sequence"]
    with_images = _est(images=4, image_size=(1024, 768)).details["kv_bytes_per_sequence"]
    blocks = -(-(24576 + 4 * 1001) // 16) * 16
    assert with_images - plain == (blocks - 24576) * 57344


def test_a_video_model_is_told_its_video_profile_is_not_modelled() -> None:
    """Qwen2.5-VL's processor takes video (video bounds in its config); vLLM may profile video at long contexts
    (encoder_budget.py get_modality_with_max_tokens), which llmsizer does not model: a warning says so. A text-only
    model gets none."""
    assert llmsizer.load_model(MODEL).vision.video_max_pixels
    assert any("takes video" in w and "not modelled" in w for w in _est().warnings)
    text = llmsizer.estimate_inference("qwen2.5-0.5b", engine="vllm", context=4096, device="l40s")
    assert not any("takes video" in w for w in text.warnings)
