"""Load on the web API (issue #13): N concurrent clients for T seconds against a real `llmsizer serve` on localhost,
each sending POST /api/v1/infer requests one after another on its own keep-alive connection; reports the latency
percentiles, the throughput and the errors (any answer but 200 with a JSON body, any broken connection). The
goal: p95 <= 50 ms with 50 clients on this 2-core machine, 0 errors. Not a timed test: run it and read the
numbers; ``--markdown bench/RESULTS.md`` appends them with the machine and its load.

    .venv/bin/python bench/bench_web_load.py [--clients 50] [--seconds 30] [--workers N] [--answer-cache 0]
        [--warm] [--unique] [--matrix] [--markdown bench/RESULTS.md]

The clients are plain asyncio sockets speaking HTTP/1.1 (no client library), so they cost the shared CPUs as
little as possible; they run in this process, the server (and its workers) in its own. Each client draws its
requests at random (seeded: the same sequence every run) from a fixed list of COMBOS workloads: 8 catalog models of
0.5B to 70B (GPU and CPU, three engines), each at 6 contexts and 6 concurrencies (228 different
requests: two workloads ask for the largest context or concurrency). Before measuring, a
warm-up of requests outside that list (each with its own context length) loads the server's code and the
estimator's per-model caches without filling the answer memory; ``--warm`` then sends each of the 228 once, so the
measured run finds every answer remembered. ``--unique`` instead gives every measured request its own context
length (no two alike: the answer memory never helps). ``--matrix`` runs workers 1 and N, each with the answer memory
off, on but empty, and warm.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

MIX: list[dict[str, Any]] = [  # one workload per model; COMBOS varies its context and concurrency
    {"model": "llama-3.1-8b", "context": "8k", "concurrency": 4},
    {"model": "llama-3.1-8b", "context": "32k", "kv_dtype": "fp8", "engine": "vllm", "memory": "24GiB"},
    {"model": "qwen2.5-7b", "context": "128k", "engine": "vllm", "memory": "80GiB", "max_concurrency": True},
    {"model": "qwen3-30b-a3b", "weights": "q4_k_m", "engine": "llamacpp", "context": "16k"},
    {"model": "llama-3.1-70b-instruct", "tp": 4, "context": "8k", "concurrency": 16, "engine": "vllm"},
    {"model": "qwen2.5-0.5b", "device": "cpu", "weights": "q8_0", "engine": "llamacpp", "context": "4k"},
    {"model": "mistral-7b-v0.1", "memory": "24GiB", "max_context": True},
    {"model": "gemma-3-27b-it", "context": "2k", "concurrency": 8},
]


CONTEXTS = ("2k", "4k", "8k", "16k", "32k", "64k")
CONCURRENCY = (1, 2, 4, 8, 16, 32)


def combos() -> list[dict]:
    """The fixed list the clients draw from: each workload of MIX at each context and concurrency (a workload that
    asks for the largest context or concurrency keeps that and varies the other)."""
    out = []
    for m in MIX:
        for c in CONTEXTS:
            for k in CONCURRENCY:
                b = dict(m, context=c, concurrency=k)
                if m.get("max_context"):
                    del b["context"]
                if m.get("max_concurrency"):
                    del b["concurrency"]
                if b not in out:  # a workload asking for the largest context/concurrency: one per other value
                    out.append(b)
    return out


COMBOS = combos()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(port: int, workers: int | None, answer_cache: int | None) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(ROOT / "src"), os.environ.get("PYTHONPATH"))
                                                      if p))
    extra = [*(["--workers", str(workers)] if workers else []),
             *(["--answer-cache", str(answer_cache)] if answer_cache is not None else [])]
    proc = subprocess.Popen([sys.executable, "-m", "llmsizer.cli.main", "serve", "--port", str(port), *extra],
                            env=env,
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


def _stat(pid: int | str) -> list[str]:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return []


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds the server and its worker processes have used (Linux /proc; 0 elsewhere)."""
    pids = [pid] + [int(d) for d in os.listdir("/proc") if d.isdigit() and (_stat(d) or ["", "0"])[1] == str(pid)] \
        if os.path.isdir("/proc") else []
    total = 0.0
    for p in pids:
        fields = _stat(p)
        if fields:
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


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


def body_for(i: int, n: int, mode: str, rng: random.Random) -> dict:
    """The n-th request of client i: ``draw`` a workload of COMBOS at random; ``unique`` one of MIX with its own
    context length (no two requests alike, none in COMBOS)."""
    if mode == "draw":
        return rng.choice(COMBOS)
    b = dict(MIX[n % len(MIX)])
    b.pop("max_context", None)
    b["context"] = 2048 + i * 100_000 + n + 1
    return b


async def client(i: int, port: int, until: float, latencies: list[float], errors: list[str], mode: str,
                 seed: int) -> None:
    rng = random.Random(seed * 1000 + i)
    n = 0
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        while time.perf_counter() < until:
            data = request_bytes(body_for(i + seed * 1000, n, mode, rng), port)
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


