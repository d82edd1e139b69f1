"""Training settings a device cannot run are refused in one line (exit 2), not sized as if they ran.

- float8 linears call torch._scaled_mm, whose GPU gate is torch aten/src/ATen/native/cuda/ScaledBlas.cpp @2bec3bdf
  lines 90-111 (``_scaled_mm_allowed_device``): CUDA compute capability major >= 9 or exactly 8.9; on ROCm gfx942
  (MI300, CDNA3), gfx950 (MI350, CDNA4), gfx1200/1201 (RDNA4). An Apple GPU has no FP8 units, and torch's MPS
  _scaled_mm takes Float8_e4m3fn operands only (torchao's recipe casts gradients to e5m2). A TPU has no path either:
  torch_xla lowers no _scaled_mm (pytorch/xla codegen/xla_native_functions.yaml @0192ff75: mm, addmm, bmm, no
  _scaled_mm).
- CPU offload (``offload``, ``activation_offload``) moves tensors from a GPU's own memory to host RAM; on an Apple
  chip both are one unified memory, so nothing leaves the budget (and DeepSpeed's MPS accelerator builds no op:
  accelerator/mps_accelerator.py @0510cb40 ``get_op_builder`` answers NotImplementedBuilder).
The expected verdicts are the torch rule applied to the catalog's sourced compute capabilities, not llmsizer output.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from cli_capture import run_cli
from llmsizer import estimate_training
from llmsizer.catalog.hardware import load_catalog
from llmsizer.errors import DeviceCannotRunError
from llmsizer.estimate.device import float8_refusal


def one_line_error(r: subprocess.CompletedProcess) -> str:
    assert r.returncode == 2, (r.returncode, r.stdout[-300:], r.stderr)
    assert r.stdout == "" and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr
    return r.stderr


def _torch_scaled_mm_allowed(major: int, minor: int) -> bool:
    """ScaledBlas.cpp's CUDA branch, written from its condition."""
    return major >= 9 or (major == 8 and minor == 9)


def test_float8_refused_exactly_where_torchs_scaled_mm_gate_refuses_a_cuda_gpu():
    cat = load_catalog()
    seen = {True: 0, False: 0}
    for dev in cat.devices.values():
        if dev.kind != "gpu" or dev.vendor.lower() != "nvidia" or dev.compute_capability is None:
            continue
        major, minor = (int(x) for x in str(dev.compute_capability.base).split("."))
        allowed = _torch_scaled_mm_allowed(major, minor)
        seen[allowed] += 1
        assert (float8_refusal(dev) is None) == allowed, (dev.id, dev.compute_capability.base)
    assert seen[True] and seen[False]  # both sides of the gate are in the catalog


@pytest.mark.parametrize(("device", "runs"), [("mi300x", True), ("mi355x", True), ("mi250x", False)])
def test_float8_on_rocm_follows_the_gfx_list(device: str, runs: bool):
    assert (float8_refusal(load_catalog().devices[device]) is None) == runs


@pytest.mark.parametrize(("command", "device", "says"), [
    ("train", "a100-sxm-80gb", "compute capability 8.0"),
    ("fit", "a100-sxm-80gb", "compute capability 8.0"),
    ("train", "mi250x", "cdna2"),
    # no BF16 tensor cores either: the fp16-mixed default (estimate/device.py with_device_precision) does not apply
    # to float8, which needs bf16 compute; it was "float8 applies to full training with bf16 compute"
    ("train", "t4", "compute capability 7.5"),
    ("fit", "v100-sxm2-32gb", "compute capability 7.0"),
    ("train", "apple-m3-max-128gb", "an Apple GPU lacks"),
    ("fit", "apple-m3-max-128gb", "an Apple GPU lacks"),
    ("train", "tpu-v5e", "torch_xla does not lower"),
    ("fit", "tpu-v5p", "torch_xla does not lower"),
])
def test_float8_refused_in_one_line_naming_the_flag(command: str, device: str, says: str):
    argv = [command, "llama-3.2-1b", "--float8", "--device", device, "--tokens", "1M"]
    if command == "fit":
        argv.append("--train")
    err = one_line_error(run_cli(*argv))
    assert "--float8" in err and says in err and "torch._scaled_mm" in err


