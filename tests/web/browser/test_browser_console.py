"""The provider console in real Chromium (#14), against a real `llmsizer serve --inventory --db --auth`: an operator
signs in with a token, sees the bookings timeline, confirms a held booking and sees the audit entry; a requester
sees no confirm button and a forged confirm is refused (403) and logged."""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from browser_helpers import ROOT, cli_env
from playwright.sync_api import Browser, Page, expect

pytest.importorskip("sqlalchemy")
httpx = pytest.importorskip("httpx")

OPERATOR, REQUESTER = "op-console-token-0123456789", "rq-console-token-0123456789"
LORA = (ROOT / "examples" / "lora-finetune-and-chat.yaml").read_text()


def _free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def provider_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    from llmsizer.provider.auth import hash_token
    tmp = tmp_path_factory.mktemp("console")
    inv = tmp / "inv.yaml"
    inv.write_text("provider: Example GPU cloud\nsites: [{id: s1, public_addresses: 8, isolated_segments: 8}]\n"
                   "storage: [{id: fs, site: s1, capacity: 1 PB}]\nnodes:\n"
                   "  - {id: serve-01, site: s1, device: a100-pcie-80gb, devices: 4, pools: [serving, serving-cluster]}\n"
                   "  - {id: serve-02, site: s1, device: a100-pcie-80gb, devices: 2, pools: [serving, serving-cluster]}\n")
    auth = tmp / "auth.yaml"
    auth.write_text("tokens:\n"
                    f'  - {{name: olga, role: operator, scrypt: "{hash_token(OPERATOR)}"}}\n'
                    f'  - {{name: rick, role: requester, scrypt: "{hash_token(REQUESTER)}"}}\n')
    port = _free_port()
    log = tempfile.TemporaryFile("w+")
    proc = subprocess.Popen([sys.executable, "-m", "llmsizer.cli.main", "serve", "--port", str(port), "--inventory",
                             str(inv), "--db", str(tmp / "b.db"), "--auth", str(auth)],
                            env=cli_env(), cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                log.seek(0)
                pytest.fail(f"serve exited {proc.returncode}: {log.read()}")
            try:
                with urllib.request.urlopen(f"{base}/api/v1", timeout=2):
                    break
            except OSError:
                time.sleep(0.2)
            if time.monotonic() > deadline:
                pytest.fail("serve did not answer within 60 s")
        # three bookings made over the API: two held (a requester's), one confirmed (an operator's)
        for k, (token, state) in enumerate(((REQUESTER, "held"), (REQUESTER, "held"), (OPERATOR, "confirmed"))):
            r = httpx.post(f"{base}/api/v1/capacity/book", headers={"Authorization": f"Bearer {token}"}, timeout=60,
                           json={"request": LORA.replace("support-chat", f"support-chat-{k}").replace(
                                     ": 2025-09-", ": 2030-09-"),  # a future window: the server's clock decides
                                 "job": f"support-chat-{k}", "state": state})
            assert r.status_code == 200 and len(r.json()["reservations"]) == 1, r.text
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        log.close()


def new_page(browser: Browser, base: str, problems: list[str]) -> Page:
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000}, base_url=base)
    pg = ctx.new_page()
    pg.on("console", lambda m: problems.append(m.text) if m.type == "error" and "status of 4" not in m.text else None)
    pg.on("pageerror", lambda e: problems.append(f"uncaught: {e}"))
    pg.on("request", lambda r: problems.append(f"another origin: {r.url}") if not r.url.startswith(base) else None)
    pg.set_default_timeout(15_000)
    return pg


def sign_in(pg: Page, token: str) -> None:
    pg.goto("/console")
    expect(pg.locator("#login")).to_be_visible()
    pg.fill("#token", token)
    pg.click("#sign-in")
    expect(pg.locator("#console")).to_be_visible()


