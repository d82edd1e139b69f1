"""Sequences above a serving engine's running cap wait in its queue instead of making the workload 'not fit'.

Truths, none taken from llmsizer's own output:
- vLLM's defaults for `vllm serve`, written out here from its source: vllm/engine/arg_utils.py
  EngineArgs._set_default_args @99d7eb5d (usage context OPENAI_API_SERVER): ``device_memory >= 70 * GiB_bytes and
  "a100" not in device_name`` -> max_num_batched_tokens 8192, max_num_seqs 1024; else 2048 and 256; then
  ``max_num_seqs = min(default_max_num_seqs[usage_context], max_num_batched_tokens)``. SchedulerConfig's class
  default DEFAULT_MAX_NUM_SEQS = 128 (vllm/config/scheduler.py:32 @01230b40) is documented as "mainly for
  convenience when testing. In real usage, this should be set in EngineArgs.create_engine_config" (:44-49), so
  `vllm serve` never runs with it.
- vLLM's scheduler takes no waiting request once ``len(self.running) == self.max_num_running_reqs`` (=
  scheduler_config.max_num_seqs; vllm/v1/core/sched/scheduler.py Scheduler.schedule): the rest wait.
- KV bytes from Llama-3.1-8B's config.json (32 layers, 8 KV heads, head_dim 128, bf16): 2 x 8 x 128 x 2 B x 32 =
  128 KiB per token.
- The queue wait against a discrete-event run of a closed system (C clients, R slots, FIFO), not against the formula.
"""

from __future__ import annotations

import heapq
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from llmsizer.estimate.inference.vllm import vllm_batch_defaults
from llmsizer.formulas.serving_queue import queue_wait_seconds
from llmsizer.units import GiB

ROOT = Path(__file__).resolve().parents[2]
KV_PER_TOKEN = 2 * 8 * 128 * 2 * 32  # Llama-3.1-8B config.json, bf16


def cli(*args: str) -> tuple[int, dict]:  # type: ignore[type-arg]
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    r = subprocess.run([sys.executable, "-m", "llmsizer", *args, "--json"], capture_output=True, text=True, env=env,
                       timeout=300)
    assert r.returncode in (0, 1), (args, r.stderr)
    return r.returncode, json.loads(r.stdout)


@pytest.mark.parametrize("memory, seqs, tokens", [
    (80 * GiB, 1024, 8192),    # H100 80 GB: >= 70 GiB
    (70 * GiB, 1024, 8192),    # the boundary is inclusive (>=)
    (70 * GiB - 1, 256, 2048),
    (24 * GiB, 256, 2048),     # L4 / RTX 4090
    (None, 256, 2048),         # no device memory known: vLLM's fallback branch (device_memory = 0)
])
def test_vllm_serve_batch_defaults_are_vllm_source_values(memory: int | None, seqs: int, tokens: int) -> None:
    assert vllm_batch_defaults(memory) == (seqs, tokens)
    assert seqs != 128  # SchedulerConfig.DEFAULT_MAX_NUM_SEQS (scheduler.py:32) is the test-only fallback


def test_vllm_default_max_num_seqs_is_capped_by_max_num_batched_tokens() -> None:
    """min(default_max_num_seqs, max_num_batched_tokens): --max-num-batched-tokens 128 gives max_num_seqs 128."""
    _, out = cli("infer", "llama-3.1-8b", "--engine", "vllm", "--memory", "80GiB", "--max-num-batched-tokens", "128")
    mns = [a for a in out["assumptions"] if a["name"] == "max_num_seqs"]
    assert mns and mns[0]["value"] == 128 and mns[0]["default"] is True


def test_above_the_default_cap_vllm_fits_with_the_queue_stated() -> None:
    """2000 requests of 1024 tokens on one 80 GB GPU: vLLM runs its default 1024 at once and queues 976. KV is sized
    for the 1024 running (before: for all 2000, and the verdict asked the pool for 2000)."""
    code, out = cli("infer", "llama-3.1-8b", "--engine", "vllm", "--memory", "80GiB", "--concurrency", "2000",
                    "--context", "128")
    d = out["details"]
    assert code == 0 and d["fits"] is True
    assert d["running_sequences"] == 1024
    assert d["kv_needed_bytes"] == 1024 * 128 * KV_PER_TOKEN
    why = next(a["why"] for a in out["assumptions"] if a["name"] == "running_sequences")
    assert "976 of the 2000 requests wait in its queue" in why
    # the verdict line says it too: the pool's room (more than 1024) is not what runs (review: 'holds N' beside
    # 'admits 1024' read as a contradiction)
    assert "it runs 1024 of the 2000 requested at once (its running cap), the others wait in its queue" in d["verdict"]


