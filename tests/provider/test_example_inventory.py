"""probe3 #8: the shipped inventory says it is "sized for the example requests"; `capacity check
examples/lora-finetune-and-chat.yaml` against it found no window for ticket-lora (confidential data, offsite_allowed:
false, H100s only at a partner's site) and support-chat crossed a maintenance window. Every example request, every
job, now gets a window against it, from the requests' own start (`--now` before them, no bookings)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llmsizer.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
INV = ROOT / "examples" / "provider" / "inventory.yaml"
REQUESTS = sorted((ROOT / "examples").glob("*.yaml"))


def test_there_are_example_requests() -> None:
    assert len(REQUESTS) >= 3 and all(p.name in INV.read_text() for p in REQUESTS)  # each named in its comment


@pytest.mark.parametrize("request_file", REQUESTS, ids=[p.stem for p in REQUESTS])
def test_every_example_request_gets_a_window(request_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["capacity", "check", str(request_file), "--inventory", str(INV), "--no-db", "--now", "2025-08-01",
                 "--json"])
    checks = json.loads(capsys.readouterr().out)["jobs"]
    assert code == 0 and checks and all(c["fits"] for c in checks), checks
