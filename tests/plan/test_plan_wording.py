"""Two words of the plan (smalls3 #7): "$1,359 over 1 months" (the count's plural), and a request error that named
its field twice, "tensor_parallel: tensor_parallel 3 does not divide the 4 devices"."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli_capture import run

SERVICE = """\
version: 1
jobs:
  - name: chat
    kind: inference
    model: {{name: llama-3.1-8b}}
    traffic:
      concurrency: {{typical: 2, peak: 4}}
    service: {{duration: {months}}}
    resources: {{device: l4, price_per_hour: $1/h}}
"""


@pytest.mark.parametrize("months, words", [("1 month", "over 1 month)"), ("3 months", "over 3 months)")])
def test_the_months_of_service_agree_with_their_count(tmp_path: Path, months: str, words: str) -> None:
    req = tmp_path / "req.yaml"
    req.write_text(SERVICE.format(months=months))
    code, out, err = run("plan", str(req), "--no-alternatives")
    assert code == 0, err
    cost = next(x for x in out.splitlines() if x.strip().startswith("cost "))
    assert words in cost


def test_a_refused_field_is_named_once_at_its_line(tmp_path: Path) -> None:
    req = tmp_path / "tp.yaml"
    req.write_text("version: 1\njobs:\n  - name: chat\n    kind: inference\n    model: {name: llama-3.1-8b}\n"
                   "    tensor_parallel: 3\n    traffic: {concurrency: {typical: 2, peak: 4}}\n"
                   "    resources: {device: h100-sxm, count: 4}\n")
    code, _, err = run("plan", str(req), "--no-alternatives")
    assert code == 2
    assert err == (f"llmsizer: error: {req}:6: job 'chat' (inference): tensor_parallel 3 does not divide the 4 devices "
                   "(the others run replicas of it): give a divisor of the count, or leave it out for fit's choice\n")
