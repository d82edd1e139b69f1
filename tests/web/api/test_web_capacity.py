"""The provider's side over HTTP (#14): /api/v1/capacity answers the same JSON as `llmsizer capacity ... --json`
(the real CLI in a subprocess, same inventory, store and auth file); every mutating call without the role is a 403
with the CLI's message, written to the audit log; bad input is a 400 with the CLI's message; the console's sign-in
is a signed HttpOnly SameSite=Strict cookie whose changes need the CSRF header."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from web_api_helpers import ROOT, run_cli

pytest.importorskip("fastapi")
pytest.importorskip("sqlalchemy")

LORA = (ROOT / "examples" / "lora-finetune-and-chat.yaml").read_text()
NOW = "2025-09-01"
INVENTORY = ("sites: [{id: s1, public_addresses: 8, isolated_segments: 8}]\n"
             "storage: [{id: fs, site: s1, capacity: 1 PB}]\n"
             "nodes: [{id: serve-01, site: s1, device: a100-pcie-80gb, devices: 4, cpus: 64, ram: 512 GiB, "
             "pools: [serving, serving-cluster]}]\n")
OPERATOR, REQUESTER = "op-token-0123456789abcdef", "rq-token-0123456789abcdef"
MUTATING = ("hold", "confirm", "activate", "finish", "release", "expire")


def chat(k: int) -> str:
    """A request of its own per k, in a future window: over HTTP a requester's call is made at the server's clock."""
    return LORA.replace("support-chat", f"support-chat-{k}").replace(": 2025-09-", ": 2030-09-")


@pytest.fixture()
def provider(tmp_path):
    from fastapi.testclient import TestClient

    from llmsizer.provider.auth import hash_token
    from llmsizer.web.api_capacity import ProviderConfig
    from llmsizer.web.app import create_app
    inv = tmp_path / "inv.yaml"
    inv.write_text(INVENTORY)
    auth = tmp_path / "auth.yaml"
    auth.write_text("tokens:\n"
                    f'  - {{name: olga, role: operator, scrypt: "{hash_token(OPERATOR)}"}}\n'
                    f'  - {{name: rick, role: requester, scrypt: "{hash_token(REQUESTER)}"}}\n')
    assert OPERATOR not in auth.read_text()  # no plaintext secret stored
    db = str(tmp_path / "b.db")
    cfg = ProviderConfig(inventory=str(inv), db=db, auth=str(auth), session_key=b"k" * 32)
    with TestClient(create_app(provider=cfg), raise_server_exceptions=False) as c:
        yield c, tmp_path, cfg


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def cli(tmp_path: Path, token: str, *args: str):
    import os
    env_token = os.environ.get("LLMSIZER_TOKEN")
    os.environ["LLMSIZER_TOKEN"] = token
    try:
        return run_cli("capacity", *args, "--auth", str(tmp_path / "auth.yaml"))
    finally:
        if env_token is None:
            os.environ.pop("LLMSIZER_TOKEN")
        else:
            os.environ["LLMSIZER_TOKEN"] = env_token


def book(c, k: int, token: str = REQUESTER, state: str = "held"):
    return c.post("/api/v1/capacity/book", json={"request": chat(k), "job": f"support-chat-{k}", "state": state},
                  headers=bearer(token))


def audit(c) -> list[dict]:
    return c.get("/api/v1/capacity/audit", headers=bearer(REQUESTER)).json()["audit"]


def test_check_is_the_cli_answer(provider):
    c, tmp, cfg = provider
    r = c.post("/api/v1/capacity/check", json={"request": chat(0)}, headers=bearer(REQUESTER))
    req = tmp / "r0.yaml"
    req.write_text(chat(0))
    out = cli(tmp, REQUESTER, "check", str(req), "--inventory", cfg.inventory, "--db", cfg.db, "--json")
    assert r.status_code == 200, r.text
    assert r.text == out.stdout  # byte for byte
    assert r.headers["x-llmsizer-exit-code"] == str(out.returncode)


def test_check_of_a_request_naming_no_hardware_is_the_cli_answer(provider):
    """No hardware named: sized on the inventory's a100-pcie-80gb (placement.py on_inventory), FITS, the assumption
    stated, byte for byte the CLI's answer."""
    c, tmp, cfg = provider
    text = ("version: 1\njobs:\n  - name: chat\n    kind: inference\n    model: {name: qwen2.5-0.5b}\n"
            "    traffic: {concurrency: {typical: 2}, context: {typical: 2k}}\n    service: {duration: 7 days}\n"
            "    resources: {storage: 100 GB}\n    start: 2030-09-01\n")
    r = c.post("/api/v1/capacity/check", json={"request": text}, headers=bearer(REQUESTER))
    req = tmp / "bare.yaml"
    req.write_text(text)
    out = cli(tmp, REQUESTER, "check", str(req), "--inventory", cfg.inventory, "--db", cfg.db, "--json")
    assert r.status_code == 200, r.text
    assert r.text == out.stdout and r.headers["x-llmsizer-exit-code"] == "0"
    (answer,) = r.json()["jobs"]
    assert answer["fits"] and answer["need"]["device"] == "a100-pcie-80gb"
    assert answer["assumption"].startswith("assumed: the request names no hardware")


