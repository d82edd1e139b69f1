"""One answer for one question: a serving workload on one named device gets the same estimate from `infer --device D`,
`fit --device D` (its ``memory`` object) and ``estimate_inference(..., device=D)``: the same breakdown and totals, the
same assumptions (the device named first, where its memory came from, the engine's default for it) and the same
warnings. Before, `fit`'s estimate was sized on the device's kind alone and named neither the device nor its memory,
its engine line was the profile's as if the engine had been given (estimate/device.py ``named_device_notes``, the one
home `infer --device` and `fit --train` already went through), and a T4's "vLLM runs bf16 as fp16" was fit's own
warning only, not its estimate's. The device each names is the catalog's own entry
(``load_catalog().find``), not a value copied from our output."""

from __future__ import annotations

from typing import Any

import pytest

from cli_capture import run_json
from llmsizer.catalog.hardware import Instance, load_catalog
from llmsizer.estimate.fit import fit
from llmsizer.estimate.inference import estimate_inference

# (model, device or instance, extra flags, the same as Python keywords): a data-centre GPU (vLLM by default), a
# consumer card (llama.cpp), Apple silicon (the Metal working set), a CPU instance (its RAM), a GPU known only by its
# kind, an engine given, and a memory given above what the device holds (the warning the estimate says first)
CASES: list[tuple[str, str, tuple[str, ...], dict[str, Any]]] = [
    ("llama-3.1-8b", "h100-sxm", ("--context", "8k", "--concurrency", "4"), {"context": 8192, "concurrency": 4}),
    ("llama-3.1-8b", "rtx-4090", (), {}),
    ("llama-3.1-8b", "t4", (), {}),  # vLLM runs bf16 as fp16 below compute capability 8.0: the device's warning
    ("qwen2.5-7b", "apple-m2-ultra-64gb", (), {}),
    ("llama-3.1-8b", "aws-m7i.4xlarge", (), {}),
    ("llama-3.1-8b", "gpu", ("--memory", "40GiB"), {"memory": 40 * 2**30}),
    ("llama-3.1-8b", "h100-sxm", ("--engine", "sglang"), {"engine": "sglang"}),
    ("llama-3.1-8b", "h100-sxm", ("--memory", "200GiB"), {"memory": 200 * 2**30}),
]

COMPARED = ("items", "totals", "assumptions", "warnings")


@pytest.mark.parametrize(("model", "device", "flags", "kwargs"), CASES, ids=[f"{c[1]}{''.join(c[2])}" for c in CASES])
def test_fit_infer_and_estimate_inference_give_one_estimate_on_a_named_device(
        model: str, device: str, flags: tuple[str, ...], kwargs: dict[str, Any]) -> None:
    code_i, infer = run_json("infer", model, "--device", device, *flags)
    code_f, fitted = run_json("fit", model, "--device", device, *flags)
    assert code_i == code_f and code_i in (0, 1)
    py = estimate_inference(model, device=device, **kwargs).to_dict()
    py_fit = fit(model, device, speed=False, **kwargs).to_dict()
    for key in COMPARED:
        assert fitted["memory"][key] == infer[key], key
        assert py[key] == infer[key], key
        assert py_fit["memory"][key] == infer[key], key
    named = [a for a in infer["assumptions"] if a["name"] == "device"]
    if device == "gpu":  # a device known only by its kind names none
        assert named == []
    else:  # the catalog's entry (an instance: its device), named first
        hw = load_catalog().find(device)
        dev = hw.device if isinstance(hw, Instance) else hw
        assert infer["assumptions"][0] == {"name": "device", "value": dev.id, "default": False, "why": dev.name}
    engine = next(a for a in infer["assumptions"] if a["name"] == "engine")
    assert engine["default"] is ("engine" not in kwargs)  # the engine's default for the device, unless given
