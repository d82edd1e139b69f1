"""A compressed-tensors block_structure or targets that compressed-tensors 0.20.1 refuses (QuantizationArgs
``validate_block_structure`` quant_args.py:280-303; QuantizationScheme ``targets: list[str]`` quant_scheme.py:39) is a
400 naming the field on the web, not a 500 (review40 D3)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

MODELS = Path(__file__).resolve().parents[3] / "src/llmsizer/catalog/data/models"
FP8 = {"num_bits": 8, "type": "float", "symmetric": True}


def config(block: Any, targets: Any = ("Linear",)) -> dict[str, Any]:
    cfg = json.loads((MODELS / "qwen3-30b-a3b.json").read_text())["config"]
    cfg["quantization_config"] = {
        "quant_method": "compressed-tensors", "format": "float-quantized",
        "config_groups": {"group_0": {"targets": targets if isinstance(targets, str) else list(targets),
                                      "weights": {**FP8, "strategy": "block", "block_structure": block}}},
        "ignore": ["lm_head"]}
    return cfg


@pytest.mark.parametrize(("endpoint", "block", "targets", "field"), [
    ("fit", [0, 128], ("Linear",), "block_structure"),
    ("infer", [0, 128], ("Linear",), "block_structure"),
    ("fit", [1.5, 128], ("Linear",), "block_structure"),
    ("infer", [128, 128], "Linear", "targets"),
])
def test_refused_with_400(client: Any, endpoint: str, block: Any, targets: Any, field: str) -> None:
    r = client.post(f"/api/v1/{endpoint}", json={"config": config(block, targets), "device": "h100-sxm",
                                                 "engine": "vllm"})
    assert r.status_code == 400, r.text
    assert field in r.text and "'L'" not in r.text
