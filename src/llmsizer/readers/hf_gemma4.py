"""config.json of Gemma 4 (``gemma4_text``, and a multimodal ``gemma4`` with its vision and audio towers) -> ModelSpec.

Read as transformers v5.24.0 reads it (models/gemma4/configuration_gemma4.py, modeling_gemma4.py):

- ``layer_types``: given, or every 6th layer full attention and the others sliding; the last layer is forced to
  full attention either way (Gemma4TextConfig.__post_init__, configuration L187-199), window ``sliding_window``.
- head sizes: sliding layers ``head_dim``; every full-attention layer ``global_head_dim`` (a keyword popped by
  __post_init__, default 512, into ``per_layer_config``, configuration L208-221), read per layer by
  Gemma4TextAttention (modeling L1152-1153). ``ModelSpec.full_head_dim``.
- ``num_kv_shared_layers``: the last N layers reuse the K/V of the last earlier layer of the same attention type
  (``kv_sharing_modes``, configuration L225-251, which raises when a shared type has no earlier producer). Such a
  layer builds no k_proj/v_proj/k_norm/v_norm (Gemma4TextAttention, modeling L1170-1184) and keeps no cache of its
  own; transformers drops those layers' k/v tensors from the checkpoint on load (``_keys_to_ignore_on_load_unexpected``,
  modeling L1582-1588). What each engine caches for them (``ModelSpec.kv_cache_layer_types``: nothing):
  transformers gives each sliding / full layer a cache of its own head size and the reusing layers none (checked on
  a real CPU forward: tests/formulas/test_gemma4_kv_forward.py); vLLM's ``Gemma4Attention.__init__`` gives a layer
  in the last num_kv_shared_layers a ``kv_sharing_target_layer_name`` (the last earlier layer of its attention type),
  and ``Attention`` allocates no KV for such a layer (vllm/model_executor/models/gemma4.py @001cabc, cross-layer KV
  sharing of vllm PR #18212); llama.cpp's ``LLM_ARCH_GEMMA4`` hparams set ``n_layer_kv_from_start = n_layer -
  n_kv_shared_layers`` (src/llama-model.cpp, load_hparams, case LLM_ARCH_GEMMA4; src/models/gemma4.cpp
  ``llama_model_gemma4::load_arch_hparams`` in the later layout), so ``hparams.has_kv(il)`` is false for them, as for
  Gemma 3n (readers/hf_gemma3n.py). vLLM's Gemma4Attention builds qkv_proj and k_norm in every layer, the reusing
  ones too, and loads the k/v tensors the checkpoint still carries for them (weights transformers drops): 18.9M
  (E2B) / 55.1M (E4B) more parameters on vLLM than the spec counts; SGLang's Gemma4Attention does the same, so they
  are added to vLLM's and SGLang's weights (estimate/formats.py ``serving_weight_spec``, its assumptions
  ``vllm_kv_shared_weights``, ``sglang_kv_shared_weights``).
- ``use_double_wide_mlp``: a K/V-sharing layer's MLP is twice ``intermediate_size`` wide (Gemma4TextMLP, modeling
  L1053-1059): ``ModelSpec.ffn_sizes``.
- per-layer inputs ("PLE") and the towers: ``Gemma4Spec`` (specs/model.py), tensors in formulas/tensors.py.
- q_norm and k_norm are RMSNorms with a weight over the layer's head size; v_norm has none (``with_scale=False``);
  four RMSNorms around attention and the MLP (Gemma4TextDecoderLayer, modeling L1339-1342); ``layer_scalar`` is a
  buffer, not a parameter.

Refused, each with its reason: ``enable_moe_block`` (Gemma 4 26B-A4B: a dense MLP and routed experts side by
side in every layer, Gemma4TextDecoderLayer L1352-1358, not modelled), ``attention_k_eq_v`` (Gemma 4 31B: the
full-attention layers' keys double as values with ``num_global_key_value_heads`` heads, L1154 and L1178-1184, not
modelled) and ``use_bidirectional_attention: "all"`` (halves the sliding window, configuration L184-186).
"""

