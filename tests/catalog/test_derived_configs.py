"""Catalog configs checked against first-party truth other than a config.json copy.

One entry has no verbatim config.json in the reachable sources (its ``source`` starts with DERIVED). Two more were
derived until a verbatim copy was found (NVIDIA AIConfigurator's, see their ``source``); the first-party checks
that backed the derivation stay as cross-checks of the verbatim files:

- ``llama-3.1-405b``: Meta's own ``model_args`` (llama-models ``sku_list.py``). The one value that
  is not a plain rename, ``intermediate_size``, follows Meta's reference ``FeedForward`` sizing rule
  (llama-models ``models/llama3/model.py``: ``int(2 * 4 * dim / 3)``, times ``ffn_dim_multiplier``, rounded
  up to ``multiple_of``), checked here on the three Llama 3.1 configs (8B, 70B, 405B) with their own sku_list.py args.
- ``gpt-oss-120b``: transformers' ``GptOssConfig`` defaults are documented as the GPT-OSS-120B
  configuration; every architecture key of the verbatim config must equal them.
- ``mistral-small-24b-instruct-2501`` (DERIVED): built from Mistral's own ``params.json`` of the release, renamed key by key;
  the release's ``model.safetensors.index.json`` is the independent check: its ``total_size`` (bytes of the
  bf16 checkpoint) is twice the parameter count, and it lists an ``lm_head`` (untied embeddings).
"""

from __future__ import annotations

import math

import pytest

from llmsizer.catalog.models import entries

ENTRIES = entries()

# Meta's first-party model_args (llama-models models/llama3_1/api/sku_list.py@1768925a): dim,
# ffn_dim_multiplier, multiple_of.
META_ARGS = {"llama-3.1-8b": (4096, 1.3, 1024), "llama-3.1-70b-instruct": (8192, 1.3, 4096)}


