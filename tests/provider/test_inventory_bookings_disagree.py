"""probe5 defects 1, 2, 9, 10 on the provider side, with the real store and the real `scontrol show node` record
(tests/fixtures/real_outputs, sources in the README there):

1. a booking on a node the inventory no longer has (renamed: the same machine under a new id) or has with another
   device is never dropped in silence: `check` and `book` refuse (exit 2, naming the node and the booking ids),
   `show` flags it, and `release --orphans` is the explicit lever;
2. `capacity import` puts nodes in both pools by default, says so, and a [pool] refusal names `--pools`;
9. a refusal that waiting cannot lift does not end with "no window found within 2.0 years (at most 400 later
   starts tried ...)" (placement.NO_WINDOW, which names the search's EARLIEST_HORIZON and MAX_TRIES);
10. impossible inventory values (cpus 0, ram 0, negative counts) are one-line errors naming node and field; a GPU
    node with less RAM than its GPUs' memory is a warning.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import sqlite3
from pathlib import Path

import pytest

pytest.importorskip("sqlalchemy")
from llmsizer.cli.main import main  # noqa: E402
from llmsizer.provider.inventory import InventoryError, parse_inventory  # noqa: E402
from llmsizer.provider.placement import NO_WINDOW, Item, Placement  # noqa: E402
from llmsizer.provider.store import Store, orphaned  # noqa: E402


def run(*argv: str) -> int:
    """The real command line: its exit code, its one-line errors on stderr."""
    return int(main(list(argv)) or 0)

A40 = Path(__file__).resolve().parents[1] / "fixtures" / "real_outputs" / "scontrol-show-node" / \
    "a40-1gpu-slinky-k8s.txt"
NOW = ("--now", "2026-01-15")
TRAIN = """version: 1
jobs:
  - name: tune-{n}
    kind: training
    model: {{name: qwen2.5-0.5b}}
    method: lora
    dataset: {{tokens: 2M}}
    resources: {{device: a40, count: 1}}
    start: 2026-02-0{n}
"""
SERVE = """version: 1
jobs:
  - name: chat
    kind: inference
    model: {name: qwen2.5-0.5b}
    traffic: {concurrency: {typical: 2}, context: {typical: 2k}}
    service: {duration: 7 days}
    resources: {device: a40, count: 1}
    start: 2026-02-01
