"""The vision encoder's activation peak (formulas/vision_activations.py) against live tensors of a real CPU forward.

Independent truth: ``torch.distributed._tools.mem_tracker.MemTracker`` follows every storage created during
``Gemma3ForConditionalGeneration.get_image_features`` (SigLIP encoder + multimodal projector) of a small Gemma 3
(vision: hidden 64, intermediate 256, 4 heads, 2 layers, 224 px images of 14 px patches = 256 patches) on images
built in the model dtype before the tracker starts; parameters are subtracted and the pixel tensor added back.

Measured (transformers 5.24, torch 2.13 CPU; bytes incl. pixels, 1 image; 2 images: twice), all predicted exactly:
    mlp-bound        fp32 sdpa 1,388,544   fp32 eager 3,092,480   bf16 sdpa 694,272   bf16 eager 3,119,104
    attention-bound  fp32 sdpa 1,650,688   fp32 eager 5,582,848   bf16 sdpa 825,344   bf16 eager 5,937,152
(The attention-bound shape showed that q, k, v and the attention output are all alive when out_proj writes:
8 T d, not the 7 T d first written from the MLP-bound trace alone.)
"""

from __future__ import annotations

import pytest

from llmsizer.formulas.vision_activations import encoder_activation_bytes
from llmsizer.readers.hf_config import spec_from_config
from oracle_utils import build, torch

mem_tracker = pytest.importorskip("torch.distributed._tools.mem_tracker")

pytestmark = pytest.mark.slow

CONFIG = {"model_type": "gemma3",
          "text_config": {"model_type": "gemma3_text", "vocab_size": 512, "hidden_size": 64, "intermediate_size": 128,
                          "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 32},
          "vision_config": {"model_type": "siglip_vision_model", "hidden_size": 64, "intermediate_size": 256,
                            "num_hidden_layers": 2, "num_attention_heads": 4, "image_size": 224, "patch_size": 14,
                            "vision_use_head": False},
          "mm_tokens_per_image": 64}
# a second shape where the attention phase (eq. 1) is the larger: intermediate = hidden, 8 heads, 3 layers
WIDE = {**CONFIG, "vision_config": {**CONFIG["vision_config"], "hidden_size": 128, "intermediate_size": 128,
                                    "num_attention_heads": 8, "num_hidden_layers": 3}}
DTYPES = {"fp32": (torch.float32, 4), "bf16": (torch.bfloat16, 2)}
TOLERANCE = 0.05


def _measure(cfg: dict, dtype: str, attention: str, images: int) -> int:  # type: ignore[type-arg]
    dt, _ = DTYPES[dtype]
    model = build(cfg, device="cpu", dtype=dt, attn=attention)
    params = sum(p.numel() * p.element_size() for p in model.parameters())
    params += sum(b.numel() * b.element_size() for b in model.buffers())
    pixels = torch.zeros(images, 3, 224, 224, dtype=dt)
    tracker = mem_tracker.MemTracker()
    tracker.track_external(model)
    with torch.no_grad(), tracker:
        model.get_image_features(pixels)
    peak = int(tracker.get_tracker_snapshot("peak")[torch.device("cpu")]["Total"])
    return peak - params + pixels.numel() * pixels.element_size()


@pytest.mark.parametrize("images", [1, 2])
@pytest.mark.parametrize("attention", ["sdpa", "eager"])
@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("cfg", [CONFIG, WIDE], ids=["mlp-bound", "attention-bound"])
def test_encoder_peak_matches_live_tensors(cfg, dtype, attention, images, capsys):
    spec = spec_from_config(cfg, name="tiny-gemma3")
    assert spec.vision is not None
    patches = (224 // 14) ** 2
    pred = encoder_activation_bytes(spec.vision, images, patches, DTYPES[dtype][1], attention).peak_bytes
    real = _measure(cfg, dtype, attention, images)
    with capsys.disabled():
        print(f"\n[{dtype} {attention} x{images}] measured {real:,} B, predicted {pred:,} B, ratio {pred / real:.3f}")
    assert abs(pred / real - 1) <= TOLERANCE
