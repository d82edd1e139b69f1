"""Tokens per image on llama.cpp: its own mtmd preprocessing, not the transformers processor (probe27 D1).

Independent truth: each count below is derived by hand, in the comment beside it, from llama.cpp's code
(ggml-org/llama.cpp @ 0c1e57098bba43ac29e6e3b677cdceebdd22334f, the copy vendored in llama-cpp-python 0.3.36;
paths under tools/mtmd/), not from llmsizer's output:

- Qwen2/2.5/3-VL: clip.cpp L1668-1678 ``set_limit_image_tokens(8, 4096)``: min/max pixels = 8 / 4096 tokens x
  (patch x 2)^2 (clip-model.h L192-196); mtmd-image.cpp L122-157 ``calc_size_preserved_ratio``: W, H rounded
  (std::round, halves up) to multiples of align = patch x 2; over max: beta = sqrt(H x W / max), floor(H / beta /
  align) x align; under min: beta = sqrt(min / (H x W)), ceil(H x beta / align) x align; tokens = (W / align) x
  (H / align) (clip.cpp L4190-4206), + <|vision_start|> <|vision_end|> (mtmd.cpp L694-704).
- Llama 4: clip.cpp L1788-1794 ``set_llava_uhd_res_candidates(model, 3)`` -> canvases x*336 by y*336, x, y in 1..3
  but (1, 1) (L3962-3975); mtmd-image.cpp L508-560: no side over 336 -> the overview alone; else the canvas with
  the largest min(resized W x resized H, W x H) (scale = min(cw / W, ch / H)), least wasted area on a tie
  (L669-690), its tiles + the overview, 144 tokens each ((336 / 14)^2 / 4: clip.cpp L4213-4224), + <|image_start|>
  <|image_end|> only (mtmd.cpp L767-776: no tile separators at this commit).
- Gemma 3: mtmd.cpp L738-745: one 896x896 image, 256 tokens + <start_of_image> <end_of_image>; no pan-and-scan.

The transformers processor's counts (vLLM, SGLang, transformers) are checked against the real processors in
test_vision_tokens.py; here they are restated by hand only where the two engines are compared.
"""

from __future__ import annotations

import pytest

from llmsizer.errors import InputError
from llmsizer.formulas.vision_tokens import (
    LLAMACPP_MTMD,
    image_tokens,
    llamacpp_timestamp_tokens,
    llamacpp_video_parts,
)
from llmsizer.specs import VisionSpec

# the VisionSpecs of test_vision_tokens.py (each model's preprocessor_config / vision_config)
QWEN25 = VisionSpec(1280, 3420, 32, 0, 14, token_rule="qwen2_vl", spatial_merge_size=2, temporal_patch_size=2,
                    min_pixels=3136, max_pixels=12845056)
QWEN3 = VisionSpec(1152, 4304, 27, 0, 16, token_rule="qwen3_vl", spatial_merge_size=2, temporal_patch_size=2,
                   min_pixels=65536, max_pixels=16777216)
GEMMA3 = VisionSpec(1152, 4304, 27, 896, 14, token_rule="fixed", tokens_per_image=256, pan_and_scan=True)
LLAMA4 = VisionSpec(1408, 5632, 34, 336, 14, token_rule="llama4", spatial_merge_size=2, max_tiles=16)


@pytest.mark.parametrize(("w", "h", "llamacpp", "processor"), [
    # 4000x3000: align 28 -> 4004 x 2996 = 11,995,984 px > 4096 x 784 = 3,211,264; beta = sqrt(12e6 / 3,211,264)
    # = 1.93309; floor(4000 / 1.93309 / 28) = floor(73.90) = 73, floor(3000 / 1.93309 / 28) = floor(55.43) = 55:
    # 73 x 55 = 4015 + 2. The processor: 11,995,984 <= max_pixels 12,845,056, so 143 x 107 = 15,301 + 2
    (4000, 3000, 4017, 15303),
    # 1920x1080: 1932 x 1092 (69 x 39 = 2691) inside both bounds: the same 2691 + 2
    (1920, 1080, 2693, 2693),
    # 70x70: 70 / 28 = 2.5 -> std::round 3 -> 84 x 84 = 7056 >= 8 x 784 = 6272: 3 x 3 = 9 + 2. The processor:
    # Python round(2.5) = 2 -> 56 x 56 = 3136 >= min_pixels 3136: 2 x 2 = 4 + 2
    (70, 70, 11, 6),
    # 20x20: 28 x 28 = 784 < 6272; beta = sqrt(6272 / 400) = 3.9598; ceil(20 x 3.9598 / 28) = ceil(2.83) = 3:
    # 3 x 3 = 9 + 2
    (20, 20, 11, None),
])
def test_qwen25_vl_on_llamacpp(w, h, llamacpp, processor):
    assert image_tokens(QWEN25, w, h, rules=LLAMACPP_MTMD).tokens == llamacpp
    if processor is not None:
        assert image_tokens(QWEN25, w, h).tokens == processor


