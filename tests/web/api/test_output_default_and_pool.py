"""One answer between the web calculator and a request file (notes/note7.md, "Noticed and left alone"):

- output tokens: the calculator left empty used 0 generated tokens (the whole context as the prompt) while a request
  needs at least 1 and the plan took min(256, context / 2); now both take ``specs/workload.py``
  ``default_output_tokens``, so a transformers service gets the same memory on both;
- vLLM / SGLang: the calculator showed the engine's whole reservation, the plan the workload's need; now both carry
  both, labelled, from the same estimate (the reservation: the fit's device total; the need: ``workload_bytes``).

Each test failed before the change."""

from __future__ import annotations

import pytest

pytest.importorskip("httpx")
pytest.importorskip("fastapi")

GiB = 2**30
PARAMS_8B = 8_030_261_248  # Llama-3.1-8B (exact, tests/catalog against transformers on the meta device)
KV_PER_TOKEN_8B = 2 * 32 * 8 * 128 * 2  # K and V x 32 layers x 8 KV heads x head_dim 128 x 2 B (bf16): config.json

REQUEST = """jobs:
  - name: chat
    kind: inference
    model: {{name: llama-3.1-8b}}
    engine: {engine}
    traffic:
      context: 8192
      concurrency: 4
    resources:
      device: h100-sxm
"""


def plan_job(client, engine: str) -> dict:
    r = client.post("/api/v1/plan", json={"request": REQUEST.format(engine=engine), "today": "2026-03-02"})
    assert r.status_code == 200, r.text
    return r.json()["jobs"][0]


def figure(job: dict, section: str, key: str):
    sec = next(s for s in job["sections"] if s["key"] == section)
    return next((f["value"] for f in sec["figures"] if f["key"] == key), None)


def calculator(client, engine: str) -> dict:
    """The calculator's request for the same service (its form: output tokens left empty)."""
    r = client.post("/api/v1/infer", json={"model": "llama-3.1-8b", "engine": engine, "context": "8192",
                                           "concurrency": 4, "device": "h100-sxm"})
    assert r.status_code == 200, r.text
    return r.json()


def test_empty_output_tokens_is_the_requests_default(client) -> None:
    calc = calculator(client, "transformers")
    job = plan_job(client, "transformers")
    out_calc = next(a["value"] for a in calc["assumptions"] if a["name"] == "output_tokens")
    out_plan = next(a["value"] for a in job["assumptions"] if a["name"] == "output")
    assert out_calc == out_plan >= 1  # the one default (an output of 0 is prefill only, given on purpose)
    assert calc["totals"]["device"]["bytes"] == figure(job, "memory", "need_peak")
    choices = client.get("/pages/choices.json").json()
    assert choices["defaults"]["output_tokens"] == "min(256, context / 2)"


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_pool_engines_show_reservation_and_need_on_both(client, engine: str) -> None:
    calc = calculator(client, engine)
    job = plan_job(client, engine)
    reserved, need = calc["totals"]["device"]["bytes"], calc["details"]["workload_bytes"]
    assert figure(job, "memory", "reserved") == reserved
    assert figure(job, "memory", "need_peak") == need
    # independent bounds: the need holds the bf16 weights and the KV of 4 x 8192 tokens and is below the reservation
    assert PARAMS_8B * 2 + KV_PER_TOKEN_8B * 4 * 8192 < need < reserved
    assert reserved > 0.8 * 80 * 10**9 * 0.9  # the engine's pool fills its share of the 80 GB card
    # the plan's report labels the reservation beside the need
    md = client.post("/api/v1/plan", json={"request": REQUEST.format(engine=engine), "today": "2026-03-02",
                                           "format": "md"})
    assert md.status_code == 200 and "| reserved per device (" in md.text
