"""smalls6: what a refusal, a plan and a split's verdict say about the requests in flight and the GPUs' memory.

Truths, each apart from llmsizer's numbers:
- Past a deployment's capacity no steady state exists: every sequence it runs at once is busy and the rest wait in a
  queue that grows without bound. The requests "in flight" it can report are therefore the sequences it runs: a
  pool engine's admitted count (vLLM's max_num_seqs or its KV pool's room), llama.cpp's slots, each holding its own
  KV stream (llama-server -np), of which at most as many as fit in memory. Never a search bound (2^24), never a
  mean wait or queue length (there is none).
- Llama-3.1-8B (config: 32 layers, 8 KV heads, head_dim 128): one f16 KV stream of 4096 tokens is
  2 x 32 x 8 x 128 x 2 B x 4096 = 512 MiB (Pope et al. 2022 eq. 1).
- llama.cpp sizes its slots from the 99 % tail of the requests in flight (formulas/arrival_tail.py eq. T1), not
  their mean, so its decode refusal names that statistic; vLLM's is the mean (Little's law, eq. Q10c).
- vLLM's window for Llama-3.1-8B is its config's max_position_embeddings, 131,072; its fix is said once in a plan.
- llama.cpp's --fit checks each GPU against its own free memory (common/fit.cpp: targets = free - margins per
  device); fit takes one memory for every GPU.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from cli_capture import run, run_json
from llmsizer.estimate.rate_capacity import ceiling_said
from llmsizer.estimate.serving_load import RateCapacityError, in_flight_said, rate_fixed_point
from llmsizer.models import load_model

GiB, MiB = 2**30, 2**20
SEARCH_BOUND = 2**24


def _kv_stream_bytes(model: str, context: int) -> int:
    s = load_model(model)
    return 2 * s.num_layers * s.num_kv_heads * s.head_dim * 2 * context  # K and V, f16


@pytest.mark.parametrize("rate", ["3", "10"])  # past the decode's ceiling (refused by it) and past the server's
def test_llamacpp_refusal_reports_the_slots_that_fit_not_the_search_bound(rate: str) -> None:
    code, r = run_json("fit", "llama-3.1-8b", "--device", "h100-sxm", "--engine", "llama.cpp", "--context", "4096",
                       "--request-rate", rate)
    assert code == 1 and not r["fits"] and r["reasons"][0].startswith("does not carry the rate")
    slots = r["details"]["concurrency"]
    assert 1 <= slots < SEARCH_BOUND and "16,777,216" not in " ".join(r["reasons"])
    # the slots shown fit (each its 512 MiB KV stream beside the weights), and not many more would
    assert r["memory_per_device"] <= r["budget_per_device"]
    kv = _kv_stream_bytes("llama-3.1-8b", 4096)
    assert kv == 512 * MiB
    # bf16 weights of Llama-3.1-8B's 8.03e9 parameters (its model card), the token embeddings (config: vocab 128,256 x
    # hidden 4,096) in host memory (llama.cpp keeps the input layer on the CPU)
    weights = 2 * (8.03e9 - 128256 * 4096)
    assert slots * kv <= r["budget_per_device"] - weights
    assert (slots + 4) * kv > r["budget_per_device"] - weights  # the CUDA context and compute buffer: < 2 GiB
    assert r["details"]["queued_sequences"] is None and r["details"]["queue_wait_seconds"] is None


def test_vllm_refusal_reports_the_admitted_and_no_queue() -> None:
    code, r = run_json("fit", "qwen2.5-0.5b", "--device", "h100-sxm", "--engine", "vllm", "--context", "1024",
                       "--request-rate", "1000")
    assert code == 1 and not r["fits"]
    d = r["details"]
    assert d["concurrency"] == d["running_sequences"] <= 1024  # vLLM's default max_num_seqs (H100: 1024)
    assert d["queued_sequences"] is None and d["queue_wait_seconds"] is None


def test_qwen_llamacpp_rate_1000_reports_slots_that_fit() -> None:
    code, r = run_json("fit", "qwen2.5-0.5b", "--device", "h100-sxm", "--engine", "llama.cpp", "--context", "1024",
                       "--request-rate", "1000")
    assert code == 1 and 1 < r["details"]["concurrency"] < SEARCH_BOUND
    assert r["memory_per_device"] <= r["budget_per_device"]  # the slots it runs fit; the rate is what is refused


def test_the_decode_refusal_names_the_engines_statistic() -> None:
    assert "mean in flight" in ceiling_said("decode", "vllm")
    said = ceiling_said("decode", "llamacpp")
    assert "mean in flight" not in said and "99% tail" in said and "eq. T1" in said
    for engine, word in (("llamacpp", "99% tail"), ("vllm", "mean in flight")):
        with pytest.raises(RateCapacityError) as e:  # f(C) = 2C + 1 > C everywhere: no fixed point
            rate_fixed_point(lambda c: c, lambda c: 2.0 * c + 1, 1.0, limit=64, said=lambda _, e=engine: in_flight_said(e))
        assert word in str(e.value) and (engine == "vllm" or "mean in flight" not in str(e.value))


def test_plan_says_the_window_fix_once(window_request: Callable[..., Path]) -> None:
    window = load_model("llama-3.1-8b").max_position_embeddings
    assert window == 131072
    p = window_request("200k")
    code, out, _ = run("plan", str(p))
    assert code == 1
    assert out.count(f"{window:,} tokens or less") == 1, out


BASE = ("llama-3.1-8b", "--device", "rtx-3090", "--count", "2", "--engine", "llama.cpp", "--weights", "q8_0")


def test_auto_on_unequal_free_memory_states_the_difference_in_both_answers() -> None:
    code, auto = run_json("fit", *BASE, "--auto", "--free", "23GiB,6GiB")
    assert code == 0 and auto["fits"]
    assert any("free memory differs" in w for w in auto["warnings"])
    # a high end warned is the high end of the GPU whose budget it names (each GPU against its own free memory)
    for w in auto["warnings"]:
        m = re.search(r"high end ([\d.]+) GiB of the range \(budget ([\d.]+) GiB\)", w)
        if m:
            high, budget = float(m.group(1)), float(m.group(2))
            (dev,) = [d for d in auto["devices"] if d.get("target") and abs(d["target"] / GiB - budget) < 0.01]
            assert abs(dev["total_high"] / GiB - high) < 0.01
    flags = auto["flags"]
    ctx = flags[flags.index("-c") + 1]
    ts = flags[flags.index("-ts") + 1]
    code, plain = run_json("fit", *BASE, "--context", ctx, "-ngl", flags[flags.index("-ngl") + 1], "-ts", ts)
    assert "every GPU taken to have 24.00 GiB" in plain["reasons"][0]  # rtx-3090: 24 GiB, the one memory
    assert "fit --auto --free" in plain["reasons"][0]
    # equal free memory: no such note in the auto answer
    _, same = run_json("fit", *BASE, "--auto")
    assert not any("free memory differs" in w for w in same["warnings"])
