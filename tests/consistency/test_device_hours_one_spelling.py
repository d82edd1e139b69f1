"""The device-hours of one training run read the same in `plan`, `fit --train --tokens` and `train --tokens` (probe
finding): the plan wrote 1.92 device-hours (render/markdown.py ``format_value``, a count: 3 significant digits below
100, whole above) where fit and train wrote the same figure as 1.9 (and 26,861 as 26,861.0)."""

from __future__ import annotations

import re
from pathlib import Path

from cli_capture import run

REQUEST = """version: 1
title: device-hours
team: probe
contact: a@example.com
jobs:
  - name: tune
    kind: training
    model: {name: qwen2.5-7b}
    method: qlora
    settings: {micro_batch: 2, seq_len: 2k, grad_checkpointing: full}
    dataset: {tokens: 20M tokens}
    resources: {device: l40s, count: 1}
"""
ARGS = ("qwen2.5-7b", "--method", "qlora", "--batch", "2", "--seq", "2k", "--grad-checkpointing", "full",
        "--tokens", "20M")
HOURS = re.compile(r"([0-9][0-9,.]*) device-hours")


def test_plan_fit_and_train_print_one_figure(tmp_path: Path) -> None:
    req = tmp_path / "tune.yaml"
    req.write_text(REQUEST)
    shown = {
        "plan": run("plan", str(req))[1],
        "fit": run("fit", *ARGS, "--train", "--device", "l40s")[1],
        "train": run("train", *ARGS, "--device", "l40s")[1],
    }
    figures = {k: HOURS.findall(v) for k, v in shown.items()}
    assert all(len(f) == 1 for f in figures.values()), figures
    assert len({f[0] for f in figures.values()}) == 1, figures
