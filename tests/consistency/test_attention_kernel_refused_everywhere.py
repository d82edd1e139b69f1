"""An attention kernel the chosen GPU cannot run is refused by every answer for that workload, not only by the
duration (review: `--attention flash` on a V100 exited 2 on `train --device --tokens` but `train --device`, `fit
--train`, the plan of a request without tokens and the Python API said "fits"). One rule
(``estimate/efficiency.py`` ``attention_kernel_refusal`` over ``formulas/sdpa_dispatch.py``), one message: the
memory-only estimate, the duration, ``fit --train``, the reverse questions, a request file (``plan``, ``request
check``) and the Python API refuse the same input with the same line (the CLI naming the flag, Python the field, a
request file the settings key), exit 2; ``recommend --train`` rejects the GPU with that line as its reason.

Truth is the frameworks' own checks, each floor read from its source (formulas/sdpa_dispatch.py cites file and line):
flash-attn's ``mha_fwd`` ``TORCH_CHECK(cc_major >= 8, "FlashAttention only supports Ampere GPUs or newer.")`` and its
fp16/bf16 check (csrc/flash_attn/flash_api.cpp @0251105a lines 392-397); torch's cuDNN SDPA backend forced below
sm80 (sdp_utils.cpp check_cudnn_hardware_support); torch inductor's ``GPUTooOldForTriton`` below capability 7.0 for
flex (read in the installed torch 2.13.0 below). Each GPU's capability is NVIDIA's table (catalog rows; a Tesla P100
is 6.0, NVIDIA "CUDA GPU Compute Capability")."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import pytest

from cli_capture import run
from llmsizer import estimate_training, fit_training
from llmsizer.catalog.hardware import builtin_catalog, load_catalog
from llmsizer.errors import DeviceCannotRunError
from llmsizer.estimate.duration import training_duration_for
from llmsizer.estimate.training import max_micro_batch
from llmsizer.models import load_model
from request_error_lines import keyed

MODEL = "llama-3.2-1b"
# A Tesla P100 (Pascal): compute capability 6.0 (NVIDIA's CUDA GPU table), 16 GiB HBM2, 732 GB/s, 21.2 TFLOP/s
# FP16 (NVIDIA Tesla P100 datasheet): below Triton's 7.0, so torch cannot compile FlexAttention for it.
P100 = {"devices": [{"id": "my-p100", "name": "My Tesla P100", "kind": "gpu", "vendor": "NVIDIA",
                     "architecture": "pascal", "compute_capability": 6.0, "form_factor": "datacenter",
                     "memory": "16GiB", "memory_bandwidth": "732 GB/s", "flops": {"fp16": "21.2 TFLOP/s"}}]}
# (device, CLI flags, workload fields, the framework's words the message must carry, field refused)
CASES = [
    ("v100-sxm2-32gb", ("--attention", "flash"), {"attention": "flash"},
     "FlashAttention only supports Ampere GPUs or newer.", "attention"),
    ("t4", ("--attention", "flash"), {"attention": "flash"},
     "FlashAttention only supports Ampere GPUs or newer.", "attention"),
    ("h100-sxm", ("--attention", "flash", "--precision", "fp32"), {"attention": "flash", "precision": "fp32"},
     "takes fp16/bf16 only", "attention"),
    ("v100-sxm2-32gb", ("--attention-kernel", "cudnn"), {"attention_kernel": "cudnn"},
     "check_cudnn_hardware_support", "attention_kernel"),
    ("my-p100", ("--attention", "flex"), {"attention": "flex"}, "GPUTooOldForTriton", "attention"),
    # llm-foundry's profile runs its Triton FlashAttention (attention flash, kernel triton-flash), which asserts
    # fp16/bf16 q (mosaicml/llm-foundry @b2a43a147 llmfoundry/models/layers/flash_attn_triton.py line 595): fp32
    # refused on an H100 as on any GPU, on the attention (the profile's kernel is not the user's)
    ("h100-sxm", ("--framework", "llm-foundry", "--precision", "fp32"), {"framework": "llm-foundry", "precision": "fp32"},
     "'Only support fp16 and bf16'", "attention"),
    # the user's own kernel under the profile: refused by its floor, not answered as the profile's triton-flash
    ("v100-sxm2-32gb", ("--framework", "llm-foundry", "--attention-kernel", "flash-attn-2"),
     {"framework": "llm-foundry", "attention_kernel": "flash-attn-2"},
     "FlashAttention only supports Ampere GPUs or newer.", "attention_kernel"),
]
IDS = ["flash-v100", "flash-t4", "flash-fp32-h100", "cudnn-v100", "flex-p100", "foundry-fp32-h100",
       "foundry-fa2-v100"]
FLAG = {"attention": "--attention", "attention_kernel": "--attention-kernel"}


@pytest.fixture(scope="module")
def hw(tmp_path_factory: pytest.TempPathFactory) -> Path:
    f = tmp_path_factory.mktemp("hw") / "p100.json"
    f.write_text(json.dumps(P100))
    return f


def _device(name: str, hw: Path):
    return (load_catalog([hw]) if name.startswith("my-") else builtin_catalog()).devices[name]


def _python_error(device: str, fields: dict, hw: Path) -> DeviceCannotRunError:
    """The Python API's refusal (the memory-only estimate on the named device): the message every surface says."""
    files = [hw] if device.startswith("my-") else []
    with pytest.raises(DeviceCannotRunError) as e:
        fit_training(MODEL, device, method="lora", hardware_files=files, **fields)
    return e.value