def test_book_lifecycle_show_export_match_the_cli(provider):
    c, tmp, cfg = provider
    r = book(c, 0)
    assert r.status_code == 200, r.text
    (b,) = r.json()["reservations"]
    assert b["state"] == "held" and not b["existing"]
    again = book(c, 0)  # the same request and job: the existing booking (idempotency key)
    # one shape for a new and an existing booking (probe10 #8: the existing one was {id, job, state, existing})
    assert again.json()["reservations"] == [{**b, "existing": True}] and b["job"] == "support-chat-0"
    r = c.post("/api/v1/capacity/confirm", json={"ids": [b["id"]]}, headers=bearer(OPERATOR))
    assert r.status_code == 200 and r.json()["transitions"] == [{"id": b["id"], "before": "held", "after": "confirmed"}]
    r = c.post("/api/v1/capacity/confirm", json={"ids": [b["id"]]}, headers=bearer(OPERATOR))
    assert r.headers["x-llmsizer-exit-code"] == "1" and r.json()["transitions"][0]["refused"] == f"{b['id']} is already confirmed"
    show = c.get("/api/v1/capacity/show", params={"at": "2030-10-01"}, headers=bearer(REQUESTER))
    out = cli(tmp, REQUESTER, "show", "--inventory", cfg.inventory, "--db", cfg.db, "--at", "2030-10-01", "--json")
    assert show.text == out.stdout
    aud = c.get("/api/v1/capacity/audit", headers=bearer(REQUESTER))
    out = cli(tmp, REQUESTER, "show", "--inventory", cfg.inventory, "--db", cfg.db, "--audit", "--json")
    assert aud.text == out.stdout
    assert [(e["actor"], e["before"], e["after"]) for e in aud.json()["audit"]] == [
        ("rick", None, "held"), ("olga", "held", "confirmed")]
    for fmt in ("slurm", "kueue", "blazar"):
        who = {"user": "chat"} if fmt == "slurm" else {}  # kueue/blazar have no user field: refused there
        r = c.get(f"/api/v1/capacity/export/{b['id']}", params={"format": fmt, **who}, headers=bearer(OPERATOR))
        out = cli(tmp, OPERATOR, "export", b["id"], "--format", fmt, "--db", cfg.db, "--inventory", cfg.inventory,
                  *(f"--{k}={v}" for k, v in who.items()))
        assert r.status_code == 200 and r.text == out.stdout and out.returncode == 0
    r = c.post("/api/v1/capacity/release", json={"ids": [b["id"]]}, headers=bearer(OPERATOR))
    assert r.json()["transitions"] == [{"id": b["id"], "before": "confirmed", "after": "released"}]
    r = c.get(f"/api/v1/capacity/export/{b['id']}", params={"format": "slurm"}, headers=bearer(OPERATOR))
    assert r.status_code == 409 and "only a confirmed or active booking" in r.json()["detail"]


