"""Recurrent (conv + SSM / delta-rule) state and the KV cache of hybrid models, against a real forward pass.

Independent truth: transformers 5.24 runs each family's tiny model on the CPU (its torch fallback kernels: no
mamba_ssm / causal-conv1d / fla installed), prefill of 7 tokens then one decode step for 2 sequences, and the
returned Cache's tensors are measured (the storages they keep alive): ``conv_states`` and ``recurrent_states`` of
every LinearAttention layer, ``keys`` and ``values`` of every attention layer. The estimate's ``recurrent_state`` and ``kv_cache`` items must
equal those bytes. vLLM and llama.cpp cannot run here: their state is checked against the shapes their source
allocates, written out in the test from the cited lines (formulas/recurrent_state.py module docstring).
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from llmsizer import estimate_inference
from llmsizer.readers.hf_config import spec_from_config
from oracle_utils import (
    HYBRID_TINY,
    TINY_QWEN3_5,
    TINY_QWEN3_5_MOE,
    build,
    cache_storage_bytes,
    text_config,
    torch,
    transformers,
)

pytestmark = pytest.mark.slow

BATCH, PROMPT = 2, 7
# Qwen3.5 / Qwen3.6: Qwen3-Next's decoder inside a multimodal config (text_config + vision_config)
TINY = {**HYBRID_TINY, "qwen3_5": TINY_QWEN3_5, "qwen3_5_moe": TINY_QWEN3_5_MOE}


def _measure(cfg: dict[str, Any], dtype: Any) -> tuple[int, int]:
    """(state bytes, KV bytes) held by the cache after a prefill of PROMPT tokens and one decode step."""
    model = build(cfg, device="cpu", dtype=dtype)
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(0, text_config(cfg)["vocab_size"], (BATCH, PROMPT), generator=gen)
    with torch.no_grad():
        cache = model(input_ids=ids, use_cache=True).past_key_values
        cache = model(input_ids=ids[:, :1], cache=cache, use_cache=True).past_key_values
    state: dict[int, int] = {}  # storages kept alive (a sliced view keeps its whole base)
    for layer in cache.layers:
        for attr in ("conv_states", "recurrent_states"):
            for t in (getattr(layer, attr, None) or {}).values():
                if t is not None:
                    state[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
    return sum(state.values()), cache_storage_bytes(cache)


@pytest.mark.parametrize("dtype", ["bf16", "fp32"])
@pytest.mark.parametrize("family", sorted(TINY))
def test_transformers_state_and_kv_equal_the_cache_of_a_real_forward(family, dtype):
    cfg = TINY[family]
    measured_state, measured_kv = _measure(cfg, torch.bfloat16 if dtype == "bf16" else torch.float32)
    spec = spec_from_config(cfg, name=family)
    # the measured cache holds the whole context (PROMPT tokens and one decoded): output 0 puts all of it in the KV item
    est = estimate_inference(spec, engine="transformers", context=PROMPT + 1, output_tokens=0, concurrency=BATCH,
                             dtype=dtype, weights=dtype, device="cpu")
    assert est.item("recurrent_state").bytes == measured_state
    names = {i.name for i in est.items}
    if measured_kv:
        assert est.item("kv_cache").bytes == measured_kv
    else:  # Mamba-2: no attention layer, no KV item
        assert "kv_cache" not in names


def _spec(model_type: str) -> Any:
    """The full-size model of the configuration class's defaults (as transformers saves its config.json)."""
    return spec_from_config(transformers.AutoConfig.for_model(model_type).to_dict(), name=model_type)


