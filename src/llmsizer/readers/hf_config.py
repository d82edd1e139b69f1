"""config.json (a Hugging Face model config) -> ModelSpec.

Keys are read from the config when present; when absent, the default of the transformers configuration
class is taken from ``catalog/data/config_defaults.json`` and named in the spec's ``notes``; only
``head_dim`` (= hidden_size / num_attention_heads) is derived. Model code is never imported or run.
Supported ``model_type`` values are listed in :data:`SUPPORTED_MODEL_TYPES`.
"""

from __future__ import annotations

import dataclasses
import json
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from ..errors import InputError, ModelFileError, UnsupportedArchitectureError
from ..formulas.mtp import MTP_MODEL_TYPES
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
from ..specs import MLASpec, ModelSpec, MoESpec, RopeScaling, VisionSpec
from .safe_io import MAX_JSON_FILE_BYTES, loads_bounded, read_regular, shown

CONV_KERNEL = Range(1, 1024, True, "a causal conv kernel width")
EXPAND = Range(1, 64, True, "a Mamba expansion factor")

# how transformers' module of a llama-like model type keeps its tensors, where it differs from LlamaDecoderLayer's
# (ModelSpec flags; the GGUF reader applies them too). Phi-3 (transformers v5.24.0 modeling_phi3.py): Phi3Attention
# ``qkv_proj`` = Linear(H, (heads + 2 kv_heads) x head_dim) and Phi3MLP ``gate_up_proj`` = Linear(H, 2 I) are one
# nn.Linear each (fused_qkv, fused_gate_up); V is a slice of the qkv output (``qkv[..., query_pos + kv:]``, line
# 223: value_view_of_qkv); apply_rotary_pos_emb's ``torch.cat([rotated, q_pass])`` (line 184) makes q head-major
# even at full rotary (rotary_pass_cat: a kernel each for q and k), so the output projection keeps a copy
# (attention_output_copy). Measured: tests/training/test_lora_first_layer.py (phi3 cases); the kernels:
# tests/formulas/test_training_step_kernels.py and test_inference_kernels.py (phi3 cases)
TRANSFORMERS_LAYOUT: dict[str, dict[str, Any]] = {
    "phi3": dict(fused_qkv=True, fused_gate_up=True, value_view_of_qkv=True, attention_output_copy=True,
                 rotary_pass_cat=True),
}
LLAMA_LIKE = {"llama", "mistral", "qwen2", "qwen3", "granite", "phi3", "gemma", "gemma2", "gemma3_text", "olmo2",
              "qwen2_5_vl_text", "qwen3_vl_text"}  # *_vl_text: only as the language model of a *_vl config
MOE_TYPES = {"mixtral", "qwen2_moe", "qwen3_moe", "deepseek_v2", "deepseek_v3", "deepseek_v32", "gpt_oss", "glm4_moe",
             "minimax_m2", "qwen3_vl_moe_text"}  # qwen3_vl_moe_text: only as the language model of a qwen3_vl_moe config
MLA_TYPES = {"deepseek_v2", "deepseek_v3", "deepseek_v32"}
# hybrid attention / state-space families: readers/hf_hybrid.py
HYBRID_TYPES = {"qwen3_next", "jamba", "falcon_h1", "nemotron_h", "granitemoehybrid", "mamba2", "llama4_text",
                "qwen3_5_text", "qwen3_5_moe_text"}  # qwen3_5*_text: only as the language model of a qwen3_5* config
# multimodal configs: the language model in text_config (or, for Qwen2.5-VL, at the top level) + a vision_config
# Qwen3-VL-MoE (Qwen3VLMoeTextModel): Qwen3-MoE's decoder (per-head q/k norms, routed experts without a shared
# expert, mlp_only_layers / decoder_sparse_step) under Qwen3-VL's vision tower (models/qwen3_vl_moe/modeling_qwen3_vl_moe.py)
# Qwen3.5 / Qwen3.6 (qwen3_5, qwen3_5_moe; transformers 5.24 models/qwen3_5/modular_qwen3_5.py,
# models/qwen3_5_moe/modular_qwen3_5_moe.py): Qwen3-Next's hybrid decoder (readers/hf_hybrid.py) under Qwen3-VL's
# vision tower without its deepstack mergers (Qwen3_5VisionModel.__init__ deletes them)
MULTIMODAL = {"gemma3": "gemma3_text", "qwen2_5_vl": "qwen2_5_vl_text", "qwen3_vl": "qwen3_vl_text",
              "qwen3_vl_moe": "qwen3_vl_moe_text", "qwen3_5": "qwen3_5_text", "qwen3_5_moe": "qwen3_5_moe_text"}
# same vision tower (Qwen3VLVisionModel / Qwen3VLMoeVisionModel; Qwen3_5VisionModel / Qwen3_5MoeVisionModel subclass it)
QWEN3_VL_TYPES = {"qwen3_vl", "qwen3_vl_moe", "qwen3_5", "qwen3_5_moe"}
QWEN3_5_TYPES = {"qwen3_5", "qwen3_5_moe"}
# Meta's Llama vision families, with their own towers and (mllama) cross-attention layers: readers/hf_llama_vision.py
LLAMA_VISION = {"mllama", "llama4"}
# Gemma 3n (per-layer inputs, AltUp, LAuReL, K/V-sharing layers): readers/hf_gemma3n.py
GEMMA3N = {"gemma3n", "gemma3n_text"}
# Gemma 4 (per-layer inputs, per-type head sizes, K/V-sharing layers, vision and audio towers): readers/hf_gemma4.py
GEMMA4 = {"gemma4", "gemma4_text"}
# parallel attention + MLP blocks with LayerNorms (Falcon, Phi-1/1.5/2, GPT-NeoX / Pythia / StableLM-Alpha, StableLM-2):
# readers/hf_parallel.py
PARALLEL_TYPES = {"falcon", "phi", "gpt_neox", "stablelm"}
# T5-style encoder-decoders (T5 / T5 v1.1 / T0, mT5 / mT0): readers/hf_t5.py
ENCODER_DECODER_TYPES = {"t5", "mt5"}
# language models that exist here only inside a multimodal config (gemma3_text is also a model of its own)
TEXT_OF_MULTIMODAL = {"qwen2_5_vl_text", "qwen3_vl_text", "qwen3_vl_moe_text", "qwen3_5_text", "qwen3_5_moe_text"}
SUPPORTED_MODEL_TYPES = tuple(sorted(((LLAMA_LIKE | MOE_TYPES | HYBRID_TYPES) - TEXT_OF_MULTIMODAL)
                                     | {"gpt_bigcode", "gpt2"} | set(MULTIMODAL) | LLAMA_VISION | GEMMA3N | GEMMA4 | PARALLEL_TYPES
                                     | ENCODER_DECODER_TYPES))
# model_type values that name another family's definition. Kimi K2 ships model_type 'kimi_k2' with
# architectures ['DeepseekV3ForCausalLM'] (Moonshot's README: "Kimi-K2 reuses the DeepseekV3CausalLM architecture
# ... set model_type to kimi_k2 ... change it to deepseek_v3 as a temporary workaround", MoonshotAI/Kimi-K2
# README_zh.md), and transformers reads it the same way (models/kimi_k25/configuration_kimi_k25.py
# Kimi_K25Config.__post_init__: a text_config of model_type 'kimi_k2' becomes 'deepseek_v3').
MODEL_TYPE_ALIASES = {"kimi_k2": "deepseek_v3"}
# Qwen2VLImageProcessor / Qwen2VLVideoProcessor class defaults (transformers models/qwen2_vl/
# image_processing_qwen2_vl.py L96 size, video_processing_qwen2_vl.py L118 size), used when a catalog entry gives
# no preprocessor_config; the published Qwen2.5-VL preprocessor_config.json raises max_pixels to 12845056.
QWEN_VL_PIXELS = {"min_pixels": 56 * 56, "max_pixels": 28 * 28 * 1280}
QWEN_VL_VIDEO_PIXELS = {"min_pixels": 128 * 28 * 28, "max_pixels": 28 * 28 * 768}
# Qwen3VLVideoProcessor class defaults (video_processing_qwen3_vl.py L114 size)
QWEN3_VL_VIDEO_PIXELS = {"min_pixels": 128 * 32 * 32, "max_pixels": 32 * 32 * 768}