from __future__ import annotations

from typing import Any

from ..errors import ModelFileError, UnsupportedArchitectureError
from ..numbers import WIDTH, WIDTH_OR_ZERO, check_number
from ..specs import Gemma4AudioTower, Gemma4Spec, Gemma4VisionTower, ModelSpec
from .hf_config import _Cfg, rope_scaling_of
from .hf_gemma3n import _kv_shared, layer_types, text_config
from .safe_io import shown

GEMMA4_TYPES = ("gemma4", "gemma4_text")
FULL_EVERY = 6  # Gemma4TextConfig.__post_init__: sliding_window_pattern = 6, "by default 5:1" (configuration L188-193)
GLOBAL_HEAD_DIM = 512  # Gemma4TextConfig.__post_init__: kwargs.pop("global_head_dim", 512) (configuration L208)


def _refuse(c: _Cfg) -> None:
    if c.get("enable_moe_block"):
        raise UnsupportedArchitectureError(
            f"{c.where}: enable_moe_block (Gemma 4 MoE: a dense MLP beside routed experts in every layer) is not "
            "modelled; Gemma 4 E2B and E4B are")
    if c.get("attention_k_eq_v"):
        raise UnsupportedArchitectureError(
            f"{c.where}: attention_k_eq_v (Gemma 4 31B: keys reused as values in full-attention layers, with "
            "num_global_key_value_heads heads) is not modelled; Gemma 4 E2B and E4B are")
    if c.get("use_bidirectional_attention") == "all":
        raise UnsupportedArchitectureError(
            f"{c.where}: use_bidirectional_attention 'all' (a non-causal Gemma 4) is not modelled")


def _tower(cfg: Any, key: str, model_type: str, where: str) -> _Cfg | None:
    """A tower's config (``key``: vision_config / audio_config), None where the checkpoint has no such tower."""
    if cfg is None:
        return None
    if not isinstance(cfg, dict):
        raise ModelFileError(f"{where}: {key} must be an object or null")
    return _Cfg(cfg, model_type, f"{where} {key}")


def _vision(cfg: Any, where: str) -> Gemma4VisionTower | None:
    v = _tower(cfg, "vision_config", "gemma4_vision", where)
    if v is None:
        return None
    heads = v.req("num_attention_heads")
    return Gemma4VisionTower(
        hidden_size=v.req("hidden_size"), intermediate_size=v.req("intermediate_size"),
        num_layers=v.req("num_hidden_layers"), num_heads=heads,
        num_kv_heads=v.req("num_key_value_heads"), head_dim=v.req("head_dim"), patch_size=v.req("patch_size"),
        position_embedding_size=v.req("position_embedding_size"))


def _audio(cfg: Any, where: str) -> Gemma4AudioTower | None:
    a = _tower(cfg, "audio_config", "gemma4_audio", where)
    if a is None:
        return None
    ch = a.get("subsampling_conv_channels")
    if (not isinstance(ch, list) or len(ch) != 2
            or not all(isinstance(x, int) and not isinstance(x, bool) for x in ch)):
        raise ModelFileError(f"{a.where}: subsampling_conv_channels must be a list of two integers, got {shown(ch)}")
    c0, c1 = (int(check_number(x, "subsampling_conv_channels entry", WIDTH, a.where)) for x in ch)
    hidden, heads = a.req("hidden_size"), a.req("num_attention_heads")
    if hidden % heads:
        raise ModelFileError(f"{a.where}: hidden_size ({hidden}) is not a multiple of num_attention_heads ({heads})")
    return Gemma4AudioTower(hidden_size=hidden, num_layers=a.req("num_hidden_layers"), num_heads=heads,
                            conv_channels=(c0, c1), conv_kernel_size=a.req("conv_kernel_size"),
                            output_dims=a.req("output_proj_dims"))


