"""probe9 #3 and #4: llama.cpp on a Mac. Metal is a GPU-type backend device whose memory is
recommendedMaxWorkingSetSize (ggml-metal-device.m ggml_metal_device_get_memory), so `fit --auto` fills it as it fills a
CUDA GPU (before: refused, "--auto places layers on GPUs; apple-m4-pro-24gb is apple"); the CPU part runs on the chip's
own CPU cores over the same unified memory, so a partial offload gets a decode speed (before: none, and
--host-device refused the chip itself)."""

from __future__ import annotations

import pytest

from cli_capture import run, run_json
from llmsizer.catalog.hardware import load_catalog
from llmsizer.estimate.device import apple_host_memory, usable_memory

Q = ["qwen3-30b-a3b", "--device", "apple-m4-pro-24gb", "--weights", "q4_k_m", "--context", "16k"]
GiB = 2**30


def test_auto_fit_runs_on_a_mac_within_the_metal_working_set() -> None:
    code, r = run_json("fit", *Q, "--auto")
    assert code == 0, r
    gpu = [d for d in r["devices"] if d["device"] != "host"]
    assert len(gpu) == 1
    # the Metal device's free memory: 2/3 of 24 GiB = 16 GiB (efficiency.apple_gpu_working_set; M1 16 GB logs 10922.67
    # MiB = 2/3), the margin llama.cpp's --fit-target keeps (1024 MiB) below it
    assert gpu[0]["free"] == 16 * GiB and gpu[0]["total"] <= 15 * GiB
    host = [d for d in r["devices"] if d["device"] == "host"]
    assert host and host[0]["free"] == 8 * GiB  # 24 GiB unified - 16 GiB working set
    assert any(a["name"] == "apple_host_memory" for a in r["assumptions"])
    # the printed flags, timed by `fit`: the same device memory (one answer)
    flags = r["flags"]
    code2, f = run_json("fit", *Q, "-ngl", flags[flags.index("-ngl") + 1],
                        *(["--n-cpu-moe", flags[flags.index("--n-cpu-moe") + 1]] if "--n-cpu-moe" in flags else []))
    assert code2 == 0 and f["memory_per_device"] == gpu[0]["total"]


def test_a_partial_offload_on_a_mac_has_a_decode_speed_and_the_chip_is_its_own_host() -> None:
    # -ngl 34: 14 layers on the CPU side, within the unified memory outside the working set (24 - 16 GiB, less the
    # 1 GiB host_fit_target); at -ngl 20 the CPU side needs 11.3 GiB of it and does not fit (review11 #2)
    code, r = run_json("fit", *Q, "-ngl", "34")
    assert code == 0
    assert r["speed"]["single_stream_tokens_per_second"] > 0
    assert any("own CPU cores" in w for w in r["warnings"])
    code2, same = run_json("fit", *Q, "-ngl", "34", "--host-device", "apple-m4-pro-24gb")
    assert code2 == 0 and same["speed"]["single_stream_tokens_per_second"] == r["speed"][
        "single_stream_tokens_per_second"]
    code3, _, err = run("fit", *Q, "-ngl", "20", "--host-device", "amd-epyc-9654")
    assert code3 == 2 and "own CPU cores" in err


@pytest.mark.parametrize("name, rest", [("apple-m4-pro-24gb", 8 * GiB), ("apple-m3-max-64gb", 16 * GiB)])
def test_apple_host_memory_is_the_unified_memory_outside_the_working_set(name: str, rest: int) -> None:
    dev = load_catalog().find(name)
    got, note = apple_host_memory(dev)  # type: ignore[arg-type]
    assert got == rest and note is not None
    assert got + usable_memory(dev, record=False)[0] == dev.memory_bytes  # type: ignore[union-attr,operator]


def test_auto_on_a_cpu_names_the_alternative() -> None:
    code, _, err = run("fit", "qwen2.5-7b", "--device", "amd-epyc-9654", "--auto")
    assert code == 2 and "--max-context" in err


def test_a_format_search_on_a_mac_reads_the_chip_as_its_own_host_again() -> None:
    # review11 defect 1: the search passes the host it already read (`<chip>:cpu`) to host_part a second time; it was
    # refused, so every model was "rejected" on a Mac and fit lost its "fits at" hint
    code, d = run_json("models", "--fits-on", "apple-m1-16gb")
    assert code == 0 and any(m["status"] == "meets" for m in d["models"])
    code, f = run_json("fit", "qwen2.5-14b", "--device", "apple-m1-16gb")
    assert code == 1 and f["fits_at"] is not None and f["fits_at"]["weights"].startswith("gguf:q")


def test_a_split_prefill_on_a_mac_names_metals_offload_threshold_not_cudas() -> None:
    """The prefill of a Mac split copies the CPU part's weights into Metal buffers for each ubatch of 32 tokens or
    more: llama.cpp's Metal backend decides it (ggml-metal.cpp ggml_backend_metal_device_offload_op, the same 32-row
    threshold), so the assumption names Metal's function, never ggml-cuda.cu's."""
    code, r = run_json("fit", *Q, "-ngl", "34")
    assert code == 0
    why = [a["why"] for a in r["speed"]["assumptions"] if a["name"] == "op_offload_min_batch"]
    assert len(why) == 1, r["speed"]["assumptions"]
    assert "llama.cpp's Metal offload threshold" in why[0]
    assert "ggml_backend_metal_device_offload_op" in why[0] and "cuda" not in why[0].lower()