# Every numeric config key the reader uses, and the documented range (llmsizer.numbers) its value must lie in.
# Each value is checked when it is read, before anything proportional to it (per-layer lists) is built.
NUMERIC_KEYS: dict[str, Range] = {
    "num_hidden_layers": LAYERS, "n_layer": LAYERS,
    "num_attention_heads": HEADS, "n_head": HEADS, "num_key_value_heads": HEADS,
    "hidden_size": WIDTH, "n_embd": WIDTH, "head_dim": WIDTH, "n_inner": WIDTH,
    "intermediate_size": WIDTH_OR_ZERO, "moe_intermediate_size": WIDTH, "shared_expert_intermediate_size": WIDTH_OR_ZERO,
    "kv_lora_rank": WIDTH, "q_lora_rank": WIDTH, "qk_nope_head_dim": WIDTH, "qk_rope_head_dim": WIDTH_OR_ZERO,
    "v_head_dim": WIDTH, "index_n_heads": HEADS, "index_head_dim": WIDTH, "rotary_dim": WIDTH,
    "vocab_size": VOCAB,
    "num_local_experts": EXPERTS, "num_experts": EXPERTS_OR_ZERO, "n_routed_experts": EXPERTS_OR_ZERO,
    "num_experts_per_tok": EXPERTS, "experts_per_token": EXPERTS, "n_shared_experts": EXPERTS_OR_ZERO,
    "max_position_embeddings": TOKENS, "n_positions": TOKENS, "sliding_window": TOKENS_OR_ZERO,
    "first_k_dense_replace": LAYER_INDEX, "max_window_layers": LAYER_INDEX, "num_nextn_predict_layers": LAYER_INDEX,
    "decoder_sparse_step": LAYERS, "moe_layer_freq": LAYERS, "sliding_window_pattern": LAYERS,
    "image_size": PIXELS, "patch_size": PIXELS, "num_channels": PIXELS, "mm_tokens_per_image": TOKENS,
    "depth": LAYERS, "num_heads": HEADS, "in_channels": PIXELS, "spatial_merge_size": PIXELS,
    "temporal_patch_size": PIXELS, "out_hidden_size": WIDTH, "min_pixels": IMAGE_AREA, "max_pixels": IMAGE_AREA,
    "shortest_edge": IMAGE_AREA, "longest_edge": IMAGE_AREA, "num_position_embeddings": TOKENS,
    # hybrid / state-space families (readers/hf_hybrid.py); "num_heads" (HEADS) is listed with the vision keys above
    "linear_num_value_heads": HEADS, "linear_num_key_heads": HEADS, "linear_key_head_dim": WIDTH,
    "linear_value_head_dim": WIDTH, "linear_conv_kernel_dim": CONV_KERNEL,
    "mamba_d_state": WIDTH, "mamba_d_conv": CONV_KERNEL, "mamba_expand": EXPAND, "mamba_n_heads": HEADS,
    "mamba_n_groups": HEADS, "mamba_d_ssm": WIDTH, "mamba_num_heads": HEADS, "mamba_head_dim": WIDTH,
    "ssm_state_size": WIDTH, "state_size": WIDTH, "conv_kernel": CONV_KERNEL, "expand": EXPAND,
    "n_groups": HEADS, "attn_layer_period": LAYERS, "attn_layer_offset": LAYER_INDEX,
    "expert_layer_period": LAYERS, "expert_layer_offset": LAYER_INDEX, "shared_intermediate_size": WIDTH_OR_ZERO,
    "moe_shared_expert_intermediate_size": WIDTH_OR_ZERO, "moe_latent_size": WIDTH,
    "intermediate_size_mlp": WIDTH, "attention_chunk_size": TOKENS, "interleave_moe_layer_step": LAYERS,
    "no_rope_layer_interval": LAYERS, "chunk_size": TOKENS, "mamba_chunk_size": TOKENS,
    # Llama vision towers (readers/hf_llama_vision.py)
    "num_global_layers": LAYERS, "attention_heads": HEADS, "vision_output_dim": WIDTH, "max_num_tiles": PIXELS,
    "projector_input_dim": WIDTH, "projector_output_dim": WIDTH, "window_size": PIXELS,
    # Gemma 3n (readers/hf_gemma3n.py)
    "hidden_size_per_layer_input": WIDTH, "vocab_size_per_layer_input": VOCAB, "laurel_rank": WIDTH,
    "altup_num_inputs": Range(1, 64, True, "AltUp streams"), "num_kv_shared_layers": LAYER_INDEX,
    # Gemma 4 (readers/hf_gemma4.py)
    "global_head_dim": WIDTH, "position_embedding_size": TOKENS, "conv_kernel_size": CONV_KERNEL,
    "output_proj_dims": WIDTH,
    # T5 / mT5 (readers/hf_t5.py)
    "d_model": WIDTH, "d_kv": WIDTH, "d_ff": WIDTH, "num_layers": LAYERS, "num_decoder_layers": LAYERS,
    "relative_attention_num_buckets": Range(1, 2**20, True, "relative position buckets"),
    "relative_attention_max_distance": TOKENS,
}


@lru_cache(maxsize=1)
def _defaults() -> dict[str, dict[str, Any]]:
    text = resources.files("llmsizer.catalog.data").joinpath("config_defaults.json").read_text("utf-8")
    data: dict[str, dict[str, Any]] = json.loads(text)
    return data


class _Cfg:
    """A config dict with class defaults behind it; records which defaults were used."""

    def __init__(self, cfg: dict[str, Any], model_type: str, where: str) -> None:
        self.cfg = cfg
        self.defaults = _defaults().get(model_type, {})
        self.model_type = model_type
        self.where = where
        self.used_defaults: list[str] = []

    def has(self, key: str) -> bool:
        return key in self.cfg or key in self.defaults

    def get(self, key: str, fallback: Any = None) -> Any:
        """The config's value (else the class default, else ``fallback``); numeric keys are range-checked."""
        if key in self.cfg:
            v = self.cfg[key]
        elif key in self.defaults:
            self.used_defaults.append(f"{key}={self.defaults[key]!r} ({self.defaults.get('_class', self.model_type)} default)")
            v = self.defaults[key]
        else:
            return fallback
        if key in NUMERIC_KEYS and v is not None:
            if not isinstance(v, (int, float)):  # a string, list or object: shown cut short, escaped
                raise InputError(f"{key} ({self.where}): expected {NUMERIC_KEYS[key].describe()}, got {shown(v)}")
            return check_number(v, key, NUMERIC_KEYS[key], self.where)
        return v

    def req(self, *keys: str) -> int:
        for k in keys:
            v = self.get(k)
            if v is not None:
                if not isinstance(v, int) or isinstance(v, bool):  # a key outside NUMERIC_KEYS
                    raise ModelFileError(f"{self.where}: '{k}' must be an integer, got {shown(v)}")
                return v
        raise ModelFileError(f"{self.where}: missing required key '{keys[0]}' for model_type '{self.model_type}'")

    def layer_list(self, key: str, n_layers: int) -> list[Any] | None:
        """A per-layer list (``layer_types``, ``mlp_only_layers``): a JSON list of at most ``n_layers`` entries."""
        v = self.get(key)
        if v is None:
            return None
        if not isinstance(v, list) or len(v) > n_layers:
            raise ModelFileError(f"{self.where}: '{key}' must be a list of at most {n_layers} entries (one per layer), "
                                 f"got {type(v).__name__}" + (f" of {len(v)}" if isinstance(v, list) else ""))
        return v


