"""`llmsizer capacity ...` end to end on the examples, against a SQLite file."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("sqlalchemy", reason="the reservation store needs SQLAlchemy 2 (the 'provider' extra)")

from llmsizer.cli.capacity_cmd import register  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
INV = str(ROOT / "examples" / "provider" / "inventory.yaml")
PRE = str(ROOT / "examples" / "pretraining-multinode.yaml")
LORA = str(ROOT / "examples" / "lora-finetune-and-chat.yaml")
PARTNER_ONLY = str(Path(__file__).resolve().parent / "data" / "partner_only_inventory.yaml")  # no on-site H100/A100
NOW = ("--now", "2025-09-01")  # the examples' windows start in September/October 2025


def run(*argv: str) -> int:
    import argparse

    from llmsizer.errors import LlmsizerError
    p = argparse.ArgumentParser(prog="llmsizer")
    register(p.add_subparsers(dest="command"))
    args = p.parse_args(list(argv))
    try:
        return int(args.func(args) or 0)
    except LlmsizerError:
        return 2


def test_check_book_show_release(tmp_path, capsys):
    db = str(tmp_path / "b.db")
    assert run("capacity", "check", PRE, "--inventory", INV, "--db", db) == 0
    assert "FITS     at fra1" in capsys.readouterr().out
    assert run("capacity", "book", PRE, "--inventory", INV, "--db", db, "--json", *NOW) == 0
    import json
    (booked,) = json.loads(capsys.readouterr().out)["reservations"]
    assert len(booked["nodes"]) == 8
    assert run("capacity", "check", PRE, "--inventory", INV, "--db", db) == 0  # its own booking: already booked
    assert capsys.readouterr().out.startswith(f"already booked {booked['id']}")
    again = tmp_path / "again.yaml"  # the same run asked again by another request (another idempotency key)
    again.write_text(Path(PRE).read_text().replace('title: "', 'title: "again: '))
    assert run("capacity", "check", str(again), "--inventory", INV, "--db", db) == 1
    out = capsys.readouterr().out
    assert "DOES NOT FIT" in out and "[busy] 4 of 12" in out and "start later" in out
    svg = tmp_path / "u.svg"
    assert run("capacity", "show", "--inventory", INV, "--db", db, "--at", "2025-10-05", "--svg", str(svg)) == 0
    out = capsys.readouterr().out
    assert booked["id"] in out and "node:fra1-h100-a-01" in out and "peak 44%" in out  # 64 of the 144 H100s
    assert svg.read_text().startswith("<svg")
    assert run("capacity", "release", booked["id"], "--db", db) == 0
    capsys.readouterr()
    assert run("capacity", "check", PRE, "--inventory", INV, "--db", db) == 0
    # the service's agreed windows (Sundays 02:00-04:00, weekdays 01:00-05:00) do not cover the provider's
    # Saturday firmware window at fra1: with only fra1's serving nodes, not in the requested window, but from its end
    assert run("capacity", "book", LORA, "--inventory", PARTNER_ONLY, "--db", db, "--job", "support-chat",
               "--tentative", *NOW) == 1
    assert "outside the job's agreed maintenance windows" in capsys.readouterr().err
    assert run("capacity", "book", LORA, "--inventory", PARTNER_ONLY, "--db", db, "--job", "support-chat",
               "--tentative", "--earliest", *NOW) == 0
    assert "booked" in capsys.readouterr().out


def test_bad_inventory_is_one_line_per_problem(tmp_path, capsys):
    bad = tmp_path / "inv.yaml"
    bad.write_text("sites: [{id: s}]\nnodes:\n  - {id: n, device: h100, devices: -1}\n  - {id: m, device: h100}\n")
    from llmsizer.cli.main import main
    assert main(["capacity", "check", PRE, "--inventory", str(bad), "--no-db"]) == 2
    lines = capsys.readouterr().err.splitlines()
    # each problem is its own line with the error prefix (the second one lost it before)
    assert len(lines) >= 2 and all(ln.startswith(f"llmsizer: error: {bad}:") for ln in lines), lines


SMALL_INV = """\
version: 1
sites:
  - {id: s1, public_addresses: 1, isolated_segments: 1}
nodes:
  - {id: train-01, site: s1, device: h100-sxm, devices: 8, ram: 2 TiB, pools: [training, training-cluster]}
  - {id: serve-01, site: s1, device: a100-pcie-80gb, devices: 1, ram: 880 GiB, pools: [serving, serving-cluster]}
storage:
  - {id: fs, site: s1, capacity: 1 PB}