@pytest.mark.parametrize("action", MUTATING)
def test_mutating_call_without_the_role_is_403_and_logged(provider, action):
    c, tmp, cfg = provider
    (b,) = book(c, 1).json()["reservations"]
    r = c.post(f"/api/v1/capacity/{action}", json={"ids": [b["id"]]}, headers=bearer(REQUESTER))
    assert r.status_code == 403 and r.headers["content-type"] == "application/problem+json"
    assert r.json()["detail"] == f"{action}: rick is a requester; it needs the operator role"
    out = cli(tmp, REQUESTER, action, b["id"], "--inventory", cfg.inventory, "--db", cfg.db)
    assert out.returncode == 2 and out.stderr.strip().removesuffix(" (see --help)") == f"llmsizer: error: {r.json()['detail']}"
    denied = [e for e in audit(c) if e["action"] == f"denied:{action}"]
    assert len(denied) == 2 and denied[0]["detail"] == r.json()["detail"]  # the API's and the CLI's refusal
    assert [e["actor"] for e in denied] == ["rick", "rick"]  # logged under the token's name
    r = c.post(f"/api/v1/capacity/{action}", json={"ids": [b["id"]]})  # no token at all
    assert r.status_code == 403 and r.json()["detail"].startswith(f"{action}: needs an operator token")


def test_other_refusals(provider):
    c, tmp, cfg = provider
    book(c, 1)  # the store exists: refusals are logged in it
    r = book(c, 2, state="confirmed")  # straight to confirmed: an operator's call
    assert r.status_code == 403
    assert r.json()["detail"] == "book-confirmed: rick is a requester; it needs the operator role"
    r = c.get("/api/v1/capacity/export/x", params={"format": "slurm"}, headers=bearer(REQUESTER))
    assert r.status_code == 403 and r.json()["detail"] == "export: rick is a requester; it needs the operator role"
    r = c.post("/api/v1/capacity/check", json={"request": chat(0)}, headers=bearer("forged"))
    assert r.status_code == 403 and r.json()["detail"] == "check: the token is not one of the provider's auth file's"
    assert {"denied:book-confirmed", "denied:export"} <= {e["action"] for e in audit(c)}


def test_bad_input_is_a_400_with_the_cli_message(provider):
    c, tmp, cfg = provider
    r = c.post("/api/v1/capacity/release", json={"ids": ["nope"]}, headers=bearer(OPERATOR))
    book(c, 3)
    r = c.post("/api/v1/capacity/release", json={"ids": ["nope"]}, headers=bearer(OPERATOR))
    out = cli(tmp, OPERATOR, "release", "nope", "--db", cfg.db)
    assert r.status_code == 400 and out.returncode == 2
    assert out.stderr.strip().removesuffix(" (see --help)") == f"llmsizer: error: {r.json()['detail']}"
    r = c.post("/api/v1/capacity/check", json={"request": chat(0), "now": "yesterday"}, headers=bearer(OPERATOR))
    req = tmp / "r.yaml"
    req.write_text(chat(0))
    out = cli(tmp, REQUESTER, "check", str(req), "--inventory", cfg.inventory, "--now", "yesterday")
    assert r.status_code == 400 and out.stderr.strip().removesuffix(" (see --help)") == f"llmsizer: error: {r.json()['detail']}"
    r = c.post("/api/v1/capacity/book", json={"request": chat(0), "job": "support-chat-0", "now": "2031-01-01"},
               headers=bearer(OPERATOR))  # the window is in the past of that now
    assert r.status_code == 400 and "before now" in r.json()["detail"]
    r = c.post("/api/v1/capacity/check", json={"request": chat(0), "inventory": "/etc/passwd"},
               headers=bearer(REQUESTER))
    assert r.status_code == 400 and r.json()["field"] == "inventory"  # no server-side path from a request
    r = c.post("/api/v1/capacity/check", json={"request": "jobs: ["}, headers=bearer(REQUESTER))
    assert r.status_code == 400 and r.json()["detail"].startswith("request.yaml:")