ROPE_FACTOR = Range(1e-6, 2**20, False, "a RoPE scaling factor")
# legacy rope types the engines rename before reading them (vLLM transformers_utils/config.py
# patch_rope_parameters_dict: 'su' -> 'longrope', 'mrope' -> 'default')
_ROPE_TYPE_RENAMES = {"su": "longrope", "mrope": "default"}


FRACTION = Range(0.0, 1.0, False, "a fraction")


def rotary_dim_of(c: _Cfg, head_dim: int, keys: tuple[str, ...] = ("partial_rotary_factor",),
                  required: bool = False) -> int:
    """Rotary channels per head, the one reading of a partial rotary: int(head_dim x factor), as the attention and
    rotary modules compute it (transformers 5.24 modeling_qwen3_next.py / modeling_glm4_moe.py / modeling_phi3.py
    ``Qwen3NextRotaryEmbedding.compute_default_rope_parameters``: ``dim = int(head_dim * partial_rotary_factor)``;
    ``apply_rotary_pos_emb`` then rotates ``q[..., :cos.shape[-1]]`` and concatenates the rest; modeling_stablelm.py
    :230, modeling_phi.py, modeling_gpt_neox.py ``rotary_ndims``). The factor is the first of ``keys`` present in
    config.json, else ``rope_parameters.partial_rotary_factor`` (transformers v5's place for it), else the class
    default of ``keys[0]``. With none (``required`` False) or a factor of 1: 0, every channel rotated."""
    factor: Any = None
    for k in keys:
        if k in c.cfg:
            factor = c.cfg[k]
            break
    if factor is None:
        rope = c.cfg.get("rope_parameters") or c.cfg.get("rope_scaling") or {}
        factor = rope.get("partial_rotary_factor") if isinstance(rope, dict) else None
    if factor is None:
        factor = c.get(keys[0])  # the class default, noted
    if factor is None and not required:
        return 0
    if isinstance(factor, bool) or not isinstance(factor, (int, float)):
        raise InputError(f"{keys[0]} ({c.where}): expected a number in [0, 1], got {factor!r}")
    rot = int(head_dim * check_number(float(factor), keys[0], FRACTION, c.where))
    return rot if required or rot < head_dim else 0


def rope_scaling_of(c: _Cfg) -> tuple[RopeScaling, ...]:
    """The config's ``rope_scaling`` (transformers v5: ``rope_parameters``) as RopeScaling entries: one, or one per
    layer type when the object is keyed by layer type (transformers v5's nested form); () when it has none. Each
    entry's type is ``rope_type``, else the legacy ``type`` ('default' when neither: a rotary without scaling), with
    vLLM's renames of legacy names; ``factor`` and ``original_max_position_embeddings`` range-checked as read."""
    raw = c.cfg.get("rope_scaling")
    if raw is None:
        raw = c.cfg.get("rope_parameters")
    if raw is None:
        return ()
    if not isinstance(raw, dict):
        raise ModelFileError(f"{c.where}: rope_scaling must be an object, got {shown(raw)}")
    nested = bool(raw) and all(isinstance(v, dict) for v in raw.values())
    entries = []
    for entry in (raw.values() if nested else (raw,)):
        kind = entry.get("rope_type", entry.get("type", "default"))
        if not isinstance(kind, str) or len(kind) > 64:
            raise ModelFileError(f"{c.where}: rope_scaling rope_type must be a name such as 'yarn', got {shown(kind)}")
        factor, original = entry.get("factor"), entry.get("original_max_position_embeddings")
        if factor is not None:
            if isinstance(factor, bool) or not isinstance(factor, (int, float)):
                raise ModelFileError(f"{c.where}: rope_scaling factor must be a number, got {shown(factor)}")
            factor = float(check_number(factor, "rope_scaling factor", ROPE_FACTOR, c.where))
        if original is not None:
            if isinstance(original, bool) or not isinstance(original, int):
                raise ModelFileError(f"{c.where}: rope_scaling original_max_position_embeddings must be an integer, "
                                     f"got {shown(original)}")
            original = int(check_number(original, "rope_scaling original_max_position_embeddings", TOKENS, c.where))
        entries.append(RopeScaling(_ROPE_TYPE_RENAMES.get(kind, kind), factor, original))
    return tuple(entries)


def load_config_file(path: str | Path) -> dict[str, Any]:
    """Read and parse a config.json; malformed files raise one clear ModelFileError.

    Only a regular file of at most MAX_JSON_FILE_BYTES is read, and its nesting depth and value count are
    checked before parsing (:mod:`llmsizer.readers.safe_io`).
    """
    p = Path(path)
    cfg = loads_bounded(read_regular(p, MAX_JSON_FILE_BYTES, "JSON file"), str(p), "the file")
    if not isinstance(cfg, dict):
        raise ModelFileError(f"{p}: expected a JSON object at the top level")
    return cfg


def _layer_types(c: _Cfg, n_layers: int) -> tuple[tuple[str, ...], int | None]:
    """Which layers use sliding-window attention, following each config class's rule.

    transformers builds its cache from ``config.layer_types`` when the class defines it, else it marks a
    layer sliding when ``sliding_window`` is not None (``cache_utils.get_layer_types_and_kwargs``).
    """
    mt = c.model_type
    explicit = c.layer_list("layer_types", n_layers)
    if explicit:
        kinds = tuple("sliding" if "sliding" in str(t) else "full" for t in explicit)
        if len(kinds) != n_layers:
            raise ModelFileError(f"{c.where}: layer_types has {len(kinds)} entries for {n_layers} layers")
        return kinds, (c.get("sliding_window") if "sliding" in kinds else None)
    if mt in ("qwen2", "qwen3", "qwen2_5_vl_text"):
        # Qwen2Config / Qwen3Config / Qwen2_5_VLTextConfig.__post_init__: sliding_window = None unless use_sliding_window; layers with
        # index >= max_window_layers slide (configuration_qwen2.py, configuration_qwen3.py).
        window = c.get("sliding_window") if c.get("use_sliding_window") else None
        if not window:
            return ("full",) * n_layers, None
        first = c.get("max_window_layers", 0) or 0
        kinds = tuple("sliding" if i >= first else "full" for i in range(n_layers))
        return kinds, (window if "sliding" in kinds else None)
    if mt == "qwen2_moe":
        # Qwen2MoeConfig.__post_init__: layer i slides if (i + 1) % 2 and i < max_window_layers and
        # use_sliding_window (configuration_qwen2_moe.py) -- the opposite end of the stack from Qwen2.
        window = c.get("sliding_window") if c.get("use_sliding_window") else None
        if not window:
            return ("full",) * n_layers, None
        last = c.get("max_window_layers", 0) or 0
        kinds = tuple("sliding" if (i + 1) % 2 and i < last else "full" for i in range(n_layers))
        return kinds, (window if "sliding" in kinds else None)
    if mt == "qwen3_moe":
        # Qwen3MoeConfig has no layer_types and no max_window_layers: with use_sliding_window every layer
        # slides (configuration_qwen3_moe.py __post_init__; cache_utils.get_layer_types_and_kwargs).
        window = c.get("sliding_window") if c.get("use_sliding_window") else None
        return (("sliding",) * n_layers, window) if window else (("full",) * n_layers, None)
    window = c.get("sliding_window")
    if mt in ("gemma2", "gpt_oss") and window:
        # Gemma2Config / GptOssConfig: even layers (0, 2, ...) slide, odd layers attend globally.
        return tuple("sliding" if (i + 1) % 2 else "full" for i in range(n_layers)), window
    if mt == "gemma3_text" and window:
        pattern = c.get("sliding_window_pattern") or 6
        return tuple("sliding" if (i + 1) % pattern else "full" for i in range(n_layers)), window
    if window and mt in ("mistral", "mixtral", "phi3"):
        # A single sliding_window with no per-layer types applies to every layer
        # (transformers DynamicCache and vLLM both read it that way).
        if c.get("max_position_embeddings") and window >= c.get("max_position_embeddings"):
            return ("full",) * n_layers, None
        return ("sliding",) * n_layers, window
    return ("full",) * n_layers, None


