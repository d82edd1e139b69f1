"""SGLang's memory-derived bounds on running requests are its pools' room, not a running cap (probe20 D1).

SGLang 0.5.23 (the PyPI wheel; mem_cache/kv_cache_configurator.py) sizes ``max_running_requests`` in
``resolve_max_num_reqs`` (:3119-3150) from three kinds of term:

- ``estimated = max(min(int(token_capacity / context_len * 512), 4096), 2048)`` -- a band of constants, used when no
  ``--max-running-requests`` is given, else the given value ``max(1, max_running_requests // attn_dp_size)``: the
  configured cap (what a request above it waits behind);
- ``token_capacity // 2`` -- the token pool's size, memory;
- for a hybrid model ``max_mamba_cache_size // ratio`` (``ratio`` = _calculate_mamba_ratio, :3062-3088: 3 + 2
  tracking slots with the extra buffer and the overlap scheduler, the default of Nemotron-H and Qwen3-Next) -- the
  MambaPool's slots, which eq. (2b) sizes from memory (int((rest x 0.9 / 1.9 - per_req) // per_req), :3346-3386). SGLang
  itself logs "max_running_requests is capped to %d by the mamba state cache ... To raise it: increase
  --mamba-full-memory-ratio or --max-mamba-cache-size" whenever ``mamba_cap < max_num_reqs`` (``capped_by_mamba``).

So the first is a running cap (a queue behind it is no reason not to fit, as vLLM's max_num_seqs), the other two are
the pools' room: a concurrency past them does not fit, as a concurrency past vLLM's KV pool room does not. The slot
count K is worked out here by hand from NVIDIA-Nemotron-3-Nano's config.json numbers (as in
tests/estimate/test_sglang_mamba_strategy.py); only the weights' bytes, mem_fraction_static and the CUDA context are
taken from the estimate, as inputs.
"""

from __future__ import annotations

import json

import pytest

import llmsizer
from cli_capture import run_cli
from llmsizer.estimate.engines import CUDA_CONTEXT
from llmsizer.units import GiB

H100 = 80 * GiB
NANO = "nvidia-nemotron-3-nano-30b-a3b-bf16"
CONTEXT = 4096
RATIO = 3 + 2  # _calculate_mamba_ratio: 3 + get_mamba_tracking_slots(extra_buffer=True, overlap=True)


def _nano_per_req() -> int:
    # NVIDIA-Nemotron-3-Nano-30B-A3B config.json: 23 'M' (Mamba-2) layers; conv_dim = 64 x 64 + 2 x 8 x 128 = 6144,
    # conv kernel 4 (bf16 state); SSM [64 heads, 64 head_dim, 128 state] float32 (mamba_ssm_cache_dtype)
    return (6144 * (4 - 1) * 2 + 64 * 64 * 128 * 4) * 23


