"""Hybrid and state-space families (Qwen3-Next, Jamba, Falcon-H1, Nemotron-H, Granite-4.0-H, Mamba-2): the
parameter count, the per-component split and the per-layer schedule against the model transformers builds.

Independent truth: transformers 5.24 instantiates each family's real model class on the meta device from the same
config dict; ``parameters()`` counts it, the module names split it (``oracle_utils.component_of``), and each decoder
layer's own modules say whether it has attention, a recurrent mixer and an MoE block. Tiny configs vary every key
the reader reads; the full-size case is each configuration class's own default (the published flagship shape:
Qwen3NextConfig = Qwen3-Next-80B-A3B's dimensions, JambaConfig = Jamba-v0.1, Mamba2Config = Mamba-Codestral-7B's).
"""

from __future__ import annotations

from typing import Any

import pytest

from llmsizer.errors import InputError, ModelFileError
from llmsizer.formulas.params import count_params
from llmsizer.readers.hf_config import spec_from_config
from oracle_utils import TINY_FALCON_H1 as _FALCON_H1
from oracle_utils import TINY_JAMBA as _JAMBA
from oracle_utils import TINY_NEMOTRON_H as _NEMOTRON_H
from oracle_utils import TINY_QWEN3_5 as _QWEN3_5
from oracle_utils import TINY_QWEN3_5_MOE as _QWEN3_5_MOE
from oracle_utils import TINY_QWEN3_NEXT as _QWEN3_NEXT
from oracle_utils import assert_params_equal, build, transformers

pytestmark = pytest.mark.slow

_GRANITE = {"model_type": "granitemoehybrid", "vocab_size": 128, "hidden_size": 64, "num_hidden_layers": 4,
            "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 32,
            "shared_intermediate_size": 96, "num_local_experts": 4, "num_experts_per_tok": 2,
            "layer_types": ["mamba", "mamba", "attention", "mamba"], "mamba_n_heads": 8, "mamba_d_state": 16}
_LLAMA4 = {"model_type": "llama4_text", "vocab_size": 128, "hidden_size": 64, "num_hidden_layers": 8,
           "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 32,
           "intermediate_size_mlp": 96, "num_local_experts": 4, "num_experts_per_tok": 1,
           "attention_chunk_size": 16}
_MAMBA2 = {"model_type": "mamba2", "vocab_size": 128, "hidden_size": 64, "num_hidden_layers": 3, "num_heads": 8,
           "head_dim": 16, "state_size": 16, "n_groups": 2}

