"""`llmsizer serve --workers 2` as a user runs it: a real server with two worker processes on one port. An uploaded
header's id and a console sign-in hold on both workers. Which worker answered is read from the kernel (the worker
process that holds the server side of the client's TCP connection), so the test knows both were hit."""

from __future__ import annotations

import json
import os
import socket
import struct
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_web_serve import free_port, start, wait_until_up

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/net/tcp"), reason="reads the kernel's socket table (Linux)")
pytest.importorskip("sqlalchemy")

OPERATOR = "op-token-0123456789abcdef"
INVENTORY = ("sites: [{id: s1, public_addresses: 8, isolated_segments: 8}]\n"
             "nodes: [{id: n1, site: s1, device: a100-pcie-80gb, devices: 4, pools: [serving]}]\n")


def children(pid: int) -> list[int]:
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                stat = Path(f"/proc/{d}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(stat[1]) == pid:
                out.append(int(d))
    return out


def workers_of(pid: int) -> list[int]:
    """The worker processes of the server ``pid`` (multiprocessing's resource tracker is its child too)."""
    return [p for p in children(pid) if "spawn_main" in Path(f"/proc/{p}/cmdline").read_text()]


def socket_owner(client_port: int, server_port: int, pids: list[int]) -> int | None:
    """The process among ``pids`` holding the server side of the connection from ``client_port``."""
    inode = None
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        f = line.split()
        local, remote = f[1], f[2]
        if int(local.split(":")[1], 16) == server_port and int(remote.split(":")[1], 16) == client_port:
            inode = f[9]
    if inode is None:
        return None
    for pid in pids:
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                if os.readlink(f"/proc/{pid}/fd/{fd}") == f"socket:[{inode}]":
                    return pid
        except OSError:
            continue
    return None


def call(port: int, method: str, path: str, body: bytes = b"", kind: str = "application/json",
         headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes, int]:
    """One request on a new connection: (status, headers, body, the worker that answered it)."""
    with socket.create_connection(("127.0.0.1", port), timeout=60) as s:
        extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        s.sendall(f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: {kind}\r\n{extra}"
                  f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        data = b""
        while b"\r\n\r\n" not in data:
            data += s.recv(65536)
        head, rest = data.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        fields = {k.lower(): v.strip() for k, v in (h.split(":", 1) for h in lines[1:])}
        while len(rest) < int(fields["content-length"]):
            rest += s.recv(65536)
        owner = socket_owner(s.getsockname()[1], port, WORKERS)  # the connection is still open here
    return int(lines[0].split()[1]), fields, rest, owner or 0


WORKERS: list[int] = []


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[tuple[int, subprocess.Popen]]:
    from llmsizer.provider.auth import hash_token
    tmp = tmp_path_factory.mktemp("workers")
    (tmp / "inv.yaml").write_text(INVENTORY)
    (tmp / "auth.yaml").write_text(f'tokens:\n  - {{name: olga, role: operator, scrypt: "{hash_token(OPERATOR)}"}}\n')
    port = free_port()
    proc = start("--port", str(port), "--workers", "2", "--inventory", str(tmp / "inv.yaml"),
                 "--auth", str(tmp / "auth.yaml"), "--db", str(tmp / "b.db"))
    try:
        wait_until_up(proc, f"http://127.0.0.1:{port}/api/v1")
        WORKERS[:] = workers_of(proc.pid)
        assert len(WORKERS) == 2
        yield port, proc
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _until_both(make, tries: int = 200) -> dict[int, list[tuple[int, dict[str, str], bytes]]]:
    """Calls until both workers answered at least twice each (the kernel hands connections to either)."""
    seen: dict[int, list[tuple[int, dict[str, str], bytes]]] = {}
    for k in range(tries):
        status, headers, body, owner = make(k)
        seen.setdefault(owner, []).append((status, headers, body))
        if len(seen) == 2 and all(len(v) >= 2 for v in seen.values()) and k >= 8:
            break
    return seen


def test_an_upload_id_holds_on_every_worker(server):
    port, _ = server
    header = json.dumps({"w": {"dtype": "BF16", "shape": [896, 64], "data_offsets": [0, 896 * 64 * 2]}}).encode()
    data = struct.pack("<Q", len(header)) + header
    status, _, body, first = call(port, "POST", f"/api/v1/model-files?kind=safetensors&name=w.safetensors&size="
                                  f"{len(data) + 896 * 64 * 2}", data, "application/octet-stream")
    assert status == 200 and first in WORKERS
    upload = json.loads(body)["model_file"]
    # a new context each time: the answer is computed, not remembered, so each worker resolves the id itself
    seen = _until_both(lambda k: call(port, "POST", "/api/v1/inspect" if k % 2 else "/api/v1/infer", json.dumps(
        {"model": "qwen2.5-0.5b", "model_file": [upload], **({} if k % 2 else {"context": 1000 + k})}).encode()))
    assert sorted(seen) == sorted(WORKERS)
    for answers in seen.values():
        for status, _, text in answers:
            assert status == 200, text
    inspect = next(json.loads(t) for a in seen.values() for s, _, t in a if b'"file_weights"' in t)
    assert inspect["file_weights"]["bytes"] == 896 * 64 * 2  # the header's own tensor, not the catalog's


def test_a_forgotten_id_is_the_same_400_on_every_worker(server):
    port, _ = server
    seen = _until_both(lambda k: call(port, "POST", "/api/v1/inspect", json.dumps(
        {"model": "qwen2.5-0.5b", "model_file": ["sha256:" + "0" * 64]}).encode()))
    assert sorted(seen) == sorted(WORKERS)
    details = {json.loads(t)["detail"] for a in seen.values() for s, _, t in a if s == 400}
    assert len(details) == 1 and "not uploaded to this server" in details.pop()


def test_a_console_sign_in_holds_on_every_worker(server):
    port, _ = server
    status, headers, body, _ = call(port, "POST", "/api/v1/capacity/login", json.dumps({"token": OPERATOR}).encode())
    assert status == 200
    cookie = headers["set-cookie"].split(";")[0]
    csrf = json.loads(body)["csrf"]
    seen = _until_both(lambda k: call(port, "GET", "/api/v1/capacity/session", headers={"Cookie": cookie}))
    assert sorted(seen) == sorted(WORKERS)
    for answers in seen.values():
        for status, _, text in answers:
            assert status == 200 and json.loads(text) == {"signed_in": True, "name": "olga", "role": "operator",
                                                          "csrf": csrf, "auth": True}


@pytest.mark.parametrize("n", [1, 2])
def test_the_upload_folder_is_private_and_removed_at_the_end(tmp_path, n):
    port = free_port()
    tmp = str(tmp_path)  # the server's own TMPDIR: no other server's upload folder appears in it
    proc = start("--port", str(port), "--workers", str(n), tmpdir=tmp)
    try:
        wait_until_up(proc, f"http://127.0.0.1:{port}/api/v1")
        workers = workers_of(proc.pid)
        assert len(workers) == (n if n > 1 else 0)  # one worker: the serve process itself
        folders = [f for f in os.listdir(tmp) if f.startswith("llmsizer-uploads-")]
        assert len(folders) == 1 and os.stat(os.path.join(tmp, folders[0])).st_mode & 0o077 == 0
    finally:
        proc.terminate()
        assert proc.wait(timeout=30) == 0
    assert not os.path.exists(os.path.join(tmp, folders[0]))
    assert not [p for p in workers if os.path.exists(f"/proc/{p}")]  # no worker left behind


def test_workers_end_when_the_server_is_killed():
    """SIGKILL leaves the supervisor no chance to stop its workers: they end by themselves (no orphan on the port)."""
    import shutil
    import signal
    import time
    port = free_port()
    tmp = os.environ.get("TMPDIR", "/tmp")
    before = set(os.listdir(tmp))
    proc = start("--port", str(port), "--workers", "2")
    try:
        wait_until_up(proc, f"http://127.0.0.1:{port}/api/v1")
        workers = workers_of(proc.pid)
        assert len(workers) == 2
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        for f in set(os.listdir(tmp)) - before:  # a killed server cannot remove its upload folder: the test does
            if f.startswith("llmsizer-uploads-"):
                shutil.rmtree(os.path.join(tmp, f), ignore_errors=True)
    end = time.monotonic() + 30
    while time.monotonic() < end and [p for p in workers if os.path.exists(f"/proc/{p}")
                                      and Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"]:
        time.sleep(0.2)
    alive = [p for p in workers if os.path.exists(f"/proc/{p}")
             and Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"]
    for p in alive:  # do not leave them running if this fails
        os.kill(p, signal.SIGKILL)
    assert not alive
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()


@pytest.mark.parametrize("args", [["--workers", "0"], ["--workers", "two"], ["--answer-cache", "-1"]])
def test_bad_worker_settings_are_one_line_and_exit_2(args):
    from web_api_helpers import run_cli
    r = run_cli("serve", "--port", str(free_port()), *args)
    assert r.returncode == 2 and r.stdout == "" and r.stderr.count("\n") == 1 and args[0] in r.stderr
