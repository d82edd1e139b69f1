"""train / fit --train --tokens: a run past the 90-day practical limit recommend and plan apply warns with the device
count that brings it under at linear scaling (probe8 defect 7)."""

from __future__ import annotations

import math
import re

from llmsizer.estimate.duration import PRACTICAL_TRAINING_SECONDS
from llmsizer.estimate.fit import fit_training
from llmsizer.recommend import PRACTICAL_TRAINING_SECONDS as RECOMMEND_LIMIT


def test_limit_has_one_home() -> None:
    assert RECOMMEND_LIMIT is PRACTICAL_TRAINING_SECONDS and PRACTICAL_TRAINING_SECONDS == 90 * 86400


def test_fifteen_trillion_tokens_on_one_node_warns_with_devices() -> None:
    r = fit_training("llama-3.1-8b", "aws-p5.48xlarge", None, tokens=15e12, fsdp="full", seq_len=8192,
                     grad_checkpointing="selective-op", precision="fsdp-bf16-mixed")
    assert r.duration is not None and r.duration.seconds is not None
    days = r.duration.seconds / 86400
    assert days > 365  # years on 8 GPUs
    hit = [w for w in r.all_warnings if "practical limit" in w]
    assert len(hit) == 1
    n = int(re.search(r"about (\d+) devices", hit[0]).group(1))  # type: ignore[union-attr]
    assert n == math.ceil(8 * days / 90)  # linear scaling: 8 devices x days / 90 days


def test_short_run_does_not_warn() -> None:
    r = fit_training("llama-3.1-8b", "aws-p5.48xlarge", None, tokens=1e9, fsdp="full", seq_len=8192)
    assert not any("practical limit" in w for w in r.all_warnings)
