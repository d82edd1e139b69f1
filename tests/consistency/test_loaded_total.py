"""Every serving total follows the loaded figures (review6 #1): at C requests each user gets at most the per-user rate,
so C users together get at most C x that rate -- whatever the engine, the concurrency and the surface. Before the
fix the total was the decode of the C sequences with no prompt competing (C / t_d) while the per-user rate and the
TTFT were loaded: `fit llama-3.1-8b --device h100-sxm --engine vllm --context 4096 --concurrency 64 --output-tokens
256` said 3,240.7 tokens/s in total against 26.0 per user (64 x 26.0 = 1,665), and recommend's $/M tokens, the
replicas for a throughput target, plan's totals and the web pages took the 3,240.7.

The bound is physics, not llmsizer: each user receives at most one token per step it sees; the total a replica
delivers at C requests is requests/s x output tokens (Little's law over a request's TTFT and its N tokens), which
counts each request's TTFT too. ``infer`` states no speed (memory only), so it has no total to check.
"""

from __future__ import annotations

import math

import pytest

from cli_capture import run, run_json
from llmsizer import fit
from llmsizer.recommend import Constraints, recommend_inference

MODEL = "llama-3.1-8b"
CASES = [  # (device, engine, weights): the continuous-batching engines, modelled under load, and a static batch
    ("h100-sxm", "vllm", None), ("h100-sxm", "sglang", None), ("l40s", "llamacpp", "q4_k_m"),
    ("h100-sxm", "transformers", None)]
CONCURRENCY = [1, 8, 48]
ROUND = 1e-9  # relative: the bound holds exactly up to float rounding


def _bound(total: float, users: int, per_user: float) -> None:
    assert total <= users * per_user * (1 + ROUND), (total, users, per_user)


@pytest.mark.parametrize(("device", "engine", "weights"), CASES)
@pytest.mark.parametrize("conc", CONCURRENCY)
def test_fit_total_within_users_times_per_user(device: str, engine: str, weights: str | None, conc: int) -> None:
    """Python and the CLI's --json: the total is at most the users' per-user rates; where the load is modelled it is
    the loaded output rate, and the decode-only rate (C / t_d, from the decode step the JSON states) keeps its own
    name."""
    r = fit(MODEL, device, 1, engine=engine, weights=weights, context=4096, concurrency=conc, output_tokens=256)
    sp = r.speed
    assert r.fits and sp is not None and r.tokens_per_second_total is not None
    _bound(r.tokens_per_second_total, conc, sp.tokens_per_second_per_user)
    assert sp.decode is not None
    assert sp.decode_tokens_per_second == pytest.approx(sp.concurrency / sp.decode.seconds, rel=1e-12)
    if sp.load is not None:  # requests/s x output tokens (Little's law), below the decode with no prompt competing
        assert sp.tokens_per_second == pytest.approx(sp.load["requests_per_second"] * 256, rel=1e-12)
        assert sp.tokens_per_second < sp.decode_tokens_per_second
    code, j = run_json("fit", MODEL, "--device", device, "--engine", engine, *(["--weights", weights] if weights else []),
                       "--context", "4096", "--concurrency", str(conc), "--output-tokens", "256")
    assert code == 0 and j["tokens_per_second_total"] == r.tokens_per_second_total
    s = j["speed"]
    _bound(j["tokens_per_second_total"], conc, s["tokens_per_second_per_user"])
    assert s["decode_tokens_per_second"] == pytest.approx(s["concurrency"] / s["decode"]["seconds"], rel=1e-12)
    ranges = s["calibrated_ranges"]  # the calibrated decode band brackets the decode-only rate its rows measured
    if ranges["decode_tokens_per_second"] is not None:
        lo, hi = ranges["decode_tokens_per_second"]
        assert lo <= s["decode_tokens_per_second"] * (1 + ROUND) and hi >= s["decode_tokens_per_second"] * (1 - ROUND)