"""


def _imported(tmp_path: Path, *extra: str) -> Path:
    inv = tmp_path / "inv.yaml"
    assert run("capacity", "import", "--scontrol", str(A40), "--site", "s1", "-o", str(inv), "--force", *extra) == 0
    inv.write_text(inv.read_text() + "storage: [{id: fs, site: s1, capacity: 100 TB}]\n")
    return inv


def _booked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[Path, str, list[str]]:
    """The real A40 node imported, two LoRA jobs booked on it (the probe's steps)."""
    inv = _imported(tmp_path)
    db = str(tmp_path / "b.db")
    ids = []
    for n in (1, 2):
        req = tmp_path / f"tr{n}.yaml"
        req.write_text(TRAIN.format(n=n))
        capsys.readouterr()
        assert run("capacity", "book", str(req), "--inventory", str(inv), "--db", db, "--json", *NOW) == 0
        (b,) = json.loads(capsys.readouterr().out)["reservations"]
        assert b["nodes"] == ["gpunode-1"]
        ids.append(b["id"])
    return inv, db, ids


def _edited(tmp_path: Path, inv: Path, old: str, new: str) -> Path:
    out = tmp_path / "edited.yaml"
    text = inv.read_text()
    assert old in text
    out.write_text(text.replace(old, new))
    return out


def test_a_renamed_node_is_not_booked_twice(tmp_path, capsys):
    inv, db, ids = _booked(tmp_path, capsys)
    renamed = _edited(tmp_path, inv, "id: gpunode-1", "id: gpunode-9")  # the same machine, a new name
    req = tmp_path / "tr3.yaml"
    req.write_text(TRAIN.format(n=1).replace("tune-1", "tune-3"))
    capsys.readouterr()
    # before: "FITS at s1: gpunode-9" (exit 0), and `book` recorded a third job on the one A40
    assert run("capacity", "check", str(req), "--inventory", str(renamed), "--db", db, *NOW) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "node 'gpunode-1'" in err and all(i in err for i in ids)
    assert "release --orphans" in err
    assert run("capacity", "book", str(req), "--inventory", str(renamed), "--db", db, *NOW) == 2
    assert len(Store(db).reservations()) == 2  # nothing written
    # show lists them, says so on stderr and in --json, and counts them against no node
    capsys.readouterr()
    assert run("capacity", "show", "--inventory", str(renamed), "--db", db, "--json") == 0
    out = capsys.readouterr()
    assert "gpunode-1" in out.err and "warning:" in out.err
    (o,) = json.loads(out.out)["orphaned"]
    assert o["node"] == "gpunode-1" and o["reservations"] == ids and "no such node" in o["why"]
    # the explicit lever: release them; then the inventory and the store agree again
    assert run("capacity", "release", "--orphans", "--inventory", str(renamed), "--db", db) == 0
    assert {r["state"] for r in Store(db).reservations()} == {"released"}
    capsys.readouterr()
    assert run("capacity", "check", str(req), "--inventory", str(renamed), "--db", db, *NOW) == 0
    assert "FITS" in capsys.readouterr().out


def test_a_node_with_another_device_is_flagged(tmp_path, capsys):
    inv, db, ids = _booked(tmp_path, capsys)
    assert {b.device for b in Store(db).bookings()} == {"a40"}  # the booked device is recorded (schema 3)
    changed = _edited(tmp_path, inv, "device: a40", "device: l40s")
    req = tmp_path / "tr1.yaml"
    capsys.readouterr()
    assert run("capacity", "check", str(req), "--inventory", str(changed), "--db", db, *NOW) == 2
    err = capsys.readouterr().err
    assert "booked on a40, the inventory now has l40s" in err and all(i in err for i in ids)
    # the unchanged inventory still agrees with the store
    assert run("capacity", "show", "--inventory", str(inv), "--db", db) == 0
    assert "warning" not in capsys.readouterr().err


def test_a_store_from_before_the_device_column_is_checked_by_node(tmp_path, capsys):
    """A schema-2 file (no device column), read by the standard-library reader `check` uses: the node rule holds."""
    inv, db, ids = _booked(tmp_path, capsys)
    with sqlite3.connect(db) as con:
        con.execute("ALTER TABLE reservations DROP COLUMN device")
    renamed = _edited(tmp_path, inv, "id: gpunode-1", "id: gpunode-9")
    assert run("capacity", "check", str(tmp_path / "tr1.yaml"), "--inventory", str(renamed), "--db", db, *NOW) == 2
    err = capsys.readouterr().err
    assert "node 'gpunode-1'" in err and all(i in err for i in ids), err


def test_orphans_read_from_postgresql(pg_url, tmp_path):
    s = Store(pg_url)
    start = dt.datetime(2031, 3, 1)
    end = start + dt.timedelta(hours=3)
    node = f"gpunode-{tmp_path.name[-6:]}"
    (sub,) = s.submit([Placement("pg-orphan", "training", start, end, "s1", (node,), 1, "a40", None,
                                 (Item(f"node:{node}", 1, start, end),))], {f"node:{node}": 1.0},
                      now=dt.datetime(2031, 1, 1))
    mine = [b for b in s.bookings() if b.id == sub.id]
    assert mine[0].device == "a40"
    inv = parse_inventory(f"sites: [{{id: s1}}]\nnodes:\n  - {{id: {node}, site: s1, device: l40s, devices: 1}}\n")
    (o,) = orphaned(inv, mine, dt.datetime(2031, 1, 1))
    assert o.ids == (sub.id,) and "booked on a40" in o.why
    assert orphaned(inv, mine, dt.datetime(2031, 4, 1)) == []  # a booking that has ended holds nothing
    s.release(sub.id)
    s.close()


def test_import_default_pools_and_the_pool_refusal_names_the_lever(tmp_path, capsys):
    inv = _imported(tmp_path)
    err = capsys.readouterr().err
    assert "every node joins pool(s) training, serving" in err
    assert "pools: [training, serving, tn]" in inv.read_text()  # tn: the node's Slurm partition
    req = tmp_path / "svc.yaml"
    req.write_text(SERVE)
    assert run("capacity", "check", str(req), "--inventory", str(inv), "--no-db", *NOW) == 0  # a service fits
    training_only = _imported(tmp_path, "--pools", "training")
    capsys.readouterr()
    assert run("capacity", "check", str(req), "--inventory", str(training_only), "--no-db", *NOW) == 1
    out = capsys.readouterr().out
    assert "[pool]" in out and "--pools serving" in out
    with pytest.raises(SystemExit):
        run("capacity", "import", "--help")
    assert "default training,serving" in re.sub(r"\s+", " ", capsys.readouterr().out)


@pytest.mark.parametrize("edit, binding", [
    (("pools: [training, serving, tn]", "pools: [training]"), "[pool]"),
    (("storage: [{id: fs, site: s1, capacity: 100 TB}]", ""), "[storage]"),
    (("device: a40", "device: l40s"), "[device]"),
])
def test_refusals_waiting_cannot_lift_say_so(tmp_path, capsys, edit, binding):
    inv = _edited(tmp_path, _imported(tmp_path), *edit)
    req = tmp_path / "svc.yaml"
    req.write_text(SERVE)
    capsys.readouterr()
    assert run("capacity", "check", str(req), "--inventory", str(inv), "--no-db", *NOW) == 1
    out = capsys.readouterr().out
    assert binding in out
    assert "no window found" not in out
    assert NO_WINDOW.startswith("no window found within 2.0 years (at most 400 later starts tried")
    assert "no later window searched: this constraint does not change with time" in out


def test_a_busy_refusal_still_searches_later(tmp_path, capsys):
    """Time-based: the second service waits for the first one's end (the window search is unchanged)."""
    inv = _imported(tmp_path)
    db = str(tmp_path / "b.db")
    req = tmp_path / "svc.yaml"
    req.write_text(SERVE)
    assert run("capacity", "book", str(req), "--inventory", str(inv), "--db", db, *NOW) == 0
    other = tmp_path / "svc2.yaml"
    other.write_text(SERVE.replace("name: chat", "name: chat-2"))
    capsys.readouterr()
    assert run("capacity", "check", str(other), "--inventory", str(inv), "--db", db, *NOW) == 1
    out = capsys.readouterr().out
    assert "[busy]" in out and "start later: from 2026-02-08" in out and "does not change with time" not in out


NODE = "sites: [{{id: s1}}]\nnodes:\n  - {{id: n1, site: s1, device: a40, devices: 1, {extra}}}\n"


@pytest.mark.parametrize("extra, message", [
    ("cpus: 0, ram: 256 GiB", "nodes[0] 'n1': cpus: must be at least 1"),
    ("cpus: -4, ram: 256 GiB", "nodes[0] 'n1': cpus: -4 is out of range"),
    ("cpus: 8, ram: 0", "nodes[0] 'n1': ram: must be more than 0"),
    ("cpus: 8, ram: -1 GiB", "nodes[0] 'n1': ram: must not be negative"),
])
def test_impossible_node_values_are_one_line_each(extra, message):
    with pytest.raises(InventoryError) as e:
        parse_inventory(NODE.format(extra=extra), source="inv.yaml")
    assert len(e.value.errors) == 1 and e.value.errors[0].startswith("inv.yaml:3: ") and message in str(e.value)


def test_a_gpu_node_with_less_ram_than_its_gpus_is_a_warning(tmp_path, capsys):
    small = parse_inventory(NODE.format(extra="cpus: 8, ram: 1 GiB"), source="inv.yaml")
    (w,) = small.warnings
    assert w.startswith("inv.yaml:3: nodes[0] 'n1': ram: 1.00 GiB is less than the 1 x a40's")
    assert parse_inventory(NODE.format(extra="cpus: 8, ram: 256 GiB")).warnings == ()
    assert parse_inventory(NODE.format(extra="cpus: 8")).warnings == ()  # RAM not given: nothing to say
    inv = tmp_path / "inv.yaml"
    inv.write_text(NODE.format(extra="cpus: 8, ram: 1 GiB").replace("a40, devices: 1,", "a40, devices: 1, "
                                                                     "pools: [serving],"))
    req = tmp_path / "svc.yaml"
    req.write_text(SERVE)
    run("capacity", "check", str(req), "--inventory", str(inv), "--no-db", *NOW)
    assert "warning: " in capsys.readouterr().out
