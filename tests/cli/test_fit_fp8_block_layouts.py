"""FP8-block layouts the engines cannot load are refused where stated and skipped where searched (probe32 D1).

MiniMax-M2.7 (MiniMaxAI/MiniMax-M2.7 config.json: intermediate_size 1536 per expert, weight_block_size [128, 128],
48 heads, 8 KV heads). Truth: vLLM's Fp8MoEMethod check written out (vllm 0.19.1
vllm/model_executor/layers/quantization/fp8.py:610-649, intermediate_size // tp from fused_moe/layer.py:426: a multiple
of block_n, and of block_k when tp > 1; SGLang 0.5.23 srt/layers/quantization/fp8.py:1579-1601 the same), and the
heads' rule of tests/cli/test_fit_tensor_parallel_choice.py. The vLLM recipe for MiniMax-M2 (vllm-project/recipes
MiniMax/MiniMax-M2.md @34b05a1e) says TP 8 is not supported and serves 8 GPUs as DP + EP, which llmsizer does not
model: the refusal says so.
"""

from __future__ import annotations

import pytest

from cli.cli_run import answer, run

INTER, BLOCK_N, BLOCK_K, HEADS, KV = 1536, 128, 128, 48, 8


def loads(tp: int) -> bool:
    per = INTER // tp
    heads_ok = HEADS % tp == 0 and (KV % tp == 0 if tp < KV else tp % KV == 0)
    return heads_ok and per % BLOCK_N == 0 and (tp == 1 or per % BLOCK_K == 0)


def test_the_rule_written_out() -> None:
    assert [t for t in (1, 2, 4, 8) if loads(t)] == [1, 2, 4]


@pytest.mark.parametrize("command", ["infer", "fit"])
def test_a_stated_tp_8_is_refused_in_one_line(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    place = ["--device", "h200", "--count", "8"] if command == "fit" else ["--device", "h100-sxm"]
    code, _, err = run([command, "minimax-m2.7", *place, "--tp", "8", "--engine", "vllm"], capsys)
    assert code == 2 and err.count("\n") == 1, err
    # (epdp: the hint names the layout that loads it, vLLM's expert parallelism, now modelled)
    assert "192 per device" in err and "expert parallelism" in err
    # the CLI names its flags, as every other CLI line does (probe33 D3), not the Python fields
    assert "--tp 8 splits" in err and "a smaller --tp" in err and "tensor_parallel" not in err
    assert "give expert_parallel" not in err and "give --enable-expert-parallel (with --dp)" in err


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_fit_takes_a_degree_the_engine_loads_and_says_why_not_8(engine: str,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    code, data = answer(["fit", "minimax-m2.7", "--device", "h100-sxm", "--count", "8", "--engine", engine,
                         "--context", "32k"], capsys)
    assert code == 0 and data["fits"] and data["weights_format"] == "fp8-block"
    # (sglep: SGLang's search, like vLLM's, may take attention-DP ranks with the experts split over all of them)
    dp = data.get("data_parallel", 1)
    assert loads(data["tensor_parallel"]) and data["tensor_parallel"] * dp * data["replicas"] == 8
    assert any("tensor_parallel 8 skipped" in w for w in data["warnings"])


def test_a_bf16_layout_is_not_held_to_the_blocks(capsys: pytest.CaptureFixture[str]) -> None:
    """The rule is the FP8-block format's: sized in bf16 (dequantized), TP 8 is vLLM's to take."""
    code, _, err = run(["infer", "minimax-m2.7", "--device", "h200", "--tp", "8", "--engine", "vllm",
                        "--weights", "bf16"], capsys)
    assert code == 0, err


def test_the_searches_answer_loadable_layouts(capsys: pytest.CaptureFixture[str]) -> None:
    code, data = answer(["models", "minimax-m2.7", "--fits-on", "h100-sxm", "--count", "8", "--context", "32k",
                         "--engine", "vllm"], capsys)
    row = next(m for m in data["models"] if m["id"] == "MiniMaxAI/MiniMax-M2.7")
    assert row["status"] == "meets" and loads(row["tensor_parallel"])
    code, data = answer(["recommend", "minimax-m2.7", "--context", "32k", "--engine", "vllm"], capsys)
    rows = [r for r in data["options"] if r["weights_format"] == "fp8-block"]
    assert rows and all(loads(r["tensor_parallel"]) for r in rows)
