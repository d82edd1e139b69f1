"""The web API's max_mamba_cache_size and mamba_full_memory_ratio (SGLang --max-mamba-cache-size /
--mamba-full-memory-ratio, issue #16): the numbers Python and the CLI give (their values against SGLang's rules by
hand: tests/estimate/test_sglang_mamba_flags.py), and a 400 naming the field with the CLI's line for bad input."""

from __future__ import annotations

import json

import pytest
from web_api_helpers import cli_error_line, run_cli, run_cli_json, web_line

import llmsizer
from llmsizer.units import GiB

pytest.importorskip("httpx")
pytest.importorskip("fastapi")

QWEN = "qwen3-next-80b-a3b-thinking"
KEYS = ("max_mamba_cache_size", "max_total_num_tokens", "max_running_requests", "kv_pool_bytes", "mamba_pool_bytes")


@pytest.mark.parametrize(
    "field, value, flag",
    [
        ("max_mamba_cache_size", 150, "--max-mamba-cache-size"),
        ("mamba_full_memory_ratio", 2.0, "--mamba-full-memory-ratio"),
    ],
)
def test_web_gives_the_numbers_of_python_and_the_cli(client, field, value, flag) -> None:
    r = client.post(
        "/api/v1/infer",
        json={"model": QWEN, "engine": "sglang", "memory": "141GiB", "context": 4096, "weights": "fp8", field: value},
    )
    assert r.status_code == 200, r.text
    web = r.json()["details"]
    est = llmsizer.estimate_inference(
        QWEN, engine="sglang", memory=141 * GiB, context=4096, weights="fp8", **{field: value}
    )
    cli = run_cli_json("infer", QWEN, "--engine", "sglang", "--memory", "141GiB", "--context", "4096", "--weights", "fp8",
        flag, str(value))["details"]
    default = llmsizer.estimate_inference(QWEN, engine="sglang", memory=141 * GiB, context=4096, weights="fp8")
    assert est.details["max_mamba_cache_size"] != default.details["max_mamba_cache_size"]  # the setting is read
    for key in KEYS:
        assert web[key] == est.details[key] == cli[key], key


@pytest.mark.parametrize(
    "body, field, argv",
    [
        (
            {"engine": "sglang", "max_mamba_cache_size": -3},
            "max_mamba_cache_size",
            ("--engine", "sglang", "--max-mamba-cache-size", "-3"),
        ),
        (
            {"engine": "sglang", "mamba_full_memory_ratio": 0},
            "mamba_full_memory_ratio",
            ("--engine", "sglang", "--mamba-full-memory-ratio", "0"),
        ),
        (
            {"engine": "sglang", "mamba_full_memory_ratio": "lots"},
            "mamba_full_memory_ratio",
            ("--engine", "sglang", "--mamba-full-memory-ratio", "lots"),
        ),
        (
            {"engine": "vllm", "mamba_full_memory_ratio": 0.5},
            "mamba_full_memory_ratio",
            ("--engine", "vllm", "--mamba-full-memory-ratio", "0.5"),
        ),
    ],
)
def test_bad_input_is_a_400_naming_the_field(client, body, field, argv) -> None:
    r = client.post("/api/v1/infer", json={"model": QWEN, "memory": "141GiB", **body})
    assert r.status_code == 400, r.text
    problem = r.json()
    assert problem["field"] == field, problem
    line = cli_error_line("infer", QWEN, "--memory", "141GiB", *argv)
    flag = argv[-2]
    if line.startswith("argument "):  # the flag's reader refused the value: the CLI's reason, the field named
        assert problem["detail"] == web_line(line, field) and line.startswith(f"argument {flag}: ")
    else:  # the workload's check: the CLI's line too (API.md "Errors")
        assert problem["detail"] == line and line.startswith(flag), (problem, line)


def test_a_model_without_recurrent_layers_is_a_400(client) -> None:
    r = client.post(
        "/api/v1/infer",
        json={"model": "llama-3.1-8b", "engine": "sglang", "memory": "80GiB", "max_mamba_cache_size": 10},
    )
    assert r.status_code == 400 and r.json()["field"] == "max_mamba_cache_size", r.text
    line = cli_error_line(
        "infer", "llama-3.1-8b", "--engine", "sglang", "--memory", "80GiB", "--max-mamba-cache-size", "10"
    )
    assert r.json()["detail"] == web_line(line, r.json()["field"])
    assert "has no recurrent (Mamba / linear-attention) layers" in line


@pytest.mark.parametrize("strategy, slots", [(None, 5), ("no_buffer", 3), ("extra_buffer_lazy", 4)])
def test_web_gives_the_strategys_cap_as_python_and_the_cli(client, strategy, slots) -> None:
    """--mamba-radix-cache-strategy: Qwen3-Next's running requests <= max_mamba_cache_size // slots (SGLang 0.5.23
    _calculate_mamba_ratio, 3 + the extra buffer's tracking slots; by hand: tests/estimate/test_sglang_mamba_strategy.py)."""
    setting = {} if strategy is None else {"mamba_radix_cache_strategy": strategy}
    flag = () if strategy is None else ("--mamba-radix-cache-strategy", strategy)
    if strategy == "no_buffer":  # SGLang requires the overlap scheduler off with it here (mamba_hook.py:156-160)
        setting["disable_overlap_schedule"] = True
        flag = (*flag, "--disable-overlap-schedule")
    r = client.post("/api/v1/infer", json={"model": QWEN, "engine": "sglang", "memory": "141GiB", "context": 4096,
                                           "weights": "fp8", "concurrency": 256, **setting})
    assert r.status_code == 200, r.text
    web = r.json()["details"]
    est = llmsizer.estimate_inference(QWEN, engine="sglang", memory=141 * GiB, context=4096, weights="fp8",
                                      concurrency=256, **setting)
    done = run_cli("infer", QWEN, "--engine", "sglang", "--memory", "141GiB", "--context", "4096", "--weights",
                   "fp8", "--concurrency", "256", *flag, "--json")
    # 256 requested, more than the MambaPool's K // slots admits: does not fit (exit 1), the same on every surface
    assert done.returncode == 1, done.stderr
    cli = json.loads(done.stdout)["details"]
    for key in (*KEYS, "admitted_sequences", "mamba_requests_ratio", "max_concurrency_at_context", "fits"):
        assert web[key] == est.details[key] == cli[key], key
    assert web["max_running_requests"] == web["max_concurrency_at_context"] == web["max_mamba_cache_size"] // slots
    assert web["fits"] is False