def test_the_reported_case_and_its_cost() -> None:
    """The review's case: 64 requests on one H100 under vLLM; $/M tokens is the hourly price over the loaded total."""
    r = fit(MODEL, "aws-p5.4xlarge", engine="vllm", context=4096, concurrency=64, output_tokens=256)
    sp = r.speed
    assert sp is not None and sp.load is not None and r.tokens_per_second_total is not None
    _bound(r.tokens_per_second_total, 64, sp.tokens_per_second_per_user)
    assert r.tokens_per_second_total < 0.6 * sp.decode_tokens_per_second  # the prompts take ~half the device time
    price = r.cost["price_per_hour"]
    assert price and r.cost["per_million_tokens"] == pytest.approx(price / (r.tokens_per_second_total * 3600) * 1e6)
    code, text, _ = run("fit", MODEL, "--device", "h100-sxm", "--engine", "vllm", "--context", "4096",
                        "--concurrency", "64", "--output-tokens", "256")
    assert code == 0
    rows = {ln.split("  ")[0]: ln for ln in text.splitlines()}
    assert "decode x64 only (no prompts)" in rows and f"{sp.decode_tokens_per_second:,.1f} tokens/s" in \
        rows["decode x64 only (no prompts)"]
    assert f"{sp.tokens_per_second:,.1f} tokens/s in all, TTFT counted (26.0 per running sequence)" in \
        rows["at 64 requests"]


def test_one_request_row_says_what_its_total_is() -> None:
    """At one request nothing arrives with it, and its total is below its decode rate: a request of N output tokens
    takes its TTFT plus N / the decode rate, so N over that time is less than the decode rate (Little's law with one
    request in flight). The row shows the decode rate first and names the total as one that counts the TTFT
    (probe20 C1: "2.2 tokens/s output (decoding at 23.2 ...)" read as a mistake)."""
    argv = ("fit", "qwen2.5-0.5b", "--device", "l4", "--engine", "vllm", "--concurrency", "1", "--context", "2048")
    code, text, _ = run(*argv)
    assert code == 0
    _, data = run_json(*argv)
    sp = data["speed"]
    n, per_user, total, ttft = (sp["output_tokens"], sp["tokens_per_second_per_user"], data["tokens_per_second_total"],
                                sp["ttft_seconds"])
    assert n / total == pytest.approx(ttft + n / per_user, rel=1e-9)  # the TTFT is what the total has more of
    assert total < per_user
    row = next(ln for ln in text.splitlines() if ln.startswith("at 1 request"))
    assert "arriving together" not in row
    decode, counted = f"decoding at {per_user:,.1f} tokens/s", f"{total:,.1f} tokens/s total incl. TTFT"
    assert decode in row and counted in row and row.index(decode) < row.index(counted)


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_recommend_options_and_replicas_follow_the_loaded_total(engine: str) -> None:
    """recommend: every option's total within its users' per-user rates; a throughput target gets enough replicas of
    the loaded total (each replica's fit at its share of the users delivers target / replicas or more)."""
    rec = recommend_inference(MODEL, context=4096, concurrency=64, output_tokens=256, engine=engine,
                              constraints=Constraints(providers=("aws",)))
    meets = [o for o in rec.options if o.status in ("meets", "chosen") and o.tokens_per_second]
    assert meets
    for o in meets:
        _bound(o.tokens_per_second, 64, o.tokens_per_second_per_user)
        if o.price_per_hour and o.cost_per_million_tokens:
            assert o.cost_per_million_tokens == pytest.approx(o.price_per_hour / (o.tokens_per_second * 3600) * 1e6)
    one = fit(MODEL, "aws-p5.4xlarge", engine=engine, context=4096, concurrency=64, output_tokens=256)
    assert one.tokens_per_second_total is not None
    target = 2.5 * one.tokens_per_second_total  # more than two instances' loaded output
    rec = recommend_inference(MODEL, context=4096, concurrency=64, output_tokens=256, engine=engine,
                              constraints=Constraints(providers=("aws",), tokens_per_second=target))
    o = next(o for o in rec.options if o.target == "aws-p5.4xlarge" and o.status in ("meets", "chosen"))
    assert o.tokens_per_second is not None and o.tokens_per_second >= target
    users = math.ceil(64 / o.instances)  # each instance's share of the users, as fit sizes it
    each = fit(MODEL, "aws-p5.4xlarge", engine=engine, weights=o.weights_format, context=4096, concurrency=users,
               output_tokens=256)
    assert each.tokens_per_second_total is not None and each.speed is not None
    assert each.tokens_per_second_total * o.instances >= target * (1 - ROUND)
    _bound(o.tokens_per_second, 64, each.speed.tokens_per_second_per_user)


@pytest.fixture(scope="module")
def client():
    pytest.importorskip("httpx")
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from llmsizer.web.app import create_app
    with TestClient(create_app(), raise_server_exceptions=False) as c:
        yield c


