"""probe21 C4: at a fixed concurrency, 405B fp8 on 8 x MI325X answered a longer TTFT at load (27.4 s) than on
8 x MI300X (25.7 s), though the MI325X decodes faster and prefills the same. That is the closed loop, not a slower
card: each finished request is replaced at once, so a faster decode sends prompts back to the prefill sooner. The
prefill-bound warning of a closed load now says so, on every surface (CLI text and JSON, the web, Python).

Independent truth for the direction: Schweitzer's approximate mean value analysis of one queue with think time
(Lazowska et al. 1984, "Quantitative System Performance", sec. 6.4.2), iterated here from its three equations
(R = D (1 + Q (C - 1) / C), X = C / (R + Z), Q = X R), not from the closed form the estimate uses (eq. Q6): for
C > 1 the response R grows as the think time Z (the decode phase) shrinks."""

from __future__ import annotations

import json

import pytest

import llmsizer
from cli_capture import run

ARGS = ("llama-3.1-405b", "--count", "8", "--engine", "vllm", "--weights", "fp8", "--context", "32k", "--concurrency",
        "32")
NOTE = ("at a fixed concurrency each finished request is replaced at once, so a faster decode returns requests "
        "sooner and more prompts queue for the prefill: on a device with the same prefill and a faster decode this "
        "TTFT is longer, with more tokens/s (eq. Q6: the TTFT grows as the decode time falls)")


def schweitzer_response(c: int, d: float, z: float, rounds: int = 20000) -> float:
    r = d
    for _ in range(rounds):
        x = c / (r + z)
        r = d * (1 + x * r * (c - 1) / c)
    return r


@pytest.mark.parametrize("c", [2, 16, 64])
def test_the_closed_loop_response_grows_as_the_decode_shrinks(c: int) -> None:
    d = 0.3
    rs = [schweitzer_response(c, d, z) for z in (40.0, 20.0, 10.0, 5.0)]
    assert rs == sorted(rs) and rs[-1] > rs[0]
    assert schweitzer_response(1, d, 5.0) == pytest.approx(d)  # alone: no queue, whatever the decode


def _speed(device: str) -> dict:
    code, out, _ = run("fit", *ARGS, "--device", device, "--json")
    assert code in (0, 1)
    return json.loads(out)["speed"]


def test_the_faster_decode_shows_the_longer_ttft_and_says_why() -> None:
    slow, fast = _speed("mi300x"), _speed("mi325x")
    assert fast["ttft_idle_seconds"] == pytest.approx(slow["ttft_idle_seconds"])  # the same prefill
    assert fast["decode_tokens_per_second"] > slow["decode_tokens_per_second"]  # a faster decode
    assert fast["ttft_seconds"] > slow["ttft_seconds"]  # and, at 32 in flight, the longer TTFT
    for sp in (slow, fast):
        (w,) = [w for w in sp["warnings"] if w.startswith("prefill-bound at concurrency")]
        assert w.endswith(NOTE)
    code, out, _ = run("fit", *ARGS, "--device", "mi325x")
    assert any(ln.startswith("warning: prefill-bound") and ln.endswith(NOTE) for ln in out.splitlines())
    py = llmsizer.fit("llama-3.1-405b", "mi325x", count=8, engine="vllm", weights="fp8", context=32768, concurrency=32)
    assert any(w.endswith(NOTE) for w in py.speed.warnings)


def test_the_web_says_it_too() -> None:
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from llmsizer.web.app import create_app
    with TestClient(create_app()) as c:
        r = c.post("/api/v1/fit", json={"model": "llama-3.1-405b", "device": "mi325x", "count": 8, "engine": "vllm",
                                        "weights": "fp8", "context": "32k", "concurrency": 32})
    assert r.status_code == 200 and r.json()["speed"] == _speed("mi325x")


def test_one_request_in_flight_says_nothing_of_it() -> None:
    code, out, _ = run("fit", *ARGS[:-1], "1", "--device", "mi300x", "--json")
    assert not any(NOTE in w for w in json.loads(out)["speed"]["warnings"])