def test_console_sign_in_session_and_csrf(provider):
    c, tmp, cfg = provider
    (b,) = book(c, 4).json()["reservations"]
    r = c.post("/api/v1/capacity/login", json={"token": "wrong"})
    assert r.status_code == 403 and "llmsizer_session" not in r.cookies
    # worded for the sign-in, not for the action the token is checked for (probe26 C3: "show: the token ...")
    assert r.json()["detail"] == "sign-in: the token is not one of the provider's auth file's"
    r = c.post("/api/v1/capacity/login", json={"token": OPERATOR})
    assert r.status_code == 200 and r.json()["role"] == "operator"
    cookie = r.headers["set-cookie"].lower()
    assert "httponly" in cookie and "samesite=strict" in cookie and OPERATOR.lower() not in cookie
    csrf = r.json()["csrf"]
    assert c.get("/api/v1/capacity/session").json()["csrf"] == csrf
    r = c.post("/api/v1/capacity/confirm", json={"ids": [b["id"]]})  # the cookie alone: no CSRF header
    assert r.status_code == 403 and "X-CSRF-Token" in r.json()["detail"]
    r = c.post("/api/v1/capacity/confirm", json={"ids": [b["id"]]}, headers={"X-CSRF-Token": "guess"})
    assert r.status_code == 403
    r = c.post("/api/v1/capacity/confirm", json={"ids": [b["id"]]}, headers={"X-CSRF-Token": csrf})
    assert r.status_code == 200 and r.json()["transitions"][0]["after"] == "confirmed"
    assert audit(c)[-1]["actor"] == "olga"
    view = c.get("/api/v1/capacity/console").json()
    assert [h["node"] for h in view["holds"]] == ["serve-01"] and view["nodes"][0]["devices"] == 4
    value = c.cookies["llmsizer_session"]
    c.cookies.clear()
    c.cookies.set("llmsizer_session", value[:-1] + ("0" if value[-1] != "0" else "1"))  # a forged signature
    assert c.get("/api/v1/capacity/session").json()["signed_in"] is False
    r = c.post("/api/v1/capacity/login", json={"token": REQUESTER})
    r = c.post("/api/v1/capacity/release", json={"ids": [b["id"]]}, headers={"X-CSRF-Token": r.json()["csrf"]})
    assert r.status_code == 403 and r.json()["detail"] == "release: rick is a requester; it needs the operator role"


def test_without_an_inventory_the_capacity_routes_say_how_to_start(client):
    r = client.post("/api/v1/capacity/check", json={"request": "x"})
    assert r.status_code == 503 and "--inventory" in r.json()["detail"]
    # the console asks first, and is told why with a 200 (a 503 is a console error in the browser)
    r = client.get("/api/v1/capacity/status")
    assert r.status_code == 200 and r.json() == {"inventory": False, "detail": client.post(
        "/api/v1/capacity/check", json={"request": "x"}).json()["detail"]}


def test_a_server_with_an_inventory_says_so(provider):
    c, _, _ = provider
    assert c.get("/api/v1/capacity/status").json() == {"inventory": True, "detail": None}


def test_the_json_of_the_cli_has_not_moved(provider):
    """The lifecycle commands' --json (new with the API): one entry per id, under ``transitions`` in the envelope
    every answer carries (a bare list before the envelope change)."""
    c, tmp, cfg = provider
    (b,) = book(c, 5).json()["reservations"]
    out = cli(tmp, OPERATOR, "confirm", b["id"], "--inventory", cfg.inventory, "--db", cfg.db, "--json")
    assert json.loads(out.stdout) == {"schema_version": 1, "kind": "capacity-confirm",
                                      "transitions": [{"id": b["id"], "before": "held", "after": "confirmed"}]}


def test_serve_checks_the_provider_files_before_listening(tmp_path):
    r = run_cli("serve", "--db", str(tmp_path / "b.db"), "--port", "1")
    assert r.returncode == 2 and r.stderr.strip() == ("llmsizer: error: --db and --auth serve the provider's side: give "
                                                      "--inventory FILE too")
    bad = tmp_path / "inv.yaml"
    bad.write_text("nodes: [")
    r = run_cli("serve", "--inventory", str(bad), "--port", "1")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "inv.yaml" in r.stderr


def test_not_booked_is_exit_1_with_the_cli_lines(provider):
    """4 devices, 1 each: the fifth request is not booked: [] with exit code 1 (as `book --json`), and the lines the
    CLI prints to stderr in X-Llmsizer-Notes."""
    c, tmp, cfg = provider
    for k in range(4):
        assert book(c, 10 + k).headers["x-llmsizer-exit-code"] == "0"
    r = book(c, 14)
    assert r.status_code == 200 and r.json()["reservations"] == [] and r.headers["x-llmsizer-exit-code"] == "1"
    notes = json.loads(r.headers["x-llmsizer-notes"])
    assert len(notes) == 1 and notes[0].startswith("support-chat-14: not booked: ")
    req = tmp / "r14.yaml"
    req.write_text(chat(14))
    out = cli(tmp, REQUESTER, "book", str(req), "--inventory", cfg.inventory, "--db", cfg.db, "--job",
              "support-chat-14", "--state", "held", "--json")
    assert out.returncode == 1 and out.stdout == r.text and out.stderr.strip().splitlines() == notes


