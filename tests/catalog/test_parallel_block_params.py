"""Falcon, Phi, GPT-NeoX and StableLM (readers/hf_parallel.py) against the models transformers builds.

Independent truth: transformers 5.24 instantiates FalconForCausalLM / PhiForCausalLM / GPTNeoXForCausalLM /
StableLmForCausalLM (with ``qk_layernorm``: StableLM-2-12B's per-head q/k LayerNorms) from the
same config dict on the meta device; ``parameters()`` counts them (tied tensors once) and the module names give the
per-component split (``oracle_utils.component_of``). The rotary width is the attention module's own
``rotary_ndims``; the KV cache heads are read from the cache a real CPU forward leaves (Falcon's two architectures).
The catalog entries (falcon-7b-instruct, phi-2, stablelm-base-alpha-3b) are checked exactly by
tests/catalog/test_params_match_transformers.py like every entry.
"""

from __future__ import annotations

import pytest

from llmsizer.errors import InputError, UnsupportedArchitectureError
from llmsizer.estimate import engines
from llmsizer.formulas.kv_cache import kv_cache
from llmsizer.formulas.params import count_params
from llmsizer.readers.hf_config import spec_from_config
from oracle_utils import assert_params_equal, build, cache_layers, random_ids, torch

pytestmark = pytest.mark.slow

_SMALL = {"vocab_size": 500, "hidden_size": 128, "num_hidden_layers": 3, "num_attention_heads": 8}
CONFIGS = {
    # Falcon-7B layout: multi-query, one shared input_layernorm, no biases, tied lm_head
    "falcon-7b-like": {**_SMALL, "model_type": "falcon", "multi_query": True, "parallel_attn": True,
                       "new_decoder_architecture": False, "alibi": False, "bias": False},
    # Falcon-40B/180B layout: num_kv_heads K/V groups, ln_attn + ln_mlp
    "falcon-40b-like": {**_SMALL, "model_type": "falcon", "num_kv_heads": 2, "new_decoder_architecture": True,
                        "alibi": False},
    "falcon-new-arch-one-norm": {**_SMALL, "model_type": "falcon", "num_kv_heads": 4,
                                 "new_decoder_architecture": True, "num_ln_in_parallel_attn": 1, "alibi": False},
    "falcon-mha-sequential-bias": {**_SMALL, "model_type": "falcon", "multi_query": False, "parallel_attn": False,
                                   "bias": True, "ffn_hidden_size": 320, "tie_word_embeddings": False},
    "phi-2-like": {**_SMALL, "model_type": "phi", "intermediate_size": 512, "partial_rotary_factor": 0.4,
                   "resid_pdrop": 0.1, "hidden_act": "gelu_new"},
    "phi-qk-layernorm-gqa": {**_SMALL, "model_type": "phi", "intermediate_size": 512, "num_key_value_heads": 2,
                             "qk_layernorm": True, "tie_word_embeddings": True},
    "gpt-neox-parallel": {**_SMALL, "model_type": "gpt_neox", "intermediate_size": 512, "rotary_pct": 0.25},
    # StableLM-2-12B layout: parallel residual, grouped K/V, qk_layernorm (StableLmLayerNormPerHead: one bias-free
    # LayerNorm per query head and per K/V head, 8 x 16 + 2 x 16 weights a layer here)
    "stablelm-2-12b-like-qk-layernorm": {**_SMALL, "model_type": "stablelm", "intermediate_size": 512,
                                         "num_key_value_heads": 2, "qk_layernorm": True,
                                         "use_parallel_residual": True, "partial_rotary_factor": 0.25},
    "stablelm-qk-layernorm-mha-sequential-bias": {**_SMALL, "model_type": "stablelm", "intermediate_size": 512,
                                                  "num_key_value_heads": 8, "qk_layernorm": True,
                                                  "use_qkv_bias": True, "use_parallel_residual": False},
    "gpt-neox-sequential-no-bias-tied": {**_SMALL, "model_type": "gpt_neox", "intermediate_size": 512,
                                         "use_parallel_residual": False, "attention_bias": False,
                                         "tie_word_embeddings": True, "rotary_pct": 1.0},
}


@pytest.mark.parametrize("name", list(CONFIGS))
def test_params_and_components_equal_the_transformers_model(name):
    model = build(CONFIGS[name])
    ours = count_params(spec_from_config(CONFIGS[name], name=name))
    assert_params_equal(ours, model)


def _rotary_ndims(model) -> int:
    layer = model.model.layers[0].self_attn if hasattr(model, "model") else model.gpt_neox.layers[0].attention
    return int(layer.rotary_ndims)


