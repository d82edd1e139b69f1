"""The one-answer check of a training run's duration across surfaces (shared by tests/training and
tests/consistency): ``train --device --tokens``, ``fit --train --tokens``, ``recommend --train``'s option for the
same target and the plan's training job on that instance give the same seconds (each renders
``estimate/duration.py`` ``training_time_on`` / ``training_duration_for``; none re-decides a setting)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from cli_capture import run_json  # re-exported: tests/training/test_cpu_training.py


@dataclass(frozen=True)
class SurfaceAnswers:
    fit: dict[str, Any]  # fit --train --json (its training_time: the seconds the others are held to)
    plan_job: Any  # the plan's JobPlan

    @property
    def training_time(self) -> dict[str, Any]:
        return self.fit["training_time"]

    @property
    def seconds(self) -> float:
        return float(self.fit["training_time"]["seconds"])


def same_training_seconds_everywhere(model: str, target: str, method: str, seq_len: int, tokens: str
                                     ) -> SurfaceAnswers:
    """Ask the four surfaces for a ``method`` run of ``model`` (micro-batch 1, ``seq_len`` tokens, ``tokens``
    trained, e.g. '10M') on one ``target`` instance, assert they give the same seconds, and return fit's answer and
    the plan job for the caller's own checks."""
    from llmsizer.plan import make_plan
    from llmsizer.recommend import recommend_training
    from llmsizer.request import parse_request
    from llmsizer.units import parse_count

    flags = ("--method", method, "--seq", str(seq_len), "--tokens", tokens)
    code, fit = run_json("fit", model, "--train", "--device", target, *flags)
    assert code == 0, fit
    seconds = fit["training_time"]["seconds"]
    code, train = run_json("train", model, "--device", target, *flags)
    assert code == 0 and train["duration"]["seconds"] == pytest.approx(seconds)
    rec = recommend_training(model, tokens=float(parse_count(tokens)),
                             training_fields={"method": method, "micro_batch": 1, "seq_len": seq_len})
    opt = next(o for o in (*rec.options, *rec.rejected) if o.target == target)
    assert opt.training_seconds == pytest.approx(seconds)
    text = (f"version: 1\njobs:\n  - name: ft\n    kind: training\n    model: {{name: {model}}}\n    method: {method}\n"
            f"    settings: {{micro_batch: 1, seq_len: {seq_len}}}\n    dataset: {{tokens: {tokens} tokens}}\n"
            f"    resources: {{instance: {target}}}\n")
    job = make_plan(parse_request(text, source="t.yaml"), alternatives=False).jobs[0]
    assert job.section("duration").value("seconds") == pytest.approx(seconds)
    return SurfaceAnswers(fit, job)
