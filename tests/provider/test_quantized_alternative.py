"""`capacity check`'s quantized alternative for a service is the estimate's, one answer with `infer` (issue #12/#16).

Before, a service that did not fit was offered "a quantized model (8-bit weights)" at a made-up 0.6 x the plan's
memory, or half its devices, in provider/placement.py. Now the format is the one recommend's chooser picks on the
inventory's devices (`recommend.best_option_on` over the engine's format ladder, through plan/inference.py
`quantized_fit`) and its memory is `fit`'s at that format. Each case is checked against the CLI a user would run
for the same load: `infer MODEL --weights FORMAT --device DEVICE` at the request's peak context, concurrency and
output tokens. Where no format fits, no alternative is offered."""

from __future__ import annotations

from pathlib import Path

from cli_capture import run_json
from llmsizer.units import format_bytes

from .inventory_text import PEAK, chat_service, failing_check, one_site_inventory

PEAK_2 = ("--context", "8192", "--concurrency", "2", "--output-tokens", "512")

A100_AND_L4 = one_site_inventory("""\
  - {id: a, site: s1, device: a100-pcie-80gb, devices: 1, cpus: 32, ram: 256 GiB, pools: [serving]}
  - {id: l, site: s1, device: l4, devices: 2, cpus: 16, ram: 128 GiB, pools: [serving]}""")


def _check(tmp_path: Path, inventory: str, request: str) -> dict:
    c = failing_check(tmp_path, inventory, request)
    assert c["binding"] == "memory", c  # the premise: the plan's format does not fit
    return c


def _quantized(c: dict) -> list[str]:
    return [a for a in c["alternatives"] if a.startswith("serve a quantized model")]


def test_a_70b_that_does_not_fit_an_a100_is_offered_int4_with_infers_memory(tmp_path: Path) -> None:
    """Llama 3.1 70B in bf16 (70.55e9 x 2 B = 131 GiB of weights) cannot fit an 80 GiB A100; AWQ int4 can. The A100
    has no FP8 kernels, so vLLM's ladder goes bf16 -> awq-int4 there."""
    code, bf16 = run_json("infer", "llama-3.1-70b", "--weights", "bf16", "--device", "a100-pcie-80gb", *PEAK)
    assert code == 1 and not bf16["details"]["fits"]  # the CLI's own answer: unquantized does not fit
    code, int4 = run_json("infer", "llama-3.1-70b", "--weights", "awq-int4", "--device", "a100-pcie-80gb", *PEAK)
    assert code == 0 and int4["details"]["fits"]
    c = _check(tmp_path, A100_AND_L4, chat_service("llama-3.1-70b", "a100-pcie-80gb", quantization="none"))
    (line,) = _quantized(c)
    assert line.startswith("serve a quantized model: awq-int4 on vllm, 1 x a100-pcie-80gb at s1"), line
    # the memory per device is infer's total on the device for the same load and format (one answer)
    assert f"memory per device {format_bytes(int4['totals']['device']['bytes'])} of" in line, (line, int4["totals"])
    # vLLM reserves its pool whatever the load: the line also says what this workload needs of it, as infer does
    assert f"this workload needs {format_bytes(int4['details']['workload_bytes'])}" in line, line
    assert "0.6" not in line and "8-bit" not in line


def test_llama_cpp_takes_the_best_gguf_rung_that_fits(tmp_path: Path) -> None:
    """Llama 3.1 8B on llama.cpp on an 8 GB card, 2 x 8k tokens: the checkpoint's bf16 GGUF does not fit; the
    alternative is the highest-quality GGUF type that does (Q3_K_M: 7.96 GiB less llama.cpp's own 1024 MiB margin,
    common/common.h:483, leaves 6.96 GiB), with infer's memory for it, and the type above it (Q4_K_M) does not fit."""
    inventory = one_site_inventory("  - {id: g, site: s1, device: rtx-5060, devices: 1, cpus: 16, ram: 64 GiB, "
                           "pools: [serving]}")
    c = _check(tmp_path, inventory, chat_service("llama-3.1-8b", "rtx-5060", engine="llamacpp", concurrency=2,
                                                         quantization="none"))
    (line,) = _quantized(c)
    assert line.startswith("serve a quantized model: gguf:q3_k_m on llamacpp, 1 x rtx-5060 at s1"), line
    args = ("llama-3.1-8b", "--engine", "llamacpp", "--device", "rtx-5060", *PEAK_2)
    code, q3 = run_json("infer", *args, "--weights", "q3_k_m")
    assert code == 0 and q3["details"]["fits"]
    assert f"memory per device {format_bytes(q3['totals']['device']['bytes'])} of" in line, (line, q3["totals"])
    code, q4 = run_json("infer", *args, "--weights", "q4_k_m")  # the rung above Q3_K_M in llama.cpp's types
    assert code == 1 and not q4["details"]["fits"]


def test_no_format_fits_no_alternative(tmp_path: Path) -> None:
    """Llama 3.1 405B: even AWQ int4, vLLM's smallest rung, holds more weights than one A100 or two L4s have
    memory, so no quantized serving is offered (never a guessed one)."""
    code, int4 = run_json("infer", "llama-3.1-405b", "--weights", "awq-int4", *PEAK)
    weights = next(i["bytes"] for i in int4["items"] if i["name"] == "weights")
    assert weights > 80 * 2**30 and weights > 2 * 24 * 10**9  # more than either node's devices hold
    c = _check(tmp_path, A100_AND_L4, chat_service("llama-3.1-405b", "a100-pcie-80gb"))
    assert _quantized(c) == [], c["alternatives"]
