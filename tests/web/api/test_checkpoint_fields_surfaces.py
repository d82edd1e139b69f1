"""A request's checkpoints that cannot work are bad input at their field (new-user probe).

Before: ``checkpoints: {resume: true, keep: 0}`` passed `request check` and `plan` without a word, though keep 0
deletes each checkpoint once written (formulas/storage.py eq. 6: room for the one being written, none kept), so
nothing is left to resume from; and ``interval: 0h`` said "cannot read '0h' as an interval" although it was read:
the problem is that zero is no interval. Each is now one line at its field: the CLI exits 2 (`request check`,
`plan`), the web answers 400 with the same line."""

from __future__ import annotations

import sys

import pytest
from web_api_helpers import ROOT, cli_error_line

pytest.importorskip("httpx")
pytest.importorskip("fastapi")

sys.path.insert(0, str(ROOT / "tests" / "request"))
from helpers import job_yaml  # noqa: E402


@pytest.mark.parametrize(("checkpoints", "field", "said"), [
    ("{resume: true, keep: 0, interval: 1h}", "checkpoints.keep",
     "0 keeps no checkpoint to resume from, but checkpoints.resume is true"),
    ("{resume: true, keep: 2, interval: 0h}", "checkpoints.interval", "duration '0h' must be positive"),
    ("{resume: true, keep: 2, interval: 0 min}", "checkpoints.interval", "duration '0 min' must be positive"),
    ("{resume: true, keep: 2, interval: 0 steps}", "checkpoints.interval", "interval '0 steps' must be at least 1"),
])
def test_checkpoints_that_cannot_work_are_refused_at_their_field(client, tmp_path, checkpoints, field, said):
    text = job_yaml("training", f"checkpoints: {checkpoints}")
    path = tmp_path / "req.yaml"
    path.write_text(text, "utf-8")
    lines = {cmd: cli_error_line(*cmd, str(path)) for cmd in (("request", "check"), ("plan",))}
    for line in lines.values():
        assert f"job 'ft' (training): {field}: {said}" in line and "cannot read" not in line, line
    for route in ("/api/v1/request/check", "/api/v1/plan"):
        r = client.post(route, json={"request": text, "filename": "req.yaml"})
        assert r.status_code == 400 and f"{field}: {said}" in r.json()["detail"], (route, r.text[:300])


@pytest.mark.parametrize("checkpoints", ["{resume: false, keep: 0, interval: 1h}", "{resume: true, keep: 1, interval: 1h}"])
def test_checkpoints_that_work_still_pass(tmp_path, checkpoints):
    from cli_capture import run_cli
    path = tmp_path / "req.yaml"
    path.write_text(job_yaml("training", f"checkpoints: {checkpoints}"), "utf-8")
    done = run_cli("request", "check", str(path))
    assert done.returncode == 0, done.stderr
