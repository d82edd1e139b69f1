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
"""

from __future__ import annotations

from dataclasses import dataclass

from ..specs import VisionSpec


@dataclass(frozen=True)
class EncoderActivations:
    pixels_bytes: int  # the processed images held as input
    attention_bytes: int  # eq. (1) or (2)
    mlp_bytes: int  # eq. (3)
    peak_bytes: int  # eq. (4)


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