def gemma4_spec(cfg: dict[str, Any], *, name: str, where: str, source: str, published_params: int | None,
                published_active_params: int | None) -> ModelSpec:
    """Gemma 4 (module docstring)."""
    c, multimodal = text_config(cfg, "gemma4", where)
    vision = audio = None
    if multimodal:
        # Gemma4Model builds a tower only for a config that is present (modeling L2231-2245)
        vision, audio = _vision(cfg.get("vision_config"), where), _audio(cfg.get("audio_config"), where)
    _refuse(c)
    hidden, n_layers = c.req("hidden_size"), c.req("num_hidden_layers")
    heads, inter = c.req("num_attention_heads"), c.req("intermediate_size")
    # the last layer full whatever is given: "Last layer must use `full_attention`" (configuration L194-199)
    kinds = layer_types(c, n_layers, FULL_EVERY, "Gemma4TextConfig", last_full=True)
    shared = _kv_shared(c, kinds)
    if all(shared):
        raise ModelFileError(f"{c.where}: num_kv_shared_layers equals num_hidden_layers: no layer produces a cache")
    wide = bool(c.get("use_double_wide_mlp"))
    sizes = tuple(inter * 2 if wide and s else inter for s in shared) if wide and any(shared) else ()
    ple = c.cfg["hidden_size_per_layer_input"] if "hidden_size_per_layer_input" in c.cfg \
        else c.get("hidden_size_per_layer_input")  # 0 (Gemma 4 31B): no per-layer inputs, so not Gemma 3n's range
    ple = int(check_number(ple or 0, "hidden_size_per_layer_input", WIDTH_OR_ZERO, c.where))
    g = Gemma4Spec(ple_width=ple, ple_vocab=c.req("vocab_size_per_layer_input"), vision=vision, audio=audio)
    head_dim = c.req("head_dim")
    full_hd = c.cfg.get("global_head_dim", GLOBAL_HEAD_DIM) if "full" in kinds else 0
    if "global_head_dim" not in c.cfg and "full" in kinds:
        c.used_defaults.append(f"global_head_dim={GLOBAL_HEAD_DIM} (Gemma4TextConfig.__post_init__ default)")
    full_hd = int(check_number(full_hd, "global_head_dim", WIDTH, c.where)) if full_hd else 0
    if multimodal:
        top = _Cfg(cfg, "gemma4", where)
        tie = bool(top.get("tie_word_embeddings"))  # Gemma4ForConditionalGeneration ties by the top-level flag
    else:
        tie = bool(c.get("tie_word_embeddings"))
    bias = bool(c.get("attention_bias"))
    fields: dict[str, Any] = {
        "vocab_size": c.req("vocab_size"), "num_kv_heads": c.get("num_key_value_heads") or heads,
        "head_dim": head_dim, "full_head_dim": full_hd if full_hd != head_dim else 0,
        "sliding_window": c.get("sliding_window") if "sliding" in kinds else None,
        "kv_shared_layers": shared, "max_position_embeddings": c.get("max_position_embeddings"),
        "rope_scaling": rope_scaling_of(c)}  # per layer type (full_attention, sliding_attention)
    notes = c.used_defaults + (top.used_defaults if multimodal else [])
    return ModelSpec(
        name=name, model_type="gemma4" if multimodal else "gemma4_text",  # the config's own, as `models` shows
        hidden_size=hidden, num_layers=n_layers, num_heads=heads,
        intermediate_size=max(sizes) if sizes else inter, ffn_sizes=sizes, tie_word_embeddings=tie,
        attention_qkv_bias=bias, attention_out_bias=bias, qk_norm="per_head", norms_per_layer=4,
        layer_types=kinds, gemma4=g, **fields,  # type: ignore[arg-type]
        torch_dtype=c.cfg.get("torch_dtype") or c.cfg.get("dtype") or cfg.get("torch_dtype") or cfg.get("dtype"),
        published_params=published_params, published_active_params=published_active_params,
        source=source, notes=tuple(notes))
