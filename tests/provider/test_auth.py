"""Roles (#14): requesters check and submit; operators confirm, release and edit the inventory. Tokens are checked
against salted scrypt hashes in the provider's auth file; an operation without the role exits 2 with one line and
is written to the audit log."""

from __future__ import annotations

import hashlib

import pytest

pytest.importorskip("sqlalchemy", reason="the reservation store needs SQLAlchemy 2 (the 'provider' extra)")

from llmsizer.provider.auth import (  # noqa: E402
    ACTIONS,
    Forbidden,
    authorize,
    hash_token,
    parse_auth,
)
from llmsizer.provider.store import Store  # noqa: E402

from .test_cli_capacity import LORA, NOW, run  # noqa: E402
from .test_lifecycle import SMALL, replay  # noqa: E402

OPERATOR, REQUESTER = "op-secret-token-1", "req-secret-token-2"


def auth_text() -> str:
    return (f'tokens:\n  - {{name: ops-alice, role: operator, scrypt: "{hash_token(OPERATOR)}"}}\n'
            f'  - {{name: support-ml, role: requester, scrypt: "{hash_token(REQUESTER)}"}}\n')


def test_authorize_is_a_pure_check_of_hashed_tokens():
    text = auth_text()
    assert OPERATOR not in text and REQUESTER not in text  # no plaintext stored
    cfg = parse_auth(text)
    salt_hex, key_hex = text.split('scrypt: "')[1].split('"')[0].split("$")
    # the stored key is scrypt(token, salt) as RFC 7914 defines it, computed here with hashlib directly
    assert hashlib.scrypt(OPERATOR.encode(), salt=bytes.fromhex(salt_hex), n=2**14, r=8, p=1, dklen=32).hex() \
        == key_hex
    assert hash_token(OPERATOR) != hash_token(OPERATOR)  # salted: the same token hashes differently each time
    assert authorize(OPERATOR, "confirm", cfg).name == "ops-alice"
    assert authorize(REQUESTER, "check", cfg).role == "requester"
    assert authorize(REQUESTER, "submit", cfg).name == "support-ml"
    for action, least in ACTIONS.items():
        if least == "operator":
            with pytest.raises(Forbidden, match=rf"^{action}: support-ml is a requester; it needs the operator role$"):
                authorize(REQUESTER, action, cfg)
            assert authorize(OPERATOR, action, cfg).role == "operator"
    with pytest.raises(Forbidden, match="not one of"):
        authorize("guess", "check", cfg)
    with pytest.raises(Forbidden, match="set LLMSIZER_TOKEN or give --token-file"):
        authorize(None, "check", cfg)
    with pytest.raises(Exception, match="a plaintext token is not accepted"):
        parse_auth("tokens:\n  - {name: x, role: operator, scrypt: hunter2}\n")


def test_cli_roles_enforced_and_logged(tmp_path, capsys, monkeypatch):
    inv = tmp_path / "inv.yaml"
    inv.write_text(SMALL)
    auth = tmp_path / "auth.yaml"
    auth.write_text(auth_text())
    db = str(tmp_path / "b.db")
    base = ("--inventory", str(inv), "--db", db, "--auth", str(auth))
    monkeypatch.setenv("LLMSIZER_TOKEN", REQUESTER)
    assert run("capacity", "check", LORA, *base, *NOW) in (0, 1)  # a requester checks
    # ... submits (requested), but may not book straight into confirmed
    assert run("capacity", "book", LORA, *base, "--job", "support-chat", "--state", "requested", *NOW) == 0
    rid = capsys.readouterr().out.split("booked ")[1].split(":")[0]
    assert run("capacity", "book", LORA, *base, "--job", "support-chat", *NOW) == 2
    # every lifecycle change is an operator's
    for action in ("hold", "confirm", "activate", "finish", "release", "expire"):
        assert run("capacity", action, rid, "--db", db, "--inventory", str(inv), "--auth", str(auth)) == 2
    # a token file wins over the environment; the operator confirms; the actor is the token's name
    tf = tmp_path / "token"
    tf.write_text(OPERATOR + "\n")
    assert run("capacity", "confirm", rid, "--db", db, "--inventory", str(inv), "--auth", str(auth),
               "--token-file", str(tf), "--actor", "someone-else") == 0
    monkeypatch.setenv("LLMSIZER_TOKEN", "stolen?")
    assert run("capacity", "show", *base) == 2
    log = Store(db).audit()
    denied = [e for e in log if e["action"].startswith("denied:")]
    assert [e["action"] for e in denied] == ["denied:book-confirmed", "denied:hold", "denied:confirm",
                                             "denied:activate", "denied:finish", "denied:release", "denied:expire",
                                             "denied:show"]
    assert "support-ml is a requester; it needs the operator role" in denied[1]["detail"]
    assert [(e["actor"], e["action"]) for e in log if not e["action"].startswith("denied:")] == \
        [("support-ml", "book"), ("ops-alice", "confirm")]
    assert replay(log) == {rid: "confirmed"}
    # without an auth file nothing is enforced (as before)
    monkeypatch.delenv("LLMSIZER_TOKEN")
    assert run("capacity", "show", "--inventory", str(inv), "--db", db) == 0


def test_cli_refusal_is_one_line(tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path
    inv = tmp_path / "inv.yaml"
    inv.write_text(SMALL)
    auth = tmp_path / "auth.yaml"
    auth.write_text(auth_text())
    src = str(Path(__file__).resolve().parents[2] / "src")
    r = subprocess.run([sys.executable, "-c", "import sys; from llmsizer.cli.main import main; sys.exit(main())",
                        "capacity", "release", "abc", "--db", str(tmp_path / "b.db"), "--auth", str(auth)],
                       capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": src, "LLMSIZER_TOKEN": REQUESTER})
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0 and "Traceback" not in r.stderr
    assert "release: support-ml is a requester; it needs the operator role" in r.stderr
