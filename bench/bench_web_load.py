"""Load on the web API (issue #13): N concurrent clients for T seconds against a real `llmsizer serve` on localhost,
each sending POST /api/v1/infer requests one after another on its own keep-alive connection; reports the latency
percentiles, the throughput and the errors (any answer but 200 with a JSON body, any broken connection). The
goal: p95 <= 50 ms with 50 clients on this 2-core machine, 0 errors. Not a timed test: run it and read the
numbers; ``--markdown bench/RESULTS.md`` appends them with the machine and its load.

    .venv/bin/python bench/bench_web_load.py [--clients 50] [--seconds 30] [--markdown bench/RESULTS.md]

The clients are plain asyncio sockets speaking HTTP/1.1 (no client library), so they cost the shared CPUs as
little as possible; they run in this process, the server in its own. The requests cycle through a fixed mix of
models and workloads (catalog models of 0.5B to 70B, GPU and CPU, three engines, contexts 2k to 128k), so the
estimator works on each (its tensor-inventory caches are warm after the first of each model, as in a real session).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

MIX = [
    {"model": "llama-3.1-8b", "context": "8k", "concurrency": 4},
    {"model": "llama-3.1-8b", "context": "32k", "kv_dtype": "fp8", "engine": "vllm", "memory": "24GiB"},
    {"model": "qwen2.5-7b", "context": "128k", "engine": "vllm", "memory": "80GiB", "max_concurrency": True},
    {"model": "qwen3-30b-a3b", "weights": "q4_k_m", "engine": "llamacpp", "context": "16k"},
    {"model": "llama-3.1-70b-instruct", "tp": 4, "context": "8k", "concurrency": 16, "engine": "vllm"},
    {"model": "qwen2.5-0.5b", "device": "cpu", "weights": "q8_0", "engine": "llamacpp", "context": "4k"},
    {"model": "mistral-7b-v0.1", "memory": "24GiB", "max_context": True},
    {"model": "gemma-3-27b-it", "context": "2k", "concurrency": 8},
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(port: int) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    proc = subprocess.Popen([sys.executable, "-m", "llmsizer.cli.main", "serve", "--port", str(port)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    end = time.monotonic() + 90
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise SystemExit(f"serve exited {proc.returncode}: {proc.stderr.read().decode() if proc.stderr else ''}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise SystemExit("serve did not start within 90 s")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds a process has used (Linux /proc; 0 elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def request_bytes(body: dict, port: int) -> bytes:
    data = json.dumps(body).encode()
    return (f"POST /api/v1/infer HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(data)}\r\n\r\n").encode() + data


async def read_response(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    length = next(int(h.split(":", 1)[1]) for h in lines[1:] if h.lower().startswith("content-length:"))
    return status, await reader.readexactly(length)


def body_for(n: int, unique: bool) -> dict:
    """The n-th request of a client: the mix in turn; ``unique``: each with its own context length (n tokens more
    than the mix's), so no two requests are the same and no memo of finished estimates answers one."""
    b = dict(MIX[n % len(MIX)])
    if unique:
        b["context"] = 2048 + n
    return b


async def client(i: int, port: int, until: float, latencies: list[float], errors: list[str], unique: bool) -> None:
    n = i * 100_000  # each client starts at another point of the mix, with contexts no other client sends
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        while time.perf_counter() < until:
            data = request_bytes(body_for(n, unique), port)
            t0 = time.perf_counter()
            try:
                writer.write(data)
                await writer.drain()
                status, body = await read_response(reader)
            except (OSError, asyncio.IncompleteReadError, ValueError, StopIteration) as e:
                errors.append(f"{type(e).__name__}: {e}")
                writer.close()
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
                continue
            latencies.append(time.perf_counter() - t0)
            if status != 200 or not body.startswith(b"{"):
                errors.append(f"HTTP {status}: {body[:120]!r}")
            n += 1
    finally:
        writer.close()


async def load(port: int, clients: int, seconds: float, unique: bool = True) -> tuple[list[float], list[str], float]:
    latencies: list[float] = []
    errors: list[str] = []
    start = time.perf_counter()
    await asyncio.gather(*(client(i, port, start + seconds, latencies, errors, unique) for i in range(clients)))
    return latencies, errors, time.perf_counter() - start


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--warmup", type=float, default=3.0, help="seconds of load before measuring (caches, imports)")
    ap.add_argument("--repeat-mix", action="store_true", help="send the 8 bodies of the mix as they are (the same "
                    "requests again and again) instead of a new context length in each")
    ap.add_argument("--markdown", type=Path, help="append the result to this file")
    args = ap.parse_args(argv)
    port = free_port()
    server = start_server(port)
    try:
        asyncio.run(load(port, min(args.clients, 8), args.warmup, not args.repeat_mix))
        load_before = os.getloadavg()
        cpu0, server0 = time.process_time(), cpu_seconds(server.pid)
        latencies, errors, wall = asyncio.run(load(port, args.clients, args.seconds, not args.repeat_mix))
        client_cpu, server_cpu = time.process_time() - cpu0, cpu_seconds(server.pid) - server0
        load_after = os.getloadavg()
    finally:
        server.terminate()
        server.wait(timeout=30)
    ms = [x * 1000 for x in latencies]
    kind = "the 8 requests of the mix repeated" if args.repeat_mix else "every request different"
    line = (f"{args.clients} clients x {args.seconds:g} s on POST /api/v1/infer ({kind}): {len(ms):,} answers "
            f"({len(ms) / wall:,.0f}/s), latency p50 {percentile(ms, 0.50):.1f} ms, p95 {percentile(ms, 0.95):.1f} ms, "
            f"p99 {percentile(ms, 0.99):.1f} ms, max {max(ms):.1f} ms, mean {statistics.fmean(ms):.1f} ms; "
            f"errors {len(errors)}; server CPU {1000 * server_cpu / max(len(ms), 1):.2f} ms per answer "
            f"({server_cpu / wall:.0%} of one core)")
    machine = (f"{platform.processor() or platform.machine()}, {os.cpu_count()} logical CPUs, {platform.system()}, "
               f"Python {platform.python_version()}; load average {load_before[0]:.2f} before, {load_after[0]:.2f} "
               f"after (this benchmark's own clients and server included); client CPU {client_cpu:.1f} s of "
               f"{wall:.1f} s")
    print(line)
    print(machine)
    for e in sorted(set(errors))[:5]:
        print("  error:", e)
    if args.markdown:
        goal = percentile(ms, 0.95) <= 50 and not errors
        with args.markdown.open("a", encoding="utf-8") as f:
            f.write(f"\n- {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: {line} "
                    f"({'goal met' if goal else 'goal NOT met'}: p95 <= 50 ms, 0 errors). Machine: {machine}.\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
