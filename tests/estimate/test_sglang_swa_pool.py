"""SGLang's KV pool for models with sliding-window layers, against SGLang 0.5.23's own code (the PyPI wheel) and the
models' real config.json (the catalog's copy, read here as plain JSON).

- Gemma 2 / 3 / 3n: SGLang turns ``disable_hybrid_swa_memory`` on (arg_groups/model_overrides/gemma2_gemma3.py:
  13-26) and their architectures are not in ``is_hybrid_swa_model``'s list (configs/model_config.py:2651-2697): the one
  token pool, ``cell_size = kv_heads per rank x (head_dim + v_head_dim) x num_hidden_layers x dtype bytes``
  (model_executor/pool_configurator.py:340-498), every layer, sliding or not, holding every token.
- GPT-OSS: ``GptOssForCausalLM`` is in ``SWA_SINK_ARCHS`` (model_config.py:88-96): ``HybridSWAPoolConfigurator``
  (pool_configurator.py:656-921): full_tokens = available // (B_full + 0.8 x B_swa), swa_tokens = int(full x 0.8),
  0.8 the ``--swa-full-tokens-ratio`` fallback (arg_groups/fields/schedule.py:150-162); a running request holds
  min(t, window + 128 + 2) SWA tokens (compute_swa_request_cap :924-968, SGLANG_SWA_EVICTION_INTERVAL 128:
  environ.py:730), window = the model's get_attention_sliding_window_size (sliding_window - 1, models/gpt_oss.py:131).
- Llama 4 Scout and Gemma 4 E4B: the same two pools; Llama 4's chunked layers ((i + 1) % 4 != 0) in the SWA pool,
  window attention_chunk_size (model_config.py:2705-2711, load_model_utils.py:152-155); Gemma 4's full layers at
  global_head_dim, sliding at head_dim (utils/hf_transformers/config.py:115-145), every layer in layer_types with a
  buffer, KV-sharing ones included (mem_cache/swa_memory_pool.py:96-107).

Every expected number below is worked out from the config.json values and those rules; only the pool's byte budget
(eq. 2 of estimate/inference/sglang.py, tested in test_sglang.py) is taken from the estimate.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import llmsizer
from llmsizer.formulas.swa_pool import hybrid_swa_admitted, hybrid_swa_pool_tokens, swa_tokens_held
from llmsizer.units import GiB

MODELS = Path(__file__).resolve().parents[2] / "src" / "llmsizer" / "catalog" / "data" / "models"


def _config(name: str) -> dict:
    cfg = json.loads((MODELS / f"{name}.json").read_text())["config"]
    return cfg.get("text_config", cfg)


def _assumption(est, name):
    return next(a.value for a in est.assumptions if a.name == name)


@pytest.mark.parametrize("tp", [1, 2])
def test_gemma3_27b_gets_the_one_pool_every_layer_every_token(tp):
    """Gemma 3 27B: 62 layers x 2 (K, V) x 16 kv heads x 128 head_dim x 2 B (bf16) = 507,904 B per token, / TP on
    each GPU (253,952 at TP 2: the brief's number). No SWA pool: SGLang does not use one for Gemma 3. The need of a
    sequence is that cell times every one of its tokens (before: the sliding layers were counted at their 1,024-token
    window, 51.89 GiB 'needed' beside a verdict of 5 of 8 sequences)."""
    c = _config("gemma-3-27b-it")
    assert (c["num_hidden_layers"], c["num_key_value_heads"], c["head_dim"], c["sliding_window"]) == (62, 16, 128, 1024)
    cell = c["num_hidden_layers"] * 2 * c["num_key_value_heads"] * c["head_dim"] * 2 // tp
    assert cell == {1: 507_904, 2: 253_952}[tp]
    est = llmsizer.estimate_inference("gemma-3-27b-it", engine="sglang", memory=int(79.65 * GiB), context=32768,
                                      concurrency=8, tensor_parallel=tp)
    d = est.details
    assert d["kv_cell_bytes"] == cell
    assert "swa_pool_tokens" not in d
    assert d["max_total_num_tokens"] == d["kv_pool_bytes"] // cell
    assert d["max_concurrency_at_context"] == d["max_total_num_tokens"] // 32768
    # the need is for the load asked (8), as many as max_running_requests lets run (common.py eq. R1)
    assert d["kv_needed_bytes"] == cell * 32768 * min(8, d["max_running_requests"])
    assert _assumption(est, "sglang_kv_pool") == "one pool"
    assert not any("SWA pool" in w for w in est.warnings)


def test_gemma3_27b_on_two_h100_still_does_not_fit_eight_at_32k():
    """The case of the brief (fit gemma-3-27b-it --engine sglang --device h100-sxm --count 2 --context 32k
    --concurrency 8): SGLang's one pool at 253,952 B per token on each GPU holds fewer than 8 x 32,768 tokens, so it
    stays 'does not fit' (vLLM, whose Gemma 3 sliding layers keep only their window, fits all 8)."""
    r = llmsizer.fit("gemma-3-27b-it", "h100-sxm", 2, engine="sglang", context=32768, concurrency=8)
    d = r.estimate.details
    assert d["kv_cell_bytes"] == 253_952
    room = d["kv_pool_bytes"] // 253_952 // 32768
    assert room < 8 and d["max_concurrency_at_context"] == room and not r.fits
    v = llmsizer.fit("gemma-3-27b-it", "h100-sxm", 2, engine="vllm", context=32768, concurrency=8)
    assert v.fits


@pytest.mark.parametrize("name", ["gpt-oss-20b", "gpt-oss-120b"])
@pytest.mark.parametrize("tp", [1, 2])
@pytest.mark.parametrize("context", [32768, 100])
def test_gpt_oss_hybrid_swa_pool_split(name, tp, context):
    """GPT-OSS: layer_types alternate sliding_attention / full_attention, 8 kv heads of 64, window 128. Per token
    on each GPU: B_full = full layers x 2 x (8 / TP) x 64 x 2 B, B_swa the same over the sliding layers; the pools
    split by 0.8; a 32k sequence holds 127 + 128 + 2 = 257 SWA tokens (SGLang's window is sliding_window - 1) (the full pool binds), a 100-token one 100 in
    each pool (the SWA pool, 0.8 x the full one, binds). The need of the 8 sequences asked: every token in the full
    layers, eq. (S4)'s in the sliding ones."""
    c = _config(name)
    kinds = c["layer_types"]
    n_full, n_swa = kinds.count("full_attention"), kinds.count("sliding_attention")
    assert n_full + n_swa == c["num_hidden_layers"] and n_full == n_swa
    heads = c["num_key_value_heads"] // tp
    b_full = n_full * 2 * heads * c["head_dim"] * 2
    b_swa = n_swa * 2 * heads * c["head_dim"] * 2
    window = c["sliding_window"]
    assert window == 128 and c["head_dim"] == 64 and c["num_key_value_heads"] == 8
    est = llmsizer.estimate_inference(name, engine="sglang", memory=80 * GiB, context=context, concurrency=8,
                                      tensor_parallel=tp)
    d = est.details
    assert (d["full_pool_bytes_per_token"], d["swa_pool_bytes_per_token"], d["swa_full_tokens_ratio"]) == \
        (b_full, b_swa, 0.8)
    pool = d["kv_pool_bytes"]
    full = int(pool // (b_full + 0.8 * b_swa))
    swa = int(full * 0.8)
    assert (d["max_total_num_tokens"], d["swa_pool_tokens"]) == (full, swa)
    # SGLang evicts by the model's get_attention_sliding_window_size: sliding_window - 1 (models/gpt_oss.py:131-132)
    held = min(context, (window - 1) + 128 + 2)
    assert d["max_concurrency_at_context"] == min(full // context, swa // held)
    sliding_need = n_swa * 2 * heads * c["head_dim"] * 2 * held
    assert d["kv_needed_bytes"] == (b_full * context + sliding_need) * min(8, d["max_running_requests"])
    assert _assumption(est, "sglang_kv_pool") == "hybrid SWA"
    assert _assumption(est, "swa_full_tokens_ratio") == 0.8


@pytest.mark.parametrize("version", ["0.5.4.post2", "0.5.5.post1", "0.5.7"])
@pytest.mark.parametrize("tp", [1, 2])
def test_gpt_oss_before_sglang_0_5_8_gets_the_one_pool(version, tp):
    """SGLang before 0.5.8 sets disable_hybrid_swa_memory for GptOssForCausalLM on every device (sglang 0.5.4.post2
    srt/server_args.py:969, 0.5.5.post1 :1009, 0.5.7 :1214): one pool, profile_max_num_token's cell_size = kv heads
    per rank x head_dim x num_layers x 2 x dtype bytes (0.5.4.post2 model_executor/model_runner.py:1287-1300), every
    layer holding every token: 24 x 8 x 64 x 2 x 2 B = 49,152 B per token on one GPU (gpt-oss-20b's config.json)."""
    c = _config("gpt-oss-20b")
    cell = c["num_hidden_layers"] * (c["num_key_value_heads"] // tp) * c["head_dim"] * 2 * 2
    assert cell == {1: 49_152, 2: 24_576}[tp]
    est = llmsizer.estimate_inference("gpt-oss-20b", engine="sglang", memory=80 * GiB, context=4096, concurrency=8,
                                      tensor_parallel=tp, engine_version=version)
    d = est.details
    assert d["kv_cell_bytes"] == cell and "swa_pool_tokens" not in d
    assert d["max_total_num_tokens"] == d["kv_pool_bytes"] // cell
    assert d["kv_needed_bytes"] == cell * 4096 * min(8, d["max_running_requests"])
    assert _assumption(est, "sglang_kv_pool") == "one pool"


@pytest.mark.parametrize("version", ["0.5.8", "0.5.23", None])
def test_gpt_oss_from_sglang_0_5_8_keeps_the_hybrid_pool(version):
    """0.5.8 sets disable_hybrid_swa_memory for GPT-OSS only under trtllm_mha or speculative decoding (srt/
    server_args.py:1278-1293): on an H100 (fa3) the two pools; no release named: the profile's (0.5.23) rule."""
    est = llmsizer.estimate_inference("gpt-oss-20b", engine="sglang", memory=80 * GiB, context=4096,
                                      engine_version=version)
    assert _assumption(est, "sglang_kv_pool") == "hybrid SWA" and "swa_pool_tokens" in est.details


def test_hybrid_pool_holds_more_than_counting_every_layer_full():
    """The two pools hold B_full + B_swa per token where one pool would: with 0.8 the full pool gets
    (B_full + B_swa) / (B_full + 0.8 B_swa) = 2 / 1.8 = 1.11 x the tokens (GPT-OSS: as many full as sliding layers)."""
    est = llmsizer.estimate_inference("gpt-oss-120b", engine="sglang", memory=80 * GiB, context=8192)
    d = est.details
    one_pool = d["kv_pool_bytes"] // (d["full_pool_bytes_per_token"] + d["swa_pool_bytes_per_token"])
    assert d["max_total_num_tokens"] / one_pool == pytest.approx(2 / 1.8, rel=1e-4)


@pytest.mark.parametrize("name", ["gemma-2-9b-it", "mistral-7b-v0.1", "phi-3-mini-4k-instruct"])
def test_other_sliding_families_keep_the_one_pool(name):
    """Gemma 2 (override), Mistral v0.1 and Phi-3 (architectures not in is_hybrid_swa_model's list): the one pool,
    with every layer in the cell, as before this change."""
    est = llmsizer.estimate_inference(name, engine="sglang", memory=24 * GiB, context=4096)
    c = _config(name)
    d = est.details
    head_dim = c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]
    assert d["kv_cell_bytes"] == c["num_hidden_layers"] * 2 * c["num_key_value_heads"] * head_dim * 2
    assert "swa_pool_tokens" not in d and _assumption(est, "sglang_kv_pool") == "one pool"


def _hybrid_case(name, tp, context, b_full, b_swa, window):
    """The estimate's pool split and admission against the hand-computed B_full, B_swa and SGLang's window."""
    est = llmsizer.estimate_inference(name, engine="sglang", memory=80 * GiB, context=context, concurrency=8,
                                      tensor_parallel=tp)
    d = est.details
    assert (d["full_pool_bytes_per_token"], d["swa_pool_bytes_per_token"]) == (b_full, b_swa)
    full = int(d["kv_pool_bytes"] // (b_full + 0.8 * b_swa))
    swa = int(full * 0.8)
    assert full > 0 and (d["max_total_num_tokens"], d["swa_pool_tokens"]) == (full, swa)
    held = min(context, window + 128 + 2)
    assert d["max_concurrency_at_context"] == min(full // context, swa // held, d["max_running_requests"])
    assert _assumption(est, "sglang_kv_pool") == "hybrid SWA"
    assert not any("not modelled" in w and "SWA" in w for w in est.warnings)
    return d, held


@pytest.mark.parametrize("tp", [4, 8])
@pytest.mark.parametrize("context", [32768, 1000])
def test_llama4_scout_hybrid_pool_chunked_layers(tp, context):
    """Llama 4 Scout (Llama4ForConditionalGeneration): SGLang puts layers with (i + 1) % 4 != 0 (the chunked-attention
    ones) in the SWA pool and every 4th in the full pool (get_hybrid_layer_ids, model_config.py:2705-2711): 12 full and
    36 SWA of 48. The config has no sliding_window, so the scheduler evicts by attention_chunk_size 8192
    (load_model_utils.py:152-155). Per token on each GPU: 12 x 2 (K, V) x (8 / TP) kv heads x 128 x 2 B (bf16) =
    49,152 / TP full, 36 x ... = 147,456 / TP SWA."""
    c = _config("llama-4-scout-17b-16e-instruct")
    assert "sliding_window" not in c and "layer_types" not in c
    n = c["num_hidden_layers"]
    n_full = sum((i + 1) % 4 == 0 for i in range(n))
    n_swa = n - n_full
    assert (n, n_full, n_swa, c["attention_chunk_size"]) == (48, 12, 36, 8192)
    per_layer = 2 * (c["num_key_value_heads"] // tp) * c["head_dim"] * 2
    b_full, b_swa = n_full * per_layer, n_swa * per_layer
    assert (b_full * tp, b_swa * tp) == (49_152, 147_456)
    d, held = _hybrid_case("llama-4-scout-17b-16e-instruct", tp, context, b_full, b_swa, c["attention_chunk_size"])
    assert held == min(context, 8192 + 130)
    # the need: every token in the full layers, the held ones in the chunked layers
    assert d["kv_needed_bytes"] == (b_full * context + b_swa * held) * min(8, d["max_running_requests"])


@pytest.mark.parametrize("tp", [1, 2])
def test_gemma4_hybrid_pool_per_kind_heads_and_shared_layers(tp):
    """Gemma 4 E4B (Gemma4ForConditionalGeneration): layer_types give 7 full and 35 sliding layers; SGLang gives the
    full layers global_head_dim 512 and the sliding ones head_dim 256 (utils/hf_transformers/config.py:115-145), 2 kv
    heads each, and keeps a buffer for every listed layer, the 18 KV-sharing ones included (swa_memory_pool.py:
    96-107): B_full = 7 x 2 x 2 x 512 x 2 B = 28,672, B_swa = 35 x 2 x 2 x 256 x 2 B = 71,680 (/ TP). The window is
    sliding_window - 1 = 511 (models/gemma4_mm.py:314-315)."""
    c = _config("gemma-4-e4b-it")
    kinds = c["layer_types"]
    n_full, n_swa = kinds.count("full_attention"), kinds.count("sliding_attention")
    assert (n_full, n_swa, c["num_hidden_layers"], c["num_kv_shared_layers"]) == (7, 35, 42, 18)
    heads = max(1, c["num_key_value_heads"] // tp)
    b_full = n_full * 2 * heads * c["global_head_dim"] * 2
    b_swa = n_swa * 2 * heads * c["head_dim"] * 2
    assert (b_full * tp, b_swa * tp) == (28_672, 71_680)
    _hybrid_case("gemma-4-e4b-it", tp, 32768, b_full, b_swa, c["sliding_window"] - 1)


def test_gemma4_and_llama4_fit_on_sglang_as_the_formula_says():
    """fit on SGLang agrees with eq. (S5) worked from the pool it reports: Llama 4 Scout on 4 H100 at 32k x 8."""
    for name, count in (("llama-4-scout-17b-16e-instruct", 4), ("gemma-4-e4b-it", 1)):
        r = llmsizer.fit(name, "h100-sxm", count, engine="sglang", context=32768, concurrency=8)
        d = r.estimate.details
        window = {"llama-4-scout-17b-16e-instruct": 8192, "gemma-4-e4b-it": 511}[name]
        room = hybrid_swa_admitted(d["max_total_num_tokens"], d["swa_pool_tokens"], 32768, window, 128)
        assert d["max_concurrency_at_context"] == min(room, d["max_running_requests"])
        assert r.fits == (d["max_concurrency_at_context"] >= 8)


def test_swa_pool_formulas():
    """formulas/swa_pool.py eqs. S1-S5 on small numbers worked by hand: 10,000 B at 100 + 0.8 x 100 = 180 B per
    full token -> 55 full tokens, int(55 x 0.8) = 44 SWA tokens; with pages of 4: 52 (13 pages) and int(41.6) = 41
    -> 40."""
    assert hybrid_swa_pool_tokens(10_000, 100, 100, 0.8) == (55, 44)
    assert hybrid_swa_pool_tokens(10_000, 100, 100, 0.8, page_size=4) == (52, 40)
    assert hybrid_swa_pool_tokens(0, 100, 100, 0.8) == (0, 0)
    assert swa_tokens_held(32768, 1024, 128) == 1024 + 128 + 2
    assert hybrid_swa_admitted(1000, 800, 300, 128, 128) == min(1000 // 300, 800 // 258)


def test_an_unread_sliding_family_is_assumed_one_pool_with_a_warning():
    """review21 D9: a family the table has not read got "one pool: its architecture is not in is_hybrid_swa_model's
    list" as a fact. SGLang 0.5.23 decides on the config's architectures: GraniteSWAForCausalLM is in SWA_SINK_ARCHS
    (configs/model_config.py:88-96), so such a config is hybrid SWA there. A Mistral-shaped config under that
    architecture (model_type granite, which the table does not hold) is counted as the one pool, said to be assumed, with a
    warning; Mistral itself (MistralForCausalLM, not in the list) keeps the stated one pool and no warning."""
    from llmsizer.readers.hf_config import spec_from_config

    cfg = dict(_config("mistral-7b-v0.1"), model_type="granite", architectures=["GraniteSWAForCausalLM"],
               layer_types=["sliding_attention", "full_attention"] * 16)
    spec = spec_from_config(cfg, name="granite-swa-shaped")
    assert "sliding" in spec.kv_cache_layer_types
    est = llmsizer.estimate_inference(spec, engine="sglang", memory=24 * GiB, context=4096)
    assert _assumption(est, "sglang_kv_pool") == "one pool (assumed)"
    said = [w for w in est.warnings if "assumed to be the one pool" in w]
    assert len(said) == 1 and "is_hybrid_swa_model" in said[0]
    mistral = llmsizer.estimate_inference("mistral-7b-v0.1", engine="sglang", memory=24 * GiB, context=4096)
    assert _assumption(mistral, "sglang_kv_pool") == "one pool"
    assert not any("assumed to be the one pool" in w for w in mistral.warnings)


def test_the_hybrid_pool_names_its_page_size():
    """review21 D10: the hybrid pool's eq. (S4) uses page_size 1 (SGLang's CUDA default), but GPT-OSS on sm100 runs
    trtllm_mha at page_size 64 (SGLang 0.5.23 model_overrides/gpt_oss.py:31, overrides.py:1174-1187): eviction window
    127 (config sliding_window 128 - 1: models/gpt_oss.py:131-132) + eviction interval 128 + 2 x 64 = 383 SWA tokens
    per sequence there, against 127 + 128 + 2 x 1 = 257 here. Modelled since mxfp4dec (engines.py sglang_page_size;
    tests/estimate/test_sglang_gpt_oss_page.py): without a device the page is 1 and the assumption names the
    trtllm_mha case; on a B200 the page is 64."""
    cfg = _config("gpt-oss-20b")
    assert cfg["sliding_window"] == 128
    window = cfg["sliding_window"] - 1
    assert swa_tokens_held(4096, window, 128, 64) == 127 + 128 + 2 * 64 == 383
    assert swa_tokens_held(4096, window, 128, 1) == 257
    est = llmsizer.estimate_inference("gpt-oss-20b", engine="sglang", memory=80 * GiB, context=4096)
    a = next(a for a in est.assumptions if a.name == "sglang_page_size")
    assert a.value == 1 and "trtllm_mha" in a.why and "page 64" in a.why
    b200 = llmsizer.estimate_inference("gpt-oss-20b", engine="sglang", device="b200", context=4096)
    assert [a.value for a in b200.assumptions if a.name == "sglang_page_size"] == [64]


def test_an_swa_pool_below_the_window_stops_sglang_and_admits_none():
    """probe19 F1/F2: SGLang's validate_swa_pool_size (pool_configurator.py:198-216) raises when the SWA pool holds no
    more than the runner's sliding window + page_size; the window is SGLang's own (gpt_oss.py:131-132: HF's 128 - 1
    for GPT-OSS; attention_chunk_size 8192 for Llama 4, whose config has no sliding_window). Before, the check read
    HF's window (one token early for GPT-OSS) and the same answer said SGLang fails and admitted 1 sequence."""
    kw = dict(engine="sglang", weights="fp8", tensor_parallel=2, context=4096)
    e = llmsizer.estimate_inference("llama-4-scout-17b-16e-instruct", memory=int(67.25 * GiB), **kw)
    assert e.details["swa_pool_tokens"] <= 8192 + 1
    assert "sliding window (8192) + page_size (1)" in e.details["sglang_no_pool"]
    assert e.details["admitted_sequences"] == 0 and e.details["max_concurrency_at_context"] == 0
    # GPT-OSS: the smallest memory of a started SGLang holds an SWA pool past 127 + 1 tokens, not 128 + 1
    cfg = json.loads((Path(llmsizer.__file__).parent / "catalog" / "data" / "models" / "gpt-oss-20b.json").read_text())
    window = cfg["config"]["sliding_window"] - 1  # SGLang gpt_oss.py:131-132
    lo, hi = 14 * GiB, 40 * GiB
    while hi - lo > 1:  # bisect the memory (to the byte) where the start-up check stops failing
        mid = (lo + hi) // 2
        d = llmsizer.estimate_inference("gpt-oss-20b", engine="sglang", memory=mid, context=1024).details
        lo, hi = (mid, hi) if d.get("sglang_no_pool") else (lo, mid)
    d = llmsizer.estimate_inference("gpt-oss-20b", engine="sglang", memory=hi, context=1024).details
    assert not d.get("sglang_no_pool") and d["swa_pool_tokens"] == window + 2, d["swa_pool_tokens"]  # 129, not 130
