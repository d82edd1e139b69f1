"""The provider's side over HTTP after probe10 (defects 8, 9, 13): /capacity/show returns the utilisation API.md
promises, the bookings carry the plan's numbers, and a 400 about orphaned bookings names neither the server's
inventory path nor an operator's command line."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_web_capacity import OPERATOR, REQUESTER, bearer, book, chat, cli, provider  # noqa: F401

pytest.importorskip("fastapi")
pytest.importorskip("sqlalchemy")


def test_show_gives_utilisation_and_the_plans_numbers(provider):  # noqa: F811
    """probe10 #9: API.md promised {"reservations", "utilisation"}; the server gave {"reservations"}. #8: the
    bookings carried no memory, device count or cost."""
    c, tmp, cfg = provider
    r = book(c, 0, OPERATOR, "confirmed")
    assert r.status_code == 200, r.text
    (b,) = r.json()["reservations"]
    show = c.get("/api/v1/capacity/show", headers=bearer(REQUESTER)).json()
    assert show["utilisation"] == {k: 0.0 for k in show["utilisation"]} and "node:serve-01" in show["utilisation"]
    inside = c.get("/api/v1/capacity/show", params={"at": b["start"]}, headers=bearer(REQUESTER)).json()
    (row,) = inside["reservations"]
    # the inventory's one node holds 4 devices: the booking's device count, a quarter each
    assert inside["utilisation"]["node:serve-01"] == pytest.approx(row["devices"] / 4) and row["devices"] >= 1
    check = c.post("/api/v1/capacity/check", json={"request": chat(0), "no_db": True}, headers=bearer(REQUESTER))
    (need,) = [a["need"] for a in check.json()["jobs"] if a["job"] == b["job"]]
    assert row["memory_per_device"] == need["memory_per_device"] == b["memory_per_device"] > 0
    assert row["cost"] == b["cost"] and b["cost"] is not None
    console = c.get("/api/v1/capacity/console", headers=bearer(REQUESTER)).json()
    assert console["reservations"][0]["memory_per_device"] == row["memory_per_device"]
    out = cli(tmp, REQUESTER, "show", "--inventory", cfg.inventory, "--db", cfg.db, "--at", b["start"], "--json")
    assert c.get("/api/v1/capacity/show", params={"at": b["start"]}, headers=bearer(REQUESTER)).text == out.stdout


def test_orphan_refusal_over_http_names_no_server_path(provider):  # noqa: F811
    """probe10 #13: the 400 read "/srv/.../inventory.yaml: node ... (`llmsizer capacity re-place --inventory
    /srv/...`)" to any client with a token; over HTTP it names the provider's inventory and the console's actions,
    as the auth refusal names "the provider's auth file". The CLI keeps its path and commands."""
    c, tmp, cfg = provider
    assert book(c, 0, OPERATOR, "confirmed").status_code == 200
    inv = Path(cfg.inventory)
    inv.write_text(inv.read_text().replace("serve-01", "serve-1"))  # the operator renamed the node on disk
    r = c.post("/api/v1/capacity/check", json={"request": chat(1)}, headers=bearer(REQUESTER))
    assert r.status_code == 400
    detail = r.json()["detail"]
    assert "the provider's inventory: node 'serve-01' holds live booking(s)" in detail
    assert str(tmp) not in detail and "llmsizer capacity" not in detail and "--inventory" not in detail
    assert "the console's inventory editor" in detail
    view = c.get("/api/v1/capacity/console", headers=bearer(REQUESTER))
    assert str(tmp) not in view.text
    out = cli(tmp, REQUESTER, "check", str(tmp / "r.yaml"), "--inventory", cfg.inventory, "--db", cfg.db) \
        if (tmp / "r.yaml").write_text(chat(1)) else None
    assert out is not None and out.returncode == 2
    assert f"{cfg.inventory}: node 'serve-01'" in out.stderr and f"`llmsizer capacity re-place --inventory " \
        f"{cfg.inventory}`" in out.stderr
