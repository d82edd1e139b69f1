"""Eq. TP6 through the CLI: a degree whose split does not divide a feed-forward width (vLLM's and SGLang's ``divide``
and fused-MoE asserts, tests/formulas/test_tp6_ffn_widths.py) is refused in one line naming --tp where stated, and
skipped where searched, in bf16 as in any format.

Qwen2.5-1.5B-Instruct (config.json: intermediate_size 8960, 12 heads, 2 KV heads): on 6 GPUs the heads allow TP 6
and 2 (3 splits the 2 KV heads unevenly), 8960 / 6 is not whole, so fit takes TP 2 x 3 replicas. Mixtral-8x22B
(intermediate_size 16384 per expert, 48 heads, 8 KV heads): TP 24 gives 682.67 per device; with expert parallelism
the experts are whole on each device and vLLM builds it (fused_moe/config.py:1116-1131)."""

from __future__ import annotations

import pytest

from cli.cli_run import answer, run


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_a_stated_degree_that_splits_the_mlp_unevenly_is_refused(engine: str,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["infer", "qwen2.5-1.5b-instruct", "--device", "h100-sxm", "--tp", "6", "--engine", engine],
                       capsys)
    assert code == 2 and err.count("\n") == 1, err
    assert "--tp 6 does not divide the 8960-wide dense MLP" in err and "tensor_parallel" not in err


def test_the_moe_rule_holds_in_bf16_and_expert_parallelism_lifts_it(capsys: pytest.CaptureFixture[str]) -> None:
    base = ["infer", "mixtral-8x22b-v0.1", "--device", "h200", "--tp", "24", "--engine", "vllm", "--weights", "bf16"]
    code, _, err = run(base, capsys)
    assert code == 2 and "16384-wide routed-expert intermediate" in err and "682.667 per device" in err, err
    assert "--enable-expert-parallel" in err
    code, _, err = run([*base, "--enable-expert-parallel"], capsys)
    assert code == 0, err


def test_fit_skips_the_degree_and_says_why(capsys: pytest.CaptureFixture[str]) -> None:
    code, data = answer(["fit", "qwen2.5-1.5b-instruct", "--device", "h100-sxm", "--count", "6", "--engine", "vllm"],
                        capsys)
    assert code == 0 and data["fits"]
    assert data["tensor_parallel"] == 2 and data["replicas"] == 3
    assert any("tensor_parallel 6 skipped" in w for w in data["warnings"])


def test_a_dense_model_at_tp_8_is_unchanged(capsys: pytest.CaptureFixture[str]) -> None:
    code, data = answer(["fit", "llama-3.1-70b-instruct", "--device", "h100-sxm", "--count", "8", "--tp", "8",
                         "--engine", "vllm"], capsys)
    assert code == 0 and data["fits"] and data["tensor_parallel"] == 8
    assert not any("skipped" in w for w in data["warnings"])
