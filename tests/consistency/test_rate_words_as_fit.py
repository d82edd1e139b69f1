"""plan and recommend at a request rate say the deployment's requests in flight and its share of capacity as fit
does for the same deployment (probe33 D5).

`fit llama-3.1-8b --device azure-standard_nc40ads_h100_v5 --count 2 --weights fp8 --request-rate 20 --context 4k
--output-tokens 256` warns "20 requests/s is 98% of it" (near capacity, at or above 90 %) and runs 206 sequences with
about 23 more waiting for admission; plan's rate job said "peak 206 requests x 4096 tokens" (read as all in flight)
and recommend's chosen line "below its capacity". Each number below is read from fit's own answer (its JSON fields
and its warning), never from plan's or recommend's output."""

from __future__ import annotations

import re
from pathlib import Path

from cli_capture import run, run_json

RATE, CONTEXT, OUTPUT = 20, 4096, 256
TARGET = "azure-standard_nc40ads_h100_v5"  # one H100 NVL an instance
FIT = ("llama-3.1-8b", "--device", TARGET, "--count", "2", "--weights", "fp8", "--request-rate", str(RATE),
       "--context", str(CONTEXT), "--output-tokens", str(OUTPUT))

PLAN = f"""version: 1
title: d5rest rate
team: probe
contact: p@example.com
jobs:
  - name: rate-nc40
    kind: inference
    model: {{name: llama-3.1-8b}}
    quantization: fp8
    traffic:
      requests_per_second: {{typical: {RATE}/s, peak: {RATE}/s}}
      context: {{typical: {CONTEXT}, peak: {CONTEXT}}}
      output: {{typical: {OUTPUT}, peak: {OUTPUT}}}
    service: {{duration: 1 month}}
    resources: {{instance: {TARGET}, count: 2}}
"""


def _fit() -> dict:
    rc, d = run_json("fit", *FIT)
    assert rc == 0 and d["fits"] and d["replicas"] == 2, d
    return d


def test_plan_names_running_and_in_flight_as_fit(tmp_path: Path) -> None:
    d = _fit()
    load, det = d["speed"]["under_load"], d["details"]
    running, waiting = int(det["running_sequences"]), float(det["queued_sequences"])
    in_flight = float(load["in_flight"]) * d["replicas"]  # fit's mean in flight per replica, over both
    assert waiting >= 0.05 and abs(running + waiting - in_flight) < 0.1  # the premise: some wait, the split adds up
    path = tmp_path / "rate.yaml"
    path.write_text(PLAN)
    rc, out, err = run("plan", str(path))
    assert rc == 0, err
    said = (f"peak {running} requests running x {CONTEXT} tokens ({in_flight:.1f} in flight over all replicas: "
            f"{running} running, {waiting:.1f} waiting for admission)")
    assert said in out, out


def test_recommend_states_fits_share_of_capacity() -> None:
    d = _fit()
    near = d["details"]["rate_warnings"]["near_capacity"]  # fit's warning for the same deployment
    share = re.search(rf"{RATE} requests/s is (\d+)% of it", near)
    assert share is not None, near
    rc, rec = run_json("recommend", "llama-3.1-8b", "--provider", "azure", "--request-rate", str(RATE), "--context",
                       str(CONTEXT), "--output-tokens", str(OUTPUT))
    assert rc == 0, rec
    (chosen,) = [o for o in rec["options"] if o["status"] == "chosen"]
    # the premise: recommend chose fit's deployment (two copies of the instance, fp8)
    assert (chosen["target"], chosen["count"], chosen["weights_format"]) == (TARGET, 2, "fp8"), chosen
    (line,) = [r for r in chosen["reasons"] if "instances to carry" in r]
    assert f"({RATE / 2:g}/s each, {share[1]}% of its capacity, near it (at or above 90%" in line, line
    assert "below its capacity" not in line
