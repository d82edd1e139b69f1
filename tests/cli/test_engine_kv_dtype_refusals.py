"""A KV cache dtype the engine's own code refuses is bad input on every command (exit 2, one line naming
--kv-dtype / the request's kv_cache_dtype), with one message:

* SGLang: python/sglang/srt/server_args.py ServerArgs.kv_cache_dtype choices @001067ff are auto, fp8_e5m2,
  fp8_e4m3, mxfp8, bf16, bfloat16, nvfp4, fp4_mx_block16, fp4_e2m1 (argparse refuses 'fp8', 'int8', 'float16');
  fp16 is SGLang's 'auto' on an fp16 model only.
* vLLM: vllm/config/cache.py:39-58 CacheDType @002f10e0 has no plain 'int8' (int8_per_token_head instead).
* transformers: QuantizedCache (the only store of an fp8 / int8 cache) raises ValueError on a model with any layer
  that is not full attention (cache_utils.py L2236-2243; the real constructor in
  tests/formulas/test_quantized_cache.py).
"""

from __future__ import annotations

import pytest

from cli_capture import run

CASES = [  # (engine, model, kv dtype, what the line says)
    ("sglang", "qwen2.5-0.5b", "fp8", "engine sglang has no 'fp8' KV cache; it stores bf16, fp8_e4m3, fp8_e5m2"),
    ("sglang", "qwen2.5-0.5b", "int8", "engine sglang has no 'int8' KV cache"),
    ("vllm", "qwen2.5-0.5b", "int8", "engine vllm has no 'int8' KV cache"),
    ("transformers", "gemma-2-2b", "int8", "only in QuantizedCache, which refuses a model with layers other than full"),
    ("transformers", "gemma-2-2b", "fp8", "only in QuantizedCache, which refuses a model with layers other than full"),
]


def _one_line(*argv: str) -> str:
    code, _, err = run(*argv)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, (argv, code, err[-400:])
    return lines[0].removeprefix("llmsizer: error: ")


@pytest.mark.parametrize("engine,model,kvd,says", CASES)
def test_infer_fit_and_a_request_refuse_it_alike(engine: str, model: str, kvd: str, says: str, tmp_path) -> None:
    infer = _one_line("infer", model, "--engine", engine, "--kv-dtype", kvd, "--context", "2048")
    assert says in infer
    fit = _one_line("fit", model, "--device", "h100", "--engine", engine, "--kv-dtype", kvd, "--context", "2048")
    assert fit == infer
    req = tmp_path / "kv.yaml"
    req.write_text(f"jobs:\n  - name: chat\n    kind: inference\n    model: {{name: {model}}}\n    engine: {engine}\n"
                   f"    kv_cache_dtype: {kvd}\n    traffic:\n      concurrency: 4\n      context: 2k\n")
    for cmd in (("request", "check", str(req)), ("plan", str(req))):
        line = _one_line(*cmd)
        assert line.startswith(f"{req}:6: job 'chat' (inference): kv_cache_dtype: ") and says in line


def test_what_the_engines_take_still_answers() -> None:
    for engine, model, kvd in (("sglang", "qwen2.5-0.5b", "fp8_e4m3"), ("sglang", "qwen2.5-0.5b", "bf16"),
                               ("sglang", "qwen2.5-0.5b", "auto"), ("vllm", "qwen2.5-0.5b", "int8_per_token_head"),
                               ("transformers", "llama-3.1-8b", "int8"), ("transformers", "gemma-2-2b", "bf16")):
        code, _, err = run("infer", model, "--engine", engine, "--kv-dtype", kvd, "--context", "2048")
        assert code == 0, (engine, kvd, err)


def test_sglang_fp16_is_its_auto_on_an_fp16_model_only() -> None:
    line = _one_line("infer", "qwen2.5-0.5b", "--engine", "sglang", "--kv-dtype", "fp16")
    assert "engine sglang stores its KV cache in fp16 only for a model in fp16" in line
    assert "give --kv-dtype auto or fp8_e4m3, or --dtype fp16" in line
    code, _, err = run("infer", "qwen2.5-0.5b", "--engine", "sglang", "--kv-dtype", "fp16", "--dtype", "fp16")
    assert code == 0, err
