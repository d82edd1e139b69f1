"""Tokens an image or a video adds to a multimodal model's context, from each family's preprocessing rules.

An image processor turns one picture into a fixed or size-dependent number of placeholder tokens; the model
replaces them with the vision tower's output, so they occupy the language model's context (and its KV cache) like
text. Each rule below follows the transformers 5.24 processor code line by line (paths under
``src/transformers/models/``); ``tests/formulas/test_vision_tokens.py`` runs the real processors on CPU for several
image sizes and compares.

Rules (``VisionSpec.token_rule``):

- ``fixed`` (Gemma 3, LLaVA): every image is resized to the tower's square ``image_size`` and becomes
  ``tokens_per_image`` soft tokens. Gemma 3: ``mm_tokens_per_image`` = 256 after 4x4 average pooling of the
  64x64 SigLIP patches (``gemma3/processing_gemma3.py`` L41-49: ``image_seq_length=256``, ``full_image_sequence =
  "\\n\\n" + boi + image_token * 256 + eoi + "\\n\\n"``); pan-and-scan is off by default (L29
  ``"do_pan_and_scan": False``). With it, a wide or tall image also gives ``pan_and_scan_crops`` crops
  (``gemma3/image_processing_gemma3.py`` L104-148, defaults ``processing_gemma3.py`` L30-32: min crop 256 px, at
  most 4 crops, ratio 1.2), each another full image sequence (``processing_gemma3.py`` L154-163
  ``replace_image_token``; the sentence it adds around them, "Here is the original image ... crops to help you see
  better", is text, not counted). LLaVA: (image_size / patch)^2, minus the CLS token under the "default" feature
  strategy (``llava/processing_llava.py`` L66-68).
- ``qwen2_vl`` (Qwen2-VL, Qwen2.5-VL, Qwen3-VL images): ``smart_resize`` rounds height and width to multiples of
  factor = patch x merge, then scales into [min_pixels, max_pixels] (``qwen2_vl/image_processing_qwen2_vl.py``
  L63-89); the grid is (H / patch) x (W / patch) patches (L185, L251 ``[1, grid_h, grid_w]``) and the merger fuses
  merge x merge patches into one token, so tokens = grid_h x grid_w / merge^2 (``qwen2_vl/processing_qwen2_vl.py``
  ``image_grid_thw.prod() // merge_length``), between <|vision_start|> and <|vision_end|>.
- Qwen2-VL video (Qwen2.5-VL): the same ``smart_resize`` per frame with the video processor's pixel bounds, the
  frames padded to a multiple of ``temporal_patch_size`` (``qwen2_vl/video_processing_qwen2_vl.py`` L44-70,
  L288-294): tokens = ceil(F / 2) x grid_h x grid_w / merge^2.
- ``qwen3_vl`` video: ``smart_resize`` over t x h x w (``qwen3_vl/video_processing_qwen3_vl.py`` L75-108) with
  patch 16; the grid as above (the processor's optional ``cap_pixels_per_frame`` is off by default, L283-292, and
  not modelled). ``Qwen3VLProcessor.replace_video_token`` (``qwen3_vl/processing_qwen3_vl.py`` L75-103) writes,
  for each temporal group, a text timestamp ``f"<{t:.1f} seconds>"`` then <|vision_start|>, grid_h x grid_w / merge^2
  <|video_pad|>, <|vision_end|>; it replaces only the prompt's <|video_pad|> (``processing_utils.py`` L941-975),
  so the chat template's own <|vision_start|> ... <|vision_end|> around it stay (``DELIMITERS``). The timestamp is
  the mean time of the group's first and last frame (``_calculate_timestamps`` L173-184); the Qwen2 tokenizer's
  pre-tokenizer (``qwen2/tokenization_qwen2.py`` L33 ``PRETOKENIZE_REGEX``) splits it into "<", one piece per
  digit, ".", " seconds", ">" (``qwen3_vl_timestamp_tokens``). The frame times are not an input: the frames are
  taken as sampled at ``QWEN3_VL_VIDEO_FPS`` (the processor's ``fps``), recorded by the caller as an assumption.
- ``llama4``: the image is fitted to the canvas of at most ``max_tiles`` (16) tiles of ``image_size`` (336) that
  needs the least up- or down-scaling (``llama4/image_processing_llama4.py`` L88-141 ``find_supported_resolutions``,
  L180-275 ``get_best_fit``), split into tiles, plus one global tile when there is more than one
  (L411-421); each tile gives (336 / 14)^2 / 4 = 144 tokens after the 2x2 pixel shuffle, with one separator after
  each tile but the last of a row, one per row, and <|image_start|>, <|image|>, <|image_end|>
  (``llama4/processing_llama4.py`` L89-132 ``_prompt_split_image``).
- ``mllama`` (Llama-3.2-Vision): one <|image|> token in the context; the tower's output enters the text model as
  cross-attention states, max_num_tiles x ((560 / 14)^2 + 1) = 4 x 1601 per image whatever its size (the
  processor pads every image to ``max_image_tiles`` tiles: ``mllama/image_processing_mllama.py``; the model
  reshapes the vision output to [images x tiles x 1601, hidden]: ``mllama/modeling_mllama.py`` L1355-1357), held
  as K/V by every cross-attention layer.

Engines that run their own preprocessing (``ImageRules``; vLLM, SGLang and transformers call the transformers
processor, so ``TRANSFORMERS_PROCESSOR``). llama.cpp's mtmd (``LLAMACPP_MTMD``; ggml-org/llama.cpp @ 0c1e5709,
the copy vendored in llama-cpp-python 0.3.36, paths under ``tools/mtmd/``) departs from it:

- Qwen2-VL / Qwen2.5-VL / Qwen3-VL: ``clip.cpp`` L1668-1678 ``set_limit_image_tokens(8, 4096)`` replaces the
  processor's min/max_pixels with 8 .. 4096 merged tokens x (patch x merge)^2 pixels (``clip-model.h`` L192-196),
  and ``mtmd-image.cpp`` L772-787 (``mtmd_image_preprocessor_dyn_size``) resizes with ``calc_size_preserved_ratio``
  (L122-157): ``smart_resize`` in float32 with C++ ``std::round`` (half away from zero, where Python's ``round`` takes
  half to even); tokens = (W / patch / 2) x (H / patch / 2) (``clip.cpp`` L4190-4206), between <|vision_start|> and
  <|vision_end|> (``mtmd.cpp`` L694-704). So a 4000x3000 image is 4,015 + 2 tokens, not the processor's 15,301 + 2.
  llama-server / mtmd-cli's ``--image-min-tokens N`` / ``--image-max-tokens N`` (``common/arg.cpp`` L2637-2650,
  default -1: the model's) reach ``hparams.custom_image_min/max_tokens`` when positive (``clip.cpp`` L210-215) and
  replace 8 / 4096 in ``set_limit_image_tokens`` (``clip-model.h`` L192-196), so ``ImageRules.qwen_tokens`` carries
  them (estimate/inference/media.py ``token_bounds``); a maximum below the minimum fails the load (``clip.cpp``
  L2057-2059). Gemma 3 (fixed size) and Llama 4 (tiles) never call it: the flags are not read there.
- Llama 4: ``clip.cpp`` L1788-1794 ``set_llava_uhd_res_candidates(model, 3)`` (L3962-3975: every x x y canvas of
  336-px tiles, x, y in 1..3, but 1x1) and ``mtmd.cpp`` L767-776 ``mtmd_image_preprocessor_llava_uhd``: an image
  with no side over 336 px is one 336x336 tile; a larger one is resized onto the candidate that keeps the most of
  its pixels (least waste on a tie: ``mtmd-image.cpp`` L669-690 ``select_best_resolution``, float32 scales), cut
  into its tiles, and the 336x336 overview goes last (L508-560); each tile or overview is 144 tokens
  (``clip.cpp`` L4213-4224: (336 / 14)^2 / 2^2); the tokens between them (``tok_sli_img_*``, ``tok_row_end``) are
  not set for Llama 4 at this commit, so only <|image_start|> and <|image_end|> (``mtmd.cpp`` L1360-1362,
  L1410-1482, L1556) are added: 144 x (tiles + 1) + 2.
- Gemma 3: ``mtmd.cpp`` L738-745 ``mtmd_image_preprocessor_fixed_size`` (``mtmd-image.cpp`` L756-766): one
  896x896 image, 256 tokens between <start_of_image> and <end_of_image>, as the processor; no pan-and-scan.
- Video (``llamacpp_video_tokens``; mtmd-cli ``/video``, llama-server's ``input_video`` content part; on by default,
  ``CMakeLists.txt`` L3-10 ``MTMD_VIDEO``): ``mtmd-helper.cpp`` L764-795 decodes the frames with ffmpeg at
  ``fps_target`` (default 4, L858-862) and hands each one on as an image bitmap marked mergeable (L787), so each frame
  is resized by the image rules above (the token bounds 8 .. 4096, not the video processor's pixel bounds). The lazy
  callback (L800-839) first returns the text "Video:" (L597, L814-819), then the frames, and after any frame whose
  time (frame / fps) reaches the next multiple of ``timestamp_interval_ms`` (default 5000) a text ``"[%dm%.2fs]"``
  (L826-837). For Qwen2-VL / Qwen2.5-VL / Qwen3-VL ``clip_model_n_temporal_merge`` is 2 (``clip.cpp`` L6092-6101):
  ``mtmd_group_mergeable_bitmaps`` (``mtmd.cpp`` L1108-1125) pairs each frame with the next part when that is also a
  frame (a timestamp between them breaks the pair), and each pair or lone frame is one image chunk of one frame's
  tokens (L1501-1508) between <|vision_start|> and <|vision_end|> (L1360-1362, L1556). No "<t seconds>" timestamps
  (Qwen3-VL's processor), and the model's video processor bounds do not apply.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass

from ..errors import InputError
from ..specs import VisionSpec

# special tokens around each image's placeholders (see the module docstring for the processor lines)
DELIMITERS = {"fixed": 2, "qwen2_vl": 2, "qwen3_vl": 2, "llama4": 3, "mllama": 0}
MAX_ASPECT_RATIO = 200  # smart_resize raises ValueError beyond it (image_processing_qwen2_vl.py L75-78)


@dataclass(frozen=True)
class MediaTokens:
    """What one image (or video) costs: ``tokens`` in the LM context (placeholders + delimiters),
    ``cross_tokens`` of cross-attention states (Llama-3.2-Vision), and the vision tower's work:
    ``encoder_sequences`` independent sequences (tiles, crops, frames groups) of ``encoder_patches`` each."""

    tokens: int
    cross_tokens: int
    encoder_sequences: int
    encoder_patches: int
    detail: str
    encoder_grid: tuple[int, int] = (0, 0)  # rows x columns of patches of each sequence (Qwen rules; (0, 0) else)


@dataclass(frozen=True)
class ImageRules:
    """How an engine turns one image into tokens where it runs its own preprocessing (module docstring):
    ``qwen_tokens``: (min, max) merged tokens that replace the processor's min/max_pixels, resized in float32 with
    C++ rounding (llama.cpp ``calc_size_preserved_ratio``), None: the processor's ``smart_resize``; ``llama4_grid``:
    tiles per side of llava-uhd tiling (no separators), 0: the processor's ``get_best_fit``; ``pan_and_scan``:
    whether Gemma 3's crops exist; ``source``: who says so, for the assumption."""

    source: str
    qwen_tokens: tuple[int, int] | None = None
    llama4_grid: int = 0
    pan_and_scan: bool = True


