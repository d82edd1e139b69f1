"""probe21 D2: a training run over several machines whose request states no network between them is booked for
its time on the fabric it is placed on, not for the plan's lower bound.

The plan of such a run times its data-parallel traffic over the link inside one machine ("a lower bound of its
time"). Before, `capacity check` and `book` held that lower bound on any fabric: on a 25 Gb/s fabric a
Llama-3.1-8B HSDP run over 2 x 8 H100 was booked 2.9 h, though `fit --train --network "25 Gb/s"` times it at
44.4 h. The truth here is the estimate core's own duration on that network (`fit --train --network`, the one
duration rule): the provider must book what the core says for the fabric it chose, on every surface."""

from __future__ import annotations

import datetime as dt
import math
from pathlib import Path

import pytest

from cli_capture import run, run_json

pytest.importorskip("sqlalchemy", reason="the reservation store needs SQLAlchemy 2 (the 'provider' extra)")

REQUEST = """\
version: 1
title: two-machine run
jobs:
  - name: hsdp
    kind: training
    model: {name: llama-3.1-8b}
    method: full
    purpose: knowledge
    baseline_tried: true
    start: 2030-01-10
    settings: {micro_batch: 1, seq_len: 4096, grad_checkpointing: full, fsdp: hybrid}
    dataset: {tokens: 1B tokens, sensitivity: internal}
    resources: {device: h100-sxm, count: 16}
"""

INVENTORY = """\
version: 1
sites:
  - id: s1
    fabrics:
      - {id: a-slow, bandwidth: 25 Gb/s}
      - {id: b-fast, bandwidth: 3200 Gb/s}
      - {id: c-bare}
storage: [{id: fs, site: s1, capacity: 1 PB}]
nodes:
  - {id: slow, count: 2, site: s1, device: h100-sxm, devices: 8, fabric: a-slow, pools: [training]}
  - {id: fast, count: 2, site: s1, device: h100-sxm, devices: 8, fabric: b-fast, pools: [training]}
"""
NOW = ("--now", "2030-01-01")
FIT = ("fit", "llama-3.1-8b", "--train", "--method", "full", "--device", "h100-sxm", "--count", "16",
       "--gpus-per-node", "8", "--batch", "1", "--seq", "4096", "--grad-checkpointing", "full", "--fsdp", "hybrid",
       "--tokens", "1B", "--json")


def _fit_seconds(*network: str) -> float:
    code, fit = run_json(*FIT, *network)
    assert code == 0
    return float(fit["training_time"]["seconds"])


def _files(tmp_path: Path, inventory: str = INVENTORY) -> tuple[str, str]:
    (tmp_path / "req.yaml").write_text(REQUEST)
    (tmp_path / "inv.yaml").write_text(inventory)
    return str(tmp_path / "req.yaml"), str(tmp_path / "inv.yaml")


def _window(p: dict) -> float:
    return (dt.datetime.fromisoformat(p["end"]) - dt.datetime.fromisoformat(p["start"])).total_seconds()


def test_check_and_book_hold_the_run_for_its_time_on_the_fabric(tmp_path: Path) -> None:
    slow, fast, lower = _fit_seconds("--network", "25 Gb/s"), _fit_seconds("--network", "3200 Gb/s"), _fit_seconds()
    assert slow > 10 * lower  # the premise: at 25 Gb/s the gradients dominate (44.4 h against 2.9 h)
    req, inv = _files(tmp_path)
    db = str(tmp_path / "b.db")
    # both fabrics free: the one the run ends soonest on, held for its time there
    code, _answer = run_json("capacity", "check", req, "--inventory", inv, "--db", db, *NOW)
    (c,) = _answer["jobs"]
    assert code == 0 and c["fits"] and c["placement"]["nodes"] == ["fast-01", "fast-02"]
    assert c["need"]["timed_on_fabric"] == "b-fast" and c["need"]["network"] == 3200e9 / 8
    assert c["need"]["seconds"] == pytest.approx(fast, rel=1e-12)
    assert _window(c["placement"]) == math.ceil(fast)
    code, _answer = run_json("capacity", "book", req, "--inventory", inv, "--db", db, *NOW)
    (b,) = _answer["reservations"]
    assert code == 0 and b["nodes"] == ["fast-01", "fast-02"] and _window(b) == math.ceil(fast)
    assert b["seconds"] == pytest.approx(fast, rel=1e-12)  # the booking's figures: the run on its fabric
    # the fast fabric held: the same run goes on the slow one, for its time there (before: the 2.9 h lower bound)
    (tmp_path / "req2.yaml").write_text(REQUEST.replace("name: hsdp", "name: hsdp-2"))
    code, _answer = run_json("capacity", "check", str(tmp_path / "req2.yaml"), "--inventory", inv, "--db", db, *NOW)
    (c,) = _answer["jobs"]
    assert code == 0 and c["placement"]["nodes"] == ["slow-01", "slow-02"]
    assert c["need"]["seconds"] == pytest.approx(slow, rel=1e-12) and _window(c["placement"]) == math.ceil(slow)
    assert "fabric a-slow's 25 Gb/s per node" in c["notes"][0]
    _, out, _ = run("capacity", "check", str(tmp_path / "req2.yaml"), "--inventory", inv, "--db", db, *NOW)
    assert "  note: the request states no network between machines (resources.network), so the run is timed on " \
           "fabric a-slow's 25 Gb/s per node, where it is placed" in out