def _one_line(*argv: str) -> str:
    code, out, err = run(*argv)
    lines = err.strip().splitlines()
    assert code == 2 and out == "" and len(lines) == 1 and "Traceback" not in err, (argv, code, err[-400:])
    return lines[0].removeprefix("llmsizer: error: ")


def test_the_floors_are_the_frameworks() -> None:
    """The floors the refusals quote, read where they can be: torch 2.13.0's Triton check (capability major >= 7,
    GPUTooOldForTriton) in the installed torch, and NVIDIA's capabilities of the catalog GPUs the cases use."""
    iface = __import__("torch._dynamo.device_interface", fromlist=["CudaInterface"]).CudaInterface
    assert ".major >= 7" in inspect.getsource(iface.is_triton_capable)
    assert "GPUTooOldForTriton" in inspect.getsource(iface.raise_if_triton_unavailable)
    exc = inspect.getsource(__import__("torch._inductor.exc", fromlist=["GPUTooOldForTriton"]).GPUTooOldForTriton)
    assert "CUDA Capability >= 7.0" in exc
    devs = builtin_catalog().devices
    assert (devs["v100-sxm2-32gb"].capability, devs["t4"].capability, devs["h100-sxm"].capability) == (70, 75, 90)


@pytest.mark.parametrize(("device", "flags", "fields", "words", "field"), CASES, ids=IDS)
def test_every_answer_refuses_it_with_one_message(device: str, flags: tuple, fields: dict, words: str, field: str,
                                                 hw: Path, tmp_path: Path) -> None:
    err = _python_error(device, fields, hw)
    message = str(err)
    assert err.field == field and words in message and message.startswith(f"{field} ")
    cli_line = message.replace(f"{field} ", f"{FLAG[field]} ", 1)  # the CLI names the flag, the rest is the same
    files = ("--hardware-file", str(hw)) if device.startswith("my-") else ()
    base = ("--method", "lora", "--device", device, *files, *flags)
    # the CLI: memory only, with a duration, fit --train (with and without one), the reverse question
    for argv in (("train", MODEL, *base), ("train", MODEL, *base, "--tokens", "1B"),
                 ("fit", MODEL, "--train", *base), ("fit", MODEL, "--train", *base, "--tokens", "1B"),
                 ("train", MODEL, *base, "--max-batch")):
        assert _one_line(*argv) == cli_line, argv
    # the Python API: the memory estimate on the device, the duration, the reverse question
    hw_files = [hw] if device.startswith("my-") else []
    spec = load_model(MODEL)
    with pytest.raises(DeviceCannotRunError) as e:
        estimate_training(spec, method="lora", device=_device(device, hw), **fields)
    assert str(e.value) == message
    with pytest.raises(DeviceCannotRunError) as e:
        training_duration_for(spec, _device(device, hw), 1, 1e9, dict(method="lora", **fields))
    assert str(e.value) == message
    with pytest.raises(DeviceCannotRunError) as e:
        max_micro_batch(spec, method="lora", device=_device(device, hw), **fields)
    assert str(e.value) == message
    with pytest.raises(DeviceCannotRunError) as e:
        fit_training(spec, device, method="lora", hardware_files=hw_files, tokens=1e9, **fields)
    assert str(e.value) == message
    # a request file, with and without the tokens that time it: plan and request check, the settings key named
    settings = "".join(f"\n      {k}: {v}" for k, v in fields.items())
    for dataset in ("{tokens: 1M}", '{location: "/data"}'):
        req = tmp_path / "req.yaml"
        req.write_text(f"version: 1\njobs:\n  - name: tune\n    kind: training\n    model: {{name: {MODEL}}}\n"
                       f"    method: lora\n    settings:{settings}\n    dataset: {dataset}\n"
                       f"    resources: {{device: {device}, count: 1}}\n")
        for cmd in (("plan", str(req), "--json"), ("request", "check", str(req))):
            line = _one_line(*cmd, *files)
            # the settings key where the file states it (a profile's attention is in no key: the job is named)
            where = f"settings.{field}" if field in fields else "job 'tune' (training)"
            assert line.endswith(keyed(where, field, message)), (dataset, cmd, line)


