"""A hardware file's GPU whose vendor no runtime rule knows (none given, or one such as 'Acme') is sized with CUDA's
context, and the answer says so: a ``gpu_runtime`` assumption naming the vendor, the device and the file, on
`infer`, `fit` and `train` (issue #12/#16). Before, estimate/device.py ``gpu_runtime`` took CUDA silently.

docs/hardware.md: ``vendor`` is optional in a hardware file (the loader reads ``raw.get("vendor", "")``), so the
missing or unknown vendor is a named assumption, not a refusal. The rules themselves: NVIDIA -> CUDA, an AMD GPU ->
ROCm, an Intel accelerator -> Gaudi (estimate/device.py ``gpu_runtime``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli.cli_run import answer, run

GPU = {"kind": "gpu", "form_factor": "datacenter", "memory": "64GiB", "memory_bandwidth": "2000 GB/s",
       "flops": {"bf16": "400 TFLOP/s"}, "tdp": "500 W"}
HARDWARE = {"devices": [{"id": "acme-x1", "name": "Acme X1", "vendor": "Acme", **GPU},
                        {"id": "no-vendor", "name": "No vendor", **GPU},
                        {"id": "green-x1", "name": "An NVIDIA card", "vendor": "NVIDIA", **GPU},
                        {"id": "red-x1", "name": "An AMD card", "vendor": "AMD", **GPU}]}


@pytest.fixture()
def hw(tmp_path: Path) -> Path:
    p = tmp_path / "runtime-hardware.json"
    p.write_text(json.dumps(HARDWARE), "utf-8")
    return p


def _runtime(out: dict) -> list[dict]:
    nested = [out[k] for k in ("memory", "estimate") if isinstance(out.get(k), dict)]  # fit's memory estimate
    return [a for d in (out, *nested) for a in d.get("assumptions", []) if a["name"] == "gpu_runtime"]


@pytest.mark.parametrize("command", [["infer"], ["fit"], ["train", "--method", "lora"]])
@pytest.mark.parametrize("device, said", [("acme-x1", "unknown vendor 'Acme'"), ("no-vendor", "no vendor")])
def test_an_unknown_vendor_is_a_named_stand_in(command: list[str], device: str, said: str, hw: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    _, out = answer([command[0], "qwen2.5-0.5b", *command[1:], "--device", device, "--hardware-file", str(hw)], capsys)
    (named,) = {json.dumps(a, sort_keys=True) for a in _runtime(out)}
    a = json.loads(named)
    assert a["value"] == "cuda" and a["default"] is True
    assert said in a["why"] and device in a["why"] and str(hw) in a["why"], a
    assert "CUDA's context used as stand-in" in a["why"]


@pytest.mark.parametrize("command", [["infer"], ["fit"], ["train", "--method", "lora"]])
def test_the_text_answer_gives_the_stand_in_reason(command: list[str], hw: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """The text answer prints the reason the JSON gives (Assumption.mark, as for the engine's default for the
    device). Before (probe12 #14): 'gpu_runtime=cuda (default)', the stand-in unsaid."""
    argv = [command[0], "qwen2.5-0.5b", *command[1:], "--device", "acme-x1", "--hardware-file", str(hw)]
    _, out = answer(argv, capsys)
    (why,) = {a["why"] for a in _runtime(out)}
    code, text, err = run(argv, capsys)
    assert code in (0, 1), err
    assert f"gpu_runtime=cuda ({why})" in text
    assert "gpu_runtime=cuda (default);" not in text


@pytest.mark.parametrize("device", ["green-x1", "red-x1"])
def test_a_vendor_with_a_rule_adds_none(device: str, hw: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, out = answer(["infer", "qwen2.5-0.5b", "--device", device, "--hardware-file", str(hw)], capsys)
    assert _runtime(out) == []


def test_catalog_devices_add_none(capsys: pytest.CaptureFixture[str]) -> None:
    for device in ("h100-sxm", "mi300x", "gpu"):
        _, out = answer(["infer", "qwen2.5-0.5b", "--device", device], capsys)
        assert _runtime(out) == [], device


def test_llamacpp_backend_follows_the_device() -> None:
    """llama.cpp's backend (the key of its calibrated speed bands, estimate/ranges.py llamacpp_band): ggml-cpu on a
    CPU, ggml-metal on an Apple chip, ggml-cuda on an NVIDIA GPU, the GPU's runtime elsewhere (ROCm on an AMD GPU)."""
    from llmsizer.catalog.hardware import builtin_catalog
    from llmsizer.estimate.device import llamacpp_backend

    cat = builtin_catalog()
    assert [llamacpp_backend(cat.device(d)) for d in ("amd-epyc-9654", "apple-m2-ultra-192gb", "rtx-4090",
                                                      "dgx-spark", "mi300x")] == ["cpu", "metal", "cuda", "cuda",
                                                                                  "rocm"]


def test_a_stand_in_runtime_takes_no_cuda_band(hw: Path) -> None:
    """review18 D7: a GPU on the CUDA stand-in (a hardware file's Acme or Intel card) is not run by ggml-cuda
    (llama.cpp reaches Intel GPUs through SYCL or Vulkan: ggml/src/ggml-sycl, ggml-vulkan), so no CUDA row speaks for
    it: its backend is 'other' and its prefill range is not the 'llama.cpp on CUDA' band (the NVIDIA card of the same
    file keeps it)."""
    from llmsizer.catalog.hardware import load_catalog
    from llmsizer.estimate.device import llamacpp_backend
    from llmsizer.estimate.ranges import llamacpp_band

    cat = load_catalog([hw])
    assert [llamacpp_backend(cat.device(d)) for d in ("acme-x1", "no-vendor", "green-x1", "red-x1")] == [
        "other", "other", "cuda", "rocm"]
    band, why = llamacpp_band("prefill throughput", "other")
    assert "CUDA" not in why.split(":")[-1] and "other backends" in why
    from llmsizer.estimate.fit import fit

    def band_of(device: str) -> object:
        speed = fit("llama-3.1-8b", device, engine="llamacpp", weights="gguf:q4_k_m", hardware_files=[hw]).speed
        assert speed is not None
        return next(a.value for a in speed.assumptions if a.name == "prefill_range_band")

    assert {d: band_of(d) for d in ("acme-x1", "green-x1")} == {"acme-x1": "llama.cpp",
                                                               "green-x1": "llama.cpp on CUDA"}
