"""Eq. (17) (formulas/speed.py; efficiency.GDN_CHUNK_*) past the value heads per GPU its rows cover: fitted at 8
(GK01-GK03), checked on the held-out GK10 at 16 (validation/gdn_chunk_kernel_times.csv); past 16 the assumption says
the time is an extrapolation of a fit with no head term."""

from __future__ import annotations

import csv

from llmsizer.catalog.models import find
from llmsizer.estimate import efficiency as E
from llmsizer.estimate.speed import estimate_speed
from llmsizer.validation_cases import data_dir


def test_head_limits_are_the_rows_heads():
    with (data_dir() / "gdn_chunk_kernel_times.csv").open(newline="") as f:
        rows = {r["id"]: int(r["value_heads"]) for r in csv.DictReader(f)}
    assert {rows[k] for k in ("GK01", "GK02", "GK03")} == {E.GDN_CHUNK_FIT_HEADS}
    assert rows["GK10"] == E.GDN_CHUNK_HEADS_CHECKED == max(rows.values())


def _scan_why(count: int) -> str:
    spec = find("qwen3.5-27b").spec()
    sp = estimate_speed(spec, "h100-sxm", count=count, prompt_tokens=8192, output_tokens=16, concurrency=1,
                        engine="vllm", weights_format="bf16")
    return next(a.why for a in sp.assumptions if a.name == "gdn_chunk_scan")


def test_past_sixteen_heads_per_gpu_is_stated():
    heads = find("qwen3.5-27b").spec().recurrent.num_heads  # type: ignore[union-attr]
    assert heads > E.GDN_CHUNK_HEADS_CHECKED  # 48 value heads: TP 1 is past the check, TP 4 within it
    assert f"here {heads} per GPU (past the {E.GDN_CHUNK_HEADS_CHECKED}" in _scan_why(1)
    assert "past the" not in _scan_why(4)
