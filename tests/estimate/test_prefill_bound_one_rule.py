"""A speed row's bound and its roofline label are one comparison, and an MoE prefill that llama.cpp's n_ubatch
dominates says so, naming --ubatch (probe17 F1).

`fit gpt-oss-120b --device dgx-spark --context 2048 --concurrency 1 --output-tokens 32` printed "bound compute"
beside "302.9 / 458 -> memory-bound": the time came from the MMQ-efficiency compute, the label from the peaks' ridge.
The roofline is now taken at the rates eq. (3) timed the phase with (formulas/speed.py eq. 3r), so its label is
``PhaseTime.bound``'s compute/memory comparison: checked here from the phase's own seconds, on that row and across
engines, devices and models.

Independent truth for the ubatch: llama.cpp's own DGX Spark benchmark, gpt-oss-120b MXFP4 MoE pp2048 at n_ubatch 2048
= 1,937.54 tokens/s (validation/public_measurements.csv PM0093, github.com/ggml-org/llama.cpp benches/dgx-spark.md
@4c7e9893). At the default n_ubatch 512 the same prompt is timed at under half that; the warning must name --ubatch
and its one-ubatch time must be the --ubatch run's, which lands near the published rate.
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path
from typing import Any

import pytest

from llmsizer.cli.common import json_text, resolve_model
from llmsizer.cli.fit_cmd import fit_answer
from llmsizer.cli.main import build_parser
from llmsizer.formulas.speed import roofline

CSV = Path(__file__).resolve().parents[2] / "validation" / "public_measurements.csv"


def _fit(argv: str) -> dict[str, Any]:
    words = ["fit", *argv.split()]
    args = build_parser(words).parse_args(words)
    return json.loads(json_text(fit_answer(resolve_model(args), args)[0]))


def _published(row: str) -> float:
    with CSV.open(encoding="utf-8") as f:
        (r,) = [r for r in csv.DictReader(f) if r["id"] == row]
    assert "n_ubatch 2048" in r["other_settings"] and "pp2048" in r["seq_len"]
    return float(r["value"])


def _agree(speed: dict[str, Any]) -> int:
    """Each phase whose bound is the compute/memory comparison: its roofline says the same, and that label is
    t_c >= t_m (+ the eager kernels) read from the phase's own seconds. Returns the phases checked."""
    n = 0
    for phase in ("prefill", "decode"):
        ph, rf = speed.get(phase), speed["roofline"].get(phase)
        if not ph or not rf or ph["bound"] not in ("compute", "memory"):
            continue
        by_seconds = "compute" if ph["compute_seconds"] >= ph["memory_seconds"] + ph.get("elementwise_seconds", 0) \
            else "memory"
        assert rf["bound"] == ph["bound"] == by_seconds, (phase, rf, ph)
        assert (rf["intensity_flop_per_byte"] >= rf["ridge_flop_per_byte"]) == (by_seconds == "compute")
        n += 1
    return n


PROBE = "gpt-oss-120b --device dgx-spark --context 2048 --concurrency 1 --output-tokens 32"


def test_probe17_prefill_row_says_one_bound() -> None:
    sp = _fit(PROBE)["speed"]
    assert _agree(sp) == 2
    rf = sp["roofline"]["prefill"]
    # below the peaks' ridge, right of the ridge at the MMQ rate the row is timed at
    assert rf["intensity_flop_per_byte"] < rf["peak_ridge_flop_per_byte"] and rf["bound"] == "compute"


SWEEP = [
    "llama-3.1-8b --device h100-sxm --context 8k --concurrency 16",
    "qwen2.5-7b --device l4 --weights awq-int4 --engine vllm --context 8k --concurrency 4",
    "llama-3.1-8b --device rtx-4090 --context 8k --concurrency 4",
    "qwen2.5-7b --engine transformers --device a100-sxm-80gb --context 4k --concurrency 4",
    "qwen3-30b-a3b --device rtx-4090 --context 4k --concurrency 1",
    "llama-3.1-70b-instruct --device h100-sxm --count 4 --engine vllm --context 8k --concurrency 32",
    "qwen2.5-0.5b --engine sglang --device h100-sxm --context 32k --concurrency 64",
]


@pytest.mark.parametrize("argv", SWEEP)
def test_roofline_label_is_the_rows_bound(argv: str) -> None:
    assert _agree(_fit(argv)["speed"]) >= 1


def test_peak_ridge_without_efficiencies() -> None:
    """e_c = e_m = 1 is Williams et al.'s ridge R / B: 100 TFLOP/s over 1 TB/s = 100 FLOP/B."""
    r = roofline(2e9, 1e9, 100e12, 1e12)
    assert (r.ridge, r.peak_ridge, r.bound) == (100.0, 100.0, "memory")
    # at 20 % of the compute peak and 80 % of the bandwidth the ridge is 25: intensity 40 is then compute-bound
    r = roofline(40e9, 1e9, 100e12, 1e12, 0.2, 0.8)
    assert r.ridge == pytest.approx(25.0) and r.bound == "compute" and r.peak_ridge == 100.0


def _ubatch_warning(d: dict[str, Any]) -> str | None:
    return next((w for w in [*d["warnings"], *d["speed"]["warnings"]] if "n_ubatch" in w and "--ubatch" in w), None)


def test_moe_prefill_names_the_ubatch_against_the_published_rate() -> None:
    published = _published("PM0093")
    base = "gpt-oss-120b --device dgx-spark --context 2080 --concurrency 1 --output-tokens 32"  # a 2048-token prompt
    d = _fit(base)
    assert d["speed"]["prompt_tokens"] == 2048
    default_rate = d["speed"]["prefill_tokens_per_second"]
    assert default_rate < published / 2  # the default n_ubatch 512 is under half llama.cpp's measured pp2048
    w = _ubatch_warning(d)
    assert w is not None and "--ubatch 2048" in w, d["speed"]["warnings"]
    one = float(re.search(r"against ([0-9.]+) s with the 2048-token prompt in one ubatch", w).group(1))
    at = _fit(base + " --ubatch 2048")
    assert _ubatch_warning(at) is None
    assert one == pytest.approx(at["speed"]["prefill"]["compute_seconds"], rel=5e-3)  # the warning's figure
    assert 2048 / one == pytest.approx(published, rel=0.25)  # that ubatch reproduces llama.cpp's own table


def test_no_ubatch_warning_on_a_dense_model() -> None:
    assert _ubatch_warning(_fit("qwen2.5-7b --device dgx-spark --context 2080 --concurrency 1 "
                                "--output-tokens 32")) is None


def test_moe_ubatch_advice_stays_within_llama_cpp_n_batch() -> None:
    """review22 D4: llama.cpp runs n_ubatch = min(n_batch, n_ubatch) (src/llama-context.cpp, llama_context's
    constructor), n_batch 2048 by default (common/common.h), so for a 16,128-token prompt the comparison and the
    advice are at ubatches of 2048, never "--ubatch 16128", which llama.cpp would cap."""
    d = _fit("gpt-oss-120b --device dgx-spark --context 16384 --concurrency 1 --output-tokens 256")
    assert d["speed"]["prompt_tokens"] == 16128
    said = [a["value"] for a in d["speed"]["assumptions"] if a["name"] == "llamacpp_moe_ubatch_prefill_seconds"]
    assert len(said) == 1 and "in ubatches of 2048" in said[0] and "16128" not in said[0], said
    w = _ubatch_warning(d)
    assert w is None or ("--ubatch 2048" in w and "16128" not in w), w
