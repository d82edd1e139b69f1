"""Identical sequences in llama.cpp's batched decode (formulas/speed.py eq. 11): the two fitted constants of
estimate/efficiency.py (LLAMACPP_IDENTICAL_ROUTINGS_SCALE / _EXPONENT) re-derived from their named rows through the
real composition, and the two simple readings of llama-batched-bench's workload that the published rows refute.

llama-batched-bench feeds token 0 to every sequence at the same positions (tools/batched-bench/batched-bench.cpp
L127-131 and L154-159 @0a1f017). Truth here is the published S_TG of ggml-org/llama.cpp benches/dgx-spark.md
@4c7e989 (build 6918): validation/llamacpp_batched_bench.csv and PM0104 of validation/public_measurements.csv.
The solve: for each calibration row, the routings r (eq. 11 with exponent 0 and scale r reads exactly r routings)
that make eq. (10) give the measured rate, by bisection (the rate falls as r grows); then least squares of log r
on log b gives c and alpha.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from llmsizer.catalog.hardware import builtin_catalog
from llmsizer.catalog.models import find
from llmsizer.estimate import efficiency as E
from llmsizer.estimate.speed import estimate_speed
from llmsizer.validation_cases import ROUTINGS_CALIBRATION, _read_csv, data_dir, public_rows

MOE = ("gpt-oss-20b", "gpt-oss-120b", "qwen3-30b-a3b")


def _rows() -> list[dict[str, Any]]:
    """The MoE llama-batched-bench rows at b >= 2: id, model, format, prompt, generated, b, measured tokens/s."""
    out = [dict(id=r["id"], model=r["catalog_model"], fmt=r["weights"], prompt=int(r["prompt"]),
                gen=int(r["generated"]), b=int(r["sequences"]), value=float(r["value"]))
           for r in _read_csv(str(data_dir() / "llamacpp_batched_bench.csv"))
           if r["catalog_model"] in MOE and int(r["sequences"]) > 1]
    pm = public_rows()["PM0104"]  # gpt-oss-120b, PP 512, TG 32, B 32 (same table)
    assert pm["batch_size"] == "32" and pm["model"] == "gpt-oss-120b"
    out.append(dict(id="PM0104", model="gpt-oss-120b", fmt="gguf:mxfp4_moe", prompt=512, gen=32, b=32,
                    value=float(pm["value"])))
    return out


@contextmanager
def _routings(scale: float, exponent: float) -> Iterator[None]:
    saved = E.LLAMACPP_IDENTICAL_ROUTINGS_SCALE, E.LLAMACPP_IDENTICAL_ROUTINGS_EXPONENT
    E.LLAMACPP_IDENTICAL_ROUTINGS_SCALE = dataclasses.replace(saved[0], expected=scale)
    E.LLAMACPP_IDENTICAL_ROUTINGS_EXPONENT = dataclasses.replace(saved[1], expected=exponent)
    try:
        yield
    finally:
        E.LLAMACPP_IDENTICAL_ROUTINGS_SCALE, E.LLAMACPP_IDENTICAL_ROUTINGS_EXPONENT = saved


def _rate(row: dict[str, Any], identical: bool = True) -> float:
    s = estimate_speed(find(row["model"]).spec(), builtin_catalog().devices["dgx-spark"], weights_format=row["fmt"],
                       prompt_tokens=row["prompt"], output_tokens=row["gen"], concurrency=row["b"], kv_dtype="fp16",
                       identical_sequences=identical, ubatch=2048, kv_unified=False)
    assert s.tokens_per_second is not None
    return s.tokens_per_second


def _implied_routings(row: dict[str, Any]) -> float:
    lo, hi = 0.5, 512.0
    for _ in range(50):
        mid = math.sqrt(lo * hi)
        with _routings(mid, 0.0):
            fast = _rate(row) > row["value"]
        lo, hi = (mid, hi) if fast else (lo, mid)
    return math.sqrt(lo * hi)


def solve() -> tuple[float, float]:
    cal = [r for r in _rows() if r["id"] in ROUTINGS_CALIBRATION]
    xs = [math.log(r["b"]) for r in cal]
    ys = [math.log(_implied_routings(r)) for r in cal]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    alpha = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)
    return math.exp(my - alpha * mx), alpha


def test_calibration_rows_are_the_named_ones() -> None:
    """The fit uses the gpt-oss-120b rows at b >= 4 and nothing else (the other models and b = 2 are held out)."""
    ids = {r["id"] for r in _rows() if r["model"] == "gpt-oss-120b" and r["b"] >= 4}
    assert ids == ROUTINGS_CALIBRATION and len(ids) == 12


def test_routing_constants_follow_from_their_rows() -> None:
    scale, exponent = solve()
    assert E.LLAMACPP_IDENTICAL_ROUTINGS_SCALE.expected == pytest.approx(round(scale, 2), abs=1e-9)
    assert E.LLAMACPP_IDENTICAL_ROUTINGS_EXPONENT.expected == pytest.approx(round(exponent, 2), abs=1e-9)


def test_one_routing_for_identical_tokens_is_refuted() -> None:
    """If identical tokens kept identical routing, a step would read k experts whatever b: every gpt-oss-120b row
    would be predicted more than 1.5x the measured rate (the step grows 5.8x from b = 1 to 32 after a 0.5k prompt)."""
    rows = [r for r in _rows() if r["model"] == "gpt-oss-120b"]
    with _routings(1.0, 0.0):
        ratios = [_rate(r) / r["value"] for r in rows]
    assert min(ratios) > 1.5, ratios


def test_independent_routings_are_too_slow_at_many_sequences() -> None:
    """b independent routings (eq. 5) read more experts than the measured 128-expert steps can have read at the
    bandwidth: gpt-oss-120b at b = 16-32 after a 0.5k-4k prompt is predicted below 0.8x the measured rate."""
    rows = [r for r in _rows() if r["model"] == "gpt-oss-120b" and r["b"] >= 16 and r["prompt"] <= 4096]
    assert len(rows) == 4
    with _routings(1.0, 1.0):
        ratios = [_rate(r) / r["value"] for r in rows]
    assert max(ratios) < 0.8, ratios


def test_held_out_rows() -> None:
    """The rows outside the fit (Qwen3-30B-A3B, gpt-oss-20b, every b = 2 row): median |error| under 3 %, none
    beyond 7 % (before eq. 11: median 9.1 %, b = 2 rows +22 to +31 %). Before the flash-attention K/V stream share
    (efficiency.LLAMACPP_FA_STREAM_SHARE) the worst was gpt-oss-20b after 8k tokens at b = 32, +16.7 %: the K/V
    stream, which grows with b and the depth; now +6.5 %."""
    errs = [abs(_rate(r) / r["value"] - 1) for r in _rows() if r["id"] not in ROUTINGS_CALIBRATION]
    assert len(errs) == 32  # 9 at b = 2, 23 at b = 4-32 (PM0103, gpt-oss-20b b = 32, is in test_public_speed)
    assert statistics.median(errs) < 0.03 and max(errs) < 0.07, sorted(errs)


def test_distinct_sequences_keep_b_routings() -> None:
    """A real server's sequences carry distinct prompts: the step reads the experts of b routings (eq. 5), more
    than eq. (11)'s for the same b, so it is slower; one sequence reads one routing either way."""
    row = dict(model="gpt-oss-120b", fmt="gguf:mxfp4_moe", prompt=512, gen=32, b=16, value=0.0)
    assert _rate(row, identical=False) < _rate(row, identical=True)
    one = dict(row, b=1)
    assert _rate(one, identical=False) == pytest.approx(_rate(one, identical=True))
