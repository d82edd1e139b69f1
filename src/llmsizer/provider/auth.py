"""Who may do what to the provider's bookings: roles from tokens, checked against salted scrypt hashes.

Two roles: a ``requester`` checks requests, submits them (``book`` as requested or held) and reads bookings; an
``operator`` may do all that, and confirm, activate, finish, release and expire bookings, move orphaned ones
(``re-place``), book straight into ``confirmed``, and edit the inventory (``capacity import``). :data:`ACTIONS` is the one table.

The provider's auth file (YAML) lists tokens by name, role and hash; no token is stored in plaintext::

    tokens:
      - {name: alice, role: operator, scrypt: "<salt hex>$<key hex>"}
      - {name: support-ml, role: requester, scrypt: "..."}

The hash is ``hashlib.scrypt(token, salt=16 random bytes, n=2**14, r=8, p=1, dklen=32)`` (RFC 7914; the
parameters are the ones Python's documentation and OWASP's password-storage sheet give as a minimum for
interactive logins); tokens are compared with ``hmac.compare_digest``. ``llmsizer capacity token`` makes a token and
its line. :func:`authorize` is pure (token, action, config in; the role out, or :class:`Forbidden`), so the CLI and
the HTTP API share it.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import InputError

ROLES = ("requester", "operator")
#: action -> the least role that may do it (operator includes requester)
ACTIONS: dict[str, str] = {
    "check": "requester", "show": "requester", "submit": "requester",
    "book-confirmed": "operator", "hold": "operator", "confirm": "operator", "activate": "operator",
    "finish": "operator", "release": "operator", "re-place": "operator", "expire": "operator",
    "inventory": "operator", "export": "operator",
    # over HTTP, the time a check or booking is made at is the server's clock; only an operator may give another
    # (a requester could otherwise book a window in the past)
    "now": "operator",
}
SCRYPT = {"n": 2**14, "r": 8, "p": 1, "dklen": 32}
MAX_AUTH_BYTES = 1 << 20


class Forbidden(InputError):
    """The token does not allow the action (exit 2 on the CLI, 403 over HTTP); ``who``: the token's name when it
    is a known token without the role (the audit log's actor of the refusal), else None."""

    def __init__(self, message: str, who: str | None = None) -> None:
        super().__init__(message)
        self.who = who


@dataclass(frozen=True)
class Role:
    name: str  # who (the token's name): the actor written to the audit log
    role: str  # requester | operator


@dataclass(frozen=True)
class TokenEntry:
    name: str
    role: str
    salt: bytes
    key: bytes


@dataclass(frozen=True)
class AuthConfig:
    tokens: tuple[TokenEntry, ...]
    source: str = "<auth>"


def hash_token(token: str, salt: bytes | None = None) -> str:
    """``<salt hex>$<key hex>`` for ``token`` (a new random salt unless given)."""
    salt = salt if salt is not None else secrets.token_bytes(16)
    key = hashlib.scrypt(token.encode(), salt=salt, **SCRYPT)
    return f"{salt.hex()}${key.hex()}"


def new_token() -> str:
    return secrets.token_urlsafe(32)


def parse_auth(text: str, source: str = "<auth>") -> AuthConfig:
    import yaml
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise InputError(f"{source}: not valid YAML ({str(e).splitlines()[0]})") from None
    if not isinstance(data, dict) or not isinstance(data.get("tokens"), list):
        raise InputError(f"{source}: expected 'tokens:' with a list of {{name, role, scrypt}}")
    out = []
    for k, t in enumerate(data["tokens"]):
        where = f"{source}: tokens[{k}]"
        if not isinstance(t, dict) or set(t) - {"name", "role", "scrypt"}:
            raise InputError(f"{where}: give name, role and scrypt only")
        name, role, h = t.get("name"), t.get("role"), t.get("scrypt")
        if not isinstance(name, str) or not name:
            raise InputError(f"{where}: name: required")
        if role not in ROLES:
            raise InputError(f"{where}: role: one of {', '.join(ROLES)}, not {role!r}")
        try:
            salt_hex, key_hex = str(h).split("$")
            salt, key = bytes.fromhex(salt_hex), bytes.fromhex(key_hex)
        except ValueError:
            raise InputError(f"{where}: scrypt: expected '<salt hex>$<key hex>' (make one with `llmsizer capacity "
                             "token`); a plaintext token is not accepted") from None
        if len(salt) < 16 or len(key) != SCRYPT["dklen"]:
            raise InputError(f"{where}: scrypt: a 16-byte salt and a 32-byte key expected")
        out.append(TokenEntry(name, str(role), salt, key))
    return AuthConfig(tuple(out), source)


def load_auth(path: str | Path) -> AuthConfig:
    from ..inputs import read_small_text
    return parse_auth(read_small_text(Path(path), "auth file", MAX_AUTH_BYTES), str(path))


def authorize(token: str | None, action: str, config: AuthConfig, said: str | None = None) -> Role:
    """The role ``token`` holds when it may do ``action``; else :class:`Forbidden` with one line, which begins with
    ``said`` where given (the web's sign-in checks a token for ``show`` but is no ``show`` call), else ``action``."""
    need = ACTIONS.get(action)
    if need is None:
        raise InputError(f"unknown action {action!r}; one of {', '.join(ACTIONS)}")
    what = said or action
    if not token:
        raise Forbidden(f"{what}: needs {_article(need)} {need} token: set LLMSIZER_TOKEN or give --token-file")
    who = None
    for e in config.tokens:
        if hmac.compare_digest(hashlib.scrypt(token.encode(), salt=e.salt, **SCRYPT), e.key):
            who = e
            break
    if who is None:
        raise Forbidden(f"{what}: the token is not one of {config.source}'s")
    return allow(Role(who.name, who.role), action)


def allow(who: Role, action: str) -> Role:
    """``who`` when its role may do ``action`` (a role already proven, e.g. a signed-in web session); else
    :class:`Forbidden` with the same line as :func:`authorize`."""
    need = ACTIONS.get(action)
    if need is None:
        raise InputError(f"unknown action {action!r}; one of {', '.join(ACTIONS)}")
    if ROLES.index(who.role) < ROLES.index(need):
        raise Forbidden(f"{action}: {who.name} is {_article(who.role)} {who.role}; it needs the {need} role", who.name)
    return who


def read_token(env: dict[str, Any] | None = None, token_file: str | None = None) -> str | None:
    """The token: ``--token-file`` (its first line) or the LLMSIZER_TOKEN environment variable."""
    import os
    if token_file:
        from ..inputs import read_small_text
        lines = read_small_text(Path(token_file), "token file", 4096).strip().splitlines()
        return lines[0].strip() if lines else None
    return (env if env is not None else os.environ).get("LLMSIZER_TOKEN") or None


def _article(word: str) -> str:
    """'an operator', 'a requester'."""
    return "an" if word[:1].lower() in "aeiou" else "a"