"""


def test_book_is_all_or_none(tmp_path, capsys, monkeypatch):
    inv = tmp_path / "inv.yaml"
    inv.write_text(SMALL_INV)
    db = str(tmp_path / "b.db")
    from llmsizer.provider.store import Store
    # the only serving device is taken by an earlier booking of the service, from another request (the same
    # request would be answered with its existing booking: idempotency)
    other = tmp_path / "other.yaml"
    other.write_text(Path(LORA).read_text().replace("copied to the cluster's scratch disk", "copied to scratch"))
    assert run("capacity", "book", str(other), "--inventory", str(inv), "--db", db, "--job", "support-chat",
               *NOW) == 0
    capsys.readouterr()
    # the whole request: the service no longer fits at check time -> nothing is booked, the training job neither
    assert run("capacity", "book", LORA, "--inventory", str(inv), "--db", db, *NOW) == 1
    err = capsys.readouterr().err
    assert "support-chat: not booked" in err and "nothing of this request was booked" in err
    assert [b.job for b in Store(db).bookings()] == ["support-chat"]
    # a stale view (another booking landed after the check): the re-check in one transaction refuses the whole
    # request: exit 1 (answered: it no longer fits), one line naming the job, and nothing recorded
    monkeypatch.setattr(Store, "bookings", lambda self, include_tentative=True: [])
    assert run("capacity", "book", LORA, "--inventory", str(inv), "--db", db, *NOW) == 1
    err = capsys.readouterr().err
    assert err.startswith("not booked: job 'support-chat' no longer fits: node:serve-01 would hold 2 of 1"), err
    assert len(err.strip().splitlines()) == 1 and "--earliest books the next free window" in err
    monkeypatch.undo()
    assert [r["job"] for r in Store(db).reservations()] == ["support-chat"]


def test_show_html_is_self_contained(tmp_path, capsys):
    import re
    from html.parser import HTMLParser
    db = str(tmp_path / "b.db")
    # fra1 as the provider's own site, so that the LoRA job's confidential, on-premises-only data may go there
    own = tmp_path / "inv.yaml"
    own.write_text(Path(INV).read_text().replace("operator: partner", "operator: provider"))
    inv_own = str(own)
    assert run("capacity", "book", PRE, "--inventory", inv_own, "--db", db, "--json", *NOW) == 0
    assert run("capacity", "book", LORA, "--inventory", inv_own, "--db", db, "--tentative", "--earliest", *NOW) == 0
    capsys.readouterr()
    page = tmp_path / "cap.html"
    assert run("capacity", "show", "--inventory", inv_own, "--db", db, "--html", str(page)) == 0
    text = page.read_text("utf-8")
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".cap.html")] == []  # temp file renamed

    class Check(HTMLParser):
        void = {"meta", "br", "img", "input", "link", "hr", "col", "area", "base", "wbr", "source", "track"}
        svg_void = {"rect", "line", "circle", "path", "polyline", "polygon"}

        def __init__(self) -> None:
            super().__init__()
            self.stack: list[str] = []
            self.tags: list[str] = []

        def handle_starttag(self, tag, attrs):
            self.tags.append(tag)
            if tag not in self.void:
                self.stack.append(tag)

        def handle_startendtag(self, tag, attrs):
            self.tags.append(tag)

        def handle_endtag(self, tag):
            assert self.stack and self.stack[-1] == tag, (tag, self.stack[-5:])
            self.stack.pop()

    c = Check()
    c.feed(text)
    c.close()
    assert c.stack == []  # every element closed, properly nested
    assert text.startswith("<!DOCTYPE html>") and "Content-Security-Policy" in text
    assert c.tags.count("svg") == 3  # one timeline per device type of the inventory
    assert "<script" not in text.lower() and not re.search(r"https?:", text)
    assert "<svg" in text and "Devices held over time: h100-sxm" in text
    assert 'id="bookings"' in text and "ticket-lora" in text and "support-chat" in text and "tentative" in text


def test_shipped_example_honours_offsite_policy(capsys):
    """examples/lora-finetune-and-chat.yaml: the LoRA job's dataset is confidential with offsite_allowed: false;
    fra1 is a partner data centre, so the job must not be placed there: with H100s only at fra1 it is refused, in
    the shipped inventory it runs on the on-site pool (muc1, provider-operated)."""
    assert run("capacity", "check", LORA, "--inventory", PARTNER_ONLY, "--no-db", *NOW) == 1
    out = capsys.readouterr().out
    lora = out.split("support-chat (inference)")[0]
    assert "FITS" not in lora and "[policy]" in lora
    assert "fra1 is a partner data centre and the data (confidential) may not sit off-site (offsite_allowed: " \
           "false)" in lora
    assert run("capacity", "check", LORA, "--inventory", INV, "--no-db", *NOW) == 0
    lora = capsys.readouterr().out.split("support-chat (inference)")[0]
    assert "FITS     at muc1 (provider, DE): muc1-h100-" in lora and "fra1" not in lora, lora
    assert run("capacity", "check", PRE, "--inventory", INV, "--no-db", *NOW) == 0  # internal, offsite allowed
    assert "FITS     at fra1 (partner, DE)" in capsys.readouterr().out


def test_a_state_change_on_a_mistyped_db_creates_nothing(tmp_path):
    """`capacity release ID --db typo.db` created an empty 60 KB store at typo.db, then said "no reservation 'ID'":
    the mistyped path was left behind and the message sent the operator looking for a booking. Now one line naming
    the path, exit 2, no file; `expire` with no ids has nothing due."""
    from llmsizer.cli.main import main

    db = tmp_path / "typo.db"
    import contextlib
    import io
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(["capacity", "release", "r-1", "--db", str(db)])
    assert code == 2 and not db.exists()
    assert err.getvalue() == (f"llmsizer: error: --db {db}: no reservation store there (`llmsizer capacity book` "
                              "creates it); nothing was changed\n")
    assert run("capacity", "expire", "--db", str(db)) == 0 and not db.exists()


def test_a_db_in_a_missing_folder_is_said_and_never_created(tmp_path, capsys):
    """probe23 C5: `check --db /missing/x.db` said "`capacity book` creates it", and book then failed with
    "(sqlite3.OperationalError) unable to open database file". Now the note says the folder is missing and book stops
    in one line (exit 2) naming it; no folder or file is made."""
    db = tmp_path / "missing" / "x.db"
    assert run("capacity", "check", PRE, "--inventory", INV, "--db", str(db)) == 0
    err = capsys.readouterr().err
    assert f"its folder {db.parent} does not exist either" in err and "create the folder first" in err
    assert run("capacity", "book", PRE, "--inventory", INV, "--db", str(db), *NOW) == 2
    assert not db.parent.exists()
    from llmsizer.provider.store import Store, StoreError
    with pytest.raises(StoreError, match=f"its folder {db.parent} does not exist"):
        Store(str(db))
