"""The tensor-parallel layout fit chooses (the fastest that fits at the stated load, estimate/fit.py) is one answer
through every face: /fit byte for byte the CLI's, with the Python API's degree and tokens/s; /recommend's option on
the same machine; /plan's hardware (one deployment: its typical load timed on the layout chosen for the peak).
Which layout is fastest is tested against the public speed API in tests/cli/test_fit_fastest_tensor_parallel.py."""

from __future__ import annotations

import pytest
from web_api_helpers import run_cli

from llmsizer import fit

pytest.importorskip("httpx")
pytest.importorskip("fastapi")

MODEL, TARGET = "llama-3.1-8b", "aws-p4d.24xlarge"  # 8 x A100 over NVLink: TP 8 at 4 users, a smaller TP at 256
# (8 x L40S over PCIe, aws-g6e.48xlarge, takes TP 4 x 2 already at 4 users: TP 8 crosses two PCIe islands, review25 D4)
REQUEST = """jobs:
  - name: chat
    kind: inference
    model: {name: llama-3.1-8b}
    engine: vllm
    traffic:
      context: 4096
      output: 256
      concurrency: {typical: 4, peak: 256}
    resources:
      instance: aws-p4d.24xlarge
"""


@pytest.mark.parametrize("conc", [4, 256])
def test_fit_is_the_cli_and_the_python_layout(client, conc: int) -> None:
    r = fit(MODEL, TARGET, concurrency=conc)
    web = client.post("/api/v1/fit", json={"model": MODEL, "device": TARGET, "concurrency": conc})
    assert web.status_code == 200, web.text
    data = web.json()
    assert (data["tensor_parallel"], data["replicas"]) == (r.tensor_parallel, r.replicas)
    assert data["tokens_per_second_total"] == r.tokens_per_second_total
    assert web.text == run_cli("fit", MODEL, "--device", TARGET, "--concurrency", str(conc), "--json").stdout


def test_layouts_differ_by_load() -> None:
    """The premise of the other tests: the two loads get two layouts."""
    assert fit(MODEL, TARGET, concurrency=4).tensor_parallel == 8
    assert fit(MODEL, TARGET, concurrency=256).tensor_parallel < 8


def test_recommend_and_plan_take_fits_layout(client) -> None:
    peak = fit(MODEL, TARGET, concurrency=256)
    rec = client.post("/api/v1/recommend", json={"model": MODEL, "concurrency": 256, "context": 4096, "top": 500})
    assert rec.status_code == 200, rec.text
    o = next(o for o in rec.json()["options"] if o["target"] == TARGET and o["weights_format"] == "bf16")
    assert o["tensor_parallel"] == peak.tensor_parallel and o["tokens_per_second"] == peak.tokens_per_second_total
    p = client.post("/api/v1/plan", json={"request": REQUEST, "today": "2026-03-02"})
    assert p.status_code == 200, p.text
    job = p.json()["jobs"][0]
    assert (job["hardware"]["tensor_parallel"], job["hardware"]["replicas"]) == (peak.tensor_parallel, peak.replicas)
    speed = {f["key"]: f["value"] for s in job["sections"] if s["key"] == "speed" for f in s["figures"]}
    typical = fit(MODEL, TARGET, concurrency=4, tensor_parallel=peak.tensor_parallel)  # the deployed layout
    assert speed["tps_total_typical"] == typical.tokens_per_second_total
    assert typical.tensor_parallel != fit(MODEL, TARGET, concurrency=4).tensor_parallel  # (not fit's own at 4)
