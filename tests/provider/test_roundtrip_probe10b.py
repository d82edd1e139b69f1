"""A provisioner's round trip (probe10, defects 8, 10, 11, 12, 14): the booking record carries the plan's numbers and
`book --json` answers one shape; a past start is refused in the form of every request error; a refused `book`
creates no store file; owned hardware gets no provider pricing check; `--job` with a wrong name offers the jobs."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

pytest.importorskip("sqlalchemy", reason="the reservation store needs SQLAlchemy 2 (the 'provider' extra)")

from .test_cli_capacity import INV, LORA, NOW, run  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def _plan_facts(request: str) -> dict[str, dict]:
    from llmsizer.plan import plan_file
    plan = plan_file(request, today=__import__("datetime").date(2025, 9, 1))
    return {jp.name: dict(jp.facts) for jp in plan.jobs}


def test_booking_carries_the_plans_numbers_in_one_shape(tmp_path, capsys):
    """probe10 #8: show gave only id/job/kind/state/start/end/created/note (no memory, devices or cost to reconcile
    with the plan), and `book --json` answered {id, job, state, existing} for an existing booking."""
    db = str(tmp_path / "b.db")
    assert run("capacity", "book", LORA, "--inventory", INV, "--db", db, "--json", *NOW) == 0
    new = json.loads(capsys.readouterr().out)["reservations"]
    assert run("capacity", "book", LORA, "--inventory", INV, "--db", db, "--json", *NOW) == 0
    again = json.loads(capsys.readouterr().out)["reservations"]
    assert again == [{**b, "existing": True} for b in new]  # the same record, one shape
    facts = _plan_facts(LORA)
    for b in new:
        f = facts[b["job"]]
        assert b["memory_per_device"] == f["memory_per_device"] > 0  # the plan's own figure, to the byte
        assert b["cost"] == pytest.approx(f["cost_total"]) and b["devices"] >= 1
        assert b["nodes"] and b["start"] < b["end"]
    train = next(b for b in new if b["kind"] == "training")
    assert train["seconds"] == pytest.approx(facts[train["job"]]["seconds"])
    assert run("capacity", "show", "--inventory", INV, "--db", db, "--json") == 0
    rows = {r["id"]: r for r in json.loads(capsys.readouterr().out)["reservations"]}
    for b in new:
        assert {k: rows[b["id"]][k] for k in ("memory_per_device", "devices", "seconds", "cost", "cost_per_month")} \
            == {k: b[k] for k in ("memory_per_device", "devices", "seconds", "cost", "cost_per_month")}


def test_a_schema_3_store_migrates_and_reads_its_old_bookings(tmp_path, capsys):
    """A store written before the figures existed: read as it is (null figures), and migrated by the next change."""
    db = tmp_path / "old.db"
    assert run("capacity", "book", LORA, "--inventory", INV, "--db", str(db), "--job", "support-chat", *NOW) == 0
    capsys.readouterr()
    con = sqlite3.connect(db)  # back to schema 3: the figure columns gone
    for col in ("memory_per_device", "devices", "seconds", "cost", "cost_per_month"):
        con.execute(f"ALTER TABLE reservations DROP COLUMN {col}")
    con.execute("UPDATE meta SET value = '3' WHERE key = 'schema_version'")
    con.commit()
    con.close()
    assert run("capacity", "show", "--inventory", INV, "--db", str(db), "--json") == 0
    (old,) = json.loads(capsys.readouterr().out)["reservations"]
    assert old["memory_per_device"] is None and old["cost"] is None
    assert run("capacity", "book", LORA, "--inventory", INV, "--db", str(db), "--job", "support-chat", "--json",
               *NOW) == 0
    (same,) = json.loads(capsys.readouterr().out)["reservations"]
    assert same["existing"] and same["id"] == old["id"] and same["devices"] is None
    con = sqlite3.connect(db)
    assert con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == ("6",)
    con.close()


def test_past_start_names_file_line_and_field(tmp_path, capsys):
    """probe10 #10: `job 'x': the requested window starts ...` was the one request error without FILE:LINE."""
    req = tmp_path / "past.yaml"
    text = Path(LORA).read_text()
    req.write_text(text)
    line = next(i for i, t in enumerate(text.splitlines(), 1) if t.strip().startswith("start:") and t.startswith(" "))
    job = next(t.split(":", 1)[1].strip() for t in reversed(text.splitlines()[:line]) if "- name:" in t)
    from llmsizer.cli.main import main
    assert main(["capacity", "book", str(req), "--inventory", INV, "--db", str(tmp_path / "b.db"),
                 "--now", "2030-01-01"]) == 2
    err = capsys.readouterr().err
    assert f"{req}:{line}: job '{job}' (" in err and "): start: the requested window starts " in err, err


def test_a_refused_book_creates_no_store(tmp_path, capsys):
    """probe10 #11: a book refused as not fitting left an empty SQLite file behind (docs/provider.md: the file is
    created by the first change)."""
    db = tmp_path / "f.db"
    tiny = tmp_path / "inv.yaml"
    tiny.write_text("sites: [{id: s1}]\nstorage: [{id: fs, site: s1, capacity: 1 PB}]\n"
                    "nodes: [{id: n1, site: s1, device: l4, devices: 1, pools: [training, serving]}]\n")
    assert run("capacity", "book", LORA, "--inventory", str(tiny), "--db", str(db), *NOW) == 1
    assert "not booked" in capsys.readouterr().err
    assert not db.exists()
    assert run("capacity", "book", LORA, "--inventory", INV, "--db", str(db), *NOW) == 0  # the first change
    assert db.exists()


def test_owned_hardware_gets_no_provider_pricing_check(tmp_path):
    """probe10 #12: a bare device with the team's own price_per_hour got the job note "provider pricing does not
    apply" and, beside it, the check "Hourly or reserved? ... Confirm the discount and term with the provider"."""
    import yaml

    from llmsizer.plan import plan_file
    doc = yaml.safe_load(Path(LORA).read_text())
    for j in doc["jobs"]:
        j["resources"] = {"device": "a100-sxm-80gb", "count": 1, "price_per_hour": "$2/h", "storage": "100 GB"}
        j.pop("pricing", None)
    doc.pop("pricing", None)
    owned = tmp_path / "owned.yaml"
    owned.write_text(yaml.safe_dump(doc, sort_keys=False))
    plan = plan_file(owned)
    assert not [c for c in plan.checks if c.id == "pricing-undecided"]
    # the same jobs on catalog prices (no price of their own): the provider's advice stands
    for j in doc["jobs"]:
        del j["resources"]["price_per_hour"]
    owned.write_text(yaml.safe_dump(doc, sort_keys=False))
    assert len([c for c in plan_file(owned).checks if c.id == "pricing-undecided"]) == len(doc["jobs"])


def test_a_wrong_job_name_lists_the_jobs(tmp_path, capsys):
    """probe10 #14: `--job nosuch` said only "no such job with hardware in FILE"."""
    db = str(tmp_path / "b.db")
    from llmsizer.cli.main import main
    assert main(["capacity", "book", LORA, "--inventory", INV, "--db", db, "--job", "support-chta", *NOW]) == 2
    err = capsys.readouterr().err
    assert "did you mean 'support-chat'?" in err and "its jobs with hardware: " in err
    assert not Path(db).exists()


def test_docs_name_scontrols_own_flag():
    """probe10 #14: docs/provider.md said `--oneline`; scontrol's flag is `--oneliner` (scontrol(1): -o, --oneliner)."""
    text = (ROOT / "docs" / "provider.md").read_text()
    assert "--oneliner" in text and "--oneline`" not in text
