"""The eager transformers decode rule (formulas/launch_overhead.py eqs. K1, K4) against held-out published rows.

validation/transformers_speed_benchmark.csv: the transformers half of the Qwen2.5 speed benchmark page (QwenLM/Qwen2.5
docs/source/benchmark/speed_benchmark.rst @010c37c; its script examples/speed-benchmark/speed_benchmark_transformers.py
@8205ba2 reports generate_length / the time of one ``model.generate``): transformers 4.46.0 on one NVIDIA A100 80GB,
one sequence, a 1..30720-token prompt and 2048 generated tokens, BF16 Qwen2.5 0.5B-7B. No constant is fitted on them:
tau_host is efficiency.HOST_SECONDS_PER_KERNEL (PM0720, a training row on another machine).
"""

from __future__ import annotations

import csv

from llmsizer.validation_cases import DECODE, TRANSFORMERS, data_dir, engine_of, engine_speed_cases


def _rows() -> dict[str, dict[str, str]]:
    with (data_dir() / "transformers_speed_benchmark.csv").open(newline="") as f:
        return {r["id"]: r for r in csv.DictReader(f)}


def test_rows_are_expressed_with_source_and_quote() -> None:
    rows = _rows()
    cases = {c.id: c for c in engine_speed_cases() if c.id.startswith("QT")}
    assert set(cases) == set(rows) and len(rows) == 16
    for rid, c in cases.items():
        r = rows[rid]
        assert c.kind == DECODE and engine_of(c) == TRANSFORMERS and not c.excluded, rid
        assert "speed_benchmark.rst @010c37c" in r["source"] and r["value"] in r["quote"], rid
        assert f"| {r['prompt']} | BF16 | 1 |" in r["quote"] and r["counted"] == "generated", rid


def test_short_prompts_are_host_bound_and_within_fifteen_percent() -> None:
    """Up to 6144 prompt tokens the step is the launch time (K4 kernels x tau_host): the 7B (28 layers) decodes
    faster than the 3B (36 layers), as measured (40.38 vs 30.80 tokens/s at one prompt token)."""
    rows = _rows()
    cases = {c.id: c for c in engine_speed_cases() if c.id.startswith("QT")}
    short = [c for rid, c in cases.items() if int(rows[rid]["prompt"]) <= 6144]
    assert len(short) == 8
    for c in short:
        assert c.error is not None and abs(c.error) <= 0.15, (c.id, c.error)
        assert "host-bound step" in c.note, c.id
    assert cases["QT13"].predicted > cases["QT09"].predicted  # 7B faster than 3B, as measured
