"""validation/moe_multigpu_decode.csv: published decodes of DeepSeek V3 / R1 / V3.2 (671B MoE, MLA) tensor-parallel on
one 8-GPU node at 1-64 sequences; the constant calibrated on one of them (efficiency.MLA_MOE_LAYER_KERNEL_SECONDS,
formulas/speed.py eq. 15's roof of latency-bound kernels, on MD01) re-derived; and the rules they test: a one-sequence
serving decode on more than one GPU has no calibrated range (estimate/ranges.py MULTI_GPU_DECODE_NO_BAND), because no
summarised one-sequence row of a decode band ran on more than one GPU, nor has an MLA + MoE decode on several GPUs
(MLA_MOE_MULTI_GPU_NO_BAND), whose held-out rows measure below the estimate (ranges.MLA_MOE_MEASURED, written
from the rows)."""

from __future__ import annotations

import csv

import pytest
from tests.validation.test_serving_share import SERVING_FILES

from llmsizer.catalog.hardware import builtin_catalog
from llmsizer.catalog.models import find
from llmsizer.estimate import efficiency as E
from llmsizer.estimate import ranges as R
from llmsizer.estimate.device import nvlink_mesh_for
from llmsizer.estimate.fit import link_bandwidth_for
from llmsizer.estimate.speed import estimate_speed
from llmsizer.validation_cases import (
    ASSUMED,
    BATCHED,
    CALIBRATION,
    DECODE,
    MLA_MOE_KERNEL_CALIBRATION,
    MOE_MULTIGPU_FILE,
    band_rows,
    data_dir,
    engine_runs,
    mla_moe_measured,
    moe_multigpu_cases,
    repo_cases,
)


def _rows() -> dict[str, dict[str, str]]:
    with (data_dir() / MOE_MULTIGPU_FILE).open(newline="") as f:
        return {r["id"]: r for r in csv.DictReader(f)}


def test_rows_state_source_quote_and_settings() -> None:
    """Each row quotes its figure, names its source and release, runs an MoE model on 8 GPUs; the one-sequence rows
    (settings partly unpublished: release, board, GPU or lengths) are out of the summary; MD01 (every setting stated)
    is the calibration row of eq. (15)'s tau_k, out of the summary too; MD05-MD07 (its sweep's higher concurrencies,
    every setting stated) are summarised; none feeds a band. MD08-MD11 (Qwen3.5-397B-A17B and MiniMax-M2: no MLA,
    formulas/speed.py eq. 16's fused-MoE term instead of eq. 15's roof) have settings assumed: out of the summary and
    the bands."""
    rows = _rows()
    cases = {c.id: c for c in moe_multigpu_cases()}
    assert set(cases) == set(rows) == {f"MD{i:02d}" for i in range(1, 12)}
    for rid in ("MD08", "MD09", "MD10", "MD11"):
        r, c = rows.pop(rid), cases.pop(rid)
        assert r["value"] in r["quote"] and r["source"] and r["engine_version"], rid
        assert find(r["catalog_model"]).spec().is_moe and find(r["catalog_model"]).spec().mla is None, rid
        assert c.kind == BATCHED and c.excluded == ASSUMED and "(settings assumed)" in r["notes"], rid
    for rid, c in cases.items():
        r = rows[rid]
        assert r["value"] in r["quote"] and "github.com/" in r["source"] and r["engine_version"], rid
        assert r["gpus"] == "8" and find(r["catalog_model"]).spec().is_moe, rid
        assert c.kind == (DECODE if r["concurrency"] == "1" else BATCHED), rid
        # every row is an MLA + MoE model on 8 GPUs: none feeds a band (ranges.MLA_MOE_MULTI_GPU_NO_BAND)
        assert c.no_band == R.MLA_MOE_MULTI_GPU_NO_BAND, rid
        assert c.excluded == (CALIBRATION if rid == MLA_MOE_KERNEL_CALIBRATION else
                              ASSUMED if r["concurrency"] == "1" else ""), rid


def test_no_summarised_one_sequence_band_row_ran_on_more_than_one_gpu() -> None:
    """The premise of MULTI_GPU_DECODE_NO_BAND: every row that feeds a vLLM / SGLang decode (one-sequence) band ran
    on one GPU. If a measured multi-GPU one-sequence row is ever summarised into a band, the rule must be revisited."""
    multi = {run.row["id"] for name, column in (*SERVING_FILES, (MOE_MULTIGPU_FILE, "concurrency"))
             for run in engine_runs(None, name, column) if run.batch == 1 and run.gpus > 1}
    assert {"QV23", "MD02", "MD03", "MD04"} <= multi
    fed = {c.id for (kind, _), rows in band_rows(repo_cases()).items() if kind == DECODE for c in rows}
    assert fed and not fed & multi


