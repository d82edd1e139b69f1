"""probe13's provider defects (/work/notes/probe13_report.md D1, D2, D4, D8): far-future dates, the capacity check's
cost in the number of jobs, hostile values in generated scheduler commands, and `capacity import` errors citing
the input, not an inventory it never wrote."""

from __future__ import annotations

import datetime as dt
import re
import shlex
from pathlib import Path

import pytest

from llmsizer.cli.main import main
from llmsizer.provider.placement import ONGOING_END, NoFit, window_end
from llmsizer.provider.scheduler_export import Handover, blazar, slurm
from llmsizer.request.reader import RequestError, parse_request

ROOT = Path(__file__).resolve().parents[2]
INV = str(ROOT / "examples" / "provider" / "inventory.yaml")
PRE = ROOT / "examples" / "pretraining-multinode.yaml"
SC = (ROOT / "tests" / "fixtures" / "real_outputs" / "scontrol-show-node" / "a40-1gpu-slinky-k8s.txt").read_text()


def _pretrain(tmp_path: Path, start: str, deadline: str) -> Path:
    text = re.sub(r"(?m)^(\s+)start: .*$", rf"\g<1>start: {start}", PRE.read_text())
    text = re.sub(r"(?m)^(\s+)deadline: .*$", rf"\g<1>deadline: {deadline}", text)
    assert f"start: {start}" in text and f"deadline: {deadline}" in text
    out = tmp_path / "far.yaml"
    out.write_text(text)
    return out


def _one_line_error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0], err
    return err[0]


# ------------------------------------------------------------------------------------------ D1 far-future dates
@pytest.mark.parametrize("start,deadline,field", [("9999-12-30", "3 weeks", "start"),
                                                  ("9000-12-20", "3 weeks", "deadline")])
def test_far_future_dates_refused_in_one_line(tmp_path, capsys, start, deadline, field):
    # probe13 D1: start 9999-12-30 + deadline 3 weeks was accepted, then `capacity check` raised OverflowError
    req = _pretrain(tmp_path, start, deadline)
    line = _one_line_error(capsys, ["capacity", "check", str(req), "--inventory", INV, "--no-db"])
    assert line.startswith(f"llmsizer: error: {req}:") and f" {field}: " in line and "9000-12-31" in line



@pytest.mark.parametrize("argv", [["capacity", "check", str(PRE), "--inventory", INV, "--no-db", "--now",
                                   "9999-12-30T00:00"],
                                  ["plan", str(PRE), "-q", "--today", "9500-01-01"]])
def test_the_commands_own_dates_have_the_requests_bound(capsys, argv):
    # review13 D4: --now 9999-12-30 answered exit 1 "does not fit ... after 9999-01-01"; --today had no bound
    line = _one_line_error(capsys, argv)
    assert "is after 9000-12-31" in line and ("--now" in line or "--today" in line), line

def test_a_service_duration_past_the_latest_date_is_refused():
    text = """
jobs:
  - {name: chat, kind: inference, model: {name: qwen2.5-0.5b}, start: 9000-06-01,
     traffic: {concurrency: 2, context: 4k}, service: {duration: 2 years}}
"""
    with pytest.raises(RequestError, match=r"<request>:4: .*service\.duration: the service from 9000-06-01 ends "
                                           r"after 9000-12-31"):
        parse_request(text)


def test_moments_past_the_calendar_do_not_overflow():
    from llmsizer.provider.placement import moment_after
    far = dt.datetime(9999, 12, 1)  # a start an older store may hold
    assert moment_after(far, 365 * 86400.0, dt.datetime.max) == dt.datetime.max
    assert moment_after(dt.datetime(2026, 1, 1), 1e30) == ONGOING_END
    assert moment_after(dt.datetime(2026, 1, 1), 60.0) == dt.datetime(2026, 1, 1, 0, 1)
    need = type("N", (), {"ongoing": False, "seconds": 1e15})()  # a run of ~30 million years
    with pytest.raises(NoFit) as e:
        window_end(need, dt.datetime(2026, 1, 1))  # type: ignore[arg-type]
    assert e.value.binding == "duration" and not e.value.waits
    h = Handover("abc", "svc", far, ONGOING_END, ("n1",), 1, "h100-sxm")
    assert "--end-date '9999-12-31 23:59'" in blazar(h)  # raised OverflowError at scheduler_export.py:115