def meta_ffn_hidden(dim: int, ffn_dim_multiplier: float, multiple_of: int) -> int:
    hidden = int(2 * (4 * dim) / 3)
    hidden = int(ffn_dim_multiplier * hidden)
    return multiple_of * ((hidden + multiple_of - 1) // multiple_of)


@pytest.mark.parametrize("name", sorted(META_ARGS))
def test_meta_ffn_rule_reproduces_the_verbatim_llama31_configs(name):
    assert meta_ffn_hidden(*META_ARGS[name]) == ENTRIES[name].config["intermediate_size"]


def _derivation(name: str) -> dict:
    import json
    from importlib import resources

    text = resources.files("llmsizer.catalog.data").joinpath("models", f"{name}.json").read_text("utf-8")
    return json.loads(text)["config_derivation"]


# SKU llama3_1_405b_bf16_mp16 (huggingface_id meta-llama/Meta-Llama-3.1-405B), same file and commit.
LLAMA_405B_ARGS = {"dim": 16384, "n_layers": 126, "n_heads": 128, "n_kv_heads": 8, "vocab_size": 128256,
                   "ffn_dim_multiplier": 1.2, "multiple_of": 4096, "norm_eps": 1e-05, "rope_theta": 500000.0,
                   "use_scaled_rope": True}


def test_llama_405b_verbatim_config_follows_metas_model_args():
    cfg = ENTRIES["llama-3.1-405b"].config
    args = LLAMA_405B_ARGS
    assert cfg["hidden_size"] == args["dim"]
    assert cfg["num_hidden_layers"] == args["n_layers"]
    assert cfg["num_attention_heads"] == args["n_heads"]
    assert cfg["num_key_value_heads"] == args["n_kv_heads"]
    assert cfg["vocab_size"] == args["vocab_size"]
    assert cfg["rms_norm_eps"] == args["norm_eps"]
    assert cfg["rope_theta"] == args["rope_theta"]
    assert cfg["intermediate_size"] == meta_ffn_hidden(args["dim"], args["ffn_dim_multiplier"], args["multiple_of"])
    # use_scaled_rope is the llama3 rope_scaling block, shared with the verbatim 8B config
    assert args["use_scaled_rope"] and cfg["rope_scaling"] == ENTRIES["llama-3.1-8b"].config["rope_scaling"]


GPT_OSS_ARCH_KEYS = (
    "num_hidden_layers", "num_local_experts", "num_experts_per_tok", "vocab_size", "hidden_size",
    "intermediate_size", "head_dim", "num_attention_heads", "num_key_value_heads", "sliding_window",
    "layer_types", "tie_word_embeddings", "attention_bias", "max_position_embeddings", "rms_norm_eps",
)


@pytest.mark.slow
def test_gpt_oss_120b_verbatim_config_equals_transformers_documented_120b_defaults():
    transformers = pytest.importorskip("transformers")
    ref = transformers.GptOssConfig()
    cfg = ENTRIES["gpt-oss-120b"].config
    for key in GPT_OSS_ARCH_KEYS:
        assert cfg[key] == getattr(ref, key), key
    rope = ref.rope_parameters
    assert cfg["rope_theta"] == rope["rope_theta"]
    for key in ("factor", "beta_fast", "beta_slow", "original_max_position_embeddings", "rope_type", "truncate"):
        assert cfg["rope_scaling"][key] == rope[key], key


def test_derived_entries_say_so_in_their_source():
    derived = sorted(name for name, e in ENTRIES.items() if e.source.startswith("DERIVED"))
    assert derived == ["llama-3.2-11b-vision-instruct", "mistral-small-24b-instruct-2501"]
    for name in ("llama-3.1-405b", "gpt-oss-120b"):
        assert ENTRIES[name].source.startswith("ai-dynamo/aiconfigurator:"), name


# Mistral params.json -> transformers MistralConfig (transformers models/mistral/convert_mistral_weights_to_hf.py)
MISTRAL_KEYS = {"dim": "hidden_size", "n_layers": "num_hidden_layers", "head_dim": "head_dim",
                "hidden_dim": "intermediate_size", "n_heads": "num_attention_heads", "n_kv_heads": "num_key_value_heads",
                "norm_eps": "rms_norm_eps", "vocab_size": "vocab_size", "rope_theta": "rope_theta",
                "max_seq_len": "max_position_embeddings"}


def test_mistral_small_config_is_its_params_json_renamed():
    d = _derivation("mistral-small-24b-instruct-2501")
    cfg = ENTRIES["mistral-small-24b-instruct-2501"].config
    assert set(d["first_party_args"]) == set(MISTRAL_KEYS)
    for ours, theirs in MISTRAL_KEYS.items():
        assert cfg[theirs] == d["first_party_args"][ours], theirs
    assert cfg["tie_word_embeddings"] is (not d["checkpoint_index"]["has_lm_head"])


def test_mistral_small_count_is_the_checkpoint_size():
    """Independent truth: the bytes of the released bf16 checkpoint (model.safetensors.index.json total_size)."""
    from llmsizer.formulas.params import count_params
    idx = _derivation("mistral-small-24b-instruct-2501")["checkpoint_index"]
    total = count_params(ENTRIES["mistral-small-24b-instruct-2501"].spec()).total
    assert total * idx["dtype_bytes"] == idx["total_size"] == 47_144_806_400


# DeepSeek-V3.1 has its own row (a vendored copy of DeepSeek's config.json, catalog37); it resolved to deepseek-v3
# before. Its architecture keys, as NVIDIA's DeepSeek-V3.1-NVFP4 config.json copies them, a second, independent copy
# (ai-dynamo/aiconfigurator:aic-core/src/aiconfigurator_core/model_configs/
# nvidia--DeepSeek-V3.1-NVFP4_config.json@095f58a51c4ca8e61b66ec108d86f223f8d559ce), verbatim:
DEEPSEEK_V31_ARCH = {
    "first_k_dense_replace": 3, "hidden_size": 7168, "intermediate_size": 18432, "kv_lora_rank": 512,
    "max_position_embeddings": 163840, "model_type": "deepseek_v3", "moe_intermediate_size": 2048, "moe_layer_freq": 1,
    "n_group": 8, "n_routed_experts": 256, "n_shared_experts": 1, "norm_topk_prob": True, "num_attention_heads": 128,
    "num_experts_per_tok": 8, "num_hidden_layers": 61, "num_key_value_heads": 128, "num_nextn_predict_layers": 1,
    "q_lora_rank": 1536, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "tie_word_embeddings": False,
    "topk_group": 4, "v_head_dim": 128, "vocab_size": 129280,
}


def test_deepseek_v31_row_has_nvidia_s_v31_architecture_and_v3_s():
    """The V3.1 row (KinChow/model-structure-viewer's copy) holds every architecture key of NVIDIA's NVFP4 copy, and
    those are the V3 row's too: V3.1 changes the FP8 scale encoding (scale_fmt ue8m0), not the shapes."""
    from llmsizer.catalog.models import find
    entry = find("deepseek-ai/DeepSeek-V3.1")
    assert entry.name == "deepseek-v3.1" and find("deepseek-ai/DeepSeek-V3.1-Base").name == "deepseek-v3.1"
    v3 = find("deepseek-ai/DeepSeek-V3")
    for key, value in DEEPSEEK_V31_ARCH.items():
        assert entry.config[key] == value == v3.config[key], key
    assert entry.config["quantization_config"]["scale_fmt"] == "ue8m0"
    assert "scale_fmt" not in v3.config["quantization_config"]


# GLM-4.7 (verbatim since 2026-12-02, ASSEMBLED before): the checkpoint's tensor layout, as the GLM converter test that
# held the earlier row's FULL_CFG writes
# it out ('header-only official-layout fixture': exact names and shapes, no weights; search index id 66506276105).
# The model transformers builds from the row's config must have exactly these shapes under these names.
_GLM47_H, _GLM47_Q, _GLM47_KV = 5120, 96 * 128, 8 * 128
GLM47_LAYOUT = {
    "model.embed_tokens.weight": (151552, _GLM47_H), "model.norm.weight": (_GLM47_H,),
    "lm_head.weight": (151552, _GLM47_H),
    **{f"model.layers.{i}.{name}": shape for i in (0, 91) for name, shape in (
        ("input_layernorm.weight", (_GLM47_H,)), ("post_attention_layernorm.weight", (_GLM47_H,)),
        ("self_attn.q_proj.weight", (_GLM47_Q, _GLM47_H)), ("self_attn.q_proj.bias", (_GLM47_Q,)),
        ("self_attn.k_proj.weight", (_GLM47_KV, _GLM47_H)), ("self_attn.k_proj.bias", (_GLM47_KV,)),
        ("self_attn.v_proj.weight", (_GLM47_KV, _GLM47_H)), ("self_attn.v_proj.bias", (_GLM47_KV,)),
        ("self_attn.o_proj.weight", (_GLM47_H, _GLM47_Q)), ("self_attn.q_norm.weight", (128,)),
        ("self_attn.k_norm.weight", (128,)))},
    **{f"model.layers.{i}.mlp.{p}_proj.weight": ((_GLM47_H, 12288) if p == "down" else (12288, _GLM47_H))
       for i in (0, 2) for p in ("gate", "up", "down")},
    **{f"model.layers.{i}.mlp.{name}": shape for i in (3, 91) for name, shape in (
        ("gate.weight", (160, _GLM47_H)), ("shared_experts.gate_proj.weight", (1536, _GLM47_H)),
        ("shared_experts.up_proj.weight", (1536, _GLM47_H)), ("shared_experts.down_proj.weight", (_GLM47_H, 1536)))},
}


@pytest.mark.slow
def test_glm47_config_builds_the_published_tensor_layout():
    from oracle_utils import build

    model = build(ENTRIES["glm-4.7"].config)
    shapes = {name: tuple(p.shape) for name, p in model.named_parameters()}
    for name, shape in GLM47_LAYOUT.items():
        assert shapes.get(name) == shape, name
    # experts: 160 of 1536 in each of layers 3-91 (transformers fuses them: gate_up_proj / down_proj per layer)
    fused = {n: s for n, s in shapes.items() if n.startswith("model.layers.3.mlp.experts.")}
    assert sum(math.prod(s) for s in fused.values()) == 160 * 3 * 1536 * _GLM47_H
    assert not any(n.startswith("model.layers.2.mlp.experts") for n in shapes)
    assert sum(1 for n in shapes if n.endswith("mlp.gate.weight")) == 89


# Llama 4 Scout (verbatim since catalog37: the sample-model config.json of a Dynamo fork). NVIDIA AIConfigurator's
# abridged copy, a second, independent one (ai-dynamo/aiconfigurator:aic-core/src/aiconfigurator_core/model_configs/
# meta-llama--Llama-4-Scout-17B-16E-Instruct_config.json@095f58a51c4ca8e61b66ec108d86f223f8d559ce), text_config shape keys:
SCOUT_AIC_TEXT = {"attention_chunk_size": 8192, "head_dim": 128, "hidden_size": 5120, "interleave_moe_layer_step": 1,
                  "intermediate_size": 8192, "intermediate_size_mlp": 16384, "max_position_embeddings": 10485760,
                  "num_attention_heads": 40, "num_experts_per_tok": 1, "num_hidden_layers": 48,
                  "num_key_value_heads": 8, "num_local_experts": 16, "use_qk_norm": True, "vocab_size": 202048}


def test_llama4_scout_row_agrees_with_nvidia_s_abridged_copy():
    """Every shape key NVIDIA's copy keeps has the row's value; the row's empty no_rope_layers leaves the NoPE layers to
    Llama4TextConfig's default (every 4th), which the reader applies: 12 of 48 layers."""
    entry = ENTRIES["llama-4-scout-17b-16e-instruct"]
    text = entry.config["text_config"]
    for key, value in SCOUT_AIC_TEXT.items():
        assert text[key] == value, key
    assert text["no_rope_layers"] == []
    full = [i for i, kind in enumerate(entry.spec().layer_types) if kind == "full"]
    assert full == list(range(3, 48, 4))  # transformers Llama4TextConfig: no_rope_layer_interval 4, (i + 1) % 4 == 0


# --- ASSEMBLED entries: their shape keys against a first-party table ---------------------------------------------
# Each ASSEMBLED config was put together from partial copies (fine-tunes, quantized derivatives, test dicts; see its
# ``source``). The values below are typed from a first-party page, not from the catalog file: a wrong key in the
# assembly fails here.

# transformers docs model_doc/falcon_h1 (contributed by TII), FalconH1Config table, row "H1 0.5B": Depth 36, Dim 1024,
# Attn Heads 8, KV 2, Mamba Heads 24, d_head 64 / 64, d_state 128, Ctx Len "4K, 16K-SFT".
FALCON_H1_05B_TABLE = {"num_hidden_layers": 36, "hidden_size": 1024, "num_attention_heads": 8,
                       "num_key_value_heads": 2, "mamba_n_heads": 24, "head_dim": 64, "mamba_d_head": 64,
                       "mamba_d_state": 128, "max_position_embeddings": 16 * 1024}

# Ollama's library build granite4:tiny-h (ollama.com/library/granite4:tiny-h/blobs/9811e90b0eec), GGUF metadata that
# llama.cpp's converter writes from IBM's config.json: block_count 40, embedding_length 1536, head_count 12,
# expert_count 64, expert_used_count 6, feed_forward_length 512, expert_shared_feed_forward_length 1024,
# ssm.inner_size 3072, ssm.state_size 128, ssm.group_count 1, ssm.conv_kernel 4, ssm.time_step_rank 48 (= heads),
# vocab_size 100352.
GRANITE_H_TINY_GGUF = {"num_hidden_layers": 40, "hidden_size": 1536, "num_attention_heads": 12,
                       "num_local_experts": 64, "num_experts_per_tok": 6, "intermediate_size": 512,
                       "shared_intermediate_size": 1024, "mamba_d_state": 128, "mamba_n_groups": 1,
                       "mamba_d_conv": 4, "mamba_n_heads": 48, "vocab_size": 100352}

# NVIDIA Megatron-Bridge docs models/llm/glm45.html, "GLM 4.5 355B-A32B": 92 layers (first 3 dense), hidden 5120, FFN
# 12288, 96 heads, 8 query groups, 160 experts top-8 with 2.5x scaling, MoE FFN 1536, shared expert 1536, QK LayerNorm,
# MTP 1 layer, context 131,072, vocabulary 151,552.
GLM45_NVIDIA = {"num_hidden_layers": 92, "first_k_dense_replace": 3, "hidden_size": 5120, "intermediate_size": 12288,
                "num_attention_heads": 96, "num_key_value_heads": 8, "n_routed_experts": 160, "num_experts_per_tok": 8,
                "routed_scaling_factor": 2.5, "moe_intermediate_size": 1536, "n_shared_experts": 1,
                "use_qk_norm": True, "num_nextn_predict_layers": 1, "max_position_embeddings": 131072,
                "vocab_size": 151552}

# The KV heads that size granite-4.0-h-tiny's KV cache: a gguf-dump of Unsloth's granite-4.0-h-tiny-Q4_0.gguf (its
# general.quantized_by 'Unsloth'; same embedding_length 1536, head_count 12, vocab_size 100352 as above) quoted in
# danbev/learning-ai's llama.cpp notes: granitehybrid.attention.head_count_kv, an array of 40 (one per block),
# "[0, 0, 0, 0, 0, 4, ...]": blocks 0-4 recurrent (0 KV heads), block 5 attention with 4 KV heads. The Ollama page
# above states no head_count_kv readable here.
GRANITE_H_TINY_HEAD_COUNT_KV_HEAD = [0, 0, 0, 0, 0, 4]


def test_granite_h_tiny_kv_heads_agree_with_the_gguf_head_count_kv():
    cfg = ENTRIES["granite-4.0-h-tiny"].config
    kv = [cfg["num_key_value_heads"] if t == "attention" else 0 for t in cfg["layer_types"]]
    assert len(kv) == 40 and kv[:6] == GRANITE_H_TINY_HEAD_COUNT_KV_HEAD


ASSEMBLED_CHECKS = {"falcon-h1-0.5b-instruct": FALCON_H1_05B_TABLE, "granite-4.0-h-tiny": GRANITE_H_TINY_GGUF,
                    "glm-4.5": GLM45_NVIDIA}


@pytest.mark.parametrize("name", sorted(ASSEMBLED_CHECKS))
def test_assembled_config_agrees_with_the_first_party_table(name):
    cfg = ENTRIES[name].config
    assert ENTRIES[name].source.startswith("ASSEMBLED (no single verbatim copy found) from:")
    for key, value in ASSEMBLED_CHECKS[name].items():
        assert cfg[key] == value, key


def test_assembled_mamba_inner_widths_are_heads_times_head_dim():
    """Falcon-H1's mamba_d_ssm (the one key its Megatron-Bridge dict lacks) is 24 heads x 64 (the table's d_head), not
    mamba_expand x hidden (2048, transformers' fallback); Granite's SSM inner size 3072 (GGUF ssm.inner_size) is
    48 heads x 64."""
    fh1 = ENTRIES["falcon-h1-0.5b-instruct"].config
    assert fh1["mamba_d_ssm"] == FALCON_H1_05B_TABLE["mamba_n_heads"] * FALCON_H1_05B_TABLE["mamba_d_head"] == 1536
    granite = ENTRIES["granite-4.0-h-tiny"].config
    assert granite["mamba_n_heads"] * granite["mamba_d_head"] == 3072


# Gemma 4 E-sizes (ASSEMBLED: the stored verbatim commit pages are cut after the audio_config's first keys).
# NVIDIA Megatron-Bridge docs bridge.recipes.gemma.h100.gemma4, E4B: 42 layers, hidden 2560, FFN 10240, 8 heads, 2 KV
# heads, sliding head_dim 256 / global 512, PLE vocabulary 262144 x 256, KV shared across the last 18 layers.
GEMMA4_E4B_NVIDIA = {"num_hidden_layers": 42, "hidden_size": 2560, "intermediate_size": 10240,
                     "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 256, "global_head_dim": 512,
                     "vocab_size_per_layer_input": 262144, "hidden_size_per_layer_input": 256,
                     "num_kv_shared_layers": 18}
# gemma.cpp PR #919, E2B: 35 layers, hidden 1536, mixed FFN 6144 / 12288 (the double-wide K/V-sharing layers).
GEMMA4_E2B_GEMMA_CPP = {"num_hidden_layers": 35, "hidden_size": 1536, "ffn_widths": {6144, 12288}}


def test_assembled_gemma4_configs_agree_with_the_first_party_statements():
    e4b = ENTRIES["gemma-4-e4b-it"]
    assert e4b.source.startswith("ASSEMBLED (no single verbatim copy found) from:")
    for key, value in GEMMA4_E4B_NVIDIA.items():
        assert e4b.config["text_config"][key] == value, key
    e2b = ENTRIES["gemma-4-e2b-it"]
    spec = e2b.spec()
    assert e2b.source.startswith("ASSEMBLED (no single verbatim copy found) from:")
    assert (spec.num_layers, spec.hidden_size) == (35, 1536)
    assert {spec.ffn_size(i) for i in range(spec.num_layers)} == GEMMA4_E2B_GEMMA_CPP["ffn_widths"]


# --- Llama-3.2-11B-Vision-Instruct (DERIVED) ---------------------------------------------------------------------
# Meta's arch_args (sku_list.py) and its reference vision encoder's constants (multimodal/model.py), carried through
# the rules of transformers' converter that wrote the Hub's config.json (convert_mllama_weights_to_hf.py @39f542c2
# write_model). The rules are restated here from the converter's text, not from the catalog file.

def _mllama_from_meta(args: dict, enc: dict) -> dict:
    layers, cross = args["n_layers"], args["vision_num_cross_attention_layers"]
    freq = math.ceil(layers / cross)  # one cross-attention layer before every freq-th text layer
    hidden = 4 * int(2 * args["dim"] / 3)  # compute_intermediate_size: Meta's FeedForward rule
    hidden = int(args["ffn_dim_multiplier"] * hidden)
    hidden = args["multiple_of"] * ((hidden + args["multiple_of"] - 1) // args["multiple_of"])
    tiles = args["vision_max_num_chunks"]
    return {
        "text": {"vocab_size": args["vocab_size"], "hidden_size": args["dim"], "num_attention_heads": args["n_heads"],
                 "num_key_value_heads": args["n_kv_heads"], "rms_norm_eps": args["norm_eps"],
                 "rope_theta": args["rope_theta"], "num_hidden_layers": layers + cross,
                 "cross_attention_layers": list(range(freq - 1, layers + cross, freq + 1)),
                 "intermediate_size": hidden, "max_position_embeddings": 131072, "tie_word_embeddings": False},
        "vision": {"hidden_size": enc["width"], "num_hidden_layers": enc["layers"], "attention_heads": enc["heads"],
                   "intermediate_size": enc["width"] * enc["mlp_ratio"], "num_channels": enc["in_channels"],
                   "patch_size": enc["patch_size"], "num_global_layers": enc["n_global_layers"],
                   "intermediate_layers_indices": enc["return_intermediate"],
                   "vision_output_dim": enc["width"] * (1 + len(enc["return_intermediate"])),
                   "image_size": args["vision_chunk_size"], "max_num_tiles": tiles,
                   # get_all_supported_aspect_ratios: every (rows, cols) with rows x cols <= tiles, rows first
                   "supported_aspect_ratios": [[r, c] for r in range(1, tiles + 1) for c in range(1, tiles + 1)
                                               if r * c <= tiles]},
    }


def test_llama32_11b_vision_config_is_metas_args_through_the_hf_converter():
    d = _derivation("llama-3.2-11b-vision-instruct")
    cfg = ENTRIES["llama-3.2-11b-vision-instruct"].config
    derived = _mllama_from_meta(d["first_party_args"], d["vision_encoder"])
    for key, value in derived["text"].items():
        assert cfg["text_config"][key] == value, key
    for key, value in derived["vision"].items():
        assert cfg["vision_config"][key] == value, key
    # Meta's fusion schedule (multimodal/model.py _init_fusion_schedule: every k-th text layer counted from the last,
    # a cross-attention block run before it) lands on the converter's shifted indices
    sched = list(range(32))[::-1][::4][:8][::-1]
    assert [s + i for i, s in enumerate(sched)] == cfg["text_config"]["cross_attention_layers"]
    assert cfg["text_config"]["rope_scaling"]["rope_type"] == "llama3" and d["first_party_args"]["use_scaled_rope"]


def test_llama32_11b_vision_kv_from_the_transformers_modules():
    """Self-attention K/V per text token and the cross-attention layers' image K/V, from the shapes of the model
    transformers builds (k_proj / v_proj widths of each layer, the vision model's patches per tile) against
    formulas/kv_cache.py eqs. (1) and (4): 40 layers, 8 of them cross-attention; 4 tiles x 1601 states per image."""
    from llmsizer.formulas.kv_cache import cross_attention_kv, kv_cache
    from llmsizer.formulas.vision_tokens import image_tokens
    from oracle_utils import build

    entry = ENTRIES["llama-3.2-11b-vision-instruct"]
    model = build(entry.config)
    lm = model.model.language_model
    self_rate = sum(2 * layer.self_attn.k_proj.out_features for layer in lm.layers if hasattr(layer, "self_attn"))
    cross_rate = sum(2 * layer.cross_attn.k_proj.out_features for layer in lm.layers if hasattr(layer, "cross_attn"))
    assert all(layer.self_attn.v_proj.out_features == layer.self_attn.k_proj.out_features
               for layer in lm.layers if hasattr(layer, "self_attn"))
    per_image = model.model.vision_model.max_num_tiles * model.model.vision_model.num_patches
    spec = entry.spec()
    assert kv_cache(spec, 4096, 1, "bf16").total_bytes == 4096 * self_rate * 2 == 32 * 2 * 1024 * 4096 * 2
    cross_tokens = image_tokens(spec.vision, 1120, 1120).cross_tokens
    assert cross_tokens == per_image == 4 * 1601
    assert cross_attention_kv(spec, cross_tokens, 1, "bf16") == cross_rate * per_image * 2