def test_vllm_qwen3_next_state_page_and_hybrid_block_follow_its_source():
    """Qwen3-Next-80B shape in bf16: vLLM gated_delta_net_state_shape = conv (conv_dim, conv_kernel - 1) with
    conv_dim = head_k_dim x num_k_heads x 2 + head_v_dim x num_v_heads, temporal (num_v_heads, head_v_dim,
    head_k_dim), both in the model dtype; the attention block = 16 x ceil(page / (16 x KV bytes per token and
    layer)) and the state page padded to block x KV bytes per token and layer (_align_hybrid_block_size)."""
    conv = (128 * 16 * 2 + 128 * 32) * (4 - 1) * 2
    temporal = 32 * 128 * 128 * 2
    page = conv + temporal
    kv_token_layer = 2 * 2 * 256 * 2  # K and V, 2 KV heads, head_dim 256, bf16
    block = 16 * math.ceil(page / (16 * kv_token_layer))
    spec = _spec("qwen3_next")
    est = estimate_inference(spec, engine="vllm", context=32768, concurrency=3, memory=141 * 2**30)
    assert est.details["hybrid_block_size"] == block == 544
    per_seq = est.details["recurrent_state_bytes_per_sequence"]
    assert per_seq == 36 * block * kv_token_layer  # 36 Gated DeltaNet layers, one padded page each
    assert est.details["recurrent_state_needed_bytes"] == 3 * per_seq
    assert est.details["kv_needed_bytes"] == 3 * 12 * math.ceil(32768 / block) * block * kv_token_layer