def test_operator_confirms_a_held_booking(browser: Browser, provider_server: str, shots: Path):
    problems: list[str] = []
    pg = new_page(browser, provider_server, problems)
    pg.goto("/console")
    pg.fill("#token", "not-a-token")
    pg.click("#sign-in")
    # the sign-in's words, not an action's (probe26 C3: "show: the token is not one of ...")
    expect(pg.locator("#problem")).to_have_text("sign-in: the token is not one of the provider's auth file's")
    sign_in(pg, OPERATOR)
    expect(pg.locator("#who")).to_have_text("Signed in as olga (operator)")
    expect(pg.locator("#chart-timeline rect.hold")).to_have_count(3)
    expect(pg.locator("#chart-timeline rect.hold-held")).to_have_count(2)
    expect(pg.locator("#queue tbody tr")).to_have_count(2)
    expect(pg.locator("#inventory tbody tr")).to_have_count(2)
    held_id = pg.locator("#queue tbody tr").first.get_attribute("data-id")
    pg.screenshot(path=shots / "console.png", full_page=True)
    pg.locator(f'#queue button.confirm[data-id="{held_id}"]').click()
    expect(pg.locator("#status")).to_have_text(f"{held_id}: held -> confirmed")
    expect(pg.locator("#queue tbody tr")).to_have_count(1)
    expect(pg.locator("#chart-timeline rect.hold-confirmed")).to_have_count(2)
    first = pg.locator("#audit tbody tr").first  # newest first
    expect(first).to_contain_text("olga")
    expect(first).to_contain_text("confirm")
    expect(first).to_contain_text(held_id or "?")
    expect(first.locator("td").nth(4)).to_have_text("held")
    expect(first.locator("td").nth(5)).to_have_text("confirmed")
    pg.locator("#timeline").screenshot(path=shots / "console-timeline.png")
    assert not problems, problems


def test_requester_sees_no_confirm_and_a_forged_call_is_refused(browser: Browser, provider_server: str, shots: Path):
    problems: list[str] = []
    pg = new_page(browser, provider_server, problems)
    sign_in(pg, REQUESTER)
    expect(pg.locator("#who")).to_have_text("Signed in as rick (requester)")
    expect(pg.locator("#queue tbody tr")).not_to_have_count(0)
    expect(pg.locator("button.confirm")).to_have_count(0)
    expect(pg.locator("button.release")).to_have_count(0)
    rid = pg.locator("#queue tbody tr").first.get_attribute("data-id")
    # forged: the page's own session and CSRF token, a confirm the buttons do not offer
    status, detail = pg.evaluate("""async (rid) => {
        const s = await (await fetch('/api/v1/capacity/session')).json();
        const r = await fetch('/api/v1/capacity/confirm', {method: 'POST', headers: {'content-type':
            'application/json', 'x-csrf-token': s.csrf}, body: JSON.stringify({ids: [rid]})});
        return [r.status, (await r.json()).detail]; }""", rid)
    assert status == 403 and detail == "confirm: rick is a requester; it needs the operator role"
    status = pg.evaluate("""async (rid) => (await fetch('/api/v1/capacity/confirm', {method: 'POST', headers:
        {'content-type': 'application/json'}, body: JSON.stringify({ids: [rid]})})).status""", rid)
    assert status == 403  # the cookie without the CSRF header
    pg.click("#reload")
    rows = pg.locator("#audit tbody tr")  # newest first: the CSRF refusal, then the role refusal
    expect(rows.nth(0)).to_contain_text("denied:csrf")
    expect(rows.nth(1)).to_contain_text("denied:confirm")
    expect(rows.nth(1).locator("td").nth(1)).to_have_text("rick")  # the signed-in name, not the server user
    pg.screenshot(path=shots / "console-requester.png", full_page=False)
    assert not problems, problems


def test_operator_edits_the_inventory_on_the_page(browser: Browser, provider_server: str):
    """The inventory editor (operators only): a bad file is refused with the reader's line and nothing changes; a
    good one is saved, the inventory table shows it, the audit log has the edit under the operator's name."""
    problems: list[str] = []
    pg = new_page(browser, provider_server, problems)
    sign_in(pg, REQUESTER)
    expect(pg.locator("#inventory-edit")).to_be_hidden()
    pg.click("#sign-out")
    sign_in(pg, OPERATOR)
    editor = pg.locator("#inventory-text")
    expect(editor).to_have_value(re.compile(r"id: serve-02, site: s1, device: a100-pcie-80gb, devices: 2"))
    text = editor.input_value()
    editor.fill(text.replace("site: s1, device: a100-pcie-80gb, devices: 2", "site: nowhere, device: a100-pcie-80gb, "
                                                                             "devices: 2"))
    pg.click("#inventory-save")
    expect(pg.locator("#problem")).to_contain_text("'nowhere' is not a site of this inventory")
    expect(pg.locator("#inventory tbody tr").nth(1).locator("td").nth(3)).to_have_text("2")
    editor.fill(text.replace("devices: 2", "devices: 3"))
    pg.click("#inventory-save")
    expect(pg.locator("#status")).to_contain_text("inventory saved: 2 node(s)")
    expect(pg.locator("#inventory tbody tr").nth(1).locator("td").nth(3)).to_have_text("3")
    first = pg.locator("#audit tbody tr").first
    expect(first).to_contain_text("inventory")
    expect(first.locator("td").nth(1)).to_have_text("olga")
    assert not problems, problems
