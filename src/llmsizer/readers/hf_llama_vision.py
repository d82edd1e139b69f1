"""config.json of Meta's two Llama vision families -> ModelSpec with a vision tower.

- ``mllama`` (Llama-3.2-Vision; transformers v5.24.0 models/mllama/modeling_mllama.py): a Llama text stack whose
  ``cross_attention_layers`` replace self-attention with cross-attention to the image states
  (MllamaCrossAttentionDecoderLayer), an input embedding of ``vocab_size + 8`` rows (MllamaTextModel), an untied
  lm_head (MllamaForConditionalGeneration leaves ``_tied_weights_keys`` commented out), the MllamaVisionModel tower
  (a local encoder of ``num_hidden_layers`` and a gated global one of ``num_global_layers``) and
  ``multi_modal_projector`` = Linear(vision_output_dim, text hidden, bias=True). An image is one <|image|> token in
  the context; its tiles' states are held as K/V by every cross-attention layer (formulas/vision_tokens.py rule
  "mllama", formulas/kv_cache.py ``cross_attention_kv``).
- ``llama4`` (Llama 4 Scout / Maverick; models/llama4/modeling_llama4.py Llama4ForConditionalGeneration): the
  ``llama4_text`` stack (readers/hf_hybrid.py), the Llama4VisionModel tower with its pixel-shuffle MLP adapter
  (Llama4VisionPixelShuffleMLP: fc1 Linear(intermediate_size, projector_input_dim), fc2
  Linear(projector_output_dim, projector_output_dim), no biases) and ``multi_modal_projector`` =
  Linear(vision_output_dim, text hidden, bias=False). Image tokens: rule "llama4" with the processor's
  ``max_patches`` (Llama4ImageProcessor default 16, image_processing_llama4.py).

Keys absent from a config take the configuration classes' defaults (catalog/data/config_defaults.json), named in
the spec's notes, as for every other family.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ..errors import InputError, ModelFileError
from ..numbers import LAYER_INDEX, Range, check_number
from ..specs import ModelSpec, VisionSpec
from .hf_config import _Cfg, rope_scaling_of
from .safe_io import shown

# Llama4ImageProcessor's max_patches default (transformers models/llama4/image_processing_llama4.py): at most 16
# tiles of image_size per image; a catalog entry may give its preprocessor_config.json's value
LLAMA4_MAX_PATCHES = 16
MLLAMA_EXTRA_ROWS = 8  # MllamaTextModel: nn.Embedding(config.vocab_size + 8, hidden)
SHUFFLE = Range(0.01, 1.0, False, "a pixel-shuffle ratio")


def _sub(cfg: dict[str, Any], key: str, where: str) -> dict[str, Any]:
    sub = cfg.get(key)
    if sub is None:
        return {}
    if not isinstance(sub, dict):
        raise ModelFileError(f"{where}: {key} must be an object")
    return sub


def mllama_spec(cfg: dict[str, Any], *, name: str, where: str, source: str, published_params: int | None,
                published_active_params: int | None) -> ModelSpec:
    """Llama-3.2-Vision (module docstring)."""
    t = _Cfg(_sub(cfg, "text_config", where), "mllama_text_model", where + " text_config")
    v = _Cfg(_sub(cfg, "vision_config", where), "mllama_vision_model", where + " vision_config")
    hidden, n_layers, heads = t.req("hidden_size"), t.req("num_hidden_layers"), t.req("num_attention_heads")
    kv = t.get("num_key_value_heads") or heads
    cross_idx = t.layer_list("cross_attention_layers", n_layers)
    cross = {check_number(i, "cross_attention_layers entry", LAYER_INDEX, t.where) for i in cross_idx or []}
    if any(i >= n_layers for i in cross):
        raise ModelFileError(f"{t.where}: cross_attention_layers names a layer beyond num_hidden_layers ({n_layers})")
    ratios = v.get("supported_aspect_ratios")
    if not isinstance(ratios, list) or not ratios:
        raise ModelFileError(f"{v.where}: supported_aspect_ratios must be a list of [rows, cols] pairs")
    d = v.req("hidden_size")
    out_dim = v.req("vision_output_dim")
    vision = VisionSpec(
        hidden_size=d, intermediate_size=v.req("intermediate_size"), num_layers=v.req("num_hidden_layers"),
        image_size=v.req("image_size"), patch_size=v.req("patch_size"),
        num_channels=v.req("num_channels"), num_heads=v.req("attention_heads"),
        projector_params=out_dim * hidden + hidden,  # multi_modal_projector: Linear(vision_output_dim, H, bias)
        token_rule="mllama", max_tiles=v.req("max_num_tiles"), encoder="mllama",
        global_layers=v.req("num_global_layers"), aspect_ratios=len(ratios) + 1,  # max_aspect_ratio_id + 1 rows
        # MllamaVisionModel concatenates len(intermediate_layers_indices) local outputs to the last hidden state and
        # the projector reads vision_output_dim = d x (1 + that count) (modeling_mllama.py L1011, L1285-1286; a config where they disagree fails in forward)
        intermediate_features=out_dim // d - 1)
    if heads % kv:
        raise InputError(f"{where}: num_attention_heads ({heads}) is not a multiple of num_key_value_heads ({kv})")
    return ModelSpec(
        name=name, model_type="mllama", vocab_size=t.req("vocab_size"), hidden_size=hidden, num_layers=n_layers,
        num_heads=heads, num_kv_heads=kv, head_dim=hidden // heads,  # MllamaTextSelfAttention / CrossAttention
        intermediate_size=t.req("intermediate_size"), tie_word_embeddings=False,
        layer_types=tuple("none" if i in cross else "full" for i in range(n_layers)),
        cross_attention_layers=tuple(i in cross for i in range(n_layers)), extra_embedding_rows=MLLAMA_EXTRA_ROWS,
        max_position_embeddings=t.get("max_position_embeddings"), rope_scaling=rope_scaling_of(t),
        torch_dtype=cfg.get("torch_dtype") or cfg.get("dtype") or t.get("torch_dtype") or t.get("dtype"),
        vision=vision, published_params=published_params, published_active_params=published_active_params,
        source=source, notes=tuple(dict.fromkeys(t.used_defaults + v.used_defaults)))


def llama4_spec(cfg: dict[str, Any], *, name: str, where: str, source: str, published_params: int | None,
                published_active_params: int | None) -> ModelSpec:
    """Llama 4 with its vision tower (module docstring); the text stack is readers/hf_hybrid.py's llama4_text."""
    from .hf_hybrid import hybrid_spec
    text = dict(_sub(cfg, "text_config", where))
    text["model_type"] = "llama4_text"
    spec = hybrid_spec(text, "llama4_text", name=name, where=where + " text_config", source=source,
                       published_params=published_params, published_active_params=published_active_params)
    v = _Cfg(_sub(cfg, "vision_config", where), "llama4_vision_model", where + " vision_config")
    shuffle = v.get("pixel_shuffle_ratio")
    if not isinstance(shuffle, (int, float)) or isinstance(shuffle, bool):
        raise ModelFileError(f"{v.where}: pixel_shuffle_ratio must be a number, got {shown(shuffle)}")
    check_number(shuffle, "pixel_shuffle_ratio", SHUFFLE, v.where)
    merge = round(1 / shuffle)
    if abs(merge * shuffle - 1) > 1e-9:
        raise ModelFileError(f"{v.where}: pixel_shuffle_ratio {shuffle} is not 1/n (the processor's tokens per tile "
                             "need a whole merge)")
    inter, p_in, p_out = v.req("intermediate_size"), v.req("projector_input_dim"), v.req("projector_output_dim")
    # Llama4VisionMLP2 fc1 [projector_input_dim, intermediate_size] + fc2 [projector_output_dim]^2, no biases;
    # Llama4MultiModalProjector linear_1 [text hidden, vision_output_dim], no bias
    projector = p_in * inter + p_out * p_out + spec.hidden_size * v.req("vision_output_dim")
    pre = _sub(cfg, "preprocessor_config", where)
    tiles = pre.get("max_patches", LLAMA4_MAX_PATCHES)
    notes = list(spec.notes) + v.used_defaults
    if "max_patches" not in pre:
        notes.append(f"preprocessor_config.max_patches={LLAMA4_MAX_PATCHES} (Llama4ImageProcessor default)")
    vision = VisionSpec(
        hidden_size=v.req("hidden_size"), intermediate_size=inter, num_layers=v.req("num_hidden_layers"),
        image_size=v.req("image_size"), patch_size=v.req("patch_size"),
        num_channels=v.req("num_channels"), num_heads=v.req("num_attention_heads"), projector_params=projector,
        token_rule="llama4", spatial_merge_size=merge, max_tiles=tiles, encoder="llama4")
    return dataclasses.replace(spec, model_type="llama4", vision=vision,
                               torch_dtype=spec.torch_dtype or cfg.get("torch_dtype") or cfg.get("dtype"),
                               notes=tuple(dict.fromkeys(notes)))
