"""llama.cpp's --image-min-tokens / --image-max-tokens: tokens per image of a dynamic-resolution model.

Independent truth: each count is derived by hand in the comment beside it from llama.cpp's code (ggml-org/llama.cpp
@ 0c1e57098bba43ac29e6e3b677cdceebdd22334f, the copy vendored in llama-cpp-python 0.3.36), not from llmsizer's
output: common/arg.cpp L2637-2650 stores the flags (default -1); tools/mtmd/clip.cpp L210-215 keeps a positive one
as ``custom_image_min/max_tokens``; clip-model.h L192-196 ``set_limit_image_tokens(8, 4096)`` (clip.cpp L1668-1678,
Qwen2/2.5/3-VL) then sets min/max pixels = (custom or 8 / 4096) x (patch x 2)^2; mtmd-image.cpp L122-157
``calc_size_preserved_ratio``: W, H rounded (std::round) to multiples of align = patch x 2; over max: beta =
sqrt(H x W / max), floor(side / beta / align) x align; under min: beta = sqrt(min / (H x W)), ceil(side x beta /
align) x align; tokens = (W / align) x (H / align) (clip.cpp L4190-4206) + <|vision_start|> <|vision_end|>.
"""

from __future__ import annotations

import dataclasses

import pytest

from llmsizer.formulas.vision_tokens import LLAMACPP_MTMD, image_tokens, llamacpp_video_tokens
from llmsizer.specs import VisionSpec

# the VisionSpecs of test_vision_tokens.py (each model's preprocessor_config / vision_config)
QWEN25 = VisionSpec(1280, 3420, 32, 0, 14, token_rule="qwen2_vl", spatial_merge_size=2, temporal_patch_size=2,
                    min_pixels=3136, max_pixels=12845056, video_max_pixels=12845056)
QWEN3 = VisionSpec(1152, 4304, 27, 0, 16, token_rule="qwen3_vl", spatial_merge_size=2, temporal_patch_size=2,
                   min_pixels=65536, max_pixels=16777216)


def bounded(lo: int, hi: int):
    return dataclasses.replace(LLAMACPP_MTMD, qwen_tokens=(lo, hi))


@pytest.mark.parametrize(("spec", "w", "h", "lo", "hi", "want"), [
    # --image-max-tokens 1024, 4000x3000 on Qwen2.5-VL (align 28): 4004 x 2996 > 1024 x 784 = 802,816 px;
    # beta = sqrt(12,000,000 / 802,816) = 3.86618; floor(4000 / 3.86618 / 28) = floor(36.95) = 36,
    # floor(3000 / 3.86618 / 28) = floor(27.71) = 27: 36 x 27 = 972 + 2 (the default 8..4096 gives 73 x 55 + 2 = 4017)
    (QWEN25, 4000, 3000, 8, 1024, 974),
    # --image-min-tokens 2048, 640x480: 644 x 476 = 306,544 < 2048 x 784 = 1,605,632; beta = sqrt(1,605,632 /
    # 307,200) = 2.28619; ceil(640 x 2.28619 / 28) = ceil(52.26) = 53, ceil(480 x 2.28619 / 28) = ceil(39.19) = 40:
    # 53 x 40 = 2120 + 2 (the default: 23 x 17 = 391 + 2)
    (QWEN25, 640, 480, 2048, 4096, 2122),
    # --image-max-tokens 512, 1280x720: 1288 x 728 = 937,664 > 512 x 784 = 401,408; beta = sqrt(921,600 / 401,408)
    # = 1.51523; floor(1280 / 1.51523 / 28) = floor(30.17) = 30, floor(720 / 1.51523 / 28) = floor(16.97) = 16: 482
    (QWEN25, 1280, 720, 8, 512, 482),
    # a bound the image is inside changes nothing: 1920x1080 -> 1932 x 1092, 69 x 39 = 2691 in 1024..4096: 2693
    (QWEN25, 1920, 1080, 1024, 4096, 2693),
    # Qwen3-VL (patch 16, align 32), --image-max-tokens 512, 1280x720: 1280 x 736 (720 / 32 = 22.5 rounds half away
    # to 23) = 942,080 > 512 x 1024 = 524,288; beta = sqrt(921,600 / 524,288) = 1.32583; floor(1280 / 1.32583 / 32)
    # = floor(30.17) = 30, floor(720 / 1.32583 / 32) = floor(16.97) = 16: 480 + 2
    (QWEN3, 1280, 720, 8, 512, 482),
])
def test_token_bounds_clamp_the_resize(spec, w, h, lo, hi, want):
    assert image_tokens(spec, w, h, rules=bounded(lo, hi)).tokens == want


def test_video_frames_take_the_same_bounds():
    """mtmd hands each frame to the image preprocessor (mtmd-helper.cpp L764-795), so the bound applies per frame:
    8 frames at 4 frames/s are the runs [1, 7] ("[0m0.00s]" after frame 0, 9 tokens), ceil(1/2) + ceil(7/2) = 5 chunks
    of one frame's 480 tokens + 2, plus "Video:" (2): 5 x 482 + 2 + 9 = 2421 (default bounds: 5 x 1198 + 11)."""
    assert llamacpp_video_tokens(QWEN25, 8, 1280, 720, bounded(8, 512)).tokens == 2421
    assert llamacpp_video_tokens(QWEN25, 8, 1280, 720, LLAMACPP_MTMD).tokens == 5 * 1198 + 11
