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

Llama-3.2-Vision's tower (transformers ``models/mllama/modeling_mllama.py``, ``MllamaVisionModel.forward``
L877-1013) runs N images of nt = max_num_tiles tiles each (the processor pads every image to nt tiles), P = (image /
patch)^2 + 1 patches per tile (the class token), padded to P8 = P rounded up to a multiple of 8 (L950). Each image is
one sequence of L = nt P8 positions through ``num_hidden_layers`` = n_l local layers, then ``num_global_layers`` = n_g
gated ones; T = N L, k = len(intermediate_layers_indices) = vision_output_dim / d - 1. Traced with the live-tensor
tracker (tests/formulas/test_vision_activations.py), held through both encoders:

    held:      pixel_values + patch_embeds (N nt (P - 1) d, a local of forward, L930)
               + the 4-D aspect-ratio mask N L^2 a (``_prepare_aspect_ratio_attention_mask`` L93-117, in the
               model dtype) + every layer's output: ``MllamaVisionEncoder`` keeps them all (L374), the local
               ones until forward returns (the intermediate features are read from them, L998):
               at the last global layer (n_l + n_g) T d a (its input, the global input and n_l + n_g - 1 outputs) (9)
    attention: sdpa 6 T d a (input_layernorm output, q, k, v, the attention output made contiguous by
               integrations/sdpa_attention.py L195, o_proj output L284); eager 4 T d a + N heads L^2 s, with
               s = 2 a, + 4 + a for a 16-bit model (the masked scores and softmax's fp32 copy and output, L227)  (10)
    mlp:       2 T d a (residual, post_attention_layernorm output) + max(2 T I a, T I a + T d a) (fc1 and its
               activation; then the activation and fc2's output, L190-192); eager + N heads L^2 a: the layer
               keeps the attention probabilities ``self_attn`` returns (L317) through its MLP                  (11)
    tail:      with Q = N nt P d a: max(k T d a + (k + 1) Q, (2 + 2 k) Q) (the final hidden state without the
               padding, copied; the stacked intermediate features L999 and their unpadded copy; the
               concatenation L1011). P = m^2 + 1 is never a multiple of 8, so the padding is always there
                                                                                                               (12)
    peak = held + max((10), (11), (12))                                                                        (13)

Real sizes (n_l 32, n_g 8, k 5, P 1601) make the tail (12) the largest phase.

Llama 4's tower (transformers ``models/llama4/modeling_llama4.py``, ``Llama4VisionModel.forward`` L1084-1122) runs
every tile (the processor's tiles and its global tile) as its own sequence of S = (image / patch)^2 + 1 positions
(the class token), T = tiles x S, without a mask and without keeping the layers' outputs. Traced with the
live-tensor tracker, for act bytes a:

    rotary:    vision_apply_rotary_emb (L738-749) upcasts q and k to fp32 and multiplies them as complex64:
               6 T d a (``layernorm_pre``'s output L1102, held by forward; the layer input; input_layernorm's
               output; q, k, v) + 2 x 4 T d (the complex products) + for a 16-bit model 2 x 4 T d (q.float(),
               k.float()) + 2 T d a (the rotated q, k cast back)                                            (14)
    attention: sdpa 8 T d a (the six above with the rotated q and k, the attention output, o_proj's L807);
               eager max(6 T d a + 2 tiles heads S^2 a, 8 T d a + tiles heads S^2 a) (scores and softmax L293
               in the model dtype, then the probabilities beside the output)                               (15)
    mlp:       4 T d a + 2 T I a (layernorm_pre's output, the layer input, the residual, the normed copy; fc1
               and GELU L820); eager + tiles heads S^2 a (the layer keeps the probabilities ``self_attn``
               returns, L849)                                                                               (16)

    peak = pixel_values + max((14), (15), (16))                                                             (17)

With a single layer its input is ``layernorm_pre``'s output itself: one T d a less in each phase. The
pixel-shuffle adapter after the encoder (L1122: ``layernorm_post``, two permuted copies, then
Llama4VisionMLP2 on (S - 1) r^2 rows) works on at most 4 T d a + smaller tensors: below (16) since I >= d (the
adapter's fc1 reads d / r^2 = I features).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..specs import VisionSpec


@dataclass(frozen=True)
class EncoderActivations:
    pixels_bytes: int  # the processed images held as input
    attention_bytes: int  # eq. (1) or (2)
    mlp_bytes: int  # eq. (3)
    peak_bytes: int  # eq. (4), (8) or (13)
    held_bytes: int = 0  # eq. (5) / (9): what the Qwen / mllama towers hold beside the pixels
    tail_bytes: int = 0  # eq. (12): mllama's concatenation of the intermediate features


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


def mllama_encoder_activation_bytes(v: VisionSpec, images: int, intermediate_features: int, act_bytes: int = 2,
                                    attention: str = "sdpa") -> EncoderActivations:
    """Peak transient bytes of one Llama-3.2-Vision tower forward over ``images`` images (each padded to
    ``v.max_tiles`` tiles); ``intermediate_features`` = k, the local layers whose outputs are concatenated to the
    last hidden state. Eqs. (9)-(13)."""
    n, nt, d, a, k = images, v.max_tiles, v.hidden_size, act_bytes, intermediate_features
    p = (v.image_size // v.patch_size) ** 2 + 1
    p8 = -(-p // 8) * 8
    seq = nt * p8
    t = n * seq
    q = n * nt * p * d * a
    pixels = n * nt * v.num_channels * v.image_size * v.image_size * a
    held = n * nt * (p - 1) * d * a + n * seq * seq * a + (v.num_layers + v.global_layers) * t * d * a
    if attention == "eager":
        per_score = 2 * a + (4 + a if a < 4 else 0)
        attn = 4 * t * d * a + n * v.num_heads * seq * seq * per_score
    else:
        attn = 6 * t * d * a
    mlp = 2 * t * d * a + max(2 * t * v.intermediate_size * a, t * v.intermediate_size * a + t * d * a)
    if attention == "eager":
        mlp += n * v.num_heads * seq * seq * a
    tail = max(k * t * d * a + (k + 1) * q, (2 + 2 * k) * q)
    return EncoderActivations(pixels, attn, mlp, pixels + held + max(attn, mlp, tail), held, tail)


def llama4_encoder_activation_bytes(v: VisionSpec, tiles: int, act_bytes: int = 2,
                                    attention: str = "sdpa") -> EncoderActivations:
    """Peak transient bytes of one Llama 4 tower forward over ``tiles`` tiles (every image's tiles and its global
    tile). Eqs. (14)-(17)."""
    s, d, a = (v.image_size // v.patch_size) ** 2 + 1, v.hidden_size, act_bytes
    t = tiles * s
    one = t * d * a if v.num_layers == 1 else 0  # the layer input is layernorm_pre's output
    rotary = 6 * t * d * a + 2 * 4 * t * d + (2 * 4 * t * d + 2 * t * d * a if a < 4 else 0) - one
    probs = tiles * v.num_heads * s * s * a
    if attention == "eager":
        attn = max(6 * t * d * a + 2 * probs - one, 8 * t * d * a + probs - one, rotary)
    else:
        attn = max(8 * t * d * a - one, rotary)
    mlp = 4 * t * d * a + 2 * t * v.intermediate_size * a + (probs if attention == "eager" else 0) - one
    pixels = tiles * v.num_channels * v.image_size * v.image_size * a
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
