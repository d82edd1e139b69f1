"""Current vLLM (V1 engine, releases >= 0.14) against published serving runs (validation/vllm_serving_tpot.csv), and
the one rule every caller uses for an engine's host work per decode step (estimate/engines.py ``step_host``).

vLLM >= 0.14 schedules step n + 1 while the device runs step n (asynchronous scheduling, on by default since 0.14.0),
so a decode step takes max(device step, host step) (formulas/speed.py eq. 14). The host step is fitted on VS07, the
one published current-vLLM row whose device step (0.57 ms, Qwen3-0.6B on an H100) is far below its measured time per
token; every other row is device-bound and so unchanged by it. The question the rows answer: does a constant
per-step cost added to the device step (what V0 needed, efficiency.VLLM_V0_STEP_SECONDS) explain current vLLM? Not
all of it: at one sequence the device-bound residuals have both signs (the A6000 row is already slower than
measured), the constant that fits the A100 row moves the H100 rows in and the A6000 rows out, and it cannot hold the
host-bound row; the asynchronous code path does not add host time to the step.
"""

from __future__ import annotations

import csv

import pytest

from llmsizer.catalog.hardware import builtin_catalog
from llmsizer.catalog.models import find
from llmsizer.errors import InputError
from llmsizer.estimate import efficiency as E
from llmsizer.estimate.engines import CURRENT_VERSION, STEP_HOST, step_host
from llmsizer.estimate.fit import fit
from llmsizer.estimate.speed import estimate_speed
from llmsizer.validation_cases import (
    ASSUMED,
    BATCHED,
    CALIBRATION,
    DECODE,
    SERVING_SHARE_CALIBRATION,
    SERVING_STREAM_CALIBRATION,
    VLLM,
    VLLM_V1_CALIBRATION,
    band_rows,
    data_dir,
    engine_of,
    vllm_latency_cases,
    vllm_serving_cases,
)


def _rows() -> dict[str, dict[str, str]]:
    with (data_dir() / "vllm_serving_tpot.csv").open(newline="") as f:
        return {r["id"]: r for r in csv.DictReader(f)}


def _device_step(r: dict[str, str]) -> float:
    """The row's device step alone (no host term: a given serial step of 0 replaces the engine's rule; the engine's
    streaming share, efficiency.SERVING_DECODE_BANDWIDTH, stays)."""
    s = estimate_speed(find(r["catalog_model"]).spec(), builtin_catalog().devices[r["device"]], int(r["gpus"]),
                       weights_format=r["dtype"], prompt_tokens=int(r["prompt"]), output_tokens=int(r["generated"]),
                       concurrency=int(r["concurrency"]), kv_dtype=r["dtype"], engine=r["engine"],
                       engine_version=r["engine_version"], engine_step_seconds=0.0)
    assert s.decode is not None
    return s.decode.seconds


def _measured_step(r: dict[str, str]) -> float:
    """Seconds per decode step of the row's sequences: its TPOT, or 1 / its one-sequence tokens/s."""
    return 1.0 / float(r["value"]) if r["unit"] == "tokens/s" else float(r["value"]) * 1e-3


