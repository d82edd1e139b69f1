"""probe14 D5 and D10 (layout): `fit --train --json` on a priced instance carries its cost at the top level as the
serving fit does, and a training layout names the sequence parallelism it states.

D5: `.cost` was absent (read as null) while `.training_time.cost` was $2,770 and the text printed it; docs/API.md
lists a top-level `cost` for /fit. The truth: the instance's on-demand price (catalog: aws-p5.48xlarge $55.04/h,
from its data file) x instances x hours of the run.
D10: recommend's layout read "ZeRO-1 (stated), TP 2 (stated), EP 8 (stated)" with --sequence-parallel given, which
changes the activations and the time."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_capture import run_json
from llmsizer.estimate.fit import fit_training, training_layout

ROOT = Path(__file__).resolve().parents[2]
ARGS = ("qwen3-30b-a3b", "--precision", "megatron-bf16", "--tp", "2", "--ep", "8", "--sequence-parallel",
        "--batch", "1", "--seq", "4096", "--grad-checkpointing", "full", "--attention", "flash", "--zero", "1")


def _instance_price(iid: str) -> float:
    for f in (ROOT / "src/llmsizer/catalog/data/hardware").glob("*.json"):
        for row in json.loads(f.read_text()).get("instances", []):
            if row.get("id") == iid:
                return float(row["price"]["value"])
    raise AssertionError(iid)


def test_fit_train_json_top_level_cost_is_the_runs() -> None:
    code, d = run_json("fit", *ARGS, "--tokens", "10B", "--train", "--device", "aws-p5.48xlarge", "--count", "64")
    assert code in (0, 1)
    t = d["training_time"]
    price = _instance_price("aws-p5.48xlarge") * 8  # 64 GPUs = 8 instances
    assert d["cost"]["price_per_hour"] == pytest.approx(price)
    assert d["cost"]["run"] == pytest.approx(price * t["seconds"] / 3600)
    assert d["cost"]["run"] == t["cost"]  # one number, two places


def test_fit_train_without_tokens_still_prices_the_hour() -> None:
    r = fit_training("qwen3-30b-a3b", "aws-p5.48xlarge", 64, precision="megatron-bf16", tp=2, ep=8,
                     sequence_parallel=True, seq_len=4096, grad_checkpointing="full", attention="flash", zero=1)
    assert r.to_dict()["cost"] == {"price_per_hour": pytest.approx(_instance_price("aws-p5.48xlarge") * 8),
                                   "basis": "on-demand us-east-1, 8 instances", "run": None}


def test_layout_names_sequence_parallelism() -> None:
    fields = {"precision": "megatron-bf16", "tp": 2, "ep": 8, "sequence_parallel": True, "zero": 1,
              "seq_len": 4096, "grad_checkpointing": "full", "attention": "flash"}
    r = fit_training("qwen3-30b-a3b", "h100-sxm", 64, **fields)
    text = training_layout(fields, r.estimate, 64)
    assert "sequence parallel" in text and "TP 2" in text
    assert "sequence parallel" not in training_layout(dict(fields, sequence_parallel=False), r.estimate, 64)