def test_console_queue_says_which_held_booking_no_longer_fits(provider):
    """Two held bookings of 1 device; the node shrinks to 1 device (a new inventory on the same store): the queue
    says each would push node:serve-01 to 2 of 1, and confirming one is refused the same way."""
    from fastapi.testclient import TestClient

    from llmsizer.web.api_capacity import ProviderConfig
    from llmsizer.web.app import create_app
    c, tmp, cfg = provider
    ids = [book(c, 20 + k).json()["reservations"][0]["id"] for k in range(2)]
    small = tmp / "small.yaml"
    small.write_text(INVENTORY.replace("devices: 4", "devices: 1"))
    with TestClient(create_app(provider=ProviderConfig(str(small), cfg.db, cfg.auth, b"k" * 32))) as s:
        queue = s.get("/api/v1/capacity/console", headers=bearer(REQUESTER)).json()["queue"]
        assert [(q["id"], q["fits"]) for q in queue] == [(rid, False) for rid in ids]
        assert all("node:serve-01 would hold 2 of 1" in q["binding"] for q in queue), queue
        r = s.post("/api/v1/capacity/confirm", json={"ids": ids[:1]}, headers=bearer(OPERATOR))
        assert r.json()["transitions"][0]["refused"] == queue[0]["binding"]  # confirm's reason, word for word
    queue = c.get("/api/v1/capacity/console", headers=bearer(REQUESTER)).json()["queue"]
    assert all(q["fits"] for q in queue)


def test_operators_edit_the_inventory(provider):
    """PUT /capacity/inventory: a requester is refused (403, logged); a bad file is a 400 with the line the CLI
    prints for the same file; an operator's edit is written over the server's file, logged, and used at once."""
    c, tmp, cfg = provider
    book(c, 30)  # the store exists
    bigger = INVENTORY.replace("devices: 4", "devices: 8")
    r = c.put("/api/v1/capacity/inventory", json={"inventory": bigger}, headers=bearer(REQUESTER))
    assert r.status_code == 403 and r.json()["detail"] == "inventory: rick is a requester; it needs the operator role"
    bad = "nodes: [{id: n1, site: nowhere, device: a100-pcie-80gb, devices: 4}]\n"
    r = c.put("/api/v1/capacity/inventory", json={"inventory": bad}, headers=bearer(OPERATOR))
    (tmp / "cwd").mkdir()
    (tmp / "cwd" / "inventory.yaml").write_text(bad)
    (tmp / "cwd" / "r.yaml").write_text(chat(0))
    out = run_cli("capacity", "check", "r.yaml", "--inventory", "inventory.yaml", "--no-db", cwd=tmp / "cwd")
    assert r.status_code == 400 and out.returncode == 2
    assert out.stderr.strip().splitlines()[0].removesuffix(" (see --help)") == f"llmsizer: error: {r.json()['detail']}"
    assert Path(cfg.inventory).read_text() == INVENTORY  # nothing written
    r = c.put("/api/v1/capacity/inventory", json={"inventory": bigger}, headers=bearer(OPERATOR))
    assert r.status_code == 200 and r.json()["nodes"] == 1
    assert c.get("/api/v1/capacity/inventory", headers=bearer(REQUESTER)).text == bigger
    view = c.get("/api/v1/capacity/console", headers=bearer(REQUESTER)).json()
    assert view["nodes"][0]["devices"] == 8
    edits = [e for e in view["audit"] if e["action"] == "inventory"]
    assert [(e["actor"], e["before"], e["after"]) for e in edits] == [("olga", r.json()["before"], r.json()["after"])]
    denied = [e for e in view["audit"] if e["action"] == "denied:inventory"]
    assert [e["actor"] for e in denied] == ["rick"]  # the token's name, known though it lacks the role