# Attention projection biases, as each transformers models/<type>/modeling_<type>.py builds them:
# q/k/v/o_proj all take config.attention_bias (LlamaAttention and its copies); Qwen2Attention hard-codes
# q/k/v bias=True, o bias=False; Qwen2MoeAttention uses config.qkv_bias (default True) for q/k/v, o bias=False;
# Mistral, Mixtral and Phi3 hard-code bias=False; DeepseekV2/V3Attention put attention_bias on q_a_proj,
# kv_a_proj_with_mqa and o_proj (the MLA branch of formulas/tensors.py reads qkv bias for the first two).
ATTN_BIAS_QKVO = {"llama", "granite", "olmo2", "gemma", "gemma2", "gemma3_text", "qwen3", "qwen3_moe", "gpt_oss",
                  "deepseek_v2", "deepseek_v3", "deepseek_v32", "qwen3_vl_text", "qwen3_vl_moe_text"}
# config.mlp_bias is honoured only by LlamaMLP, GraniteMLP and DeepseekV2MLP (dense and shared-expert MLPs);
# every other MLP hard-codes bias=False.
MLP_BIAS_TYPES = {"llama", "granite", "deepseek_v2"}


def _attention_biases(c: _Cfg) -> tuple[bool, bool]:
    """(q/k/v bias, output-projection bias) of model type ``c.model_type``; see ATTN_BIAS_QKVO."""
    mt = c.model_type
    if mt in ("qwen2", "qwen2_5_vl_text"):  # Qwen2_5_VLAttention: q/k/v bias, o_proj without
        return True, False
    if mt == "qwen2_moe":
        return bool(c.get("qkv_bias", True)), False
    if mt == "glm4_moe":
        # Glm4MoeAttention: q/k/v_proj bias=config.attention_bias, o_proj bias=False (modeling_glm4_moe.py)
        return bool(c.get("attention_bias", False)), False
    if mt in ATTN_BIAS_QKVO:
        b = bool(c.get("attention_bias", False))
        return b, b
    return False, False


def _moe(c: _Cfg, n_layers: int, hidden: int) -> tuple[MoESpec | None, tuple[bool, ...]]:
    mt = c.model_type
    if mt == "mixtral":
        moe = MoESpec(c.req("num_local_experts"), c.req("num_experts_per_tok"), c.req("intermediate_size"))
        return moe, (True,) * n_layers
    if mt == "minimax_m2":
        # MiniMaxM2SparseMoeBlock (transformers 5.24 models/minimax_m2/modeling_minimax_m2.py L107-125): every layer,
        # num_local_experts SwiGLU experts of intermediate_size (MiniMaxM2Experts L68-77: gate_up_proj [E, 2I, H],
        # down_proj [E, H, I]), no shared expert; the router MiniMaxM2TopKRouter (L46-65) a [E, H] weight without bias,
        # its input cast to the weight's dtype (no fp32 upcast), sigmoid scores plus e_score_correction_bias for the
        # choice (modular_minimax_m2.py L128-137). transformers builds that bias always (a buffer, L114); vLLM 0.19.1
        # and SGLang 0.5.23 only where config.use_routing_bias (vllm models/minimax_m2.py:88-97, sglang
        # models/minimax_m2.py:525-534): MoESpec.score_correction_bias reads that flag
        moe = MoESpec(c.req("num_local_experts"), c.req("num_experts_per_tok"), c.req("intermediate_size"),
                      score_correction_bias=bool(c.get("use_routing_bias", False)), router_score="sigmoid")
        return moe, (True,) * n_layers
    if mt == "gpt_oss":
        moe = MoESpec(c.req("num_local_experts"), c.req("num_experts_per_tok", "experts_per_token"),
                      c.req("intermediate_size"), router_bias=True, expert_bias=True)
        return moe, (True,) * n_layers
    if mt in ("qwen2_moe", "qwen3_moe", "qwen3_next", "qwen3_vl_moe_text", "qwen3_5_moe_text"):
        # Qwen3_5MoeTextConfig deletes decoder_sparse_step and mlp_only_layers (``= AttributeError()``, and
        # ``del self.mlp_only_layers`` in __post_init__) and Qwen3_5MoeDecoderLayer builds the sparse block on every
        # layer (modular_qwen3_5_moe.py): a config.json's values of them are not read
        qwen35 = mt == "qwen3_5_moe_text"
        step = 1 if qwen35 else c.get("decoder_sparse_step", 1) or 1
        dense = set() if qwen35 else {check_number(i, "mlp_only_layers entry", LAYER_INDEX, c.where)
                                      for i in c.layer_list("mlp_only_layers", n_layers) or []}
        # transformers 5 saves Qwen3MoeConfig with 'num_local_experts'; published configs say 'num_experts'
        n_exp = c.req("num_local_experts") if ("num_local_experts" in c.cfg and "num_experts" not in c.cfg) \
            else c.req("num_experts")
        layers = tuple(i not in dense and n_exp > 0 and (i + 1) % step == 0 for i in range(n_layers))
        # Qwen2MoeSparseMoeBlock (and Qwen3NextSparseMoeBlock) always builds shared_expert (of
        # shared_expert_intermediate_size) and shared_expert_gate; Qwen3MoeSparseMoeBlock has neither
        # (modeling_qwen2_moe.py, modeling_qwen3_next.py, modeling_qwen3_moe.py).
        qwen2 = mt not in ("qwen3_moe", "qwen3_vl_moe_text")  # Qwen3VLMoeTextSparseMoeBlock: experts + gate only
        shared = (c.get("shared_expert_intermediate_size", 0) or 0) if qwen2 else 0
        moe = MoESpec(n_exp, c.req("num_experts_per_tok"), c.req("moe_intermediate_size"),
                      shared_intermediate_size=shared, shared_expert_gate=qwen2)
        return moe, layers
    if mt in ("deepseek_v2", "deepseek_v3", "deepseek_v32", "glm4_moe"):
        # Glm4MoeDecoderLayer: MoE when layer_idx >= first_k_dense_replace; shared_experts = Glm4MoeMLP of
        # moe_intermediate_size * n_shared_experts; router weight [E, H], no bias (e_score_correction_bias is a
        # buffer) -- the DeepSeek-V3 layout (modeling_glm4_moe.py). DeepseekV32Config: the first
        # first_k_dense_replace layers dense, the rest sparse (configuration_deepseek_v32.py mlp_layer_types).
        n_exp = c.get("n_routed_experts")
        if not n_exp:
            return None, (False,) * n_layers
        first = c.get("first_k_dense_replace", 0) or 0
        freq = (c.get("moe_layer_freq", 1) or 1) if mt in ("deepseek_v2", "deepseek_v3") else 1
        layers = tuple(i >= first and i % freq == 0 for i in range(n_layers))
        moe_inter = c.req("moe_intermediate_size")
        shared = (c.get("n_shared_experts") or 0) * moe_inter
        # the TopkRouter upcasts its input: F.linear(hidden_states.type(torch.float32), ...) (modeling_deepseek_v2.py
        # line 100, modeling_deepseek_v3.py line 135, modeling_deepseek_v32.py line 513, modeling_glm4_moe.py line 284)
        # the score-correction bias: GLM-4.5's router always (modeling_glm4_moe.py line 280), DeepSeek's where the
        # config routes with it (topk_method 'noaux_tc': DeepSeek-V3, V3.2, R1, Kimi-K2; DeepSeek-V2's 'greedy')
        moe = MoESpec(n_exp, c.req("num_experts_per_tok"), moe_inter, shared_intermediate_size=shared,
                      router_fp32=True,
                      score_correction_bias=mt == "glm4_moe" or c.get("topk_method") == "noaux_tc",
                      # transformers scores DeepSeek-V3/V3.2's and GLM-4.5's routers with a sigmoid whatever the
                      # config's scoring_func (modeling_deepseek_v3.py L136, modeling_deepseek_v32.py L514,
                      # modeling_glm4_moe.py L285), DeepSeek-V2's with a softmax (modeling_deepseek_v2.py L101;
                      # transformers @5.24.0)
                      router_score="softmax" if mt == "deepseek_v2" else "sigmoid")
        return moe, layers
    return None, (False,) * n_layers


