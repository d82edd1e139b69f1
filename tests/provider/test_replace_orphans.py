"""`capacity re-place`: orphaned bookings (a node renamed or re-equipped in the inventory, provider/store.py
`orphaned`) moved to a node that holds them through the check's own placement rule (provider/replace.py ->
placement.try_window), all or none in one store transaction (Store.move), against the real SQLite store and the
PostgreSQL server tests/provider/conftest.py starts.

The bookings are made by the real `capacity book` (SQLite) or the store's own submit (PostgreSQL, shared with other
tests: their bookings are on other nodes); the expected holds after a rename are the holds `book` wrote with the old
node's name replaced, not anything re-place computes."""

from __future__ import annotations

import datetime as dt
import json
import threading
from pathlib import Path

import pytest

pytest.importorskip("sqlalchemy")
from llmsizer.cli.main import main  # noqa: E402
from llmsizer.provider.inventory import parse_inventory  # noqa: E402
from llmsizer.provider.placement import Item, Placement, capacities  # noqa: E402
from llmsizer.provider.replace import plan_moves, renamed_to  # noqa: E402
from llmsizer.provider.store import BookingConflict, Store, orphaned  # noqa: E402

from .test_lifecycle import replay  # noqa: E402

NOW = ("--now", "2026-01-15")
INV = """sites: [{{id: s1}}]
nodes:
  - {{id: {node}, site: s1, device: {device}, devices: 2, ram: 256 GiB, pools: [training, serving]}}
{extra}storage: [{{id: fs, site: s1, capacity: 100 TB}}]
"""
JOB = """  - name: tune-{n}
    kind: training
    model: {{name: qwen2.5-0.5b}}
    method: lora
    dataset: {{tokens: 2M}}
    resources: {{device: a40, count: 1}}
    start: 2026-02-01
"""


def run(*argv: str) -> int:
    return int(main(list(argv)) or 0)


def _inv(tmp_path: Path, name: str, node: str, device: str = "a40", extra: str = "") -> Path:
    p = tmp_path / name
    p.write_text(INV.format(node=node, device=device, extra=extra))
    return p