@pytest.mark.parametrize("name", ["phi-2-like", "phi-qk-layernorm-gqa", "gpt-neox-parallel",
                                  "gpt-neox-sequential-no-bias-tied"])
def test_partial_rotary_width_is_the_modules_rotary_ndims(name):
    spec = spec_from_config(CONFIGS[name], name=name)
    assert spec.rotary_dim == _rotary_ndims(build(CONFIGS[name]))


def test_parallel_block_layouts_read_from_the_config():
    falcon7 = spec_from_config(CONFIGS["falcon-7b-like"], name="f7")
    assert (falcon7.num_kv_heads, falcon7.norms_per_layer, falcon7.parallel_block, falcon7.attention_kind) == \
        (1, 1, True, "MQA")
    falcon40 = spec_from_config(CONFIGS["falcon-40b-like"], name="f40")
    assert (falcon40.num_kv_heads, falcon40.norms_per_layer, falcon40.kv_repeated_in_transformers) == (2, 2, True)
    seq = spec_from_config(CONFIGS["falcon-mha-sequential-bias"], name="fs")
    assert (seq.num_kv_heads, seq.norms_per_layer, seq.parallel_block, seq.intermediate_size) == (8, 2, False, 320)
    neox = spec_from_config(CONFIGS["gpt-neox-sequential-no-bias-tied"], name="n")
    assert not neox.parallel_block and neox.rotary_dim == neox.head_dim and not neox.attention_output_copy


def _cache_heads(name: str) -> int:
    torch.manual_seed(0)
    model = build(CONFIGS[name], device="cpu", dtype=torch.float32)
    with torch.no_grad():
        cache = model(input_ids=random_ids(CONFIGS[name]["vocab_size"], 2, 9), use_cache=True).cache
    heads = {int(k.shape[1]) for k, _ in cache_layers(cache)}
    assert len(heads) == 1
    return heads.pop()


@pytest.mark.parametrize(("name", "heads"), [("falcon-7b-like", 1), ("falcon-40b-like", 8), ("phi-2-like", 8),
                                             ("gpt-neox-parallel", 8)])
def test_transformers_cache_heads_and_the_engine_profiles(name, heads):
    """transformers' Falcon-7B caches its one K/V head; Falcon-40B's module repeats K/V to all 8 query heads before
    cache.update (2 K/V groups in the weights); the transformers profile says so, vLLM's counts the groups."""
    assert _cache_heads(name) == heads
    spec = spec_from_config(CONFIGS[name], name=name)
    per_head = 2 * spec.head_dim * 4  # fp32 K + V per token and layer
    hf = kv_cache(spec, 1, 1, "fp32", repeated_kv=engines.PROFILES["transformers"].caches_repeated_kv)
    vllm = kv_cache(spec, 1, 1, "fp32", repeated_kv=engines.PROFILES["vllm"].caches_repeated_kv)
    assert hf.bytes_per_token == heads * per_head * spec.num_layers
    assert vllm.bytes_per_token == spec.num_kv_heads * per_head * spec.num_layers


def test_falcon_with_alibi_is_refused_not_sized():
    with pytest.raises(UnsupportedArchitectureError, match="alibi"):
        spec_from_config({**CONFIGS["falcon-7b-like"], "alibi": True}, name="falcon-rw")


@pytest.mark.parametrize("bad", [1.5, -0.1, "0.4", True])
def test_rotary_fraction_out_of_range_is_one_line_error(bad):
    with pytest.raises(InputError, match="partial_rotary_factor"):
        spec_from_config({**CONFIGS["phi-2-like"], "partial_rotary_factor": bad}, name="phi")


def test_stablelm_qk_layernorm_is_one_weight_per_head_channel_no_bias():
    """StableLmLayerNormPerHead: num_heads x head_dim query weights and num_kv_heads x head_dim key weights a layer,
    no bias (the difference the flag makes to the model transformers builds)."""
    cfg = CONFIGS["stablelm-2-12b-like-qk-layernorm"]
    with_norms = oracle_count(cfg)
    without = oracle_count({**cfg, "qk_layernorm": False})
    hd = cfg["hidden_size"] // cfg["num_attention_heads"]
    per_layer = (cfg["num_attention_heads"] + cfg["num_key_value_heads"]) * hd
    assert with_norms - without == cfg["num_hidden_layers"] * per_layer
    ours = count_params(spec_from_config(cfg, name="s")).total - count_params(
        spec_from_config({**cfg, "qk_layernorm": False}, name="n")).total
    assert ours == with_norms - without


def oracle_count(cfg) -> int:
    return sum(p.numel() for p in build(cfg).parameters())