@pytest.mark.parametrize("command", ["train", "fit"])
@pytest.mark.parametrize("device", ["gaudi2", "gaudi3"])
def test_float8_refused_on_gaudi_naming_intels_stack(command: str, device: str):
    # was sized as torchao's Float8Linear (exit 0). FP8 training on a Gaudi is Intel's own TransformerEngine:
    # optimum-habana optimum/habana/accelerate/utils/transformer_engine.py @1d8504c6 line 34 imports
    # habana_frameworks.torch.hpex.experimental.transformer_engine; neither recipe llmsizer sizes runs there
    argv = [command, "llama-3.2-1b", "--float8", "--device", device, "--tokens", "1M"]
    if command == "fit":
        argv.append("--train")
    err = one_line_error(run_cli(*argv))
    assert "--float8" in err and "Intel Gaudi's TransformerEngine" in err and "habana_frameworks" in err, err
    assert "is not modelled" in err, err  # a Gaudi runs FP8 training: not modelled, not "cannot run"


def test_float8_on_gaudi_is_not_modelled_not_unrunnable(tmp_path):
    # Gaudi 2/3 run FP8 training (Intel's TransformerEngine): the category is NotModelledError, not
    # DeviceCannotRunError, and recommend rejects the option as "not modelled"
    from llmsizer.errors import NotModelledError
    from llmsizer.recommend import recommend_training
    gaudi = load_catalog().devices["gaudi3"]
    assert float8_refusal(gaudi) is None
    with pytest.raises(NotModelledError) as e:
        estimate_training("llama-3.2-1b", device="gaudi3", float8=True)
    assert not isinstance(e.value, DeviceCannotRunError) and e.value.field == "float8"
    hw = tmp_path / "hw.json"
    hw.write_text(json.dumps({"devices": [{"id": "gaudi3", "owned": True}]}))
    rec = recommend_training("llama-3.2-1b", tokens=1e6, training_fields={"float8": True}, hardware_files=[str(hw)])
    why = next(o.reasons[0] for o in rec.rejected if o.target == "gaudi3")
    assert "is not modelled" in why and "cannot" not in why, why


def test_float8_runs_on_fp8_gpus():
    for device in ("l40s", "h100-sxm", "mi300x"):
        r = run_cli("train", "llama-3.2-1b", "--float8", "--device", device, "--tokens", "1M")
        assert r.returncode == 0 and "fits: yes" in r.stdout, (device, r.stderr)


