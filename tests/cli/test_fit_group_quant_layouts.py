"""Group-quantized (GPTQ / AWQ) layouts the engines cannot load are refused where stated and skipped where searched.

Qwen2.5-72B-Instruct (Qwen/Qwen2.5-72B-Instruct config.json: intermediate_size 29568, 64 heads, 8 KV heads). Truth:
vLLM's and SGLang's group check written out (vllm 0.19.1 vllm/model_executor/layers/quantization/awq.py:185-196,
gptq.py:250-255; sglang 0.5.23 srt/layers/quantization/awq/schemes/awq_linear.py:39,
gptq/schemes/gptq_linear.py:47): down_proj's input per rank, 29568 / tp, a multiple of the group (128 unless given).
Qwen's own AWQ release pads intermediate_size to 29696 for this reason.
"""

from __future__ import annotations

import pytest

from cli.cli_run import answer, run

INTER, HEADS, KV = 29568, 64, 8


def loads(tp: int, group: int = 128) -> bool:
    heads_ok = HEADS % tp == 0 and (KV % tp == 0 if tp < KV else tp % KV == 0)
    return heads_ok and INTER % tp == 0 and (tp == 1 or (INTER // tp) % group == 0)


def test_the_rule_written_out() -> None:
    assert [t for t in (1, 2, 4, 8) if loads(t)] == [1]
    assert [t for t in (1, 2, 4, 8) if loads(t, 64)] == [1, 2]


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_a_stated_tp_2_is_refused_in_one_line(engine: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["infer", "qwen2.5-72b-instruct", "--device", "h100-sxm", "--tp", "2", "--engine", engine,
                        "--weights", "awq-int4"], capsys)
    assert code == 2 and err.count("\n") == 1, err
    assert "14784 per device" in err and "group 128" in err


@pytest.mark.parametrize(("group", "fmt"), [(None, "awq-int4"), (64, "gptq-int4")])
def test_fit_takes_a_degree_the_engine_loads(group: int | None, fmt: str, capsys: pytest.CaptureFixture[str]) -> None:
    extra = ["--group-size", str(group)] if group else []
    code, data = answer(["fit", "qwen2.5-72b-instruct", "--device", "h100-sxm", "--count", "2", "--engine", "vllm",
                         "--weights", fmt, "--context", "8k", *extra], capsys)
    assert code == 0 and data["fits"]
    assert loads(data["tensor_parallel"], group or 128) and data["tensor_parallel"] * data["replicas"] == 2
    assert any("tensor_parallel 2 skipped" in w for w in data["warnings"]) == (group is None)


def test_a_bf16_layout_is_not_held_to_the_groups(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["infer", "qwen2.5-72b-instruct", "--device", "h200", "--tp", "2", "--engine", "vllm",
                        "--weights", "bf16"], capsys)
    assert code == 0, err  # (fits: 0; a refusal would be 2)
