"""The precision a GPU without BF16 tensor cores trains in (estimate/device.py ``with_device_precision``).

Truth: NVIDIA's BF16 tensor cores start at compute capability 8.0 (the catalog's sourced capability of each GPU);
the catalog's missing BF16 rate is not the signal (L40, A10G, RTX 3090/4090/A6000 list only an FP16 rate and run
bf16 natively). torch accepts bf16 below 8.0 (``torch.cuda.is_bf16_supported`` counts emulation), so a bf16
precision given there is a warning, not a refusal. One rule, read by train (CLI and ``--json``), fit --train
(``fit_training``), recommend --train and plan (both through ``fit_training`` / ``training_on_device``),
``estimate_training(device=)`` and the duration.
"""

from __future__ import annotations

import pytest

from cli_capture import run_json
from llmsizer import estimate_training, fit_training
from llmsizer.catalog.hardware import load_catalog
from llmsizer.estimate.device import bf16_tensor_cores

MODEL = "llama-3.2-1b"
NO_BF16 = ("t4", "v100-sxm2-16gb", "v100-sxm2-32gb", "v100-pcie-16gb")


def _precision(assumptions: list) -> dict:
    return next(a if isinstance(a, dict) else a.to_dict() for a in assumptions
                if (a["name"] if isinstance(a, dict) else a.name) == "precision")


def test_the_rule_reads_compute_capability_not_the_listed_rates() -> None:
    cat = load_catalog()
    for dev in cat.devices.values() if isinstance(cat.devices, dict) else cat.devices:
        if dev.kind != "gpu" or dev.vendor != "NVIDIA" or dev.capability is None:
            continue
        assert bf16_tensor_cores(dev) == (dev.capability >= 80), dev.id
    ids = {d.id for d in (cat.devices.values() if isinstance(cat.devices, dict) else cat.devices)
           if d.kind == "gpu" and not bf16_tensor_cores(d)}
    assert set(NO_BF16) <= ids
    assert not ids & {"l40", "a10g", "rtx-4090", "rtx-3090", "rtx-a6000", "h100-sxm", "mi250x"}


@pytest.mark.parametrize("device", ["t4", "v100-sxm2-16gb"])
def test_cli_defaults_to_fp16_mixed_and_warns_on_bf16(device: str) -> None:
    code, data = run_json("train", MODEL, "--method", "qlora", "--device", device, "--tokens", "10M")
    p = _precision(data["assumptions"])
    assert p["value"] == "fp16-mixed" and p["default"] is True and "BF16 tensor cores" in p["why"]
    assert not any("without BF16 tensor cores" in w for w in data["warnings"])
    # the switched default is said as a warning (probe6 defect 12), as serving says vLLM runs bf16 as fp16 there
    cc = load_catalog().device(device).capability
    assert any(w.startswith("no BF16 tensor cores on this GPU (compute capability "
                            f"{cc // 10}.{cc % 10}, below 8.0): trained as fp16-mixed") for w in data["warnings"])
    code, data = run_json("train", MODEL, "--method", "qlora", "--device", device, "--tokens", "10M",
                          "--precision", "bf16-mixed")
    assert _precision(data["assumptions"])["value"] == "bf16-mixed"
    assert any("without BF16 tensor cores" in w for w in data["warnings"])


def test_ampere_and_later_keep_bf16_without_a_warning() -> None:
    code, data = run_json("train", MODEL, "--method", "qlora", "--device", "l40", "--tokens", "10M")
    assert _precision(data["assumptions"])["value"] == "bf16-mixed"
    assert not any("BF16 tensor cores" in w for w in data["warnings"])


def test_python_api_fit_training_and_estimate_training() -> None:
    r = fit_training(MODEL, "t4", method="lora", tokens=1e7)
    assert r.estimate is not None
    assert _precision(r.estimate.assumptions)["value"] == "fp16-mixed"
    assert r.duration is not None
    given = fit_training(MODEL, "t4", method="lora", precision="bf16-mixed")
    assert given.estimate is not None and any("without BF16 tensor cores" in w for w in given.estimate.warnings)
    est = estimate_training(MODEL, device="v100-sxm2-32gb", method="lora")
    assert _precision(est.assumptions)["value"] == "fp16-mixed"
    assert _precision(estimate_training(MODEL, method="lora").assumptions)["value"] == "bf16-mixed"
