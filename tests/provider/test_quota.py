"""Team quotas with borrowing in a cohort (#14), against the worked examples of Kueue's documentation
(kubernetes-sigs/kueue site/content/en/docs/concepts/cluster_queue.md, "Borrowing example" and "BorrowingLimit"):
team-a-cq (nominal 9) and team-b-cq (nominal 12) in cohort team-ab; with team-b idle, team-a admits up to
12 + 9 = 21; with borrowingLimit 1 on team-a, up to 9 + 1 = 10."""

from __future__ import annotations

import datetime as dt

import pytest

from llmsizer.provider.inventory import InventoryError
from llmsizer.provider.placement import Booking, Item, JobNeed, check_job, check_needs

from .conftest import inv
from .pg_databases import fresh_database

T0 = dt.datetime(2026, 1, 1)
H = 3600.0

NODES = """
sites: [{id: s1, fabrics: [{id: f1}]}]
nodes: [{id: n, count: 3, site: s1, device: h100-sxm, devices: 24, fabric: f1, pools: [training]}]
"""


def quotas(limit: str = "") -> str:
    return NODES + f"""quotas:
  - {{team: team-a, device: h100-sxm, devices: 9, cohort: team-ab{limit}}}
  - {{team: team-b, device: h100-sxm, devices: 12, cohort: team-ab}}
  - {{team: loner, device: h100-sxm, devices: 4}}
"""


def job(team: str, devices: int, **kw) -> JobNeed:
    return JobNeed("j", "training", "h100-sxm", devices, 1 if devices <= 24 else 2, 10 * H, T0, team=team, **kw)


def test_borrowing_within_the_cohort_like_kueue():
    cohort = inv(quotas())
    assert check_job(job("team-a", 9), cohort, []).placement.quota == "within team 'team-a' h100-sxm nominal quota " \
                                                                      "of 9 devices"
    c = check_job(job("team-a", 21), cohort, [])  # 12 + 9, team-b idle
    assert c.fits and c.placement.quota == "borrows 12 h100-sxm from cohort 'team-ab' (nominal 9)"
    c = check_job(job("team-a", 22), cohort, [])
    assert not c.fits and c.binding == "quota"
    assert c.reason == ("quota of team 'team-a' h100-sxm: 0 held + 22 asked at 2026-01-01 00:00 > nominal 9; "
                        "cohort 'team-ab' has 21 unused (no borrowing limit)")
    # team-b uses its nominal 12: nothing is left to borrow, team-a gets its own 9 only
    busy_b = Booking("b", "b", "training", (Item("team:team-b:h100-sxm", 12, T0, T0 + dt.timedelta(days=2)),))
    assert check_job(job("team-a", 9), cohort, [busy_b]).fits
    c = check_job(job("team-a", 10), cohort, [busy_b])
    assert not c.fits and c.binding == "quota" and "cohort 'team-ab' has 9 unused" in c.reason
    # ... and waits until team-b's usage ends
    assert c.placement is not None and c.placement.start == T0 + dt.timedelta(days=2)
    # a team outside any cohort cannot borrow; a team without a quota is not limited
    assert not check_job(job("loner", 5), cohort, []).fits
    assert check_job(job("nobody", 48), cohort, []).fits
    assert check_job(job("", 48), cohort, []).fits


def test_borrowing_limit_like_kueue():
    limited = inv(quotas(", borrowing_limit: 1"))
    assert check_job(job("team-a", 10), limited, []).fits  # 9 + 1
    c = check_job(job("team-a", 11), limited, [])
    assert not c.fits and "(borrowing limit 1)" in c.reason
    # team-b has no limit: it may borrow all of team-a's unused 9 (12 + 9)
    assert check_job(job("team-b", 21), limited, []).fits


def test_jobs_of_one_request_count_together_and_usage_is_recorded():
    cohort = inv(quotas())
    a, b = check_needs([job("team-a", 16), job("team-a", 8)], cohort, [])
    assert a.fits and not b.fits and b.binding == "quota"  # 16 + 8 > 21
    assert any(i.resource == "team:team-a:h100-sxm" and i.amount == 16 for i in a.placement.items)


