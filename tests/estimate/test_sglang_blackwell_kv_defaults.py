"""SGLang's own per-model, per-device KV defaults (estimate/engines.py sglang_auto_kv_dtype, sglang_page_size,
sglang_kv_dtype_refusal; task sglb200).

Truth from SGLang's code (sglang 0.5.23 PyPI wheel), not from llmsizer's output:
- arg_groups/overrides.py:491-546 ``_dsa_kv_cache_dtype_default``: ``--kv-cache-dtype auto`` of a DeepSeek DSA model is
  fp8_e4m3 at CUDA compute capability major >= 10 (no learnable sinks), bfloat16 below; :539-544 asserts the dtype is
  bfloat16 or fp8_e4m3, so fp8_e5m2 does not start.
- mem_cache/kv_cache_dtype.py:49-57: auto is float8_e4m3fn where the quant config's kv_cache_quant_algo is FP8
  (ModelOpt: modelopt_quant.py:478-499 reads the flat kv_cache_scheme / kv_cache_quant_algo or the nested
  hf_quant_config.json 'quantization' section).
- arg_groups/model_overrides/deepseek_v2.py:161-173: page_size 64 (x index_kpool, 1) for DSA; :177-187 trtllm_mla for
  DeepseekV3ForCausalLM on sm100 (major 10), whose page is 32 or 64, set to 64 (overrides.py:1155-1163) and whose KV
  dtype is fp8_e4m3, bf16 or auto (overrides.py:1204-1217).
- the token pool is whole pages (model_executor/pool_configurator.py:646), a request holds ceil(len / page) pages
  (utils/common.py:4859-4861 get_num_new_pages).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from llmsizer import estimate_inference
from llmsizer.errors import DeviceCannotRunError, FieldError
from llmsizer.estimate.engines import checkpoint_kv_fp8, sglang_auto_kv_dtype, sglang_page_size
from llmsizer.models import load_model

# DeepSeek-V3.2 config.json: kv_lora_rank 512, qk_rope_head_dim 64, index_head_dim 128, 61 layers (MTP not served)
KV_LORA_RANK, ROPE, INDEX_HEAD_DIM, LAYERS = 512, 64, 128, 61
BF16, FP8 = 2, 1
INDEXER_ROW = INDEX_HEAD_DIM + INDEX_HEAD_DIM // 128 * 4  # fp8 key + fp32 scale per 128 (index_key_cache.py:41-47)
RAW_FP8_ROW = (KV_LORA_RANK + ROPE) * FP8  # trtllm DSA backend at capability >= 10 (kv_cache_configurator.py:3425-3440)
BF16_ROW = (KV_LORA_RANK + ROPE) * BF16
PAGE = 64


def _kv_assumption(est):  # type: ignore[no-untyped-def]
    return next(a for a in est.assumptions if a.name == "kv_dtype")


@pytest.mark.parametrize("kv_dtype", [None, "auto"])
def test_v32_on_b200_defaults_to_fp8_e4m3(kv_dtype: str | None) -> None:
    est = estimate_inference("deepseek-v3.2", device="b200", tensor_parallel=8, engine="sglang", context=32768,
                             concurrency=32, kv_dtype=kv_dtype)
    a = _kv_assumption(est)
    assert a.value == "fp8_e4m3" and "overrides.py:491-546" in a.why and "10.0" in a.why
    assert est.details["kv_bytes_per_token"] == LAYERS * (RAW_FP8_ROW + INDEXER_ROW)  # 43,188 (bf16: 78,324)


@pytest.mark.parametrize("kv_dtype", [None, "auto"])
def test_v32_on_h200_stays_bf16(kv_dtype: str | None) -> None:
    est = estimate_inference("deepseek-v3.2", device="h200", tensor_parallel=8, engine="sglang", context=32768,
                             concurrency=32, kv_dtype=kv_dtype)
    assert _kv_assumption(est).value == "bf16"
    assert est.details["kv_bytes_per_token"] == LAYERS * (BF16_ROW + INDEXER_ROW)


def test_given_bf16_on_b200_is_kept() -> None:
    est = estimate_inference("deepseek-v3.2", device="b200", tensor_parallel=8, engine="sglang", context=32768,
                             concurrency=32, kv_dtype="bf16")
    assert est.details["kv_bytes_per_token"] == LAYERS * (BF16_ROW + INDEXER_ROW)


def test_vllm_is_not_touched() -> None:
    est = estimate_inference("deepseek-v3.2", device="b200", tensor_parallel=8, engine="vllm", context=32768,
                             concurrency=32)
    assert _kv_assumption(est).value == "bf16"


@pytest.mark.parametrize(("device", "runtime", "capability", "expected"), [
    ("gpu", "cuda", 100, "fp8_e4m3"), ("gpu", "cuda", 103, "fp8_e4m3"), ("gpu", "cuda", 120, "fp8_e4m3"),
    ("gpu", "cuda", 90, None), ("gpu", "cuda", 80, None), ("gpu", "cuda", None, None), ("gpu", "rocm", None, None),
    ("cpu", "cuda", None, None)])
def test_dsa_auto_rule(device: str, runtime: str, capability: int | None, expected: str | None) -> None:
    got = sglang_auto_kv_dtype(load_model("deepseek-v3.2"), device, runtime, capability)
    assert (got[0] if got else None) == expected


def test_non_dsa_mla_auto_is_the_model_dtype_on_blackwell() -> None:
    assert sglang_auto_kv_dtype(load_model("deepseek-v3"), "gpu", "cuda", 100) is None


@pytest.mark.parametrize(("quant", "fp8"), [
    ({"quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": "FP8"}}, True),  # hf_quant_config.json
    ({"quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": None}}, False),
    ({"quant_method": "modelopt", "quant_algo": "FP8", "kv_cache_scheme": {"type": "float", "num_bits": 8}}, True),
    ({"quant_method": "modelopt", "quant_algo": "FP8", "kv_cache_scheme": {"type": "int", "num_bits": 8}}, False),
    ({"quant_method": "modelopt", "quant_algo": "FP8", "kv_cache_quant_algo": "fp8"}, True),
    ({"quant_method": "fp8", "kv_cache_quant_algo": "FP8"}, True),  # Fp8Config (fp8.py:366-367)
    ({"quant_method": "fp8", "weight_block_size": [128, 128]}, False),
    ({}, False)])
def test_checkpoint_kv_algo(quant: dict, fp8: bool) -> None:
    assert checkpoint_kv_fp8(quant) is fp8


def test_checkpoint_fp8_kv_is_sglang_auto() -> None:
    name = "nvidia-nemotron-3-super-120b-a12b"
    root = Path(__file__).resolve().parents[2] / "src/llmsizer/catalog/data/models"
    entry = json.loads((root / f"{name}.json").read_text())
    assert entry["hf_quant_config"]["quantization"]["kv_cache_quant_algo"] == "FP8"
    cfg = entry["config"]
    # one K and one V of num_key_value_heads x head_dim per attention layer ('*' in the hybrid pattern), at 1 B
    per_token = cfg["hybrid_override_pattern"].count("*") * 2 * cfg["num_key_value_heads"] * cfg["head_dim"]
    est = estimate_inference(name, device="h100", tensor_parallel=2, engine="sglang", context=8192, concurrency=4)
    a = _kv_assumption(est)
    assert a.value == "fp8_e4m3" and "kv_cache_quant_algo FP8" in a.why
    assert est.details["kv_bytes_per_token"] == per_token * FP8
    bf16 = estimate_inference(name, device="h100", tensor_parallel=2, engine="sglang", context=8192, concurrency=4,
                              kv_dtype="bf16")
    assert bf16.details["kv_bytes_per_token"] == per_token * BF16


@pytest.mark.parametrize(("model", "device"), [("deepseek-v3.2", "h200"), ("deepseek-v3.2", "b200"),
                                                ("deepseek-v3", "b200"), ("kimi-k2-instruct", "b200")])
def test_fp8_e5m2_refused_where_sglang_refuses(model: str, device: str) -> None:
    with pytest.raises(FieldError) as e:
        estimate_inference(model, device=device, tensor_parallel=8, engine="sglang", kv_dtype="fp8_e5m2")
    assert e.value.field == "kv_dtype"
    assert ("overrides.py:539-544" if model == "deepseek-v3.2" else "overrides.py:1204-1217") in str(e.value)
    # trtllm_mla is the default on compute capability 10.x only: a rejected option where a search tries many devices
    assert isinstance(e.value, DeviceCannotRunError) == (model != "deepseek-v3.2")


def test_fp8_e5m2_taken_where_sglang_takes_it() -> None:
    # DeepSeek-V3 on Hopper: no trtllm_mla, no DSA assertion
    est = estimate_inference("deepseek-v3", device="h200", tensor_parallel=8, engine="sglang", kv_dtype="fp8_e5m2")
    assert est.details["kv_bytes_per_token"] == LAYERS * (KV_LORA_RANK + ROPE) * FP8


@pytest.mark.parametrize(("model", "device", "page"), [
    ("deepseek-v3.2", "h200", PAGE), ("deepseek-v3.2", "b200", PAGE), ("deepseek-v3", "b200", PAGE),
    ("deepseek-v3", "h200", 1)])
def test_page_rule(model: str, device: str, page: int) -> None:
    caps = {"h200": 90, "b200": 100}
    assert sglang_page_size(load_model(model), "gpu", "cuda", caps[device])[0] == page


@pytest.mark.parametrize(("model", "device", "page"), [
    ("deepseek-v3", "b200", PAGE), ("deepseek-v3.2", "h200", PAGE), ("deepseek-v3", "h200", 1)])
def test_pool_and_admission_in_whole_pages(model: str, device: str, page: int) -> None:
    context = 4000  # not a whole number of 64-token pages: a request holds ceil(4000 / 64) = 63 pages = 4032 tokens
    est = estimate_inference(model, device=device, tensor_parallel=8, engine="sglang", context=context,
                             concurrency=8)
    tokens = est.details["max_total_num_tokens"]
    assert tokens % page == 0
    assert est.details["max_concurrency_at_context"] == min(tokens // (math.ceil(context / page) * page), tokens // 2)
    pages = [a for a in est.assumptions if a.name == "sglang_page_size"]
    assert (pages[0].value if pages else 1) == page
    kv = next(i for i in est.items if i.name == "kv_cache")
    # the pool item is eq. (2)'s bytes; the pool's tokens are those bytes' whole pages
    cell = est.details["kv_cell_bytes"]
    assert tokens * cell <= kv.bytes < (tokens + page) * cell