def test_the_mla_moe_layer_kernel_time_is_re_derived_from_md01() -> None:
    """efficiency.MLA_MOE_LAYER_KERNEL_SECONDS from its calibration row: MD01's measured step (12.8 ms mean TPOT) less
    the step's all-reduces (which do not depend on the constant), over the model's 61 layers, to the constant's
    0.1 us; the calibrated step then reproduces the row."""
    run = next(r for r in engine_runs(None, MOE_MULTIGPU_FILE, "concurrency")
               if r.row["id"] == MLA_MOE_KERNEL_CALIBRATION)
    d = run.speed.decode
    assert d is not None and run.row["unit"] == "ms"
    layers = find(run.row["catalog_model"]).spec().num_layers
    tau = (float(run.row["value"]) * 1e-3 - d.comm_seconds) / layers
    assert abs(tau - E.MLA_MOE_LAYER_KERNEL_SECONDS.expected) < 0.05e-6, tau
    assert d.bound == "kernel latency" and abs(d.seconds - float(run.row["value"]) * 1e-3) < 0.01e-3


def test_the_no_band_note_quotes_the_held_out_rows_as_derived_from_them() -> None:
    """ranges.MLA_MOE_MEASURED, quoted by MLA_MOE_MULTI_GPU_NO_BAND, is written from the rows by
    scripts/rederive_bands.py (validation_cases.mla_moe_measured): a stale copy fails here, and gen_docs rewrites it
    (review11 #7: it was pasted by hand). Every row but the calibration row is quoted, once, in its group."""
    cases = moe_multigpu_cases()
    fresh = mla_moe_measured(cases)
    assert R.MLA_MOE_MEASURED == fresh, ("stale MLA_MOE_MEASURED: run `PYTHONPATH=src python scripts/gen_docs.py`",
                                         fresh)
    quoted = [i for _, _, ids in fresh.values() for i in ids]
    assert sorted(quoted) == sorted({c.id for c in cases if c.no_band == R.MLA_MOE_MULTI_GPU_NO_BAND}
                                    - {MLA_MOE_KERNEL_CALIBRATION})
    assert sorted(quoted) == [f"MD0{i}" for i in range(2, 8)]
    assert all(f"{lo:.2f}-{hi:.2f}" in R.MLA_MOE_MULTI_GPU_NO_BAND for lo, hi, _ in fresh.values())


def test_the_held_out_mla_moe_rows_run_slower_than_the_estimate() -> None:
    """An independent bound: eq. (15)'s roof is a floor on the step (every kernel of the chain at its minimum), so a
    published run of the shape is no faster than the estimate: every held-out row measures below it (ratio < 1),
    (published TPOTs against the model, not the model against itself)."""
    rows = [c for c in moe_multigpu_cases() if c.id != MLA_MOE_KERNEL_CALIBRATION
            and c.no_band == R.MLA_MOE_MULTI_GPU_NO_BAND]
    assert len(rows) == 6 and all(c.measured < c.predicted for c in rows), [(c.id, c.measured / c.predicted)
                                                                           for c in rows]


def test_the_roof_lifts_the_one_sequence_rows_from_a_tenth_of_the_estimate() -> None:
    """Without eq. (15)'s roof the one-sequence rows measured 10-15 % of the estimate (the weight read, the
    all-reduces and the host floor alone); with it, 38-78 %: the roof, not another term, is what moved them. The
    matrices vLLM keeps whole on every rank (formulas/tensor_parallel.py, vllmrep: MLA's q_a / kv_a projections, the
    routers; 1.03 B parameters a rank on DeepSeek-V3) add to the weight read: up to 0.181 (MD04) without the roof."""
    cases = {c.id: c for c in moe_multigpu_cases()}
    for rid in ("MD02", "MD03", "MD04"):
        run = next(r for r in engine_runs(None, MOE_MULTIGPU_FILE, "concurrency") if r.row["id"] == rid)
        d = run.speed.decode
        assert d is not None and d.bound == "kernel latency", rid
        without = max(d.compute_seconds, d.memory_seconds) + d.comm_seconds + d.overhead_seconds
        measured_step = 1.0 / cases[rid].measured
        assert 0.10 <= without / measured_step <= 0.19, (rid, without / measured_step)


def _tp8(model: str, device: str, weights: str, concurrency: int = 1, engine: str = "vllm"):  # noqa: ANN202
    dev = builtin_catalog().devices[device]
    return estimate_speed(find(model).spec(), dev, 8, weights_format=weights, prompt_tokens=128, output_tokens=128,
                          concurrency=concurrency, kv_dtype="bf16", link_bandwidth=link_bandwidth_for(dev, None),
                          engine=engine, nvlink_mesh=nvlink_mesh_for(dev, None, 8))