def _by_hand(concurrency: int, **kw):  # type: ignore[no-untyped-def]
    """(estimate, K, tokens) with K and the token pool's tokens by hand (eqs. 2b, 3; cell: 6 attention layers x
    2 KV heads x (128 + 128) x 2 B)."""
    est = llmsizer.estimate_inference(NANO, engine="sglang", memory=H100, context=CONTEXT, concurrency=concurrency, **kw)
    per_req, cell = _nano_per_req(), 6 * 2 * (128 + 128) * 2
    rest = int(est.details["mem_fraction_static"] * (H100 - CUDA_CONTEXT.expected)) - est.item("weights").bytes
    k = int((rest * 0.9 / 1.9 - per_req) // per_req)
    return est, k, (rest - (k + 1) * per_req) // cell


def test_the_mamba_bound_is_the_pools_room_and_eq4s_band_the_cap() -> None:
    est, k, tokens = _by_hand(64)
    d = est.details
    context_len = 262144  # the model's max_position_embeddings: eq. (4)'s context_len
    estimated = max(min(int(tokens / context_len * 512), 4096), 2048)
    assert d["max_mamba_cache_size"] == k and d["max_total_num_tokens"] == tokens
    # SGLang's own max_running_requests: min(estimated, tokens // 2, K // 5)
    assert d["max_running_requests"] == min(estimated, tokens // 2, k // RATIO) == k // RATIO
    # the configured cap is eq. (4)'s band alone; the room is the least of the memory terms
    assert d["running_cap"] == estimated
    assert d["max_concurrency_at_context"] == min(tokens // CONTEXT, tokens // 2, k // RATIO) == k // RATIO
    assert d["token_pool_room"] == tokens // CONTEXT > k // RATIO and d["admits_bound"] == "MambaPool"
    # 64 asked, K // 5 admitted: does not fit, naming the MambaPool; the running count is unchanged
    assert d["running_sequences"] == k // RATIO and d["fits"] is False
    assert any(w.startswith(f"does not fit: SGLang's MambaPool admits {k // RATIO} sequence(s)") for w in est.warnings)
    # the warning SGLang logs (capped_by_mamba) is given without --max-running-requests too
    assert any(f"caps max_running_requests at {k // RATIO:,} by its MambaPool" in w for w in est.warnings)


def test_the_verdict_turns_at_the_mambapools_room() -> None:
    _, k, _ = _by_hand(1)
    room = k // RATIO
    at, past = _by_hand(room)[0], _by_hand(room + 1)[0]
    assert at.details["fits"] is True and past.details["fits"] is False
    assert past.details["running_sequences"] == room  # it runs as many, the rest waiting: no longer 'fits'


def test_a_given_max_running_requests_is_a_cap_the_mambapool_still_room() -> None:
    """--max-running-requests below the MambaPool's room: a configured cap, the rest queue and it fits (as vLLM's
    max_num_seqs); above it: the MambaPool binds, which is memory, and 64 requested do not fit."""
    _, k, _ = _by_hand(1)
    room = k // RATIO
    below, _, _ = _by_hand(64, max_num_seqs=room - 1)
    assert below.details["running_cap"] == room - 1 and below.details["running_cap_name"] == "max_running_requests"
    assert below.details["fits"] is True and below.details["running_sequences"] == room - 1
    assert below.details["queued_sequences"] == 64 - (room - 1)
    above, _, _ = _by_hand(64, max_num_seqs=room + 10)
    assert above.details["running_cap"] == room + 10 and above.details["fits"] is False
    assert above.details["max_running_requests"] == room == above.details["running_sequences"]
    assert any(f"caps max_running_requests at {room:,} by its MambaPool" in w and f"max_running_requests "
               f"{room + 10:,} (given)" in w for w in above.warnings)


@pytest.mark.parametrize("concurrency", [1, 2, 3, 8, 21, 22, 64])
def test_a_hybrid_on_vllm_and_sglang_fits_in_the_order_of_their_running_counts(concurrency: int) -> None:
    """probe20 D1: Nemotron-H-56B on 2 x H100, 8k: SGLang runs K // 5 at once (its MambaPool), vLLM as many as its KV
    pool holds. The engine that runs more sequences at once must fit at every concurrency the other fits at, and
    each fits exactly up to the count it runs (it said SGLang FITS at 64 running 2, vLLM DOES NOT at 21)."""
    runs: dict[str, int] = {}
    fits: dict[str, bool] = {}
    for engine in ("sglang", "vllm"):
        top = llmsizer.fit("nemotron-h-56b-base-8k", "h100-sxm", 2, engine=engine, context=8192, concurrency=64,
                           tensor_parallel=2)
        r = llmsizer.fit("nemotron-h-56b-base-8k", "h100-sxm", 2, engine=engine, context=8192,
                         concurrency=concurrency, tensor_parallel=2)
        assert top.estimate is not None and r.estimate is not None
        runs[engine] = int(top.estimate.details["running_sequences"])
        fits[engine] = r.fits
        assert r.fits is (concurrency <= runs[engine]), engine
    assert runs["sglang"] < runs["vllm"]
    assert not fits["sglang"] or fits["vllm"]


def _cli(*extra: str) -> tuple[int, dict]:
    done = run_cli("fit", "nemotron-h-56b-base-8k", "--device", "h100-sxm", "--count", "2", "--engine", "sglang",
                   "--context", "8k", "--concurrency", "64", *extra, "--json")
    return done.returncode, json.loads(done.stdout)


def test_cli_python_and_web_give_one_answer() -> None:
    code, cli = _cli()
    r = llmsizer.fit("nemotron-h-56b-base-8k", "h100-sxm", 2, engine="sglang", context=8192, concurrency=64)
    assert r.estimate is not None
    assert code == 1 and cli["fits"] is False is r.fits
    keys = ("max_concurrency_at_context", "running_sequences", "running_cap", "admits_bound", "max_running_requests",
            "workload_bytes", "fits")
    for key in keys:
        assert cli["memory"]["details"][key] == r.estimate.details[key], key
    assert cli["memory"]["details"]["admits_bound"] == "MambaPool"
    pytest.importorskip("httpx")
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from llmsizer.web.app import create_app

    body = {"model": "nemotron-h-56b-base-8k", "device": "h100-sxm", "count": 2, "engine": "sglang",
            "context": "8k", "concurrency": 64}
    with TestClient(create_app(), raise_server_exceptions=False) as client:
        web = client.post("/api/v1/fit", json=body)
    assert web.status_code == 200, web.text
    assert web.json() == cli  # byte for byte the CLI's answer (web/API.md)


def test_the_plan_searches_a_smaller_format_where_the_mambapool_binds(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Peak 8 x 8k on 2 x H100, precision left to the plan: in bf16 SGLang's MambaPool admits 12 // 5 = 2, so bf16
    does not fit and the plan serves the format fit names; it served bf16 with 6 of 8 queued before."""
    from llmsizer.plan import make_plan
    from llmsizer.request import parse_request

    text = ("version: 1\njobs:\n  - name: chat\n    kind: inference\n    model: {name: nemotron-h-56b-base-8k}\n"
            "    engine: sglang\n    traffic:\n      concurrency: {typical: 4, peak: 8}\n"
            "      context: {typical: 8k, peak: 8k}\n      output: {typical: 300, peak: 300}\n"
            "    resources: {device: h100-sxm, count: 2}\n")
    job = make_plan(parse_request(text, source="t.yaml"), alternatives=False).jobs[0]
    def at(weights: str):  # type: ignore[no-untyped-def]
        return llmsizer.fit("nemotron-h-56b-base-8k", "h100-sxm", 2, engine="sglang", context=8192, concurrency=8,
                            weights=weights)

    bf16 = at("bf16")
    assert bf16.fits is False and bf16.estimate is not None
    assert bf16.estimate.details["max_concurrency_at_context"] == 12 // RATIO  # K 12 (probe20 D1)
    fmt = job.facts["weights_format"]
    assert fmt != "bf16" and at(fmt).fits is True
    mem = job.section("memory")
    assert mem.value("fits") is True and mem.value("running") == 8


def test_the_largest_concurrency_is_the_mambapools_room_and_says_so() -> None:
    """infer --max-concurrency: the largest concurrency that fits is K // 5 (the verdict's turn above); its note names
    the MambaPool and SGLang's remedies, not --max-running-requests (which it named before, and which cannot raise
    it)."""
    _, k, _ = _by_hand(1)
    assert llmsizer.max_concurrency(NANO, H100, engine="sglang", context=CONTEXT) == k // RATIO
    done = run_cli("infer", NANO, "--engine", "sglang", "--memory", "80GiB", "--context", str(CONTEXT),
                   "--max-concurrency", "--json")
    assert done.returncode == 0, done.stderr
    notes = json.loads(done.stdout)["reverse_notes"]
    assert any(f"({k // RATIO:,}) is what SGLang's MambaPool admits" in n for n in notes), notes
    assert not any("--max-running-requests raises it" in n for n in notes), notes


def test_the_need_exceeds_what_the_pools_offer_exactly_when_it_does_not_fit() -> None:
    """The need fit prints beside the verdict ('this workload needs X of the Y it offers') says the same as the
    verdict: SGLang's split is fixed (eq. 2b), so a MambaPool short of the s x n + 1 slots n sequences take is not
    made up by the token pool's spare room (before, 20 requests on one H100 read 'needs 78.00 GiB of the 79.65 GiB'
    beside DOES NOT FIT)."""
    _, k, _ = _by_hand(1)
    room = k // RATIO
    per_req = _nano_per_req()
    for n in (1, room, room + 1, 20, 64):
        d = _by_hand(n)[0].details
        assert (d["workload_bytes"] > d["workload_budget_bytes"]) is (not d["fits"]) is (n > room), n
        assert d["mamba_needed_bytes"] == max(k + 1, RATIO * n + 1) * per_req, n
