"""A maintenance window added over a live booking (probe10 defect 6): `show` said nothing and `activate` moved the
booking to active, so a training job that placement never puts across a provider window ran across one. Now
`show` lists it (`maintenance`, a warning naming the window), and hold/confirm/activate of a training booking are
refused naming the window (exit 1, answered); a service's booking whose agreement is not recorded (built by hand
here, as one from before schema 5) is listed, not refused (tests/provider/test_service_agreed_windows.py: one that
records it). On real SQLite files and a real PostgreSQL server."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

pytest.importorskip("sqlalchemy", reason="the reservation store needs SQLAlchemy 2 (the 'provider' extra)")

from llmsizer.provider.disagree import in_maintenance, maintenance_refusal  # noqa: E402
from llmsizer.provider.placement import Booking, Item  # noqa: E402

from .conftest import inv  # noqa: E402
from .pg_databases import fresh_database  # noqa: E402
from .test_cli_capacity import run  # noqa: E402

INVENTORY = """\
sites: [{id: s1}]
storage: [{id: fs, site: s1, capacity: 10 TB}]
nodes:
  - {id: gpunode-1, site: s1, device: a40, devices: 1, pools: [training, serving]}
  - {id: gpunode-2, site: s1, device: a40, devices: 1, pools: [training, serving]}
"""
WINDOW = "maintenance: [{start: 2027-01-10T00:05, end: 2027-01-10T00:15, nodes: [gpunode-1], note: firmware}]\n"
REQUEST = """\
version: 1
title: lora
jobs:
  - name: docs-lora
    kind: training
    model: {name: qwen2.5-0.5b}
    method: lora
    settings: {micro_batch: 2, seq_len: 2k, epochs: 1}
    dataset: {tokens: 20M tokens}
    resources: {device: a40, count: 1, storage: 100 GB}
    start: 2027-01-10
"""
T = dt.datetime(2027, 1, 10)


def test_the_rule_overlap_per_node_and_kind():
    i = inv(INVENTORY + WINDOW)
    train = Booking("t1", "lora", "training", (Item("node:gpunode-1", 1, T, T + dt.timedelta(hours=3)),), "confirmed")
    touching = Booking("t2", "lora", "training", (Item("node:gpunode-1", 1, T + dt.timedelta(minutes=15),
                                                       T + dt.timedelta(hours=5)),), "confirmed")  # starts at its end
    other = Booking("t3", "lora", "training", (Item("node:gpunode-2", 1, T, T + dt.timedelta(hours=3)),), "confirmed")
    svc = Booking("s1", "chat", "inference", (Item("node:gpunode-1", 1, T, T + dt.timedelta(days=3)),), "held")
    found = in_maintenance(i, [train, touching, other, svc])
    assert [(f.id, f.node) for f in found] == [("t1", "gpunode-1"), ("s1", "gpunode-1")]
    why = maintenance_refusal(i, [train, svc], "t1")
    assert why is not None and "2027-01-10 00:05-2027-01-10 00:15 firmware" in why and "t1 (lora, training)" in why
    assert maintenance_refusal(i, [train, svc], "s1") is None  # agreement not recorded: listed only
    assert maintenance_refusal(i, [other], "t3") is None


def _db(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    if kind == "sqlite":
        return str(tmp_path / "b.db")
    return fresh_database(request.getfixturevalue("pg_url"), "llmsizer_maint")


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_show_flags_and_activate_refuses_a_window_added_over_a_training_booking(kind, tmp_path, capsys, request):
    db = _db(kind, tmp_path, request)
    plain, maint = tmp_path / "inv.yaml", tmp_path / "maint.yaml"
    plain.write_text(INVENTORY)
    maint.write_text(INVENTORY + WINDOW)
    req = tmp_path / "req.yaml"
    req.write_text(REQUEST)
    assert run("capacity", "book", str(req), "--inventory", str(plain), "--db", db, "--json", "--now",
               "2027-01-01") == 0
    (b,) = json.loads(capsys.readouterr().out)["reservations"]
    assert b["nodes"] == ["gpunode-1"] and b["start"] == "2027-01-10T00:00:00"  # the window covers 00:05-00:15
    assert b["end"] > "2027-01-10T00:15:00"
    # the same inventory with the window added: listed by show (JSON and a warning), refused by activate
    assert run("capacity", "show", "--inventory", str(maint), "--db", db, "--json") == 0
    out = capsys.readouterr()
    (m,) = json.loads(out.out)["maintenance"]
    assert (m["reservation"], m["node"], m["start"], m["refused"]) == (b["id"], "gpunode-1", "2027-01-10T00:05:00",
                                                                       True)
    assert f"warning: booking {b['id']} (docs-lora, training) on node 'gpunode-1' runs across the provider's " \
           "maintenance window 2027-01-10 00:05-2027-01-10 00:15 firmware" in out.err
    assert run("capacity", "activate", b["id"], "--inventory", str(maint), "--db", db, "--json") == 1
    (r,) = json.loads(capsys.readouterr().out)["transitions"]
    assert r["id"] == b["id"] and "maintenance window 2027-01-10 00:05-2027-01-10 00:15" in r["refused"]
    # nothing changed; on the inventory without the window it activates
    assert run("capacity", "activate", b["id"], "--inventory", str(plain), "--db", db) == 0
    assert f"{b['id']}: confirmed -> active" in capsys.readouterr().out
