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
    assert run("capacity", "book", PRE, "--inventory", INV, "--db", db, "--json") == 0
    import json
    (booked,) = json.loads(capsys.readouterr().out)
    assert len(booked["nodes"]) == 8
    assert run("capacity", "check", PRE, "--inventory", INV, "--db", db) == 1
    out = capsys.readouterr().out
    assert "DOES NOT FIT" in out and "[fabric]" in out and "start later" in out
    svg = tmp_path / "u.svg"
    assert run("capacity", "show", "--inventory", INV, "--db", db, "--at", "2025-10-05", "--svg", str(svg)) == 0
    out = capsys.readouterr().out
    assert booked["id"] in out and "node:fra1-h100-a-01" in out and "peak 50%" in out
    assert svg.read_text().startswith("<svg")
    assert run("capacity", "release", booked["id"], "--db", db) == 0
    capsys.readouterr()
    assert run("capacity", "check", PRE, "--inventory", INV, "--db", db) == 0
    assert run("capacity", "book", LORA, "--inventory", INV, "--db", db, "--job", "support-chat",
               "--tentative") == 0
    assert "booked" in capsys.readouterr().out


def test_bad_inventory_is_one_line_per_problem(tmp_path, capsys):
    bad = tmp_path / "inv.yaml"
    bad.write_text("sites: [{id: s}]\nnodes:\n  - {id: n, device: h100, devices: -1}\n")
    assert run("capacity", "check", PRE, "--inventory", str(bad), "--no-db") == 2
