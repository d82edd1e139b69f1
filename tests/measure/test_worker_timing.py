"""What the worker times (measure/worker.py module docstring): after CUDA's emptied allocator cache one untimed
warm-up pass or step, then the timed ones; training records every timed step, its host share and its phases' host
times. Run for real in-process on the CPU (the tiny model of conftest.py); the CUDA branch, where the tracked pass's
cache is emptied, is entered by making ``_untraced_peaks_from_here`` report that it emptied it."""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import TINY


def _run(monkeypatch: pytest.MonkeyPatch, kind: str, step_name: str, emptied: bool, **settings: Any):
    pytest.importorskip("transformers")
    from llmsizer.measure import MeasureSettings, worker, workloads

    calls: list[dict[str, Any]] = []
    real = getattr(workloads, step_name)

    def spy(*args: Any, **kw: Any) -> Any:
        marks = args[7] if len(args) > 7 else kw.get("marks")
        calls.append({"timed_marks": marks is not None})
        return real(*args, **kw)

    monkeypatch.setattr(workloads, step_name, spy)
    if emptied:
        monkeypatch.setattr(worker, "_untraced_peaks_from_here", lambda device, s, m: True)
    s = MeasureSettings(kind, "tiny", device="cpu", threads=1, steps=2, **settings)
    job = {"settings": s.to_dict(), "model": {"name": "tiny", "source": "test", "config": TINY, "checkpoint": None}}
    out = worker.run(job)
    assert out["status"] == "ok", out.get("error")
    return out, calls


@pytest.mark.parametrize("emptied", [False, True])
def test_training_times_its_steps_after_a_warm_up_where_the_cache_was_emptied(monkeypatch: pytest.MonkeyPatch,
                                                                               emptied: bool) -> None:
    out, calls = _run(monkeypatch, "training", "training_step", emptied, method="full", micro_batch=1, seq_len=32,
                      optimizer="adamw", optimizer_impl="for-loop")
    t = out["timing"]
    # two tracked steps, the warm-up step where the cache was emptied, two timed steps
    assert len(calls) == (5 if emptied else 4)
    assert [c["timed_marks"] for c in calls] == [False] * (len(calls) - 2) + [True, True]
    assert t.get("warmup_steps") == (1 if emptied else None)
    each = t["step_seconds_each"]
    assert len(each) == 2 and t["step_seconds"] == pytest.approx(sum(each) / 2)
    phases = t["host_phase_seconds"]
    assert set(phases) == {"forward", "backward", "optimizer"} and all(v > 0 for v in phases.values())
    # the host's share ends before the synchronisation; its phases lie inside it
    assert sum(phases.values()) <= t["host_seconds"] * 1.0001 and t["host_seconds"] <= max(each)


@pytest.mark.parametrize("emptied", [False, True])
def test_inference_runs_one_untimed_pass_where_the_cache_was_emptied(monkeypatch: pytest.MonkeyPatch,
                                                                     emptied: bool) -> None:
    out, calls = _run(monkeypatch, "inference", "inference_pass", emptied, context=48, output_tokens=2)
    assert len(calls) == 1 + (1 if emptied else 0) + 2  # tracked, warm-up, two timed passes
    assert out["timing"].get("warmup_passes") == (1 if emptied else None)
