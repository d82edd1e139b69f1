"""The memory of finished answers (web/answer_cache.py) and the upload folder the workers share
(web/upload_files.py): a remembered answer is byte for byte the CLI's, whatever the order of the body's fields; what
must not be remembered is not; both stores stay within their bounds."""

from __future__ import annotations

import json
import struct

import pytest
from web_api_helpers import run_cli

pytest.importorskip("httpx")
pytest.importorskip("fastapi")


def _cache_of(app):
    from llmsizer.web.answer_cache import AnswerCache
    layer = app.middleware_stack
    while layer is not None and not isinstance(layer, AnswerCache):
        layer = getattr(layer, "app", None)
    assert layer is not None
    return layer


@pytest.fixture()
def fresh():
    from fastapi.testclient import TestClient

    from llmsizer.web.app import create_app
    app = create_app()
    with TestClient(app, raise_server_exceptions=False) as c:
        c.get("/api/v1")  # builds the middleware stack
        yield c, _cache_of(app)


def test_a_remembered_answer_is_the_cli_answer_whatever_the_field_order(fresh):
    c, cache = fresh
    cli = run_cli("infer", "llama-3.1-8b", "--engine", "vllm", "--memory", "24GiB", "--context", "32k",
                  "--kv-dtype", "fp8", "--json")
    first = c.post("/api/v1/infer", json={"model": "llama-3.1-8b", "engine": "vllm", "memory": "24GiB",
                                          "context": "32k", "kv_dtype": "fp8"})
    again = c.post("/api/v1/infer", content=json.dumps({"kv_dtype": "fp8", "context": "32k", "memory": "24GiB",
                                                        "engine": "vllm", "model": "llama-3.1-8b"}),
                   headers={"content-type": "application/json; charset=utf-8"})
    assert (cache.misses, cache.hits) == (1, 1)
    for r in (first, again):
        assert r.status_code == 200 and r.text == cli.stdout
        assert r.headers["x-llmsizer-exit-code"] == str(cli.returncode)
        assert "script-src 'self'" in r.headers["content-security-policy"]  # the guard's headers on a hit too
        assert r.headers["cache-control"] == "no-store"
    assert sorted(first.headers.items()) == sorted(again.headers.items())


def test_an_exit_1_answer_is_remembered_with_its_exit_code(fresh):
    c, cache = fresh
    body = {"model": "llama-3.1-70b-instruct", "memory": "8GiB"}
    cli = run_cli("infer", "llama-3.1-70b-instruct", "--memory", "8GiB", "--json")
    assert cli.returncode == 1
    for _ in range(2):
        r = c.post("/api/v1/infer", json=body)
        assert r.text == cli.stdout and r.headers["x-llmsizer-exit-code"] == "1"
    assert cache.hits == 1


def test_what_is_not_remembered(fresh):
    c, cache = fresh
    for _ in range(2):
        assert c.post("/api/v1/infer", json={"model": "qwen2.5-7b", "context": 0}).status_code == 400
        c.post("/api/v1/infer", json={"model": "qwen2.5-7b", "hub": True})  # the Hub's answer may change
        c.post("/api/v1/plan", json={"request": "jobs: []"})  # a plan depends on today's date
        c.get("/api/v1/models/qwen2.5-7b")
    assert cache.hits == 0 and cache.misses == 0


def test_answer_cache_0_computes_every_answer():
    from fastapi.testclient import TestClient

    from llmsizer.web.app import create_app
    app = create_app(answer_cache=0)
    with TestClient(app) as c:
        a = [c.post("/api/v1/infer", json={"model": "qwen2.5-0.5b"}).text for _ in range(2)]
        cache = _cache_of(app)
    assert a[0] == a[1] and cache.hits == cache.misses == 0