TRANSFORMERS_PROCESSOR = ImageRules("the transformers processor")
LLAMACPP_MTMD = ImageRules("llama.cpp's mtmd preprocessing (tools/mtmd/clip.cpp, mtmd-image.cpp @ 0c1e5709)",
                           qwen_tokens=(8, 4096), llama4_grid=3, pan_and_scan=False)


def _f32(x: float) -> float:
    """``x`` rounded to an IEEE float32, as a C++ ``float`` holds it (each step below is one float operation: the
    double result of one +, -, x, / or sqrt of float32 inputs, rounded once to float32, is the float32 result)."""
    return float(struct.unpack("f", struct.pack("f", x))[0])


def _c_round(x: float) -> int:
    """C++ ``std::round`` of a non-negative value: halves away from zero."""
    lo = math.floor(x)
    return lo + (1 if x - lo >= 0.5 else 0)


def llamacpp_resize(height: int, width: int, align: int, min_pixels: int, max_pixels: int) -> tuple[int, int]:
    """(height, width) after llama.cpp's ``img_tool::calc_size_preserved_ratio`` (tools/mtmd/mtmd-image.cpp
    L122-157 @ 0c1e5709): the ``smart_resize`` steps in float32 with ``std::round``."""
    fa = float(align)
    w_bar = max(align, _c_round(_f32(width / fa)) * align)
    h_bar = max(align, _c_round(_f32(height / fa)) * align)
    if h_bar * w_bar > max_pixels:
        beta = _f32(math.sqrt(_f32(_f32(float(height) * width) / max_pixels)))
        h_bar = max(align, math.floor(_f32(_f32(height / beta) / fa)) * align)
        w_bar = max(align, math.floor(_f32(_f32(width / beta) / fa)) * align)
    elif h_bar * w_bar < min_pixels:
        beta = _f32(math.sqrt(_f32(min_pixels / _f32(float(height) * width))))
        h_bar = math.ceil(_f32(_f32(height * beta) / fa)) * align
        w_bar = math.ceil(_f32(_f32(width * beta) / fa)) * align
    return h_bar, w_bar


