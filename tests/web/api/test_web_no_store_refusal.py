"""probe22 C7: on a server whose `--db` store does not exist yet, `/capacity/confirm` or `/release` with an id answered
400 "no reservation 'nope'" and still created the SQLite file (bad input wrote a file), in other words than the
CLI's "--db X: no reservation store there ... nothing was changed". Now both surfaces refuse in the one line
(cli/capacity_cmd.py ``no_store_refusal``) and create nothing; over HTTP the store is named without the server's
path ("this server's --db", as the auth file is "the provider's auth file"). The truth: the real CLI's stderr for the
same id and the same --db, and the file system."""

from __future__ import annotations

import pytest
from web_api_helpers import cli_error_line

pytest.importorskip("fastapi")
pytest.importorskip("sqlalchemy")

INVENTORY = ("sites: [{id: s1, public_addresses: 8, isolated_segments: 8}]\n"
             "nodes: [{id: serve-01, site: s1, device: a100-pcie-80gb, devices: 4, pools: [serving]}]\n")
OPERATOR = "op-token-0123456789abcdef"


@pytest.fixture()
def server(tmp_path):
    from fastapi.testclient import TestClient

    from llmsizer.provider.auth import hash_token
    from llmsizer.web.api_capacity import ProviderConfig
    from llmsizer.web.app import create_app
    inv = tmp_path / "inv.yaml"
    inv.write_text(INVENTORY)
    auth = tmp_path / "auth.yaml"
    auth.write_text(f'tokens:\n  - {{name: olga, role: operator, scrypt: "{hash_token(OPERATOR)}"}}\n')
    db = tmp_path / "not-yet.db"
    cfg = ProviderConfig(inventory=str(inv), db=str(db), auth=str(auth), session_key=b"k" * 32)
    with TestClient(create_app(provider=cfg), raise_server_exceptions=False) as c:
        yield c, inv, db


@pytest.mark.parametrize("action", ["confirm", "release", "hold", "activate", "finish"])
def test_an_id_on_a_missing_store_is_the_cli_refusal_and_writes_nothing(server, action) -> None:
    c, inv, db = server
    r = c.post(f"/api/v1/capacity/{action}", json={"ids": ["nope"]},
               headers={"Authorization": f"Bearer {OPERATOR}"})
    assert not db.exists()  # before: the 400 came after an empty store was created
    line = cli_error_line("capacity", action, "nope", "--inventory", str(inv), "--db", str(db))
    assert not db.exists()
    assert line.startswith(f"--db {db}: no reservation store there")  # the CLI's line, naming its path
    body = r.json()
    assert r.status_code == 400, body
    assert body["detail"] == line.replace(f"--db {db}", "this server's --db"), body
    assert str(db) not in body["detail"] and str(db.parent) not in r.text  # the server's path is not shown


def test_expire_with_no_ids_on_a_missing_store_has_nothing_due(server) -> None:
    c, _, db = server
    r = c.post("/api/v1/capacity/expire", json={"ids": []}, headers={"Authorization": f"Bearer {OPERATOR}"})
    assert r.status_code == 200 and r.json()["transitions"] == [] and not db.exists()
