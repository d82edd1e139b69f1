"""probe3 #7: which format `models --fits-on` and fit's hint name for experts in host memory.

Without --host-memory the rule was "smallest format: least host RAM", which chose Q2_K for gpt-oss-120b (a
+3.5 perplexity warning) to save 0.27 GiB: the routed experts, what --n-cpu-moe puts in host RAM, are MXFP4 in
every llama.cpp file of gpt-oss (the converter writes them raw and llama-quantize refuses to requantize them:
formulas/weight_formats.py's gguf rule and its sources; bartowski's gpt-oss card: "All quants keep the feed forward
networks at mxfp4"), so the smaller file saves GPU bytes only. The best rung storing the experts alike is named
instead; a model whose experts shrink with the format keeps the smallest."""

from __future__ import annotations

from cli_capture import run, run_json

ASKED = ("--fits-on", "rtx-4090", "--context", "32k")


def test_experts_stored_alike_keep_the_better_format() -> None:
    _, data = run_json("models", "gpt-oss-120b", *ASKED)
    h = data["models"][0]["experts_in_host"]
    assert h["weights"] == "gguf:mxfp4_moe" and h["quality_warning"] is None, h
    assert "stored as at Q2_K" in h["format_rule"]
    # the same host RAM, give or take the non-expert tensors: fit --auto at Q2_K vs the named format
    _, q2 = run_json("fit", "gpt-oss-120b", "--device", "rtx-4090", "--context", "32k", "--weights", "q2_k",
                     "--auto")
    assert q2["fits"] is True and q2["n_cpu_moe"] == h["n_cpu_moe"]
    # fit's hint names the same answer (one rule)
    _, out, _ = run("fit", "gpt-oss-120b", "--device", "rtx-4090", "--context", "32k")
    hint = next(ln for ln in out.splitlines() if ln.startswith("hint: no format fits on the GPUs alone"))
    assert "fits it at MXFP4_MOE" in hint and "--weights mxfp4_moe" in hint, hint


def test_experts_that_shrink_with_the_format_keep_the_smallest() -> None:
    # qwen3-235b-a22b: the experts are quantized with the file (Q2_K experts ~ a third of Q8_0's)
    _, data = run_json("models", "qwen3-235b-a22b", *ASKED)
    h = data["models"][0]["experts_in_host"]
    assert h["weights"] == "gguf:q2_k" and h["format_rule"] == "smallest format: least host RAM", h
