"""The calculator's KV cache dtype select offers what the CLI takes for the chosen engine, ``auto`` included: the
lists /pages/choices.json sends (``kv_dtypes_by_engine``; ``kv_dtypes`` with the engine left to the device) are
judged against what the estimate accepts and refuses for every name and engine, and against the CLI's own answer
on a few; the engines' own lists (llama.cpp common/arg.cpp:304-314 kv_cache_types: f32, f16, bf16, q8_0, q4_0, q4_1,
iq4_nl, q5_0, q5_1; vLLM vllm/config/cache.py:39-58 CacheDType @002f10e0: auto, float16, bfloat16, fp8, fp8_e4m3,
fp8_e5m2, int8_per_token_head, fp8_per_token_head, ... and no plain int8; SGLang server_args.py kv_cache_dtype
choices @001067ff: auto, fp8_e5m2, fp8_e4m3, bf16, bfloat16 and FP4/MXFP8 recipes)."""

from __future__ import annotations

import pytest
from web_api_helpers import cli_error_line, run_cli_json

from llmsizer import estimate_inference
from llmsizer.errors import InputError
from llmsizer.specs import ENGINES

pytest.importorskip("fastapi")

MODEL = "qwen2.5-0.5b"
# every name the CLI's --kv-dtype parses, with spellings it maps to them (formulas/kv_cache.py kv_dtype_name)
NAMES = ("fp32", "fp16", "bf16", "fp8", "fp8_e4m3", "fp8_e5m2", "int8", "int8_per_token_head", "fp8_per_token_head",
         "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1", "auto")


def _accepted(engine: str, name: str) -> bool:
    try:
        estimate_inference(MODEL, engine=engine, kv_dtype=name, context=1024)
    except InputError:
        return False
    return True


@pytest.fixture(scope="module")
def choices(client) -> dict:
    return client.get("/pages/choices.json").json()


@pytest.mark.parametrize("engine", ENGINES)
def test_each_engine_offers_exactly_what_it_accepts(choices: dict, engine: str) -> None:
    offered = choices["kv_dtypes_by_engine"][engine]
    assert sorted(offered) == sorted(n for n in NAMES if _accepted(engine, n))
    assert "auto" in offered


def test_the_engines_own_lists(choices: dict) -> None:
    by = choices["kv_dtypes_by_engine"]
    assert set(by["llamacpp"]) == {"fp32", "fp16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1", "auto"}
    assert {"fp8", "fp8_e4m3", "fp8_e5m2", "int8_per_token_head", "fp8_per_token_head", "bf16", "auto"} <= set(by["vllm"])
    assert not {"q8_0", "q4_0", "int8"} & set(by["vllm"])
    assert set(by["sglang"]) == {"bf16", "fp8_e4m3", "fp8_e5m2", "auto"}


def test_no_engine_offers_every_name(choices: dict) -> None:
    """The engine left to the device: every name the CLI parses (the device's engine then judges it)."""
    assert sorted(choices["choices"]["kv_dtypes"]) == sorted(NAMES)
    assert set(NAMES) == set().union(*choices["kv_dtypes_by_engine"].values())


def test_the_cli_agrees(choices: dict) -> None:
    base = ["infer", MODEL, "--context", "1024"]
    for engine, name in (("llamacpp", "auto"), ("llamacpp", "q4_0"), ("vllm", "fp8"), ("vllm", "auto")):
        assert name in choices["kv_dtypes_by_engine"][engine]
        run_cli_json(*base, "--engine", engine, "--kv-dtype", name)  # answers (exit 0)
    for engine, name in (("llamacpp", "fp8"), ("vllm", "q4_0"), ("vllm", "int8"), ("sglang", "fp8"), ("sglang", "int8")):
        assert name not in choices["kv_dtypes_by_engine"][engine]
        assert f"engine {engine} has no '{name}' KV cache" in cli_error_line(*base, "--engine", engine,
                                                                            "--kv-dtype", name)


def test_the_api_refuses_what_the_cli_refuses(client) -> None:
    """One message on every surface: the API's 400 detail is the CLI's line, the field named as the body's key."""
    for body in ({"engine": "sglang", "kv_dtype": "fp8"}, {"engine": "vllm", "kv_dtype": "int8"},
                 {"engine": "transformers", "kv_dtype": "int8", "model": "gemma-2-2b"}):
        model = body.pop("model", MODEL)
        line = cli_error_line("infer", model, "--engine", body["engine"], "--kv-dtype", body["kv_dtype"])
        r = client.post("/api/v1/infer", json={"model": model, **body})
        assert r.status_code == 400 and r.json()["detail"] == line
