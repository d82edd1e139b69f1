"""ModelSpec: the architecture of a model, as typed numbers. No I/O, no defaults guessed here.

Readers (``llmsizer.readers``) build a ModelSpec from a config.json, a GGUF header or manual fields;
formulas only ever see this object. Field names follow ``docs/nomenclature.md``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from ..errors import InputError
from ..numbers import (
    EXPERTS,
    EXPERTS_OR_ZERO,
    HEADS,
    IMAGE_AREA,
    LAYER_INDEX,
    LAYERS,
    PIXELS,
    TOKENS,
    TOKENS_OR_ZERO,
    VOCAB,
    WIDTH,
    WIDTH_OR_ZERO,
    Range,
    check_number,
)
from ..suggest import unknown_choice

LayerKind = Literal["full", "sliding", "none"]  # the attention of a layer; "none": no attention (no KV cache)
RecurrentKind = Literal["mamba", "mamba2", "gated_deltanet"]
VisionTokenRule = Literal["fixed", "qwen2_vl", "qwen3_vl", "llama4", "mllama"]
VISION_TOKEN_RULES: tuple[VisionTokenRule, ...] = ("fixed", "qwen2_vl", "qwen3_vl", "llama4", "mllama")
# model types whose attention adds position biases instead of rotating q/k (ALiBi, Press et al. 2022, arXiv
# 2108.12409): transformers' BloomModel and MptModel build no rotary tables (ModelSpec.rotary)
ALIBI_MODEL_TYPES = ("bloom", "mpt")
VisionEncoder = Literal["siglip", "qwen2_5_vl", "qwen3_vl", "mllama", "llama4"]
NormKind = Literal["rmsnorm", "layernorm"]
RouterScore = Literal["softmax", "sigmoid"]
ROUTER_SCORES: tuple[RouterScore, ...] = ("softmax", "sigmoid")  # MoESpec.router_score
LayerKey = tuple[bool, bool, bool, bool, bool, bool, int, int]  # ModelSpec.layer_key / layer_keys


@dataclass(frozen=True)
class MLASpec:
    """Multi-head latent attention (DeepSeek-V2, arXiv 2405.04434, section 2.1, eqs. 9-19)."""

    q_lora_rank: int | None  # None: queries use a full q_proj (DeepSeek-V2-Lite)
    kv_lora_rank: int  # d_c, the compressed KV latent
    qk_nope_head_dim: int
    qk_rope_head_dim: int  # d_h^R, the decoupled rotary key shared by all heads
    v_head_dim: int
    # DeepSeek Sparse Attention (DeepSeek-V3.2-Exp report, DeepSeek_V3_2.pdf): the lightning indexer's heads and
    # head size; 0 = no indexer (V2/V3)
    index_n_heads: int = 0
    index_head_dim: int = 0


@dataclass(frozen=True)
class MoESpec:
    """Mixture-of-experts feed-forward blocks (Shazeer et al. 2017; DeepSeekMoE arXiv 2401.06066)."""

    num_experts: int  # routed experts per MoE layer
    experts_per_token: int  # top-k routed experts each token visits
    expert_intermediate_size: int
    shared_intermediate_size: int = 0  # total intermediate size of the always-active shared MLP (0: none)
    shared_expert_gate: bool = False  # Qwen2-MoE: sigmoid gate H -> 1 on the shared expert
    router_bias: bool = False  # gpt-oss router has a bias
    expert_bias: bool = False  # gpt-oss experts carry biases
    expert_gated: bool = True  # SwiGLU experts (gate + up + down)
    shared_expert_gated: bool = True  # the shared MLP is SwiGLU too (Nemotron-H: up + down, ReLU^2)
    # Nemotron-H moe_latent_size: the routed experts run in a latent of this width, between fc1_latent_proj
    # [latent, H] and fc2_latent_proj [H, latent] (bias = mlp_bias); 0: the experts read the hidden state itself
    latent_size: int = 0
    # the router casts its input to fp32 before its linear (DeepSeek-V2/V3/V3.2, GLM-4.5, Nemotron-H TopkRouter:
    # ``F.linear(hidden_states.type(torch.float32), self.weight.type(torch.float32))``), so a trained router keeps
    # an fp32 copy of the layer input for its weight gradient
    router_fp32: bool = False
    # the router adds a learned per-expert bias to its scores for the top-k choice only (DeepSeek-V3's auxiliary-
    # loss-free balancing, arXiv 2412.19437 section 2.1.2 eq. 16): the config's topk_method 'noaux_tc' (DeepSeek-V3,
    # V3.2, R1, Kimi-K2), GLM-4.5's and Nemotron-H's routers always, a GGUF's ``exp_probs_b``. Not a parameter in
    # transformers (a buffer, ``e_score_correction_bias``); the bytes each engine allocates for it:
    # formulas/weight_formats.py ``correction_bias_bytes``
    score_correction_bias: bool = False
    # the function the router turns its top-k logits into weights with (ROUTER_SCORES): 'softmax' (Mixtral, Qwen-MoE,
    # gpt-oss, DeepSeek-V2: modeling_deepseek_v2.py L101) or 'sigmoid' (DeepSeek-V3/V3.2, Kimi-K2, GLM-4.5,
    # Nemotron-H: ``router_logits.sigmoid()``, modeling_deepseek_v3.py L136, modeling_deepseek_v32.py L514,
    # modeling_glm4_moe.py L285, modeling_nemotron_h.py L775; Llama 4's top-1 router with no bias:
    # Llama4Router.forward, modeling_llama4.py L151; all transformers @5.24.0), a GGUF's ``expert_gating_func`` 2
    router_score: RouterScore = "softmax"

    def __post_init__(self) -> None:
        if self.router_score not in ROUTER_SCORES:
            raise InputError(unknown_choice("router_score", self.router_score, ROUTER_SCORES))


@dataclass(frozen=True)
class RecurrentSpec:
    """A recurrent token mixer whose per-sequence state does not grow with the context.

    - ``mamba``: the selective SSM of Mamba-1 (Gu & Dao 2023, arXiv 2312.00752, Algorithm 2): state
      [d_inner, d_state] per sequence, a depthwise causal conv of width ``d_conv`` over d_inner channels.
    - ``mamba2``: SSD (Dao & Gu 2024, arXiv 2405.21060, section 7): ``num_heads`` heads of ``head_dim`` channels,
      state [num_heads, head_dim, d_state]; B and C shared by ``n_groups`` groups; the conv runs over
      x, B and C (d_inner + 2 x n_groups x d_state channels).
    - ``gated_deltanet``: Gated DeltaNet (Yang et al. 2024, arXiv 2412.06464, eq. 10): ``num_heads`` value
      heads of ``head_dim`` (= d_inner / num_heads), ``n_groups`` key heads of ``d_state`` (the key head width);
      state [num_heads, d_state, head_dim]; the conv runs over q, k and v.
    In all three the recurrent state holds d_inner x d_state elements per layer and sequence.
    """

    kind: RecurrentKind
    d_inner: int  # value channels (mamba: expand x hidden; gated_deltanet: num_v_heads x head_v_dim)
    d_state: int  # SSM state size N (gated_deltanet: key head width)
    d_conv: int  # causal conv kernel width
    num_heads: int = 1  # mamba2 heads / gated_deltanet value heads (mamba: 1)
    n_groups: int = 0  # mamba2 B/C groups / gated_deltanet key heads (mamba: 0, its conv covers x only)
    dt_rank: int = 0  # mamba: rank of the dt projection
    conv_bias: bool = True
    in_proj_bias: bool = False
    out_proj_bias: bool = False
    gated_norm: bool = True  # mamba2: RMSNormGated over d_inner; gated_deltanet: over head_dim
    bcdt_norms: bool = False  # Jamba: RMSNorms on dt, B and C
    # the config's mamba_ssm_cache_dtype (Nemotron-H) / mamba_ssm_dtype (Qwen3.5), which vLLM honours for those
    ssm_cache_dtype: str | None = None
    chunk_size: int = 256  # mamba2: the SSD chunk length of the chunked scan (config chunk_size / mamba_chunk_size)
    # Falcon-H1: the in_proj output is multiplied by the mup_vector buffer (modeling_falcon_h1.py line 690)
    in_proj_multiplier: bool = False
    # gated_deltanet: Qwen3.5's Qwen3_5GatedDeltaNet keeps Qwen3-Next's in_proj_qkvz as in_proj_qkv + in_proj_z and
    # in_proj_ba as in_proj_b + in_proj_a (modular_qwen3_5.py): two nn.Linear each, the same elements
    split_in_proj: bool = False

    @property
    def head_dim(self) -> int:
        return self.d_inner // max(self.num_heads, 1)

    @property
    def conv_channels(self) -> int:
        """Channels of the causal conv (and of its cached state): x (+ B and C, or q and k)."""
        return self.d_inner + 2 * self.n_groups * self.d_state

    @property
    def state_elements(self) -> int:
        """Elements of the recurrent (SSM / delta-rule) state of one layer and sequence."""
        return self.d_inner * self.d_state


@dataclass(frozen=True)
class VisionSpec:
    """A ViT/SigLIP-style image encoder attached to a multimodal LM (Dosovitskiy et al. 2021).

    ``encoder`` names the block layout (formulas/tensors.py): "siglip" (LayerNorm, GELU MLP, learned positions;
    Gemma 3), "qwen2_5_vl" (RMSNorm, SwiGLU MLP with biases, fused qkv, Conv3d patches, rotary positions) or
    "qwen3_vl" (LayerNorm, GELU MLP, fused qkv, Conv3d patches with bias, learned + rotary positions, DeepStack
    mergers), "mllama" (Llama-3.2-Vision: a local and a gated global encoder, tile and aspect-ratio embeddings;
    its output enters the text model as cross-attention states) or "llama4" (unfolded-linear patches, LayerNorm,
    GELU MLP with biases, rotary positions, a pixel-shuffle MLP adapter).
    ``image_size`` is the square input side, 0 for dynamic resolution."""

    hidden_size: int
    intermediate_size: int
    num_layers: int
    image_size: int
    patch_size: int
    num_channels: int = 3
    projector_params: int = 0  # parameters of the vision->text projector (computed by the reader)
    num_heads: int = 1  # attention heads of the encoder (its activation peak)
    # how an image becomes context tokens (formulas/vision_tokens.py, each rule cited to its processor)
    token_rule: VisionTokenRule = "fixed"
    tokens_per_image: int = 0  # rule "fixed": soft tokens per image (Gemma 3 mm_tokens_per_image)
    spatial_merge_size: int = 1  # patches merged per side into one token (Qwen merger 2, Llama 4 pixel shuffle 2)
    temporal_patch_size: int = 1  # video frames per temporal patch (Qwen 2)
    min_pixels: int = 0  # dynamic resolution bounds of the image processor (Qwen size.shortest_edge/longest_edge)
    max_pixels: int = 0
    video_min_pixels: int = 0  # the video processor's bounds; 0: no video input
    video_max_pixels: int = 0
    max_tiles: int = 1  # rule "llama4": max_patches; "mllama": max_image_tiles
    encoder: VisionEncoder = "siglip"
    position_embeddings: int = 0  # rule qwen3_vl: rows of the learned position table (num_position_embeddings)
    pan_and_scan: bool = False  # the processor can add crops of wide/tall images (Gemma 3's do_pan_and_scan)
    global_layers: int = 0  # encoder "mllama": layers of the gated global encoder after the local one
    aspect_ratios: int = 0  # encoder "mllama": rows of the aspect-ratio / tile embeddings (max_aspect_ratio_id + 1)
    intermediate_features: int = 0  # encoder "mllama": local-layer outputs concatenated to the last hidden state
    window_patches: int = 0  # encoder "qwen2_5_vl": patches per attention window of its windowed layers (0: none)
    windowed_layers: int = 0  # encoder "qwen2_5_vl": layers attending within windows (the others: whole images)
    deepstack_features: int = 0  # encoder "qwen3_vl": DeepStack features merged before the last block runs


@dataclass(frozen=True)
class Gemma3nSpec:
    """Gemma 3n's additions to every decoder layer (transformers v5.24.0 models/gemma3n/modeling_gemma3n.py).

    - Per-layer inputs ("PLE"): ``Gemma3nTextModel`` (L1589-1602) builds ``embed_tokens_per_layer``
      [per_layer_vocab, num_layers x per_layer_width], ``per_layer_model_projection`` [num_layers x per_layer_width,
      H] and ``per_layer_projection_norm`` [per_layer_width]; each ``Gemma3nTextDecoderLayer`` (L1266-1268)
      ``per_layer_input_gate`` [per_layer_width, H], ``per_layer_projection`` [H, per_layer_width] and
      ``post_per_layer_input_norm`` [H].
    - AltUp (Baykal et al. 2023, "Alternating Updates for Efficient Transformers", NeurIPS): the model keeps
      ``altup_inputs`` streams of width H; ``Gemma3nTextModel`` (L1604-1610) has altup_inputs - 1
      ``altup_projections`` and as many ``altup_unembed_projections`` [H, H]; ``Gemma3nTextAltUp`` (L988-996) per
      layer: ``correct_output_scale`` [H], ``correction_coefs`` [n, n], ``prediction_coefs`` [n^2, n],
      ``modality_router`` [n, H], ``router_norm`` [H].
    - LAuReL (Menghani et al. 2024, "LAuReL: Learned Augmented Residual Layer", arXiv 2411.07501):
      ``Gemma3nTextLaurelBlock`` (L923-929) ``linear_left`` [laurel_rank, H], ``linear_right`` [H, laurel_rank],
      ``post_laurel_norm`` [H].
    ``uncounted`` names parts of a multimodal ``gemma3n`` config that are not counted (its audio and vision towers).
    """

    per_layer_width: int  # hidden_size_per_layer_input
    per_layer_vocab: int  # vocab_size_per_layer_input
    altup_inputs: int  # altup_num_inputs
    laurel_rank: int
    uncounted: tuple[str, ...] = ()


@dataclass(frozen=True)
class Gemma4VisionTower:
    """Gemma 4's vision encoder (transformers v5.24.0 models/gemma4/modeling_gemma4.py): ``Gemma4VisionPatchEmbedder``
    (L575-584) ``input_proj`` [H, 3 patch^2] and ``position_embedding_table`` [2, positions, H]; ``num_layers`` x
    ``Gemma4VisionEncoderLayer`` (L962-973: ``Gemma4VisionAttention`` L892-912 q/k/v/o through
    ``Gemma4ClippableLinear`` (L167-176, one bias-free nn.Linear; its clip bounds are buffers), q_norm and k_norm
    [head_dim], v_norm without weight; ``Gemma4VisionMLP`` L687-695 gate/up/down; four RMSNorms [H]); the pooler has
    no weight (L620-631) and ``std_bias``/``std_scale`` are buffers (L2063-2065); ``Gemma4MultimodalEmbedder``
    (L2116-2130) ``embedding_projection`` [text H, H] (its norm has no weight)."""

    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    patch_size: int
    position_embedding_size: int


@dataclass(frozen=True)
class Gemma4AudioTower:
    """Gemma 4's audio encoder (modeling_gemma4.py ``Gemma4AudioModel`` L1956-1981): the subsampling convolutions
    (``Gemma4AudioSubSampleConvProjection`` L381-395: two bias-free 3x3 Conv2d, 1 -> c0 -> c1, each with a bias-free
    LayerNorm [c], and ``input_proj_linear`` [H, (c0 // 4) c1]); ``num_layers`` x ``Gemma4AudioLayer`` (L521-533: two
    ``Gemma4AudioFeedForward`` L411-420 of [4H, H] + [H, 4H] and two RMSNorms each; ``Gemma4AudioAttention`` L266-272
    q/k/v/post [H, H], ``relative_k_proj`` [H, H], ``per_dim_scale`` [H / heads]; ``Gemma4AudioLightConv1d``
    L485-496 ``linear_start`` [2H, H], ``linear_end`` [H, H], a depthwise Conv1d [H, 1, kernel] and two RMSNorms;
    three RMSNorms); ``output_proj`` [out, H] with bias; ``Gemma4MultimodalEmbedder`` ``embedding_projection``
    [text H, out]."""

    hidden_size: int
    num_layers: int
    num_heads: int
    conv_channels: tuple[int, int]
    conv_kernel_size: int
    output_dims: int


@dataclass(frozen=True)
class Gemma4Spec:
    """Gemma 4's additions (transformers v5.24.0 models/gemma4/modeling_gemma4.py): per-layer inputs ("PLE") as
    Gemma 3n's, ``Gemma4TextModel`` (L1563-1580) ``embed_tokens_per_layer`` [ple_vocab, num_layers x ple_width],
    ``per_layer_model_projection`` [num_layers x ple_width, H], ``per_layer_projection_norm`` [ple_width]; each
    ``Gemma4TextDecoderLayer`` (L1346-1350) ``per_layer_input_gate`` [ple_width, H], ``per_layer_projection``
    [H, ple_width] and ``post_per_layer_input_norm`` [H]; no AltUp, no LAuReL. ``vision`` / ``audio``: the towers of
    a multimodal ``gemma4`` config (None: absent), whose weights are counted (formulas/tensors.py)."""

    ple_width: int  # hidden_size_per_layer_input (0: no per-layer inputs)
    ple_vocab: int  # vocab_size_per_layer_input
    vision: Gemma4VisionTower | None = None
    audio: Gemma4AudioTower | None = None


@dataclass(frozen=True)
class FileWeights:
    """Exact weight storage read from files (safetensors headers or a GGUF tensor table).

    ``by_dtype`` maps the stored dtype/type name ('BF16', 'F8_E4M3', 'Q4_K', ...) to bytes;
    ``layer_bytes`` gives the bytes of each decoder layer when the tensor names reveal it; of these,
    ``layer_expert_bytes`` are routed-expert tensors (GGUF ``ffn_*_exps``, which ``--n-cpu-moe`` keeps in host
    memory) and ``layer_matrix_bytes`` other 2-D matrices (what llama.cpp's row split spreads over GPUs).
    ``per_layer_device_bytes``: tensors outside the layers that llama.cpp creates for every layer and so keeps once
    on each device holding layers (GGUF ``rope_freqs``, ``rope_factors_long``/``_short``; readers/gguf_file.py).
    """

    path: str
    total_bytes: int
    params: int  # elements as stored (packed formats count stored elements; see ``note``)
    by_dtype: tuple[tuple[str, int], ...]
    layer_bytes: tuple[int, ...] = ()
    embedding_bytes: int = 0
    layer_expert_bytes: tuple[int, ...] = ()
    layer_matrix_bytes: tuple[int, ...] = ()
    output_bytes: int = 0
    note: str = ""
    per_layer_device_bytes: int = 0

    @property
    def gguf(self) -> bool:
        """Read from a .gguf file (its tensors in GGML types), not from safetensors."""
        return self.path.lower().endswith(".gguf")


@dataclass(frozen=True)
class RopeScaling:
    """One entry of the config's ``rope_scaling`` (transformers v5: ``rope_parameters``; a per-layer-type dict gives
    one entry per layer type), the fields the serving engines read to derive the longest context they accept
    (estimate/context_window.py): ``rope_type`` (the legacy ``type`` key when ``rope_type`` is absent, as vLLM's
    transformers_utils/config.py ``patch_rope_parameters_dict`` and transformers read it), ``factor`` and
    ``original_max_position_embeddings`` as written (None: absent)."""

    rope_type: str
    factor: float | None = None
    original_max_position_embeddings: int | None = None


@dataclass(frozen=True)
class EncoderDecoderSpec:
    """A T5-style encoder-decoder (Raffel et al. 2020, "Exploring the Limits of Transfer Learning with a Unified
    Text-to-Text Transformer", JMLR 21, arXiv 1910.10683, section 2.1; T5 v1.1 / mT5: Xue et al. 2021, arXiv
    2010.11934, section 2), as transformers v5.24.0 ``models/t5/modeling_t5.py`` builds it.

    The model's ``num_layers`` are the ``encoder_layers`` blocks of the encoder (``T5Block``: self-attention + FFN,
    bidirectional) followed by the ``decoder_layers`` blocks of the decoder (causal self-attention, cross-attention
    over the encoder output ``EncDecAttention``, FFN); ``ModelSpec.cross_attention_layers`` marks the decoder's.
    Every projection is bias-free, every norm a weight-only RMS norm (``T5LayerNorm``). The first block of each stack
    holds a relative position bias table [``relative_attention_buckets``, num_heads] (``T5Attention``
    ``has_relative_attention_bias``) whose bias the later blocks reuse. ``dropout``: the config's ``dropout_rate``
    (0.1 in the published T5/mT5/T0 configs), applied in training after every sub-layer, to the attention
    probabilities and inside the FFN. ``n_positions``: the config's ``n_positions`` when present (the original
    T5 checkpoints' configs state 512; the model never reads it: relative position buckets have no table limit)."""

    encoder_layers: int
    decoder_layers: int
    relative_attention_buckets: int
    relative_attention_max_distance: int
    dropout: float = 0.0
    n_positions: int | None = None  # the config's n_positions (original T5 configs: 512); not read by the model


# ModelSpec fields that are numbers, and their documented ranges (llmsizer.numbers)
_FIELD_RANGES: tuple[tuple[str, Range], ...] = (
    ("vocab_size", VOCAB), ("hidden_size", WIDTH), ("num_layers", LAYERS), ("num_heads", HEADS),
    ("num_kv_heads", HEADS), ("head_dim", WIDTH), ("intermediate_size", WIDTH_OR_ZERO),
    ("position_embeddings", TOKENS_OR_ZERO), ("norms_per_layer", Range(0, 16, True, "norms in one decoder layer")),
    ("sliding_window", TOKENS_OR_ZERO), ("max_position_embeddings", TOKENS), ("rotary_dim", WIDTH_OR_ZERO),
    ("full_head_dim", WIDTH_OR_ZERO), ("mtp_layers", LAYER_INDEX),
)
_OPTIONAL = {"sliding_window", "max_position_embeddings"}
_SUB_RANGES: dict[str, Range] = {
    "num_experts": EXPERTS_OR_ZERO, "experts_per_token": EXPERTS, "expert_intermediate_size": WIDTH_OR_ZERO,
    "latent_size": WIDTH_OR_ZERO,
    "shared_intermediate_size": WIDTH_OR_ZERO,
    "q_lora_rank": WIDTH, "kv_lora_rank": WIDTH, "qk_nope_head_dim": WIDTH, "qk_rope_head_dim": WIDTH_OR_ZERO,
    "v_head_dim": WIDTH,
    "hidden_size": WIDTH, "intermediate_size": WIDTH, "num_layers": LAYERS,
    "image_size": Range(0, 2**16, True, "image side of a vision encoder (0: dynamic resolution)"),
    "patch_size": PIXELS, "num_channels": PIXELS, "num_heads": HEADS, "tokens_per_image": TOKENS_OR_ZERO,
    "spatial_merge_size": PIXELS, "temporal_patch_size": PIXELS, "min_pixels": IMAGE_AREA, "max_pixels": IMAGE_AREA,
    "video_min_pixels": IMAGE_AREA, "video_max_pixels": IMAGE_AREA, "max_tiles": PIXELS,
    "position_embeddings": TOKENS_OR_ZERO, "global_layers": Range(0, 1024, True, "global encoder layers"),
    "aspect_ratios": Range(0, 4096, True, "aspect-ratio embedding rows"), "window_patches": TOKENS_OR_ZERO,
    "windowed_layers": Range(0, 1024, True, "windowed encoder layers"),
    "deepstack_features": Range(0, 1024, True, "DeepStack features"),
    # RecurrentSpec (num_heads: HEADS, shared with VisionSpec above)
    "d_inner": WIDTH, "d_state": WIDTH, "d_conv": Range(1, 1024, True, "conv kernel width"),
    "n_groups": Range(0, 65_536, True, "B/C groups or key heads"), "dt_rank": WIDTH_OR_ZERO,
    # Gemma4Spec
    "ple_width": WIDTH_OR_ZERO, "ple_vocab": VOCAB,
    # Gemma3nSpec
    "per_layer_width": WIDTH, "per_layer_vocab": VOCAB, "altup_inputs": Range(1, 64, True, "AltUp streams"),
    "laurel_rank": WIDTH,
    # EncoderDecoderSpec
    "encoder_layers": LAYERS, "decoder_layers": LAYERS, "relative_attention_buckets": TOKENS,
    "relative_attention_max_distance": TOKENS,
}


def _check_sub(sub: MoESpec | MLASpec | VisionSpec | RecurrentSpec | Gemma3nSpec | Gemma4Spec | EncoderDecoderSpec,
               where: str) -> None:
    """The numeric fields of an MoE / MLA / vision part through ``check_number`` (None: absent, e.g. q_lora_rank)."""
    for fname, rng in _SUB_RANGES.items():
        v = getattr(sub, fname, None)
        if v is not None:
            check_number(v, f"{type(sub).__name__}.{fname}", rng, where)
    if isinstance(sub, VisionSpec) and sub.token_rule not in VISION_TOKEN_RULES:
        raise InputError(f"{where}: {unknown_choice('vision token rule', sub.token_rule, VISION_TOKEN_RULES)}")


# the kernels a layer's rotary and norms may run (ModelSpec.rotary_kernel / norm_kernel)
LAYER_KERNELS = ("eager", "flash-attn")


@dataclass(frozen=True, eq=False)
class ModelSpec:
    """Decoder-only transformer architecture.

    ``layer_types[i]`` says whether layer *i* attends globally ("full"), within ``sliding_window``
    tokens ("sliding") or not at all ("none": a recurrent-only or feed-forward-only layer);
    ``recurrent_layers[i]`` whether it has the ``recurrent`` mixer (Mamba / Gated DeltaNet; Falcon-H1 layers have
    both); ``ffn_layers[i]`` whether it has a feed-forward block (Mamba-2 and Nemotron-H mixer-only layers do not);
    ``moe_layers[i]`` whether that block is MoE; ``kv_shared_layers[i]`` whether layer *i* attends over keys and
    values an earlier layer computed and cached (Gemma 3n's last ``num_kv_shared_layers``: no k/v projections, no
    cache of its own); ``ffn_sizes[i]`` the feed-forward width of layer *i* when it differs per layer (Gemma 3n's
    per-layer ``intermediate_size`` list; empty: ``intermediate_size`` everywhere).
    Identity-hashed (``eq=False``) so derived results can be cached per spec.
    """

    name: str
    model_type: str
    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    tie_word_embeddings: bool = False
    mlp_gated: bool = True
    mlp_bias: bool = False
    attention_qkv_bias: bool = False
    attention_out_bias: bool = False
    # norm on q and k (of ``norm_kind``): one over head_dim shared by every head ("per_head"), one over all heads
    # at once ("full"), or a bias-free LayerNorm of its own per head ("each_head": StableLM's
    # StableLmLayerNormPerHead, num_heads x head_dim q weights and num_kv_heads x head_dim k weights)
    qk_norm: Literal["none", "per_head", "full", "each_head"] = "none"
    position_embeddings: int = 0  # learned absolute position table rows (GPT-2 style); 0 for rotary models
    # the model's forward builds rotary cos/sin tables (RoPE) when it has no learned table: False where it encodes no
    # positions at all (Mamba2Model, NemotronHModel, JambaModel: their modeling_*.py build no rotary embedding;
    # GraniteMoeHybridModel unless position_embedding_type is "rope", modeling_granitemoehybrid.py line 1057) or
    # encodes them as relative attention biases (T5Attention's relative_attention_bias)
    rope: bool = True
    norm_kind: NormKind = "rmsnorm"
    norms_per_layer: int = 2
    attention_sinks: bool = False
    mla: MLASpec | None = None
    moe: MoESpec | None = None
    moe_layers: tuple[bool, ...] = ()
    layer_types: tuple[LayerKind, ...] = ()
    recurrent: RecurrentSpec | None = None
    recurrent_layers: tuple[bool, ...] = ()
    ffn_layers: tuple[bool, ...] = ()
    attention_output_gate: bool = False  # Qwen3-Next: q_proj also emits a sigmoid gate per head (2 x q width)
    chunked_attention: bool = False  # the "sliding" layers attend within fixed chunks of sliding_window (Llama 4)
    # Llama-3.2-Vision: layers whose attention is cross-attention to the image states (layer_types "none": they keep
    # no text KV; their K/V over the images are formulas/kv_cache.py cross_attention_kv)
    cross_attention_layers: tuple[bool, ...] = ()
    extra_embedding_rows: int = 0  # input-embedding rows beyond vocab_size (MllamaTextModel: vocab_size + 8)
    kv_shared_layers: tuple[bool, ...] = ()  # layers reusing an earlier layer's cached K/V (Gemma 3n)
    # attention layers that encode no positions (NoPE) in a rotary model: Llama 4's layers with
    # ``no_rope_layers[i]`` = 0 (Llama4TextAttention ``use_rope``, modeling_llama4.py L318 and L350); () none
    nope_layers: tuple[bool, ...] = ()
    ffn_sizes: tuple[int, ...] = ()  # per-layer feed-forward width (Gemma 3n); empty: intermediate_size
    # Parallel attention + MLP blocks (GPT-J / PaLM "parallel formulation", Chowdhery et al. 2022, arXiv 2204.02311,
    # section 2): out = x + attn(norm_a(x)) + mlp(norm_m(x)). With norms_per_layer 1 the two branches read the same
    # normalised tensor (Falcon-7B input_layernorm, Phi-2), with 2 each its own norm of the same x (GPT-NeoX
    # use_parallel_residual, Falcon-40B ln_attn/ln_mlp). False: the sequential pre-norm block.
    parallel_block: bool = False
    # rotary channels per head (partial rotary: Phi-2, GPT-NeoX, StableLM, Qwen3-Next, GLM-4.5, Phi-4-mini; the
    # config reader's one rule, readers/hf_config.py rotary_dim_of); 0 = head_dim (or none)
    rotary_dim: int = 0
    # q, k and v come from one linear (Falcon / GPT-NeoX query_key_value, Phi-3 qkv_proj, GPT-BigCode c_attn): one
    # input copy; PEFT adapts the whole linear once (formulas/lora.py)
    fused_qkv: bool = False
    # gate and up come from one linear (Phi-3 mlp.gate_up_proj, Granite-4.0-H shared_mlp.input_linear): PEFT adapts
    # the whole linear once (formulas/lora.py)
    fused_gate_up: bool = False
    # how the layer's code runs, where its kernels differ from transformers' Llama layer (formulas/launch_overhead.py
    # LayerCode, eqs. K2/K3): the fused q/k/v output separated by ``torch.split`` (one ``cat`` gathers the gradients;
    # Qwen-1's remote code ``mixed_x_layer.split``) rather than by slices (Phi-3's ``qkv[..., :query_pos]``); the
    # rotary concatenating its pass-through channels (Phi-3's ``torch.cat([rotated, q_pass])``); flash-attn's Triton
    # rotary (``flash_attn.layers.rotary.apply_rotary_emb_func``) and its fused RMSNorm (``flash_attn.ops.rms_norm``,
    # the csrc/layer_norm extension) where the remote code imports them (Qwen-1 with flash-attn installed)
    qkv_split: bool = False
    rotary_pass_cat: bool = False
    rotary_kernel: str = "eager"  # eager | flash-attn
    norm_kernel: str = "eager"  # eager | flash-attn
    lm_head_bias: bool = False  # the output projection has a bias (PhiForCausalLM lm_head)
    # the MLP activation is transformers' NewGELUActivation (hidden_act 'gelu_new'), a chain of Python tensor ops
    # that keeps its own intermediates for the backward (formulas/training_activations.py), not one fused op
    mlp_act_python: bool = False
    residual_dropout: bool = False  # dropout on each branch output in training (Phi-2 resid_pdrop 0.1): bool masks
    # GPT2Config attention flags set to true that vLLM's and SGLang's GPT2Model refuse (``assert not config.<flag>``):
    # scale_attn_by_inverse_layer_idx, reorder_and_upcast_attn (readers/hf_config.py _gpt2; model_warnings.engine_lacks)
    gpt2_attention_flags: tuple[str, ...] = ()
    # transformers' own module repeats K/V to every query head before caching (Falcon new_decoder_architecture:
    # FalconAttention._split_heads broadcasts key/value to the query shape): its DynamicCache holds num_heads heads
    kv_repeated_in_transformers: bool = False
    # the attention module expands K/V to every query head (a copy) before SDPA, so the backward keeps full-width K
    # and V (transformers Falcon new_decoder_architecture; litgpt's CausalSelfAttention for GQA/MQA in training)
    kv_expanded_in_attention: bool = False
    value_view_of_qkv: bool = False  # the attention's V is a view of the fused q/k/v output (GPT-NeoX qkv.chunk)
    # transformers' module calls SDPA with fewer K/V heads than query heads and no enable_gqa (Falcon multi_query):
    # the fused kernels refuse it and torch runs the math kernel (softmax probabilities kept for the backward)
    math_attention: bool = False
    attention_mask_materialised: bool = False  # transformers' module passes SDPA a float causal mask (Falcon)
    # the attention output is head-major (q made contiguous by the partial-rotary torch.cat), so the transpose before
    # the output projection copies it and that projection saves the copy (Phi, GPT-NeoX; litgpt always)
    attention_output_copy: bool = False
    # litgpt's RMSNorm (litgpt/model.py @ 00af8b0d lines 564-571) multiplies the fp32 normalised tensor by
    # ``weight.float()``: the fp32 weight copy is saved, and with the weight trained the fp32 normalised tensor (not a
    # half-precision one as in transformers' RMSNorm)
    norm_fp32_normalised: bool = False
    # with norm_fp32_normalised: the norm multiplies by ``1 + weight`` (Qwen3NextRMSNorm, modeling_qwen3_next.py lines
    # 135-140), a new fp32 tensor kept even from fp32 weights (``weight.float()`` of an fp32 weight is the weight)
    norm_unit_offset: bool = False
    # litgpt's LoRAQKVLinear with some but not all of q/k/v adapted pads the adapter output to the fused width with
    # ``index_copy_`` (litgpt/lora.py @ 00af8b0d lines 329-346, called at line 434), whose backward keeps that output
    lora_qkv_zero_pad: bool = False
    # the attention scores pass through tanh soft-capping before the softmax (Gemma 2 attn_logit_softcapping; litgpt
    # then runs its eager path, litgpt/model.py @ 00af8b0d lines 305-316): the tanh output is kept, c B per score
    attention_softcapping: bool = False
    gemma3n: Gemma3nSpec | None = None  # Gemma 3n's per-layer inputs, AltUp and LAuReL
    gemma4: Gemma4Spec | None = None  # Gemma 4's per-layer inputs and its vision / audio towers
    # head size of the full-attention layers where it differs from the sliding layers' head_dim (Gemma 4's
    # global_head_dim: Gemma4TextConfig.__post_init__ gives every full_attention layer head_dim = global_head_dim,
    # configuration_gemma4.py L220-232, read by Gemma4TextAttention L1152-1153); 0: head_dim in every layer
    full_head_dim: int = 0
    # a T5-style encoder-decoder: the first encoder_layers layers are the encoder's, the rest the decoder's
    encoder_decoder: EncoderDecoderSpec | None = None
    sliding_window: int | None = None
    max_position_embeddings: int | None = None
    # the config's rope_scaling entries (one per layer type when nested); () when it has none
    rope_scaling: tuple[RopeScaling, ...] = ()
    torch_dtype: str | None = None
    quantization: tuple[tuple[str, Any], ...] = ()
    vision: VisionSpec | None = None
    file_weights: FileWeights | None = None
    # multi-token-prediction (MTP / NextN) modules the checkpoint stores after the decoder layers (the config's
    # num_nextn_predict_layers): in the stored checkpoint's size, not in the model transformers builds or an engine
    # serves (formulas/mtp.py)
    mtp_layers: int = 0
    published_params: int | None = None
    published_active_params: int | None = None
    published_params_source: str = ""  # where published_params is stated (a model card), when known
    source: str = ""
    notes: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        # every size through the one number-validation layer (llmsizer.numbers), before any per-layer tuple exists
        where = f"model {self.name!r}"
        for fname, rng in _FIELD_RANGES:
            v = getattr(self, fname)
            if v is None and fname in _OPTIONAL:
                continue
            object.__setattr__(self, fname, check_number(v, fname, rng, where))
        for fname in ("rotary_kernel", "norm_kernel"):
            if getattr(self, fname) not in LAYER_KERNELS:
                raise InputError(f"{where}: {unknown_choice(fname, getattr(self, fname), LAYER_KERNELS)}")
        if self.num_heads % self.num_kv_heads != 0:
            raise InputError(
                f"model {self.name!r}: num_attention_heads ({self.num_heads}) is not a multiple of "
                f"num_key_value_heads ({self.num_kv_heads})"
            )
        for sub in (self.moe, self.mla, self.vision, self.recurrent, self.gemma3n, self.gemma4, self.encoder_decoder):
            if sub is not None:
                _check_sub(sub, where)
        ed = self.encoder_decoder
        if ed is not None and ed.encoder_layers + ed.decoder_layers != self.num_layers:
            raise InputError(f"model {self.name!r}: an encoder-decoder's num_layers ({self.num_layers}) must be its "
                             f"encoder_layers + decoder_layers ({ed.encoder_layers} + {ed.decoder_layers})")
        if self.moe is not None and self.moe.num_experts and self.moe.experts_per_token > self.moe.num_experts:
            raise InputError(f"model {self.name!r}: experts_per_token ({self.moe.experts_per_token}) exceeds "
                             f"num_experts ({self.moe.num_experts})")
        check_number(self.extra_embedding_rows, "extra_embedding_rows", Range(0, 1024, True, "extra embedding rows"), where)
        for fname in ("layer_types", "moe_layers", "recurrent_layers", "ffn_layers", "cross_attention_layers",
                      "kv_shared_layers", "nope_layers", "ffn_sizes"):
            v = getattr(self, fname)
            if not isinstance(v, tuple) or len(v) not in (0, self.num_layers):
                raise InputError(f"model {self.name!r}: {fname} must have one entry per layer ({self.num_layers})")
        if not self.layer_types:
            object.__setattr__(self, "layer_types", ("full",) * self.num_layers)
        if not self.moe_layers:
            object.__setattr__(self, "moe_layers", (self.moe is not None,) * self.num_layers)
        if not self.recurrent_layers:
            object.__setattr__(self, "recurrent_layers", (False,) * self.num_layers)
        if not self.ffn_layers:
            object.__setattr__(self, "ffn_layers", (True,) * self.num_layers)
        if not self.cross_attention_layers:
            object.__setattr__(self, "cross_attention_layers", (False,) * self.num_layers)
        if not self.nope_layers:
            object.__setattr__(self, "nope_layers", (False,) * self.num_layers)
        for size in self.ffn_sizes:
            check_number(size, "ffn_sizes entry", WIDTH, where)
        if not self.kv_shared_layers:
            object.__setattr__(self, "kv_shared_layers", (False,) * self.num_layers)
        elif any(s and t == "none" for s, t in zip(self.kv_shared_layers, self.layer_types or (), strict=False)):
            raise InputError(f"model {self.name!r}: a KV-sharing layer must have attention (layer_types not none)")
        elif self.encoder_decoder is None and any(
                c and t != "none" for c, t in zip(self.cross_attention_layers, self.layer_types, strict=True)):
            # (a T5 decoder layer has both: its own causal self-attention and cross-attention over the encoder)
            raise InputError(f"model {self.name!r}: a cross-attention layer has no self-attention (layer_types none)")
        if any(self.recurrent_layers) and self.recurrent is None:
            raise InputError(f"model {self.name!r}: recurrent layers need a recurrent mixer spec")
        if len(self.layer_types) != self.num_layers or len(self.moe_layers) != self.num_layers:
            raise InputError(
                f"model {self.name!r}: layer_types/moe_layers must have one entry per layer ({self.num_layers})"
            )
        if "sliding" in self.layer_types and not self.sliding_window:
            raise InputError(f"model {self.name!r}: sliding layers need a sliding_window")

    @property
    def quantization_config(self) -> dict[str, Any]:
        return dict(self.quantization)

    @property
    def is_moe(self) -> bool:
        return self.moe is not None and any(self.moe_layers)

    @property
    def attention_layers(self) -> int:
        """Layers with attention (and so a KV cache)."""
        return self.num_layers - self.layer_types.count("none")

    @property
    def kv_cache_layer_types(self) -> tuple[LayerKind, ...]:
        """The cache each layer holds of its own: its attention kind, or "none" for layers without attention and
        for layers that reuse an earlier layer's K/V (``kv_shared_layers``) and for an encoder-decoder's encoder
        layers (they run once over the source and cache nothing; transformers' ``EncoderDecoderCache`` holds the
        decoder's self-attention and cross-attention K/V only)."""
        if self.encoder_decoder is not None:
            n = self.encoder_decoder.encoder_layers
            none: LayerKind = "none"
            return (none,) * n + self.layer_types[n:]
        if not any(self.kv_shared_layers):  # no layer borrows its K/V (every model but Gemma 3n): the layer types
            return self.layer_types
        return tuple("none" if s else t for t, s in zip(self.layer_types, self.kv_shared_layers, strict=True))

    @property
    def kv_cache_layers(self) -> int:
        """Layers holding a KV cache of their own (attention layers less the K/V-sharing ones and an
        encoder-decoder's encoder layers: :attr:`kv_cache_layer_types`)."""
        if self.encoder_decoder is not None:
            return self.encoder_decoder.decoder_layers
        return self.attention_layers - sum(self.kv_shared_layers)

    def ffn_size(self, i: int) -> int:
        """Feed-forward width of layer ``i``."""
        return self.ffn_sizes[i] if self.ffn_sizes else self.intermediate_size

    @property
    def recurrent_layer_count(self) -> int:
        """Layers with a recurrent mixer (and so a per-sequence state)."""
        return sum(self.recurrent_layers) if self.recurrent is not None else 0

    @property
    def rotary(self) -> bool:
        """The forward rotates q/k by position (RoPE), so it builds cos/sin tables and runs rotation kernels: not a
        model with a learned position table (``position_embeddings``: GPT-2), attention biases (``ALIBI_MODEL_TYPES``:
        BLOOM, MPT), relative position biases (``rope`` False: T5) or no positions (``rope`` False: Mamba-2,
        Nemotron-H, Jamba, Granite-4.0-H). The one test of it
        (formulas/activations.py, training_activations.py, elementwise_traffic.py)."""
        return self.rope and not self.position_embeddings and self.model_type not in ALIBI_MODEL_TYPES

    def applies_rotary(self, i: int) -> bool:
        """Layer ``i`` rotates its q and k by position, so it runs the rotary kernels: the model is :attr:`rotary`
        and the layer attends with self-attention that encodes positions. Not a layer without attention
        (``layer_types`` "none": Qwen3-Next's Gated DeltaNet layers, Qwen3NextGatedDeltaNet calls no
        apply_rotary_pos_emb; Llama-3.2-Vision's cross-attention layers, MllamaTextCrossAttention neither) nor a NoPE
        layer (``nope_layers``: Llama 4's ``use_rope`` False). The one test of a layer's rotary work
        (formulas/elementwise_traffic.py model_layer_widths, estimate/launch.py kernel_linears); the cos/sin tables
        the model's forward builds once for all layers follow :attr:`rotary`."""
        return self.rotary and self.layer_types[i] != "none" and not self.nope_layers[i]

    @property
    def rotary_layers(self) -> tuple[bool, ...]:
        """:meth:`applies_rotary` of every layer, in order."""
        return tuple(map(self.applies_rotary, range(self.num_layers)))

    @property
    def attention_free(self) -> bool:
        """No layer attends: every mixer is recurrent (Mamba, Mamba-2: MambaConfig / Mamba2Config), so no KV cache
        and no positions. A hybrid whose layers each hold attention beside their recurrent mixer (Falcon-H1: every
        layer recurrent, every layer attending) is not. The one test of it (SGLang's token pool, eq. 3m; SGLang's
        window fallback, estimate/context_window.py; :attr:`attention_kind`)."""
        return bool(self.recurrent_layer_count) and not self.attention_layers

    @property
    def cross_attention_layer_count(self) -> int:
        """Layers that attend to the image states (Llama-3.2-Vision), not to the text."""
        return sum(self.cross_attention_layers)

    def attention_head_dim(self, i: int) -> int:
        """Head size of layer ``i``'s attention: ``full_head_dim`` in a full-attention layer where set, else
        ``head_dim``."""
        return self.full_head_dim if self.full_head_dim and self.layer_types[i] == "full" else self.head_dim

    def kv_head_dim(self, kind: str) -> int:
        """Head size of the K/V a layer of attention ``kind`` ("full" / "sliding") caches."""
        return self.full_head_dim if self.full_head_dim and kind == "full" else self.head_dim

    def layer_key(self, i: int) -> LayerKey:
        """Layer ``i``'s entry of :meth:`layer_keys` (what decides its tensors)."""
        return self.layer_keys()[i]

    def layer_keys(self) -> tuple[LayerKey, ...]:
        """What decides each layer's tensors, layer by layer: (has attention, has the recurrent mixer, has a
        feed-forward, MoE, is a cross-attention layer, reuses another layer's K/V, its feed-forward width, its
        attention head size)."""
        has_moe = self.moe is not None
        return tuple(zip([t != "none" for t in self.layer_types], self.recurrent_layers, self.ffn_layers,
                         [m and has_moe for m in self.moe_layers], self.cross_attention_layers, self.kv_shared_layers,
                         self.ffn_sizes or (self.intermediate_size,) * self.num_layers,
                         [self.attention_head_dim(i) for i in range(self.num_layers)], strict=True))

    @property
    def attention_kind(self) -> str:
        if self.recurrent is not None and self.recurrent_layer_count:  # a hybrid or attention-free model
            mixer = {"mamba": "Mamba", "mamba2": "Mamba-2", "gated_deltanet": "Gated DeltaNet"}[self.recurrent.kind]
            if self.attention_free:
                return mixer
            return f"{self._attention_kind()} + {mixer}"
        return self._attention_kind()

    def _attention_kind(self) -> str:
        if self.mla is not None:
            return "MLA"
        if self.num_kv_heads == self.num_heads:
            return "MHA"
        if self.num_kv_heads == 1:
            return "MQA"
        return "GQA"
