"""--metric (estimate/allocator.py): the reserve ratios re-derived from their named rows, the three metrics' algebra,
and the reserved range judged on published runs that did not feed it (torchtitan's max reserved memory)."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from llmsizer.errors import InputError
from llmsizer.estimate import allocator as A
from llmsizer.estimate import engines as E
from llmsizer.estimate.inference import estimate_inference
from llmsizer.estimate.training import estimate_training
from llmsizer.units import GiB
from llmsizer.validation_cases import TRAINING_ROWS, TRAINING_UNIT, public_rows

ROOT = Path(__file__).resolve().parents[2]
PAIRS = ROOT / A.PAIRS_FILE


def _pairs() -> list[dict[str, str]]:
    with open(PAIRS, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def test_reserve_ratios_are_re_derived_from_their_named_rows() -> None:
    rows = _pairs()
    assert all(r["source"] and r["quote"] for r in rows)
    for phase, ratio in A.RESERVE.items():
        mine = [r for r in rows if r["phase"] == phase]
        assert tuple(r["id"] for r in mine) == ratio.rows
        derived = A.derive([A.pair_ratio(float(r["allocated"]), float(r["reserved"]), float(r["persistent"] or 0))
                            for r in mine])
        assert derived == (ratio.low, ratio.expected, ratio.high), (
            f"RESERVE[{phase!r}] no longer matches {A.PAIRS_FILE}: ReserveRatio({phase!r}, {derived[0]}, "
            f"{derived[1]}, {derived[2]}, {tuple(r['id'] for r in mine)})")


LORA = dict(method="lora", micro_batch=2, seq_len=2048, grad_checkpointing="full")


def test_metrics_nest_allocated_reserved_nvidia_smi() -> None:
    by = {m: estimate_training("llama-3.1-8b", **LORA, metric=m) for m in (None, *A.METRICS)}
    tensors = by[None].details["tensor_peak_bytes"]
    assert by["allocated"].total("device") == (tensors, tensors, tensors)
    res, smi = by["reserved"].total("device"), by["nvidia-smi"].total("device")
    r = A.RESERVE[A.TRAINING]
    persistent = sum(i.bytes for i in by["allocated"].items if i.name in A.PERSISTENT and i.location == "device")
    assert 0 < persistent < tensors  # weights, adapters, optimizer states: allocated once, never fragmented
    dynamic = tensors - persistent
    assert res[1] == pytest.approx(persistent + dynamic * r.expected, rel=1e-6)
    assert res[0] == pytest.approx(persistent + dynamic * r.low, rel=1e-6)
    assert res[2] == pytest.approx(persistent + dynamic * r.high, rel=1e-6)
    assert smi[1] - res[1] == E.CUDA_CONTEXT_TRAINING.expected
    # the training default expects no reserve (allocator.py RESERVE: one training ratio does not hold checkpointed
    # and other runs alike): live tensors + the CUDA context
    assert by[None].total("device")[1] == tensors + E.CUDA_CONTEXT_TRAINING.expected
    # transformers inference expects the calibrated reserve: its default is the nvidia-smi figure where the
    # DynamicCache's growth stays inside the calibrated share (32 new tokens: one spare segment, eq. C1')
    inf = {m: estimate_inference("llama-3.1-8b", context=8192, concurrency=4, output_tokens=32, metric=m)
           for m in (None, "nvidia-smi")}
    assert inf[None].total("device") == inf["nvidia-smi"].total("device")
    # 256 new tokens from a prompt ending on a segment boundary: every layer's K and V take fresh 64 MiB segments
    # (eq. C1'), which nvidia-smi shows and the need does not count (the OOM retry releases them: ConcatGrowth)
    grown = {m: estimate_inference("llama-3.1-8b", context=8192, concurrency=4, metric=m)
             for m in (None, "nvidia-smi")}
    assert grown[None].total("device")[2] < grown["nvidia-smi"].total("device")[2]
    assert next(a for a in by[None].assumptions if a.name == "metric").default
    assert next(a for a in by["reserved"].assumptions if a.name == "metric").value == "reserved"


@pytest.mark.parametrize("rid", ["PM0400", "PM0401"])
def test_reserved_range_holds_torchtitans_max_reserved_memory(rid: str) -> None:
    # torchtitan logs torch.cuda max reserved memory (benchmarks/llama3_h100_202412_torchtitan.md); these rows are
    # not among the calibration pairs, and allocated (our tensor peak) alone is 17-21 % below them. torchtitan's
    # batches are fixed-length (batch_shapes='fixed' in the rows): expected and low are eq. (R1), a lower bound
    model, fields, *_ = TRAINING_ROWS[rid]
    row = public_rows()[rid]
    measured = float(row["value"]) * TRAINING_UNIT[row["unit"]]
    # (allocated does not read the shapes, and refuses batch_shapes 'fixed': specs/training.py POOL_METRICS)
    alloc = estimate_training(model, **{k: v for k, v in fields.items() if k != "batch_shapes"},
                              metric="allocated").total("device")[1]
    lo, _, hi = estimate_training(model, **fields, metric="reserved").total("device")
    assert alloc < measured
    assert lo <= measured <= hi, (lo / GiB, measured / GiB, hi / GiB)
    assert fields["batch_shapes"] == "fixed"
    reserve = estimate_training(model, **fields, metric="reserved").item("allocator_reserve")
    assert reserve.low == reserve.bytes > 0 and "eq. R1" in reserve.formula


@pytest.mark.parametrize("rid", [f"PM04{k:02d}" for k in range(10)])
def test_torchtitan_reserved_rows_are_a_close_lower_bound(rid: str) -> None:
    # torchtitan's published max reserved memory (not calibration rows) against eq. (R1) with the reduce-scatter and
    # copy-in pools and the eager loss's hole (formulas/loss_allocations.py): what is modelled is a lower bound
    # (expected <= measured), and with the loss's hole the rest is under 5 % of the measured figure
    model, fields, *_ = TRAINING_ROWS[rid]
    row = public_rows()[rid]
    measured = float(row["value"]) * TRAINING_UNIT[row["unit"]]
    est = estimate_training(model, **fields, metric="reserved")
    expected = est.total("device")[1]
    assert expected <= measured
    assert measured - expected < 0.05 * measured, (rid, expected / GiB, measured / GiB)
    assert "eager loss's hole" in est.item("allocator_reserve").formula


@pytest.mark.parametrize("rid", ["PM0400", "PM0402", "PM0406", "PM1068", "PM1060"])
def test_eager_loss_events_only_where_the_loss_runs_eager(rid: str) -> None:
    # the hole's sequence (eq. L1) is torchtitan 9dec370's eager loss on one rank's tokens (micro-batch x sequence,
    # split over context parallelism) and Llama 3's 128,256-entry vocabulary (its config.json), bf16 logits; under
    # loss_parallel (the TP 8 rows) eq. L1p on the rank's 128,256 / 8 = 16,032 vocabulary entries; none for the
    # compiled loss (Trainy's e7c0cae rows)
    from llmsizer.estimate.inference.common import Acc
    from llmsizer.estimate.training.setup import resolve
    from llmsizer.estimate.training.states import stage_states
    from llmsizer.estimate.training.timeline import eager_loss_events_of
    from llmsizer.formulas.loss_allocations import eager_loss_events
    from llmsizer.models import load_model
    from llmsizer.specs import TrainingWorkload

    model, fields, *_ = TRAINING_ROWS[rid]
    ctx = resolve(load_model(model), TrainingWorkload(**fields, metric="reserved"), Acc())
    events = eager_loss_events_of(ctx, stage_states(ctx, ctx.w.pp - 1))
    if rid == "PM1068":
        assert events == []
    elif rid == "PM1060":
        assert fields["tp"] == 8
        tokens = fields["micro_batch"] * fields["seq_len"]
        assert events == eager_loss_events(tokens, 16032, 2, loss_parallel=True)
        # the hole reaches the row's reserve: 2 t V/tp B (the 10 t V/tp the forward frees less the 8 its first two
        # gradients take), within the fixed segments' 2 MiB rounding
        formula = estimate_training(model, **fields, metric="reserved").item("allocator_reserve").formula
        hole = 2 * tokens * 16032
        assert "eager loss's hole" in formula and f"{hole / GiB:.2f} GiB at the loss backward" in formula
    else:
        tokens = fields["micro_batch"] * fields["seq_len"] // fields.get("context_parallel", 1)
        assert events == eager_loss_events(tokens, 128256, 2)


def test_inference_metrics_and_llamacpp_has_no_caching_allocator() -> None:
    alloc = estimate_inference("llama-3.1-8b", context=8192, metric="allocated")
    res = estimate_inference("llama-3.1-8b", context=8192, metric="reserved").total("device")[1]
    weights = alloc.item("weights").bytes
    dynamic = alloc.total("device")[1] - weights  # KV cache and activations
    assert res == pytest.approx(weights + dynamic * A.RESERVE[A.INFERENCE].expected, rel=1e-6)
    ll = {m: estimate_inference("llama-3.1-8b", context=8192, engine="llamacpp", metric=m).total("device")
          for m in A.METRICS}
    assert ll["allocated"] == ll["reserved"]
    assert ll["nvidia-smi"][1] - ll["reserved"][1] > 0  # the CUDA context (llama.cpp's own span)


def test_verdict_names_the_calibrated_high_end() -> None:
    est = estimate_training("llama-3.1-8b", **LORA, memory=24 * GiB)
    c = est.details["calibrated_range"]
    assert c["kind"] == "training memory" and c["low"] < est.total("device")[1] < c["high"]
    assert est.details["verdict_high_basis"] == "calibrated high end"
    assert est.details["verdict_high"] == c["high"]
    assert "calibrated high end" in est.details["verdict"]


def test_unknown_metric_is_refused() -> None:
    with pytest.raises(InputError, match="unknown metric"):
        estimate_training("llama-3.1-8b", metric="smi")
    with pytest.raises(InputError, match="unknown metric"):
        A.check_metric("peak")


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    return subprocess.run([sys.executable, "-m", "llmsizer.cli.main", *args], capture_output=True, text=True,
                          env=env, timeout=120)


def test_cli_metric_json_and_text() -> None:
    r = _cli("train", "llama-3.1-8b", "--method", "lora", "--metric", "reserved", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    names = [i["name"] for i in d["items"]]
    assert "allocator_reserve" in names and "cuda_context" not in names
    assert d["details"]["calibrated_range"]["high"] > d["totals"]["device"]["bytes"]
    t = _cli("infer", "llama-3.1-8b", "--metric", "allocated")
    assert t.returncode == 0 and "calibrated range:" in t.stdout and "metric=allocated" in t.stdout
    bad = _cli("infer", "llama-3.1-8b", "--metric", "smi")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1


def test_a_preallocated_kv_pool_does_not_fragment() -> None:
    # vLLM allocates its KV pool once at start-up: only the activations (and graph/non-torch buffers) are dynamic
    est = estimate_inference("llama-3.1-8b", engine="vllm", memory=80 * GiB, context=8192, metric="reserved")
    reserve = est.item("allocator_reserve").bytes
    dynamic = sum(i.bytes for i in est.items if i.location == "device"
                  and i.name not in ("weights", "kv_cache", "allocator_reserve"))
    assert reserve == pytest.approx(dynamic * (A.RESERVE[A.INFERENCE].expected - 1), rel=1e-3)


MEASURED = ROOT / "validation" / "measured" / "gpu-h200-2026-12-04.jsonl"


def _records() -> list[dict[str, object]]:
    return [json.loads(line) for line in MEASURED.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_cuda_context_is_the_measured_one_per_phase() -> None:
    # NVML process memory - torch reserved at the end of each run on the H200 (measure/worker.py _final_readings)
    for phase, span in ((A.INFERENCE, E.CUDA_CONTEXT), (A.TRAINING, E.CUDA_CONTEXT_TRAINING)):
        seen = {r["measured"]["cuda_context_bytes"] for r in _records() if r["kind"] == phase}  # type: ignore[index]
        assert seen == {span.expected}, (phase, seen)
        assert span.low < span.expected < span.high
        assert A.context_span("cuda", phase) is span


def test_gp_pairs_are_the_measured_records() -> None:
    # allocator_pairs.csv GPnn is line nn of the measured file: allocated, reserved and persistent (weights +
    # optimizer states) read from the record, not from llmsizer's estimate
    recs = _records()
    gp = [r for r in _pairs() if r["id"].startswith("GP")]
    assert len(gp) == len(recs) - 1  # line 1 is a validation row only (allocator.py RESERVE comment)
    for r in gp:
        n = int(r["id"][2:])
        assert r["source"].endswith(f"gpu-h200-2026-12-04.jsonl line {n}")
        m, kind = recs[n - 1]["measured"], recs[n - 1]["kind"]  # type: ignore[index]
        fitted = [k for k, ratio in A.FIXED_STEP_RESERVE.items() if r["id"] in ratio.rows]
        assert r["phase"] == (kind if kind == A.INFERENCE else A.FIXED_STEP_RESERVE[fitted[0]].phase if fitted
                              else "training, not calibrating") and r["unit"] == "B"
        assert int(r["allocated"]) == m["max_memory_allocated"]  # type: ignore[index]
        assert int(r["reserved"]) == m["max_memory_reserved"]  # type: ignore[index]
        assert int(r["persistent"]) == m["weights_bytes"] + (m.get("optimizer_state_bytes") or 0)  # type: ignore[union-attr,index]


def test_default_device_total_holds_the_uncalibrated_measured_run() -> None:
    # line 1 (Qwen2.5-0.5B, one sequence) fed no constant: its measured device total lies in the default estimate's
    # range, which the old default (no reserve, a 500 MiB context) put 24 % below it
    from llmsizer.measure.compare import rows_of

    rec = _records()[0]
    row = next(r for r in rows_of(rec) if r.component == "device total")
    assert row.low <= row.measured <= row.high, (row.low, row.measured, row.high)
    assert row.estimated < row.measured  # its fixed reserve (0.23 GiB) is more than the ratio gives 91 MB


def _fixed_step_rows() -> dict[str, list[tuple[str, float, dict[str, object]]]]:
    """Every training record of the H200 file by its recomputation: (GP id, eq. R2's rho, the record), rho from the
    record's own allocated, reserved and persistent bytes and eq. (R1) as the estimator replays it for the record's
    settings with the R2 share switched off (unit ratios)."""
    from llmsizer.measure.compare import spec_of, training_fields

    saved = dict(A.FIXED_STEP_RESERVE)
    A.FIXED_STEP_RESERVE.update({k: A.ReserveRatio(r.phase, 1.0, 1.0, 1.0, r.rows) for k, r in saved.items()})
    try:
        out: dict[str, list[tuple[str, float, dict[str, object]]]] = {}
        for n, rec in enumerate(_records(), start=1):
            if rec["kind"] != A.TRAINING:
                continue
            s, m = rec["settings"], rec["measured"]
            est = estimate_training(spec_of(rec), **training_fields(s), metric="reserved")  # type: ignore[arg-type]
            r1 = est.item("allocator_reserve").bytes
            persistent = m["weights_bytes"] + m["optimizer_state_bytes"]  # type: ignore[index]
            rho = A.fixed_pair_ratio(m["max_memory_allocated"], m["max_memory_reserved"], persistent, r1)  # type: ignore[index]
            out.setdefault(s["grad_checkpointing"], []).append((f"GP{n:02d}", rho, rec))  # type: ignore[index]
        return out
    finally:
        A.FIXED_STEP_RESERVE.update(saved)


def test_fixed_step_reserve_is_re_derived_from_its_named_rows() -> None:
    # eq. (R2): the rest of reserved - allocated beyond eq. (R1)'s replayed holes, over the dynamic bytes, of every
    # other measured run of each recomputation in file order (the rule, not the ratios, chose them); the rows left
    # over are scored, not fitted
    rows = _fixed_step_rows()
    assert set(rows) == set(A.FIXED_STEP_RESERVE) == {"none", "full"}
    for key, ratio in A.FIXED_STEP_RESERVE.items():
        fitted = rows[key][::2]
        assert tuple(gp for gp, _, _ in fitted) == ratio.rows
        derived = A.derive([rho for _, rho, _ in fitted])
        assert derived == (ratio.low, ratio.expected, ratio.high), (
            f"FIXED_STEP_RESERVE[{key!r}] no longer matches its rows: {derived}")
    # the two kinds differ: recomputation keeps 4x the rest (the reason for two ratios, allocator.py eq. R2)
    none, full = A.FIXED_STEP_RESERVE["none"], A.FIXED_STEP_RESERVE["full"]
    assert (full.expected - 1) > 4 * (none.expected - 1) and full.low > none.high


# scored runs whose eq. (R2) rho lies outside FIXED_STEP_RESERVE's range, each with what is seen and why (review23a
# D7: named, not pinned -- a model of the mechanism that brings one inside the range leaves the test green)
RESERVE_MISSES = {"GP17": "a full fine-tune with recomputation: rho 1.39 over the 'full' high end of 1.25; the weight "
                          "gradients held between the recomputes are not modelled"}


def test_fixed_step_reserve_on_the_scored_runs() -> None:
    # the runs that fed no constant (GP06, GP16 without recomputation; GP07, GP17, GP20 with it), judged as validate
    # judges them: under the metric they measured (NVML = CUDA context + max_memory_reserved: 'nvidia-smi', the
    # worker's fixed shapes). Their rho lies in the calibrated span but for RESERVE_MISSES', and every device total
    # lies in its calibrated range (validate's judgement of the row), within 2 % for the runs in the span, where eq.
    # (R1) alone left them 4-20 % under
    from llmsizer.measure.compare import rows_of, spec_of, training_fields

    scored = {gp: (key, rho, rec) for key, v in _fixed_step_rows().items() for gp, rho, rec in v
              if gp not in A.FIXED_STEP_RESERVE[key].rows}
    assert sorted(scored) == ["GP06", "GP07", "GP16", "GP17", "GP20"]
    for gp, (key, rho, rec) in scored.items():
        ratio = A.FIXED_STEP_RESERVE[key]
        if gp not in RESERVE_MISSES:
            assert ratio.low <= rho <= ratio.high, (gp, rho)
        total = next(r for r in rows_of(rec) if r.component == "device total")
        reserve = next(r for r in rows_of(rec) if r.component == "allocator reserve")
        if gp not in RESERVE_MISSES:
            assert abs(total.estimated / total.measured - 1) < 0.02, (gp, total)
        assert total.low <= total.measured <= total.high
        est = estimate_training(spec_of(rec), **training_fields(rec["settings"]), metric="reserved")  # type: ignore[arg-type]
        assert "eq. R2" in est.item("allocator_reserve").formula
        assert reserve.measured == rec["measured"]["max_memory_reserved"] - rec["measured"]["max_memory_allocated"]  # type: ignore[index]


def test_fixed_step_reserve_only_where_measured() -> None:
    # eq. (R2) is calibrated on one-GPU eager steps with no or full recomputation: selective recomputation, FSDP and
    # several GPUs keep eq. (R1) alone (a lower bound), and the default metric still expects no training reserve
    base = dict(method="lora", micro_batch=2, seq_len=2048, metric="reserved", batch_shapes="fixed")
    one = {g: estimate_training("llama-3.1-8b", **base, grad_checkpointing=g).item("allocator_reserve")
           for g in ("none", "full", "selective")}
    assert "eq. R2" in one["none"].formula and "eq. R2" in one["full"].formula
    assert "eq. R2" not in one["selective"].formula
    assert one["full"].bytes > one["selective"].bytes
    fsdp = estimate_training("llama-3.1-8b", **base, grad_checkpointing="full", gpus=8, fsdp="full")
    assert "eq. R2" not in fsdp.item("allocator_reserve").formula
    assert estimate_training("llama-3.1-8b", method="lora", micro_batch=2, seq_len=2048).item(
        "allocator_reserve").bytes == 0
