"""A pool engine that cannot start, the speed of a setup whose pool holds no sequence, and the two TTFTs of a queue
(new-user probe, task vllmpool).

What vLLM does: its KV pool is gpu_memory_utilization x the device's memory less the weights, the profile run's
activations, the non-torch allocations and the CUDA graphs (v1/worker/gpu_worker.py determine_available_memory); when
that leaves nothing, ``_check_enough_kv_cache_memory`` (vllm/v1/core/kv_cache_utils.py @001cabc) raises "No
available memory for the cache blocks" and the server does not start. What it would hold once started is its pool
and the CUDA context outside it: never more than the card. Before this change `fit llama-3.1-70b --device h100-sxm
--engine vllm` printed "reserved 137.38 GiB per device" on a 79.65 GiB card and timed "speed if it fit" at one
sequence of the 8 requested.

Expected values here come from the catalog and the model's config.json, not from llmsizer's answers: the H100 SXM's
usable memory is its nvidia-smi total (81559 MiB, accelerators.json ``memory_usable``), vLLM's default
gpu_memory_utilization is 0.9 (vllm/config/cache.py CacheConfig), and Llama-3.1-70B's bf16 weights are its
parameters counted from config.json x 2 bytes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli.cli_run import answer, run
from llmsizer.plan import make_plan
from llmsizer.request import parse_request

DATA = Path(__file__).resolve().parents[2] / "src" / "llmsizer" / "catalog" / "data"
H100_USABLE = 81559 * 2**20  # nvidia-smi 'FB Memory Usage / Total: 81559 MiB' (accelerators.json memory_usable)
UTIL = 0.9  # vLLM CacheConfig.gpu_memory_utilization default
# what vLLM's pool is a share of: CUDA's total, nvidia-smi -q 'FB Memory Usage / Reserved: 479 MiB' below the Total
# (tests/fixtures/real_outputs/nvidia-smi-q/h100-80gb-hbm3.txt; vllm v1/worker/utils.py request_memory: probe23 D2)
H100_CUDA = (81559 - 479) * 2**20


def _llama70b_bf16_bytes() -> int:
    """Llama-3.1-70B's parameters from its config.json (untied embeddings and lm_head), 2 bytes each."""
    c = json.loads((DATA / "models" / "llama-3.1-70b-instruct.json").read_text())["config"]
    h = c["hidden_size"]
    kv = c["num_key_value_heads"] * (h // c["num_attention_heads"])  # K (and V) projection width
    layer = 2 * h * h + 2 * h * kv + 3 * h * c["intermediate_size"] + 2 * h
    return 2 * (2 * c["vocab_size"] * h + c["num_hidden_layers"] * layer + h)


def test_catalog_premise() -> None:
    dev = next(d for d in json.loads((DATA / "hardware" / "accelerators.json").read_text())["devices"]
               if d["id"] == "h100-sxm")
    assert (dev["memory_usable"]["value"], dev["memory_usable"]["unit"]) == (81559, "MiB")
    assert _llama70b_bf16_bytes() > UTIL * H100_USABLE  # the premise: the weights alone exceed the pool


def test_vllm_that_cannot_start_says_so_and_reserves_its_pool(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["fit", "llama-3.1-70b", "--device", "h100-sxm", "--engine", "vllm", "--concurrency", "8"]
    code, f = answer(argv, capsys)
    assert code == 1 and f["fits"] is False
    assert "No available memory for the cache blocks" in f["reasons"][0]
    context = next(i["bytes"] for i in f["memory"]["items"] if i["name"] == "cuda_context")
    # reserved once started: the pool (0.9 x the card's usable memory) + the CUDA context outside it, <= the card
    assert f["reserved_per_device"] - context == int(UTIL * H100_CUDA)
    assert f["reserved_per_device"] <= H100_USABLE
    # the shortfall is at least the weights beyond the pool (activations, non-torch and graphs come on top)
    weights = _llama70b_bf16_bytes()
    assert weights - int(UTIL * H100_CUDA) < f["pool_shortfall_per_device"] < weights
    _, text, _ = run(argv, capsys)
    line = next(ln for ln in text.splitlines() if ln.strip().startswith("memory per device"))
    reserved = f"reserved {f['reserved_per_device'] / 2**30:.2f} GiB per device once started"
    assert reserved in line and "vLLM does not start" in line
    assert "137.38 GiB per device" not in line.split("reserved", 1)[1]  # the device total is not called reserved


def test_layouts_call_the_pool_reserved_not_the_weights(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["fit", "llama-3.1-70b-instruct", "--device", "h100-sxm", "--count", "8", "--engine", "vllm",
            "--concurrency", "32"]
    _, f = answer(argv, capsys)
    layouts = {d["tensor_parallel"]: d for d in f["details"]["tensor_parallel_layouts"]}
    for d in layouts.values():  # every degree on the same card reserves the same pool, started or not
        assert d["reserved_per_device"] <= H100_USABLE
        assert d["reserved_per_device"] == layouts[8]["reserved_per_device"]
    assert layouts[1]["pool_shortfall_per_device"] > 0 and "pool_shortfall_per_device" not in layouts[8]
    _, text, _ = run(argv, capsys)
    one = text.split("TP 1 x 8:", 1)[1].split(";", 1)[0]
    assert f"({layouts[1]['reserved_per_device'] / 2**30:.2f} GiB reserved, does not start)" in one


@pytest.mark.parametrize("argv", [
    ["fit", "llama-3.1-70b", "--device", "h100-sxm", "--engine", "vllm", "--concurrency", "8"],
    ["fit", "qwen3-next-80b-a3b-thinking", "--device", "h100-sxm", "--count", "2", "--engine", "vllm", "--context",
     "32k", "--concurrency", "8"],
])
def test_speed_if_it_fit_is_at_the_requested_load(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """8 requested, below vLLM's max_num_seqs (1024 on a >= 70 GiB GPU): the speed if it fit runs 8, not 1; the
    answer says none runs now (running_sequences 0, no queue wait)."""
    _, f = answer(argv, capsys)
    assert f["fits"] is False
    assert f["speed"]["concurrency"] == 8
    assert f["running_sequences"] == 0 and f["details"]["queue_wait_seconds"] is None
    named = {a["name"]: a for a in f["assumptions"]}
    assert named["speed_sequences"]["value"] == 8 and "no sequence runs" in named["speed_sequences"]["why"]
    _, text, _ = run(argv, capsys)
    assert "decode x8 " in text and "decode x1 " not in text


def test_queued_ttft_and_the_table_never_read_as_one(capsys: pytest.CaptureFixture[str]) -> None:
    # 2048-token sequences: the pool holds the running cap's 1,024 (at 4096 it holds 1,018 of CUDA's 79.18 GiB)
    argv = ["fit", "llama-3.1-8b", "--device", "h100-sxm", "--count", "8", "--concurrency", "16777216", "--context",
            "2048"]
    code, f = answer(argv, capsys)
    assert code == 0 and f["details"]["queued_sequences"] > 0
    wait, ttft = f["details"]["queue_wait_seconds"], f["speed"]["ttft_seconds"]
    _, text, _ = run(argv, capsys)
    row = next(ln for ln in text.splitlines() if ln.startswith("prefill"))
    assert row.startswith("prefill (one prompt, idle)")  # the loaded TTFT is its own row, of the running requests
    running = f["speed"]["concurrency"]
    assert next(ln for ln in text.splitlines() if ln.startswith("at ")).startswith(f"at {running} requests running ")
    assert f"a queued request's TTFT {wait + ttft:.2f} s" in text
    # no queue, no load (one sequence on an engine that is no HTTP server: transformers): the plain label
    _, plain, _ = run(["fit", "llama-3.1-8b", "--device", "h100-sxm", "--engine", "transformers", "--concurrency",
                       "1"], capsys)
    assert next(ln for ln in plain.splitlines() if ln.startswith("prefill")).startswith("prefill (TTFT) ")
    # vLLM at one sequence: its server's own time per request (eq. Q9's H) makes the TTFT a row of its own
    _, one, _ = run(["fit", "llama-3.1-8b", "--device", "h100-sxm", "--concurrency", "1"], capsys)
    assert next(ln for ln in one.splitlines() if ln.startswith("at ")).startswith("at 1 request ")


def test_plan_names_the_device_memory_as_such() -> None:
    text = ("version: 1\njobs:\n  - name: chat\n    kind: inference\n    model: {name: llama-3.1-8b}\n"
            "    engine: vllm\n    traffic:\n      concurrency: {typical: 4, peak: 4}\n"
            "    resources: {device: h100-sxm, count: 1}\n")
    hw = make_plan(parse_request(text, source="t.yaml"), alternatives=False).to_dict()["jobs"][0]["hardware"]
    assert hw["device_memory"] == H100_USABLE
    assert hw["memory_per_device"] == hw["device_memory"]  # the deprecated alias (docs/nomenclature.md)