def test_vllm_qwen3_5_keeps_its_ssm_state_in_the_configs_mamba_ssm_dtype():
    """Qwen3.5-35B-A3B (catalog row, bf16): vLLM's Qwen3_5ForConditionalGenerationConfig sets mamba_ssm_cache_dtype
    'auto' to the text config's mamba_ssm_dtype, float32 (vllm 0.19.1 / 0.34.0 model_executor/models/config.py):
    the conv state (conv_dim, conv_kernel - 1) in bf16, the temporal state (num_v_heads, head_v_dim, head_k_dim) in
    fp32; the attention block = 16 x ceil(page / (16 x KV bytes per token and layer))."""
    conv = (128 * 16 * 2 + 128 * 32) * (4 - 1) * 2
    temporal = 32 * 128 * 128 * 4
    kv_token_layer = 2 * 2 * 256 * 2  # K and V, 2 KV heads, head_dim 256, bf16
    block = 16 * math.ceil((conv + temporal) / (16 * kv_token_layer))
    est = estimate_inference("qwen3.5-35b-a3b", engine="vllm", context=32768, concurrency=3, memory=141 * 2**30)
    assert est.details["hybrid_block_size"] == block == 1056
    assert est.details["recurrent_state_bytes_per_sequence"] == 30 * block * kv_token_layer  # one padded page each
    # without the key: the model dtype, as Qwen3-Next
    from llmsizer.catalog.models import entries

    cfg = entries()["qwen3.5-35b-a3b"].config
    bare = {**cfg, "text_config": {k: v for k, v in cfg["text_config"].items() if k != "mamba_ssm_dtype"}}
    est = estimate_inference(spec_from_config(bare, name="q"), engine="vllm", context=32768, concurrency=3,
                             memory=141 * 2**30)
    assert est.details["hybrid_block_size"] == 16 * math.ceil((conv + temporal // 2) / (16 * kv_token_layer))


def test_vllm_nemotron_h_keeps_its_ssm_state_in_fp32():
    """vLLM NemotronHForCausalLMConfig: mamba_ssm_cache_dtype from the HF config, float32 when absent (the
    NemotronHConfig default); the conv state stays in the model dtype; the page is padded to the attention page."""
    spec = _spec("nemotron_h")
    r = spec.recurrent
    est = estimate_inference(spec, engine="vllm", context=4096, concurrency=1)
    conv = (r.d_inner + 2 * r.n_groups * r.d_state) * (r.d_conv - 1) * 2
    ssm = r.num_heads * r.head_dim * r.d_state * 4
    kv_token_layer = 2 * spec.num_kv_heads * spec.head_dim * 2
    block = 16 * math.ceil((conv + ssm) / (16 * kv_token_layer))  # the page padded to the attention page
    assert est.details["state_dtypes"] == ["bf16", "fp32"]
    assert "fp32" in est.item("recurrent_state").formula
    assert est.details["recurrent_state_bytes_per_sequence"] == block * kv_token_layer * spec.recurrent_layer_count


@pytest.mark.parametrize("model_type", ["qwen3_next", "jamba", "falcon_h1", "nemotron_h", "granitemoehybrid",
                                        "mamba2"])
def test_llamacpp_state_is_f32_rows_of_n_embd_r_plus_n_embd_s(model_type):
    """llama.cpp: per recurrent layer and sequence slot, n_embd_r = (d_conv - 1) x (d_inner + 2 n_group d_state)
    and n_embd_s = d_state x d_inner, both F32 (llama-hparams.cpp L127-152; llama-model.cpp create_memory)."""
    spec = _spec(model_type)
    r = spec.recurrent
    n_embd_r = (r.d_conv - 1) * (r.d_inner + 2 * r.n_groups * r.d_state)
    n_embd_s = r.d_state * r.d_inner
    est = estimate_inference(spec, engine="llamacpp", context=2048, concurrency=4, device="cpu", weights="gguf:q8_0")
    assert est.item("recurrent_state").bytes == (n_embd_r + n_embd_s) * 4 * spec.recurrent_layer_count * 4


@pytest.mark.parametrize("engine", ["transformers", "vllm", "llamacpp"])
def test_state_does_not_grow_with_the_context_and_kv_only_counts_attention_layers(engine):
    spec = _spec("jamba")  # 32 layers: 4 attention, 28 Mamba
    def est(ctx: int) -> Any:
        # output 0: the whole context is the prompt, so transformers' KV item holds all of it (the default's
        # min(256, context / 2) generated tokens would put the peak at the end of a shorter prefill)
        return estimate_inference(spec, engine=engine, context=ctx, concurrency=2, output_tokens=0)
    short, long = est(4096), est(16384)
    assert short.details["recurrent_state_bytes_per_sequence"] == long.details["recurrent_state_bytes_per_sequence"]
    if engine != "vllm":
        assert short.item("recurrent_state").bytes == long.item("recurrent_state").bytes
        assert long.item("kv_cache").bytes == 4 * short.item("kv_cache").bytes
    assert short.details["kv_bytes_per_token"] == 4 * 2 * 8 * 128 * (2 if engine != "llamacpp" else 2)


def test_llama4_chunked_layers_keep_one_chunk_after_a_decode_step():
    """Llama 4's chunked local attention caches like a sliding window of attention_chunk_size (transformers
    DynamicSlidingWindowLayer): after a 20-token prefill and one decode step, the chunked layers keep 16 tokens of storage alive
    (they expose the last 15 as a slice of the concatenated 16) and the global (NoPE) layers all 21 -- measured on
    the cache of a real CPU forward."""
    from llmsizer.estimate.engines import TRANSFORMERS
    from llmsizer.formulas.kv_cache import kv_cache

    cfg = {"model_type": "llama4_text", "vocab_size": 128, "hidden_size": 64, "num_hidden_layers": 4,
           "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 32,
           "intermediate_size_mlp": 96, "num_local_experts": 4, "num_experts_per_tok": 1, "attention_chunk_size": 16}
    model = build(cfg, device="cpu", dtype=torch.float32)
    ids = torch.randint(0, 128, (BATCH, 20), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        cache = model(input_ids=ids, use_cache=True).past_key_values
        cache = model(input_ids=ids[:, :1], cache=cache, use_cache=True).past_key_values
    measured = cache_storage_bytes(cache)  # the storages the sliced views keep alive (logical: 15 tokens each)
    spec = spec_from_config(cfg, name="llama4")
    assert spec.layer_types == ("sliding", "sliding", "sliding", "full")
    ours = kv_cache(spec, 21, BATCH, "fp32", window_extra=TRANSFORMERS.window_extra).total_bytes
    assert ours == measured == (3 * 16 + 21) * 2 * 2 * 16 * 4 * BATCH


def test_vllm_llama4_chunked_layers_follow_chunked_local_attention_spec():
    """vLLM ChunkedLocalAttentionSpec.max_memory_usage_bytes: cdiv(min(chunk + max_num_batched_tokens, max_model_len),
    block) blocks per chunked layer, no spare block; the NoPE layers hold the whole context. Scout's text stack
    (Llama4TextConfig defaults): 36 chunked + 12 global layers, 8 KV heads x 128, bf16; chunk 8192; 2048 batched."""
    spec = _spec("llama4_text")
    est = estimate_inference(spec, engine="vllm", context=32768, concurrency=1)
    per_token_layer = 2 * 8 * 128 * 2
    chunked_tokens = 16 * math.ceil(min(8192 + 2048, 32768) / 16)
    assert spec.layer_types.count("sliding") == 36 and spec.layer_types.count("full") == 12
    assert est.details["kv_bytes_per_sequence"] == (36 * chunked_tokens + 12 * 32768) * per_token_layer


# Catalog rows of hybrid families: the per-sequence state and KV of the published shape. A real forward of the
# full model does not fit this machine, so the forward runs one period of the row's layer schedule with every key
# the cache tensors depend on kept (linear/attention heads and head dims, conv kernel, layer order) and the
# rest shrunk (hidden size, FFN/experts, vocabulary: no cache tensor has them in its shape). The row's
# estimate must be the measured period's bytes times the number of periods.
_SHRINK = {"hidden_size": 64, "intermediate_size": 64, "num_experts": 4, "num_experts_per_tok": 2,
           "moe_intermediate_size": 16, "shared_expert_intermediate_size": 16, "vocab_size": 128}
CATALOG_HYBRID_ROWS = {"qwen3-next-80b-a3b-thinking": ("full_attention_interval", _SHRINK)}


@pytest.mark.parametrize("name", sorted(CATALOG_HYBRID_ROWS))
def test_catalog_hybrid_row_state_and_kv_equal_a_real_forward_of_one_period(name):
    from llmsizer.catalog.models import entries

    entry = entries()[name]
    period_key, shrink = CATALOG_HYBRID_ROWS[name]
    period = entry.config[period_key]
    periods, rest = divmod(entry.config["num_hidden_layers"], period)
    assert rest == 0
    cfg = {**entry.config, **shrink, "num_hidden_layers": period}
    measured_state, measured_kv = _measure(cfg, torch.bfloat16)
    est = estimate_inference(name, engine="transformers", context=PROMPT + 1, output_tokens=0, concurrency=BATCH,
                             device="cpu")
    assert est.item("recurrent_state").bytes == periods * measured_state
    assert est.item("kv_cache").bytes == periods * measured_kv


# Qwen3.5 catalog rows (the language model in text_config): one period of 4 layers (3 Gated DeltaNet + 1 gated
# attention, layer_types cut to it) with every key the cache tensors depend on kept (linear and attention heads and
# head dims, conv kernel); hidden size, FFN / experts, vocabulary and the vision tower shrunk (no cache tensor has
# them in its shape). The row's estimate must be the measured period's bytes times the number of periods.
_QWEN3_5_VISION_SHRINK = {"depth": 1, "hidden_size": 32, "intermediate_size": 64, "num_heads": 2, "out_hidden_size": 64}


@pytest.mark.parametrize("name", ["qwen3.5-27b", "qwen3.5-35b-a3b", "qwen3.5-122b-a10b", "qwen3.5-397b-a17b"])
def test_catalog_qwen3_5_row_state_and_kv_equal_a_real_forward_of_one_period(name):
    from llmsizer.catalog.models import entries

    entry = entries()[name]
    text = entry.config["text_config"]
    period = text["full_attention_interval"]
    periods, rest = divmod(text["num_hidden_layers"], period)
    assert rest == 0 and text["layer_types"] == text["layer_types"][:period] * periods
    shrink = {k: v for k, v in _SHRINK.items() if k in text}
    cfg = {**entry.config, "text_config": {**text, **shrink, "num_hidden_layers": period,
                                           "layer_types": text["layer_types"][:period]},
           "vision_config": {**entry.config["vision_config"], **_QWEN3_5_VISION_SHRINK}}
    measured_state, measured_kv = _measure(cfg, torch.bfloat16)
    est = estimate_inference(name, engine="transformers", context=PROMPT + 1, output_tokens=0, concurrency=BATCH,
                             device="cpu")
    assert est.item("recurrent_state").bytes == periods * measured_state
    assert est.item("kv_cache").bytes == periods * measured_kv


# Mamba-Codestral-7B (catalog row; all 64 layers Mamba-2, no attention): one layer with the row's exact mixer shapes
# (hidden 4096, 128 heads x 64, 8 groups, state 128, conv kernel 4) and only the vocabulary shrunk (no cache tensor
# has it in its shape). The row's estimate must be 64 times the measured layer's state, and hold no KV item.
def test_catalog_mamba2_row_state_equals_a_real_forward_of_one_layer():
    from llmsizer.catalog.models import entries

    entry = entries()["mamba-codestral-7b-v0.1"]
    cfg = {**entry.config, "num_hidden_layers": 1, "vocab_size": 128}
    measured_state, measured_kv = _measure(cfg, torch.bfloat16)
    est = estimate_inference(entry.name, engine="transformers", context=PROMPT + 1, output_tokens=0,
                             concurrency=BATCH, device="cpu")
    assert measured_kv == 0 and "kv_cache" not in {i.name for i in est.items}
    assert est.item("recurrent_state").bytes == entry.config["num_hidden_layers"] * measured_state


# Llama 4 catalog rows (text stack): one period of 4 layers (3 chunked RoPE layers + 1 global NoPE layer, and for
# Maverick a dense and an MoE layer each) keeps every key the K/V tensors depend on (KV heads, head_dim, the layer
# kinds); hidden size, FFN, experts and vocabulary are shrunk (no cache tensor has them in its shape). Below the
# 8192-token chunk every layer holds the whole prompt; the chunk itself is test_llama4_chunked_layers_keep_one_chunk...
_LLAMA4_SHRINK = {"hidden_size": 64, "intermediate_size": 32, "intermediate_size_mlp": 64, "num_local_experts": 2,
                  "vocab_size": 128, "num_hidden_layers": 4, "pad_token_id": 0}


@pytest.mark.parametrize("name", ["llama-4-scout-17b-16e-instruct", "llama-4-maverick-17b-128e-instruct"])
def test_catalog_llama4_row_kv_equals_a_real_forward_of_one_period(name):
    from transformers.cache_utils import get_layer_types_and_kwargs

    from llmsizer.catalog.models import entries

    text = entries()[name].config["text_config"]
    cfg = {**text, **_LLAMA4_SHRINK}
    _, measured_kv = _measure(cfg, torch.bfloat16)
    est = estimate_inference(name, engine="transformers", context=PROMPT + 1, concurrency=BATCH, device="cpu")
    assert est.item("kv_cache").bytes == 12 * measured_kv == 48 * (PROMPT + 1) * 2 * 8 * 128 * 2 * BATCH
    # the row's own schedule: which layers keep one 8192-token chunk and which the whole context, as transformers'
    # cache builds it from the row's full text config (cache_utils.get_layer_types_and_kwargs)
    kinds, kwargs = get_layer_types_and_kwargs(transformers.AutoConfig.for_model(**text))
    spec = entries()[name].spec()
    assert spec.layer_types == tuple("sliding" if k == "chunked_attention" else "full" for k in kinds)
    assert spec.layer_types.count("sliding") == 36 and spec.sliding_window == 8192
    assert {kw["sliding_window"] for kw in kwargs if "sliding_window" in kw} == {8192}