@pytest.mark.parametrize(("device", "flags", "fields", "words", "field"), CASES[:2], ids=IDS[:2])
def test_recommend_rejects_the_gpu_with_the_same_reason(device: str, flags: tuple, fields: dict, words: str,
                                                        field: str, hw: Path) -> None:
    message = str(_python_error(device, fields, hw))
    code, out, _ = run("recommend", MODEL, "--train", "--method", "lora", *flags, "--tokens", "1B", "--json")
    assert code == 0
    data = json.loads(out)
    rejected = [o for o in data["rejected"] if o["device"] == device]
    assert rejected and all(o["reasons"] == [message] for o in rejected)
    assert all(o["device"] != device for o in data["options"])


def test_a_gpu_that_runs_the_kernel_is_not_refused(hw: Path) -> None:
    """The floors are floors: sm80 runs flash-attn and cuDNN's SDPA, sm70 runs flex (Triton's 7.0), in bf16/fp16."""
    for device, flags in (("a100-sxm-80gb", ("--attention", "flash")), ("a100-sxm-80gb", ("--attention-kernel",
                                                                                          "cudnn")),
                          ("v100-sxm2-32gb", ("--attention", "flex", "--precision", "fp16-mixed"))):
        for argv in (("train", MODEL, "--method", "lora", "--device", device, *flags),
                     ("fit", MODEL, "--train", "--method", "lora", "--device", device, *flags, "--tokens", "1B")):
            code, _, err = run(*argv)
            assert code in (0, 1), (argv, err[-300:])


def test_a_gpu_of_unknown_memory_refuses_it_too(tmp_path: Path) -> None:
    """A hardware file's GPU without a memory size: the plan has no budget and `train --device` refuses it as
    `fit --train` does (no sourced memory, exit 2), but the kernel its capability cannot run is refused first, with
    the same line."""
    f = tmp_path / "hw.json"
    f.write_text(json.dumps({"devices": [{k: v for k, v in P100["devices"][0].items()
                                          if k not in ("memory", "flops", "memory_bandwidth")}]}))
    dev = load_catalog([f]).devices["my-p100"]
    assert dev.memory_bytes is None and dev.capability == 60
    with pytest.raises(DeviceCannotRunError) as e:
        estimate_training(MODEL, method="lora", device=dev, attention="flex")
    # a workload built for the device, with the device beside it (train --device's path): the same refusal
    from llmsizer.estimate.device import device_fields
    from llmsizer.specs import TrainingWorkload
    w = TrainingWorkload(**device_fields(dev), method="lora", attention="flex")
    with pytest.raises(DeviceCannotRunError) as e2:
        estimate_training(load_model(MODEL), w, device=dev)
    assert str(e2.value) == str(e.value)
    assert _one_line("train", MODEL, "--method", "lora", "--device", "my-p100", "--hardware-file", str(f),
                     "--attention", "flex") == str(e.value).replace("attention ", "--attention ", 1)
    req = tmp_path / "req.yaml"
    req.write_text(f"version: 1\njobs:\n  - name: tune\n    kind: training\n    model: {{name: {MODEL}}}\n"
                   "    method: lora\n    settings:\n      attention: flex\n    dataset: {location: /data}\n"
                   "    resources: {device: my-p100, count: 1}\n")
    assert _one_line("plan", str(req), "--hardware-file", str(f)).endswith(keyed("settings.attention", "attention",
                                                                               str(e.value)))
    # without the flag the same GPU is refused for its unknown memory, as fit --train refuses it; with its memory
    # given it is sized (SDPA's dispatch always finds a backend: math last)
    assert _one_line("train", MODEL, "--method", "lora", "--device", "my-p100", "--hardware-file", str(f)) == \
        _one_line("fit", MODEL, "--train", "--method", "lora", "--device", "my-p100", "--hardware-file", str(f))
    assert run("train", MODEL, "--method", "lora", "--device", "my-p100", "--hardware-file", str(f),
               "--memory", "16GiB")[0] == 0


