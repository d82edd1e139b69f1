"""vLLM stores an unquantized KV cache only in the model's own dtype (smalls3 #6): its CacheDType (vllm/config/
cache.py) names no float32, and float16 only since vllm#37199 (2026-03-16); 'auto' is the model's dtype; and a
16-bit cache of the other 16-bit type holds the model's bits read as that type, with no error (vllm#54338: float16
on a bfloat16 model gives nonsense). Before, `--engine vllm --kv-dtype fp16` or `fp32` on a bf16 model was sized as
if vLLM could store it. Now: refused on a model of another dtype (FieldError kv_dtype), and on a model of that dtype
taken as vLLM's 'auto', the same bytes as 'auto' and said so. The KV bytes are worked by hand from the config:
2 (K and V) x layers x KV heads x head_dim x bytes x tokens."""

from __future__ import annotations

import pytest

from cli_capture import run
from llmsizer import estimate_inference
from llmsizer.errors import FieldError
from llmsizer.models import load_model

COMMON = dict(engine="vllm", memory=80 * 2**30, context=4096, concurrency=1)


@pytest.mark.parametrize("kv, dtype", [("fp16", "bf16"), ("fp32", "bf16"), ("bf16", "fp16"), ("fp32", "fp16")])
def test_a_kv_dtype_other_than_the_models_is_refused(kv: str, dtype: str) -> None:
    with pytest.raises(FieldError, match=f"stores its KV cache in {kv} only for a model in {kv}") as e:
        estimate_inference("llama-3.1-8b", kv_dtype=kv, dtype=dtype, **COMMON)
    assert e.value.field == "kv_dtype" and "vllm#54338" in str(e.value)


@pytest.mark.parametrize("kv, size", [("fp16", 2), ("fp32", 4), ("bf16", 2)])
def test_the_models_own_dtype_is_vllms_auto(kv: str, size: int) -> None:
    spec = load_model("llama-3.1-8b")
    given = estimate_inference(spec, kv_dtype=kv, dtype=kv, **COMMON)
    auto = estimate_inference(spec, kv_dtype="auto", dtype=kv, **COMMON)
    per_token = 2 * spec.num_layers * spec.num_kv_heads * spec.head_dim * size
    assert given.details["kv_bytes_per_token"] == auto.details["kv_bytes_per_token"] == per_token
    note = [a for a in given.assumptions if a.name == "vllm_kv_cache_dtype"]
    assert len(note) == 1 and note[0].value == "auto" and f"with a {kv} model" in note[0].why


def test_the_cli_names_both_flags_on_one_line() -> None:
    code, out, err = run("infer", "llama-3.1-8b", "--engine", "vllm", "--kv-dtype", "fp16", "--memory", "24GiB")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "give --kv-dtype auto or fp8, or --dtype fp16" in err


def test_sglang_keeps_its_own_answer_without_the_vllm_comparison() -> None:
    # SGLang's --kv-cache-dtype bf16 stores bfloat16 whatever the model's dtype (server_args.py); vLLM refuses a bf16
    # cache on an fp16 model, so there is no vLLM figure to compare with
    est = estimate_inference("llama-3.1-8b", engine="sglang", kv_dtype="bf16", dtype="fp16", memory=80 * 2**30)
    assert "vllm_kv_tokens" not in est.details and est.item("kv_cache").bytes > 0