def _vision(full_cfg: dict[str, Any], text_hidden: int, where: str, notes: list[str]) -> VisionSpec | None:
    vcfg = full_cfg.get("vision_config")
    if not isinstance(vcfg, dict):
        return None
    vtype = vcfg.get("model_type", "siglip_vision_model")
    if vtype != "siglip_vision_model":
        raise UnsupportedArchitectureError(f"{where}: vision encoder type {shown(vtype)} is not supported")
    v = _Cfg(vcfg, vtype, where + " vision_config")
    d = v.req("hidden_size")
    if v.get("vision_use_head"):
        # SiglipVisionTransformer adds an attention-pooling head (SiglipMultiheadAttentionPoolingHead) when
        # vision_use_head is true (the SiglipVisionConfig default); Gemma 3 checkpoints set it false and VisionSpec
        # does not model the head, so refuse rather than undercount (transformers models/siglip/modeling_siglip.py).
        raise UnsupportedArchitectureError(
            f"{where}: vision_config.vision_use_head is true (SigLIP attention-pooling head); only "
            "vision_use_head: false (Gemma 3) is supported")
    # Gemma3MultiModalProjector: mm_input_projection_weight [d_vision, d_text] + mm_soft_emb_norm [d_vision]
    # (transformers models/gemma3/modeling_gemma3.py).
    projector = d * text_hidden + d
    top = _Cfg(full_cfg, str(full_cfg.get("model_type")), where)
    # Gemma 3: every image (resized to image_size) becomes mm_tokens_per_image soft tokens
    # (transformers models/gemma3/processing_gemma3.py image_seq_length; formulas/vision_tokens.py rule "fixed")
    tokens = top.get("mm_tokens_per_image")
    vision = VisionSpec(
        hidden_size=d, intermediate_size=v.req("intermediate_size"), num_layers=v.req("num_hidden_layers"),
        image_size=v.req("image_size"), patch_size=v.req("patch_size"), num_channels=v.req("num_channels"),
        projector_params=projector, num_heads=v.req("num_attention_heads"), token_rule="fixed",
        tokens_per_image=tokens, pan_and_scan=True,
    )
    notes.extend(v.used_defaults + top.used_defaults)
    return vision