def test_device_hours_quota():
    hours = inv(NODES + """quotas:
  - {team: t, device: h100-sxm, device_hours: 100, start: 2026-01-01, end: 2026-02-01}
""")
    used = Booking("u", "u", "training", (Item("team:t:h100-sxm", 1, T0, T0 + dt.timedelta(hours=90)),))
    assert check_job(JobNeed("j", "training", "h100-sxm", 1, 1, 10 * H, T0, team="t"), hours,
                     [used]).placement.quota == "100 of 100 device-hours in 2026-01-01..2026-02-01"
    c = check_job(JobNeed("j", "training", "h100-sxm", 1, 1, 11 * H, T0, team="t"), hours, [used])
    assert not c.fits and c.binding == "quota"
    assert c.reason == ("quota of team 't' h100-sxm: 90 device-hours booked in 2026-01-01..2026-02-01 + 11 asked "
                        "> nominal 100; no cohort to borrow from")
    # outside the period the hours do not count
    later = JobNeed("j", "training", "h100-sxm", 1, 1, 11 * H, dt.datetime(2026, 3, 1), team="t")
    assert check_job(later, hours, [used]).fits


def test_quota_entries_are_checked():
    with pytest.raises(InventoryError) as e:
        inv(NODES + """quotas:
  - {team: a, device: h100-sx, devices: 4}
  - {team: b, device: h100-sxm}
  - {team: c, device: h100-sxm, devices: 2, start: 2026-02-01, end: 2026-01-01, colour: red}
""")
    text = str(e.value)
    assert "quotas[0]: device: unknown" in text and "h100-sxm" in text
    assert "quotas[1]: give devices (nominal devices at once) or device_hours" in text
    assert "quotas[2]: end: 2026-01-01 00:00:00 is not after the start" in text and "colour" in text


