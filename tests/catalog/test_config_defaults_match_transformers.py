"""config_defaults.json and the reader's per-family rules against the installed transformers.

Independent truth: (1) the field defaults of the transformers configuration classes themselves, and (2) the
model transformers builds from a *sparse* config.json (only the keys every published config has), and from the
same config with one optional key set: parameter count, per-component split, which layers slide and with what
window (what ``DynamicCache`` reads: ``cache_utils.get_layer_types_and_kwargs``), which layers are MoE.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

import pytest

from llmsizer.errors import InputError
from llmsizer.formulas.params import count_params
from llmsizer.readers.hf_config import HYBRID_TYPES, SUPPORTED_MODEL_TYPES, spec_from_config
from oracle_utils import TINY_GEMMA3_TEXT, TINY_SIGLIP_VISION, assert_params_equal, build, transformers

pytestmark = pytest.mark.slow

DEFAULTS: dict[str, dict[str, Any]] = json.loads(
    resources.files("llmsizer.catalog.data").joinpath("config_defaults.json").read_text("utf-8"))

# keys in config_defaults.json that are not fields of the configuration class, each with the reason
NOT_A_FIELD = {
    ("gemma3_text", "sliding_window_pattern"): "read from kwargs by Gemma3TextConfig.__post_init__ (default 6); "
                                               "checked through layer_types below",
    ("deepseek_v2", "moe_layer_freq"): "DeepSeek remote-code key; transformers ignores it (1 = no effect)",
    ("deepseek_v3", "moe_layer_freq"): "DeepSeek remote-code key; transformers ignores it (1 = no effect)",
    ("phi", "partial_rotary_factor"): "a config.json key PhiConfig moves into rope_parameters (default 0.5); checked "
                                      "in tests/catalog/test_parallel_block_params.py",
    ("stablelm", "partial_rotary_factor"): "a config.json key StableLmConfig.__post_init__ moves into rope_parameters "
                                           "(default 0.25); checked in tests/readers/test_gguf_parallel.py",
    ("t5", "tie_word_embeddings"): "a PreTrainedConfig keyword, not a T5Config field (default True in transformers 4.x; "
                                   "5.24's T5Config.__post_init__ forces True, configuration_t5.py L78-82); "
                                   "checked in tests/catalog/test_t5_params.py",
    **{(mt, "partial_rotary_factor"): "a kwarg Qwen3_5TextConfig / Qwen3_5MoeTextConfig.__post_init__ sets into "
                                      "rope_parameters (``kwargs.setdefault('partial_rotary_factor', 0.25)``, "
                                      "configuration_qwen3_5.py); checked in tests/catalog/test_hybrid_params.py"
       for mt in ("qwen3_5_text", "qwen3_5_moe_text")},
    ("gpt_neox", "rotary_pct"): "a config.json key GPTNeoXConfig moves into rope_parameters as partial_rotary_factor "
                                "(default 0.25); checked in tests/catalog/test_parallel_block_params.py",
}

# fields transformers makes per-layer (Gemma4TextConfig.__post_init__ builds per_layer_config: the full-attention
# layers' head_dim is global_head_dim), so a global read of the built config raises; compared with the class field
PER_LAYER_FIELDS = {("gemma4_text", "head_dim")}


def _class_default(model_type: str, key: str) -> Any:
    cls = transformers.CONFIG_MAPPING[model_type]
    for klass in cls.__mro__:
        if key in vars(klass):
            return vars(klass)[key]
    raise KeyError(key)


@pytest.mark.parametrize("model_type", [k for k in DEFAULTS if not k.startswith("_")])
def test_config_defaults_equal_the_transformers_class_defaults(model_type):
    cls = transformers.CONFIG_MAPPING[model_type]
    assert DEFAULTS[model_type]["_class"] == cls.__name__
    for key, ours in DEFAULTS[model_type].items():
        if key.startswith("_") or (model_type, key) in NOT_A_FIELD:
            continue
        try:
            real = _class_default(model_type, key)
        except KeyError:
            pytest.fail(f"{cls.__name__} has no field {key!r} (config_defaults.json says {ours!r})")
        # __post_init__ may normalise a field (mlp_only_layers None -> []): either form is the class default
        # (a per-layer attribute of a heterogeneous config refuses a global read: its class default is the value)
        normalised = real if (model_type, key) in PER_LAYER_FIELDS \
            else getattr(transformers.AutoConfig.for_model(model_type), key, real)
        if isinstance(real, tuple):  # JSON has no tuples: a tuple default is written as a list
            real, normalised = list(real), list(normalised)
        assert ours in (real, normalised), (
            f"{cls.__name__}.{key}: config_defaults.json {ours!r}, transformers {real!r} / {normalised!r}")


# --- sparse configs: what every published config.json has, nothing optional --------------------------------

_CORE = {"vocab_size": 128, "hidden_size": 64, "num_hidden_layers": 4, "num_attention_heads": 32,
         "intermediate_size": 96}
_FAMILY: dict[str, dict[str, Any]] = {
    "gemma": {"head_dim": 16}, "gemma2": {"head_dim": 16}, "gemma3_text": {"head_dim": 16}, "qwen3": {"head_dim": 16},
    "mixtral": {"num_local_experts": 4, "num_experts_per_tok": 2},
    "qwen2_moe": {"num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
                  "shared_expert_intermediate_size": 48},
    "qwen3_moe": {"num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 32},
    "deepseek_v2": {"kv_lora_rank": 16, "q_lora_rank": 24, "qk_nope_head_dim": 8, "qk_rope_head_dim": 4,
                    "v_head_dim": 8, "n_routed_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 24,
                    "topk_method": "greedy"},
    "deepseek_v3": {"kv_lora_rank": 16, "q_lora_rank": 24, "qk_nope_head_dim": 8, "qk_rope_head_dim": 4,
                    "v_head_dim": 8, "n_routed_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 24,
                    "n_group": 2, "topk_group": 1},
    "deepseek_v32": {"kv_lora_rank": 16, "q_lora_rank": 24, "qk_nope_head_dim": 8, "qk_rope_head_dim": 4,
                     "v_head_dim": 8, "n_routed_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 24,
                     "n_group": 2, "topk_group": 1, "index_n_heads": 2, "index_head_dim": 8},
    "glm4_moe": {"n_routed_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 24,
                 "num_key_value_heads": 8},
    "gpt_oss": {"num_local_experts": 4, "num_experts_per_tok": 2, "head_dim": 8, "intermediate_size": 32},
    # the published MiniMax-M2.x configs: rotary_dim half the head, the routing bias, q/k norms over all heads
    "minimax_m2": {"num_local_experts": 4, "num_experts_per_tok": 2, "head_dim": 8, "rotary_dim": 4,
                   "use_routing_bias": True, "use_qk_norm": True, "qk_norm_type": "per_layer"},
    "phi3": {"pad_token_id": 0},
}
# hybrid / state-space families have their own sparse and varied configs in tests/catalog/test_hybrid_params.py
_TYPES = [t for t in SUPPORTED_MODEL_TYPES
          if t not in ("gemma3", "gpt_bigcode", "qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe", "qwen3_5", "qwen3_5_moe", "mllama", "llama4", "gemma3n",
                       "gemma3n_text")
          and t not in HYBRID_TYPES
          and t not in ("t5", "mt5")]  # T5 keys (d_model, num_layers, ...): tests/catalog/test_t5_params.py

# one optional key at a time, on top of the sparse config (only where the class reads that key)
OMIT = object()  # the key is absent from config.json
_ALTERNATE = ["full_attention", "sliding_attention", "full_attention", "sliding_attention"]
_VARIANTS: list[dict[str, Any]] = [
    {}, {"attention_bias": True}, {"mlp_bias": True}, {"qkv_bias": False}, {"tie_word_embeddings": True},
    {"tie_word_embeddings": False}, {"num_key_value_heads": 8}, {"head_dim": 12},
    {"sliding_window": 8}, {"use_sliding_window": True}, {"use_sliding_window": True, "sliding_window": 8},
    {"use_sliding_window": True, "sliding_window": 8, "max_window_layers": 3}, {"sliding_window_pattern": 2},
    {"layer_types": _ALTERNATE, "sliding_window": 8},
    {"layer_types": _ALTERNATE, "sliding_window": 8, "use_sliding_window": True},
    {"decoder_sparse_step": 2}, {"mlp_only_layers": [0, 2]}, {"first_k_dense_replace": 2}, {"n_shared_experts": 3},
    {"q_lora_rank": None}, {"shared_expert_intermediate_size": 0}, {"intermediate_size": OMIT},
    {"num_key_value_heads": 4}, {"num_attention_heads": 8, "num_key_value_heads": OMIT}, {"use_qk_norm": True},
]
# Not varied: max_position_embeddings <= sliding_window on Mistral/Mixtral/Phi-3. transformers still builds
# sliding cache layers; the reader calls them full, which caches the same tokens for every context below the
# window (at context == window, one token more: window vs window - 1).
# keys a family reads although they are not class fields (config kwargs become attributes)
_READ_AS_KWARG = {("gemma3_text", "sliding_window_pattern"), ("mistral", "layer_types"), ("mixtral", "layer_types"),
                  ("phi3", "layer_types"), ("qwen3_moe", "layer_types"), ("qwen3_moe", "head_dim"),
                  ("qwen2", "head_dim"), ("qwen2_moe", "head_dim"), ("olmo2", "head_dim"), ("granite", "head_dim"),
                  ("phi3", "head_dim"), ("glm4_moe", "head_dim")}
# (family, variant key) pairs transformers cannot build, with the reason
_UNBUILDABLE = {("deepseek_v32", "q_lora_rank"): "DeepseekV32Attention and its indexer always build q_a_proj/wq_b "
                                                 "from q_lora_rank (modeling_deepseek_v32.py): None fails",
                ("falcon", "head_dim"): "FalconConfig.head_dim is a read-only property (hidden_size // "
                                        "num_attention_heads, configuration_falcon.py): setting it raises"}


def _reads(model_type: str, key: str) -> bool:
    if key in _CORE:
        return True
    if (model_type, key) in _READ_AS_KWARG:
        return True
    try:
        _class_default(model_type, key)
    except KeyError:
        return False
    return True


def _cases() -> list[Any]:
    out = []
    for mt in _TYPES:
        for var in _VARIANTS:
            # explicit sliding layer_types on a Qwen family config only mean something with use_sliding_window
            # (otherwise transformers sets sliding_window to None/0 and the cache layer cannot be built)
            qwen_window_off = "layer_types" in var and _reads(mt, "use_sliding_window") and \
                not var.get("use_sliding_window")
            unbuildable = any((mt, k) in _UNBUILDABLE for k in var)
            if all(_reads(mt, k) for k in var) and not qwen_window_off and not unbuildable:
                label = ",".join(f"{k}={'absent' if v is OMIT else v}" for k, v in var.items()) or "sparse"
                out.append(pytest.param(mt, var, id=f"{mt}[{label}]"))
    return out


def _real_attention_layout(model: Any) -> tuple[tuple[str, ...], set[int]]:
    from transformers.cache_utils import get_layer_types_and_kwargs
    kinds, kwargs = get_layer_types_and_kwargs(model.config.get_text_config(decoder=True))
    return (tuple("sliding" if "sliding" in k else "full" for k in kinds),
            {kw["sliding_window"] for kw in kwargs if kw.get("sliding_window") is not None})


def _real_moe_layers(model: Any) -> tuple[bool, ...]:
    layers = model.model.layers
    return tuple(any(".experts." in n for n, _ in layer.named_parameters(prefix=".")) for layer in layers)


@pytest.mark.parametrize(("model_type", "variant"), _cases())
def test_sparse_config_builds_the_model_transformers_builds(model_type, variant):
    cfg = {"model_type": model_type, **_CORE, **_FAMILY.get(model_type, {}), **variant}
    cfg = {k: v for k, v in cfg.items() if v is not OMIT}
    model = build(cfg)
    real_kinds, real_windows = _real_attention_layout(model)
    heads = cfg["num_attention_heads"]
    real_kv = getattr(model.config, "num_key_value_heads", heads) or heads
    try:
        spec = spec_from_config(cfg, name=model_type)
    except InputError:
        # transformers builds a model whose KV heads do not divide the query heads (it fails at run time);
        # refusing the config is the right answer
        assert heads % real_kv != 0
        return
    ours = count_params(spec)
    assert_params_equal(ours, model)
    assert spec.layer_types == real_kinds
    if real_windows:
        assert {spec.sliding_window} == real_windows
    if spec.moe is not None:
        assert spec.moe_layers == _real_moe_layers(model)


# --- Gemma 3 multimodal: which flag ties the LM head, and the SigLIP tower ----------------------------------



@pytest.mark.parametrize("top_tie", [OMIT, True, False])
@pytest.mark.parametrize("text_tie", [OMIT, True, False])
def test_gemma3_multimodal_builds_the_model_transformers_builds(top_tie, text_tie):
    text = {**TINY_GEMMA3_TEXT, "tie_word_embeddings": text_tie}
    cfg = {"model_type": "gemma3", "text_config": {k: v for k, v in text.items() if v is not OMIT},
           "vision_config": TINY_SIGLIP_VISION, "mm_tokens_per_image": 4, "tie_word_embeddings": top_tie}
    cfg = {k: v for k, v in cfg.items() if v is not OMIT}
    model = build(cfg)
    ours = count_params(spec_from_config(cfg, name="gemma3-tiny"))
    assert_params_equal(ours, model)


def test_siglip_attention_pooling_head_is_refused_not_undercounted():
    from llmsizer.errors import UnsupportedArchitectureError
    vision = {k: v for k, v in TINY_SIGLIP_VISION.items() if k != "vision_use_head"}  # SiglipVisionConfig default: True
    cfg = {"model_type": "gemma3", "text_config": TINY_GEMMA3_TEXT, "vision_config": vision, "mm_tokens_per_image": 4}
    model = build(cfg)
    assert any(".head." in n for n, _ in model.named_parameters())  # transformers builds the pooling head
    with pytest.raises(UnsupportedArchitectureError, match="vision_use_head"):
        spec_from_config(cfg, name="gemma3-tiny")


# --- Qwen2.5-VL: flat (published) and nested configs, the tie flag, the vision tower and its merger -----------

_Q25_TEXT = {"vocab_size": 128, "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
             "num_attention_heads": 4, "num_key_value_heads": 2}
_Q25_VISION = {"model_type": "qwen2_5_vl", "depth": 2, "hidden_size": 32, "intermediate_size": 48, "num_heads": 4,
               "in_chans": 3, "out_hidden_size": 64, "patch_size": 14, "spatial_merge_size": 2,
               "temporal_patch_size": 2, "window_size": 112, "fullatt_block_indexes": [1]}


@pytest.mark.parametrize("nested", [False, True], ids=["flat", "text_config"])
@pytest.mark.parametrize("tie", [OMIT, True, False])
def test_qwen2_5_vl_builds_the_model_transformers_builds(nested, tie):
    text = {**_Q25_TEXT, "tie_word_embeddings": tie}
    text = {k: v for k, v in text.items() if v is not OMIT}
    if nested:
        cfg = {"model_type": "qwen2_5_vl", "text_config": {**text, "model_type": "qwen2_5_vl_text"},
               "vision_config": _Q25_VISION}
    else:
        cfg = {"model_type": "qwen2_5_vl", **text, "vision_config": _Q25_VISION}
    model = build(cfg)
    spec = spec_from_config(cfg, name="qwen2.5-vl-tiny")
    ours = count_params(spec)
    assert_params_equal(ours, model)
    assert spec.vision is not None and spec.vision.token_rule == "qwen2_vl"


_Q3_TEXT = {"model_type": "qwen3_vl_text", "vocab_size": 128, "hidden_size": 64, "intermediate_size": 96,
            "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16}
_Q3_VISION = {"model_type": "qwen3_vl", "depth": 3, "hidden_size": 32, "intermediate_size": 48, "num_heads": 4,
              "in_channels": 3, "out_hidden_size": 64, "patch_size": 16, "spatial_merge_size": 2,
              "temporal_patch_size": 2, "num_position_embeddings": 36, "deepstack_visual_indexes": [0, 2]}


@pytest.mark.parametrize("top_tie", [OMIT, True, False])
@pytest.mark.parametrize("text_tie", [OMIT, True, False])
@pytest.mark.parametrize("extra", [{}, {"attention_bias": True}, {"deepstack_visual_indexes": []}],
                         ids=["plain", "attention_bias", "no-deepstack"])
def test_qwen3_vl_builds_the_model_transformers_builds(top_tie, text_tie, extra):
    text = {**_Q3_TEXT, "tie_word_embeddings": text_tie, **{k: v for k, v in extra.items() if k in _Q3_TEXT or
                                                            k == "attention_bias"}}
    vision = {**_Q3_VISION, **{k: v for k, v in extra.items() if k in _Q3_VISION}}
    cfg = {"model_type": "qwen3_vl", "text_config": {k: v for k, v in text.items() if v is not OMIT},
           "vision_config": vision, "tie_word_embeddings": top_tie}
    cfg = {k: v for k, v in cfg.items() if v is not OMIT}
    model = build(cfg)
    spec = spec_from_config(cfg, name="qwen3-vl-tiny")
    ours = count_params(spec)
    assert_params_equal(ours, model)
    assert spec.vision is not None and spec.vision.token_rule == "qwen3_vl"
