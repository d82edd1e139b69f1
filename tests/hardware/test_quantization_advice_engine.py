"""recommend's per-card quantization advice names the engine its numbers are for (s7probe): asked for vLLM, the
advice read "quantization: fits a 256 GB card at Q8_0 with 32k context x 16 (needs 229.54 GiB ...)", a GGUF format
and a need computed for llama.cpp, with no engine named beside a vLLM answer. Since probe4 (3692580d) an answer for
a named serving engine (vLLM, SGLang) gives no GGUF advice at all; with no engine named, the advice says llama.cpp
and its need is llama.cpp's estimate."""

from __future__ import annotations

import re

from llmsizer.estimate.inference import estimate_inference
from llmsizer.recommend import recommend_inference
from llmsizer.units import format_bytes


def test_the_advice_says_llama_cpp_and_its_need_is_llama_cpps() -> None:
    assert recommend_inference("llama-3.1-8b", context=8192, concurrency=1, engine="vllm").quantization == ()
    rec = recommend_inference("llama-3.1-8b", context=8192, concurrency=1)
    assert rec.quantization
    for line in rec.quantization:
        m = re.match(r"fits a (\d+) GB card at (\S+) on llama\.cpp with .* \(needs (.+) of a (.+) budget: ", line)
        assert m is not None, line
        est = estimate_inference("llama-3.1-8b", context=8192, concurrency=1, engine="llamacpp",
                                 weights=m.group(2).lower())
        assert format_bytes(est.total("device")[1]) == m.group(3), line
