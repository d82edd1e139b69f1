"""review40 D7: on 3 x H100, vLLM 0.11.0, Llama-3.1-70B bf16 fits only as TP 1 x PP 3 (64 heads: no TP 3; 131 GiB of
weights: not on one device). With --async-scheduling fit answered "does not fit" (TP 1, 3 replicas) with nothing
naming the flag, and advised "more devices". vLLM 0.10-0.14 stop at start with async scheduling and pipeline stages
(0.11.0 engine/arg_utils.py:1295-1297, 0.14.1 config/vllm.py:562-568; 0.15.1 takes both), the rule infer's --pp
refusal states. The truths: fit without the flag on the same devices (its layout), infer's refusal of the pair (its
source), and 0.15.1, which takes both."""

from __future__ import annotations

from cli_capture import run, run_json

FIT = ("fit", "llama-3.1-70b", "--device", "h100-sxm", "--count", "3", "--engine", "vllm")


def test_fit_names_the_pipeline_layouts_the_flag_leaves_out_and_the_layout_without_it() -> None:
    code, plain = run_json(*FIT, "--engine-version", "0.11.0")
    assert code == 0 and plain["fits"] and plain["pipeline_parallel"] == 3  # the layout the flag takes away
    code, flagged = run_json(*FIT, "--engine-version", "0.11.0", "--async-scheduling")
    assert code == 1 and not flagged["fits"] and flagged.get("pipeline_parallel", 1) == 1
    code, _, refusal = run("infer", "llama-3.1-70b", "--device", "h100-sxm", "--engine", "vllm", "--engine-version",
                           "0.11.0", "--async-scheduling", "--pp", "3")
    assert code == 2 and "engine/arg_utils.py:1295-1297" in refusal  # infer's one-line refusal: the rule's source
    lines = [w for w in flagged["warnings"] if "pipeline layouts not tried (PP 3)" in w]
    assert len(lines) == 1 and "engine/arg_utils.py:1295-1297" in lines[0] and "0.11.0" in lines[0]
    layout = f"TP {plain['tensor_parallel']} x PP {plain['pipeline_parallel']}"
    assert f"without it {layout} fits on these 3 devices" in lines[0]
    said = " ".join([*flagged["warnings"], *flagged["reasons"]])
    assert "more devices" not in said and "drop async_scheduling" in said  # the advice: these devices, not more


def test_a_release_that_takes_both_keeps_the_pipeline_layout_and_says_nothing() -> None:
    code, data = run_json(*FIT, "--engine-version", "0.15.1", "--async-scheduling")
    assert code == 0 and data["fits"] and data["pipeline_parallel"] == 3
    assert not any("pipeline layouts not tried" in w for w in data["warnings"])
