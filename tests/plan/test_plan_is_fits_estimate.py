"""A serving plan on named devices renders fit's own answer for them: the same memory estimate (every component,
the totals, the assumptions and warnings), the need fit's verdict compares under fit's key name
(``verdict_need_per_device``; ``memory_need`` its deprecated alias), and the speed assumptions and calibrated ranges
fit prints for the same numbers. Each assumption is named once.

The setups are the onecheck probe's q1 (llama-3.1-8b on vLLM, where the pool is larger than the workload's need),
q4 (qwen3-30b-a3b on SGLang, which holds a runtime reserve outside its pool, and does not fit in bf16: with no
quantization the plan serves the format fit names for the device, ``fits_at``, so fit is asked at it) and q12 (the
hybrid Mamba MoE nemotron-3-nano on SGLang, which adds a recurrent-state pool), each asked once as a request file
(``plan``) and once as flags (``fit``).

Independent of either surface's totals, the breakdown explains both numbers the plan states: the items add up to
the device total, and the device total less the KV pool plus the KV cache the workload's sequences need
(``kv_needed_bytes``: sequences x context x KV bytes per token) is the workload's need.
"""

from __future__ import annotations

import json

import pytest

from cli.cli_run import answer
from llmsizer.plan import make_plan
from llmsizer.render.markdown import render_markdown
from llmsizer.request import parse_request

SETUPS = {
    "q1": ("llama-3.1-8b", None, 8192),
    "q4": ("qwen3-30b-a3b", "sglang", 16384),
    "q12": ("nvidia-nemotron-3-nano-30b-a3b-bf16", "sglang", 32768),
}
CONCURRENCY = 16


def _request(model: str, engine: str | None, context: int) -> str:
    return (f"version: 1\ntitle: probe\njobs:\n- name: j\n  kind: inference\n  model: {{name: {model}}}\n"
            + (f"  engine: {engine}\n" if engine else "")
            + "  resources: {device: h100-sxm, count: 1}\n"
            f"  traffic:\n    concurrency: {{peak: {CONCURRENCY}, typical: {CONCURRENCY}}}\n"
            f"    context: {{peak: {context}, typical: {context}}}\n")


@pytest.fixture(scope="module", params=sorted(SETUPS))
def setup(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple:
    model, engine, context = SETUPS[request.param]
    path = tmp_path_factory.mktemp(request.param) / "r.yaml"
    path.write_text(_request(model, engine, context))
    plan = make_plan(parse_request(path.read_text(), source=str(path)), alternatives=False)
    return request.param, plan, model, engine, context


def _fit(model: str, engine: str | None, context: int, capsys: pytest.CaptureFixture[str]) -> dict:
    """fit's answer for the job; where the default format does not fit, fit at the format it names (``fits_at``),
    the one a plan with no ``quantization`` serves (request template: "the plan may choose a format")."""
    flags = ["fit", model, "--device", "h100-sxm", "--context", str(context), "--concurrency", str(CONCURRENCY),
             *(["--engine", engine] if engine else [])]
    d = answer(flags, capsys)[1]
    at = d["fits_at"]
    if not d["fits"] and at and at.get("same_engine"):
        d = answer([*flags, "--weights", at["weights"]], capsys)[1]
    return d


def _items(est: dict) -> list[tuple[str, str, int]]:
    return [(i["name"], i["location"], int(i["bytes"])) for i in est["items"]]


def test_memory_is_fits_estimate(setup: tuple, capsys: pytest.CaptureFixture[str]) -> None:
    name, plan, model, engine, context = setup
    j = plan.jobs[0].to_dict()
    fit = _fit(model, engine, context, capsys)
    est, fest = j["memory_estimate"], fit["memory"]
    assert _items(est) == _items(fest)  # every component, the same bytes, under the same names
    assert est["totals"] == fest["totals"]
    device = sum(b for _, where, b in _items(est) if where == "device")
    assert device == est["totals"]["device"]["bytes"] == fit["memory_per_device"] == j["facts"]["memory_per_device"]
    assert j["facts"]["budget_per_device"] == fit["budget_per_device"]
    assert j["facts"]["reserved_per_device"] == fit["reserved_per_device"]
    # the need the verdict compares: the breakdown with the KV cache the sequences need in place of the pool
    d = est["details"]
    kv_pool = sum(b for n, where, b in _items(est) if n == "kv_cache" and where == "device")
    # (q12: SGLang runs at most max_mamba_cache_size // 5 at once, the extra buffer's state slots per request,
    # estimate/inference/sglang.py eq. 4b. That bound is the MambaPool's room, memory (probe20 D1): in bf16 it admits
    # 68 // 5 = 13 of the 16, which does not fit, so fit names a smaller format and the plan serves it, as for q4;
    # there the MambaPool admits all 16)
    running = min(d["max_mamba_cache_size"] // 5, CONCURRENCY) if name == "q12" else CONCURRENCY
    if name == "q12":
        assert fest["details"]["weights_format"] != "bf16" and d["max_mamba_cache_size"] // 5 >= CONCURRENCY
    assert d["running_sequences"] == running <= CONCURRENCY
    assert d["kv_needed_bytes"] == running * context * d["kv_bytes_per_token"]
    need = j["facts"]["verdict_need_per_device"]
    assert need == device - kv_pool + d["kv_needed_bytes"] == d["workload_bytes"]
    assert j["facts"]["memory_need"] == need  # the deprecated alias, the same number
    assert j["facts"]["verdict_budget_per_device"] == j["facts"]["memory_budget"] == d["workload_budget_bytes"]
    mem = {f["key"]: f["value"] for f in j["sections"][0]["figures"]}
    assert mem["need_peak"] == need and mem["memory_per_device"] == device
    if engine == "sglang":  # the reserve outside SGLang's pool is a component, as in fit's breakdown
        assert any(n == "runtime_reserve" for n, _, _ in _items(est))
    if name == "q12":
        assert any(n == "recurrent_state_pool" for n, _, _ in _items(est))
    # fit's estimate on the named device: no "give --memory" hint, the device and its memory named
    assert est["warnings"] == fest["warnings"] and not any("--memory" in w for w in est["warnings"])
    assert {"device", "device_memory"} <= {a["name"] for a in est["assumptions"]}


def test_speed_names_fits_assumptions(setup: tuple, capsys: pytest.CaptureFixture[str]) -> None:
    _, plan, model, engine, context = setup
    jp = plan.jobs[0]
    j = jp.to_dict()
    fit = _fit(model, engine, context, capsys)
    names = [a["name"] for a in j["assumptions"]]
    assert {a["name"] for a in fit["speed"]["assumptions"]} <= set(names)
    assert {"compute_efficiency", "bandwidth_efficiency", "decode_range_band"} <= set(names)
    assert len(names) == len(set(names)), [n for n in names if names.count(n) > 1]  # each named once (context)
    assert json.loads(json.dumps(j["speed_estimate"]["calibrated_ranges"])) == fit["speed"]["calibrated_ranges"]
    lo, hi = fit["speed"]["calibrated_ranges"]["decode_tokens_per_second"]
    rng = jp.section("speed").get("decode_tokens_per_second_range_peak")
    assert rng is not None and rng.value == f"{lo:,.1f}-{hi:,.1f} tokens/s" and "coverage" in rng.formula
    md = render_markdown(plan)
    assert f"{lo:,.1f}-{hi:,.1f} tokens/s" in md and "`bandwidth_efficiency`" in md
    assert md.count("- `context` = ") == 1