def test_a_deadline_is_checked_against_the_time_on_the_fabric(tmp_path: Path) -> None:
    """A deadline the lower bound meets but the run on the only fabric misses: does not fit (exit 1)."""
    req, inv = _files(tmp_path, INVENTORY.replace("  - {id: fast,", "  # "))
    Path(req).write_text(REQUEST.replace("    resources:", "    deadline: 1 day\n    resources:"))
    code, _answer = run_json("capacity", "check", req, "--inventory", inv, "--no-db", *NOW)
    (c,) = _answer["jobs"]
    assert code == 1 and not c["fits"] and c["binding"] == "deadline"
    code, _ = run_json("capacity", "book", req, "--inventory", inv, "--no-db", *NOW)
    assert code == 1


def test_a_fabric_without_bandwidth_keeps_the_lower_bound_and_says_so(tmp_path: Path) -> None:
    lower = _fit_seconds()
    req, inv = _files(tmp_path, INVENTORY.replace("fabric: a-slow", "fabric: c-bare").replace(
        "  - {id: fast,", "  # "))
    code, _answer = run_json("capacity", "check", req, "--inventory", inv, "--no-db", *NOW)
    (c,) = _answer["jobs"]
    assert code == 0 and c["need"]["timed_on_fabric"] == "" and c["need"]["seconds"] == pytest.approx(lower)
    assert "fabric c-bare states no bandwidth: the window is the plan's" in c["notes"][0]
    assert any("a lower bound of its time" in w for w in c["need"]["warnings"])


def test_the_web_check_answers_the_same(tmp_path: Path) -> None:
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from llmsizer.web.api_capacity import ProviderConfig
    from llmsizer.web.app import create_app
    req, inv = _files(tmp_path)
    _, cli = run_json("capacity", "check", req, "--inventory", inv, "--no-db", *NOW)
    cfg = ProviderConfig(inventory=inv, db=str(tmp_path / "w.db"))
    with TestClient(create_app(provider=cfg), raise_server_exceptions=False) as c:
        r = c.post("/api/v1/capacity/check", json={"request": REQUEST, "no_db": True, "now": NOW[1]})
    assert r.status_code == 200 and r.json() == cli


def test_equal_times_are_said_to_agree(tmp_path: Path) -> None:
    """probe30 N4: "4.1 h, not the plan's 4.1 h". Where the time on the fabric and the plan's lower bound print alike
    (fit's own seconds with and without --network, in the one time format), the note says they agree; where they
    differ, it says "not the plan's"."""
    from llmsizer.units import format_seconds
    fast, lower = _fit_seconds("--network", "3200 Gb/s"), _fit_seconds()
    req, inv = _files(tmp_path)
    code, _answer = run_json("capacity", "check", req, "--inventory", inv, "--no-db", *NOW)
    (c,) = _answer["jobs"]
    assert code == 0 and c["placement"]["nodes"] == ["fast-01", "fast-02"]
    note = c["notes"][0]
    if format_seconds(fast) == format_seconds(lower):
        assert f"{format_seconds(fast)} (estimate/duration.py), the same as the plan's {format_seconds(lower)}" in note
        assert "not the plan's" not in note
    else:
        assert f"not the plan's {format_seconds(lower)}" in note