def test_a_one_sequence_tp8_decode_states_no_range_and_its_host_floor() -> None:
    """The probe's case (Kimi K2 awq-int4 and Mixtral 8x7B on 8 H100 SXM, vLLM): the estimate quotes no calibrated
    range and says why; Mixtral's step is the device's (eq. 16's fused-MoE time above the host step), Kimi K2's eq.
    (15)'s roof. Eight sequences on
    the same GPUs keep a batched band."""
    for model, weights in (("kimi-k2-instruct", "awq-int4"), ("mixtral-8x7b-v0.1", "bf16")):
        s = _tp8(model, "h100-sxm", weights)
        if model == "kimi-k2-instruct":  # MLA + MoE: eq. (15)'s roof of latency-bound kernels sets the step
            assert s.decode is not None and s.decode.bound == "kernel latency"
            assert s.decode.floor_seconds == 61 * E.MLA_MOE_LAYER_KERNEL_SECONDS.expected
            assert s.decode_band is None and not any("host-bound" in w for w in s.warnings)
            continue
        # the fused-MoE kernel's fixed time (formulas/speed.py eq. 16: 32 layers x (27.5 + 2 x 0.345) us = 0.90 ms)
        # lifts Mixtral's device step (its weight read 1.31 ms + the all-reduces) above vLLM's 2.39 ms host step
        assert s.decode is not None and s.decode.bound == "memory", model
        assert s.decode.overhead_seconds == pytest.approx(32 * (E.FUSED_MOE_CALL_SECONDS.expected
                                                                + 2 * E.FUSED_MOE_EXPERT_SECONDS.expected))
        assert s.decode.seconds > s.decode.host_seconds == pytest.approx(2.39e-3)
        assert s.decode_band is None and s.decode_range is None, model
        named = {a.name: a for a in s.assumptions}
        assert named["decode_range_band"].value == "none"
        assert (R.MLA_MOE_MULTI_GPU_NO_BAND if model == "kimi-k2-instruct" else R.MULTI_GPU_DECODE_NO_BAND) \
            in named["decode_range_band"].why
    batched = _tp8("mixtral-8x7b-v0.1", "h100-sxm", "bf16", concurrency=8)
    assert batched.decode_band is not None and not any("host-bound" in w and "one sequence" in w
                                                       for w in batched.warnings)


def test_one_gpu_decode_keeps_its_band() -> None:
    """The rule takes the range from multi-GPU one-sequence decodes only: one GPU keeps the band it had."""
    dev = builtin_catalog().devices["a10g"]
    s = estimate_speed(find("llama-3.2-3b").spec(), dev, 1, weights_format="bf16", prompt_tokens=64,
                       output_tokens=128, concurrency=1, kv_dtype="bf16", engine="vllm")
    assert s.decode_band is not None and s.decode_range is not None


def test_mla_moe_on_several_gpus_has_no_band_at_any_concurrency() -> None:
    """The held-out rows of MD01's sweep (DeepSeek-R1 FP8, 16-64 sequences on 8 x H200, every setting stated) measure
    below the pooled batched band's low end: the batched band, fitted on dense and Mixtral rows, does not cover this
    shape, so an MLA + MoE model on several GPUs gets no range at any concurrency; Mixtral (no MLA) on 8 GPUs at 8
    sequences keeps its band."""
    cases = {c.id: c for c in moe_multigpu_cases()}
    pooled = R.BANDS[(BATCHED, "serving engines (pooled)")]
    assert min(cases[i].measured / cases[i].predicted for i in ("MD05", "MD06", "MD07")) < pooled.low
    s = _tp8("deepseek-r1", "h200", "fp8-block", concurrency=8, engine="sglang")
    assert s.decode_band is None and s.decode_range is None
    named = {a.name: a for a in s.assumptions}
    assert R.MLA_MOE_MULTI_GPU_NO_BAND in named["decode_range_band"].why
    assert _tp8("mixtral-8x7b-v0.1", "h100-sxm", "bf16", concurrency=8).decode_band is not None


def test_the_kernel_floor_on_one_gpu_gives_no_band_where_it_decides_the_step() -> None:
    """review11 #3: eq. (15)'s roof also holds on one GPU (MD01's figure has the all-reduces, the only kernels tensor
    parallelism adds, taken out), but no row measures it there: DeepSeek-V2-Lite on one H100 (vLLM, one sequence),
    whose step the roof decides (27 layers x tau_k above the weight read), quotes no calibrated range and says why;
    a one-GPU MLA + MoE step the weight read decides keeps the pooled band."""
    dev = builtin_catalog().devices["h100-sxm"]
    lite = find("deepseek-v2-lite").spec()
    s = estimate_speed(lite, dev, 1, weights_format="bf16", prompt_tokens=128, output_tokens=128, concurrency=1,
                       kv_dtype="bf16", engine="vllm")
    d = s.decode
    assert d is not None and d.bound == "kernel latency"
    assert d.floor_seconds == lite.num_layers * E.MLA_MOE_LAYER_KERNEL_SECONDS.expected
    assert s.decode_band is None and s.decode_range is None
    named = {a.name: a for a in s.assumptions}
    assert named["decode_range_band"].value == "none" and R.MLA_MOE_FLOOR_NO_BAND in named["decode_range_band"].why
    # many sequences at once: the weight read (every expert) is above the roof, and the pooled band stays
    busy = estimate_speed(lite, dev, 1, weights_format="bf16", prompt_tokens=128, output_tokens=128, concurrency=64,
                          kv_dtype="bf16", engine="vllm")
    assert busy.decode is not None and busy.decode.bound != "kernel latency" and busy.decode_band is not None
