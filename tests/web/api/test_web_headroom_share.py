"""The web API's headroom is the CLI's (its parser): a share as 0.1 or "10%", as a request file's `headroom: 10%`
(request/quantities.py parse_share). Before, "10%" was refused by the flag (and so by the API) while request files
read it."""

from __future__ import annotations

import pytest

pytest.importorskip("httpx")
pytest.importorskip("fastapi")

from web_api_helpers import run_cli  # noqa: E402


def test_headroom_as_a_percentage_is_the_clis_answer(client) -> None:
    body = {"model": "llama-3.2-3b", "device": "l4", "headroom": "10%"}
    r = client.post("/api/v1/fit", json=body)
    assert r.status_code == 200, r.text
    cli = run_cli("fit", "llama-3.2-3b", "--device", "l4", "--headroom", "10%", "--json")
    assert cli.returncode == 0 and r.text == cli.stdout and r.json()["headroom"] == pytest.approx(0.1)
    bad = client.post("/api/v1/fit", json={**body, "headroom": "99.5%"})
    assert bad.status_code == 400 and "0.995 is out of range" in bad.json()["detail"]