def test_the_memory_is_bounded_least_recently_used_first():
    import anyio

    from llmsizer.web.answer_cache import AnswerCache

    async def app(scope, receive, send):
        body = (await receive())["body"]
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": body * 10})

    cache = AnswerCache(app, entries=2)

    async def post(body: bytes) -> bytes:
        out = []

        async def receive():
            return {"type": "http.request", "body": body, "more_body": False}

        async def send(m):
            if m["type"] == "http.response.body":
                out.append(m["body"])
        await cache({"type": "http", "method": "POST", "path": "/api/v1/infer",
                     "headers": [(b"content-type", b"application/json")]}, receive, send)
        return b"".join(out)

    async def main() -> None:
        for k in (1, 2, 1, 3, 1, 2):  # 2 is the least recently used when 3 comes in
            assert await post(b'{"k": %d}' % k) == b'{"k": %d}' % k * 10
    anyio.run(main)
    assert (cache.misses, cache.hits, len(cache._items)) == (4, 2, 2)
    sized = AnswerCache(app, entries=100, max_bytes=150)  # one answer (~100-115 bytes with its key)
    cache = sized
    anyio.run(post, b'{"k": 1}')
    anyio.run(post, b'{"k": 22}')
    assert list(sized._items) == ['/api/v1/infer\n{"k":22}'] and sized._bytes <= 150


def _st(n: int) -> bytes:
    raw = json.dumps({f"t{i}": {"dtype": "U8", "shape": [1], "data_offsets": [i, i + 1]} for i in range(n)}).encode()
    return struct.pack("<Q", len(raw)) + raw


def test_two_stores_on_one_folder_share_uploads(tmp_path):
    """What two worker processes see: an id returned by one is known to the other, parsed from the shared file."""
    from llmsizer.web.sources import Uploads
    a, b = Uploads(folder=str(tmp_path)), Uploads(folder=str(tmp_path))
    up = a.add("safetensors", "w.safetensors", len(_st(3)) + 3, _st(3))
    got = b.get(up.id)
    assert got == up and got is not up
    assert [p.name for p in tmp_path.iterdir()] == [up.id.split(":")[1] + ".header"]


def test_the_shared_folder_keeps_the_newest_within_its_bounds(tmp_path):
    import os

    from llmsizer.web.problems import Problem
    from llmsizer.web.sources import Uploads
    a = Uploads(keep=2, folder=str(tmp_path))
    ids = []
    for k in range(3):
        ids.append(a.add("safetensors", f"{k}.safetensors", len(_st(k + 1)) + k + 1, _st(k + 1)).id)
        for n, p in enumerate(sorted(tmp_path.iterdir(), key=lambda p: p.stat().st_mtime_ns)):
            os.utime(p, ns=(n, n))  # the file system's clock may not tell quick writes apart
        newest = next(p for p in tmp_path.iterdir() if ids[-1].split(":")[1] in p.name)
        os.utime(newest, ns=(10**9 * (k + 1),) * 2)
    assert len(list(tmp_path.iterdir())) == 2
    b = Uploads(keep=2, folder=str(tmp_path))
    with pytest.raises(Problem, match="not uploaded to this server, or forgotten"):
        b.get(ids[0])
    assert b.get(ids[2]).name == "2.safetensors"
    small = Uploads(keep=32, folder=str(tmp_path / "s"), keep_bytes=len(_st(40)) + 100)
    (tmp_path / "s").mkdir()
    small.add("safetensors", "x.safetensors", len(_st(40)) + 40, _st(40))
    small.add("safetensors", "y.safetensors", len(_st(41)) + 41, _st(41))
    assert len(list((tmp_path / "s").iterdir())) == 1  # two would pass the byte bound: the newest stays


def test_a_forged_id_never_becomes_a_path(tmp_path):
    from llmsizer.web.problems import Problem
    from llmsizer.web.sources import Uploads
    (tmp_path / "secret.header").write_text("{}\n")
    store = Uploads(folder=str(tmp_path))
    for forged in ("sha256:../secret", "sha256:secret", "../../etc/passwd", "sha256:" + "A" * 64):
        with pytest.raises(Problem):
            store.get(forged)
