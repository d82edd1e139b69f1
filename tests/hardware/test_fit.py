"""fit(): memory per device against a stated headroom, the engine rules, and speed attached."""

from __future__ import annotations

from pathlib import Path

import pytest

from llmsizer.errors import InputError
from llmsizer.estimate.fit import choose_tensor_parallel, fit
from llmsizer.models import load_model
from llmsizer.units import GiB


def test_budget_is_usable_memory_times_one_minus_headroom(hw_file: Path) -> None:
    for hr in (0.0, 0.1, 0.25):
        r = fit("qwen2.5-0.5b", "test-gpu", engine="transformers", headroom=hr, hardware_files=[hw_file])
        assert r.budget_per_device == int(80 * GiB * (1 - hr))
        assert r.fits and r.budget_left_bytes == r.budget_per_device - r.memory_per_device


def test_a_larger_headroom_can_turn_a_fit_into_a_miss(hw_file: Path) -> None:
    # 8B in bf16 needs ~16 GB of weights: fits 80 GiB with 10 % headroom, not with 85 % kept free (12 GiB left)
    ok = fit("llama-3.1-8b", "test-gpu", engine="transformers", headroom=0.1, hardware_files=[hw_file])
    miss = fit("llama-3.1-8b", "test-gpu", engine="transformers", headroom=0.85, hardware_files=[hw_file])
    assert ok.fits and not miss.fits
    assert miss.memory_per_device == ok.memory_per_device


def test_per_device_memory_does_not_grow_with_more_devices(hw_file: Path) -> None:
    # the model sharded over all n devices (tensor_parallel pinned): left to fit, eager transformers' host-bound
    # decode (formulas/launch_overhead.py eq. K4) makes replicas of the smallest degree that fits the fastest layout
    mems = [fit("llama-3.1-70b-instruct", "test-gpu", n, engine="transformers", hardware_files=[hw_file],
                speed=False, tensor_parallel=n).memory_per_device for n in (1, 2, 4, 8)]
    assert all(mems[i] >= mems[i + 1] for i in range(len(mems) - 1))
    assert mems[0] > 2 * mems[3]


def test_cpu_uses_ram_and_instances_bring_their_count(hw_file: Path) -> None:
    r = fit("qwen2.5-0.5b", "test-cpu", memory=64 * GiB, weights="q8_0", hardware_files=[hw_file])
    assert r.engine == "llamacpp" and r.fits and r.estimate.primary_location == "host"
    assert r.speed.tokens_per_second_per_user and r.speed.decode.bound == "memory"
    r8 = fit("llama-3.1-70b-instruct", "test-gpu-8", hardware_files=[hw_file], concurrency=8)
    assert r8.count == 8 and r8.tensor_parallel == 8 and r8.engine == "vllm"


def test_engine_rules_are_enforced(hw_file: Path) -> None:
    r2 = fit("llama-3.1-8b", "test-gpu", 2, engine="llamacpp", hardware_files=[hw_file])  # a layer split, no TP
    assert r2.tensor_parallel == 1 and r2.replicas == 1 and r2.estimate.details["split"]["split_mode"] == "layer"
    # two CPUs are two replicas, one model each (estimate/device.py one_replica_per_device, as a plan serves them)
    r_cpu = fit("llama-3.1-8b", "test-cpu", 2, memory=8 * GiB, engine="llamacpp", hardware_files=[hw_file])
    assert (r_cpu.tensor_parallel, r_cpu.replicas) == (1, 2) and "split" not in r_cpu.estimate.details
    with pytest.raises(InputError, match="vllm"):
        fit("qwen2.5-0.5b", "test-cpu", memory=8 * GiB, engine="vllm", hardware_files=[hw_file])
    with pytest.raises(InputError, match="--memory"):
        fit("qwen2.5-0.5b", "test-cpu", hardware_files=[hw_file])


def test_tensor_parallel_divides_the_heads() -> None:
    spec = load_model("llama-3.1-8b")  # 32 heads
    assert choose_tensor_parallel(spec, 8) == 8
    assert choose_tensor_parallel(spec, 6) == 2  # 6 does not divide 32; 3 neither; 2 does -> 3 replicas


def test_apple_gpu_uses_the_metal_working_set_share() -> None:
    r = fit("qwen2.5-0.5b", "apple-m3-max-48gb")
    # Apple's "48GB" unified memory is 48 GiB (JEDEC binary reading, catalog MEMORY_CONVENTION); was 48e9 x 0.75
    assert r.details["usable_memory_per_device"] == int(48 * 2**30 * 0.75)


