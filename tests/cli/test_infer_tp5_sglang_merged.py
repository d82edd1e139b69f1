"""Eq. TP5 on the CLI: SGLang's merged-partition refusal is one line, exit 2, naming the model, the degree, the tensor
and the rule; vLLM loads the same layout (its fp8-block lets merged layers through: vllm 0.19.1 layers/linear.py
:502-521); MoeWNA16's halved group (vllm 0.19.1 quantization/moe_wna16.py:237-304) raises the weights per device.

Truth: Llama-3.2-1B's config.json (8 KV heads of head_dim 64): at TP 8 one KV head per rank, 64 rows of k_proj,
not a multiple of block_n 128 (sglang 0.5.23 srt/layers/quantization/fp8.py:600-610).
(MoeWNA16's bytes per rank: tests/formulas/test_tp5_sglang_merged_moe_wna16.py.)
"""

from __future__ import annotations

import pytest

from cli.cli_run import answer, run


def test_sglang_refuses_a_partial_k_partition_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["infer", "llama-3.2-1b", "--device", "h100-sxm", "--tp", "8", "--engine", "sglang",
                        "--weights", "fp8-block"], capsys)
    assert code == 2 and err.count("\n") == 1, err
    assert all(s in err for s in ("--tp 8", "attn_k", "Llama-3.2-1B", "64 output rows", "block_n 128",
                                  "eq. TP5")), err
    assert "Traceback" not in err


def test_vllm_loads_it_and_a_smaller_degree_loads_on_sglang(capsys: pytest.CaptureFixture[str]) -> None:
    assert answer(["infer", "llama-3.2-1b", "--device", "h100-sxm", "--tp", "8", "--engine", "vllm", "--weights",
                   "fp8-block"], capsys)[0] == 0
    assert answer(["infer", "llama-3.2-1b", "--device", "h100-sxm", "--tp", "4", "--engine", "sglang", "--weights",
                   "fp8-block"], capsys)[0] == 0