# --- a framework profile: the kernel checked is the kernel the estimate runs ---------------------------------------
# llm-foundry's profile sets attention 'flash' with llm-foundry's Triton kernel (catalog/data/frameworks.json), and
# that kernel has no capability check (flash_attn_triton.py @b2a43a147 _flash_attn_forward lines 587-597: shape, dtype
# and head-width asserts only); the flash-attn package's sm80 floor is not its floor. Review: four of six callers
# checked the raw settings, so `--attention flash` under the profile was refused on a V100 as flash-attn-2 while
# estimate_training answered it with triton-flash.
FOUNDRY = {"framework": "llm-foundry", "attention": "flash"}


def _kernel(est) -> str:
    return next(a.value for a in est.assumptions if a.name == "attention_kernel")


@pytest.mark.parametrize("device", ["v100-sxm2-32gb", "t4"])
def test_the_profiles_kernel_is_the_one_every_answer_checks(device: str) -> None:
    spec = load_model(MODEL)
    dev = builtin_catalog().devices[device]
    assert dev.capability < 80  # below flash-attn's floor: answered only if triton-flash is the kernel checked
    est = estimate_training(spec, method="lora", device=dev, **FOUNDRY)
    assert _kernel(est) == "triton-flash"
    r = fit_training(spec, device, method="lora", tokens=1e9, **FOUNDRY)
    assert r.estimate is not None and _kernel(r.estimate) == "triton-flash"
    assert max_micro_batch(spec, method="lora", device=dev, **FOUNDRY) >= 1
    flags = ("--method", "lora", "--framework", "llm-foundry", "--attention", "flash", "--device", device)
    for argv in (("train", MODEL, *flags), ("train", MODEL, *flags, "--tokens", "1B"),
                 ("fit", MODEL, "--train", *flags), ("fit", MODEL, "--train", *flags, "--tokens", "1B")):
        code, _, err = run(*argv)
        assert code in (0, 1), (argv, err[-400:])
    code, out, err = run("recommend", MODEL, "--train", "--method", "lora", "--framework", "llm-foundry",
                         "--attention", "flash", "--tokens", "1B", "--json")
    assert code == 0, err[-400:]
    data = json.loads(out)
    assert not any("cannot run" in r for o in data["rejected"] if o["device"] == device for r in o["reasons"])


def test_naming_the_profiles_own_kernel_is_not_refused() -> None:
    """`--attention-kernel triton-flash` under llm-foundry: the profile's attention 'flash' runs it (the user never
    said 'sdpa'); a given attention 'sdpa' with it is still the user's contradiction, refused in one line."""
    est = estimate_training(MODEL, framework="llm-foundry", attention_kernel="triton-flash")
    assert _kernel(est) == "triton-flash"
    assert next(a for a in est.assumptions if a.name == "attention").value == "flash"
    code, out, err = run("train", MODEL, "--framework", "llm-foundry", "--attention-kernel", "triton-flash", "--json")
    assert code == 0, err[-400:]
    line = _one_line("train", MODEL, "--framework", "llm-foundry", "--attention", "sdpa", "--attention-kernel",
                     "triton-flash")
    assert "--attention-kernel 'triton-flash' does not run --attention 'sdpa'" in line  # the CLI names its flags
    # the kernel named against the profile's attention: the line says the profile set it (new-user probe: it named
    # neither the flag nor the profile)
    line = _one_line("train", MODEL, "--framework", "llm-foundry", "--attention-kernel", "sdpa")
    assert "--attention-kernel 'sdpa' does not run --attention 'flash' (framework llm-foundry sets" in line


def test_triton_flash_refuses_heads_wider_than_128() -> None:
    """flash_attn_triton.py @b2a43a147 line 593: ``assert d <= 128``. Gemma 2's heads are 256 wide (Gemma Team 2024,
    arXiv 2408.00118 Table 1: "Head size 256" for 2B, 9B and 27B); llama-3.2-1b's 64 pass."""
    assert load_model("gemma-2-2b-it").head_dim == 256
    dev = builtin_catalog().devices["h100-sxm"]
    with pytest.raises(DeviceCannotRunError) as e:
        estimate_training("gemma-2-2b-it", method="lora", device=dev, framework="llm-foundry")
    message = str(e.value)
    assert e.value.field == "attention" and "'FlashAttention only support head dimensions up to 128'" in message
    assert "256" in message
    with pytest.raises(DeviceCannotRunError) as e2:
        fit_training("gemma-2-2b-it", "h100-sxm", method="lora", framework="llm-foundry")
    assert str(e2.value) == message
    assert _one_line("train", "gemma-2-2b-it", "--method", "lora", "--framework", "llm-foundry", "--device",
                     "h100-sxm") == message.replace("attention ", "--attention ", 1)
    # the profile's kernel on the same GPU with 64-wide heads in bf16 runs
    assert _kernel(estimate_training(MODEL, method="lora", device=dev, framework="llm-foundry")) == "triton-flash"

