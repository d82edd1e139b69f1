"""fit at 32 requests of 3,840-token prompts on an M2 Max (llama.cpp): every prompt takes 6.6 s of the device, so 32
of them take ~211 s per round against 256 x 65 ms = 16.6 s of decode. The speed table used to print the idle prompt's
TTFT (6.587 s) and the decode-alone 15.4 tokens/s per user at any concurrency; now the TTFT and per-user rate at 32
requests (formulas/serving_queue.py eqs. Q4-Q9) and a warning with the prefill's share of device time."""

from __future__ import annotations

import re

import pytest

from cli.cli_run import answer, run
from llmsizer.estimate import efficiency as E

ARGS = ["fit", "llama-3.1-8b-instruct", "--device", "apple-m2-max-96gb", "--weights", "q4_k_m", "--engine",
        "llamacpp", "--context", "4096"]


def test_m2_max_at_32_requests_is_prefill_bound(capsys: pytest.CaptureFixture[str]) -> None:
    _, one = answer([*ARGS, "--concurrency", "1", "--json"], capsys)
    _, many = answer([*ARGS, "--concurrency", "32", "--json"], capsys)
    idle = one["speed"]["ttft_idle_seconds"]
    # one request: nothing competes; llama.cpp's server takes the named default server time (engines.API_SERVER_SECONDS)
    assert one["speed"]["ttft_seconds"] == pytest.approx(idle + E.VLLM_API_SERVER_SECONDS.expected, rel=1e-9)
    load = many["speed"]["under_load"]
    # the premise: the 32 prompts' device time per round is far above the round's decode
    assert 32 * many["speed"]["ttft_idle_seconds"] > 10 * 256 * many["speed"]["decode"]["seconds"]
    assert many["speed"]["ttft_idle_seconds"] == pytest.approx(idle)
    assert many["speed"]["ttft_seconds"] > 5 * idle and load["ttft_burst_seconds"] > 5 * idle
    assert many["speed"]["tokens_per_second_per_user"] < 0.5 / many["speed"]["decode"]["seconds"]
    assert load["prefill_share"] > 0.8
    code, text, _ = run([*ARGS, "--concurrency", "32"], capsys)
    assert code == 0
    row = next(ln for ln in text.splitlines() if ln.startswith("at 32 requests"))
    shown = float(re.search(r"TTFT ([0-9.]+) s", row).group(1))
    assert shown == pytest.approx(many["speed"]["ttft_seconds"], abs=1e-3) and shown > 5 * idle
    warning = next(ln for ln in text.splitlines() if ln.startswith("warning: prefill-bound at concurrency 32"))
    assert f"{load['prefill_share']:.0%} of device time" in warning


def test_a_prefill_only_service_is_loaded_too(capsys: pytest.CaptureFixture[str]) -> None:
    """--output-tokens 0 at 32 requests (a prefill-only service): no decode to overlap, so each request waits for the
    other 31 prompts as well as its own (eq. Q6' with no think time: C D, the server saturated); it used to print the
    idle TTFT at any concurrency."""
    _, one = answer([*ARGS, "--output-tokens", "0", "--concurrency", "1", "--json"], capsys)
    _, many = answer([*ARGS, "--output-tokens", "0", "--concurrency", "32", "--json"], capsys)
    idle, host = one["speed"]["ttft_idle_seconds"], E.VLLM_API_SERVER_SECONDS.expected
    assert one["speed"]["ttft_seconds"] == pytest.approx(idle + host, rel=1e-9)  # alone: its prefill and the server
    assert many["speed"]["under_load"]["step_seconds"] is None
    # saturated on the prefill (C D >> H): the cycle C D, and the server's own time on top
    assert 32 * idle < many["speed"]["ttft_seconds"] < 32 * idle + 32 * host
    code, text, _ = run([*ARGS, "--output-tokens", "0", "--concurrency", "32"], capsys)
    assert code == 0 and "requests/s (prefill only)" in text


SPLIT = ["fit", "qwen3-30b-a3b", "--device", "rtx-4090", "--engine", "llamacpp", "--weights", "q4_k_m", "--n-cpu-moe",
         "30", "--context", "16384", "--host-device", "amd-epyc-9654"]


def test_split_prefill_warning_names_the_ubatch_lever(capsys: pytest.CaptureFixture[str]) -> None:
    """probe4 defect 11: one request on a --n-cpu-moe split whose prefill is mostly the host's experts copied to the
    GPU once per 512-token ubatch (eq. 8p). At concurrency 1 there are no fewer requests to send; the lever is a
    larger --ubatch, and it does lower the TTFT: 16,384 tokens in 4 x fewer ubatches copy the same bytes 4 x less."""
    code, text, _ = run(SPLIT, capsys)
    warning = next(ln for ln in text.splitlines() if ln.startswith("warning: prefill-bound at concurrency 1"))
    assert "--ubatch" in warning and "fewer requests" not in warning
    _, small = answer([*SPLIT, "--json"], capsys)
    _, large = answer([*SPLIT, "--ubatch", "2048", "--json"], capsys)
    assert large["speed"]["ttft_idle_seconds"] < 0.5 * small["speed"]["ttft_idle_seconds"]


def test_all_on_device_prefill_warning_has_no_ubatch_lever(capsys: pytest.CaptureFixture[str]) -> None:
    code, text, _ = run([*ARGS, "--concurrency", "32"], capsys)
    warning = next(ln for ln in text.splitlines() if ln.startswith("warning: prefill-bound at concurrency 32"))
    assert "--ubatch" not in warning and "fewer requests per replica" in warning
