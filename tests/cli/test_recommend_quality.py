"""recommend names the quality cost of each option's weight format, the chosen one in its text line, as
``models --fits-on``'s quality column rates it (probe24 D3: `recommend qwen3-30b-a3b --engine vllm --context 8k
--concurrency 50` chose awq-int4 on an A100 with no quality word in text or JSON). The truth is the format's kind:
a 4-bit re-quantization of a bf16 checkpoint has no perplexity row for vLLM's formats ('not rated'), the bf16
checkpoint itself is 'unquantized', and a GGUF type reads llama.cpp's quantize table (QUANT_OPTIONS: Q4_K_M
+0.18 ppl on Llama-3-8B, tools/quantize/quantize.cpp)."""

from __future__ import annotations

from llmsizer.cli.common import resolve_model
from llmsizer.cli.main import build_parser
from llmsizer.cli.recommend_cmd import recommend_answer
from llmsizer.render.recommend_text import render_recommendation

EXPECTED = {"awq-int4": "not rated", "gptq-int4": "not rated", "fp8": "not rated", "bf16": "unquantized",
            "gguf:q4_k_m": "+0.18 ppl"}


def _answer(argv: list[str]):  # type: ignore[no-untyped-def]
    args = build_parser(argv).parse_args(argv)
    return recommend_answer(resolve_model(args), args)


def test_chosen_quantized_format_states_its_quality_in_text_and_json() -> None:
    data, _, rec = _answer(["recommend", "qwen3-30b-a3b", "--engine", "vllm", "--context", "8k",
                            "--concurrency", "50"])
    chosen = data["chosen"]
    assert chosen["weights_format"] in EXPECTED, chosen["weights_format"]
    assert chosen["quality"] == EXPECTED[chosen["weights_format"]]
    for o in data["options"]:  # every meeting option carries its own format's rating
        if o["weights_format"] in EXPECTED:
            assert o["quality"] == EXPECTED[o["weights_format"]], o
    line = next(s for s in render_recommendation(rec).splitlines() if s.startswith("chosen: "))
    assert f"weights {chosen['weights_format']}: quality {chosen['quality']}" in line


def test_gguf_option_quality_is_llamacpp_table_ppl() -> None:
    data, _, _ = _answer(["recommend", "llama-3.1-8b", "--engine", "llamacpp", "--weights", "q4_k_m",
                          "--context", "4k", "--concurrency", "1"])
    assert data["chosen"]["weights_format"] == "gguf:q4_k_m"
    assert data["chosen"]["quality"].startswith(EXPECTED["gguf:q4_k_m"])
