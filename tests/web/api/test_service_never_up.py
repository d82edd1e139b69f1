"""A request's service that is never up (``hours_per_day: 0`` or ``days_per_week: 0``) is bad input at its field
(r32surf report "Left"): it was read as not given, around the clock (24 h, 7 days), so the plan costed a service the
file says never runs. The request format documents each as the hours / days it must be up, nothing else for 0
(request/fields.py); a day has 24 hours and a week 7 days, the bounds kept. Each is one line naming the field: the
CLI exits 2 (`request check`, `plan`), the web answers 400 with the same line; a value above 0 is still taken."""

from __future__ import annotations

import sys

import pytest
from web_api_helpers import ROOT, cli_error_line, run_cli

pytest.importorskip("httpx")
pytest.importorskip("fastapi")

sys.path.insert(0, str(ROOT / "tests" / "request"))
from helpers import job_yaml  # noqa: E402


@pytest.mark.parametrize(("service", "field", "said"), [
    ("{hours_per_day: 0}", "service.hours_per_day", "0 is out of range; expected a number in (0, 24]"),
    ("{days_per_week: 0}", "service.days_per_week", "0 is out of range; expected a number in (0, 7]"),
    ("{hours_per_day: 25}", "service.hours_per_day", "25 is out of range; expected a number in (0, 24]"),
])
def test_a_service_never_up_is_refused_at_its_field(client, tmp_path, service, field, said):
    text = job_yaml("inference", f"service: {service}")
    path = tmp_path / "req.yaml"
    path.write_text(text, "utf-8")
    for cmd in (("request", "check"), ("plan",)):
        line = cli_error_line(*cmd, str(path))
        assert f"job 'chat' (inference): {field}: {said}" in line, line
    for route in ("/api/v1/request/check", "/api/v1/plan"):
        r = client.post(route, json={"request": text, "filename": "req.yaml"})
        assert r.status_code == 400 and f"{field}: {said}" in r.json()["detail"], (route, r.text[:300])


def test_a_service_up_part_of_the_time_is_taken(tmp_path):
    path = tmp_path / "req.yaml"
    path.write_text(job_yaml("inference", "service: {hours_per_day: 0.5, days_per_week: 5}"), "utf-8")
    done = run_cli("request", "check", str(path))
    assert done.returncode == 0, done.stderr