def _qwen_vision(full_cfg: dict[str, Any], text_hidden: int, where: str, notes: list[str]) -> VisionSpec:
    """Qwen2.5-VL's / Qwen3-VL's vision tower (transformers models/qwen2_5_vl/modeling_qwen2_5_vl.py
    Qwen2_5_VisionTransformerPretrainedModel, models/qwen3_vl/modeling_qwen3_vl.py Qwen3VLVisionModel) and its
    processor's dynamic-resolution rule."""
    vcfg = full_cfg.get("vision_config")
    if not isinstance(vcfg, dict):
        raise ModelFileError(f"{where}: vision_config must be an object")
    qwen3 = full_cfg.get("model_type") in QWEN3_VL_TYPES
    v = _Cfg(vcfg, f"{full_cfg.get('model_type')}_vision", where + " vision_config")
    d, merge = v.req("hidden_size"), v.req("spatial_merge_size")
    out = v.req("out_hidden_size")
    if out != text_hidden:
        raise ModelFileError(f"{where}: vision_config.out_hidden_size ({out}) differs from the text hidden_size "
                             f"({text_hidden})")
    # Qwen2_5_VLPatchMerger: ln_q RMSNorm [d] + Linear(d m^2, d m^2) + GELU + Linear(d m^2, out), both with bias.
    # Qwen3VLVisionPatchMerger: the same with a LayerNorm (weight + bias) over d, and one more merger per
    # deepstack_visual_indexes entry normalising over d m^2 (use_postshuffle_norm=True; modeling_qwen3_vl.py)
    wide = d * merge * merge
    mlp = wide * wide + wide + out * wide + out
    projector = d + mlp
    deepstack, held, depth, window, windowed = 0, 0, v.req("depth"), 0, 0
    if qwen3:
        # Qwen3.5: Qwen3_5VisionConfig deletes deepstack_visual_indexes and Qwen3_5VisionModel its mergers
        # (modular_qwen3_5.py), whatever the published config.json lists
        stack = [] if full_cfg.get("model_type") in QWEN3_5_TYPES else v.get("deepstack_visual_indexes") or []
        if not isinstance(stack, list):
            raise ModelFileError(f"{where}: vision_config.deepstack_visual_indexes must be a list")
        deepstack = len(stack)
        projector = 2 * d + mlp + deepstack * (2 * wide + mlp)
        # features merged before the last block runs are held through it (Qwen3VLVisionModel.forward)
        held = sum(1 for i in stack if isinstance(i, int) and i < depth - 1)
    else:
        # Qwen2.5-VL: the blocks outside fullatt_block_indexes attend within windows of
        # (window_size // merge // patch)^2 merged units of merge^2 patches (vision_utils.get_vision_window_index)
        full = v.get("fullatt_block_indexes") or []
        if not isinstance(full, list):
            raise ModelFileError(f"{where}: vision_config.fullatt_block_indexes must be a list")
        windowed = depth - len({i for i in full if isinstance(i, int) and 0 <= i < depth})
        window = (v.req("window_size") // merge // v.req("patch_size")) ** 2 * merge * merge
    pre = full_cfg.get("preprocessor_config") or {}
    vid = full_cfg.get("video_preprocessor_config")
    if vid is None and pre:
        # without video_preprocessor_config.json transformers builds the video processor from
        # preprocessor_config.json (BaseVideoProcessor.get_video_processor_dict, video_processing_utils.py
        # L366-387 tries [video_preprocessor_config.json, preprocessor_config.json] in that order, L411-412)
        vid = pre
        notes.append("video_processor_config=preprocessor_config (no video_preprocessor_config; transformers' "
                     "get_video_processor_dict reads preprocessor_config in its place)")
    vid = vid or {}
    if not isinstance(pre, dict) or not isinstance(vid, dict):
        raise ModelFileError(f"{where}: preprocessor_config / video_preprocessor_config must be objects")
    pixels = []
    for what, given, default in (("preprocessor_config", pre, QWEN_VL_PIXELS),
                                 ("video_preprocessor_config", vid, QWEN3_VL_VIDEO_PIXELS if qwen3
                                  else QWEN_VL_VIDEO_PIXELS)):
        p = _Cfg(given, "qwen2_vl_processor", f"{where} {what}")
        size = p.get("size") or {}
        if not isinstance(size, dict):
            raise ModelFileError(f"{where} {what}: size must be an object")
        # fast-processor files keep the bounds under size {shortest_edge, longest_edge} (image_processing_qwen2_vl.py)
        edges = _Cfg(size, "qwen2_vl_processor", f"{where} {what}.size")
        for key, edge in (("min_pixels", "shortest_edge"), ("max_pixels", "longest_edge")):
            val = p.get(key)
            if val is None:
                val = edges.get(edge)
            if val is None:
                val = default[key]
                cls = "Qwen3VLVideoProcessor" if qwen3 and what.startswith("video") else (
                    "Qwen2VLVideoProcessor" if what.startswith("video") else "Qwen2VLImageProcessor")
                notes.append(f"{what}.{key}={val} ({cls} class default)")
            pixels.append(int(val))
    vision = VisionSpec(
        hidden_size=d, intermediate_size=v.req("intermediate_size"), num_layers=depth, image_size=0,
        patch_size=v.req("patch_size"), num_channels=v.req("in_channels"), projector_params=projector,
        num_heads=v.req("num_heads"), spatial_merge_size=merge,
        temporal_patch_size=v.req("temporal_patch_size"), min_pixels=pixels[0], max_pixels=pixels[1],
        video_min_pixels=pixels[2], video_max_pixels=pixels[3], encoder="qwen3_vl" if qwen3 else "qwen2_5_vl",
        token_rule="qwen3_vl" if qwen3 else "qwen2_vl",
        position_embeddings=v.req("num_position_embeddings") if qwen3 else 0,
        window_patches=window, windowed_layers=windowed, deepstack_features=held)
    notes.extend(v.used_defaults)
    return vision


def spec_from_config(cfg: dict[str, Any], *, name: str, source: str = "",
                     published_params: int | None = None,
                     published_active_params: int | None = None) -> ModelSpec:
    """Build a ModelSpec from a parsed config.json (see module docstring for the rules)."""
    where = source or name
    mt = cfg.get("model_type")
    if not isinstance(mt, str):
        raise ModelFileError(f"{where}: config has no 'model_type'")
    full_cfg = cfg
    if mt in LLAMA_VISION:
        from . import hf_llama_vision  # same floor; it reuses this module's _Cfg
        read = hf_llama_vision.mllama_spec if mt == "mllama" else hf_llama_vision.llama4_spec
        return read(cfg, name=name, where=where, source=source, published_params=published_params,
                    published_active_params=published_active_params)
    if mt in GEMMA3N:
        from .hf_gemma3n import gemma3n_spec  # same floor; it reuses this module's _Cfg
        return gemma3n_spec(cfg, name=name, where=where, source=source, published_params=published_params,
                            published_active_params=published_active_params)
    if mt in GEMMA4:
        from .hf_gemma4 import gemma4_spec  # same floor; it reuses this module's _Cfg
        return gemma4_spec(cfg, name=name, where=where, source=source, published_params=published_params,
                           published_active_params=published_active_params)
    if mt in MULTIMODAL:
        if not isinstance(cfg.get("text_config") or {}, dict):
            raise ModelFileError(f"{where}: text_config must be an object")
        if mt == "qwen2_5_vl" and "text_config" not in cfg:
            # published Qwen2.5-VL configs are flat: Qwen2_5_VLConfig.__post_init__ pops the text keys from the top
            text = {k: v for k, v in cfg.items() if k not in ("vision_config", "model_type")}
        else:
            text = dict(cfg.get("text_config") or {})
        text["model_type"] = MULTIMODAL[mt]
        cfg, mt = text, MULTIMODAL[mt]
    if mt in MODEL_TYPE_ALIASES:
        cfg = {**cfg, "model_type": MODEL_TYPE_ALIASES[mt]}
        mt = MODEL_TYPE_ALIASES[mt]
    if mt not in SUPPORTED_MODEL_TYPES and mt not in MULTIMODAL.values():
        raise UnsupportedArchitectureError(
            f"{where}: model_type {shown(mt)} is not supported; supported: {', '.join(SUPPORTED_MODEL_TYPES)}"
        )
    for d in (cfg, full_cfg):
        for key in ("torch_dtype", "dtype"):
            if d.get(key) is not None and not isinstance(d.get(key), str):
                raise ModelFileError(f"{where}: '{key}' must be a string such as 'bfloat16', got {shown(d.get(key))}")
    if mt == "gpt_bigcode":
        return _gpt_bigcode(cfg, name, where, published_params)
    if mt == "gpt2":
        return _gpt2(cfg, name, where, published_params)
    if mt in PARALLEL_TYPES:
        from .hf_parallel import parallel_spec  # same floor; it reuses this module's _Cfg
        return parallel_spec(cfg, mt, name=name, where=where, source=source, published_params=published_params)
    if mt in ENCODER_DECODER_TYPES:
        from .hf_t5 import t5_spec  # same floor; it reuses this module's _Cfg
        return t5_spec(cfg, name=name, where=where, source=source, published_params=published_params)
    if mt in HYBRID_TYPES:
        from .hf_hybrid import hybrid_spec  # same floor; hf_hybrid reuses this module's _Cfg and _moe
        hybrid = hybrid_spec(cfg, mt, name=name, where=where, source=source, published_params=published_params,
                             published_active_params=published_active_params)
        return hybrid if full_cfg is cfg else _with_qwen3_5_top(hybrid, full_cfg, where)
    c = _Cfg(cfg, mt, where)
    hidden = c.req("hidden_size")
    n_layers = c.req("num_hidden_layers")
    n_heads = c.req("num_attention_heads")
    n_kv = c.get("num_key_value_heads") or n_heads
    head_dim = c.get("head_dim") or hidden // n_heads  # transformers: getattr(config, "head_dim", H // heads)
    if head_dim < 1:
        raise InputError(f"{where}: hidden_size ({hidden}) is smaller than num_attention_heads ({n_heads}) "
                             "and no head_dim is given")
    if n_heads % n_kv:
        raise InputError(f"{where}: num_attention_heads ({n_heads}) is not a multiple of num_key_value_heads "
                             f"({n_kv}); grouped-query attention shares each KV head among a whole group")
    layer_types, window = _layer_types(c, n_layers)
    moe, moe_layers = _moe(c, n_layers, hidden)
    mla = None
    if mt in MLA_TYPES:
        # DeepSeek-V3.2 adds the DSA lightning indexer to every layer (index_n_heads x index_head_dim):
        # DeepseekV32Indexer in transformers models/deepseek_v32/modeling_deepseek_v32.py
        dsa = mt == "deepseek_v32"
        mla = MLASpec(q_lora_rank=c.get("q_lora_rank"), kv_lora_rank=c.req("kv_lora_rank"),
                      qk_nope_head_dim=c.req("qk_nope_head_dim"), qk_rope_head_dim=c.req("qk_rope_head_dim"),
                      v_head_dim=c.req("v_head_dim"),
                      index_n_heads=c.req("index_n_heads") if dsa else 0,
                      index_head_dim=c.req("index_head_dim") if dsa else 0)
        head_dim = mla.qk_nope_head_dim + mla.qk_rope_head_dim
        n_kv = n_heads  # MLA expands the latent to every head
    qkv_bias, out_bias = _attention_biases(c)
    qk_norm = "per_head" if mt in ("qwen3", "qwen3_moe", "gemma3_text", "qwen3_vl_text", "qwen3_vl_moe_text") else ("full" if mt == "olmo2" else "none")
    if mt == "glm4_moe" and c.get("use_qk_norm"):
        qk_norm = "per_head"  # Glm4MoeAttention: q_norm/k_norm = RMSNorm(head_dim) when config.use_qk_norm
    if mt == "minimax_m2":
        # MiniMaxM2Attention builds q_norm = RMSNorm(heads x head_dim) and k_norm = RMSNorm(kv_heads x head_dim)
        # whatever the config says (modeling_minimax_m2.py L292-293, applied to the whole projection, L307-308); so
        # does vLLM 0.19.1 (models/minimax_m2.py:221-226). The published configs say use_qk_norm true, qk_norm_type
        # 'per_layer'; another setting is refused rather than sized as something no engine builds
        if c.get("use_qk_norm", True) is not True or c.get("qk_norm_type", "per_layer") != "per_layer":
            raise UnsupportedArchitectureError(
                f"{where}: MiniMax-M2 with use_qk_norm {shown(c.get('use_qk_norm'))} / qk_norm_type "
                f"{shown(c.get('qk_norm_type'))} is not supported; the engines build one q/k RMSNorm over all heads "
                "(use_qk_norm true, qk_norm_type 'per_layer')")
        qk_norm = "full"
        mtp = c.get("num_mtp_modules") if c.get("use_mtp") else 0
        if mtp:
            # the checkpoint's MTP modules, model.layers.{num_hidden_layers + i}: vLLM's main model skips them
            # (models/minimax_m2.py:416-418, get_spec_layer_idx_from_weight_name :559-567); transformers builds none
            c.used_defaults.append(f"the {mtp} MTP modules (num_mtp_modules) stored after the decoder layers are not "
                                   "counted: vLLM and transformers load none of them, and their layout is not modelled")
    quant = cfg.get("quantization_config") or full_cfg.get("quantization_config") or {}
    if not isinstance(quant, dict):
        raise ModelFileError(f"{where}: quantization_config must be an object")
    vision = None
    if full_cfg is not cfg:
        vision = (_qwen_vision(full_cfg, hidden, where, c.used_defaults) if mt in TEXT_OF_MULTIMODAL
                  else _vision(full_cfg, hidden, where, c.used_defaults))
    if full_cfg is not cfg and mt == "qwen2_5_vl_text":
        # Qwen2_5_VLConfig.tie_word_embeddings (default False), or a pre-v5 text_config's True forwarded to it
        # (configuration_qwen2_5_vl.py __post_init__)
        top = _Cfg(full_cfg, "qwen2_5_vl", where)
        tie = bool(top.get("tie_word_embeddings")) or bool((full_cfg.get("text_config") or {}).get(
            "tie_word_embeddings", False))
        c.used_defaults.extend(top.used_defaults)
    elif full_cfg is not cfg and mt in ("qwen3_vl_text", "qwen3_vl_moe_text"):
        # Qwen3VLConfig / Qwen3VLMoeConfig.tie_word_embeddings (default False); text_config's flag is not forwarded
        # (configuration_qwen3_vl.py, configuration_qwen3_vl_moe.py)
        top = _Cfg(full_cfg, str(full_cfg.get("model_type")), where)
        tie = bool(top.get("tie_word_embeddings"))
        c.used_defaults.extend(top.used_defaults)
    elif full_cfg is not cfg:
        # Gemma3ForConditionalGeneration ties lm_head to the language model's embed_tokens by the top-level
        # Gemma3Config.tie_word_embeddings (default True); text_config's flag is not consulted
        # (transformers models/gemma3/modeling_gemma3.py _tied_weights_keys, configuration_gemma3.py).
        tie = full_cfg.get("tie_word_embeddings", True)
    else:
        tie = c.get("tie_word_embeddings", True)
    spec = ModelSpec(
        name=name, model_type=mt,
        vocab_size=c.req("vocab_size"), hidden_size=hidden, num_layers=n_layers,
        num_heads=n_heads, num_kv_heads=n_kv, head_dim=head_dim,
        intermediate_size=c.get("intermediate_size") or 0,
        tie_word_embeddings=bool(tie),
        mlp_bias=bool(c.get("mlp_bias", False)) if mt in MLP_BIAS_TYPES else False,
        attention_qkv_bias=qkv_bias, attention_out_bias=out_bias,
        qk_norm=qk_norm,  # type: ignore[arg-type]
        norms_per_layer=4 if mt in ("gemma2", "gemma3_text") else 2,
        attention_sinks=mt == "gpt_oss",
        mla=mla, moe=moe, moe_layers=moe_layers,
        layer_types=layer_types, sliding_window=window,  # type: ignore[arg-type]
        max_position_embeddings=c.get("max_position_embeddings"), rope_scaling=rope_scaling_of(c),
        rotary_dim=(_minimax_rotary_dim(c, head_dim) if mt == "minimax_m2" else rotary_dim_of(c, head_dim))
        if mla is None else 0,
        torch_dtype=cfg.get("torch_dtype") or cfg.get("dtype") or full_cfg.get("torch_dtype") or full_cfg.get("dtype"),
        quantization=tuple(sorted(quant.items())),
        vision=vision,
        # the MTP modules stored after the decoder layers (formulas/mtp.py eq. (1)), for the layouts counted there
        mtp_layers=(c.get("num_nextn_predict_layers") or 0) if mt in MTP_MODEL_TYPES else 0,
        published_params=published_params, published_active_params=published_active_params,
        source=source, notes=tuple(c.used_defaults), **TRANSFORMERS_LAYOUT.get(mt, {}),
    )
    return spec


def _with_qwen3_5_top(spec: ModelSpec, full_cfg: dict[str, Any], where: str) -> ModelSpec:
    """A Qwen3.5 language model (``text_config``, read by readers/hf_hybrid.py) with what its multimodal config
    holds at the top: the vision tower (``_qwen_vision``), Qwen3_5Config / Qwen3_5MoeConfig.tie_word_embeddings
    (default False; text_config's flag is not forwarded, as Qwen3-VL's) and a top-level quantization_config."""
    # the text config's tie_word_embeddings (or its class default) is not the one read
    notes = [n for n in spec.notes if not n.startswith("tie_word_embeddings=")]
    vision = _qwen_vision(full_cfg, spec.hidden_size, where, notes)
    top = _Cfg(full_cfg, str(full_cfg.get("model_type")), where)
    tie = bool(top.get("tie_word_embeddings"))
    notes.extend(top.used_defaults)
    quant = dict(spec.quantization) or full_cfg.get("quantization_config") or {}
    if not isinstance(quant, dict):
        raise ModelFileError(f"{where}: quantization_config must be an object")
    return dataclasses.replace(spec, vision=vision, tie_word_embeddings=tie, quantization=tuple(sorted(quant.items())),
                               notes=tuple(dict.fromkeys(notes)))


def _minimax_rotary_dim(c: _Cfg, head_dim: int) -> int:
    """MiniMax-M2's rotary channels per head: the config's legacy ``rotary_dim``, which MiniMaxM2Config turns into
    ``partial_rotary_factor = rotary_dim / head_dim`` (configuration_minimax_m2.py ``convert_rope_params_to_dict``;
    vLLM 0.19.1 models/minimax_m2.py:199-204 the same), so int(head_dim x factor) = rotary_dim; without it the
    ``rotary_dim_of`` reading (0: every channel rotated)."""
    if "rotary_dim" not in c.cfg:
        return rotary_dim_of(c, head_dim)
    rot = c.req("rotary_dim")
    if rot > head_dim:
        raise InputError(f"rotary_dim ({c.where}): {rot} exceeds head_dim ({head_dim})")
    return rot if rot < head_dim else 0


def _gpt_bigcode(cfg: dict[str, Any], name: str, where: str, published: int | None) -> ModelSpec:
    """GPT-BigCode (StarCoder): MQA, LayerNorm with bias, GELU MLP with bias, learned positions.

    transformers models/gpt_bigcode/modeling_gpt_bigcode.py: c_attn = Linear(H, H + 2*head_dim) (MQA),
    c_proj, mlp.c_fc/c_proj with bias, ln_1/ln_2/ln_f LayerNorm, wte/wpe embeddings, lm_head tied. q, k and v come
    from the one c_attn linear (``fused_qkv``: one input, so one autocast copy of it in training, and PEFT's
    ``c_attn`` target adapts all three).
    """
    c = _Cfg(cfg, "gpt_bigcode", where)
    hidden = c.req("n_embd", "hidden_size")
    heads = c.req("n_head", "num_attention_heads")
    if hidden % heads:  # GPTBigCodeAttention raises ValueError unless embed_dim is divisible by num_heads
        raise InputError(f"{where}: n_embd ({hidden}) is not divisible by n_head ({heads})")
    inner = c.get("n_inner") or 4 * hidden
    return ModelSpec(
        name=name, model_type="gpt_bigcode", vocab_size=c.req("vocab_size"), hidden_size=hidden,
        num_layers=c.req("n_layer", "num_hidden_layers"), num_heads=heads,
        num_kv_heads=1 if c.get("multi_query", True) else heads, head_dim=hidden // heads,
        intermediate_size=inner, tie_word_embeddings=bool(c.get("tie_word_embeddings", True)),
        mlp_gated=False, mlp_bias=True, attention_qkv_bias=True, attention_out_bias=True, fused_qkv=True,
        norm_kind="layernorm", position_embeddings=c.req("n_positions", "max_position_embeddings"),
        max_position_embeddings=c.get("n_positions"), torch_dtype=cfg.get("torch_dtype"),
        published_params=published, source=where, notes=tuple(c.used_defaults),
    )


# GPT2Config flags that vLLM's and SGLang's GPT2Model assert false (vllm-project/vllm
# vllm/model_executor/models/gpt2.py @e7dffa68 GPT2Model.__init__, sgl-project/sglang python/sglang/srt/models/gpt2.py
# GPT2Model.__init__ @00b08c49: ``assert not config.scale_attn_by_inverse_layer_idx``, ``assert not
# config.reorder_and_upcast_attn``); transformers and llama.cpp load such a model
GPT2_ENGINE_ASSERTED = ("scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn")


def dropout_on(c: _Cfg, key: str) -> bool:
    """Whether the dropout probability ``key`` (a number in [0, 1], checked) is above zero."""
    v = c.get(key, 0.0)
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise InputError(f"{key} ({c.where}): expected a dropout probability, got {v!r}")
    return float(check_number(float(v), key, FRACTION, c.where)) > 0.0


def _gpt2(cfg: dict[str, Any], name: str, where: str, published: int | None) -> ModelSpec:
    """GPT-2 (openai-community/gpt2*, distilgpt2, GPT-3-style configs written as GPT2Config): multi-head attention,
    LayerNorm with bias, a non-gated MLP with bias, learned absolute positions, lm_head tied to wte.

    transformers v5.24.0 models/gpt2/configuration_gpt2.py (GPT2Config: n_embd, n_layer, n_head, n_inner None,
    n_positions 1024 = max_position_embeddings by ``attribute_map``, activation_function 'gelu_new',
    tie_word_embeddings True, add_cross_attention False) and modeling_gpt2.py: GPT2Attention lines 104-108
    ``c_attn = Conv1D(3 * embed_dim, embed_dim)`` (q, k and v from one module: ``fused_qkv``) and
    ``c_proj = Conv1D(embed_dim, embed_dim)``, each Conv1D a (in, out) weight plus a bias (pytorch_utils.py Conv1D);
    GPT2MLP lines 235-236 ``c_fc`` / ``c_proj`` Conv1D with bias; GPT2Block line 252 ``inner_dim = n_inner if not
    None else 4 * hidden_size``, ``ln_1`` / ``ln_2`` LayerNorm (layer_norm_epsilon); GPT2Model lines 491-496 ``wte``,
    ``wpe = Embedding(max_position_embeddings, H)``, ``ln_f``; GPT2LMHeadModel line 642 ``lm_head = Linear(n_embd,
    vocab_size, bias=False)`` tied to ``wte`` (line 637). The MLP activation ACT2FN['gelu_new'] is NewGELUActivation
    (Python tensor ops: ``mlp_act_python``). ``resid_pdrop`` > 0 (GPT2Config default 0.1) puts a dropout after each
    branch's c_proj, whose masks training keeps (``residual_dropout``); ``attn_pdrop`` (dropout of the attention
    probabilities: RNG state only in CUDA's fused SDPA kernels) and ``embd_pdrop`` (one mask for the model) are not
    counted. ``scale_attn_weights`` / ``scale_attn_by_inverse_layer_idx`` change a
    scalar only (GPT2Attention.scaling); ``reorder_and_upcast_attn`` acts on the eager path only (an fp32 score
    matrix, lines 208-211) and is not modelled; either set keeps the model off vLLM and SGLang
    (``gpt2_attention_flags``, ``GPT2_ENGINE_ASSERTED``). ``add_cross_attention`` (GPT-2 as the decoder of an encoder-decoder:
    ``crossattention`` + ``ln_cross_attn`` per block, line 258) is refused.
    """
    c = _Cfg(cfg, "gpt2", where)
    if cfg.get("add_cross_attention", False) is not False:  # GPT2Config default False
        raise UnsupportedArchitectureError(f"{where}: a gpt2 config with add_cross_attention (GPT-2 as the decoder "
                                           "of an encoder-decoder) is not supported")
    hidden = c.req("n_embd", "hidden_size")
    heads = c.req("n_head", "num_attention_heads")
    if hidden % heads:  # GPT2Attention raises ValueError unless embed_dim is divisible by num_heads
        raise InputError(f"{where}: n_embd ({hidden}) is not divisible by n_head ({heads})")
    act = c.get("activation_function", "gelu_new")
    if not isinstance(act, str):
        raise ModelFileError(f"{where}: activation_function must be a string such as 'gelu_new', got {shown(act)}")
    # GPT2Config.attribute_map: max_position_embeddings is n_positions (a config.json may write either)
    flags = tuple(k for k in GPT2_ENGINE_ASSERTED if cfg.get(k, False) is not False)  # GPT2Config defaults False
    positions = c.req("max_position_embeddings" if "n_positions" not in cfg and "max_position_embeddings" in cfg
                      else "n_positions")
    return ModelSpec(
        name=name, model_type="gpt2", vocab_size=c.req("vocab_size"), hidden_size=hidden,
        num_layers=c.req("n_layer", "num_hidden_layers"), num_heads=heads, num_kv_heads=heads,
        head_dim=hidden // heads, intermediate_size=c.get("n_inner") or 4 * hidden,
        tie_word_embeddings=bool(c.get("tie_word_embeddings", True)),
        mlp_gated=False, mlp_bias=True, attention_qkv_bias=True, attention_out_bias=True, fused_qkv=True,
        mlp_act_python=act == "gelu_new", residual_dropout=dropout_on(c, "resid_pdrop"), gpt2_attention_flags=flags,
        norm_kind="layernorm", position_embeddings=positions, max_position_embeddings=positions,
        torch_dtype=cfg.get("torch_dtype") or cfg.get("dtype"),
        published_params=published, source=where, notes=tuple(c.used_defaults),
    )