def test_recommend_float8_searches_in_bf16_and_rejects_gpus_without_fp8():
    # was exit 2 "float8 applies to full training with bf16 compute": a T4/V100 candidate got the fp16-mixed default
    r = run_cli("recommend", "llama-3.2-1b", "--train", "--float8", "--method", "full", "--tokens", "1B", "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    reasons = {x["device"]: " ".join(x["reasons"]) for x in data["rejected"]}
    for device in ("t4", "v100-sxm2-32gb", "a100-sxm-80gb", "tpu-v5e"):
        assert "torch._scaled_mm" in reasons[device], (device, reasons.get(device))
    # was: tpu-v5e (ct5lp-hightpu-8t) met the constraints, though torch_xla has no _scaled_mm
    assert not any(o["device_kind"] == "tpu" for o in data["options"])
    cat = load_catalog().devices
    assert data["options"] and all(float8_refusal(cat[o["device"]]) is None for o in data["options"])


def test_float8_refused_from_python_with_its_field():
    with pytest.raises(DeviceCannotRunError) as e:
        estimate_training("llama-3.2-1b", device="a100-sxm-80gb", float8=True)
    assert e.value.field == "float8"


@pytest.mark.parametrize(("flags", "named"), [
    (["--offload", "optimizer", "--zero", "2"], "--offload"),
    (["--offload", "params", "--zero", "3"], "--offload"),
    (["--activation-offload"], "--activation-offload"),
])
def test_cpu_offload_refused_on_apple_unified_memory(flags: list[str], named: str):
    # was: "fits: yes (needs 29.76 GiB ... of a 32.40 GiB budget)" with 99.54 GiB "in host RAM" on a 48 GB laptop
    for command in ("train", "fit"):
        argv = [command, "qwen2.5-7b", "--device", "apple-m3-max-48gb", *flags]
        if command == "fit":
            argv.append("--train")
        err = one_line_error(run_cli(*argv))
        assert err.startswith(f"llmsizer: error: {named}") and "Apple chip" in err and "unified" in err, err


def test_offload_on_apple_refused_from_python_with_its_field():
    with pytest.raises(DeviceCannotRunError) as e:
        estimate_training("qwen2.5-7b", device="apple-m3-max-48gb", offload="optimizer", zero=2)
    assert e.value.field == "offload"


# DeepSpeed's MPS accelerator (accelerator/mps_accelerator.py @edaa7221): _communication_backend_name None (line 22),
# is_bf16_supported/is_fp16_supported False and supported_dtypes [torch.float] (lines 149-156), get_op_builder
# NotImplementedBuilder for every op (lines 242-245)
@pytest.mark.parametrize(("command", "flags"), [
    ("train", ["--zero", "2", "--gpus", "2"]),
    ("train", ["--zero", "1"]),
    ("fit", ["--zero", "3", "--count", "2"]),
])
def test_deepspeed_zero_refused_on_apple(command: str, flags: list[str]):
    # was: fits: yes (15.49 GiB per device at --zero 2 --gpus 2), a run DeepSpeed's MPS accelerator cannot start
    argv = [command, "llama-3.2-1b", "--device", "apple-m3-max-128gb", *flags]
    if command == "fit":
        argv.append("--train")
    err = one_line_error(run_cli(*argv))
    assert err.startswith("llmsizer: error: --zero") and "mps_accelerator.py" in err and "--zero 0" in err, err


def test_apple_multi_device_fit_chooses_no_zero_stage():
    # the least-sharded-stage search would have tried ZeRO 1-3 there; it keeps the stage stated (0)
    def zero_of(device: str) -> int:
        fit = run_cli("fit", "llama-3.1-70b", "--train", "--device", device, "--count", "4", "--json")
        assert fit.returncode in (0, 1), fit.stderr
        return next(a["value"] for a in json.loads(fit.stdout)["memory"]["assumptions"] if a["name"] == "zero")
    assert zero_of("apple-m3-max-128gb") == 0
    assert zero_of("h100-sxm") > 0  # the search itself runs on a CUDA GPU


def test_fsdp_on_apple_is_warned():
    est = estimate_training("llama-3.2-1b", device="apple-m3-max-128gb", fsdp="full", gpus=2)
    assert any("fsdp over several Apple GPUs" in w and "Gloo" in w for w in est.warnings), est.warnings
    # a world of one runs no collective (the Gloo limit cannot bite): no warning
    one = estimate_training("llama-3.2-1b", device="apple-m3-max-128gb", fsdp="full", gpus=1)
    assert not any("Gloo" in w for w in one.warnings), one.warnings
    # DDP over two Apple GPUs all-reduces its MPS gradients through the same Gloo group: the same warning
    ddp = estimate_training("llama-3.2-1b", device="apple-m3-max-128gb", gpus=2)
    assert any("data parallel over several Apple GPUs" in w and "Gloo" in w for w in ddp.warnings), ddp.warnings
    cuda = estimate_training("llama-3.2-1b", device="h100-sxm", fsdp="full", gpus=2)
    assert not any("Apple" in w for w in cuda.warnings)


def test_qlora_on_apple_is_sized():
    # bitsandbytes >= 0.50.0 registers its 4-bit ops for MPS (bitsandbytes/backends/mps/ops.py @95f9af30 lines 131,
    # 167, 241: quantize_4bit, dequantize_4bit, gemm_4bit), so a QLoRA base quantizes and runs there
    r = run_cli("train", "llama-3.2-1b", "--method", "qlora", "--device", "apple-m3-max-128gb")
    assert r.returncode == 0 and "fits: yes" in r.stdout, r.stderr


@pytest.mark.parametrize(("recipe", "says", "not_says"), [
    ("torchao", "e5m2", None),
    # torchao config.py from_recipe_name ROWWISE / ROWWISE_WITH_GW_HP: e4m3 for input, weight and grad_output
    ("torchao-rowwise", "e4m3", "e5m2"),
    ("torchao-rowwise-gw-hp", "e4m3", "e5m2"),
])
def test_apple_float8_refusal_names_the_recipes_dtypes(recipe: str, says: str, not_says: str | None):
    err = one_line_error(run_cli("train", "llama-3.2-1b", "--float8", "--float8-recipe", recipe, "--device",
                                 "apple-m3-max-128gb", "--tokens", "1M"))
    assert "an Apple GPU lacks" in err and says in err
    assert not_says is None or not_says not in err