@pytest.mark.parametrize(("w", "h", "llamacpp", "processor"), [
    # 3840x2160: align 32 -> 3840 x 2176 (67.5 -> 68) = 8,355,840 > 4096 x 1024 = 4,194,304; beta =
    # sqrt(8,294,400 / 4,194,304) = 1.40625; floor(3840 / 1.40625 / 32) = floor(85.33) = 85, 2160 / 1.40625 / 32 =
    # 48: 85 x 48 = 4080 + 2. The processor (max_pixels 16,777,216): 120 x 68 = 8160 + 2
    (3840, 2160, 4082, 8162),
    # 1024x1024: 32 x 32 = 1024 tokens inside both bounds (+ 2)
    (1024, 1024, 1026, 1026),
    # 100x60: 96 x 64 = 6144 < 8 x 1024 = 8192; beta = sqrt(8192 / 6000) = 1.16847; ceil(100 x 1.16847 / 32) =
    # ceil(3.65) = 4, ceil(60 x 1.16847 / 32) = ceil(2.19) = 3: 12 + 2. The processor (min_pixels 65,536): beta =
    # sqrt(65536 / 6000) = 3.30496; ceil(10.33) = 11, ceil(6.20) = 7: 77 + 2
    (100, 60, 14, 79),
])
def test_qwen3_vl_on_llamacpp(w, h, llamacpp, processor):
    assert image_tokens(QWEN3, w, h, rules=LLAMACPP_MTMD).tokens == llamacpp
    assert image_tokens(QWEN3, w, h).tokens == processor


@pytest.mark.parametrize(("w", "h", "tiles", "processor"), [
    # 1024x768: canvas 1008x1008 (scale min(0.984, 1.3125) = 0.984 -> 1008 x 756 = 762,048 px kept, the most of
    # the 8; 1008x672 keeps 896 x 672 = 602,112): 3 x 3 tiles + the overview. The processor: 3x4 + global, 1887
    (1024, 768, 9, 1887),
    # 336x336: no side over 336: the overview alone. The processor: one tile, 144 + 3 delimiters
    (336, 336, 0, 147),
    # 2000x500: 1008x336 keeps 1008 x 252 = 254,016 px (scale 0.504), more than 672x336's 672 x 168 (0.336) and
    # 336x672's 336 x 84; 1008x672 and 1008x1008 keep the same at more waste: 3 x 1 tiles + overview
    (2000, 500, 3, None),
    # 500x400: 672x672 (scale 1.344) keeps min(672 x 537, 200,000) = 200,000, all of the image, with 251,584 px
    # wasted; 1008x672 (1.68) keeps 200,000 too but wastes 477,376; 1008x336 keeps 420 x 336 = 141,120:
    # 2 x 2 tiles + overview
    (500, 400, 4, None),
])
def test_llama4_on_llamacpp(w, h, tiles, processor):
    # 144 tokens per tile and overview + <|image_start|> <|image_end|>
    assert image_tokens(LLAMA4, w, h, rules=LLAMACPP_MTMD).tokens == 144 * (tiles + 1) + 2
    assert image_tokens(LLAMA4, w, h, rules=LLAMACPP_MTMD).encoder_sequences == tiles + 1
    if processor is not None:
        assert image_tokens(LLAMA4, w, h).tokens == processor


@pytest.mark.parametrize(("w", "h"), [(1920, 1080), (896, 896), (100, 60)])
def test_gemma3_on_llamacpp_is_one_fixed_image(w, h):
    assert image_tokens(GEMMA3, w, h, rules=LLAMACPP_MTMD).tokens == image_tokens(GEMMA3, w, h).tokens == 256 + 2
    with pytest.raises(InputError, match="no pan-and-scan"):
        image_tokens(GEMMA3, w, h, pan_and_scan=True, rules=LLAMACPP_MTMD)
    # the processor's pan-and-scan: 1920x1080 -> round(1.78) = 2 crops, each another 258
    if (w, h) == (1920, 1080):
        assert image_tokens(GEMMA3, w, h, pan_and_scan=True).tokens == 3 * 258


def test_llamacpp_video_runs_and_timestamps():
    """mtmd-helper.cpp L822-837 @ 0c1e5709 at 4 frames/s: frame k at k / 4 s; after frame 0, 20, 40, ... a timestamp
    (0 s, 5 s, 10 s, ...), so 41 frames are [F0] | F1..F20 | F21..F40 and 3 timestamps; "[%dm%.2fs]" is one
    token per character under the Qwen2 pre-tokenizer: "[0m5.00s]" 9, "[0m55.00s]" 10, 65 s "[1m5.00s]" 9."""
    assert llamacpp_video_parts(41) == ([1, 20, 20], [0.0, 5000.0, 10000.0])
    assert llamacpp_video_parts(1) == ([1], [0.0])
    assert llamacpp_video_parts(3) == ([1, 2], [0.0])
    assert [llamacpp_timestamp_tokens(ms) for ms in (0, 5000, 55000, 65000, 600000)] == [9, 9, 10, 9, 10]
