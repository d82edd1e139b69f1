"""The vision encoder's FLOPs (formulas/vision_compute.py eqs. V1-V4) against a real forward of each tower layout.

Independent truth: ``torch.utils.flop_counter.FlopCounterMode`` counts the FLOPs of every matrix product and
convolution the real transformers forward dispatches (the tower and its projector/merger, as the model's forward runs them),
2 per multiply-add, on small towers of the five layouts (the configs of tests/formulas/test_vision_activations.py),
in fp32 with eager attention (FlopCounterMode has no rule for the CPU SDPA kernel; eager runs its two products as
matmuls). The images and videos are sized through our processor rules (formulas/vision_tokens.py), so the test
also checks that those rules hand the formula the sequences the tower runs. Before this formula the prefill of an
image or video prompt counted the language model alone (estimate/speed.py dropped the vision parameters).
"""

from __future__ import annotations

import pytest
from test_vision_activations import CONFIG, WIDE, _llama4, _mllama, _qwen

from llmsizer.formulas.vision_compute import media_encoder_flops
from llmsizer.formulas.vision_tokens import image_tokens, video_tokens
from llmsizer.readers.hf_config import spec_from_config
from oracle_utils import build, torch

flop_counter = pytest.importorskip("torch.utils.flop_counter")

pytestmark = pytest.mark.slow


def _counted(run) -> int:  # type: ignore[no-untyped-def]
    counter = flop_counter.FlopCounterMode(display=False)
    with torch.no_grad(), counter:
        run()
    return int(counter.get_total_flops())


def _model(cfg: dict):  # type: ignore[no-untyped-def,type-arg]
    return build(cfg, device="cpu", dtype=torch.float32, attn="eager")


@pytest.mark.parametrize("cfg", [CONFIG, WIDE], ids=["siglip", "siglip-wide"])
@pytest.mark.parametrize("images", [1, 2])
def test_siglip_flops_match_the_forward(cfg, images):
    spec = spec_from_config(cfg, name="tiny-gemma3")
    assert spec.vision is not None
    model = _model(cfg)
    real = _counted(lambda: model.get_image_features(torch.zeros(images, 3, 224, 224)))
    pred = images * media_encoder_flops(spec.vision, image_tokens(spec.vision, 224, 224))
    assert pred == pytest.approx(real, rel=0.002), (pred, real)


# (kind, shape, image width x height in pixels, video frames or 0); the sizes are multiples of patch x merge, so the
# processor keeps them (smart_resize), and the Qwen2.5 grids are chosen to cut windows with a short last row/column
QWEN_CASES = [
    ("qwen2_5_vl", {}, (224, 224), 0),                       # 16 x 16 patches: 2 x 2 windows of 4 x 4 units
    ("qwen2_5_vl", {}, (168, 280), 0),                       # 20 x 12 patches: windows 4 + 4 + 2, 4 + 2
    ("qwen2_5_vl", {"hidden": 128, "inter": 64, "heads": 8}, (252, 140), 0),
    ("qwen2_5_vl", {}, (168, 112), 4),                       # a video: 2 temporal groups of 8 x 12 patches
    ("qwen3_vl", {}, (256, 256), 0),
    ("qwen3_vl", {"inter": 512}, (192, 320), 0),
    ("qwen3_vl", {}, (128, 192), 4),
]


@pytest.mark.parametrize(("kind", "shape", "size", "frames"), QWEN_CASES,
                         ids=[f"{k}-{'-'.join(map(str, s.values())) or 'base'}-{w}x{h}-{f}f"
                              for k, s, (w, h), f in QWEN_CASES])
def test_qwen_flops_match_the_forward(kind, shape, size, frames):
    cfg = _qwen(kind, **shape)
    # the processor bounds wide enough that these small sizes are kept
    cfg["preprocessor_config"] = {"min_pixels": 1024, "max_pixels": 10 ** 7}
    cfg["video_preprocessor_config"] = {"min_pixels": 1024, "max_pixels": 10 ** 8}
    spec = spec_from_config(cfg, name=f"tiny-{kind}")
    v = spec.vision
    assert v is not None
    width, height = size
    media = video_tokens(v, frames, width, height) if frames else image_tokens(v, width, height)
    rows, cols = media.encoder_grid
    assert (rows, cols) == (height // v.patch_size, width // v.patch_size)
    grid = torch.tensor([[media.encoder_sequences, rows, cols]])
    pixels = torch.zeros(media.encoder_sequences * rows * cols, 3 * v.temporal_patch_size * v.patch_size ** 2)
    model = _model(cfg)
    if frames:
        real = _counted(lambda: model.get_video_features(pixels, grid))
    else:
        real = _counted(lambda: model.get_image_features(pixels, grid))
    pred = media_encoder_flops(v, media)
    assert pred == pytest.approx(real, rel=0.002), (pred, real)


@pytest.mark.parametrize("case", [{}, {"d": 128, "heads": 8, "inter": 512, "img": 48, "layers": 3}])
@pytest.mark.parametrize("canvas", [(32, 32), (64, 32)], ids=["one-tile", "two-tiles-and-global"])
def test_llama4_flops_match_the_forward(case, canvas):
    cfg = _llama4(**case)
    spec = spec_from_config(cfg, name="tiny-llama4")
    v = spec.vision
    assert v is not None
    media = image_tokens(v, *(x * v.image_size // 32 for x in canvas))
    model = _model(cfg)
    pixels = torch.zeros(media.encoder_sequences, 3, v.image_size, v.image_size)

    def run() -> None:  # the tower and its pixel-shuffle adapter, then the projector (Llama4Model.forward)
        features = model.get_image_features(pixel_values=pixels, return_dict=True).last_hidden_state
        model.multi_modal_projector(features.view(-1, features.size(-1)))
    real = _counted(run)
    pred = media_encoder_flops(v, media)
    assert pred == pytest.approx(real, rel=0.002), (pred, real)


@pytest.mark.parametrize("case", [{}, {"img": 112, "tiles": 2}, {"d": 64, "heads": 8, "nl": 2, "ng": 1, "idx": (1,)}])
def test_mllama_flops_match_the_forward(case):
    cfg = _mllama(**case)
    spec = spec_from_config(cfg, name="tiny-mllama")
    v = spec.vision
    assert v is not None
    model = _model(cfg)
    pixels = torch.zeros(1, 1, v.max_tiles, 3, v.image_size, v.image_size)

    def run() -> None:
        states = model.model.vision_model(pixel_values=pixels, aspect_ratio_ids=torch.ones(1, 1, dtype=torch.long),
                                          aspect_ratio_mask=torch.ones(1, 1, v.max_tiles, dtype=torch.long)
                                          ).last_hidden_state
        model.model.multi_modal_projector(states)
    real = _counted(run)
    pred = media_encoder_flops(v, image_tokens(v, v.image_size, v.image_size))
    assert pred == pytest.approx(real, rel=0.002), (pred, real)