def test_extra_buffer_on_a_model_without_it_is_a_400(client) -> None:
    r = client.post("/api/v1/infer", json={"model": "mamba-codestral-7b-v0.1", "engine": "sglang", "memory": "80GiB",
                                           "mamba_radix_cache_strategy": "extra_buffer"})
    assert r.status_code == 400 and r.json()["field"] == "mamba_radix_cache_strategy", r.text
    line = cli_error_line("infer", "mamba-codestral-7b-v0.1", "--engine", "sglang", "--memory", "80GiB",
                          "--mamba-radix-cache-strategy", "extra_buffer")
    assert r.json()["detail"] == web_line(line, r.json()["field"]) and "is not served for" in line


def test_jamba_on_sglang_is_a_400_naming_the_engine(client) -> None:
    """SGLang 0.5.23 registers no Jamba model (tests/estimate/test_sglang_mamba_strategy.py SGLANG_0523_SERVES)."""
    r = client.post("/api/v1/infer", json={"model": "jamba-1.5-mini", "engine": "sglang", "memory": "141GiB"})
    assert r.status_code == 400 and r.json()["field"] == "engine", r.text
    line = cli_error_line("infer", "jamba-1.5-mini", "--engine", "sglang", "--memory", "141GiB")
    assert r.json()["detail"] == web_line(line, r.json()["field"]) and "SGLang 0.5.23 has no Jamba model" in line


# --disable-overlap-schedule / --disable-radix-cache (SGLang's start-up stops and settings it would not read: their
# SGLang lines in tests/estimate/test_sglang_overlap_radix_flags.py): the web's 400 says the CLI's line, naming the field
@pytest.mark.parametrize(("body", "flags", "field"), [
    ({"model": QWEN, "engine": "sglang", "mamba_radix_cache_strategy": "no_buffer"},
     ("--engine", "sglang", "--mamba-radix-cache-strategy", "no_buffer"), "mamba_radix_cache_strategy"),
    ({"model": QWEN, "engine": "sglang", "mamba_radix_cache_strategy": "extra_buffer_lazy",
      "disable_overlap_schedule": True},
     ("--engine", "sglang", "--mamba-radix-cache-strategy", "extra_buffer_lazy", "--disable-overlap-schedule"),
     "mamba_radix_cache_strategy"),
    ({"model": QWEN, "engine": "sglang", "mamba_radix_cache_strategy": "extra_buffer", "disable_radix_cache": True},
     ("--engine", "sglang", "--mamba-radix-cache-strategy", "extra_buffer", "--disable-radix-cache"),
     "mamba_radix_cache_strategy"),
    ({"model": QWEN, "engine": "vllm", "disable_radix_cache": True}, ("--engine", "vllm", "--disable-radix-cache"),
     "disable_radix_cache"),
    ({"model": QWEN, "engine": "llamacpp", "disable_overlap_schedule": True},
     ("--engine", "llamacpp", "--disable-overlap-schedule"), "disable_overlap_schedule"),
])
def test_overlap_and_radix_refusals_are_the_clis_line(client, body, flags, field) -> None:
    r = client.post("/api/v1/infer", json={"memory": "141GiB", "weights": "fp8", **body})
    assert r.status_code == 400 and r.json()["field"] == field, r.text
    line = cli_error_line("infer", body["model"], "--memory", "141GiB", "--weights", "fp8", *flags)
    assert r.json()["detail"] == web_line(line, r.json()["field"])


def test_web_takes_the_flags_as_the_cli_does(client) -> None:
    """Qwen3-Next with the radix cache off and 64 running requests: the MambaPool is 64 slots, 1 each (by hand:
    tests/estimate/test_sglang_overlap_radix_flags.py)."""
    body = {"model": QWEN, "engine": "sglang", "memory": "141GiB", "context": 4096, "weights": "fp8",
            "disable_radix_cache": True, "disable_overlap_schedule": True, "max_num_seqs": 64}
    r = client.post("/api/v1/infer", json=body)
    assert r.status_code == 200, r.text
    web = r.json()["details"]
    cli = run_cli_json("infer", QWEN, "--engine", "sglang", "--memory", "141GiB", "--context", "4096", "--weights",
                       "fp8", "--disable-radix-cache", "--disable-overlap-schedule", "--max-running-requests",
                       "64")["details"]
    for key in (*KEYS, "mamba_requests_ratio", "admitted_sequences"):
        assert web[key] == cli[key], key
    assert web["max_mamba_cache_size"] == 64 and web["mamba_requests_ratio"] == 1 and web["max_running_requests"] == 64
