"""A serving plan says what fit says of the same workload: fit's speed estimate's warnings too (``FitResult
.all_warnings``). Before, `plan` dropped them: `fit qwen2.5-7b --device h100-sxm --engine transformers` warned that
eager transformers' decode is host-bound, the plan of the same job (text, --json, report) said nothing."""

from __future__ import annotations

import json

from cli_capture import run
from request.helpers import job_yaml

REQUEST = job_yaml("inference", """
model: {name: qwen2.5-7b}
precision: bf16
engine: transformers
traffic:
  concurrency: {typical: 1, peak: 1}
  context: {typical: 4k, peak: 4k}
  output: {typical: 256, peak: 256}
resources: {device: h100-sxm, count: 1}
""")


def test_the_plan_carries_fits_speed_warnings(tmp_path) -> None:
    req = tmp_path / "req.yaml"
    req.write_text(REQUEST, encoding="utf-8")
    code, out, _ = run("plan", str(req), "--json")
    assert code in (0, 1)
    plan_warnings = json.loads(out)["jobs"][0]["warnings"]
    code, out, _ = run("fit", "qwen2.5-7b", "--device", "h100-sxm", "--engine", "transformers", "--context", "4096",
                       "--output-tokens", "256", "--json")
    fit_speed = [w for w in json.loads(out)["speed"]["warnings"] if w.startswith("decode is host-bound")]
    assert fit_speed and all(w in plan_warnings for w in fit_speed)