async def load(port: int, clients: int, seconds: float, mode: str, seed: int = 0) -> tuple[list[float], list[str],
                                                                                             float]:
    latencies: list[float] = []
    errors: list[str] = []
    start = time.perf_counter()
    await asyncio.gather(*(client(i, port, start + seconds, latencies, errors, mode, seed) for i in range(clients)))
    return latencies, errors, time.perf_counter() - start


async def send_each(port: int, bodies: list[dict], clients: int = 8) -> list[str]:
    """Every body once (the answer memory's warm-up), on ``clients`` connections."""
    errors: list[str] = []
    queue = list(bodies)

    async def one() -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            while queue:
                writer.write(request_bytes(queue.pop(), port))
                await writer.drain()
                status, body = await read_response(reader)
                if status != 200:
                    errors.append(f"HTTP {status}: {body[:120]!r}")
        finally:
            writer.close()
    await asyncio.gather(*(one() for _ in range(clients)))
    return errors


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run(clients: int, seconds: float, warmup: float, workers: int | None, answer_cache: int | None, warm: bool,
        unique: bool) -> tuple[str, str, bool]:
    """One measured run against a fresh server: (the result line, the machine line, goal met)."""
    port = free_port()
    server = start_server(port, workers, answer_cache)
    try:
        asyncio.run(load(port, min(clients, 8), warmup, "unique", seed=1))  # code and per-model caches, no answers
        if warm:
            bad = asyncio.run(send_each(port, COMBOS))
            if bad:
                raise SystemExit(f"warm-up answers failed: {bad[:3]}")
        time.sleep(1.0)
        load_before = os.getloadavg()
        cpu0, server0 = time.process_time(), cpu_seconds(server.pid)
        latencies, errors, wall = asyncio.run(load(port, clients, seconds, "unique" if unique else "draw"))
        client_cpu, server_cpu = time.process_time() - cpu0, cpu_seconds(server.pid) - server0
        load_after = os.getloadavg()
    finally:
        server.terminate()
        server.wait(timeout=30)
    ms = [x * 1000 for x in latencies]
    kind = ("every request different" if unique else f"drawn from {len(COMBOS)} workloads") + ", " + (
        "answer memory off" if answer_cache == 0 else "answer memory warm" if warm else "answer memory empty at start")
    line = (f"{clients} clients x {seconds:g} s on POST /api/v1/infer, workers {workers or 'default'} ({kind}): "
            f"{len(ms):,} answers ({len(ms) / wall:,.0f}/s), latency p50 {percentile(ms, 0.50):.1f} ms, "
            f"p95 {percentile(ms, 0.95):.1f} ms, p99 {percentile(ms, 0.99):.1f} ms, max {max(ms):.1f} ms, "
            f"mean {statistics.fmean(ms):.1f} ms; errors {len(errors)}; server CPU "
            f"{1000 * server_cpu / max(len(ms), 1):.2f} ms per answer ({server_cpu / wall:.0%} of one core)")
    machine = (f"{platform.processor() or platform.machine()}, {os.cpu_count()} logical CPUs, {platform.system()}, "
               f"Python {platform.python_version()}; load average {load_before[0]:.2f} before, {load_after[0]:.2f} "
               f"after (this benchmark's own clients and server included); client CPU {client_cpu:.1f} s of "
               f"{wall:.1f} s")
    print(line)
    print("  " + machine)
    for e in sorted(set(errors))[:5]:
        print("  error:", e)
    return line, machine, percentile(ms, 0.95) <= 50 and not errors


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--warmup", type=float, default=3.0, help="seconds of load before measuring (imports, the "
                    "estimator's per-model caches), with requests outside the drawn list")
    ap.add_argument("--workers", type=int, help="serve --workers (default: serve's default)")
    ap.add_argument("--answer-cache", type=int, help="serve --answer-cache (0: every answer computed)")
    ap.add_argument("--warm", action="store_true", help="send each of the drawn workloads once before measuring")
    ap.add_argument("--unique", action="store_true", help="every measured request different (none remembered)")
    ap.add_argument("--matrix", action="store_true", help="workers 1 and --workers (default 2) x answer memory "
                    "off / empty / warm")
    ap.add_argument("--markdown", type=Path, help="append the result to this file")
    args = ap.parse_args(argv)
    if args.matrix:
        runs = [(w, cache, warm) for w in (1, args.workers or 2) for cache, warm in ((0, False), (None, False),
                                                                                  (None, True))]
    else:
        runs = [(args.workers, args.answer_cache, args.warm)]
    results = [run(args.clients, args.seconds, args.warmup, w, cache, warm, args.unique) for w, cache, warm in runs]
    if args.markdown:
        with args.markdown.open("a", encoding="utf-8") as f:
            for line, machine, goal in results:
                f.write(f"\n- {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: {line} "
                        f"({'goal met' if goal else 'goal NOT met'}: p95 <= 50 ms, 0 errors). Machine: {machine}.\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
