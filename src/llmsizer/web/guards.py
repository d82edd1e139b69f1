"""The limits every request meets before it reaches a route: the body size (413), the security headers of every
answer, and no traceback ever (a 500 problem). A plain ASGI middleware, so a refused body is never read whole."""

from __future__ import annotations

import logging
from typing import Any

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .problems import problem_response


def replay_first(message: Message, receive: Receive) -> Receive:
    """A ``receive`` that gives ``message`` (a body already read, whole) once, then hands on to ``receive`` (the
    disconnect that follows): the guard passes the body it read on, and the answer cache the one it looked at."""
    given = False

    async def replay() -> Message:
        nonlocal given
        if not given:
            given = True
            return message
        return await receive()
    return replay

log = logging.getLogger("llmsizer.web")

BODY_LIMIT = 1_000_000  # bytes of a request body (issue #13: 1 MB); the model-file upload has its own (sources.py)
BUFFERED_LIMIT = 256 << 20  # bytes of all request bodies being read at once (eight 32 MiB uploads); 503 past it

# No inline script or style, nothing from another origin; the report (HTML) sets its own, stricter policy.
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "font-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'")
REPORT_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; sandbox"
SECURITY_HEADERS = {
    "content-security-policy": CSP,
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
    "cross-origin-opener-policy": "same-origin",
    "cross-origin-resource-policy": "same-origin",
    "permissions-policy": "camera=(), microphone=(), geolocation=(), payment=(), usb=()",
}


def host_name(header: bytes) -> str:
    """The host of a Host header, without its port ('[::1]:8000' -> '::1', 'localhost:8000' -> 'localhost')."""
    text = header.decode("latin-1").strip().lower()
    if text.startswith("["):
        return text[1:text.find("]")] if "]" in text else text
    return text.rsplit(":", 1)[0] if text.count(":") == 1 else text


class Guard:
    """Body limit (per path: ``limits`` maps a path to its own limit), security headers, a problem for a crash, and,
    when ``hosts`` is given, only those names in the Host header: a page of another site that rebinds its DNS name
    to 127.0.0.1 (DNS rebinding) is refused instead of talking to the app as if it were its own origin."""

    def __init__(self, app: ASGIApp, body_limit: int = BODY_LIMIT, limits: dict[str, int] | None = None,
                 hosts: frozenset[str] | None = None, buffered_limit: int = BUFFERED_LIMIT) -> None:
        self.app, self.body_limit, self.limits, self.hosts = app, body_limit, dict(limits or {}), hosts
        self.buffered_limit, self.buffered = buffered_limit, 0  # one event loop: no lock needed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def send_secured(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                headers = MutableHeaders(scope=message)
                for k, v in SECURITY_HEADERS.items():
                    if k not in headers:
                        headers[k] = v
                if scope["path"].startswith("/api/") and "cache-control" not in headers:
                    headers["cache-control"] = "no-store"
            await send(message)

        if self.hosts is not None:
            host = host_name(dict(scope.get("headers") or []).get(b"host", b""))
            if host not in self.hosts:
                await problem_response(400, f"host {host[:100]!r} is not this server's name (it answers "
                                            f"{', '.join(sorted(self.hosts))})", "Host")(scope, receive, send_secured)
                return
        limit = self.limits.get(scope["path"], self.body_limit)

        def too_large() -> Any:
            return problem_response(413, f"request body larger than {limit:,} bytes (the limit of {scope['path']})", "body")
        length = dict(scope.get("headers") or []).get(b"content-length")
        if length is not None:
            try:
                declared = int(length)
            except ValueError:
                declared = -1
            if declared < 0:
                await problem_response(400, "Content-Length is not a number", "Content-Length")(scope, receive, send_secured)
                return
            if declared > limit:
                await too_large()(scope, receive, send_secured)
                return
        try:  # every byte read is counted in self.buffered until the answer is sent
            whole = await self._read(scope, receive, send_secured, limit, too_large)
            if whole is None:
                return
            try:
                await self.app(scope, replay_first(whole, receive), send_secured)
            except Exception:  # the routes answer their own errors; this is the last line: log it, never show it
                log.exception("internal error answering %s %s", scope.get("method"), scope.get("path"))
                if not started:
                    await internal_error()(scope, receive, send_secured)
        finally:
            self.buffered -= scope.get("llmsizer.buffered", 0)

    async def _read(self, scope: Scope, receive: Receive, send: Send, limit: int, too_large: Any) -> Message | None:
        """The whole body as one message, read here up to ``limit`` so no route ever holds more; None when this
        answered it (413, 503) or the client left."""
        body, more = [], True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            chunk = message.get("body", b"")
            scope["llmsizer.buffered"] = scope.get("llmsizer.buffered", 0) + len(chunk)
            self.buffered += len(chunk)
            if scope["llmsizer.buffered"] > limit:
                await too_large()(scope, receive, send)
                return None
            if self.buffered > self.buffered_limit:
                await problem_response(503, "the server is reading too many large requests at once; try again",
                                       None, headers={"Retry-After": "1"})(scope, receive, send)
                return None
            body.append(chunk)
            more = message.get("more_body", False)
        return {"type": "http.request", "body": b"".join(body), "more_body": False}


def internal_error() -> Any:
    return problem_response(500, "internal error: the server could not answer this request (the server's log has "
                                 "the details)", None)
