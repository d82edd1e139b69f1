"""Which code the estimate assumes runs a model's Mamba layers (estimate/training/setup.py, the ``mamba_path``
assumption; formulas/mamba_activations.py): mamba_ssm's kernels on a CUDA GPU, transformers' torch reference
functions elsewhere; ``mamba_path`` overrides, and is refused where it cannot apply."""

from __future__ import annotations

import pytest

from cli.cli_run import run
from llmsizer.errors import InputError
from llmsizer.estimate.training import estimate_training
from llmsizer.readers.hf_config import spec_from_config
from oracle_utils import MAMBA_LAYER_CASES

NEMOTRON = spec_from_config(MAMBA_LAYER_CASES["nemotron_h"][0], name="tiny-nemotron-h")
LLAMA = spec_from_config({"model_type": "llama", "vocab_size": 128, "hidden_size": 64, "intermediate_size": 96,
                          "num_hidden_layers": 2, "num_attention_heads": 4}, name="tiny-llama")


def _path(**fields: object) -> tuple[str, bool, int]:
    est = estimate_training(NEMOTRON, micro_batch=2, seq_len=512, **fields)  # type: ignore[arg-type]
    a = next(a for a in est.assumptions if a.name == "mamba_path")
    return str(a.value), a.default, est.total()[1]


def test_the_device_picks_the_path_and_the_torch_path_keeps_more() -> None:
    gpu, default_gpu, gpu_bytes = _path()
    cpu, default_cpu, _ = _path(device="cpu")
    metal, _, _ = _path(gpu_runtime="metal")
    rocm, default_rocm, _ = _path(gpu_runtime="rocm")
    assert (gpu, default_gpu, cpu, default_cpu, metal, rocm, default_rocm) == (
        "cuda-kernels", True, "torch", True, "torch", "torch", True)
    torch_path, given, torch_bytes = _path(mamba_path="torch")
    assert (torch_path, given) == ("torch", False)
    assert torch_bytes > gpu_bytes  # the torch path's fp32 chunk intermediates (eq. M1) against eq. M2


def test_rocm_takes_the_kernels_when_asked() -> None:
    """Both packages build on ROCm (mamba_ssm and causal-conv1d setup.py: ``HIP_BUILD = bool(torch.version.hip)``;
    READMEs' 'Patching ROCm'), so the flag is accepted there; the default stays torch (a source build), and says so."""
    path, default, kernel_bytes = _path(gpu_runtime="rocm", mamba_path="cuda-kernels")
    assert (path, default) == ("cuda-kernels", False)
    assert kernel_bytes < _path(gpu_runtime="rocm")[2]
    est = estimate_training(NEMOTRON, micro_batch=2, seq_len=512, gpu_runtime="rocm")
    why = next(a for a in est.assumptions if a.name == "mamba_path")
    assert "ROCm" in str(why) and "hipcc" in str(why), why


def test_a_model_without_mamba_layers_records_no_path() -> None:
    assert all(a.name != "mamba_path" for a in estimate_training(LLAMA).assumptions)


@pytest.mark.parametrize(("spec", "fields", "words"), [
    (NEMOTRON, dict(mamba_path="triton"), ["mamba_path", "cuda-kernels, torch"]),
    (NEMOTRON, dict(mamba_path="cuda-kernels", device="cpu"), ["mamba_path", "CUDA or ROCm GPU", "cpu"]),
    (NEMOTRON, dict(mamba_path="cuda-kernels", gpu_runtime="metal"), ["mamba_path", "CUDA or ROCm GPU", "metal"]),
    (LLAMA, dict(mamba_path="torch"), ["mamba_path", "no", "drop it"]),
])
def test_bad_mamba_path_is_one_line(spec: object, fields: dict[str, object], words: list[str]) -> None:
    with pytest.raises(InputError) as e:
        estimate_training(spec, **fields)  # type: ignore[arg-type]
    text = str(e.value)
    assert "\n" not in text and all(w in text for w in words), text


def test_cli_flag(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["train", "mamba-codestral-7b-v0.1", "--mamba-path", "torch", "--json"], capsys)
    assert code in (0, 1), err
    assert '"mamba_path"' in out
    code, _, err = run(["train", "mamba-codestral-7b-v0.1", "--device", "cpu", "--mamba-path", "cuda-kernels"],
                       capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "--mamba-path" in err  # the flag, as typed


@pytest.mark.parametrize("device, path", [("h100-sxm", "cuda-kernels"), ("cpu", "torch")])
def test_inference_and_training_read_one_default_path(device: str, path: str) -> None:
    """review24 D2: inference sized transformers' torch reference scan (eq. M4) on every device while training took
    the CUDA kernels on a CUDA GPU: one fact, two defaults (mamba-codestral at 8k on an H100: 0.67 -> 6.81 GiB).
    Both now read specs/training.py default_mamba_path; the torch path's peak (eq. M4) only where it runs."""
    from llmsizer import estimate_inference, estimate_training
    tr = estimate_training("mamba-codestral-7b-v0.1", method="full", micro_batch=1, seq_len=1024, device=device,
                           **({"memory": 64 * 2**30} if device == "cpu" else {}))
    assert next(a.value for a in tr.assumptions if a.name == "mamba_path") == path
    inf = estimate_inference("mamba-codestral-7b-v0.1", engine="transformers", context=8192, device=device)
    scan = [a.value for a in inf.assumptions if a.name == "recurrent_scan_path"]
    assert scan == ([] if path == "cuda-kernels" else ["torch"])
