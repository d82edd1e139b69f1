"""compressed-tensors FP8-block checkpoints meet eq. TP5 on the CLI as quant_method fp8 ones do (review40 D1), and a
block_structure compressed-tensors refuses is a one-line refusal, exit 2 (D3).

The model: Qwen3-30B-A3B's catalog config.json (moe_intermediate_size 768, 32 heads, 4 KV heads) with llm-compressor's
FP8_BLOCK config ([128, 128]). Truth, vLLM 0.19.1 compressed_tensors_moe.py:725-749 (CompressedTensorsW8A8Fp8MoEMethod):
768 // tp a multiple of 128 (and tp > 1: of block_k 128): TP 1 and 2 load, TP 4 (192) and 8 (96) do not.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from cli.cli_run import answer, run

MODELS = Path(__file__).resolve().parents[2] / "src/llmsizer/catalog/data/models"
FP8 = {"num_bits": 8, "type": "float", "symmetric": True}
INTER, HEADS, KV = 768, 32, 4


def loads(tp: int) -> bool:
    per = INTER // tp
    return HEADS % tp == 0 and (KV % tp == 0 or tp % KV == 0) and per % 128 == 0 and (tp == 1 or per % 128 == 0)


def folder(tmp_path: Path, block: Any) -> str:
    cfg = json.loads((MODELS / "qwen3-30b-a3b.json").read_text())["config"]
    cfg["quantization_config"] = {
        "quant_method": "compressed-tensors", "format": "float-quantized", "quantization_status": "compressed",
        "config_groups": {"group_0": {"targets": ["Linear"],
                                      "weights": {**FP8, "strategy": "block", "block_structure": block},
                                      "input_activations": {**FP8, "strategy": "group", "group_size": 128,
                                                            "dynamic": True}}},
        "ignore": ["lm_head", "re:.*mlp\\.gate$"]}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    return str(tmp_path)


def test_the_rule_written_out() -> None:
    assert [t for t in (1, 2, 4, 8) if loads(t)] == [1, 2]


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_a_stated_tp_the_experts_refuse_is_refused_in_one_line(engine: str, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["infer", folder(tmp_path, [128, 128]), "--device", "h100-sxm", "--tp", "8", "--engine",
                        engine], capsys)
    assert code == 2 and err.count("\n") == 1, err
    assert "96 per device" in err and "block_structure" in err


def test_fit_takes_a_degree_the_engine_loads(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, data = answer(["fit", folder(tmp_path, [128, 128]), "--device", "h100-sxm", "--count", "8", "--engine",
                         "vllm", "--concurrency", "256"], capsys)
    assert code == 0 and data["weights_format"] == "compressed-tensors"
    # (epdp: where eq. TP5 refuses a degree, fit may take TP x DP with expert parallelism: every rank counted)
    assert loads(data["tensor_parallel"]) and data["tensor_parallel"] * data["data_parallel"] * data["replicas"] == 8
    skipped = [int(m.group(1)) for w in data["warnings"] for m in [re.search(r"tensor_parallel (\d+) skipped", w)] if m]
    assert skipped and not any(loads(t) for t in skipped)


@pytest.mark.parametrize("block", [[0, 128], [-128, 128], [1.5, 128]])
def test_a_block_structure_compressed_tensors_refuses_is_refused(block: Any, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["infer", folder(tmp_path, block), "--device", "h100-sxm", "--engine", "vllm"], capsys)
    assert code == 2 and err.count("\n") == 1 and "block_structure" in err, err
