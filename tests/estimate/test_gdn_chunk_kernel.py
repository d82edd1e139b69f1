"""efficiency.GDN_CHUNK_CALL_SECONDS / GDN_CHUNK_STEP_SECONDS (formulas/speed.py eq. 17) re-derived from their
calibration rows, vLLM PR #38981's published B200 times of chunk_gated_delta_rule_fwd (validation/
gdn_chunk_kernel_times.csv GK01-GK03), the held-out rows checked against the fit, and where the term applies: a
serving engine's prefill of a Gated DeltaNet model on a GPU, not llama.cpp's nor a model without those layers."""

from __future__ import annotations

import csv
import math

import pytest

from llmsizer.catalog.models import find
from llmsizer.estimate import efficiency as E
from llmsizer.estimate.speed import estimate_speed
from llmsizer.formulas.speed import chunked_scan_seconds
from llmsizer.validation_cases import data_dir

CALIBRATION = ("GK01", "GK02", "GK03")


def _rows() -> dict[str, dict[str, str]]:
    with (data_dir() / "gdn_chunk_kernel_times.csv").open(newline="") as f:
        return {r["id"]: r for r in csv.DictReader(f)}


def _longest_chunks(seqlens: str) -> int:
    """Chunks of the longest sequence of a row's 'seqlens' (2048, 1024x8, 6144+2048)."""
    if "x" in seqlens:
        return math.ceil(int(seqlens.split("x")[0]) / E.GDN_CHUNK_TOKENS)
    return max(math.ceil(int(p) / E.GDN_CHUNK_TOKENS) for p in seqlens.split("+"))


def test_rows_quote_their_figure_and_source() -> None:
    rows = _rows()
    assert len(rows) == 10
    for rid, r in rows.items():
        assert r["kernel_ms"] in r["quote"] and "vllm-project/vllm/pull/38981" in r["source"], rid
        assert r["device"] == "b200" and r["head_dim"] == "128", rid


def test_the_constants_are_re_derived_from_the_calibration_rows() -> None:
    """Least squares of t = t_g + t_ch n over the three one-sequence rows at 8 value heads per GPU, to the constants'
    stated digits; each calibration row reproduced within 1 %."""
    rows = _rows()
    xs = [_longest_chunks(rows[i]["seqlens"]) for i in CALIBRATION]
    ys = [float(rows[i]["kernel_ms"]) * 1e-3 for i in CALIBRATION]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)
    call = my - slope * mx
    assert abs(call - E.GDN_CHUNK_CALL_SECONDS.expected) < 0.05e-6, call
    assert abs(slope - E.GDN_CHUNK_STEP_SECONDS.expected) < 0.0005e-6, slope
    for x, y in zip(xs, ys, strict=True):
        fit = chunked_scan_seconds(1, x * E.GDN_CHUNK_TOKENS, E.GDN_CHUNK_TOKENS, E.GDN_CHUNK_CALL_SECONDS.expected,
                                   E.GDN_CHUNK_STEP_SECONDS.expected)
        assert abs(fit / y - 1) < 0.01, (x, fit, y)


def test_the_held_out_rows_lie_within_twenty_percent_above_the_fit() -> None:
    """Independent rows of the same table: several sequences in one call (their chunks walked side by side, the
    longest sets the time) and twice the heads per GPU (GK10). The fit is within 20 % of each and never above it (it
    has no term for the extra sequences' or heads' parallel work)."""
    rows = _rows()
    held = [r for rid, r in rows.items() if rid not in CALIBRATION]
    assert len(held) == 7
    for r in held:
        fit = E.GDN_CHUNK_CALL_SECONDS.expected + E.GDN_CHUNK_STEP_SECONDS.expected * _longest_chunks(r["seqlens"])
        measured = float(r["kernel_ms"]) * 1e-3
        assert -0.20 < fit / measured - 1 < 0.01, (r["id"], fit, measured)


def test_eq_17_counts_the_chunks_of_the_prompt() -> None:
    assert chunked_scan_seconds(45, 8192, 64, 130.5e-6, 1.984e-6) == pytest.approx(45 * (130.5e-6 + 128 * 1.984e-6))
    assert chunked_scan_seconds(2, 65, 64, 1.0, 0.5) == pytest.approx(2 * (1.0 + 2 * 0.5))
    assert chunked_scan_seconds(0, 8192, 64, 1.0, 1.0) == 0.0


def _speed(model: str, engine: str, weights: str = "bf16") -> object:
    spec = find(model).spec()
    return estimate_speed(spec, "b200", count=8, prompt_tokens=8192, output_tokens=16, concurrency=1,
                          engine=engine, weights_format=weights)


def test_a_serving_engine_adds_the_scan_to_a_gated_deltanet_prefill_only() -> None:
    """Qwen3.5-397B-A17B on 8 x B200 under vLLM: the prefill's fixed part holds the 45 Gated DeltaNet layers' scans of
    128 chunks, and the assumption names it; a model without those layers (Qwen3-235B-A22B) has none."""
    sp = _speed("qwen3.5-397b-a17b", "vllm")
    calls, chunks = 45 * E.GDN_CHUNK_CALL_SECONDS.expected, 45 * 128 * E.GDN_CHUNK_STEP_SECONDS.expected
    # the calls once per forward (the fixed part), the chunks per prompt (beside the attention, scaled by eq. P1)
    assert sp.prefill is not None and sp.prefill.overhead_seconds == pytest.approx(calls)
    assert sp.prefill.attention_seconds == pytest.approx(chunks)
    assert any(a.name == "gdn_chunk_scan" for a in sp.assumptions)
    assert any("Gated DeltaNet decode" in w for w in sp.warnings)
    other = _speed("qwen3-235b-a22b", "vllm")
    assert other.prefill is not None and other.prefill.overhead_seconds == 0.0
    assert not any(a.name == "gdn_chunk_scan" for a in other.assumptions)