def test_rows_state_their_release_source_and_quote() -> None:
    """Every row names a V1 vLLM release (>= 0.8; from 0.14 with asynchronous scheduling), its page and the line it
    quotes; one sequence is the decode kind, several the batched kind; rows with unpublished lengths are out of the
    summary."""
    rows = _rows()
    cases = {c.id: c for c in vllm_serving_cases()}
    assert set(cases) == set(rows) and len(rows) >= 7
    for rid, c in cases.items():
        r = rows[rid]
        rule = step_host("vllm", r["engine_version"])
        assert rule is not None and rule.first >= (0, 8) and (rule.mode == "overlapped") == (rule.first >= (0, 14)), rid
        assert r["source"] and r["quote"], rid
        assert c.kind == (DECODE if r["concurrency"] == "1" else BATCHED) and engine_of(c) == VLLM
        assert c.predicted is not None and c.predicted > 0
        calibration = rid in (VLLM_V1_CALIBRATION, SERVING_STREAM_CALIBRATION) or rid in SERVING_SHARE_CALIBRATION
        want = CALIBRATION if calibration else (ASSUMED if "(settings assumed)" in r["notes"] else "")
        assert c.excluded == want, rid
    summarised = {c.id for c in cases.values() if not c.excluded}
    # the rows whose lengths, concurrency and release are all published: VS06 (A100 40GB), the A10G table VS08-VS14
    # (vLLM 0.18) and the gpustack H100 SXM runs VS17-VS20 (vLLM 0.11, ShareGPT means); VS06 and VS13 fit the
    # serving share (efficiency.SERVING_DECODE_BANDWIDTH) and VS17 the Hopper stream limit
    # (efficiency.SERVING_STREAM_BYTES_PER_SM_CYCLE), so they are calibration rows
    a10g = {f"VS{i:02d}" for i in range(8, 15)} - {"VS13"}
    assert summarised == a10g | {"VS18", "VS19", "VS20"}
    bands = band_rows(cases.values())
    assert {c.id for c in bands[(DECODE, "vllm >= 0.14")]} == a10g
    assert {c.id for c in bands[(BATCHED, "vllm 0.8-0.13")]} == {"VS18", "VS19", "VS20"}
    assert (DECODE, "vllm 0.8-0.13") not in bands  # no summarised row: its estimates take the pooled band


def test_v1_host_step_follows_from_its_row() -> None:
    """VLLM_V1_HOST_STEP_SECONDS is VS07's measured time per token: its device step is far below it, so with eq. 14
    the host step is the step (whatever VS07's concurrency between 1 and 16, which its benchmark does not fix)."""
    r = _rows()[VLLM_V1_CALIBRATION]
    measured = _measured_step(r)
    for c in (1, int(r["concurrency"]), 16):
        assert _device_step({**r, "concurrency": str(c)}) < 0.5 * measured
    assert E.VLLM_V1_HOST_STEP_SECONDS.expected == pytest.approx(measured, rel=1e-9)
    case = next(c for c in vllm_serving_cases() if c.id == VLLM_V1_CALIBRATION)
    assert case.error == pytest.approx(0.0, abs=1e-9) and "host-bound" in case.note


def test_held_out_rows_are_device_bound_so_the_host_step_does_not_move_them() -> None:
    """Nothing held out tests the host value: every other row's device step is longer than it, and its estimate with
    the engine's rule equals the device step alone."""
    host = E.VLLM_V1_HOST_STEP_SECONDS.expected
    cases = {c.id: c for c in vllm_serving_cases()}
    for rid, r in _rows().items():
        if rid == VLLM_V1_CALIBRATION:
            continue
        device = _device_step(r)
        assert device > host, rid
        c = cases[rid]
        n = int(r["concurrency"])
        assert c.predicted == pytest.approx(n / device, rel=1e-9), rid


def test_an_added_constant_per_step_does_not_explain_every_row() -> None:
    """Why no constant is added to current vLLM's device step (as V0's host time was): at one sequence, with the
    serving share and the Hopper stream limit fitted (efficiency.SERVING_DECODE_BANDWIDTH,
    SERVING_STREAM_BYTES_PER_SM_CYCLE), the H100 row VS17 is exact and the RTX A6000 row VS03 is predicted 13 % slower
    than measured, and a constant >= 0 can only slow a prediction. The constant that made VS17 exact before the stream
    limit, 0.77 ms, pushes VS03 a further 2 points out and leaves VS07 (host-bound) far off: one added constant cannot
    hold VS03, VS17 and VS07 together, while eq. 14 with the V1 host step holds VS07 and moves no device-bound row."""
    rows = _rows()
    err = {rid: _measured_step(rows[rid]) / _device_step(rows[rid]) - 1 for rid in rows}
    assert abs(err["VS17"]) < 2e-3  # the stream limit's own row
    assert err["VS03"] < -0.10  # measured faster than the device step
    k = 0.77e-3

    def with_k(rid: str) -> float:
        return _measured_step(rows[rid]) / (_device_step(rows[rid]) + k) - 1

    assert with_k("VS17") < -0.08  # the constant now overshoots the H100 row
    assert abs(with_k("VS03")) > abs(err["VS03"]) + 0.02  # the A6000 row moves out
    assert with_k(VLLM_V1_CALIBRATION) > 0.5  # and the host-bound row stays far off


