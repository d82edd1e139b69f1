"""SGLang on hybrid (Mamba / Gated DeltaNet) models: the per-request recurrent-state pool (MambaPool) against SGLang's
own rules, read in SGLang 0.5.23 (the PyPI wheel, as tests/estimate/test_sglang.py):

- sglang/srt/mem_cache/kv_cache_configurator.py:3229-3409 _handle_max_mamba_cache (no speculative decoding, no
  --max-mamba-cache-size): ``max_mamba_cache_size = int((rest x r / (1 + r) - per_req) // per_req)`` (:3346-3386),
  r = --mamba-full-memory-ratio (fallback 0.9, arg_groups/fields/schedule.py:220-227); the token pool gets
  ``rest - (max_mamba_cache_size + 1) x per_req`` (+1 padding slot, :3404-3409); resolve_max_num_reqs
  (:3119-3150): ``min(eq. 4, max_mamba_cache_size // s)``, s = _calculate_mamba_ratio (:3062-3088) =
  MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO (3, :227) + get_mamba_tracking_slots (mem_cache/allocation_sizing.py:
  11-19: 2 with the extra buffer and the overlap scheduler, else 0). Qwen3-Next and Nemotron-H get the extra buffer
  by default (arg_groups/overrides.py:403-433 _MAMBA_EXTRA_BUFFER_ARCHS, :453-487 _mamba_radix_cache_resolution:
  "auto" -> "extra_buffer" with disable_overlap_schedule False, fields/schedule.py:193-199, and linear_attn_backend
  "triton", fields/exec_.py:542-548): s = 5; a pure Mamba-2 model is in neither list: s = 3;
- sglang/srt/configs/mamba_utils.py:47-125, :225, :276: conv state [conv_dim, conv_kernel - 1] in bf16, SSM state
  float32 (default), times the recurrent layers (mamba_cache_per_req).

Expected values are worked out here from those rules and the models' config.json numbers; only the weights' bytes
and the CUDA context (500 MiB, tests/estimate/test_sglang.py) are taken from the estimate, as inputs.
"""

from __future__ import annotations

import json

import pytest

import llmsizer
from cli_capture import run_cli
from llmsizer.estimate.engines import CUDA_CONTEXT
from llmsizer.units import GiB, MiB

H200 = 141 * GiB


def _qwen3_next_per_req() -> int:
    # Qwen3-Next-80B-A3B config.json: 48 layers, full_attention_interval 4 -> 36 Gated DeltaNet layers;
    # linear_num_key_heads 16, linear_key_head_dim 128, linear_num_value_heads 32, linear_value_head_dim 128,
    # linear_conv_kernel_dim 4. conv_dim = 2 x 16 x 128 + 32 x 128 = 8192 (qwen3_next.py hybrid_gdn_params)
    conv = 8192 * (4 - 1) * 2  # bf16
    ssm = 32 * 128 * 128 * 4  # [value heads, key head dim, value head dim], float32
    return (conv + ssm) * 36


def _nemotron_h_56b_per_req() -> int:
    # Nemotron-H-56B-Base-8K config.json: hybrid_override_pattern with 54 'M' (Mamba-2) layers and 10 '*' (attention)
    # layers; mamba_num_heads 256, mamba_head_dim 64, ssm_state_size 256, n_groups 8, conv_kernel 4.
    # conv_dim = 256 x 64 + 2 x 8 x 256 = 20480 (mamba_utils.py Mamba2StateShape.create)
    conv = 20480 * (4 - 1) * 2  # bf16
    ssm = 256 * 64 * 256 * 4  # [heads, head_dim, state_size], float32
    return (conv + ssm) * 54


EXTRA_BUFFER_SLOTS = 3 + 2  # 3 + get_mamba_tracking_slots(extra_buffer=True, overlap=True)
NO_BUFFER_SLOTS = 3 + 0  # 3 + get_mamba_tracking_slots(extra_buffer=False, ...)