REQUEST = """jobs:
  - name: chat
    kind: inference
    model: {{name: llama-3.1-8b}}
    engine: {engine}
    traffic:
      context: 4096
      output: 256
      concurrency: {{typical: {typ}, peak: 64}}
    resources:
      device: h100-sxm
"""


@pytest.mark.parametrize(("engine", "typ"), [("vllm", 16), ("vllm", 64), ("sglang", 8)])
def test_plan_and_web_totals_within_users_times_per_user(client, engine: str, typ: int) -> None:
    """plan (through the web API, the same composition as the Python plan): the typical total and the peak output per
    replica within the users' per-user rates, and the peak one fit's loaded total; /fit on the web is the CLI's."""
    p = client.post("/api/v1/plan", json={"request": REQUEST.format(engine=engine, typ=typ), "today": "2026-03-02"})
    assert p.status_code == 200, p.text
    job = p.json()["jobs"][0]
    speed = {f["key"]: f["value"] for s in job["sections"] if s["key"] == "speed" for f in s["figures"]}
    _bound(speed["tps_total_typical"], typ, speed["tps_user_typical"])
    _bound(speed["tokens_per_second_peak"], 64, speed["tps_user_peak"])
    peak = fit(MODEL, "h100-sxm", engine=engine, context=4096, concurrency=64, output_tokens=256)
    assert peak.speed is not None and speed["tokens_per_second_peak"] == pytest.approx(peak.speed.tokens_per_second)
    w = client.post("/api/v1/fit", json={"model": MODEL, "device": "h100-sxm", "engine": engine, "context": 4096,
                                         "concurrency": 64, "output_tokens": 256})
    assert w.status_code == 200, w.text
    data = w.json()
    _bound(data["tokens_per_second_total"], 64, data["speed"]["tokens_per_second_per_user"])
    assert data["tokens_per_second_total"] == peak.tokens_per_second_total
    rec = client.post("/api/v1/recommend", json={"model": MODEL, "concurrency": 64, "context": 4096,
                                                 "output_tokens": 256, "engine": engine, "top": 50})
    assert rec.status_code == 200, rec.text
    for o in rec.json()["options"]:
        if o["status"] in ("meets", "chosen") and o["tokens_per_second"]:
            _bound(o["tokens_per_second"], 64, o["tokens_per_second_per_user"])


def test_plan_latency_check_counts_the_queue_wait_as_recommend_does() -> None:
    """review6 #10: plan's latency-ttft check compares a request's first token at the peak -- its TTFT plus the wait
    of a queued request (formulas/serving_queue.py eq. Q3) -- as recommend and the format search do. 600 requests of
    512 tokens on one L4 under vLLM: max_num_seqs 256 run, 344 wait; a limit between the running request's TTFT and
    TTFT + wait is missed (before: the check compared the TTFT alone and stayed quiet)."""
    from llmsizer.plan import make_plan
    from llmsizer.request import parse_request

    r = fit("qwen3-0.6b", "l4", engine="vllm", context=512, concurrency=600, output_tokens=200)
    sp, wait = r.speed, r.details["queue_wait_seconds"]
    assert r.fits and r.details["queued_sequences"] > 0 and sp is not None and sp.ttft_seconds is not None and wait
    limit = sp.ttft_seconds + wait / 2
    text = f"""version: 1
jobs:
  - name: chat
    kind: inference
    model: {{name: qwen3-0.6b}}
    engine: vllm
    traffic: {{concurrency: {{typical: 600, peak: 600}}, context: 512, output: 200}}
    latency: {{ttft: {limit:.6f} s}}
    resources: {{device: l4, count: 1}}
"""
    plan = make_plan(parse_request(text, source="t.yaml"), alternatives=False)
    fired = [c for c in plan.checks if c.id == "latency-ttft"]
    assert len(fired) == 1, [c.id for c in plan.checks]
    assert f"about {sp.ttft_seconds + wait:.2f} s at the peak load ({wait:.2f} s of it waiting" in fired[0].message
    # recommend's ladder walk judges the same fit with the same rule (estimate/format_search.py latency_failures)
    from llmsizer.estimate.format_search import LatencyLimits, latency_failures
    from llmsizer.units import (
        compared_seconds,  # the pair at decimals that keep its order (tests/test_units_compared.py)
    )
    said, bound = compared_seconds(sp.ttft_seconds + wait, limit)
    assert latency_failures(sp, LatencyLimits(max_ttft=limit), wait) == [
        f"TTFT {said} > {bound} ({wait:.2f} s of it waiting in the engine's queue)"]