def llava_uhd_grid(width: int, height: int, tile: int, max_side: int) -> tuple[int, int]:
    """(columns, rows) of ``tile``-px tiles llama.cpp cuts a ``width`` x ``height`` image into
    (tools/mtmd/mtmd-image.cpp L508-560 ``get_slice_instructions``, L669-690 ``select_best_resolution`` over
    clip.cpp L3962-3975's candidates): (0, 0) when no side exceeds ``tile``; else the candidate canvas whose
    aspect-kept resize keeps the most pixels (capped at the image's own), the least wasted area on a tie, the
    first in candidate order (x outer, y inner) on a full tie."""
    if width <= tile and height <= tile:
        return 0, 0
    best, best_eff, best_waste = (0, 0), 0, None
    for x in range(1, max_side + 1):
        for y in range(1, max_side + 1):
            if x == 1 and y == 1:
                continue
            cw, ch = x * tile, y * tile
            scale = min(_f32(cw / width), _f32(ch / height))
            eff = min(int(_f32(width * scale)) * int(_f32(height * scale)), width * height)
            waste = cw * ch - eff
            if eff > best_eff or (eff == best_eff and best_waste is not None and waste < best_waste):
                best, best_eff, best_waste = (x, y), eff, waste
    return best


def smart_resize(height: int, width: int, factor: int, min_pixels: int, max_pixels: int) -> tuple[int, int]:
    """(height, width) after Qwen2-VL's dynamic resize [pixels]: multiples of ``factor`` = patch x merge whose
    product lies in [min_pixels, max_pixels], aspect ratio kept (``image_processing_qwen2_vl.py`` L63-89)."""
    if max(height, width) / min(height, width) > MAX_ASPECT_RATIO:
        raise InputError(f"image {width}x{height}: aspect ratio over {MAX_ASPECT_RATIO} (the processor refuses it)")
    h_bar = round(height / factor) * factor
    w_bar = round(width / factor) * factor
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


