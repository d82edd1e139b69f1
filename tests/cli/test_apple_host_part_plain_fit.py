"""review11 #2 and #6: llama.cpp's CPU part on a Mac in plain `fit` (its -ngl given). The CPU part lives in the
unified memory outside the Metal working set, which `fit --auto` checks (llamacpp_fit.py, device.apple_host_memory):
plain `fit` with the flags --auto prints checks the same memory (before: FITS, exit 0, where --auto said DOES NOT
FIT, exit 1). And nothing is copied over a link on a Mac (before: "PCIe 0.00 ms" and "no PCIe bandwidth")."""

from __future__ import annotations

from cli_capture import run, run_json

Q = ["qwen2.5-14b", "--device", "apple-m1-16gb", "--weights", "q8_0"]


def _host_line(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if "host memory: needs" in line]


def test_fit_with_the_flags_auto_prints_gives_autos_verdict_on_a_mac() -> None:
    code, auto, _ = run("fit", *Q, "--auto")
    assert code == 1 and "-ngl 30" in auto
    code2, plain, _ = run("fit", *Q, "--engine", "llamacpp", "--context", "4096", "--n-gpu-layers", "30")
    assert code2 == 1 and "DOES NOT FIT" in plain
    # the same words: one check (verdict.host_memory_verdict) of the same memory (device.apple_host_memory)
    words = _host_line(plain)
    assert words and words[0].removeprefix("warning: ") in [w.removeprefix("warning: ") for w in _host_line(auto)]
    _, r = run_json("fit", *Q, "--engine", "llamacpp", "--context", "4096", "--n-gpu-layers", "30")
    assert r["fits"] is False and any(a["name"] == "apple_host_memory" for a in r["assumptions"])


def test_host_memory_on_a_mac_names_the_unified_memory_outside_the_working_set() -> None:
    code, _, err = run("fit", *Q, "--engine", "llamacpp", "--n-gpu-layers", "30", "--host-memory", "5GiB")
    assert code == 2 and "outside the Metal working set" in err and "whole model" not in err


def test_a_partial_offload_on_a_mac_copies_within_the_unified_memory_not_over_pcie() -> None:
    args = ("fit", *Q, "--engine", "llamacpp", "--context", "4096", "--n-gpu-layers", "30")
    _, text, _ = run(*args)
    assert "PCIe" not in text and "unified-memory copy" in text
    _, r = run_json(*args)
    sd, sp = r["speed"]["details"]["split_decode"], r["speed"]["details"]["split_prefill"]
    assert not any("PCIe" in w for w in r["warnings"])
    # the copy moves at half the chip's bandwidth (read + write in one memory; M1: 68.25 GB/s, Apple's spec), not at
    # the PCIe Gen4 fallback (32 GB/s)
    assert sp["link_bandwidth"] == 68.25e9 / 2
    assert 0 < sd["transfer_seconds"] < 1e-3
