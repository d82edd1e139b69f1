"""Transient activation memory of a vision encoder forward (ViT / SigLIP, no gradients kept).

The encoder is a pre-norm transformer over the image's patches (Dosovitskiy et al. 2021, arXiv 2010.11929,
eqs. 2-3). transformers ``models/siglip/modeling_siglip.py`` ``SiglipEncoderLayer.forward``: ``residual =
hidden_states``; ``layer_norm1``; ``self_attn`` (q, k, v projections, attention, ``out_proj``); ``+ residual``;
``residual = hidden_states``; ``layer_norm2``; ``mlp`` (``fc1``, GELU, ``fc2``); ``+ residual``. Traced with a
live-tensor tracker (tests/formulas/test_vision_activations.py, two shapes: one MLP-bound, one attention-bound),
the peak of a layer after the first holds, for
T = sequences x patches tokens of width d:

    attention (sdpa):  3 T d (the encoder's ``inputs_embeds``, the layer input, its normed copy)
                       + 5 T d (q, k, v and the attention output, all still referenced by
                       ``SiglipAttention.forward``, while ``out_proj`` writes its output)               (1)
    attention (eager): 3 T d + 3 T d (q, k, v) + sequences x heads x patches^2 x s                   (2)
                       with s = 2 x act bytes (+ 4 + act bytes for the fp32 softmax of a 16-bit model),
                       as formulas/activations.py charges the language model's score matrix (no mask: the
                       encoder attends to every patch)
    mlp:               4 T d (inputs_embeds, layer input, post-attention residual, normed copy)
                       + 2 T I (fc1 output and its GELU)                                             (3)

    peak = pixel_values + max((1) or (2), (3))                                                       (4)

where ``pixel_values`` is the processor's output, T x channels x patch^2 (x temporal_patch_size for Qwen) values
in the activation dtype, held by the caller for the whole forward. (With a single layer the layer input is
``inputs_embeds`` itself: one T d less.) The projector after the encoder (Gemma 3: 4 x 4 average pooling to
``mm_tokens_per_image`` tokens, ``modeling_gemma3.py`` ``Gemma3MultiModalProjector``) works on smaller tensors.

Qwen2.5-VL and Qwen3-VL towers (transformers ``models/qwen2_5_vl/modeling_qwen2_5_vl.py``
``Qwen2_5_VisionTransformerPretrainedModel``, ``models/qwen3_vl/modeling_qwen3_vl.py`` ``Qwen3VLVisionModel``) run
every image (and every temporal group of a video) packed into one sequence of T patches, each attending within its
own image (``cu_seqlens``) or, in Qwen2.5-VL's windowed layers, within windows of ``window_patches`` patches.
Traced with the same live-tensor tracker (tests/formulas/test_vision_activations.py), for head width
hd = d / heads, act bytes a:

    held:      pixel_values + cos, sin of the vision RoPE (2 T hd x 4 B, fp32)
               + index tensors (Qwen2.5: position ids 16 T B + window index 8 T / merge^2 B;
                 Qwen3: position ids 16 T + interpolation indices 32 T + weights 16 T B)
               + Qwen3: the interpolated position embedding T d x 4 B (fp32, still referenced by forward)
               + Qwen3: the DeepStack features merged before the last block, each T / merge^2 x out x a       (5)
    attention: max(10 T d a            (layer input, norm1 output, qkv 3 T d, rotated q and k, the per-window
                                        outputs, their concatenation, proj output),
                   5 T d a + r T d 4   (apply_rotary_pos_emb_vision in fp32: q, k upcast (r = 6; r = 4 when
                                        a = 4, the upcasts are views), q_embed and three temporaries),
                   eager: 7 T d a + (T - L) d a + heads x L^2 x s)                                           (6)
               with L the longest attention sequence (the largest image, or the window when every layer is
               windowed), s as in (2), and (T - L) d a the outputs of the other sequences, computed one after
               another and kept in a list (exact when the longest comes last; an upper bound otherwise)
    mlp:       Qwen2.5 (SwiGLU): 3 T d a + 3 T I a; Qwen3 (GELU fc1/fc2): 3 T d a + 2 T I a                  (7)

    peak = held + max((6), (7))                                                                              (8)

The patch mergers after the last block work on T / merge^2 rows of d merge^2: smaller than a block.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..specs import VisionSpec


@dataclass(frozen=True)
class EncoderActivations:
    pixels_bytes: int  # the processed images held as input
    attention_bytes: int  # eq. (1) or (2)
    mlp_bytes: int  # eq. (3)
    peak_bytes: int  # eq. (4) or (8)
    held_bytes: int = 0  # eq. (5): what the Qwen towers hold beside the pixels (RoPE tables, indexes, features)


def encoder_activation_bytes(v: VisionSpec, sequences: int, patches: int, act_bytes: int = 2,
                             attention: str = "sdpa") -> EncoderActivations:
    """Peak transient bytes of one encoder forward over ``sequences`` images (or tiles/crops) of ``patches``
    patches each; act_bytes [bytes per element], attention ['sdpa' | 'flash' | 'eager']. Eqs. (1)-(4)."""
    t, d = sequences * patches, v.hidden_size
    if attention == "eager":
        per_score = 2 * act_bytes + (4 + act_bytes if act_bytes < 4 else 0)
        attn = 6 * t * d * act_bytes + sequences * v.num_heads * patches * patches * per_score
    else:
        attn = 8 * t * d * act_bytes
    mlp = (4 * t * d + 2 * t * v.intermediate_size) * act_bytes
    pixels = t * v.num_channels * v.patch_size * v.patch_size * v.temporal_patch_size * act_bytes
    return EncoderActivations(pixels, attn, mlp, pixels + max(attn, mlp))


def qwen_encoder_activation_bytes(v: VisionSpec, tokens: int, longest: int, out_hidden: int, act_bytes: int = 2,
                                  attention: str = "sdpa") -> EncoderActivations:
    """Peak transient bytes of one Qwen2.5-VL / Qwen3-VL tower forward over ``tokens`` patches in all, the
    longest image (or temporal group) ``longest`` patches; ``out_hidden`` the mergers' output width. Eqs. (5)-(8)."""
    t, d, a = tokens, v.hidden_size, act_bytes
    hd = d // max(v.num_heads, 1)
    m2 = v.spatial_merge_size ** 2
    qwen3 = v.encoder == "qwen3_vl"
    held = 2 * t * hd * 4
    if qwen3:
        held += 64 * t + t * d * 4 + v.deepstack_features * (t // m2) * out_hidden * a
    else:
        held += 16 * t + 8 * (t // m2)
    rotary = 5 * t * d * a + (4 if a >= 4 else 6) * t * d * 4
    attn = max(10 * t * d * a, rotary)
    if attention == "eager":
        span = longest if v.windowed_layers < v.num_layers or not v.window_patches else min(longest, v.window_patches)
        per_score = 2 * a + (4 + a if a < 4 else 0)
        attn = max(attn, (7 * t + (t - min(span, t))) * d * a + v.num_heads * span * span * per_score)
    mlp = (3 * t * d + (2 if qwen3 else 3) * t * v.intermediate_size) * a
    pixels = t * v.num_channels * v.patch_size * v.patch_size * v.temporal_patch_size * a
    return EncoderActivations(pixels, attn, mlp, pixels + held + max(attn, mlp), held)