def smart_resize_video(frames: int, height: int, width: int, temporal: int, factor: int, min_pixels: int,
                       max_pixels: int) -> tuple[int, int]:
    """Qwen3-VL's video resize: the pixel bounds apply to t x h x w (``video_processing_qwen3_vl.py`` L75-109)."""
    if frames < temporal:
        raise InputError(f"video of {frames} frames: Qwen3-VL needs at least temporal_patch_size ({temporal})")
    if height < factor or width < factor:
        scale = max(factor / height, factor / width)
        height, width = int(height * scale), int(width * scale)
    if max(height, width) / min(height, width) > MAX_ASPECT_RATIO:
        raise InputError(f"video {width}x{height}: aspect ratio over {MAX_ASPECT_RATIO} (the processor refuses it)")
    h_bar = round(height / factor) * factor
    w_bar = round(width / factor) * factor
    t_bar = round(frames / temporal) * temporal
    if t_bar * h_bar * w_bar > max_pixels:
        beta = math.sqrt((frames * height * width) / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif t_bar * h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (frames * height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


# Qwen3VLVideoProcessor.fps (video_processing_qwen3_vl.py L134; Qwen3-VL's video_preprocessor_config "fps": 2):
# frames per second it samples, so the frame times the timestamps are written from
QWEN3_VL_VIDEO_FPS = 2


def qwen3_vl_timestamp_tokens(seconds: float) -> int:
    """Text tokens of Qwen3-VL's ``f"<{seconds:.1f} seconds>"`` timestamp: the Qwen2 pre-tokenizer
    (``qwen2/tokenization_qwen2.py`` L33) makes "<", each digit, ".", " seconds" and ">" separate pieces, and each
    piece is one vocabulary entry, so 4 + the number of digits (``<0.2 seconds>`` = 6, ``<12.2 seconds>`` = 7)."""
    return 4 + sum(c.isdigit() for c in f"{seconds:.1f}")


def qwen3_vl_timestamps(frames: int, temporal: int, fps: float = QWEN3_VL_VIDEO_FPS) -> list[float]:
    """Seconds written before each temporal group [s]: frame i at i / fps, the index list padded with its last
    entry to a multiple of ``temporal``, each group the mean of its first and last frame's time
    (``Qwen3VLProcessor._calculate_timestamps``, processing_qwen3_vl.py L173-184)."""
    idx = list(range(frames))
    idx += [idx[-1]] * (-frames % temporal)
    return [(idx[i] / fps + idx[i + temporal - 1] / fps) / 2 for i in range(0, len(idx), temporal)]


# llama.cpp's mtmd video defaults (tools/mtmd/mtmd-helper.cpp L858-862 @ 0c1e5709,
# mtmd_helper_video_init_params_default): frames sampled per second, and a timestamp text every this many ms
LLAMACPP_VIDEO_FPS = 4.0
LLAMACPP_VIDEO_STAMP_MS = 5000
# the text "Video:" the helper writes before the first frame (mtmd-helper.cpp L597): the Qwen2 pre-tokenizer
# (qwen2/tokenization_qwen2.py L33 PRETOKENIZE_REGEX) makes "Video" and ":" two pieces, each one vocabulary entry
LLAMACPP_VIDEO_PREFIX_TOKENS = 2


def llamacpp_timestamp_tokens(ms: float) -> int:
    """Text tokens of mtmd's ``"[%dm%.2fs]"`` timestamp (``mtmd-helper.cpp`` L830-835): the Qwen2 pre-tokenizer makes
    "[", each digit, "m", ".", "s" and "]" separate pieces, one vocabulary entry each (``[0m5.00s]`` = 9)."""
    minutes = int(ms / 1000 / 60)
    text = f"[{minutes}m{ms / 1000 - minutes * 60:.2f}s]"
    return len(text)  # every character is its own piece


def llamacpp_video_parts(frames: int, fps: float = LLAMACPP_VIDEO_FPS,
                         stamp_ms: int = LLAMACPP_VIDEO_STAMP_MS) -> tuple[list[int], list[float]]:
    """The runs of consecutive frames mtmd's video callback returns between its timestamp texts, and the times [ms]
    of those timestamps (``mtmd-helper.cpp`` L822-837: after frame k, whose time is k / fps, a timestamp when that
    time reaches the next multiple of ``stamp_ms``)."""
    runs, stamps, run, next_ms = [], [], 0, 0.0
    for k in range(frames):
        run += 1
        elapsed = _f32(_f32(k / fps) * 1000.0)
        if stamp_ms > 0 and elapsed >= next_ms:
            runs.append(run)
            stamps.append(elapsed)
            run = 0
            next_ms += stamp_ms
    if run:
        runs.append(run)
    return runs, stamps


def llamacpp_video_tokens(v: VisionSpec, frames: int, width: int, height: int,
                          rules: ImageRules) -> MediaTokens:
    """Context tokens of one video of ``frames`` frames of ``width`` x ``height`` on llama.cpp's mtmd (module
    docstring): each frame is an image by ``rules``; consecutive frames pair up (temporal merge 2) into one image
    chunk of one frame's tokens; plus "Video:" and the timestamps, which are text."""
    if v.token_rule not in ("qwen2_vl", "qwen3_vl"):
        raise InputError("this model takes no video input (its processor has no video rule)")
    per = image_tokens(v, width, height, rules=rules)  # one frame: its merged tokens + <|vision_start|>, <|vision_end|>
    runs, stamps = llamacpp_video_parts(frames)
    chunks = sum(-(-r // 2) for r in runs)  # mtmd_group_mergeable_bitmaps: pairs within each run of frames
    text = LLAMACPP_VIDEO_PREFIX_TOKENS + sum(llamacpp_timestamp_tokens(ms) for ms in stamps)
    return MediaTokens(chunks * per.tokens + text, 0, chunks, per.encoder_patches,
                       f"{frames} frames ({LLAMACPP_VIDEO_FPS:g} per second) -> {chunks} image chunks of 1-2 frames "
                       f"(llama.cpp pairs frames; a timestamp breaks a pair), each {per.detail}, {per.tokens} "
                       f"with <|vision_start|>/<|vision_end|>; + {text} text tokens (\"Video:\", {len(stamps)} "
                       "timestamps)", per.encoder_grid)


def llama4_canvas(height: int, width: int, tile: int, max_tiles: int) -> tuple[int, int]:
    """(tile rows, tile columns) Llama 4 fits an image to: of every arrangement of at most ``max_tiles`` tiles,
    the one whose no-distortion scale is the smallest >= 1 (else the largest < 1), smallest area on a tie
    (``image_processing_llama4.py`` ``find_supported_resolutions`` L88-141, ``get_best_fit`` L180-275)."""
    arrangements: list[tuple[int, int]] = []
    seen: dict[float, list[tuple[int, int]]] = {}
    for chunks in range(max_tiles, 0, -1):
        for f in sorted(d for d in range(1, chunks + 1) if chunks % d == 0):
            seen.setdefault(f / (chunks // f), []).append((f, chunks // f))
    for group in seen.values():
        arrangements += group
    scales = []
    for rows, cols in arrangements:
        # torch float32 in the reference: the same comparisons hold for these integer ratios
        sh, sw = rows * tile / height, cols * tile / width
        scales.append(sw if sh > sw else sh)
    up = [s for s in scales if s >= 1]
    chosen = min(up) if up else max(s for s in scales if s < 1)
    options = [a for a, s in zip(arrangements, scales, strict=True) if s == chosen]
    return min(options, key=lambda a: a[0] * a[1]) if len(options) > 1 else options[0]


# Gemma3Processor's pan-and-scan defaults (gemma3/processing_gemma3.py L30-32)
PAN_AND_SCAN_MIN_CROP = 256
PAN_AND_SCAN_MAX_CROPS = 4
PAN_AND_SCAN_MIN_RATIO = 1.2


def pan_and_scan_crops(width: int, height: int, min_crop: int = PAN_AND_SCAN_MIN_CROP,
                       max_crops: int = PAN_AND_SCAN_MAX_CROPS, min_ratio: float = PAN_AND_SCAN_MIN_RATIO) -> int:
    """Crops Gemma 3's pan-and-scan adds to a ``width`` x ``height`` image: none unless the long side is at least
    ``min_ratio`` times the short one; then round(long / short) crops along the long side, at least 2, at most
    ``max_crops``, and none if a crop would be under ``min_crop`` px (image_processing_gemma3.py L104-148)."""
    if width >= height:
        if width / height < min_ratio:
            return 0
        n_w = min(int(math.floor(width / height + 0.5)), int(math.floor(width / min_crop)))
        n_w, n_h = min(max_crops, max(2, n_w)), 1
    else:
        if height / width < min_ratio:
            return 0
        n_h = min(int(math.floor(height / width + 0.5)), int(math.floor(height / min_crop)))
        n_w, n_h = 1, min(max_crops, max(2, n_h))
    if min(int(math.ceil(width / n_w)), int(math.ceil(height / n_h))) < min_crop:
        return 0
    return n_w * n_h


def image_tokens(v: VisionSpec, width: int, height: int, pan_and_scan: bool = False,
                 rules: ImageRules = TRANSFORMERS_PROCESSOR) -> MediaTokens:
    """Context tokens of one ``width`` x ``height`` image under ``v``'s rule (see the module docstring), as
    ``rules``' engine preprocesses it; ``pan_and_scan``: Gemma 3's crops as well (the processor's do_pan_and_scan)."""
    rule = v.token_rule
    if pan_and_scan and not v.pan_and_scan:
        raise InputError("this model's processor has no pan-and-scan")
    if pan_and_scan and not rules.pan_and_scan:
        raise InputError(f"{rules.source} has no pan-and-scan")
    if rule == "fixed":
        n = v.tokens_per_image
        crops = pan_and_scan_crops(width, height) if pan_and_scan else 0
        seqs = 1 + crops
        return MediaTokens(seqs * (n + DELIMITERS[rule]), 0, seqs, (v.image_size // v.patch_size) ** 2,
                           f"{n} tokens per image (resized to {v.image_size}x{v.image_size})"
                           + (f" + {crops} pan-and-scan crops of {n} each" if crops else ""))
    if rule in ("qwen2_vl", "qwen3_vl"):
        m = v.spatial_merge_size
        if rules.qwen_tokens is not None:  # llama.cpp: token bounds x (patch x merge)^2 pixels (clip-model.h L192-196)
            area = (v.patch_size * m) ** 2
            h, w = llamacpp_resize(height, width, v.patch_size * m, rules.qwen_tokens[0] * area,
                                   rules.qwen_tokens[1] * area)
        else:
            h, w = smart_resize(height, width, v.patch_size * m, v.min_pixels, v.max_pixels)
        grid = (h // v.patch_size) * (w // v.patch_size)
        return MediaTokens(grid // (m * m) + DELIMITERS[rule], 0, 1, grid,
                           f"resized to {w}x{h}: {w // v.patch_size}x{h // v.patch_size} patches / {m}x{m} merge "
                           f"= {grid // (m * m)} tokens", (h // v.patch_size, w // v.patch_size))
    if rule == "llama4" and rules.llama4_grid:  # llama.cpp: llava-uhd tiles, the overview last, no separators
        per_tile = (v.image_size // v.patch_size) ** 2 // (v.spatial_merge_size ** 2)
        cols, rows = llava_uhd_grid(width, height, v.image_size, rules.llama4_grid)
        encoded = rows * cols + 1  # the tiles + the overview (an image within one tile: the overview alone)
        return MediaTokens(per_tile * encoded + 2, 0, encoded, (v.image_size // v.patch_size) ** 2,
                           (f"{rows}x{cols} tiles of {v.image_size} + 1 overview" if rows else
                            f"1 tile of {v.image_size}") + f", {per_tile} tokens each (llama.cpp llava-uhd tiling)")
    if rule == "llama4":
        rows, cols = llama4_canvas(height, width, v.image_size, v.max_tiles)
        tiles = rows * cols
        per_tile = (v.image_size // v.patch_size) ** 2 // (v.spatial_merge_size ** 2)
        encoded = tiles + (1 if tiles > 1 else 0)  # + the global tile
        separators = rows * cols if tiles > 1 else 0  # x-separators (cols - 1 per row) + one y-separator per row
        tokens = per_tile * encoded + separators + DELIMITERS[rule]
        return MediaTokens(tokens, 0, encoded, (v.image_size // v.patch_size) ** 2,
                           f"{rows}x{cols} tiles of {v.image_size}" + (" + 1 global" if tiles > 1 else "")
                           + f", {per_tile} tokens each")
    if rule == "mllama":
        per_tile = (v.image_size // v.patch_size) ** 2 + 1
        return MediaTokens(1, v.max_tiles * per_tile, v.max_tiles, per_tile,
                           f"1 <|image|> token; {v.max_tiles} tiles x {per_tile} cross-attention states")
    raise InputError(f"unknown vision token rule {rule!r}")


def video_tokens(v: VisionSpec, frames: int, width: int, height: int) -> MediaTokens:
    """Context tokens of one video of ``frames`` sampled frames of ``width`` x ``height``."""
    rule = v.token_rule
    if rule not in ("qwen2_vl", "qwen3_vl") or not v.video_max_pixels:
        raise InputError("this model takes no video input (its processor has no video rule)")
    m, t, p = v.spatial_merge_size, v.temporal_patch_size, v.patch_size
    if rule == "qwen3_vl":
        h, w = smart_resize_video(frames, height, width, t, p * m, v.video_min_pixels, v.video_max_pixels)
    else:
        h, w = smart_resize(height, width, p * m, v.video_min_pixels, v.video_max_pixels)
    groups = -(-frames // t)
    grid = (h // p) * (w // p)
    n = groups * grid // (m * m)
    text = ""
    extra = 0
    if rule == "qwen3_vl":
        # per group: "<t seconds>" + <|vision_start|> ... <|vision_end|> (processing_qwen3_vl.py L99-102)
        stamps = sum(qwen3_vl_timestamp_tokens(s) for s in qwen3_vl_timestamps(frames, t))
        extra = stamps + 2 * groups
        text = f" + {stamps} timestamp + {2 * groups} start/end tokens"
    # each temporal group is its own attention sequence in the tower (vision_utils.get_vision_cu_seqlens)
    return MediaTokens(n + extra + DELIMITERS[rule], 0, groups, grid,
                       f"{frames} frames -> {groups} groups of {t}, each resized to {w}x{h}: "
                       f"{groups} x {grid // (m * m)} = {n} tokens{text}", (h // p, w // p))