def test_a_pool_too_small_for_the_running_sequences_still_does_not_fit() -> None:
    """The queue is for requests above the cap; a KV pool that cannot hold the sequences vLLM would run is still
    'does not fit' (exit 1), and the sequences it would run are the pool's (eq. R1's third bound)."""
    code, out = cli("infer", "llama-3.1-8b", "--engine", "vllm", "--memory", "80GiB", "--concurrency", "2000",
                    "--context", "8192")
    d = out["details"]
    assert code == 1 and d["fits"] is False
    assert d["running_sequences"] == d["max_concurrency_at_context"] < 1024
    assert d["queued_sequences"] == 2000 - d["running_sequences"]  # the rest wait (one rule: eq. R1)
    assert "1024 would run at once (its running cap) of 2000 requested" in d["verdict"]


def test_max_concurrency_is_what_runs_at_once() -> None:
    """The reverse question answers the sequences run at once: a stated cap below the pool's room is the answer."""
    _, out = cli("infer", "llama-3.1-8b", "--engine", "vllm", "--memory", "80GiB", "--context", "1024",
                 "--max-num-seqs", "64", "--max-concurrency")
    assert out["reverse"]["max_concurrency"] == 64


def _closed_system_mean_wait(clients: int, slots: int, service: list[float]) -> float:
    """Mean wait for a slot over a long run of ``clients`` that each send their next request when the last one
    finishes, served FIFO by ``slots`` servers; ``service``: the service times, drawn in turn."""
    draws = iter(service)
    queue = list(range(clients))  # every client's first request arrives at t = 0, in order
    arrived = dict.fromkeys(range(clients), 0.0)
    busy: list[tuple[float, int]] = []  # (finish time, client)
    now, waits = 0.0, []
    while True:
        while queue and len(busy) < slots:
            c = queue.pop(0)
            waits.append(now - arrived[c])
            try:
                heapq.heappush(busy, (now + next(draws), c))
            except StopIteration:
                skip = len(waits) // 5  # the start-up transient
                return sum(waits[skip:-1]) / len(waits[skip:-1])
        now, c = heapq.heappop(busy)
        arrived[c] = now
        queue.append(c)


@pytest.mark.parametrize("clients, slots", [(40, 8), (10, 3), (500, 64), (8, 8), (5, 8)])
def test_queue_wait_matches_a_discrete_event_run(clients: int, slots: int) -> None:
    w = 2.5
    sim = _closed_system_mean_wait(clients, slots, [w] * 20000)
    assert queue_wait_seconds(clients, slots, w) == pytest.approx(sim, rel=1e-3, abs=1e-9)


def test_queue_wait_matches_a_discrete_event_run_with_random_service() -> None:
    """Little's law holds for any service-time distribution while the slots stay busy: exponential times, mean 2 s."""
    rng = random.Random(7)
    times = [rng.expovariate(1 / 2.0) for _ in range(200000)]
    sim = _closed_system_mean_wait(40, 8, times)
    assert queue_wait_seconds(40, 8, sum(times) / len(times)) == pytest.approx(sim, rel=0.02)


