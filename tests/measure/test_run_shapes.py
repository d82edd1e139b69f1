"""What a measured run's shapes are, and that measure/compare.py estimates it with those shapes.

The worker is run here for real (in-process, CPU, the tiny model of conftest.py) with the step functions wrapped to
record the token tensors they receive: a training run feeds one [micro_batch, seq_len] tensor to every step (no
padding, no other shape), so compare's training workload says batch_shapes='fixed' (compare.RUN_BATCH_SHAPES), not
the workload default 'variable' (batches padded to their longest sample)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from llmsizer.measure.compare import RUN_BATCH_SHAPES, spec_of, training_estimate, training_fields

from .conftest import TINY

ROOT = Path(__file__).resolve().parents[2]


def _run_worker(monkeypatch: pytest.MonkeyPatch, kind: str, step_name: str, **settings: Any) -> tuple[dict, list]:
    pytest.importorskip("transformers")
    from llmsizer.measure import MeasureSettings, worker, workloads

    seen: list[Any] = []
    real = getattr(workloads, step_name)

    def spy(model: Any, *args: Any, **kw: Any) -> Any:
        seen.append(args[1])  # training_step(model, opt, ids, ...), inference_pass(model, s, ids, ...)
        return real(model, *args, **kw)

    monkeypatch.setattr(workloads, step_name, spy)
    s = MeasureSettings(kind, "tiny", device="cpu", threads=1, steps=2, **settings)
    job = {"settings": s.to_dict(), "model": {"name": "tiny", "source": "test", "config": TINY, "checkpoint": None}}
    return worker.run(job), seen


def test_a_training_run_feeds_one_fixed_shape_batch_to_every_step(monkeypatch: pytest.MonkeyPatch) -> None:
    out, seen = _run_worker(monkeypatch, "training", "training_step", method="full", micro_batch=2, seq_len=64,
                            optimizer="adamw", optimizer_impl="for-loop")
    assert out["status"] == "ok", out.get("error")
    assert len(seen) == 4  # two tracked steps and two timed ones
    assert all(ids is seen[0] for ids in seen) and tuple(seen[0].shape) == (2, 64)
    assert training_fields(out["settings"])["batch_shapes"] == RUN_BATCH_SHAPES == "fixed"


def test_an_inference_run_prefills_equal_length_prompts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Inference has no batch_shapes field: the prompts are one [concurrency, prompt_tokens] tensor (no padding),
    the same every pass, which is what the inference workload's ``concurrency`` sequences of ``context`` describe."""
    out, seen = _run_worker(monkeypatch, "inference", "inference_pass", context=96, concurrency=3, output_tokens=4)
    assert out["status"] == "ok", out.get("error")
    assert len(seen) == 3 and all(ids is seen[0] for ids in seen) and tuple(seen[0].shape) == (3, 92)


def test_compare_estimates_the_recorded_runs_with_fixed_shapes() -> None:
    """Every recorded training run of validation/measured is estimated with batch_shapes 'fixed'; under a metric that
    reads it (nvidia-smi: the reserve of eq. R1, estimate/allocator.py) the estimate records it as given."""
    from llmsizer.estimate.training import estimate_training

    records = [json.loads(line) for f in sorted((ROOT / "validation" / "measured").glob("*.jsonl"))
               for line in f.read_text(encoding="utf-8").splitlines() if line.strip()]
    training = [r for r in records if r["settings"]["kind"] == "training" and r.get("status") == "ok"]
    assert len(training) >= 10
    for r in training:
        s = r["settings"]
        assert training_fields(s)["batch_shapes"] == "fixed"
        assert training_estimate(spec_of(r), s)[0] is not None
    r = next(r for r in training if r["settings"]["device"] == "cuda")
    est = estimate_training(spec_of(r), **training_fields(r["settings"]), metric="nvidia-smi")
    shapes = next(a for a in est.assumptions if a.name == "batch_shapes")
    assert shapes.value == "fixed" and not shapes.default
