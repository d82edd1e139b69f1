"""probe30 D5: a node that holds a booking is drained and the inventory imported again; every later check exited 2
("the inventory has no such node (removed or renamed)"), though the node was drained, not removed. What a provider
expects, from the schedulers' own meaning of the states: a drained node takes no new work but keeps what it runs
(Slurm scontrol(1) State "DRAIN": "not allocated new work"; Kubernetes `kubectl cordon` marks a node
unschedulable, its pods stay). So: the import keeps the node, marked out_of_service; its booking stays visible with
a warning; no new job is placed there; other checks go on. A node really removed from the file blocks only the
checks that could take the same machine again under a new id: those on the device it was booked on."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli_capture import run, run_json

pytest.importorskip("sqlalchemy", reason="the reservation store needs SQLAlchemy 2 (the 'provider' extra)")

NOW = ("--now", "2030-01-01")


def _request(name: str, device: str) -> str:
    return ("version: 1\ntitle: t\nteam: t\njobs:\n  - name: " + name + "\n    kind: inference\n"
            "    model: {name: llama-3.1-8b}\n    traffic:\n      concurrency: {peak: 2}\n      context: {peak: 4k}\n"
            "    service: {ongoing: true}\n    resources: {device: " + device + ", count: 1}\n")


def _inventory(a40_row: str) -> str:
    return ("version: 1\nsites:\n  - id: s1\nnodes:\n" + a40_row +
            "  - {id: b1, site: s1, device: a100-sxm-80gb, devices: 1, pools: [serving]}\n"
            "storage: [{id: fs, site: s1, capacity: 10 TB}]\n")


A40 = "  - {id: a1, site: s1, device: a40, devices: 1, pools: [serving]}\n"
DRAINED = ('  - {id: a1, site: s1, device: a40, devices: 1, pools: [serving], '
           'out_of_service: "State=IDLE+DRAIN (drained by the administrator)"}\n')


def _files(tmp_path: Path) -> dict[str, str]:
    out = {}
    for name, text in (("a40.yaml", _request("chat-a40", "a40")), ("a40b.yaml", _request("chat-a40-2", "a40")),
                       ("a100.yaml", _request("chat-a100", "a100-sxm-80gb")), ("up.yaml", _inventory(A40)),
                       ("drained.yaml", _inventory(DRAINED)), ("removed.yaml", _inventory(""))):
        (tmp_path / name).write_text(text)
        out[name] = str(tmp_path / name)
    out["db"] = str(tmp_path / "b.db")
    return out


def _book(f: dict[str, str]) -> str:
    code, _answer = run_json("capacity", "book", f["a40.yaml"], "--inventory", f["up.yaml"], "--db", f["db"], *NOW)
    (b,) = _answer["reservations"]
    assert code == 0 and b["nodes"] == ["a1"], b
    return str(b["id"])


def test_a_drained_node_keeps_its_booking_visible_and_blocks_no_check(tmp_path: Path) -> None:
    f = _files(tmp_path)
    rid = _book(f)
    code, out, err = run("capacity", "check", f["a100.yaml"], "--inventory", f["drained.yaml"], "--db", f["db"], *NOW)
    assert code == 0, err  # before: exit 2, "no such node (removed or renamed)"
    assert f"node 'a1' holds live booking(s) {rid}: out of service: State=IDLE+DRAIN" in err
    assert err.count("\n") == 1  # one line
    # no new job on the drained node: the second A40 service has no node to go to
    code, _answer = run_json("capacity", "check", f["a40b.yaml"], "--inventory", f["drained.yaml"], "--db", f["db"],
                          *NOW)
    (c,) = _answer["jobs"]
    assert c["fits"] is False and c["binding"] == "device" and "every a40 node is out of service" in c["reason"]
    # `show` lists the booking with the same warning
    code, out, err = run("capacity", "show", "--inventory", f["drained.yaml"], "--db", f["db"])
    assert rid in out and "out of service" in out + err


def test_a_removed_node_blocks_only_checks_on_its_device(tmp_path: Path) -> None:
    f = _files(tmp_path)
    rid = _book(f)
    code, out, err = run("capacity", "check", f["a100.yaml"], "--inventory", f["removed.yaml"], "--db", f["db"], *NOW)
    assert code == 0, err  # another device: a renamed a40 could not be taken by it
    code, out, err = run("capacity", "check", f["a40b.yaml"], "--inventory", f["removed.yaml"], "--db", f["db"], *NOW)
    assert code == 2 and f"node 'a1' holds live booking(s) {rid}: the inventory has no such node" in err