CASES: list[tuple[str, dict[str, Any]]] = [
    ("qwen3_next", _QWEN3_NEXT),
    ("qwen3_next-dense-layer", {**_QWEN3_NEXT, "mlp_only_layers": [1], "attention_bias": True}),
    ("qwen3_next-interval-2", {**_QWEN3_NEXT, "full_attention_interval": 2}),
    ("qwen3_next-layer_types", {**_QWEN3_NEXT, "layer_types": ["full_attention", "linear_attention",
                                                               "linear_attention", "full_attention"]}),
    ("qwen3_next-no-experts", {**_QWEN3_NEXT, "num_experts": 0, "tie_word_embeddings": True}),
    # Qwen3.5 / Qwen3.6: the language model in text_config, a vision tower beside it
    ("qwen3_5", _QWEN3_5),
    ("qwen3_5-interval-2-tied", {**_QWEN3_5, "tie_word_embeddings": True,
                                 "text_config": {**_QWEN3_5["text_config"], "full_attention_interval": 2,
                                                 "attention_bias": True}}),
    ("qwen3_5-layer_types", {**_QWEN3_5, "text_config": {**_QWEN3_5["text_config"], "layer_types": [
        "full_attention", "linear_attention", "linear_attention", "full_attention"]}}),
    ("qwen3_5_moe", _QWEN3_5_MOE),
    # Qwen3_5MoeTextConfig deletes mlp_only_layers / decoder_sparse_step: every layer stays sparse
    ("qwen3_5_moe-ignored-dense-keys", {**_QWEN3_5_MOE, "text_config": {**_QWEN3_5_MOE["text_config"],
                                                                        "mlp_only_layers": [1],
                                                                        "decoder_sparse_step": 2,
                                                                        "intermediate_size": 4096}}),
    ("jamba", _JAMBA),
    ("jamba-dense", {**_JAMBA, "num_experts": 1}),
    ("jamba-biases", {**_JAMBA, "mamba_proj_bias": True, "mamba_conv_bias": False, "mamba_dt_rank": 3}),
    ("falcon_h1", _FALCON_H1),
    ("falcon_h1-norm-bias", {**_FALCON_H1, "mamba_rms_norm": True, "mamba_proj_bias": True, "projectors_bias": True,
                             "attention_bias": True, "mlp_bias": True, "head_dim": 8}),
    ("falcon_h1-expand", {**_FALCON_H1, "mamba_d_ssm": None, "mamba_expand": 1, "mamba_d_head": 8}),
    ("nemotron_h", _NEMOTRON_H),
    ("nemotron_h-block-list", {**{k: v for k, v in _NEMOTRON_H.items() if k != "hybrid_override_pattern"},
                               "layers_block_type": ["mamba", "attention", "mlp", "mamba"], "mlp_bias": True,
                               "use_bias": True, "use_conv_bias": False}),
    # Nemotron-3-Super: routed experts in a latent (fc1/fc2_latent_proj around NemotronHExperts)
    ("nemotron_h-moe-latent", {**_NEMOTRON_H, "moe_latent_size": 24}),
    ("nemotron_h-moe-latent-bias", {**_NEMOTRON_H, "moe_latent_size": 24, "mlp_bias": True}),
    ("nemotron_h-default-pattern", {k: v for k, v in _NEMOTRON_H.items() if k != "hybrid_override_pattern"}),
    ("granitemoehybrid", _GRANITE),
    ("granitemoehybrid-dense", {**_GRANITE, "num_local_experts": 0, "tie_word_embeddings": True}),
    ("granitemoehybrid-all-mamba", {k: v for k, v in _GRANITE.items() if k != "layer_types"}),
    ("granitemoehybrid-biases", {**_GRANITE, "mamba_proj_bias": True, "attention_bias": True,
                                 "layer_types": ["linear_attention", "full_attention", "linear_attention",
                                                 "full_attention"]}),
    ("llama4_text", _LLAMA4),
    ("llama4_text-interleaved", {**_LLAMA4, "interleave_moe_layer_step": 2, "attention_bias": True}),
    ("llama4_text-moe_layers", {**_LLAMA4, "moe_layers": [1, 6], "no_rope_layers": [1, 0, 1, 1, 0, 1, 1, 1]}),
    ("llama4_text-interval", {**_LLAMA4, "no_rope_layer_interval": 2, "tie_word_embeddings": True}),
    ("mamba2", _MAMBA2),
    ("mamba2-biases-tied", {**_MAMBA2, "use_bias": True, "use_conv_bias": False, "tie_word_embeddings": True}),
]


def _real_schedule(model: Any) -> tuple[tuple[bool, ...], tuple[bool, ...], tuple[bool, ...]]:
    """(attention, recurrent mixer, MoE) per decoder layer, from the modules each layer holds."""
    base = model.model if hasattr(model, "model") else model.backbone
    base = getattr(base, "language_model", base)  # a multimodal model's decoder (Qwen3.5)
    attn, rec, moe = [], [], []
    for layer in base.layers:
        names = {type(m).__name__ for m in layer.modules()}
        attn.append(any(n.endswith("Attention") for n in names))
        rec.append(any("Mamba" in n and "Norm" not in n or n.endswith("GatedDeltaNet") or n.endswith("Mixer")
                       for n in names))
        moe.append(any(n.endswith("Experts") for n in names))
    return tuple(attn), tuple(rec), tuple(moe)


def _check(cfg: dict[str, Any]) -> None:
    model = build(cfg)
    spec = spec_from_config(cfg, name=cfg["model_type"])
    ours = count_params(spec)
    assert_params_equal(ours, model)
    attn, rec, moe = _real_schedule(model)
    assert tuple(k != "none" for k in spec.layer_types) == attn
    assert spec.recurrent_layers == rec
    assert tuple(m and spec.moe is not None for m in spec.moe_layers) == moe


@pytest.mark.parametrize(("label", "cfg"), CASES, ids=[c[0] for c in CASES])
def test_tiny_config_builds_the_model_transformers_builds(label, cfg):
    _check(cfg)


@pytest.mark.parametrize("model_type", ["qwen3_next", "jamba", "falcon_h1", "nemotron_h", "granitemoehybrid",
                                        "mamba2", "llama4_text"])