def test_a_requester_cannot_set_now(provider):
    """Over HTTP a call is made at the server's clock: a requester's `now` (which would book a window in the past)
    is a 403, logged; an operator may give one (replaying a day, a test); the CLI's --now is unchanged."""
    c, tmp, cfg = provider
    book(c, 40)  # the store exists: refusals are logged in it
    past = LORA.replace("support-chat", "support-chat-41")  # its window: September 2025, before the clock
    r = c.post("/api/v1/capacity/book", json={"request": past, "job": "support-chat-41", "now": NOW,
                                              "state": "held"}, headers=bearer(REQUESTER))
    assert r.status_code == 403 and r.json()["detail"] == "now: rick is a requester; it needs the operator role"
    r = c.post("/api/v1/capacity/check", json={"request": past, "now": NOW}, headers=bearer(REQUESTER))
    assert r.status_code == 403
    assert [e["actor"] for e in audit(c) if e["action"] == "denied:now"] == ["rick", "rick"]
    r = c.post("/api/v1/capacity/book", json={"request": past, "job": "support-chat-41", "state": "held"},
               headers=bearer(REQUESTER))  # without it: the server's clock, and the window is in its past
    assert r.status_code == 400 and "before now" in r.json()["detail"]
    r = c.post("/api/v1/capacity/book", json={"request": past, "job": "support-chat-41", "now": NOW,
                                              "state": "held"}, headers=bearer(OPERATOR))
    assert r.status_code == 200 and r.json()["reservations"][0]["state"] == "held"


def test_a_csrf_refusal_is_logged(provider):
    c, tmp, cfg = provider
    (b,) = book(c, 42).json()["reservations"]
    c.post("/api/v1/capacity/login", json={"token": OPERATOR})
    r = c.post("/api/v1/capacity/release", json={"ids": [b["id"]]}, headers={"X-CSRF-Token": "forged"})
    assert r.status_code == 403
    (e,) = [e for e in audit(c) if e["action"] == "denied:csrf"]
    assert e["actor"] == "olga" and e["detail"].startswith("POST /api/v1/capacity/release: missing or wrong X-CSRF")
    rows = c.get("/api/v1/capacity/show", headers=bearer(REQUESTER)).json()["reservations"]
    assert [r["state"] for r in rows if r["id"] == b["id"]] == ["held"]  # not released


def test_sign_in_is_limited_per_client_across_server_processes(provider):
    """5 failed sign-ins from one client within 15 minutes, then 429 (Retry-After) even for the right token, on
    this server and on a second one sharing the store (another process in production: the count is in the store,
    not in memory); a success resets the count; the window's end lifts the limit."""
    import datetime as dt

    from fastapi.testclient import TestClient

    from llmsizer.provider.store import LOGIN_FAILURES, Store
    from llmsizer.web.app import create_app
    c, tmp, cfg = provider
    assert c.post("/api/v1/capacity/login", json={"token": "wrong"}).status_code == 403
    assert c.post("/api/v1/capacity/login", json={"token": OPERATOR}).status_code == 200  # resets the count
    for _ in range(LOGIN_FAILURES):
        assert c.post("/api/v1/capacity/login", json={"token": "wrong"}).status_code == 403
    r = c.post("/api/v1/capacity/login", json={"token": OPERATOR})
    assert r.status_code == 429 and "too many failed sign-ins" in r.json()["detail"]
    assert 800 < int(r.headers["retry-after"]) <= 900 and "llmsizer_session" not in r.headers.get("set-cookie", "")
    with TestClient(create_app(provider=cfg)) as other:  # a second server on the same store
        assert other.post("/api/v1/capacity/login", json={"token": OPERATOR}).status_code == 429
    denied = [e for e in audit(c) if e["action"] == "denied:login"]
    assert len(denied) == 1 + LOGIN_FAILURES + 2 and "too many failed sign-ins" in denied[-1]["detail"]
    store = Store(cfg.db)  # the window (15 min from the first failure) ends
    try:
        with store.engine.begin() as conn:
            conn.execute(store.logins.update().values(since=dt.datetime(2000, 1, 1)))
    finally:
        store.close()
    assert c.post("/api/v1/capacity/login", json={"token": OPERATOR}).status_code == 200


