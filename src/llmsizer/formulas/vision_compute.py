"""FLOPs of a vision encoder forward over one image or video: the part of a multimodal prompt's prefill that runs
before the language model sees its tokens.

Counted as formulas/speed.py counts the language model: 2 FLOPs per multiply-add of every matrix product (Kaplan et
al. 2020, arXiv 2001.08361, sec. 2.1), nothing for norms, activations, biases, position tables or pooling. For an
encoder sequence of L patches (an image, a crop, a tile, a video's temporal group) through one block of width d and
MLP width I, with every patch attending to every other patch of its sequence (no causal mask):

    block(L) = 2 L (4 d^2 + k d I)                   q, k, v and output projections; the MLP's k matrices
                                                     (k = 2: fc1, fc2; k = 3: SwiGLU gate, up, down)
             + 4 L^2 d                               Q K^T and the weighted sum of V over all heads          (V1)
    patches  = 2 P d C p^2 t                          patch embedding over the sequence's P patches (a conv or an
                                                     unfolded linear of C x t x p x p inputs per patch)        (V2)
    projector = 2 R x projector_params                the projector (and merger) over its R output rows        (V3)

Layouts (each read from transformers v5.24 and checked against torch's FlopCounterMode over a real forward of a small
tower: tests/formulas/test_vision_compute.py):

- ``siglip`` (Gemma 3, ``models/siglip/modeling_siglip.py`` + ``Gemma3MultiModalProjector``): every image and crop
  one sequence of (image / patch)^2 patches through ``num_layers`` blocks (k = 2); R = mm_tokens_per_image.
- ``qwen2_5_vl`` (``Qwen2_5_VisionTransformerPretrainedModel``): the patches of each temporal group attend within
  their group (``vision_utils.get_vision_cu_seqlens``) in the full-attention blocks, and within windows in the other
  ``windowed_layers`` blocks: ``get_vision_window_index`` cuts the grid of merged units from the top left into
  windows of w = sqrt(window_patches) / merge units a side, the last row and column shorter, so that with r_i and
  c_j the rows and columns of merged units of the windows, the attention term of a windowed block is

        4 d t merge^4 (sum_i r_i^2) (sum_j c_j^2)                                                              (V4)

  (k = 3, SwiGLU); R = patches / merge^2 rows through the merger.
- ``qwen3_vl`` (``Qwen3VLVisionModel``): every block attends within the temporal group (k = 2); R = patches /
  merge^2 rows through the merger and each DeepStack merger (all in projector_params).
- ``llama4`` (``Llama4VisionModel``): every tile one sequence of (image / patch)^2 patches + the class token through
  ``num_layers`` blocks (k = 2); R = patches / merge^2 rows per tile through the pixel-shuffle MLP and the projector.
- ``mllama`` (``MllamaVisionModel``): every image one sequence of max_tiles x P8 positions (P = (image / patch)^2 + 1
  with the class token, padded to a multiple of 8) through the local and the global blocks (k = 2);
  R = max_tiles x P rows (the padding sliced off) through the projector.
"""

from __future__ import annotations

import math

from ..errors import InputError
from ..specs import VisionSpec
from .vision_tokens import MediaTokens


def block_flops(d: int, intermediate: int, mlp_matrices: int, length: int) -> float:
    """Eq. (V1): one encoder block over one sequence of ``length`` patches [FLOPs]."""
    return 2.0 * length * (4 * d * d + mlp_matrices * d * intermediate) + 4.0 * length * length * d


def windowed_attention_flops(d: int, frames: int, rows: int, cols: int, window: int, merge: int) -> float:
    """Eq. (V4): the attention term of one Qwen2.5-VL windowed block over ``frames`` temporal groups of ``rows`` x
    ``cols`` patches, windows of ``window`` merged units a side [FLOPs]."""
    def squares(units: int) -> int:
        full, rest = divmod(units, window)
        return full * window * window + rest * rest
    return 4.0 * d * frames * merge ** 4 * squares(rows // merge) * squares(cols // merge)


def media_encoder_flops(v: VisionSpec, media: MediaTokens) -> float:
    """The vision encoder's FLOPs over one image (its crops or tiles) or one video, ``media`` as
    formulas/vision_tokens.py describes it: eqs. (V1)-(V4) for ``v``'s layout (module docstring)."""
    d, inter, layers = v.hidden_size, v.intermediate_size, v.num_layers
    seqs, patches = media.encoder_sequences, media.encoder_patches
    per_patch_embed = 2.0 * d * v.num_channels * v.patch_size ** 2
    if v.encoder == "siglip":
        return seqs * (layers * block_flops(d, inter, 2, patches) + patches * per_patch_embed
                       + 2.0 * v.tokens_per_image * v.projector_params)
    if v.encoder in ("qwen2_5_vl", "qwen3_vl"):
        rows, cols = media.encoder_grid
        if rows * cols != patches:
            raise InputError(f"encoder grid {rows}x{cols} does not hold the {patches} patches of a sequence")
        m = v.spatial_merge_size
        embed = patches * per_patch_embed * v.temporal_patch_size
        merged = 2.0 * (patches // (m * m)) * v.projector_params
        if v.encoder == "qwen3_vl":
            return seqs * (layers * block_flops(d, inter, 2, patches) + embed + merged)
        full = layers - v.windowed_layers
        window = math.isqrt(v.window_patches // (m * m)) if v.windowed_layers else 0
        linear = 2.0 * patches * (4 * d * d + 3 * d * inter)
        windowed = v.windowed_layers * (seqs * linear + windowed_attention_flops(d, seqs, rows, cols, window, m)) \
            if v.windowed_layers else 0.0
        return seqs * (full * block_flops(d, inter, 3, patches) + embed + merged) + windowed
    if v.encoder == "llama4":
        m = v.spatial_merge_size
        return seqs * (layers * block_flops(d, inter, 2, patches + 1) + patches * per_patch_embed
                       + 2.0 * (patches // (m * m)) * v.projector_params)
    if v.encoder == "mllama":
        tiles = v.max_tiles
        images = -(-seqs // tiles)
        padded = -(-patches // 8) * 8  # MllamaVisionModel pads each tile's positions to a multiple of 8
        return images * ((layers + v.global_layers) * block_flops(d, inter, 2, tiles * padded)
                         + tiles * (patches - 1) * per_patch_embed + 2.0 * tiles * patches * v.projector_params)
    raise InputError(f"unknown vision encoder layout {v.encoder!r}")
