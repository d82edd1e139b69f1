"""Review findings on the eager transformers speed rule (formulas/launch_overhead.py eq. K4, estimate/speed.py).

Independent truth: the measured H200 run file (validation/measured/gpu-h200-2026-12-04.jsonl, the measure worker's
transformers runs: b prompts prefilled in one forward, measure/workloads.py inference_pass) and the sources named per
test. Each test failed before its fix."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from llmsizer import fit
from llmsizer.models import load_model

RUNS = Path(__file__).resolve().parents[2] / "validation" / "measured" / "gpu-h200-2026-12-04.jsonl"


def _record(model: str, context: int, concurrency: int) -> dict:
    for line in RUNS.read_text().splitlines():
        r = json.loads(line)
        s = r.get("settings", {})
        if (r.get("kind") == "inference" and r.get("model", {}).get("name", "").endswith(model)
                and s.get("context") == context and s.get("concurrency") == concurrency and s.get("weights") in (None, "bf16")):
            return r
    raise AssertionError(f"no measured run of {model} ctx {context} x{concurrency}")


def test_no_decode_warning_without_decoding() -> None:
    """fit --output-tokens 0 times no decode step, so it cannot warn that the decode is host-bound (it did: the
    warning was written before the prefill-only check); with tokens to decode it still does."""
    none = fit("qwen2.5-0.5b", "h200", engine="transformers", output_tokens=0)
    some = fit("qwen2.5-0.5b", "h200", engine="transformers", output_tokens=32)
    assert none.speed is not None and none.speed.decode is None
    assert not [w for w in none.speed.warnings if "decode is host-bound" in w]
    assert [w for w in some.speed.warnings if "decode is host-bound" in w]


def test_transformers_ttft_is_the_batch_prefill_the_rows_measured() -> None:
    """generate() and the measure worker prefill the b prompts in one forward, so TTFT at concurrency b is that
    forward's time (eq. P1 at b), and the prefill rate and its calibrated band are of the same quantity as the band's
    rows. Before: fit showed one prompt's 0.020 s at 415,038 tokens/s while validate compared the batch's 423,750
    against the measured 323,017 (0.202 s for 8 prompts of 8160 tokens)."""
    from llmsizer.measure.compare import spec_of, throughput_rows

    r = fit("qwen2.5-0.5b", "h200", engine="transformers", context=8192, concurrency=8, output_tokens=32)
    sp = r.speed
    assert sp is not None and sp.batch_prefill
    assert sp.ttft_seconds == sp.prefill_batch_seconds(8) > sp.prefill_batch_seconds(1)
    assert sp.prefill_tokens_per_second == pytest.approx(8 * sp.prompt_tokens / sp.ttft_seconds)
    rec = _record("Qwen2.5-0.5B", 8192, 8)
    row = next(x for x in throughput_rows(rec, spec_of(rec)) if x.component == "prefill tokens/s")
    assert row.estimated == pytest.approx(sp.prefill_tokens_per_second)  # validate's figure is fit's
    measured = rec["timing"]["prefill_tokens_per_second"]
    low, high = sp.prefill_range
    assert low <= measured <= high  # the band brackets the measured batch prefill it was fitted with
    # the measured prefill takes b times longer than one prompt's estimate: one prompt's TTFT would be 10x short
    assert 8 * sp.prompt_tokens / measured > 5 * sp.prefill_batch_seconds(1)


def test_a_serving_engine_keeps_one_prompts_ttft() -> None:
    """A serving engine prefills each prompt on its own (no static batch): its idle TTFT is one prompt's; at 8
    requests in flight the other prompts queue ahead of it (estimate/serving_load.py, formulas/serving_queue.py Q6)."""
    r = fit("qwen2.5-0.5b", "h200", engine="vllm", context=8192, concurrency=8, output_tokens=32)
    assert r.speed is not None and not r.speed.batch_prefill
    assert r.speed.ttft_idle_seconds == r.speed.prefill.seconds < r.speed.ttft_seconds


def test_tensor_parallel_and_moe_eager_counts_are_warned() -> None:
    """Eq. K4 counts one device's kernels without the tensor-parallel all-reduces, and an MoE layer's top-k experts
    as linears, though transformers' eager expert loop (qwen3_moe/modeling_qwen3_moe.py:235-245 @5.24.0) launches
    per expert hit: both under-counts are stated."""
    tp2 = fit("qwen2.5-7b", "h200", 2, engine="transformers", tensor_parallel=2)
    assert tp2.speed is not None and tp2.speed.tensor_parallel == 2
    assert [w for w in tp2.speed.warnings if "tensor parallel" in w and "all-reduce" in w]
    one = fit("qwen2.5-7b", "h200", engine="transformers")
    assert not [w for w in one.speed.warnings if "all-reduce" in w]
    moe = fit("qwen3-30b-a3b", "h200", engine="transformers")
    assert moe.speed is not None and [w for w in moe.speed.warnings if "expert loop" in w]
    assert not [w for w in one.speed.warnings if "expert loop" in w]
    names = [a.name for a in one.speed.assumptions]
    assert "kernels_per_step" in names and "kernels_per_forward" not in names


def test_measured_rows_are_timed_with_the_workers_loop() -> None:
    """The worker's decode loop launches K4 - 13 kernels a step (tests/formulas/test_inference_kernels.py counts it),
    generate() K4: the measured rows' estimate takes the worker's count."""
    from llmsizer.estimate.launch import inference_kernels
    from llmsizer.formulas.launch_overhead import GENERATE_STEP_KERNELS, WORKER_STEP_KERNELS
    from llmsizer.measure.compare import spec_of, throughput_rows

    rec = _record("Qwen2.5-0.5B", 1024, 1)
    row = next(x for x in throughput_rows(rec, spec_of(rec)) if x.component == "decode tokens/s")
    spec = load_model("qwen2.5-0.5b")
    gen = fit(spec, "h200", engine="transformers", context=1024, output_tokens=rec["settings"]["output_tokens"])
    k_gen, k_worker = inference_kernels(spec), inference_kernels(spec, per_step=WORKER_STEP_KERNELS)
    assert k_gen - k_worker == GENERATE_STEP_KERNELS - WORKER_STEP_KERNELS == 13
    # both host-bound at 0.5B: the rates are the inverse kernel counts' ratio
    assert row.estimated / gen.speed.tokens_per_second == pytest.approx(k_gen / k_worker, rel=1e-6)


def test_engine_of_reads_the_rows_engine_column() -> None:
    from llmsizer.validation_cases import engine_of, engine_speed_cases

    cases = engine_speed_cases()
    by_id = {c.id: c for c in cases}
    assert engine_of(by_id["QT01"]) == "transformers"
    assert engine_of(by_id["QV01"]) == "vllm"
    # the column, not the id: a transformers row under another id is still transformers
    assert engine_of(dataclasses.replace(by_id["QT01"], id="XX01")) == "transformers"


def test_one_setup_band_is_not_written_as_setups() -> None:
    from llmsizer.render.text import estimate_facts

    est = fit("qwen2.5-0.5b", "h200", engine="transformers").estimate
    assert est is not None
    details = dict(est.details)
    details["calibrated_range"] = {**details["calibrated_range"], "setups": 1}
    line = next(x for x in estimate_facts(dataclasses.replace(est, details=details)) if "calibrated range" in x)
    assert "of 1 setup," in line and "setups" not in line
