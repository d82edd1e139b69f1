"""review8 #9: ``_fewest_devices`` (estimate/fit.py, the ``count`` alternative of ``fit --train``) finds the smallest
fitting count up to ``FEWEST_DEVICES_MAX`` from any start. Before, the doubling gave up as soon as its next try
passed 1024, so a caller at 600 devices was told of no count even when 700 fits. No catalog model shows it, so the
need here is synthetic: a monotone one that fits from a threshold on, against the brute-force smallest count."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from llmsizer.estimate import fit as fit_mod


def _search(monkeypatch: pytest.MonkeyPatch, start: int, threshold: int, step: int = 1) -> int | None:
    inst = SimpleNamespace(device_count=step) if step > 1 else None
    monkeypatch.setattr(fit_mod, "_training_placement", lambda *a, **k: SimpleNamespace(n=start, instance=inst))
    tried: list[int] = []

    def need(spec, hardware, devices, fields, headroom, memory, files):  # fits from ``threshold`` devices on
        tried.append(devices)
        return devices >= threshold, 100 * threshold // devices, 100, {}
    monkeypatch.setattr(fit_mod, "_training_step_need", need)
    out = fit_mod._fewest_devices(None, "gpu", start, {}, None, None, ())  # type: ignore[arg-type]
    assert all(d <= fit_mod.FEWEST_DEVICES_MAX for d in tried)
    return None if out is None else out["changes"]["count"]


def _smallest(start: int, threshold: int, step: int = 1) -> int | None:
    """Brute force: the smallest whole-instance count above the start, at most the bound, that fits."""
    return next((k * step for k in range(start // step + 1, fit_mod.FEWEST_DEVICES_MAX // step + 1)
                 if k * step >= threshold), None)


@pytest.mark.parametrize("start, threshold", [(600, 700), (600, 1024), (600, 1025), (513, 1000), (1, 1000),
                                              (1, 3), (300, 301), (1024, 1025), (2, 2000)])
def test_the_smallest_fitting_count_up_to_the_bound(monkeypatch, start, threshold) -> None:
    assert _search(monkeypatch, start, threshold) == _smallest(start, threshold)  # (600, 700): None before


@pytest.mark.parametrize("start, threshold", [(512, 1000), (8, 1020), (600, 900)])
def test_whole_instances_of_eight(monkeypatch, start, threshold) -> None:
    assert _search(monkeypatch, start, threshold, step=8) == _smallest(start, threshold, step=8)
