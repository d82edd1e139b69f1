"""`--device NAME` means one thing in `infer`, `fit` and `train`: a device or instance from the hardware catalog
(`cpu` and `gpu`: a device known only by its kind, its memory from --memory). The three commands size the same
device: the same placement (cpu: every tensor in RAM, no CUDA context), the same memory budget (the catalog's by
`fit`'s rule when --memory is not given) and, for the same workload and engine, the same bytes. Without a known
memory `infer` and `train` answer without a verdict and `fit` (whose answer is the verdict) refuses with one line.
The web API answers the same (its body is the CLI's --json, tested in tests/web/api).

Before: `infer --device` took only gpu/cpu (a device type), `fit`/`train --device` a catalog name (cpu: a generic
host); `infer --device rtx-4090` was refused and `train --device cpu` without --memory refused while `infer
--device cpu` answered.
"""

from __future__ import annotations

import pytest
from cli_run import answer, run, totals

MODEL = "llama-3.2-1b"


def names(est: dict) -> set[str]:
    return {item["name"] for item in est["items"]}


@pytest.mark.parametrize("device, memory", [("cpu", "16GiB"), ("gpu", "8GiB"), ("rtx-4090", None),
                                            ("apple-m3-max-36gb", None), ("aws-m7i.4xlarge", None)])
def test_infer_and_fit_size_the_same_device(device, memory, capsys):
    mem = ["--memory", memory] if memory else []
    _, inf = answer(["infer", MODEL, "--device", device, *mem, "--engine", "transformers"], capsys)
    _, fit = answer(["fit", MODEL, "--device", device, *mem, "--engine", "transformers"], capsys)
    assert totals(inf) == totals(fit["memory"])
    assert names(inf) == names(fit["memory"])
    assert inf["details"]["memory_budget"] == fit["budget_per_device"]
    assert inf["details"]["fits"] == fit["fits"]
    on_cpu = device in ("cpu", "aws-m7i.4xlarge")
    # the CUDA context on a CUDA GPU only: a CPU has none, an Apple chip runs Metal (estimate/allocator.py
    # device_context)
    assert ("cuda_context" in names(inf)) is (not on_cpu and not device.startswith("apple-"))
    assert set(totals(inf)) == ({"host"} if on_cpu else {"device", "host"})
    if device not in ("cpu", "gpu"):  # a named device: which one, and where its memory came from
        assumed = {a["name"]: a for a in inf["assumptions"]}
        assert assumed["device"]["value"] == fit["device"]
        assert assumed["device_memory"]["value"] == {a["name"]: a for a in fit["assumptions"]}["device_memory"]["value"]


@pytest.mark.parametrize("device, memory", [("cpu", "256GiB"), ("gpu", "80GiB"), ("h100-sxm", None)])
def test_train_and_fit_train_size_the_same_device(device, memory, capsys):
    mem = ["--memory", memory] if memory else []
    _, tr = answer(["train", MODEL, "--device", device, *mem, "--method", "lora"], capsys)
    _, fit = answer(["fit", MODEL, "--device", device, *mem, "--train", "--method", "lora"], capsys)
    assert totals(tr) == totals(fit["memory"])
    assert tr["details"]["fits"] == fit["fits"]
    assert ("cuda_context" in names(tr)) is (device != "cpu")


def test_inference_and_training_on_cpu_both_keep_every_tensor_off_a_gpu(capsys):
    _, inf = answer(["infer", MODEL, "--device", "cpu", "--memory", "64GiB"], capsys)
    _, tr = answer(["train", MODEL, "--device", "cpu", "--memory", "64GiB", "--method", "lora"], capsys)
    assert "cuda_context" not in names(inf) | names(tr)
    assert {a["name"]: a["value"] for a in tr["assumptions"]}["device"] == "cpu"


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_without_a_known_memory_infer_and_train_answer_and_fit_refuses_in_one_line(device, capsys):
    code, inf = answer(["infer", MODEL, "--device", device], capsys)
    assert code == 0 and "fits" not in inf["details"]
    code, tr = answer(["train", MODEL, "--device", device, "--method", "lora"], capsys)
    assert code == 0 and "fits" not in tr["details"]
    assert ("cuda_context" in names(inf)) is ("cuda_context" in names(tr)) is (device == "gpu")
    for cmd in (["fit", MODEL, "--device", device], ["fit", MODEL, "--device", device, "--train"]):
        code, out, err = run(cmd, capsys)
        assert code == 2 and out == ""
        assert err.strip().splitlines() == [f"llmsizer: error: {device} has no sourced memory size; give one with "
                                            f"--memory (e.g. {'64GiB' if len(cmd) == 4 else '80GiB'}; memory= in "
                                            "Python, resources.memory in a request file)"]


@pytest.mark.parametrize("cmd", ["infer", "fit", "train"])
def test_an_unknown_device_is_the_same_one_line_in_every_command(cmd, capsys):
    code, out, err = run([cmd, MODEL, "--device", "h100x"], capsys)
    assert code == 2 and out == ""
    assert err.strip().splitlines() == ["llmsizer: error: unknown hardware 'h100x'; closest: h100-sxm, h200, "
                                        "h100-nvl, gh200, h100-pcie (list them with `llmsizer hardware list`)"]


@pytest.mark.parametrize(("device", "first"), [("a40-48gb", "a40"), ("l40s-48gb", "l40s"), ("A40 48 GB", "a40"),
                                             ("h100-96g", "h100-sxm"),  # the alias h100 names h100-sxm
                                             ("rtx-5060-ti-12gb", "rtx-5060-ti-16gb")])  # alias rtx-5060-ti
def test_a_catalog_name_with_its_memory_said_is_offered_first(device, first, capsys):
    """probe27 D3: `--device a40-48gb` offered a100-sxm-80gb, a100-sxm-40gb, apple-m4-pro-48gb, ... (difflib ratio)
    and no a40, while l40s-48gb found l40s. A name that is a catalog id or alias followed by a memory size is
    offered that entry first (suggest.named_then_memory; the same rule for every did-you-mean)."""
    code, out, err = run(["fit", MODEL, "--device", device], capsys)
    assert code == 2 and out == ""
    assert f"unknown hardware {device!r}; closest: {first}, " in err


def test_infer_on_an_instance_of_several_devices_says_how_to_ask(capsys):
    """infer sizes one device (a replica over several with --tp); an instance of 8 GPUs is fit's question."""
    code, out, err = run(["infer", MODEL, "--device", "aws-p5.48xlarge"], capsys)
    assert code == 2 and out == ""
    assert err.strip().splitlines() == [
        "llmsizer: error: aws-p5.48xlarge is an instance of 8 x h100-sxm; infer sizes one device: name it (--device "
        "h100-sxm, with --tp for a replica over several) or use `fit --device aws-p5.48xlarge`, which places the "
        "model over all 8"]