def _expected(model: str, per_req: int, cell: int, context: int, **kw):
    est = llmsizer.estimate_inference(model, engine="sglang", memory=H200, context=context, **kw)
    d = est.details
    rest = int(d["mem_fraction_static"] * (H200 - CUDA_CONTEXT.expected)) - est.item("weights").bytes
    slots = int((rest * 0.9 / 1.9 - per_req) // per_req)
    pool = rest - (slots + 1) * per_req  # + the padding slot
    tokens = pool // cell
    # eq. (4) with the model's context_len, then the MambaPool cap
    return est, slots, pool, tokens


@pytest.mark.parametrize("model, per_req, cell, context_len, weights", [
    # cell: full-attention layers only: 12 x 2 kv heads x (256 + 256) x 2 B = 24576 B/token
    ("qwen3-next-80b-a3b-thinking", _qwen3_next_per_req(), 12 * 2 * 512 * 2, 262144, "fp8"),
    # cell: 10 attention layers x 8 kv heads x (128 + 128) x 2 B = 40960 B/token
    ("nemotron-h-56b-base-8k", _nemotron_h_56b_per_req(), 10 * 8 * 256 * 2, 8192, "fp8"),
])
def test_mamba_pool_splits_the_rest_and_caps_running_requests(model, per_req, cell, context_len, weights):
    est, slots, pool, tokens = _expected(model, per_req, cell, 4096, weights=weights)
    d = est.details
    assert d["mamba_cache_per_req"] == per_req and d["kv_cell_bytes"] == cell
    assert d["max_mamba_cache_size"] == slots > 0
    assert est.item("recurrent_state_pool").bytes == (slots + 1) * per_req
    assert d["kv_pool_bytes"] == pool and d["max_total_num_tokens"] == tokens
    reqs = min(max(min(int(tokens / context_len * 512), 4096), 2048), tokens // 2)
    assert d["max_running_requests"] == min(reqs, slots // EXTRA_BUFFER_SLOTS)
    names = {a.name: a for a in est.assumptions}
    assert names["mamba_radix_cache_strategy"].value == "extra_buffer" and names["mamba_radix_cache_strategy"].default
    assert names["mamba_full_memory_ratio"].value == 0.9 and names["max_mamba_cache_size"].value == slots
    # the pool is what keeps running requests out: fewer than the token pool alone allows
    assert d["max_running_requests"] < reqs


def test_cli_gives_the_same_numbers_as_python():
    est = llmsizer.estimate_inference("qwen3-next-80b-a3b-thinking", engine="sglang", memory=H200, context=4096,
                                      weights="fp8")
    out = run_cli("infer", "qwen3-next-80b-a3b-thinking", "--engine", "sglang", "--memory", "141GiB", "--context",
                  "4096", "--weights", "fp8", "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    text = json.dumps(doc)
    for key in ("max_mamba_cache_size", "max_total_num_tokens", "max_running_requests"):
        assert f'"{key}": {est.details[key]}' in text
    assert "recurrent_state_pool" in text


def test_dense_model_has_no_mamba_pool():
    est = llmsizer.estimate_inference("llama-3.1-8b", engine="sglang", memory=H200, context=8192)
    assert "max_mamba_cache_size" not in est.details
    assert all(i.name != "recurrent_state_pool" for i in est.items)
    assert all(a.name != "mamba_full_memory_ratio" for a in est.assumptions)


def test_text_report_names_the_mamba_pool():
    out = run_cli("infer", "qwen3-next-80b-a3b-thinking", "--engine", "sglang", "--memory", "141GiB", "--context",
                  "4096", "--weights", "fp8", "--concurrency", "200")
    est = llmsizer.estimate_inference("qwen3-next-80b-a3b-thinking", engine="sglang", memory=H200, context=4096,
                                      weights="fp8", concurrency=200)
    slots = est.details["max_mamba_cache_size"]
    assert f"max_mamba_cache_size {slots:,}" in out.stdout
    # the MambaPool's bound (slots // 5, the extra buffer) is memory, as vLLM's KV pool: it admits fewer than the 200
    # requested although the token pool has room for more, so it does not fit (exit 1), naming the pool (probe20 D1;
    # it read "fits" with the rest queued before)
    d = est.details
    assert d["running_sequences"] == d["max_concurrency_at_context"] == slots // EXTRA_BUFFER_SLOTS
    assert slots // EXTRA_BUFFER_SLOTS < d["token_pool_room"] and d["fits"] is False and out.returncode == 1
    assert f"does not fit: SGLang's MambaPool admits {slots // EXTRA_BUFFER_SLOTS} sequence(s)" in out.stdout
    assert f"// {EXTRA_BUFFER_SLOTS} state slots each (mamba_radix_cache_strategy extra_buffer)" in out.stdout


def test_a_state_pool_that_runs_no_request_does_not_fit():
    """Review: with the MambaPool's slots // 5 = 0 (the extra buffer's 5 slots per request) SGLang runs no request (resolve_max_num_reqs, :3119-3150), yet the
    verdict said "fits" (it read only the token pool). At 91,440 MiB (with the measured 688 MiB CUDA context) the
    rules above give 1 or 2 slots while the token pool still holds one 4096-token sequence: the verdict must say no;
    with room for 5 slots one request runs.
    (mem_fraction_static, which SGLang tiers by memory, is taken from the estimate as an input, as the weights.)"""
    per_req, cell = _qwen3_next_per_req(), 12 * 2 * 512 * 2

    def at(mib: int):
        est = llmsizer.estimate_inference("qwen3-next-80b-a3b-thinking", engine="sglang", memory=mib * MiB,
                                          context=4096, weights="fp8")
        rest = int(est.details["mem_fraction_static"] * (mib * MiB - CUDA_CONTEXT.expected)) - est.item("weights").bytes
        slots = int((rest * 0.9 / 1.9 - per_req) // per_req)  # eq. (2b) by hand
        return est, slots, (rest - (slots + 1) * per_req) // cell

    est, slots, tokens = at(91_440)
    assert slots in (1, 2) and tokens >= 4096  # the token pool alone would hold one sequence
    assert est.details["max_running_requests"] == 0 and est.details["fits"] is False, est.details["verdict"]
    assert "SGLang admits 0 sequence(s)" in est.details["verdict"]
    mib = next(m for m in range(91_440, 120_000, 64) if at(m)[1] >= EXTRA_BUFFER_SLOTS)
    ok, slots, _ = at(mib)
    assert ok.details["max_running_requests"] == slots // EXTRA_BUFFER_SLOTS == 1
    below, slots_below, _ = at(mib - 64)  # 3 or 4 slots: a request under no_buffer, none under extra_buffer
    assert slots_below < EXTRA_BUFFER_SLOTS and below.details["max_running_requests"] == 0
    assert ok.details["fits"] is True


CODESTRAL = "mamba-codestral-7b-v0.1"
H100 = 80 * GiB


def _codestral_per_req() -> int:
    # Mamba-Codestral-7B-v0.1 config.json: 64 Mamba-2 layers (num_hidden_layers; no attention layer), intermediate_size
    # 8192, n_groups 8, state_size 128, num_heads 128, head_dim 64, conv_kernel 4. conv_dim = 8192 + 2 x 8 x 128 =
    # 10240 (configs/mamba2.py:40-57 -> mamba_utils.py Mamba2StateShape.create); the state dtype is
    # mamba2_state_dtype(None) (mamba_utils.py:47-125, the params built without the config): conv bf16, SSM float32
    conv = 10240 * (4 - 1) * 2  # bf16
    ssm = 128 * 64 * 128 * 4  # [heads, head_dim, state_size], float32
    return (conv + ssm) * 64


def test_an_attention_free_model_on_sglang_is_all_mamba_pool():
    """Mamba-Codestral on SGLang 0.5.23 (Mamba2ForCausalLM, served: models/mamba2.py:178-262), which was refused.
    Its config is mambaish (configs/hybrid_arch.py:70-92), so _handle_max_mamba_cache splits eq. (2)'s rest as for a
    hybrid; configs/mamba2.py:36-38 gives no full-attention layer, so the token pool's cell is 0 B and it holds
    ``max_total_tokens or context_len`` tokens (pool_configurator.py:229-250, 637-647); context_len is 2048, the
    fallback of get_context_length for a config with no length key (utils/hf_transformers/common.py:668-694)."""
    per_req = _codestral_per_req()
    assert per_req == 272_367_616
    est = llmsizer.estimate_inference(CODESTRAL, engine="sglang", memory=H100, context=512, concurrency=8)
    d = est.details
    rest = int(d["mem_fraction_static"] * (H100 - CUDA_CONTEXT.expected)) - est.item("weights").bytes
    slots = int((rest * 0.9 / 1.9 - per_req) // per_req)  # eq. (2b) by hand
    assert d["mamba_cache_per_req"] == per_req and d["max_mamba_cache_size"] == slots > 0
    assert est.item("recurrent_state_pool").bytes == (slots + 1) * per_req
    assert d["kv_cell_bytes"] == 0 and est.item("kv_cache").bytes == 0 and d["max_total_num_tokens"] == 2048
    # eq. (4): min(max(min(2048 / 2048 x 512, 4096), 2048), 2048 // 2) = 1024, then the MambaPool's slots // 3:
    # Mamba2ForCausalLM is in neither _MAMBA_RADIX_CACHE_ARCHS nor _MAMBA_EXTRA_BUFFER_ARCHS (overrides.py:369-433),
    # so the strategy stays "auto" and no extra buffer is kept (model_override_base.py:260-265)
    assert d["max_running_requests"] == min(1024, slots // NO_BUFFER_SLOTS) == slots // 3
    assert d["mamba_requests_ratio"] == NO_BUFFER_SLOTS and d["mamba_radix_cache_strategy"] == "no_buffer"
    # the running requests' tokens come from the 2048-token pool: 4 sequences of 512 at once, so 8 do not fit
    assert d["max_concurrency_at_context"] == 4 and d["admitted_sequences"] == 4 and d["fits"] is False
    # the rest the MambaPool leaves (rest / 1.9) is not allocated: SGLang holds the device less it
    assert d["reserved_bytes"] == H100 - (rest - (slots + 1) * per_req)
    four = llmsizer.estimate_inference(CODESTRAL, engine="sglang", memory=H100, context=512, concurrency=4)
    assert four.details["fits"] is True
    # the one sequence of context_len fits; 1 of 2 at once
    assert llmsizer.estimate_inference(CODESTRAL, engine="sglang", memory=H100, context=2048,
                                       concurrency=2).details["admitted_sequences"] == 1


def test_an_attention_free_model_past_sglangs_fallback_window():
    """Past context_len 2048 SGLang refuses to start (model_config.py:1291-1316) unless the override is set; then
    context_len, and so the token pool (pool_configurator.py:246-250), is the context given."""
    est = llmsizer.estimate_inference(CODESTRAL, engine="sglang", memory=H100, context=4096)
    assert est.details["fits"] is False and "exceeds the model's window 2,048" in est.details["verdict"]
    est = llmsizer.estimate_inference(CODESTRAL, engine="sglang", memory=H100, context=8192, allow_long_context=True)
    assert est.details["max_total_num_tokens"] == 8192 and est.details["admitted_sequences"] == 1
    assert est.details["fits"] is True


def test_an_attention_free_model_on_sglang_is_the_same_answer_on_every_surface():
    pytest.importorskip("fastapi")
    pytest.importorskip("httpx")
    from fastapi.testclient import TestClient

    from llmsizer.web.app import create_app

    est = llmsizer.estimate_inference(CODESTRAL, engine="sglang", memory=H100, context=512)
    argv = ("infer", CODESTRAL, "--engine", "sglang", "--memory", "80GiB", "--context", "512")
    out = run_cli(*argv, "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    for key in ("max_mamba_cache_size", "max_total_num_tokens", "max_running_requests", "admitted_sequences"):
        assert f'"{key}": {est.details[key]}' in out.stdout
    with TestClient(create_app(), raise_server_exceptions=False) as client:
        r = client.post("/api/v1/infer", json={"model": CODESTRAL, "engine": "sglang", "memory": "80GiB",
                                               "context": 512})
        assert r.status_code == 200, r.text
        assert r.json() == doc
    most = run_cli(*argv, "--max-concurrency")
    assert most.returncode == 0 and "largest concurrency that fits: 4 sequences of 512 tokens" in most.stdout


def test_the_2048_fallback_is_for_configs_without_a_length_key_only():
    """review24 D3: SGLang's get_context_length returns 2048 for a config with none of its length keys
    (common.py:690-694), which a pure Mamba config is; a spec without max_position_embeddings that has attention
    layers was described by hand (the readers map every length key), so its window is unknown, not 2048."""
    import dataclasses

    from llmsizer.estimate.context_window import sglang_window
    from llmsizer.models import load_model
    assert sglang_window(load_model("mamba-codestral-7b-v0.1"))[0] == 2048  # type: ignore[index]
    hand = dataclasses.replace(load_model("llama-3.1-8b"), max_position_embeddings=None)
    assert sglang_window(hand) is None


def test_mamba_pool_per_request_carries_the_replicated_groups_under_tp():
    """review31 D2: SGLang shards a one-group Mamba-2 layer's conv with its replicated groups. sglang 0.5.6
    srt/configs/mamba_utils.py:100-107 (Mamba2StateShape.create): n_groups 1 % tp 4 != 0 -> n_groups += 3
    (extra_groups_for_head_shards), conv_dim = intermediate_size + 2 x n_groups x state_size, conv shape
    (divide(conv_dim, tp), conv_kernel - 1), temporal (divide(num_heads, tp), head_dim, state_size);
    mamba_cache_per_req (:62-71) = (conv numel x conv itemsize + temporal numel x temporal itemsize) x layers."""
    # granite-4.0-h-tiny config.json: hidden_size 1536 x mamba_expand 2 = intermediate 3072, mamba_n_heads 48,
    # mamba_d_head 64, mamba_d_state 128, mamba_n_groups 1, mamba_d_conv 4; 36 of its 40 layers are 'mamba'
    conv_dim = 3072 + 2 * (1 + 3) * 128  # 4096
    conv = conv_dim // 4 * (4 - 1) * 2  # bf16: 6,144 B (3328 channels without the extra groups: 4,992 B)
    ssm = 48 // 4 * 64 * 128 * 4  # float32
    est = llmsizer.estimate_inference("granite-4.0-h-tiny", engine="sglang", memory=H200, tensor_parallel=4)
    assert est.details["mamba_cache_per_req"] == (conv + ssm) * 36
