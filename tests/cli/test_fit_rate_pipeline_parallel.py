"""`fit --request-rate R --tp T --pp P` (servepp's rate path, no test of its own before): the offered rate is split
over count / (T x P) replicas of T x P devices, each replica answering for its share.

Independent truths: every request is served at a rate that fits, so the tokens out are R x output tokens (each
replica's R / replicas x output); Little's law (Little 1961, L = lambda W) ties the requests in flight per replica
to its arrival rate and each request's time in the system, TTFT + the output tokens at the user's decode rate
(rounded up to whole sequences); and two replicas at rate R answer, per replica, as one replica at R / 2 does on
half the devices (the replicas share nothing)."""

from __future__ import annotations

import math

import pytest

from cli_capture import run_json

ARGS = ("fit", "llama-3.1-70b", "--device", "h100-sxm", "--tp", "4", "--pp", "2", "--context", "4k",
        "--output-tokens", "256")


@pytest.mark.parametrize(("count", "rate"), [(8, 2.0), (16, 4.0)])
def test_rate_split_over_pipeline_replicas(count: int, rate: float) -> None:
    code, d = run_json(*ARGS, "--count", str(count), "--request-rate", str(rate))
    assert code == 0
    replicas = count // (4 * 2)
    assert (d["tensor_parallel"], d["pipeline_parallel"], d["replicas"]) == (4, 2, replicas)
    assert d["fits"] is True
    sp = d["speed"]
    assert sp["count"] == 8  # one replica's devices: T x P
    assert d["tokens_per_second_total"] == pytest.approx(rate * 256)
    assert sp["tokens_per_second"] == pytest.approx(rate / replicas * 256)
    # Little's law per replica: in flight = arrivals x (TTFT + 256 tokens at the user's rate), whole sequences
    time_in_system = sp["ttft_seconds"] + 256 / sp["tokens_per_second_per_user"]
    assert sp["concurrency"] == math.ceil(rate / replicas * time_in_system - 1e-9)
    # the memory is the binding pipeline stage's (vLLM's split of 80 layers: 40 / 40)
    stages = d["memory"]["details"]["pipeline_stages"]
    assert [s["layers"] for s in stages] == [[0, 39], [40, 79]]


def test_two_replicas_answer_as_one_at_half_the_rate() -> None:
    _, one = run_json(*ARGS, "--count", "8", "--request-rate", "2")
    _, two = run_json(*ARGS, "--count", "16", "--request-rate", "4")
    assert two["memory_per_device"] == one["memory_per_device"]
    for k in ("concurrency", "ttft_seconds", "tokens_per_second_per_user", "tokens_per_second"):
        assert two["speed"][k] == pytest.approx(one["speed"][k]), k