def test_an_inventory_edit_that_orphans_live_bookings_says_so_and_the_console_lists_them(provider):
    """probe10 defect 1: a save that renames the node under live bookings answered only {nodes, sites, before,
    after}, and the console then drew the renamed node empty with no word of the bookings. The save stays a save
    (as `capacity import` writes an inventory), and answers with what `capacity show` warns of, in its words; the
    console lists the orphaned bookings."""
    c, tmp, cfg = provider
    ids = [book(c, 40 + k).json()["reservations"][0]["id"] for k in range(2)]
    renamed = INVENTORY.replace("id: serve-01", "id: serve-1")
    r = c.put("/api/v1/capacity/inventory", json={"inventory": renamed}, headers=bearer(OPERATOR))
    assert r.status_code == 200
    saved = r.json()
    assert saved["orphaned"] == [{"node": "serve-01", "reservations": ids,
                                  "why": "the inventory has no such node (removed or renamed)"}]
    out = cli(tmp, REQUESTER, "show", "--inventory", cfg.inventory, "--db", cfg.db)  # the CLI's warning, word for word
    assert out.returncode == 0 and len(saved["warnings"]) == 1 and f"warning: {saved['warnings'][0]}\n" in out.stderr
    view = c.get("/api/v1/capacity/console", headers=bearer(REQUESTER)).json()
    assert view["orphaned"] == saved["orphaned"] and view["maintenance"] == []
    # put back: nothing to say
    r = c.put("/api/v1/capacity/inventory", json={"inventory": INVENTORY}, headers=bearer(OPERATOR))
    assert "orphaned" not in r.json() and r.json()["warnings"] == []


def test_console_queue_says_whether_a_requested_booking_fits(provider):
    """probe10 defect 5: a requested booking's queue entry had fits null ("not placed yet") though book placed it;
    confirm re-checks its placed holds, and so does the queue now."""
    from fastapi.testclient import TestClient

    from llmsizer.web.api_capacity import ProviderConfig
    from llmsizer.web.app import create_app
    c, tmp, cfg = provider
    ids = [book(c, 50 + k, state="requested").json()["reservations"][0]["id"] for k in range(2)]
    held = book(c, 52).json()["reservations"][0]["id"]
    queue = {q["id"]: q for q in c.get("/api/v1/capacity/console", headers=bearer(REQUESTER)).json()["queue"]}
    assert [(queue[i]["state"], queue[i]["fits"], queue[i]["binding"]) for i in ids] == [("requested", True, "")] * 2
    small = tmp / "small.yaml"
    small.write_text(INVENTORY.replace("devices: 4", "devices: 1"))  # the held booking takes the one device
    with TestClient(create_app(provider=ProviderConfig(str(small), cfg.db, cfg.auth, b"k" * 32))) as s:
        queue = {q["id"]: q for q in s.get("/api/v1/capacity/console", headers=bearer(REQUESTER)).json()["queue"]}
        assert [queue[i]["fits"] for i in ids] == [False] * 2
        assert all("node:serve-01 would hold 2 of 1" in queue[i]["binding"] for i in ids)
        r = s.post("/api/v1/capacity/confirm", json={"ids": ids[:1]}, headers=bearer(OPERATOR))
        assert r.json()["transitions"][0]["refused"] == queue[ids[0]]["binding"]  # what the queue said, word for word
        assert queue[held]["fits"] is True  # requested bookings hold nothing: the held one alone fits
    r = c.post("/api/v1/capacity/confirm", json={"ids": ids[:1]}, headers=bearer(OPERATOR))
    assert r.json()["transitions"] == [{"id": ids[0], "before": "requested", "after": "confirmed"}]


def test_a_maintenance_window_saved_over_a_booking_is_listed(provider):
    """probe10 defect 6 on the web: a window saved over a live booking is answered by the save and listed by the
    console; it lies outside the windows the service's request agreed to (recorded with the booking, schema 5), so
    it is refused as a training run's would be."""
    c, tmp, cfg = provider
    (b,) = book(c, 60).json()["reservations"]
    start = b["start"][:10]
    window = f"maintenance: [{{start: {start}T06:00, end: {start}T08:00, nodes: [serve-01]}}]\n"
    r = c.put("/api/v1/capacity/inventory", json={"inventory": INVENTORY + window}, headers=bearer(OPERATOR))
    (m,) = r.json()["maintenance"]
    assert (m["reservation"], m["node"], m["kind"], m["refused"], m["agreed_windows"]) == (
        b["id"], "serve-01", "inference", True, ["Sundays 02:00-04:00 UTC", "weekdays 01:00-05:00 UTC"])
    assert r.json()["warnings"][0].startswith(f"booking {b['id']} (support-chat-60, inference) on node 'serve-01' "
                                              f"runs across the provider's maintenance window {start} 06:00-")
    view = c.get("/api/v1/capacity/console", headers=bearer(REQUESTER)).json()
    assert view["maintenance"] == r.json()["maintenance"]
