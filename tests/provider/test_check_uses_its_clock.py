"""`capacity check --now` is the check's one clock (render7 #5): the plan it places was made with the wall clock's
date (`make_plan` without ``today``), so a date deadline without a start counted from the day the command ran, and
the hardware suggested to meet it (and with it the "other device type" and "start later: from DATE" suggestions)
changed from one day to the next for the same request and the same --now. The truth compared with is `llmsizer plan
--today` of the same day, the command that owns the plan. The request names no hardware, so the check sizes the job
on the inventory's own devices (placement.py on_inventory): its answer is `plan --today` of the request naming the
device and count the check chose."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_capture import run

ROOT = Path(__file__).resolve().parents[2]
INV = str(ROOT / "examples" / "provider" / "inventory.yaml")

# no resources named: the plan suggests the hardware that meets the deadline, counted from the plan's day
REQUEST = """\
version: 1
jobs:
  - name: ft
    kind: training
    model: {name: llama-3.1-8b}
    method: lora
    settings: {seq_len: 2048}
    dataset: {tokens: 2B tokens, size: 10 GB}
    resources: {pool: pretraining-cluster}
    deadline: 2031-03-01
"""


@pytest.mark.parametrize("day", ["2031-02-27", "2030-06-01"])
def test_the_check_plans_on_the_day_of_its_now(tmp_path: Path, day: str) -> None:
    req = tmp_path / "req.yaml"
    req.write_text(REQUEST)
    code, out, err = run("capacity", "check", str(req), "--inventory", INV, "--no-db", "--now", day, "--json")
    assert code in (0, 1), err
    need = json.loads(out)["jobs"][0]["need"]
    assert need["deadline"] == "2031-03-01T00:00:00" and need["start"] == f"{day}T00:00:00"
    named = tmp_path / "named.yaml"
    named.write_text(REQUEST.replace("resources: {pool: pretraining-cluster}", "resources: {pool: pretraining-cluster, "
                                     f"device: {need['device']}, count: {need['devices']}}}"))
    code, out, err = run("plan", str(named), "--today", day, "--json")
    assert code in (0, 1), err
    job = json.loads(out)["jobs"][0]
    assert (job["hardware"]["device"], job["hardware"]["count"]) == (need["device"], need["devices"])
    assert need["seconds"] == pytest.approx(job["facts"]["seconds"], rel=1e-9)


def test_two_days_two_answers_so_the_clock_matters(tmp_path: Path) -> None:
    """The request above is one whose plan depends on the day (else the test above could not fail): two days before
    the deadline the suggested hardware differs from the one nine months before."""
    req = tmp_path / "req.yaml"
    req.write_text(REQUEST)
    near, far = (json.loads(run("plan", str(req), "--today", d, "--json")[1])["jobs"][0]["hardware"]
                 for d in ("2031-02-27", "2030-06-01"))
    assert (near["device"], near["count"]) != (far["device"], far["count"])
    # and so does the check's answer on the inventory: 2 x h100-sxm to meet the deadline two days out, 1 far out
    checks = [json.loads(run("capacity", "check", str(req), "--inventory", INV, "--no-db", "--now", d, "--json")[1])
              ["jobs"][0]["need"] for d in ("2031-02-27", "2030-06-01")]
    assert checks[0]["devices"] > checks[1]["devices"]
