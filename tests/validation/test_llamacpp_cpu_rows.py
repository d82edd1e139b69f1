"""llama.cpp on a CPU backend: the XC rows of validation/llamacpp_bench.csv (published llama-bench tables, mainline
llama.cpp with -ngl 0, on a Ryzen-7950X, an M2-Max's CPU and a Ryzen-5975WX; ikawrakow/ik_llama.cpp README @ 28fb349
and its PR #54).

The rows are reported by `llmsizer validate` but kept out of the summary and of every band ('settings assumed'): the
sources state neither the DIMMs nor the channels populated, nor run every core, and the rows' decode shares of the
catalog bandwidth straddle the CPU bandwidth factor (the last test), so a CPU band fitted on them would absorb
machine differences the estimate does not model (notes/cpurows_report.md)."""

from __future__ import annotations

import re

from llmsizer.catalog.hardware import builtin_catalog
from llmsizer.estimate.efficiency import DECODE_BANDWIDTH_CPU
from llmsizer.estimate.ranges import llamacpp_band
from llmsizer.validation_cases import (
    ASSUMED,
    DECODE,
    PREFILL,
    band_rows,
    llamacpp_bench_rows,
    public_cases,
    row_backend,
)

GIB = 1024**3


def _xc_rows() -> list:
    return [r for r in llamacpp_bench_rows() if r.id.startswith("XC")]


def test_each_cpu_row_is_its_quoted_table_line_on_a_catalog_cpu() -> None:
    """Every XC value is written in its quote (the table line, read from the source at the commit its row names),
    and every device is a catalog CPU that llama.cpp drives with its CPU backend."""
    rows = _xc_rows()
    cases = {c.id: c for c in public_cases()[0]}  # as `llmsizer validate` has them (each with its CSV's device)
    assert len(rows) >= 10 and len({r.device for r in rows}) >= 3
    assert {r.test for r in rows} == {"pp512", "tg128"}
    for r in rows:
        quote = next(q["quote"] for q in _csv() if q["id"] == r.id)
        assert f"{r.value:.2f}" in quote, (r.id, r.value, quote)
        assert builtin_catalog().devices[r.device].kind == "cpu"
        assert row_backend(cases[r.id]) == "cpu"
        assert cases[r.id].excluded == ASSUMED


def test_cpu_rows_feed_no_band_so_a_cpu_estimate_keeps_the_engine_wide_band() -> None:
    """Kept out of every band, the XC rows leave the engine-wide llama.cpp bands as they were, and llama.cpp on a CPU
    has no band of its own (llamacpp_band falls back, naming why)."""
    fed = {c.id for rows in band_rows(public_cases()[0]).values() for c in rows}
    assert not any(i.startswith("XC") for i in fed)
    for kind in (PREFILL, DECODE):
        band, why = llamacpp_band(kind, "cpu")
        assert band is not None and "on CPU has no band of its own" in why


def test_decode_shares_of_the_catalog_bandwidth_straddle_the_cpu_factor() -> None:
    """Bytes streamed per second in a tg128 row, weights size (GiB, quoted) x tokens/s, over the catalog device's
    bandwidth: the Ryzen-7950X's F16 row streams 0.81 of dual-channel DDR5-5200 (its machine is faster than the rated
    speed), the M2-Max's CPU 0.26-0.31 of the SoC's 400 GB/s (its CPU cores reach a part of it, as AnandTech measured
    on the M1 Max). No share of a datasheet bandwidth holds both: above DECODE_BANDWIDTH_CPU's high end on one
    machine, below its low end on the other -- a bandwidth mechanism error, not a constant to refit."""
    cat = builtin_catalog()
    shares: dict[str, list[float]] = {}
    for q in _csv():
        if not q["id"].startswith("XC") or not q["test"].startswith("tg") or "GiB" not in q["quote"]:
            continue
        size = float(re.search(r"([\d.]+) GiB", q["quote"]).group(1)) * GIB  # type: ignore[union-attr]
        bw = cat.devices[q["device"]].memory_bandwidth
        assert bw is not None
        shares.setdefault(q["device"], []).append(size * float(q["value"]) / bw.base)
    assert max(shares["amd-ryzen-9-7950x"]) > DECODE_BANDWIDTH_CPU.high
    assert max(shares["apple-m2-max-cpu"]) < DECODE_BANDWIDTH_CPU.low


def _csv() -> list[dict[str, str]]:
    import csv
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "validation" / "llamacpp_bench.csv"
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))
