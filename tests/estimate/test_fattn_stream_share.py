"""The share of the weight stream's rate that llama.cpp's CUDA flash-attention kernels reach on a batched step's K/V
cells (efficiency.LLAMACPP_FA_STREAM_SHARE, formulas/flash_attention.py eq. F1): the constant re-derived from its
named rows through the real composition, and the held-out rows it must improve.

The fit reads only the growth of a step with the prompt depth at a fixed number of sequences: the weights, the MoE
routings of eq. (11) and the per-step constants (L tau, L tau_g) are the same at every depth, so the slope of the
measured step time on eq. F1's K/V seconds (at share 1) is 1 / share. Truth: the published S_TG of
ggml-org/llama.cpp benches/dgx-spark.md @4c7e989 (build 6918), validation/llamacpp_batched_bench.csv.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from llmsizer.catalog.hardware import builtin_catalog
from llmsizer.catalog.models import find
from llmsizer.estimate import efficiency as E
from llmsizer.estimate.speed import estimate_speed
from llmsizer.validation_cases import FA_STREAM_CALIBRATION, _read_csv, data_dir, llamacpp_batched_cases


def _rows() -> list[dict[str, Any]]:
    return [dict(id=r["id"], model=r["catalog_model"], fmt=r["weights"], prompt=int(r["prompt"]),
                 gen=int(r["generated"]), b=int(r["sequences"]), value=float(r["value"]))
            for r in _read_csv(str(data_dir() / "llamacpp_batched_bench.csv"))]


@contextmanager
def _share(value: float) -> Iterator[None]:
    saved = E.LLAMACPP_FA_STREAM_SHARE
    E.LLAMACPP_FA_STREAM_SHARE = dataclasses.replace(saved, expected=value)
    try:
        yield
    finally:
        E.LLAMACPP_FA_STREAM_SHARE = saved


def _estimate(row: dict[str, Any]) -> Any:
    return estimate_speed(find(row["model"]).spec(), builtin_catalog().devices["dgx-spark"], weights_format=row["fmt"],
                          prompt_tokens=row["prompt"], output_tokens=row["gen"], concurrency=row["b"],
                          kv_dtype="fp16", identical_sequences=True, ubatch=2048, kv_unified=False)


def _step(row: dict[str, Any]) -> float:
    s = _estimate(row)
    assert s.decode is not None
    return float(s.decode.seconds)


def kv_seconds(row: dict[str, Any]) -> float:
    """Eq. F1's K/V seconds of the row's step at share 1: t(share 1/2) - t(share 1) = KV / (B e_m)."""
    with _share(0.5):
        half = _step(row)
    with _share(1.0):
        whole = _step(row)
    return half - whole


def _slope(points: list[list[tuple[float, float]]]) -> float:
    """Least squares of y on x with one intercept per group and one common slope."""
    num = den = 0.0
    for group in points:
        mx = statistics.fmean(x for x, _ in group)
        my = statistics.fmean(y for _, y in group)
        num += sum((x - mx) * (y - my) for x, y in group)
        den += sum((x - mx) ** 2 for x, _ in group)
    return num / den


def groups(ids: set[str]) -> list[list[tuple[float, float]]]:
    """(K/V seconds at share 1, measured step seconds) of the named rows, one group per model and b."""
    by: dict[tuple[str, int], list[tuple[float, float]]] = {}
    for r in _rows():
        if r["id"] in ids:
            by.setdefault((r["model"], r["b"]), []).append((kv_seconds(r), r["b"] / r["value"]))
    return list(by.values())


def solve() -> tuple[float, list[float]]:
    """The fitted share and each group's own share (the range)."""
    g = groups(FA_STREAM_CALIBRATION)
    return 1.0 / _slope(g), [1.0 / _slope([one]) for one in g]


def test_calibration_rows_are_the_dense_two_sequence_rows() -> None:
    ids = {r["id"] for r in _rows() if r["model"] in ("qwen2.5-7b", "gemma-3-4b-it") and r["b"] == 2}
    assert ids == FA_STREAM_CALIBRATION and len(ids) == 6
    assert all(len(g) == 3 for g in groups(ids))  # prompts 512, 4096, 8192 of each model


def test_share_follows_from_its_rows() -> None:
    share, each = solve()
    f = E.LLAMACPP_FA_STREAM_SHARE
    assert f.expected == pytest.approx(round(share, 2), abs=1e-9)
    assert f.low == pytest.approx(round(min(each), 2), abs=1e-9)
    assert f.high == pytest.approx(round(max(each), 2), abs=1e-9)
    assert 0 < f.low <= f.expected <= f.high <= 1


def test_held_out_depth_slopes_agree() -> None:
    """Every held-out (model, b) group of rows over the three prompts (four models, b = 4-16, and the MoE b = 2
    rows): its own slope implies a share within 0.55-1.0 (gpt-oss lowest), and the median within 0.1 of the fit."""
    held = {r["id"] for r in _rows() if r["b"] >= 2 and r["id"] not in FA_STREAM_CALIBRATION}
    shares = [1.0 / _slope([g]) for g in groups(held) if len(g) == 3]
    assert len(shares) >= 12
    assert min(shares) > 0.55 and max(shares) <= 1.0, sorted(shares)
    assert abs(statistics.median(shares) - E.LLAMACPP_FA_STREAM_SHARE.expected) < 0.1, sorted(shares)


def test_single_sequence_steps_do_not_use_it() -> None:
    """b = 1 keeps eq. (7) with its calibrated constants (the vector kernel at b = 1 is s8decode's eq. 7)."""
    row = dict(model="gemma-3-4b-it", fmt="gguf:q4_0", prompt=8192, gen=32, b=1)
    with _share(0.5):
        a = _step(row)
    with _share(1.0):
        b = _step(row)
    assert a == pytest.approx(b, rel=1e-12)


def test_held_out_batched_rows_improve() -> None:
    """The held-out llama-batched-bench rows at b >= 2 (all but the calibration rows of this share, of the graphs-off
    time and of the routings): the median |error| falls with the share in place."""
    cases = [c for c in llamacpp_batched_cases() if not c.excluded and c.kind == "batched decode throughput"]
    with_share = statistics.median(abs(c.error) for c in cases if c.error is not None)
    with _share(1.0):
        ids = {c.id for c in cases}
        without = statistics.median(abs(c.error) for c in llamacpp_batched_cases()
                                    if c.id in ids and c.error is not None)
    assert with_share < without, (with_share, without)
