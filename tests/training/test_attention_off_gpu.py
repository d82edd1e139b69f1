"""An attention kernel a CPU or an Apple GPU has no training step for is refused on every surface with one line
(exit 2; ``recommend --train`` rejects the device with it). Before, ``--attention flash``, llm-foundry's Triton kernel
and SDPA forced to mem-efficient or cuDNN were sized on a Xeon or an M4 Max as if they ran ("training memory ..."),
while FlexAttention was refused there. One rule: ``specs/training.py attention_off_gpu``, checked with the kernel
check (so after a framework profile has set the attention).

Truth: what torch 2.13.0+cpu does with each forced SDPA backend in a real forward and backward pass (below: flash
and math run, mem-efficient and cuDNN raise "No viable backend"), FlexAttention's backward on CPU tensors
(``_validate_device``), and transformers' own availability check for the flash-attn package (CUDA, MLU or MUSA
torch only), read in the installed transformers."""

from __future__ import annotations

import inspect
import json

import pytest

from cli_capture import run
from llmsizer import estimate_training, fit_training
from llmsizer.errors import DeviceCannotRunError, InputError
from llmsizer.specs.training import attention_off_gpu
from request_error_lines import keyed

torch = pytest.importorskip("torch")

MODEL = "qwen2.5-0.5b"
CPU, APPLE = "intel-xeon-spr-8ch", "apple-m4-max-64gb"
SDPA_BACKENDS = {"flash-attn-2": "FLASH_ATTENTION", "mem-efficient": "EFFICIENT_ATTENTION",
                 "cudnn": "CUDNN_ATTENTION"}


