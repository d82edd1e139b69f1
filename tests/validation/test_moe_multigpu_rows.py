"""validation/moe_multigpu_decode.csv: published decodes of DeepSeek V3 / R1 / V3.2 (671B MoE, MLA) tensor-parallel on
one 8-GPU node at one or eight sequences, and the rule they test: a one-sequence serving decode on more than one GPU
has no calibrated range (estimate/ranges.py MULTI_GPU_DECODE_NO_BAND), because no summarised one-sequence row of a
decode band ran on more than one GPU, and these rows measure a small fraction of the estimate."""

from __future__ import annotations

import csv

from tests.validation.test_serving_share import SERVING_FILES

from llmsizer.catalog.hardware import builtin_catalog
from llmsizer.catalog.models import find
from llmsizer.estimate import ranges as R
from llmsizer.estimate.device import nvlink_mesh_for
from llmsizer.estimate.fit import link_bandwidth_for
from llmsizer.estimate.speed import estimate_speed
from llmsizer.validation_cases import (
    ASSUMED,
    BATCHED,
    DECODE,
    MOE_MULTIGPU_FILE,
    band_rows,
    data_dir,
    engine_runs,
    moe_multigpu_cases,
    repo_cases,
)


def _rows() -> dict[str, dict[str, str]]:
    with (data_dir() / MOE_MULTIGPU_FILE).open(newline="") as f:
        return {r["id"]: r for r in csv.DictReader(f)}


def test_rows_state_source_quote_and_settings() -> None:
    """Each row quotes its figure, names its source and release, runs an MoE model on 8 GPUs; the one-sequence rows
    (settings partly unpublished: release, board, GPU or lengths) are out of the summary; MD01 (every setting stated) is
    summarised; none feeds a band."""
    rows = _rows()
    cases = {c.id: c for c in moe_multigpu_cases()}
    assert set(cases) == set(rows) == {"MD01", "MD02", "MD03", "MD04"}
    for rid, c in cases.items():
        r = rows[rid]
        assert r["value"] in r["quote"] and "github.com/" in r["source"] and r["engine_version"], rid
        assert r["gpus"] == "8" and find(r["catalog_model"]).spec().is_moe, rid
        assert c.kind == (DECODE if r["concurrency"] == "1" else BATCHED), rid
        # every row is an MLA + MoE model on 8 GPUs: none feeds a band (ranges.MLA_MOE_MULTI_GPU_NO_BAND)
        assert c.no_band == R.MLA_MOE_MULTI_GPU_NO_BAND, rid
        assert c.excluded == (ASSUMED if r["concurrency"] == "1" else ""), rid


def test_no_summarised_one_sequence_band_row_ran_on_more_than_one_gpu() -> None:
    """The premise of MULTI_GPU_DECODE_NO_BAND: every row that feeds a vLLM / SGLang decode (one-sequence) band ran
    on one GPU. If a measured multi-GPU one-sequence row is ever summarised into a band, the rule must be revisited."""
    multi = {run.row["id"] for name, column in (*SERVING_FILES, (MOE_MULTIGPU_FILE, "concurrency"))
             for run in engine_runs(None, name, column) if run.batch == 1 and run.gpus > 1}
    assert {"QV23", "MD02", "MD03", "MD04"} <= multi
    fed = {c.id for (kind, _), rows in band_rows(repo_cases()).items() if kind == DECODE for c in rows}
    assert fed and not fed & multi


def test_one_sequence_moe_rows_measure_10_to_15_percent_of_the_estimate() -> None:
    """The figure the warning quotes: measured / estimated of MD02-MD04 lies in 0.10-0.15 (independent published
    runs against the estimate; the estimate counts the weight read, the all-reduces and the engine's host floor, not
    the per-layer kernels of a 61-layer MoE step)."""
    cases = {c.id: c for c in moe_multigpu_cases()}
    for rid in ("MD02", "MD03", "MD04"):
        c = cases[rid]
        assert c.predicted and 0.10 <= c.measured / c.predicted <= 0.15, (rid, c.measured / c.predicted)


def _tp8(model: str, device: str, weights: str, concurrency: int = 1, engine: str = "vllm"):  # noqa: ANN202
    dev = builtin_catalog().devices[device]
    return estimate_speed(find(model).spec(), dev, 8, weights_format=weights, prompt_tokens=128, output_tokens=128,
                          concurrency=concurrency, kv_dtype="bf16", link_bandwidth=link_bandwidth_for(dev, None),
                          engine=engine, nvlink_mesh=nvlink_mesh_for(dev, None, 8))


def test_a_one_sequence_tp8_decode_states_no_range_and_its_host_floor() -> None:
    """The probe's case (Kimi K2 awq-int4 and Mixtral 8x7B on 8 H100 SXM, vLLM): the host step bounds the decode;
    the estimate quotes no calibrated range, says why, and warns that the host floor decides it. Eight sequences on
    the same GPUs keep a batched band."""
    for model, weights in (("kimi-k2-instruct", "awq-int4"), ("mixtral-8x7b-v0.1", "bf16")):
        s = _tp8(model, "h100-sxm", weights)
        assert s.decode is not None and s.decode.bound == "host", model
        assert s.decode_band is None and s.decode_range is None, model
        named = {a.name: a for a in s.assumptions}
        assert named["decode_range_band"].value == "none"
        assert (R.MLA_MOE_MULTI_GPU_NO_BAND if model == "kimi-k2-instruct" else R.MULTI_GPU_DECODE_NO_BAND) \
            in named["decode_range_band"].why
        assert any("host-bound" in w and "8 GPUs" in w for w in s.warnings), model
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
    """MD01 (DeepSeek-R1 FP8, 8 sequences on 8 x H200, every setting stated) measures below the pooled batched band's
    low end: the batched band, fitted on dense and Mixtral rows, does not cover this shape, so an MLA + MoE model on
    several GPUs gets no range at any concurrency; Mixtral (no MLA) on 8 GPUs at 8 sequences keeps its band."""
    md01 = {c.id: c for c in moe_multigpu_cases()}["MD01"]
    pooled = R.BANDS[(BATCHED, "serving engines (pooled)")]
    assert md01.predicted and md01.measured / md01.predicted < pooled.low
    s = _tp8("deepseek-r1", "h200", "fp8-block", concurrency=8, engine="sglang")
    assert s.decode_band is None and s.decode_range is None
    named = {a.name: a for a in s.assumptions}
    assert R.MLA_MOE_MULTI_GPU_NO_BAND in named["decode_range_band"].why
    assert _tp8("mixtral-8x7b-v0.1", "h100-sxm", "bf16", concurrency=8).decode_band is not None
