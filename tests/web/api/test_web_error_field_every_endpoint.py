"""Every 4xx of the web API names the input at fault: a table of bad inputs is driven through every endpoint (FastAPI's
TestClient over the real app), and each answer must be ``application/problem+json`` with ``detail``, the one-line
message, and ``field``, the input the row broke (the row says which; it is not read from our answer). Where the same
bad input has a command-line equivalent, ``detail`` is the line the real CLI prints after ``llmsizer: error:`` (exit
2, in a subprocess).

Before, about one 4xx in three had no ``field``: a body that is not JSON or not an object, a wrong Content-Type, an
unknown route or method, an unknown device (``unknown hardware 'nodev'``), a cross-field conflict of the training
workload (``give ZeRO ... or FSDP ..., not both``), a bad config.json, an upload whose size disagrees, a bad
inventory or time, every 403 of the provider's routes, the Host guard and the body-size guard."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from web_api_helpers import ROOT, cli_error_line, run_cli, web_line

pytest.importorskip("httpx")
pytest.importorskip("fastapi")

LORA = (ROOT / "examples" / "lora-finetune-and-chat.yaml").read_text()
M = "llama-3.1-8b"

# (method, url, json body, the field at fault, the CLI's arguments for the same bad input or None)
ROWS: list[tuple[str, str, Any, str, tuple[str, ...] | None]] = [
    ("POST", "/api/v1/infer", {"model": "nope-model"}, "model", ("infer", "nope-model")),
    ("POST", "/api/v1/infer", {"model": M, "context": "x"}, "context", ("infer", M, "--context", "x")),
    ("POST", "/api/v1/infer", {"model": M, "memory": "24"}, "memory", ("infer", M, "--memory", "24")),
    ("POST", "/api/v1/infer", {"model": M, "engine": "vllmx"}, "engine", ("infer", M, "--engine", "vllmx")),
    ("POST", "/api/v1/infer", {"model": M, "device": "nodev"}, "device", ("infer", M, "--device", "nodev")),
    ("POST", "/api/v1/infer", {"model": M, "bogus": 1}, "bogus", None),
    ("POST", "/api/v1/infer", {"model_file": "nope"}, "model_file", None),
    ("POST", "/api/v1/train", {"model": M, "zero": 2, "fsdp": "full"}, "zero",
     ("train", M, "--zero", "2", "--fsdp", "full")),
    # a setting the named device cannot run: torch._scaled_mm below compute capability 8.9; CPU offload on unified
    # memory (the CLI's line names the flags, --float8 / --offload: tests/training/test_unrunnable_on_device.py)
    ("POST", "/api/v1/train", {"model": M, "device": "a100-sxm-80gb", "float8": True}, "float8", None),
    ("POST", "/api/v1/train", {"model": M, "device": "apple-m3-max-48gb", "offload": "optimizer", "zero": 2}, "offload",
     None),
    ("POST", "/api/v1/train", {"model": M, "offload": "params"}, "offload", ("train", M, "--offload", "params")),
    ("POST", "/api/v1/train", {"model": M, "method": "lora", "rank": 0}, "rank",
     ("train", M, "--method", "lora", "--rank", "0")),
    ("POST", "/api/v1/fit", {"model": M}, "device", ("fit", M)),
    ("POST", "/api/v1/fit", {"model": M, "device": "h100-sxm", "count": 0}, "count",
     ("fit", M, "--device", "h100-sxm", "--count", "0")),
    ("POST", "/api/v1/fit", {"model": M, "device": "nodev"}, "device", ("fit", M, "--device", "nodev")),
    ("POST", "/api/v1/recommend", {"model": M, "deadline": "3m"}, "deadline", ("recommend", M, "--deadline", "3m")),
    ("GET", "/api/v1/models?fits_on=nodev", None, "fits_on", ("models", "--fits-on", "nodev")),
    ("GET", "/api/v1/models?top=0", None, "top", None),
    ("GET", "/api/v1/models/fits-on?fits_on=nodev", None, "fits_on", ("models", "--fits-on", "nodev")),
    ("GET", "/api/v1/models/fits-on", None, "fits_on", None),
    ("POST", "/api/v1/models/fits-on", {"hardware": 5}, "hardware", None),
    ("POST", "/api/v1/models/fits-on", {"hardware": "devices: [{id: x}]", "fits_on": "x"}, "hardware", None),
    ("GET", "/api/v1/models/nope-model", None, "model", ("inspect", "nope-model")),
    ("POST", "/api/v1/inspect", {"model": "nope-model"}, "model", ("inspect", "nope-model")),
    ("POST", "/api/v1/inspect", {"config": {"hidden_size": 8}}, "config", None),
    ("GET", "/api/v1/hardware?kind=zzz", None, "kind", ("hardware", "list", "--kind", "zzz")),
    ("GET", "/api/v1/hardware/nodev", None, "name", ("hardware", "show", "nodev")),
    ("POST", "/api/v1/plan", {"request": "version: 1\njobs: 5\n"}, "request", ("plan", "request.yaml")),
    ("POST", "/api/v1/plan", {"request": LORA, "format": "pdf"}, "format", ("plan", "request.yaml", "--format", "pdf")),
    ("POST", "/api/v1/request/check", {"request": 5}, "request", None),
    ("POST", "/api/v1/request/check", {"request": "version: 1\njobs: 5\n"}, "request",
     ("request", "check", "request.yaml")),
    ("POST", "/api/v1/model-files?kind=zip&name=a.gguf&size=2", b"xx", "kind", None),
    ("POST", "/api/v1/model-files?kind=gguf&name=a.gguf&size=-1", b"xx", "size", None),
    ("POST", "/api/v1/model-files?kind=gguf&name=a.gguf&size=1", b"xx", "size", None),
    ("POST", "/api/v1/model-files?kind=gguf&name=a.gguf&size=2", "not raw", "Content-Type", None),
    # the body as a whole, the route, the method
    ("POST", "/api/v1/infer", b"{bad", "body", None),
    ("POST", "/api/v1/train", b"[1]", "body", None),
    ("POST", "/api/v1/fit", "text", "Content-Type", None),
    ("GET", "/api/v1/nope", None, "path", None),
    ("GET", "/nope", None, "path", None),
    ("GET", "/static/nope.js", None, "path", None),
]
# the routes that take no input: a wrong method is the bad input each can get
NO_INPUT = ["/api/v1", "/api/v1/formats", "/api/v1/request/template", "/api/v1/request/schema", "/api/v1/capacity/status"]


def send(client, method: str, url: str, body: Any, headers: dict[str, str] | None = None):
    headers = dict(headers or {})
    if isinstance(body, bytes):
        headers.setdefault("content-type", "application/json" if "model-files" not in url
                           else "application/octet-stream")
        return client.request(method, url, content=body, headers=headers)
    if isinstance(body, str):  # a body sent as plain text: the wrong type
        return client.request(method, url, content=body, headers={**headers, "content-type": "text/plain"})
    return client.request(method, url, json=body, headers=headers) if body is not None else \
        client.request(method, url, headers=headers)


def problem_of(r) -> dict[str, Any]:
    assert 400 <= r.status_code < 500, (r.status_code, r.text[:300])
    assert r.headers["content-type"].startswith("application/problem+json"), r.headers["content-type"]
    p = r.json()
    assert isinstance(p.get("detail"), str) and p["detail"] and "\n" not in p["detail"], p
    assert "Traceback" not in r.text
    return p


def cli_line(args: tuple[str, ...], tmp_path: Path, request_text: str | None) -> str:
    """The CLI's one line for ``args``; a request's text is written to ``request.yaml`` in the folder the CLI runs
    in, so its lines are named as the web names them (its default filename)."""
    if request_text is None:
        return cli_error_line(*args)
    (tmp_path / "request.yaml").write_text(request_text, "utf-8")
    done = run_cli(*args, cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    (line,) = done.stderr.strip().splitlines()
    return line.removeprefix("llmsizer: error: ").removesuffix(" (see --help)")


@pytest.mark.parametrize(("method", "url", "body", "field", "cli"), ROWS,
                         ids=[f"{r[0]} {r[1]} {r[3]}" for r in ROWS])
def test_every_4xx_names_its_field_and_says_the_clis_line(client, tmp_path, method, url, body, field, cli) -> None:
    p = problem_of(send(client, method, url, body))
    assert p.get("field") == field, p
    if cli is not None:
        text = body.get("request") if isinstance(body, dict) else None
        assert p["detail"] == web_line(cli_line(cli, tmp_path, text if isinstance(text, str) else None), p["field"]), p


def test_the_table_drives_every_route(app) -> None:
    """No route is left out of the table above (or of the capacity table below): a new route gets a row."""
    from starlette.routing import Route

    from llmsizer.web.api import router
    from llmsizer.web.api_capacity import router as capacity
    driven = {u.split("?")[0] for _, u, *_ in ROWS} | set(NO_INPUT) | {u.split("?")[0] for _, u, *_ in CAPACITY}
    for route in [*router.routes, *capacity.routes]:
        assert isinstance(route, Route)
        pattern = route.path_regex
        assert any(pattern.match(u) for u in driven), f"no bad input drives {route.path}"


@pytest.mark.parametrize("url", NO_INPUT)
def test_a_wrong_method_names_the_method(client, url: str) -> None:
    p = problem_of(client.delete(url))
    assert p["field"] == "method" and p["detail"] == f"DELETE is not allowed on {url}"


def test_the_guards_name_the_header_or_the_body() -> None:
    from fastapi.testclient import TestClient

    from llmsizer.web.app import create_app
    guarded = TestClient(create_app(hosts=frozenset({"127.0.0.1"}), body_limit=100), raise_server_exceptions=False)
    p = problem_of(guarded.get("/api/v1", headers={"host": "evil.example"}))
    assert p["field"] == "Host"
    p = problem_of(guarded.post("/api/v1/infer", headers={"host": "127.0.0.1"}, json={"model": "x" * 200}))
    assert p["field"] == "body" and "larger than 100 bytes" in p["detail"]
    p = problem_of(guarded.post("/api/v1/infer", headers={"host": "127.0.0.1", "content-length": "many"},
                                content=b"{}"))
    assert p["field"] == "Content-Length"


# the provider's routes (capacity, needs sqlalchemy): (method, url, body, token, the field at fault)
REQUESTER, OPERATOR = "rq-token-0123456789abcdef", "op-token-0123456789abcdef"
CAPACITY: list[tuple[str, str, Any, str | None, str]] = [
    ("POST", "/api/v1/capacity/check", {"request": LORA}, None, "token"),
    ("POST", "/api/v1/capacity/check", {"request": LORA}, "wrong-token-0123456789", "token"),
    ("POST", "/api/v1/capacity/check", {"request": LORA, "zzz": 1}, REQUESTER, "zzz"),
    ("POST", "/api/v1/capacity/check", {"request": "version: 1\njobs: 5\n"}, REQUESTER, "request"),
    ("POST", "/api/v1/capacity/book", {"request": LORA, "state": "weird"}, REQUESTER, "state"),
    ("POST", "/api/v1/capacity/book", {"request": LORA, "hold_hours": -1}, REQUESTER, "hold_hours"),
    # its window is in the past: a request error like every other (FILE:LINE: job 'x' (kind): start: ..., probe10
    # #10), so the request's field, its line in errors[]
    ("POST", "/api/v1/capacity/book", {"request": LORA}, OPERATOR, "request"),
    *[("POST", f"/api/v1/capacity/{a}", {"ids": 5}, REQUESTER, "ids")
      for a in ("hold", "confirm", "activate", "finish", "release", "expire")],
    ("POST", "/api/v1/capacity/confirm", {"ids": ["nope"]}, REQUESTER, "token"),  # a requester may not confirm
    ("GET", "/api/v1/capacity/show?at=notatime", None, REQUESTER, "at"),
    ("GET", "/api/v1/capacity/audit", None, "wrong-token-0123456789", "token"),
    ("GET", "/api/v1/capacity/export/nope?format=zzz", None, REQUESTER, "format"),
    ("GET", "/api/v1/capacity/export/nope", None, REQUESTER, "format"),
    ("GET", "/api/v1/capacity/inventory", None, "wrong-token-0123456789", "token"),
    ("PUT", "/api/v1/capacity/inventory", {"inventory": "nodes: 5"}, OPERATOR, "inventory"),
    ("PUT", "/api/v1/capacity/inventory", {"inventory": "nodes: []"}, REQUESTER, "token"),
    ("POST", "/api/v1/capacity/login", {"token": "bad"}, None, "token"),
    ("POST", "/api/v1/capacity/login", {"token": 5}, None, "token"),
    ("POST", "/api/v1/capacity/logout", b"", None, "method"),  # sent as PATCH below: logout takes no input
    ("GET", "/api/v1/capacity/session", None, None, "method"),
    ("GET", "/api/v1/capacity/console", None, "wrong-token-0123456789", "token"),
]


@pytest.mark.parametrize(("method", "url", "body", "token", "field"), CAPACITY,
                         ids=[f"{r[0]} {r[1]} {r[4]}" for r in CAPACITY])
def test_every_capacity_4xx_names_its_field(tmp_path, method, url, body, token, field) -> None:
    pytest.importorskip("sqlalchemy")
    from fastapi.testclient import TestClient

    from llmsizer.provider.auth import hash_token
    from llmsizer.web.api_capacity import ProviderConfig
    from llmsizer.web.app import create_app
    (tmp_path / "inv.yaml").write_text(
        "sites: [{id: s1, public_addresses: 8, isolated_segments: 8}]\n"
        "storage: [{id: fs, site: s1, capacity: 1 PB}]\n"
        "nodes: [{id: serve-01, site: s1, device: a100-pcie-80gb, devices: 4, pools: [serving, serving-cluster]}]\n")
    (tmp_path / "auth.yaml").write_text(
        "tokens:\n"
        f'  - {{name: olga, role: operator, scrypt: "{hash_token(OPERATOR)}"}}\n'
        f'  - {{name: rick, role: requester, scrypt: "{hash_token(REQUESTER)}"}}\n')
    cfg = ProviderConfig(inventory=str(tmp_path / "inv.yaml"), db=str(tmp_path / "b.db"),
                         auth=str(tmp_path / "auth.yaml"), session_key=b"k" * 32)
    with TestClient(create_app(provider=cfg), raise_server_exceptions=False) as c:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        if field == "method":
            method, body = "PATCH", None
        p = problem_of(send(c, method, url, body, headers))
    assert p.get("field") == field, p