def test_static_batch_rows_get_the_v0_rule_from_their_release() -> None:
    """The VB rows state releases before 0.6: the version table gives them V0's serial step, the same number the
    calibration test re-derives; no validation-only parameter."""
    with (data_dir() / "vllm_benchmark_latency.csv").open(newline="") as f:
        versions = {r["id"]: r["engine_version"] for r in csv.DictReader(f)}
    for rid, v in versions.items():
        rule = step_host("vllm", v)
        assert rule is not None and rule.mode == "serial" and rule.seconds == E.VLLM_V0_STEP_SECONDS.expected, rid
    given = {c.id: c.predicted for c in vllm_latency_cases(engine_step_seconds=E.VLLM_V0_STEP_SECONDS.expected)}
    assert {c.id: c.predicted for c in vllm_latency_cases()} == given


def test_fit_and_validation_use_one_rule() -> None:
    """fit (CLI, web, recommend, plan) asks the same table with the current release: Qwen3-0.6B on an H100 is
    host-bound at vLLM's host step, named in the assumptions; the V1 synchronous releases and SGLang name the
    omission and warn; V0 adds its serial step."""
    spec = find("qwen3-0.6b").spec()
    now = fit(spec, "h100-sxm", engine="vllm", context=640, output_tokens=128)
    assert now.speed is not None and now.speed.decode is not None
    assert now.speed.decode.seconds == pytest.approx(E.VLLM_V1_HOST_STEP_SECONDS.expected)
    assert now.speed.decode.bound == "host"
    named = {a.name: a for a in now.speed.assumptions}
    assert named["vllm_host_seconds_per_step"].value == E.VLLM_V1_HOST_STEP_SECONDS.expected
    assert "eq. 14" in named["vllm_host_seconds_per_step"].why
    assert step_host("vllm") == step_host("vllm", CURRENT_VERSION["vllm"])
    sync = fit(spec, "h100-sxm", engine="vllm", engine_version="0.10.1", context=640, output_tokens=128)
    assert sync.speed is not None and sync.speed.decode is not None
    assert sync.speed.decode.seconds < 1e-3 and any("not established" in w for w in sync.speed.warnings)
    assert "serving_sm_stream_limit" in {a.name for a in sync.speed.assumptions}  # a stream-limited release
    v0 = fit(spec, "h100-sxm", engine="vllm", engine_version="0.4.1", context=640, output_tokens=128)
    v06 = fit(spec, "h100-sxm", engine="vllm", engine_version="0.6.3", context=640, output_tokens=128)
    assert v0.speed is not None and v0.speed.decode is not None and v06.speed is not None and v06.speed.decode
    assert v0.speed.decode.seconds - E.VLLM_V0_STEP_SECONDS.expected == pytest.approx(
        v06.speed.decode.seconds - E.VLLM_V06_STEP_SECONDS.expected)  # one device step, each release's serial step
    sg = fit(spec, "h100-sxm", engine="sglang", context=640, output_tokens=128)
    assert sg.speed is not None and any("SGLang" in w and "not established" in w for w in sg.speed.warnings)
    for bad in ("abc", "1"):
        with pytest.raises(InputError, match="engine_version must look like"):
            fit(spec, "h100-sxm", engine="vllm", engine_version=bad)
    with pytest.raises(InputError, match="engine_version applies to engine vllm or sglang, not llamacpp"):
        fit(spec, "h100-sxm", engine="llamacpp", engine_version="0.19")


def test_the_version_table_covers_every_release_once() -> None:
    """Per engine, the rows tile the releases from 0.0 upwards with no gap or overlap, the last open-ended."""
    for engine in {r.engine for r in STEP_HOST}:
        rows = sorted((r for r in STEP_HOST if r.engine == engine), key=lambda r: r.first)
        assert rows[0].first == (0, 0) and rows[-1].until is None
        for a, b in zip(rows[:-1], rows[1:], strict=True):
            assert a.until == b.first