def _torch_runs_on_cpu(kernel: str) -> bool:
    """A forward and backward of SDPA on CPU tensors with ``kernel``'s backend forced (torch.nn.attention)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    q = torch.randn(1, 2, 8, 16, requires_grad=True)
    try:
        with sdpa_kernel(getattr(SDPBackend, SDPA_BACKENDS[kernel])):
            torch.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True).sum().backward()
    except RuntimeError as e:
        assert "No viable backend" in str(e)
        return False
    return True


@pytest.mark.parametrize("kernel", list(SDPA_BACKENDS))
def test_the_cpu_rule_for_forced_sdpa_backends_is_torchs(kernel: str) -> None:
    refused = attention_off_gpu("sdpa", kernel, True, "cpu")
    assert (refused is None) == _torch_runs_on_cpu(kernel), refused


def test_flex_has_no_cpu_backward_in_torch() -> None:
    from torch.nn.attention.flex_attention import flex_attention
    q = torch.randn(1, 2, 8, 16, requires_grad=True)
    with pytest.raises(NotImplementedError):
        flex_attention(q, q, q).sum().backward()
    assert attention_off_gpu("flex", "flex-attention", False, "cpu") is not None


def test_flex_runs_only_on_the_device_types_torch_lists() -> None:
    """torch 2.13.0 ``_validate_device``: any device type outside its set raises ValueError (shown with a 'meta'
    tensor, which no CPU test can avoid: an 'xla' tensor needs torch_xla); a TPU's 'xla' is not in the set, a Gaudi's
    'hpu' is."""
    from torch.nn.attention import flex_attention as fa
    src = inspect.getsource(fa._validate_device)
    listed = src[src.index("supported_devices = {"):].split("}")[0]
    assert '"hpu"' in listed and '"xla"' not in listed
    q = torch.empty(1, 2, 8, 16, device="meta")
    with pytest.raises(ValueError, match="meta device"):
        fa._validate_device(q, q, q)
    assert attention_off_gpu("flex", "flex-attention", False, "xla") is not None
    assert attention_off_gpu("flex", "flex-attention", False, "hpu") is None


def test_flash_attn_is_offered_by_transformers_only_on_cuda_like_torch() -> None:
    from transformers.utils import import_utils
    src = inspect.getsource(import_utils.is_flash_attn_2_available)
    assert "is_torch_cuda_available() or is_torch_mlu_available() or is_torch_musa_available()" in src
    for kernel in ("flash-attn-2", "flash-attn-3", "triton-flash"):
        assert attention_off_gpu("flash", kernel, False, "cpu") is not None
        assert attention_off_gpu("flash", kernel, False, "mps") is not None
        assert attention_off_gpu("flash", kernel, False, None) is None  # a GPU's floors are efficiency.py's


# (CLI flags, Python fields, the field a request file names)
CASES = [(("--attention", "flash"), {"attention": "flash"}, "attention"),
         (("--attention", "flash", "--attention-kernel", "triton-flash"),
          {"attention": "flash", "attention_kernel": "triton-flash"}, "attention_kernel"),
         (("--attention-kernel", "mem-efficient"), {"attention_kernel": "mem-efficient"}, "attention_kernel"),
         (("--attention-kernel", "cudnn"), {"attention_kernel": "cudnn"}, "attention_kernel"),
         # the profile's attention (and loss), not the user's: the line names the profile (review)
         (("--framework", "llm-foundry"), {"framework": "llm-foundry"}, "framework"),
         # flash-attn's Triton cross-entropy and Unsloth's Triton kernels: Triton has NVIDIA and AMD backends only
         (("--loss", "fused-xentropy"), {"loss": "fused-xentropy"}, "loss"),
         (("--kernels", "unsloth", "--method", "lora"), {"kernels": "unsloth"}, "kernels")]


def _one_line(*argv: str) -> str:
    code, out, err = run(*argv)
    lines = err.strip().splitlines()
    assert code == 2 and out == "" and len(lines) == 1 and "Traceback" not in err, (argv, code, err[-400:])
    return lines[0].removeprefix("llmsizer: error: ")


@pytest.mark.parametrize("device", [CPU, APPLE])
@pytest.mark.parametrize(("flags", "fields", "field"), CASES, ids=["flash", "triton", "mem-eff", "cudnn", "foundry", "xentropy",
                                                                       "unsloth"])
def test_every_surface_refuses_it_with_one_line(device: str, flags: tuple, fields: dict, field: str,
                                                tmp_path) -> None:
    with pytest.raises(DeviceCannotRunError) as e:
        estimate_training(MODEL, device=device, **fields)
    message = str(e.value)
    assert e.value.field == field
    assert ("CPU" in message) == (device == CPU) and ("MPS (Apple)" in message) == (device == APPLE)
    with pytest.raises(InputError) as e2:  # (the Xeon row has no memory size: fit is given one)
        fit_training(MODEL, device, tokens=1e9, memory=64 * 2**30, **fields)
    assert str(e2.value) == message
    mem = ("--memory", "64GiB")
    for argv in (("train", MODEL, "--device", device, *flags), ("fit", MODEL, "--train", "--device", device, *mem,
                                                                  *flags),
                 ("train", MODEL, "--device", device, *flags, "--tokens", "1B")):
        # the CLI names the flag where the message starts with the field (as for a GPU's floors)
        assert _one_line(*argv) == message.replace(f"{field} ", f"--{field.replace('_', '-')} ", 1), argv
    settings = "".join(f"\n      {k}: {v}" for k, v in fields.items())
    req = tmp_path / "req.yaml"
    req.write_text(f"version: 1\njobs:\n  - name: tune\n    kind: training\n    model: {{name: {MODEL}}}\n"
                   f"    method: lora\n    settings:{settings}\n    dataset: {{tokens: 1M}}\n"
                   f"    resources: {{device: {device}, count: 1, memory: 64GiB}}\n")
    where = f"settings.{field}" if field in fields else "job 'tune' (training)"  # a profile's is in no key
    for cmd in (("request", "check", str(req)), ("plan", str(req), "--json")):
        line = _one_line(*cmd)
        assert line.endswith(keyed(where, field, message)), (cmd, line)  # the key path once


@pytest.mark.parametrize("device", [CPU, APPLE])
def test_what_torch_runs_there_is_still_sized(device: str) -> None:
    """The rule refuses what cannot run, not the device: SDPA's own dispatch and its flash backend forced (torch's CPU
    flash kernel, measured above) answer."""
    for flags in ((), ("--attention-kernel", "flash-attn-2"), ("--attention", "eager")):
        memory = ("--memory", "64GiB") if device == CPU else ()  # the catalog CPU has no RAM size (fit's rule)
        code, _, err = run("train", MODEL, "--device", device, *memory, *flags)
        assert code in (0, 1), (flags, err[-300:])


def test_recommend_rejects_cpus_and_apple_chips_with_the_line() -> None:
    code, out, _ = run("recommend", MODEL, "--train", "--attention", "flash", "--tokens", "1M", "--json", "--top", "400")
    assert code == 0
    data = json.loads(out)
    for device in (APPLE,):  # (the Xeon row has no memory size: recommend's training search leaves it out)
        with pytest.raises(InputError) as e:
            estimate_training(MODEL, device=device, attention="flash")
        rejected = [o for o in data["rejected"] if o["device"] == device]
        assert rejected and all(o["reasons"] == [str(e.value)] for o in rejected), device
        assert all(o["device"] != device for o in data["options"])


@pytest.mark.parametrize(("device", "on"), [("tpu-v5e", "a TPU (XLA)"), ("gaudi2", "an Intel Gaudi (HPU)")])
def test_flash_is_refused_on_a_tpu_and_a_gaudi(device: str, on: str) -> None:
    """flash-attn and Triton have CUDA and ROCm builds only (transformers offers flash_attention_2 only on a CUDA-like
    torch, above): `recommend --train --attention flash` listed a TPU v5e as an option before."""
    with pytest.raises(DeviceCannotRunError) as e:
        estimate_training(MODEL, device=device, attention="flash")
    assert f"not on {on}" in str(e.value)
    assert _one_line("train", MODEL, "--device", device, "--attention", "flash") == "--" + str(e.value)
    assert run("train", MODEL, "--device", device)[0] in (0, 1)  # SDPA's dispatch still answers there


def test_recommend_offers_no_tpu_for_flash() -> None:
    code, out, _ = run("recommend", MODEL, "--train", "--attention", "flash", "--tokens", "1M", "--json", "--top", "400")
    assert code == 0
    assert not [o for o in json.loads(out)["options"] if o["device"].startswith(("tpu-", "gaudi"))]