def test_full_size_class_default_config(model_type):
    """The configuration class's defaults, saved as transformers saves a config.json (``to_dict``): a full-size model
    (Qwen3NextConfig: 48 layers, 512 experts, 80B). Not Qwen3.5: Qwen3_5Config's defaults pair a 4096-wide text
    model with a vision tower of out_hidden_size 3584, which the reader refuses (the merger's output could not
    enter the decoder); the four full-size catalog rows are built in tests/catalog/test_params_match_transformers.py."""
    _check(_full_size(model_type))


def _full_size(model_type: str) -> dict[str, Any]:
    return transformers.AutoConfig.for_model(model_type).to_dict()


def test_qwen3_next_class_default_is_the_80b_model():
    """Qwen3NextConfig's defaults are Qwen3-Next-80B-A3B's shape except intermediate_size (5632 vs the released
    5120, unused: every layer is MoE). NVIDIA's model reference (docs.api.nvidia.com/nim/reference/
    qwen-qwen3-next-80b-a3b-instruct) publishes 'Total Parameters: 80B, Active Parameters: 3.9B': within the
    rounding of each figure (the Qwen card's '3B activated' is further truncated)."""
    pc = count_params(spec_from_config(_full_size("qwen3_next"), name="q"))
    assert abs(pc.total - 80e9) <= 0.5e9  # 79,674,391,296
    assert abs(pc.active - 3.9e9) <= 0.05e9  # 3,874,929,408 (10 of 512 experts + the shared one, embeddings in)


@pytest.mark.parametrize(("cfg", "err"), [
    ({**_NEMOTRON_H, "hybrid_override_pattern": "MX*"}, ModelFileError),
    ({**_NEMOTRON_H, "hybrid_override_pattern": 7}, ModelFileError),
    ({**_NEMOTRON_H, "moe_latent_size": 0}, InputError),
    ({**_NEMOTRON_H, "moe_latent_size": "wide"}, InputError),
    ({**_NEMOTRON_H, "mamba_ssm_cache_dtype": "int3"}, ModelFileError),
    ({**_GRANITE, "layer_types": ["mamba", "conv", "attention", "mamba"]}, ModelFileError),
    ({**_GRANITE, "layer_types": ["mamba"]}, ModelFileError),
    ({**_GRANITE, "mamba_d_head": 7}, InputError),
    ({**_GRANITE, "mamba_d_head": "big"}, ModelFileError),
    ({**_MAMBA2, "num_heads": 7}, InputError),
    ({**_JAMBA, "mamba_dt_rank": "wide"}, ModelFileError),
    ({**_QWEN3_NEXT, "linear_num_key_heads": 3}, InputError),
    ({**_QWEN3_5, "text_config": {**_QWEN3_5["text_config"], "mamba_ssm_dtype": "int3"}}, ModelFileError),
    ({**_QWEN3_5, "vision_config": {**_QWEN3_5["vision_config"], "out_hidden_size": 32}}, ModelFileError),
    ({**_QWEN3_NEXT, "full_attention_interval": 0}, InputError),
])
def test_bad_hybrid_config_is_one_clear_error(cfg, err):
    with pytest.raises(err):
        spec_from_config(cfg, name="bad")


@pytest.mark.parametrize("cfg", [c for label, c in CASES if label.startswith("llama4")] + [None],
                         ids=[label for label, _ in CASES if label.startswith("llama4")] + ["full-size"])
def test_llama4_chunked_layers_are_the_cache_layers_transformers_builds(cfg):
    """Which layers cache a chunk (sliding of attention_chunk_size) and which the whole context: the layer kinds and
    windows transformers' own cache reads (cache_utils.get_layer_types_and_kwargs)."""
    from transformers.cache_utils import get_layer_types_and_kwargs
    cfg = cfg or _full_size("llama4_text")
    kinds, kwargs = get_layer_types_and_kwargs(transformers.AutoConfig.for_model(**cfg))
    spec = spec_from_config(cfg, name="llama4")
    assert spec.layer_types == tuple("sliding" if k == "chunked_attention" else "full" for k in kinds)
    assert {kw["sliding_window"] for kw in kwargs if "sliding_window" in kw} == {spec.sliding_window}


def test_llama4_scout_class_default_has_17b_active():
    """Llama4TextConfig's defaults are Llama-4-Scout-17B-16E's text stack (48 layers, 16 experts, top-1, MoE every
    layer); Meta's card: '17B active parameters' (its '109B total' includes the vision encoder, not built here: the
    text stack counts 107,769,861,120, exact against transformers in test_full_size_class_default_config)."""
    pc = count_params(spec_from_config(_full_size("llama4_text"), name="scout"))
    assert abs(pc.active - 17e9) <= 0.5e9  # 17,172,894,720