def test_infer_fit_and_recommend_give_one_answer_above_the_cap() -> None:
    """The same question (40 requests, --max-num-seqs 8) through recommend, fit and infer: the same sequences run at
    once, the same KV sized for them, the same queue wait and speed of the running batch."""
    flags = ["llama-3.1-8b", "--engine", "vllm", "--max-num-seqs", "8", "--concurrency", "40", "--context", "2048"]
    _, rec = cli("recommend", *flags, "--provider", "aws")
    chosen = rec["options"][0]
    assert chosen["status"] == "chosen" and chosen["replicas"] == 1 and chosen["count"] == 1
    on = ["--device", chosen["target"], "--weights", chosen["weights_format"]]
    code_f, f = cli("fit", *flags, *on)
    code_i, i = cli("infer", *flags, *on)
    assert code_f == code_i == 0 and f["fits"] and i["details"]["fits"]
    assert chosen["running_sequences"] == f["running_sequences"] == i["details"]["running_sequences"] == 8
    assert f["details"]["queued_sequences"] == 32
    assert f["memory"]["details"]["kv_needed_bytes"] == i["details"]["kv_needed_bytes"] == 8 * 2048 * KV_PER_TOKEN
    assert chosen["memory_per_device"] == f["memory_per_device"] == i["totals"]["device"]["bytes"]
    assert f["speed"]["concurrency"] == 8  # the decode batch is the running sequences
    assert chosen["tokens_per_second"] == f["tokens_per_second_total"]
    assert chosen["queue_wait_seconds"] == f["details"]["queue_wait_seconds"] > 0
    held = f["speed"]["ttft_seconds"] + f["speed"]["output_tokens"] / f["speed"]["tokens_per_second_per_user"]
    assert f["details"]["queue_wait_seconds"] == pytest.approx(held * (40 / 8 - 1))


def test_a_plan_above_the_cap_fits_and_states_the_queue_as_fit_does() -> None:
    """A service of 2000 requests of 256 tokens on one H100 (vLLM's default max_num_seqs 1024 there): the plan fits
    (the pool holds more than the 1024 running; before, it asked the pool for all 2000 and did not fit), its queue
    wait is fit's for the same question, and its request rate is the running requests' (Q1: R / W, not C / W)."""
    from llmsizer.estimate.fit import fit
    from llmsizer.plan import make_plan
    from llmsizer.request import parse_request

    text = ("version: 1\njobs:\n  - name: chat\n    kind: inference\n    model: {name: llama-3.1-8b}\n"
            "    quantization: none\n    engine: vllm\n    traffic:\n"
            "      concurrency: {typical: 2000, peak: 2000}\n      context: {typical: 256, peak: 256}\n"
            "      output: {typical: 128, peak: 128}\n    resources: {device: h100, count: 1}\n")
    job = make_plan(parse_request(text, source="t.yaml"), alternatives=False).jobs[0]
    assert job.facts["fits"] is True
    f = fit("llama-3.1-8b", "h100", engine="vllm", context=256, concurrency=2000, output_tokens=128)
    assert f.fits and f.details["running_sequences"] == 1024 and f.details["queued_sequences"] == 976
    assert job.section("speed").value("queue_wait_peak") == f.details["queue_wait_seconds"]
    sp = f.speed
    assert sp is not None and sp.ttft_seconds is not None and sp.tokens_per_second_per_user
    held = sp.ttft_seconds + 128 / sp.tokens_per_second_per_user
    assert job.section("network").value("requests_peak") == pytest.approx(1024 / held)


def test_a_request_file_states_the_running_cap_as_the_cli_does() -> None:
    """engine_settings.max_num_seqs in a request file is `--max-num-seqs`: the plan's queue is fit's; on an engine
    without a running cap it is refused with the line that names it."""
    from llmsizer.estimate.fit import fit
    from llmsizer.plan import make_plan
    from llmsizer.request import parse_request
    from llmsizer.request.reader import RequestError

    text = ("version: 1\njobs:\n  - name: chat\n    kind: inference\n    model: {name: llama-3.1-8b}\n"
            "    quantization: none\n    engine: ENGINE\n    engine_settings: {max_num_seqs: 64}\n    traffic:\n"
            "      concurrency: {typical: 500, peak: 500}\n      context: {typical: 1024, peak: 1024}\n"
            "      output: {typical: 256, peak: 256}\n    resources: {device: h100, count: 1}\n")
    job = make_plan(parse_request(text.replace("ENGINE", "vllm"), source="t.yaml"), alternatives=False).jobs[0]
    f = fit("llama-3.1-8b", "h100", engine="vllm", context=1024, concurrency=500, output_tokens=256, max_num_seqs=64)
    assert job.facts["fits"] is True and f.fits and f.details["running_sequences"] == 64
    assert job.section("speed").value("queue_wait_peak") == f.details["queue_wait_seconds"]
    with pytest.raises(RequestError, match=r"t.yaml:8: .*engine_settings.max_num_seqs: applies to engine vllm or "
                                           "sglang, not llamacpp"):
        parse_request(text.replace("ENGINE", "llamacpp"), source="t.yaml")
