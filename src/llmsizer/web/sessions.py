"""Web sign-in for the provider console: a token checked once against the provider's auth file (salted scrypt
hashes, ``provider/auth.py``), then a server-side-signed session cookie (HttpOnly, SameSite=Strict, Secure over
https) holding only the name, the role, an expiry and a CSRF nonce; never the token. A mutating call made with the
cookie must repeat the nonce in the ``X-CSRF-Token`` header (a page of another site can neither read the cookie nor
the nonce, and SameSite=Strict keeps the cookie off its requests anyway).

The signature is HMAC-SHA256 (RFC 2104) with a key from ``LLMSIZER_SESSION_SECRET`` (hex; give the same one to every
``serve`` behind one address). Without one, ``serve`` draws 32 random bytes when it starts and hands them to its
worker processes in that variable, so a session holds on every worker (and ends when the server restarts)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import secrets
import time

from ..errors import InputError
from ..provider.auth import ROLES, Role

COOKIE = "llmsizer_session"
CSRF_HEADER = "x-csrf-token"
SESSION_S = 8 * 3600  # a working day
SECRET_ENV = "LLMSIZER_SESSION_SECRET"


def secret_from_env() -> bytes:
    text = os.environ.get(SECRET_ENV)
    if not text:
        return secrets.token_bytes(32)
    try:
        key = bytes.fromhex(text.strip())
    except ValueError:
        raise InputError("LLMSIZER_SESSION_SECRET: expected hex (e.g. from `python -c \"import secrets; "
                         "print(secrets.token_hex(32))\"`)") from None
    if len(key) < 32:
        raise InputError("LLMSIZER_SESSION_SECRET: give at least 32 bytes (64 hex digits)")
    return key


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def issue(key: bytes, who: Role, now: float | None = None) -> tuple[str, str]:
    """(cookie value, CSRF nonce) of a new session for ``who``."""
    nonce = secrets.token_urlsafe(24)
    payload = _b64(json.dumps({"n": who.name, "r": who.role, "e": int((now or time.time()) + SESSION_S),
                               "c": nonce}, separators=(",", ":")).encode())
    return f"{payload}.{hmac.new(key, payload.encode(), hashlib.sha256).hexdigest()}", nonce


def read(key: bytes, cookie: str | None, now: float | None = None) -> tuple[Role, str] | None:
    """(role, CSRF nonce) of a valid, unexpired session cookie; None otherwise."""
    if not cookie or cookie.count(".") != 1 or len(cookie) > 4096:
        return None
    payload, sig = cookie.split(".")
    want = hmac.new(key, payload.encode(), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(want, sig):
        return None
    try:
        data = json.loads(_unb64(payload))
        name, role, exp, nonce = data["n"], data["r"], data["e"], data["c"]
    except (ValueError, KeyError, TypeError):
        return None
    if role not in ROLES or not isinstance(exp, int) or exp < (now or time.time()):
        return None
    return Role(str(name), str(role)), str(nonce)


def csrf_ok(nonce: str, header: str | None) -> bool:
    return bool(header) and hmac.compare_digest(nonce.encode(), (header or "").encode())