def test_quota_rechecked_in_the_booking_transaction(tmp_path):
    """Five processes of one team book 1 device each at once; the node has 4 devices, the team's quota is 2 (no
    cohort): exactly 2 are booked whatever the interleaving (the others exit 1: answered, does not fit). The
    processes may or may not overlap on a busy machine; test_quota_recheck_refuses_a_stale_view forces it."""
    pytest.importorskip("sqlalchemy")
    import os
    import subprocess
    import sys
    from pathlib import Path

    from llmsizer.provider.store import Store

    from .test_lifecycle import RACE_REQ
    inv_file = tmp_path / "inv.yaml"
    inv_file.write_text("sites: [{id: s1}]\nstorage: [{id: fs, site: s1, capacity: 1 PB}]\n"
                        "nodes: [{id: n1, site: s1, device: a100-pcie-80gb, devices: 4, pools: [serving]}]\n"
                        "quotas: [{team: chat team, device: a100-pcie-80gb, devices: 2}]\n")
    db = str(tmp_path / "q.db")
    src = str(Path(__file__).resolve().parents[2] / "src")
    code = "import sys; from llmsizer.cli.main import main; sys.exit(main())"
    procs = []
    for k in range(5):
        req = tmp_path / f"r{k}.yaml"
        req.write_text(RACE_REQ.format(k=k))
        procs.append(subprocess.Popen([sys.executable, "-c", code, "capacity", "book", str(req), "--inventory",
                                       str(inv_file), "--db", db, "--now", "2025-09-01"], stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": src}))
    results = [(p.wait(timeout=300), p.stderr.read()) for p in procs]  # type: ignore[union-attr]
    assert sorted(r[0] for r in results) == [0, 0, 1, 1, 1], results
    assert all("quota of team 'chat team' a100-pcie-80gb" in err for rc, err in results if rc == 1), results
    assert len(Store(db).bookings()) == 2


def test_quota_recheck_refuses_a_stale_view(tmp_path, capsys, monkeypatch):
    """Deterministic form of the race: the second booking is checked against a stale (empty) view of the store,
    as when another process of the team booked between the check and the write. The transaction's re-check of
    the quota refuses it (exit 1, one line naming the quota); before the re-check it was booked (3 of quota 2)."""
    pytest.importorskip("sqlalchemy")
    from llmsizer.provider.store import Store

    from .test_cli_capacity import run
    from .test_lifecycle import RACE_REQ
    inv_file = tmp_path / "inv.yaml"
    inv_file.write_text("sites: [{id: s1}]\nstorage: [{id: fs, site: s1, capacity: 1 PB}]\n"
                        "nodes: [{id: n1, site: s1, device: a100-pcie-80gb, devices: 4, pools: [serving]}]\n"
                        "quotas: [{team: chat team, device: a100-pcie-80gb, devices: 2}]\n")
    db = str(tmp_path / "q.db")
    reqs = []
    for k in range(3):
        reqs.append(tmp_path / f"r{k}.yaml")
        reqs[-1].write_text(RACE_REQ.format(k=k))
    for r in reqs[:2]:
        assert run("capacity", "book", str(r), "--inventory", str(inv_file), "--db", db, "--now", "2025-09-01") == 0
    assert run("capacity", "book", str(reqs[2]), "--inventory", str(inv_file), "--db", db, "--now",
               "2025-09-01") == 1  # the check sees the team at its quota
    capsys.readouterr()
    monkeypatch.setattr(Store, "bookings", lambda self, include_tentative=True: [])
    assert run("capacity", "book", str(reqs[2]), "--inventory", str(inv_file), "--db", db, "--now",
               "2025-09-01") == 1
    err = capsys.readouterr().err
    assert err.startswith("not booked: job 'chat' no longer fits: quota of team 'chat team' a100-pcie-80gb: 2 held "
                          "+ 1 asked"), err
    monkeypatch.undo()
    assert len(Store(db).bookings()) == 2


def _confirm_over_quota(db: str, tmp_path, capsys) -> None:
    from .test_cli_capacity import run
    from .test_lifecycle import RACE_REQ
    inv_file = tmp_path / "inv.yaml"
    inv_file.write_text("sites: [{id: s1}]\nstorage: [{id: fs, site: s1, capacity: 1 PB}]\n"
                        "nodes: [{id: n1, site: s1, device: a100-pcie-80gb, devices: 4, pools: [serving]}]\n"
                        "quotas: [{team: chat team, device: a100-pcie-80gb, devices: 2}]\n")
    ids = []
    for k in range(3):  # requested bookings hold nothing: all three are taken
        req = tmp_path / f"r{k}.yaml"
        req.write_text(RACE_REQ.format(k=k))
        assert run("capacity", "book", str(req), "--inventory", str(inv_file), "--db", db, "--state", "requested",
                   "--now", "2025-09-01") == 0
        ids.append(capsys.readouterr().out.split("booked ")[1].split(":")[0])
    codes = [run("capacity", "confirm", rid, "--inventory", str(inv_file), "--db", db) for rid in ids]
    assert codes == [0, 0, 1]
    assert f"{ids[2]}: refused: job 'chat' no longer fits: quota of team 'chat team' a100-pcie-80gb: 2 held + 1 " \
           "asked" in capsys.readouterr().err


def test_confirm_rechecks_the_quota_sqlite(tmp_path, capsys):
    pytest.importorskip("sqlalchemy")
    _confirm_over_quota(str(tmp_path / "c.db"), tmp_path, capsys)


def test_confirm_rechecks_the_quota_postgresql(pg_url, tmp_path, capsys):
    url = fresh_database(pg_url, "llmsizer_quota")
    _confirm_over_quota(url, tmp_path, capsys)


def test_console_queue_applies_the_quota_confirm_applies(tmp_path, capsys):
    """provider9 #1: the console's queue `fits` is confirm's rule (store.taking_refusal), the team quota included.
    Three requested bookings of one team on a 4-device node with a team quota of 2: after two are confirmed, the
    third is inside the node's capacity (3 of 4) but over the quota; the queue says no with the reason confirm then
    gives. Before, the queue checked capacity alone and showed it as fitting."""
    pytest.importorskip("sqlalchemy")
    pytest.importorskip("fastapi")
    import argparse

    from llmsizer.web.api_capacity import console_view

    from .test_cli_capacity import run
    from .test_lifecycle import RACE_REQ
    inv_file = tmp_path / "inv.yaml"
    inv_file.write_text("sites: [{id: s1}]\nstorage: [{id: fs, site: s1, capacity: 1 PB}]\n"
                        "nodes: [{id: n1, site: s1, device: a100-pcie-80gb, devices: 4, pools: [serving]}]\n"
                        "quotas: [{team: chat team, device: a100-pcie-80gb, devices: 2}]\n")
    db = str(tmp_path / "q.db")
    ids = []
    for k in range(3):
        req = tmp_path / f"r{k}.yaml"
        req.write_text(RACE_REQ.format(k=k))
        assert run("capacity", "book", str(req), "--inventory", str(inv_file), "--db", db, "--state", "requested",
                   "--now", "2025-09-01") == 0
        ids.append(capsys.readouterr().out.split("booked ")[1].split(":")[0])
    args = argparse.Namespace(inventory=str(inv_file), db=db, auth=None, hardware_file=[], actor="t",
                              token_file=None, json=True, at=None, audit=True, svg=None, html=None)
    assert [q["fits"] for q in console_view(args)["queue"]] == [True, True, True]  # nothing holds capacity yet
    for rid in ids[:2]:
        assert run("capacity", "confirm", rid, "--inventory", str(inv_file), "--db", db) == 0
    (third,) = [q for q in console_view(args)["queue"] if q["id"] == ids[2]]
    assert third["fits"] is False
    assert run("capacity", "confirm", ids[2], "--inventory", str(inv_file), "--db", db) == 1
    err = capsys.readouterr().err
    assert f"{ids[2]}: refused: {third['binding']}\n" in err, (third, err)
    assert "quota of team 'chat team' a100-pcie-80gb: 2 held + 1 asked" in third["binding"]
