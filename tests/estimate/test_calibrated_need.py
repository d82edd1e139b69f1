"""The calibrated range of a memory need (estimate/allocator.py ``calibrated_need``, eq. C1): live tensors x the band,
plus the other items' own low..high, judged against the measured device totals and process RSS of llmsizer's own
runs (validation/measured/*.jsonl), by the same function ``validate`` and the CLI use."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from llmsizer.estimate import allocator as A
from llmsizer.estimate import ranges as R
from llmsizer.estimate.allocator import calibrated_need
from llmsizer.measure.compare import inference_estimate, rows_of, spec_of, training_estimate
from llmsizer.measure.store import read_jsonl
from llmsizer.result import Item
from llmsizer.units import MiB
from llmsizer.validation_cases import measured_cases

ROOT = Path(__file__).resolve().parents[2]
H200 = ROOT / "validation/measured/gpu-h200-2026-12-04.jsonl"
CPU = ROOT / "validation/measured/cpu-amd-epyc-2vcpu-2026-11-29.jsonl"


def _records(path: Path) -> list[dict]:
    return [r for r in map(json.loads, path.read_text(encoding="utf-8").splitlines()) if r.get("status") == "ok"]


def test_composition_is_tensors_times_band_plus_the_other_items_own_span() -> None:
    b = R.band_for(R.INFERENCE_MEMORY, R.TRANSFORMERS)
    assert b is not None
    items = [Item("weights", 1000 * MiB, "device"), Item("activations", 100 * MiB, "device", 90 * MiB, 120 * MiB),
             Item("cuda_context", 688 * MiB, "device", 250 * MiB, 1024 * MiB),
             Item("allocator_reserve", 10 * MiB, "device", 1 * MiB, 30 * MiB),
             Item("host_runtime", 250 * MiB, "host", 200 * MiB, 500 * MiB)]
    c = calibrated_need(items, R.INFERENCE_MEMORY, R.TRANSFORMERS)
    assert c is not None
    t = 1100 * MiB  # the tensors' expected bytes: the band is measured / predicted of that figure
    assert c["low"] == int(t * b.low) + 251 * MiB
    assert c["high"] == int(t * b.high) + 1054 * MiB
    # a CPU run: everything on the host, the process's runtime is the non-tensor part
    host = [Item(i.name, i.bytes, "host", i.low, i.high) for i in items if i.name not in ("cuda_context",
                                                                                         "allocator_reserve")]
    h = calibrated_need(host, R.INFERENCE_MEMORY, R.TRANSFORMERS, "host")
    assert h is not None and (h["low"], h["high"]) == (int(t * b.low) + 200 * MiB, int(t * b.high) + 500 * MiB)
    # with no non-tensor item (metric 'allocated') it is the band over the tensors alone
    lo, hi = R.calibrated_range(R.INFERENCE_MEMORY, R.TRANSFORMERS, float(t))  # type: ignore[misc]
    a = calibrated_need(items[:2], R.INFERENCE_MEMORY, R.TRANSFORMERS)
    assert a is not None and abs(a["low"] - lo) <= 1 and abs(a["high"] - hi) <= 1
    assert calibrated_need(items, R.INFERENCE_MEMORY, "no such engine") is None


def _device_total_inside(r: dict) -> tuple[bool, int, dict]:
    s = r["settings"]
    est = inference_estimate(spec_of(r), s) if s["kind"] == "inference" else training_estimate(spec_of(r), s)[0]
    assert est is not None
    c = est.details["calibrated_range"]
    m = r["measured"]["device_peak_bytes"]
    return c["low"] <= m <= c["high"], m, c


def _h200_records() -> list[tuple[str, dict]]:
    """(allocator_pairs.csv id of the line, record): line N of the measured file is GP N."""
    lines = H200.read_text(encoding="utf-8").splitlines()
    return [(f"GP{n:02d}", r) for n, r in enumerate(map(json.loads, lines), 1) if r.get("status") == "ok"]


def test_printed_range_covers_the_non_calibration_device_totals() -> None:
    """The range every GPU estimate prints (details['calibrated_range'], text 'calibrated range: A - B') against the
    NVML device total of each H200 run that did not calibrate allocator.RESERVE (the ratio's rows span its low..high,
    so their own totals are inside by construction: judged by leave-one-out below). 13 runs: GP01 (inference) and
    the 12 training runs; the misses are checkpointed training runs whose reserve the training default does not
    expect (allocator.RESERVE's comment): 3 of them, above the range."""
    calibration = set(A.RESERVE[A.INFERENCE].rows) | set(A.RESERVE[A.TRAINING].rows)
    judged = [(gp, r) for gp, r in _h200_records() if gp not in calibration]
    assert len(judged) == 13
    outside = []
    for gp, r in judged:
        ok, m, c = _device_total_inside(r)
        if not ok:
            outside.append((gp, r["settings"]["kind"], r["settings"].get("grad_checkpointing"), m, c))
    assert all(k == "training" and ck == "full" for _, k, ck, _, _ in outside), outside
    assert len(outside) <= 3, outside
    # the misses are above the range, never below: the range does not overshoot the low side
    assert all(m > c["high"] for *_, m, c in outside)


def test_reserve_rows_device_totals_leave_one_out(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each inference run that calibrated RESERVE[inference] judged by the ratio derived from the other rows
    (allocator.derive over allocator_pairs.csv without it): the evidence its own coverage cannot give."""
    pairs = {p["id"]: p for p in csv.DictReader(open(ROOT / A.PAIRS_FILE, newline="", encoding="utf-8"))}
    ratio = A.RESERVE[A.INFERENCE]
    judged = [(gp, r) for gp, r in _h200_records() if gp in ratio.rows]
    assert len(judged) == len(ratio.rows) == 10
    inside = 0
    for gp, r in judged:
        others = tuple(x for x in ratio.rows if x != gp)
        lo, mid, hi = A.derive([A.pair_ratio(float(pairs[x]["allocated"]), float(pairs[x]["reserved"]),
                                             float(pairs[x]["persistent"])) for x in others])
        monkeypatch.setitem(A.RESERVE, A.INFERENCE, A.ReserveRatio(A.INFERENCE, lo, mid, hi, others))
        inside += _device_total_inside(r)[0]
    assert inside == 10


def test_validate_judges_whole_need_rows_by_the_printed_range() -> None:
    """One rule: measured_cases judges a device total by calibrated_need's range (row.calibrated), the same numbers a
    GPU estimate prints; a CPU run's process RSS by none, as a CPU estimate prints none (inference/compose.py)."""
    recs = [r for r in read_jsonl([H200, CPU]) if r.get("status") == "ok"]
    recs = recs[:3] + [r for r in recs if "cpu" in r["source_file"] and r["settings"]["kind"] == "inference"]
    whole = {}
    for r in recs:
        row = next(x for x in rows_of(r) if x.component in ("device total", "process RSS"))
        assert row.measured is not None
        est = inference_estimate(spec_of(r), r["settings"])
        if row.component == "device total":
            c = est.details["calibrated_range"]
            assert row.calibrated == (c["low"], c["high"])
        else:
            assert "calibrated_range" not in est.details and row.calibrated is None
        whole[f"{Path(r['source_file']).stem}:{r['source_line']}"] = row
    cases, _ = measured_cases(recs)
    judged = [c for c in cases if c.id.endswith((".device_total", ".process_rss"))]
    assert len(judged) == len(recs) == 7
    for case in judged:
        row = whole[case.id.rsplit(".", 1)[0]]
        if row.calibrated is None:
            assert case.within is None and case.tolerance == ""
        else:
            assert case.within == (row.calibrated[0] <= row.measured <= row.calibrated[1])  # type: ignore[operator]
            assert case.tolerance == "calibrated range"