def _book_two(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[Path, str, dict[str, list[Item]]]:
    """Two overlapping LoRA jobs booked by the real `capacity book` on the one 2 x A40 node gpu-07."""
    inv = _inv(tmp_path, "inv.yaml", "gpu-07")
    req = tmp_path / "tr.yaml"
    req.write_text("version: 1\njobs:\n" + JOB.format(n="a") + JOB.format(n="b"))
    db = str(tmp_path / "b.db")
    assert run("capacity", "book", str(req), "--inventory", str(inv), "--db", db, "--json", *NOW) == 0
    booked = json.loads(capsys.readouterr().out)["reservations"]
    assert [b["nodes"] for b in booked] == [["gpu-07"], ["gpu-07"]]
    s = Store(db)
    holds = {b["id"]: s.holds_of(b["id"]) for b in booked}
    s.close()
    return inv, db, holds


def _replace(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict]:
    capsys.readouterr()
    code = run("capacity", "re-place", *argv, *NOW, "--json")  # the bookings' own "now": windows not ended
    return code, json.loads(capsys.readouterr().out)


def _renamed(items: list[Item], old: str, new: str) -> list[Item]:
    return sorted((Item(i.resource.replace(f":{old}", f":{new}") if i.resource in (f"node:{old}", f"ram:{old}")
                        else i.resource, i.amount, i.start, i.end) for i in items), key=repr)


def test_a_rename_keeps_every_booking(tmp_path, capsys):
    inv, db, holds = _book_two(tmp_path, capsys)
    renamed = _inv(tmp_path, "renamed.yaml", "gpu-7")  # the same machine under its new name
    req = tmp_path / "tr.yaml"
    capsys.readouterr()
    assert run("capacity", "check", str(req), "--inventory", str(renamed), "--db", db, *NOW) == 2  # the refusal
    assert "capacity re-place" in capsys.readouterr().err  # ... names the new lever
    code, out = _replace(capsys, "--inventory", str(renamed), "--db", db)
    assert code == 0 and out["written"] and out["cannot"] == []
    assert {m["id"] for m in out["moved"]} == set(holds)
    assert all(m["to"] == ["gpu-7"] and "new name" in m["how"] for m in out["moved"])
    s = Store(db)
    for rid, before in holds.items():  # every hold as `book` wrote it, on the new name; storage and quota as they were
        assert sorted(s.holds_of(rid), key=repr) == _renamed(before, "gpu-07", "gpu-7")
    assert {r["state"] for r in s.reservations()} == {"confirmed"}
    audit = s.audit()
    assert replay(audit) == {rid: "confirmed" for rid in holds}  # the re-place rows keep the log replaying
    assert [e["action"] for e in audit].count("re-place") == 2
    s.close()
    # the inventory and the store agree again: check answers (the request itself: already booked, under the same
    # ids), and the two bookings hold both devices (the same jobs asked by another request are busy)
    capsys.readouterr()
    assert run("capacity", "check", str(req), "--inventory", str(renamed), "--db", db, *NOW, "--json") == 0
    assert {j["id"] for j in json.loads(capsys.readouterr().out)["jobs"] if j["existing"]} == set(holds)
    other = tmp_path / "other.yaml"
    other.write_text("version: 1\ntitle: another team\njobs:\n" + JOB.format(n="a") + JOB.format(n="b"))
    assert run("capacity", "check", str(other), "--inventory", str(renamed), "--db", db, *NOW, "--json") == 1
    assert all(j["binding"] == "busy" for j in json.loads(capsys.readouterr().out)["jobs"])
    # a second run finds nothing to move
    assert _replace(capsys, "--inventory", str(renamed), "--db", db) == (0, {"moved": [], "cannot": [],
                                                                            "written": False})


def test_a_re_equip_where_one_booking_no_longer_fits_moves_nothing(tmp_path, capsys):
    inv, db, holds = _book_two(tmp_path, capsys)
    # gpu-07 now holds L40S; the one A40 left is a single-GPU node: one booking fits there, the other does not
    spare = "  - {id: gpu-08, site: s1, device: a40, devices: 1, ram: 128 GiB, pools: [training, serving]}\n"
    changed = _inv(tmp_path, "changed.yaml", "gpu-07", device="l40s", extra=spare)
    code, out = _replace(capsys, "--inventory", str(changed), "--db", db)
    assert code == 1 and not out["written"]
    assert [m["to"] for m in out["moved"]] == [["gpu-08"]]
    assert "no node of the inventory is the old one renamed" in out["moved"][0]["how"]
    (stuck,) = out["cannot"]
    # the check's own reason: the one A40 is taken by the booking moved before it
    assert stuck["binding"] == "busy" and stuck["from"] == ["gpu-07"], stuck
    assert "0 of 1 suitable a40 node(s) have 1 device(s) free" in stuck["reason"], stuck
    s = Store(db)
    assert {rid: sorted(s.holds_of(rid), key=repr) for rid in holds} == \
        {rid: sorted(h, key=repr) for rid, h in holds.items()}  # nothing moved
    assert "re-place" not in {e["action"] for e in s.audit()}
    s.close()
    # the text answer: what could move, what cannot and why, and that nothing moved
    capsys.readouterr()
    assert run("capacity", "re-place", "--inventory", str(changed), "--db", db, *NOW) == 1
    got = capsys.readouterr()
    assert "could move gpu-07 -> gpu-08" in got.out and "cannot be re-placed: [busy]" in got.err
    assert "nothing was moved" in got.err


def test_bad_input_is_exit_2(tmp_path, capsys):
    inv, db, _ = _book_two(tmp_path, capsys)
    assert run("capacity", "re-place", "nope", "--inventory", str(inv), "--db", db) == 2
    assert "not an orphaned booking" in capsys.readouterr().err
    assert run("capacity", "re-place", "--inventory", str(inv), "--db", str(tmp_path / "none.db")) == 2
    assert not (tmp_path / "none.db").exists()


def test_renamed_to_maps_only_cleanly():
    inv = parse_inventory("sites: [{id: s1}]\nnodes:\n"
                          "  - {id: gpu-7, site: s1, device: a40, devices: 1}\n"
                          "  - {id: GPU_12, site: s1, device: a40, devices: 1}\n"
                          "  - {id: gpu12, site: s1, device: a40, devices: 1}\n"
                          "  - {id: cpu-3, site: s1, device: l40s, devices: 1}\n")
    got = renamed_to("gpu-07", "a40", inv)
    assert got is not None and got.id == "gpu-7"
    assert renamed_to("gpu-012", "a40", inv) is None  # two nodes take that name: not clean
    assert renamed_to("cpu-03", "a40", inv) is None  # the same name, another device
    assert renamed_to("gpu-7", "a40", inv) is None  # still there: not renamed


def _pg_inv(node: str, device: str = "a40", devices: int = 2) -> str:
    return (f"sites: [{{id: s1}}]\nnodes:\n  - {{id: {node}, site: s1, device: {device}, devices: {devices}, "
            "pools: [training, serving]}\n")


def _pg_book(s: Store, node: str, tag: str, n: int) -> list[str]:
    start = dt.datetime(2031, 5, 1)
    end = start + dt.timedelta(hours=3)
    subs = s.submit([Placement(f"{tag}-{k}", "training", start, end, "s1", (node,), 1, "a40", None,
                               (Item(f"node:{node}", 1, start, end),)) for k in range(n)],
                    {f"node:{node}": 2.0}, now=dt.datetime(2031, 1, 1))
    return [x.id for x in subs]


def test_postgresql_rename_and_re_equip(pg_url, tmp_path, capsys):
    tag = tmp_path.name[-8:].replace("_", "")
    old, new = f"pg{tag}-07", f"pg{tag}-7"
    s = Store(pg_url)
    ids = _pg_book(s, old, tag, 2)
    # a re-equip with a single A40 left: one fits, one does not; nothing moved
    changed = tmp_path / "changed.yaml"
    changed.write_text(_pg_inv(old, "l40s") + f"  - {{id: {new}x, site: s1, device: a40, devices: 1, "
                       "pools: [training, serving]}\n")
    code, out = _replace(capsys, *ids, "--inventory", str(changed), "--db", pg_url)
    assert code == 1 and len(out["moved"]) == 1 and len(out["cannot"]) == 1 and not out["written"]
    assert {tuple(h.resource for h in s.holds_of(i)) for i in ids} == {(f"node:{old}",)}
    # the rename: both kept, on the new name
    renamed = tmp_path / "renamed.yaml"
    renamed.write_text(_pg_inv(new))
    code, out = _replace(capsys, *ids, "--inventory", str(renamed), "--db", pg_url)
    assert code == 0 and out["written"] and [m["to"] for m in out["moved"]] == [[new], [new]]
    assert {tuple(h.resource for h in s.holds_of(i)) for i in ids} == {(f"node:{new}",)}
    assert orphaned(parse_inventory(renamed.read_text()), [b for b in s.bookings() if b.id in ids]) == []
    for i in ids:
        s.release(i)
    s.close()


def _race(db: str, node_old: str, inv_text: str, ids: list[str]) -> list[str]:
    """Two re-place calls planned from the same reading, then written at once: one moves, the other is refused."""
    inv = parse_inventory(inv_text)
    stores = [Store(db), Store(db)]
    plans = []
    for st in stores:
        live = st.bookings()
        plans.append(plan_moves(inv, live, ids, {"a40": "gpu"})[0])
    assert all(len(p) == len(ids) for p in plans)
    barrier = threading.Barrier(2)
    results: list[str] = []

    def go(k: int) -> None:
        barrier.wait()
        try:
            stores[k].move(plans[k], capacities(inv), actor=f"r{k}")
            results.append("moved")
        except BookingConflict as e:
            results.append(f"refused: {e}")
    threads = [threading.Thread(target=go, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for st in stores:
        st.close()
    return results


def _check_once(db: str, ids: list[str], new: str, results: list[str]) -> None:
    assert sorted(r.split(":")[0] for r in results) == ["moved", "refused"], results
    assert "changed since it was read" in next(r for r in results if r.startswith("refused"))
    s = Store(db)
    for i in ids:  # each booking holds one device of the new node, once
        assert [(h.resource, h.amount) for h in s.holds_of(i)] == [(f"node:{new}", 1.0)]
    assert [e["action"] for e in s.audit() if e["reservation"] in ids].count("re-place") == len(ids)
    for i in ids:
        s.release(i)
    s.close()


def test_two_re_place_calls_do_not_double_book_sqlite(tmp_path):
    db = str(tmp_path / "race.db")
    s = Store(db)
    ids = _pg_book(s, "gpu-07", "race", 2)
    s.close()
    _check_once(db, ids, "gpu-7", _race(db, "gpu-07", _pg_inv("gpu-7"), ids))


def test_two_re_place_calls_do_not_double_book_postgresql(pg_url, tmp_path):
    tag = tmp_path.name[-8:].replace("_", "")
    old, new = f"rc{tag}-07", f"rc{tag}-7"
    s = Store(pg_url)
    ids = _pg_book(s, old, tag, 2)
    s.close()
    _check_once(pg_url, ids, new, _race(pg_url, old, _pg_inv(new), ids))
