"""`llmsizer serve` as a user runs it: a real server process on a free port, queried over HTTP; 127.0.0.1 by
default; a taken port or a missing web extra is one line and exit 2."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from web_api_helpers import SRC, run_cli

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")


START_TIMEOUT_S = 60.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start(*args: str, tmpdir: str | None = None) -> subprocess.Popen:
    """``llmsizer serve ARGS``; ``tmpdir``: its TMPDIR (a test's own, so other servers on the machine cannot add
    upload folders to the one it watches)."""
    env = dict(os.environ, PYTHONPATH=SRC, **({"TMPDIR": tmpdir} if tmpdir else {}))
    return subprocess.Popen([sys.executable, "-m", "llmsizer.cli.main", "serve", *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_until_up(proc: subprocess.Popen, url: str) -> None:
    end = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise AssertionError(f"serve exited {proc.returncode}: {proc.stderr.read() if proc.stderr else ''}")
        try:
            httpx.get(url, timeout=2)
            return
        except httpx.TransportError:
            time.sleep(0.2)
    raise AssertionError("serve did not answer in time")


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[str, int, subprocess.Popen]]:
    port = free_port()
    proc = start("--port", str(port))
    try:
        wait_until_up(proc, f"http://127.0.0.1:{port}/api/v1")
        yield f"http://127.0.0.1:{port}", port, proc
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_a_real_server_answers_as_the_cli(server):
    base, _, _ = server
    r = httpx.post(f"{base}/api/v1/infer", json={"model": "qwen2.5-7b", "engine": "vllm", "memory": "24GiB",
                                                 "context": "32k"}, timeout=60)
    cli = run_cli("infer", "qwen2.5-7b", "--engine", "vllm", "--memory", "24GiB", "--context", "32k", "--json")
    assert r.status_code == 200 and r.text == cli.stdout
    assert r.headers["x-llmsizer-exit-code"] == str(cli.returncode)
    assert "server" not in r.headers  # no software banner
    p = httpx.post(f"{base}/api/v1/infer", json={"model": "qwen2.5-7b", "context": 0}, timeout=60)
    assert p.status_code == 400 and p.headers["content-type"] == "application/problem+json"
    assert json.loads(p.text)["field"] == "context"
    assert httpx.get(f"{base}/api/v1/openapi.json", timeout=60).json()["info"]["title"] == "llmsizer"


@pytest.mark.skipif(not os.path.exists("/proc/net/tcp"), reason="reads the kernel's socket table (Linux)")
def test_it_listens_on_127_0_0_1_only_by_default(server):
    _, port, _ = server
    with open("/proc/net/tcp") as f:
        rows = [line.split() for line in f.readlines()[1:]]
    listening = [r[1] for r in rows if r[3] == "0A" and int(r[1].split(":")[1], 16) == port]  # 0A = LISTEN
    assert listening == [f"0100007F:{port:04X}"]  # 127.0.0.1, little-endian hex


def test_a_taken_port_is_one_line_and_exit_2(server):
    _, port, _ = server
    r = run_cli("serve", "--port", str(port))
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and r.stderr.startswith(f"llmsizer: error: cannot listen on 127.0.0.1:{port}")


def test_a_bad_port_is_one_line_and_exit_2():
    r = run_cli("serve", "--port", "70000")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "--port" in r.stderr


_WITHOUT_WEB = """
import sys
for name in ("fastapi", "uvicorn"):
    sys.modules[name] = None  # what an installation without the web extra finds
from llmsizer.cli.main import main
sys.exit(main(["serve", "--port", sys.argv[1]]))
"""


def test_serve_without_the_web_extra_is_one_line_and_exit_2():
    env = dict(os.environ, PYTHONPATH=SRC)
    r = subprocess.run([sys.executable, "-c", _WITHOUT_WEB, str(free_port())], capture_output=True, text=True,
                       env=env, timeout=60)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr == ("llmsizer: error: serve needs the web extra (fastapi, uvicorn not installed): "
                        "pip install 'llmsizer[web]'\n")


def test_another_host_name_is_refused(server):
    """A page of another site whose DNS name now points at 127.0.0.1 (DNS rebinding) sends its own name as Host."""
    base, port, _ = server
    r = httpx.get(f"{base}/api/v1", headers={"Host": f"attacker.example:{port}"}, timeout=60)
    assert r.status_code == 400 and r.headers["content-type"] == "application/problem+json"
    assert "attacker.example" in r.json()["detail"]
    for name in ("localhost", "127.0.0.1"):
        assert httpx.get(f"{base}/api/v1", headers={"Host": f"{name}:{port}"}, timeout=60).status_code == 200


def test_concurrent_answers_are_the_cli_answers(server):
    """Requests answered at once, cold, in the server's worker threads (one shared parser, shared estimate caches)
    get the bytes the CLI prints for each."""
    from concurrent.futures import ThreadPoolExecutor
    base, _, _ = server
    cases = [(m, c, e) for m in ("llama-3.1-8b", "qwen3-30b-a3b", "gemma-3-27b-it") for c in (3001, 9001)
             for e in ("vllm", "llamacpp")]  # contexts no other test asks for: nothing memoized yet
    bodies = [{"model": m, "context": c, "engine": e} for m, c, e in cases]
    with ThreadPoolExecutor(12) as pool, httpx.Client(timeout=120) as http:
        at_once = list(pool.map(lambda b: http.post(f"{base}/api/v1/infer", json=b).text, bodies * 3))
    cli = [run_cli("infer", m, "--context", str(c), "--engine", e, "--json").stdout for m, c, e in cases]
    assert at_once == cli * 3
    assert len(set(cli)) == len(cases)
