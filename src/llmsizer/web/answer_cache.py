"""A bounded memory of finished answers of the estimate routes (infer, train, fit, recommend, inspect), keyed by
the canonical request: the route and the JSON body with its keys sorted. An estimate is a pure function of the
request and of the catalog shipped with the package (no clock, no randomness, no file of the server's: the API
reads no server-side path), so the same request gets the same bytes; answering it again from here skips the
parsing, the estimate, the JSON text and the framework's routing (about 2 ms of CPU -> about 0.1 ms).

Not kept: anything but a 200; bodies asking for the Hugging Face Hub (``hub``: the Hub's answer may change);
answers larger than ``MAX_ANSWER_BYTES``. Each worker process keeps its own memory (least recently used dropped
first, at most ``entries`` answers and ``max_bytes`` bytes); ``serve --answer-cache 0`` turns it off.

A plain ASGI middleware inside the guard (``guards.Guard``): the body limit, the Host check and the security headers
apply to a remembered answer as to a computed one. A request it does not hold goes straight to its route's function
(``routes``: the API router's routes, so the same code), without the framework's routing over every route and its
dependency solving, about a third of the framework's CPU per computed answer.
"""

from __future__ import annotations

import inspect
import json
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from starlette.requests import Request as StarletteRequest
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..cli.serve_cmd import ANSWER_CACHE_ENTRIES
from .guards import replay_first
from .problems import Problem

PATHS = frozenset(f"/api/v1/{r}" for r in ("infer", "train", "fit", "recommend", "inspect"))
ENTRIES = ANSWER_CACHE_ENTRIES  # serve --answer-cache's default, one home (cli/serve_cmd.py)
MAX_BYTES = 64 << 20
MAX_ANSWER_BYTES = 1 << 20
MAX_DEPTH = 32  # a body nested deeper is answered (and refused) by the route, not remembered


def canonical(path: str, body: bytes) -> str | None:
    """The key of a request: the route and its JSON object with sorted keys; None when it is not remembered."""
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or data.get("hub") not in (None, False) or _depth(data) > MAX_DEPTH:
        return None
    return path + "\n" + json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _depth(value: Any, level: int = 0) -> int:
    if level > MAX_DEPTH:
        return level
    if isinstance(value, dict):
        return max((_depth(v, level + 1) for v in value.values()), default=level)
    if isinstance(value, list):
        return max((_depth(v, level + 1) for v in value), default=level)
    return level


class AnswerCache:
    def __init__(self, app: ASGIApp, entries: int = ENTRIES, max_bytes: int = MAX_BYTES,
                 routes: Iterable[Any] = ()) -> None:
        self.app, self.entries, self.max_bytes = app, entries, max_bytes
        self._items: OrderedDict[str, tuple[Message, bytes]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = self.misses = 0
        # the functions of the POST routes at PATHS (that take the request and nothing else); None: let the app route
        self._endpoints: dict[str, Any] = {
            r.path: r.endpoint for r in routes
            if getattr(r, "path", None) in PATHS and "POST" in (getattr(r, "methods", None) or ())
            and list(inspect.signature(r.endpoint).parameters) == ["request"]}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or scope["path"] not in PATHS:
            await self.app(scope, receive, send)
            return
        message = await receive()  # the guard has read the whole body into this one message
        key = canonical(scope["path"], message.get("body", b"")) if (
            self.entries > 0 and message["type"] == "http.request" and not message.get("more_body")
            and _content_type(scope) == "application/json") else None
        if key is not None:
            with self._lock:
                hit = self._items.get(key)
                if hit is not None:
                    self._items.move_to_end(key)
                    self.hits += 1
            if hit is not None:
                await send(dict(hit[0], headers=list(hit[0]["headers"])))
                await send({"type": "http.response.body", "body": hit[1], "more_body": False})
                return
        replay = replay_first(message, receive)
        start: Message | None = None
        chunks: list[bytes] = []

        async def keep(out: Message) -> None:
            nonlocal start
            if out["type"] == "http.response.start":  # a copy: the guard adds its headers to the one sent
                start = dict(out, headers=list(out.get("headers", ())))
            elif out["type"] == "http.response.body":
                chunks.append(out.get("body", b""))
            await send(out)

        out = keep if key is not None else send
        endpoint = self._endpoint(scope)
        if endpoint is None:
            await self.app(scope, replay, out)
        else:  # the route's own function, without the framework's routing (it takes the request and nothing else)
            try:
                response = await endpoint(StarletteRequest(scope, replay))
            except Problem as p:  # body_of's refusals (content type, not JSON), as the app's handler answers them
                response = p.response()
            await response(scope, replay, out)
        if key is None or start is None or start["status"] != 200:
            return
        body = b"".join(chunks)
        if len(body) > MAX_ANSWER_BYTES:
            return
        self._remember(key, start, body)

    def _endpoint(self, scope: Scope) -> Callable[[StarletteRequest], Awaitable[Response]] | None:
        return self._endpoints.get(scope["path"])

    def _remember(self, key: str, start: Message, body: bytes) -> None:
        size = len(key) + len(body)
        with self._lock:
            self.misses += 1
            old = self._items.pop(key, None)
            if old is not None:
                self._bytes -= len(key) + len(old[1])
            self._items[key] = (start, body)
            self._bytes += size
            while self._items and (len(self._items) > self.entries or self._bytes > self.max_bytes):
                k, (_, b) = self._items.popitem(last=False)
                self._bytes -= len(k) + len(b)


def _content_type(scope: Scope) -> str:
    for k, v in scope.get("headers") or ():
        if k == b"content-type":
            return str(v.decode("latin-1").split(";")[0].strip().lower())
    return ""