# ------------------------------------------------------------------------------------------ D2 plan once
def test_capacity_check_plans_the_request_once(tmp_path, capsys, monkeypatch):
    pytest.importorskip("sqlalchemy")
    import llmsizer.plan.compose as compose
    jobs = 6
    req = tmp_path / "many.yaml"
    req.write_text("version: 1\njobs:\n" + "".join(
        f"  - {{name: j{i}, kind: inference, model: {{name: llama-3.1-8b}}, traffic: {{concurrency: 1, context: 8k}}}}\n"
        for i in range(jobs)))
    calls = {"make_plan": 0, "plan_inference": 0}
    real_make, real_inf = compose.make_plan, compose.plan_inference

    def make(*a, **k):
        calls["make_plan"] += 1
        return real_make(*a, **k)

    def inf(*a, **k):
        calls["plan_inference"] += 1
        return real_inf(*a, **k)
    monkeypatch.setattr(compose, "make_plan", make)
    monkeypatch.setattr("llmsizer.plan.make_plan", make)
    monkeypatch.setattr(compose, "plan_inference", inf)
    assert main(["capacity", "check", str(req), "--inventory", INV, "--no-db", "--now", "2026-12-01"]) in (0, 1)
    assert "j5 (inference)" in capsys.readouterr().out
    # each job planned once for the request and once on the inventory's device type (no job names hardware): was
    # 1 + 6 make_plan calls, each planning all 6 jobs (42 plan_inference calls)
    assert calls == {"make_plan": 1, "plan_inference": 2 * jobs}


# ------------------------------------------------------------------------------------------ D4 generated commands
HOSTILE = ["bob;rm -rf ~", "a\nb ReservationName=evil", "x' y \"z\" $(id) `id`", "a b"]


@pytest.mark.parametrize("user", HOSTILE)
def test_slurm_export_quotes_every_value(user):
    h = Handover("abc123", "svc", dt.datetime(2026, 2, 1), dt.datetime(2026, 2, 8), ("n1", "n$(id)"), 4,
                 "h100-sxm", "team", user)
    assert shlex.split(slurm(h), comments=True) == [
        "TZ=UTC0", "scontrol", "create", "reservation", "ReservationName=llmsizer-svc-abc123", "StartTime=2026-02-01T00:00:00",
        "Duration=10080", "Nodes=n1,n$(id)", f"Users={user}",
        "sbatch", "--reservation=llmsizer-svc-abc123", "--nodes=2", "--gres=gpu:4", "JOB_SCRIPT"]


def test_blazar_export_quotes_every_value():
    h = Handover("abc123", "svc", dt.datetime(2026, 2, 1), dt.datetime(2026, 2, 8), ("n'1", "n;2"), 1, "h100-sxm")
    assert shlex.split(blazar(h)) == [
        "openstack", "reservation", "lease", "create", "--reservation",
        'resource_type=physical:host,min=2,max=2,hypervisor_properties=["in", "$hypervisor_hostname", "n\'1", "n;2"]',
        "--start-date", "2026-02-01 00:00", "--end-date", "2026-02-08 00:00", "llmsizer-svc-abc123"]


def test_import_refuses_a_hostile_partition_name_naming_the_input_line(tmp_path, capsys):
    sc = tmp_path / "sc.txt"
    sc.write_text("\n" + SC.replace("Partitions=", "Partitions=a;rm,b$(id),", 1))
    first = 1 + next(i for i, ln in enumerate(SC.splitlines()) if "NodeName=" in ln) + 1
    line = _one_line_error(capsys, ["capacity", "import", "--scontrol", str(sc), "--site", "s1",
                                    "-o", str(tmp_path / "inv.yaml")])
    assert line.startswith(f"llmsizer: error: {sc}:{first}: ") and "'a;rm'" in line
    assert not (tmp_path / "inv.yaml").exists()


# ------------------------------------------------------------------------------------------ D8 import errors
def test_import_errors_cite_the_input_not_the_unwritten_inventory(tmp_path, capsys):
    sc = tmp_path / "sc.txt"
    sc.write_text(SC.replace("gpu:a40:1", "gpu:a40:99999999999"))
    out = tmp_path / "inv.yaml"
    node_line = 1 + next(i for i, ln in enumerate(SC.splitlines()) if "NodeName=" in ln)
    line = _one_line_error(capsys, ["capacity", "import", "--scontrol", str(sc), "--site", "s1", "-o", str(out)])
    assert line.startswith(f"llmsizer: error: {sc}:{node_line}: ") and "devices: 99999999999 is out of range" in line
    assert str(out) not in line and not out.exists()
    line = _one_line_error(capsys, ["capacity", "import", "--scontrol", str(tmp_path / "sc.txt"), "--site",
                                    "a\nb", "-o", str(out)])
    assert line.startswith("llmsizer: error: --site: ") and str(out) not in line


def test_far_future_dates_over_http_are_a_400(tmp_path):
    # probe13 D1: POST /api/v1/capacity/check with start 9999-12-30 answered 500 "internal error"
    pytest.importorskip("fastapi")
    pytest.importorskip("sqlalchemy")
    from fastapi.testclient import TestClient

    from llmsizer.web.api_capacity import ProviderConfig
    from llmsizer.web.app import create_app
    text = _pretrain(tmp_path, "9999-12-30", "3 weeks").read_text()
    cfg = ProviderConfig(inventory=INV, db=str(tmp_path / "b.db"), auth=None, session_key=b"k" * 32)
    with TestClient(create_app(provider=cfg), raise_server_exceptions=False) as c:
        r = c.post("/api/v1/capacity/check", json={"request": text})
    assert r.status_code == 400, r.text
    assert "start: 9999-12-30 is after 9000-12-31" in r.json()["detail"]
