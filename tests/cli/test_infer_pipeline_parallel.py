"""`infer --pp` and `fit --tp T --pp P` (issue #16: vLLM --pipeline-parallel-size, SGLang --pp-size): the flags,
the layout (a replica is tp x pp devices), and bad input as one line, exit 2.

Independent truth: DeepSeek-R1's config.json (61 decoder layers: vLLM 0.19.1 get_pp_indices gives 31/30 over 2
stages, tests/estimate/test_serving_pipeline_parallel.py rebuilds it); 16 devices at TP 8 x PP 2 are one replica."""

from __future__ import annotations

import pytest

from cli_capture import run, run_json


def _one_line(*argv: str) -> str:
    code, out, err = run(*argv)
    assert code == 2 and out == "" and err.count("\n") == 1 and "Traceback" not in err, (code, out[-200:], err)
    return err.removeprefix("llmsizer: error: ").rstrip("\n")


def test_infer_help_lists_pp():
    code, out, _ = run("infer", "--help")
    assert code == 0 and "--pp PIPELINE_PARALLEL" in out and "--pipeline-parallel-size" in out


def test_infer_pp_answers_the_worst_stage():
    code, data = run_json("infer", "deepseek-r1", "--device", "h100", "--tp", "8", "--pp", "2")
    assert code == 0
    stages = data["details"]["pipeline_stages"]
    assert [s["layers"] for s in stages] == [[0, 30], [31, 60]]
    assert data["details"]["devices_per_replica"] == 16
    assert data["details"]["admitted_sequences"] == min(s["admitted_sequences"] for s in stages)


def test_fit_pp_layout_and_speed():
    code, data = run_json("fit", "deepseek-r1", "--device", "h100", "--count", "16", "--tp", "8", "--pp", "2",
                          "--concurrency", "64")
    assert code == 0
    assert data["tensor_parallel"] == 8 and data["pipeline_parallel"] == 2 and data["replicas"] == 1
    speed = data["speed"]
    assert speed["count"] == 16 and speed["details"]["pipeline_micro_batch"] == 32  # 64 in 2 batches (eq. PP3)
    code, out, _ = run("fit", "deepseek-r1", "--device", "h100", "--count", "32", "--tp", "8", "--pp", "2")
    assert "TP 8 x PP 2, 2 replicas" in out.splitlines()[0]


def test_fit_pp_without_tp_chooses_each_stage_s_degree():
    """`fit --pp 2` on 16 devices: fit ranks the degrees t whose replicas of t x 2 fill them (1, 2, 4, 8: by hand the
    divisors of 16 / 2; 16 / (t x 2) replicas each) and takes one by its rule; its answer is `fit --tp T --pp 2`'s."""
    argv = ("fit", "deepseek-r1", "--device", "h100", "--count", "16", "--concurrency", "64")
    code, data = run_json(*argv, "--pp", "2")
    assert code == 0 and data["pipeline_parallel"] == 2
    ranked = data["details"]["tensor_parallel_layouts"]
    assert sorted((d["tensor_parallel"], d["pipeline_parallel"], d["replicas"]) for d in ranked) == [
        (t, 2, 16 // (2 * t)) for t in (1, 2, 4, 8)]
    tp = data["tensor_parallel"]
    assert data["replicas"] == 16 // (2 * tp)
    _, pinned = run_json(*argv, "--pp", "2", "--tp", str(tp))
    assert pinned["memory_per_device"] == data["memory_per_device"]
    assert pinned["speed"]["tokens_per_second"] == data["speed"]["tokens_per_second"]
    code, out, _ = run(*argv, "--pp", "2")
    assert f"TP {tp} x PP 2" in out.splitlines()[0] and "TP 4 x PP 2 x 2:" in out


@pytest.mark.parametrize("argv, words", [
    (("infer", "llama-3.1-8b", "--engine", "llamacpp", "--pp", "2"), "--pp applies to vLLM"),
    (("infer", "llama-3.1-8b", "--engine", "transformers", "--pp", "2"), "not transformers"),
    (("infer", "llama-3.1-8b", "--device", "cpu", "--pp", "2"), "--pp"),
    (("infer", "llama-3.1-8b", "--pp", "0"), "--pp"),
    (("infer", "llama-3.1-8b", "--pp", "two"), "--pp"),
    (("infer", "llama-3.1-8b", "--engine", "vllm", "--pp", "33"), "exceeds the model's 32 decoder layers"),
    (("infer", "gemma-3-27b-it", "--engine", "sglang", "--pp", "2"), "SGLang does not split"),
    (("infer", "jamba-1.5-mini", "--engine", "sglang", "--pp", "2"), "SGLang does not split"),
    (("infer", "t0_3b", "--engine", "vllm", "--pp", "2"), "does not implement SupportsPP"),
    (("fit", "llama-3.1-8b", "--device", "h100", "--count", "3", "--pp", "2"), "--pp 2 does not divide the 3 devices"),
    (("fit", "llama-3.1-8b", "--device", "h100", "--count", "4", "--tp", "2", "--pp", "3"), "does not divide"),
])
def test_bad_input_one_line(argv, words):
    assert words in _one_line(*argv)
